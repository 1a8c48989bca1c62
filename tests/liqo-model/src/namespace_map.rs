//! A NamespaceMap's life between a cluster offloading to a peer and that
//! peer: made for the peer (as Liqo v1.2.0's VirtualNode controller does,
//! `pkg/liqo-controller-manager/offloading/virtualnode-controller/namespacemap.go:36-75`:
//! named after the peer's cluster ID in its tenant namespace, labelled
//! `liqo.io/remote-cluster-id`, `liqo.io/replication=true`,
//! `liqo.io/remoteID`), and enforced on the peer by its NamespaceMap
//! controller
//! (`pkg/liqo-controller-manager/offloading/namespacemap-controller/enforcement.go`,
//! ENF below) on the replica the crdReplicator keeps there: each
//! `desiredMapping` entry becomes a namespace on the peer labelled
//! `liqo.io/remote-cluster-id=<origin>` and annotated
//! `liqo.io/managed-by-namespace-map=<tenant namespace>/<map>` and
//! `liqo.io/original-name=<origin namespace>` (ENF:41-74); a namespace of
//! that name managed by another map is a `CreationLoopBackOff` (ENF:76-80,
//! 116-122), else `Accepted` (ENF:128). A `currentMapping` entry no longer
//! desired has its namespace deleted when this map manages it
//! (ENF:134-162, 164-193): `Terminating` while the namespace is there, the
//! entry dropped once it is gone; a namespace managed by another map is
//! left alone and its entry dropped. The peer's namespaces are watched and
//! mapped back to their map through the managed-by annotation
//! (`namespacemap_controller.go:97-117`), so the namespace's disappearance
//! is seen. The status reaches the origin's map as the crdReplicator
//! copies a replica's status back.
//!
//! The replication is folded in: one task reads the origin's map as the
//! origin's crdReplicator and creates the namespaces as the peer's
//! controller manager; the map itself is made with the crdReplicator's
//! client too ([`ensure_map`]), where Liqo's VirtualNode controller makes it
//! as the controller manager. Not modelled: the RoleBinding for the origin's
//! virtual kubelet in each namespace (ENF:82-104; the peering grants it
//! cluster-wide: see `offloading::Peering`), the finalizer and the
//! deletion of every namespace when the map itself is deleted
//! (`namespacemap_controller.go:72-81`, ENF:221-239).

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::consts::{self, REMOTE_CLUSTER_ID, REPLICATION_DESTINATION, REPLICATION_REQUESTED};
use crate::identity::{Rule, ALL, READ};
use crate::offloading_consts::{namespace_maps, MANAGED_BY_NAMESPACE_MAP, ORIGINAL_NAME};
use crate::runner::{self, Key};
use crate::Error;

/// On the origin: the crdReplicator's reads and status writes of maps.
pub const LOCAL_RULES: &[Rule] = &[
    Rule::new(&["offloading.liqo.io"], &["namespacemaps"], ALL),
    Rule::new(
        &["offloading.liqo.io"],
        &["namespacemaps/status"],
        &["get", "update", "patch"],
    ),
];
/// On the peer: the NamespaceMap controller's namespaces
/// (`namespacemap_controller.go:45`).
pub const REMOTE_RULES: &[Rule] = &[
    Rule::new(
        &[""],
        &["namespaces"],
        &[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ],
    ),
    Rule::new(&["offloading.liqo.io"], &["namespacemaps"], READ),
];

/// The two ends of the maps for one peer.
pub struct Ends {
    /// The origin, as its crdReplicator.
    pub local: Client,
    /// The peer, as its controller manager.
    pub remote: Client,
    pub local_cluster_id: String,
    pub remote_cluster_id: String,
}

/// The origin's map for `remote_cluster_id`, made if missing, in its
/// tenant namespace (which must exist).
pub async fn ensure_map(local: &Client, remote_cluster_id: &str) -> Result<(), Error> {
    let tenant = format!("liqo-tenant-{remote_cluster_id}");
    let api: Api<DynamicObject> = Api::namespaced_with(local.clone(), &tenant, &namespace_maps());
    runner::create_or_update(&api, &namespace_maps(), &tenant, remote_cluster_id, |nm| {
        let labels = nm.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(REMOTE_CLUSTER_ID.into(), remote_cluster_id.into());
        labels.insert(REPLICATION_REQUESTED.into(), "true".into());
        labels.insert(REPLICATION_DESTINATION.into(), remote_cluster_id.into());
    })
    .await
}

/// Enforce the origin's map for the peer until the task is dropped.
pub async fn run(ends: Ends) {
    let tenant = format!("liqo-tenant-{}", ends.remote_cluster_id);
    let maps: Api<DynamicObject> =
        Api::namespaced_with(ends.local.clone(), &tenant, &namespace_maps());
    let selector = format!("{REPLICATION_DESTINATION}={}", ends.remote_cluster_id);
    let own = runner::keys(runner::touched(maps, &selector), |nm| Some(Key::of(&nm)));
    // `namespacemap_controller.go:97-110, 117`: a peer namespace's event
    // queues the map its managed-by annotation names — here only this
    // origin's maps, the ones this task enforces.
    let peer_namespaces: Api<DynamicObject> =
        Api::all_with(ends.remote.clone(), &consts::namespaces());
    let replica_namespace = format!("liqo-tenant-{}", ends.local_cluster_id);
    let by_namespace = runner::keys(runner::touched(peer_namespaces, ""), move |ns| {
        let managed = ns
            .metadata
            .annotations
            .as_ref()?
            .get(MANAGED_BY_NAMESPACE_MAP)?;
        let (namespace, name) = managed.split_once('/')?;
        (namespace == replica_namespace).then(|| Key {
            namespace: tenant.clone(),
            name: name.to_string(),
        })
    });
    let ends = &ends;
    runner::run("namespacemap", vec![own, by_namespace], |key| {
        reconcile(ends, key)
    })
    .await;
}

