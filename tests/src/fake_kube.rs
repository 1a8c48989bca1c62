//! A fake Kubernetes API server speaking the real list/watch protocol for
//! Nodes and Pods, enough for client-go informers and kube-rs watchers:
//!
//! - `GET /api/v1/{nodes,pods}` lists (`kind: NodeList`, a collection
//!   `metadata.resourceVersion`, every item carrying its own), in pages when
//!   asked (`limit`, `continue`): pages after the first are cut from the
//!   snapshot taken at the first, as etcd serves them, and carry its
//!   resourceVersion. [`FakeKube::set_max_page`] makes pages shorter than
//!   asked, as real servers may. An unknown or expired `continue` token
//!   answers 410 Gone (`reason: Expired`);
//! - `GET …?watch=true&resourceVersion=N` streams newline-delimited
//!   `{"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": …}` events
//!   newer than N, then live ones, until `timeoutSeconds` (without N, or
//!   with `0`, the current objects first, as ADDED). After
//!   [`FakeKube::compact`], a watch from an older resourceVersion gets what
//!   the real server sends: HTTP 200, one `ERROR` event holding a 410
//!   `Expired` Status, end of stream;
//! - `labelSelector` (`k=v`, `k==v`, `k!=v`, `k`, `!k`, comma = and) and
//!   `fieldSelector` (`=`, `==`, `!=` on `metadata.name`, and on Pods
//!   `metadata.namespace`, `spec.nodeName`, `status.phase`; on Nodes
//!   `spec.unschedulable`) filter lists and watches. Under a selector, an
//!   object that starts matching arrives as ADDED, one that stops matching
//!   as DELETED (carrying its new state), one that never matches not at
//!   all. Anything else is refused with a 400 Status, as the real server
//!   refuses unknown fields, so a test never passes on a selector the fake
//!   silently ignored.
//!
//! Tests change the world with [`FakeKube::apply`] / [`FakeKube::delete`]
//! and point the binary at it with [`FakeKube::write_kubeconfig`]. To make
//! a client lose its watch and come back too late, a test holds new watch
//! requests ([`FakeKube::hold_watches`]), ends the open streams
//! ([`FakeKube::end_watches`]), changes the world, compacts, and lets the
//! client back in. Every request is counted and recorded with its
//! selectors, so a test can tell watching from polling and see what the
//! client asked for.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

/// The watched kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Node,
    Pod,
}

impl Kind {
    fn list_kind(self) -> &'static str {
        match self {
            Kind::Node => "NodeList",
            Kind::Pod => "PodList",
        }
    }
    fn kind(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
        }
    }
}

/// A list or watch request as the fake received it (query parameters
/// decoded; `None` where absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    pub kind: Kind,
    pub watch: bool,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<String>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
}

type ListQuery = Query<HashMap<String, String>>;

#[derive(Debug, Clone)]
struct Change {
    kind: Kind,
    rv: u64,
    /// The object after the change (for a deletion, its last state).
    object: Value,
    /// The object before the change; `None` when it was created.
    previous: Option<Value>,
    deleted: bool,
}

/// The objects of one kind as they were at `rv`, for the pages after the
/// first of a list.
struct Snapshot {
    kind: Kind,
    rv: u64,
    objects: BTreeMap<String, Value>,
}

#[derive(Default, Clone, Copy)]
struct Counters {
    lists: usize,
    pages: usize,
    watches: usize,
    gone: usize,
    waiting: usize,
}

#[derive(Default)]
struct World {
    rv: u64,
    /// History at or below this resourceVersion is forgotten.
    compacted: u64,
    objects: HashMap<Kind, BTreeMap<String, Value>>,
    history: Vec<Change>,
    snapshots: HashMap<u64, Snapshot>,
    next_snapshot: u64,
    max_page: Option<usize>,
    counters: HashMap<Kind, Counters>,
    requests: Vec<SeenRequest>,
}

impl World {
    fn counters(&mut self, kind: Kind) -> &mut Counters {
        self.counters.entry(kind).or_default()
    }
}

#[derive(Clone)]
struct Shared {
    world: Arc<Mutex<World>>,
    changes: broadcast::Sender<Change>,
    /// `true` while new watch requests must wait.
    hold: watch::Sender<bool>,
    /// Bumped to end every open watch stream.
    epoch: watch::Sender<u64>,
}

