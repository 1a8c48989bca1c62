//! Where reservations and purchases live: the [`ReservationStore`] trait
//! the backends implement, with per-plan caps. Backends read, write with a
//! compare-and-swap and keep their indexes; which transition is allowed is
//! decided once, by [`super::model::step`].
//!
//! The one hard rule: a plan with a cap never holds more than `cap` active
//! reservations and purchases, however many clients (or catalog processes)
//! race for the last unit. The embedded store checks and writes in one redb
//! write transaction; MongoDB claims one of `cap` numbered slot documents
//! with an insert that the unique `_id` makes atomic (see
//! the MongoDB backend).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::model::{PlanUsage, Reservation, Step, Transition};
use crate::store::StoreError;

/// Why a reservation was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    /// Every unit of the plan is held.
    #[error("plan is sold out: all {cap} units are reserved or purchased")]
    SoldOut { cap: u32 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a consumer cluster ID was not claimed (see
/// [`super::contracts::claim`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// Another consumer holds it with this provider.
    #[error("the consumer cluster ID is held by another consumer")]
    Held,
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

/// What a transition answers once its [`Step`](super::model::Step) is written: the record as
/// now stored, or — for a purchase that came after the deadline and expired
/// the record instead — [`TransitionError::WrongState`] with it.
pub fn written(next: Reservation, refused: bool) -> Result<Reservation, TransitionError> {
    if refused {
        Err(TransitionError::WrongState(Box::new(next)))
    } else {
        Ok(next)
    }
}

/// A [`Step::Refuse`](super::model::Step::Refuse): the record stays as it is.
pub fn refused(current: Reservation) -> TransitionError {
    TransitionError::WrongState(Box::new(current))
}

/// What [`ReservationStore::update`] makes of a record as it reads it: a
/// decision of the model (`step`, `purchase_step`, `report_step`).
pub type Decide = Arc<dyn Fn(&Reservation) -> Step + Send + Sync>;

/// Whose records a contract change stream reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Party {
    /// Every record (an administrator; a process's own fan-out).
    All,
    /// The records bought by `consumer` and those sold by cluster
    /// `provider` (a caller may be both).
    Of {
        consumer: Option<String>,
        provider: Option<String>,
    },
}

/// A record with the store-wide sequence of its last write: every write of
/// a reservation record takes the next one, in the order the writes commit
/// (so a reader that saw `seq` has seen every write below it), and it is
/// kept with the record, so it survives restarts of the catalog and of the
/// database. 0 for records last written before sequences were kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequenced {
    pub seq: u64,
    pub record: Reservation,
}

/// See the module docs.
#[async_trait]
pub trait ReservationStore: Send + Sync + 'static {
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

    /// Replace record `id` by what `decide` makes of it as stored, with a
    /// compare-and-swap (re-read and re-decided if it changed meanwhile),
    /// keeping the plan's units and the expiry index in step with the new
    /// record's [`Reservation::due_at`]. [`Step::Refuse`] changes nothing
    /// and answers [`TransitionError::WrongState`] with the record.
    async fn update(&self, id: &str, decide: Decide) -> Result<Reservation, TransitionError>;

    /// The records sold by provider `cluster_id`, newest first.
    async fn list_sold(&self, cluster_id: &str) -> Result<Vec<Reservation>, StoreError>;

    /// Expire every reservation and contract due at `now`; returns them.
    async fn expire_due(&self, now: DateTime<Utc>) -> Result<Vec<Reservation>, StoreError>;

    /// Set (Some) or lift (None) the cap of a plan. Existing holdings are
    /// never revoked.
    async fn set_plan_cap(
        &self,
        offer_id: &str,
        plan_id: &str,
        cap: Option<u32>,
    ) -> Result<(), StoreError>;

    /// Bind consumer cluster ID `cluster_id`, with provider `provider`, to
    /// `owner` for its reservation `reservation` (about to be purchased
    /// naming it), atomically, as [`claim_step`] decides at `now` from the
    /// stored claim; [`ClaimError::Held`] when another consumer holds it.
    ///
    /// [`claim_step`]: super::contracts::claim::claim_step
    async fn claim_cluster_id(
        &self,
        provider: &str,
        cluster_id: &str,
        owner: &str,
        reservation: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError>;

    /// Drop `reservation` from the claim of `cluster_id` with `provider`
    /// (its purchase did not happen), so it no longer holds the ID for its
    /// reservation's remaining lifetime.
    async fn unclaim_cluster_id(
        &self,
        provider: &str,
        cluster_id: &str,
        reservation: &str,
    ) -> Result<(), StoreError>;

    async fn plan_usage(
        &self,
        offer_id: &str,
        plan_id: &str,
        now: DateTime<Utc>,
    ) -> Result<PlanUsage, StoreError>;

    /// The sequence of the last committed write of any record (0: none).
    async fn contract_head(&self) -> Result<u64, StoreError>;

    /// The records of `party` last written after `since`, in sequence
    /// order, at most `limit`: read through an index by party and
    /// sequence, so its cost follows the party's own writes, not the
    /// store's size.
    async fn changed_since(
        &self,
        party: &Party,
        since: u64,
        limit: usize,
    ) -> Result<Vec<Sequenced>, StoreError>;

    /// The head as this process last learnt it, changed after every
    /// committed write — this process's, and (MongoDB) every other
    /// process's on the same database.
    fn contract_writes(&self) -> tokio::sync::watch::Receiver<u64>;
}
