//! Liqo v1.2.0's networking module on two clusters (`liqo_model::networking`):
//! the objects `liqoctl peer` makes (`pkg/liqoctl/network/handler.go:107-268`)
//! on each API server, and what Liqo's controllers and gateways answer —
//! the remapped CIDRs, the server's endpoint, the keys' Secrets, the
//! Connections — with the two sides joined only by what each server holds;
//! then the virtual node Ready only once the Connection is Connected
//! (`pkg/virtualKubelet/liqoNodeProvider/utils.go:99-133`).

use kube_test_server::KubeApiServer;
use liqo_model::networking::Options;
use liqo_model::{Consumer, Provider, ProviderConfig};
use serde_json::{json, Value};

use crate::{
    get, namespace, wait_for, CONFIGURATIONS, CONNECTIONS, FOREIGN_CLUSTERS, GATEWAY_CLIENTS,
    GATEWAY_SERVERS, NODES, PUBLIC_KEYS, SECRETS, VIRTUAL_NODES,
};

const PROVIDER: &str = "net-provider";
const CONSUMER: &str = "net-consumer";
/// Each cluster's tenant namespace for the other.
const ON_PROVIDER: &str = "liqo-tenant-net-consumer";
const ON_CONSUMER: &str = "liqo-tenant-net-provider";

struct World {
    provider: KubeApiServer,
    consumer: KubeApiServer,
    _liqo: (Provider, Consumer),
}

/// A tenant namespace's labels for `peer`; with Liqo's Pod Security
/// labels (`namespaceManager.go:143-149`) when `liqo_made`, as Liqo makes
/// it; without them as someone else might have.
fn tenant_labels(peer: &str, liqo_made: bool) -> Value {
    let mut labels = json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": peer});
    if liqo_made {
        for mode in ["audit", "enforce", "warn"] {
            labels[format!("pod-security.kubernetes.io/{mode}")] = json!("privileged");
        }
    }
    labels
}

async fn world() -> World {
    world_with(true).await
}

/// Both clusters at the test server's default Pod Security level,
/// `baseline`, their tenant namespaces labelled as Liqo labels them if
/// `liqo_made`.
async fn world_with(liqo_made: bool) -> World {
    let provider = KubeApiServer::start().await.unwrap();
    let consumer = KubeApiServer::start().await.unwrap();
    namespace(&provider, ON_PROVIDER, tenant_labels(CONSUMER, liqo_made));
    namespace(&consumer, ON_CONSUMER, tenant_labels(PROVIDER, liqo_made));
    let p = Provider::start(&provider, ProviderConfig::default())
        .await
        .unwrap()
        .with_networking(&provider, Options::default())
        .await
        .unwrap();
    let c = Consumer::start_as(&consumer, CONSUMER)
        .await
        .unwrap()
        .with_networking(&consumer, Options::default())
        .await
        .unwrap();
    World {
        provider,
        consumer,
        _liqo: (p, c),
    }
}

fn object(kind: &str, ns: &str, peer: &str, spec: Value) -> Value {
    json!({"apiVersion": "networking.liqo.io/v1beta1", "kind": kind,
           "metadata": {"name": peer, "namespace": ns,
                        "labels": {"liqo.io/remote-cluster-id": peer,
                                   "networking.liqo.io/gateway-resource": "true"}},
           "spec": spec})
}

/// `forge/configuration.go:73-110`: the peer's CIDRs (both clusters at
/// the defaults, so they clash).
fn configuration(kube: &KubeApiServer, ns: &str, peer: &str) {
    let spec =
        json!({"remote": {"cidr": {"pod": ["10.244.0.0/16"], "external": ["10.70.0.0/16"]}}});
    kube.create(CONFIGURATIONS, object("Configuration", ns, peer, spec))
        .unwrap();
}

