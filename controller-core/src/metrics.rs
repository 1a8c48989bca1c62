//! The metrics every controller keeps about its reconciles, and the
//! leader/readiness state its `/readyz` reports.
//!
//! A controller keeps its own registry (with its own prefix) and its own
//! domain metrics; [`ReconcileMetrics`] adds the part all of them share —
//! runs and their duration (one histogram: its `_count` is the runs),
//! failures by kind, and whether this replica leads — under the names,
//! help texts and label name the controller chooses, so that moving a
//! controller onto it changes nothing a scraper sees. Each part is
//! registered by its own call, at the place in the controller's
//! registration order it had before, because the exposition lists metrics
//! in registration order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::lease::ElectionObserver;

/// A failure's labels: one pair, the label name the controller chose and
/// the kind.
type FailureLabels = Vec<(&'static str, &'static str)>;

struct Inner {
    duration: Histogram,
    failures: Family<FailureLabels, Counter>,
    failure_label: &'static str,
    leader: Gauge,
    leading: AtomicBool,
    reached_api: AtomicBool,
}

/// Runs, their duration, failures by kind, leadership and readiness of one
/// controller; cheap to clone (every clone shares the same metrics).
#[derive(Clone)]
pub struct ReconcileMetrics(Arc<Inner>);

impl std::fmt::Debug for ReconcileMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcileMetrics")
            .field("leading", &self.is_leading())
            .field("reached_api", &self.reached_api())
            .finish_non_exhaustive()
    }
}

impl ReconcileMetrics {
    /// Reconcile durations go into `buckets` (seconds); failures are
    /// labelled `failure_label="<kind>"`.
    pub fn new(buckets: impl IntoIterator<Item = f64>, failure_label: &'static str) -> Self {
        Self(Arc::new(Inner {
            duration: Histogram::new(buckets),
            failures: Family::default(),
            failure_label,
            leader: Gauge::default(),
            leading: AtomicBool::new(false),
            reached_api: AtomicBool::new(false),
        }))
    }

    /// Register the duration histogram (and so the run count) as `name`.
    pub fn register_duration(&self, registry: &mut Registry, name: &str, help: &str) {
        registry.register(name, help, self.0.duration.clone());
    }

    /// Register the failure counters as `name` (exposed as `name_total`).
    pub fn register_failures(&self, registry: &mut Registry, name: &str, help: &str) {
        registry.register(name, help, self.0.failures.clone());
    }

    /// Register the gauge that is 1 while this replica leads as `name`.
    pub fn register_leader(&self, registry: &mut Registry, name: &str, help: &str) {
        registry.register(name, help, self.0.leader.clone());
    }

    /// One reconcile ran for `took`.
    pub fn observe_reconcile(&self, took: Duration) {
        self.0.duration.observe(took.as_secs_f64());
    }

    /// One failure of `kind`.
    pub fn count_failure(&self, kind: &'static str) {
        self.0
            .failures
            .get_or_create(&vec![(self.0.failure_label, kind)])
            .inc();
    }

    pub fn set_leading(&self, leading: bool) {
        self.0.leading.store(leading, Ordering::Relaxed);
        self.0.leader.set(i64::from(leading));
    }

    pub fn is_leading(&self) -> bool {
        self.0.leading.load(Ordering::Relaxed)
    }

    /// The Kubernetes API answered (a Lease read, a first list): from then
    /// on the controller may report ready.
    pub fn set_reached_api(&self) {
        self.0.reached_api.store(true, Ordering::Relaxed);
    }

    pub fn reached_api(&self) -> bool {
        self.0.reached_api.load(Ordering::Relaxed)
    }
}

/// A text exposition in a form two can be compared in: the metrics in
/// the order they were registered (their `# HELP` lines), then every line
/// sorted — a family prints its label sets in no fixed order.
pub fn comparable_exposition(text: &str) -> (Vec<&str>, Vec<&str>) {
    let order = text.lines().filter(|l| l.starts_with("# HELP")).collect();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    (order, lines)
}

/// The election's reports are exactly readiness and leadership.
impl ElectionObserver for ReconcileMetrics {
    fn reached_api(&self) {
        self.set_reached_api();
    }

    fn leading(&self, leading: bool) {
        self.set_leading(leading);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposition(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("a String writes");
        text
    }

    #[test]
    fn registers_under_the_callers_names_and_label() {
        let metrics = ReconcileMetrics::new([0.5, 1.0], "kind");
        let mut registry = Registry::with_prefix("x");
        metrics.register_leader(&mut registry, "leader", "Leads");
        metrics.register_duration(&mut registry, "reconcile_duration_seconds", "Took");
        metrics.register_failures(&mut registry, "errors", "Failed");
        metrics.observe_reconcile(Duration::from_millis(700));
        metrics.count_failure("kubernetes");
        metrics.count_failure("kubernetes");
        metrics.set_leading(true);
        assert_eq!(
            exposition(&registry),
            "# HELP x_leader Leads.\n\
             # TYPE x_leader gauge\n\
             x_leader 1\n\
             # HELP x_reconcile_duration_seconds Took.\n\
             # TYPE x_reconcile_duration_seconds histogram\n\
             x_reconcile_duration_seconds_sum 0.7\n\
             x_reconcile_duration_seconds_count 1\n\
             x_reconcile_duration_seconds_bucket{le=\"0.5\"} 0\n\
             x_reconcile_duration_seconds_bucket{le=\"1.0\"} 1\n\
             x_reconcile_duration_seconds_bucket{le=\"+Inf\"} 1\n\
             # HELP x_errors Failed.\n\
             # TYPE x_errors counter\n\
             x_errors_total{kind=\"kubernetes\"} 2\n\
             # EOF\n"
        );
        assert!(metrics.is_leading());
        ElectionObserver::leading(&metrics, false);
        ElectionObserver::reached_api(&metrics);
        assert!(!metrics.is_leading() && metrics.reached_api());
    }
}
