//! Liqo v1.2.0's NamespaceOffloading controller
//! (`pkg/liqo-controller-manager/offloading/namespaceoffloading-controller/`:
//! `namespaceoffloading_controller.go` NSOFF, `clusterselector.go` CS,
//! `mappings.go` MAP, `labels.go` LAB, `status.go` ST below), as the
//! cluster's controller manager: for each NamespaceOffloading named
//! `offloading` (NSOFF:130-132), every peered cluster whose virtual node
//! matches the cluster selector gets the namespace in its NamespaceMap's
//! `desiredMapping`, the others lose it (CS:37-77); then the namespace is
//! labelled `liqo.io/scheduling-enabled=true` for the `Remote` and
//! `LocalAndRemote` strategies, unlabelled otherwise (NSOFF:116-123,
//! LAB:28-66). It holds a finalizer (`lifecycle.go` LIFE:55-67); once the
//! NamespaceOffloading is deleted it unlabels the namespace, takes it out
//! of every map and lets the finalizer go only when no remote namespace
//! condition is left, i.e. every peer's namespace is gone (LIFE:27-53).
//! After every reconcile, whatever its outcome, the status is rewritten
//! ([`crate::offloading_status`]) and its write's result is the
//! reconcile's (NSOFF:88-98 assign the named `err`). Reconciled on its
//! NamespaceOffloading, and on every VirtualNode, virtual Node and
//! NamespaceMap change (NSOFF:142-147).
//!
//! Not modelled: Events.

use std::collections::BTreeMap;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::consts::{self, REMOTE_CLUSTER_ID, STORAGE_AVAILABLE};
use crate::identity::{Rule, READ};
use crate::offloading_consts::{
    namespace_maps, namespace_offloadings, OFFLOADING_NAME, SCHEDULING_ENABLED,
    SCHEDULING_ENABLED_VALUE,
};
use crate::runner::{self, Key};
use crate::scheduling::matches_terms;
use crate::{offloading_status, Error};

/// NSOFF:56-64, the part this model uses.
pub const RULES: &[Rule] = &[
    Rule::new(
        &["offloading.liqo.io"],
        &["namespaceoffloadings"],
        &["get", "list", "watch", "patch", "update"],
    ),
    Rule::new(
        &["offloading.liqo.io"],
        &["namespaceoffloadings/status"],
        &["get", "update", "patch"],
    ),
    Rule::new(
        &["offloading.liqo.io"],
        &["namespaceoffloadings/finalizers"],
        &["get", "update", "patch"],
    ),
    Rule::new(
        &["offloading.liqo.io"],
        &["namespacemaps"],
        &["get", "list", "watch", "patch", "update"],
    ),
    Rule::new(&["offloading.liqo.io"], &["virtualnodes"], READ),
    Rule::new(
        &[""],
        &["namespaces"],
        &["get", "list", "watch", "update", "patch"],
    ),
    Rule::new(&[""], &["nodes"], READ),
];

/// `internal/crdReplicator/reflection/manager.go:164-178`: the local
/// NamespaceMaps (one per peered cluster, replicated to it).
const LOCAL_MAPS: &str = "liqo.io/replication=true,liqo.io/remoteID";

/// Run the controller of the cluster `local_cluster_id` on `client`.
pub async fn run(client: Client, local_cluster_id: String) {
    let offloadings: Api<DynamicObject> = Api::all_with(client.clone(), &namespace_offloadings());
    let own = runner::keys(runner::touched(offloadings.clone(), ""), |o| {
        (o.metadata.name.as_deref() == Some(OFFLOADING_NAME)).then(|| Key::of(&o))
    });
    let all = |related| {
        runner::keys_via(related, offloadings.clone(), |api, _| async move {
            let list = api.list(&ListParams::default()).await.ok()?;
            Some(list.items.iter().map(Key::of).collect())
        })
    };
    let by_vn = all(runner::touched(
        Api::all_with(client.clone(), &consts::virtual_nodes()),
        "",
    ));
    let by_node = all(runner::touched(
        Api::all_with(client.clone(), &consts::nodes()),
        "liqo.io/type=virtual-node",
    ));
    let by_map = all(runner::touched(
        Api::all_with(client.clone(), &namespace_maps()),
        "",
    ));
    let (client, local) = (&client, local_cluster_id.as_str());
    runner::run(
        "namespaceoffloading",
        vec![own, by_vn, by_node, by_map],
        |key| reconcile(client, local, key),
    )
    .await;
}

