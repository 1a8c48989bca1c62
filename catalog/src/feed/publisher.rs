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
//!
//! A reloaded list must hold everything subscribers were already sent
//! (issue 41, dbfault s3: a resync list read before writes the feed had
//! sent lacked their offers, which vanished and came back with the next
//! change). So each offer the hub holds that a list lacks is read again by
//! id, after the list: found, it joins the list (at the version read then,
//! never older than the list's moment); not found, the store confirms it
//! deleted and the list may lack it ([`read_list`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, Notify};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::hub::{Hub, Reloaded};
use crate::offers::{Offer, OfferChange, OfferFilter, OfferStore};
use crate::store::StoreError;

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

/// How many of the offers a list lacks are read again by id at once
/// ([`read_list`]): from memory (MongoDB while its stream is up, the
/// embedded store) each read is immediate; from the database, a list that
/// lacks many offers (a wiped database) is confirmed this many round trips
/// at a time.
pub(crate) const CONFIRM_CONCURRENCY: usize = 16;

/// How many times a list older than the feed's ([`Reloaded::Older`],
/// [`Reloaded::Lacks`]) is read again before it is taken anyway: the store catches up within
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
            let Some((offers, gone)) = load(&*store, &follower.hub, &shutdown).await else {
                return;
            };
            let allow_older = older_reads >= OLDER_REREADS;
            match follower
                .hub
                .reload(offers, &gone, Instant::now(), allow_older)
            {
                Reloaded::Older { id, listed, held } => {
                    older_reads += 1;
                    let pause = older_pause(older_reads);
                    info!(offer = %id, listed, held, retry_in = ?pause,
                        "the store's list is older than the feed's; reading it again");
                    reread_at = Some(tokio::time::Instant::now() + pause);
                }
                Reloaded::Lacks { id, held } => {
                    older_reads += 1;
                    let pause = older_pause(older_reads);
                    info!(offer = %id, held, retry_in = ?pause,
                        "the store's list lacks an offer the feed sent; reading it again");
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

/// Every offer, with the offers `hub` holds that the store confirmed
/// deleted ([`read_list`]), retrying with backoff while the store is
/// unreachable. `None` on shutdown.
async fn load(
    store: &dyn OfferStore,
    hub: &Hub,
    shutdown: &CancellationToken,
) -> Option<(Vec<Offer>, HashSet<String>)> {
    let mut delay = Duration::from_millis(100);
    loop {
        let attempt = tokio::select! {
            _ = shutdown.cancelled() => return None,
            r = read_list(store, hub) => r,
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

/// Every offer, and the offers `hub` holds that the list lacks and a read
/// by id, after the list, found deleted. Those a read by id finds join the
/// list: the list was read before their write, which subscribers were
/// already sent (see the module docs).
pub(crate) async fn read_list(
    store: &dyn OfferStore,
    hub: &Hub,
) -> Result<(Vec<Offer>, HashSet<String>), StoreError> {
    let mut offers = store.list_offers(&OfferFilter::default()).await?;
    let reread: Vec<(String, Option<Offer>)> = futures::stream::iter(hub.lacking(&offers))
        .map(|id| async move { store.get_offer(&id).await.map(|o| (id, o)) })
        .buffer_unordered(CONFIRM_CONCURRENCY)
        .try_collect()
        .await?;
    let mut gone = HashSet::new();
    for (id, found) in reread {
        match found {
            Some(offer) => {
                debug!(offer = %id, version = offer.version,
                    "the store's list lacked an offer the feed sent; taking it as read by id");
                offers.push(offer);
            }
            None => {
                gone.insert(id);
            }
        }
    }
    offers.sort_by(|a, b| a.id.cmp(&b.id));
    Ok((offers, gone))
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
    use std::collections::BTreeMap;

    use async_trait::async_trait;
    use serde_json::Value;

    use super::super::hub::tests::{drain, hub, offer, subscribe};
    use super::*;
    use crate::offers::{OfferDraft, PutOutcome};

    /// A store whose list is read before its latest writes (as a database
    /// read overlapping them, or one served by a node behind), while a
    /// read by id sees them.
    struct Lagging {
        truth: Mutex<BTreeMap<String, Offer>>,
        listed: Mutex<Vec<Offer>>,
        tx: broadcast::Sender<OfferChange>,
    }

    impl Lagging {
        /// Commit `offer` and publish it, as a store does before it
        /// acknowledges; the list stays as it was.
        fn write(&self, offer: Offer) {
            self.truth
                .lock()
                .unwrap()
                .insert(offer.id.clone(), offer.clone());
            self.tx.send(OfferChange::Upserted(offer)).unwrap();
        }
    }

    #[async_trait]
    impl OfferStore for Lagging {
        async fn list_offers_page(
            &self,
            _: &OfferFilter,
            _: Option<&str>,
            _: usize,
        ) -> Result<Vec<Offer>, StoreError> {
            Ok(self.listed.lock().unwrap().clone())
        }
        async fn get_offer(&self, id: &str) -> Result<Option<Offer>, StoreError> {
            Ok(self.truth.lock().unwrap().get(id).cloned())
        }
        async fn put_offer(&self, _: OfferDraft, _: Option<u64>) -> Result<PutOutcome, StoreError> {
            Err(StoreError::Internal("read-only".into()))
        }
        async fn delete_offer(&self, _: &str, _: &str) -> Result<Offer, StoreError> {
            Err(StoreError::Internal("read-only".into()))
        }
        async fn count_offers(&self) -> Result<u64, StoreError> {
            Ok(self.truth.lock().unwrap().len() as u64)
        }
        fn changes(&self) -> broadcast::Receiver<OfferChange> {
            self.tx.subscribe()
        }
    }

    /// Messages for `sub` until one satisfies `last` (within a few
    /// seconds: the publisher applies each change as soon as it runs).
    async fn until(
        sub: &super::super::subscriber::Subscriber,
        last: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        loop {
            let batch = drain(sub);
            let done = batch.iter().any(&last);
            got.extend(batch);
            if done {
                return got;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never came; got {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn listed_ids(m: &Value) -> Vec<&str> {
        m["offers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap())
            .collect()
    }

    /// Issue 41, dbfault s3: a resync whose list the store read before a
    /// write the feed had already sent must not make that offer vanish
    /// (the old feed sent a snapshot without it, and it came back with the
    /// next change). An offer the store really deleted meanwhile (no
    /// change published: the stream missed it) leaves with the resync.
    #[tokio::test]
    async fn a_resync_holds_every_offer_already_sent() {
        let store = Arc::new(Lagging {
            truth: Mutex::new(BTreeMap::from([("a".to_string(), offer("a", "x", 1))])),
            listed: Mutex::new(vec![offer("a", "x", 1)]),
            tx: broadcast::channel(16).0,
        });
        let h = Arc::new(hub(64));
        let follower = Arc::new(Follower::new(h.clone(), &*store));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(publish(follower, store.clone(), shutdown.clone()));
        let sub = subscribe(&h, "mode=delta");
        until(&sub, |m| m["type"] == "snapshot").await;

        store.write(offer("new", "x", 1));
        until(&sub, |m| m["offer"]["id"] == "new").await;
        // The store asks for a resync; its list was read before "new".
        store.tx.send(OfferChange::Resync).unwrap();
        // A later change: whatever the resync sent comes before it.
        store.write(offer("b", "x", 1));
        let after = until(&sub, |m| m["offer"]["id"] == "b").await;
        for m in after.iter().filter(|m| m["type"] == "snapshot") {
            assert!(
                listed_ids(m).contains(&"new"),
                "a resync snapshot lacks an offer already sent: {m}"
            );
        }

        // "a" deleted while the store's stream was down (no change
        // published); the next resync's list is current: "a" leaves.
        store.truth.lock().unwrap().remove("a");
        *store.listed.lock().unwrap() = vec![offer("b", "x", 1), offer("new", "x", 1)];
        store.tx.send(OfferChange::Resync).unwrap();
        let m = until(&sub, |m| m["type"] == "snapshot").await;
        assert_eq!(listed_ids(m.last().unwrap()), ["b", "new"]);

        shutdown.cancel();
        task.await.unwrap();
    }

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
