//! The embedded backend: ONE redb file (`<data dir>/catalog.redb`), no
//! server to run. It implements every feature's store trait over that one
//! [`Database`]: offers ([`offers`]), providers ([`providers`]),
//! reservations ([`reservations`]) and OSB instances and bindings
//! ([`osb`]).
//!
//! Every write is committed with immediate durability (fsync) before it is
//! acknowledged, so an acknowledged write survives a crash; concurrent offer
//! writes share one transaction and one fsync ([`group`]). Live offers,
//! provider accounts, disabled flags and peering registrations are also
//! kept in memory, loaded at open and updated after each commit, so their
//! reads never touch the disk. redb locks its file:
//! one catalog process per data directory. The file holds sealed peering
//! tokens, so it is readable by the catalog's user only (mode 0600).
//!
//! Data directories written before the stores were merged (a second file,
//! `buying.redb`) are migrated on open ([`migrate`]).

mod group;
mod migrate;
mod offers;
mod osb;
mod providers;
mod reservations;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use redb::{Database, ReadableDatabase, ReadableTable, Table, WriteTransaction};
use tokio::sync::broadcast;

use crate::offers::{Offer, OfferChange};
use crate::store::{Health, StoreError, CHANGE_CHANNEL_CAPACITY};

pub use migrate::OLD_BUYING_DB_FILE;

/// File name of the database inside the data directory.
pub const DB_FILE: &str = "catalog.redb";

/// Every table of the file, by the feature that owns it.
pub(crate) mod tables {
    use redb::TableDefinition;

    /// Live offers: id → JSON of `Offer`.
    pub const OFFERS: TableDefinition<&str, &[u8]> = TableDefinition::new("offers");
    /// Last version of every id ever written, deleted ones included, so a
    /// re-created offer continues its version count.
    pub const VERSIONS: TableDefinition<&str, u64> = TableDefinition::new("offer_versions");

    /// Provider accounts: cluster ID → JSON of `ProviderAccount`.
    pub const PROVIDERS: TableDefinition<&str, &[u8]> = TableDefinition::new("providers");
    /// cluster ID → sealed peering token.
    pub const PEERING: TableDefinition<&str, &[u8]> = TableDefinition::new("peering_secrets");
    /// cluster ID → JSON of `ProviderPeering` (class, sealed kubeconfig).
    pub const PROVIDER_PEERING: TableDefinition<&str, &[u8]> =
        TableDefinition::new("provider_peering");
    /// subject → JSON of `IdentityKind`: provider cluster IDs and consumer
    /// subjects, one namespace.
    pub const IDENTITIES: TableDefinition<&str, &[u8]> = TableDefinition::new("identities");
    /// cluster ID → disabled since (ms).
    pub const DISABLED: TableDefinition<&str, i64> = TableDefinition::new("disabled_providers");

    /// id → JSON of `Reservation`.
    pub const RESERVATIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("reservations");
    /// `offer␟plan␟id` → deadline in ms (`u64::MAX` for purchases): the
    /// active holdings of each plan, found by prefix.
    pub const HOLDS: TableDefinition<&str, u64> = TableDefinition::new("holds");
    /// `offer␟plan` → cap.
    pub const CAPS: TableDefinition<&str, u32> = TableDefinition::new("plan_caps");
    /// `<deadline ms, 20 digits>␟id` for reservations still `reserved`, in
    /// deadline order for the sweeper.
    pub const DUE: TableDefinition<&str, u8> = TableDefinition::new("reservations_due");
    /// `consumer␟id`.
    pub const BY_CONSUMER: TableDefinition<&str, u8> =
        TableDefinition::new("reservations_by_consumer");
    /// `provider cluster ID␟id`: what a provider sold, read on every poll
    /// of its controllers without reading anyone else's records.
    pub const BY_PROVIDER: TableDefinition<&str, u8> =
        TableDefinition::new("reservations_by_provider");
    /// [`SEQ_HEAD`] → the sequence of the last committed write of a
    /// reservation record (issue 44): taken in the same transaction as the
    /// write it stamps, so sequences follow commit order.
    pub const CONTRACT_SEQ: TableDefinition<&str, u64> = TableDefinition::new("contract_sequence");
    /// The one key of [`CONTRACT_SEQ`].
    pub const SEQ_HEAD: &str = "head";
    /// `(seq, id)` of every record, at the sequence of its last write
    /// (records written before sequences were kept: 0).
    pub const BY_SEQ: TableDefinition<(u64, &str), u8> =
        TableDefinition::new("reservations_by_seq");
    /// `(consumer, seq, id)`: a consumer's records in write order, so a
    /// consumer's changes are one range scan of its own entries.
    pub const CONSUMER_SEQ: TableDefinition<(&str, u64, &str), u8> =
        TableDefinition::new("reservations_by_consumer_seq");
    /// `(provider cluster ID, seq, id)`: the same for what a provider sold.
    pub const PROVIDER_SEQ: TableDefinition<(&str, u64, &str), u8> =
        TableDefinition::new("reservations_by_provider_seq");