/// ST:66-79: the remote namespace's name under the mapping strategy.
pub fn remote_namespace_name(nsoff: &Value, local_cluster_id: &str) -> String {
    let namespace = nsoff["metadata"]["namespace"].as_str().unwrap_or_default();
    match nsoff["spec"]["namespaceMappingStrategy"].as_str() {
        Some("EnforceSameName") => namespace.to_string(),
        Some("SelectedName") => nsoff["spec"]["remoteNamespaceName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        // DefaultName, and unknown values (ST:76-78); UniqueName is the ID.
        _ => format!("{namespace}-{local_cluster_id}"),
    }
}

/// `pkg/utils/virtualnode/virtualnode.go:35-64`: the labels a virtual node
/// is matched by — its Node's, else its spec's with the cluster ID and
/// storage availability.
fn virtual_node_labels(vn: &Value, node: Option<&DynamicObject>) -> Value {
    if let Some(node) = node {
        return json!(node.metadata.labels.clone().unwrap_or_default());
    }
    let mut labels = vn["spec"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    labels[REMOTE_CLUSTER_ID] = vn["spec"]["clusterID"].clone();
    let no_storage = vn["spec"]["storageClasses"]
        .as_array()
        .is_none_or(Vec::is_empty);
    labels[STORAGE_AVAILABLE] = json!(no_storage.to_string());
    labels
}

/// NSOFF:53: held until every peer's namespace is gone.
pub const FINALIZER: &str = "namespaceoffloading-controller.liqo.io/finalizer";

/// The local NamespaceMaps by the cluster they are for.
type Maps = BTreeMap<String, DynamicObject>;

async fn reconcile(client: &Client, local_cluster_id: &str, key: Key) -> Result<(), Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &namespace_offloadings());
    let Some(mut nsoff) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    let mut maps = local_maps(client).await?;
    // NSOFF:100-123.
    let outcome = if nsoff.metadata.deletion_timestamp.is_some() {
        deletion(client, &api, &mut nsoff, &mut maps).await
    } else {
        offload(client, local_cluster_id, &api, &mut nsoff, &mut maps).await
    };
    // NSOFF:88-98: logged, then replaced by the status write's result.
    if let Err(e) = &outcome {
        tracing::debug!(error = %e, namespace = key.namespace, "reconciling a NamespaceOffloading");
    }
    enforce_status(&api, &nsoff, &maps, local_cluster_id).await
}

/// CS:79-103: the local NamespaceMaps by the cluster they are for.
async fn local_maps(client: &Client) -> Result<Maps, Error> {
    let maps: Api<DynamicObject> = Api::all_with(client.clone(), &namespace_maps());
    let mut by_cluster = Maps::new();
    for nm in maps
        .list(&ListParams::default().labels(LOCAL_MAPS))
        .await?
        .items
    {
        if let Some(id) = nm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REMOTE_CLUSTER_ID))
        {
            by_cluster.insert(id.clone(), nm);
        }
    }
    Ok(by_cluster)
}

/// NSOFF:106-123: the finalizer, the mappings, the scheduling label.
async fn offload(
    client: &Client,
    local_cluster_id: &str,
    api: &Api<DynamicObject>,
    nsoff: &mut DynamicObject,
    maps: &mut Maps,
) -> Result<(), Error> {
    // LIFE:55-67.
    let finalizers = nsoff.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.into());
        let name = nsoff.metadata.name.clone().unwrap_or_default();
        *nsoff = api.replace(&name, &PostParams::default(), nsoff).await?;
    }
    enforce_cluster_selector(client, local_cluster_id, nsoff, maps).await?;
    // NSOFF:116-123, LAB:28-66.
    let schedule = matches!(
        nsoff.data["spec"]["podOffloadingStrategy"].as_str(),
        Some("Remote" | "LocalAndRemote")
    );
    let namespace = nsoff.metadata.namespace.clone().unwrap_or_default();
    scheduling_label(client, &namespace, schedule).await
}

/// CS:37-77: every peered cluster whose virtual node the selector matches
/// gets the namespace in its map's `desiredMapping`, the others lose it.
async fn enforce_cluster_selector(
    client: &Client,
    local_cluster_id: &str,
    nsoff: &DynamicObject,
    maps: &mut Maps,
) -> Result<(), Error> {
    let nsoff = serde_json::to_value(nsoff).unwrap_or_default();
    let vns: Api<DynamicObject> = Api::all_with(client.clone(), &consts::virtual_nodes());
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &consts::nodes());
    let local_name = nsoff["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let remote_name = remote_namespace_name(&nsoff, local_cluster_id);
    let selector = &nsoff["spec"]["clusterSelector"];
    let vns = vns.list(&ListParams::default()).await?.items;
    // CS:46-51.
    for vn in &vns {
        let cluster = vn.data["spec"]["clusterID"].as_str().unwrap_or_default();
        if !maps.contains_key(cluster) {
            return Err(Error::Waiting(format!(
                "no NamespaceMap found for remote cluster ID: {cluster}"
            )));
        }
    }
    for vn in vns {
        let vn_name = vn.metadata.name.clone().unwrap_or_default();
        let vn = serde_json::to_value(&vn).unwrap_or_default();
        let cluster = vn["spec"]["clusterID"].as_str().unwrap_or_default();
        let Some(nm) = maps.get_mut(cluster) else {
            continue;
        };
        // CS:106-118: an empty selector matches every cluster.
        let node = nodes.get_opt(&vn_name).await?;
        let fake = json!({"metadata": {"name": vn_name, "labels": virtual_node_labels(&vn, node.as_ref())}});
        let empty = selector["nodeSelectorTerms"]
            .as_array()
            .is_none_or(Vec::is_empty);
        let wanted = empty || matches_terms(&fake, selector);
        let current = nm.data["spec"]["desiredMapping"][&local_name].as_str();
        // MAP:28-43, 61-77: a merge patch only when it changes something.
        let change = match (wanted, current) {
            (true, Some(c)) if c == remote_name => None,
            (true, _) => Some(json!(remote_name)),
            (false, Some(_)) => Some(Value::Null),
            (false, None) => None,
        };
        if let Some(value) = change {
            set_desired(client, nm, &local_name, value).await?;
        }
    }
    Ok(())
}

