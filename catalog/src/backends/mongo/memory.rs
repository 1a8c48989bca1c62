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
//! (a `delete` event) is forgotten. The other parts hold no versions: an
//! event for a key makes the follower read that key again, and whatever it
//! reads is the state from then on.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use chrono::{DateTime, Utc};

use crate::offers::{Offer, OfferFilter};
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
}

/// See the module docs.
#[derive(Default)]
pub(super) struct Memory {
    trusted: [AtomicBool; 4],
    offers: RwLock<BTreeMap<String, Slot>>,
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

    /// Replace every slot (a fresh load).
    pub(super) fn load_offers(&self, slots: BTreeMap<String, Slot>) {
        *write(&self.offers) = slots;
    }

    /// Apply a committed document: kept if its version is larger than the
    /// known one. `inserted` (the document did not exist before: a first
    /// write, or one after its tombstone was purged) also replaces a
    /// known tombstone.
    pub(super) fn apply_offer(&self, id: &str, slot: Slot, inserted: bool) {
        let mut offers = write(&self.offers);
        match offers.get_mut(id) {
            Some(known) if slot.version > known.version || (inserted && known.offer.is_none()) => {
                *known = slot
            }
            Some(_) => {}
            None => {
                offers.insert(id.to_string(), slot);
            }
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
            liqo: Vec::new(),
            enforcement: None,
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

    fn live(id: &str, version: u64) -> Slot {
        Slot {
            version,
            cluster_id: "c1".into(),
            offer: Some(offer(id, version)),
        }
    }

    fn tomb(version: u64) -> Slot {
        Slot {
            version,
            cluster_id: "c1".into(),
            offer: None,
        }
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
        m.apply_offer("a", live("a", 1), true);
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
        m.apply_offer("a", live("a", 2), false);
        m.apply_offer("a", live("a", 1), true);
        assert_eq!(versions(&m), [2]);
        m.apply_offer("a", tomb(3), false);
        assert_eq!(versions(&m), Vec::<u64>::new());
        // A late copy of the first insert does not bring the offer back...
        m.apply_offer("a", live("a", 2), false);
        assert_eq!(m.offer_slot("a"), Some(Some(tomb(3))));
        // ...but an insert (the tombstone was purged) does.
        m.apply_offer("a", live("a", 1), true);
        assert_eq!(versions(&m), [1]);
        // A purge event only forgets tombstones.
        m.forget_tombstone("a");
        assert_eq!(versions(&m), [1]);
        m.apply_offer("a", tomb(2), false);
        m.forget_tombstone("a");
        assert_eq!(m.offer_slot("a"), Some(None));
        assert_eq!(m.count_offers(), Some(0));
    }

    /// Lists page by id and filter exactly as the embedded store does.
    #[test]
    fn lists_page_by_id() {
        let m = Memory::default();
        m.set_trusted(Part::Offers, true);
        for id in ["c", "a", "b", "d"] {
            m.apply_offer(id, live(id, 1), true);
        }
        m.apply_offer("b", tomb(2), false);
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
