//! The embedded [`ProviderStore`]: accounts, sealed peering tokens and
//! disabled flags, each a table of the one redb file.
//!
//! Accounts, disabled flags and peering registrations are also kept in
//! memory ([`ProviderMemory`]), loaded at open and updated after each
//! commit. redb's file lock makes this process the only writer, so the copy
//! is exact, and an authenticated offer write (token generation, disabled
//! flag, the provider's Liqo generations) reads no table and waits for no
//! blocking thread before its own write.

use std::collections::{BTreeMap, HashMap};
use std::sync::{RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{Database, ReadableDatabase, ReadableTable, Table, TableDefinition};

use super::tables::{DISABLED, IDENTITIES, PEERING, PROVIDERS, PROVIDER_PEERING};
use super::{
    from_json, from_millis, get_record, internal, to_json, write_if, EmbeddedStore, Inner,
};
use crate::providers::{
    IdentityKind, ProviderAccount, ProviderInfo, ProviderPeering, ProviderStore,
};
use crate::store::StoreError;

/// See the module docs.
#[derive(Default)]
pub(super) struct ProviderMemory {
    accounts: HashMap<String, ProviderAccount>,
    disabled: BTreeMap<String, DateTime<Utc>>,
    peering: HashMap<String, ProviderPeering>,
}

/// Every row of the JSON table `definition`, decoded (`what` names the
/// record in the error of a row that does not decode).
fn json_rows<T: serde::de::DeserializeOwned>(
    read: &redb::ReadTransaction,
    definition: TableDefinition<&str, &[u8]>,
    what: &str,
) -> Result<HashMap<String, T>, StoreError> {
    let mut rows = HashMap::new();
    for entry in read
        .open_table(definition)
        .map_err(internal)?
        .iter()
        .map_err(internal)?
    {
        let (k, v) = entry.map_err(internal)?;
        rows.insert(k.value().to_string(), from_json(what, v.value())?);
    }
    Ok(rows)
}

/// Read the three tables [`ProviderMemory`] mirrors.
pub(super) fn load(db: &Database) -> Result<ProviderMemory, StoreError> {
    let read = db.begin_read().map_err(internal)?;
    let mut disabled = BTreeMap::new();
    for entry in read
        .open_table(DISABLED)
        .map_err(internal)?
        .iter()
        .map_err(internal)?
    {
        let (k, v) = entry.map_err(internal)?;
        disabled.insert(k.value().to_string(), from_millis(v.value()));
    }
    Ok(ProviderMemory {
        accounts: json_rows(&read, PROVIDERS, "provider account")?,
        disabled,
        peering: json_rows(&read, PROVIDER_PEERING, "provider peering")?,
    })
}

/// Write `account` in its row of the accounts table.
fn put_account(
    providers: &mut Table<'_, &str, &[u8]>,
    account: &ProviderAccount,
) -> Result<(), StoreError> {
    providers
        .insert(account.cluster_id.as_str(), to_json(account)?.as_slice())
        .map_err(internal)?;
    Ok(())
}

impl Inner {
    /// A poisoned lock only means a panic elsewhere; the maps stay usable.
    fn providers_read(&self) -> RwLockReadGuard<'_, ProviderMemory> {
        self.providers.read().unwrap_or_else(|e| e.into_inner())
    }

    fn providers_write(&self) -> RwLockWriteGuard<'_, ProviderMemory> {
        self.providers.write().unwrap_or_else(|e| e.into_inner())
    }

    fn claim_provider(
        &self,
        account: ProviderAccount,
    ) -> Result<(ProviderAccount, bool), StoreError> {
        let _order = self.lock_order();
        let mut holder = None;
        write_if(&self.db, |txn| {
            let mut providers = txn.open_table(PROVIDERS).map_err(internal)?;
            holder = get_record(&providers, &account.cluster_id, "provider account")?;
            if holder.is_some() {
                return Ok(false);
            }
            put_account(&mut providers, &account)?;
            Ok(true)
        })?;
        if let Some(existing) = holder {
            return Ok((existing, false));
        }
        self.providers_write()
            .accounts
            .insert(account.cluster_id.clone(), account.clone());
        Ok((account, true))
    }

    fn rotate_provider(
        &self,
        expected_hash: &str,
        account: ProviderAccount,
    ) -> Result<bool, StoreError> {
        let _order = self.lock_order();
        let rotated = write_if(&self.db, |txn| {
            let mut providers = txn.open_table(PROVIDERS).map_err(internal)?;
            let existing: ProviderAccount =
                get_record(&providers, &account.cluster_id, "provider account")?
                    .ok_or(StoreError::NotFound)?;
            if existing.secret_hash != expected_hash {
                return Ok(false);
            }
            put_account(&mut providers, &account)?;
            Ok(true)
        })?;
        if rotated {
            self.providers_write()
                .accounts
                .insert(account.cluster_id.clone(), account);
        }
        Ok(rotated)
    }
}

