//! The contract change stream, `GET /contract-changes` (issue 44): each
//! party follows its own contracts as NDJSON lines
//! ([`catalog_client::wire::contract_stream::ContractEvent`]) instead of
//! polling `GET /contracts`.
//!
//! - [`query`]: the query (`since`, `active`) and whose records a viewer
//!   reads (pure).
//! - [`lines`]: the lines as bytes, a change shown as `GET /contracts`
//!   shows it to its reader.
//! - [`hub`]: the process's one fan-out — one store read per batch of
//!   changes, whatever the number of streams; each record to the streams
//!   of its parties only, found by subject; bounded queues, limits.
//! - [`stream`]: one stream's body — snapshot or resume, then the
//!   fan-out's lines, heartbeats, the end at token expiry or shutdown.
//! - [`http`]: the endpoint; [`config`]: its flags; [`metrics`]: its
//!   metrics.
//!
//! The sequence is the store's ([`crate::buying::store::ReservationStore::contract_head`]):
//! every write of a record takes the next one, kept with the record, so it
//! survives restarts and a follower resumes with `?since=` without a
//! snapshot. The position rules are [`crate::store::sequence`]'s.

pub mod config;
pub mod http;
pub mod hub;
pub mod lines;
pub mod metrics;
pub mod query;
pub mod stream;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use config::ContractStreamConfig;
pub use metrics::StreamMetrics;

use crate::buying::Buying;

/// What `GET /contract-changes` handlers share (`web::Data<ContractChanges>`).
#[derive(Clone)]
pub struct ContractChanges {
    pub hub: Arc<hub::Hub>,
    pub buying: Buying,
    /// `--contract-stream-heartbeat`.
    pub heartbeat: Duration,
}

impl ContractChanges {
    /// Start the process's fan-out on `buying`'s store (it stops at
    /// `shutdown`, which also ends every stream).
    pub async fn start(
        buying: Buying,
        config: &ContractStreamConfig,
        metrics: StreamMetrics,
        shutdown: CancellationToken,
    ) -> Self {
        // Subscribed before the head is read: no write after it is missed.
        let writes = buying.store.contract_writes();
        let cursor = match buying.store.contract_head().await {
            Ok(head) => head,
            Err(error) => {
                let known = *writes.borrow();
                tracing::warn!(%error, known, "cannot read the contract sequence's head at start; the fan-out starts from the last one known");
                known
            }
        };
        let hub = hub::Hub::new(
            config.contract_stream_per_identity,
            config.contract_stream_max,
            usize::from(config.contract_stream_queue),
            cursor,
            metrics,
            shutdown,
        );
        tokio::spawn(
            hub::run(hub.clone(), buying.clone(), writes)
                .instrument(tracing::info_span!("contract_fanout")),
        );
        ContractChanges {
            hub,
            buying,
            heartbeat: config.contract_stream_heartbeat,
        }
    }
}
