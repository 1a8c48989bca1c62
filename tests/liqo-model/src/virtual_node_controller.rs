//! The consumer's VirtualNode controller and its deletion routine, as Liqo
//! v1.2.0 has them in `pkg/liqo-controller-manager/offloading/virtualnode-controller/`
//! (`virtualnode_controller.go` VNC, `deletion-routine.go` DR, `drain.go`
//! DRAIN, `cordon.go` CORDON, `condition.go` COND, `finalizer.go` FIN
//! below): how a virtual node goes away.
//!
//! Each VirtualNode not being deleted gets the finalizer
//! `virtualnode-controller.liqo.io/finalizer` (VNC:107-112, FIN:26-33). One
//! being deleted (its ResourceSlice gone, the garbage collector deleting
//! what the slice owns) or asking for no node (`spec.createNode: false`)
//! goes to the deletion routine's queue (VNC:113-131, DR:66-74), which for
//! each one, one at a time (DR:76-104):
//! 1. marks the VirtualNode's `Node` condition `Draining` (DR:134-138);
//! 2. cordons the Node named as the VirtualNode (`spec.unschedulable`,
//!    CORDON:26-35; `getters.GetNodeFromVirtualNode`, the nodes labelled
//!    with the VirtualNode's cluster ID, `pkg/utils/getters/k8sGetters.go:532-546`);
//! 3. drains it (DRAIN:44-73): the pods bound to it carrying
//!    `liqo.io/shadowPod=true` — the label the virtual kubelet's reflection
//!    puts on every pod it offloads (`reflection/workload/podns.go:288-306`)
//!    — except DaemonSet and mirror pods (DRAIN:76-109), are **evicted**
//!    through `pods/eviction` one after the other, so the
//!    PodDisruptionBudgets of the consumer cluster are respected
//!    (DRAIN:111-145), then each is waited for until gone or replaced by a
//!    pod of another UID, checked at once and then every 10 s, with no
//!    deadline (DRAIN:38, 163-180). When the peer's ForeignCluster is
//!    missing, or annotated permanently unreachable without a reachable
//!    API server, the pods are deleted at once instead (grace 0,
//!    DRAIN:51-65, 147-161; `pkg/utils/foreigncluster/conditions.go:27-55`);
//! 4. for a VirtualNode being deleted, marks `VirtualKubelet` `Deleting`
//!    and stops the virtual kubelet (DR:192-203: its Deployment deleted;
//!    here [`crate::node_provider`] leaves alone a VirtualNode being
//!    deleted), marks `Node` `Deleting` and deletes the Node (DR:220-235);
//! 5. removes the finalizer (DR:145-155), or, for `createNode: false`,
//!    marks `Node` `None` (DR:156-163); the status is written at the end,
//!    whatever happened (DR:124-131).
//!
//! **A refused eviction** (a PodDisruptionBudget's 429, any error but
//! NotFound) fails the whole pass: the Node stays cordoned, the
//! VirtualNode keeps its finalizer and the routine tries again later, at
//! the work queue's per-item exponential backoff (DR:96-103,
//! `workqueue.DefaultControllerRateLimiter`: 5 ms doubling up to 1000 s),
//! for ever — Liqo never gives up nor forces the pod out. Every event on
//! the VirtualNode meanwhile queues it again at the next backoff step, as
//! `EnsureNodeAbsence` does (`AddRateLimited`, DR:67-74). A NotFound from
//! the drain (a pod evicted meanwhile) ends it as if it had completed
//! (DR:185, `client.IgnoreNotFound`).
//!
//! Not modelled: the NamespaceMap's creation and removal with the first and
//! last VirtualNode of a peer (VNC:133-136, `namespacemap.go:36-108`; the
//! tests' `offloading::Peering` makes it); the virtual kubelet's
//! Deployment (none runs here); the work queue's overall token bucket
//! (10 per second, burst 100). Liqo reads pods through its informer cache,
//! which often still holds a just-evicted pod at the first check, so a real
//! drain usually waits one 10 s period more than the model, which reads
//! from the API server.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::consts::{self, REMOTE_CLUSTER_ID};
use crate::identity::{Rule, READ};
use crate::offloading_consts::pods;
use crate::runner::{self, Key};
use crate::Error;

