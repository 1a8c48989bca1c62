//! Where provider state lives, whatever the backend: accounts (claimed on
//! the first `POST /authenticate`), the sealed copy of each provider's
//! peering token, and the administrator's disabled flags. One trait, so a
//! provider's state is in one place of one store.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{IdentityKind, ProviderAccount, ProviderInfo, ProviderPeering};
use crate::store::StoreError;

/// See the module docs. Shared as `Arc<dyn ProviderStore>`.
#[async_trait]
pub trait ProviderStore: Send + Sync + 'static {
    async fn get_provider(&self, cluster_id: &str) -> Result<Option<ProviderAccount>, StoreError>;

    /// Store `account` unless its cluster ID is already claimed; returns the
    /// account that holds the ID afterwards and whether it is the new one.
    async fn claim_provider(
        &self,
        account: ProviderAccount,
    ) -> Result<(ProviderAccount, bool), StoreError>;

    /// Claim `subject` for `kind` in the one namespace of identities
    /// (provider cluster IDs and consumer-token subjects) unless someone
    /// holds it already; answers the holder's kind afterwards. One
    /// conditional insert per subject, so of two racing claims of one
    /// subject exactly one kind wins and both callers see it.
    async fn claim_identity(
        &self,
        subject: &str,
        kind: IdentityKind,
    ) -> Result<IdentityKind, StoreError>;

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

    /// How many providers there are (for metrics).
    async fn count_providers(&self) -> Result<u64, StoreError>;

    /// Keep a provider's sealed (encrypted) peering token.
    async fn put_peering_secret(&self, cluster_id: &str, sealed: Vec<u8>)
        -> Result<(), StoreError>;

    async fn get_peering_secret(&self, cluster_id: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Disable (true) or re-enable a provider: a disabled provider's plans
    /// cannot be reserved, purchased or provisioned, nor its offers written.
    async fn set_provider_disabled(
        &self,
        cluster_id: &str,
        disabled: bool,
    ) -> Result<(), StoreError>;

    /// Disabled providers and since when.
    async fn disabled_providers(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError>;

    /// Replace what `cluster_id` registered with `PUT /provider/peering`.
    async fn put_provider_peering(
        &self,
        cluster_id: &str,
        peering: ProviderPeering,
    ) -> Result<(), StoreError>;

    /// What `cluster_id` registered with `PUT /provider/peering`, if anything.
    async fn get_provider_peering(
        &self,
        cluster_id: &str,
    ) -> Result<Option<ProviderPeering>, StoreError>;
}
