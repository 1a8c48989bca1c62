//! Where buying lives: reservations and purchases, per-plan caps, providers'
//! sealed peering tokens, disabled providers, and Open Service Broker
//! instances and bindings. A trait of its own beside [`super::Store`], with
//! the same two backends (embedded redb, MongoDB).
//!
//! The one hard rule: a plan with a cap never holds more than `cap` active
//! reservations and purchases, however many clients (or catalog processes)
//! race for the last unit. The embedded store checks and writes in one redb
//! write transaction; MongoDB claims one of `cap` numbered slot documents
//! with an insert that the unique `_id` makes atomic (see
//! [`super::reservations_mongo`]).

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;
use crate::osb::model::{OsbBinding, OsbInstance};
use crate::reservation::model::{PlanUsage, Reservation, Transition};

/// Why a reservation was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    /// Every unit of the plan is held.
    #[error("plan is sold out: all {cap} units are reserved or purchased")]
    SoldOut { cap: u32 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a state change did not happen.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransitionError {
    #[error("no such reservation")]
    NotFound,
    /// The record is in another state (returned as it is now). A purchase
    /// attempted after the deadline expires the record and lands here too.
    #[error("reservation is {}", .0.state.as_str())]
    WrongState(Box<Reservation>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// See the module docs.
#[async_trait]
pub trait ReservationStore: Send + Sync + 'static {
    /// `"embedded"` or `"mongodb"`.
    fn kind(&self) -> &'static str;

    /// Store `r` (state `reserved`) if its plan has a free unit at `now`.
    async fn reserve(
        &self,
        r: Reservation,
        now: DateTime<Utc>,
    ) -> Result<Reservation, ReserveError>;

    /// The record as stored (a due reservation may still read `reserved`;
    /// callers expire it lazily with [`ReservationStore::transition`]).
    async fn get_reservation(&self, id: &str) -> Result<Option<Reservation>, StoreError>;

    /// Records of `consumer` (all when None), newest first.
    async fn list_reservations(
        &self,
        consumer: Option<&str>,
    ) -> Result<Vec<Reservation>, StoreError>;

    /// Apply `t` to record `id` if it is in `t.from()` — and, for
    /// [`Transition::Purchase`], not due at `now` (a due one is expired
    /// instead and reported as [`TransitionError::WrongState`]); for
    /// [`Transition::Expire`], only if due. Frees the unit when the record
    /// ends.
    async fn transition(
        &self,
        id: &str,
        t: Transition,
        now: DateTime<Utc>,
    ) -> Result<Reservation, TransitionError>;

    /// Expire every reservation due at `now`; returns them.
    async fn expire_due(&self, now: DateTime<Utc>) -> Result<Vec<Reservation>, StoreError>;

    /// Set (Some) or lift (None) the cap of a plan. Existing holdings are
    /// never revoked.
    async fn set_plan_cap(
        &self,
        offer_id: &str,
        plan_id: &str,
        cap: Option<u32>,
    ) -> Result<(), StoreError>;

    async fn plan_usage(
        &self,
        offer_id: &str,
        plan_id: &str,
        now: DateTime<Utc>,
    ) -> Result<PlanUsage, StoreError>;

    /// Keep a provider's sealed (encrypted) peering token.
    async fn put_peering_secret(&self, cluster_id: &str, sealed: Vec<u8>)
        -> Result<(), StoreError>;

    async fn get_peering_secret(&self, cluster_id: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Disable (true) or re-enable a provider: a disabled provider's plans
    /// cannot be reserved, purchased or provisioned.
    async fn set_provider_disabled(
        &self,
        cluster_id: &str,
        disabled: bool,
    ) -> Result<(), StoreError>;

    /// Disabled providers and since when.
    async fn disabled_providers(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError>;

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

    /// Delete binding `id`; false if it did not exist.
    async fn osb_delete_binding(&self, id: &str) -> Result<bool, StoreError>;

    /// Bindings of instance `instance_id`.
    async fn osb_bindings_of(&self, instance_id: &str) -> Result<Vec<OsbBinding>, StoreError>;
}