impl Shared {
    /// The world, even if a test panicked while holding it.
    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake API server; stops when dropped.
pub struct FakeKube {
    shared: Shared,
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeKube {
    /// Serve on a free loopback port.
    pub async fn start() -> Result<Self> {
        let (changes, _) = broadcast::channel(1024);
        let shared = Shared {
            world: Arc::default(),
            changes,
            hold: watch::Sender::new(false),
            epoch: watch::Sender::new(0),
        };
        let app = Router::new()
            .route(
                "/api/v1/nodes",
                get(|s: State<Shared>, q: ListQuery| handle(s, q, Kind::Node)),
            )
            .route(
                "/api/v1/pods",
                get(|s: State<Shared>, q: ListQuery| handle(s, q, Kind::Pod)),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            shared,
            addr,
            server,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig pointing at this server, without credentials.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<()> {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             users:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\n",
            self.url()
        );
        std::fs::write(path, text).context("writing kubeconfig")
    }

    /// Create or replace an object (ADDED or MODIFIED).
    pub fn apply(&self, kind: Kind, mut object: Value) {
        let mut world = self.shared.world();
        world.rv += 1;
        let rv = world.rv;
        let key = key_of(&object);
        object["apiVersion"] = json!("v1");
        object["kind"] = json!(kind.kind());
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        object["metadata"]["uid"] = json!(format!("uid-{key}"));
        let previous = world
            .objects
            .entry(kind)
            .or_default()
            .insert(key, object.clone());
        let change = Change {
            kind,
            rv,
            object,
            previous,
            deleted: false,
        };
        world.history.push(change.clone());
        let _ = self.shared.changes.send(change);
    }

    /// Delete an object (DELETED), by `name` or `namespace/name`.
    pub fn delete(&self, kind: Kind, key: &str) {
        let mut world = self.shared.world();
        let Some(previous) = world.objects.entry(kind).or_default().remove(key) else {
            return;
        };
        world.rv += 1;
        let rv = world.rv;
        let mut object = previous.clone();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let change = Change {
            kind,
            rv,
            object,
            previous: Some(previous),
            deleted: true,
        };
        world.history.push(change.clone());
        let _ = self.shared.changes.send(change);
    }

    /// The current resourceVersion (of the last change).
    pub fn resource_version(&self) -> u64 {
        self.shared.world().rv
    }

    /// Return at most `max` items per list page, whatever `limit` asks
    /// (`None`: as many as asked). Lists without `limit` are never paged.
    pub fn set_max_page(&self, max: Option<usize>) {
        self.shared.world().max_page = max.filter(|m| *m > 0);
    }

    /// Forget the history up to now, as etcd compaction does: a watch from
    /// an older resourceVersion gets 410 Gone, and the continue tokens of
    /// lists begun before the last change expire.
    pub fn compact(&self) {
        let mut world = self.shared.world();
        let rv = world.rv;
        world.compacted = rv;
        world.history.clear();
        world.snapshots.retain(|_, s| s.rv >= rv);
    }

    /// End every open watch stream (the client sees the response end, as
    /// when the API server restarts or its timeout passes).
    pub fn end_watches(&self) {
        self.shared.epoch.send_modify(|e| *e += 1);
    }

    /// While `true`, new watch requests wait (unanswered) until it is
    /// `false` again; open streams are unaffected.
    pub fn hold_watches(&self, hold: bool) {
        self.shared.hold.send_replace(hold);
    }

    /// How many lists were begun for `kind` (requests without `continue`).
    pub fn lists(&self, kind: Kind) -> usize {
        self.counters(kind).lists
    }

    /// How many list pages were served for `kind`, the first included.
    pub fn pages(&self, kind: Kind) -> usize {
        self.counters(kind).pages
    }

    /// How many watch calls were made for `kind` (held ones included).
    pub fn watches(&self, kind: Kind) -> usize {
        self.counters(kind).watches
    }

    /// How many watch calls for `kind` are waiting under
    /// [`FakeKube::hold_watches`] now.
    pub fn waiting_watches(&self, kind: Kind) -> usize {
        self.counters(kind).waiting
    }

    /// How many 410 Gone answers were served for `kind` (expired watch
    /// resourceVersions and expired continue tokens).
    pub fn gone(&self, kind: Kind) -> usize {
        self.counters(kind).gone
    }

    /// Every list and watch request for `kind`, oldest first.
    pub fn requests(&self, kind: Kind) -> Vec<SeenRequest> {
        self.shared
            .world()
            .requests
            .iter()
            .filter(|r| r.kind == kind)
            .cloned()
            .collect()
    }

    fn counters(&self, kind: Kind) -> Counters {
        self.shared
            .world()
            .counters
            .get(&kind)
            .copied()
            .unwrap_or_default()
    }
}

fn key_of(object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// A `Status` object, the body of every API error.
fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

fn status_response(code: StatusCode, reason: &str, message: &str) -> Response {
    (code, axum::Json(status(code.as_u16(), reason, message))).into_response()
}

async fn handle(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
    kind: Kind,
) -> Response {
    let param = |name: &str| query.get(name).filter(|v| !v.is_empty()).cloned();
    let watching = query.get("watch").map(String::as_str) == Some("true");
    let seen = SeenRequest {
        kind,
        watch: watching,
        label_selector: param("labelSelector"),
        field_selector: param("fieldSelector"),
        limit: param("limit"),
        continue_token: param("continue"),
        resource_version: param("resourceVersion"),
    };
    shared.world().requests.push(seen.clone());
    let selector = match Selector::parse(
        kind,
        seen.label_selector.as_deref().unwrap_or(""),
        seen.field_selector.as_deref().unwrap_or(""),
    ) {
        Ok(selector) => selector,
        Err(message) => return status_response(StatusCode::BAD_REQUEST, "BadRequest", &message),
    };
    if watching {
        watch(shared, &query, seen, selector).await
    } else {
        list(&shared, seen, &selector)
    }
}

/// Continue tokens name a snapshot and the last key served, hex-encoded so
/// they are opaque and survive any query encoding.
fn continue_token(snapshot: u64, last_key: &str) -> String {
    let hex: String = last_key.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{snapshot}-{hex}")
}

fn parse_continue_token(token: &str) -> Option<(u64, String)> {
    let (id, hex) = token.split_once('-')?;
    let id = id.parse().ok()?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((id, String::from_utf8(bytes).ok()?))
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a \
    consistent list result. You can start a new list without the continue parameter.";

fn list(shared: &Shared, seen: SeenRequest, selector: &Selector) -> Response {
    let mut world = shared.world();
    let kind = seen.kind;
    let page_size = seen
        .limit
        .as_deref()
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .map(|l| world.max_page.map_or(l, |max| l.min(max)));
    // Where this page starts: a snapshot (continuing) or the world now.
    let continued = match seen.continue_token.as_deref() {
        None => None,
        Some(token) => match parse_continue_token(token)
            .filter(|(id, _)| world.snapshots.get(id).is_some_and(|s| s.kind == kind))
        {
            Some(position) => Some(position),
            None => {
                world.counters(kind).gone += 1;
                return status_response(StatusCode::GONE, "Expired", EXPIRED_CONTINUE);
            }
        },
    };
    let counters = world.counters(kind);
    counters.pages += 1;
    if continued.is_none() {
        counters.lists += 1;
    }
    let empty = BTreeMap::new();
    let (objects, rv) = match &continued {
        Some((id, _)) => match world.snapshots.get(id) {
            Some(snapshot) => (&snapshot.objects, snapshot.rv),
            None => (&empty, world.rv),
        },
        None => (world.objects.get(&kind).unwrap_or(&empty), world.rv),
    };
    let after = continued.as_ref().map(|(_, key)| key.as_str());
    let mut matching = objects
        .iter()
        .filter(|(key, _)| after.is_none_or(|after| key.as_str() > after))
        .filter(|(_, object)| selector.matches(object));
    let items: Vec<(&String, &Value)> = match page_size {
        Some(n) => matching.by_ref().take(n).collect(),
        None => matching.by_ref().collect(),
    };
    let remaining = matching.count();
    let last_key = items.last().map(|(key, _)| (*key).clone());
    let items: Vec<Value> = items.into_iter().map(|(_, o)| o.clone()).collect();
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if remaining > 0 {
        let id = match &continued {
            Some((id, _)) => *id,
            None => {
                // The first page of a list that needs more: keep what the
                // following pages are cut from.
                let snapshot = Snapshot {
                    kind,
                    rv,
                    objects: objects.clone(),
                };
                world.next_snapshot += 1;
                let id = world.next_snapshot;
                world.snapshots.insert(id, snapshot);
                id
            }
        };
        metadata["continue"] = json!(continue_token(id, &last_key.unwrap_or_default()));
        // Like the real server, which counts keys in etcd: not known under
        // a selector.
        if selector.is_empty() {
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    let body = json!({
        "apiVersion": "v1",
        "kind": kind.list_kind(),
        "metadata": metadata,
        "items": items,
    });
    axum::Json(body).into_response()
}

/// What a watcher under `selector` is told of `change`, if anything: the
/// event type is decided by whether the object matched before and after.
fn event_for(change: &Change, selector: &Selector) -> Option<&'static str> {
    let before = change
        .previous
        .as_ref()
        .is_some_and(|o| selector.matches(o));
    let after = !change.deleted && selector.matches(&change.object);
    match (before, after) {
        (false, true) => Some("ADDED"),
        (true, true) => Some("MODIFIED"),
        (true, false) => Some("DELETED"),
        (false, false) => None,
    }
}

fn line(event: &str, object: &Value) -> Result<Bytes, Infallible> {
    let line = json!({ "type": event, "object": object });
    Ok(Bytes::from(format!("{line}\n")))
}

/// Decrements the waiting-watch counter however the wait ends (the client
/// may hang up while held).
struct Waiting<'a> {
    shared: &'a Shared,
    kind: Kind,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut world = self.shared.world();
        let counters = world.counters(self.kind);
        counters.waiting = counters.waiting.saturating_sub(1);
    }
}

async fn watch(
    shared: Shared,
    query: &HashMap<String, String>,
    seen: SeenRequest,
    selector: Selector,
) -> Response {
    let kind = seen.kind;
    let since: Option<u64> = match seen.resource_version.as_deref() {
        None | Some("0") => None,
        Some(v) => match v.parse() {
            Ok(v) => Some(v),
            Err(_) => {
                let message = format!("invalid resource version: {v}");
                return status_response(StatusCode::BAD_REQUEST, "BadRequest", &message);
            }
        },
    };
    let timeout: u64 = query
        .get("timeoutSeconds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(290);
    let bookmarks = query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    shared.world().counters(kind).watches += 1;
    {
        let mut hold = shared.hold.subscribe();
        if *hold.borrow_and_update() {
            shared.world().counters(kind).waiting += 1;
            let _waiting = Waiting {
                shared: &shared,
                kind,
            };
            let _ = hold.wait_for(|held| !*held).await;
        }
    }
    // Subscribe before reading the world, so nothing falls in between.
    let live = shared.changes.subscribe();
    let mut ended = shared.epoch.subscribe();
    ended.borrow_and_update();
    let (first, last_sent) = {
        let mut world = shared.world();
        let current = world.rv;
        match since {
            Some(since) if since < world.compacted => {
                world.counters(kind).gone += 1;
                let message = format!("too old resource version: {since} ({})", world.compacted);
                let error = line("ERROR", &status(410, "Expired", &message));
                let body = Body::from_stream(futures::stream::iter([error]));
                return ok_stream(body);
            }
            Some(since) => {
                let backlog: Vec<Result<Bytes, Infallible>> = world
                    .history
                    .iter()
                    .filter(|c| c.kind == kind && c.rv > since)
                    .filter_map(|c| event_for(c, &selector).map(|e| line(e, &c.object)))
                    .collect();
                (backlog, current.max(since))
            }
            None => {
                let present: Vec<Result<Bytes, Infallible>> = world
                    .objects
                    .get(&kind)
                    .into_iter()
                    .flat_map(|o| o.values())
                    .filter(|o| selector.matches(o))
                    .map(|o| line("ADDED", o))
                    .collect();
                (present, current)
            }
        }
    };
    let mut first = first;
    if bookmarks {
        let bookmark = json!({
            "apiVersion": "v1",
            "kind": kind.kind(),
            "metadata": { "resourceVersion": last_sent.to_string() }
        });
        first.push(line("BOOKMARK", &bookmark));
    }
    // A watcher that fell behind the broadcast would miss events: end its
    // stream instead, so it re-watches from what it has seen.
    let live = tokio_stream::wrappers::BroadcastStream::new(live)
        .take_while(|c| std::future::ready(!matches!(c, Err(BroadcastStreamRecvError::Lagged(_)))))
        .filter_map(move |c| {
            let item = match c {
                Ok(c) if c.kind == kind && c.rv > last_sent => {
                    event_for(&c, &selector).map(|e| line(e, &c.object))
                }
                _ => None,
            };
            std::future::ready(item)
        });
    let stop = async move {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(timeout)) => {}
            _ = ended.changed() => {}
        }
    };
    let stream = futures::stream::iter(first).chain(live).take_until(stop);
    ok_stream(Body::from_stream(stream))
}

fn ok_stream(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// One requirement of a field selector: `field` (not) equal to `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    field: String,
    equal: bool,
    value: String,
}

/// A parsed `labelSelector` and `fieldSelector`; every requirement must
/// hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Selector {
    labels: Vec<LabelRequirement>,
    fields: Vec<FieldRequirement>,
}

fn valid_label_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
}

fn valid_label_value(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The fields each kind can be selected by (the real server's lists).
fn selectable_fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Node => &["metadata.name", "spec.unschedulable"],
        Kind::Pod => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "status.phase",
        ],
    }
}

