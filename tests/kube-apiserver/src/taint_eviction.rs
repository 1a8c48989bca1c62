//! What a real cluster does to the pods of a node that stops being Ready,
//! in three parts, each from Kubernetes v1.31.0:
//!
//! - **DefaultTolerationSeconds** (admission,
//!   `plugin/pkg/admission/defaulttolerationseconds/admission.go`): a pod
//!   created without a toleration of `node.kubernetes.io/not-ready:NoExecute`
//!   (or of `unreachable`) gets one with `tolerationSeconds: 300`
//!   (`--default-not-ready-toleration-seconds`,
//!   `--default-unreachable-toleration-seconds`). A toleration with an empty
//!   key or an empty effect counts as one.
//! - **The node lifecycle controller's NoExecute tainting**
//!   (`pkg/controller/nodelifecycle/node_lifecycle_controller.go`,
//!   `doNoExecuteTaintingPass`, `markNodeAsReachable`): a node whose `Ready`
//!   condition is `False` carries `node.kubernetes.io/not-ready:NoExecute`,
//!   one whose `Ready` is `Unknown` `node.kubernetes.io/unreachable:NoExecute`
//!   (never both), each with its `timeAdded`; a Ready node neither. (Its
//!   grace for a kubelet that stopped posting, and its per-zone rate
//!   limits, are not modelled: nodes here post their own conditions.)
//! - **The taint eviction controller** (`pkg/controller/tainteviction/taint_eviction.go`,
//!   `processPodOnNode`, `getMinTolerationTime`, `deletePodHandler`): a pod
//!   bound to a node with NoExecute taints it does not all tolerate is
//!   deleted at once; one that tolerates them all is deleted after the
//!   smallest `tolerationSeconds` of the tolerations used (counted from
//!   when the controller first saw it so), never if none has one; the
//!   schedule is cancelled when the taints go. Before deleting, the pod
//!   gets the `DisruptionTarget` condition (reason `DeletionByTaintManager`)
//!   and an Event `TaintManagerEviction` is recorded.
//!
//! The server's controller loop runs the tainting and the eviction after
//! every change and at the next due eviction; the rules are
//! [`crate::taints`].

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{json, Value};

use crate::crd::GroupResource;
use crate::store::{Target, World};
use crate::taints::{tainted, verdict, Verdict};

const COMPONENT: &str = "taint-eviction-controller";

/// The taint eviction controller's schedule: when each pod (by uid) was
/// first seen on a tainted node.
#[derive(Default)]
pub struct Evictor {
    seen: HashMap<String, Instant>,
}

impl Evictor {
    /// One pass at `now`: taint nodes as their `Ready` says, delete the
    /// pods whose time has come. The next time one is due, if any.
    pub fn sync(&mut self, world: &mut World, now: Instant) -> Option<Instant> {
        let nodes_gr = GroupResource::new("", "nodes");
        let pods_gr = GroupResource::new("", "pods");
        let (Some(nodes_def), Some(pods_def)) =
            (world.registry.get(&nodes_gr), world.registry.get(&pods_gr))
        else {
            return None;
        };
        let stamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut taints_of: HashMap<String, Vec<Value>> = HashMap::new();
        for node in world.list_objects(&nodes_gr) {
            let name = node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let mut taints = node["spec"]["taints"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if let Some(next) = tainted(&node, &stamp) {
                let mut updated = node.clone();
                updated["spec"]["taints"] = Value::Array(next.clone());
                match world.update(&nodes_def, None, &name, updated, Target::Main) {
                    Ok(_) => taints = next,
                    Err(e) => tracing::debug!(error = %e, node = %name, "node lifecycle: taint"),
                }
            }
            taints_of.insert(name, taints);
        }
        let mut next_due: Option<Instant> = None;
        let mut alive = std::collections::HashSet::new();
        for pod in world.list_objects(&pods_gr) {
            let Some(node) = pod["spec"]["nodeName"].as_str() else {
                continue;
            };
            let uid = pod["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let taints = taints_of.get(node).cloned().unwrap_or_default();
            let Verdict::After(wait) = verdict(&pod, &taints) else {
                continue;
            };
            alive.insert(uid.clone());
            let due = *self.seen.entry(uid).or_insert(now) + wait;
            if due <= now {
                evict(world, &pods_def, &pod);
            } else {
                next_due = Some(next_due.map_or(due, |n| n.min(due)));
            }
        }
        // Cancelled: pods gone, untainted or tolerating for ever.
        self.seen.retain(|uid, _| alive.contains(uid));
        next_due
    }
}

/// `deletePodHandler`: the `DisruptionTarget` condition, an Event, then
/// the DELETE.
fn evict(world: &mut World, pods: &crate::crd::ResourceDef, pod: &Value) {
    let namespace = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let stamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut marked = pod.clone();
    let mut conditions = marked["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conditions.retain(|c| c["type"] != "DisruptionTarget");
    conditions.push(json!({"type": "DisruptionTarget", "status": "True",
        "reason": "DeletionByTaintManager", "message": "Taint manager: deleting due to NoExecute taint",
        "lastTransitionTime": stamp}));
    marked["status"]["conditions"] = Value::Array(conditions);
    if let Err(e) = world.update(pods, Some(&namespace), &name, marked, Target::Status) {
        tracing::debug!(error = %e, pod = %name, "taint eviction: condition");
    }
    if let Some(events) = world.registry.get(&GroupResource::new("", "events")) {
        let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
        let event = json!({
            "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": namespace},
            "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": name},
            "reason": "TaintManagerEviction",
            "message": format!("Marking for deletion Pod {namespace}/{name}"),
            "source": {"component": COMPONENT},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "type": "Normal",
            "reportingComponent": COMPONENT, "reportingInstance": "",
        });
        if let Err(e) = world.create(&events, Some(&namespace), event) {
            tracing::debug!(error = %e, "taint eviction: event");
        }
    }
    if let Err(e) = world.delete(pods, Some(&namespace), &name, &json!({})) {
        tracing::debug!(error = %e, pod = %name, "taint eviction: delete");
    } else {
        tracing::info!(pod = %format!("{namespace}/{name}"), "taint eviction: pod deleted");
    }
}
