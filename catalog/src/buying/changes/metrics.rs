//! The contract change stream's Prometheus metrics
//! (`catalog_contract_stream_*`).

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Why a stream was refused or closed by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Refused: the identity holds its most streams (429).
    IdentityLimit,
    /// Refused: the process holds its most streams (503).
    ProcessLimit,
    /// Closed: its client fell too far behind.
    Slow,
    /// Closed: its bearer token expired.
    TokenExpired,
    /// Closed: the catalog is shutting down, or its store was replaced.
    Shutdown,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::IdentityLimit => "identity_limit",
            Outcome::ProcessLimit => "process_limit",
            Outcome::Slow => "slow",
            Outcome::TokenExpired => "token_expired",
            Outcome::Shutdown => "shutdown",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// Handles to the stream's metrics; cheap to clone (every field is shared).
#[derive(Clone)]
pub struct StreamMetrics {
    /// Open streams.
    pub streams: Gauge<i64, AtomicI64>,
    /// Lines (snapshots, changes, heartbeats) handed to stream bodies.
    pub lines_sent: Counter<u64, AtomicU64>,
    /// Store reads the process's fan-out made per change notification: one
    /// per batch of changes, whatever the number of streams.
    pub reads_per_batch: Histogram,
    /// Store reads of the fan-out, all batches together.
    pub store_reads: Counter<u64, AtomicU64>,
    outcomes: Family<OutcomeLabel, Counter<u64, AtomicU64>>,
}

impl Default for StreamMetrics {
    fn default() -> Self {
        StreamMetrics {
            streams: Gauge::default(),
            lines_sent: Counter::default(),
            reads_per_batch: Histogram::new([1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0]),
            store_reads: Counter::default(),
            outcomes: Family::default(),
        }
    }
}

impl StreamMetrics {
    /// Create the metrics and register them in `registry` (prefix
    /// `contract_stream_`).
    pub fn register(registry: &mut Registry) -> Self {
        let r = registry.sub_registry_with_prefix("contract_stream");
        let m = StreamMetrics::default();
        r.register(
            "streams",
            "Open GET /contract-changes streams",
            m.streams.clone(),
        );
        r.register(
            "lines_sent",
            "Contract change stream lines (snapshot, resumed, change, heartbeat) handed to stream bodies",
            m.lines_sent.clone(),
        );
        r.register(
            "store_reads_per_batch",
            "Store reads of the process's contract fan-out per change notification",
            m.reads_per_batch.clone(),
        );
        r.register(
            "store_reads",
            "Store reads of the process's contract fan-out",
            m.store_reads.clone(),
        );
        r.register(
            "outcomes",
            "Streams refused (identity_limit, process_limit) or closed by the server (slow, token_expired, shutdown)",
            m.outcomes.clone(),
        );
        for o in [
            Outcome::IdentityLimit,
            Outcome::ProcessLimit,
            Outcome::Slow,
            Outcome::TokenExpired,
            Outcome::Shutdown,
        ] {
            m.outcomes
                .get_or_create_owned(&OutcomeLabel { outcome: o.label() });
        }
        m
    }

    pub fn count(&self, o: Outcome) {
        self.outcomes
            .get_or_create(&OutcomeLabel { outcome: o.label() })
            .inc();
    }
}