impl Selector {
    fn parse(kind: Kind, labels: &str, fields: &str) -> Result<Self, String> {
        Ok(Self {
            labels: parse_label_selector(labels)?,
            fields: parse_field_selector(kind, fields)?,
        })
    }

    fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        let labels_match = self.labels.iter().all(|r| match r {
            LabelRequirement::Equals(k, v) => label(k) == Some(v.as_str()),
            // As in Kubernetes, an object without the label matches `!=`.
            LabelRequirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::NotExists(k) => label(k).is_none(),
        });
        labels_match
            && self
                .fields
                .iter()
                .all(|r| (field_value(object, &r.field) == r.value) == r.equal)
    }
}

/// A selectable field's value; absent fields are empty (`false` for
/// `spec.unschedulable`), as the real server indexes them.
fn field_value(object: &Value, field: &str) -> String {
    let path = match field {
        "metadata.name" => &object["metadata"]["name"],
        "metadata.namespace" => &object["metadata"]["namespace"],
        "spec.nodeName" => &object["spec"]["nodeName"],
        "status.phase" => &object["status"]["phase"],
        "spec.unschedulable" => {
            return object["spec"]["unschedulable"]
                .as_bool()
                .unwrap_or(false)
                .to_string()
        }
        _ => &Value::Null,
    };
    path.as_str().unwrap_or_default().to_string()
}

