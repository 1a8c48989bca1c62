//! The `networking.liqo.io/v1beta1` CRDs (`tests/kube-apiserver/crds/liqo-v1.2.0-networking/`,
//! written from `apis/networking/v1beta1/*_types.go` of Liqo v1.2.0) refuse
//! what Liqo's refuse and default what Liqo's default.

use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::{CONFIGURATIONS, CONNECTIONS, GATEWAY_CLIENTS, GATEWAY_SERVERS, PUBLIC_KEYS};

async fn server() -> KubeApiServer {
    let kube = KubeApiServer::start().await.unwrap();
    kube.register_liqo_networking_crds().unwrap();
    crate::namespace(&kube, "t", json!({}));
    kube
}

fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "networking.liqo.io/v1beta1", "kind": kind,
           "metadata": {"name": name, "namespace": "t"}, "spec": spec})
}

/// The causes' fields of a refusal, so a test names which field was refused.
fn refused_fields(e: &kube_test_server::ApiError) -> Vec<String> {
    assert_eq!(e.code, 422, "{e}");
    e.details.as_ref().unwrap()["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `connection_types.go`: `Type` and `GatewayRef` have no `omitempty`, so
/// both are required; `Type` is `Enum=Server;Client`.
#[tokio::test]
async fn a_connection_needs_a_type_of_server_or_client_and_a_gateway_ref() {
    let kube = server().await;
    let gateway = json!({"kind": "GatewayServer", "name": "gw", "namespace": "t"});

    let e = kube
        .create(
            CONNECTIONS,
            object("Connection", "a", json!({"gatewayRef": gateway})),
        )
        .unwrap_err();
    assert_eq!(refused_fields(&e), ["spec.type"]);
    let e = kube
        .create(
            CONNECTIONS,
            object("Connection", "b", json!({"type": "Server"})),
        )
        .unwrap_err();
    assert_eq!(refused_fields(&e), ["spec.gatewayRef"]);
    let e = kube
        .create(
            CONNECTIONS,
            object(
                "Connection",
                "c",
                json!({"type": "Both", "gatewayRef": gateway}),
            ),
        )
        .unwrap_err();
    assert_eq!(refused_fields(&e), ["spec.type"]);

    kube.create(
        CONNECTIONS,
        object(
            "Connection",
            "d",
            json!({"type": "Client", "gatewayRef": gateway}),
        ),
    )
    .unwrap();
}

/// `gatewayserver_types.go`: `ServiceType` is `Enum=ClusterIP;NodePort;LoadBalancer;ExternalName`
/// with `default=ClusterIP`; `EndpointStatus.Protocol` is `Enum=TCP;UDP`
/// (the GatewayClient's `spec.endpoint` is that type too).
#[tokio::test]
async fn gateway_enums_are_refused_and_the_service_type_defaults_to_cluster_ip() {
    let kube = server().await;
    let e = kube
        .create(
            GATEWAY_SERVERS,
            object(
                "GatewayServer",
                "a",
                json!({"endpoint": {"serviceType": "Ingress"}}),
            ),
        )
        .unwrap_err();
    assert_eq!(refused_fields(&e), ["spec.endpoint.serviceType"]);

    let made = kube
        .create(
            GATEWAY_SERVERS,
            object(
                "GatewayServer",
                "b",
                json!({"endpoint": {"port": 51840}, "mtu": 1340}),
            ),
        )
        .unwrap();
    assert_eq!(made["spec"]["endpoint"]["serviceType"], "ClusterIP");

    let e = kube
        .create(
            GATEWAY_CLIENTS,
            object(
                "GatewayClient",
                "c",
                json!({"endpoint": {"addresses": ["10.0.0.1"], "port": 51840, "protocol": "SCTP"}}),
            ),
        )
        .unwrap_err();
    assert_eq!(refused_fields(&e), ["spec.endpoint.protocol"]);
}

/// `publickey_types.go`: `PublicKey []byte` is base64 on the wire
/// (`format: byte`); the plural is Liqo's `publickeies`.
#[tokio::test]
async fn a_public_key_must_be_base64() {
    let kube = server().await;
    let e = kube
        .create(
            PUBLIC_KEYS,
            object("PublicKey", "a", json!({"publicKey": "not base64!"})),
        )
        .unwrap_err();
    assert_eq!(refused_fields(&e), ["spec.publicKey"]);
    kube.create(
        PUBLIC_KEYS,
        object("PublicKey", "b", json!({"publicKey": "AAECAw=="})),
    )
    .unwrap();
}

/// `configuration_types.go`: the status is a subresource
/// (`+kubebuilder:subresource:status`), so a create keeps no status; its
/// conditions are `metav1.Condition`s (`status` one of True, False, Unknown).
#[tokio::test]
async fn a_configuration_keeps_no_status_on_create_and_refuses_a_bad_condition() {
    let kube = server().await;
    let mut conf = object(
        "Configuration",
        "a",
        json!({"remote": {"cidr": {"pod": ["10.1.0.0/16"], "external": ["10.2.0.0/16"]}}}),
    );
    conf["status"] = json!({"remote": {"cidr": {"pod": ["10.3.0.0/16"]}}});
    let made = kube.create(CONFIGURATIONS, conf).unwrap();
    assert!(
        made.get("status").is_none_or(|s| s.get("remote").is_none()),
        "{made:#}"
    );

    let bad = json!({"status": {"conditions": [{"type": "NetworkCIDRsConfigured",
        "status": "Maybe", "reason": "X", "message": "",
        "lastTransitionTime": "2026-11-26T00:00:00Z"}]}});
    let e = kube
        .merge_patch(CONFIGURATIONS, Some("t"), "a", bad, true)
        .unwrap_err();
    assert_eq!(refused_fields(&e), ["status.conditions[0].status"]);
}
