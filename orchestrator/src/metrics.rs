//! The orchestrator's Prometheus metrics and health state, rendered on
//! `/metrics` (served by the `http` module):
//!
//! | metric | what |
//! |---|---|
//! | `orchestrator_build_info{version,revision,rustc}` | 1: the build this replica runs |
//! | `orchestrator_writes_total{rule}` | NamespaceOffloadings written, by the rule of the decision (`cheapest`, `replaced`, `cheaper`, `kept`, `none-qualifies`) |
//! | `orchestrator_moves_total` | writes that changed a namespace's providers |
//! | `orchestrator_unplaced_namespaces` | offloaded namespaces no provider qualifies for |
//! | `orchestrator_namespaces` | offloaded namespaces seen |
//! | `orchestrator_reconcile_duration_seconds` | one namespace: decision and write |
//! | `orchestrator_errors_total{kind}` | `kubernetes` (a failed read or write), `conflict` (a 409, re-read and retried), `demand` (a quantity that does not parse) |
//! | `orchestrator_catalog_connected` | 1 while the catalog's feed is connected |
//! | `orchestrator_catalog_events_total` | feed messages applied |
//! | `orchestrator_leader` | 1 while this replica leads (and writes) |

use std::collections::BTreeSet;
use std::sync::Mutex;

use controller_core::metrics::{MetricSet, ReconcileMetrics};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RuleLabels {
    rule: &'static str,
}

controller_core::controller_metrics!(
    /// Shared handle to the metrics.
    pub struct Metrics(Handles);
);

/// Every metric and the unplaced namespaces behind the gauge, registered
/// by [`MetricSet::register`] (reached through [`Metrics`]).
pub struct Handles {
    writes: Family<RuleLabels, Counter>,
    moves: Counter,
    unplaced: Gauge,
    namespaces: Gauge,
    catalog_connected: Gauge,
    catalog_events: Counter,
    unplaced_set: Mutex<BTreeSet<String>>,
}

impl MetricSet for Handles {
    const BUCKETS: &'static [f64] = &BUCKETS;
    const PREFIX: &'static str = "orchestrator";
    const FAILURE_KINDS: &'static [&'static str] = &["kubernetes", "conflict", "demand"];

    fn register(registry: &mut Registry, reconcile: &ReconcileMetrics) -> Self {
        let writes = Family::<RuleLabels, Counter>::default();
        let moves = Counter::default();
        let unplaced = Gauge::default();
        let namespaces = Gauge::default();
        let catalog_connected = Gauge::default();
        let catalog_events = Counter::default();
        reconcile.register_leader(registry, "leader", "1 while this replica leads");
        registry.register(
            "writes",
            "NamespaceOffloadings written, by rule",
            writes.clone(),
        );
        registry.register(
            "moves",
            "Writes that changed a namespace's providers",
            moves.clone(),
        );
        registry.register(
            "unplaced_namespaces",
            "Offloaded namespaces no provider qualifies for",
            unplaced.clone(),
        );
        registry.register(
            "namespaces",
            "Offloaded namespaces seen",
            namespaces.clone(),
        );
        reconcile.register_duration(
            registry,
            "reconcile_duration_seconds",
            "One namespace: decision and write",
        );
        reconcile.register_errors(registry, "Failed reads and writes, by kind");
        registry.register(
            "catalog_connected",
            "1 while the catalog's feed is connected",
            catalog_connected.clone(),
        );
        registry.register(
            "catalog_events",
            "Feed messages applied",
            catalog_events.clone(),
        );
        Handles {
            writes,
            moves,
            unplaced,
            namespaces,
            catalog_connected,
            catalog_events,
            unplaced_set: Mutex::new(BTreeSet::new()),
        }
    }
}

impl Metrics {
    pub fn count_write(&self, rule: &'static str, moved: bool) {
        self.writes.get_or_create(&RuleLabels { rule }).inc();
        if moved {
            self.moves.inc();
        }
    }

    pub fn count_error(&self, kind: &'static str) {
        self.reconcile().count_failure(kind);
    }

