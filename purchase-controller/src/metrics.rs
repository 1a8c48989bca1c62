//! The controller's Prometheus metrics and health state, rendered on
//! `/metrics` by the HTTP port:
//!
//! | metric | what |
//! |---|---|
//! | `purchase_controller_purchases{phase}` | Purchases by phase (`Pending`, `Peering`, `Granting`, `Ready`, `Failed`, `Ended`, …) |
//! | `purchase_controller_reconcile_duration_seconds` | one Purchase's reconcile, catalog calls included |
//! | `purchase_controller_errors_total{kind}` | failures: `catalog` (unreachable, refused a state report), `kubernetes` |

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use controller_core::metrics::ReconcileMetrics;
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

struct Inner {
    registry: Registry,
    purchases: Family<PhaseLabels, Gauge>,
    reconcile: ReconcileMetrics,
    phases: Mutex<HashMap<String, String>>,
}

/// Shared handles to every metric and the health state; cheap to clone.
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("purchase_controller");
        let purchases = Family::<PhaseLabels, Gauge>::default();
        registry.register("purchases", "Purchases by phase", purchases.clone());
        // No Lease election here, so no `leader` gauge.
        let reconcile = ReconcileMetrics::new(BUCKETS, "kind");
        reconcile.register_duration(
            &mut registry,
            "reconcile_duration_seconds",
            "Time to reconcile one Purchase, catalog calls included",
        );
        reconcile.register_failures(
            &mut registry,
            "errors",
            "Failures: catalog calls, Kubernetes API calls",
        );
        Self(Arc::new(Inner {
            registry,
            purchases,
            reconcile,
            phases: Mutex::new(HashMap::new()),
        }))
    }

    /// Record the phase of one Purchase (moving it between gauges).
    pub fn set_phase(&self, purchase: &str, phase: &str) {
        let mut phases = self.0.phases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = phases.insert(purchase.to_string(), phase.to_string()) {
            self.0
                .purchases
                .get_or_create(&PhaseLabels { phase: old })
                .dec();
        }
        self.0
            .purchases
            .get_or_create(&PhaseLabels {
                phase: phase.to_string(),
            })
            .inc();
    }

    /// A Purchase is gone.
    pub fn forget(&self, purchase: &str) {
        let mut phases = self.0.phases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = phases.remove(purchase) {
            self.0
                .purchases
                .get_or_create(&PhaseLabels { phase: old })
                .dec();
        }
    }

    pub fn count_error(&self, kind: &'static str) {
        self.0.reconcile.count_failure(kind);
    }

    pub fn observe_reconcile(&self, took: Duration) {
        self.0.reconcile.observe_reconcile(took);
    }

    /// The reconcile metrics and the leader/readiness state every controller
    /// shares (controller-core's `ReconcileMetrics`).
    pub fn reconcile(&self) -> &ReconcileMetrics {
        &self.0.reconcile
    }

    /// OpenMetrics text.
    pub fn render(&self) -> String {
        edge::probe::openmetrics(&self.0.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `/metrics` exposition as it was before the reconcile metrics
    /// moved to `controller_core::metrics`: names, help texts and label
    /// sets are what dashboards and alerts match on.
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
# EOF
"#;

    #[test]
    fn the_exposition_is_unchanged() {
        let metrics = Metrics::new();
        metrics.set_phase("ns/a", "Peering");
        metrics.set_phase("ns/a", "Ready");
        metrics.observe_reconcile(Duration::from_millis(200));
        metrics.count_error("catalog");
        let text = metrics.render();
        assert_eq!(
            controller_core::metrics::comparable_exposition(&text),
            controller_core::metrics::comparable_exposition(EXPOSITION),
            "{text}"
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
