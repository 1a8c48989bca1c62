//! What every round shares: the controller's settings, its caches, the
//! catalogs' sessions, the batches and the unneeded-since times — and the
//! error a round ends with. The controller builds it; the round
//! (`round`, `give_back`) reads it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::Client;
use purchase_controller::model::Purchase;

use crate::events::Events;
use crate::metrics::Metrics;
use crate::model::MarketAutoscaler;
use crate::observe::World;
use crate::observe_catalog::Catalogs;

/// Unneeded-since times, per autoscaler, per node.
pub type Unneeded = HashMap<String, HashMap<String, Timestamp>>;

/// What the controller is told to do (the flags).
#[derive(Debug, Clone)]
pub struct Settings {
    pub scan_interval: Duration,
    pub batch_idle: Duration,
    pub batch_max: Duration,
    pub purchase_deadline: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub backoff_reset: Duration,
    /// Wait this long before retrying a failed round.
    pub retry: Duration,
    pub catalog_timeout: Duration,
    /// How long a node's drain is retried before it is uncordoned and kept.
    pub max_drain_time: Duration,
    /// This replica's name in Events.
    pub instance: String,
}

/// Why a round failed (it is retried after `retry`).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Status(#[from] crate::status::WriteError),
}

/// The watch caches.
#[derive(Clone)]
pub struct Stores {
    pub autoscalers: Store<MarketAutoscaler>,
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub purchases: Store<Purchase>,
    pub pdbs: Store<PodDisruptionBudget>,
    pub namespaces: Store<Namespace>,
}

impl Stores {
    /// `ma`'s view of the cluster now.
    pub fn world(&self, ma: &MarketAutoscaler, intent: &crate::model::Intent) -> World {
        World::build(
            ma,
            intent,
            &self.pods.state(),
            &self.nodes.state(),
            &self.purchases.state(),
            &self.pdbs.state(),
            &self.namespaces.state(),
        )
    }
}

/// New waiting pods seen by one autoscaler, batched before deciding.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    /// Waiting pods already seen (UIDs).
    pub seen: std::collections::HashSet<String>,
    /// When the first pod of the open batch arrived, and the last.
    pub first: Option<Instant>,
    pub last: Option<Instant>,
}

impl Batch {
    /// Record the waiting pods now (`uids`); how long to wait before
    /// deciding (`None`: decide now).
    pub fn wait(
        &mut self,
        uids: &[String],
        now: Instant,
        idle: Duration,
        max: Duration,
    ) -> Option<Duration> {
        let mut new = false;
        for uid in uids {
            if self.seen.insert(uid.clone()) {
                new = true;
            }
        }
        self.seen.retain(|u| uids.contains(u));
        if new {
            self.first.get_or_insert(now);
            self.last = Some(now);
        }
        let (first, last) = (self.first?, self.last?);
        let idle_left = idle.saturating_sub(now.saturating_duration_since(last));
        let max_left = max.saturating_sub(now.saturating_duration_since(first));
        let left = idle_left.min(max_left);
        if left.is_zero() {
            self.first = None;
            self.last = None;
            None
        } else {
            Some(left)
        }
    }
}

/// Everything a round needs.
/// The controller's clients of its cluster.
#[derive(Clone)]
pub struct Clients {
    /// Everything but evictions (kube's default retries on).
    pub api: Client,
    /// Evictions: a PodDisruptionBudget's 429 is seen at once, not retried
    /// away ([`controller_core::kubeconfig::client_without_retry`]).
    pub evictions: Client,
}

impl Clients {
    /// One client for both (tests).
    pub fn same(client: Client) -> Self {
        Self {
            api: client.clone(),
            evictions: client,
        }
    }
}

pub struct Context {
    pub client: Client,
    /// For `pods/eviction` only (see [`Clients::evictions`]).
    pub evictions: Client,
    pub settings: Settings,
    pub metrics: Metrics,
    pub events: Events,
    pub catalogs: Catalogs,
    pub stores: Stores,
    pub batches: Mutex<HashMap<String, Batch>>,
    /// Since when each bought node has been unneeded.
    pub unneeded: Mutex<Unneeded>,
}

/// Seconds as a `Duration` for requeueing, at least 100 ms.
pub fn requeue_after(d: Duration) -> Action {
    Action::requeue(d.max(Duration::from_millis(100)))
}

/// The earliest of `deadlines` (from `now`) and the scan interval.
pub fn next_round(scan: Duration, deadlines: impl IntoIterator<Item = Duration>) -> Duration {
    deadlines.into_iter().fold(scan, Duration::min)
}

/// The time from `since` to `now` (zero when `now` is earlier).
pub fn elapsed(since: jiff::Timestamp, now: jiff::Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_closes_after_idle_since_the_last_new_pod_or_max_since_the_first() {
        let (idle, max) = (Duration::from_secs(1), Duration::from_secs(10));
        let t0 = Instant::now();
        let mut b = Batch::default();
        let uids = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>();
        // Nothing waits: decide now.
        assert_eq!(b.wait(&[], t0, idle, max), None);
        // A new pod opens the batch for `idle`.
        assert_eq!(b.wait(&uids(1), t0, idle, max), Some(idle));
        // Another one 0.5 s later: idle counts from it.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(b.wait(&uids(2), t1, idle, max), Some(idle));
        // Nothing new for 1 s: decide.
        assert_eq!(b.wait(&uids(2), t1 + idle, idle, max), None);
        // A steady stream of new pods: decided at `max` after the first.
        let mut b = Batch::default();
        for i in 0..20u32 {
            let now = t0 + Duration::from_millis(600) * i;
            let left = b.wait(&uids(i as usize + 1), now, idle, max);
            if now.duration_since(t0) >= max {
                assert_eq!(left, None, "at {i}");
                break;
            }
            assert!(left.is_some(), "at {i}");
        }
    }
}
