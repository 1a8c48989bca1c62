//! What the purchase-controller tests still need of Liqo that the model of
//! Liqo v1.2's controllers (`liqo-model`, run by [`crate::liqo_support`])
//! does not do for them, written as objects and named as such:
//!
//! - **Liqo v0.10**: an out-of-band ForeignCluster's peering marked
//!   established ([`establish_v0`], [`establish_v0_incoming`]), and taken
//!   down when its outgoing peering is disabled ([`unpeer_v0`]); the model
//!   is of v1.2 only.
//! - **Liqo v0.10's NamespaceOffloading status** ([`offload`]): each
//!   NamespaceOffloading reported `Ready` for its generation, as Liqo does
//!   once the remote namespaces exist. On v1 the model writes it
//!   (`liqo_model::offloading`, run by [`crate::liqo_support::Offloading`]).
//!
//! Liqo v1.2's slice Identities are the model's (its identity creator,
//! from the provider's signature): no stand-in writes them any more.
//!
//! Every object goes through the server's validated paths, so Liqo's CRD
//! schemas check it.

use std::sync::Arc;
use std::time::Duration;

use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

pub const FOREIGN_CLUSTERS_V0: (&str, &str) = ("discovery.liqo.io", "foreignclusters");
pub const OFFLOADINGS: (&str, &str) = ("offloading.liqo.io", "namespaceoffloadings");

/// When Liqo "established" what it established.
const SINCE: &str = "2026-11-20T08:00:00Z";

/// Liqo v0.10 established the out-of-band peering of ForeignCluster `name`
/// (`AuthenticationStatus`, `OutgoingPeering` and `NetworkStatus`
/// `Established`, as `liqoctl peer out-of-band` waits for them).
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

/// The provider peered with this cluster in its turn (v0.10's
/// `IncomingPeering` `Established`), or (`false`) ended that peering
/// (`None`).
pub fn establish_v0_incoming(consumer: &KubeApiServer, name: &str, established: bool) {
    let mut fc = consumer
        .get(FOREIGN_CLUSTERS_V0, None, name)
        .expect("the ForeignCluster exists");
    let status = if established { "Established" } else { "None" };
    let mut conditions: Vec<Value> = fc["status"]["peeringConditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conditions.retain(|c| c["type"] != "IncomingPeering");
    conditions.push(
        json!({"type": "IncomingPeering", "status": status, "lastTransitionTime": SINCE,
                           "reason": status, "message": status}),
    );
    fc["status"]["peeringConditions"] = json!(conditions);
    consumer
        .replace(FOREIGN_CLUSTERS_V0, fc, true)
        .expect("ForeignCluster status");
}

/// One pass of v0.10.3's ForeignCluster operator over ForeignClusters
/// whose `outgoingPeeringEnabled` is `No`
/// (`pkg/liqo-controller-manager/foreign-cluster-operator/foreign-cluster-controller.go`,
/// `unpeerNamespaced` :361-407): an outgoing peering still up goes
/// `Disconnecting` while its ResourceRequest is withdrawn (:381-394), and
/// `None` on the next pass, once the request is deleted (:395-405). The
/// other conditions are left as they are.
fn unpeer_v0_once(consumer: &KubeApiServer) {
    for mut fc in consumer.objects(FOREIGN_CLUSTERS_V0) {
        if fc["spec"]["outgoingPeeringEnabled"] != "No" {
            continue;
        }
        let Some(conditions) = fc["status"]["peeringConditions"].as_array_mut() else {
            continue;
        };
        let Some(outgoing) = conditions
            .iter_mut()
            .find(|c| c["type"] == "OutgoingPeering")
        else {
            continue;
        };
        let next = match outgoing["status"].as_str() {
            Some("None") => continue,
            Some("Disconnecting") => "None",
            _ => "Disconnecting",
        };
        outgoing["status"] = json!(next);
        outgoing["reason"] = json!(next);
        // A conflict with a concurrent write is tried again next pass.
        let _ = consumer.replace(FOREIGN_CLUSTERS_V0, fc, true);
    }
}

/// Run [`unpeer_v0_once`] every 50 ms until the returned handle is
/// dropped.
pub fn unpeer_v0(runtime: &tokio::runtime::Handle, consumer: Arc<KubeApiServer>) -> Running {
    Running(runtime.spawn(async move {
        loop {
            unpeer_v0_once(&consumer);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }))
}

/// One pass: every NamespaceOffloading not yet `Ready` for its generation
/// becomes so, its remote namespace named as its mapping strategy names it.
fn offload_once(consumer: &KubeApiServer, consumer_id: &str) {
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
        // A conflict with a concurrent write is tried again next pass.
        let _ = consumer.replace(OFFLOADINGS, offloading, true);
    }
}

/// Run [`offload_once`] every 50 ms until the returned handle is dropped.
pub fn offload(
    runtime: &tokio::runtime::Handle,
    consumer: Arc<KubeApiServer>,
    consumer_id: &str,
) -> Running {
    let consumer_id = consumer_id.to_string();
    Running(runtime.spawn(async move {
        loop {
            offload_once(&consumer, &consumer_id);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }))
}

/// The stand-in, running; stops when dropped.
pub struct Running(tokio::task::JoinHandle<()>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}