/// MAP:28-43, 61-77: `desiredMapping[local_name]` set to `value` (removed
/// when null) by a merge patch; `nm` becomes what the server answered, as
/// controller-runtime's `Patch` refreshes its object, so the status below
/// counts the new mapping.
async fn set_desired(
    client: &Client,
    nm: &mut DynamicObject,
    local_name: &str,
    value: Value,
) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        nm.metadata.namespace.as_deref().unwrap_or_default(),
        &namespace_maps(),
    );
    let patch = json!({"spec": {"desiredMapping": {local_name: value}}});
    *nm = api
        .patch(
            &nm.metadata.name.clone().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// LIFE:27-53: unlabel the namespace, take it out of every map, and let
/// the finalizer go once the status (as read, before this pass rewrites
/// it) has no remote namespace condition left.
async fn deletion(
    client: &Client,
    api: &Api<DynamicObject>,
    nsoff: &mut DynamicObject,
    maps: &mut Maps,
) -> Result<(), Error> {
    let namespace = nsoff.metadata.namespace.clone().unwrap_or_default();
    scheduling_label(client, &namespace, false).await?;
    // MAP:46-58: every map is tried, then one error.
    let mut failed = false;
    for nm in maps.values_mut() {
        if nm.data["spec"]["desiredMapping"].get(&namespace).is_some() {
            if let Err(e) = set_desired(client, nm, &namespace, Value::Null).await {
                tracing::debug!(error = %e, namespace, "removing a desired mapping");
                failed = true;
            }
        }
    }
    if failed {
        return Err(Error::Waiting(
            "some desiredMappings have not been deleted".into(),
        ));
    }
    let conditions = &nsoff.data["status"]["remoteNamespacesConditions"];
    if conditions.as_object().is_some_and(|c| !c.is_empty()) {
        return Err(Error::Waiting(
            "waiting for remote namespaces deletion".into(),
        ));
    }
    if let Some(finalizers) = nsoff.metadata.finalizers.as_mut() {
        finalizers.retain(|f| f != FINALIZER);
    }
    let name = nsoff.metadata.name.clone().unwrap_or_default();
    *nsoff = api.replace(&name, &PostParams::default(), nsoff).await?;
    Ok(())
}

/// LAB:28-66: the namespace labelled `liqo.io/scheduling-enabled=true`
/// (`schedule`) or not, updated only when that changes.
async fn scheduling_label(client: &Client, namespace: &str, schedule: bool) -> Result<(), Error> {
    let namespaces: Api<DynamicObject> = Api::all_with(client.clone(), &consts::namespaces());
    let mut ns = namespaces.get(namespace).await?;
    let labels = ns.metadata.labels.get_or_insert_with(Default::default);
    let labelled =
        labels.get(SCHEDULING_ENABLED).map(String::as_str) == Some(SCHEDULING_ENABLED_VALUE);
    if schedule != labelled {
        if schedule {
            labels.insert(SCHEDULING_ENABLED.into(), SCHEDULING_ENABLED_VALUE.into());
        } else {
            labels.remove(SCHEDULING_ENABLED);
        }
        namespaces
            .replace(namespace, &PostParams::default(), &ns)
            .await?;
    }
    Ok(())
}

/// ST:30-63: the status rewritten, when it differs, with a status update.
async fn enforce_status(
    api: &Api<DynamicObject>,
    nsoff: &DynamicObject,
    maps: &Maps,
    local_cluster_id: &str,
) -> Result<(), Error> {
    let mut value = serde_json::to_value(nsoff).unwrap_or_default();
    let remote_name = remote_namespace_name(&value, local_cluster_id);
    let maps: Vec<Value> = maps
        .values()
        .map(|nm| serde_json::to_value(nm).unwrap_or_default())
        .collect();
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let status = offloading_status::status(&value, &remote_name, &maps, &now);
    if value["status"] == status {
        return Ok(());
    }
    value["status"] = status;
    let updated: DynamicObject = serde_json::from_value(value)
        .map_err(|e| Error::Waiting(format!("NamespaceOffloading status: {e}")))?;
    let name = nsoff.metadata.name.clone().unwrap_or_default();
    api.replace_status(&name, &PostParams::default(), &updated)
        .await?;
    Ok(())
}
