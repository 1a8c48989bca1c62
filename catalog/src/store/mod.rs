//! The store vocabulary every feature's store trait speaks, whatever the
//! backend: why an operation did not happen ([`StoreError`], and the HTTP
//! answer each kind maps to), the clock every store keeps times at
//! ([`now`]), the size of the change channels stores publish on, and the
//! one deadline a request's store calls share ([`deadline`]), and the rules
//! that keep a stream of versioned records monotonic ([`sequence`]).
//!
//! It names no feature's types: the traits themselves live in the features
//! (`offers::OfferStore`, `providers::ProviderStore`, ...), their
//! implementations in the backends (the `backends` module, above the features).

pub mod deadline;
pub mod sequence;

use async_trait::async_trait;

use crate::http::ApiError;

/// The backend as a whole, for logs, `/readyz` and metrics.
#[async_trait]
pub trait Health: Send + Sync + 'static {
    /// `"embedded"` or `"mongodb"`.
    fn kind(&self) -> &'static str;

    /// Cheap reachability check (`/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Whether the change channels carry every committed change, other
    /// processes' included. MongoDB: false until its change streams have
    /// opened (or proved unsupported) after start; meanwhile `/readyz`
    /// answers 503, so no subscriber is sent to a process whose feed
    /// would miss other processes' writes.
    fn following_changes(&self) -> bool {
        true
    }
}

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
    /// The backing database cannot be reached right now; retry later. The
    /// message is sent to clients: it never carries driver details.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Anything else (corrupt data, driver bug): a server fault.
    #[error("store failure: {0}")]
    Internal(String),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ApiError::NotFound("not found".into()),
            StoreError::NotOwner => ApiError::Forbidden("this offer belongs to another provider".into()),
            StoreError::VersionConflict { expected, current } => ApiError::Conflict(format!(
                "version: the offer is at version {current}, not {expected}; read it again and retry"
            )),
            StoreError::Unavailable(msg) => ApiError::Unavailable(msg),
            StoreError::Internal(msg) => ApiError::Internal(msg),
        }
    }
}

/// Capacity of a change channel: how far a subscriber may fall behind
/// before it is told it lagged.
pub const CHANGE_CHANNEL_CAPACITY: usize = 1024;

/// The current time at the millisecond precision every store keeps, so a
/// record reads back exactly as its write returned it.
pub fn now() -> chrono::DateTime<chrono::Utc> {
    let t = chrono::Utc::now();
    chrono::DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}
