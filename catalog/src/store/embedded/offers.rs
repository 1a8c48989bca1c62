//! The embedded store: one redb file, no server to run.
//!
//! Every write is one redb transaction committed with immediate durability
//! (fsync) before it is acknowledged, so an acknowledged write survives a
//! crash. Live offers are also kept in memory, loaded at open and updated
//! after each commit, so reads never touch the disk. redb locks its file:
//! one catalog process per data directory.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use tokio::sync::broadcast;

use super::{
    OfferChange, OfferFilter, PutOutcome, Store, StoreError, StoreStats, CHANGE_CHANNEL_CAPACITY,
};
use crate::model::{Offer, OfferDraft, ProviderAccount, ProviderInfo};

/// Live offers: id → JSON of [`Offer`].
const OFFERS: TableDefinition<&str, &[u8]> = TableDefinition::new("offers");
/// Last version of every id ever written, deleted ones included, so a
/// re-created offer continues its version count.
const VERSIONS: TableDefinition<&str, u64> = TableDefinition::new("offer_versions");
/// Provider accounts: cluster ID → JSON of [`ProviderAccount`].
const PROVIDERS: TableDefinition<&str, &[u8]> = TableDefinition::new("providers");

/// File name of the database inside the data directory.
pub const DB_FILE: &str = "catalog.redb";

/// See the module docs.
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    offers: RwLock<BTreeMap<String, Offer>>,
    /// Held across commit and publish so changes go out in commit order.
    write_order: Mutex<()>,
    changes: broadcast::Sender<OfferChange>,
}

fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}

impl EmbeddedStore {
    /// Open (or create) `<dir>/catalog.redb`, creating `dir` if needed.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| internal(format!("creating {}: {e}", dir.display())))?;
        let path = dir.join(DB_FILE);
        let db = Database::create(&path)
            .map_err(|e| internal(format!("opening {}: {e}", path.display())))?;
        let txn = db.begin_write().map_err(internal)?;
        {
            // Creating the tables up front lets read transactions assume them.
            txn.open_table(OFFERS).map_err(internal)?;
            txn.open_table(VERSIONS).map_err(internal)?;
            txn.open_table(PROVIDERS).map_err(internal)?;
        }
        txn.commit().map_err(internal)?;

        let mut offers = BTreeMap::new();
        {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(OFFERS).map_err(internal)?;
            for entry in table.iter().map_err(internal)? {
                let (k, v) = entry.map_err(internal)?;
                let offer: Offer = serde_json::from_slice(v.value())
                    .map_err(|e| internal(format!("offer {} is corrupt: {e}", k.value())))?;
                offers.insert(k.value().to_string(), offer);
            }
        }
        let (changes, _) = broadcast::channel(CHANGE_CHANNEL_CAPACITY);
        Ok(Self {
            inner: Arc::new(Inner {
                db,
                offers: RwLock::new(offers),
                write_order: Mutex::new(()),
                changes,
            }),
        })
    }

    fn offers_read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Offer>> {
        // A poisoned lock only means a panic elsewhere; the map itself is
        // always replaced whole-entry, so it is still consistent.
        self.inner.offers.read().unwrap_or_else(|e| e.into_inner())
    }

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
}

