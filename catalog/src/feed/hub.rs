//! The hub: the current offer list, the subscribers grouped by filter, and
//! the fan-out of every change.
//!
//! Everything lives under one lock, held only for in-memory work (never
//! across an await or a socket write), so a subscriber's registration is
//! ordered with the changes: it gets a list at the current `seq` and every
//! change after it, without a gap or a duplicate.
//!
//! Subscribers with the same filter (same canonical query) form a group
//! that shares its filtered list. Per change, each affected group gets one
//! list frame (only if it has snapshot-mode members) and the change's one
//! delta frame; the frames are built once and their bytes shared.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use catalog_client::wire::Pricing;
use tracing::{debug, info, warn};

use super::config::FeedConfig;
use super::conn::ConnFd;
use super::envelope::{self, Message};
use super::metrics::{CloseReason, FeedMetrics};
use super::params::{Mode, SubscribeParams};
use super::subscriber::{Reaped, Subscriber};
use crate::offers::Offer;
use crate::offers::{OfferChange, OfferFilter};
use crate::store::sequence::{self, ListCheck, Sequence, Versioned};

impl Versioned for Offer {
    fn key(&self) -> &str {
        &self.id
    }
    fn version(&self) -> u64 {
        self.version
    }
}

/// WebSocket close codes the feed uses.
pub mod close_code {
    /// The server is going away: shutdown or idle timeout.
    pub const GOING_AWAY: u16 = 1001;
    /// The client broke the protocol.
    pub const PROTOCOL: u16 = 1002;
    /// Policy violation: the subscriber fell behind.
    pub const POLICY: u16 = 1008;
    /// A client message was larger than allowed.
    pub const TOO_BIG: u16 = 1009;
}

/// Longest a shutdown waits for a close frame to go out before cutting.
const SHUTDOWN_CUT_AFTER: Duration = Duration::from_secs(2);

/// Why a subscription was refused (each is a 503 with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the feed already has its maximum of {0} subscribers; retry later")]
    Full(usize),
    #[error("the feed already serves its maximum of {0} distinct filters; retry later or use a common filter")]
    TooManyFilters(usize),
    #[error("the catalog is shutting down")]
    ShuttingDown,
}

/// One offer in the feed's list, with its public JSON.
struct Entry {
    offer: Offer,
    json: Bytes,
}

impl Entry {
    /// The entry of `offer`, served with `pricing` (as `GET /offers` serves it).
    fn new(mut offer: Offer, pricing: Option<&Pricing>) -> Self {
        offer.pricing = pricing.cloned();
        Entry {
            json: envelope::offer_json(&offer),
            offer,
        }
    }
}

/// Subscribers sharing one filter.
struct Group {
    filter: OfferFilter,
    members: HashMap<u64, Arc<Subscriber>>,
    snapshot_members: usize,
    /// The filtered list's JSON array, while no change has touched it.
    array: Option<Bytes>,
    /// The list message last built, and its `seq`.
    frame: Option<(u64, Message)>,
}

impl Group {
    fn new(filter: OfferFilter) -> Self {
        Group {
            filter,
            members: HashMap::new(),
            snapshot_members: 0,
            array: None,
            frame: None,
        }
    }

    fn invalidate(&mut self) {
        self.array = None;
        self.frame = None;
    }

    /// The list message at `seq` (built at most once per `seq`).
    fn list_frame(&mut self, seq: u64, offers: &BTreeMap<String, Entry>) -> Message {
        if let Some((s, f)) = &self.frame {
            if *s == seq {
                return f.clone();
            }
        }
        let filter = &self.filter;
        let array = self
            .array
            .get_or_insert_with(|| {
                envelope::offer_array(
                    offers
                        .values()
                        .filter(|e| filter.matches(&e.offer))
                        .map(|e| &e.json),
                )
            })
            .clone();
        let frame = envelope::snapshot(seq, &array);
        self.frame = Some((seq, frame.clone()));
        frame
    }

    fn remove(&mut self, sub: &Subscriber) -> bool {
        let removed = self.members.remove(&sub.id).is_some();
        if removed && sub.mode == Mode::Snapshot {
            self.snapshot_members -= 1;
        }
        removed
    }
}

