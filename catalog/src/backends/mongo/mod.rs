//! The MongoDB backend: several catalog processes may share one database.
//! ONE client per process ([`MongoStore::connect`]) serves every feature's
//! store trait: offers ([`offers`]), providers ([`providers`]),
//! reservations ([`reservations`]) and OSB instances and bindings
//! ([`osb`]).
//!
//! Collections (database chosen by `--mongodb-database`): `offers`,
//! `providers`, `peering_secrets`, `disabled_providers`, `reservations`,
//! `plan_units`, `plan_caps`, `osb_instances`, `osb_bindings`,
//! `settings` (the shared JWT signing key when none is configured), and
//! `sequences` (the contract sequence's counter, [`sequence`]). A database
//! written by an earlier catalog is read as it is (its reservations without
//! a sequence read as 0).
//!
//! MongoDB must be a replica set (one member will do): reservation writes
//! are transactions ([`sequence`]), and other processes' writes arrive by
//! change streams.
//!
//! Offers, provider accounts (credential generations), disabled flags and
//! peering registrations are also kept in memory ([`memory`]), loaded when
//! each collection's change stream opens and kept current by it
//! ([`follow`]): an authenticated offer write is one round trip, and lists
//! are served from memory. Another process's change (a rotation, a
//! disabling) is honoured here once its change event arrives.
//!
//! Writes use write concern `majority` with journaling, each conditioned on
//! what it read (a version, a state, a revision, a unique `_id`) and retried
//! on a lost race. Driver errors are sorted once, by [`classify`]: network
//! failures surface as [`StoreError::Unavailable`] with a generic message
//! (the driver's detail — hosts, topology — goes to the log only); the
//! driver reconnects by itself.
//!
//! Every store operation runs within `--mongodb-timeout`, whole (retries
//! included), through [`MongoStore::bounded`], and all the store calls of
//! one request share one such deadline, set by the first: a database that
//! stops answering (frozen, partitioned) costs a request at most that long
//! from its first store call, and a
//! write cut short is answered as "outcome unknown", with how to find out
//! ([`Op::Write`]). `/readyz` pings with a shorter deadline
//! ([`PING_DEADLINE`]).

mod conn;
mod contract_follow;
mod follow;
mod memory;
mod offers;
mod osb;
mod providers;
mod reservations;
mod sequence;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use mongodb::bson::{self, doc};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::{Collection, Database};
use tokio::sync::broadcast;
use tracing::{warn, Instrument};

use crate::offers::OfferChange;
use crate::store::deadline::deadline;
use crate::store::{Health, StoreError, CHANGE_CHANNEL_CAPACITY};

const DUPLICATE_KEY: i32 = 11000;
/// What a client is told when MongoDB cannot be reached: what it can act
/// on, never the driver's detail (hosts, topology, server selection).
pub const UNREACHABLE: &str = "the database (MongoDB) is unreachable; retry later";
/// The longest `/readyz` waits for MongoDB's answer to a ping (or
/// `--mongodb-timeout`, if shorter): a load balancer's probe must learn
/// "not ready" well within its own timeout, whatever the flag says.
pub const PING_DEADLINE: Duration = Duration::from_secs(1);

/// What a store operation does, so that its failure tells the client what
/// it can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Op {
    /// Reads only: failing changed nothing, retrying is safe.
    Read,
    /// Writes: cut short by an outage it may or may not have been applied.
    /// The text tells the client how to find out (which resource to read,
    /// and what to look at).
    Write(String),
}

/// Why the database did not answer an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outage {
    /// The driver gave up: no server, connection lost.
    Unreachable,
    /// No answer within `--mongodb-timeout` (a hung or partitioned server).
    Timeout(Duration),
}

/// The 503 message for an operation the database did not answer: the
/// outage, and for a write that its outcome is unknown and how to learn it.
/// Never "too many concurrent writes": that is contention, this is not.
fn outage_message(op: &Op, outage: Outage) -> String {
    let cause = match outage {
        Outage::Unreachable => "the database (MongoDB) is unreachable".to_string(),
        Outage::Timeout(t) => format!(
            "the database (MongoDB) did not answer within {}",
            edge::duration::format(t)
        ),
    };
    match op {
        Op::Read => format!("{cause}; retry later"),
        Op::Write(how) => {
            format!("{cause}; outcome unknown: this write may or may not have been applied. {how}")
        }
    }
}

