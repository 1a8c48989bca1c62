//! The controller's Prometheus metrics and health state, rendered by
//! [`Metrics::render`] on `/metrics` (served by the `http` module):
//!
//! | metric | what |
//! |---|---|
//! | `resource_monitor_build_info{version,revision,rustc}` | 1: the build of the resource-monitor this controller runs in |
//! | `slice_controller_slices{decision}` | slices of the class now `accepted`, `denied`, or `waiting` (not yet authenticated) |
//! | `slice_controller_decisions_total{reason}` | verdicts written, by reason (`ResourcesGranted`, `InsufficientResources`, …) |
//! | `slice_controller_reconcile_duration_seconds` | one consumer's reconcile: chain read, decision, status writes |
//! | `slice_controller_errors_total{kind}` | failed reconciles and writes: `chain`, `kubernetes`, `conflict` (a 409 that was retried) |
//! | `slice_controller_leader` | 1 while this replica leads |
//! | `slice_controller_catalog_reachable` | under `contracts`: 1 while the catalog answers (change stream or fallback poll), 0 while decisions use the last known contracts |
//! | `slice_controller_contracts` | under `contracts`: active contracts known |
//! | `slice_controller_contracts_streamed` | under `contracts`: 1 while contracts arrive on the catalog's change stream, 0 while they are polled (fallback) or not read yet |
//! | `slice_controller_liqo_enforcement{level}` | 1 for the level of Liqo's enforcement read on this provider (`off`, `none`, `soft`, `hard`, `unknown`), 0 for the others (the provider self-check) |

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

use controller_core::lease::ElectionObserver;
use controller_core::metrics::{MetricSet, ReconcileMetrics};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Reconcile latency buckets, seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DecisionLabels {
    decision: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LevelLabels {
    level: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// What kind of failure to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The chain could not answer.
    Chain,
    /// The Kubernetes API failed a read or write.
    Kubernetes,
    /// A status write met `409 Conflict` (and was retried).
    Conflict,
}

impl ErrorKind {
    fn label(self) -> &'static str {
        match self {
            ErrorKind::Chain => "chain",
            ErrorKind::Kubernetes => "kubernetes",
            ErrorKind::Conflict => "conflict",
        }
    }
}

/// Each consumer's slice counts and their sum.
#[derive(Debug, Default)]
struct PerConsumer {
    counts: HashMap<String, SliceCounts>,
    total: SliceCounts,
}

/// Counts of one consumer's slices, by decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SliceCounts {
    pub accepted: i64,
    pub denied: i64,
    pub waiting: i64,
}

controller_core::controller_metrics!(
    /// Shared handles to every metric and the health state; cheap to clone.
    pub struct Metrics(Handles);
);

/// Every metric and the health state, registered by [`MetricSet::register`]
/// (reached through [`Metrics`]).
pub struct Handles {
    slices: Family<DecisionLabels, Gauge>,
    decisions: Family<ReasonLabels, Counter>,
    per_consumer: Mutex<PerConsumer>,
    catalog_reachable: Gauge,
    contracts: Gauge,
    contracts_streamed: Gauge,
    /// Under `contracts`: [`CONTRACTS_UNUSED`], [`CONTRACTS_WAITING`] (none
    /// read yet), [`CONTRACTS_CURRENT`] or [`CONTRACTS_STALE`].
    contracts_state: AtomicU8,
    liqo_enforcement: Family<LevelLabels, Gauge>,
    /// Why new grants are held back by Liqo's enforcement settings, for
    /// `/readyz`; `None` while they are not.
    enforcement_note: Mutex<Option<String>>,
}

/// Every value of `slice_controller_liqo_enforcement`'s `level` label
/// (the provider self-check's `Level::label`).
pub const ENFORCEMENT_LEVELS: [&str; 5] = ["off", "none", "soft", "hard", "unknown"];
/// The level before anything was read.
const ENFORCEMENT_UNREAD: &str = "unknown";

/// Not under the `contracts` policy.
pub const CONTRACTS_UNUSED: u8 = 0;
/// Under `contracts`, before the catalog first answered.
pub const CONTRACTS_WAITING: u8 = 1;
/// The last read of the contracts (stream or poll) succeeded.
pub const CONTRACTS_CURRENT: u8 = 2;
/// The catalog cannot be reached: deciding from the last known contracts.
pub const CONTRACTS_STALE: u8 = 3;

