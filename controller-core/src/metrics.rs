//! The metrics every controller keeps about its reconciles, and the
//! leader/readiness state its `/readyz` reports; and the registry around a
//! controller's metrics ([`Registered`], declared per controller with
//! [`controller_metrics!`](crate::controller_metrics)).
//!
//! A controller keeps its own registry (with its own prefix) and its own
//! domain metrics; [`ReconcileMetrics`] adds the part all of them share —
//! runs and their duration (one histogram: its `_count` is the runs),
//! failures by kind, and whether this replica leads — under the names,
//! help texts and label name the controller chooses, so that moving a
//! controller onto it changes nothing a scraper sees. Each part is
//! registered by its own call, at the place in the controller's
//! registration order it had before, because the exposition lists metrics
//! in registration order. Failures are always `<prefix>_errors_total`: one
//! word for them across every binary, as dashboards and alerts match on
//! it. Above them all, [`Registered`] puts the binary's
//! `<binary>_build_info` ([`edge::metrics::root_registry`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use edge::probe::StatusCode;
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

    /// Register the failure counters as `errors` (exposed as
    /// `<prefix>_errors_total`): the one name for failures of every
    /// controller.
    pub fn register_errors(&self, registry: &mut Registry, help: &str) {
        registry.register("errors", help, self.0.failures.clone());
    }

    /// Register the gauge that is 1 while this replica leads as `name`.
    pub fn register_leader(&self, registry: &mut Registry, name: &str, help: &str) {
        registry.register(name, help, self.0.leader.clone());
    }

    /// One reconcile ran for `took`.
    pub fn observe_reconcile(&self, took: Duration) {
        self.0.duration.observe(took.as_secs_f64());
    }

    /// Create the failure series of `kinds` at 0, so each shows before it
    /// first happens: the first failure of a kind then counts in
    /// `rate()` and `increase()`, which see nothing of a series that
    /// appears at 1 (Prometheus' "avoid missing metrics").
    pub fn expect_failures(&self, kinds: &[&'static str]) {
        for kind in kinds {
            self.0
                .failures
                .get_or_create_owned(&vec![(self.0.failure_label, *kind)]);
        }
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

    /// `/readyz` of a controller that is ready once the Kubernetes API
    /// answered, as leader or standby: 200 `ok: leader` / `ok: standby`,
    /// else 503 naming what it waits for.
    pub fn readiness(&self) -> (StatusCode, String) {
        if !self.reached_api() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: the Kubernetes API has not answered yet\n".to_string(),
            );
        }
        let role = if self.is_leading() {
            "leader"
        } else {
            "standby"
        };
        (StatusCode::OK, format!("ok: {role}\n"))
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

/// A controller's metric handles: created and registered into its own
/// registry, whose prefix names every metric (`<PREFIX>_…`), beside the
/// [`ReconcileMetrics`] every controller keeps.
pub trait MetricSet: Send + Sync + 'static {
    /// The registry's prefix.
    const PREFIX: &'static str;
    /// The binary the controller runs in, which names its
    /// `<binary>_build_info`: the prefix, unless the controller runs
    /// inside another binary (the class controller in resource-monitor).
    const BINARY: &'static str = Self::PREFIX;
    /// The reconcile duration's histogram buckets, seconds.
    const BUCKETS: &'static [f64];
    /// The label that names a failure's kind.
    const FAILURE_LABEL: &'static str = "kind";
    /// The kinds of failure the controller counts, each exposed at 0 from
    /// the start ([`ReconcileMetrics::expect_failures`]); a kind not
    /// listed shows when it first happens.
    const FAILURE_KINDS: &'static [&'static str] = &[];
    /// Create every handle and register it, with the parts of `reconcile`
    /// the controller exposes, in the order `/metrics` lists them (the
    /// exposition follows registration order).
    fn register(registry: &mut Registry, reconcile: &ReconcileMetrics) -> Self;
}

/// A controller's registry, its [`ReconcileMetrics`] and the handles `T`
/// registered into it; cheap to clone (every clone shares them).
/// Dereferences to the handles.
pub struct Registered<T>(Arc<Parts<T>>);

struct Parts<T> {
    registry: Registry,
    reconcile: ReconcileMetrics,
    handles: T,
}

impl<T: MetricSet> Registered<T> {
    /// Every metric of `T` created and registered under `T::PREFIX`, after
    /// `<T::BINARY>_build_info`.
    pub fn new() -> Self {
        let mut registry = edge::metrics::root_registry(T::BINARY);
        let reconcile = ReconcileMetrics::new(T::BUCKETS.iter().copied(), T::FAILURE_LABEL);
        let handles = T::register(registry.sub_registry_with_prefix(T::PREFIX), &reconcile);
        reconcile.expect_failures(T::FAILURE_KINDS);
        Self(Arc::new(Parts {
            registry,
            reconcile,
            handles,
        }))
    }
}

