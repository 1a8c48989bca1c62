//! The feed's two long-lived tasks: the publisher, which follows the store's
//! changes into the [`Hub`], and the housekeeping, which pings, times out,
//! cuts, and closes everything on shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::hub::Hub;
use crate::store::{OfferChange, OfferFilter, Store};

/// Follow `store.changes()` until shutdown. The list is (re)loaded from the
/// store at start, on [`OfferChange::Resync`] (the MongoDB change stream
/// could not resume) and when this task fell behind the change channel, so
/// subscribers never miss a change: at worst they get a fresh full list.
pub(crate) async fn publish(hub: Arc<Hub>, store: Arc<dyn Store>, shutdown: CancellationToken) {
    // Subscribe before loading: a change committed during the load is then
    // seen twice at worst, and versions drop the second copy.
    let mut changes = store.changes();
    let mut reload = true;
    loop {
        if reload {
            let Some(offers) = load(&*store, &shutdown).await else {
                return;
            };
            hub.reload(offers, Instant::now());
            reload = false;
        }
        let change = tokio::select! {
            _ = shutdown.cancelled() => return,
            change = changes.recv() => change,
        };
        match change {
            Ok(OfferChange::Resync) => {
                info!("the store asks for a resync; reloading the feed's list");
                reload = true;
            }
            Ok(change) => hub.apply(change, Instant::now()),
            Err(RecvError::Lagged(missed)) => {
                warn!(
                    missed,
                    "the feed fell behind the store's changes; reloading its list"
                );
                reload = true;
            }
            Err(RecvError::Closed) => {
                warn!("the store's change channel closed; the feed stops following changes");
                return;
            }
        }
    }
}

/// Every offer, retrying with backoff while the store is unreachable.
/// `None` on shutdown.
async fn load(store: &dyn Store, shutdown: &CancellationToken) -> Option<Vec<crate::model::Offer>> {
    let everything = OfferFilter::default();
    let mut delay = Duration::from_millis(100);
    loop {
        let attempt = tokio::select! {
            _ = shutdown.cancelled() => return None,
            r = store.list_offers(&everything) => r,
        };
        match attempt {
            Ok(offers) => return Some(offers),
            Err(e) => {
                warn!(error = %e, retry_in = ?delay, "loading the feed's list failed");
                tokio::select! {
                    _ = shutdown.cancelled() => return None,
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Sweep the subscribers periodically; on shutdown, close them all (and
/// keep sweeping, so connections stuck on their close frame get cut).
pub(crate) async fn housekeep(hub: Arc<Hub>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(hub.config().sweep_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut closed = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled(), if !closed => {
                closed = true;
                hub.shutdown();
            }
            _ = tick.tick() => hub.sweep(Instant::now()),
        }
    }
}