/// Leadership is the `leader` gauge, and the decision counts are cleared
/// when this replica stops leading (another replica reports them then).
impl ElectionObserver for Metrics {
    fn reached_api(&self) {
        self.reconcile().set_reached_api();
    }

    fn leading(&self, leading: bool) {
        self.reconcile().set_leading(leading);
        if !leading {
            self.clear_counts();
        }
    }
}

impl MetricSet for Handles {
    const BUCKETS: &'static [f64] = &BUCKETS;
    const PREFIX: &'static str = "slice_controller";
    const FAILURE_KINDS: &'static [&'static str] = &["chain", "kubernetes", "conflict"];
    // The class controller runs inside resource-monitor: the build is
    // that binary's.
    const BINARY: &'static str = "resource-monitor";

    fn register(registry: &mut Registry, reconcile: &ReconcileMetrics) -> Self {
        let slices = Family::<DecisionLabels, Gauge>::default();
        registry.register(
            "slices",
            "Slices of the class by current decision (accepted, denied, waiting for authentication)",
            slices.clone(),
        );
        let decisions = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "decisions",
            "Verdicts written to slices, by reason",
            decisions.clone(),
        );
        reconcile.register_duration(
            registry,
            "reconcile_duration_seconds",
            "Time to reconcile one consumer: chain read, decision, status writes",
        );
        reconcile.register_errors(
            registry,
            "Failures: chain reads, Kubernetes API calls, status write conflicts",
        );
        reconcile.register_leader(registry, "leader", "1 while this replica leads");
        let catalog_reachable = Gauge::default();
        registry.register(
            "catalog_reachable",
            "Under the contracts policy: 1 while the catalog answers, 0 while decisions use the last known contracts",
            catalog_reachable.clone(),
        );
        let contracts = Gauge::default();
        registry.register(
            "contracts",
            "Under the contracts policy: active contracts known",
            contracts.clone(),
        );
        let contracts_streamed = Gauge::default();
        registry.register(
            "contracts_streamed",
            "Under the contracts policy: 1 while contracts arrive on the catalog's change stream, 0 while they are polled (fallback) or not read yet",
            contracts_streamed.clone(),
        );
        let liqo_enforcement = Family::<LevelLabels, Gauge>::default();
        registry.register(
            "liqo_enforcement",
            "1 for the level of Liqo's resource enforcement read on this provider (off, none, soft, hard: defaultLimitsEnforcement with enforcement on; unknown), 0 for the others",
            liqo_enforcement.clone(),
        );
        for decision in ["accepted", "denied", "waiting"] {
            slices.get_or_create(&DecisionLabels { decision }).set(0);
        }
        for level in ENFORCEMENT_LEVELS {
            let unread = i64::from(level == ENFORCEMENT_UNREAD);
            liqo_enforcement
                .get_or_create(&LevelLabels { level })
                .set(unread);
        }
        Handles {
            slices,
            decisions,
            per_consumer: Mutex::new(PerConsumer::default()),
            catalog_reachable,
            contracts,
            contracts_streamed,
            contracts_state: AtomicU8::new(CONTRACTS_UNUSED),
            liqo_enforcement,
            enforcement_note: Mutex::new(None),
        }
    }
}

impl Metrics {
    pub fn count_decision(&self, reason: &'static str) {
        self.decisions.get_or_create(&ReasonLabels { reason }).inc();
    }

    pub fn count_error(&self, kind: ErrorKind) {
        self.reconcile().count_failure(kind.label());
    }

    /// Record one consumer's slice counts after its reconcile.
    pub fn set_consumer_counts(&self, consumer: &str, counts: SliceCounts) {
        let mut per = self.per_consumer.lock().unwrap_or_else(|e| e.into_inner());
        let old = if counts == SliceCounts::default() {
            per.counts.remove(consumer)
        } else {
            per.counts.insert(consumer.to_string(), counts)
        };
        // A running total, not a sum over every consumer: this runs once
        // per reconcile, and there may be thousands of consumers.
        let old = old.unwrap_or_default();
        per.total = SliceCounts {
            accepted: per.total.accepted - old.accepted + counts.accepted,
            denied: per.total.denied - old.denied + counts.denied,
            waiting: per.total.waiting - old.waiting + counts.waiting,
        };
        let total = per.total;
        drop(per);
        for (decision, value) in [
            ("accepted", total.accepted),
            ("denied", total.denied),
            ("waiting", total.waiting),
        ] {
            self.slices
                .get_or_create(&DecisionLabels { decision })
                .set(value);
        }
    }

