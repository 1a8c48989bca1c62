//! Plays Liqo between two Kubernetes API test servers — a consumer
//! cluster and a provider cluster — for the purchase-controller tests, doing
//! what Liqo's own controllers would do, and nothing more:
//!
//! - v1.2.0: marks a peering established (the consumer's `core.liqo.io`
//!   ForeignCluster with role `Provider`, authentication enabled and the
//!   control-plane Identity `Ready`; the tenant namespaces on both sides and
//!   the provider's Tenant), replicates each consumer ResourceSlice labelled
//!   for replication into the provider's tenant namespace with Liqo's labels
//!   (`liqo.io/originID`, `liqo.io/replicated=true`), sets
//!   `Authentication=Accepted` there, and copies the provider's status (the
//!   grant) back to the consumer's slice;
//! - v0.10.3: marks an out-of-band ForeignCluster's peering established
//!   (`AuthenticationStatus` and `OutgoingPeering` `Established`);
//! - both: reports each NamespaceOffloading `Ready` for its current
//!   generation, as Liqo does once the remote namespaces exist.
//!
//! Every object goes through the server's validated paths (create,
//! replace, status), so Liqo's CRD schemas check it.

use std::sync::Arc;
use std::time::Duration;

use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

pub const SLICES: (&str, &str) = ("authentication.liqo.io", "resourceslices");
pub const TENANTS: (&str, &str) = ("authentication.liqo.io", "tenants");
pub const FOREIGN_CLUSTERS_V1: (&str, &str) = ("core.liqo.io", "foreignclusters");
pub const FOREIGN_CLUSTERS_V0: (&str, &str) = ("discovery.liqo.io", "foreignclusters");
pub const NAMESPACES: (&str, &str) = ("", "namespaces");
pub const OFFLOADINGS: (&str, &str) = ("offloading.liqo.io", "namespaceoffloadings");

/// When Liqo "accepted" what it accepted.
const SINCE: &str = "2026-11-20T08:00:00Z";

pub fn tenant_namespace(peer: &str) -> String {
    format!("liqo-tenant-{peer}")
}

/// Create a namespace (a test fixture, as an operator would).
pub fn namespace(kube: &KubeApiServer, name: &str, labels: Value) {
    kube.apply(
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}),
    );
}

/// v1: what `liqoctl peer` leaves once done, on both clusters: the
/// consumer's ForeignCluster naming the provider as one, the tenant
/// namespaces, and the provider's Tenant for the consumer.
pub fn peer_v1(
    consumer: &KubeApiServer,
    consumer_id: &str,
    provider: &KubeApiServer,
    provider_id: &str,
) {
    namespace(
        consumer,
        &tenant_namespace(provider_id),
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": provider_id}),
    );
    namespace(
        provider,
        &tenant_namespace(consumer_id),
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": consumer_id}),
    );
    provider
        .create(
            TENANTS,
            json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
               "metadata": {"name": consumer_id, "namespace": tenant_namespace(consumer_id),
                            "labels": {"liqo.io/remote-cluster-id": consumer_id}},
               "spec": {"clusterID": consumer_id, "authzPolicy": "KeysExchange", "tenantCondition": "Active"}}),
        )
        .expect("Tenant");
    let fc = consumer
        .create(
            FOREIGN_CLUSTERS_V1,
            json!({"apiVersion": "core.liqo.io/v1beta1", "kind": "ForeignCluster",
               "metadata": {"name": provider_id, "labels": {"liqo.io/remote-cluster-id": provider_id}},
               "spec": {"clusterID": provider_id}}),
        )
        .expect("ForeignCluster");
    let mut fc = fc;
    fc["status"] = json!({
        "role": "Provider",
        "modules": {
            "networking": {"enabled": false},
            "authentication": {"enabled": true, "conditions": [
                {"type": "AuthIdentityControlPlaneStatus", "status": "Ready",
                 "reason": "IdentityReady", "message": "The identity is ready", "lastTransitionTime": SINCE}]},
            "offloading": {"enabled": true}},
        "apiServerUrl": "https://provider.example:6443",
        "tenantNamespace": {"local": tenant_namespace(provider_id), "remote": tenant_namespace(consumer_id)},
    });
    consumer
        .replace(FOREIGN_CLUSTERS_V1, fc, true)
        .expect("ForeignCluster status");
}

/// v0: Liqo established the out-of-band peering of ForeignCluster `name`.
pub fn establish_v0(consumer: &KubeApiServer, name: &str) {
    let mut fc = consumer
        .get(FOREIGN_CLUSTERS_V0, None, name)
        .expect("the ForeignCluster exists");
    let condition = |kind: &str| {
        json!({"type": kind, "status": "Established", "lastTransitionTime": SINCE,
               "reason": "Established", "message": "established"})
    };
    fc["status"] = json!({"peeringConditions": [
        condition("AuthenticationStatus"), condition("OutgoingPeering"), condition("NetworkStatus")]});
    consumer
        .replace(FOREIGN_CLUSTERS_V0, fc, true)
        .expect("ForeignCluster status");
}