/// VNC:48.
pub const FINALIZER: &str = "virtualnode-controller.liqo.io/finalizer";
/// `pkg/consts/replication.go:40-43`: the label of every offloaded pod.
pub const LOCAL_POD_LABEL: &str = "liqo.io/shadowPod";
/// `pkg/consts/annotations.go:55`.
pub const PERMANENTLY_UNREACHABLE: &str = "liqo.io/foreign-cluster-permanently-unreachable";
/// DRAIN:38.
pub const POD_TERMINATION_CHECK: Duration = Duration::from_secs(10);

/// The part of the controller manager's RBAC this controller uses: its own
/// ClusterRole for VirtualNodes and ForeignClusters
/// (`deployments/liqo/files/liqo-controller-manager-ClusterRole.yaml`),
/// and the local virtual kubelet's for nodes, pods and evictions, which
/// the chart binds to the controller manager too
/// (`templates/liqo-controller-manager-rbac.yaml`,
/// `…-grant-virtual-kubelet-local`; `files/liqo-virtual-kubelet-local-ClusterRole.yaml:13-47`).
pub const RULES: &[Rule] = &[
    Rule::new(
        &["offloading.liqo.io"],
        &["virtualnodes"],
        &["get", "list", "watch", "update"],
    ),
    Rule::new(
        &["offloading.liqo.io"],
        &["virtualnodes/status"],
        &["update"],
    ),
    Rule::new(&["core.liqo.io"], &["foreignclusters"], READ),
    Rule::new(
        &[""],
        &["nodes"],
        &["get", "list", "watch", "update", "delete"],
    ),
    Rule::new(&[""], &["pods"], &["get", "list", "watch", "delete"]),
    Rule::new(&[""], &["pods/eviction"], &["create"]),
];

fn finalizers(vn: &DynamicObject) -> &[String] {
    vn.metadata.finalizers.as_deref().unwrap_or_default()
}

/// Whether the deletion routine has work for `vn` (VNC:113-131).
fn to_delete(vn: &DynamicObject) -> bool {
    match vn.metadata.deletion_timestamp {
        Some(_) => finalizers(vn).iter().any(|f| f == FINALIZER),
        None => vn.data["spec"]["createNode"] == false,
    }
}

/// Run the controller and its deletion routine on `client` until dropped.
pub async fn run(client: Client) {
    let virtual_nodes: Api<DynamicObject> = Api::all_with(client.clone(), &consts::virtual_nodes());
    let (absent, queued) = tokio::sync::mpsc::unbounded_channel();
    let routine = tokio::spawn(deletion_routine(client.clone(), queued));
    let own = runner::keys(runner::touched(virtual_nodes, ""), |vn| Some(Key::of(&vn)));
    let client = &client;
    let absent = &absent;
    runner::run("virtual-node", vec![own], |key| async move {
        reconcile(client, absent, key).await
    })
    .await;
    routine.abort();
}

/// VNC:97-138, the finalizer and the hand-over to the deletion routine.
async fn reconcile(
    client: &Client,
    absent: &tokio::sync::mpsc::UnboundedSender<Key>,
    key: Key,
) -> Result<(), Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::virtual_nodes());
    let Some(mut vn) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    if vn.metadata.deletion_timestamp.is_none() && !finalizers(&vn).iter().any(|f| f == FINALIZER) {
        vn.metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(FINALIZER.into());
        api.replace(&key.name, &PostParams::default(), &vn).await?;
        return Ok(());
    }
    if to_delete(&vn) {
        // DR:67-74: `EnsureNodeAbsence`; the receiver is gone only when the
        // controller stops.
        let _ = absent.send(key);
    }
    Ok(())
}

/// `workqueue.DefaultControllerRateLimiter`'s per-item half
/// (`ItemExponentialFailureRateLimiter(5ms, 1000s)`): the delay of the
/// `failures`-th requeue of one key.
pub fn backoff(failures: u32) -> Duration {
    let max = Duration::from_secs(1000);
    2u32.checked_pow(failures)
        .and_then(|n| Duration::from_millis(5).checked_mul(n))
        .map_or(max, |d| d.min(max))
}