    pub fn set_unplaced(&self, namespace: &str, unplaced: bool) {
        let mut set = self.unplaced_set.lock().unwrap_or_else(|e| e.into_inner());
        if unplaced {
            set.insert(namespace.to_string());
        } else {
            set.remove(namespace);
        }
        self.unplaced
            .set(i64::try_from(set.len()).unwrap_or(i64::MAX));
    }

    pub fn set_namespaces(&self, n: usize) {
        self.namespaces.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn set_catalog_connected(&self, up: bool) {
        self.catalog_connected.set(i64::from(up));
    }

    pub fn count_feed_event(&self) {
        self.catalog_events.inc();
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
    const EXPOSITION: &str = r#"# HELP orchestrator_leader 1 while this replica leads.
# TYPE orchestrator_leader gauge
orchestrator_leader 1
# HELP orchestrator_writes NamespaceOffloadings written, by rule.
# TYPE orchestrator_writes counter
orchestrator_writes_total{rule="cheapest"} 1
orchestrator_writes_total{rule="cheaper"} 1
# HELP orchestrator_moves Writes that changed a namespace's providers.
# TYPE orchestrator_moves counter
orchestrator_moves_total 1
# HELP orchestrator_unplaced_namespaces Offloaded namespaces no provider qualifies for.
# TYPE orchestrator_unplaced_namespaces gauge
orchestrator_unplaced_namespaces 1
# HELP orchestrator_namespaces Offloaded namespaces seen.
# TYPE orchestrator_namespaces gauge
orchestrator_namespaces 3
# HELP orchestrator_reconcile_duration_seconds One namespace: decision and write.
# TYPE orchestrator_reconcile_duration_seconds histogram
orchestrator_reconcile_duration_seconds_sum 0.02
orchestrator_reconcile_duration_seconds_count 1
orchestrator_reconcile_duration_seconds_bucket{le="0.0005"} 0
orchestrator_reconcile_duration_seconds_bucket{le="0.001"} 0
orchestrator_reconcile_duration_seconds_bucket{le="0.0025"} 0
orchestrator_reconcile_duration_seconds_bucket{le="0.005"} 0
orchestrator_reconcile_duration_seconds_bucket{le="0.01"} 0
orchestrator_reconcile_duration_seconds_bucket{le="0.025"} 1
orchestrator_reconcile_duration_seconds_bucket{le="0.05"} 1
orchestrator_reconcile_duration_seconds_bucket{le="0.1"} 1
orchestrator_reconcile_duration_seconds_bucket{le="0.25"} 1
orchestrator_reconcile_duration_seconds_bucket{le="0.5"} 1
orchestrator_reconcile_duration_seconds_bucket{le="1.0"} 1
orchestrator_reconcile_duration_seconds_bucket{le="2.5"} 1
orchestrator_reconcile_duration_seconds_bucket{le="+Inf"} 1
# HELP orchestrator_errors Failed reads and writes, by kind.
# TYPE orchestrator_errors counter
orchestrator_errors_total{kind="conflict"} 1
orchestrator_errors_total{kind="kubernetes"} 0
orchestrator_errors_total{kind="demand"} 0
# HELP orchestrator_catalog_connected 1 while the catalog's feed is connected.
# TYPE orchestrator_catalog_connected gauge
orchestrator_catalog_connected 1
# HELP orchestrator_catalog_events Feed messages applied.
# TYPE orchestrator_catalog_events counter
orchestrator_catalog_events_total 2
# EOF
"#;

    #[test]
    fn the_exposition_is_unchanged() {
        let metrics = Metrics::new();
        metrics.count_write("cheapest", false);
        metrics.count_write("cheaper", true);
        metrics.set_unplaced("a", true);
        metrics.set_namespaces(3);
        metrics.observe_reconcile(Duration::from_millis(20));
        metrics.count_error("conflict");
        metrics.set_catalog_connected(true);
        metrics.count_feed_event();
        metrics.count_feed_event();
        metrics.reconcile().set_leading(true);
        controller_core::metrics::assert_same_exposition(
            &metrics.render(),
            &(controller_core::metrics::build_info_exposition("orchestrator") + EXPOSITION),
        );
    }
}
