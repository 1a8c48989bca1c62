//! The crdReplicator between a consumer and a provider, and the whole
//! chain: a consumer's default-class slice granted on the provider becomes
//! a Ready virtual node on the consumer.

use kube_test_server::KubeApiServer;
use liqo_model::{Consumer, Provider, ProviderConfig, Replicator};
use serde_json::{json, Value};

use super::*;

const CONSUMER: &str = "consumer-1";
const PROVIDER: &str = "provider-1";
/// The consumer's tenant namespace for the provider, and the provider's for the consumer.
const ON_CONSUMER: &str = "liqo-tenant-provider-1";
const ON_PROVIDER: &str = "liqo-tenant-consumer-1";

async fn peered() -> (KubeApiServer, KubeApiServer, Replicator) {
    let consumer = KubeApiServer::start().await.unwrap();
    let provider = KubeApiServer::start_tls().await.unwrap();
    namespace(
        &consumer,
        ON_CONSUMER,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": PROVIDER}),
    );
    namespace(
        &provider,
        ON_PROVIDER,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": CONSUMER}),
    );
    let replicator = Replicator::start(&consumer, CONSUMER, &provider, PROVIDER)
        .await
        .unwrap();
    (consumer, provider, replicator)
}

/// The consumer's slice, as `liqoctl create resourceslice` writes it
/// (with what the local slice controller adds: consumer ID and CSR).
fn consumer_slice(kube: &KubeApiServer, name: &str, class: &str, extra_labels: Value) {
    let mut labels = json!({"liqo.io/replication": "true", "liqo.io/remoteID": PROVIDER,
                            "liqo.io/remote-cluster-id": PROVIDER});
    for (k, v) in extra_labels.as_object().unwrap() {
        labels[k] = v.clone();
    }
    kube.create(
        SLICES,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": name, "namespace": ON_CONSUMER, "labels": labels,
                     "annotations": {"liqo.io/create-virtual-node": "true"}},
        "spec": {"class": class, "consumerClusterID": CONSUMER, "providerClusterID": PROVIDER,
                 "csr": csr(name, CONSUMER), "resources": {"cpu": "2", "memory": "4Gi"}}}),
    )
    .unwrap();
}

/// A class-`gold` slice on the consumer, once replicated to the provider.
async fn replicated_gold(consumer: &KubeApiServer, provider: &KubeApiServer) -> Value {
    consumer_slice(consumer, "gold", "gold", json!({}));
    wait_for(
        provider,
        SLICES,
        Some(ON_PROVIDER),
        "gold",
        "the replica",
        |_| true,
    )
    .await
}

#[tokio::test]
async fn a_replica_carries_liqos_labels_and_the_annotations_of_its_creation_only() {
    let (consumer, provider, _replicator) = peered().await;
    consumer_slice(
        &consumer,
        "gold",
        "gold",
        json!({"liqo.io/ownership": "local"}),
    );
    let replica = wait_for(
        &provider,
        SLICES,
        Some(ON_PROVIDER),
        "gold",
        "the replica",
        |_| true,
    )
    .await;
    let labels = &replica["metadata"]["labels"];
    assert_eq!(labels["liqo.io/replicated"], "true");
    assert_eq!(labels["liqo.io/originID"], CONSUMER);
    assert_eq!(labels["liqo.io/remote-cluster-id"], CONSUMER);
    assert_eq!(labels["liqo.io/replication"], "false");
    assert_eq!(labels["liqo.io/ownership"], Value::Null);
    assert_eq!(
        replica["metadata"]["annotations"]["liqo.io/create-virtual-node"],
        "true"
    );
    let local = get(&consumer, SLICES, Some(ON_CONSUMER), "gold").unwrap();
    assert_eq!(replica["spec"], local["spec"]);
    assert_eq!(
        local["metadata"]["finalizers"],
        json!(["crdreplicator.liqo.io/resource"])
    );
    // A later annotation does not travel; the spec change made with it does.
    let patch = json!({"metadata": {"annotations": {"liqo.io/cordon": "true"}},
                       "spec": {"resources": {"cpu": "3", "memory": "4Gi"}}});
    consumer
        .merge_patch(SLICES, Some(ON_CONSUMER), "gold", patch, false)
        .unwrap();
    let replica = wait_for(
        &provider,
        SLICES,
        Some(ON_PROVIDER),
        "gold",
        "the new spec",
        |r| r["spec"]["resources"]["cpu"] == "3",
    )
    .await;
    assert_eq!(
        replica["metadata"]["annotations"].get("liqo.io/cordon"),
        None
    );
}