/// DR:76-104: one key at a time, from a rate-limited queue.
async fn deletion_routine(client: Client, queued: tokio::sync::mpsc::UnboundedReceiver<Key>) {
    let mut queued = tokio_stream::wrappers::UnboundedReceiverStream::new(queued);
    let mut failures: HashMap<Key, u32> = HashMap::new();
    let mut due: HashMap<Key, Instant> = HashMap::new();
    // `AddRateLimited`: after the key's next backoff step; a key already
    // waiting keeps the earlier time (the delaying queue's `AddAfter`).
    let add = |failures: &mut HashMap<Key, u32>, due: &mut HashMap<Key, Instant>, key: Key| {
        let n = failures.entry(key.clone()).or_insert(0);
        let at = Instant::now() + backoff(*n);
        *n += 1;
        let slot = due.entry(key).or_insert(at);
        *slot = (*slot).min(at);
    };
    loop {
        let next = due
            .iter()
            .min_by_key(|(_, at)| **at)
            .map(|(k, at)| (k.clone(), *at));
        tokio::select! {
            key = queued.next() => match key {
                Some(key) => add(&mut failures, &mut due, key),
                None => return,
            },
            () = async {
                match next.as_ref() {
                    Some((_, at)) => tokio::time::sleep_until(*at).await,
                    None => std::future::pending().await,
                }
            } => {
                let Some((key, _)) = next else { continue };
                due.remove(&key);
                match handle(&client, &key).await {
                    // DR:96-98: `Forget`.
                    Ok(()) => {
                        failures.remove(&key);
                    }
                    // DR:101-102.
                    Err(e) => {
                        tracing::info!(error = %e, ?key, "virtual node deletion failed; will retry");
                        add(&mut failures, &mut due, key);
                    }
                }
            }
        }
    }
}

/// COND:33-72, with its quirks: an unchanged status, and the transitions
/// Running→Creating, None→Draining, None→Deleting and Deleting→Draining,
/// leave the conditions as they are; any other change updates the
/// condition *and* appends a second one of the same type (the loop does
/// not return after the update).
pub fn forge_condition(vn: &mut Value, kind: &str, status: &str) {
    if !vn["status"].is_object() {
        vn["status"] = json!({});
    }
    if !vn["status"]["conditions"].is_array() {
        vn["status"]["conditions"] = json!([]);
    }
    let now = now();
    let Some(conditions) = vn["status"]["conditions"].as_array_mut() else {
        return;
    };
    for c in conditions.iter_mut() {
        if c["type"] != kind {
            continue;
        }
        let have = c["status"].as_str().unwrap_or_default();
        if have == status
            || (have == "Running" && status == "Creating")
            || (have == "None" && (status == "Draining" || status == "Deleting"))
            || (have == "Deleting" && status == "Draining")
        {
            return;
        }
        c["status"] = json!(status);
        c["lastTransitionTime"] = json!(now);
        c["message"] = json!("");
    }
    conditions.push(json!({"type": kind, "status": status, "lastTransitionTime": now}));
}

