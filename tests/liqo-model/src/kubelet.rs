//! A kubelet for the test clusters' ordinary nodes (not a Liqo component:
//! it plays the kubelet of a provider's real node, so that the pods Liqo
//! makes there run): each pod bound to its node is reported `Running`, its
//! containers running and ready, with the `PodScheduled`, `Initialized`,
//! `ContainersReady` and `Ready` conditions `True`, as the kubelet's status
//! manager reports a started pod (`pkg/kubelet/status/status_manager.go`,
//! `pkg/kubelet/kubelet_pods.go` `generateAPIPodStatus`). Images are not
//! pulled and nothing runs: the phase is what the tests need.

use kube::api::{Api, DynamicObject, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::identity::{Rule, READ};
use crate::offloading_consts::pods;
use crate::runner::{self, Key};
use crate::Error;

/// The part of `system:node`'s rights this model uses.
pub const RULES: &[Rule] = &[
    Rule::new(&[""], &["pods"], READ),
    Rule::new(&[""], &["pods/status"], &["update", "patch"]),
];

/// The user the kubelet of node `name` runs as.
pub fn user(name: &str) -> String {
    format!("system:node:{name}")
}

/// Run the kubelet of node `node` on `client` until the task is dropped.
pub async fn run(client: Client, node: String) {
    let name = node.clone();
    let own = runner::keys(
        runner::touched(Api::all_with(client.clone(), &pods()), ""),
        move |p| (p.data["spec"]["nodeName"] == name.as_str()).then(|| Key::of(&p)),
    );
    let (client, node) = (&client, node.as_str());
    runner::run("kubelet", vec![own], |key| reconcile(client, node, key)).await;
}

/// The status of a started pod with `spec` on `node`.
pub fn running_status(spec: &Value) -> Value {
    let condition = |kind: &str| json!({"type": kind, "status": "True"});
    let containers: Vec<Value> = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!({"name": c["name"], "image": c["image"], "ready": true, "started": true,
                   "restartCount": 0, "state": {"running": {}}})
        })
        .collect();
    let conditions = ["PodScheduled", "Initialized", "ContainersReady", "Ready"].map(condition);
    json!({
        "phase": "Running",
        "conditions": conditions,
        "containerStatuses": containers,
    })
}

async fn reconcile(client: &Client, node: &str, key: Key) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &key.namespace, &pods());
    let Some(mut pod) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    if pod.data["spec"]["nodeName"] != node || pod.data["status"]["phase"] == "Running" {
        return Ok(());
    }
    pod.data["status"] = running_status(&pod.data["spec"]);
    api.replace_status(&key.name, &PostParams::default(), &pod)
        .await?;
    Ok(())
}
