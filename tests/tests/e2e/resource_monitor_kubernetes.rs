//! The kubernetes source of the real `resource-monitor` binary against a
//! fake API server speaking the list/watch protocol: nodes becoming
//! NotReady, pods starting and finishing, shadow pods, virtual nodes, and a
//! peer's offloaded pods added back for that peer only.

use std::time::Duration;

use anyhow::Result;
use e2e::fake_kube::{node, pod, FakeKube, Kind};
use e2e::grpc::{resources, ReaderClient, Shape};
use e2e::{free_port, Spawn};
use serde_json::json;

/// Generous: this bounds a test, it does not measure anything.
const NOTIFIED: Duration = Duration::from_secs(5);

#[tokio::test]
async fn kubernetes_source_follows_nodes_and_pods() -> Result<()> {
    let kube = FakeKube::start().await?;
    kube.apply(Kind::Node, node("n1", true, false, "4", "8Gi"));
    kube.apply(Kind::Node, node("n2", true, false, "2", "4Gi"));
    kube.apply(Kind::Node, node("liqo-peer", true, true, "100", "1Ti"));
    kube.apply(
        Kind::Pod,
        pod("web", "n1", "Running", json!({}), "1", "1Gi"),
    );
    kube.apply(
        Kind::Pod,
        pod("queued", "", "Pending", json!({}), "8", "8Gi"),
    );
    kube.apply(
        Kind::Pod,
        pod(
            "shadow",
            "liqo-peer",
            "Running",
            json!({"liqo.io/shadowPod": "true"}),
            "2",
            "2Gi",
        ),
    );

    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    kube.write_kubeconfig(&kubeconfig)?;
    let port = free_port();
    let _monitor = Spawn::new("resource-monitor")
        .args(["--source", "kubernetes", "--kubeconfig"])
        .arg(&kubeconfig)
        .args([
            "--liqo-api",
            "v0.6",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .start_listening(port)?;
    let client = ReaderClient::connect(port, Shape::B).await?;

    // Ready physical nodes (n1 + n2) minus the running, non-shadow pod.
    let all = resources(&[("cpu", "5"), ("memory", "11Gi"), ("pods", "220")]);
    let first = client
        .read_until("peer-a", Duration::from_secs(15), |r| !r.is_empty())
        .await?;
    assert_eq!(first, all);

    let mut notes = client.subscribe().await?;
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    notes.drain(Duration::from_millis(300)).await;

    // n2 becomes NotReady: its allocatable no longer counts.
    kube.apply(Kind::Node, node("n2", false, false, "2", "4Gi"));
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    assert_eq!(
        client.read("peer-a").await?,
        resources(&[("cpu", "3"), ("memory", "7Gi"), ("pods", "110")])
    );

    // A pod is scheduled (Pending: nothing changes), then starts Running.
    kube.apply(
        Kind::Pod,
        pod("job", "n1", "Pending", json!({}), "500m", "512Mi"),
    );
    kube.apply(
        Kind::Pod,
        pod("job", "n1", "Running", json!({}), "500m", "512Mi"),
    );
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    assert_eq!(
        client.read("peer-a").await?,
        resources(&[("cpu", "2500m"), ("memory", "6656Mi"), ("pods", "110")])
    );
    // ...and finishes.
    kube.apply(
        Kind::Pod,
        pod("job", "n1", "Succeeded", json!({}), "500m", "512Mi"),
    );
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    assert_eq!(
        client.read("peer-a").await?,
        resources(&[("cpu", "3"), ("memory", "7Gi"), ("pods", "110")])
    );

    // peer-a offloads a pod here: everyone else sees less, peer-a does not.
    let offloaded = json!({"virtualkubelet.liqo.io/origin": "peer-a"});
    kube.apply(
        Kind::Pod,
        pod("from-a", "n1", "Running", offloaded, "1", "1Gi"),
    );
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    assert_eq!(
        client.read("peer-b").await?,
        resources(&[("cpu", "2"), ("memory", "6Gi"), ("pods", "110")])
    );
    assert_eq!(
        client.read("peer-a").await?,
        resources(&[("cpu", "3"), ("memory", "7Gi"), ("pods", "110")])
    );

    // A node heartbeat that changes nothing counted is not a change.
    kube.apply(Kind::Node, node("n1", true, false, "4", "8Gi"));
    assert!(notes.next_within(Duration::from_millis(500)).await.is_err());

    // The offloaded pod is deleted; n2 comes back.
    kube.delete(Kind::Pod, "default/from-a");
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    kube.apply(Kind::Node, node("n2", true, false, "2", "4Gi"));
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    assert_eq!(client.read("peer-b").await?, all);

    // RemoveCluster is accepted by the source.
    client.remove_cluster("peer-a").await?;

    // Watched, not polled: one list per kind, then watch streams.
    assert_eq!(kube.lists(Kind::Node), 1, "nodes were re-listed");
    assert_eq!(kube.lists(Kind::Pod), 1, "pods were re-listed");
    assert!(kube.watches(Kind::Node) >= 1 && kube.watches(Kind::Pod) >= 1);
    Ok(())
}

/// Reads fail with UNAVAILABLE until the source has listed the cluster, and
/// a bad kubeconfig stops the binary before it binds its port.
#[tokio::test]
async fn unreachable_api_server_and_bad_kubeconfig() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // An API server address nothing listens on.
    let dead = free_port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{dead}\n\
             users:\n- name: u\n  user: {{}}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n"
        ),
    )?;
    let port = free_port();
    let _monitor = Spawn::new("resource-monitor")
        .args(["--source", "kubernetes", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .start_listening(port)?;
    let client = ReaderClient::connect(port, Shape::A).await?;
    let status = client.read("c1").await.expect_err("not listed yet");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");

    let bad = dir.path().join("bad-kubeconfig");
    std::fs::write(&bad, "this: [is not a kubeconfig\n")?;
    let port = free_port();
    let out = Spawn::new("resource-monitor")
        .args(["--source", "kubernetes", "--kubeconfig"])
        .arg(&bad)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad-kubeconfig"), "{stderr}");
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "port was bound"
    );
    Ok(())
}