#[async_trait]
impl ProviderStore for EmbeddedStore {
    async fn get_provider(&self, cluster_id: &str) -> Result<Option<ProviderAccount>, StoreError> {
        Ok(self
            .inner
            .providers_read()
            .accounts
            .get(cluster_id)
            .cloned())
    }

    async fn claim_provider(
        &self,
        account: ProviderAccount,
    ) -> Result<(ProviderAccount, bool), StoreError> {
        self.blocking(move |inner| inner.claim_provider(account))
            .await
    }

    async fn claim_identity(
        &self,
        subject: &str,
        kind: IdentityKind,
    ) -> Result<IdentityKind, StoreError> {
        let subject = subject.to_string();
        self.blocking(move |inner| {
            let _order = inner.lock_order();
            let mut holder = kind;
            write_if(&inner.db, |txn| {
                let mut identities = txn.open_table(IDENTITIES).map_err(internal)?;
                if let Some(existing) = get_record(&identities, &subject, "identity")? {
                    holder = existing;
                    return Ok(false);
                }
                identities
                    .insert(subject.as_str(), to_json(&kind)?.as_slice())
                    .map_err(internal)?;
                Ok(true)
            })?;
            Ok(holder)
        })
        .await
    }

    async fn rotate_provider(
        &self,
        expected_hash: &str,
        account: ProviderAccount,
    ) -> Result<bool, StoreError> {
        let expected = expected_hash.to_string();
        self.blocking(move |inner| inner.rotate_provider(&expected, account))
            .await
    }

    async fn list_providers(&self) -> Result<Vec<ProviderInfo>, StoreError> {
        let mut out: Vec<ProviderInfo> = self
            .inner
            .providers_read()
            .accounts
            .values()
            .map(ProviderAccount::info)
            .collect();
        // In cluster ID order, as the table iterates.
        out.sort_by(|a, b| a.cluster_id.cmp(&b.cluster_id));
        Ok(out)
    }

    async fn count_providers(&self) -> Result<u64, StoreError> {
        Ok(self.inner.providers_read().accounts.len() as u64)
    }

    async fn put_peering_secret(
        &self,
        cluster_id: &str,
        sealed: Vec<u8>,
    ) -> Result<(), StoreError> {
        let id = cluster_id.to_string();
        self.blocking_db(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            txn.open_table(PEERING)
                .map_err(internal)?
                .insert(id.as_str(), sealed.as_slice())
                .map_err(internal)?;
            txn.commit().map_err(internal)
        })
        .await
    }

    async fn get_peering_secret(&self, cluster_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let id = cluster_id.to_string();
        self.blocking_db(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(PEERING).map_err(internal)?;
            Ok(table
                .get(id.as_str())
                .map_err(internal)?
                .map(|v| v.value().to_vec()))
        })
        .await
    }

    async fn set_provider_disabled(
        &self,
        cluster_id: &str,
        disabled: bool,
    ) -> Result<(), StoreError> {
        let id = cluster_id.to_string();
        let since = crate::store::now().timestamp_millis();
        self.blocking(move |inner| {
            // The write and the memory change in one order with other
            // provider writes, so memory ends as the table does.
            let _order = inner.lock_order();
            let txn = inner.db.begin_write().map_err(internal)?;
            let kept = {
                let mut table = txn.open_table(DISABLED).map_err(internal)?;
                if disabled {
                    let earlier = table.get(id.as_str()).map_err(internal)?.map(|v| v.value());
                    if earlier.is_none() {
                        table.insert(id.as_str(), since).map_err(internal)?;
                    }
                    Some(earlier.unwrap_or(since))
                } else {
                    table.remove(id.as_str()).map_err(internal)?;
                    None
                }
            };
            txn.commit().map_err(internal)?;
            let mut memory = inner.providers_write();
            match kept {
                Some(ms) => memory.disabled.insert(id, from_millis(ms)),
                None => memory.disabled.remove(&id),
            };
            Ok(())
        })
        .await
    }

    async fn disabled_providers(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
        Ok(self.inner.providers_read().disabled.clone())
    }

    async fn put_provider_peering(
        &self,
        cluster_id: &str,
        peering: ProviderPeering,
    ) -> Result<(), StoreError> {
        let id = cluster_id.to_string();
        self.blocking(move |inner| {
            let json = to_json(&peering)?;
            let _order = inner.lock_order();
            let txn = inner.db.begin_write().map_err(internal)?;
            txn.open_table(PROVIDER_PEERING)
                .map_err(internal)?
                .insert(id.as_str(), json.as_slice())
                .map_err(internal)?;
            txn.commit().map_err(internal)?;
            inner.providers_write().peering.insert(id, peering);
            Ok(())
        })
        .await
    }

    async fn get_provider_peering(
        &self,
        cluster_id: &str,
    ) -> Result<Option<ProviderPeering>, StoreError> {
        Ok(self.inner.providers_read().peering.get(cluster_id).cloned())
    }
}