fn parse_label_selector(text: &str) -> Result<Vec<LabelRequirement>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|term| {
            let term = term.trim();
            let bad = || format!("unable to parse requirement: {term:?}");
            let requirement = if let Some(key) = term.strip_prefix('!') {
                LabelRequirement::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelRequirement::NotEquals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                LabelRequirement::Equals(k.trim().to_string(), v.trim().to_string())
            } else {
                LabelRequirement::Exists(term.to_string())
            };
            let (key, value) = match &requirement {
                LabelRequirement::Equals(k, v) | LabelRequirement::NotEquals(k, v) => {
                    (k, v.as_str())
                }
                LabelRequirement::Exists(k) | LabelRequirement::NotExists(k) => (k, ""),
            };
            // Set-based terms (`in`, `notin`) land here as bad keys: the
            // fake refuses what it does not implement.
            if valid_label_key(key) && valid_label_value(value) {
                Ok(requirement)
            } else {
                Err(bad())
            }
        })
        .collect()
}

fn parse_field_selector(kind: Kind, text: &str) -> Result<Vec<FieldRequirement>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|term| {
            let term = term.trim();
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !selectable_fields(kind).contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            Ok(FieldRequirement {
                field: field.to_string(),
                equal,
                value: value.trim().to_string(),
            })
        })
        .collect()
}