impl Inner {
    fn lock_order(&self) -> std::sync::MutexGuard<'_, ()> {
        self.write_order.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, change: OfferChange) {
        // No receivers is fine: nobody is following right now.
        let _ = self.changes.send(change);
    }

    fn set_cached(&self, id: &str, offer: Option<Offer>) {
        let mut map = self.offers.write().unwrap_or_else(|e| e.into_inner());
        match offer {
            Some(o) => map.insert(id.to_string(), o),
            None => map.remove(id),
        };
    }

    fn put(
        &self,
        draft: OfferDraft,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        let _order = self.lock_order();
        let txn = self.db.begin_write().map_err(internal)?;
        let outcome = {
            let mut offers = txn.open_table(OFFERS).map_err(internal)?;
            let mut versions = txn.open_table(VERSIONS).map_err(internal)?;
            let existing: Option<Offer> = match offers.get(draft.id.as_str()).map_err(internal)? {
                Some(v) => Some(serde_json::from_slice(v.value()).map_err(internal)?),
                None => None,
            };
            let last_version = versions
                .get(draft.id.as_str())
                .map_err(internal)?
                .map(|v| v.value())
                .unwrap_or(0);
            if let Some(e) = &existing {
                if e.cluster_id != draft.owner.cluster_id {
                    return Err(StoreError::NotOwner);
                }
            }
            let current = existing.as_ref().map(|e| e.version).unwrap_or(0);
            if let Some(expected) = expected_version {
                if expected != current {
                    return Err(StoreError::VersionConflict { expected, current });
                }
            }
            let now = crate::model::now();
            let created_at = existing.as_ref().map(|e| e.created_at).unwrap_or(now);
            let version = last_version.max(current) + 1;
            let id = draft.id.clone();
            let offer = draft.into_offer(created_at, now, version);
            let json = serde_json::to_vec(&offer).map_err(internal)?;
            offers
                .insert(id.as_str(), json.as_slice())
                .map_err(internal)?;
            versions.insert(id.as_str(), version).map_err(internal)?;
            PutOutcome {
                offer,
                created: existing.is_none(),
            }
        };
        txn.commit().map_err(internal)?;
        self.set_cached(&outcome.offer.id, Some(outcome.offer.clone()));
        self.publish(OfferChange::Upserted(outcome.offer.clone()));
        Ok(outcome)
    }

    fn delete(&self, id: &str, owner: &str) -> Result<Offer, StoreError> {
        let _order = self.lock_order();
        let txn = self.db.begin_write().map_err(internal)?;
        let (offer, version) = {
            let mut offers = txn.open_table(OFFERS).map_err(internal)?;
            let mut versions = txn.open_table(VERSIONS).map_err(internal)?;
            let offer: Offer = match offers.get(id).map_err(internal)? {
                Some(v) => serde_json::from_slice(v.value()).map_err(internal)?,
                None => return Err(StoreError::NotFound),
            };
            if offer.cluster_id != owner {
                return Err(StoreError::NotOwner);
            }
            let last = versions
                .get(id)
                .map_err(internal)?
                .map(|v| v.value())
                .unwrap_or(0);
            let version = last.max(offer.version) + 1;
            offers.remove(id).map_err(internal)?;
            versions.insert(id, version).map_err(internal)?;
            (offer, version)
        };
        txn.commit().map_err(internal)?;
        self.set_cached(id, None);
        self.publish(OfferChange::Deleted {
            id: id.to_string(),
            cluster_id: offer.cluster_id.clone(),
            version,
        });
        Ok(offer)
    }

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
impl Store for EmbeddedStore {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.blocking(|inner| inner.db.begin_read().map(|_| ()).map_err(internal))
            .await
    }

    async fn list_offers_page(
        &self,
        filter: &OfferFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Offer>, StoreError> {
        use std::ops::Bound;
        let offers = self.offers_read();
        let start = match after {
            Some(id) => Bound::Excluded(id),
            None => Bound::Unbounded,
        };
        Ok(offers
            .range::<str, _>((start, Bound::Unbounded))
            .map(|(_, o)| o)
            .filter(|o| filter.matches(o))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn get_offer(&self, id: &str) -> Result<Option<Offer>, StoreError> {
        Ok(self.offers_read().get(id).cloned())
    }

    async fn put_offer(
        &self,
        draft: OfferDraft,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        self.blocking(move |inner| inner.put(draft, expected_version))
            .await
    }

    async fn delete_offer(&self, id: &str, owner_cluster_id: &str) -> Result<Offer, StoreError> {
        let (id, owner) = (id.to_string(), owner_cluster_id.to_string());
        self.blocking(move |inner| inner.delete(&id, &owner)).await
    }

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

    async fn stats(&self) -> Result<StoreStats, StoreError> {
        let offers = self.offers_read().len() as u64;
        let providers = self
            .blocking(|inner| {
                let read = inner.db.begin_read().map_err(internal)?;
                read.open_table(PROVIDERS)
                    .map_err(internal)?
                    .len()
                    .map_err(internal)
            })
            .await?;
        Ok(StoreStats { offers, providers })
    }

    fn changes(&self) -> broadcast::Receiver<OfferChange> {
        self.inner.changes.subscribe()
    }
}
