//! Following the store into the [`Hub`]: the [`Follower`] (which anyone
//! may ask to catch up), the publisher task that drives it, and the
//! housekeeping task (pings, timeouts, cuts, closing everything on
//! shutdown).
//!
//! The store publishes each committed change on a broadcast channel before
//! the write is acknowledged (MongoDB: the writing process at once, every
//! process again when its change stream delivers it; the hub keeps the
//! newest by version). The publisher task applies them as they come; a new subscriber's
//! handler first [catches up](Follower::catch_up) itself, so its first list
//! includes every change already published, including a write acknowledged
//! a moment before it connected.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, Notify};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::hub::{Hub, Reloaded};
use crate::offers::{OfferChange, OfferFilter, OfferStore};

/// The store's change channel, drained into the hub.
pub(crate) struct Follower {
    hub: Arc<Hub>,
    changes: Mutex<Changes>,
    /// The publisher must reload the whole list (start, resync, lag).
    reload: AtomicBool,
    wake: Notify,
}

struct Changes {
    rx: broadcast::Receiver<OfferChange>,
    /// The hub holds a loaded list and no reload is under way: changes may
    /// be applied. While false they stay in the channel, to be applied on
    /// top of the list being loaded.
    current: bool,
}

impl Follower {
    /// Subscribe to `store`'s changes now, before the first load, so none
    /// committed during the load is missed.
    pub fn new(hub: Arc<Hub>, store: &dyn OfferStore) -> Self {
        Follower {
            hub,
            changes: Mutex::new(Changes {
                rx: store.changes(),
                current: false,
            }),
            reload: AtomicBool::new(true),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Changes> {
        self.changes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Apply every change published so far (nothing while a reload is under
    /// way: the reload will).
    pub fn catch_up(&self) {
        let mut ch = self.lock();
        if !ch.current {
            return;
        }
        let now = Instant::now();
        loop {
            match ch.rx.try_recv() {
                Ok(OfferChange::Resync) => {
                    info!("the store asks for a resync; reloading the feed's list");
                    self.request_reload(&mut ch);
                    return;
                }
                Ok(change) => self.hub.apply(change, now),
                Err(TryRecvError::Lagged(missed)) => {
                    warn!(
                        missed,
                        "the feed fell behind the store's changes; reloading its list"
                    );
                    self.request_reload(&mut ch);
                    return;
                }
                Err(TryRecvError::Empty) | Err(TryRecvError::Closed) => return,
            }
        }
    }

    fn request_reload(&self, ch: &mut Changes) {
        ch.current = false;
        self.reload.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }
}

/// How many times a list older than the feed's ([`Reloaded::Older`]) is
/// read again before it is taken anyway: the store catches up within
/// milliseconds (MongoDB applies its change stream's backlog), so a list
/// that stays older for seconds means the feed holds what the store lost.
const OLDER_REREADS: u32 = 8;

/// The pause before re-reading an older list for the `n`-th time (from
/// 1): 50 ms doubling to 1 s, about 4.5 s over [`OLDER_REREADS`].
fn older_pause(n: u32) -> Duration {
    (Duration::from_millis(50) * 2u32.saturating_pow(n.saturating_sub(1)))
        .min(Duration::from_secs(1))
}

/// Drive `follower` until shutdown: (re)load the list when asked, apply
/// changes as they are published. One load at a time: requests that come
/// during one are served by one more load after it, which starts after
/// them (so its read is ordered after whatever failure asked for it).
pub(crate) async fn publish(
    follower: Arc<Follower>,
    store: Arc<dyn OfferStore>,
    shutdown: CancellationToken,
) {
    // A second receiver only to be woken: the changes themselves are taken
    // from the follower's (which handlers may drain too).
    let mut signal = store.changes();
    // Consecutive lists refused as older, and when to read again.
    let mut older_reads = 0u32;
    let mut reread_at: Option<tokio::time::Instant> = None;
    loop {
        if follower.reload.swap(false, Ordering::SeqCst) {
            follower.lock().current = false;
            let Some(offers) = load(&*store, &shutdown).await else {
                return;
            };
            let allow_older = older_reads >= OLDER_REREADS;
            match follower.hub.reload(offers, Instant::now(), allow_older) {
                Reloaded::Older { id, listed, held } => {
                    older_reads += 1;
                    let pause = older_pause(older_reads);
                    info!(offer = %id, listed, held, retry_in = ?pause,
                        "the store's list is older than the feed's; reading it again");
                    reread_at = Some(tokio::time::Instant::now() + pause);
                }
                Reloaded::Replaced | Reloaded::Unchanged => {
                    older_reads = 0;
                    reread_at = None;
                }
            }
            // Changes published meanwhile apply on top, whichever list
            // the hub kept (each is checked against its offer's version).
            follower.lock().current = true;
        }
        follower.catch_up();
        if follower.reload.load(Ordering::SeqCst) {
            continue;
        }
        let reread = async {
            match reread_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = follower.wake.notified() => {}
            _ = reread => {
                reread_at = None;
                follower.reload.store(true, Ordering::SeqCst);
            }
            r = signal.recv() => {
                if let Err(RecvError::Closed) = r {
                    warn!("the store's change channel closed; the feed stops following changes");
                    return;
                }
            }
        }
    }
}

/// Every offer, retrying with backoff while the store is unreachable.
/// `None` on shutdown.
async fn load(
    store: &dyn OfferStore,
    shutdown: &CancellationToken,
) -> Option<Vec<crate::offers::Offer>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Re-reads of an older list back off from 50 ms to 1 s and give up
    /// after a few seconds in all.
    #[test]
    fn older_lists_are_reread_with_a_bounded_backoff() {
        let pauses: Vec<u64> = (1..=OLDER_REREADS)
            .map(|n| older_pause(n).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(older_pause(u32::MAX), Duration::from_secs(1));
    }
}
