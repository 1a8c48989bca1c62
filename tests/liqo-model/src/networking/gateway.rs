//! The gateways of Liqo v1.2.0, operator and pod together, for
//! GatewayServers and GatewayClients alike:
//! - the operators, `pkg/liqo-controller-manager/networking/external-network/server-operator/server_controller.go`
//!   and `client-operator/client_controller.go` (with the `wireguard/`
//!   controllers they hand the work to): a GatewayServer gets
//!   `status.endpoint` (address, port, protocol of its Service,
//!   `wggatewayserver_controller.go:319-431`, SO:255-275) and both kinds
//!   `status.secretRef`, the Secret holding the gateway's keys
//!   (`wggatewayserver_controller.go:434-449`);
//! - the gateway pod, `pkg/gateway/tunnel/wireguard/`: its keys in the
//!   Secret `gw-<gateway>` (`k8s.go` `CreateKeysSecret`: `privateKey`,
//!   `publicKey`, labelled `liqo.io/remote-cluster-id` and
//!   `networking.liqo.io/gateway-resource: "true"`); on a PublicKey of its
//!   namespace labelled with its peer's cluster ID
//!   (`publickeys_controller.go:65-113`), the tunnel configured with that
//!   key and the Connection `gw-<gateway>` made, `Connecting` at first
//!   (`k8s.go` `EnsureConnection`); the connection checker
//!   (`pkg/gateway/connection/`) then sets `Connected`, or `Error` when a
//!   tunnel that was up is lost (`k8s.go` `UpdateConnectionStatus`).
//!
//! The gateway pod, from Liqo's template, is [`super::gateway_pod`]'s: a
//! gateway whose pod the cluster refuses (Pod Security Admission) gets no
//! keys, tunnel or Connection.
//!
//! Not modelled: the Wg* template objects and Services (the endpoint
//! is an address of the [`super::underlay`], the port the spec's), the
//! internal endpoint, latency. The keys are 32 random bytes and the public
//! key, which WireGuard derives by Curve25519, is their SHA-256 here: no
//! tunnel is built, so only equality matters.

use base64::Engine;
use futures::stream::{self, BoxStream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Client, ResourceExt};
use ring::rand::SecureRandom;
use serde_json::{json, Value};
use sha2::Digest;
use tokio_stream::wrappers::WatchStream;

use super::underlay::{self, Side};
use super::{connections, public_keys, GATEWAY_RESOURCE};
use crate::consts::{self, REMOTE_CLUSTER_ID};
use crate::runner::{self, Key};
use crate::Error;

/// Which side of the tunnel a gateway is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Server,
    Client,
}

impl Mode {
    pub fn resource(self) -> ApiResource {
        match self {
            Mode::Server => super::gateway_servers(),
            Mode::Client => super::gateway_clients(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Server => "gateway-server",
            Mode::Client => "gateway-client",
        }
    }
}

/// The operators' and gateways' access (the chart's
/// `liqo-controller-manager` and `liqo-gateway` ClusterRoles, as far as
/// these objects go).
pub const RULES: &[crate::identity::Rule] = &[
    crate::identity::Rule::new(
        &["networking.liqo.io"],
        &[
            "gatewayservers",
            "gatewayservers/status",
            // Owner references with blockOwnerDeletion need them.
            "gatewayservers/finalizers",
            "gatewayclients",
            "gatewayclients/status",
            "gatewayclients/finalizers",
            "connections",
            "connections/status",
        ],
        crate::identity::ALL,
    ),
    crate::identity::Rule::new(
        &["networking.liqo.io"],
        &["publickeies"],
        crate::identity::READ,
    ),
    crate::identity::Rule::new(&[""], &["secrets"], crate::identity::ALL),
];

/// Run the gateways of `mode` on `client` until the task is dropped;
/// `cluster` tells this cluster's gateways apart from others' on the
/// underlay (the API server's URL).
pub async fn run(client: Client, mode: Mode, cluster: String) {
    let gateways: Api<DynamicObject> = Api::all_with(client.clone(), &mode.resource());
    let own = runner::keys(runner::touched(gateways.clone(), ""), |g| Some(Key::of(&g)));
    // The PublicKey controller's trigger (publickeys_controller.go:97-113):
    // the gateways of the key's namespace for the peer it names.
    let keys: Api<DynamicObject> = Api::all_with(client.clone(), &public_keys());
    let by_key = runner::keys_via(
        runner::touched(keys, REMOTE_CLUSTER_ID),
        gateways.clone(),
        gateways_of_key,
    );
    // The Connection, when changed by another hand, is set right again.
    let conns: Api<DynamicObject> = Api::all_with(client.clone(), &connections());
    let by_conn = runner::keys_via(
        runner::touched(conns, REMOTE_CLUSTER_ID),
        gateways.clone(),
        gateways_of_key,
    );
    let woken = on_underlay(gateways);
    let (client, cluster) = (&client, cluster.as_str());
    runner::run(mode.name(), vec![own, by_key, by_conn, woken], |key| {
        reconcile(client, mode, cluster, key)
    })
    .await;
}

/// The gateways in `obj`'s namespace labelled for the peer `obj` names.
async fn gateways_of_key(gateways: Api<DynamicObject>, obj: DynamicObject) -> Option<Vec<Key>> {
    let peer = obj.labels().get(REMOTE_CLUSTER_ID)?.clone();
    let ns = obj.namespace()?;
    let selector = format!("{REMOTE_CLUSTER_ID}={peer}");
    let listed = gateways
        .list(&ListParams::default().labels(&selector))
        .await
        .ok()?;
    Some(
        listed
            .items
            .iter()
            .filter(|g| g.namespace().as_deref() == Some(ns.as_str()))
            .map(Key::of)
            .collect(),
    )
}

/// Every gateway of this kind, each time the underlay changes.
fn on_underlay(gateways: Api<DynamicObject>) -> BoxStream<'static, Key> {
    WatchStream::from_changes(underlay::subscribe())
        .then(move |_| {
            let gateways = gateways.clone();
            async move {
                gateways
                    .list(&ListParams::default())
                    .await
                    .map(|l| l.items.iter().map(Key::of).collect::<Vec<_>>())
                    .unwrap_or_default()
            }
        })
        .flat_map(stream::iter)
        .boxed()
}

