//! The MongoDB [`ProviderStore`]: accounts in `providers` (keyed by
//! cluster ID, secret hashed), sealed peering tokens in `peering_secrets`,
//! disabled flags in `disabled_providers`, what each registered with
//! `PUT /provider/peering` (kubeconfig sealed) in `provider_peering`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mongodb::bson::{self, doc};
use serde::{Deserialize, Serialize};

use super::offers::ProviderDoc;
use super::{bt, classify, find_all, from_bt, is_duplicate_key, MongoStore, Op};
use crate::providers::{
    IdentityKind, ProviderAccount, ProviderInfo, ProviderPeering, ProviderStore,
};
use crate::store::StoreError;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SecretDoc {
    #[serde(rename = "_id")]
    id: String,
    sealed: bson::Binary,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct DisabledDoc {
    #[serde(rename = "_id")]
    pub(super) id: String,
    pub(super) since: bson::DateTime,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PeeringDoc {
    #[serde(rename = "_id")]
    pub(super) id: String,
    pub(super) body: ProviderPeering,
}

/// A subject of the one namespace of identities (`identities`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct IdentityDoc {
    #[serde(rename = "_id")]
    id: String,
    kind: IdentityKind,
}

impl MongoStore {
    fn identities(&self) -> mongodb::Collection<IdentityDoc> {
        self.db.collection("identities")
    }

    pub(super) fn provider_peering(&self) -> mongodb::Collection<PeeringDoc> {
        self.db.collection("provider_peering")
    }
}

#[async_trait]
impl ProviderStore for MongoStore {
    /// From memory when known there; an unknown one may have just
    /// registered through another process, so the database is asked.
    async fn get_provider(&self, cluster_id: &str) -> Result<Option<ProviderAccount>, StoreError> {
        if let Some(account) = self.memory.provider(cluster_id) {
            return Ok(Some(account));
        }
        self.bounded(Op::Read, async {
            let found = self
                .providers
                .find_one(doc! { "_id": cluster_id })
                .await
                .map_err(classify)?;
            Ok(found.map(ProviderAccount::from))
        })
        .await
    }

    async fn claim_provider(
        &self,
        account: ProviderAccount,
    ) -> Result<(ProviderAccount, bool), StoreError> {
        let how = format!("Read the provider (GET /admin/providers/{}) to see whether it was registered before retrying.", account.cluster_id);
        self.bounded(Op::Write(how), async {
            match self.providers.insert_one(ProviderDoc::from(&account)).await {
                Ok(_) => {
                    self.memory
                        .set_provider(&account.cluster_id, Some(account.clone()));
                    Ok((account, true))
                }
                Err(e) if is_duplicate_key(&e) => {
                    match self.get_provider(&account.cluster_id).await? {
                        Some(existing) => Ok((existing, false)),
                        None => Err(StoreError::Internal(
                            "provider vanished after a duplicate-key insert".into(),
                        )),
                    }
                }
                Err(e) => Err(classify(e)),
            }
        })
        .await
    }

    /// `_id` is the subject, so the insert is the conditional write: a
    /// duplicate key means someone holds it, and the stored kind says who.
    async fn claim_identity(
        &self,
        subject: &str,
        kind: IdentityKind,
    ) -> Result<IdentityKind, StoreError> {
        let how = "Nothing else was written: retry the same request.".to_string();
        self.bounded(Op::Write(how), async {
            let fresh = IdentityDoc {
                id: subject.to_string(),
                kind,
            };
            match self.identities().insert_one(fresh).await {
                Ok(_) => Ok(kind),
                Err(e) if is_duplicate_key(&e) => {
                    let held = self
                        .identities()
                        .find_one(doc! { "_id": subject })
                        .await
                        .map_err(classify)?;
                    held.map(|d| d.kind).ok_or_else(|| {
                        StoreError::Internal(
                            "identity vanished after a duplicate-key insert".into(),
                        )
                    })
                }
                Err(e) => Err(classify(e)),
            }
        })
        .await
    }

    async fn rotate_provider(
        &self,
        expected_hash: &str,
        account: ProviderAccount,
    ) -> Result<bool, StoreError> {
        let how = "Either the old or the new secret is in force: authenticate with the new one to find out.".to_string();
        self.bounded(Op::Write(how), async {
            let swapped = self
                .providers
                .replace_one(
                    doc! { "_id": &account.cluster_id, "secretHash": expected_hash },
                    ProviderDoc::from(&account),
                )
                .await
                .map_err(classify)?;
            if swapped.matched_count == 1 {
                self.memory
                    .set_provider(&account.cluster_id, Some(account.clone()));
                return Ok(true);
            }
            let stored = self
                .providers
                .find_one(doc! { "_id": &account.cluster_id })
                .await
                .map_err(classify)?;
            match stored {
                Some(_) => Ok(false),
                None => Err(StoreError::NotFound),
            }
        })
        .await
    }

    async fn list_providers(&self) -> Result<Vec<ProviderInfo>, StoreError> {
        self.bounded(Op::Read, async {
            let docs: Vec<ProviderDoc> =
                find_all(self.providers.find(doc! {}).sort(doc! { "_id": 1 })).await?;
            Ok(docs
                .into_iter()
                .map(|d| ProviderAccount::from(d).info())
                .collect())
        })
        .await
    }

    async fn count_providers(&self) -> Result<u64, StoreError> {
        self.bounded(Op::Read, async {
            self.providers
                .count_documents(doc! {})
                .await
                .map_err(classify)
        })
        .await
    }

    async fn put_peering_secret(
        &self,
        cluster_id: &str,
        sealed: Vec<u8>,
    ) -> Result<(), StoreError> {
        let how = format!("Authenticating again as {cluster_id} stores the peering token again.");
        self.bounded(Op::Write(how), async {
            let doc = SecretDoc {
                id: cluster_id.to_string(),
                sealed: bson::Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes: sealed,
                },
            };
            self.peering
                .replace_one(doc! { "_id": cluster_id }, doc)
                .upsert(true)
                .await
                .map_err(classify)?;
            Ok(())
        })
        .await
    }

    async fn get_peering_secret(&self, cluster_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.bounded(Op::Read, async {
            Ok(self
                .peering
                .find_one(doc! { "_id": cluster_id })
                .await
                .map_err(classify)?
                .map(|d| d.sealed.bytes))
        })
        .await
    }

    async fn set_provider_disabled(
        &self,
        cluster_id: &str,
        disabled: bool,
    ) -> Result<(), StoreError> {
        let how = format!(
            "Read the provider (GET /admin/providers/{cluster_id}) to see whether it is disabled."
        );
        self.bounded(Op::Write(how), async {
            if disabled {
                let now = crate::store::now();
                let before = self
                    .disabled
                    .find_one_and_update(
                        doc! { "_id": cluster_id },
                        doc! { "$setOnInsert": { "since": bt(now) } },
                    )
                    .upsert(true)
                    .await
                    .map_err(classify)?;
                let since = before.map(|d| from_bt(d.since)).unwrap_or(from_bt(bt(now)));
                self.memory.set_disabled(cluster_id, Some(since));
            } else {
                self.disabled
                    .delete_one(doc! { "_id": cluster_id })
                    .await
                    .map_err(classify)?;
                self.memory.set_disabled(cluster_id, None);
            }
            Ok(())
        })
        .await
    }

    async fn disabled_providers(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
        if let Some(disabled) = self.memory.disabled() {
            return Ok(disabled);
        }
        self.bounded(Op::Read, async {
            let docs: Vec<DisabledDoc> = find_all(self.disabled.find(doc! {})).await?;
            Ok(docs.into_iter().map(|d| (d.id, from_bt(d.since))).collect())
        })
        .await
    }

    async fn put_provider_peering(
        &self,
        cluster_id: &str,
        peering: ProviderPeering,
    ) -> Result<(), StoreError> {
        let how = "Read it (GET /provider/peering) to see what is registered.".to_string();
        self.bounded(Op::Write(how), async {
            let doc = PeeringDoc {
                id: cluster_id.to_string(),
                body: peering,
            };
            self.provider_peering()
                .replace_one(doc! { "_id": cluster_id }, &doc)
                .upsert(true)
                .await
                .map_err(classify)?;
            self.memory.set_peering(cluster_id, Some(doc.body));
            Ok(())
        })
        .await
    }

    async fn get_provider_peering(
        &self,
        cluster_id: &str,
    ) -> Result<Option<ProviderPeering>, StoreError> {
        if let Some(peering) = self.memory.peering(cluster_id) {
            return Ok(peering);
        }
        self.bounded(Op::Read, async {
            Ok(self
                .provider_peering()
                .find_one(doc! { "_id": cluster_id })
                .await
                .map_err(classify)?
                .map(|d| d.body))
        })
        .await
    }
}
