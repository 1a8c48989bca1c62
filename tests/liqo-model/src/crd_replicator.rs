//! The consumer's crdReplicator for ResourceSlices, as Liqo v1.2.0 has it
//! in `internal/crdReplicator/reflection/handler.go` (HANDLER below): each
//! local slice labelled for replication to a provider is copied into the
//! provider's tenant namespace, as the consumer's control-plane identity
//! there; the spec follows the local one, the status comes back
//! (`OwnershipShared`, `internal/crdReplicator/resources/resources.go:42-43`).

use std::collections::BTreeMap;

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::consts::{
    self, REMOTE_CLUSTER_ID, REPLICATED, REPLICATION_DESTINATION, REPLICATION_ORIGIN,
    REPLICATION_REQUESTED,
};
use crate::identity::{Rule, ALL};
use crate::runner::{self, Key};
use crate::Error;

/// HANDLER:43: the finalizer on each replicated local object.
pub const FINALIZER: &str = "crdreplicator.liqo.io/resource";

/// `pkg/consts/replication.go:55`: dropped from replicas (HANDLER:347-348).
const LOCAL_OWNERSHIP: &str = "liqo.io/ownership";

/// RBAC of the replicator on its own cluster, the part this model uses.
pub const LOCAL_RULES: &[Rule] = &[Rule::new(
    &["authentication.liqo.io"],
    &["resourceslices", "resourceslices/status"],
    ALL,
)];

/// What the provider lets a consumer's control plane do in its tenant
/// namespace: the ResourceSlice part of the chart's
/// `deployments/liqo/files/liqo-remote-controlplane-ClusterRole.yaml`,
/// status included, with every verb the chart lists: all a resource serves.
pub const REMOTE_RULES: &[Rule] = &[Rule::new(
    &["authentication.liqo.io"],
    &["resourceslices", "resourceslices/status"],
    &kube_test_server::discovery::VERBS,
)];

/// One replication: from this cluster's `local_namespace` to the
/// provider's `remote_namespace`.
#[derive(Clone)]
pub struct Peering {
    pub local: Client,
    pub remote: Client,
    pub local_cluster_id: String,
    pub remote_cluster_id: String,
    pub local_namespace: String,
    pub remote_namespace: String,
}

/// Run the replicator until the task is dropped.
pub async fn run(peering: Peering) {
    let local = api(&peering.local, &peering.local_namespace);
    let remote = api(&peering.remote, &peering.remote_namespace);
    // Local objects for this destination
    // (`pkg/utils/labels/labelSelectors.go:102-108`, manager.go:164-178) ...
    let selector = format!(
        "{REPLICATION_REQUESTED}=true,{REPLICATION_DESTINATION}={}",
        peering.remote_cluster_id
    );
    let own = runner::keys(runner::touched(local, &selector), |o| Some(Key::of(&o)));
    // ... and the replicas this cluster made (reflector.go:284-292), a change
    // of which reconciles the local object of the same name.
    let selector = format!(
        "{REPLICATION_ORIGIN}={},{REPLICATED}=true",
        peering.local_cluster_id
    );
    let local_namespace = peering.local_namespace.clone();
    let replicas = runner::keys(runner::touched(remote, &selector), move |o| {
        Some(Key {
            namespace: local_namespace.clone(),
            name: o.metadata.name.clone().unwrap_or_default(),
        })
    });
    let peering = &peering;
    runner::run("crd-replicator", vec![own, replicas], |key| {
        reconcile(peering, key)
    })
    .await;
}

fn api(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &consts::resource_slices())
}

