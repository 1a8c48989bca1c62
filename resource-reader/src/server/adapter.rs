//! What the three wire shapes share: the reader behind them, the
//! subscription stream every shape sends (an immediate "all clusters", then
//! one notification per change, ending when the server shuts down), and —
//! for shape A — the last known answers that stand in for a transient
//! failure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use quantity::ResourceList;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::reader::{Notification, ReadError, ResourceReader};
use crate::wire;

/// A reader as seen by one wire shape.
#[derive(Clone)]
pub(crate) struct Adapter {
    pub(crate) reader: Arc<dyn ResourceReader>,
    /// Cancelled at shutdown, to end subscription streams (which would
    /// otherwise hold a graceful shutdown open forever).
    pub(crate) stop: CancellationToken,
    /// Shape A only: never answer a transient error (see [`LastKnown`]).
    pub(crate) last_known: Option<Arc<LastKnown>>,
}

impl Adapter {
    /// Read for `originator` in a span naming it, with the error as the gRPC
    /// status every shape answers.
    pub(crate) async fn read(&self, originator: &str) -> Result<ResourceList, tonic::Status> {
        let span = tracing::debug_span!("read", %originator);
        let answer = match &self.last_known {
            None => self.reader.read(originator).instrument(span).await,
            Some(last_known) => {
                last_known
                    .read(&*self.reader, originator)
                    .instrument(span)
                    .await
            }
        };
        answer.map_err(wire::status_from)
    }

    /// Forget `cluster` in every stage, with the error as the gRPC status
    /// every shape answers.
    pub(crate) async fn remove_cluster(&self, cluster: &str) -> Result<(), tonic::Status> {
        tracing::info!(%cluster, "remove cluster");
        if let Some(last_known) = &self.last_known {
            last_known.forget(cluster);
        }
        self.reader
            .remove_cluster(cluster)
            .await
            .map_err(wire::status_from)
    }

    /// The notifications for one new subscriber.
    ///
    /// Subscribes to the reader before sending the initial `All`, so a
    /// change between the two is not lost. Liqo reads a cluster only after
    /// a notification, so the initial `All` makes a fresh (or re-subscribing)
    /// controller read everything at once.
    pub(crate) fn notifications(
        &self,
        peer: String,
    ) -> impl Stream<Item = Notification> + Send + 'static {
        let updates = self.reader.subscribe();
        let guard = SubscriberGuard::new(peer);
        futures::stream::once(std::future::ready(Notification::All))
            .chain(updates)
            .take_until(self.stop.clone().cancelled_owned())
            .map(move |n| {
                tracing::debug!(peer = %guard.peer, notification = ?n, "notifying");
                n
            })
    }
}

/// Originators whose last answer is kept (the originator string comes from
/// whoever calls, so the map is bounded).
const MAX_REMEMBERED: usize = 1024;

/// Shape A's answer to Liqo v0.5, which takes a failed `ReadResources` as
/// an empty offer and withdraws the ResourceOffer: a transient failure
/// ([`ReadError::Unavailable`]: a source not synced yet, an upstream away)
/// is never answered as such.
///
/// - the reader has answered this originator before: its last answer is
///   served again;
/// - it never has: the read waits, re-trying on every notification and every
///   100 ms, up to `wait` for the first answer.
///
/// Only when the wait runs out with nothing ever known is the error answered
/// (Liqo v0.5 then withdraws the offer — as it would with an empty answer,
/// which is all there is to say).
pub(crate) struct LastKnown {
    wait: Duration,
    answers: Mutex<HashMap<String, ResourceList>>,
}

impl LastKnown {
    pub(crate) fn new(wait: Duration) -> Self {
        Self {
            wait,
            answers: Mutex::default(),
        }
    }

