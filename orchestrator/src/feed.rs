//! Following the catalog's offers: `catalog-client`'s feed follower (the
//! WebSocket feed `GET /subscribe` in its default delta mode — a snapshot
//! on connect, then one `upsert` or `delete` per change), kept as the
//! current set of offers in a `tokio::sync::watch` channel.
//!
//! When the catalog is unreachable or the connection drops, the last set is
//! kept — decisions are never made on an empty catalog that is only down —
//! and the follower reconnects with backoff (0.5 s doubling to 30 s); the
//! snapshot it gets on reconnecting replaces the set whole.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use catalog_client::feed::{self, FollowOptions, Update};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::metrics::Metrics;
use crate::offers::{self, Offers};

pub use catalog_client::feed::{CatalogAddress as Catalog, FeedError};

/// The catalog's offers as last seen.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub offers: Offers,
    /// A snapshot was received at least once.
    pub loaded: bool,
    /// Providers an administrator disabled in the catalog.
    pub disabled: BTreeSet<String>,
}

/// The offers now: connect, take the snapshot, close (for `explain`).
pub async fn fetch(catalog: &Catalog, timeout: Duration) -> Result<Offers, FeedError> {
    Ok(offers::from_wire(&feed::snapshot(catalog, timeout).await?))
}

/// Follow the feed in a task of its own until `shutdown` is cancelled; the
/// sender's receivers (`subscribe()`) see every change.
pub fn follow(
    catalog: Catalog,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> (Arc<watch::Sender<Arc<Snapshot>>>, JoinHandle<()>) {
    let tx = Arc::new(watch::Sender::new(Arc::new(Snapshot::default())));
    let sender = tx.clone();
    let span = tracing::info_span!("catalog_feed", url = %catalog.url());
    let on_update = move |update: Update<'_>| match update {
        Update::Connected(up) => metrics.set_catalog_connected(up),
        Update::Offers(all) => {
            metrics.count_feed_event();
            let offers = offers::from_wire(all);
            tx.send_modify(|s| {
                *s = Arc::new(Snapshot {
                    offers,
                    loaded: true,
                    disabled: s.disabled.clone(),
                })
            });
        }
    };
    let task = tokio::spawn(
        feed::follow(
            catalog,
            FollowOptions::default(),
            on_update,
            shutdown.cancelled_owned(),
        )
        .instrument(span),
    );
    (sender, task)
}
