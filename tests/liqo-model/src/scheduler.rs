//! A scheduler for the test clusters, playing kube-scheduler (not a Liqo
//! component: Liqo relies on the cluster's scheduler to put pods on its
//! virtual nodes): each pod without a node is bound to the first node, by
//! name, that passes [`scheduling::filter`] — schedulable, its taints
//! tolerated (a node not `Ready` carries the lifecycle controller's
//! `NoSchedule` taint), matching its node selector and required node
//! affinity, room for its requests and one more pod — else marked
//! `PodScheduled=False`, reason `Unschedulable`, with kube-scheduler's
//! message ([`scheduling::unschedulable_message`]: `0/N nodes are
//! available: 1 Insufficient cpu, 1 node(s) had untolerated taint {…}.
//! preemption: …`; `pkg/scheduler/schedule_one.go`,
//! `handleSchedulingFailure`). Pods are tried again when any node
//! changes. Scoring and preemption are not modelled: among feasible
//! nodes the first by name wins, and no pod is preempted.
//!
//! A pod is bound as kube-scheduler's default binder binds it
//! (`pkg/scheduler/framework/plugins/defaultbinder/default_binder.go`,
//! `Bind`): a `Binding` posted to the pod's `binding` subresource, naming
//! the pod's uid and the node, so the API server sets `spec.nodeName` once.

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::identity::{Rule, READ};
use crate::offloading_consts::pods;
use crate::runner::{self, Key};
use crate::scheduling::{filter, unschedulable_message};
use crate::Error;

/// The user the model's scheduler runs as.
pub const USER: &str = "system:kube-scheduler";

/// The part of `system:kube-scheduler`'s ClusterRole this model uses.
pub const RULES: &[Rule] = &[
    Rule::new(&[""], &["pods"], &["get", "list", "watch"]),
    Rule::new(&[""], &["pods/binding"], &["create"]),
    Rule::new(&[""], &["pods/status"], &["update"]),
    Rule::new(&[""], &["nodes"], READ),
];

fn unbound(pod: &DynamicObject) -> bool {
    pod.data["spec"]["nodeName"]
        .as_str()
        .is_none_or(str::is_empty)
        && pod.metadata.deletion_timestamp.is_none()
}

/// Run the scheduler on `client` until the task is dropped.
pub async fn run(client: Client) {
    let all_pods: Api<DynamicObject> = Api::all_with(client.clone(), &pods());
    let own = runner::keys(runner::touched(all_pods.clone(), ""), |p| {
        unbound(&p).then(|| Key::of(&p))
    });
    let by_node = runner::keys_via(
        runner::touched(Api::all_with(client.clone(), &crate::consts::nodes()), ""),
        all_pods,
        |api, _| async move {
            let list = api.list(&ListParams::default()).await.ok()?;
            Some(
                list.items
                    .iter()
                    .filter(|p| unbound(p))
                    .map(Key::of)
                    .collect(),
            )
        },
    );
    let client = &client;
    runner::run("scheduler", vec![own, by_node], |key| schedule(client, key)).await;
}

fn finished(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

async fn schedule(client: &Client, key: Key) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &key.namespace, &pods());
    let Some(mut pod) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    if !unbound(&pod) {
        return Ok(());
    }
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &crate::consts::nodes());
    let mut nodes: Vec<Value> = nodes
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|n| serde_json::to_value(n).ok())
        .collect();
    nodes.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    let everyone: Vec<Value> = Api::<DynamicObject>::all_with(client.clone(), &pods())
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .filter(|p| !finished(p))
        .collect();
    let this = serde_json::to_value(&pod).unwrap_or_default();
    let mut refused = Vec::new();
    for node in &nodes {
        let on_node: Vec<&Value> = everyone
            .iter()
            .filter(|p| p["spec"]["nodeName"] == node["metadata"]["name"])
            .collect();
        match filter(&this, node, &on_node) {
            Ok(()) => {
                let binding = json!({
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": key.name, "uid": pod.metadata.uid},
                    "target": {"kind": "Node", "name": node["metadata"]["name"]},
                });
                let posted = api
                    .create_subresource::<Value, Value>(
                        "binding",
                        &key.name,
                        &PostParams::default(),
                        &binding,
                    )
                    .await;
                return match posted {
                    // Bound meanwhile, or gone: nothing left to schedule.
                    Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(()),
                    other => other.map(drop).map_err(Into::into),
                };
            }
            Err(refusal) => refused.push((node, on_node, refusal)),
        }
    }
    let message = unschedulable_message(&this, &refused);
    let condition = json!({"type": "PodScheduled", "status": "False",
                           "reason": "Unschedulable", "message": message});
    let conditions = pod.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if conditions.contains(&condition) {
        return Ok(());
    }
    let mut kept: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != "PodScheduled")
        .collect();
    kept.push(condition);
    pod.data["status"]["conditions"] = Value::Array(kept);
    if pod.data["status"]["phase"].is_null() {
        pod.data["status"]["phase"] = json!("Pending");
    }
    api.replace_status(&key.name, &PostParams::default(), &pod)
        .await?;
    Ok(())
}
