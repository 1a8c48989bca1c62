//! The embedded [`OfferStore`]: live offers in the `offers` table (and in
//! memory, for reads), each id's last version in `offer_versions`.
//! Ownership and versions are decided by [`crate::offers::rules`] inside the
//! write transaction, so no two writers can interleave a check and a write;
//! writes are committed in groups ([`super::group`]).

use std::collections::BTreeMap;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable};
use tokio::sync::{broadcast, oneshot};

use super::group::Write;
use super::tables::OFFERS;
use super::{from_json, internal, EmbeddedStore, Inner};
use crate::offers::{Offer, OfferChange, OfferDraft, OfferFilter, OfferStore, PutOutcome};
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