/// `metav1.Now()` as the API writes it.
fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// DR:106-167, the status written back at the end whatever happened
/// (DR:124-131).
async fn handle(client: &Client, key: &Key) -> Result<(), Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::virtual_nodes());
    let Some(vn) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    let mut status = serde_json::to_value(&vn).unwrap_or_default();
    let before = status["status"].clone();
    forge_condition(&mut status, "Node", "Draining");
    let outcome = remove_node(client, &vn, &mut status).await;
    let outcome = match outcome {
        Ok(()) if vn.metadata.deletion_timestamp.is_some() => {
            // DR:145-155 (the NamespaceMap's removal is not modelled).
            let mut fresh = api.get(&key.name).await?;
            if let Some(f) = fresh.metadata.finalizers.as_mut() {
                f.retain(|f| f != FINALIZER);
            }
            api.replace(&key.name, &PostParams::default(), &fresh)
                .await
                .map(drop)
                .map_err(Error::from)
        }
        Ok(()) => {
            forge_condition(&mut status, "Node", "None");
            Ok(())
        }
        Err(e) => Err(e),
    };
    // DR:124-131: written last; a VirtualNode gone with its finalizer has
    // no status left to write (Liqo's update fails NotFound and the key is
    // tried again, to find nothing). An unchanged status is not written:
    // the API server would change nothing and send no watch event.
    if status["status"] == before {
        return outcome;
    }
    let mut written: DynamicObject = match serde_json::from_value(status) {
        Ok(o) => o,
        Err(e) => return Err(Error::Waiting(e.to_string())),
    };
    if let Ok(Some(current)) = api.get_opt(&key.name).await {
        written.metadata = current.metadata;
        match api
            .replace_status(&key.name, &PostParams::default(), &written)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return outcome.and(Err(e.into())),
        }
    }
    outcome
}

/// DR:169-238: cordon, drain, stop the virtual kubelet, delete the Node.
async fn remove_node(client: &Client, vn: &DynamicObject, status: &mut Value) -> Result<(), Error> {
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &consts::nodes());
    let cluster = vn.data["spec"]["clusterID"].as_str().unwrap_or_default();
    let name = vn.metadata.name.clone().unwrap_or_default();
    // `GetNodeFromVirtualNode`: among the nodes of the VirtualNode's
    // cluster, the one of its name.
    let node_of = || async {
        let listed = nodes
            .list(&ListParams::default().labels(&format!("{REMOTE_CLUSTER_ID}={cluster}")))
            .await?;
        Ok::<_, Error>(
            listed
                .items
                .into_iter()
                .find(|n| n.metadata.name.as_deref() == Some(name.as_str())),
        )
    };
    let node = node_of().await?;
    if let Some(mut cordoned) = node.clone() {
        // CORDON:26-35.
        cordoned.data["spec"]["unschedulable"] = json!(true);
        nodes
            .replace(&name, &PostParams::default(), &cordoned)
            .await?;
        // DR:185: a NotFound from the drain counts as drained.
        match drain(client, vn).await {
            Err(Error::Kube(kube::Error::Api(e))) if e.code == 404 => {}
            other => other?,
        }
    }
    if vn.metadata.deletion_timestamp.is_some() {
        // DR:192-203.
        forge_condition(status, "VirtualKubelet", "Deleting");
    }
    let node = match node {
        Some(node) => Some(node),
        None => node_of().await?,
    };
    forge_condition(status, "Node", "Deleting");
    if node.is_some() {
        match nodes.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// DRAIN:182-194.
fn skipped(pod: &DynamicObject) -> bool {
    let daemon = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.kind == "DaemonSet");
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    daemon || mirror
}

/// `foreigncluster.IsDead` (`pkg/utils/foreigncluster/conditions.go:27-55`).
pub fn dead(fc: Option<&DynamicObject>) -> bool {
    let Some(fc) = fc else {
        return true;
    };
    let marked = fc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PERMANENTLY_UNREACHABLE))
        .is_some_and(|v| v == "true");
    if !marked {
        return false;
    }
    fc.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "APIServerStatus")
        .is_none_or(|c| c["status"] != "Established")
}

