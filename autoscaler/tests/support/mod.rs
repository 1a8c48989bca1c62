//! What the crate's tests share: the Kubernetes API test server with the
//! MarketAutoscaler and Purchase CRDs and the shipped RBAC, a client
//! authenticated as the autoscaler's ServiceAccount, and a stand-in
//! catalog serving a fixed feed snapshot (`GET /subscribe`, WebSocket)
//! and contract listing (`GET /contracts`) — the two reads the autoscaler
//! makes of a catalog.

#![allow(dead_code)] // each test file uses its part

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use kube::{Client, Config};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;

pub const NS: &str = "liqo";
pub const SERVED: &str = "team-a";
pub const SA: &str = "system:serviceaccount:liqo:market-autoscaler";

/// The test API server with both CRDs, the served namespace and the
/// shipped RBAC (deploy/kubernetes/market-autoscaler/rbac.yaml, its Roles
/// in `liqo` as the kustomization puts them).
pub async fn cluster() -> KubeApiServer {
    let kube = KubeApiServer::start().await.expect("server");
    let crd = |c| serde_yaml_ng::to_string(&c).expect("yaml");
    kube.register_crd_yaml(&crd(market_autoscaler::model::crd()))
        .expect("MarketAutoscaler CRD");
    kube.register_crd_yaml(&crd(purchase_controller::model::crd()))
        .expect("Purchase CRD");
    for ns in [NS, SERVED] {
        kube.apply(
            ("", "namespaces"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/kubernetes/market-autoscaler/rbac.yaml"
    ))
    .expect("shipped rbac.yaml");
    let objects: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .filter_map(|d| serde::Deserialize::deserialize(d).ok())
        .map(|mut o: Value| {
            if matches!(o["kind"].as_str(), Some("Role" | "RoleBinding"))
                && o["metadata"]["namespace"].is_null()
            {
                o["metadata"]["namespace"] = json!(NS);
            }
            o
        })
        .collect();
    assert!(kube.load_rbac(&objects) >= 4, "the shipped RBAC loads");
    kube
}

/// A client authenticated as `user`.
pub fn client_as(kube: &KubeApiServer, token: String) -> Client {
    let mut config = Config::new(kube.url().parse().expect("url"));
    config.auth_info.token = Some(token.into());
    Client::try_from(config).expect("client")
}

/// The autoscaler's own client (its ServiceAccount, under the shipped RBAC).
pub fn autoscaler_client(kube: &KubeApiServer) -> Client {
    client_as(kube, kube.token_for(SA))
}

/// A person's read-only client (what `explain` needs): get and list on
/// the kinds it reads, get on Secrets in [`NS`].
pub fn reader_client(kube: &KubeApiServer) -> Client {
    let user = "reader";
    kube.load_rbac(&[
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "reader"},
               "rules": [
                   {"apiGroups": [""], "resources": ["pods", "nodes", "namespaces"], "verbs": ["get", "list"]},
                   {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list"]},
                   {"apiGroups": ["broker.liqo-broker.io"], "resources": ["marketautoscalers", "purchases"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "reader"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
               "subjects": [{"kind": "User", "name": user}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "reader-secrets", "namespace": NS},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "reader-secrets", "namespace": NS},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader-secrets"},
               "subjects": [{"kind": "User", "name": user}]}),
    ]);
    client_as(kube, kube.token_for(user))
}

/// The tests' own (administrator) client.
pub fn admin_client(kube: &KubeApiServer) -> Client {
    client_as(kube, kube.admin_token().to_string())
}

/// The catalog token Secret beside the MarketAutoscaler.
pub fn token_secret(kube: &KubeApiServer) {
    kube.apply(
        ("", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "catalog-token", "namespace": NS},
               "stringData": {"token": "consumer-token"}, "data": {"token": "Y29uc3VtZXItdG9rZW4="}}),
    );
}

/// A MarketAutoscaler `name` on `catalog` serving [`SERVED`] (budget 10/h).
pub fn autoscaler(name: &str, catalog: &str) -> Value {
    json!({
        "apiVersion": "broker.liqo-broker.io/v1alpha1",
        "kind": "MarketAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "catalogURL": catalog,
            "credentialsSecretRef": {"name": "catalog-token", "key": "token"},
            "pods": {"namespaces": [SERVED]},
            "limits": {"currency": "EUR", "maxSpendPerHour": "10"},
            "scaleDown": {"policy": "Never"}
        }
    })
}

/// A pod in [`SERVED`] the scheduler found no room for (bare: an owner
/// that does not exist would be collected by the server's garbage
/// collector).
pub fn waiting_pod(name: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": SERVED},
        "spec": {"containers": [{"name": "c", "image": "app",
                                 "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                   "reason": "Unschedulable", "message": "0/1 nodes are available: 1 Insufficient cpu."}]}
    })
}

/// An offer of `provider` with one plan of `cpu` at `cost` EUR per hour.
pub fn offer(id: &str, provider: &str, plan: &str, cpu: &str, cost: &str) -> Value {
    json!({
        "id": id, "name": id, "type": "compute", "description": "",
        "plans": {plan: {"name": plan, "cost": cost, "resources": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}},
        "labels": {}, "clusterID": provider, "clusterName": provider,
        "pricing": {"currency": "EUR", "per": "hour"},
        "createdAt": "2026-12-01T00:00:00Z", "updatedAt": "2026-12-01T00:00:00Z", "version": 1
    })
}

/// The stand-in catalog.
pub struct Catalog {
    pub url: String,
    offers: Arc<Mutex<Vec<Value>>>,
    /// Requests seen (request lines).
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl Catalog {
    pub async fn start(offers: Vec<Value>) -> Catalog {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let offers = Arc::new(Mutex::new(offers));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (o, r) = (offers.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, o.clone(), r.clone()));
            }
        });
        Catalog {
            url,
            offers,
            requests,
        }
    }
}

async fn serve(
    mut stream: TcpStream,
    offers: Arc<Mutex<Vec<Value>>>,
    requests: Arc<Mutex<Vec<String>>>,
) {
    let mut peek = [0u8; 64];
    let Ok(n) = stream.peek(&mut peek).await else {
        return;
    };
    let line = String::from_utf8_lossy(&peek[..n]).to_string();
    requests
        .lock()
        .unwrap()
        .push(line.lines().next().unwrap_or_default().to_string());
    if line.starts_with("GET /subscribe") {
        let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
            return;
        };
        let snapshot =
            json!({"type": "snapshot", "seq": 1, "offers": offers.lock().unwrap().clone()});
        if ws
            .send(Message::Text(snapshot.to_string().into()))
            .await
            .is_err()
        {
            return;
        }
        while let Some(Ok(_)) = ws.next().await {}
        return;
    }
    // One HTTP/1.1 request: read its head, answer, close.
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let (status, body) = if line.starts_with("GET /contracts") {
        ("200 OK", "[]".to_string())
    } else {
        ("404 Not Found", r#"{"error":"not found"}"#.to_string())
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nETag: \"1\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Poll `check` until it gives `Some`, at most `within`.
pub async fn eventually<T>(
    within: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
