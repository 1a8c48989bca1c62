//! The contract follower (`catalog_client::contract_follower`) against the
//! real catalog binary on the embedded store: a provider's follower sees a
//! consumer's purchase and its end over the stream alone (the fallback poll
//! an hour away), keeps its contracts while the catalog is down and resumes
//! after a restart (`?since=` the last position), falls back to polling
//! while the stream is refused (the identity's streams all taken) and
//! against a catalog without the stream (a loopback proxy answering 404 for
//! it, as an older catalog does), and returns to the stream once it is
//! there.
//!
//! Every wait is bounded by the follower's own options: a change on a
//! working stream arrives within the idle timeout plus the retry cap (plus
//! the session's HTTP timeout, for a login on the way); one carried by
//! polls within a poll interval more.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use catalog_client::contract_follower::{
    CancellationToken, ContractFollower, FollowedContracts, FollowerOptions, Source,
};
use catalog_client::contracts::Listing;
use catalog_client::wire::PeeringCredentials;
use catalog_client::{Backoff, Http, Login, Session};
use e2e::buying::{self, admin, consumer, delete, publish};
use e2e::catalog::{provider, Backend, Catalog, Env};
use e2e::contracts::buy;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The session's per-request timeout (logins included).
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

fn options(fallback_poll: Duration) -> FollowerOptions {
    FollowerOptions {
        fallback_poll,
        idle_timeout: Duration::from_secs(6),
        retry: Backoff::new(Duration::from_millis(100), Duration::from_secs(1)),
    }
}

/// The catalog's flags: heartbeats three to the follower's idle timeout,
/// as shipped (15 s and 45 s).
fn catalog_flags(options: &FollowerOptions) -> Vec<String> {
    vec![
        "--contract-stream-heartbeat".into(),
        format!("{}ms", options.idle_timeout.as_millis() / 3),
    ]
}

fn start_catalog(env: &Env, options: &FollowerOptions, extra: &[&str]) -> Catalog {
    let flags = catalog_flags(options);
    let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
    all.extend_from_slice(extra);
    buying::start(env, &all)
}

/// How long a change may take to reach the follower over a working (or
/// reconnecting) stream.
fn over_the_stream(options: &FollowerOptions) -> Duration {
    HTTP_TIMEOUT + options.idle_timeout + options.retry.max()
}