    pub const OSB_INSTANCES: TableDefinition<&str, &[u8]> = TableDefinition::new("osb_instances");
    pub const OSB_BINDINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("osb_bindings");
    /// `instance␟binding`.
    pub const OSB_BINDINGS_BY_INSTANCE: TableDefinition<&str, u8> =
        TableDefinition::new("osb_bindings_by_instance");
    /// `owner␟instance`: a customer's service instances (`GET
    /// /service-instances`) without reading anyone else's.
    pub const OSB_INSTANCES_BY_OWNER: TableDefinition<&str, u8> =
        TableDefinition::new("osb_instances_by_owner");
    /// `provider cluster ID␟instance`: the instances a provider sells.
    pub const OSB_INSTANCES_BY_PROVIDER: TableDefinition<&str, u8> =
        TableDefinition::new("osb_instances_by_provider");
}

/// Separator inside composite keys; ids never contain control characters.
pub(crate) const SEP: char = '\u{1f}';

/// See the module docs. Cheap to clone: every clone is the same store.
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    offers: RwLock<BTreeMap<String, Offer>>,
    /// Accounts, disabled flags and peering registrations ([`providers`]).
    providers: RwLock<providers::ProviderMemory>,
    /// Held across commit and publish so changes go out in commit order.
    write_order: Mutex<()>,
    changes: broadcast::Sender<OfferChange>,
    /// Offer writes waiting for the group committer ([`group`]).
    offer_writes: std::sync::mpsc::Sender<group::Write>,
    /// The contract sequence's head, raised after each committed record
    /// write ([`reservations`]).
    contract_writes: tokio::sync::watch::Sender<u64>,
}

/// The embedded backend's one error classifier: redb and I/O failures are
/// server faults (there is no server to be unreachable).
fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}

fn millis(t: DateTime<Utc>) -> u64 {
    u64::try_from(t.timestamp_millis()).unwrap_or(0)
}

fn from_millis(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// The half-open key range of every key starting with `prefix␟`.
fn prefix_range(prefix: &str) -> (String, String) {
    // '\u{20}' is the character after SEP.
    (format!("{prefix}{SEP}"), format!("{prefix}\u{20}"))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(internal)
}

fn from_json<T: serde::de::DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| internal(format!("{what} is corrupt: {e}")))
}

/// The JSON record at `key` of `table`, decoded (`what` names it if it is
/// corrupt).
fn get_record<T: serde::de::DeserializeOwned>(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
    what: &str,
) -> Result<Option<T>, StoreError> {
    match table.get(key).map_err(internal)? {
        Some(v) => Ok(Some(from_json(what, v.value())?)),
        None => Ok(None),
    }
}

/// Run `write` in one write transaction and commit it (with its fsync) only
/// when `write` answers true: a conditional write whose condition fails
/// leaves the file as it was and costs no fsync.
fn write_if(
    db: &Database,
    write: impl FnOnce(&WriteTransaction) -> Result<bool, StoreError>,
) -> Result<bool, StoreError> {
    let txn = db.begin_write().map_err(internal)?;
    if !write(&txn)? {
        return Ok(false);
    }
    txn.commit().map_err(internal)?;
    Ok(true)
}

/// Insert `value` at `key` unless the key is taken: false, and nothing
/// written, if it is (ids chosen by clients are claimed, never overwritten).
fn insert_new(
    table: &mut Table<'_, &str, &[u8]>,
    key: &str,
    value: &[u8],
) -> Result<bool, StoreError> {
    if table.get(key).map_err(internal)?.is_some() {
        return Ok(false);
    }
    table.insert(key, value).map_err(internal)?;
    Ok(true)
}

