//! The embedded [`OsbStore`]: Open Service Broker instances (written with a
//! revision compare-and-swap) and bindings, with an index of each
//! instance's bindings and indexes of the instances by owner and by
//! provider (`GET /service-instances`), in the one redb file.

use async_trait::async_trait;
use redb::{ReadableDatabase, ReadableTable, Table, WriteTransaction};

use super::tables::{
    OSB_BINDINGS, OSB_BINDINGS_BY_INSTANCE, OSB_INSTANCES, OSB_INSTANCES_BY_OWNER,
    OSB_INSTANCES_BY_PROVIDER,
};
use super::{
    from_json, get_record, insert_new, internal, prefix_range, to_json, write_if, EmbeddedStore,
    SEP,
};
use crate::osb::model::{OsbBinding, OsbInstance};
use crate::osb::{InstancesOf, OsbStore};
use crate::store::StoreError;

/// The key of `b` in the index of each instance's bindings.
fn binding_index_key(b: &OsbBinding) -> String {
    format!("{}{SEP}{}", b.instance_id, b.id)
}

/// The key of `inst` in [`OSB_INSTANCES_BY_OWNER`].
pub(super) fn owner_key(inst: &OsbInstance) -> String {
    format!("{}{SEP}{}", inst.owner, inst.id)
}

/// The key of `inst` in [`OSB_INSTANCES_BY_PROVIDER`], if it names its
/// provider (instances written before providers were kept do not).
pub(super) fn provider_key(inst: &OsbInstance) -> Option<String> {
    inst.provider
        .as_ref()
        .map(|provider| format!("{provider}{SEP}{}", inst.id))
}

/// Keep the owner and provider indexes in step with an instance write in
/// `txn`: `old` is the record replaced or deleted (None for an insert),
/// `new` the record written (None for a delete).
pub(super) fn reindex(
    txn: &WriteTransaction,
    old: Option<&OsbInstance>,
    new: Option<&OsbInstance>,
) -> Result<(), StoreError> {
    let mut owners = txn.open_table(OSB_INSTANCES_BY_OWNER).map_err(internal)?;
    let mut providers = txn
        .open_table(OSB_INSTANCES_BY_PROVIDER)
        .map_err(internal)?;
    if let Some(old) = old {
        owners.remove(owner_key(old).as_str()).map_err(internal)?;
        if let Some(key) = provider_key(old) {
            providers.remove(key.as_str()).map_err(internal)?;
        }
    }
    if let Some(new) = new {
        owners
            .insert(owner_key(new).as_str(), 0)
            .map_err(internal)?;
        if let Some(key) = provider_key(new) {
            providers.insert(key.as_str(), 0).map_err(internal)?;
        }
    }
    Ok(())
}

/// The compare-and-swap of instance writes: `change` runs on the instances
/// table only if instance `id` is still at `expected_revision`, and the
/// record it replaces is answered (the indexes are then brought in step);
/// None (and nothing written) otherwise.
fn at_revision(
    txn: &WriteTransaction,
    id: &str,
    expected_revision: u64,
    change: impl FnOnce(&mut Table<'_, &str, &[u8]>) -> Result<(), StoreError>,
) -> Result<Option<OsbInstance>, StoreError> {
    let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
    let Some(current) = get_record::<OsbInstance>(&table, id, "OSB instance")?
        .filter(|current| current.revision == expected_revision)
    else {
        return Ok(None);
    };
    change(&mut table)?;
    Ok(Some(current))
}

#[async_trait]
impl OsbStore for EmbeddedStore {
    async fn osb_insert_instance(&self, inst: &OsbInstance) -> Result<bool, StoreError> {
        let inst = inst.clone();
        self.blocking_db(move |db| {
            write_if(db, |txn| {
                let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
                if !insert_new(&mut table, &inst.id, &to_json(&inst)?)? {
                    return Ok(false);
                }
                reindex(txn, None, Some(&inst))?;
                Ok(true)
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
                let old = at_revision(txn, &inst.id, expected_revision, |table| {
                    table
                        .insert(inst.id.as_str(), to_json(&inst)?.as_slice())
                        .map_err(internal)?;
                    Ok(())
                })?;
                let Some(old) = old else { return Ok(false) };
                reindex(txn, Some(&old), Some(&inst))?;
                Ok(true)
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
                let old = at_revision(txn, &id, expected_revision, |table| {
                    table.remove(id.as_str()).map_err(internal)?;
                    Ok(())
                })?;
                let Some(old) = old else { return Ok(false) };
                reindex(txn, Some(&old), None)?;
                Ok(true)
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

    async fn osb_list_instances(
        &self,
        of: InstancesOf<'_>,
    ) -> Result<Vec<OsbInstance>, StoreError> {
        // Owned for the blocking task, and taken back apart there.
        let party = match of {
            InstancesOf::Owner(p) | InstancesOf::Provider(p) => p.to_string(),
            InstancesOf::All => String::new(),
        };
        let (all, by_owner) = (of == InstancesOf::All, matches!(of, InstancesOf::Owner(_)));
        self.blocking_db(move |db| {
            let of = match (all, by_owner) {
                (true, _) => InstancesOf::All,
                (false, true) => InstancesOf::Owner(&party),
                (false, false) => InstancesOf::Provider(&party),
            };
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(OSB_INSTANCES).map_err(internal)?;
            let mut out = Vec::new();
            let index = match of {
                InstancesOf::Owner(_) => OSB_INSTANCES_BY_OWNER,
                InstancesOf::Provider(_) => OSB_INSTANCES_BY_PROVIDER,
                InstancesOf::All => {
                    for entry in table.iter().map_err(internal)? {
                        let (_, v) = entry.map_err(internal)?;
                        out.push(from_json("OSB instance", v.value())?);
                    }
                    return Ok(out);
                }
            };
            let index = read.open_table(index).map_err(internal)?;
            let (lo, hi) = prefix_range(&party);
            for entry in index.range(lo.as_str()..hi.as_str()).map_err(internal)? {
                let (k, _) = entry.map_err(internal)?;
                let Some(id) = k.value().strip_prefix(lo.as_str()) else {
                    continue;
                };
                // An entry the record no longer matches (left by a catalog
                // without these indexes) is not an answer.
                if let Some(inst) = get_record::<OsbInstance>(&table, id, "OSB instance")? {
                    if of.holds(&inst) {
                        out.push(inst);
                    }
                }
            }
            Ok(out)
        })
        .await
    }
}
