//! The kubernetes source of the real `resource-monitor` binary against the
//! test API server (`kube-test-server`) speaking the list/watch protocol:
//! nodes becoming NotReady, pods starting and finishing, shadow pods,
//! virtual nodes, and a peer's offloaded pods added back for that peer
//! only; the selectors the
//! source sends (the API server filters, as for Liqo), lists served in
//! short pages, and a watch that comes back after the history it needs was
//! compacted (410 Gone, then a re-list). The API server speaks HTTPS, as a
//! real one: the kubeconfig trusts its CA and carries a bearer token
//! (faults, credentials and bookmarks: `resource_monitor_kube_faults`).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use e2e::grpc::{resources, ReaderClient, Shape};
use e2e::{Child, Spawn};
use kube_test_server::{node, pod, Kind, KubeApiServer};
use serde_json::json;

/// How long a notification may take (the source promises no latency):
/// this bounds a test, it does not measure anything.
const NOTIFIED: Duration = e2e::EVENTUALLY;

#[tokio::test]
async fn kubernetes_source_follows_nodes_and_pods() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
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
    let (_monitor, client) = start_monitor(&kube, dir.path()).await?;

    // Ready physical nodes (n1 + n2) minus the running, non-shadow pod.
    let all = resources(&[("cpu", "5"), ("memory", "11Gi"), ("pods", "220")]);
    let first = client
        .read_until("peer-a", e2e::EVENTUALLY, |r| !r.is_empty())
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

    // A node heartbeat that changes nothing counted is not a change: no
    // notification, and the stream still open (a dead stream is silent
    // too); the deletion below must then be notified, so it was listening.
    kube.apply(Kind::Node, node("n1", true, false, "4", "8Gi"));
    notes.expect_silence(Duration::from_millis(500)).await?;

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
    // An API server address nothing listens on: a port handed out to this
    // test alone (below the kernel's ephemeral range, so no client's port).
    let dead = e2e::free_port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{dead}\n\
             users:\n- name: u\n  user: {{}}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n"
        ),
    )?;
    let (_monitor, bound) = Spawn::new("resource-monitor")
        .args(["--source", "kubernetes", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--listen", "127.0.0.1:0"])
        // Shape A waits this long for a first answer before the error.
        .args(["--first-sync-timeout", "500ms"])
        .start_announced(1)?;
    let port = bound.port(None);
    let client = ReaderClient::connect(port, Shape::A).await?;
    let status = client.read("c1").await.expect_err("not listed yet");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");

    let bad = dir.path().join("bad-kubeconfig");
    std::fs::write(&bad, "this: [is not a kubeconfig\n")?;
    // Traced: a port checked after the exit is free anyway; the trace
    // shows whether anything was ever bound.
    let (ok, stderr, binds) = e2e::process::run_tracing_binds(
        "resource-monitor",
        &[
            "--source".as_ref(),
            "kubernetes".as_ref(),
            "--kubeconfig".as_ref(),
            bad.as_os_str(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
        ],
    )?;
    assert!(!ok);
    assert!(stderr.contains("bad-kubeconfig"), "{stderr}");
    assert!(binds.is_empty(), "a port was bound: {binds:?}");
    Ok(())
}

/// Who the v0.x plugin is in the cluster.
pub(crate) const MONITOR_USER: &str = "system:serviceaccount:liqo:resource-monitor";

/// How long the source may take to catch up with a change (no setting
/// bounds it): this bounds a test, it does not measure anything.
pub(crate) const CAUGHT_UP: Duration = e2e::EVENTUALLY;

/// The real binary watching `kube`, read in shape B.
pub(crate) async fn start_monitor(
    kube: &KubeApiServer,
    dir: &Path,
) -> Result<(Child, ReaderClient)> {
    let kubeconfig = dir.join("kubeconfig");
    // As the ServiceAccount `deploy/kubernetes/resource-monitor` gives it,
    // so `deploy-check` holds every call against the ClusterRole shipped.
    kube.write_kubeconfig_as(&kubeconfig, MONITOR_USER)?;
    e2e::rbac::load_shipped(kube)?;
    start_monitor_with(&kubeconfig, None).await
}

/// The real binary with this kubeconfig, its log (stderr) into `log` if
/// given, read in shape B.
pub(crate) async fn start_monitor_with(
    kubeconfig: &Path,
    log: Option<std::fs::File>,
) -> Result<(Child, ReaderClient)> {
    let mut spawn = Spawn::new("resource-monitor");
    if let Some(log) = log {
        spawn = spawn.stderr_to(log);
    }
    let (monitor, bound) = spawn
        .args(["--source", "kubernetes", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--liqo-api", "v0.6", "--listen", "127.0.0.1:0"])
        .start_announced(1)?;
    let port = bound.port(None);
    let client = ReaderClient::connect(port, Shape::B).await?;
    Ok((monitor, client))
}

/// Poll `check` every 50 ms until it holds, failing after [`CAUGHT_UP`].
pub(crate) async fn eventually(what: &str, check: impl Fn() -> bool) -> Result<()> {
    let deadline = Instant::now() + CAUGHT_UP;
    while !check() {
        if Instant::now() > deadline {
            bail!("not within {CAUGHT_UP:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

const NODE_SELECTOR: &str = "liqo.io/type!=virtual-node";
const POD_LABELS: &str = "liqo.io/shadowPod!=true";
const POD_FIELDS: &str = "status.phase=Running";

/// Every list and watch the source made carried Liqo's selectors.
fn assert_selected(kube: &KubeApiServer) {
    let nodes = kube.requests(Kind::Node);
    assert!(nodes.iter().any(|r| r.watch) && nodes.iter().any(|r| !r.watch));
    for r in &nodes {
        assert_eq!(r.label_selector.as_deref(), Some(NODE_SELECTOR), "{r:?}");
        assert_eq!(r.field_selector, None, "{r:?}");
    }
    let pods = kube.requests(Kind::Pod);
    assert!(pods.iter().any(|r| r.watch) && pods.iter().any(|r| !r.watch));
    for r in &pods {
        assert_eq!(r.label_selector.as_deref(), Some(POD_LABELS), "{r:?}");
        assert_eq!(r.field_selector.as_deref(), Some(POD_FIELDS), "{r:?}");
    }
}

/// The API server filters out virtual nodes, shadow pods and pods not
/// running; the answer is still Liqo's, and a pod leaving the selected set
/// (it arrives as DELETED) or joining it (as ADDED) moves the answer.
#[tokio::test]
async fn kubernetes_source_selects_on_the_api_server() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    kube.apply(Kind::Node, node("n1", true, false, "4", "8Gi"));
    kube.apply(Kind::Node, node("down", false, false, "2", "4Gi"));
    kube.apply(Kind::Node, node("liqo-peer", true, true, "100", "1Ti"));
    let none = json!({});
    kube.apply(
        Kind::Pod,
        pod("web", "n1", "Running", none.clone(), "1", "1Gi"),
    );
    kube.apply(
        Kind::Pod,
        pod("queued", "n1", "Pending", none.clone(), "1", "2Gi"),
    );
    kube.apply(
        Kind::Pod,
        pod("done", "n1", "Succeeded", none.clone(), "2", "2Gi"),
    );
    kube.apply(
        Kind::Pod,
        pod("crashed", "n1", "Failed", none.clone(), "2", "2Gi"),
    );
    let shadow = json!({"liqo.io/shadowPod": "true"});
    kube.apply(
        Kind::Pod,
        pod("shadow", "liqo-peer", "Running", shadow, "2", "2Gi"),
    );
    let from_a = json!({"offloading.liqo.io/origin": "peer-a"});
    kube.apply(
        Kind::Pod,
        pod("from-a", "n1", "Running", from_a, "500m", "512Mi"),
    );

    let dir = tempfile::tempdir()?;
    let (_monitor, client) = start_monitor(&kube, dir.path()).await?;
    // n1 only, minus web and from-a; peer-a gets from-a back.
    let first = client
        .read_until("peer-b", CAUGHT_UP, |r| !r.is_empty())
        .await?;
    assert_eq!(
        first,
        resources(&[("cpu", "2500m"), ("memory", "6656Mi"), ("pods", "110")])
    );
    assert_eq!(
        client.read("peer-a").await?,
        resources(&[("cpu", "3"), ("memory", "7Gi"), ("pods", "110")])
    );
    assert_selected(&kube);

    let mut notes = client.subscribe().await?;
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    notes.drain(Duration::from_millis(300)).await;

    // web finishes: it leaves the Running pods, its requests are free.
    kube.apply(
        Kind::Pod,
        pod("web", "n1", "Succeeded", none.clone(), "1", "1Gi"),
    );
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    client
        .read_until("peer-b", CAUGHT_UP, |r| {
            *r == resources(&[("cpu", "3500m"), ("memory", "7680Mi"), ("pods", "110")])
        })
        .await?;

    // queued starts running: it joins them and takes its requests.
    kube.apply(Kind::Pod, pod("queued", "n1", "Running", none, "1", "2Gi"));
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    client
        .read_until("peer-b", CAUGHT_UP, |r| {
            *r == resources(&[("cpu", "2500m"), ("memory", "5632Mi"), ("pods", "110")])
        })
        .await?;

    // n1 is labelled a virtual node: it leaves the Node watch.
    let mut relabelled = node("n1", true, false, "4", "8Gi");
    relabelled["metadata"]["labels"]["liqo.io/type"] = json!("virtual-node");
    kube.apply(Kind::Node, relabelled);
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    client
        .read_until("peer-b", CAUGHT_UP, |r| r.is_empty())
        .await?;

    assert_selected(&kube);
    assert_eq!(kube.lists(Kind::Node), 1, "nodes were re-listed");
    assert_eq!(kube.lists(Kind::Pod), 1, "pods were re-listed");
    Ok(())
}

/// A server returning at most two items per page: the source follows every
/// page before answering.
#[tokio::test]
async fn kubernetes_source_follows_every_list_page() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    kube.set_max_page(Some(2));
    for i in 0..5 {
        kube.apply(Kind::Node, node(&format!("n{i}"), true, false, "1", "1Gi"));
    }
    kube.apply(Kind::Node, node("liqo-peer", true, true, "100", "1Ti"));
    for i in 0..7 {
        let name = format!("p{i}");
        kube.apply(
            Kind::Pod,
            pod(&name, "n0", "Running", json!({}), "100m", "128Mi"),
        );
        let done = format!("done{i}");
        kube.apply(
            Kind::Pod,
            pod(&done, "n0", "Succeeded", json!({}), "1", "1Gi"),
        );
    }

    let dir = tempfile::tempdir()?;
    let (_monitor, client) = start_monitor(&kube, dir.path()).await?;
    let first = client
        .read_until("peer-b", CAUGHT_UP, |r| !r.is_empty())
        .await?;
    // Five nodes minus seven pods: any page skipped would show.
    assert_eq!(
        first,
        resources(&[("cpu", "4300m"), ("memory", "4224Mi"), ("pods", "550")])
    );
    // Five nodes in pages of two; seven running pods in pages of two.
    assert_eq!(kube.lists(Kind::Node), 1);
    assert_eq!(kube.pages(Kind::Node), 3);
    assert_eq!(kube.lists(Kind::Pod), 1);
    assert_eq!(kube.pages(Kind::Pod), 4);
    let continued = kube
        .requests(Kind::Pod)
        .into_iter()
        .filter(|r| !r.watch && r.continue_token.is_some())
        .count();
    assert_eq!(continued, 3);
    assert_selected(&kube);

    // ...and watches from the list's resourceVersion afterwards.
    kube.apply(
        Kind::Pod,
        pod("p9", "n0", "Running", json!({}), "300m", "128Mi"),
    );
    client
        .read_until("peer-b", CAUGHT_UP, |r| {
            *r == resources(&[("cpu", "4"), ("memory", "4Gi"), ("pods", "550")])
        })
        .await?;
    Ok(())
}

/// The source loses its watches and comes back after the history it needs
/// was compacted: the API server answers 410 Gone, the source lists again,
/// and the answer holds everything that changed while it was away, without
/// a restart.
#[tokio::test]
async fn kubernetes_source_relists_after_410_gone() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    kube.apply(Kind::Node, node("n1", true, false, "4", "8Gi"));
    kube.apply(Kind::Node, node("n2", true, false, "2", "4Gi"));
    kube.apply(
        Kind::Pod,
        pod("web", "n1", "Running", json!({}), "1", "1Gi"),
    );
    kube.apply(
        Kind::Pod,
        pod("job", "n2", "Running", json!({}), "500m", "512Mi"),
    );

    let dir = tempfile::tempdir()?;
    let (mut monitor, client) = start_monitor(&kube, dir.path()).await?;
    let first = client
        .read_until("peer-b", CAUGHT_UP, |r| !r.is_empty())
        .await?;
    assert_eq!(
        first,
        resources(&[("cpu", "4500m"), ("memory", "10752Mi"), ("pods", "220")])
    );
    eventually("both kinds are watched", || {
        kube.watches(Kind::Node) >= 1 && kube.watches(Kind::Pod) >= 1
    })
    .await?;
    let mut notes = client.subscribe().await?;
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    notes.drain(Duration::from_millis(300)).await;

    // Cut the watches and keep the source out until the world has moved on
    // and its history is gone.
    kube.hold_watches(true);
    kube.end_watches();
    eventually("the source watches again (held)", || {
        kube.waiting_watches(Kind::Node) >= 1 && kube.waiting_watches(Kind::Pod) >= 1
    })
    .await?;
    kube.delete(Kind::Node, "n2");
    kube.apply(Kind::Node, node("n3", true, false, "8", "16Gi"));
    kube.apply(Kind::Node, node("liqo-peer", true, true, "100", "1Ti"));
    kube.apply(
        Kind::Pod,
        pod("web", "n1", "Succeeded", json!({}), "1", "1Gi"),
    );
    kube.delete(Kind::Pod, "default/job");
    kube.apply(
        Kind::Pod,
        pod("new", "n3", "Running", json!({}), "2", "2Gi"),
    );
    kube.compact();
    assert_eq!(kube.gone(Kind::Node) + kube.gone(Kind::Pod), 0);
    kube.hold_watches(false);

    // n1 + n3, minus new.
    let expected = resources(&[("cpu", "10"), ("memory", "22Gi"), ("pods", "220")]);
    client
        .read_until("peer-b", CAUGHT_UP, |r| *r == expected)
        .await?;
    assert_eq!(notes.next_within(NOTIFIED).await?, "");
    assert!(kube.gone(Kind::Node) >= 1, "no 410 for nodes");
    assert!(kube.gone(Kind::Pod) >= 1, "no 410 for pods");
    assert_eq!(kube.lists(Kind::Node), 2, "nodes were not re-listed once");
    assert_eq!(kube.lists(Kind::Pod), 2, "pods were not re-listed once");
    assert!(monitor.try_wait()?.is_none(), "the binary exited");
    assert_selected(&kube);

    // Watching again after the re-list.
    kube.apply(
        Kind::Pod,
        pod("late", "n1", "Running", json!({}), "1", "1Gi"),
    );
    client
        .read_until("peer-b", CAUGHT_UP, |r| {
            *r == resources(&[("cpu", "9"), ("memory", "21Gi"), ("pods", "220")])
        })
        .await?;
    Ok(())
}