impl EmbeddedStore {
    /// Open (or create) `<dir>/catalog.redb`, creating `dir` if needed, and
    /// migrate what an older catalog left beside it.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| internal(format!("creating {}: {e}", dir.display())))?;
        // The directory holds the database and (by default) the signing key:
        // only the catalog's user may list or enter it. An older catalog
        // created it 0755; fixed here on every open.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| internal(format!("restricting {}: {e}", dir.display())))?;
        }
        let path = dir.join(DB_FILE);
        let db = Database::create(&path)
            .map_err(|e| internal(format!("opening {}: {e}", path.display())))?;
        // It holds sealed peering tokens: readable by the catalog's user only.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| internal(format!("restricting {}: {e}", path.display())))?;
        }
        let txn = db.begin_write().map_err(internal)?;
        {
            use tables::*;
            // Creating the tables up front lets read transactions assume them.
            txn.open_table(OFFERS).map_err(internal)?;
            txn.open_table(VERSIONS).map_err(internal)?;
            txn.open_table(PROVIDERS).map_err(internal)?;
            txn.open_table(PEERING).map_err(internal)?;
            txn.open_table(DISABLED).map_err(internal)?;
            txn.open_table(PROVIDER_PEERING).map_err(internal)?;
            txn.open_table(RESERVATIONS).map_err(internal)?;
            txn.open_table(HOLDS).map_err(internal)?;
            txn.open_table(CAPS).map_err(internal)?;
            txn.open_table(DUE).map_err(internal)?;
            txn.open_table(BY_CONSUMER).map_err(internal)?;
            txn.open_table(BY_PROVIDER).map_err(internal)?;
            txn.open_table(CONTRACT_SEQ).map_err(internal)?;
            txn.open_table(BY_SEQ).map_err(internal)?;
            txn.open_table(CONSUMER_SEQ).map_err(internal)?;
            txn.open_table(PROVIDER_SEQ).map_err(internal)?;
            txn.open_table(OSB_INSTANCES).map_err(internal)?;
            txn.open_table(OSB_BINDINGS).map_err(internal)?;
            txn.open_table(OSB_BINDINGS_BY_INSTANCE).map_err(internal)?;
            txn.open_table(OSB_INSTANCES_BY_OWNER).map_err(internal)?;
            txn.open_table(OSB_INSTANCES_BY_PROVIDER)
                .map_err(internal)?;
        }
        txn.commit().map_err(internal)?;
        migrate::merge_buying_file(dir, &db)?;
        migrate::index_by_provider(&db)?;
        migrate::index_osb_instances(&db)?;
        let head = migrate::index_by_sequence(&db)?;

        let offers = offers::load(&db)?;
        let provider_memory = providers::load(&db)?;
        let (changes, _) = broadcast::channel(CHANGE_CHANNEL_CAPACITY);
        let (offer_writes, queue) = std::sync::mpsc::channel();
        let inner = Arc::new(Inner {
            db,
            offers: RwLock::new(offers),
            providers: RwLock::new(provider_memory),
            write_order: Mutex::new(()),
            changes,
            offer_writes,
            contract_writes: tokio::sync::watch::channel(head).0,
        });
        group::start(Arc::downgrade(&inner), queue)
            .map_err(|e| internal(format!("starting the offer committer: {e}")))?;
        Ok(Self { inner })
    }

    /// Run `f` on the blocking pool (redb calls block on the disk).
    async fn blocking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| internal(format!("store task failed: {e}")))?
    }

    /// [`EmbeddedStore::blocking`] for code that needs only the database.
    async fn blocking_db<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    {
        self.blocking(move |inner| f(&inner.db)).await
    }
}

impl Inner {
    fn lock_order(&self) -> std::sync::MutexGuard<'_, ()> {
        self.write_order.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue an offer write for the group committer.
    fn enqueue(&self, write: group::Write) -> Result<(), StoreError> {
        self.offer_writes
            .send(write)
            .map_err(|_| internal("the offer committer stopped"))
    }

    fn publish(&self, change: OfferChange) {
        // No receivers is fine: nobody is following right now.
        let _ = self.changes.send(change);
    }
}

#[async_trait]
impl Health for EmbeddedStore {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.blocking(|inner| inner.db.begin_read().map(|_| ()).map_err(internal))
            .await
    }
}