    async fn read(
        &self,
        reader: &dyn ResourceReader,
        originator: &str,
    ) -> Result<ResourceList, ReadError> {
        let reason = match reader.read(originator).await {
            Ok(list) => return Ok(self.remember(originator, list)),
            Err(ReadError::Unavailable(reason)) => reason,
            Err(other) => return Err(other),
        };
        if let Some(list) = self.recall(originator) {
            tracing::warn!(%reason, "cannot read now: serving the last known answer (Liqo v0.5 would withdraw the offer on an error)");
            return Ok(list);
        }
        tracing::info!(%reason, wait = ?self.wait, "not ready yet: waiting for the first answer");
        // A sync between the failed read and this subscription is caught by
        // the periodic re-read.
        let mut notes = reader.subscribe();
        let deadline = Instant::now() + self.wait;
        let mut last = reason;
        while Instant::now() < deadline {
            let pause = Instant::now() + Duration::from_millis(100);
            tokio::select! {
                _ = notes.next() => {}
                () = tokio::time::sleep_until(pause.min(deadline)) => {}
            }
            match reader.read(originator).await {
                Ok(list) => return Ok(self.remember(originator, list)),
                Err(ReadError::Unavailable(reason)) => last = reason,
                Err(other) => return Err(other),
            }
        }
        tracing::warn!(reason = %last, waited = ?self.wait, "no answer known: answering the error");
        Err(ReadError::Unavailable(format!(
            "{last} (waited {:?} for a first answer)",
            self.wait
        )))
    }

    fn remember(&self, originator: &str, list: ResourceList) -> ResourceList {
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        if answers.len() >= MAX_REMEMBERED && !answers.contains_key(originator) {
            if let Some(evicted) = answers.keys().next().cloned() {
                answers.remove(&evicted);
            }
        }
        answers.insert(originator.to_string(), list.clone());
        list
    }

    fn recall(&self, originator: &str) -> Option<ResourceList> {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(originator)
            .cloned()
    }

    fn forget(&self, cluster: &str) {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(cluster);
    }
}

/// Logs when a subscriber comes and goes.
struct SubscriberGuard {
    peer: String,
}

impl SubscriberGuard {
    fn new(peer: String) -> Self {
        tracing::info!(%peer, "subscriber connected");
        Self { peer }
    }
}

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        tracing::info!(peer = %self.peer, "subscriber gone");
    }
}

/// The remote address of a request, for logs.
pub(crate) fn peer<T>(request: &tonic::Request<T>) -> String {
    request
        .remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::reader::{NotificationStream, Notifier};

    /// Unavailable for the first `fail` reads, then answers `cpu: 1`.
    struct Flaky {
        fail: usize,
        reads: AtomicUsize,
        notifier: Notifier,
    }

    #[async_trait::async_trait]
    impl ResourceReader for Flaky {
        async fn read(&self, _originator: &str) -> Result<ResourceList, ReadError> {
            if self.reads.fetch_add(1, Ordering::SeqCst) < self.fail {
                return Err(ReadError::Unavailable("not synced".into()));
            }
            Ok(ResourceList::from_strings([("cpu", "1")]).unwrap())
        }
        fn subscribe(&self) -> NotificationStream {
            self.notifier.subscribe()
        }
        async fn remove_cluster(&self, _cluster: &str) -> Result<(), ReadError> {
            Ok(())
        }
    }

    fn flaky(fail: usize) -> Flaky {
        Flaky {
            fail,
            reads: AtomicUsize::new(0),
            notifier: Notifier::new(),
        }
    }

    #[tokio::test]
    async fn waits_for_the_first_answer() {
        let reader = flaky(3);
        let last_known = LastKnown::new(Duration::from_secs(5));
        let answer = last_known.read(&reader, "c1").await.unwrap();
        assert_eq!(answer.to_strings()["cpu"], "1");
    }

    #[tokio::test]
    async fn serves_the_last_answer_when_the_reader_fails_later() {
        let reader = flaky(0);
        let last_known = LastKnown::new(Duration::from_millis(50));
        last_known.read(&reader, "c1").await.unwrap();
        reader.reads.store(0, Ordering::SeqCst);
        let broken = Flaky {
            fail: usize::MAX,
            ..flaky(0)
        };
        let answer = last_known.read(&broken, "c1").await.unwrap();
        assert_eq!(answer.to_strings()["cpu"], "1");
        // Another originator was never answered: after the wait, the error.
        let started = Instant::now();
        let error = last_known.read(&broken, "c2").await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(matches!(error, ReadError::Unavailable(_)), "{error}");
    }
}
