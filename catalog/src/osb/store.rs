//! Where Open Service Broker instances and bindings live: the [`OsbStore`]
//! trait the backends implement. Instances (and service bindings, which
//! their provider settles) are written with a revision compare-and-swap,
//! so concurrent requests on one cannot both win.

use async_trait::async_trait;

use super::model::{OsbBinding, OsbInstance};
use crate::store::StoreError;

/// Whose instances [`OsbStore::osb_list_instances`] answers: the parties
/// `GET /service-instances` shows them to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstancesOf<'a> {
    /// Those this caller provisioned ([`OsbInstance::owner`]).
    Owner(&'a str),
    /// Those sold by this provider cluster ([`OsbInstance::provider`]).
    Provider(&'a str),
    /// Every instance (an administrator's view).
    All,
}

impl InstancesOf<'_> {
    /// Whether `inst` is one of these: what an index entry is checked
    /// against before its record is answered.
    pub fn holds(&self, inst: &OsbInstance) -> bool {
        match self {
            InstancesOf::Owner(owner) => inst.owner == *owner,
            InstancesOf::Provider(provider) => inst.provider.as_deref() == Some(*provider),
            InstancesOf::All => true,
        }
    }
}

/// See the module docs. Shared as `Arc<dyn OsbStore>`.
#[async_trait]
pub trait OsbStore: Send + Sync + 'static {
    /// Insert a new OSB instance; false if the id is taken (nothing written).
    async fn osb_insert_instance(&self, inst: &OsbInstance) -> Result<bool, StoreError>;

    async fn osb_get_instance(&self, id: &str) -> Result<Option<OsbInstance>, StoreError>;

    /// Replace instance `inst.id` if it is still at `expected_revision`.
    async fn osb_replace_instance(
        &self,
        inst: &OsbInstance,
        expected_revision: u64,
    ) -> Result<bool, StoreError>;

    /// Delete instance `id` if it is still at `expected_revision`.
    async fn osb_delete_instance(
        &self,
        id: &str,
        expected_revision: u64,
    ) -> Result<bool, StoreError>;

    /// Insert a new binding; false if the id is taken.
    async fn osb_insert_binding(&self, b: &OsbBinding) -> Result<bool, StoreError>;

    async fn osb_get_binding(&self, id: &str) -> Result<Option<OsbBinding>, StoreError>;

    /// Replace binding `b.id` if it is still at `expected_revision`.
    async fn osb_replace_binding(
        &self,
        b: &OsbBinding,
        expected_revision: u64,
    ) -> Result<bool, StoreError>;

    /// Delete binding `id`; false if it did not exist.
    async fn osb_delete_binding(&self, id: &str) -> Result<bool, StoreError>;

    /// Bindings of instance `instance_id`.
    async fn osb_bindings_of(&self, instance_id: &str) -> Result<Vec<OsbBinding>, StoreError>;

    /// The instance provisioned as purchase (contract) `reservation_id`,
    /// if any: a provider reports a service's state per contract.
    async fn osb_instance_of_reservation(
        &self,
        reservation_id: &str,
    ) -> Result<Option<OsbInstance>, StoreError>;

    /// The instances of `of`, in no particular order: read from an index
    /// by owner or by provider, so a party's listing costs its own
    /// instances, not every instance. Instances that never got a purchase
    /// (provisioning failed before it) are listed too.
    async fn osb_list_instances(&self, of: InstancesOf<'_>)
        -> Result<Vec<OsbInstance>, StoreError>;
}
