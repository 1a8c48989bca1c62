//! Where offers live: the [`OfferStore`] trait every backend implements
//! (the embedded and MongoDB backends of the `backends` module), and what a write
//! answers.
//!
//! Backends only read, compare-and-swap and follow changes; the decisions
//! (who may write an offer, which version it gets, whether a conditional
//! write is stale) are made once, by [`super::rules`]. Every committed
//! change is published on [`OfferOfferStore::changes`]; with MongoDB that
//! includes changes made by other catalog processes.

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::{Offer, OfferChange, OfferDraft, OfferFilter};
use crate::store::StoreError;

/// What a create-or-replace did.
#[derive(Debug, Clone, PartialEq)]
pub struct PutOutcome {
    /// The offer as now stored (with its new `version`).
    pub offer: Offer,
    /// True when no live offer had this id before (201), false on replace (200).
    pub created: bool,
}

/// Offers, with ownership and versions enforced inside each write (see
/// [`super::rules`]). Shared as `Arc<dyn OfferStore>`.
#[async_trait]
pub trait OfferStore: Send + Sync + 'static {
    /// Live offers matching `filter`, ordered by id: every page at once.
    async fn list_offers(&self, filter: &OfferFilter) -> Result<Vec<Offer>, StoreError> {
        self.list_offers_page(filter, None, usize::MAX).await
    }

    /// One page of [`OfferStore::list_offers`]: at most `limit` matching offers
    /// whose id sorts after `after` (all ids when `None`), ordered by id.
    /// Ids are unique, so following the last id of each page visits every
    /// offer once even while others are written.
    async fn list_offers_page(
        &self,
        filter: &OfferFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Offer>, StoreError>;

    async fn get_offer(&self, id: &str) -> Result<Option<Offer>, StoreError>;

    /// Create or replace `draft.id` for `draft.owner`.
    ///
    /// Replacing keeps `createdAt`; every write sets `updatedAt` and bumps
    /// `version` by one past the id's last version (a deleted id continues
    /// its count). Fails with [`StoreError::NotOwner`] if a live offer with
    /// this id belongs to another cluster, and with
    /// [`StoreError::VersionConflict`] if `expected_version` is given and
    /// differs from the live offer's version (0 meaning "must not exist").
    async fn put_offer(
        &self,
        draft: OfferDraft,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError>;

    /// Delete live offer `id` owned by `owner_cluster_id`; returns the offer
    /// as it was. [`StoreError::NotFound`] / [`StoreError::NotOwner`] change
    /// nothing.
    async fn delete_offer(&self, id: &str, owner_cluster_id: &str) -> Result<Offer, StoreError>;

    /// How many live offers there are (for metrics).
    async fn count_offers(&self) -> Result<u64, StoreError>;

    /// A receiver of every committed change from now on, in commit order per
    /// offer id. A receiver that falls behind gets `RecvError::Lagged` and
    /// should reload the full list; [`OfferChange::Resync`] asks the same.
    fn changes(&self) -> broadcast::Receiver<OfferChange>;
}
