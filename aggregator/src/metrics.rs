//! The aggregator's Prometheus metrics: its build (`aggregator_build_info`),
//! upstream up/down, upstream and downstream read latency, how reads were
//! answered, failed upstream reads (`aggregator_upstream_read_errors_total`),
//! notifications and reloads. Rendered as OpenMetrics text by
//! [`Metrics::render`] (served on `/metrics` by the `http` module, in the
//! format the scraper asks for).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Latency buckets, seconds: loopback reads take well under a millisecond,
/// a slow upstream hits the timeout (1 s by default).
const BUCKETS: [f64; 14] = [
    0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct UpstreamLabels {
    pub cluster_id: String,
    pub address: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ClusterLabels {
    cluster_id: String,
}

/// How one upstream contributed to one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Outcome {
    /// Answered in time.
    fresh,
    /// Did not answer; its last-known answer was used.
    last_known,
    /// Did not answer; left out of the sum.
    omitted,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    cluster_id: String,
    outcome: Outcome,
}

/// Why an upstream read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Failure {
    timeout,
    unavailable,
    rejected,
    error,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FailureLabels {
    cluster_id: String,
    reason: Failure,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// The metric handles of one upstream.
#[derive(Debug, Clone)]
pub struct UpstreamMetrics {
    up: Gauge,
    read_seconds: Histogram,
    fresh: Counter,
    last_known: Counter,
    omitted: Counter,
    timeout: Counter,
    unavailable: Counter,
    rejected: Counter,
    error: Counter,
}

impl UpstreamMetrics {
    pub fn set_up(&self, up: bool) {
        self.up.set(i64::from(up));
    }

    pub fn observe_read(&self, took: Duration) {
        self.read_seconds.observe(took.as_secs_f64());
    }

    pub fn count_answer(&self, outcome: Outcome) {
        match outcome {
            Outcome::fresh => &self.fresh,
            Outcome::last_known => &self.last_known,
            Outcome::omitted => &self.omitted,
        }
        .inc();
    }

    pub fn count_failure(&self, reason: Failure) {
        match reason {
            Failure::timeout => &self.timeout,
            Failure::unavailable => &self.unavailable,
            Failure::rejected => &self.rejected,
            Failure::error => &self.error,
        }
        .inc();
    }
}

/// Shared handles to every metric; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    upstream_up: Family<UpstreamLabels, Gauge>,
    upstream_read_seconds: Family<ClusterLabels, Histogram, fn() -> Histogram>,
    upstream_answers: Family<OutcomeLabels, Counter>,
    upstream_failures: Family<FailureLabels, Counter>,
    upstreams: Gauge,
    read_seconds: Histogram,
    reads: Family<ResultLabels, Counter>,
    notifications: Counter,
    reloads: Family<ResultLabels, Counter>,
}

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
        let mut root = edge::metrics::root_registry("aggregator");
        let registry = root.sub_registry_with_prefix("aggregator");
        let upstream_up = Family::<UpstreamLabels, Gauge>::default();
        registry.register(
            "upstream_up",
            "1 if the upstream answers (subscribed and its last read succeeded), 0 if not",
            upstream_up.clone(),
        );
        let upstream_read_seconds =
            Family::<ClusterLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            );
        registry.register(
            "upstream_read_duration_seconds",
            "Time for one upstream read, failures and timeouts included",
            upstream_read_seconds.clone(),
        );
        let upstream_answers = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "upstream_answers",
            "How each upstream contributed to reads: fresh, last_known (policy) or omitted",
            upstream_answers.clone(),
        );
        let upstream_failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "upstream_read_errors",
            "Upstream reads that failed, by reason",
            upstream_failures.clone(),
        );
        let upstreams = Gauge::default();
        registry.register("upstreams", "Upstreams configured", upstreams.clone());
        let read_seconds = latency_histogram();
        registry.register(
            "read_duration_seconds",
            "Time to answer one downstream read (fan-out and sum)",
            read_seconds.clone(),
        );
        let reads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "reads",
            "Downstream reads answered, by result",
            reads.clone(),
        );
        let notifications = Counter::default();
        registry.register(
            "notifications",
            "Change notifications sent downstream (after coalescing)",
            notifications.clone(),
        );
        let reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "config_reloads",
            "Configuration reloads, by result",
            reloads.clone(),
        );
        // Both results from the start, so the first error counts in
        // `rate()` (a series that appears at 1 shows no increase).
        for result in ["ok", "error"] {
            reads.get_or_create_owned(&ResultLabels { result });
            reloads.get_or_create_owned(&ResultLabels { result });
        }
        Self {
            inner: Arc::new(Inner {
                registry: root,
                upstream_up,
                upstream_read_seconds,
                upstream_answers,
                upstream_failures,
                upstreams,
                read_seconds,
                reads,
                notifications,
                reloads,
            }),
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        edge::probe::openmetrics(&self.inner.registry)
    }

    /// The series of one upstream, created now (so they show as zeros before
    /// anything happens) and held as handles, so the read path does not
    /// look labels up.
    pub fn upstream(&self, labels: &UpstreamLabels) -> UpstreamMetrics {
        let id = labels.cluster_id.clone();
        let inner = &self.inner;
        let answer = |outcome| {
            inner.upstream_answers.get_or_create_owned(&OutcomeLabels {
                cluster_id: id.clone(),
                outcome,
            })
        };
        let failure = |reason| {
            inner.upstream_failures.get_or_create_owned(&FailureLabels {
                cluster_id: id.clone(),
                reason,
            })
        };
        UpstreamMetrics {
            up: inner.upstream_up.get_or_create_owned(labels),
            read_seconds: inner
                .upstream_read_seconds
                .get_or_create_owned(&ClusterLabels {
                    cluster_id: id.clone(),
                }),
            fresh: answer(Outcome::fresh),
            last_known: answer(Outcome::last_known),
            omitted: answer(Outcome::omitted),
            timeout: failure(Failure::timeout),
            unavailable: failure(Failure::unavailable),
            rejected: failure(Failure::rejected),
            error: failure(Failure::error),
        }
    }

    /// Drop the series of an upstream that is no longer configured, so a
    /// removed upstream does not stay "down" forever.
    pub fn forget_upstream(&self, labels: &UpstreamLabels, cluster_id_still_used: bool) {
        self.inner.upstream_up.remove(labels);
        if cluster_id_still_used {
            return;
        }
        let id = labels.cluster_id.clone();
        self.inner.upstream_read_seconds.remove(&ClusterLabels {
            cluster_id: id.clone(),
        });
        for outcome in [Outcome::fresh, Outcome::last_known, Outcome::omitted] {
            self.inner.upstream_answers.remove(&OutcomeLabels {
                cluster_id: id.clone(),
                outcome,
            });
        }
        for reason in [
            Failure::timeout,
            Failure::unavailable,
            Failure::rejected,
            Failure::error,
        ] {
            self.inner.upstream_failures.remove(&FailureLabels {
                cluster_id: id.clone(),
                reason,
            });
        }
    }

    pub fn set_upstreams(&self, n: usize) {
        self.inner
            .upstreams
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn observe_read(&self, took: Duration, ok: bool) {
        self.inner.read_seconds.observe(took.as_secs_f64());
        let result = if ok { "ok" } else { "error" };
        self.inner
            .reads
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    pub fn count_notification(&self) {
        self.inner.notifications.inc();
    }

    pub fn count_reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.inner
            .reloads
            .get_or_create(&ResultLabels { result })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_upstream_series_and_forgets_them() {
        let m = Metrics::new();
        let labels = UpstreamLabels {
            cluster_id: "c1".into(),
            address: "h:1".into(),
        };
        let u = m.upstream(&labels);
        u.set_up(true);
        u.observe_read(Duration::from_millis(3));
        u.count_answer(Outcome::last_known);
        m.observe_read(Duration::from_millis(4), true);
        let text = m.render();
        assert!(text.starts_with("# HELP aggregator_build_info "), "{text}");
        assert!(
            text.contains(r#"aggregator_upstream_up{cluster_id="c1",address="h:1"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"aggregator_upstream_read_duration_seconds_count{cluster_id="c1"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"aggregator_upstream_answers_total{cluster_id="c1",outcome="last_known"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"aggregator_reads_total{result="ok"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"aggregator_reads_total{result="error"} 0"#),
            "{text}"
        );

        assert!(
            text.contains(
                r#"aggregator_upstream_read_errors_total{cluster_id="c1",reason="timeout"} 0"#
            ),
            "series exist before anything happened to them: {text}"
        );
        m.forget_upstream(&labels, false);
        let text = m.render();
        assert!(!text.contains(r#"cluster_id="c1""#), "{text}");
    }
}