/// One pass of Liqo's slice replication; true when it changed something.
pub fn replicate_once(
    consumer: &KubeApiServer,
    consumer_id: &str,
    provider: &KubeApiServer,
    provider_id: &str,
) -> bool {
    let local_ns = tenant_namespace(provider_id);
    let remote_ns = tenant_namespace(consumer_id);
    let mut changed = false;
    let wanted: Vec<Value> = consumer
        .objects(SLICES)
        .into_iter()
        .filter(|s| {
            s["metadata"]["namespace"] == local_ns.as_str()
                && s["metadata"]["labels"]["liqo.io/replication"] == "true"
                && s["metadata"]["labels"]["liqo.io/remoteID"] == provider_id
        })
        .collect();
    for slice in &wanted {
        let name = slice["metadata"]["name"].as_str().unwrap_or_default();
        // Liqo's local slice controller fills a missing consumerClusterID
        // with the local cluster's ID before anything else
        // (`pkg/liqo-controller-manager/authentication/localresourceslice-controller/localresourceslice_controller.go`
        // lines 83-85, v1.2.0).
        if slice["spec"]["consumerClusterID"].is_null() {
            let mut filled = slice.clone();
            filled["spec"]["consumerClusterID"] = json!(consumer_id);
            let _ = consumer.replace(SLICES, filled, false);
            changed = true;
            continue;
        }
        let replica = match provider.get(SLICES, Some(&remote_ns), name) {
            Some(replica) => replica,
            None => {
                let mut labels = slice["metadata"]["labels"].clone();
                if let Some(map) = labels.as_object_mut() {
                    map.remove("liqo.io/replication");
                    map.remove("liqo.io/remoteID");
                    map.insert("liqo.io/originID".into(), json!(consumer_id));
                    map.insert("liqo.io/replicated".into(), json!("true"));
                    map.insert("liqo.io/remote-cluster-id".into(), json!(consumer_id));
                }
                let created = provider
                    .create(
                        SLICES,
                        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
                               "metadata": {"name": name, "namespace": remote_ns, "labels": labels},
                               "spec": slice["spec"]}),
                    )
                    .expect("replicated slice");
                changed = true;
                created
            }
        };
        // Liqo authenticates the replica (and keeps whatever else is there).
        let conditions = replica["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !conditions.iter().any(|c| c["type"] == "Authentication") {
            let mut replica = replica.clone();
            let mut list = conditions.clone();
            list.push(json!({"type": "Authentication", "status": "Accepted",
                "reason": "ResourceSliceAuthenticationAccepted",
                "message": "ResourceSlice authentication accepted", "lastTransitionTime": SINCE}));
            replica["status"]["conditions"] = json!(list);
            replica["status"]["authParams"] = json!({"apiServer": "https://provider.example:6443",
                "ca": "Y2E=", "signedCRT": "Y3J0"});
            if provider.replace(SLICES, replica, true).is_ok() {
                changed = true;
            }
            continue;
        }
        // The provider's status goes back to the consumer's slice.
        if slice["status"] != replica["status"] {
            let mut back = slice.clone();
            back["status"] = replica["status"].clone();
            if consumer.replace(SLICES, back, true).is_ok() {
                changed = true;
            }
        }
    }
    // A consumer slice that is gone takes its replica with it.
    for replica in provider.objects(SLICES) {
        if replica["metadata"]["namespace"] != remote_ns.as_str() {
            continue;
        }
        let name = replica["metadata"]["name"].as_str().unwrap_or_default();
        if !wanted.iter().any(|s| s["metadata"]["name"] == name) {
            provider.delete(SLICES, &format!("{remote_ns}/{name}"));
            changed = true;
        }
    }
    changed
}

/// One pass of Liqo's namespace offloading on the consumer: every
/// NamespaceOffloading not yet `Ready` for its generation becomes so, its
/// remote namespace named as `DefaultName` names it.
pub fn offload_once(consumer: &KubeApiServer, consumer_id: &str) -> bool {
    let mut changed = false;
    for mut offloading in consumer.objects(OFFLOADINGS) {
        let generation = offloading["metadata"]["generation"].clone();
        if offloading["status"]["offloadingPhase"] == "Ready"
            && offloading["status"]["observedGeneration"] == generation
        {
            continue;
        }
        let namespace = offloading["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let remote = match offloading["spec"]["namespaceMappingStrategy"].as_str() {
            Some("EnforceSameName") => namespace.clone(),
            _ => format!("{namespace}-{consumer_id}"),
        };
        offloading["status"] = json!({"offloadingPhase": "Ready", "observedGeneration": generation,
                                      "remoteNamespaceName": remote});
        if consumer.replace(OFFLOADINGS, offloading, true).is_ok() {
            changed = true;
        }
    }
    changed
}

/// Run [`offload_once`] every 50 ms until the returned handle is dropped.
pub fn offload(
    runtime: &tokio::runtime::Handle,
    consumer: Arc<KubeApiServer>,
    consumer_id: &str,
) -> Replicator {
    let consumer_id = consumer_id.to_string();
    Replicator(runtime.spawn(async move {
        loop {
            offload_once(&consumer, &consumer_id);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }))
}

/// Run [`replicate_once`] and [`offload_once`] every 50 ms until the
/// returned handle is dropped.
pub fn replicate(
    runtime: &tokio::runtime::Handle,
    consumer: Arc<KubeApiServer>,
    consumer_id: &str,
    provider: Arc<KubeApiServer>,
    provider_id: &str,
) -> Replicator {
    let (consumer_id, provider_id) = (consumer_id.to_string(), provider_id.to_string());
    let task = runtime.spawn(async move {
        loop {
            replicate_once(&consumer, &consumer_id, &provider, &provider_id);
            offload_once(&consumer, &consumer_id);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    Replicator(task)
}

/// Liqo's part, running; stops when dropped.
pub struct Replicator(tokio::task::JoinHandle<()>);

impl Drop for Replicator {
    fn drop(&mut self) {
        self.0.abort();
    }
}
