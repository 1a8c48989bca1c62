//! The embedded [`OfferStore`]: live offers in the `offers` table (and in
//! memory, for reads), each id's last version in `offer_versions`.
//! Ownership and versions are decided by [`crate::offers::rules`] inside the
//! write transaction, so no two writers can interleave a check and a write;
//! writes are committed in groups ([`super::group`]).

use std::collections::BTreeMap;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, Table};
use tokio::sync::{broadcast, oneshot};

use super::group::Write;
use super::tables::OFFERS;
use super::{from_json, internal, to_json, EmbeddedStore, Inner};
use crate::offers::{rules, Offer, OfferChange, OfferDraft, OfferFilter, OfferStore, PutOutcome};
use crate::store::StoreError;

/// Every live offer, read once at open.
pub(super) fn load(db: &Database) -> Result<BTreeMap<String, Offer>, StoreError> {
    let mut offers = BTreeMap::new();
    let read = db.begin_read().map_err(internal)?;
    let table = read.open_table(OFFERS).map_err(internal)?;
    for entry in table.iter().map_err(internal)? {
        let (k, v) = entry.map_err(internal)?;
        let offer: Offer = from_json(&format!("offer {}", k.value()), v.value())?;
        offers.insert(k.value().to_string(), offer);
    }
    Ok(offers)
}

type OffersTable<'t> = Table<'t, &'static str, &'static [u8]>;
type VersionsTable<'t> = Table<'t, &'static str, u64>;

/// Decide (by [`rules::put`]) and write one upsert inside the batch's
/// transaction. The outer error is a storage failure (the batch fails), the
/// inner one the rules' refusal (nothing written).
pub(super) fn apply_put(
    offers: &mut OffersTable<'_>,
    versions: &mut VersionsTable<'_>,
    draft: OfferDraft,
    expected_version: Option<u64>,
) -> Result<Result<PutOutcome, StoreError>, StoreError> {
    let existing: Option<Offer> = match offers.get(draft.id.as_str()).map_err(internal)? {
        Some(v) => Some(from_json("offer", v.value())?),
        None => None,
    };
    let last_version = versions
        .get(draft.id.as_str())
        .map_err(internal)?
        .map(|v| v.value())
        .unwrap_or(0);
    let outcome = match rules::put(
        draft,
        existing.as_ref(),
        last_version,
        expected_version,
        crate::store::now(),
    ) {
        Ok(o) => o,
        Err(refused) => return Ok(Err(refused)),
    };
    let offer = &outcome.offer;
    offers
        .insert(offer.id.as_str(), to_json(offer)?.as_slice())
        .map_err(internal)?;
    versions
        .insert(offer.id.as_str(), offer.version)
        .map_err(internal)?;
    Ok(Ok(outcome))
}

/// Decide (by [`rules::delete`]) and write one deletion inside the batch's
/// transaction: the removed offer and its tombstone version. Errors as
/// [`apply_put`].
pub(super) fn apply_delete(
    offers: &mut OffersTable<'_>,
    versions: &mut VersionsTable<'_>,
    id: &str,
    owner: &str,
) -> Result<Result<(Offer, u64), StoreError>, StoreError> {
    let live: Option<Offer> = match offers.get(id).map_err(internal)? {
        Some(v) => Some(from_json("offer", v.value())?),
        None => None,
    };
    let last = versions
        .get(id)
        .map_err(internal)?
        .map(|v| v.value())
        .unwrap_or(0);
    let version = match rules::delete(live.as_ref(), owner, last) {
        Ok(v) => v,
        Err(refused) => return Ok(Err(refused)),
    };
    let Some(offer) = live else {
        return Ok(Err(StoreError::NotFound));
    };
    offers.remove(id).map_err(internal)?;
    versions.insert(id, version).map_err(internal)?;
    Ok(Ok((offer, version)))
}

impl EmbeddedStore {
    fn offers_read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Offer>> {
        // A poisoned lock only means a panic elsewhere; the map itself is
        // always replaced whole-entry, so it is still consistent.
        self.inner.offers.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    /// Apply a committed batch to the in-memory offers, under one lock.
    pub(super) fn set_cached_batch<'a>(
        &self,
        changes: impl Iterator<Item = (&'a String, Option<&'a Offer>)>,
    ) {
        let mut map = self.offers.write().unwrap_or_else(|e| e.into_inner());
        for (id, offer) in changes {
            match offer {
                Some(o) => map.insert(id.clone(), o.clone()),
                None => map.remove(id),
            };
        }
    }
}

#[async_trait]
impl OfferStore for EmbeddedStore {
    async fn list_offers_page(
        &self,
        filter: &OfferFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Offer>, StoreError> {
        use std::ops::Bound;
        let offers = self.offers_read();
        let start = match after {
            Some(id) => Bound::Excluded(id),
            None => Bound::Unbounded,
        };
        Ok(offers
            .range::<str, _>((start, Bound::Unbounded))
            .map(|(_, o)| o)
            .filter(|o| filter.matches(o))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn get_offer(&self, id: &str) -> Result<Option<Offer>, StoreError> {
        Ok(self.offers_read().get(id).cloned())
    }

    async fn put_offer(
        &self,
        draft: OfferDraft,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.inner.enqueue(Write::Put {
            draft,
            expected_version,
            reply,
        })?;
        answer
            .await
            .map_err(|_| internal("the offer committer stopped"))?
    }

    async fn delete_offer(&self, id: &str, owner_cluster_id: &str) -> Result<Offer, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.inner.enqueue(Write::Delete {
            id: id.to_string(),
            owner: owner_cluster_id.to_string(),
            reply,
        })?;
        answer
            .await
            .map_err(|_| internal("the offer committer stopped"))?
    }

    async fn count_offers(&self) -> Result<u64, StoreError> {
        Ok(self.offers_read().len() as u64)
    }

    fn changes(&self) -> broadcast::Receiver<OfferChange> {
        self.inner.changes.subscribe()
    }
}
