//! Pod Security Admission ([`kube_test_server::pod_security`]): the
//! test server's `baseline` default refuses privileged pods in a namespace
//! without labels, with the real server's message; the
//! `pod-security.kubernetes.io/*` labels Liqo puts on tenant namespaces
//! let them in; workloads are only warned about; updates that change
//! nothing the policy reads pass.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use kube_test_server::pod_security::Level;
use kube_test_server::{GroupResource, Kind, KubeApiServer};
use serde_json::{json, Value};

mod common;
use common::as_admin;

/// Liqo's labels on a tenant namespace (`namespaceManager.go:143-149`).
fn privileged_labels() -> Value {
    json!({"pod-security.kubernetes.io/audit": "privileged",
           "pod-security.kubernetes.io/enforce": "privileged",
           "pod-security.kubernetes.io/warn": "privileged"})
}

/// A pod like Liqo's gateway: a privileged container adding `NET_ADMIN`.
fn gateway_pod(namespace: &str) -> Value {
    json!({"metadata": {"name": "gw", "namespace": namespace}, "spec": {"containers": [
        {"name": "gateway", "image": "liqo/gateway",
         "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}},
        {"name": "geneve", "image": "liqo/geneve",
         "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]}})
}

const GATEWAY_VIOLATIONS: &str = "privileged (container \"gateway\" must not set securityContext.privileged=true), \
     non-default capabilities (containers \"gateway\", \"geneve\" must not include \"NET_ADMIN\", \"NET_RAW\" in securityContext.capabilities.add)";

async fn server() -> KubeApiServer {
    let kube = KubeApiServer::start().await.unwrap();
    kube.create(Kind::Namespace, json!({"metadata": {"name": "plain"}}))
        .unwrap();
    kube.create(
        Kind::Namespace,
        json!({"metadata": {"name": "tenant", "labels": privileged_labels()}}),
    )
    .unwrap();
    kube
}

/// POST `body` to `path`; the code, `Warning` headers and body.
async fn post(kube: &KubeApiServer, path: &str, body: Value) -> (u16, Vec<String>, Value) {
    let client = as_admin(reqwest::Client::builder(), kube).build().unwrap();
    let response = client
        .post(format!("{}{path}", kube.url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    let code = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    (code, warnings, response.json().await.unwrap())
}

#[tokio::test]
async fn a_privileged_pod_is_refused_under_the_baseline_default_with_the_real_status() {
    let kube = server().await;
    let e = kube.create(Kind::Pod, gateway_pod("plain")).unwrap_err();
    let status = e.to_status();
    assert_eq!(
        (
            &status["code"],
            &status["reason"],
            &status["details"]["kind"]
        ),
        (&json!(403), &json!("Forbidden"), &json!("pods"))
    );
    assert_eq!(
        status["message"],
        format!("pods \"gw\" is forbidden: violates PodSecurity \"baseline:latest\": {GATEWAY_VIOLATIONS}")
    );
    assert!(kube.objects(Kind::Pod).is_empty());
}

#[tokio::test]
async fn liqo_tenant_labels_let_the_privileged_pod_in_without_a_warning() {
    let kube = server().await;
    let (code, warnings, _) = post(
        &kube,
        "/api/v1/namespaces/tenant/pods",
        gateway_pod("tenant"),
    )
    .await;
    assert_eq!((code, warnings), (201, Vec::<String>::new()));
}

#[tokio::test]
async fn enforce_privileged_alone_admits_with_the_default_warn_level_warning() {
    let kube = server().await;
    kube.create(
        Kind::Namespace,
        json!({"metadata": {"name": "loose", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}),
    )
    .unwrap();
    let (code, warnings, _) =
        post(&kube, "/api/v1/namespaces/loose/pods", gateway_pod("loose")).await;
    assert_eq!(code, 201);
    let expected = format!("would violate PodSecurity \"baseline:latest\": {GATEWAY_VIOLATIONS}");
    assert_eq!(
        warnings,
        vec![format!(
            "299 - {}",
            serde_json::to_string(&expected).unwrap()
        )]
    );
}

#[tokio::test]
async fn a_pinned_version_is_named_in_the_refusal() {
    let kube = server().await;
    kube.create(
        Kind::Namespace,
        json!({"metadata": {"name": "pinned", "labels": {
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/enforce-version": "v1.31"}}}),
    )
    .unwrap();
    let pod = json!({"metadata": {"name": "h", "namespace": "pinned"},
        "spec": {"hostNetwork": true, "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
                 "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 80}]}]}});
    let e = kube.create(Kind::Pod, pod).unwrap_err();
    assert_eq!(
        e.message,
        "pods \"h\" is forbidden: violates PodSecurity \"baseline:v1.31\": host namespaces (hostNetwork), \
         hostPort (container \"c\" uses hostPort 80), hostPath volumes (volume \"root\")"
    );
}

#[tokio::test]
async fn the_default_is_a_setting_and_privileged_admits_everything() {
    let kube = server().await;
    kube.set_pod_security_default(Level::Privileged);
    kube.create(Kind::Pod, gateway_pod("plain")).unwrap();
}

#[tokio::test]
async fn a_deployment_with_a_privileged_template_is_only_warned_about() {
    let kube = server().await;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "gw", "namespace": "plain"},
        "spec": {"selector": {"matchLabels": {"app": "gw"}},
                 "template": {"metadata": {"labels": {"app": "gw"}}, "spec": gateway_pod("plain")["spec"]}}});
    let (code, warnings, _) = post(
        &kube,
        "/apis/apps/v1/namespaces/plain/deployments",
        deployment,
    )
    .await;
    assert_eq!(code, 201);
    let expected = format!("would violate PodSecurity \"baseline:latest\": {GATEWAY_VIOLATIONS}");
    assert_eq!(
        warnings,
        vec![format!(
            "299 - {}",
            serde_json::to_string(&expected).unwrap()
        )]
    );
    assert_eq!(
        kube.objects(GroupResource::new("apps", "deployments"))
            .len(),
        1
    );
}

#[tokio::test]
async fn only_updates_that_change_what_the_policy_reads_are_checked() {
    let kube = server().await;
    kube.set_pod_security_default(Level::Privileged);
    let mut pod = kube.create(Kind::Pod, gateway_pod("plain")).unwrap();
    kube.set_pod_security_default(Level::Baseline);
    // A label and the status: the pod stays, as on a real cluster whose
    // namespace's level was raised under it.
    pod["metadata"]["labels"] = json!({"seen": "yes"});
    let mut pod = kube.replace(Kind::Pod, pod, false).unwrap();
    pod["status"] = json!({"phase": "Running"});
    let mut pod = kube.replace(Kind::Pod, pod, true).unwrap();
    // A new image is checked, and refused.
    pod["spec"]["containers"][0]["image"] = json!("liqo/gateway:v2");
    let e = kube.replace(Kind::Pod, pod, false).unwrap_err();
    assert_eq!(e.code, 403, "{}", e.message);
}

#[tokio::test]
async fn a_namespace_with_an_unparsable_level_is_invalid() {
    let kube = server().await;
    let e = kube
        .create(
            Kind::Namespace,
            json!({"metadata": {"name": "odd", "labels": {"pod-security.kubernetes.io/enforce": "strict"}}}),
        )
        .unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "Namespace \"odd\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: \
         Invalid value: \"strict\": must be one of privileged, baseline, restricted"
    );
}

#[tokio::test]
async fn a_plain_pod_passes_the_baseline_default() {
    let kube = server().await;
    let pod = json!({"metadata": {"name": "p", "namespace": "plain"},
        "spec": {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "c", "image": "i",
                   "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}]}});
    let (code, warnings, _) = post(&kube, "/api/v1/namespaces/plain/pods", pod).await;
    assert_eq!((code, warnings), (201, Vec::<String>::new()));
}
