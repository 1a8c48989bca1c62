//! The controller's Prometheus metrics and health state, rendered on
//! `/metrics` by the HTTP port:
//!
//! | metric | what |
//! |---|---|
//! | `purchase_controller_build_info{version,revision,rustc}` | 1: the build this replica runs |
//! | `purchase_controller_purchases{phase}` | Purchases by phase (`Pending`, `Peering`, `Granting`, `Ready`, `Failed`, `Ended`, …) |
//! | `purchase_controller_reconcile_duration_seconds` | one Purchase's reconcile, catalog calls included |
//! | `purchase_controller_errors_total{kind}` | failures: `catalog` (unreachable, refused a state report), `kubernetes` |
//! | `purchase_controller_leader` | 1 while this replica leads (always, with `--leader-elect=false`) |

use std::collections::HashMap;
use std::sync::Mutex;

use controller_core::lease::ElectionObserver;
use controller_core::metrics::{MetricSet, ReconcileMetrics};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Reconcile latency buckets, seconds (catalog round trips included).
const BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

controller_core::controller_metrics!(
    /// Shared handles to every metric and the health state; cheap to clone.
    pub struct Metrics(Handles);
);

/// Every metric and the phases behind the gauges, registered by
/// [`MetricSet::register`] (reached through [`Metrics`]).
pub struct Handles {
    purchases: Family<PhaseLabels, Gauge>,
    phases: Mutex<HashMap<String, String>>,
}

impl MetricSet for Handles {
    const BUCKETS: &'static [f64] = &BUCKETS;
    const PREFIX: &'static str = "purchase_controller";
    const FAILURE_KINDS: &'static [&'static str] = &["catalog", "kubernetes"];

    fn register(registry: &mut Registry, reconcile: &ReconcileMetrics) -> Self {
        let purchases = Family::<PhaseLabels, Gauge>::default();
        registry.register("purchases", "Purchases by phase", purchases.clone());
        reconcile.register_duration(
            registry,
            "reconcile_duration_seconds",
            "Time to reconcile one Purchase, catalog calls included",
        );
        reconcile.register_errors(registry, "Failures: catalog calls, Kubernetes API calls");
        reconcile.register_leader(registry, "leader", "1 while this replica leads");
        Handles {
            purchases,
            phases: Mutex::new(HashMap::new()),
        }
    }
}

/// Leadership is the `leader` gauge; the phase gauges are cleared when this
/// replica stops leading (the new leader reports them then).
impl ElectionObserver for Metrics {
    fn reached_api(&self) {
        self.reconcile().set_reached_api();
    }

    fn leading(&self, leading: bool) {
        self.reconcile().set_leading(leading);
        if !leading {
            let mut phases = self.phases.lock().unwrap_or_else(|e| e.into_inner());
            for (_, old) in phases.drain() {
                self.purchases
                    .get_or_create(&PhaseLabels { phase: old })
                    .dec();
            }
        }
    }
}

impl Metrics {
    /// Record the phase of one Purchase (moving it between gauges).
    pub fn set_phase(&self, purchase: &str, phase: &str) {
        let mut phases = self.phases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = phases.insert(purchase.to_string(), phase.to_string()) {
            self.purchases
                .get_or_create(&PhaseLabels { phase: old })
                .dec();
        }
        self.purchases
            .get_or_create(&PhaseLabels {
                phase: phase.to_string(),
            })
            .inc();
    }

    /// A Purchase is gone.
    pub fn forget(&self, purchase: &str) {
        let mut phases = self.phases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = phases.remove(purchase) {
            self.purchases
                .get_or_create(&PhaseLabels { phase: old })
                .dec();
        }
    }

    pub fn count_error(&self, kind: &'static str) {
        self.reconcile().count_failure(kind);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The `/metrics` exposition as it was before the reconcile metrics
    /// moved to `controller_core::metrics`: names, help texts and label
    /// sets are what dashboards and alerts match on. Since issue 46 it
    /// starts with the build information (prepended by the test) and
    /// every failure kind shows at 0 before it happens.
    const EXPOSITION: &str = r#"# HELP purchase_controller_purchases Purchases by phase.
# TYPE purchase_controller_purchases gauge
purchase_controller_purchases{phase="Ready"} 1
purchase_controller_purchases{phase="Peering"} 0
# HELP purchase_controller_reconcile_duration_seconds Time to reconcile one Purchase, catalog calls included.
# TYPE purchase_controller_reconcile_duration_seconds histogram
purchase_controller_reconcile_duration_seconds_sum 0.2
purchase_controller_reconcile_duration_seconds_count 1
purchase_controller_reconcile_duration_seconds_bucket{le="0.001"} 0
purchase_controller_reconcile_duration_seconds_bucket{le="0.005"} 0
purchase_controller_reconcile_duration_seconds_bucket{le="0.01"} 0
purchase_controller_reconcile_duration_seconds_bucket{le="0.025"} 0
purchase_controller_reconcile_duration_seconds_bucket{le="0.05"} 0
purchase_controller_reconcile_duration_seconds_bucket{le="0.1"} 0
purchase_controller_reconcile_duration_seconds_bucket{le="0.25"} 1
purchase_controller_reconcile_duration_seconds_bucket{le="0.5"} 1
purchase_controller_reconcile_duration_seconds_bucket{le="1.0"} 1
purchase_controller_reconcile_duration_seconds_bucket{le="2.5"} 1
purchase_controller_reconcile_duration_seconds_bucket{le="5.0"} 1
purchase_controller_reconcile_duration_seconds_bucket{le="10.0"} 1
purchase_controller_reconcile_duration_seconds_bucket{le="+Inf"} 1
# HELP purchase_controller_errors Failures: catalog calls, Kubernetes API calls.
# TYPE purchase_controller_errors counter
purchase_controller_errors_total{kind="catalog"} 1
purchase_controller_errors_total{kind="kubernetes"} 0
# HELP purchase_controller_leader 1 while this replica leads.
# TYPE purchase_controller_leader gauge
purchase_controller_leader 0
# EOF
"#;

    #[test]
    fn the_exposition_is_unchanged() {
        let metrics = Metrics::new();
        metrics.set_phase("ns/a", "Peering");
        metrics.set_phase("ns/a", "Ready");
        metrics.observe_reconcile(Duration::from_millis(200));
        metrics.count_error("catalog");
        controller_core::metrics::assert_same_exposition(
            &metrics.render(),
            &(controller_core::metrics::build_info_exposition("purchase-controller") + EXPOSITION),
        );
    }

    #[test]
    fn a_purchase_counts_in_one_phase_at_a_time() {
        let m = Metrics::new();
        m.set_phase("ns/a", "Peering");
        m.set_phase("ns/a", "Ready");
        m.set_phase("ns/b", "Ready");
        let text = m.render();
        assert!(
            text.contains("purchase_controller_purchases{phase=\"Ready\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("purchase_controller_purchases{phase=\"Peering\"} 0"),
            "{text}"
        );
        m.forget("ns/a");
        assert!(m
            .render()
            .contains("purchase_controller_purchases{phase=\"Ready\"} 1"));
    }
}