/// The gateway's name on the underlay.
fn tag(cluster: &str, mode: Mode, key: &Key) -> String {
    format!("{cluster}/{}/{}/{}", mode.name(), key.namespace, key.name)
}

/// The Secret and Connection name of a gateway (`pkg/gateway/forge/utils.go:18-20`).
pub fn resource_name(gateway: &str) -> String {
    format!("gw-{gateway}")
}

fn owner(gateway: &DynamicObject, resource: &ApiResource) -> Value {
    json!([{"apiVersion": resource.api_version, "kind": resource.kind,
            "name": gateway.name_any(), "uid": gateway.uid().unwrap_or_default(),
            "controller": true, "blockOwnerDeletion": true}])
}

/// Make or read the gateway's keys Secret (`k8s.go` `CheckKeysSecret`,
/// `CreateKeysSecret`): its public key.
async fn ensure_keys(
    client: &Client,
    gateway: &DynamicObject,
    resource: &ApiResource,
    peer: &str,
) -> Result<Vec<u8>, Error> {
    let ns = gateway.namespace().unwrap_or_default();
    let name = resource_name(&gateway.name_any());
    let secrets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &consts::secrets());
    let b64 = base64::engine::general_purpose::STANDARD;
    let field = |s: &DynamicObject, f: &str| {
        s.data["data"][f]
            .as_str()
            .and_then(|v| b64.decode(v).ok())
            .filter(|k| k.len() == 32)
    };
    let existing = secrets.get_opt(&name).await?;
    if let Some(public) = existing.as_ref().and_then(|s| {
        field(s, "privateKey")?;
        field(s, "publicKey")
    }) {
        return Ok(public);
    }
    let mut private = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut private)
        .map_err(|_| Error::Waiting("no randomness for the gateway's keys".into()))?;
    let public = sha2::Sha256::digest(private).to_vec();
    let mut secret =
        existing.unwrap_or_else(|| DynamicObject::new(&name, &consts::secrets()).within(&ns));
    secret.metadata.labels = Some(
        [
            (REMOTE_CLUSTER_ID.to_string(), peer.to_string()),
            (GATEWAY_RESOURCE.to_string(), "true".to_string()),
        ]
        .into(),
    );
    secret.metadata.owner_references = serde_json::from_value(owner(gateway, resource)).ok();
    secret.data["data"] =
        json!({"privateKey": b64.encode(private), "publicKey": b64.encode(&public)});
    if secret.metadata.resource_version.is_some() {
        secrets
            .replace(&name, &PostParams::default(), &secret)
            .await?;
    } else {
        secrets.create(&PostParams::default(), &secret).await?;
    }
    Ok(public)
}

/// The peer's public key: the PublicKey of the gateway's namespace
/// labelled with the peer's ID (publickeys_controller.go:65-113).
async fn peer_key(client: &Client, ns: &str, peer: &str) -> Result<Option<Vec<u8>>, Error> {
    let keys: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &public_keys());
    let listed = keys
        .list(&ListParams::default().labels(&format!("{REMOTE_CLUSTER_ID}={peer}")))
        .await?;
    Ok(listed.items.iter().find_map(|k| {
        k.data["spec"]["publicKey"]
            .as_str()
            .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
    }))
}

