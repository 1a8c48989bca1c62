//! One follower of the caller's contracts for every controller: the
//! contract change stream `GET /contract-changes` (docs/api.md § "Contract
//! changes"), with polling of `GET /contracts?active=true` only as the
//! fallback while the stream is unavailable.
//!
//! [`ContractFollower::start`] spawns a task with its own [`Session`]; the
//! controllers read what it learnt from memory:
//! [`ContractFollower::active_contracts`] answers like
//! [`Session::active_contracts`] (with an `ETag` of its own, so a caller
//! that polled keeps its conditional loop) and [`ContractFollower::changed`]
//! wakes a caller as soon as something changed, instead of a poll interval.
//!
//! How the task keeps the set:
//!
//! - It connects the stream with the session's bearer token (renewed once
//!   on a 401, like [`Session`]'s calls), without the client's overall
//!   request timeout (a stream lasts as long as the token), reading lines of
//!   at most [`MAX_LISTING_BYTES`] (the largest line is the snapshot).
//! - The first connect takes the snapshot; every reconnect resumes with
//!   `?since=<the last seq seen>` (heartbeats included), so a reconnect
//!   costs the catalog the changes missed, not a listing. A `snapshot`
//!   after a resume (the catalog could not resume) replaces the set; a
//!   `resumed` keeps it. Until a reconnect's first line, the last set stays
//!   in force: a catalog that is only down never looks empty.
//! - A `change` replaces its contract, or removes it once it is no longer
//!   active; a change older (lower `seq`) than the one held for its
//!   contract is ignored ([`state::ContractSet`]).
//! - A stream silent for [`FollowerOptions::idle_timeout`] (three
//!   heartbeats by default) is taken for dead and resumed; reconnects wait
//!   with [`Backoff`] ([`FollowerOptions::retry`]).
//! - A stream refused — 404 from a catalog that predates it, 429 (too many
//!   streams for the identity), 503, no connection, credentials refused —
//!   switches to polling: at once, then every
//!   [`FollowerOptions::fallback_poll`], while the stream is retried with
//!   backoff; the first line of a working stream ends the polling. The
//!   switches are logged at INFO (once each way, with the reason), failures
//!   at WARN.
//!
//! [`MAX_LISTING_BYTES`]: crate::contracts::MAX_LISTING_BYTES

mod lines;
mod state;
mod stream;
mod task;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::Instrument;

use crate::contracts::Listing;
use crate::error::Error;
use crate::session::Session;
use crate::wire::Contract;
use edge::backoff::Backoff;

pub use state::ContractSet;
/// The token [`ContractFollower::start`] stops on (re-exported, so callers
/// need no direct dependency for it).
pub use tokio_util::sync::CancellationToken;

/// How the follower waits.
#[derive(Debug, Clone)]
pub struct FollowerOptions {
    /// Between fallback polls of `GET /contracts?active=true` while the
    /// stream is unavailable (default 5 min).
    pub fallback_poll: Duration,
    /// A stream silent this long is taken for dead and resumed (default
    /// 45 s: three heartbeats).
    pub idle_timeout: Duration,
    /// Delays between attempts to (re)connect the stream (default 500 ms
    /// doubling up to 60 s); reset by every line received.
    pub retry: Backoff,
}

impl FollowerOptions {
    /// The defaults, with fallback polls (and resyncs) every
    /// `fallback_poll`: what a controller's poll-interval flag sets.
    pub fn polling_every(fallback_poll: Duration) -> Self {
        Self {
            fallback_poll,
            ..Self::default()
        }
    }
}

impl Default for FollowerOptions {
    fn default() -> Self {
        Self {
            fallback_poll: Duration::from_secs(5 * 60),
            idle_timeout: Duration::from_secs(45),
            retry: Backoff::new(Duration::from_millis(500), Duration::from_secs(60)),
        }
    }
}

/// Where the followed contracts come from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Nothing has answered yet.
    Connecting,
    /// The change stream.
    Stream,
    /// Fallback polls (the stream is refused or unreachable).
    Polling,
}

