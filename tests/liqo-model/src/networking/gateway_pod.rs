//! The gateway's Deployment and pod, as Liqo v1.2.0 makes them from its
//! chart's gateway templates, so that the pod meets the cluster's Pod
//! Security Admission as Liqo's does:
//! - the operator's Deployment `gw-<gateway>` in the gateway's namespace
//!   (`wggatewayserver_controller.go:132, 240-252`, the client's
//!   `wggatewayclient_controller.go:222-247`: `CreateOrUpdate` with the
//!   template's labels and spec), whose pod template is the chart's
//!   (`deployments/liqo/templates/liqo-wireguard-gateway-server-template.yaml:44-258`,
//!   `…-client-template.yaml`): containers `gateway` (privileged,
//!   `NET_ADMIN` and `NET_RAW` added, :66-139), `wireguard` (`NET_ADMIN`,
//!   `NET_RAW`; privileged only for the userspace implementation, the
//!   chart's default is `kernel`, :140-192) and `geneve` (`NET_ADMIN`,
//!   `NET_RAW`, :193-249), volumes `wireguard-config` and `ipc`;
//! - its pod, made by kube-controller-manager's Deployment and ReplicaSet
//!   controllers (not Liqo components: the test server runs them), which
//!   report a refused create as a `Warning` Event `FailedCreate` and the
//!   condition `ReplicaFailure=True` (`pkg/controller/replicaset/`); the
//!   gateway waits for its pod (it makes the keys, the tunnel and the
//!   Connection).
//!
//! Simplified: one replica (the chart's default, `values.yaml`
//! `networking.gatewayTemplates.replicas: 1`), images, arguments and
//! probes left out (nothing runs them).

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

use super::gateway::{resource_name, Mode};
use crate::consts::REMOTE_CLUSTER_ID;
use crate::offloading_consts::pods;
use crate::runner;
use crate::Error;

pub fn deployments() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps", "v1", "Deployment"),
        "deployments",
    )
}

/// What the controllers here need beyond the gateways' own rules (the
/// chart's `liqo-controller-manager` ClusterRole for Deployments, and
/// pods to see the gateway's).
pub const RULES: &[crate::identity::Rule] = &[
    crate::identity::Rule::new(
        &["apps"],
        // The finalizers for the pod's owner reference with
        // blockOwnerDeletion (the ReplicaSet controller's role has
        // `replicasets/finalizers`).
        &[
            "deployments",
            "deployments/status",
            "deployments/finalizers",
        ],
        crate::identity::ALL,
    ),
    crate::identity::Rule::new(&[""], &["pods"], crate::identity::READ),
];

/// The template's selector labels (`_helpers.tpl:106-125`
/// `liqo.selectorTemplate`; the release is the chart's `liqo`).
fn selector(gateway: &str, namespace: &str) -> Value {
    json!({
        "app.kubernetes.io/name": gateway,
        "app.kubernetes.io/instance": format!("liqo-{gateway}"),
        "app.kubernetes.io/component": "networking",
        "app.kubernetes.io/part-of": "liqo",
        "app.kubernetes.io/managed-by": "Helm",
        "networking.liqo.io/component": "gateway",
        "networking.liqo.io/gateway-name": gateway,
        "networking.liqo.io/gateway-namespace": namespace,
    })
}

/// The chart's gateway pod spec (see the module's notes for lines).
pub fn pod_spec(gateway: &str) -> Value {
    let caps = json!({"add": ["NET_ADMIN", "NET_RAW"]});
    let ipc = json!({"name": "ipc", "mountPath": "/ipc"});
    json!({
        "serviceAccount": gateway,
        "serviceAccountName": gateway,
        "containers": [
            {"name": "gateway", "image": "ghcr.io/liqotech/gateway:v1.2.0",
             "volumeMounts": [ipc],
             "securityContext": {"privileged": true, "capabilities": caps}},
            {"name": "wireguard", "image": "ghcr.io/liqotech/gateway/wireguard:v1.2.0",
             "volumeMounts": [ipc, {"name": "wireguard-config", "mountPath": "/etc/wireguard/keys"}],
             "securityContext": {"capabilities": caps}},
            {"name": "geneve", "image": "ghcr.io/liqotech/gateway/geneve:v1.2.0",
             "volumeMounts": [ipc],
             "securityContext": {"capabilities": caps}},
        ],
        "volumes": [
            {"name": "wireguard-config", "secret": {"secretName": resource_name(gateway)}},
            {"name": "ipc", "emptyDir": {}},
        ],
    })
}

fn owner(obj: &DynamicObject, api_version: &str, kind: &str) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": obj.name_any(),
            "uid": obj.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true}])
}

/// Make the gateway's Deployment; `Err` (tried again) until its pod is
/// there.
pub async fn ensure(
    client: &Client,
    mode: Mode,
    gateway: &DynamicObject,
    peer: &str,
) -> Result<(), Error> {
    let ns = gateway.namespace().unwrap_or_default();
    let name = gateway.name_any();
    let deploy_name = resource_name(&name);
    let labels = selector(&name, &ns);
    let resource = mode.resource();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &deployments());
    runner::create_or_update(&api, &deployments(), &ns, &deploy_name, |d| {
        d.metadata.labels = serde_json::from_value(labels.clone()).ok();
        d.labels_mut()
            .insert(REMOTE_CLUSTER_ID.to_string(), peer.to_string());
        d.metadata.owner_references =
            serde_json::from_value(owner(gateway, &resource.api_version, &resource.kind)).ok();
        d.data["spec"] = json!({"replicas": 1, "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec(&name)}});
    })
    .await?;
    if api.get_opt(&deploy_name).await?.is_none() {
        return Err(Error::Waiting(format!(
            "deployment {deploy_name} to be stored"
        )));
    }
    let pods_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &pods());
    let selector = labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",");
    // kube-controller-manager's Deployment and ReplicaSet controllers (the
    // test server's, `kube_test_server` `workload`, `replicaset`) make the
    // pod, or report its refusal on the ReplicaSet and the Deployment.
    let running = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .any(|p| p.metadata.deletion_timestamp.is_none());
    if running {
        return Ok(());
    }
    Err(Error::Waiting(format!("the gateway pod of {deploy_name}")))
}
