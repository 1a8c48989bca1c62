//! The feed's Prometheus metrics (registered under `catalog_feed_*`).

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upper bounds (seconds) of `catalog_feed_publish_to_send_seconds`.
const PUBLISH_TO_SEND_BUCKETS: [f64; 20] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5,
    0.75, 1.0, 2.5, 5.0, 10.0,
];

/// Why a feed connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Fell behind (close code 1008).
    Slow,
    /// Sent nothing, not even a pong, for the idle timeout (1001).
    Idle,
    /// The catalog is shutting down (1001).
    Shutdown,
    /// The client closed, or broke the protocol.
    Client,
    /// The close frame itself made no progress: the socket was cut.
    Cut,
}

impl CloseReason {
    fn label(self) -> &'static str {
        match self {
            CloseReason::Slow => "slow",
            CloseReason::Idle => "idle",
            CloseReason::Shutdown => "shutdown",
            CloseReason::Client => "client",
            CloseReason::Cut => "cut",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabel {
    mode: &'static str,
}

/// Handles to the feed's metrics; cheap to clone (every field is shared).
#[derive(Clone)]
pub struct FeedMetrics {
    /// Open feed connections.
    pub subscribers: Gauge<i64, AtomicI64>,
    /// Data messages handed to subscriber sockets.
    pub messages_sent: Counter<u64, AtomicU64>,
    /// Bytes of data messages handed to subscriber sockets
    /// (`catalog_feed_sent_bytes_total`: the unit last, as Prometheus names
    /// units).
    pub sent_bytes: Counter<u64, AtomicU64>,
    /// Subscribers disconnected for falling behind.
    pub slow_disconnects: Counter<u64, AtomicU64>,
    /// Subscribe requests refused (connection or filter limit, shutdown).
    pub refused: Counter<u64, AtomicU64>,
    /// Offer-list changes published (the `seq` counter).
    pub changes: Counter<u64, AtomicU64>,
    /// Full reloads from the store (start, resync, lag).
    pub reloads: Counter<u64, AtomicU64>,
    /// From the publisher receiving a change to a subscriber's socket taking
    /// the message.
    pub publish_to_send: Histogram,
    subscribers_by_mode: Family<ModeLabel, Gauge<i64, AtomicI64>>,
    closes: Family<ReasonLabel, Counter<u64, AtomicU64>>,
}

impl FeedMetrics {
    /// Create the metrics and register them in `registry` (prefix `feed_`).
    pub fn register(registry: &mut Registry) -> Self {
        let r = registry.sub_registry_with_prefix("feed");
        let m = FeedMetrics {
            subscribers: Gauge::default(),
            messages_sent: Counter::default(),
            sent_bytes: Counter::default(),
            slow_disconnects: Counter::default(),
            refused: Counter::default(),
            changes: Counter::default(),
            reloads: Counter::default(),
            // Fine where the targets are (tens of ms), coarse beyond.
            publish_to_send: Histogram::new(PUBLISH_TO_SEND_BUCKETS.iter().copied()),
            subscribers_by_mode: Family::default(),
            closes: Family::default(),
        };
        r.register(
            "subscribers",
            "Open /subscribe WebSocket connections",
            m.subscribers.clone(),
        );
        r.register(
            "subscribers_by_mode",
            "Subscribers receiving the feed, by mode",
            m.subscribers_by_mode.clone(),
        );
        r.register(
            "messages_sent",
            "Feed messages (snapshots, upserts, deletes) handed to subscriber sockets",
            m.messages_sent.clone(),
        );
        r.register(
            "sent_bytes",
            "Bytes of feed messages handed to subscriber sockets",
            m.sent_bytes.clone(),
        );
        r.register(
            "slow_disconnects",
            "Subscribers disconnected for falling behind (close code 1008)",
            m.slow_disconnects.clone(),
        );
        r.register(
            "closes",
            "Feed connections ended, by reason: slow, idle, shutdown, cut (by the server) or client",
            m.closes.clone(),
        );
        r.register(
            "refused",
            "Subscribe requests refused (limits reached or shutting down)",
            m.refused.clone(),
        );
        r.register(
            "changes",
            "Offer-list changes published to the feed",
            m.changes.clone(),
        );
        r.register(
            "reloads",
            "Full reloads of the offer list from the store",
            m.reloads.clone(),
        );
        // Every mode and reason from the start, so the first close of a
        // kind counts in `rate()` (a series that appears at 1 shows no
        // increase).
        for mode in [super::Mode::Snapshot, super::Mode::Delta] {
            m.mode_gauge(mode);
        }
        for reason in [
            CloseReason::Slow,
            CloseReason::Idle,
            CloseReason::Shutdown,
            CloseReason::Client,
            CloseReason::Cut,
        ] {
            m.closes.get_or_create_owned(&ReasonLabel {
                reason: reason.label(),
            });
        }
        r.register(
            "publish_to_send_seconds",
            "Time from the feed receiving a change to a subscriber's socket taking the message",
            m.publish_to_send.clone(),
        );
        m
    }

    pub(crate) fn closed(&self, reason: CloseReason) {
        self.closes
            .get_or_create(&ReasonLabel {
                reason: reason.label(),
            })
            .inc();
        if reason == CloseReason::Slow {
            self.slow_disconnects.inc();
        }
    }

    pub(crate) fn mode_gauge(&self, mode: super::Mode) -> Gauge<i64, AtomicI64> {
        self.subscribers_by_mode
            .get_or_create(&ModeLabel {
                mode: mode.as_str(),
            })
            .clone()
    }
}