/// ENF:134-162: what becomes of a namespace whose mapping is no longer
/// desired, given what the peer has under that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Not there (any more): the entry is dropped (ENF:138-141, 187-188).
    Gone,
    /// There but not made by this map: left alone, the entry dropped
    /// (ENF:145-149).
    NotOurs,
    /// Already being deleted: the entry stays `Terminating` (ENF:151-154).
    Terminating,
    /// Ours and not yet deleted: delete it, the entry `Terminating`
    /// (ENF:156-161, 182-186).
    Delete,
}

/// ENF:134-162 as a decision, no I/O.
pub fn removal(namespace: Option<&DynamicObject>, nm_id: &str) -> Removal {
    let Some(ns) = namespace else {
        return Removal::Gone;
    };
    let managed = ns
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MANAGED_BY_NAMESPACE_MAP));
    if managed.map(String::as_str) != Some(nm_id) {
        Removal::NotOurs
    } else if ns.metadata.deletion_timestamp.is_some() {
        Removal::Terminating
    } else {
        Removal::Delete
    }
}

async fn reconcile(ends: &Ends, key: Key) -> Result<(), Error> {
    let maps: Api<DynamicObject> =
        Api::namespaced_with(ends.local.clone(), &key.namespace, &namespace_maps());
    let Some(nm) = maps.get_opt(&key.name).await? else {
        return Ok(());
    };
    // The replica's identity on the peer: its tenant namespace for the origin.
    let nm_id = format!("liqo-tenant-{}/{}", ends.local_cluster_id, key.name);
    let namespaces: Api<DynamicObject> = Api::all_with(ends.remote.clone(), &consts::namespaces());
    // ENF:198-200: the entries already in the status are kept, so those no
    // longer desired are found below.
    let old = &nm.data["status"]["currentMapping"];
    let mut current = old.as_object().cloned().unwrap_or_default();
    let mut failure = None;
    for (origin, dest) in nm.data["spec"]["desiredMapping"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let dest = dest.as_str().unwrap_or_default();
        let phase = match namespaces.get_opt(dest).await? {
            None => {
                let mut ns = DynamicObject::new(dest, &consts::namespaces());
                ns.metadata.labels =
                    Some([(REMOTE_CLUSTER_ID.to_string(), ends.local_cluster_id.clone())].into());
                ns.metadata.annotations = Some(
                    [
                        (MANAGED_BY_NAMESPACE_MAP.to_string(), nm_id.clone()),
                        (ORIGINAL_NAME.to_string(), origin.clone()),
                    ]
                    .into(),
                );
                namespaces.create(&PostParams::default(), &ns).await?;
                "Accepted"
            }
            Some(ns) => {
                let managed = ns
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(MANAGED_BY_NAMESPACE_MAP));
                if managed == Some(&nm_id) {
                    "Accepted"
                } else {
                    failure = Some(format!(
                        "namespace {dest:?} already exists and it is not managed by NamespaceMap {nm_id:?}"
                    ));
                    "CreationLoopBackOff"
                }
            }
        };
        current.insert(
            origin.clone(),
            json!({"remoteNamespace": dest, "phase": phase}),
        );
    }
    // ENF:164-193: the entries no longer desired.
    let desired = &nm.data["spec"]["desiredMapping"];
    let undesired: Vec<(String, String)> = current
        .iter()
        .filter(|(origin, _)| desired.get(origin.as_str()).is_none())
        .map(|(origin, status)| {
            let dest = status["remoteNamespace"].as_str().unwrap_or_default();
            (origin.clone(), dest.to_string())
        })
        .collect();
    for (origin, dest) in undesired {
        let terminating = json!({"remoteNamespace": dest, "phase": "Terminating"});
        match removal(namespaces.get_opt(&dest).await?.as_ref(), &nm_id) {
            Removal::Gone | Removal::NotOurs => {
                current.remove(&origin);
            }
            Removal::Terminating => {
                current.insert(origin, terminating);
            }
            Removal::Delete => {
                // ENF:175-180: a failed deletion is not returned (the
                // check reads the outer `err`), the entry just stays
                // `Terminating` until a namespace event brings it back.
                if let Err(e) = namespaces.delete(&dest, &Default::default()).await {
                    tracing::debug!(error = %e, namespace = dest, "deleting a remote namespace");
                }
                current.insert(origin, terminating);
            }
        }
    }
    if *old != Value::Object(current.clone()) {
        // A merge patch: entries no longer desired are removed with null.
        let mut patch = current;
        for gone in old.as_object().into_iter().flatten().map(|(k, _)| k) {
            patch.entry(gone.clone()).or_insert(Value::Null);
        }
        let patch = json!({"status": {"currentMapping": patch}});
        maps.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    match failure {
        Some(f) => Err(Error::Waiting(f)),
        None => Ok(()),
    }
}
