//! A consumer's ResourceSlice gets its Identity through the provider's
//! signature, as Liqo v1.2.0 does it: the local slice controller's CSR
//! (`localresourceslice_controller.go:120-130`, `authentication/csr.go:39-68`),
//! checked and signed by the provider's remote slice controller through
//! the CSR API (`remoteresourceslice_controller.go:183-243`,
//! `pkg/identityManager/certificateIdentityProvider.go:104-183`), copied
//! back by the crdReplicator, made an Identity by the identity creator
//! (`identitycreator_controller.go:109-122`) and a kubeconfig Secret by the
//! Identity controller; the virtual kubelet then writes to the provider as
//! that certificate's user, which is the ShadowPod's `liqo.io/creator-user`.

use base64::Engine;
use kube::api::DynamicObject;
use kube_test_server::KubeApiServer;
use liqo_model::offloading::{Cluster, Peering};
use liqo_model::{Consumer, Provider, ProviderConfig, Replicator};
use serde_json::{json, Value};

use crate::{get, namespace, wait_for, IDENTITIES, NODES, SECRETS, SLICES, TENANTS};

const CONSUMER: &str = "consumer-id";
const PROVIDER: &str = "provider-id";
const ON_CONSUMER: &str = "liqo-tenant-provider-id";
const ON_PROVIDER: &str = "liqo-tenant-consumer-id";
const PODS: (&str, &str) = ("", "pods");
const SHADOW_PODS: (&str, &str) = ("offloading.liqo.io", "shadowpods");

fn b64(value: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().unwrap_or_default())
        .unwrap()
}

/// Both clusters peered as `liqoctl peer` leaves them (tenant namespaces,
/// an `Active` Tenant carrying the consumer's public key, so the CSR's key
/// is checked), Liqo running on both and between them; the provider over
/// HTTPS, whose CSR signer signs.
async fn peered() -> (KubeApiServer, KubeApiServer, Vec<Box<dyn std::any::Any>>) {
    let consumer = KubeApiServer::start().await.unwrap();
    let provider = KubeApiServer::start_tls().await.unwrap();
    let labels =
        |peer: &str| json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": peer});
    namespace(&consumer, ON_CONSUMER, labels(PROVIDER));
    namespace(&provider, ON_PROVIDER, labels(CONSUMER));
    let provider_liqo = Provider::start(&provider, ProviderConfig::default())
        .await
        .unwrap();
    let consumer_liqo = Consumer::start_as(&consumer, CONSUMER)
        .await
        .unwrap()
        .with_identity_creator(&consumer)
        .await
        .unwrap();
    let keys = get(&consumer, SECRETS, Some("liqo"), "authentication-keys").unwrap();
    provider.create(TENANTS, json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
        "metadata": {"name": CONSUMER, "namespace": ON_PROVIDER, "labels": {"liqo.io/remote-cluster-id": CONSUMER}},
        "spec": {"clusterID": CONSUMER, "authzPolicy": "KeysExchange", "tenantCondition": "Active",
                 "publicKey": keys["data"]["publicKey"]}}))
        .unwrap();
    let replicator = Replicator::start(&consumer, CONSUMER, &provider, PROVIDER)
        .await
        .unwrap();
    let running: Vec<Box<dyn std::any::Any>> = vec![
        Box::new(provider_liqo),
        Box::new(consumer_liqo),
        Box::new(replicator),
    ];
    (consumer, provider, running)
}

/// The consumer asks for a default-class slice with a virtual node, as
/// `liqoctl create resourceslice` forges it (no consumer ID, no CSR).
fn ask(consumer: &KubeApiServer, name: &str) {
    consumer
        .create(
            SLICES,
            json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
               "metadata": {"name": name, "namespace": ON_CONSUMER,
                            "labels": {"liqo.io/replication": "true", "liqo.io/remoteID": PROVIDER,
                                       "liqo.io/remote-cluster-id": PROVIDER},
                            "annotations": {"liqo.io/create-virtual-node": "true"}},
               "spec": {"class": "default", "resources": {"cpu": "2", "memory": "4Gi"}}}),
        )
        .unwrap();
}

