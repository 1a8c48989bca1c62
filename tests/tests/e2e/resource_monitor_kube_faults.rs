//! The kubernetes source of the real `resource-monitor` binary against an
//! API server that misbehaves as real ones do: HTTPS with a client
//! certificate, a CA it does not trust, a token nobody issued; 429 (with
//! `Retry-After`), 500 and 503 answers, connections closed mid-response
//! and mid-watch; and a quiet watch that falls behind a compaction unless
//! BOOKMARKs keep it fresh. Under each fault the source keeps answering
//! what it last knew, backs off, and converges on the present once the
//! fault clears — a node added meanwhile shows up.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use e2e::grpc::resources;
use kube_test_server::{node, pod, tls, Fault, Kind, KubeApiServer};
use serde_json::json;

use crate::resource_monitor_kubernetes::{
    eventually, start_monitor, start_monitor_with, CAUGHT_UP, MONITOR_USER,
};

/// The source gets past three faults with its backoff (0.8 s, then 1.6 s,
/// then 3.2 s, each up to twice that with jitter): eventually.
const RECOVERED: Duration = e2e::EVENTUALLY;

/// One node, one pod on it: 3 CPUs, 7Gi, 110 pods free.
fn small_cluster(kube: &KubeApiServer) {
    kube.apply(Kind::Node, node("n1", true, false, "4", "8Gi"));
    kube.apply(
        Kind::Pod,
        pod("web", "n1", "Running", json!({}), "1", "1Gi"),
    );
}

fn before() -> std::collections::BTreeMap<String, String> {
    resources(&[("cpu", "3"), ("memory", "7Gi"), ("pods", "110")])
}

/// ...and n2 (2 CPUs, 4Gi) added.
fn after() -> std::collections::BTreeMap<String, String> {
    resources(&[("cpu", "5"), ("memory", "11Gi"), ("pods", "220")])
}

