//! The ResourceReader contract: the trait every source and stage implements,
//! the notifications readers push, and the [`Layer`] trait that wraps one
//! reader in another.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use quantity::ResourceList;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;

/// "The answer may have changed": for one cluster, or for every cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Notification {
    /// Re-check every cluster.
    All,
    /// Re-check this cluster only.
    Cluster(String),
}

impl Notification {
    /// The wire form used by Liqo (shapes B and C): an empty cluster ID means
    /// "every cluster".
    pub fn from_cluster_id(cluster_id: impl Into<String>) -> Self {
        let id = cluster_id.into();
        if id.is_empty() {
            Notification::All
        } else {
            Notification::Cluster(id)
        }
    }

    /// The cluster ID to put on the wire: empty for [`Notification::All`].
    pub fn cluster_id(&self) -> &str {
        match self {
            Notification::All => "",
            Notification::Cluster(id) => id,
        }
    }

    /// Whether a cluster must re-read after this notification.
    pub fn concerns(&self, cluster: &str) -> bool {
        match self {
            Notification::All => true,
            Notification::Cluster(id) => id == cluster,
        }
    }
}

/// The notifications of one subscriber. It ends only when the reader that
/// produced it is gone.
pub type NotificationStream = Pin<Box<dyn Stream<Item = Notification> + Send + 'static>>;

/// Why a reader could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The answer cannot be computed right now (an upstream is unreachable,
    /// a source has not synced yet); retrying later may succeed. Served as
    /// gRPC `UNAVAILABLE`.
    #[error("{0}")]
    Unavailable(String),
    /// The request itself is wrong. Served as gRPC `INVALID_ARGUMENT`.
    #[error("{0}")]
    InvalidArgument(String),
    /// Anything else (an upstream answered garbage). Served as gRPC `INTERNAL`.
    #[error("{0}")]
    Internal(String),
}

/// Answers *which resources may be offered to cluster X right now?* and
/// tells when that answer may have changed.
///
/// Implementations must make [`read`](ResourceReader::read) idempotent and
/// cheap: Liqo re-reads every cluster periodically and after every
/// notification. A reader never offers a cluster its own resources.
#[async_trait::async_trait]
pub trait ResourceReader: Send + Sync + 'static {
    /// The resources that may be offered to `originator` (the cluster that
    /// asks), resource name → quantity.
    async fn read(&self, originator: &str) -> Result<ResourceList, ReadError>;

    /// A stream of change notifications. Every notification that happens
    /// after this call returns is delivered; a subscriber that falls behind
    /// gets a [`Notification::All`] in place of what it missed.
    fn subscribe(&self) -> NotificationStream;

    /// Forget everything held for `cluster` (its peering is gone). Stages
    /// forward the call upstream, so it reaches every stage of a chain.
    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError>;
}

/// A shared or boxed reader reads as the reader it holds.
macro_rules! reader_through {
    ($($holder:ident),*) => {$(
        #[async_trait::async_trait]
        impl<T: ResourceReader + ?Sized> ResourceReader for $holder<T> {
            async fn read(&self, originator: &str) -> Result<ResourceList, ReadError> {
                (**self).read(originator).await
            }
            fn subscribe(&self) -> NotificationStream {
                (**self).subscribe()
            }
            async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
                (**self).remove_cluster(cluster).await
            }
        }
    )*};
}

reader_through!(Arc, Box);

/// Wraps a reader in a stage, in the spirit of `tower::Layer`.
pub trait Layer<R> {
    /// The wrapped reader.
    type Reader: ResourceReader;
    /// Put this stage in front of `inner`.
    fn layer(&self, inner: R) -> Self::Reader;
}

/// `reader.layer(stage)`: chain stages left to right, source first.
pub trait ReaderExt: ResourceReader + Sized {
    /// Wrap `self` in the stage `layer` builds.
    fn layer<L: Layer<Self>>(self, layer: L) -> L::Reader {
        layer.layer(self)
    }

    /// Erase the type, for chains assembled at run time.
    fn boxed(self) -> Arc<dyn ResourceReader> {
        Arc::new(self)
    }
}

impl<R: ResourceReader + Sized> ReaderExt for R {}

/// Fan-out of notifications to any number of subscribers; what sources use
/// to implement [`ResourceReader::subscribe`].
#[derive(Debug, Clone)]
pub struct Notifier {
    tx: broadcast::Sender<Notification>,
}

/// Notifications buffered per subscriber before it is considered lagging
/// (and gets one `All` in place of what it missed).
const NOTIFICATION_BUFFER: usize = 64;

impl Notifier {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(NOTIFICATION_BUFFER);
        Self { tx }
    }

    /// Send to every current subscriber; nobody listening is not an error.
    pub fn notify(&self, notification: Notification) {
        let _ = self.tx.send(notification);
    }

    /// A new subscriber, receiving every notification sent from now on.
    pub fn subscribe(&self) -> NotificationStream {
        BroadcastStream::new(self.tx.subscribe())
            .map(|item| item.unwrap_or(Notification::All))
            .boxed()
    }

    /// How many subscribers are listening.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }
}

impl Default for Notifier {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_cluster_ids_round_trip() {
        assert_eq!(Notification::from_cluster_id(""), Notification::All);
        assert_eq!(
            Notification::from_cluster_id("c1"),
            Notification::Cluster("c1".into())
        );
        assert_eq!(Notification::All.cluster_id(), "");
        assert_eq!(Notification::Cluster("c1".into()).cluster_id(), "c1");
        assert!(Notification::All.concerns("x"));
        assert!(!Notification::Cluster("c1".into()).concerns("x"));
    }

    #[tokio::test]
    async fn lagging_subscriber_gets_all() {
        let notifier = Notifier::new();
        let mut sub = notifier.subscribe();
        for i in 0..(NOTIFICATION_BUFFER + 10) {
            notifier.notify(Notification::Cluster(format!("c{i}")));
        }
        assert_eq!(sub.next().await, Some(Notification::All));
        // After the lag marker, the most recent notifications are delivered.
        assert!(matches!(sub.next().await, Some(Notification::Cluster(_))));
    }

    #[tokio::test]
    async fn subscriber_only_sees_later_notifications() {
        let notifier = Notifier::new();
        notifier.notify(Notification::Cluster("before".into()));
        let mut sub = notifier.subscribe();
        notifier.notify(Notification::Cluster("after".into()));
        assert_eq!(
            sub.next().await,
            Some(Notification::Cluster("after".into()))
        );
    }
}