#[tokio::test]
async fn a_slice_gets_its_identity_through_the_providers_signature() {
    let (consumer, provider, _running) = peered().await;
    ask(&consumer, "gold");
    let identity = wait_for(
        &consumer,
        IDENTITIES,
        Some(ON_CONSUMER),
        "resourceslice-gold",
        "its kubeconfig Secret",
        |i| i["status"]["kubeconfigSecretRef"]["name"].is_string(),
    )
    .await;
    // ICC:109-122, `forge/identity.go:60-72`.
    assert_eq!(identity["spec"]["type"], "ResourceSlice");
    assert_eq!(identity["spec"]["clusterID"], PROVIDER);
    let labels = &identity["metadata"]["labels"];
    assert_eq!(labels["liqo.io/remote-cluster-id"], PROVIDER);
    assert_eq!(labels["liqo.io/resourceslice-name"], "gold");
    assert_eq!(identity["metadata"]["ownerReferences"][0]["name"], "gold");
    let params = &identity["spec"]["authParams"];
    assert_eq!(params["apiServer"], provider.url());
    assert_eq!(b64(&params["ca"]), provider.ca_pem().unwrap().into_bytes());

    // The certificate: signed by the provider's CA, for the slice's CN and
    // O (`authentication/csr.go:39-68`), on the consumer's own key.
    let crt = b64(&params["signedCRT"]);
    let (_, crt) = x509_parser::pem::parse_x509_pem(&crt).unwrap();
    let crt = crt.parse_x509().unwrap();
    let ca = provider.ca_pem().unwrap();
    let (_, ca) = x509_parser::pem::parse_x509_pem(ca.as_bytes()).unwrap();
    let ca = ca.parse_x509().unwrap();
    crt.verify_signature(Some(ca.public_key()))
        .expect("signed by the provider's CA");
    assert_eq!(crt.issuer(), ca.subject());
    let cn = liqo_model::slice::common_name("gold", CONSUMER);
    let subject = crt.subject();
    let cns: Vec<&str> = subject
        .iter_common_name()
        .map(|a| a.as_str().unwrap())
        .collect();
    let os: Vec<&str> = subject
        .iter_organization()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(cns, [cn.as_str()]);
    assert_eq!(os, [CONSUMER]);
    let keys = get(&consumer, SECRETS, Some("liqo"), "authentication-keys").unwrap();
    let public = b64(&keys["data"]["publicKey"]);
    let (_, public) = x509_parser::pem::parse_x509_pem(&public).unwrap();
    assert_eq!(crt.public_key().raw, public.contents.as_slice());
    // The provider kept it for the same CSR (CIP:195-225).
    let stored = get(
        &provider,
        SECRETS,
        Some(ON_PROVIDER),
        &liqo_model::remote_resource_slice::certificate_secret("gold"),
    )
    .unwrap();
    assert_eq!(stored["data"]["certificate"], params["signedCRT"]);

    // The kubeconfig Secret authenticates as that user, in that group.
    let secret_name = identity["status"]["kubeconfigSecretRef"]["name"]
        .as_str()
        .unwrap();
    let secret = get(&consumer, SECRETS, Some(ON_CONSUMER), secret_name).unwrap();
    let secret: DynamicObject = serde_json::from_value(secret).unwrap();
    let (user, groups) = liqo_model::reflection::certificate_user(&secret).unwrap();
    assert_eq!(
        (user.as_str(), groups),
        (cn.as_str(), vec![CONSUMER.to_string()])
    );
}

#[tokio::test]
async fn a_reflected_shadowpods_creator_is_the_slices_certificate_user() {
    let (consumer, provider, _running) = peered().await;
    provider.apply(
        NODES,
        kube_test_server::node("node-p", true, false, "8", "16Gi"),
    );
    let _origin = Cluster::start(&consumer, CONSUMER, &[]).await.unwrap();
    let _remote = Cluster::start(&provider, PROVIDER, &["node-p"])
        .await
        .unwrap();
    let _maps = Peering::start_namespaces(&consumer, CONSUMER, &provider, PROVIDER)
        .await
        .unwrap();
    ask(&consumer, "gold");
    let kubelet = liqo_model::reflection::SliceReflection::start(
        &consumer,
        CONSUMER,
        &provider,
        PROVIDER,
        "gold",
        std::time::Duration::from_secs(10),
    )
    .await
    .unwrap();
    let cn = liqo_model::slice::common_name("gold", CONSUMER);
    assert_eq!(kubelet.user, cn);
    wait_for(&consumer, NODES, None, "gold", "Ready", |n| {
        n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
    .await;
    namespace(&consumer, "app", json!({}));
    consumer.apply(
        ("offloading.liqo.io", "namespaceoffloadings"),
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
               "metadata": {"name": "offloading", "namespace": "app"},
               "spec": {"podOffloadingStrategy": "Remote"}}),
    );
    wait_for(
        &consumer,
        ("", "namespaces"),
        None,
        "app",
        "labelled for the webhook",
        |ns| ns["metadata"]["labels"]["liqo.io/scheduling-enabled"] == "true",
    )
    .await;
    // The webhook reads Namespaces from its watch cache, as Liqo's does
    // through controller-runtime's cached client (`pod_webhook.rs`): the
    // label seen on the API server above may not have reached it yet, and a
    // pod is mutated at CREATE only. A pod created before is not offloaded
    // (in Liqo too), so it is made again until the webhook has acted.
    let deadline = std::time::Instant::now() + crate::WAIT;
    loop {
        let pod = consumer
            .create(
                PODS,
                json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "web", "namespace": "app"},
                   "spec": {"containers": [{"name": "c", "image": "nginx",
                       "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}),
            )
            .unwrap();
        let mutated = pod["spec"]["tolerations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"] == liqo_model::consts::VIRTUAL_NODE_TOLERATION_KEY);
        if mutated {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pod webhook never mutated pod app/web: {pod:#}"
        );
        consumer.delete(PODS, "app/web");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let remote_ns = format!("app-{CONSUMER}");
    let shadow = wait_for(
        &provider,
        SHADOW_PODS,
        Some(&remote_ns),
        "web",
        "reflected",
        |_| true,
    )
    .await;
    // Set by the model from the Identity's certificate, and the user whose
    // Quota the ShadowPod webhook admitted it under.
    assert_eq!(shadow["metadata"]["labels"]["liqo.io/creator-user"], cn);
    let quota = get(
        &provider,
        ("offloading.liqo.io", "quotas"),
        Some(ON_PROVIDER),
        &cn,
    )
    .unwrap();
    assert_eq!(quota["spec"]["user"], cn);
}
