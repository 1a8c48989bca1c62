//! The summing reader against real in-process upstream servers
//! (`resource-reader`'s server over a memory source, on loopback).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use aggregator::config::{Dynamic, UpstreamSpec};
use aggregator::metrics::Metrics;
use aggregator::{Aggregate, Policy};
use futures::StreamExt;
use quantity::ResourceList;
use resource_reader::server::{serve_listener, ServerOptions};
use resource_reader::MemorySource;
use resource_reader::{
    LiqoApi, Notification, NotificationStream, Notifier, ReadError, ResourceReader,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

fn list(entries: &[(&str, &str)]) -> ResourceList {
    ResourceList::from_strings(entries.iter().copied()).unwrap()
}

fn printed(l: &ResourceList) -> Vec<(String, String)> {
    l.to_strings().into_iter().collect()
}

/// A memory source that can also say "cluster X's view changed", so a test
/// can send a notification it recognises downstream (a marker).
#[derive(Clone)]
struct Marked {
    source: MemorySource,
    marks: Notifier,
}

#[async_trait::async_trait]
impl ResourceReader for Marked {
    async fn read(&self, originator: &str) -> Result<ResourceList, ReadError> {
        self.source.read(originator).await
    }

    fn subscribe(&self) -> NotificationStream {
        Box::pin(futures::stream::select(
            self.source.subscribe(),
            self.marks.subscribe(),
        ))
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        self.source.remove_cluster(cluster).await
    }
}

/// An upstream ResourceReader server on loopback.
struct TestUpstream {
    addr: SocketAddr,
    source: MemorySource,
    marks: Notifier,
    api: LiqoApi,
    stop: Option<oneshot::Sender<()>>,
}

impl TestUpstream {
    async fn start(resources: &[(&str, &str)]) -> Self {
        Self::start_in(resources, LiqoApi::V05).await
    }

    /// Served in `api`'s shape (V06 and later carry cluster IDs in
    /// notifications).
    async fn start_in(resources: &[(&str, &str)], api: LiqoApi) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut up = Self {
            addr,
            source: MemorySource::new(list(resources)),
            marks: Notifier::new(),
            api,
            stop: None,
        };
        up.serve(listener);
        up
    }

    /// Notify subscribers that `cluster`'s view changed.
    fn mark(&self, cluster: &str) {
        self.marks.notify(Notification::Cluster(cluster.into()));
    }

    fn serve(&mut self, listener: TcpListener) {
        let (tx, rx) = oneshot::channel();
        let reader = Arc::new(Marked {
            source: self.source.clone(),
            marks: self.marks.clone(),
        });
        tokio::spawn(serve_listener(
            reader,
            listener,
            ServerOptions::new(self.api),
            async {
                let _ = rx.await;
            },
        ));
        self.stop = Some(tx);
    }

    fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    async fn restart(&mut self) {
        let listener = TcpListener::bind(self.addr).await.unwrap();
        self.serve(listener);
    }

    fn spec(&self, id: &str) -> UpstreamSpec {
        UpstreamSpec {
            cluster_id: id.parse().unwrap(),
            address: self.addr.to_string().parse().unwrap(),
            api: self.api,
        }
    }
}

fn dynamic(upstreams: Vec<UpstreamSpec>, policy: Policy) -> Dynamic {
    Dynamic {
        upstreams,
        policy,
        upstream_timeout: Duration::from_millis(500),
    }
}

async fn start(d: &Dynamic) -> Aggregate {
    let agg = Aggregate::start(d, Duration::from_millis(20), Metrics::new()).unwrap();
    assert!(agg.wait_connected(Duration::from_secs(5)).await.is_empty());
    agg
}

