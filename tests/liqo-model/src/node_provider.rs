//! The consumer's virtual kubelet node provider, as Liqo v1.2.0 has it in
//! `pkg/virtualKubelet/liqoNodeProvider/` (`utils.go` UTILS,
//! `reconciler.go` REC, `conditions.go` COND below): the Node of each
//! VirtualNode, whose capacity and allocatable are the VirtualNode's quota
//! and which is Ready only with cpu and memory above zero and, when
//! checked, the network established. Its labels, annotations and taints
//! follow the VirtualNode's: what the provider applied last and the
//! VirtualNode no longer has is taken off the node, what others put there
//! stays (UTILS:67-82, 135-202).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::consts::{self, REMOTE_CLUSTER_ID, STORAGE_AVAILABLE, VIRTUAL_NODE_TOLERATION_KEY};
use crate::identity::{Rule, ALL, READ};
use crate::runner::{self, Key};
use crate::Error;

/// RBAC of the virtual kubelet on its own cluster, the part this model
/// uses (`deployments/liqo/files/liqo-virtual-kubelet-local-ClusterRole.yaml`).
pub const RULES: &[Rule] = &[
    Rule::new(&[""], &["nodes", "nodes/status"], ALL),
    Rule::new(&["offloading.liqo.io"], &["virtualnodes"], READ),
    Rule::new(&["core.liqo.io"], &["foreignclusters"], READ),
];

/// Run the provider on `client` until the task is dropped.
pub async fn run(client: Client) {
    let virtual_nodes: Api<DynamicObject> = Api::all_with(client.clone(), &consts::virtual_nodes());
    let foreign_clusters: Api<DynamicObject> =
        Api::all_with(client.clone(), &consts::foreign_clusters());
    // A VirtualNode change (REC:36-54), or its ForeignCluster's (REC:56-84).
    let own = runner::keys(runner::touched(virtual_nodes.clone(), ""), |vn| {
        Some(Key::of(&vn))
    });
    let by_cluster = runner::keys_via(
        runner::touched(foreign_clusters, ""),
        virtual_nodes,
        nodes_of_cluster,
    );
    let client = &client;
    // One virtual kubelet per node in Liqo, each remembering what it
    // applied (`lastAppliedLabels`, … UTILS:79-81); here one map for all.
    let applied = &Mutex::new(HashMap::new());
    runner::run("virtual-kubelet-node", vec![own, by_cluster], |key| {
        reconcile(client, applied, key)
    })
    .await;
}

async fn nodes_of_cluster(
    virtual_nodes: Api<DynamicObject>,
    fc: DynamicObject,
) -> Option<Vec<Key>> {
    let cluster = fc.data["spec"]["clusterID"].as_str()?.to_string();
    let list = virtual_nodes.list(&ListParams::default()).await.ok()?;
    Some(
        list.items
            .iter()
            .filter(|vn| vn.data["spec"]["clusterID"] == cluster.as_str())
            .map(Key::of)
            .collect(),
    )
}

async fn reconcile(
    client: &Client,
    applied: &Mutex<HashMap<String, Metadata>>,
    key: Key,
) -> Result<(), Error> {
    let virtual_nodes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::virtual_nodes());
    let Some(vn) = virtual_nodes.get_opt(&key.name).await? else {
        return Ok(());
    };
    // `spec.createNode: false` runs no node (defaulted true by the
    // VirtualNode webhook, so absent counts as true).
    if vn.data["spec"]["createNode"] == false {
        return Ok(());
    }
    // A VirtualNode being deleted has its virtual kubelet's Deployment
    // deleted before its Node (`virtualnode-controller/deletion-routine.go:192-235`):
    // nothing makes the Node again once the deletion routine removed it.
    if vn.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let cluster = vn.data["spec"]["clusterID"].as_str().unwrap_or_default();
    // The ForeignCluster by its cluster-ID label
    // (`pkg/utils/foreigncluster/getters.go`, GetForeignClusterByID).
    let fcs: Api<DynamicObject> = Api::all_with(client.clone(), &consts::foreign_clusters());
    let fc = fcs
        .list(&ListParams::default().labels(&format!("{REMOTE_CLUSTER_ID}={cluster}")))
        .await?
        .items
        .into_iter()
        .next();
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &consts::nodes());
    let mut node = match nodes.get_opt(&key.name).await? {
        Some(node) => node,
        None => {
            nodes
                .create(&PostParams::default(), &initial_node(&key.name, cluster))
                .await?
        }
    };
    // REC:92-107: labels, annotations and taints, by patching the node.
    let desired = desired_metadata(&vn);
    let last = applied
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key.name)
        .cloned()
        .unwrap_or_default();
    let before = Metadata::of_node(&node);
    let after = patched_metadata(&before, &last, &desired);
    if after != before {
        node.metadata.labels = Some(after.labels);
        node.metadata.annotations = Some(after.annotations);
        crate::slice::object_at(&mut node.data, "spec")["taints"] = Value::Array(after.taints);
        node = nodes
            .replace(&key.name, &PostParams::default(), &node)
            .await?;
    }
    applied
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key.name.clone(), desired);
    // REC:109-111, UTILS:84-133.
    let network = Network::of(fc.as_ref(), vn.data["spec"]["disableNetworkCheck"] != true);
    node.data["status"] = node_status(&node.data["status"], &vn, network);
    nodes
        .replace_status(&key.name, &PostParams::default(), &node)
        .await?;
    Ok(())
}

