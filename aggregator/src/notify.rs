//! One downstream notification stream out of N upstream ones.
//!
//! Every upstream's notifications (and the aggregator's own events: an
//! upstream added, removed, or its last-known answer expiring) are
//! [`Changes::signal`]led into one queue. The coalescer waits `window` after
//! the first signal, takes everything that arrived meanwhile, and sends one
//! notification downstream: a burst across many upstreams costs Liqo one
//! re-read, and a steady stream of changes at most one per window.
//!
//! An upstream saying "cluster X's view changed" changes only the sum for
//! X, so when every cause in a window names a cluster, and there are few,
//! each of those clusters is notified ([`Notification::Cluster`]) and Liqo
//! re-reads only them. Anything else (an upstream saying "all", an
//! upstream added, removed or gone, a last-known answer expiring) changes
//! the sums of every cluster: [`Notification::All`].

use std::time::Duration;

use futures::StreamExt;
use resource_reader::{Notification, NotificationStream, Notifier};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::metrics::Metrics;
use resource_reader::AbortOnDrop;

/// Signals queued before the coalescer takes them; when full, a downstream
/// notification is already due, so dropping more loses nothing.
const QUEUE: usize = 256;

/// More distinct clusters than this in one window: notify "all" (one
/// re-read of everything is cheaper than many separate notifications).
const MAX_PRECISE: usize = 16;

/// Why the downstream answer may have changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Cause {
    /// Only the sum for `cluster` (an upstream said so).
    Cluster { cluster: String, upstream: String },
    /// Every sum.
    Everything(String),
}

/// Where changes are signalled; cheap to clone.
#[derive(Debug, Clone)]
pub struct Changes {
    tx: mpsc::Sender<Cause>,
}

impl Changes {
    /// Something that every downstream answer depends on may have changed.
    pub fn signal(&self, cause: impl Into<String>) {
        let _ = self.tx.try_send(Cause::Everything(cause.into()));
    }

    /// `upstream`'s answer for `cluster` may have changed.
    fn signal_cluster(&self, upstream: &str, cluster: String) {
        let _ = self.tx.try_send(Cause::Cluster {
            cluster,
            upstream: upstream.to_string(),
        });
    }
}

/// What one window's causes call for downstream.
fn notifications(causes: &[Cause]) -> Vec<Notification> {
    let mut clusters = Vec::new();
    for cause in causes {
        match cause {
            Cause::Everything(_) => return vec![Notification::All],
            Cause::Cluster { cluster, .. } => clusters.push(cluster.clone()),
        }
    }
    clusters.sort();
    clusters.dedup();
    if clusters.len() > MAX_PRECISE {
        return vec![Notification::All];
    }
    clusters.into_iter().map(Notification::Cluster).collect()
}

/// Start coalescing signals into `notifier`, one per `window` at most.
pub(crate) fn start(
    window: Duration,
    notifier: Notifier,
    metrics: Metrics,
) -> (Changes, AbortOnDrop) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let span = tracing::info_span!("notify", window = ?window);
    let task = tokio::spawn(coalesce(rx, window, notifier, metrics).instrument(span));
    (Changes { tx }, AbortOnDrop(task))
}

async fn coalesce(
    mut rx: mpsc::Receiver<Cause>,
    window: Duration,
    notifier: Notifier,
    metrics: Metrics,
) {
    while let Some(first) = rx.recv().await {
        if !window.is_zero() {
            tokio::time::sleep(window).await;
        }
        let mut causes = vec![first];
        while let Ok(cause) = rx.try_recv() {
            causes.push(cause);
        }
        causes.sort();
        causes.dedup();
        let out = notifications(&causes);
        tracing::debug!(
            ?causes,
            notifications = ?out,
            subscribers = notifier.subscribers(),
            "notifying downstream"
        );
        for n in out {
            notifier.notify(n);
            metrics.count_notification();
        }
    }
}

