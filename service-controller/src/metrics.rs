//! `/metrics` of the controller (prefix `service_controller_`) and its
//! probes: the reconcile metrics every controller keeps (ServiceCatalog
//! reconciles and their duration, failures by kind, leadership), the
//! service instances it holds, the catalog reports it sent, and whether
//! the catalog answers and whether contracts come on its change stream.
//!
//! | metric | what |
//! |---|---|
//! | `service_controller_reconcile_duration_seconds` | one ServiceCatalog reconcile or one pass over the contracts |
//! | `service_controller_build_info{version,revision,rustc}` | 1: the build this replica runs |
//! | `service_controller_errors_total{kind}` | failures: `catalog`, `kubernetes`, `template` |
//! | `service_controller_leader` | 1 while this replica leads |
//! | `service_controller_instances` | service instances (instance namespaces) on this cluster |
//! | `service_controller_reports_total` | reports sent to the catalog (service and binding states) |
//! | `service_controller_catalog_reachable` | 1 when the last read of the contracts (change stream or fallback poll) succeeded |
//! | `service_controller_contracts_streamed` | 1 while contracts arrive on the catalog's change stream, 0 while polled (fallback) or not read yet |

use controller_core::metrics::{MetricSet, ReconcileMetrics};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The handles of the controller's own metrics.
pub struct Handles {
    pub instances: Gauge,
    pub reports: Counter,
    pub catalog_reachable: Gauge,
    pub contracts_streamed: Gauge,
}

impl MetricSet for Handles {
    const PREFIX: &'static str = "service_controller";
    const FAILURE_KINDS: &'static [&'static str] = &["catalog", "kubernetes", "template"];
    const BUCKETS: &'static [f64] = &[0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

    fn register(registry: &mut Registry, reconcile: &ReconcileMetrics) -> Self {
        reconcile.register_duration(
            registry,
            "reconcile_duration_seconds",
            "Duration of one ServiceCatalog reconcile or one pass over the service contracts",
        );
        reconcile.register_errors(
            registry,
            "Failed steps, by kind (catalog, kubernetes, template)",
        );
        reconcile.register_leader(registry, "leader", "1 while this replica leads");
        let instances = Gauge::default();
        registry.register(
            "instances",
            "Service instances (instance namespaces) on this cluster",
            instances.clone(),
        );
        let reports = Counter::default();
        registry.register(
            "reports",
            "Service and binding states reported to the catalog",
            reports.clone(),
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
        Handles {
            instances,
            reports,
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
    fn the_metrics_are_exposed_under_the_controller_prefix() {
        let m = Metrics::new();
        m.instances.set(2);
        m.reconcile().count_failure("template");
        let text = m.render();
        assert!(text.contains("service_controller_instances 2"), "{text}");
        assert!(
            text.contains("service_controller_errors_total{kind=\"template\"} 1"),
            "{text}"
        );
    }
}