/// The caller's active contracts as last learnt.
#[derive(Debug, Clone)]
pub struct FollowedContracts {
    /// None until the first snapshot or poll answered. Newest first (by
    /// purchasedAt, then id), active ones only.
    pub contracts: Option<Vec<Contract>>,
    /// Changes whenever `contracts` changes (never otherwise).
    pub generation: u64,
    pub source: Source,
    /// The last stream position seen (0 before any).
    pub seq: u64,
    /// The last failure (stream or poll), for logs/readiness; None once
    /// things work. While polling works: why the stream is refused.
    pub last_error: Option<String>,
    /// The contracts as the catalog sent them (fields [`Contract`] does not
    /// know included), in the order of `contracts`: what
    /// [`ContractFollower::active_contracts_as`] reads.
    raw: Arc<Vec<serde_json::Value>>,
}

impl FollowedContracts {
    /// Whether the catalog answered the last read, on the stream or by a
    /// poll (false while still connecting).
    pub fn reachable(&self) -> bool {
        self.last_error.is_none() && self.source != Source::Connecting
    }

    fn connecting() -> Self {
        Self {
            contracts: None,
            generation: 0,
            source: Source::Connecting,
            seq: 0,
            last_error: None,
            raw: Arc::new(Vec::new()),
        }
    }

    /// The `ETag` [`ContractFollower::active_contracts`] gives for this
    /// generation (quoted, like an HTTP entity tag).
    pub fn etag(&self) -> String {
        format!("\"follower-{}\"", self.generation)
    }
}

/// A handle on the follower task: cheap to clone, every clone sees the
/// same contracts. The task ends with the `shutdown` token given to
/// [`ContractFollower::start`].
#[derive(Clone)]
pub struct ContractFollower {
    current: watch::Receiver<Arc<FollowedContracts>>,
}

impl std::fmt::Debug for ContractFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let now = self.current.borrow();
        f.debug_struct("ContractFollower")
            .field("source", &now.source)
            .field("seq", &now.seq)
            .field("generation", &now.generation)
            .finish_non_exhaustive()
    }
}

impl ContractFollower {
    /// Spawn the follower task on the current tokio runtime (in a tracing
    /// span naming the party) with its own `session`.
    pub fn start(session: Session, options: FollowerOptions, shutdown: CancellationToken) -> Self {
        let (sender, current) = watch::channel(Arc::new(FollowedContracts::connecting()));
        let span = tracing::info_span!("contract_follower", party = %party(&session));
        tokio::spawn(task::run(session, options, sender, shutdown).instrument(span));
        Self { current }
    }

    /// What [`Session::active_contracts`] answered, from memory:
    /// [`Listing::NotModified`] when `etag` is the current generation's,
    /// else the contracts with this generation's `ETag`. An
    /// [`Error::Unavailable`] (with the last failure) until the catalog has
    /// answered once.
    pub fn active_contracts(&self, etag: Option<&str>) -> Result<Listing, Error> {
        let now = self.current();
        let contracts = answered(&now)?;
        if etag == Some(now.etag().as_str()) {
            return Ok(Listing::NotModified);
        }
        Ok(Listing::Contracts {
            etag: Some(now.etag()),
            contracts: contracts.clone(),
        })
    }

    /// [`ContractFollower::active_contracts`], each contract read as `T`
    /// from the JSON the catalog sent (like
    /// [`Session::active_contracts_as`]): a contract that does not read as
    /// `T` is left out.
    pub fn active_contracts_as<T: serde::de::DeserializeOwned>(
        &self,
        etag: Option<&str>,
    ) -> Result<Listing<T>, Error> {
        let now = self.current();
        answered(&now)?;
        if etag == Some(now.etag().as_str()) {
            return Ok(Listing::NotModified);
        }
        let contracts = now
            .raw
            .iter()
            .filter_map(|raw| match T::deserialize(raw) {
                Ok(read) => Some(read),
                Err(e) => {
                    tracing::debug!(error = %e, id = ?raw.get("id"), "a contract left out: it does not read as the type asked for");
                    None
                }
            })
            .collect();
        Ok(Listing::Contracts {
            etag: Some(now.etag()),
            contracts,
        })
    }

