//! The embedded [`OsbStore`]: Open Service Broker instances (written with a
//! revision compare-and-swap) and bindings, with an index of each
//! instance's bindings, in the one redb file.

use async_trait::async_trait;
use redb::{ReadableDatabase, ReadableTable, Table};

use super::tables::{OSB_BINDINGS, OSB_BINDINGS_BY_INSTANCE, OSB_INSTANCES};
use super::{from_json, get_record, internal, prefix_range, to_json, EmbeddedStore, SEP};
use crate::osb::model::{OsbBinding, OsbInstance};
use crate::osb::OsbStore;
use crate::storage::StoreError;

/// The revision of OSB instance `id`, if it exists: what a conditional
/// write compares.
fn instance_revision(table: &Table<'_, &str, &[u8]>, id: &str) -> Result<Option<u64>, StoreError> {
    Ok(get_record::<OsbInstance>(table, id, "OSB instance")?.map(|i| i.revision))
}

#[async_trait]
impl OsbStore for EmbeddedStore {
    async fn osb_insert_instance(&self, inst: &OsbInstance) -> Result<bool, StoreError> {
        let inst = inst.clone();
        self.blocking_db(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
                if table.get(inst.id.as_str()).map_err(internal)?.is_some() {
                    return Ok(false);
                }
                table
                    .insert(inst.id.as_str(), to_json(&inst)?.as_slice())
                    .map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
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
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
                if instance_revision(&table, &inst.id)? != Some(expected_revision) {
                    return Ok(false);
                }
                table
                    .insert(inst.id.as_str(), to_json(&inst)?.as_slice())
                    .map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
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
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
                if instance_revision(&table, &id)? != Some(expected_revision) {
                    return Ok(false);
                }
                table.remove(id.as_str()).map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
        })
        .await
    }

    async fn osb_insert_binding(&self, b: &OsbBinding) -> Result<bool, StoreError> {
        let b = b.clone();
        self.blocking_db(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(OSB_BINDINGS).map_err(internal)?;
                if table.get(b.id.as_str()).map_err(internal)?.is_some() {
                    return Ok(false);
                }
                table
                    .insert(b.id.as_str(), to_json(&b)?.as_slice())
                    .map_err(internal)?;
                txn.open_table(OSB_BINDINGS_BY_INSTANCE)
                    .map_err(internal)?
                    .insert(format!("{}{SEP}{}", b.instance_id, b.id).as_str(), 0)
                    .map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
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

    async fn osb_delete_binding(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.blocking_db(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
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
                    .remove(format!("{}{SEP}{}", b.instance_id, b.id).as_str())
                    .map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
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
}