struct State {
    /// The first list has been loaded.
    ready: bool,
    shutting_down: bool,
    /// Offer-list changes published so far.
    seq: Sequence,
    offers: BTreeMap<String, Entry>,
    groups: HashMap<String, Group>,
    /// Subscribers the server is closing, until their connection ends.
    closing: HashMap<u64, Arc<Subscriber>>,
    next_id: u64,
    next_ping: Instant,
}

/// What [`Hub::reload`] did with a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reloaded {
    /// It replaced the hub's list and went to every subscriber.
    Replaced,
    /// The same offers at the same versions: nothing sent.
    Unchanged,
    /// Refused, nothing sent: the list holds offer `id` at version
    /// `listed`, older than the `held` one subscribers were already sent,
    /// so it was read before changes the hub has (its missing offers may
    /// be ones it has not seen yet, not deletions).
    Older { id: String, listed: u64, held: u64 },
    /// Refused, nothing sent: the list lacks offer `id`, sent at version
    /// `held`, and the store did not confirm it deleted — the list was
    /// read before that write (issue 41, dbfault s3).
    Lacks { id: String, held: u64 },
}

/// The version of each offer `offers` holds.
fn versions(offers: &BTreeMap<String, Entry>) -> BTreeMap<String, u64> {
    offers
        .iter()
        .map(|(id, e)| (id.clone(), e.offer.version))
        .collect()
}

/// See the module docs.
pub(crate) struct Hub {
    state: Mutex<State>,
    config: FeedConfig,
    pub metrics: FeedMetrics,
    /// Open connections (registered and not yet dropped), for the limit.
    connections: AtomicUsize,
    /// The catalog's pricing, stamped on every offer sent.
    pricing: Option<Pricing>,
}

/// What to do with a subscriber found wanting.
type Verdict = (Arc<Subscriber>, CloseReason);

impl Hub {
    pub fn new(config: FeedConfig, metrics: FeedMetrics) -> Self {
        Hub {
            state: Mutex::new(State {
                ready: false,
                shutting_down: false,
                seq: Sequence::default(),
                offers: BTreeMap::new(),
                groups: HashMap::new(),
                closing: HashMap::new(),
                next_id: 1,
                next_ping: Instant::now() + config.feed_ping_interval,
            }),
            config,
            metrics,
            connections: AtomicUsize::new(0),
            pricing: None,
        }
    }

    /// The hub, stamping `pricing` on every offer it sends.
    pub fn with_pricing(self, pricing: Pricing) -> Self {
        Hub {
            pricing: Some(pricing),
            ..self
        }
    }

