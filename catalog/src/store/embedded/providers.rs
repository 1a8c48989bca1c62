//! The embedded [`ProviderStore`]: accounts, sealed peering tokens and
//! disabled flags, each a table of the one redb file.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::tables::{DISABLED, PEERING, PROVIDERS, PROVIDER_PEERING};
use super::{from_millis, get_record, internal, to_json, EmbeddedStore, Inner};
use crate::offers::OfferChange;
use crate::providers::{ProviderAccount, ProviderInfo, ProviderPeering, ProviderStore};
use crate::storage::StoreError;

impl Inner {
    fn claim_provider(
        &self,
        account: ProviderAccount,
    ) -> Result<(ProviderAccount, bool), StoreError> {
        let _order = self.lock_order();
        let txn = self.db.begin_write().map_err(internal)?;
        {
            let mut providers = txn.open_table(PROVIDERS).map_err(internal)?;
            if let Some(v) = providers
                .get(account.cluster_id.as_str())
                .map_err(internal)?
            {
                let existing: ProviderAccount =
                    serde_json::from_slice(v.value()).map_err(internal)?;
                return Ok((existing, false));
            }
            let json = serde_json::to_vec(&account).map_err(internal)?;
            providers
                .insert(account.cluster_id.as_str(), json.as_slice())
                .map_err(internal)?;
        }
        txn.commit().map_err(internal)?;
        self.publish(OfferChange::ProviderAdded(account.info()));
        Ok((account, true))
    }

    fn rotate_provider(
        &self,
        expected_hash: &str,
        account: ProviderAccount,
    ) -> Result<bool, StoreError> {
        let _order = self.lock_order();
        let txn = self.db.begin_write().map_err(internal)?;
        {
            let mut providers = txn.open_table(PROVIDERS).map_err(internal)?;
            let existing: ProviderAccount = match providers
                .get(account.cluster_id.as_str())
                .map_err(internal)?
            {
                Some(v) => serde_json::from_slice(v.value()).map_err(internal)?,
                None => return Err(StoreError::NotFound),
            };
            if existing.secret_hash != expected_hash {
                return Ok(false);
            }
            let json = serde_json::to_vec(&account).map_err(internal)?;
            providers
                .insert(account.cluster_id.as_str(), json.as_slice())
                .map_err(internal)?;
        }
        txn.commit().map_err(internal)?;
        Ok(true)
    }

    fn providers(&self) -> Result<Vec<ProviderAccount>, StoreError> {
        let read = self.db.begin_read().map_err(internal)?;
        let table = read.open_table(PROVIDERS).map_err(internal)?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(internal)? {
            let (_, v) = entry.map_err(internal)?;
            out.push(serde_json::from_slice(v.value()).map_err(internal)?);
        }
        Ok(out)
    }
}

#[async_trait]
impl ProviderStore for EmbeddedStore {
    async fn get_provider(&self, cluster_id: &str) -> Result<Option<ProviderAccount>, StoreError> {
        let id = cluster_id.to_string();
        self.blocking(move |inner| {
            let read = inner.db.begin_read().map_err(internal)?;
            let table = read.open_table(PROVIDERS).map_err(internal)?;
            match table.get(id.as_str()).map_err(internal)? {
                Some(v) => Ok(Some(serde_json::from_slice(v.value()).map_err(internal)?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn claim_provider(
        &self,
        account: ProviderAccount,
    ) -> Result<(ProviderAccount, bool), StoreError> {
        self.blocking(move |inner| inner.claim_provider(account))
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
        self.blocking(|inner| {
            Ok(inner
                .providers()?
                .iter()
                .map(ProviderAccount::info)
                .collect())
        })
        .await
    }

    async fn count_providers(&self) -> Result<u64, StoreError> {
        self.blocking(|inner| {
            let read = inner.db.begin_read().map_err(internal)?;
            read.open_table(PROVIDERS)
                .map_err(internal)?
                .len()
                .map_err(internal)
        })
        .await
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
        let since = crate::storage::now().timestamp_millis();
        self.blocking_db(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(DISABLED).map_err(internal)?;
                if disabled {
                    if table.get(id.as_str()).map_err(internal)?.is_none() {
                        table.insert(id.as_str(), since).map_err(internal)?;
                    }
                } else {
                    table.remove(id.as_str()).map_err(internal)?;
                }
            }
            txn.commit().map_err(internal)
        })
        .await
    }

    async fn disabled_providers(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
        self.blocking_db(|db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(DISABLED).map_err(internal)?;
            let mut out = BTreeMap::new();
            for entry in table.iter().map_err(internal)? {
                let (k, v) = entry.map_err(internal)?;
                out.insert(k.value().to_string(), from_millis(v.value()));
            }
            Ok(out)
        })
        .await
    }

    async fn put_provider_peering(
        &self,
        cluster_id: &str,
        peering: ProviderPeering,
    ) -> Result<(), StoreError> {
        let id = cluster_id.to_string();
        self.blocking_db(move |db| {
            let json = to_json(&peering)?;
            let txn = db.begin_write().map_err(internal)?;
            txn.open_table(PROVIDER_PEERING)
                .map_err(internal)?
                .insert(id.as_str(), json.as_slice())
                .map_err(internal)?;
            txn.commit().map_err(internal)
        })
        .await
    }

    async fn get_provider_peering(
        &self,
        cluster_id: &str,
    ) -> Result<Option<ProviderPeering>, StoreError> {
        let id = cluster_id.to_string();
        self.blocking_db(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(PROVIDER_PEERING).map_err(internal)?;
            get_record(&table, &id, "provider peering")
        })
        .await
    }
}
