//! What real clients (kubectl, Helm) need beyond the controllers' calls,
//! over raw HTTP: a CustomResourceDefinition created through the API is
//! established and then served (discovery, OpenAPI v3, its paths), and a
//! typed client's protobuf body is read.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

mod common;
use common::{answer, as_admin};

/// A client as the tests' own user.
fn client(kube: &KubeApiServer) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10));
    as_admin(builder, kube).build().unwrap()
}

async fn get(kube: &KubeApiServer, path: &str) -> (u16, Value) {
    answer(client(kube).get(format!("{}{path}", kube.url()))).await
}

async fn post(kube: &KubeApiServer, path: &str, body: Value) -> (u16, Value) {
    answer(
        client(kube)
            .post(format!("{}{path}", kube.url()))
            .header("content-type", "application/json")
            .body(body.to_string()),
    )
    .await
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.io"},
        "spec": {"group": "example.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "properties": {"spec": {"type": "object",
                        "properties": {"size": {"type": "integer"}}}}}}}]},
    })
}

#[tokio::test]
async fn a_crd_created_through_the_api_is_established_then_served() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let (code, _) = get(&kube, "/apis/example.io/v1").await;
    assert_eq!(code, 404);
    let (code, created) = post(&kube, CRDS, widget_crd()).await;
    assert_eq!(code, 201, "{created}");

    // The naming and establishing controllers' pass.
    let deadline = Instant::now() + Duration::from_secs(5);
    let crd = loop {
        let (_, crd) = get(&kube, &format!("{CRDS}/widgets.example.io")).await;
        let established = crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True");
        if established {
            break crd;
        }
        assert!(Instant::now() < deadline, "not established: {crd}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let conditions = crd["status"]["conditions"].as_array().unwrap();
    let condition = |t: &str| conditions.iter().find(|c| c["type"] == t).unwrap();
    assert_eq!(condition("NamesAccepted")["reason"], "NoConflicts");
    assert_eq!(condition("NamesAccepted")["message"], "no conflicts found");
    assert_eq!(condition("Established")["reason"], "InitialNamesAccepted");
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WidgetList");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));

    // Served: discovery, the OpenAPI v3 document, its objects' schema.
    let (code, resources) = get(&kube, "/apis/example.io/v1").await;
    assert_eq!(code, 200);
    assert_eq!(resources["resources"][0]["name"], "widgets");
    let (_, root) = get(&kube, "/openapi/v3").await;
    let url = root["paths"]["apis/example.io/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, document) = get(&kube, &url).await;
    assert_eq!(code, 200);
    assert!(document["components"]["schemas"]["io.example.v1.Widget"].is_object());
    let (code, refused) = post(
        &kube,
        "/apis/example.io/v1/namespaces/default/widgets?fieldValidation=Strict",
        json!({"apiVersion": "example.io/v1", "kind": "Widget",
               "metadata": {"name": "w"}, "spec": {"size": 1, "colour": "red"}}),
    )
    .await;
    assert_eq!(code, 400, "{refused}");
    assert_eq!(
        refused["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: \
         unknown field \"spec.colour\"",
        "{refused}"
    );
}

#[tokio::test]
async fn a_protobuf_secret_is_created_as_its_json_says() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    // `k8s\0`, then runtime.Unknown{typeMeta{apiVersion "v1", kind
    // "Secret"}, raw: Secret{metadata{name "s"}, data{"k": "v"}}}, as
    // client-go's protobuf serializer writes it.
    let meta = [&[0x0a, 0x01][..], b"s"].concat();
    let entry = [&[0x0a, 0x01][..], b"k", &[0x12, 0x01], b"v"].concat();
    let secret = [
        &[0x0a, meta.len() as u8][..],
        &meta,
        &[0x12, entry.len() as u8],
        &entry,
    ]
    .concat();
    let type_meta = [&[0x0a, 0x02][..], b"v1", &[0x12, 0x06], b"Secret"].concat();
    let unknown = [
        &[0x0a, type_meta.len() as u8][..],
        &type_meta,
        &[0x12, secret.len() as u8],
        &secret,
    ]
    .concat();
    let body = [&b"k8s\x00"[..], &unknown].concat();
    let (code, created) = answer(
        client(&kube)
            .post(format!("{}/api/v1/namespaces/default/secrets", kube.url()))
            .header("content-type", "application/vnd.kubernetes.protobuf")
            .body(body),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["name"], "s");
    assert_eq!(created["data"]["k"], "dg==");
}