/// HANDLER:53-165.
async fn reconcile(peering: &Peering, key: Key) -> Result<(), Error> {
    let local = api(&peering.local, &peering.local_namespace);
    let remote = api(&peering.remote, &peering.remote_namespace);
    // HANDLER:65-77: the local object gone, the replica goes.
    let Some(mut obj) = local.get_opt(&key.name).await? else {
        delete_remote(&remote, &key.name).await?;
        return Ok(());
    };
    // HANDLER:87-93.
    let labels = obj.metadata.labels.clone().unwrap_or_default();
    if labels.get(REPLICATION_DESTINATION) != Some(&peering.remote_cluster_id) {
        return Ok(());
    }
    let finalizers = obj.metadata.finalizers.get_or_insert_with(Vec::new);
    // HANDLER:96-114: deleting: the replica first, then the finalizer.
    if obj.metadata.deletion_timestamp.is_some() {
        if delete_remote(&remote, &key.name).await? {
            finalizers.retain(|f| f != FINALIZER);
            local
                .replace(&key.name, &PostParams::default(), &obj)
                .await?;
        }
        return Ok(());
    }
    // HANDLER:116-120.
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.into());
        obj = local
            .replace(&key.name, &PostParams::default(), &obj)
            .await?;
    }
    // HANDLER:127-141: a replica refused (the provider removed the
    // permission) is not an error.
    let replica = match remote.get_opt(&key.name).await {
        Err(kube::Error::Api(e)) if e.code == 403 => return Ok(()),
        Err(e) => return Err(e.into()),
        Ok(None) => match create_remote(peering, &remote, &obj).await {
            Err(Error::Kube(kube::Error::Api(e))) if e.code == 403 => return Ok(()),
            other => other?,
        },
        Ok(Some(replica)) => update_remote_spec(&remote, &obj, replica).await?,
    };
    // HANDLER:162-164, 223-263: Shared ownership, the replica's status is
    // copied to the local object when it differs.
    copy_status(&local, &replica, obj).await
}

/// HANDLER:167-192: labels for the remote side (HANDLER:332-351),
/// annotations as they are now — the only time they are copied — and the spec.
async fn create_remote(
    peering: &Peering,
    remote: &Api<DynamicObject>,
    local: &DynamicObject,
) -> Result<DynamicObject, Error> {
    let mut replica = DynamicObject::new(
        &local.metadata.name.clone().unwrap_or_default(),
        &consts::resource_slices(),
    )
    .within(&peering.remote_namespace);
    replica.metadata.labels = Some(remote_labels(
        local.metadata.labels.clone().unwrap_or_default(),
        &peering.local_cluster_id,
    ));
    replica.metadata.annotations = local.metadata.annotations.clone();
    replica.data = json!({"spec": local.data["spec"].clone()});
    Ok(remote.create(&PostParams::default(), &replica).await?)
}

/// HANDLER:332-351.
pub fn remote_labels(
    mut labels: BTreeMap<String, String>,
    local_cluster_id: &str,
) -> BTreeMap<String, String> {
    labels.insert(REPLICATION_REQUESTED.into(), "false".into());
    labels.insert(REPLICATED.into(), "true".into());
    labels.insert(REPLICATION_ORIGIN.into(), local_cluster_id.into());
    labels.insert(REMOTE_CLUSTER_ID.into(), local_cluster_id.into());
    labels.remove(LOCAL_OWNERSHIP);
    labels
}

/// HANDLER:194-221: only the spec is replaced; labels and annotations of
/// the replica are left as they are.
async fn update_remote_spec(
    remote: &Api<DynamicObject>,
    local: &DynamicObject,
    mut replica: DynamicObject,
) -> Result<DynamicObject, Error> {
    if spec(local) == spec(&replica) {
        return Ok(replica);
    }
    replica.data["spec"] = spec(local);
    let name = replica.metadata.name.clone().unwrap_or_default();
    Ok(remote
        .replace(&name, &PostParams::default(), &replica)
        .await?)
}

async fn copy_status(
    local: &Api<DynamicObject>,
    replica: &DynamicObject,
    mut obj: DynamicObject,
) -> Result<(), Error> {
    let status = |o: &DynamicObject| match &o.data["status"] {
        Value::Object(m) => Value::Object(m.clone()),
        _ => json!({}),
    };
    if status(replica) == status(&obj) {
        return Ok(());
    }
    obj.data["status"] = status(replica);
    let name = obj.metadata.name.clone().unwrap_or_default();
    local
        .replace_status(&name, &PostParams::default(), &obj)
        .await?;
    Ok(())
}

fn spec(o: &DynamicObject) -> Value {
    match &o.data["spec"] {
        Value::Object(m) => Value::Object(m.clone()),
        _ => json!({}),
    }
}

/// HANDLER:265-293: whether the replica is gone (403 counts as gone).
async fn delete_remote(remote: &Api<DynamicObject>, name: &str) -> Result<bool, Error> {
    match remote.get_opt(name).await {
        Err(kube::Error::Api(e)) if e.code == 403 => return Ok(true),
        Err(e) => return Err(e.into()),
        Ok(None) => return Ok(true),
        Ok(Some(_)) => {}
    }
    match remote.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(false),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(true),
        Err(e) => Err(e.into()),
    }
}