/// The Node a virtual kubelet starts with
/// (`pkg/virtualKubelet/liqoNodeProvider/setup.go:36-41, 96-141`): Liqo's
/// virtual-node labels, excluded from load balancers, and the
/// virtual-node taint; no capacity yet.
pub fn initial_node(name: &str, cluster_id: &str) -> DynamicObject {
    let mut node = DynamicObject::new(name, &consts::nodes());
    let labels = [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/role", "agent"),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        (consts::TYPE, consts::TYPE_NODE),
        (REMOTE_CLUSTER_ID, cluster_id),
        (
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "true",
        ),
        (
            "alpha.service-controller.kubernetes.io/exclude-balancer",
            "true",
        ),
    ];
    node.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    node.data = json!({"spec": {"taints": [
        {"key": VIRTUAL_NODE_TOLERATION_KEY, "value": "true", "effect": "NoExecute"}]}});
    node
}

/// A node's labels, annotations and taints, as the provider sets them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Value>,
}

impl Metadata {
    /// What `node` carries now.
    pub fn of_node(node: &DynamicObject) -> Metadata {
        Metadata {
            labels: node.metadata.labels.clone().unwrap_or_default(),
            annotations: node.metadata.annotations.clone().unwrap_or_default(),
            taints: node.data["spec"]["taints"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        }
    }
}

fn string_map(map: &Value) -> BTreeMap<String, String> {
    map.as_object()
        .map(|l| {
            l.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// UTILS:39-65: the VirtualNode's labels plus whether storage is
/// available, its annotations, and its taints plus the virtual-node taint.
pub fn desired_metadata(vn: &DynamicObject) -> Metadata {
    let spec = &vn.data["spec"];
    let mut labels = string_map(&spec["labels"]);
    let storage = spec["storageClasses"]
        .as_array()
        .is_some_and(|s| !s.is_empty());
    labels.insert(STORAGE_AVAILABLE.into(), storage.to_string());
    let mut taints = spec["taints"].as_array().cloned().unwrap_or_default();
    taints
        .push(json!({"key": VIRTUAL_NODE_TOLERATION_KEY, "value": "true", "effect": "NoExecute"}));
    Metadata {
        labels,
        annotations: string_map(&spec["annotations"]),
        taints,
    }
}

/// UTILS:135-202 (`patchLabels`, `patchAnnotations`, `patchTaints`): the
/// node's metadata less what was `last` applied (`maps.Sub`, `slice.Sub`),
/// then `desired` merged in (`maps.Merge`; `slice.Merge` adds each taint
/// not already there, compared whole).
pub fn patched_metadata(node: &Metadata, last: &Metadata, desired: &Metadata) -> Metadata {
    let merge = |now: &BTreeMap<String, String>,
                 last: &BTreeMap<String, String>,
                 desired: &BTreeMap<String, String>| {
        let mut out: BTreeMap<String, String> = now
            .iter()
            .filter(|(k, _)| !last.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.extend(desired.iter().map(|(k, v)| (k.clone(), v.clone())));
        out
    };
    let mut taints: Vec<Value> = node
        .taints
        .iter()
        .filter(|t| !last.taints.contains(t))
        .cloned()
        .collect();
    for taint in &desired.taints {
        if !taints.contains(taint) {
            taints.push(taint.clone());
        }
    }
    Metadata {
        labels: merge(&node.labels, &last.labels, &desired.labels),
        annotations: merge(&node.annotations, &last.annotations, &desired.annotations),
        taints,
    }
}

/// What the provider knows of the network (UTILS:99-118).
#[derive(Debug, Clone, Copy)]
pub struct Network {
    /// Whether the network condition is set and checked: the check is on
    /// and the networking module not known to be off.
    pub checked: bool,
    /// Whether the ForeignCluster's networking is `Established`.
    pub ready: bool,
}

impl Network {
    /// From the ForeignCluster, if any; `check` is the virtual kubelet's
    /// network check (off with the VirtualNode's `disableNetworkCheck`).
    pub fn of(fc: Option<&DynamicObject>, check: bool) -> Network {
        let networking = fc.map(|fc| &fc.data["status"]["modules"]["networking"]);
        // UTILS:100-104, 112: the module counts as enabled until a reconciled
        // ForeignCluster (observedGeneration > 0) says otherwise.
        let reconciled = fc.is_some_and(|fc| {
            fc.data["status"]["observedGeneration"]
                .as_i64()
                .unwrap_or(0)
                > 0
        });
        let enabled = match networking {
            Some(n) if reconciled => n["enabled"] == true,
            _ => true,
        };
        // `pkg/utils/foreigncluster/status.go:20-23`.
        let ready = networking
            .and_then(|n| n["conditions"].as_array())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "NetworkConnectionStatus" && c["status"] == "Established")
            });
        Network {
            checked: check && enabled,
            ready,
        }
    }
}

/// The node's new status (UTILS:84-97, 108-133): the decision alone, no I/O.
pub fn node_status(old: &Value, vn: &DynamicObject, network: Network) -> Value {
    let mut status = if old.is_object() {
        old.clone()
    } else {
        json!({})
    };
    // UTILS:91-94: every key of the quota into capacity and allocatable; a
    // key no longer in the quota is never removed.
    if let Some(hard) = vn.data["spec"]["resourceQuota"]["hard"].as_object() {
        for field in ["capacity", "allocatable"] {
            let list = crate::slice::object_at(&mut status, field);
            for (k, v) in hard {
                list[k] = v.clone();
            }
        }
    }
    // UTILS:96: the VirtualNode's images (omitted when none).
    match vn.data["spec"]["images"].as_array() {
        Some(images) if !images.is_empty() => status["images"] = Value::Array(images.clone()),
        _ => {
            if let Some(s) = status.as_object_mut() {
                s.remove("images");
            }
        }
    }
    // UTILS:118-130.
    let network_ready = network.ready || !network.checked;
    let resources_ready = resources_ready(&status["allocatable"]);
    let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let ready = if resources_ready && network_ready {
        (
            "True",
            "KubeletReady",
            "The Liqo Virtual Kubelet is posting ready status",
        )
    } else {
        (
            "False",
            "KubeletNotReady",
            "The Liqo Virtual Kubelet is currently not ready",
        )
    };
    update_condition(&mut conditions, "Ready", ready);
    // COND:75-102.
    let pressure = |kind: &str, yes: &str, no: &str| {
        if resources_ready {
            (
                "False",
                no.to_string(),
                "The remote cluster is advertising sufficient resources",
            )
        } else {
            (
                "True",
                format!("{yes}{kind}"),
                "The remote cluster is advertising no/insufficient resources",
            )
        }
    };
    for (kind, yes, no) in [
        (
            "MemoryPressure",
            "RemoteClusterHas",
            "RemoteClusterHasSufficientMemory",
        ),
        (
            "DiskPressure",
            "RemoteClusterHas",
            "RemoteClusterHasNoDiskPressure",
        ),
        (
            "PIDPressure",
            "RemoteClusterHas",
            "RemoteClusterHasNoPIDPressure",
        ),
    ] {
        let (s, reason, message) = pressure(kind, yes, no);
        update_condition(&mut conditions, kind, (s, &reason, message));
    }
    // UTILS:126-130, COND:105-112.
    if network.checked {
        let unavailable = if network_ready {
            (
                "False",
                "LiqoNetworkingUp",
                "The Liqo cluster interconnection is established",
            )
        } else {
            (
                "True",
                "LiqoNetworkingDown",
                "The Liqo cluster interconnection is down",
            )
        };
        update_condition(&mut conditions, "NetworkUnavailable", unavailable);
    } else {
        conditions.retain(|c| c["type"] != "NetworkUnavailable");
    }
    status["conditions"] = Value::Array(conditions);
    status
}

/// REC:134-148: cpu and memory both present and above zero.
pub fn resources_ready(allocatable: &Value) -> bool {
    let positive = |key: &str| {
        allocatable[key]
            .as_str()
            .map(str::to_string)
            .or_else(|| allocatable[key].as_i64().map(|n| n.to_string()))
            .and_then(|q| q.parse::<quantity::Quantity>().ok())
            .is_some_and(|q| !q.is_zero() && !q.is_negative())
    };
    positive("cpu") && positive("memory")
}

/// COND:44-62: heartbeat always, reason, message and transition time only
/// when the status changes.
fn update_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    (status, reason, message): (&str, &str, &str),
) {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        Some(c) => {
            c["lastHeartbeatTime"] = json!(now);
            if c["status"] != status {
                c["status"] = json!(status);
                c["reason"] = json!(reason);
                c["message"] = json!(message);
                c["lastTransitionTime"] = json!(now);
            }
        }
        None => conditions.push(
            json!({"type": kind, "status": status, "reason": reason, "message": message,
                                       "lastHeartbeatTime": now, "lastTransitionTime": now}),
        ),
    }
}