    /// Forget every consumer's counts (leadership lost: another replica
    /// now reports them).
    pub fn clear_counts(&self) {
        *self.per_consumer.lock().unwrap_or_else(|e| e.into_inner()) = PerConsumer::default();
        self.set_consumer_counts("", SliceCounts::default());
    }

    /// The `contracts` policy is in force: `/readyz` waits for the first
    /// contracts.
    pub fn expect_contracts(&self) {
        self.contracts_state
            .store(CONTRACTS_WAITING, Ordering::Relaxed);
    }

    /// Whether contracts arrive on the catalog's change stream (else they
    /// are polled, or not read yet).
    pub fn set_contracts_streamed(&self, streamed: bool) {
        self.contracts_streamed.set(i64::from(streamed));
    }

    /// Whether the last read of the contracts (stream or poll) succeeded.
    pub fn set_catalog_reachable(&self, reachable: bool) {
        self.catalog_reachable.set(i64::from(reachable));
        let state = if reachable {
            CONTRACTS_CURRENT
        } else {
            CONTRACTS_STALE
        };
        // Stale only once something was read: before, it is still waiting.
        let _ = self
            .contracts_state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                (reachable || now != CONTRACTS_WAITING).then_some(state)
            });
    }

    pub fn set_contracts(&self, n: usize) {
        self.contracts.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Liqo's enforcement level as last read (one of
    /// [`ENFORCEMENT_LEVELS`]), and why new grants are held back, if they
    /// are.
    pub fn set_liqo_enforcement(&self, level: &str, held: Option<&str>) {
        for label in ENFORCEMENT_LEVELS {
            self.liqo_enforcement
                .get_or_create(&LevelLabels { level: label })
                .set(i64::from(label == level));
        }
        *self
            .enforcement_note
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = held.map(str::to_string);
    }

    /// Why new grants are held back by Liqo's enforcement settings.
    pub fn enforcement_note(&self) -> Option<String> {
        self.enforcement_note
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One of the `CONTRACTS_*` states.
    pub fn contracts_state(&self) -> u8 {
        self.contracts_state.load(Ordering::Relaxed)
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
    const EXPOSITION: &str = r#"# HELP slice_controller_slices Slices of the class by current decision (accepted, denied, waiting for authentication).
# TYPE slice_controller_slices gauge
slice_controller_slices{decision="accepted"} 2
slice_controller_slices{decision="denied"} 1
slice_controller_slices{decision="waiting"} 0
# HELP slice_controller_decisions Verdicts written to slices, by reason.
# TYPE slice_controller_decisions counter
slice_controller_decisions_total{reason="ResourcesGranted"} 1
# HELP slice_controller_reconcile_duration_seconds Time to reconcile one consumer: chain read, decision, status writes.
# TYPE slice_controller_reconcile_duration_seconds histogram
slice_controller_reconcile_duration_seconds_sum 0.003
slice_controller_reconcile_duration_seconds_count 1
slice_controller_reconcile_duration_seconds_bucket{le="0.0005"} 0
slice_controller_reconcile_duration_seconds_bucket{le="0.001"} 0
slice_controller_reconcile_duration_seconds_bucket{le="0.0025"} 0
slice_controller_reconcile_duration_seconds_bucket{le="0.005"} 1
slice_controller_reconcile_duration_seconds_bucket{le="0.01"} 1
slice_controller_reconcile_duration_seconds_bucket{le="0.025"} 1
slice_controller_reconcile_duration_seconds_bucket{le="0.05"} 1
slice_controller_reconcile_duration_seconds_bucket{le="0.1"} 1
slice_controller_reconcile_duration_seconds_bucket{le="0.25"} 1
slice_controller_reconcile_duration_seconds_bucket{le="0.5"} 1
slice_controller_reconcile_duration_seconds_bucket{le="1.0"} 1
slice_controller_reconcile_duration_seconds_bucket{le="2.5"} 1
slice_controller_reconcile_duration_seconds_bucket{le="5.0"} 1
slice_controller_reconcile_duration_seconds_bucket{le="10.0"} 1
slice_controller_reconcile_duration_seconds_bucket{le="+Inf"} 1
# HELP slice_controller_errors Failures: chain reads, Kubernetes API calls, status write conflicts.
# TYPE slice_controller_errors counter
slice_controller_errors_total{kind="conflict"} 1
slice_controller_errors_total{kind="chain"} 2
slice_controller_errors_total{kind="kubernetes"} 0
# HELP slice_controller_leader 1 while this replica leads.
# TYPE slice_controller_leader gauge
slice_controller_leader 1
# HELP slice_controller_catalog_reachable Under the contracts policy: 1 while the catalog answers, 0 while decisions use the last known contracts.
# TYPE slice_controller_catalog_reachable gauge
slice_controller_catalog_reachable 1
# HELP slice_controller_contracts Under the contracts policy: active contracts known.
# TYPE slice_controller_contracts gauge
slice_controller_contracts 2
# HELP slice_controller_contracts_streamed Under the contracts policy: 1 while contracts arrive on the catalog's change stream, 0 while they are polled (fallback) or not read yet.
# TYPE slice_controller_contracts_streamed gauge
slice_controller_contracts_streamed 1
# HELP slice_controller_liqo_enforcement 1 for the level of Liqo's resource enforcement read on this provider (off, none, soft, hard: defaultLimitsEnforcement with enforcement on; unknown), 0 for the others.
# TYPE slice_controller_liqo_enforcement gauge
slice_controller_liqo_enforcement{level="off"} 0
slice_controller_liqo_enforcement{level="none"} 1
slice_controller_liqo_enforcement{level="soft"} 0
slice_controller_liqo_enforcement{level="hard"} 0
slice_controller_liqo_enforcement{level="unknown"} 0
# EOF
"#;

    fn counts(accepted: i64, denied: i64, waiting: i64) -> SliceCounts {
        SliceCounts {
            accepted,
            denied,
            waiting,
        }
    }

    #[test]
    fn the_exposition_is_unchanged() {
        let metrics = Metrics::new();
        metrics.count_decision("ResourcesGranted");
        metrics.count_error(ErrorKind::Conflict);
        metrics.count_error(ErrorKind::Chain);
        metrics.count_error(ErrorKind::Chain);
        metrics.observe_reconcile(Duration::from_millis(3));
        metrics.set_consumer_counts("c1", counts(2, 1, 0));
        metrics.reconcile().set_leading(true);
        metrics.expect_contracts();
        metrics.set_catalog_reachable(true);
        metrics.set_contracts(2);
        metrics.set_contracts_streamed(true);
        metrics.set_liqo_enforcement("none", None);
        controller_core::metrics::assert_same_exposition(
            &metrics.render(),
            &(controller_core::metrics::build_info_exposition("resource-monitor") + EXPOSITION),
        );
    }

    #[test]
    fn renders_every_family() {
        let metrics = Metrics::new();
        metrics.count_decision("ResourcesGranted");
        metrics.count_error(ErrorKind::Conflict);
        metrics.observe_reconcile(Duration::from_millis(3));
        metrics.set_consumer_counts("c1", counts(2, 1, 0));
        metrics.set_consumer_counts("c2", counts(1, 0, 3));
        metrics.reconcile().set_leading(true);
        let text = metrics.render();
        for line in [
            "slice_controller_slices{decision=\"accepted\"} 3",
            "slice_controller_slices{decision=\"waiting\"} 3",
            "slice_controller_decisions_total{reason=\"ResourcesGranted\"} 1",
            "slice_controller_errors_total{kind=\"conflict\"} 1",
            "slice_controller_reconcile_duration_seconds_count 1",
            "slice_controller_leader 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        metrics.clear_counts();
        assert!(metrics
            .render()
            .contains("slice_controller_slices{decision=\"accepted\"} 0"));
    }
}