/// Forward one upstream's notifications as changes until the stream ends
/// (the upstream was removed) or the task is dropped.
pub(crate) fn forward(
    cluster_id: String,
    mut stream: NotificationStream,
    changes: Changes,
) -> AbortOnDrop {
    let span = tracing::info_span!("upstream_notifications", cluster_id = %cluster_id);
    let task = tokio::spawn(
        async move {
            let cause = format!("upstream {cluster_id} changed");
            while let Some(n) = stream.next().await {
                tracing::trace!(notification = ?n, "upstream notification");
                match n {
                    Notification::All => changes.signal(cause.clone()),
                    Notification::Cluster(x) => changes.signal_cluster(&cluster_id, x),
                }
            }
        }
        .instrument(span),
    );
    AbortOnDrop(task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_becomes_one_notification() {
        let notifier = Notifier::new();
        let mut downstream = notifier.subscribe();
        let (changes, _task) = start(Duration::from_millis(100), notifier.clone(), Metrics::new());
        for i in 0..50 {
            changes.signal(format!("upstream c{} changed", i % 5));
        }
        let first = tokio::time::timeout(Duration::from_secs(1), downstream.next()).await;
        assert_eq!(first.ok().flatten(), Some(Notification::All));
        // Nothing else was pending.
        let second = tokio::time::timeout(Duration::from_millis(400), downstream.next()).await;
        assert!(
            second.is_err(),
            "a single burst must produce a single notification"
        );
    }

    #[tokio::test]
    async fn changes_after_a_notification_are_not_lost() {
        let notifier = Notifier::new();
        let mut downstream = notifier.subscribe();
        let (changes, _task) = start(Duration::from_millis(100), notifier.clone(), Metrics::new());
        changes.signal("a");
        assert_eq!(downstream.next().await, Some(Notification::All));
        changes.signal("b");
        let again = tokio::time::timeout(Duration::from_secs(1), downstream.next()).await;
        assert_eq!(again.ok().flatten(), Some(Notification::All));
    }

    #[tokio::test]
    async fn forwards_upstream_notifications() {
        let upstream = Notifier::new();
        let notifier = Notifier::new();
        let mut downstream = notifier.subscribe();
        let (changes, _task) = start(Duration::ZERO, notifier.clone(), Metrics::new());
        let _fwd = forward("c1".into(), upstream.subscribe(), changes);
        tokio::task::yield_now().await;
        upstream.notify(Notification::Cluster("x".into()));
        let got = tokio::time::timeout(Duration::from_secs(1), downstream.next()).await;
        assert_eq!(
            got.ok().flatten(),
            Some(Notification::Cluster("x".into())),
            "only x's sum changed"
        );
        upstream.notify(Notification::All);
        let got = tokio::time::timeout(Duration::from_secs(1), downstream.next()).await;
        assert_eq!(got.ok().flatten(), Some(Notification::All));
    }

    fn cluster(c: &str, upstream: &str) -> Cause {
        Cause::Cluster {
            cluster: c.into(),
            upstream: upstream.into(),
        }
    }

    #[test]
    fn a_window_names_its_clusters_unless_everything_changed() {
        let named = [cluster("x", "u1"), cluster("y", "u2"), cluster("x", "u2")];
        assert_eq!(
            notifications(&named),
            [
                Notification::Cluster("x".into()),
                Notification::Cluster("y".into())
            ]
        );
        let mut mixed = named.to_vec();
        mixed.push(Cause::Everything("upstream u3 down".into()));
        assert_eq!(notifications(&mixed), [Notification::All]);
        let many: Vec<Cause> = (0..=MAX_PRECISE)
            .map(|i| cluster(&format!("c{i}"), "u1"))
            .collect();
        assert_eq!(notifications(&many), [Notification::All]);
        let few: Vec<Cause> = (0..MAX_PRECISE)
            .map(|i| cluster(&format!("c{i}"), "u1"))
            .collect();
        assert_eq!(notifications(&few).len(), MAX_PRECISE);
    }
}
