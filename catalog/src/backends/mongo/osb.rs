//! The MongoDB [`OsbStore`]: Open Service Broker instances in
//! `osb_instances` (each write conditioned on the revision it read;
//! indexed by owner, provider and purchase, [`INSTANCE_INDEXES`]) and
//! bindings in `osb_bindings`.

use async_trait::async_trait;
use mongodb::bson::doc;
use serde::{Deserialize, Serialize};

use super::{classify, find_all, is_duplicate_key, MongoStore, Op};
use crate::osb::model::{OsbBinding, OsbInstance};
use crate::osb::{InstancesOf, OsbStore};
use crate::store::StoreError;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct InstanceDoc {
    #[serde(rename = "_id")]
    id: String,
    revision: i64,
    body: OsbInstance,
}

impl InstanceDoc {
    fn of(inst: &OsbInstance) -> Self {
        InstanceDoc {
            id: inst.id.clone(),
            revision: i64::try_from(inst.revision).unwrap_or(i64::MAX),
            body: inst.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BindingDoc {
    #[serde(rename = "_id")]
    id: String,
    #[serde(rename = "instanceID")]
    instance_id: String,
    /// What a replacement is conditioned on (absent on bindings written
    /// before service bindings, which are never replaced).
    #[serde(default)]
    revision: i64,
    body: OsbBinding,
}

impl BindingDoc {
    fn of(b: &OsbBinding) -> Self {
        BindingDoc {
            id: b.id.clone(),
            instance_id: b.instance_id.clone(),
            revision: i64::try_from(b.revision).unwrap_or(i64::MAX),
            body: b.clone(),
        }
    }
}

/// The indexes of `osb_instances`: `GET /service-instances` reads a
/// customer's instances by owner and a provider's by provider, and a
/// provider's report finds its instance by purchase.
pub(super) const INSTANCE_INDEXES: [&str; 3] =
    ["body.owner", "body.provider", "body.reservationId"];

#[async_trait]
impl OsbStore for MongoStore {
    async fn osb_insert_instance(&self, inst: &OsbInstance) -> Result<bool, StoreError> {
        let how = format!(
            "Read the instance (GET /v2/service_instances/{}) to see whether it was created.",
            inst.id
        );
        self.bounded(Op::Write(how), async {
            let doc = InstanceDoc::of(inst);
            match self.instances.insert_one(doc).await {
                Ok(_) => Ok(true),
                Err(e) if is_duplicate_key(&e) => Ok(false),
                Err(e) => Err(classify(e)),
            }
        })
        .await
    }

    async fn osb_get_instance(&self, id: &str) -> Result<Option<OsbInstance>, StoreError> {
        self.bounded(Op::Read, async {
            Ok(self
                .instances
                .find_one(doc! { "_id": id })
                .await
                .map_err(classify)?
                .map(|d| d.body))
        })
        .await
    }

    async fn osb_replace_instance(
        &self,
        inst: &OsbInstance,
        expected_revision: u64,
    ) -> Result<bool, StoreError> {
        let how = format!(
            "Read the instance (GET /v2/service_instances/{}) to see whether it changed.",
            inst.id
        );
        self.bounded(Op::Write(how), async {
            let doc = InstanceDoc::of(inst);
            let expected = i64::try_from(expected_revision).unwrap_or(i64::MAX);
            let r = self
                .instances
                .replace_one(doc! { "_id": &inst.id, "revision": expected }, doc)
                .await
                .map_err(classify)?;
            Ok(r.matched_count == 1)
        })
        .await
    }

    async fn osb_delete_instance(
        &self,
        id: &str,
        expected_revision: u64,
    ) -> Result<bool, StoreError> {
        let how = format!(
            "Read the instance (GET /v2/service_instances/{id}): 404 means it was deleted."
        );
        self.bounded(Op::Write(how), async {
            let expected = i64::try_from(expected_revision).unwrap_or(i64::MAX);
            let r = self
                .instances
                .delete_one(doc! { "_id": id, "revision": expected })
                .await
                .map_err(classify)?;
            Ok(r.deleted_count == 1)
        })
        .await
    }

    async fn osb_insert_binding(&self, b: &OsbBinding) -> Result<bool, StoreError> {
        let how = format!("Read the binding (GET /v2/service_instances/{}/service_bindings/{}) to see whether it was created.", b.instance_id, b.id);
        self.bounded(Op::Write(how), async {
            match self.bindings.insert_one(BindingDoc::of(b)).await {
                Ok(_) => Ok(true),
                Err(e) if is_duplicate_key(&e) => Ok(false),
                Err(e) => Err(classify(e)),
            }
        })
        .await
    }

    async fn osb_get_binding(&self, id: &str) -> Result<Option<OsbBinding>, StoreError> {
        self.bounded(Op::Read, async {
            Ok(self
                .bindings
                .find_one(doc! { "_id": id })
                .await
                .map_err(classify)?
                .map(|d| d.body))
        })
        .await
    }

    async fn osb_replace_binding(
        &self,
        b: &OsbBinding,
        expected_revision: u64,
    ) -> Result<bool, StoreError> {
        let how = format!(
            "Read the binding's last operation (GET /v2/service_instances/{}/service_bindings/{}/last_operation) to see whether it changed.",
            b.instance_id, b.id
        );
        self.bounded(Op::Write(how), async {
            let expected = i64::try_from(expected_revision).unwrap_or(i64::MAX);
            let r = self
                .bindings
                .replace_one(
                    doc! { "_id": &b.id, "revision": expected },
                    BindingDoc::of(b),
                )
                .await
                .map_err(classify)?;
            Ok(r.matched_count == 1)
        })
        .await
    }

    async fn osb_delete_binding(&self, id: &str) -> Result<bool, StoreError> {
        let how = format!("Read the binding (GET /v2/service_instances/<instance>/service_bindings/{id}): 404 means it was deleted.");
        self.bounded(Op::Write(how), async {
            let r = self
                .bindings
                .delete_one(doc! { "_id": id })
                .await
                .map_err(classify)?;
            Ok(r.deleted_count == 1)
        })
        .await
    }

    async fn osb_bindings_of(&self, instance_id: &str) -> Result<Vec<OsbBinding>, StoreError> {
        self.bounded(Op::Read, async {
            let docs: Vec<BindingDoc> =
                find_all(self.bindings.find(doc! { "instanceID": instance_id })).await?;
            Ok(docs.into_iter().map(|d| d.body).collect())
        })
        .await
    }

    async fn osb_instance_of_reservation(
        &self,
        reservation_id: &str,
    ) -> Result<Option<OsbInstance>, StoreError> {
        self.bounded(Op::Read, async {
            Ok(self
                .instances
                .find_one(doc! { "body.reservationId": reservation_id })
                .await
                .map_err(classify)?
                .map(|d| d.body))
        })
        .await
    }

    async fn osb_list_instances(
        &self,
        of: InstancesOf<'_>,
    ) -> Result<Vec<OsbInstance>, StoreError> {
        let filter = match of {
            InstancesOf::Owner(owner) => doc! { "body.owner": owner },
            InstancesOf::Provider(provider) => doc! { "body.provider": provider },
            InstancesOf::All => doc! {},
        };
        self.bounded(Op::Read, async {
            let docs: Vec<InstanceDoc> = find_all(self.instances.find(filter)).await?;
            Ok(docs.into_iter().map(|d| d.body).collect())
        })
        .await
    }
}
