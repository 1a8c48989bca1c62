//! What this process keeps in memory of the shared database, so that an
//! authenticated offer write costs one round trip and lists never touch
//! the database: every offer document (live offers and tombstones),
//! provider accounts (with their credential generations), disabled flags
//! and peering registrations.
//!
//! Each part is loaded when its change stream opens (and again whenever it
//! reopens) and kept current by that stream ([`super::offers`] follows
//! them); this process's own writes are applied at once, after they are
//! acknowledged, so it reads its own writes. A part is *trusted* only from
//! its load until its stream breaks: while it is not (starting, the stream
//! down, a server without change streams), every read goes to the database
//! as before. Another process's change is seen here once its change event
//! arrives (milliseconds; the issue's bound is a second).
//!
//! Offers are merged by `version` (a later write always carries a larger
//! one), so a late event never undoes a newer state; a purged tombstone
//! (a `delete` event) is forgotten. Offer changes are published as memory
//! takes them: the writer's own copy or the stream's, whichever comes
//! first, once, in memory's order — so a feed subscriber that connects
//! after a write is acknowledged finds it. A load replaces memory with what
//! it read, except this process's own writes taken while it ran: a load's
//! read may predate them, and a list taken from memory after the load (a
//! feed's resync) must still hold every write this process acknowledged. The other parts hold no versions: an
//! event for a key makes the follower read that key again, and whatever it
//! reads is the state from then on.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use chrono::{DateTime, Utc};

use crate::offers::{Offer, OfferChange, OfferFilter};
use crate::providers::{ProviderAccount, ProviderPeering};

/// The collections kept in memory, each with its own change stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Offers = 0,
    Providers = 1,
    Disabled = 2,
    Peering = 3,
}

impl Part {
    pub(super) const ALL: [Part; 4] =
        [Part::Offers, Part::Providers, Part::Disabled, Part::Peering];
}

/// One offer id as last written: its version and owner, and the offer
/// unless the document is a tombstone.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Slot {
    pub version: u64,
    pub cluster_id: String,
    pub offer: Option<Offer>,
    /// When the document was written (a tombstone's: the deletion).
    pub written_at: DateTime<Utc>,
}

/// Whether `slot` is a later state than `known`: a larger version or, for
/// an `inserted` document over a tombstone, one written after the deletion
/// (the tombstone was purged and the id counts from 1 again) — not a late
/// insert event from before it.
fn newer(known: Option<&Slot>, slot: &Slot, inserted: bool) -> bool {
    known.is_none_or(|known| {
        slot.version > known.version
            || (inserted && known.offer.is_none() && slot.written_at > known.written_at)
    })
}

impl Slot {
    /// The change that taking this slot for offer `id` means.
    pub(super) fn change(&self, id: &str) -> OfferChange {
        match &self.offer {
            Some(offer) => OfferChange::Upserted(offer.clone()),
            None => OfferChange::Deleted {
                id: id.to_string(),
                cluster_id: self.cluster_id.clone(),
                version: self.version,
            },
        }
    }
}

/// See the module docs.
#[derive(Default)]
pub(super) struct Memory {
    trusted: [AtomicBool; 4],
    offers: RwLock<BTreeMap<String, Slot>>,
    /// The offer documents taken since [`Memory::begin_offers_load`] (the
    /// writer's own copies: no stream is read during a load), to be kept
    /// over the load's older read. Written under `offers`' lock.
    taken_while_loading: std::sync::Mutex<Option<BTreeMap<String, (Slot, bool)>>>,
    providers: RwLock<HashMap<String, ProviderAccount>>,
    disabled: RwLock<BTreeMap<String, DateTime<Utc>>>,
    peering: RwLock<HashMap<String, ProviderPeering>>,
}

/// A poisoned lock only means a panic elsewhere; the maps stay usable.
fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

impl Memory {
    pub(super) fn trusted(&self, part: Part) -> bool {
        self.trusted[part as usize].load(Ordering::Acquire)
    }

    /// From a load until the stream breaks.
    pub(super) fn set_trusted(&self, part: Part, trusted: bool) {
        self.trusted[part as usize].store(trusted, Ordering::Release);
    }

    // --- offers ---