    pub fn config(&self) -> &FeedConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Add a subscriber; it gets the current list at once (or as soon as the
    /// first list is loaded). Every `Ok` must be paired with one
    /// [`Hub::unregister`] when its connection ends.
    pub fn register(
        &self,
        params: SubscribeParams,
        fd: Option<ConnFd>,
    ) -> Result<Arc<Subscriber>, Refused> {
        let max = self.config.feed_max_subscribers;
        let taken = self
            .connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        if taken.is_err() {
            self.metrics.refused.inc();
            return Err(Refused::Full(max));
        }
        let refuse = |e: Refused| {
            self.connections.fetch_sub(1, Ordering::AcqRel);
            self.metrics.refused.inc();
            Err(e)
        };
        let now = Instant::now();
        let mut st = self.lock();
        if st.shutting_down {
            return refuse(Refused::ShuttingDown);
        }
        if !st.groups.contains_key(&params.filter_key)
            && st.groups.len() >= self.config.feed_max_filters
        {
            return refuse(Refused::TooManyFilters(self.config.feed_max_filters));
        }
        let id = st.next_id;
        st.next_id += 1;
        let (ready, seq) = (st.ready, st.seq.current());
        let State { groups, offers, .. } = &mut *st;
        let group = groups
            .entry(params.filter_key.clone())
            .or_insert_with(|| Group::new(params.filter));
        let sub = Arc::new(Subscriber::new(
            id,
            params.mode,
            params.filter_key,
            params.deflate,
            fd,
            now,
        ));
        if ready {
            sub.push_list(&group.list_frame(seq, offers), now);
        }
        group.members.insert(id, sub.clone());
        if sub.mode == Mode::Snapshot {
            group.snapshot_members += 1;
        }
        drop(st);
        self.metrics.subscribers.inc();
        self.metrics.mode_gauge(sub.mode).inc();
        Ok(sub)
    }

    /// The subscriber's connection ended.
    pub fn unregister(&self, sub: &Subscriber) {
        {
            let mut st = self.lock();
            if let Some(group) = st.groups.get_mut(&sub.filter_key) {
                if group.remove(sub) && group.members.is_empty() {
                    st.groups.remove(&sub.filter_key);
                }
            }
            st.closing.remove(&sub.id);
        }
        self.connections.fetch_sub(1, Ordering::AcqRel);
        self.metrics.subscribers.dec();
        self.metrics.mode_gauge(sub.mode).dec();
    }

    /// The offers the hub holds (so subscribers were sent) that `list`
    /// lacks: the caller confirms each gone (or not) with the store before
    /// [`Hub::reload`]. None before the first list.
    pub fn lacking(&self, list: &[Offer]) -> Vec<String> {
        let st = self.lock();
        if !st.ready {
            return Vec::new();
        }
        sequence::lacking(&versions(&st.offers), list)
    }

    /// Replace the whole list (first load, resync, lag): every subscriber
    /// gets the new list. A reload that changes nothing sends nothing, and
    /// one that is older than what the hub already sent is refused: an
    /// offer at a lower version than the hub holds ([`Reloaded::Older`]),
    /// or an offer the hub holds missing without being in `gone` (the
    /// offers the store confirmed deleted after the list was read;
    /// [`Reloaded::Lacks`]). No subscriber is ever sent an offer older than
    /// one it was sent, nor a list older than what it was sent
    /// ([`sequence::check_list`]). Only `allow_older` (the caller gave
    /// the store time to catch up and it did not: the hub's copy is what is
    /// wrong, e.g. a write the database lost) takes such a list.
    pub fn reload(
        &self,
        offers: Vec<Offer>,
        gone: &HashSet<String>,
        published: Instant,
        allow_older: bool,
    ) -> Reloaded {
        self.metrics.reloads.inc();
        let mut st = self.lock();
        if st.ready {
            let refused = match sequence::check_list(&versions(&st.offers), &offers, gone) {
                ListCheck::Same => {
                    debug!("reload found no change");
                    return Reloaded::Unchanged;
                }
                ListCheck::Newer => None,
                ListCheck::Older { key, listed, held } => Some(Reloaded::Older {
                    id: key,
                    listed,
                    held,
                }),
                ListCheck::Lacks { key, held } => Some(Reloaded::Lacks { id: key, held }),
            };
            if let Some(refused) = refused {
                if !allow_older {
                    return refused;
                }
                warn!(
                    ?refused,
                    "the store's list stays older than the feed's; taking it as the truth"
                );
            }
            st.seq.advance();
            self.metrics.changes.inc();
        }
        st.ready = true;
        st.offers = offers
            .into_iter()
            .map(|o| (o.id.clone(), Entry::new(o, self.pricing.as_ref())))
            .collect();
        let seq = st.seq.current();
        let State { groups, offers, .. } = &mut *st;
        for group in groups.values_mut() {
            group.invalidate();
            let frame = group.list_frame(seq, offers);
            for sub in group.members.values() {
                sub.push_list(&frame, published);
            }
        }
        info!(seq, offers = st.offers.len(), "feed list loaded");
        Reloaded::Replaced
    }

    /// Publish one committed change, unless the hub already holds its
    /// offer at this version or a newer one ([`sequence::newer`]): a
    /// subscriber gets the latest version of each offer, never an older
    /// one, and intermediate versions a newer copy superseded are skipped.
    pub fn apply(&self, change: OfferChange, published: Instant) {
        let mut st = self.lock();
        if !st.ready {
            // The first load will include it.
            return;
        }
        let (id, new) = match change {
            OfferChange::Upserted(offer) => {
                let held = st.offers.get(&offer.id).map(|e| e.offer.version);
                if !sequence::newer(held, offer.version) {
                    return;
                }
                (
                    offer.id.clone(),
                    Some(Entry::new(offer, self.pricing.as_ref())),
                )
            }
            OfferChange::Deleted { id, version, .. } => {
                // Nothing held: nothing to delete (subscribers never had it).
                let Some(held) = st.offers.get(&id).map(|e| e.offer.version) else {
                    return;
                };
                if !sequence::newer(Some(held), version) {
                    return;
                }
                (id, None)
            }
            OfferChange::Resync => return,
        };
        let seq = st.seq.advance();
        self.metrics.changes.inc();
        let new_json = new.as_ref().map(|e| e.json.clone());
        let new_offer = new.as_ref().map(|e| e.offer.clone());
        let old = match new {
            Some(entry) => st.offers.insert(id.clone(), entry),
            None => st.offers.remove(&id),
        };
        let cap = usize::from(self.config.feed_queue);
        let mut upsert = None;
        let mut delete = None;
        let mut slow = Vec::new();
        let State { groups, offers, .. } = &mut *st;
        for group in groups.values_mut() {
            let was = old.as_ref().is_some_and(|e| group.filter.matches(&e.offer));
            let is = new_offer.as_ref().is_some_and(|o| group.filter.matches(o));
            if !was && !is {
                continue;
            }
            group.invalidate();
            // Entering or staying in the view is an upsert; leaving it (or
            // the offer going away) is a delete.
            let delta = match (&new_json, is) {
                (Some(json), true) => upsert
                    .get_or_insert_with(|| envelope::upsert(seq, json))
                    .clone(),
                _ => delete
                    .get_or_insert_with(|| envelope::delete(seq, &id))
                    .clone(),
            };
            let list = (group.snapshot_members > 0).then(|| group.list_frame(seq, offers));
            for sub in group.members.values() {
                match (sub.mode, &list) {
                    (Mode::Snapshot, Some(list)) => sub.push_list(list, published),
                    _ => {
                        if !sub.push_delta(&delta, published, cap) {
                            slow.push((sub.clone(), CloseReason::Slow));
                        }
                    }
                }
            }
        }
        self.close_all(&mut st, slow);
    }

    /// Housekeeping: close the stalled and the silent, ping the rest when a
    /// ping is due, and cut closing connections past their deadline.
    pub fn sweep(&self, now: Instant) {
        let mut st = self.lock();
        let ping = now >= st.next_ping;
        if ping {
            st.next_ping = now + self.config.feed_ping_interval;
        }
        let mut verdicts = Vec::new();
        for group in st.groups.values() {
            for sub in group.members.values() {
                let health = sub.health(now);
                if health
                    .stalled_for
                    .is_some_and(|d| d > self.config.feed_send_timeout)
                {
                    verdicts.push((sub.clone(), CloseReason::Slow));
                } else if health.silent_for > self.config.feed_idle_timeout {
                    verdicts.push((sub.clone(), CloseReason::Idle));
                } else if ping {
                    sub.request_ping();
                }
            }
        }
        self.close_all(&mut st, verdicts);
        st.closing.retain(|_, sub| match sub.reap(now) {
            Reaped::Waiting => true,
            Reaped::Ended => false,
            Reaped::Cut => {
                warn!(
                    subscriber = sub.id,
                    "feed subscriber made no progress with its close frame; connection cut"
                );
                self.metrics.closed(CloseReason::Cut);
                false
            }
        });
    }

    /// Shutdown: refuse new subscribers and close every one with 1001.
    pub fn shutdown(&self) {
        let mut st = self.lock();
        st.shutting_down = true;
        let all: Vec<Verdict> = st
            .groups
            .values()
            .flat_map(|g| g.members.values())
            .map(|s| (s.clone(), CloseReason::Shutdown))
            .collect();
        info!(subscribers = all.len(), "closing every feed subscriber");
        self.close_all(&mut st, all);
    }

    fn close_all(&self, st: &mut State, verdicts: Vec<Verdict>) {
        for (sub, reason) in verdicts {
            let (code, text, cut_after) = match reason {
                CloseReason::Slow => (
                    close_code::POLICY,
                    "too slow: fell behind the feed; reconnect for a fresh list",
                    self.config.feed_send_timeout,
                ),
                CloseReason::Idle => (
                    close_code::GOING_AWAY,
                    "idle timeout: no pong",
                    self.config.feed_send_timeout,
                ),
                CloseReason::Shutdown => (
                    close_code::GOING_AWAY,
                    "catalog shutting down",
                    self.config.feed_send_timeout.min(SHUTDOWN_CUT_AFTER),
                ),
                CloseReason::Client | CloseReason::Cut => continue,
            };
            if let Some(group) = st.groups.get_mut(&sub.filter_key) {
                if group.remove(&sub) && group.members.is_empty() {
                    st.groups.remove(&sub.filter_key);
                }
            }
            if sub.close(code, text, cut_after) {
                match reason {
                    CloseReason::Slow => {
                        warn!(
                            subscriber = sub.id,
                            mode = sub.mode.as_str(),
                            "feed subscriber too slow; disconnecting"
                        )
                    }
                    _ => debug!(subscriber = sub.id, ?reason, "closing feed subscriber"),
                }
                self.metrics.closed(reason);
                st.closing.insert(sub.id, sub);
            }
        }
    }

    #[cfg(test)]
    fn seq(&self) -> u64 {
        self.lock().seq.current()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use actix_http::ws::Parser;
    use bytes::BytesMut;
    use prometheus_client::registry::Registry;
    use serde_json::{json, Value};

    use super::super::subscriber::Next;
    use super::*;
    use crate::offers::{OfferSpec, ProviderRef};

    pub(crate) fn offer(id: &str, offer_type: &str, version: u64) -> Offer {
        let body = json!({"name": id, "type": offer_type,
            "plans": {"p": {"name": "p", "cost": "1", "resources": {"cpu": "1"}}}});
        let owner = ProviderRef {
            cluster_id: "c1".into(),
            cluster_name: "one".into(),
            stamp: crate::providers::OwnerStamp::default(),
        };
        OfferSpec::from_json(body.to_string().as_bytes())
            .unwrap()
            .into_draft(id.to_string(), owner)
            .into_offer(crate::store::now(), crate::store::now(), version)
    }

    pub(crate) fn hub(queue: u16) -> Hub {
        let config = FeedConfig {
            feed_queue: queue,
            ..FeedConfig::default()
        };
        Hub::new(config, FeedMetrics::register(&mut Registry::default()))
    }

    pub(crate) fn subscribe(hub: &Hub, query: &str) -> Arc<Subscriber> {
        hub.register(SubscribeParams::parse(query).unwrap(), None)
            .unwrap()
    }

    /// Every message waiting for `sub`, decoded.
    pub(crate) fn drain(sub: &Subscriber) -> Vec<Value> {
        let waker = std::task::Waker::noop();
        let mut out = Vec::new();
        loop {
            match sub.next(waker) {
                Next::Data(frame, _) => {
                    let mut buf = BytesMut::from(&frame[..]);
                    let (_, _, payload) =
                        Parser::parse(&mut buf, false, usize::MAX).unwrap().unwrap();
                    out.push(serde_json::from_slice(&payload.unwrap()).unwrap());
                    sub.message_done();
                }
                Next::Control(_) => {}
                Next::End | Next::Pending => return out,
            }
        }
    }

    fn ids(msg: &Value) -> Vec<&str> {
        msg["offers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn subscribers_wait_for_the_first_list() {
        let h = hub(8);
        let s = subscribe(&h, "mode=snapshot");
        assert!(drain(&s).is_empty());
        h.apply(
            OfferChange::Upserted(offer("early", "x", 1)),
            Instant::now(),
        );
        h.reload(
            vec![offer("a", "x", 1)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let msgs = drain(&s);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0]["type"], "snapshot");
        assert_eq!(msgs[0]["seq"], 0);
        assert_eq!(ids(&msgs[0]), ["a"]);
    }

    #[test]
    fn snapshot_mode_gets_the_full_list_after_every_change() {
        let h = hub(8);
        h.reload(
            vec![offer("a", "x", 1)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let s = subscribe(&h, "mode=snapshot");
        assert_eq!(ids(&drain(&s)[0]), ["a"]);
        h.apply(OfferChange::Upserted(offer("b", "x", 1)), Instant::now());
        let m = drain(&s);
        assert_eq!(
            (m[0]["type"].as_str(), m[0]["seq"].as_u64()),
            (Some("snapshot"), Some(1))
        );
        assert_eq!(ids(&m[0]), ["a", "b"]);
        h.apply(
            OfferChange::Deleted {
                id: "a".into(),
                cluster_id: "c1".into(),
                version: 2,
            },
            Instant::now(),
        );
        assert_eq!(ids(&drain(&s)[0]), ["b"]);
        assert_eq!(h.seq(), 2);
    }

    #[test]
    fn delta_mode_gets_upserts_and_deletes_with_consecutive_seqs() {
        let h = hub(8);
        h.reload(
            vec![offer("a", "x", 1)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let s = subscribe(&h, "mode=delta");
        assert_eq!(drain(&s)[0]["type"], "snapshot");
        h.apply(OfferChange::Upserted(offer("a", "x", 2)), Instant::now());
        h.apply(
            OfferChange::Deleted {
                id: "a".into(),
                cluster_id: "c1".into(),
                version: 3,
            },
            Instant::now(),
        );
        let m = drain(&s);
        assert_eq!(m[0]["type"], "upsert");
        assert_eq!(m[0]["seq"], 1);
        assert_eq!(m[0]["offer"]["version"], 2);
        assert_eq!(m[1], json!({"type": "delete", "seq": 2, "id": "a"}));
    }

    #[test]
    fn stale_and_duplicate_changes_are_dropped() {
        let h = hub(8);
        h.reload(
            vec![offer("a", "x", 5)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let s = subscribe(&h, "mode=delta");
        drain(&s);
        h.apply(OfferChange::Upserted(offer("a", "x", 5)), Instant::now());
        h.apply(OfferChange::Upserted(offer("a", "x", 4)), Instant::now());
        h.apply(
            OfferChange::Deleted {
                id: "zz".into(),
                cluster_id: "c1".into(),
                version: 9,
            },
            Instant::now(),
        );
        assert!(drain(&s).is_empty());
        assert_eq!(h.seq(), 0);
    }

    #[test]
    fn filtered_views_see_entries_and_exits() {
        let h = hub(8);
        h.reload(
            vec![offer("a", "gpu", 1), offer("b", "cpu", 1)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let d = subscribe(&h, "mode=delta&type=gpu");
        let s = subscribe(&h, "mode=snapshot&type=gpu");
        assert_eq!(ids(&drain(&d)[0]), ["a"]);
        assert_eq!(ids(&drain(&s)[0]), ["a"]);
        // Outside the view: nothing.
        h.apply(OfferChange::Upserted(offer("b", "cpu", 2)), Instant::now());
        assert!(drain(&d).is_empty());
        assert!(drain(&s).is_empty());
        // Entering the view.
        h.apply(OfferChange::Upserted(offer("b", "gpu", 3)), Instant::now());
        assert_eq!(drain(&d)[0]["type"], "upsert");
        assert_eq!(ids(&drain(&s)[0]), ["a", "b"]);
        // Leaving it is a delete.
        h.apply(OfferChange::Upserted(offer("a", "cpu", 2)), Instant::now());
        assert_eq!(drain(&d)[0], json!({"type": "delete", "seq": 3, "id": "a"}));
        assert_eq!(ids(&drain(&s)[0]), ["b"]);
    }

    #[test]
    fn a_full_delta_queue_disconnects_only_that_subscriber() {
        let h = hub(2);
        h.reload(vec![], &HashSet::new(), Instant::now(), false);
        let slow = subscribe(&h, "mode=delta");
        let fast = subscribe(&h, "mode=delta");
        for v in 1..=4 {
            h.apply(OfferChange::Upserted(offer("a", "x", v)), Instant::now());
            drain(&fast);
        }
        assert!(slow.is_closing());
        assert!(!fast.is_closing());
        assert_eq!(h.metrics.slow_disconnects.get(), 1);
        // The slow one gets its close frame and nothing else.
        let waker = std::task::Waker::noop();
        assert!(matches!(slow.next(waker), Next::Control(_)));
        assert!(matches!(slow.next(waker), Next::End));
    }

    #[test]
    fn a_reload_sends_fresh_lists_to_everyone() {
        let h = hub(8);
        h.reload(
            vec![offer("a", "x", 1)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let d = subscribe(&h, "mode=delta");
        drain(&d);
        h.reload(
            vec![offer("a", "x", 1)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        assert!(drain(&d).is_empty(), "an identical reload sends nothing");
        // "a" was deleted: the store confirmed it (else see
        // `a_list_lacking_a_sent_offer_is_refused`).
        let gone = HashSet::from(["a".to_string()]);
        h.reload(vec![offer("b", "x", 1)], &gone, Instant::now(), false);
        let m = drain(&d);
        assert_eq!(m[0]["type"], "snapshot");
        assert_eq!(m[0]["seq"], 1);
        assert_eq!(ids(&m[0]), ["b"]);
    }

    /// A list read before changes the hub already sent (one offer at a
    /// lower version) is refused whole: nobody is sent the older version,
    /// nor a list that may lack offers written meanwhile. A list that is
    /// not older is taken, even if it lacks offers (deletions).
    #[test]
    fn a_list_older_than_what_was_sent_is_refused() {
        let h = hub(8);
        h.reload(
            vec![offer("a", "x", 20), offer("b", "x", 1)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let d = subscribe(&h, "mode=delta");
        let s = subscribe(&h, "mode=snapshot");
        drain(&d);
        drain(&s);
        h.apply(OfferChange::Upserted(offer("a", "x", 21)), Instant::now());
        h.apply(OfferChange::Upserted(offer("c", "x", 1)), Instant::now());
        drain(&d);
        drain(&s);
        // Read before a@21 and c were written.
        let older = vec![offer("a", "x", 20), offer("b", "x", 1)];
        assert_eq!(
            h.reload(older, &HashSet::new(), Instant::now(), false),
            Reloaded::Older {
                id: "a".into(),
                listed: 20,
                held: 21
            }
        );
        assert!(drain(&d).is_empty() && drain(&s).is_empty());
        assert_eq!(h.seq(), 2);
        // Changes still apply on top of the kept list.
        h.apply(OfferChange::Upserted(offer("b", "x", 2)), Instant::now());
        assert_eq!(drain(&d)[0]["offer"]["version"], 2);
        assert_eq!(ids(&drain(&s)[0]), ["a", "b", "c"]);
        // A newer list is taken whole: c was deleted meanwhile (the store
        // confirmed it).
        let newer = vec![offer("a", "x", 22), offer("b", "x", 2)];
        let gone = HashSet::from(["c".to_string()]);
        assert_eq!(
            h.reload(newer, &gone, Instant::now(), false),
            Reloaded::Replaced
        );
        let m = drain(&d);
        assert_eq!(
            (m[0]["type"].as_str(), ids(&m[0])),
            (Some("snapshot"), vec!["a", "b"])
        );
        assert_eq!(m[0]["offers"][0]["version"], 22);
        assert_eq!(ids(&drain(&s)[0]), ["a", "b"]);
    }

    /// Issue 41, dbfault s3: a resync list read before writes the hub
    /// already sent lacks their offers. Taken, subscribers would see them
    /// vanish and come back with the next change; refused, nothing is sent
    /// until a list holds them or the store confirms them deleted.
    #[test]
    fn a_list_lacking_a_sent_offer_is_refused() {
        let h = hub(8);
        h.reload(
            vec![offer("a", "x", 1)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let d = subscribe(&h, "mode=delta");
        let s = subscribe(&h, "mode=snapshot");
        drain(&d);
        drain(&s);
        h.apply(OfferChange::Upserted(offer("new", "x", 1)), Instant::now());
        assert_eq!(drain(&d)[0]["offer"]["id"], "new");
        drain(&s);
        // Read before "new" was written: it lacks it.
        let stale = || vec![offer("a", "x", 1)];
        assert_eq!(h.lacking(&stale()), ["new"]);
        assert_eq!(
            h.reload(stale(), &HashSet::new(), Instant::now(), false),
            Reloaded::Lacks {
                id: "new".into(),
                held: 1
            }
        );
        assert!(drain(&d).is_empty() && drain(&s).is_empty());
        // Confirmed deleted, the same list is the truth.
        let gone = HashSet::from(["new".to_string()]);
        assert_eq!(
            h.reload(stale(), &gone, Instant::now(), false),
            Reloaded::Replaced
        );
        assert_eq!(ids(&drain(&d)[0]), ["a"]);
    }

    /// Issue 41, dbfault s2: the feed's coalescing. Every version of three
    /// offers arrives twice (a writer's own copy and another process's
    /// stream copy), the copies shuffled (a fixed-seed generator), with
    /// reloads of lists read at any earlier moment in between: a delta
    /// subscriber's versions never go down, and it ends with every offer's
    /// last version.
    #[test]
    fn a_delta_subscriber_gets_versions_in_order_and_always_the_last() {
        const LAST: u64 = 12;
        let ids = ["s0", "s1", "s2"];
        let mut copies: Vec<(usize, u64)> = (1..=LAST)
            .flat_map(|v| (0..ids.len()).flat_map(move |i| [(i, v), (i, v)]))
            .collect();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut rand = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for i in (1..copies.len()).rev() {
            copies.swap(i, rand(i + 1));
        }
        let h = hub(1024);
        h.reload(
            ids.iter().map(|id| offer(id, "x", 1)).collect(),
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let d = subscribe(&h, "mode=delta");
        let mut sent: BTreeMap<String, u64> = BTreeMap::new();
        let mut seq = 0;
        let mut record = |msgs: Vec<Value>, sent: &mut BTreeMap<String, u64>| {
            for m in msgs {
                let s = m["seq"].as_u64().unwrap();
                assert!(s >= seq, "seq went back from {seq} to {s}");
                seq = s;
                let offers: Vec<&Value> = match m["type"].as_str() {
                    Some("snapshot") => m["offers"].as_array().unwrap().iter().collect(),
                    _ => vec![&m["offer"]],
                };
                for o in offers {
                    let (id, v) = (o["id"].as_str().unwrap(), o["version"].as_u64().unwrap());
                    let before = sent.insert(id.to_string(), v).unwrap_or(0);
                    assert!(v >= before, "{id} went back from {before} to {v}");
                }
            }
        };
        // The versions each id reached so far, for lists read "earlier".
        let mut reached = [1u64; 3];
        for (k, (i, v)) in copies.into_iter().enumerate() {
            h.apply(OfferChange::Upserted(offer(ids[i], "x", v)), Instant::now());
            reached[i] = reached[i].max(v);
            if k % 7 == 0 {
                // A list read at some earlier moment: each offer at a
                // version at or below the one reached.
                let list = (0..ids.len())
                    .map(|j| offer(ids[j], "x", 1 + rand(reached[j] as usize) as u64))
                    .collect();
                h.reload(list, &HashSet::new(), Instant::now(), false);
            }
            record(drain(&d), &mut sent);
        }
        let want: BTreeMap<String, u64> = ids.iter().map(|id| (id.to_string(), LAST)).collect();
        assert_eq!(sent, want, "every offer's last version is delivered");
    }

    /// When the store's list stays older (the caller waited; e.g. the
    /// database lost a write the feed had seen), `allow_older` takes it.
    #[test]
    fn allow_older_takes_the_stores_list() {
        let h = hub(8);
        h.reload(
            vec![offer("a", "x", 5)],
            &HashSet::new(),
            Instant::now(),
            false,
        );
        let d = subscribe(&h, "mode=delta");
        drain(&d);
        let older = || vec![offer("a", "x", 4)];
        assert!(matches!(
            h.reload(older(), &HashSet::new(), Instant::now(), false),
            Reloaded::Older { .. }
        ));
        assert_eq!(
            h.reload(older(), &HashSet::new(), Instant::now(), true),
            Reloaded::Replaced
        );
        assert_eq!(drain(&d)[0]["offers"][0]["version"], 4);
    }

    #[test]
    fn limits_refuse_and_release() {
        let config = FeedConfig {
            feed_max_subscribers: 2,
            feed_max_filters: 1,
            ..FeedConfig::default()
        };
        let h = Hub::new(config, FeedMetrics::register(&mut Registry::default()));
        let a = subscribe(&h, "mode=snapshot&type=x");
        assert_eq!(
            h.register(
                SubscribeParams::parse("mode=snapshot&type=y").unwrap(),
                None
            )
            .unwrap_err(),
            Refused::TooManyFilters(1)
        );
        let _b = subscribe(&h, "mode=snapshot&type=x");
        assert_eq!(
            h.register(
                SubscribeParams::parse("mode=snapshot&type=x").unwrap(),
                None
            )
            .unwrap_err(),
            Refused::Full(2)
        );
        h.unregister(&a);
        let _c = subscribe(&h, "mode=snapshot&type=x");
        h.shutdown();
        assert_eq!(
            h.register(SubscribeParams::parse("mode=snapshot").unwrap(), None)
                .unwrap_err(),
            Refused::Full(2)
        );
        assert_eq!(h.metrics.refused.get(), 3);
    }

    #[test]
    fn shutdown_closes_everyone_with_going_away() {
        let h = hub(8);
        h.reload(vec![], &HashSet::new(), Instant::now(), false);
        let s = subscribe(&h, "mode=snapshot");
        drain(&s);
        h.shutdown();
        match s.next(std::task::Waker::noop()) {
            Next::Control(c) => assert_eq!(c, envelope::close(1001, "catalog shutting down")),
            _ => panic!("expected a close frame"),
        }
        assert_eq!(
            h.register(SubscribeParams::parse("mode=snapshot").unwrap(), None)
                .unwrap_err(),
            Refused::ShuttingDown
        );
    }
}