/// A Node: `ready` sets the Ready condition; `virtual_node` labels it as a
/// Liqo virtual node.
pub fn node(name: &str, ready: bool, virtual_node: bool, cpu: &str, memory: &str) -> Value {
    let labels = if virtual_node {
        json!({ "liqo.io/type": "virtual-node", "kubernetes.io/hostname": name })
    } else {
        json!({ "kubernetes.io/hostname": name })
    };
    json!({
        "metadata": { "name": name, "labels": labels },
        "spec": {},
        "status": {
            "capacity": { "cpu": cpu, "memory": memory, "pods": "110" },
            "allocatable": { "cpu": cpu, "memory": memory, "pods": "110" },
            "conditions": [
                { "type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory" },
                { "type": "Ready", "status": if ready { "True" } else { "Unknown" },
                  "reason": if ready { "KubeletReady" } else { "NodeStatusUnknown" } }
            ]
        }
    })
}

/// A Pod in `default` with one container requesting `cpu` and `memory`.
pub fn pod(name: &str, node: &str, phase: &str, labels: Value, cpu: &str, memory: &str) -> Value {
    json!({
        "metadata": { "name": name, "namespace": "default", "labels": labels },
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "main",
                "image": "registry.k8s.io/pause:3.9",
                "resources": { "requests": { "cpu": cpu, "memory": memory } }
            }]
        },
        "status": { "phase": phase }
    })
}

#[cfg(test)]
mod tests {
    //! The fake's own protocol, over HTTP: selectors, pages, 410s, held
    //! and ended watches.

    use std::time::Instant;

    use super::*;

    fn object(labels: Value) -> Value {
        json!({ "metadata": { "name": "p", "namespace": "default", "labels": labels } })
    }

