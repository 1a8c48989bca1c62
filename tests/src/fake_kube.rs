//! A fake Kubernetes API server speaking the real list/watch protocol for
//! Nodes and Pods, enough for client-go informers and kube-rs watchers:
//!
//! - `GET /api/v1/{nodes,pods}` lists (`kind: NodeList`, a collection
//!   `metadata.resourceVersion`, every item carrying its own);
//! - `GET …?watch=true&resourceVersion=N` streams newline-delimited
//!   `{"type": "ADDED|MODIFIED|DELETED|BOOKMARK", "object": …}` events
//!   newer than N, then live ones, until `timeoutSeconds`.
//!
//! Tests change the world with [`FakeKube::apply`] / [`FakeKube::delete`]
//! and point the binary at it with [`FakeKube::write_kubeconfig`]. Every
//! request is counted, so a test can tell watching from polling.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
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
use tokio::sync::broadcast;

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

type ListQuery = Query<HashMap<String, String>>;

#[derive(Debug, Clone)]
struct Change {
    kind: Kind,
    rv: u64,
    kind_of_event: &'static str,
    object: Value,
}

#[derive(Default)]
struct World {
    rv: u64,
    objects: HashMap<Kind, BTreeMap<String, Value>>,
    history: Vec<Change>,
    lists: HashMap<Kind, usize>,
    watches: HashMap<Kind, usize>,
}

#[derive(Clone)]
struct Shared {
    world: Arc<Mutex<World>>,
    changes: broadcast::Sender<Change>,
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
        let mut world = self.shared.world.lock().unwrap();
        world.rv += 1;
        let rv = world.rv;
        let key = key_of(&object);
        object["apiVersion"] = json!("v1");
        object["kind"] = json!(kind.kind());
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        object["metadata"]["uid"] = json!(format!("uid-{key}"));
        let objects = world.objects.entry(kind).or_default();
        let event = if objects.insert(key, object.clone()).is_some() {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let change = Change {
            kind,
            rv,
            kind_of_event: event,
            object,
        };
        world.history.push(change.clone());
        let _ = self.shared.changes.send(change);
    }

    /// Delete an object (DELETED), by `name` or `namespace/name`.
    pub fn delete(&self, kind: Kind, key: &str) {
        let mut world = self.shared.world.lock().unwrap();
        world.rv += 1;
        let rv = world.rv;
        let Some(mut object) = world.objects.entry(kind).or_default().remove(key) else {
            return;
        };
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let change = Change {
            kind,
            rv,
            kind_of_event: "DELETED",
            object,
        };
        world.history.push(change.clone());
        let _ = self.shared.changes.send(change);
    }

    /// How many list calls were made for `kind`.
    pub fn lists(&self, kind: Kind) -> usize {
        self.shared
            .world
            .lock()
            .unwrap()
            .lists
            .get(&kind)
            .copied()
            .unwrap_or(0)
    }

    /// How many watch calls were made for `kind`.
    pub fn watches(&self, kind: Kind) -> usize {
        self.shared
            .world
            .lock()
            .unwrap()
            .watches
            .get(&kind)
            .copied()
            .unwrap_or(0)
    }
}

fn key_of(object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

async fn handle(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
    kind: Kind,
) -> Response {
    if query.get("watch").map(String::as_str) == Some("true") {
        return watch(shared, query, kind);
    }
    let mut world = shared.world.lock().unwrap();
    *world.lists.entry(kind).or_default() += 1;
    let items: Vec<Value> = world
        .objects
        .get(&kind)
        .map(|o| o.values().cloned().collect())
        .unwrap_or_default();
    let body = json!({
        "apiVersion": "v1",
        "kind": kind.list_kind(),
        "metadata": { "resourceVersion": world.rv.to_string() },
        "items": items,
    });
    axum::Json(body).into_response()
}

fn watch(shared: Shared, query: HashMap<String, String>, kind: Kind) -> Response {
    let since: u64 = query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let timeout: u64 = query
        .get("timeoutSeconds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(290);
    let bookmarks = query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    // Subscribe before reading the history, so nothing falls in between.
    let live = shared.changes.subscribe();
    let (backlog, current_rv) = {
        let mut world = shared.world.lock().unwrap();
        *world.watches.entry(kind).or_default() += 1;
        let backlog: Vec<Change> = world
            .history
            .iter()
            .filter(|c| c.kind == kind && c.rv > since)
            .cloned()
            .collect();
        (backlog, world.rv)
    };
    let last_sent = backlog.last().map(|c| c.rv).unwrap_or(since);
    let encode = |c: &Change| -> Result<Bytes, Infallible> {
        let line = json!({ "type": c.kind_of_event, "object": c.object });
        Ok(Bytes::from(format!("{line}\n")))
    };
    let mut first: Vec<Result<Bytes, Infallible>> = backlog.iter().map(encode).collect();
    if bookmarks {
        let bookmark = json!({
            "type": "BOOKMARK",
            "object": {
                "apiVersion": "v1",
                "kind": kind.kind(),
                "metadata": { "resourceVersion": current_rv.max(since).to_string() }
            }
        });
        first.push(Ok(Bytes::from(format!("{bookmark}\n"))));
    }
    let live = tokio_stream::wrappers::BroadcastStream::new(live).filter_map(move |c| {
        let item = match c {
            Ok(c) if c.kind == kind && c.rv > last_sent => Some(encode(&c)),
            _ => None,
        };
        std::future::ready(item)
    });
    let stream = futures::stream::iter(first)
        .chain(live)
        .take_until(tokio::time::sleep(Duration::from_secs(timeout)));
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
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