/// The gateway's public key, from the Secret its `status.secretRef` names.
async fn gateway_key(kube: &KubeApiServer, resource: (&str, &str), ns: &str, name: &str) -> String {
    let gw = wait_for(kube, resource, Some(ns), name, "status.secretRef", |g| {
        g["status"]["secretRef"]["name"].is_string()
    })
    .await;
    let secret_ref = &gw["status"]["secretRef"];
    assert_eq!(secret_ref["namespace"], ns);
    let secret = get(
        kube,
        SECRETS,
        Some(ns),
        secret_ref["name"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(
        secret["metadata"]["labels"]["networking.liqo.io/gateway-resource"],
        "true"
    );
    assert!(secret["data"]["privateKey"].is_string());
    secret["data"]["publicKey"].as_str().unwrap().to_string()
}

fn public_key(kube: &KubeApiServer, ns: &str, peer: &str, key: &str) {
    let pk = object("PublicKey", ns, peer, json!({"publicKey": key}));
    kube.apply(PUBLIC_KEYS, pk);
}

async fn connection_is(kube: &KubeApiServer, ns: &str, name: &str, value: &str) -> Value {
    wait_for(kube, CONNECTIONS, Some(ns), name, value, |c| {
        c["status"]["value"] == value
    })
    .await
}

/// The provider's GatewayServer and the consumer's GatewayClient pointing
/// at its endpoint as the provider's server reports it; each side's key
/// (`<side>` public key strings).
async fn gateways(w: &World) -> (String, String) {
    let server = object(
        "GatewayServer",
        ON_PROVIDER,
        CONSUMER,
        json!({"endpoint": {"port": 51840, "serviceType": "LoadBalancer"}, "mtu": 1340}),
    );
    w.provider.create(GATEWAY_SERVERS, server).unwrap();
    let gws = wait_for(
        &w.provider,
        GATEWAY_SERVERS,
        Some(ON_PROVIDER),
        CONSUMER,
        "an endpoint",
        |g| g["status"]["endpoint"]["addresses"][0].is_string(),
    )
    .await;
    let endpoint = gws["status"]["endpoint"].clone();
    assert_eq!(endpoint["port"], 51840);
    assert_eq!(endpoint["protocol"], "UDP");
    let client = object(
        "GatewayClient",
        ON_CONSUMER,
        PROVIDER,
        json!({"endpoint": endpoint, "mtu": 1340}),
    );
    w.consumer.create(GATEWAY_CLIENTS, client).unwrap();
    let server_key = gateway_key(&w.provider, GATEWAY_SERVERS, ON_PROVIDER, CONSUMER).await;
    let client_key = gateway_key(&w.consumer, GATEWAY_CLIENTS, ON_CONSUMER, PROVIDER).await;
    assert_ne!(server_key, client_key);
    (server_key, client_key)
}

#[tokio::test]
async fn a_clashing_remote_network_is_remapped_and_the_configuration_configured() {
    let w = world().await;
    configuration(&w.consumer, ON_CONSUMER, PROVIDER);
    let conf = wait_for(
        &w.consumer,
        CONFIGURATIONS,
        Some(ON_CONSUMER),
        PROVIDER,
        "status.remote",
        |c| c["status"]["remote"]["cidr"]["pod"][0].is_string(),
    )
    .await;
    // `spec.local` filled from the cluster's own networks (CC:112-134).
    assert_eq!(
        conf["spec"]["local"]["cidr"]["pod"],
        json!(["10.244.0.0/16"])
    );
    // Both remote networks clash with the local ones: remapped to free
    // networks of the same size.
    assert_eq!(
        conf["status"]["remote"]["cidr"],
        json!({"pod": ["10.0.0.0/16"], "external": ["10.1.0.0/16"]})
    );
    let condition = &conf["status"]["conditions"][0];
    assert_eq!(condition["type"], "NetworkCIDRsConfigured");
    assert_eq!(condition["status"], "True");
}

#[tokio::test]
async fn gateways_connect_through_what_each_api_server_holds_and_tear_down_on_deletion() {
    let w = world().await;
    let (server_key, client_key) = gateways(&w).await;
    // A wrong key on the consumer: each gateway makes its Connection,
    // which stays Connecting.
    public_key(&w.provider, ON_PROVIDER, CONSUMER, &client_key);
    public_key(&w.consumer, ON_CONSUMER, PROVIDER, &client_key);
    let conn = connection_is(&w.provider, ON_PROVIDER, "gw-net-consumer", "Connecting").await;
    assert_eq!(conn["spec"]["type"], "Server");
    assert_eq!(
        conn["metadata"]["labels"]["liqo.io/remote-cluster-id"],
        CONSUMER
    );
    let conn = connection_is(&w.consumer, ON_CONSUMER, "gw-net-provider", "Connecting").await;
    assert_eq!(conn["spec"]["type"], "Client");
    // The right key: both Connected.
    public_key(&w.consumer, ON_CONSUMER, PROVIDER, &server_key);
    connection_is(&w.provider, ON_PROVIDER, "gw-net-consumer", "Connected").await;
    connection_is(&w.consumer, ON_CONSUMER, "gw-net-provider", "Connected").await;
    // The server goes: its Connection with it, the client's in error.
    w.provider
        .delete_object(GATEWAY_SERVERS, Some(ON_PROVIDER), CONSUMER)
        .unwrap();
    wait_for_gone(&w.provider, CONNECTIONS, ON_PROVIDER, "gw-net-consumer").await;
    connection_is(&w.consumer, ON_CONSUMER, "gw-net-provider", "Error").await;
    w.consumer
        .delete_object(GATEWAY_CLIENTS, Some(ON_CONSUMER), PROVIDER)
        .unwrap();
    wait_for_gone(&w.consumer, CONNECTIONS, ON_CONSUMER, "gw-net-provider").await;
}

async fn wait_for_gone(kube: &KubeApiServer, resource: (&str, &str), ns: &str, name: &str) {
    for _ in 0..500 {
        if get(kube, resource, Some(ns), name).is_none() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{ns}/{name} still there");
}

/// `liqoNodeProvider/utils.go:99-133`: with networking on for the peer,
/// the node is Ready only once the ForeignCluster's connection is
/// Established.
#[tokio::test]
async fn the_virtual_node_is_ready_only_once_the_connection_is_connected() {
    let w = world().await;
    configuration(&w.consumer, ON_CONSUMER, PROVIDER);
    let (server_key, client_key) = gateways(&w).await;
    w.consumer.apply(
        VIRTUAL_NODES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
               "metadata": {"name": "net", "namespace": ON_CONSUMER,
                            "labels": {"liqo.io/remote-cluster-id": PROVIDER}},
               "spec": {"clusterID": PROVIDER,
                        "resourceQuota": {"hard": {"cpu": "2", "memory": "3Gi", "pods": "10"}}}}),
    );
    let fc = wait_for(
        &w.consumer,
        FOREIGN_CLUSTERS,
        None,
        PROVIDER,
        "networking enabled",
        |fc| fc["status"]["modules"]["networking"]["enabled"] == true,
    )
    .await;
    let node = wait_for(
        &w.consumer,
        NODES,
        None,
        "net",
        "a NetworkUnavailable condition",
        |n| condition(n, "NetworkUnavailable").is_some(),
    )
    .await;
    assert_eq!(
        condition(&node, "Ready").as_deref(),
        Some("False"),
        "{fc:#}\n{node:#}"
    );
    public_key(&w.provider, ON_PROVIDER, CONSUMER, &client_key);
    public_key(&w.consumer, ON_CONSUMER, PROVIDER, &server_key);
    let fc = wait_for(
        &w.consumer,
        FOREIGN_CLUSTERS,
        None,
        PROVIDER,
        "Established",
        |fc| {
            fc["status"]["modules"]["networking"]["conditions"]
                .as_array()
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c["type"] == "NetworkConnectionStatus" && c["status"] == "Established"
                    })
                })
        },
    )
    .await;
    let node = wait_for(&w.consumer, NODES, None, "net", "Ready", |n| {
        condition(n, "Ready").as_deref() == Some("True")
    })
    .await;
    assert_eq!(
        condition(&node, "NetworkUnavailable").as_deref(),
        Some("False"),
        "{fc:#}"
    );
}