/// Poll `read` until it matches `want` (the link state is observed
/// periodically), failing after a few seconds.
async fn eventually(agg: &Aggregate, originator: &str, want: &[(&str, &str)]) {
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut last = None;
    for _ in 0..100 {
        let got = agg.read(originator).await.map(|l| printed(&l));
        if got.as_ref().ok() == Some(&want) {
            return;
        }
        last = Some(got);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("read for {originator} never became {want:?}; last: {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sums_and_leaves_out_the_originator() {
    let a = TestUpstream::start(&[("cpu", "1500m"), ("memory", "1Gi")]).await;
    let b = TestUpstream::start(&[("cpu", "2"), ("memory", "512Mi")]).await;
    let c = TestUpstream::start(&[("cpu", "250m")]).await;
    let agg = start(&dynamic(
        vec![a.spec("a"), b.spec("b"), c.spec("c")],
        Policy::Omit,
    ))
    .await;

    let sum = agg.read("elsewhere").await.unwrap();
    assert_eq!(
        printed(&sum),
        [
            ("cpu".into(), "3750m".into()),
            ("memory".into(), "1536Mi".into())
        ]
    );
    let for_a = agg.read("a").await.unwrap();
    assert_eq!(
        printed(&for_a),
        [
            ("cpu".into(), "2250m".into()),
            ("memory".into(), "512Mi".into())
        ]
    );
    let for_b = agg.read("b").await.unwrap();
    assert_eq!(
        printed(&for_b),
        [
            ("cpu".into(), "1750m".into()),
            ("memory".into(), "1Gi".into())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn omit_policy_leaves_a_dead_upstream_out_and_takes_it_back() {
    let a = TestUpstream::start(&[("cpu", "1")]).await;
    let mut b = TestUpstream::start(&[("cpu", "2")]).await;
    let agg = start(&dynamic(vec![a.spec("a"), b.spec("b")], Policy::Omit)).await;
    eventually(&agg, "x", &[("cpu", "3")]).await;

    let mut downstream = agg.subscribe();
    b.stop();
    eventually(&agg, "x", &[("cpu", "1")]).await;
    let status = agg.status();
    assert_eq!((status.up, status.down), (1, 1), "{status:?}");
    assert!(!status.upstreams[1].up);
    // Losing an upstream changes the sum: downstream hears of it.
    let n = tokio::time::timeout(Duration::from_secs(15), downstream.next()).await;
    assert_eq!(n.ok().flatten(), Some(Notification::All));

    b.restart().await;
    eventually(&agg, "x", &[("cpu", "3")]).await;
    assert_eq!(agg.status().down, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_known_policy_holds_an_answer_for_max_age_then_drops_it() {
    let a = TestUpstream::start(&[("cpu", "1")]).await;
    let mut b = TestUpstream::start(&[("cpu", "2")]).await;
    let max_age = Duration::from_millis(1500);
    let agg = start(&dynamic(
        vec![a.spec("a"), b.spec("b")],
        Policy::LastKnown { max_age },
    ))
    .await;
    assert_eq!(
        printed(&agg.read("x").await.unwrap()),
        [("cpu".into(), "3".into())]
    );

    b.stop();
    // Wait until the aggregate has noticed, then the held answer still counts…
    for _ in 0..100 {
        if agg.status().down == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = agg.status();
    assert_eq!(status.down, 1, "{status:?}");
    assert!(status.upstreams[1].last_known_in_use, "{status:?}");
    assert_eq!(
        printed(&agg.read("x").await.unwrap()),
        [("cpu".into(), "3".into())]
    );
    // …but only for the originator it was given to.
    assert_eq!(
        printed(&agg.read("y").await.unwrap()),
        [("cpu".into(), "1".into())]
    );

    // After max age it is left out, and downstream is told so.
    let mut downstream = agg.subscribe();
    let n = tokio::time::timeout(max_age + Duration::from_secs(15), downstream.next()).await;
    assert_eq!(n.ok().flatten(), Some(Notification::All));
    eventually(&agg, "x", &[("cpu", "1")]).await;
    assert!(!agg.status().upstreams[1].last_known_in_use);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_at_all_is_unavailable() {
    let mut a = TestUpstream::start(&[("cpu", "1")]).await;
    let agg = start(&dynamic(vec![a.spec("a")], Policy::Omit)).await;
    a.stop();
    let mut last = None;
    for _ in 0..100 {
        match agg.read("x").await {
            Err(ReadError::Unavailable(m)) => {
                assert!(m.contains("a:"), "names the upstream: {m}");
                return;
            }
            other => last = Some(other),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never unavailable: {last:?}");
}

/// The next downstream notification; a deadline only a lost one misses.
async fn next(downstream: &mut NotificationStream) -> Notification {
    tokio::time::timeout(Duration::from_secs(15), downstream.next())
        .await
        .expect("no notification within 15 s")
        .expect("the notification stream ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_changes_reach_downstream_coalesced() {
    let a = TestUpstream::start_in(&[("cpu", "1")], LiqoApi::V06).await;
    let b = TestUpstream::start_in(&[("cpu", "2")], LiqoApi::V06).await;
    // A window far longer than the two upstreams' notifications are apart.
    let window = Duration::from_millis(500);
    let d = dynamic(vec![a.spec("a"), b.spec("b")], Policy::Omit);
    let agg = Aggregate::start(&d, window, Metrics::new()).unwrap();
    assert!(agg.wait_connected(Duration::from_secs(10)).await.is_empty());
    let mut downstream = agg.subscribe();

    // Settle: a marker notified alone means no connect-time cause is
    // pending (one would have made its window an "all").
    let mut settled = false;
    for attempt in 0..5 {
        let marker = format!("settle-{attempt}");
        a.mark(&marker);
        loop {
            match next(&mut downstream).await {
                Notification::Cluster(c) if c == marker => {
                    settled = true;
                    break;
                }
                Notification::All => break,
                // An earlier attempt's marker, notified after an "all".
                Notification::Cluster(c) if c.starts_with("settle-") => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        if settled {
            break;
        }
    }
    assert!(settled, "the connect-time notifications never ended");

    // Both upstreams change: exactly one notification downstream...
    a.source.set(list(&[("cpu", "5")]));
    b.source.set(list(&[("cpu", "7")]));
    assert_eq!(next(&mut downstream).await, Notification::All);
    assert_eq!(
        printed(&agg.read("x").await.unwrap()),
        [("cpu".into(), "12".into())]
    );
    // ...because the next one is a later marker's, alone in its window.
    a.mark("after");
    assert_eq!(
        next(&mut downstream).await,
        Notification::Cluster("after".into()),
        "the burst was not coalesced into one notification"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_adds_and_removes_upstreams_keeping_the_others() {
    let a = TestUpstream::start(&[("cpu", "1")]).await;
    let b = TestUpstream::start(&[("cpu", "2")]).await;
    let c = TestUpstream::start(&[("cpu", "4")]).await;
    let agg = start(&dynamic(vec![a.spec("a"), b.spec("b")], Policy::Omit)).await;
    assert_eq!(
        printed(&agg.read("x").await.unwrap()),
        [("cpu".into(), "3".into())]
    );

    let mut downstream = agg.subscribe();
    let applied = agg
        .apply(&dynamic(vec![a.spec("a"), c.spec("c")], Policy::Omit))
        .unwrap();
    assert_eq!(applied.added, ["c"]);
    assert_eq!(applied.removed, ["b"]);
    assert_eq!(applied.kept, 1);
    assert_eq!(agg.upstream_ids(), ["a", "c"]);
    let n = tokio::time::timeout(Duration::from_secs(15), downstream.next()).await;
    assert_eq!(n.ok().flatten(), Some(Notification::All));
    eventually(&agg, "x", &[("cpu", "5")]).await;

    // The same configuration again changes nothing.
    let applied = agg
        .apply(&dynamic(vec![a.spec("a"), c.spec("c")], Policy::Omit))
        .unwrap();
    assert!(!applied.changed_anything(), "{applied:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_cluster_reaches_every_upstream() {
    let a = TestUpstream::start(&[("cpu", "1")]).await;
    let b = TestUpstream::start(&[("cpu", "2")]).await;
    let agg = start(&dynamic(vec![a.spec("a"), b.spec("b")], Policy::Omit)).await;
    agg.remove_cluster("peer-1").await.unwrap();
    assert_eq!(a.source.removed(), ["peer-1"]);
    assert_eq!(b.source.removed(), ["peer-1"]);
}
