//! The embedded [`OsbStore`]: Open Service Broker instances (written with a
//! revision compare-and-swap) and bindings, with an index of each
//! instance's bindings, in the one redb file.

use async_trait::async_trait;
use redb::{ReadableDatabase, ReadableTable, Table, WriteTransaction};

use super::tables::{OSB_BINDINGS, OSB_BINDINGS_BY_INSTANCE, OSB_INSTANCES};
use super::{
    from_json, get_record, insert_new, internal, prefix_range, to_json, write_if, EmbeddedStore,
    SEP,
};
use crate::osb::model::{OsbBinding, OsbInstance};
use crate::osb::OsbStore;
use crate::store::StoreError;

/// The revision of OSB instance `id`, if it exists: what a conditional
/// write compares.
fn instance_revision(table: &Table<'_, &str, &[u8]>, id: &str) -> Result<Option<u64>, StoreError> {
    Ok(get_record::<OsbInstance>(table, id, "OSB instance")?.map(|i| i.revision))
}

/// The key of `b` in the index of each instance's bindings.
fn binding_index_key(b: &OsbBinding) -> String {
    format!("{}{SEP}{}", b.instance_id, b.id)
}

/// The compare-and-swap of instance writes: `change` runs on the instances
/// table only if instance `id` is still at `expected_revision`; false (and
/// nothing written) otherwise.
fn at_revision(
    txn: &WriteTransaction,
    id: &str,
    expected_revision: u64,
    change: impl FnOnce(&mut Table<'_, &str, &[u8]>) -> Result<(), StoreError>,
) -> Result<bool, StoreError> {
    let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
    if instance_revision(&table, id)? != Some(expected_revision) {
        return Ok(false);
    }
    change(&mut table)?;
    Ok(true)
}

#[async_trait]
impl OsbStore for EmbeddedStore {
    async fn osb_insert_instance(&self, inst: &OsbInstance) -> Result<bool, StoreError> {
        let inst = inst.clone();
        self.blocking_db(move |db| {
            write_if(db, |txn| {
                let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
                insert_new(&mut table, &inst.id, &to_json(&inst)?)
            })
        })
        .await
    }

    async fn osb_get_instance(&self, id: &str) -> Result<Option<OsbInstance>, StoreError> {
        let id = id.to_string();
        self.blocking_db(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(OSB_INSTANCES).map_err(internal)?;
            get_record(&table, &id, "OSB instance")
        })
        .await
    }

    async fn osb_replace_instance(
        &self,
        inst: &OsbInstance,
        expected_revision: u64,
    ) -> Result<bool, StoreError> {
        let inst = inst.clone();
        self.blocking_db(move |db| {
            write_if(db, |txn| {
                at_revision(txn, &inst.id, expected_revision, |table| {
                    table
                        .insert(inst.id.as_str(), to_json(&inst)?.as_slice())
                        .map_err(internal)?;
                    Ok(())
                })
            })
        })
        .await
    }

    async fn osb_delete_instance(
        &self,
        id: &str,
        expected_revision: u64,
    ) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.blocking_db(move |db| {
            write_if(db, |txn| {
                at_revision(txn, &id, expected_revision, |table| {
                    table.remove(id.as_str()).map_err(internal)?;
                    Ok(())
                })
            })
        })
        .await
    }

    async fn osb_insert_binding(&self, b: &OsbBinding) -> Result<bool, StoreError> {
        let b = b.clone();
        self.blocking_db(move |db| {
            write_if(db, |txn| {
                let mut table = txn.open_table(OSB_BINDINGS).map_err(internal)?;
                if !insert_new(&mut table, &b.id, &to_json(&b)?)? {
                    return Ok(false);
                }
                txn.open_table(OSB_BINDINGS_BY_INSTANCE)
                    .map_err(internal)?
                    .insert(binding_index_key(&b).as_str(), 0)
                    .map_err(internal)?;
                Ok(true)
            })
        })
        .await
    }

    async fn osb_get_binding(&self, id: &str) -> Result<Option<OsbBinding>, StoreError> {
        let id = id.to_string();
        self.blocking_db(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(OSB_BINDINGS).map_err(internal)?;
            get_record(&table, &id, "OSB binding")
        })
        .await
    }

    async fn osb_replace_binding(
        &self,
        b: &OsbBinding,
        expected_revision: u64,
    ) -> Result<bool, StoreError> {
        let b = b.clone();
        self.blocking_db(move |db| {
            write_if(db, |txn| {
                let mut table = txn.open_table(OSB_BINDINGS).map_err(internal)?;
                let current = get_record::<OsbBinding>(&table, &b.id, "OSB binding")?;
                if current.map(|c| c.revision) != Some(expected_revision) {
                    return Ok(false);
                }
                table
                    .insert(b.id.as_str(), to_json(&b)?.as_slice())
                    .map_err(internal)?;
                Ok(true)
            })
        })
        .await
    }

    async fn osb_delete_binding(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.blocking_db(move |db| {
            write_if(db, |txn| {
                let mut table = txn.open_table(OSB_BINDINGS).map_err(internal)?;
                let existing: Option<OsbBinding> =
                    match table.remove(id.as_str()).map_err(internal)? {
                        Some(v) => Some(from_json("OSB binding", v.value())?),
                        None => None,
                    };
                let Some(b) = existing else {
                    return Ok(false);
                };
                txn.open_table(OSB_BINDINGS_BY_INSTANCE)
                    .map_err(internal)?
                    .remove(binding_index_key(&b).as_str())
                    .map_err(internal)?;
                Ok(true)
            })
        })
        .await
    }

    async fn osb_bindings_of(&self, instance_id: &str) -> Result<Vec<OsbBinding>, StoreError> {
        let instance = instance_id.to_string();
        self.blocking_db(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let index = read
                .open_table(OSB_BINDINGS_BY_INSTANCE)
                .map_err(internal)?;
            let table = read.open_table(OSB_BINDINGS).map_err(internal)?;
            let (lo, hi) = prefix_range(&instance);
            let mut out = Vec::new();
            for entry in index.range(lo.as_str()..hi.as_str()).map_err(internal)? {
                let (k, _) = entry.map_err(internal)?;
                let Some((_, id)) = k.value().rsplit_once(SEP) else {
                    continue;
                };
                if let Some(v) = table.get(id).map_err(internal)? {
                    out.push(from_json("OSB binding", v.value())?);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn osb_instance_of_reservation(
        &self,
        reservation_id: &str,
    ) -> Result<Option<OsbInstance>, StoreError> {
        let wanted = reservation_id.to_string();
        // A scan: provider reports are rare and instances few on the
        // embedded store (one process, one file).
        self.blocking_db(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(OSB_INSTANCES).map_err(internal)?;
            for entry in table.iter().map_err(internal)? {
                let (_, v) = entry.map_err(internal)?;
                let inst: OsbInstance = from_json("OSB instance", v.value())?;
                if inst.reservation_id.as_deref() == Some(wanted.as_str()) {
                    return Ok(Some(inst));
                }
            }
            Ok(None)
        })
        .await
    }
}
