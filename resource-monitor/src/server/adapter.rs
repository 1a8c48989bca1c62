//! What the three wire shapes share: the reader behind them, and the
//! subscription stream every shape sends (an immediate "all clusters", then
//! one notification per change, ending when the server shuts down).

use std::sync::Arc;

use futures::{Stream, StreamExt};
use quantity::ResourceList;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::reader::{Notification, ResourceReader};
use crate::wire;

/// A reader as seen by one wire shape.
#[derive(Clone)]
pub(crate) struct Adapter {
    pub(crate) reader: Arc<dyn ResourceReader>,
    /// Cancelled at shutdown, to end subscription streams (which would
    /// otherwise hold a graceful shutdown open forever).
    pub(crate) stop: CancellationToken,
}

impl Adapter {
    /// Read for `originator` in a span naming it, with the error as the gRPC
    /// status every shape answers.
    pub(crate) async fn read(&self, originator: &str) -> Result<ResourceList, tonic::Status> {
        let span = tracing::debug_span!("read", %originator);
        self.reader
            .read(originator)
            .instrument(span)
            .await
            .map_err(wire::status_from)
    }

    /// Forget `cluster` in every stage, with the error as the gRPC status
    /// every shape answers.
    pub(crate) async fn remove_cluster(&self, cluster: &str) -> Result<(), tonic::Status> {
        tracing::info!(%cluster, "remove cluster");
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