impl<T> Registered<T> {
    /// The OpenMetrics text of every metric: the body of `/metrics`.
    pub fn render(&self) -> String {
        edge::probe::openmetrics(&self.0.registry)
    }

    /// The reconcile metrics and the leader/readiness state every
    /// controller shares.
    pub fn reconcile(&self) -> &ReconcileMetrics {
        &self.0.reconcile
    }

    /// One reconcile ran for `took`.
    pub fn observe_reconcile(&self, took: Duration) {
        self.0.reconcile.observe_reconcile(took);
    }
}

impl<T: MetricSet> Default for Registered<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for Registered<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> std::ops::Deref for Registered<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0.handles
    }
}

/// Declares a controller's `Metrics`: a type of the controller's own (so
/// that it can implement its probes and the election observer on it) over
/// [`Registered`]`<$handles>`, which it dereferences to (`render`,
/// `reconcile`, `observe_reconcile`, then the handles' fields), with `new`,
/// `Default`, a `Debug` that shows nothing, and an inherent `render` (the
/// probe port calls it by path).
#[macro_export]
macro_rules! controller_metrics {
    ($(#[$attr:meta])* $vis:vis struct $name:ident($handles:ty);) => {
        $(#[$attr])*
        #[derive(Clone)]
        $vis struct $name($crate::metrics::Registered<$handles>);

        impl $name {
            /// Every metric created, registered and at zero.
            pub fn new() -> Self {
                Self($crate::metrics::Registered::new())
            }

            /// The OpenMetrics text of every metric.
            pub fn render(&self) -> String {
                self.0.render()
            }
        }

        impl ::std::default::Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }

        impl ::std::ops::Deref for $name {
            type Target = $crate::metrics::Registered<$handles>;
            fn deref(&self) -> &Self::Target {
                &self.0
            }
        }
    };
}

/// For tests: the `<binary>_build_info` lines every controller's
/// exposition starts with.
pub fn build_info_exposition(binary: &str) -> String {
    let text = edge::metrics::openmetrics(&edge::metrics::root_registry(binary));
    text.trim_end_matches("# EOF\n").to_string()
}

/// For tests: panic unless `text` is the exposition `expected`, in the
/// same registration order (the `# HELP` lines) with the same lines —
/// sorted before comparing, since a family prints its label sets in no
/// fixed order.
pub fn assert_same_exposition(text: &str, expected: &str) {
    fn comparable(text: &str) -> (Vec<&str>, Vec<&str>) {
        let order = text.lines().filter(|l| l.starts_with("# HELP")).collect();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        (order, lines)
    }
    assert_eq!(comparable(text), comparable(expected), "{text}");
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

    struct Set {
        things: Gauge,
    }

    impl MetricSet for Set {
        const PREFIX: &'static str = "set";
        const BUCKETS: &'static [f64] = &[1.0];
        const FAILURE_KINDS: &'static [&'static str] = &["kubernetes", "catalog"];
        fn register(registry: &mut Registry, reconcile: &ReconcileMetrics) -> Self {
            reconcile.register_errors(registry, "Failed");
            let things = Gauge::default();
            registry.register("things", "Things", things.clone());
            Set { things }
        }
    }

    crate::controller_metrics!(
        /// A controller's metrics, as a controller declares them.
        struct Declared(Set);
    );

    #[test]
    fn a_declared_set_renders_its_prefix_in_registration_order_and_clones_share() {
        let metrics = Declared::default();
        let clone = metrics.clone();
        clone.things.set(3);
        clone.reconcile().count_failure("kubernetes");
        clone.observe_reconcile(Duration::from_millis(1));
        assert_same_exposition(
            &metrics.render(),
            &(build_info_exposition("set")
                + "# HELP set_errors Failed.\n\
             # TYPE set_errors counter\n\
             set_errors_total{kind=\"kubernetes\"} 1\n\
             set_errors_total{kind=\"catalog\"} 0\n\
             # HELP set_things Things.\n\
             # TYPE set_things gauge\n\
             set_things 3\n\
             # EOF\n"),
        );
        assert!(metrics.render().starts_with("# HELP set_build_info "));
        assert_eq!(format!("{metrics:?}"), "Declared { .. }");
    }

    #[test]
    fn registers_under_the_callers_names_and_label() {
        let metrics = ReconcileMetrics::new([0.5, 1.0], "kind");
        let mut registry = Registry::with_prefix("x");
        metrics.register_leader(&mut registry, "leader", "Leads");
        metrics.register_duration(&mut registry, "reconcile_duration_seconds", "Took");
        metrics.register_errors(&mut registry, "Failed");
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
