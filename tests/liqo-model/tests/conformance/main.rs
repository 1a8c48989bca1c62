//! The model's conformance suite: the cases of Liqo v1.2.0's own tests
//! (`pkg/webhooks/shadowpod/webhook_test.go`, `pkg/webhooks/pod/pod_test.go`,
//! `pkg/virtualKubelet/liqoNodeProvider/nodeProvider_test.go`) and the
//! behaviours the project depends on, each against the Kubernetes API test
//! server with the controllers running on their own.
#![allow(clippy::unwrap_used)]

mod cluster_selector;
mod consumer;
mod drain;
mod endpointslices;
mod networking;
mod networking_crds;
mod offloading;
mod offloading_status;
mod pod_ips;
mod pod_webhook;
mod provider;
mod reflection;
mod replicator;
mod scheduling;
mod shadowpod;
mod slice_identity;

use std::time::{Duration, Instant};

use kube_test_server::{GroupResource, KubeApiServer};
use serde_json::{json, Value};

pub const SLICES: (&str, &str) = ("authentication.liqo.io", "resourceslices");
pub const TENANTS: (&str, &str) = ("authentication.liqo.io", "tenants");
pub const QUOTAS: (&str, &str) = ("offloading.liqo.io", "quotas");
pub const IDENTITIES: (&str, &str) = ("authentication.liqo.io", "identities");
pub const VIRTUAL_NODES: (&str, &str) = ("offloading.liqo.io", "virtualnodes");
pub const FOREIGN_CLUSTERS: (&str, &str) = ("core.liqo.io", "foreignclusters");
pub const NAMESPACES: (&str, &str) = ("", "namespaces");
pub const SECRETS: (&str, &str) = ("", "secrets");
pub const NODES: (&str, &str) = ("", "nodes");
pub const CONFIGURATIONS: (&str, &str) = ("networking.liqo.io", "configurations");
pub const GATEWAY_SERVERS: (&str, &str) = ("networking.liqo.io", "gatewayservers");
pub const GATEWAY_CLIENTS: (&str, &str) = ("networking.liqo.io", "gatewayclients");
pub const PUBLIC_KEYS: (&str, &str) = ("networking.liqo.io", "publickeies");
pub const CONNECTIONS: (&str, &str) = ("networking.liqo.io", "connections");

/// How long [`wait_for`] waits: one full step of the backoff the model's
/// watchers retry with after a watch error (kube-runtime's
/// `watcher::DefaultBackoff`: 800 ms doubling to at most 30 s, the
/// `default_backoff()` of `liqo_model::runner`), plus a second. Under load
/// a watch that fails once must not fail the test while the model waits
/// to watch again.
pub const WAIT: Duration = Duration::from_secs(31);

/// Poll `kube` until the object satisfies `ready`, or fail after [`WAIT`]
/// naming what was awaited and what was last seen.
pub async fn wait_for(
    kube: &KubeApiServer,
    resource: (&str, &str),
    namespace: Option<&str>,
    name: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let seen = kube.get(GroupResource::new(resource.0, resource.1), namespace, name);
        if let Some(obj) = seen.as_ref().filter(|o| ready(o)) {
            return obj.clone();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {name}: {what}; last seen {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `spec.csr` as Liqo's local slice controller writes it for slice
/// `name` of `consumer` (`authentication/csr.go:39-68`): a PKCS#10 request
/// for CN `<name>-<hash>`, O `<consumer>`, from a new key, base64 in JSON.
pub fn csr(name: &str, consumer: &str) -> String {
    let keys = liqo_model::cluster_keys::generate().unwrap();
    liqo_model::local_resource_slice::csr(&keys.private_pem, name, consumer).unwrap()
}

pub fn namespace(kube: &KubeApiServer, name: &str, labels: Value) {
    kube.apply(
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": name, "labels": labels}}),
    );
}

/// A new cluster peered with `remote`: its tenant namespace `tenant_ns`,
/// labelled as `liqoctl peer` leaves it; over HTTPS, so its CSR signer
/// signs what Liqo's identity provider asks (`kube-apiserver` `csr_signer`).
pub async fn peered_with(remote: &str, tenant_ns: &str) -> KubeApiServer {
    let kube = KubeApiServer::start_tls().await.unwrap();
    namespace(
        &kube,
        tenant_ns,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": remote}),
    );
    kube
}

/// The status of condition `kind` of a slice.
pub fn condition(slice: &Value, kind: &str) -> Option<String> {
    slice["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
}

/// Write a slice's status as a class controller (provider) or the
/// replicator (consumer) does: both conditions, `resources` as given
/// (`null` drops it).
pub fn write_status(
    kube: &KubeApiServer,
    namespace: &str,
    name: &str,
    resources_condition: &str,
    resources: Value,
) {
    let condition = |kind: &str, status: &str| {
        json!({"type": kind, "status": status, "reason": "x", "message": "x",
               "lastTransitionTime": "2026-11-26T00:00:00Z"})
    };
    let conditions = json!([
        condition("Authentication", "Accepted"),
        condition("Resources", resources_condition)
    ]);
    let status = json!({"status": {"conditions": conditions, "resources": resources}});
    kube.merge_patch(SLICES, Some(namespace), name, status, true)
        .unwrap();
}

/// Wait until condition `kind` of slice `name` is `status`.
pub async fn slice_condition(
    kube: &KubeApiServer,
    namespace: &str,
    name: &str,
    kind: &str,
    status: &str,
) -> Value {
    let what = format!("{kind} {status}");
    wait_for(kube, SLICES, Some(namespace), name, &what, |s| {
        condition(s, kind).as_deref() == Some(status)
    })
    .await
}

/// Cluster `origin` with Liqo's offloading and the NamespaceMap half of a
/// peering with a new cluster `p2` (its VirtualNode `liqo-p2`), and an
/// empty namespace `app` on the origin, not offloaded yet.
pub async fn origin_and_p2() -> (
    KubeApiServer,
    KubeApiServer,
    liqo_model::offloading::Cluster,
    liqo_model::offloading::Peering,
) {
    use liqo_model::offloading::{Cluster, Peering};
    let origin = KubeApiServer::start().await.unwrap();
    let p2 = KubeApiServer::start().await.unwrap();
    let cluster = Cluster::start(&origin, "origin", &[]).await.unwrap();
    let peering = Peering::start_namespaces(&origin, "origin", &p2, "p2")
        .await
        .unwrap();
    origin.apply(
        VIRTUAL_NODES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
               "metadata": {"name": "liqo-p2", "namespace": "liqo-tenant-p2"},
               "spec": {"clusterID": "p2", "createNode": true, "disableNetworkCheck": true,
                        "resourceQuota": {"hard": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}}),
    );
    namespace(&origin, "app", json!({}));
    (origin, p2, cluster, peering)
}

/// The object as the server has it now.
pub fn get(
    kube: &KubeApiServer,
    resource: (&str, &str),
    namespace: Option<&str>,
    name: &str,
) -> Option<Value> {
    kube.get(GroupResource::new(resource.0, resource.1), namespace, name)
}