    /// The slot of `id`: `None` when offers are not trusted, `Some(None)`
    /// when no document with this id is known.
    pub(super) fn offer_slot(&self, id: &str) -> Option<Option<Slot>> {
        if !self.trusted(Part::Offers) {
            return None;
        }
        Some(read(&self.offers).get(id).cloned())
    }

    /// A load of every offer starts: from now until [`Memory::load_offers`],
    /// documents taken are kept over what the load read.
    pub(super) fn begin_offers_load(&self) {
        let _offers = write(&self.offers);
        *self.taken_while_loading() = Some(BTreeMap::new());
    }

    fn taken_while_loading(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<BTreeMap<String, (Slot, bool)>>> {
        self.taken_while_loading
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Replace every slot with a fresh load, keeping the documents taken
    /// since [`Memory::begin_offers_load`] where they are [`newer`] than
    /// the load's. With `announce` (the change
    /// stream resumes after events whose documents this load may already
    /// hold, so they would not be published), `then` runs under the lock
    /// for each loaded slot newer than the one memory held.
    pub(super) fn load_offers(
        &self,
        slots: BTreeMap<String, Slot>,
        announce: bool,
        mut then: impl FnMut(&str, &Slot),
    ) {
        let mut slots = slots;
        let mut offers = write(&self.offers);
        for (id, (slot, inserted)) in self.taken_while_loading().take().unwrap_or_default() {
            if newer(slots.get(&id), &slot, inserted) {
                slots.insert(id, slot);
            }
        }
        if announce {
            for (id, slot) in &slots {
                if newer(offers.get(id), slot, true) {
                    then(id, slot);
                }
            }
        }
        *offers = slots;
    }

    /// Apply a committed document, kept if it is [`newer`] than the known
    /// one. When kept, `then` runs under the lock: what it publishes goes
    /// out in the order memory took the documents, each once, whichever
    /// copy (this process's own write, the change stream's event) came
    /// first.
    pub(super) fn apply_offer(&self, id: &str, slot: Slot, inserted: bool, then: impl FnOnce()) {
        let mut offers = write(&self.offers);
        if newer(offers.get(id), &slot, inserted) {
            if let Some(taken) = self.taken_while_loading().as_mut() {
                taken.insert(id.to_string(), (slot.clone(), inserted));
            }
            offers.insert(id.to_string(), slot);
            then();
        }
    }

    /// A document was deleted (only tombstones are: the purge): forget it
    /// if it is still a tombstone here.
    pub(super) fn forget_tombstone(&self, id: &str) {
        let mut offers = write(&self.offers);
        if offers.get(id).is_some_and(|s| s.offer.is_none()) {
            offers.remove(id);
        }
    }

    /// At most `limit` live offers matching `filter` after `after`, by id;
    /// `None` when offers are not trusted.
    pub(super) fn list_offers(
        &self,
        filter: &OfferFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Option<Vec<Offer>> {
        if !self.trusted(Part::Offers) {
            return None;
        }
        let start = match after {
            Some(id) => Bound::Excluded(id),
            None => Bound::Unbounded,
        };
        let offers = read(&self.offers);
        Some(
            offers
                .range::<str, _>((start, Bound::Unbounded))
                .filter_map(|(_, s)| s.offer.as_ref())
                .filter(|o| filter.matches(o))
                .take(limit)
                .cloned()
                .collect(),
        )
    }

    /// How many live offers; `None` when offers are not trusted.
    pub(super) fn count_offers(&self) -> Option<u64> {
        if !self.trusted(Part::Offers) {
            return None;
        }
        let offers = read(&self.offers);
        Some(offers.values().filter(|s| s.offer.is_some()).count() as u64)
    }

    // --- providers, disabled flags, peering ---

    /// The account of `cluster_id` if known here (and trusted). An unknown
    /// one may have just registered elsewhere: the caller asks the database.
    pub(super) fn provider(&self, cluster_id: &str) -> Option<ProviderAccount> {
        if !self.trusted(Part::Providers) {
            return None;
        }
        read(&self.providers).get(cluster_id).cloned()
    }

    pub(super) fn load_providers(&self, accounts: HashMap<String, ProviderAccount>) {
        *write(&self.providers) = accounts;
    }

    /// `cluster_id`'s account as now stored (`None`: there is none).
    pub(super) fn set_provider(&self, cluster_id: &str, account: Option<ProviderAccount>) {
        let mut providers = write(&self.providers);
        match account {
            Some(a) => providers.insert(cluster_id.to_string(), a),
            None => providers.remove(cluster_id),
        };
    }

    /// Every disabled provider; `None` when not trusted.
    pub(super) fn disabled(&self) -> Option<BTreeMap<String, DateTime<Utc>>> {
        if !self.trusted(Part::Disabled) {
            return None;
        }
        Some(read(&self.disabled).clone())
    }

    pub(super) fn load_disabled(&self, disabled: BTreeMap<String, DateTime<Utc>>) {
        *write(&self.disabled) = disabled;
    }

    pub(super) fn set_disabled(&self, cluster_id: &str, since: Option<DateTime<Utc>>) {
        let mut disabled = write(&self.disabled);
        match since {
            Some(t) => disabled.insert(cluster_id.to_string(), t),
            None => disabled.remove(cluster_id),
        };
    }

    /// `cluster_id`'s peering registration: `None` when not trusted,
    /// `Some(None)` when it registered none.
    pub(super) fn peering(&self, cluster_id: &str) -> Option<Option<ProviderPeering>> {
        if !self.trusted(Part::Peering) {
            return None;
        }
        Some(read(&self.peering).get(cluster_id).cloned())
    }

    pub(super) fn load_peering(&self, peering: HashMap<String, ProviderPeering>) {
        *write(&self.peering) = peering;
    }

    pub(super) fn set_peering(&self, cluster_id: &str, peering: Option<ProviderPeering>) {
        let mut map = write(&self.peering);
        match peering {
            Some(p) => map.insert(cluster_id.to_string(), p),
            None => map.remove(cluster_id),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offers::{OfferSpec, ProviderRef};

    fn offer(id: &str, version: u64) -> Offer {
        let owner = ProviderRef {
            cluster_id: "c1".into(),
            cluster_name: "one".into(),
            stamp: crate::providers::OwnerStamp::default(),
        };
        // A fixed instant: two copies built a millisecond apart must be equal.
        let now =
            chrono::DateTime::from_timestamp_millis(1_700_000_000_000).expect("a valid instant");
        OfferSpec::from_json(
            br#"{"name":"n","type":"t","plans":{"p":{"name":"p","cost":"1","resources":{"cpu":"1"}}}}"#,
        )
        .unwrap()
        .into_draft(id.into(), owner)
        .into_offer(now, now, version)
    }

    /// Version `n` written `n` seconds after a fixed instant.
    fn at(version: u64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + version as i64, 0).expect("a valid instant")
    }

    fn live(id: &str, version: u64) -> Slot {
        Slot {
            version,
            cluster_id: "c1".into(),
            offer: Some(offer(id, version)),
            written_at: at(version),
        }
    }

    fn tomb(version: u64) -> Slot {
        Slot {
            version,
            cluster_id: "c1".into(),
            offer: None,
            written_at: at(version),
        }
    }

    /// Version 1 of `id` again, inserted long after its tombstone's purge.
    fn reborn(id: &str) -> Slot {
        Slot {
            written_at: at(86_400),
            ..live(id, 1)
        }
    }

    /// Apply, counting what was kept (and so published).
    fn put(m: &Memory, id: &str, slot: Slot, inserted: bool) -> bool {
        let mut kept = false;
        m.apply_offer(id, slot, inserted, || kept = true);
        kept
    }

    fn versions(m: &Memory) -> Vec<u64> {
        m.list_offers(&OfferFilter::default(), None, usize::MAX)
            .unwrap()
            .iter()
            .map(|o| o.version)
            .collect()
    }

    /// Nothing is answered from memory before it is trusted.
    #[test]
    fn untrusted_parts_answer_nothing() {
        let m = Memory::default();
        put(&m, "a", live("a", 1), true);
        assert!(m.offer_slot("a").is_none());
        assert!(m.list_offers(&OfferFilter::default(), None, 10).is_none());
        assert!(m.disabled().is_none() && m.peering("c1").is_none());
        m.set_trusted(Part::Offers, true);
        assert_eq!(m.offer_slot("a"), Some(Some(live("a", 1))));
        assert_eq!(m.offer_slot("b"), Some(None));
        m.set_trusted(Part::Offers, false);
        assert!(m.count_offers().is_none());
    }

    /// A late event never undoes a newer state; a purge forgets only a
    /// tombstone, and an insert after a purge replaces the tombstone.
    #[test]
    fn offers_merge_by_version() {
        let m = Memory::default();
        m.set_trusted(Part::Offers, true);
        assert!(put(&m, "a", live("a", 2), false));
        assert!(!put(&m, "a", live("a", 1), true));
        assert!(!put(&m, "a", live("a", 2), false), "a second copy");
        assert_eq!(versions(&m), [2]);
        assert!(put(&m, "a", tomb(3), false));
        assert_eq!(versions(&m), Vec::<u64>::new());
        // Late copies of the writes before the deletion (the writer applied
        // its own deletion before the stream's events) do not bring the
        // offer back, not even its insert...
        assert!(!put(&m, "a", live("a", 2), false));
        assert!(!put(&m, "a", live("a", 1), true));
        assert_eq!(m.offer_slot("a"), Some(Some(tomb(3))));
        // ...but an insert after the deletion (the tombstone was purged) does.
        assert!(put(&m, "a", reborn("a"), true));
        assert_eq!(versions(&m), [1]);
        // A purge event only forgets tombstones.
        m.forget_tombstone("a");
        assert_eq!(versions(&m), [1]);
        assert!(put(&m, "a", tomb(2), false));
        m.forget_tombstone("a");
        assert_eq!(m.offer_slot("a"), Some(None));
        assert_eq!(m.count_offers(), Some(0));
    }

    /// A load read before this process's own write was acknowledged does
    /// not undo it: the write taken while the load ran stays (a feed's
    /// resync lists it), a newer loaded document still wins, and writes
    /// taken outside a load do not outlive the next one.
    #[test]
    fn a_load_keeps_the_writes_taken_while_it_ran() {
        let m = Memory::default();
        m.set_trusted(Part::Offers, true);
        put(&m, "gone", live("gone", 1), true);
        m.begin_offers_load();
        assert!(put(&m, "mine", live("mine", 1), true));
        assert!(put(&m, "both", live("both", 2), false));
        let read = BTreeMap::from([
            ("old".to_string(), live("old", 4)),
            ("both".to_string(), live("both", 3)),
        ]);
        let mut announced = Vec::new();
        m.load_offers(read, true, |id, _| announced.push(id.to_string()));
        let listed = |m: &Memory| -> Vec<(String, u64)> {
            m.list_offers(&OfferFilter::default(), None, usize::MAX)
                .unwrap()
                .into_iter()
                .map(|o| (o.id, o.version))
                .collect()
        };
        assert_eq!(
            listed(&m),
            [("both".into(), 3), ("mine".into(), 1), ("old".into(), 4)]
        );
        assert_eq!(
            announced,
            ["both", "old"],
            "what was taken is not announced again"
        );
        // Outside a load, a write is memory's until the next load replaces it.
        put(&m, "later", live("later", 1), true);
        m.begin_offers_load();
        m.load_offers(BTreeMap::new(), false, |_, _| {});
        assert_eq!(listed(&m), Vec::<(String, u64)>::new());
    }

    /// Lists page by id and filter exactly as the embedded store does.
    #[test]
    fn lists_page_by_id() {
        let m = Memory::default();
        m.set_trusted(Part::Offers, true);
        for id in ["c", "a", "b", "d"] {
            put(&m, id, live(id, 1), true);
        }
        put(&m, "b", tomb(2), false);
        let ids = |after, limit| -> Vec<String> {
            m.list_offers(&OfferFilter::default(), after, limit)
                .unwrap()
                .into_iter()
                .map(|o| o.id)
                .collect()
        };
        assert_eq!(ids(None, 10), ["a", "c", "d"]);
        assert_eq!(ids(Some("a"), 1), ["c"]);
        assert_eq!(ids(Some("d"), 10), Vec::<String>::new());
        let typed = OfferFilter::from_pairs([("type", "other")]).unwrap();
        assert!(m.list_offers(&typed, None, 10).unwrap().is_empty());
    }
}
