//! The controller in process, with kube-rs, against the test API server
//! (Liqo v1.2.0 CRDs) and a memory source: decisions written through the
//! status subresource, re-evaluation on a chain notification, a 409 answered
//! by re-reading, and no write when nothing changes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use kube::{Client, Config};
use kube_test_server::{Fault, KubeApiServer};
use quantity::ResourceList;
use resource_reader::MemorySource;
use resource_reader::ResourceReader;
use serde_json::{json, Value};
use slice_controller::config::{self, ControllerArgs};
use tokio_util::sync::CancellationToken;

const SLICES: (&str, &str) = ("authentication.liqo.io", "resourceslices");
const NS: &str = "liqo-tenant-c1";

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    controller: ControllerArgs,
}

fn args(extra: &[&str]) -> ControllerArgs {
    let mut all = vec![
        "test",
        "--class",
        "gold",
        "--leader-elect",
        "false",
        "--http-listen",
        "127.0.0.1:0",
    ];
    all.extend_from_slice(extra);
    Cli::try_parse_from(all).expect("flags").controller
}

fn cpu(n: &str) -> ResourceList {
    ResourceList::from_strings([("cpu", n)]).expect("quantity")
}

fn setup(kube: &KubeApiServer) {
    kube.apply(
        ("", "namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    );
    kube.apply(
        ("authentication.liqo.io", "tenants"),
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
               "metadata": {"name": "c1", "namespace": NS, "labels": {"liqo.io/remote-cluster-id": "c1"}},
               "spec": {"clusterID": "c1", "tenantCondition": "Active"}}),
    );
}

fn slice(kube: &KubeApiServer, name: &str, cpu: &str) {
    kube.apply(
        SLICES,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
               "metadata": {"name": name, "namespace": NS,
                            "labels": {"liqo.io/replicated": "true", "liqo.io/originID": "c1"}},
               "spec": {"class": "gold", "consumerClusterID": "c1", "resources": {"cpu": cpu}},
               "status": {"conditions": [{"type": "Authentication", "status": "Accepted",
                   "reason": "ResourceSliceAuthenticationAccepted", "message": "ResourceSlice authentication accepted",
                   "lastTransitionTime": "2026-11-20T08:00:00Z"}],
                   "authParams": {"ca": "Q0E=", "signedCRT": "Q1JU", "apiServer": "https://p:6443"}}}),
    );
}

fn condition(kube: &KubeApiServer, name: &str) -> Option<Value> {
    let slice = kube.get(SLICES, Some(NS), name)?;
    slice["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Resources")
        .cloned()
}

async fn wait_status(kube: &KubeApiServer, name: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(c) = condition(kube, name) {
            if c["status"] == status {
                return c;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{name} never {status}: {:?}",
            kube.get(SLICES, Some(NS), name)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn status_writes(kube: &KubeApiServer) -> usize {
    kube.audit()
        .iter()
        .filter(|r| {
            r.resource
                .as_ref()
                .is_some_and(|a| a.subresource.as_deref() == Some("status"))
        })
        .count()
}

#[tokio::test]
async fn decides_rereads_on_conflict_and_writes_only_changes() {
    let kube = KubeApiServer::start().await.expect("server");
    setup(&kube);
    slice(&kube, "a", "3");
    slice(&kube, "b", "3");
    // As the tests' own user (in system:masters): a client without
    // credentials is `system:anonymous`, whom the server refuses.
    let mut config = Config::new(kube.url().parse().expect("url"));
    config.auth_info.token = Some(kube.admin_token().to_string().into());
    let client = Client::try_from(config).expect("client");
    let source = Arc::new(MemorySource::new(cpu("4")));
    let reader: Arc<dyn ResourceReader> = source.clone();
    let shutdown = CancellationToken::new();
    // A failed reconcile waits a minute before its retry, so a rewrite
    // well within that can only be the re-read on conflict.
    let task = tokio::spawn({
        let (client, shutdown) = (client.clone(), shutdown.clone());
        async move { config::run(client, reader, &args(&["--error-retry", "60s"]), shutdown).await }
    });

    let a = wait_status(&kube, "a", "Accepted").await;
    // The chain names only cpu: memory and pods are the class's defaults.
    assert_eq!(
        a["message"],
        "granted as requested: cpu 3; with the class's defaults for a usable node: memory 8Gi, pods 110"
    );
    let b = wait_status(&kube, "b", "Denied").await;
    assert_eq!(
        b["message"],
        "does not fit: cpu: requested 3, remaining 1 (offered 4, held by other accepted slices 3), short by 2"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let writes = status_writes(&kube);
    assert_eq!(writes, 2);

    // The next status write meets a 409; the controller re-reads and
    // writes again.
    kube.inject(
        Fault::new(409)
            .verb("update")
            .resource("resourceslices")
            .subresource("status"),
    );
    let changed = Instant::now();
    source.set(cpu("6"));
    wait_status(&kube, "b", "Accepted").await;
    // Re-read and rewritten at once, not after the retry of a failed
    // reconcile (60 s here).
    assert!(
        changed.elapsed() < Duration::from_secs(30),
        "{:?}",
        changed.elapsed()
    );
    assert!(kube.audit().iter().any(|r| r.code == 409));
    let after = kube.get(SLICES, Some(NS), "b").expect("b");
    assert_eq!(
        after["status"]["resources"],
        json!({"cpu": "3", "memory": "8Gi", "pods": "110"})
    );
    assert_eq!(
        after["status"]["authParams"],
        json!({"ca": "Q0E=", "signedCRT": "Q1JU", "apiServer": "https://p:6443"})
    );

    // A notification that changes nothing writes nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let writes = status_writes(&kube);
    source.set(cpu("7"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(status_writes(&kube), writes);

    shutdown.cancel();
    task.await.expect("join").expect("run");
}