/// A failure of a store operation, with the [`StoreError`] inside it (if
/// any) reachable, so [`bounded`] can reword an outage for a write.
pub(super) trait StoreFailure: From<StoreError> {
    fn store_error_mut(&mut self) -> Option<&mut StoreError>;
}

impl StoreFailure for StoreError {
    fn store_error_mut(&mut self) -> Option<&mut StoreError> {
        Some(self)
    }
}

impl StoreFailure for crate::buying::store::ReserveError {
    fn store_error_mut(&mut self) -> Option<&mut StoreError> {
        match self {
            Self::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl StoreFailure for crate::buying::store::TransitionError {
    fn store_error_mut(&mut self) -> Option<&mut StoreError> {
        match self {
            Self::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// Run one store operation `fut` (all its round trips and retries) within
/// `timeout` — within a request, within the one deadline all its store
/// calls share ([`crate::store::deadline`]): a request is answered within
/// one `timeout` of its first store call however many it makes. Past it the
/// operation is dropped — the driver discards the connection it was using —
/// and answered with a 503 naming the outage; a write's 503 (on a timeout or
/// an unreachable database) says its outcome is unknown. Other errors pass
/// unchanged.
pub(super) async fn bounded<T, E, F>(timeout: Duration, op: Op, fut: F) -> Result<T, E>
where
    E: StoreFailure,
    F: Future<Output = Result<T, E>>,
{
    match tokio::time::timeout_at(deadline(timeout), fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(mut e)) => {
            if let Some(StoreError::Unavailable(msg)) = e.store_error_mut() {
                if msg == UNREACHABLE {
                    *msg = outage_message(&op, Outage::Unreachable);
                }
            }
            Err(e)
        }
        Err(_) => {
            warn!(
                timeout = %edge::duration::format(timeout),
                write = matches!(op, Op::Write(_)),
                "MongoDB did not answer in time; operation abandoned"
            );
            Err(StoreError::Unavailable(outage_message(&op, Outage::Timeout(timeout))).into())
        }
    }
}

/// Connection settings.
#[derive(Debug, Clone)]
pub struct MongoConfig {
    pub uri: String,
    pub database: String,
    /// The longest one store operation may take (server selection,
    /// connecting, every round trip and retry) before it fails with 503;
    /// also the driver's server-selection and connect timeouts.
    pub timeout: Duration,
}

/// See the module docs. Cheap to clone: every clone shares the client.
#[derive(Clone)]
pub struct MongoStore {
    db: Database,
    /// `--mongodb-timeout`: the bound on every operation.
    timeout: Duration,
    offers: Collection<offers::OfferDoc>,
    providers: Collection<offers::ProviderDoc>,
    peering: Collection<providers::SecretDoc>,
    disabled: Collection<providers::DisabledDoc>,
    reservations: Collection<reservations::ReservationDoc>,
    units: Collection<reservations::UnitDoc>,
    caps: Collection<reservations::CapDoc>,
    instances: Collection<osb::InstanceDoc>,
    bindings: Collection<osb::BindingDoc>,
    changes: broadcast::Sender<OfferChange>,
    /// Counts change streams that have opened (or are known unsupported),
    /// so `connect` can wait for them and no early write goes unannounced.
    streams_opened: Arc<tokio::sync::watch::Sender<usize>>,
    /// Moves when the server at an address restarts (a new process): the
    /// followers then drop their resume tokens and resync.
    server_restarts: tokio::sync::watch::Receiver<u64>,
    /// Offers, accounts, disabled flags and peering kept in memory
    /// ([`memory`], kept current by [`follow`]).
    memory: Arc<memory::Memory>,
    /// The contract head this process knows
    /// ([`crate::buying::store::ReservationStore::contract_writes`]):
    /// raised by its own commits ([`sequence`]) and others' change events
    /// ([`contract_follow`]).
    contract_writes: Arc<tokio::sync::watch::Sender<u64>>,
}

/// Every document `query` finds: the cursor drained, both steps' driver
/// errors classified (a cursor can fail mid-way, after the query answered).
async fn find_all<T, Q>(query: Q) -> Result<Vec<T>, StoreError>
where
    Q: std::future::IntoFuture<Output = mongodb::error::Result<mongodb::Cursor<T>>>,
    T: serde::de::DeserializeOwned + Send + Sync + Unpin,
{
    use futures::TryStreamExt;
    query
        .await
        .map_err(classify)?
        .try_collect()
        .await
        .map_err(classify)
}

/// The MongoDB backend's one error classifier: "retry later" (503) or
/// "server fault" (500). The driver's detail names hosts and topology: it
/// is logged, and the client is told only what it can act on.
fn classify(e: mongodb::error::Error) -> StoreError {
    let unavailable = matches!(
        *e.kind,
        ErrorKind::ServerSelection { .. }
            | ErrorKind::Io(_)
            | ErrorKind::ConnectionPoolCleared { .. }
            | ErrorKind::DnsResolve { .. }
            | ErrorKind::Shutdown
    ) || e.contains_label("RetryableWriteError")
        || e.contains_label("TransientTransactionError");
    if unavailable {
        // The detail is for the operator only.
        warn!(error = %e, "MongoDB unreachable");
        StoreError::Unavailable(UNREACHABLE.into())
    } else {
        StoreError::Internal(format!("MongoDB: {e}"))
    }
}

fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    matches!(&*e.kind, ErrorKind::Write(WriteFailure::WriteError(w)) if w.code == DUPLICATE_KEY)
}

fn bt(t: DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_millis(t.timestamp_millis())
}

fn from_bt(t: bson::DateTime) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(t.timestamp_millis())
        .single()
        .unwrap_or_default()
}

impl MongoStore {
    /// Connect (lazily: the driver connects on first use), start creating the
    /// indexes and following the change streams in the background.
    pub async fn connect(config: &MongoConfig) -> Result<Self, StoreError> {
        let (db, server_restarts) = conn::open(config, "liqo-broker-catalog").await?;
        let (changes, _) = broadcast::channel(CHANGE_CHANNEL_CAPACITY);
        let store = MongoStore {
            offers: db.collection("offers"),
            providers: db.collection("providers"),
            peering: db.collection("peering_secrets"),
            disabled: db.collection("disabled_providers"),
            reservations: db.collection("reservations"),
            units: db.collection("plan_units"),
            caps: db.collection("plan_caps"),
            instances: db.collection("osb_instances"),
            bindings: db.collection("osb_bindings"),
            db,
            timeout: config.timeout,
            changes,
            streams_opened: Arc::new(tokio::sync::watch::channel(0).0),
            server_restarts,
            memory: Arc::default(),
            contract_writes: Arc::new(tokio::sync::watch::channel(0).0),
        };
        let mut opened = store.streams_opened.subscribe();
        tokio::spawn(
            store
                .clone()
                .create_offer_indexes()
                .instrument(tracing::info_span!("mongodb_indexes")),
        );
        tokio::spawn(
            store
                .clone()
                .create_buying_indexes()
                .instrument(tracing::info_span!("mongodb_indexes", area = "buying")),
        );
        // Not waited for: the first open wakes the watchers anyway.
        tokio::spawn(
            store
                .clone()
                .follow_contract_writes()
                .instrument(tracing::info_span!(
                    "mongodb_changes",
                    coll = "reservations"
                )),
        );
        for part in memory::Part::ALL {
            tokio::spawn(
                store
                    .clone()
                    .follow(part)
                    .instrument(tracing::info_span!("mongodb_changes", coll = ?part)),
            );
        }
        // Wait (bounded) for every stream and its load into memory, so
        // changes committed from now on are published and reads are served
        // from memory. If the database is away, go on: reads go to the
        // database, and the streams send `Resync` when they open later.
        if tokio::time::timeout(
            config.timeout,
            opened.wait_for(|n| *n >= memory::Part::ALL.len()),
        )
        .await
        .is_err()
        {
            warn!("MongoDB change streams not open yet; continuing without them for now");
        }
        Ok(store)
    }

    /// [`bounded`] by this store's `--mongodb-timeout`.
    pub(super) async fn bounded<T, E, F>(&self, op: Op, fut: F) -> Result<T, E>
    where
        E: StoreFailure,
        F: Future<Output = Result<T, E>>,
    {
        bounded(self.timeout, op, fut).await
    }
}

#[async_trait]
impl Health for MongoStore {
    fn kind(&self) -> &'static str {
        "mongodb"
    }

    fn following_changes(&self) -> bool {
        *self.streams_opened.borrow() >= memory::Part::ALL.len()
    }

    /// Within [`PING_DEADLINE`] (or `--mongodb-timeout`, if shorter).
    async fn ping(&self) -> Result<(), StoreError> {
        let ping = async {
            self.db
                .run_command(doc! { "ping": 1 })
                .await
                .map(|_| ())
                .map_err(classify)
        };
        bounded(self.timeout.min(PING_DEADLINE), Op::Read, ping).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: StoreError) -> String {
        match e {
            StoreError::Unavailable(msg) => msg,
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }

    /// An operation that never ends is cut at the deadline: a read says
    /// "retry", a write "outcome unknown" and how to find out; neither
    /// blames contention.
    #[tokio::test]
    async fn a_hung_operation_is_answered_at_the_deadline() {
        let t = Duration::from_millis(200);
        let hung = std::future::pending::<Result<(), StoreError>>;
        let start = tokio::time::Instant::now();
        let read = message(bounded(t, Op::Read, hung()).await.unwrap_err());
        assert!(start.elapsed() >= t);
        // Only an upper bound far above the deadline: the point is "ends".
        assert!(start.elapsed() < Duration::from_secs(30));
        assert_eq!(
            read,
            "the database (MongoDB) did not answer within 200ms; retry later"
        );
        let how = "Read the offer (GET /offer/x).".to_string();
        let write = message(bounded(t, Op::Write(how), hung()).await.unwrap_err());
        assert!(write.starts_with("the database (MongoDB) did not answer within 200ms"));
        assert!(write.contains("outcome unknown"), "{write}");
        assert!(write.ends_with("Read the offer (GET /offer/x)."), "{write}");
        assert!(!write.contains("concurrent"), "{write}");
    }

    /// The store calls of one request share one deadline: a call that
    /// succeeds late leaves the next only the rest of the timeout, so the
    /// request's 503 comes one timeout after its first call, not two.
    #[tokio::test]
    async fn a_requests_store_calls_share_one_deadline() {
        let t = Duration::from_secs(1);
        let start = tokio::time::Instant::now();
        let answer = crate::store::deadline::scope(async {
            let slow = async {
                tokio::time::sleep(t * 4 / 5).await;
                Ok::<_, StoreError>(())
            };
            bounded(t, Op::Read, slow).await?;
            let hung = std::future::pending::<Result<(), StoreError>>();
            bounded(t, Op::Write("Look.".into()), hung).await
        })
        .await;
        let took = start.elapsed();
        assert!(message(answer.unwrap_err()).contains("outcome unknown"));
        assert!(took >= t, "{took:?}");
        // One timeout and slack, far below the 1.8 s of one timeout per call.
        assert!(took < t * 3 / 2, "answered after {took:?}");
    }

    /// An unreachable database is reworded for a write (outcome unknown);
    /// every other failure, contention included, passes unchanged, and so
    /// do answers within the deadline.
    #[tokio::test]
    async fn only_outages_are_reworded() {
        let t = Duration::from_secs(2);
        let write = || Op::Write("Look.".into());
        let unreachable = bounded(t, write(), async {
            Err::<(), _>(StoreError::Unavailable(UNREACHABLE.into()))
        });
        let msg = message(unreachable.await.unwrap_err());
        assert!(
            msg.starts_with("the database (MongoDB) is unreachable; outcome unknown"),
            "{msg}"
        );
        let read = bounded(t, Op::Read, async {
            Err::<(), _>(StoreError::Unavailable(UNREACHABLE.into()))
        });
        assert_eq!(message(read.await.unwrap_err()), UNREACHABLE);
        let busy = "too many concurrent writes to offer x; retry";
        let contention = bounded(t, write(), async {
            Err::<(), _>(StoreError::Unavailable(busy.into()))
        });
        assert_eq!(message(contention.await.unwrap_err()), busy);
        let reserve = bounded(t, write(), async {
            Err::<(), _>(crate::buying::store::ReserveError::Store(
                StoreError::Unavailable(UNREACHABLE.into()),
            ))
        });
        match reserve.await.unwrap_err() {
            crate::buying::store::ReserveError::Store(e) => {
                assert!(message(e).contains("outcome unknown"))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            bounded(t, write(), async { Ok::<_, StoreError>(7) }).await,
            Ok(7)
        );
    }

    /// A 503 body never carries the driver's detail.
    #[test]
    fn unreachable_answers_carry_no_driver_detail() {
        let e = mongodb::error::Error::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connecting to db-1.internal:27017 (Topology: ReplicaSetNoPrimary): refused",
        ));
        match classify(e) {
            StoreError::Unavailable(msg) => {
                assert_eq!(msg, UNREACHABLE);
                assert!(!msg.contains("db-1.internal") && !msg.contains("Topology"));
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
}
