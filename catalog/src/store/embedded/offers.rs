//! The embedded [`OfferStore`]: live offers in the `offers` table (and in
//! memory, for reads), each id's last version in `offer_versions`.
//! Ownership and versions are decided by [`crate::offers::rules`] inside the
//! write transaction, so no two writers can interleave a check and a write.

use std::collections::BTreeMap;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable};
use tokio::sync::broadcast;

use super::tables::{OFFERS, VERSIONS};
use super::{from_json, internal, to_json, EmbeddedStore, Inner};
use crate::offers::{rules, Offer, OfferChange, OfferDraft, OfferFilter, OfferStore, PutOutcome};
use crate::storage::StoreError;

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

impl EmbeddedStore {
    fn offers_read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Offer>> {
        // A poisoned lock only means a panic elsewhere; the map itself is
        // always replaced whole-entry, so it is still consistent.
        self.inner.offers.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    fn set_cached(&self, id: &str, offer: Option<Offer>) {
        let mut map = self.offers.write().unwrap_or_else(|e| e.into_inner());
        match offer {
            Some(o) => map.insert(id.to_string(), o),
            None => map.remove(id),
        };
    }

    fn put(
        &self,
        draft: OfferDraft,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        let _order = self.lock_order();
        let txn = self.db.begin_write().map_err(internal)?;
        let outcome = {
            let mut offers = txn.open_table(OFFERS).map_err(internal)?;
            let mut versions = txn.open_table(VERSIONS).map_err(internal)?;
            let existing: Option<Offer> = match offers.get(draft.id.as_str()).map_err(internal)? {
                Some(v) => Some(from_json("offer", v.value())?),
                None => None,
            };
            let last_version = versions
                .get(draft.id.as_str())
                .map_err(internal)?
                .map(|v| v.value())
                .unwrap_or(0);
            let outcome = rules::put(
                draft,
                existing.as_ref(),
                last_version,
                expected_version,
                crate::storage::now(),
            )?;
            let offer = &outcome.offer;
            offers
                .insert(offer.id.as_str(), to_json(offer)?.as_slice())
                .map_err(internal)?;
            versions
                .insert(offer.id.as_str(), offer.version)
                .map_err(internal)?;
            outcome
        };
        txn.commit().map_err(internal)?;
        self.set_cached(&outcome.offer.id, Some(outcome.offer.clone()));
        self.publish(OfferChange::Upserted(outcome.offer.clone()));
        Ok(outcome)
    }

    fn delete(&self, id: &str, owner: &str) -> Result<Offer, StoreError> {
        let _order = self.lock_order();
        let txn = self.db.begin_write().map_err(internal)?;
        let (offer, version) = {
            let mut offers = txn.open_table(OFFERS).map_err(internal)?;
            let mut versions = txn.open_table(VERSIONS).map_err(internal)?;
            let live: Option<Offer> = match offers.get(id).map_err(internal)? {
                Some(v) => Some(from_json("offer", v.value())?),
                None => None,
            };
            let last = versions
                .get(id)
                .map_err(internal)?
                .map(|v| v.value())
                .unwrap_or(0);
            let version = rules::delete(live.as_ref(), owner, last)?;
            offers.remove(id).map_err(internal)?;
            versions.insert(id, version).map_err(internal)?;
            (live.ok_or(StoreError::NotFound)?, version)
        };
        txn.commit().map_err(internal)?;
        self.set_cached(id, None);
        self.publish(OfferChange::Deleted {
            id: id.to_string(),
            cluster_id: offer.cluster_id.clone(),
            version,
        });
        Ok(offer)
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
        self.blocking(move |inner| inner.put(draft, expected_version))
            .await
    }

    async fn delete_offer(&self, id: &str, owner_cluster_id: &str) -> Result<Offer, StoreError> {
        let (id, owner) = (id.to_string(), owner_cluster_id.to_string());
        self.blocking(move |inner| inner.delete(&id, &owner)).await
    }

    async fn count_offers(&self) -> Result<u64, StoreError> {
        Ok(self.offers_read().len() as u64)
    }

    fn changes(&self) -> broadcast::Receiver<OfferChange> {
        self.inner.changes.subscribe()
    }
}