/// Wait until `text` is in the log file, failing after [`CAUGHT_UP`].
async fn logged(log: &std::path::Path, text: &str) -> Result<String> {
    let deadline = Instant::now() + CAUGHT_UP;
    loop {
        let content = std::fs::read_to_string(log).unwrap_or_default();
        if content.contains(text) {
            return Ok(content);
        }
        if Instant::now() > deadline {
            bail!("{text:?} not logged within {CAUGHT_UP:?}:\n{content}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client certificate is a credential as good as a token over HTTPS:
/// every call is made as its CN.
#[tokio::test]
async fn kubernetes_source_authenticates_with_a_client_certificate() -> Result<()> {
    // Not a ServiceAccount: a user the shipped RBAC does not know, so
    // `deploy-check` leaves its calls alone; bound here to the shipped
    // ClusterRole as a User subject, as an operator would bind it.
    const USER: &str = "resource-monitor-by-certificate";
    let kube = KubeApiServer::start_tls().await?;
    e2e::rbac::load_shipped_for_user(&kube, "liqo-broker-resource-monitor", USER)?;
    small_cluster(&kube);
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    kube.write_kubeconfig_with_client_cert(&kubeconfig, USER)?;
    let text = std::fs::read_to_string(&kubeconfig)?;
    assert!(text.contains("client-certificate-data") && !text.contains("token"));
    let (_monitor, client) = start_monitor_with(&kubeconfig, None).await?;
    let first = client
        .read_until("peer-a", CAUGHT_UP, |r| !r.is_empty())
        .await?;
    assert_eq!(first, before());
    let users: Vec<Option<String>> = kube
        .audit()
        .into_iter()
        .filter(|r| r.resource.is_some())
        .map(|r| r.user)
        .collect();
    assert!(!users.is_empty());
    assert!(
        users.iter().all(|u| u.as_deref() == Some(USER)),
        "{users:?}"
    );
    Ok(())
}

/// A kubeconfig trusting another CA never gets a request through; one with
/// a token the server never issued gets 401s. Either way the source says
/// why in its log, keeps retrying, and answers UNAVAILABLE meanwhile.
#[tokio::test]
async fn kubernetes_source_refuses_a_wrong_ca_and_is_refused_a_bad_token() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    small_cluster(&kube);
    let dir = tempfile::tempdir()?;

    let wrong_ca = dir.path().join("wrong-ca");
    kube.write_kubeconfig_trusting(&wrong_ca, "stranger", &tls::unrelated_ca_pem()?)?;
    let log = dir.path().join("wrong-ca.log");
    let (mut monitor, client) =
        start_monitor_with(&wrong_ca, Some(std::fs::File::create(&log)?)).await?;
    let content = logged(&log, "UnknownIssuer").await?;
    assert!(content.contains("retrying with backoff"), "{content}");
    let status = client.read("peer-a").await.expect_err("nothing listed");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(monitor.try_wait()?.is_none(), "the binary exited");
    assert!(
        kube.audit().iter().all(|r| r.resource.is_none()),
        "a request got through the handshake: {:?}",
        kube.audit()
    );
    drop(monitor);

    let forged = dir.path().join("forged-token");
    kube.write_kubeconfig_as(&forged, MONITOR_USER)?;
    let text = std::fs::read_to_string(&forged)?;
    let token = text
        .split("token: ")
        .nth(1)
        .and_then(|t| t.split('}').next())
        .unwrap_or_default()
        .to_string();
    assert!(token.starts_with("kts-"), "{text}");
    std::fs::write(&forged, text.replace(&token, "kts-forged"))?;
    let log = dir.path().join("forged.log");
    let (mut monitor, client) =
        start_monitor_with(&forged, Some(std::fs::File::create(&log)?)).await?;
    let content = logged(&log, "Unauthorized").await?;
    assert!(content.contains("401"), "{content}");
    let status = client.read("peer-a").await.expect_err("nothing listed");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(monitor.try_wait()?.is_none(), "the binary exited");
    let refused = kube.audit();
    assert!(refused.iter().any(|r| r.code == 401));
    assert!(
        refused
            .iter()
            .filter(|r| r.resource.is_some())
            .all(|r| r.code == 401 && r.user.is_none()),
        "{refused:?}"
    );
    Ok(())
}

/// The source is synced; its node watch is cut (`cut`) and the next three
/// node requests meet `fault`; a node is added meanwhile. While the fault
/// lasts the answer is the last one known; the three attempts span at
/// least `spread` (backed off, not a tight loop); then the node shows up,
/// without a restart.
async fn survives(fault: Fault, cut: fn(&KubeApiServer), spread: Duration) -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    small_cluster(&kube);
    let dir = tempfile::tempdir()?;
    let (mut monitor, client) = start_monitor(&kube, dir.path()).await?;
    client
        .read_until("peer-a", CAUGHT_UP, |r| *r == before())
        .await?;
    eventually("both kinds are watched", || {
        kube.watches(Kind::Node) >= 1 && kube.watches(Kind::Pod) >= 1
    })
    .await?;

    kube.inject(fault.resource("nodes").times(3));
    cut(&kube);
    eventually("the fault is met", || kube.faults_fired() >= 1).await?;
    // Added once the node watch is surely down (a stream being cut may
    // still carry an event), before it is back (two more faults to go).
    kube.apply(Kind::Node, node("n2", true, false, "2", "4Gi"));
    // The last answer known, not an error, while the node watch is down.
    assert_eq!(client.read("peer-a").await?, before());
    let deadline = Instant::now() + RECOVERED;
    while kube.faults_fired() < 3 {
        assert_eq!(client.read("peer-a").await?, before());
        if Instant::now() > deadline {
            bail!(
                "the source stopped retrying: {} faults met",
                kube.faults_fired()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A tight loop takes milliseconds. Timed by the server, when it
    // answered each attempt, not by this test's polling.
    let fired = kube.faults_fired_at();
    let took = fired[2].duration_since(fired[0]);
    assert!(took >= spread, "three attempts within {took:?}");

    client
        .read_until("peer-a", RECOVERED, |r| *r == after())
        .await?;
    assert!(monitor.try_wait()?.is_none(), "the binary exited");
    // Watching again: a later change arrives too.
    kube.delete(Kind::Pod, "default/web");
    client
        .read_until("peer-a", CAUGHT_UP, |r| {
            *r == resources(&[("cpu", "6"), ("memory", "12Gi"), ("pods", "220")])
        })
        .await?;
    Ok(())
}

/// 429 and 503 are retried inside kube's client, after the `Retry-After`
/// the server sent (2 s here: two waits between three attempts, timed by
/// the server).
const AFTER_TWO_RETRY_AFTERS: Duration = Duration::from_secs(4);

/// 500s and broken connections are the watcher's to retry, after its
/// backoff: at least 0.8 s, then 1.6 s.
const AFTER_TWO_BACKOFFS: Duration = Duration::from_secs(2);

#[tokio::test]
async fn kubernetes_source_waits_out_429_retry_after_and_recovers() -> Result<()> {
    let fault = Fault::new(429).retry_after(2);
    survives(fault, KubeApiServer::end_watches, AFTER_TWO_RETRY_AFTERS).await
}

#[tokio::test]
async fn kubernetes_source_waits_out_503_retry_after_and_recovers() -> Result<()> {
    let fault = Fault::new(503).retry_after(2);
    survives(fault, KubeApiServer::end_watches, AFTER_TWO_RETRY_AFTERS).await
}

#[tokio::test]
async fn kubernetes_source_backs_off_on_500_and_recovers() -> Result<()> {
    survives(
        Fault::new(500),
        KubeApiServer::end_watches,
        AFTER_TWO_BACKOFFS,
    )
    .await
}

/// Watches cut mid-stream, then the connections of the next requests
/// closed mid-response.
#[tokio::test]
async fn kubernetes_source_survives_connection_resets() -> Result<()> {
    survives(
        Fault::reset(),
        KubeApiServer::reset_watches,
        AFTER_TWO_BACKOFFS,
    )
    .await
}

/// Faults on the first lists: UNAVAILABLE until a list gets through, then
/// the whole cluster.
#[tokio::test]
async fn kubernetes_source_lists_through_faults_at_start() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    small_cluster(&kube);
    kube.inject(Fault::new(503).verb("list").resource("nodes"));
    kube.inject(Fault::reset().verb("list").resource("nodes"));
    kube.inject(Fault::new(429).verb("list").resource("pods"));
    let dir = tempfile::tempdir()?;
    let (_monitor, client) = start_monitor(&kube, dir.path()).await?;
    client
        .read_until("peer-a", RECOVERED, |r| *r == before())
        .await?;
    assert_eq!(kube.faults_fired(), 3);
    Ok(())
}

/// The set-up of the compaction tests: the source watching
/// [`small_cluster`], then three pods started (nodes unchanged); the
/// running binary, its client and the answer it then serves.
async fn watching_pods_change(
    kube: &KubeApiServer,
    dir: &std::path::Path,
) -> Result<(
    e2e::Child,
    e2e::grpc::ReaderClient,
    std::collections::BTreeMap<String, String>,
)> {
    small_cluster(kube);
    let (monitor, client) = start_monitor(kube, dir).await?;
    client
        .read_until("peer-a", CAUGHT_UP, |r| *r == before())
        .await?;
    eventually("both kinds are watched", || {
        kube.watches(Kind::Node) >= 1 && kube.watches(Kind::Pod) >= 1
    })
    .await?;
    for i in 0..3 {
        kube.apply(
            Kind::Pod,
            pod(
                &format!("p{i}"),
                "n1",
                "Running",
                json!({}),
                "100m",
                "128Mi",
            ),
        );
    }
    let busy = resources(&[("cpu", "2700m"), ("memory", "6784Mi"), ("pods", "110")]);
    client
        .read_until("peer-a", CAUGHT_UP, |r| *r == busy)
        .await?;
    Ok((monitor, client, busy))
}

/// Pods change, nodes do not: without BOOKMARKs (a real server sends one
/// about a minute apart) the node watch's resourceVersion stays where its
/// list left it, so after a compaction and the end of the streams (an API
/// server restart, say) the node watch gets 410 Gone and the source lists
/// nodes again — and converges, still watching afterwards.
#[tokio::test]
async fn a_quiet_watch_falls_behind_a_compaction_and_relists() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    let dir = tempfile::tempdir()?;
    let (mut monitor, client, busy) = watching_pods_change(&kube, dir.path()).await?;
    // The streams end (their timeout, say) and the source watches again,
    // nodes from where their list left them: nothing tells it the world
    // moved on (a BOOKMARK at the start of each watch would).
    let watches = kube.watches(Kind::Node);
    kube.end_watches();
    eventually("the node watch is back", || {
        kube.watches(Kind::Node) > watches
    })
    .await?;
    assert_eq!(kube.gone(Kind::Node), 0);
    kube.compact();
    kube.end_watches();

    eventually("the node watch met 410 Gone", || kube.gone(Kind::Node) >= 1).await?;
    eventually("nodes were listed again", || kube.lists(Kind::Node) == 2).await?;
    // The pod watch was current: no 410, no re-list.
    assert_eq!(kube.gone(Kind::Pod), 0);
    assert_eq!(kube.lists(Kind::Pod), 1);
    assert_eq!(client.read("peer-a").await?, busy);
    kube.apply(Kind::Node, node("n2", true, false, "2", "4Gi"));
    client
        .read_until("peer-a", CAUGHT_UP, |r| {
            *r == resources(&[("cpu", "4700m"), ("memory", "10880Mi"), ("pods", "220")])
        })
        .await?;
    assert!(monitor.try_wait()?.is_none(), "the binary exited");
    Ok(())
}

/// The same, with BOOKMARKs every 300 ms: they carry the node watch's
/// resourceVersion past the pod changes, so after the compaction it
/// watches on from there — no 410, no re-list.
#[tokio::test]
async fn bookmarks_keep_a_quiet_watch_past_a_compaction() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    kube.set_bookmark_interval(Duration::from_millis(300));
    let dir = tempfile::tempdir()?;
    let (_monitor, client, _busy) = watching_pods_change(&kube, dir.path()).await?;
    // Two bookmarks after the changes: the second carries them.
    let sent = kube.bookmarks(Kind::Node);
    eventually("two more node bookmarks", || {
        kube.bookmarks(Kind::Node) >= sent + 2
    })
    .await?;
    kube.compact();
    let watches = kube.watches(Kind::Node);
    kube.end_watches();
    eventually("the node watch is back", || {
        kube.watches(Kind::Node) > watches
    })
    .await?;
    kube.apply(Kind::Node, node("n2", true, false, "2", "4Gi"));
    client
        .read_until("peer-a", CAUGHT_UP, |r| {
            *r == resources(&[("cpu", "4700m"), ("memory", "10880Mi"), ("pods", "220")])
        })
        .await?;
    assert_eq!(
        kube.gone(Kind::Node),
        0,
        "the bookmarks did not keep it fresh"
    );
    assert_eq!(kube.lists(Kind::Node), 1);
    Ok(())
}
