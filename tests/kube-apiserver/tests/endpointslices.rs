//! discovery.k8s.io/v1 EndpointSlices through kube-rs, as a real server
//! and kube-controller-manager serve them: in discovery; refused with the
//! real field paths and messages of
//! `pkg/apis/discovery/validation/validation.go` (`src/endpoint_slice.rs`),
//! nothing stored; and kept for a Service with a selector by the
//! EndpointSlice controller (`src/endpointslice_controller.rs`, from
//! `staging/src/k8s.io/endpointslice/`): a placeholder while no pod is
//! ready, the ready pods' addresses and ports once they are, followed as
//! pods come and go, gone with the Service.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use kube_test_server::{node, Kind, KubeApiServer};
use serde_json::{json, Value};

mod kube_rs;
use kube_rs::{admin, eventually, status, until};

const NS: &str = "team";

async fn world() -> (KubeApiServer, Client) {
    let kube = KubeApiServer::start().await.unwrap();
    let client = admin(&kube).await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    (kube, client)
}

/// The slices of Service `db` the controller manages.
async fn slices(client: &Client) -> Vec<Value> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let selector =
        "kubernetes.io/service-name=db,endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io";
    api.list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect()
}

/// A running pod of `db` on `n1` at `ip`, Ready or not, as a kubelet
/// reports it.
fn db_pod(name: &str, ip: &str, ready: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": NS, "labels": {"app": "db"}},
           "spec": {"nodeName": "n1", "containers": [{"name": "db", "image": "postgres",
                    "ports": [{"name": "sql", "containerPort": 5433}]}]},
           "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                      "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

#[tokio::test]
async fn discovery_lists_endpointslices() {
    let (_kube, client) = world().await;
    let list = client
        .list_api_group_resources("discovery.k8s.io/v1")
        .await
        .unwrap();
    let eps = list
        .resources
        .iter()
        .find(|r| r.name == "endpointslices")
        .unwrap();
    assert_eq!(eps.kind, "EndpointSlice");
    assert!(eps.namespaced);
    assert!(eps.verbs.contains(&"create".to_string()));
}

/// `ValidateEndpointSliceCreate` / `…Update`: each refusal a 422 naming the
/// field, nothing stored; the address type immutable.
#[tokio::test]
async fn a_slice_a_real_server_refuses_is_refused_and_not_stored() {
    let (_kube, client) = world().await;
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let slice = |name: &str, address_type: &str, addresses: Value| -> EndpointSlice {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS},
            "addressType": address_type,
            "endpoints": [{"addresses": addresses}],
            "ports": [{"name": "sql", "port": 5432}]}))
        .unwrap()
    };
    let refused = |e: kube::Error| {
        let s = status(e);
        assert_eq!(s["code"], 422, "{s}");
        s["message"].as_str().unwrap().to_string()
    };
    let e = api
        .create(
            &PostParams::default(),
            &slice("a", "IPv5", json!(["10.0.0.1"])),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refused(e),
        r#"EndpointSlice.discovery.k8s.io "a" is invalid: addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6""#
    );
    let e = api
        .create(
            &PostParams::default(),
            &slice("b", "IPv4", json!(["127.0.0.1"])),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refused(e),
        r#"EndpointSlice.discovery.k8s.io "b" is invalid: endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)"#
    );
    assert!(api.get_opt("a").await.unwrap().is_none());
    assert!(api.get_opt("b").await.unwrap().is_none());
    // A valid one is stored, its port's protocol defaulted; its address
    // type cannot change.
    let made = api
        .create(
            &PostParams::default(),
            &slice("c", "IPv4", json!(["10.0.0.1"])),
        )
        .await
        .unwrap();
    assert_eq!(
        made.ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );
    let mut changed = serde_json::to_value(&made).unwrap();
    changed["addressType"] = json!("IPv6");
    changed["endpoints"][0]["addresses"] = json!(["fd00::1"]);
    let changed: EndpointSlice = serde_json::from_value(changed).unwrap();
    let e = api
        .replace("c", &PostParams::default(), &changed)
        .await
        .unwrap_err();
    assert_eq!(
        refused(e),
        r#"EndpointSlice.discovery.k8s.io "c" is invalid: addressType: Invalid value: "IPv6": field is immutable"#
    );
}

/// The EndpointSlice controller: a placeholder, then the ready pod's
/// address and its named port, the pod that is not ready listed not
/// ready, a deleted pod dropped, and the slice gone with the Service.
#[tokio::test]
async fn a_service_with_a_selector_gets_the_slice_of_its_pods() {
    let (kube, client) = world().await;
    kube.apply(Kind::Node, node("n1", true, false, "4", "8Gi"));
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": NS, "labels": {"tier": "data"}},
        "spec": {"selector": {"app": "db"},
                 "ports": [{"name": "sql", "port": 5432, "targetPort": "sql"}]}}))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    // No pod yet: one placeholder slice, no endpoints, no ports.
    let placeholder = until("the placeholder slice", || async {
        slices(&client).await.into_iter().next()
    })
    .await;
    assert_eq!(placeholder["addressType"], "IPv4");
    assert_eq!(placeholder["endpoints"], json!([]));
    assert!(placeholder["metadata"]["name"]
        .as_str()
        .unwrap()
        .starts_with("db-"));
    assert_eq!(
        placeholder["metadata"]["labels"],
        json!({"tier": "data", "kubernetes.io/service-name": "db",
               "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"})
    );
    let owner = &placeholder["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], owner["controller"].as_bool()),
        (&json!("Service"), Some(true))
    );

    // A ready pod and one not ready (and one another Service's).
    kube.apply(Kind::Pod, db_pod("db-0", "10.244.0.2", true));
    kube.apply(Kind::Pod, db_pod("db-1", "10.244.0.3", false));
    let mut web = db_pod("web-0", "10.244.0.4", true);
    web["metadata"]["labels"] = json!({"app": "web"});
    kube.apply(Kind::Pod, web);
    let slice = until("the pods listed", || async {
        slices(&client)
            .await
            .into_iter()
            .find(|s| s["endpoints"].as_array().is_some_and(|e| e.len() == 2))
    })
    .await;
    assert_eq!(slices(&client).await.len(), 1, "the placeholder reused");
    assert_eq!(
        slice["ports"],
        json!([{"name": "sql", "port": 5433, "protocol": "TCP"}])
    );
    let endpoint = |i: usize| slice["endpoints"][i].clone();
    assert_eq!(endpoint(0)["addresses"], json!(["10.244.0.2"]));
    assert_eq!(
        endpoint(0)["conditions"],
        json!({"ready": true, "serving": true, "terminating": false})
    );
    assert_eq!(endpoint(0)["nodeName"], "n1");
    assert_eq!(endpoint(0)["targetRef"]["name"], "db-0");
    assert_eq!(endpoint(1)["addresses"], json!(["10.244.0.3"]));
    assert_eq!(endpoint(1)["conditions"]["ready"], false);

    // A pod gone is dropped.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.delete("db-1", &DeleteParams::default()).await.unwrap();
    eventually("db-1 dropped", || async {
        slices(&client).await.first().is_some_and(|s| {
            s["endpoints"].as_array().map(Vec::len) == Some(1)
                && s["endpoints"][0]["targetRef"]["name"] == "db-0"
        })
    })
    .await;

    // The slices go with the Service (owner references).
    services
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the slices collected", || async {
        slices(&client).await.is_empty()
    })
    .await;
}
