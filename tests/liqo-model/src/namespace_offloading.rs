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
//! LAB:28-66). Reconciled on its NamespaceOffloading, and on every
//! VirtualNode, virtual Node and NamespaceMap change (NSOFF:142-147).
//!
//! Not modelled: the finalizer and deletion logic (lifecycle.go), the
//! status (remote namespace conditions), Events.

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
use crate::Error;

/// NSOFF:57-64, the part this model uses.
pub const RULES: &[Rule] = &[
    Rule::new(&["offloading.liqo.io"], &["namespaceoffloadings"], READ),
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

async fn reconcile(client: &Client, local_cluster_id: &str, key: Key) -> Result<(), Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &namespace_offloadings());
    let Some(nsoff) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    let nsoff = serde_json::to_value(&nsoff).unwrap_or_default();
    // CS:79-103: the local NamespaceMaps by the cluster they are for.
    let maps: Api<DynamicObject> = Api::all_with(client.clone(), &namespace_maps());
    let mut by_cluster: BTreeMap<String, DynamicObject> = BTreeMap::new();
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
    let vns: Api<DynamicObject> = Api::all_with(client.clone(), &consts::virtual_nodes());
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &consts::nodes());
    let local_name = key.namespace.clone();
    let remote_name = remote_namespace_name(&nsoff, local_cluster_id);
    let selector = &nsoff["spec"]["clusterSelector"];
    for vn in vns.list(&ListParams::default()).await?.items {
        let vn_name = vn.metadata.name.clone().unwrap_or_default();
        let vn = serde_json::to_value(&vn).unwrap_or_default();
        let cluster = vn["spec"]["clusterID"].as_str().unwrap_or_default();
        // CS:46-51.
        let Some(nm) = by_cluster.get(cluster) else {
            return Err(Error::Waiting(format!(
                "no NamespaceMap found for remote cluster ID: {cluster}"
            )));
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
            let nm_api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                nm.metadata.namespace.as_deref().unwrap_or_default(),
                &namespace_maps(),
            );
            let patch = json!({"spec": {"desiredMapping": {&local_name: value}}});
            nm_api
                .patch(
                    &nm.metadata.name.clone().unwrap_or_default(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
    }
    // NSOFF:116-123, LAB:28-66.
    let schedule = matches!(
        nsoff["spec"]["podOffloadingStrategy"].as_str(),
        Some("Remote" | "LocalAndRemote")
    );
    let namespaces: Api<DynamicObject> = Api::all_with(client.clone(), &consts::namespaces());
    let mut ns = namespaces.get(&local_name).await?;
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
            .replace(&local_name, &PostParams::default(), &ns)
            .await?;
    }
    Ok(())
}