/// Where a client dials: its spec's first address and port.
fn dialled(gateway: &DynamicObject) -> Option<String> {
    let endpoint = &gateway.data["spec"]["endpoint"];
    let address = endpoint["addresses"].as_array()?.first()?.as_str()?;
    let port = endpoint["port"].as_i64()?;
    Some(format!("{address}:{port}"))
}

async fn reconcile(client: &Client, mode: Mode, cluster: &str, key: Key) -> Result<(), Error> {
    let resource = mode.resource();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &key.namespace, &resource);
    let tag = tag(cluster, mode, &key);
    let Some(mut gateway) = api.get_opt(&key.name).await? else {
        // Its Secret and Connection go with it (owner references); its
        // tunnel with its pod.
        underlay::forget(&tag);
        return Ok(());
    };
    if gateway.metadata.deletion_timestamp.is_some() {
        underlay::forget(&tag);
        return Ok(());
    }
    // The gateway runs for one peer (`pkg/gateway/flags.go`, the remote
    // cluster ID the operator passes from the label).
    let Some(peer) = gateway.labels().get(REMOTE_CLUSTER_ID).cloned() else {
        return Ok(());
    };
    // The pod makes the keys, the tunnel and the Connection: nothing of it
    // until the cluster admits the pod.
    if let Err(e) = super::gateway_pod::ensure(client, mode, &gateway, &peer).await {
        underlay::forget(&tag);
        return Err(e);
    }
    let public = ensure_keys(client, &gateway, &resource, &peer).await?;
    // The operator's status (SO:255-275, wggatewayserver_controller.go:319-449).
    let old = gateway.data["status"].clone();
    let mut status = if old.is_object() {
        old.clone()
    } else {
        json!({})
    };
    status["secretRef"] = json!({"name": resource_name(&key.name), "namespace": key.namespace});
    let side = Side {
        key: public,
        peer: peer_key(client, &key.namespace, &peer).await?,
    };
    match mode {
        Mode::Server => {
            let spec = &gateway.data["spec"]["endpoint"];
            // The Service's port: the NodePort's for a NodePort Service
            // (:376-411), the spec's otherwise (the template's default,
            // 51840, when unset: `deployments/liqo/files/wireguard-server-template`).
            let port = match (spec["serviceType"].as_str(), spec["nodePort"].as_i64()) {
                (Some("NodePort"), Some(p)) => p,
                _ => spec["port"].as_i64().unwrap_or(51840),
            };
            let address = underlay::address_of(&tag);
            status["endpoint"] = json!({"addresses": [address], "port": port, "protocol": "UDP"});
            underlay::listen(&tag, &format!("{address}:{port}"), side.clone());
        }
        Mode::Client => match dialled(&gateway) {
            Some(to) => underlay::dial(&tag, &to, side.clone()),
            None => underlay::forget(&tag),
        },
    }
    if status != old {
        gateway.data["status"] = status;
        gateway = api
            .replace_status(&key.name, &PostParams::default(), &gateway)
            .await?;
    }
    if side.peer.is_none() {
        return Ok(());
    }
    ensure_connection(client, mode, &gateway, &peer, underlay::connected(&tag)).await
}

/// `k8s.go` `EnsureConnection` and `UpdateConnectionStatus`.
async fn ensure_connection(
    client: &Client,
    mode: Mode,
    gateway: &DynamicObject,
    peer: &str,
    up: bool,
) -> Result<(), Error> {
    let ns = gateway.namespace().unwrap_or_default();
    let name = resource_name(&gateway.name_any());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &connections());
    let (kind, wg_kind) = match mode {
        Mode::Server => ("Server", "WgGatewayServer"),
        Mode::Client => ("Client", "WgGatewayClient"),
    };
    let resource = mode.resource();
    runner::create_or_update(&api, &connections(), &ns, &name, |conn| {
        conn.labels_mut()
            .insert(REMOTE_CLUSTER_ID.to_string(), peer.to_string());
        // Liqo's owner is the Wg* gateway the operator made from the
        // template; without that layer, the gateway itself.
        conn.metadata.owner_references = serde_json::from_value(owner(gateway, &resource)).ok();
        conn.data["spec"] = json!({"type": kind, "gatewayRef": {
            "apiVersion": "networking.liqo.io/v1beta1", "kind": wg_kind,
            "name": gateway.name_any(), "namespace": ns,
            "uid": gateway.uid().unwrap_or_default()}});
    })
    .await?;
    let Some(mut conn) = api.get_opt(&name).await? else {
        return Err(Error::Waiting(format!("connection {name} to be stored")));
    };
    let was = conn.data["status"]["value"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let value = match (up, was.as_str()) {
        (true, _) => "Connected",
        (false, "Connected" | "Error") => "Error",
        (false, _) => "Connecting",
    };
    if was != value {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        conn.data["status"] = json!({"value": value, "latency": {"timestamp": now}});
        api.replace_status(&name, &PostParams::default(), &conn)
            .await?;
    }
    Ok(())
}
