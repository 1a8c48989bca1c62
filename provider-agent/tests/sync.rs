//! The agent's loop against an in-process stand-in for the catalog (same
//! routes, status codes and version rule as the real one, plus knobs to
//! make it fail) and an in-memory reader: debouncing, change detection,
//! conflicts, token renewal, outages and the errors that stop the agent.
//! The real catalog and resource-monitor are exercised by the end-to-end
//! tests in `tests/tests/e2e/provider_agent*.rs`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use edge::backoff::Backoff;
use provider_agent::config::catalog_session;
use provider_agent::{
    Agent, CatalogError, CreateDefaults, Credentials, SyncError, SyncOptions, Target,
};
use quantity::ResourceList;
use resource_reader::MemorySource;
use resource_reader::{NotificationStream, ReadError, ResourceReader};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const SECRET: &str = "peering-secret";

/// What the fake catalog holds and how it misbehaves.
#[derive(Default)]
struct Fake {
    offers: HashMap<String, Value>,
    tokens: HashMap<String, tokio::time::Instant>,
    /// When each token was issued and when it expires, in issue order.
    issued_at: Vec<(tokio::time::Instant, tokio::time::Instant)>,
    issued: u64,
    token_ttl_ms: i64,
    auth_calls: u32,
    writes: Vec<Value>,
    post_attempts: u32,
    refused_tokens: u32,
    /// Answer 503 to this many more requests.
    fail_next: u32,
    /// Forget every issued token before the next write.
    revoke_before_write: bool,
    /// Bump the stored version before this many more writes, as if someone
    /// else had written in between.
    interfere: u32,
}

type Shared = Arc<Mutex<Fake>>;

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(json!({"error": code, "message": message}))).into_response()
}

fn fail_if_asked(fake: &mut Fake) -> Option<Response> {
    if fake.fail_next > 0 {
        fake.fail_next -= 1;
        return Some(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "store down",
        ));
    }
    None
}

async fn authenticate(State(fake): State<Shared>, Json(creds): Json<Value>) -> Response {
    let mut f = fake.lock().unwrap();
    if let Some(r) = fail_if_asked(&mut f) {
        return r;
    }
    f.auth_calls += 1;
    if creds["token"] != SECRET {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "these credentials do not match the ones registered for this cluster ID",
        );
    }
    f.issued += 1;
    let token = format!("jwt-{}", f.issued);
    let ttl = f.token_ttl_ms;
    let now = tokio::time::Instant::now();
    let expiry = now + Duration::from_millis(ttl as u64);
    f.tokens.insert(token.clone(), expiry);
    f.issued_at.push((now, expiry));
    let expires = chrono::Utc::now() + chrono::TimeDelta::milliseconds(ttl);
    Json(json!({"token": token, "expiresAt": expires})).into_response()
}

async fn get_offer(State(fake): State<Shared>, Path(id): Path<String>) -> Response {
    let mut f = fake.lock().unwrap();
    if let Some(r) = fail_if_asked(&mut f) {
        return r;
    }
    match f.offers.get(&id) {
        Some(o) => Json(o.clone()).into_response(),
        None => error(StatusCode::NOT_FOUND, "not_found", "no such offer"),
    }
}

async fn put_offer(
    State(fake): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut f = fake.lock().unwrap();
    if let Some(r) = fail_if_asked(&mut f) {
        return r;
    }
    f.post_attempts += 1;
    if std::mem::take(&mut f.revoke_before_write) {
        f.tokens.clear();
    }
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string();
    let valid = f
        .tokens
        .get(&bearer)
        .is_some_and(|exp| tokio::time::Instant::now() < *exp);
    if !valid {
        f.refused_tokens += 1;
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "invalid or expired token",
        );
    }
    if f.interfere > 0 {
        f.interfere -= 1;
        if let Some(o) = f.offers.get_mut(&id) {
            let v = o["version"].as_u64().unwrap();
            o["version"] = json!(v + 1);
        }
    }
    let existing = f.offers.get(&id).cloned();
    if existing.as_ref().is_some_and(|o| o["clusterID"] != "c1") {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this offer belongs to another provider",
        );
    }
    let current = existing
        .as_ref()
        .map(|o| o["version"].as_u64().unwrap())
        .unwrap_or(0);
    if let Some(expected) = body.get("version").and_then(Value::as_u64) {
        if expected != current {
            return error(
                StatusCode::CONFLICT,
                "conflict",
                &format!("version: the offer is at version {current}, not {expected}"),
            );
        }
    }
    if body["plans"].as_object().is_none_or(|p| p.is_empty()) {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "plans: must hold at least one plan",
        );
    }
    // Stands for any resource the real catalog refuses (too many, bad name).
    if body["plans"]["small"]["resources"].get("bad").is_some() {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "plans.small.resources.bad: refused",
        );
    }
    f.writes.push(body.clone());
    let mut stored = body;
    stored["id"] = json!(id);
    stored["clusterID"] = json!("c1");
    stored["version"] = json!(current + 1);
    f.offers.insert(id, stored.clone());
    let status = if existing.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    (status, Json(stored)).into_response()
}

