//! `/metrics` of the controller (prefix `peering_user_controller_`): its
//! build (`build_info`), the reconcile metrics every controller keeps
//! (passes and their duration, failures by kind as `errors_total`,
//! leadership), how many peering users are usable, the
//! kubeconfigs attached to contracts, the users removed, how many wait
//! for room, whether the catalog answers and whether contracts come on its
//! change stream (or from fallback polls), and the isolation's policies
//! (buyers' own applied and refused among them).

use controller_core::metrics::{MetricSet, ReconcileMetrics};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The handles of the controller's own metrics.
pub struct Handles {
    pub users: Gauge,
    pub attached: Counter,
    pub removed: Counter,
    pub catalog_reachable: Gauge,
    pub contracts_streamed: Gauge,
    pub waiting: Gauge,
    pub isolation_policies: Gauge,
    pub isolation_consumers: Gauge,
    pub isolation_buyer_applied: Gauge,
    pub isolation_buyer_refused: Gauge,
}

impl MetricSet for Handles {
    const PREFIX: &'static str = "peering_user_controller";
    const FAILURE_KINDS: &'static [&'static str] =
        &["kubernetes", "catalog", "csr", "identity", "isolation"];
    const BUCKETS: &'static [f64] = &[0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

    fn register(registry: &mut Registry, reconcile: &ReconcileMetrics) -> Self {
        reconcile.register_leader(registry, "leader", "1 while this replica leads");
        reconcile.register_duration(
            registry,
            "pass_duration_seconds",
            "Duration of one pass over the provider's contracts and peering users",
        );
        reconcile.register_errors(
            registry,
            "Failed steps, by kind (kubernetes, catalog, csr, identity)",
        );
        let users = Gauge::default();
        registry.register(
            "users",
            "Peering users with a certificate, one per consumer cluster with an active contract",
            users.clone(),
        );
        let attached = Counter::default();
        registry.register(
            "attached",
            "Kubeconfigs attached to contracts in the catalog",
            attached.clone(),
        );
        let removed = Counter::default();
        registry.register(
            "removed",
            "Peering users removed after their consumer's last contract ended",
            removed.clone(),
        );
        let catalog_reachable = Gauge::default();
        registry.register(
            "catalog_reachable",
            "1 when the last read of the contracts (change stream or fallback poll) succeeded",
            catalog_reachable.clone(),
        );
        let contracts_streamed = Gauge::default();
        registry.register(
            "contracts_streamed",
            "1 while contracts arrive on the catalog's change stream, 0 while they are polled (fallback) or not read yet",
            contracts_streamed.clone(),
        );
        let waiting = Gauge::default();
        registry.register(
            "waiting",
            "Consumer clusters with an active contract whose peering user waits for room (--max-consumers, --max-new-per-pass)",
            waiting.clone(),
        );
        let isolation_policies = Gauge::default();
        registry.register(
            "isolation_policies",
            "Tenant isolation NetworkPolicies in place after the last pass (one per consumer namespace and per protected namespace)",
            isolation_policies.clone(),
        );
        let isolation_consumers = Gauge::default();
        registry.register(
            "isolation_consumers",
            "Consumer clusters with offloaded namespaces here, as the last isolation pass found them",
            isolation_consumers.clone(),
        );
        let isolation_buyer_applied = Gauge::default();
        registry.register(
            "isolation_buyer_applied",
            "Buyers' own network policies applied by the last isolation pass",
            isolation_buyer_applied.clone(),
        );
        let isolation_buyer_refused = Gauge::default();
        registry.register(
            "isolation_buyer_refused",
            "Buyers' own network policies refused by the last isolation pass (reasons in the contracts' reports)",
            isolation_buyer_refused.clone(),
        );
        Handles {
            waiting,
            isolation_buyer_applied,
            isolation_buyer_refused,
            isolation_policies,
            isolation_consumers,
            users,
            attached,
            removed,
            catalog_reachable,
            contracts_streamed,
        }
    }
}

controller_core::controller_metrics!(
    /// The controller's metrics; cheap to clone.
    pub struct Metrics(Handles);
);

/// `/healthz` always; `/readyz` once the Kubernetes API answered (as
/// leader or standby); `/metrics` as above.
impl edge::probe::Probes for Metrics {
    fn readiness(&self) -> (edge::probe::StatusCode, String) {
        self.reconcile().readiness()
    }

    fn render(&self) -> String {
        Metrics::render(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_exposed_under_the_prefix() {
        let metrics = Metrics::new();
        metrics.users.set(2);
        metrics.attached.inc();
        metrics.reconcile().count_failure("csr");
        let text = metrics.render();
        assert!(
            text.starts_with("# HELP peering_user_controller_build_info "),
            "{text}"
        );
        for line in [
            "peering_user_controller_leader 0",
            "peering_user_controller_pass_duration_seconds_count 0",
            "peering_user_controller_errors_total{kind=\"csr\"} 1",
            "peering_user_controller_users 2",
            "peering_user_controller_attached_total 1",
            "peering_user_controller_removed_total 0",
            "peering_user_controller_catalog_reachable 0",
            "peering_user_controller_contracts_streamed 0",
            "peering_user_controller_waiting 0",
            "peering_user_controller_isolation_policies 0",
            "peering_user_controller_isolation_consumers 0",
            "peering_user_controller_isolation_buyer_applied 0",
            "peering_user_controller_isolation_buyer_refused 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
        let (status, body) = edge::probe::Probes::readiness(&metrics);
        assert_eq!(
            status,
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "{body}"
        );
        metrics.reconcile().set_reached_api();
        metrics.reconcile().set_leading(true);
        let (status, body) = edge::probe::Probes::readiness(&metrics);
        assert_eq!(
            (status, body.as_str()),
            (axum::http::StatusCode::OK, "ok: leader\n")
        );
    }
}