/// DRAIN:44-73.
async fn drain(client: &Client, vn: &DynamicObject) -> Result<(), Error> {
    let name = vn.metadata.name.clone().unwrap_or_default();
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &pods());
    // DRAIN:76-109: by the node-name index and the offloaded-pod label.
    let listed = all
        .list(&ListParams::default().labels(&format!("{LOCAL_POD_LABEL}=true")))
        .await?;
    let to_evict: Vec<DynamicObject> = listed
        .items
        .into_iter()
        .filter(|p| p.data["spec"]["nodeName"] == name.as_str())
        .filter(|p| !skipped(p))
        .collect();
    // DRAIN:51-56: `GetForeignClusterByID`, by its cluster-ID label; more
    // than one is an error (`getters.go:70-80`).
    let cluster = vn.data["spec"]["clusterID"].as_str().unwrap_or_default();
    let fcs: Api<DynamicObject> = Api::all_with(client.clone(), &consts::foreign_clusters());
    let found = fcs
        .list(&ListParams::default().labels(&format!("{REMOTE_CLUSTER_ID}={cluster}")))
        .await?
        .items;
    if found.len() > 1 {
        return Err(Error::Waiting(format!(
            "multiple ForeignClusters with cluster ID {cluster}"
        )));
    }
    if dead(found.first()) {
        // DRAIN:59-64, 147-161.
        for pod in &to_evict {
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                &pods(),
            );
            match api
                .delete(
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    &DeleteParams::default().grace_period(0),
                )
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        return Ok(());
    }
    // DRAIN:111-126: every eviction first, then every wait.
    for pod in &to_evict {
        evict(client, pod).await?;
    }
    for pod in &to_evict {
        wait_for_delete(client, pod).await?;
    }
    Ok(())
}

/// DRAIN:128-145: a policy/v1 Eviction with empty delete options.
async fn evict(client: &Client, pod: &DynamicObject) -> Result<(), Error> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &pods());
    let eviction = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {},
    });
    api.create_subresource::<Value, Value>("eviction", &name, &PostParams::default(), &eviction)
        .await?;
    Ok(())
}

/// DRAIN:163-180: until the pod is gone or has another UID, checked now
/// and then every [`POD_TERMINATION_CHECK`], with no deadline.
async fn wait_for_delete(client: &Client, pod: &DynamicObject) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        &pods(),
    );
    let name = pod.metadata.name.clone().unwrap_or_default();
    loop {
        match api.get_opt(&name).await? {
            None => return Ok(()),
            Some(now) if now.metadata.uid != pod.metadata.uid => return Ok(()),
            Some(_) => tokio::time::sleep(POD_TERMINATION_CHECK).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_queue_backs_off_from_5_ms_doubling_to_1000_s() {
        assert_eq!(backoff(0), Duration::from_millis(5));
        assert_eq!(backoff(3), Duration::from_millis(40));
        assert_eq!(backoff(17), Duration::from_millis(655_360));
        assert_eq!(backoff(18), Duration::from_secs(1000));
        assert_eq!(backoff(64), Duration::from_secs(1000));
    }

    #[test]
    fn conditions_keep_liqos_transitions_and_duplicates() {
        let mut vn = json!({});
        forge_condition(&mut vn, "Node", "Draining");
        forge_condition(&mut vn, "Node", "Draining");
        assert_eq!(vn["status"]["conditions"].as_array().map(Vec::len), Some(1));
        // Deleting → Draining is refused, None → Deleting too.
        forge_condition(&mut vn, "Node", "Deleting");
        let statuses = |vn: &Value| -> Vec<String> {
            vn["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{}={}",
                        c["type"].as_str().unwrap_or_default(),
                        c["status"].as_str().unwrap_or_default()
                    )
                })
                .collect()
        };
        assert_eq!(statuses(&vn), ["Node=Deleting", "Node=Deleting"]);
        forge_condition(&mut vn, "Node", "Draining");
        assert_eq!(statuses(&vn), ["Node=Deleting", "Node=Deleting"]);
    }

    #[test]
    fn a_foreign_cluster_is_dead_when_missing_or_marked_and_unreachable() {
        let fc = |v: Value| -> DynamicObject { serde_json::from_value(v).unwrap() };
        let base = json!({"apiVersion": "core.liqo.io/v1beta1", "kind": "ForeignCluster",
            "metadata": {"name": "p"}});
        assert!(dead(None));
        assert!(!dead(Some(&fc(base.clone()))));
        let mut marked = base.clone();
        marked["metadata"]["annotations"] = json!({PERMANENTLY_UNREACHABLE: "true"});
        assert!(dead(Some(&fc(marked.clone()))));
        marked["status"] =
            json!({"conditions": [{"type": "APIServerStatus", "status": "Established"}]});
        assert!(!dead(Some(&fc(marked))));
    }
}