struct Harness {
    fake: Shared,
    url: String,
    _server: JoinHandle<()>,
}

async fn fake_catalog() -> Harness {
    let fake: Shared = Arc::new(Mutex::new(Fake {
        token_ttl_ms: 3_600_000,
        ..Fake::default()
    }));
    let app = Router::new()
        .route(
            &format!("/{}", catalog_client::routes::AUTHENTICATE),
            post(authenticate),
        )
        .route("/offer/{id}", axum::routing::get(get_offer).post(put_offer))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    Harness {
        fake,
        url,
        _server: server,
    }
}

fn list(pairs: &[(&str, &str)]) -> ResourceList {
    ResourceList::from_strings(pairs.iter().copied()).unwrap()
}

fn credentials(secret: &str) -> Credentials {
    Credentials {
        cluster_id: "c1".into(),
        cluster_name: "one".into(),
        auth_url: "https://one.example:443".into(),
        token: secret.into(),
    }
}

fn target(create: bool) -> Target {
    Target {
        offer_id: "live".into(),
        plan_id: "small".into(),
        originator: String::new(),
        create: create.then(|| CreateDefaults {
            offer_name: "Live offer".into(),
            offer_type: "compute".into(),
            offer_description: "from the chain".into(),
            plan_name: "Small".into(),
            plan_cost: "1.5".into(),
        }),
    }
}

fn options() -> SyncOptions {
    SyncOptions {
        debounce: Duration::from_millis(200),
        resync: Duration::from_secs(300),
        backoff: Backoff::new(Duration::from_millis(50), Duration::from_millis(200)),
        max_conflicts: 5,
    }
}

/// A running agent; dropping it stops it.
struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), SyncError>>,
}

impl Running {
    async fn stop(mut self) -> Result<(), SyncError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.unwrap()
    }
}

/// A memory source that counts the agent's reads: a read is the agent
/// deciding whether to write, an event a test can wait for.
#[derive(Clone)]
struct Counting {
    source: MemorySource,
    reads: Arc<AtomicUsize>,
}

