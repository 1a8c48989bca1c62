//! Where offers and provider accounts live: one [`Store`] trait, two
//! implementations with the same behaviour.
//!
//! - [`EmbeddedStore`]: a redb file in the data directory (the default; a
//!   write is fsynced before it is acknowledged).
//! - [`MongoStore`]: MongoDB through the official driver, for several catalog
//!   processes sharing one database.
//!
//! Both keep ownership checks and version bumps inside the write itself
//! (a transaction in redb, a version-conditioned replace in MongoDB), so no
//! two writers can interleave a check and a write. Both publish every
//! committed change on [`Store::changes`]; with MongoDB that includes
//! changes made by other catalog processes (read from a change stream).

mod change;
mod embedded;
mod filter;
mod mongo;
mod mongo_conn;
pub mod reservations;
mod reservations_embedded;
mod reservations_mongo;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::model::{Offer, OfferDraft, ProviderAccount, ProviderInfo};

pub use change::OfferChange;
pub use embedded::EmbeddedStore;
pub use filter::OfferFilter;
pub use mongo::{MongoConfig, MongoStore};
pub use reservations::ReservationStore;
pub use reservations_embedded::EmbeddedReservationStore;
pub use reservations_mongo::MongoReservationStore;

/// Why a store operation did not happen. Each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The offer (or provider) does not exist.
    #[error("not found")]
    NotFound,
    /// The offer exists and belongs to another provider (its cluster ID).
    #[error("offer belongs to another provider")]
    NotOwner,
    /// A conditional write saw another version than the caller expected.
    #[error("the offer is at version {current}, not the expected {expected}")]
    VersionConflict { expected: u64, current: u64 },
    /// The backing database cannot be reached right now; retry later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Anything else (corrupt data, driver bug): a server fault.
    #[error("store failure: {0}")]
    Internal(String),
}

/// What a create-or-replace did.
#[derive(Debug, Clone, PartialEq)]
pub struct PutOutcome {
    /// The offer as now stored (with its new `version`).
    pub offer: Offer,
    /// True when no live offer had this id before (201), false on replace (200).
    pub created: bool,
}

/// Counts for metrics and readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    pub offers: u64,
    pub providers: u64,
}

/// Offers and provider accounts, with ownership and versions enforced inside
/// each write. Shared as `Arc<dyn Store>` (see [`crate::AppState`]).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `"embedded"` or `"mongodb"`, for logs and metrics.
    fn kind(&self) -> &'static str;

    /// Cheap reachability check (`/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Whether [`Store::changes`] carries every committed change, other
    /// processes' included. MongoDB: false until its change streams have
    /// opened (or proved unsupported) after start; meanwhile `/readyz`
    /// answers 503, so no subscriber is sent to a process whose feed
    /// would miss other processes' writes.
    fn following_changes(&self) -> bool {
        true
    }

    /// Live offers matching `filter`, ordered by id: every page at once.
    async fn list_offers(&self, filter: &OfferFilter) -> Result<Vec<Offer>, StoreError> {
        self.list_offers_page(filter, None, usize::MAX).await
    }

    /// One page of [`Store::list_offers`]: at most `limit` matching offers
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

    async fn get_provider(&self, cluster_id: &str) -> Result<Option<ProviderAccount>, StoreError>;

    /// Store `account` unless its cluster ID is already claimed; returns the
    /// account that holds the ID afterwards and whether it is the new one.
    async fn claim_provider(
        &self,
        account: ProviderAccount,
    ) -> Result<(ProviderAccount, bool), StoreError>;

    /// Replace the account `account.cluster_id` with `account` (new secret
    /// hash, auth URL and generation) if its stored secret hash is still
    /// `expected_hash`. Each rotation hashes with a fresh salt, so the hash
    /// is a compare-and-swap token: of two rotations racing, one wins and
    /// the other gets `Ok(false)` with nothing changed.
    /// [`StoreError::NotFound`] if the cluster ID was never claimed.
    async fn rotate_provider(
        &self,
        expected_hash: &str,
        account: ProviderAccount,
    ) -> Result<bool, StoreError>;

    /// Every provider's public view, ordered by cluster ID.
    async fn list_providers(&self) -> Result<Vec<ProviderInfo>, StoreError>;

    async fn stats(&self) -> Result<StoreStats, StoreError>;

    /// A receiver of every committed change from now on, in commit order per
    /// offer id. A receiver that falls behind gets `RecvError::Lagged` and
    /// should reload the full list; [`OfferChange::Resync`] asks the same.
    fn changes(&self) -> broadcast::Receiver<OfferChange>;
}

/// Capacity of the change channel: how far a subscriber may fall behind
/// before it is told it lagged.
pub const CHANGE_CHANNEL_CAPACITY: usize = 1024;