    /// Resolves when [`ContractFollower::current`] changed (contracts,
    /// source or error) since this handle last waited. Never resolves once
    /// the follower has shut down.
    pub async fn changed(&mut self) {
        if self.current.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// The contracts as last learnt, with where they come from.
    pub fn current(&self) -> Arc<FollowedContracts> {
        self.current.borrow().clone()
    }

    /// Resolves once the contracts differ from generation `read`; every
    /// state passed on the way is shown to `seen` first (a change of
    /// source or error alone does not end the wait), for the gauges a
    /// controller keeps.
    pub async fn contracts_changed_from(
        &mut self,
        read: u64,
        mut seen: impl FnMut(&FollowedContracts),
    ) {
        loop {
            self.changed().await;
            let now = self.current();
            seen(&now);
            if now.generation != read {
                return;
            }
        }
    }
}

/// The contracts, or why there are none yet.
fn answered(now: &FollowedContracts) -> Result<&Vec<Contract>, Error> {
    now.contracts.as_ref().ok_or_else(|| {
        Error::Unavailable(match &now.last_error {
            Some(e) => format!("the catalog has not answered the contract follower yet: {e}"),
            None => "the catalog has not answered the contract follower yet".to_string(),
        })
    })
}

/// Who the session is, for the task's span.
fn party(session: &Session) -> String {
    match session.cluster_id() {
        "" => format!("{session:?}"),
        cluster => format!("provider {cluster}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(now: FollowedContracts) -> (watch::Sender<Arc<FollowedContracts>>, ContractFollower) {
        let (sender, current) = watch::channel(Arc::new(now));
        (sender, ContractFollower { current })
    }

    #[test]
    fn unanswered_is_an_error_naming_the_last_failure() {
        let mut now = FollowedContracts::connecting();
        now.last_error = Some("HTTP 429: too many streams".into());
        let (_sender, follower) = handle(now);
        let e = follower.active_contracts(None).unwrap_err();
        assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
        assert!(e.to_string().contains("HTTP 429"), "{e}");
        assert!(follower
            .active_contracts_as::<serde_json::Value>(None)
            .is_err());
    }

    #[test]
    fn listings_come_from_memory_with_the_generations_etag() {
        let mut set = ContractSet::new();
        let good = serde_json::to_value(Contract {
            id: "a".into(),
            active: true,
            ..Contract::default()
        })
        .unwrap();
        let odd = serde_json::json!({"id": "b", "active": true, "cost": []});
        set.snapshot(4, vec![good, odd]);
        let (contracts, raw) = set.contracts().unwrap();
        let (_sender, follower) = handle(FollowedContracts {
            contracts: Some(contracts),
            generation: 3,
            source: Source::Stream,
            seq: 4,
            last_error: None,
            raw: Arc::new(raw),
        });
        let Listing::Contracts { etag, contracts } = follower.active_contracts(None).unwrap()
        else {
            panic!("contracts expected");
        };
        assert_eq!(etag.as_deref(), Some("\"follower-3\""));
        assert_eq!(contracts.len(), 1);
        assert_eq!(
            follower.active_contracts(etag.as_deref()).unwrap(),
            Listing::NotModified
        );
        assert!(matches!(
            follower.active_contracts(Some("\"follower-2\"")).unwrap(),
            Listing::Contracts { .. }
        ));
        // Read as JSON, the contract Contract cannot read is there too; read
        // as a type it does not fit, it is left out, not an error.
        let Listing::Contracts { contracts: raw, .. } = follower
            .active_contracts_as::<serde_json::Value>(None)
            .unwrap()
        else {
            panic!("contracts expected");
        };
        assert_eq!(raw.len(), 2);
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        struct WithCost {
            cost: Vec<u8>,
        }
        let Listing::Contracts {
            contracts: read, ..
        } = follower.active_contracts_as::<WithCost>(None).unwrap()
        else {
            panic!("contracts expected");
        };
        assert_eq!(read.len(), 1);
    }
}