impl Counting {
    fn new(source: &MemorySource) -> Self {
        Self {
            source: source.clone(),
            reads: Arc::default(),
        }
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl ResourceReader for Counting {
    async fn read(&self, originator: &str) -> Result<ResourceList, ReadError> {
        let answer = self.source.read(originator).await;
        self.reads.fetch_add(1, Ordering::SeqCst);
        answer
    }

    fn subscribe(&self) -> NotificationStream {
        self.source.subscribe()
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        self.source.remove_cluster(cluster).await
    }
}

fn start(
    h: &Harness,
    reader: &MemorySource,
    secret: &str,
    target: Target,
    options: SyncOptions,
) -> Running {
    start_reading(h, Arc::new(reader.clone()), secret, target, options)
}

fn start_reading(
    h: &Harness,
    reader: Arc<dyn ResourceReader>,
    secret: &str,
    target: Target,
    options: SyncOptions,
) -> Running {
    let client = catalog_session(
        h.url.parse().unwrap(),
        credentials(secret),
        None,
        Duration::from_secs(5),
    )
    .unwrap();
    let agent = Agent::new(reader, client, target, options);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(agent.run(async {
        let _ = stopped.await;
    }));
    Running {
        stop: Some(stop),
        task,
    }
}

/// The plan resources of every accepted write, in order.
fn written_plans(h: &Harness) -> Vec<Value> {
    h.fake
        .lock()
        .unwrap()
        .writes
        .iter()
        .map(|w| w["plans"]["small"]["resources"].clone())
        .collect()
}

fn plan(h: &Harness) -> Option<Value> {
    h.fake
        .lock()
        .unwrap()
        .offers
        .get("live")
        .map(|o| o["plans"]["small"]["resources"].clone())
}

fn writes(h: &Harness) -> usize {
    h.fake.lock().unwrap().writes.len()
}

/// Poll `check` every 20 ms for up to 10 s.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn creates_the_offer_then_follows_changes() {
    let h = fake_catalog().await;
    let reader = MemorySource::new(list(&[("cpu", "4"), ("memory", "8Gi")]));
    let agent = start(&h, &reader, SECRET, target(true), options());

    eventually("the offer to be created", || plan(&h).is_some()).await;
    let created = h.fake.lock().unwrap().offers["live"].clone();
    assert_eq!(created["name"], "Live offer");
    assert_eq!(created["type"], "compute");
    assert_eq!(
        created["plans"]["small"],
        json!({"name": "Small", "cost": "1.5", "resources": {"cpu": "4", "memory": "8Gi"}})
    );

    reader.set(list(&[("cpu", "3"), ("memory", "8Gi")]));
    eventually("the change to be published", || {
        plan(&h) == Some(json!({"cpu": "3", "memory": "8Gi"}))
    })
    .await;
    assert_eq!(writes(&h), 2);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_burst_of_notifications_makes_one_write() {
    let h = fake_catalog().await;
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let options = SyncOptions {
        debounce: Duration::from_secs(1),
        ..options()
    };
    let agent = start(&h, &reader, SECRET, target(true), options);
    eventually("the offer to be created", || writes(&h) == 1).await;

    // Ten changes over about 200 ms, well inside one window.
    for cpu in 5..15 {
        reader.set(list(&[("cpu", &cpu.to_string())]));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eventually("the burst to be published", || {
        plan(&h) == Some(json!({"cpu": "14"}))
    })
    .await;
    // Nothing else for the burst: the next write is a later change's.
    reader.set(list(&[("cpu", "20")]));
    eventually("the later change to be published", || {
        plan(&h) == Some(json!({"cpu": "20"}))
    })
    .await;
    let written = written_plans(&h);
    assert_eq!(
        written,
        [
            json!({"cpu": "4"}),
            json!({"cpu": "14"}),
            json!({"cpu": "20"})
        ],
        "the burst made more than one write"
    );
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_change_that_is_undone_within_the_window_writes_nothing() {
    let h = fake_catalog().await;
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let counting = Counting::new(&reader);
    let agent = start_reading(
        &h,
        Arc::new(counting.clone()),
        SECRET,
        target(true),
        options(),
    );
    eventually("the offer to be created", || writes(&h) == 1).await;

    let reads = counting.reads();
    reader.set(list(&[("cpu", "5")]));
    reader.set(list(&[("cpu", "4000m")]));
    // The agent read the chain at the end of the window and decided; then
    // a real change: its write must be the next one.
    eventually("the agent to read the chain after the window", || {
        counting.reads() > reads
    })
    .await;
    reader.set(list(&[("cpu", "6")]));
    eventually("the later change to be published", || {
        plan(&h) == Some(json!({"cpu": "6"}))
    })
    .await;
    assert_eq!(
        written_plans(&h),
        [json!({"cpu": "4"}), json!({"cpu": "6"})],
        "the undone change was written"
    );
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn only_the_plans_resources_change_and_conflicts_are_retried() {
    let h = fake_catalog().await;
    h.fake.lock().unwrap().offers.insert(
        "live".into(),
        json!({
            "id": "live", "name": "Hand-made", "type": "gpu", "description": "kept",
            "clusterID": "c1", "clusterName": "one", "version": 3,
            "createdAt": "2024-01-01T00:00:00Z", "updatedAt": "2024-01-01T00:00:00Z",
            "plans": {
                "small": {"name": "plan-small", "planID": "s", "cost": "2.0", "resources": {"cpu": "1"}},
                "big": {"name": "plan-big", "cost": "9.0", "resources": {"cpu": "64"}}
            }
        }),
    );
    h.fake.lock().unwrap().interfere = 2;
    let reader = MemorySource::new(list(&[("cpu", "6"), ("nvidia.com/gpu", "1")]));
    let agent = start(&h, &reader, SECRET, target(false), options());

    eventually("the plan to be updated", || {
        plan(&h) == Some(json!({"cpu": "6", "nvidia.com/gpu": "1"}))
    })
    .await;
    let offer = h.fake.lock().unwrap().offers["live"].clone();
    assert_eq!(offer["name"], "Hand-made");
    assert_eq!(offer["type"], "gpu");
    assert_eq!(offer["description"], "kept");
    assert_eq!(offer["plans"]["small"]["name"], "plan-small");
    assert_eq!(offer["plans"]["small"]["planID"], "s");
    assert_eq!(offer["plans"]["small"]["cost"], "2.0");
    assert_eq!(
        offer["plans"]["big"],
        json!({"name": "plan-big", "cost": "9.0", "resources": {"cpu": "64"}})
    );
    // Two interfering writers: version 3 -> 5 by them, then ours.
    assert_eq!(offer["version"], 6);
    assert_eq!(writes(&h), 1);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_refused_token_is_replaced_once() {
    let h = fake_catalog().await;
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let agent = start(&h, &reader, SECRET, target(true), options());
    eventually("the offer to be created", || writes(&h) == 1).await;

    h.fake.lock().unwrap().revoke_before_write = true;
    reader.set(list(&[("cpu", "2")]));
    eventually("the change to be published", || {
        plan(&h) == Some(json!({"cpu": "2"}))
    })
    .await;
    let (refused, auth_calls) = {
        let f = h.fake.lock().unwrap();
        (f.refused_tokens, f.auth_calls)
    };
    assert_eq!(refused, 1);
    assert_eq!(auth_calls, 2);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn tokens_are_renewed_before_they_expire() {
    // Long enough that the write below, made at 83% of the token's life,
    // is done well before its end even on a loaded machine.
    const TTL_MS: u64 = 12_000;
    let h = fake_catalog().await;
    h.fake.lock().unwrap().token_ttl_ms = TTL_MS as i64;
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let agent = start(&h, &reader, SECRET, target(true), options());
    eventually("the offer to be created", || writes(&h) == 1).await;
    let (issued, expiry) = h.fake.lock().unwrap().issued_at[0];

    // Past 80% of the first token's life but before its end, a change: the
    // write goes out with a new token, fetched before the old one expired
    // (an agent that renews only on expiry sends the old one, still valid).
    tokio::time::sleep_until(issued + Duration::from_millis(TTL_MS * 83 / 100)).await;
    reader.set(list(&[("cpu", "2")]));
    eventually("the change to be published", || {
        plan(&h) == Some(json!({"cpu": "2"}))
    })
    .await;
    let (refused, auth_calls, issued_at) = {
        let f = h.fake.lock().unwrap();
        (f.refused_tokens, f.auth_calls, f.issued_at.clone())
    };
    assert_eq!(refused, 0, "an expired token was sent");
    assert_eq!(auth_calls, 2, "the token was not renewed");
    let renewed = issued_at[1].0;
    assert!(
        renewed < expiry,
        "renewed {:?} after the first token expired",
        renewed - expiry
    );
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn an_unavailable_catalog_is_retried_until_it_answers() {
    let h = fake_catalog().await;
    h.fake.lock().unwrap().fail_next = 6;
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let agent = start(&h, &reader, SECRET, target(true), options());
    eventually("the offer to be created despite the outage", || {
        plan(&h) == Some(json!({"cpu": "4"}))
    })
    .await;
    assert_eq!(h.fake.lock().unwrap().fail_next, 0);

    // Down again while the chain changes: the change arrives once it is back.
    h.fake.lock().unwrap().fail_next = 4;
    reader.set(list(&[("cpu", "8")]));
    eventually("the change after the second outage", || {
        plan(&h) == Some(json!({"cpu": "8"}))
    })
    .await;
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_catalog_is_retried_until_it_listens() {
    // Reserve a port, then free it: nothing listens there yet.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let client = catalog_session(
        format!("http://{addr}").parse().unwrap(),
        credentials(SECRET),
        None,
        Duration::from_secs(2),
    )
    .unwrap();
    // The agent's log, read back: this test's thread only (the runtime is
    // current-thread, so the agent's task logs here too).
    let log = Log::default();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(log.clone())
            .finish(),
    );
    let agent = Agent::new(Arc::new(reader.clone()), client, target(true), options());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(agent.run(async {
        let _ = stopped.await;
    }));
    // Refused, backed off, refused again: the agent retries (and did not
    // give up) while nothing listens.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !log
        .text()
        .lines()
        .any(|l| l.contains("cannot update the catalog; retrying") && l.contains("failures=2"))
    {
        assert!(
            !task.is_finished(),
            "the agent gave up on an unreachable catalog"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "no second attempt logged within 15 s:\n{}",
            log.text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let fake: Shared = Arc::new(Mutex::new(Fake {
        token_ttl_ms: 3_600_000,
        ..Fake::default()
    }));
    let app = Router::new()
        .route(
            &format!("/{}", catalog_client::routes::AUTHENTICATE),
            post(authenticate),
        )
        .route("/offer/{id}", axum::routing::get(get_offer).post(put_offer))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let h = Harness {
        fake,
        url: format!("http://{addr}"),
        _server: server,
    };
    eventually("the agent to reach the catalog", || {
        plan(&h) == Some(json!({"cpu": "4"}))
    })
    .await;
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

/// A log written by a `tracing` subscriber, read back by the test.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Log {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Log {
    type Writer = Log;
    fn make_writer(&'a self) -> Log {
        self.clone()
    }
}

/// A reader that is unavailable for its first `failures` reads.
struct Flaky {
    inner: MemorySource,
    failures: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl ResourceReader for Flaky {
    async fn read(&self, originator: &str) -> Result<ResourceList, ReadError> {
        use std::sync::atomic::Ordering;
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(ReadError::Unavailable("upstream is unreachable".into()));
        }
        self.inner.read(originator).await
    }
    fn subscribe(&self) -> resource_reader::NotificationStream {
        self.inner.subscribe()
    }
    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        self.inner.remove_cluster(cluster).await
    }
}

#[tokio::test]
async fn an_unreadable_chain_is_retried_until_it_answers() {
    let h = fake_catalog().await;
    let reader = Flaky {
        inner: MemorySource::new(list(&[("cpu", "4")])),
        failures: 4.into(),
    };
    let client = catalog_session(
        h.url.parse().unwrap(),
        credentials(SECRET),
        None,
        Duration::from_secs(5),
    )
    .unwrap();
    let agent = Agent::new(Arc::new(reader), client, target(true), options());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(agent.run(async {
        let _ = stopped.await;
    }));
    // No notification comes: the retries alone get it there.
    eventually("the plan to be published once the chain answers", || {
        plan(&h) == Some(json!({"cpu": "4"}))
    })
    .await;
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_rejected_plan_is_not_retried_until_the_next_change() {
    let h = fake_catalog().await;
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let agent = start(&h, &reader, SECRET, target(true), options());
    eventually("the offer to be created", || writes(&h) == 1).await;

    reader.set(list(&[("cpu", "4"), ("bad", "1")]));
    eventually("the write to be refused", || {
        h.fake.lock().unwrap().post_attempts == 2
    })
    .await;
    // Time for a retry to happen if there were one (the backoff tops out
    // at 200 ms); the counts below, taken after a later write, prove none did.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !agent.task.is_finished(),
        "a refused plan stopped the agent"
    );

    reader.set(list(&[("cpu", "1")]));
    eventually("the next change to be published", || {
        plan(&h) == Some(json!({"cpu": "1"}))
    })
    .await;
    assert_eq!(
        h.fake.lock().unwrap().post_attempts,
        3,
        "a refused plan was retried without a change"
    );
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn bad_credentials_stop_the_agent() {
    let h = fake_catalog().await;
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let agent = start(&h, &reader, "wrong", target(true), options());
    let result = tokio::time::timeout(Duration::from_secs(10), agent.task)
        .await
        .unwrap()
        .unwrap();
    match result {
        Err(SyncError::Catalog(CatalogError::BadCredentials {
            cluster_id,
            message,
        })) => {
            assert_eq!(cluster_id, "c1");
            assert!(message.contains("do not match"), "{message}");
        }
        other => panic!("expected refused credentials, got {other:?}"),
    }
    assert_eq!(writes(&h), 0);
}

#[tokio::test]
async fn someone_elses_offer_stops_the_agent() {
    let h = fake_catalog().await;
    h.fake.lock().unwrap().offers.insert(
        "live".into(),
        json!({"id": "live", "name": "Theirs", "type": "t", "description": "", "clusterID": "c2",
               "clusterName": "two", "version": 1,
               "plans": {"small": {"name": "s", "cost": "1", "resources": {"cpu": "1"}}}}),
    );
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let agent = start(&h, &reader, SECRET, target(true), options());
    let result = tokio::time::timeout(Duration::from_secs(10), agent.task)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(result, Err(SyncError::Catalog(CatalogError::Forbidden(_)))),
        "{result:?}"
    );
    assert_eq!(h.fake.lock().unwrap().offers["live"]["name"], "Theirs");
}

#[tokio::test]
async fn a_missing_offer_stops_the_agent_unless_it_may_create_it() {
    let h = fake_catalog().await;
    let reader = MemorySource::new(list(&[("cpu", "4")]));
    let agent = start(&h, &reader, SECRET, target(false), options());
    let result = tokio::time::timeout(Duration::from_secs(10), agent.task)
        .await
        .unwrap()
        .unwrap();
    let Err(SyncError::Offer(e)) = result else {
        panic!("expected a missing offer, got {result:?}");
    };
    assert!(e.to_string().contains("--plan-cost"), "{e}");
    assert_eq!(writes(&h), 0);
}