/// … and carried by a fallback poll.
fn by_a_poll(options: &FollowerOptions) -> Duration {
    over_the_stream(options) + options.fallback_poll
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn session(base: &str, login: Login) -> Session {
    let http = Http::new(
        Http::client(HTTP_TIMEOUT, "e2e-contract-follower").unwrap(),
        base.parse().unwrap(),
    );
    Session::new(http, login)
}

fn provider_login(n: u32) -> Login {
    let credentials: PeeringCredentials = serde_json::from_value(provider(n)).unwrap();
    Login::Provider {
        credentials,
        file: None,
    }
}

fn follow(
    rt: &tokio::runtime::Runtime,
    base: &str,
    login: Login,
    options: &FollowerOptions,
    shutdown: &CancellationToken,
) -> ContractFollower {
    let _entered = rt.enter();
    ContractFollower::start(session(base, login), options.clone(), shutdown.clone())
}

/// Wait (on its change notifications) until the follower's state passes
/// `ok`, for at most `within`.
#[track_caller]
fn wait_until(
    rt: &tokio::runtime::Runtime,
    follower: &ContractFollower,
    within: Duration,
    what: &str,
    ok: impl Fn(&FollowedContracts) -> bool,
) -> Arc<FollowedContracts> {
    let mut f = follower.clone();
    let waited = rt.block_on(async {
        tokio::time::timeout(within, async {
            loop {
                let now = f.current();
                if ok(&now) {
                    return now;
                }
                f.changed().await;
            }
        })
        .await
    });
    waited.unwrap_or_else(|_| {
        panic!(
            "{what}: not within {within:?}; the follower holds {:?}",
            follower.current()
        )
    })
}

fn ids(now: &FollowedContracts) -> Option<Vec<String>> {
    now.contracts
        .as_ref()
        .map(|c| c.iter().map(|c| c.id.clone()).collect())
}

/// Alice buys the small plan of provider 1's "shop"; the contract's id.
#[track_caller]
fn purchase(c: &Catalog, alice: &str) -> String {
    let r = buy(
        c,
        alice,
        "shop",
        "small",
        &json!({"consumerClusterID": "alice-cluster"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    r.json["id"].as_str().unwrap().to_string()
}

#[track_caller]
fn cancel(c: &Catalog, alice: &str, id: &str) {
    let r = delete(c, &format!("/purchases/{id}"), Some(alice));
    assert!(r.status == 200 || r.status == 204, "{}", r.text);
}

#[test]
fn the_stream_alone_delivers_a_purchase_and_its_end() {
    let env = Env::new(Backend::Embedded);
    // The fallback poll an hour away: only the stream can deliver.
    let options = options(Duration::from_secs(3600));
    let c = start_catalog(&env, &options, &[]);
    publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice_token = consumer(&c, &admin, "alice");
    let rt = runtime();
    let shutdown = CancellationToken::new();
    let base = c.url("/");
    let seller = follow(&rt, &base, provider_login(1), &options, &shutdown);
    let alice = follow(
        &rt,
        &base,
        Login::Bearer {
            token: alice_token.clone(),
        },
        &options,
        &shutdown,
    );
    let within = over_the_stream(&options);
    for f in [&seller, &alice] {
        let now = wait_until(&rt, f, within, "the first snapshot", |n| {
            ids(n) == Some(vec![])
        });
        assert_eq!((now.source, &now.last_error), (Source::Stream, &None));
    }
    let before = seller.current();

    let id = purchase(&c, &alice_token);
    for f in [&seller, &alice] {
        let now = wait_until(&rt, f, within, "the purchase", |n| {
            ids(n) == Some(vec![id.clone()])
        });
        assert_eq!(now.source, Source::Stream);
        assert!(now.seq > before.seq, "{now:?}");
        assert!(now.generation > before.generation, "{now:?}");
    }
    // From memory, with the follower's ETag, as Session::active_contracts
    // answers.
    let Listing::Contracts { etag, contracts } = seller.active_contracts(None).unwrap() else {
        panic!("contracts expected");
    };
    assert_eq!(
        contracts[0].consumer_cluster_id.as_deref(),
        Some("alice-cluster")
    );
    assert_eq!(
        seller.active_contracts(etag.as_deref()).unwrap(),
        Listing::NotModified
    );

    cancel(&c, &alice_token, &id);
    for f in [&seller, &alice] {
        let now = wait_until(&rt, f, within, "the contract's end", |n| {
            ids(n) == Some(vec![])
        });
        assert_eq!(now.source, Source::Stream);
    }
    assert!(matches!(
        seller.active_contracts(etag.as_deref()).unwrap(),
        Listing::Contracts { .. }
    ));
    shutdown.cancel();
}

#[test]
fn contracts_survive_a_catalog_restart_and_the_stream_resumes() {
    let env = Env::new(Backend::Embedded);
    let options = options(Duration::from_secs(3600));
    let c = start_catalog(&env, &options, &[]);
    publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let kept = purchase(&c, &alice);
    let rt = runtime();
    let proxy = Proxy::start(&rt, c.port);
    let shutdown = CancellationToken::new();
    let seller = follow(&rt, &proxy.url(), provider_login(1), &options, &shutdown);
    let within = over_the_stream(&options);
    let before = wait_until(&rt, &seller, within, "the first snapshot", |n| {
        ids(n) == Some(vec![kept.clone()])
    });

    // The catalog goes away: the follower notices, and keeps its contracts.
    proxy.set(Mode::Down, None);
    drop(c);
    let down = wait_until(&rt, &seller, within, "the lost stream", |n| {
        n.last_error.is_some()
    });
    assert_eq!(
        ids(&down),
        Some(vec![kept.clone()]),
        "never empty while down"
    );

    // Restarted on the same data; changes while the follower cannot see it.
    let c = start_catalog(&env, &options, &[]);
    let alice = consumer(&c, &buying::admin(&c), "alice");
    cancel(&c, &alice, &kept);
    let bought = purchase(&c, &alice);
    proxy.set(Mode::Forward, Some(c.port));
    let after = wait_until(&rt, &seller, within, "the changes after the restart", |n| {
        ids(n) == Some(vec![bought.clone()]) && n.source == Source::Stream
    });
    assert!(after.seq > before.seq, "{after:?} after {before:?}");
    assert_eq!(after.last_error, None);
    // It resumed from where it was: the reconnects named its position.
    let resume = format!("since={}", before.seq);
    let asked = proxy.requests();
    assert!(
        asked
            .iter()
            .any(|r| r.starts_with("/contract-changes") && r.contains(&resume)),
        "{asked:?}"
    );
    shutdown.cancel();
}

#[test]
fn polls_while_the_identitys_streams_are_taken_then_streams_again() {
    let env = Env::new(Backend::Embedded);
    let options = options(Duration::from_secs(2));
    let c = start_catalog(&env, &options, &["--contract-stream-per-identity", "1"]);
    let seller_token = publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    // The provider's one stream, taken.
    let occupant = raw_stream(&c, &seller_token);
    let rt = runtime();
    let shutdown = CancellationToken::new();
    let seller = follow(&rt, &c.url("/"), provider_login(1), &options, &shutdown);
    polls_while_refused_then_streams(&rt, &seller, &options, &c, &alice, "429", || drop(occupant));
    shutdown.cancel();
}

#[test]
fn polls_a_catalog_without_the_stream_then_streams_once_it_has_one() {
    let env = Env::new(Backend::Embedded);
    let options = options(Duration::from_secs(2));
    let c = start_catalog(&env, &options, &[]);
    publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let rt = runtime();
    let proxy = Proxy::start(&rt, c.port);
    proxy.set(Mode::NoStream, Some(c.port));
    let shutdown = CancellationToken::new();
    let seller = follow(&rt, &proxy.url(), provider_login(1), &options, &shutdown);
    // Then the catalog is upgraded: the stream is there.
    polls_while_refused_then_streams(&rt, &seller, &options, &c, &alice, "404", || {
        proxy.set(Mode::Forward, Some(c.port))
    });
    shutdown.cancel();
}

/// While the stream is refused (`refusal`, the status the follower last
/// saw), `seller`'s follower answers from polls, a purchase included; once
/// `allow` lets the stream through, it goes back to the stream, and the
/// stream delivers: the contract's end arrives well before a poll could be
/// the one telling (an hour of polls).
fn polls_while_refused_then_streams(
    rt: &tokio::runtime::Runtime,
    seller: &ContractFollower,
    options: &FollowerOptions,
    c: &Catalog,
    alice: &str,
    refusal: &str,
    allow: impl FnOnce(),
) {
    let now = wait_until(rt, seller, by_a_poll(options), "a poll's answer", |n| {
        n.source == Source::Polling && n.contracts.is_some()
    });
    assert!(
        now.last_error
            .as_deref()
            .is_some_and(|e| e.contains(refusal)),
        "{now:?}"
    );
    let id = purchase(c, alice);
    wait_until(
        rt,
        seller,
        by_a_poll(options),
        "the purchase, polled",
        |n| ids(n) == Some(vec![id.clone()]) && n.source == Source::Polling,
    );

    allow();
    wait_until(
        rt,
        seller,
        over_the_stream(options),
        "the stream again",
        |n| n.source == Source::Stream && n.last_error.is_none(),
    );
    cancel(c, alice, &id);
    wait_until(
        rt,
        seller,
        over_the_stream(options),
        "the end, streamed",
        |n| ids(n) == Some(vec![]) && n.source == Source::Stream,
    );
}

/// A contract stream opened by hand and held (not read) until dropped.
fn raw_stream(c: &Catalog, token: &str) -> reqwest::blocking::Response {
    // No overall timeout: the stream is to stay open.
    let client = reqwest::blocking::Client::builder()
        .timeout(None)
        .build()
        .unwrap();
    let r = client
        .get(c.url("/contract-changes?active=true"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    r
}

/// What the proxy does with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Everything to the catalog.
    Forward,
    /// 404 for `/contract-changes`, as a catalog that predates it answers;
    /// the rest to the catalog.
    NoStream,
    /// The catalog is down: connections are closed at once.
    Down,
}

/// A loopback HTTP proxy with one fixed address (so a follower keeps it
/// across catalog restarts), one request per connection.
struct Proxy {
    port: u16,
    route: Arc<Mutex<(Mode, Option<u16>)>>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    fn start(rt: &tokio::runtime::Runtime, upstream: u16) -> Proxy {
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let route = Arc::new(Mutex::new((Mode::Forward, Some(upstream))));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (r, q) = (route.clone(), requests.clone());
        rt.spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(relay(conn, r.clone(), q.clone()));
            }
        });
        Proxy {
            port,
            route,
            requests,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn set(&self, mode: Mode, upstream: Option<u16>) {
        *self.route.lock().unwrap() = (mode, upstream);
    }

    /// The request targets seen, in order.
    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

async fn relay(
    mut conn: TcpStream,
    route: Arc<Mutex<(Mode, Option<u16>)>>,
    requests: Arc<Mutex<Vec<String>>>,
) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if head.len() > 64 * 1024 {
            return;
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).to_string();
    let target = text.split(' ').nth(1).unwrap_or_default().to_string();
    requests.lock().unwrap().push(target.clone());
    let (mode, upstream) = *route.lock().unwrap();
    let upstream = match (mode, upstream) {
        (Mode::Down, _) | (_, None) => return,
        (Mode::NoStream, _) if target.starts_with("/contract-changes") => {
            let body = r#"{"error":"not_found","message":"no route"}"#;
            let answer = format!(
                "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(answer.as_bytes()).await;
            return;
        }
        (_, Some(port)) => port,
    };
    let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)).await else {
        return;
    };
    // One request per connection: every request is seen (and routed) here.
    let line_end = head.windows(2).position(|w| w == b"\r\n").unwrap_or(0) + 2;
    head.splice(line_end..line_end, b"connection: close\r\n".iter().copied());
    if up.write_all(&head).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
}
