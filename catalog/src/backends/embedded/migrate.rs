//! Opening data directories written by earlier catalogs.
//!
//! Until the stores were merged, the catalog kept reservations, caps,
//! sealed peering tokens, disabled flags and OSB records in a second redb
//! file, `buying.redb`, beside `catalog.redb`. On open, every table of that
//! file is copied into the one file in a single write transaction, and the
//! old file is then renamed aside (`buying.redb.migrated`), never deleted.
//! Table names did not change, and a copy overwrites the same keys with the
//! same values, so a migration interrupted before the rename simply runs
//! again: it is idempotent.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableError};

use super::internal;
use super::tables::*;
use crate::store::StoreError;

/// The second file of data directories written before the merge.
pub const OLD_BUYING_DB_FILE: &str = "buying.redb";
/// What the old file is renamed to once copied.
pub const MIGRATED_SUFFIX: &str = ".migrated";

/// Copy every entry of table `$def` from read transaction `$from` into
/// write transaction `$into` (a table the old file never created is
/// skipped). A macro because redb's tables are typed per key and value.
macro_rules! copy_table {
    ($from:expr, $into:expr, $def:expr) => {{
        match $from.open_table($def) {
            Ok(source) => {
                let mut target = $into.open_table($def).map_err(internal)?;
                for entry in source.iter().map_err(internal)? {
                    let (k, v) = entry.map_err(internal)?;
                    target.insert(k.value(), v.value()).map_err(internal)?;
                }
            }
            Err(TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(internal(e)),
        }
    }};
}

/// Merge `<dir>/buying.redb` into `db` if it is there (see the module
/// docs). Returns whether anything was migrated.
pub fn merge_buying_file(dir: &Path, db: &Database) -> Result<bool, StoreError> {
    let old_path = dir.join(OLD_BUYING_DB_FILE);
    if !old_path.exists() {
        return Ok(false);
    }
    let old = Database::open(&old_path)
        .map_err(|e| internal(format!("opening {} to migrate it: {e}", old_path.display())))?;
    let from = old.begin_read().map_err(internal)?;
    let into = db.begin_write().map_err(internal)?;
    copy_table!(from, into, RESERVATIONS);
    copy_table!(from, into, HOLDS);
    copy_table!(from, into, CAPS);
    copy_table!(from, into, DUE);
    copy_table!(from, into, BY_CONSUMER);
    copy_table!(from, into, PEERING);
    copy_table!(from, into, DISABLED);
    copy_table!(from, into, OSB_INSTANCES);
    copy_table!(from, into, OSB_BINDINGS);
    copy_table!(from, into, OSB_BINDINGS_BY_INSTANCE);
    into.commit().map_err(internal)?;
    drop(from);
    drop(old);
    let aside = dir.join(format!("{OLD_BUYING_DB_FILE}{MIGRATED_SUFFIX}"));
    std::fs::rename(&old_path, &aside).map_err(|e| {
        internal(format!(
            "renaming {} to {} after migrating it: {e}",
            old_path.display(),
            aside.display()
        ))
    })?;
    tracing::info!(
        from = %old_path.display(),
        aside = %aside.display(),
        "migrated the reservation store into the catalog's one database file"
    );
    Ok(true)
}

/// Build the provider index ([`BY_PROVIDER`]) from the records when it does
/// not hold one entry per record: a data directory written before the index
/// existed, or written meanwhile by such a catalog (a downgrade and back).
/// Run on every open; a complete index is left as it is. Returns whether it
/// was rebuilt.
pub fn index_by_provider(db: &Database) -> Result<bool, StoreError> {
    let txn = db.begin_write().map_err(internal)?;
    let rebuilt = {
        let reservations = txn.open_table(RESERVATIONS).map_err(internal)?;
        let mut index = txn.open_table(BY_PROVIDER).map_err(internal)?;
        let records = reservations.len().map_err(internal)?;
        if index.len().map_err(internal)? == records {
            false
        } else {
            index.retain(|_, _| false).map_err(internal)?;
            for entry in reservations.iter().map_err(internal)? {
                let (_, v) = entry.map_err(internal)?;
                let r = super::reservations::decode(v.value())?;
                index
                    .insert(super::reservations::provider_key(&r).as_str(), 0)
                    .map_err(internal)?;
            }
            tracing::info!(records, "indexed the reservations by provider");
            true
        }
    };
    txn.commit().map_err(internal)?;
    Ok(rebuilt)
}

/// Build the indexes of the OSB instances by owner and by provider
/// ([`OSB_INSTANCES_BY_OWNER`], [`OSB_INSTANCES_BY_PROVIDER`]) from the
/// records when the owner index does not hold one entry per instance (every
/// instance has an owner): a data directory written before these indexes
/// existed, or written meanwhile by such a catalog. Run on every open; a
/// complete index is left as it is (an entry its record no longer matches
/// is skipped when read). Returns whether they were rebuilt.
pub fn index_osb_instances(db: &Database) -> Result<bool, StoreError> {
    let txn = db.begin_write().map_err(internal)?;
    let rebuilt = {
        let instances = txn.open_table(OSB_INSTANCES).map_err(internal)?;
        let records = instances.len().map_err(internal)?;
        let indexed = txn
            .open_table(OSB_INSTANCES_BY_OWNER)
            .map_err(internal)?
            .len()
            .map_err(internal)?;
        if indexed == records {
            false
        } else {
            for table in [OSB_INSTANCES_BY_OWNER, OSB_INSTANCES_BY_PROVIDER] {
                txn.open_table(table)
                    .map_err(internal)?
                    .retain(|_, _| false)
                    .map_err(internal)?;
            }
            for entry in instances.iter().map_err(internal)? {
                let (_, v) = entry.map_err(internal)?;
                let inst = super::from_json("OSB instance", v.value())?;
                super::osb::reindex(&txn, None, Some(&inst))?;
            }
            tracing::info!(records, "indexed the OSB instances by owner and provider");
            true
        }
    };
    txn.commit().map_err(internal)?;
    Ok(rebuilt)
}

/// Build the sequence indexes ([`BY_SEQ`], [`CONSUMER_SEQ`],
/// [`PROVIDER_SEQ`]) from the records when [`BY_SEQ`] does not hold one
/// entry per record — a store written before sequences were kept (its
/// records read sequence 0 and are indexed there) or meanwhile by such a
/// catalog — and make the head at least the highest sequence a record
/// carries. Run on every open; complete indexes are left as they are.
/// Returns the head.
pub fn index_by_sequence(db: &Database) -> Result<u64, StoreError> {
    let txn = db.begin_write().map_err(internal)?;
    let head = {
        let reservations = txn.open_table(RESERVATIONS).map_err(internal)?;
        let records = reservations.len().map_err(internal)?;
        let mut by_seq = txn.open_table(BY_SEQ).map_err(internal)?;
        let mut heads = txn.open_table(CONTRACT_SEQ).map_err(internal)?;
        let mut head = heads
            .get(SEQ_HEAD)
            .map_err(internal)?
            .map_or(0, |v| v.value());
        if by_seq.len().map_err(internal)? != records {
            by_seq.retain(|_, _| false).map_err(internal)?;
            drop(by_seq);
            txn.open_table(CONSUMER_SEQ)
                .map_err(internal)?
                .retain(|_, _| false)
                .map_err(internal)?;
            txn.open_table(PROVIDER_SEQ)
                .map_err(internal)?
                .retain(|_, _| false)
                .map_err(internal)?;
            for entry in reservations.iter().map_err(internal)? {
                let (_, v) = entry.map_err(internal)?;
                let s = super::reservations::decode_sequenced(v.value())?;
                super::reservations::index_seq(&txn, &s.record, s.seq, true)?;
                head = head.max(s.seq);
            }
            tracing::info!(records, "indexed the reservations by contract sequence");
        } else if let Some(last) = by_seq.last().map_err(internal)? {
            head = head.max(last.0.value().0);
        }
        heads.insert(SEQ_HEAD, head).map_err(internal)?;
        head
    };
    txn.commit().map_err(internal)?;
    Ok(head)
}