    #[test]
    fn label_selectors_parse_and_match() {
        let sel = |s: &str| Selector::parse(Kind::Pod, s, "").unwrap();
        let shadow = sel("liqo.io/shadowPod!=true");
        assert!(
            shadow.matches(&object(json!({}))),
            "!= matches an absent label"
        );
        assert!(shadow.matches(&object(json!({"liqo.io/shadowPod": "false"}))));
        assert!(!shadow.matches(&object(json!({"liqo.io/shadowPod": "true"}))));
        for equal in ["a=1", "a==1", " a = 1 "] {
            assert!(sel(equal).matches(&object(json!({"a": "1"}))), "{equal}");
            assert!(!sel(equal).matches(&object(json!({"a": "2"}))), "{equal}");
            assert!(!sel(equal).matches(&object(json!({}))), "{equal}");
        }
        assert!(sel("a").matches(&object(json!({"a": ""}))));
        assert!(!sel("a").matches(&object(json!({"b": "1"}))));
        assert!(sel("!a").matches(&object(json!({"b": "1"}))));
        assert!(!sel("!a").matches(&object(json!({"a": "1"}))));
        let both = sel("a=1,!b");
        assert!(both.matches(&object(json!({"a": "1"}))));
        assert!(!both.matches(&object(json!({"a": "1", "b": "x"}))));
        assert!(!both.matches(&object(json!({"b": "x"}))));
        assert!(sel("").is_empty() && sel("").matches(&object(json!({}))));
        for bad in ["a in (x,y)", "=x", "a=b c", "a=1,", "!", "a!=b!c"] {
            assert!(
                Selector::parse(Kind::Pod, bad, "").is_err(),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn field_selectors_parse_and_match() {
        let running = Selector::parse(Kind::Pod, "", "status.phase=Running").unwrap();
        let pod_on = |node: &str, phase: &str| pod("p", node, phase, json!({}), "1", "1Gi");
        assert!(running.matches(&pod_on("n1", "Running")));
        assert!(!running.matches(&pod_on("n1", "Succeeded")));
        let elsewhere =
            Selector::parse(Kind::Pod, "", "spec.nodeName!=n1,metadata.name==p").unwrap();
        assert!(elsewhere.matches(&pod_on("n2", "Running")));
        assert!(!elsewhere.matches(&pod_on("n1", "Running")));
        let unscheduled = Selector::parse(Kind::Pod, "", "spec.nodeName=").unwrap();
        assert!(unscheduled.matches(&json!({ "metadata": { "name": "q" }, "spec": {} })));
        let schedulable = Selector::parse(Kind::Node, "", "spec.unschedulable=false").unwrap();
        assert!(schedulable.matches(&node("n", true, false, "1", "1Gi")));
        assert_eq!(
            Selector::parse(Kind::Pod, "", "spec.foo=x"),
            Err("field label not supported: spec.foo".to_string())
        );
        assert!(Selector::parse(Kind::Node, "", "status.phase=Running").is_err());
        assert!(Selector::parse(Kind::Pod, "", "status.phase").is_err());
    }

    async fn get(kube: &FakeKube, path: &str) -> (u16, Value) {
        let response = crate::http::async_client(Duration::from_secs(10))
            .get(format!("{}{path}", kube.url()))
            .send()
            .await
            .unwrap();
        let code = response.status().as_u16();
        (code, response.json().await.unwrap())
    }

    fn names(list: &Value) -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Follow `continue` from `first` to the end: every name, and the
    /// resourceVersion of every page.
    async fn follow(kube: &FakeKube, query: &str, first: Value) -> (Vec<String>, Vec<String>) {
        let mut page = first;
        let (mut all, mut rvs) = (Vec::new(), Vec::new());
        loop {
            all.extend(names(&page));
            rvs.push(
                page["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
            let Some(token) = page["metadata"]["continue"].as_str() else {
                return (all, rvs);
            };
            let (code, next) = get(kube, &format!("/api/v1/pods?{query}&continue={token}")).await;
            assert_eq!(code, 200, "{next}");
            page = next;
        }
    }

    /// An open watch response, read line by line.
    struct Events {
        response: reqwest::Response,
        buffer: Vec<u8>,
    }

    impl Events {
        async fn open(kube: &FakeKube, path: &str) -> Self {
            let response = crate::http::async_client(Duration::from_secs(30))
                .get(format!("{}{path}", kube.url()))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            Self {
                response,
                buffer: Vec::new(),
            }
        }

        /// The next event; `None` when the stream ends. Panics if nothing
        /// comes within 10 s.
        async fn next(&mut self) -> Option<Value> {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = self.buffer.drain(..=end).collect();
                    return Some(serde_json::from_slice(&line).unwrap());
                }
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, self.response.chunk()).await {
                    Err(_) => panic!("no watch event within 10 s"),
                    Ok(chunk) => match chunk.unwrap() {
                        Some(bytes) => self.buffer.extend_from_slice(&bytes),
                        None => {
                            assert!(self.buffer.is_empty(), "a partial line");
                            return None;
                        }
                    },
                }
            }
        }

        /// The next event's type and object name.
        async fn next_named(&mut self) -> (String, String) {
            let event = self.next().await.expect("an event, not the end");
            (
                event["type"].as_str().unwrap().to_string(),
                event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        }
    }

    async fn eventually(what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn lists_page_from_a_consistent_snapshot() {
        let kube = FakeKube::start().await.unwrap();
        for i in 0..5 {
            let name = format!("p{i}");
            kube.apply(
                Kind::Pod,
                pod(&name, "n1", "Running", json!({}), "1", "1Gi"),
            );
        }
        // No limit: everything at once, whatever the cap.
        kube.set_max_page(Some(2));
        let (code, all) = get(&kube, "/api/v1/pods").await;
        assert_eq!(code, 200);
        assert_eq!(names(&all).len(), 5);
        assert!(all["metadata"]["continue"].is_null());

        let (code, first) = get(&kube, "/api/v1/pods?limit=500").await;
        assert_eq!(code, 200, "{first}");
        assert_eq!(first["kind"], "PodList");
        assert_eq!(names(&first), ["p0", "p1"], "capped at 2");
        assert_eq!(first["metadata"]["remainingItemCount"], 3);
        // The world changes between pages; the list does not.
        kube.apply(
            Kind::Pod,
            pod("p2", "n1", "Succeeded", json!({}), "1", "1Gi"),
        );
        kube.delete(Kind::Pod, "default/p3");
        kube.apply(Kind::Pod, pod("p9", "n1", "Running", json!({}), "1", "1Gi"));
        let (listed, rvs) = follow(&kube, "limit=500", first).await;
        assert_eq!(listed, ["p0", "p1", "p2", "p3", "p4"]);
        assert_eq!(rvs, ["5", "5", "5"], "every page carries the snapshot's");
        assert_eq!(kube.pages(Kind::Pod), 4);
        assert_eq!(kube.lists(Kind::Pod), 2);

        // Under a selector a fresh list sees the changes, without a count.
        let query = "limit=2&fieldSelector=status.phase%3DRunning";
        let (code, first) = get(&kube, &format!("/api/v1/pods?{query}")).await;
        assert_eq!(code, 200, "{first}");
        assert!(first["metadata"]["continue"].is_string());
        assert!(first["metadata"]["remainingItemCount"].is_null());
        let (listed, rvs) = follow(&kube, query, first).await;
        assert_eq!(listed, ["p0", "p1", "p4", "p9"]);
        assert!(rvs.iter().all(|rv| rv == "8"), "{rvs:?}");

        // A token older than a compaction, or one never issued: 410.
        let (_, first) = get(&kube, "/api/v1/pods?limit=1").await;
        let token = first["metadata"]["continue"].as_str().unwrap().to_string();
        kube.apply(
            Kind::Pod,
            pod("p10", "n1", "Running", json!({}), "1", "1Gi"),
        );
        kube.compact();
        for token in [token.as_str(), "bogus", "99-00"] {
            let (code, body) = get(&kube, &format!("/api/v1/pods?limit=1&continue={token}")).await;
            assert_eq!(code, 410, "{body}");
            assert_eq!(body["kind"], "Status");
            assert_eq!(body["status"], "Failure");
            assert_eq!(body["reason"], "Expired");
            assert_eq!(body["code"], 410);
        }
        assert_eq!(kube.gone(Kind::Pod), 3);
    }

    #[tokio::test]
    async fn watches_under_selectors_see_objects_join_and_leave() {
        let kube = FakeKube::start().await.unwrap();
        let shadow = json!({"liqo.io/shadowPod": "true"});
        kube.apply(Kind::Pod, pod("a", "n1", "Running", json!({}), "1", "1Gi"));
        kube.apply(
            Kind::Pod,
            pod("s", "n1", "Running", shadow.clone(), "1", "1Gi"),
        );
        let selectors = "labelSelector=liqo.io%2FshadowPod%21%3Dtrue\
                         &fieldSelector=status.phase%3DRunning";
        let (code, list) = get(&kube, &format!("/api/v1/pods?{selectors}")).await;
        assert_eq!(code, 200, "{list}");
        assert_eq!(names(&list), ["a"]);
        let rv = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        let path = format!("/api/v1/pods?watch=true&resourceVersion={rv}&{selectors}");
        let mut live = Events::open(&kube, &path).await;

        kube.apply(Kind::Pod, pod("b", "n1", "Pending", json!({}), "1", "1Gi"));
        kube.apply(Kind::Pod, pod("b", "n1", "Running", json!({}), "1", "1Gi"));
        kube.apply(Kind::Pod, pod("b", "n1", "Running", json!({}), "2", "1Gi"));
        kube.apply(
            Kind::Pod,
            pod("b", "n1", "Succeeded", json!({}), "2", "1Gi"),
        );
        kube.delete(Kind::Pod, "default/b");
        kube.apply(Kind::Pod, pod("s", "n1", "Running", shadow, "2", "1Gi"));
        kube.apply(Kind::Pod, pod("s", "n1", "Running", json!({}), "2", "1Gi"));
        kube.delete(Kind::Pod, "default/a");
        let expected = [
            ("ADDED", "b"),
            ("MODIFIED", "b"),
            ("DELETED", "b"),
            ("ADDED", "s"),
            ("DELETED", "a"),
        ];
        // The same story live and replayed from history.
        let mut replay = Events::open(&kube, &path).await;
        for events in [&mut live, &mut replay] {
            for (kind, name) in expected {
                assert_eq!(events.next_named().await, (kind.into(), name.into()));
            }
        }
        // The DELETED of a pod that finished carries its new state.
        let mut again = Events::open(&kube, &path).await;
        let left = loop {
            let event = again.next().await.unwrap();
            if event["type"] == "DELETED" {
                break event;
            }
        };
        assert_eq!(left["object"]["status"]["phase"], "Succeeded");

        // Without a resourceVersion: what matches now, as ADDED.
        let mut fresh = Events::open(&kube, &format!("/api/v1/pods?watch=true&{selectors}")).await;
        assert_eq!(fresh.next_named().await, ("ADDED".into(), "s".into()));
        kube.apply(Kind::Pod, pod("c", "n1", "Running", json!({}), "1", "1Gi"));
        assert_eq!(fresh.next_named().await, ("ADDED".into(), "c".into()));

        let (code, body) = get(&kube, "/api/v1/pods?watch=true&fieldSelector=spec.foo%3Dx").await;
        assert_eq!(code, 400);
        assert_eq!(
            body,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "reason": "BadRequest", "code": 400,
                   "message": "field label not supported: spec.foo"})
        );
        let seen = kube.requests(Kind::Pod);
        assert!(seen.iter().any(|r| r.watch
            && r.label_selector.as_deref() == Some("liqo.io/shadowPod!=true")
            && r.field_selector.as_deref() == Some("status.phase=Running")
            && r.resource_version.as_deref() == Some(rv.as_str())));
        assert!(kube.requests(Kind::Node).is_empty());
    }

    #[tokio::test]
    async fn compacted_history_is_410_and_watches_can_be_held_and_ended() {
        let kube = FakeKube::start().await.unwrap();
        kube.apply(Kind::Node, node("n1", true, false, "1", "1Gi"));
        let mut open = Events::open(&kube, "/api/v1/nodes?watch=true&resourceVersion=1").await;
        kube.end_watches();
        assert!(open.next().await.is_none(), "ended");

        kube.hold_watches(true);
        let url = format!("{}/api/v1/nodes?watch=true&resourceVersion=1", kube.url());
        let held = tokio::spawn(async move {
            let client = crate::http::async_client(Duration::from_secs(30));
            let response = client.get(url).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        });
        eventually("the watch waits", || kube.waiting_watches(Kind::Node) == 1).await;
        kube.apply(Kind::Node, node("n2", true, false, "1", "1Gi"));
        kube.compact();
        assert!(!held.is_finished(), "answered while held");
        kube.hold_watches(false);
        let (code, body) = held.await.unwrap();
        assert_eq!(code, 200, "the real server answers 410 inside the stream");
        let lines: Vec<Value> = body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines,
            [json!({"type": "ERROR", "object": {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "reason": "Expired", "code": 410,
                "message": "too old resource version: 1 (2)"}})]
        );
        assert_eq!(kube.gone(Kind::Node), 1);
        assert_eq!(kube.waiting_watches(Kind::Node), 0);

        // From the compaction point on, watching works again.
        let mut current = Events::open(&kube, "/api/v1/nodes?watch=true&resourceVersion=2").await;
        kube.apply(Kind::Node, node("n3", true, false, "1", "1Gi"));
        assert_eq!(current.next_named().await, ("ADDED".into(), "n3".into()));
        assert_eq!(kube.gone(Kind::Node), 1);
        assert_eq!(kube.watches(Kind::Node), 3);
    }
}