#[tokio::test]
async fn the_replicas_status_comes_back_and_a_deleted_slice_takes_its_replica() {
    let (consumer, provider, _replicator) = peered().await;
    replicated_gold(&consumer, &provider).await;
    write_status(
        &provider,
        ON_PROVIDER,
        "gold",
        "Accepted",
        json!({"cpu": "1", "memory": "2Gi", "pods": "10"}),
    );
    let local = slice_condition(&consumer, ON_CONSUMER, "gold", "Resources", "Accepted").await;
    assert_eq!(
        local["status"]["resources"],
        json!({"cpu": "1", "memory": "2Gi", "pods": "10"})
    );
    consumer
        .delete_object(
            GroupResource::new(SLICES.0, SLICES.1),
            Some(ON_CONSUMER),
            "gold",
        )
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while get(&consumer, SLICES, Some(ON_CONSUMER), "gold").is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the local slice kept its finalizer"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        get(&provider, SLICES, Some(ON_PROVIDER), "gold").is_none(),
        "the replica outlived its slice"
    );
}

#[tokio::test]
async fn a_default_class_slice_becomes_a_ready_virtual_node_with_the_default_grant() {
    let (consumer, provider, _replicator) = peered().await;
    provider.create(TENANTS, json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
        "metadata": {"name": CONSUMER, "namespace": ON_PROVIDER, "labels": {"liqo.io/remote-cluster-id": CONSUMER}},
        "spec": {"clusterID": CONSUMER, "authzPolicy": "TolerateNoHandshake", "tenantCondition": "Active"}}))
        .unwrap();
    let _provider_liqo = Provider::start(&provider, ProviderConfig::default())
        .await
        .unwrap();
    let _consumer_liqo = Consumer::start(&consumer).await.unwrap();
    consumer.create(FOREIGN_CLUSTERS, json!({"apiVersion": "core.liqo.io/v1beta1", "kind": "ForeignCluster",
        "metadata": {"name": PROVIDER, "labels": {"liqo.io/remote-cluster-id": PROVIDER}}, "spec": {"clusterID": PROVIDER}}))
        .unwrap();
    // The network is up: without it the node is never Ready.
    let network = json!({"enabled": true, "conditions": [{"type": "NetworkConnectionStatus", "status": "Established"}]});
    let modules = json!({"authentication": {"enabled": true}, "offloading": {"enabled": true}, "networking": network});
    let status = json!({"status": {"observedGeneration": 1, "modules": modules}});
    consumer
        .merge_patch(FOREIGN_CLUSTERS, None, PROVIDER, status, true)
        .unwrap();
    consumer.create(SECRETS, json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "kubeconfig-plain", "namespace": ON_CONSUMER}, "data": {"kubeconfig": "e30="}}))
        .unwrap();
    consumer.create(IDENTITIES, json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Identity",
        "metadata": {"name": "plain-identity", "namespace": ON_CONSUMER,
                     "labels": {"liqo.io/remote-cluster-id": PROVIDER, "liqo.io/resourceslice-name": "plain"}},
        "spec": {"clusterID": PROVIDER, "type": "ResourceSlice", "namespace": ON_PROVIDER}}))
        .unwrap();
    let status = json!({"status": {"kubeconfigSecretRef": {"name": "kubeconfig-plain"}}});
    consumer
        .merge_patch(
            IDENTITIES,
            Some(ON_CONSUMER),
            "plain-identity",
            status,
            true,
        )
        .unwrap();
    consumer_slice(&consumer, "plain", "default", json!({}));
    let grant = json!({"cpu": "2", "memory": "4Gi", "pods": "110", "ephemeral-storage": "20Gi"});
    let node = wait_for(&consumer, NODES, None, "plain", "Ready", |n| {
        n["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    })
    .await;
    assert_eq!(node["status"]["allocatable"], grant);
}

/// Issue 30's bypass, as Liqo v1.2.0 has it: the consumer's control-plane
/// user may write its replica's status on the provider (the chart's
/// `liqo-remote-controlplane` role grants `resourceslices/status`), so
/// nothing in stock Liqo stops a consumer granting itself resources.
#[tokio::test]
async fn the_consumers_control_plane_may_write_its_replicas_status_on_the_provider() {
    use kube::api::{Api, DynamicObject, PostParams};
    let (consumer, provider, _replicator) = peered().await;
    replicated_gold(&consumer, &provider).await;
    let as_consumer = liqo_model::identity::client_in_groups(&provider, CONSUMER, &["liqo.io"])
        .await
        .unwrap();
    let slices: Api<DynamicObject> = Api::namespaced_with(
        as_consumer,
        ON_PROVIDER,
        &liqo_model::consts::resource_slices(),
    );
    let mut replica = slices.get("gold").await.unwrap();
    replica.data["status"] = json!({"resources": {"cpu": "1000"}});
    slices
        .replace_status("gold", &PostParams::default(), &replica)
        .await
        .unwrap();
    let now = get(&provider, SLICES, Some(ON_PROVIDER), "gold").unwrap();
    assert_eq!(now["status"]["resources"]["cpu"], "1000");
    // Outside its tenant namespace the same user may not.
    namespace(&provider, "elsewhere", json!({}));
    let elsewhere: Api<DynamicObject> = Api::namespaced_with(
        liqo_model::identity::client_in_groups(&provider, CONSUMER, &["liqo.io"])
            .await
            .unwrap(),
        "elsewhere",
        &liqo_model::consts::resource_slices(),
    );
    let refused = elsewhere.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(refused, kube::Error::Api(ref e) if e.code == 403),
        "{refused:?}"
    );
}
