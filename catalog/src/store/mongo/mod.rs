//! The MongoDB backend: several catalog processes may share one database.
//! ONE client per process ([`MongoStore::connect`]) serves every feature's
//! store trait: offers ([`offers`]), providers ([`providers`]),
//! reservations ([`reservations`]) and OSB instances and bindings
//! ([`osb`]).
//!
//! Collections (database chosen by `--mongodb-database`): `offers`,
//! `providers`, `peering_secrets`, `disabled_providers`, `reservations`,
//! `plan_units`, `plan_caps`, `osb_instances`, `osb_bindings`, and
//! `settings` (the shared JWT signing key when none is configured). These
//! are the collections catalogs have always written: a database written by
//! an earlier catalog is read as it is.
//!
//! Writes use write concern `majority` with journaling, each conditioned on
//! what it read (a version, a state, a revision, a unique `_id`) and retried
//! on a lost race. Driver errors are sorted once, by [`classify`]: network
//! failures surface as [`StoreError::Unavailable`] with a generic message
//! (the driver's detail — hosts, topology — goes to the log only); the
//! driver reconnects by itself.

mod conn;
mod offers;
mod osb;
mod providers;
mod reservations;

use std::sync::atomic::AtomicBool;
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
use crate::storage::{Health, StoreError, CHANGE_CHANNEL_CAPACITY};

const DUPLICATE_KEY: i32 = 11000;
/// What a client is told when MongoDB cannot be reached: what it can act
/// on, never the driver's detail (hosts, topology, server selection).
pub const UNREACHABLE: &str = "the database (MongoDB) is unreachable; retry later";

/// Connection settings.
#[derive(Debug, Clone)]
pub struct MongoConfig {
    pub uri: String,
    pub database: String,
    /// How long an operation waits for a reachable server before failing
    /// with 503.
    pub timeout: Duration,
}

/// See the module docs. Cheap to clone: every clone shares the client.
#[derive(Clone)]
pub struct MongoStore {
    db: Database,
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
    /// False when the server has no change streams (a standalone mongod):
    /// then this process publishes its own writes, and other processes'
    /// changes are not seen until a reload.
    streams_supported: Arc<AtomicBool>,
    /// Counts change streams that have opened (or are known unsupported),
    /// so `connect` can wait for them and no early write goes unannounced.
    streams_opened: Arc<tokio::sync::watch::Sender<usize>>,
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
        let db = conn::open(config, "liqo-broker-catalog").await?;
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
            changes,
            streams_supported: Arc::new(AtomicBool::new(true)),
            streams_opened: Arc::new(tokio::sync::watch::channel(0).0),
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
        tokio::spawn(
            store
                .clone()
                .follow_offers()
                .instrument(tracing::info_span!("mongodb_changes", coll = "offers")),
        );
        tokio::spawn(
            store
                .clone()
                .follow_providers()
                .instrument(tracing::info_span!("mongodb_changes", coll = "providers")),
        );
        // Wait (bounded) for both streams, so changes committed from now on
        // are published. If the database is away, go on: the streams send
        // `Resync` when they open later.
        if tokio::time::timeout(config.timeout, opened.wait_for(|n| *n >= 2))
            .await
            .is_err()
        {
            warn!("MongoDB change streams not open yet; continuing without them for now");
        }
        Ok(store)
    }
}

#[async_trait]
impl Health for MongoStore {
    fn kind(&self) -> &'static str {
        "mongodb"
    }

    fn following_changes(&self) -> bool {
        *self.streams_opened.borrow() >= 2
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.db
            .run_command(doc! { "ping": 1 })
            .await
            .map(|_| ())
            .map_err(classify)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