fn condition(node: &Value, kind: &str) -> Option<String> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
}

const DEPLOYMENTS: (&str, &str) = ("apps", "deployments");

/// The gateway's pod, made from Liqo's template through its Deployment
/// `gw-<gateway>`, runs in a tenant namespace Liqo labelled: privileged,
/// `NET_ADMIN` added, under the `baseline` default.
#[tokio::test]
async fn the_gateway_pod_from_liqos_template_runs_in_a_liqo_tenant_namespace() {
    let w = world().await;
    gateways(&w).await;
    let deployment = get(
        &w.provider,
        DEPLOYMENTS,
        Some(ON_PROVIDER),
        "gw-net-consumer",
    )
    .unwrap();
    assert_eq!(
        deployment["metadata"]["ownerReferences"][0]["kind"],
        "GatewayServer"
    );
    let pods = w.provider.objects(kube_test_server::Kind::Pod);
    assert_eq!(pods.len(), 1, "{pods:#?}");
    let pod = &pods[0];
    assert_eq!(pod["metadata"]["namespace"], ON_PROVIDER);
    // Through its ReplicaSet, as the Deployment controller makes it.
    let owner = &pod["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "ReplicaSet");
    let replica_set = get(
        &w.provider,
        ("apps", "replicasets"),
        Some(ON_PROVIDER),
        owner["name"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(
        replica_set["metadata"]["ownerReferences"][0]["name"],
        "gw-net-consumer"
    );
    let gateway = &pod["spec"]["containers"][0];
    assert_eq!(gateway["name"], "gateway");
    assert_eq!(gateway["securityContext"]["privileged"], true);
    assert_eq!(
        gateway["securityContext"]["capabilities"]["add"],
        json!(["NET_ADMIN", "NET_RAW"])
    );
    // The consumer's gateway too.
    assert_eq!(w.consumer.objects(kube_test_server::Kind::Pod).len(), 1);
}

/// Without Liqo's labels the `baseline` default refuses the gateway pod:
/// reported as the ReplicaSet controller reports it (the test server's),
/// and the gateway gets no keys (the pod makes them).
#[tokio::test]
async fn without_liqos_pod_security_labels_the_gateway_pod_is_refused() {
    let w = world_with(false).await;
    let server = object(
        "GatewayServer",
        ON_PROVIDER,
        CONSUMER,
        json!({"endpoint": {"port": 51840, "serviceType": "LoadBalancer"}, "mtu": 1340}),
    );
    w.provider.create(GATEWAY_SERVERS, server).unwrap();
    // On the Deployment's ReplicaSet, where the ReplicaSet controller
    // reports it (the test server's Deployment controller does not copy it
    // up, as the real one's progress check does).
    let failure = |rs: &Value| {
        rs["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "ReplicaFailure")
            .cloned()
    };
    let deadline = std::time::Instant::now() + crate::WAIT;
    let condition = loop {
        let found = w
            .provider
            .objects(kube_test_server::GroupResource::new("apps", "replicasets"))
            .into_iter()
            .filter(|rs| rs["metadata"]["ownerReferences"][0]["name"] == "gw-net-consumer")
            .find_map(|rs| failure(&rs));
        if let Some(c) = found {
            break c;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no ReplicaFailure on gw-net-consumer's ReplicaSet"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "FailedCreate");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains("is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"gateway\" must not set securityContext.privileged=true), non-default capabilities (containers \"gateway\", \"wireguard\", \"geneve\" must not include \"NET_ADMIN\", \"NET_RAW\" in securityContext.capabilities.add)"),
        "{message}"
    );
    let events = w.provider.objects(kube_test_server::Kind::Event);
    assert!(
        events.iter().any(|e| e["reason"] == "FailedCreate"
            && e["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Error creating: pods")),
        "{events:#?}"
    );
    assert!(w.provider.objects(kube_test_server::Kind::Pod).is_empty());
    assert!(get(&w.provider, SECRETS, Some(ON_PROVIDER), "gw-net-consumer").is_none());
}
