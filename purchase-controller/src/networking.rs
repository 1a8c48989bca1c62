//! Liqo v1.2.0's networking step of a peering, done by the controller as
//! `liqoctl peer` does it before authenticating (`pkg/liqoctl/peer/handler.go`
//! `ensureNetworking`, `pkg/liqoctl/network/handler.go:107-268` `RunConnect`,
//! `network/cluster.go`), as a client of both API servers: the consumer's
//! ([C]) and the provider's ([P], through the contract's peering-user
//! kubeconfig). The gateway server is on the provider, liqoctl's default
//! (`--server-service-location Provider`).
//!
//! Each round does the next step that can be done and says which it waits
//! for ([`Stage`]); nothing blocks, so a restarted controller resumes where
//! the objects stand. The objects are built by the pure `*_object`
//! functions from Liqo's forge code (cited beside each), and read by pure
//! functions; the effects are in [`connect`] and [`disconnect`].
//!
//! Left out, as the test world leaves them out (no WireGuard): liqoctl's
//! check of the gateway templates and its wait for the gateway pods.

use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

pub use crate::authentication::Side;
use crate::authentication::{is_status, provider_failure, tenant_namespace, AuthError, Peers};
use crate::caches::{provider_key, Caches, Stores};
use crate::cluster_id::{cluster_id_of, remembered_key, Whose, CLUSTER_ID_SELECTOR};
use crate::liqo::{MANAGED_BY, MANAGER};
use controller_core::liqo::{
    LiqoKind, CONFIGURATION, CONNECTION, GATEWAY_CLIENT, GATEWAY_SERVER, NETWORK, PUBLIC_KEY,
};
use kube::core::ApiResource;

/// `pkg/consts`: the label naming the peer an object is about.
const REMOTE_CLUSTER_ID: &str = "liqo.io/remote-cluster-id";
/// `pkg/consts/externalnetwork.go:26-28`.
const GATEWAY_RESOURCE_LABEL: &str = "networking.liqo.io/gateway-resource";
/// `pkg/consts/externalnetwork.go:38`: the key's field in the gateway's
/// Secret.
const PUBLIC_KEY_FIELD: &str = "publicKey";
/// `pkg/consts/ipam.go:40-46`.
const NETWORK_TYPE: &str = "ipam.liqo.io/network-type";
const POD_CIDR: &str = "pod-cidr";
const EXTERNAL_CIDR: &str = "external-cidr";
/// `apis/networking/v1beta1/configuration_types.go:39`.
const CIDRS_CONFIGURED: &str = "NetworkCIDRsConfigured";
/// `apis/networking/v1beta1/connection_types.go`: `status.value`.
const CONNECTED: &str = "Connected";

/// `networking/forge/gatewayserver.go` defaults, with `liqoctl peer`'s
/// flag defaults (`cmd/liqoctl/cmd/peer.go`: MTU 1340, port 51840).
const SERVER_TEMPLATE: &str = "wireguard-server";
const SERVER_TEMPLATE_KIND: &str = "WgGatewayServerTemplate";
const CLIENT_TEMPLATE: &str = "wireguard-client";
const CLIENT_TEMPLATE_KIND: &str = "WgGatewayClientTemplate";
const SERVER_SERVICE_TYPE: &str = "LoadBalancer";
const SERVER_PORT: i64 = 51840;
const MTU: i64 = 1340;
const API_VERSION: &str = "networking.liqo.io/v1beta1";

/// Where networking stands; each is a reason on the Purchase's
/// `NetworkConnected` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// A cluster's Liqo cluster ID cannot be read (why).
    ClusterIdUnreadable(Side, String),
    /// A cluster's Liqo says it is another cluster than the one expected.
    ClusterIdMismatch {
        side: Side,
        found: String,
        expected: String,
    },
    /// A cluster's pod or external CIDR is not known yet (why).
    NetworkNotInitialized(Side, String),
    /// The Configuration naming the other's CIDRs is applied; Liqo has yet
    /// to configure it (`NetworkCIDRsConfigured`).
    WaitingForConfiguration(Side),
    /// [P] the GatewayServer is applied; Liqo has yet to set its endpoint.
    WaitingForGatewayServer,
    /// A gateway has yet to publish its key (`status.secretRef`).
    WaitingForGatewayKey(Side),
    /// The keys are exchanged; a Connection has yet to be `Connected`
    /// (its state, empty if there is none yet).
    WaitingForConnection(Side, String),
    /// Both Connections are `Connected`.
    Connected,
    /// The gateways exist the other way round (server here, client there):
    /// liqoctl takes the networking as made and so does this.
    EstablishedReversed,
    /// This cluster serves no `networking.liqo.io` kinds.
    NotServed,
    /// A call to the provider's API server failed (why, no secrets).
    Provider(String),
}

impl Stage {
    /// Networking done: authentication may start.
    pub fn done(&self) -> bool {
        matches!(self, Stage::Connected | Stage::EstablishedReversed)
    }

    /// The next change is on the provider's API server (or a call there
    /// failed), where the peering user may not watch: looked at again on
    /// the timer. The others are Liqo's objects here, watched
    /// (the `liqo_watch` module), or need a person.
    pub fn on_provider(&self) -> bool {
        match self {
            Stage::ClusterIdUnreadable(side, _)
            | Stage::ClusterIdMismatch { side, .. }
            | Stage::NetworkNotInitialized(side, _)
            | Stage::WaitingForConfiguration(side)
            | Stage::WaitingForGatewayKey(side)
            | Stage::WaitingForConnection(side, _) => *side == Side::Provider,
            Stage::WaitingForGatewayServer | Stage::Provider(_) => true,
            Stage::Connected | Stage::EstablishedReversed | Stage::NotServed => false,
        }
    }

    /// The condition's reason and a message a person can act on.
    pub fn reason(&self) -> (&'static str, String) {
        match self {
            Stage::ClusterIdUnreadable(side, why) => (
                "ClusterIDUnreadable",
                format!("the Liqo cluster ID of {side} cannot be read: {why}"),
            ),
            Stage::ClusterIdMismatch { side, found, expected } => (
                "ClusterIDMismatch",
                format!("{side} is Liqo cluster {found}, not {expected}: check --cluster-id here, or ask the provider about the contract's cluster ID"),
            ),
            Stage::NetworkNotInitialized(side, why) => (
                "NetworkNotInitialized",
                format!("the CIDRs of {side} are not known yet ({why}): is Liqo's IPAM running there?"),
            ),
            Stage::WaitingForConfiguration(side) => (
                "WaitingForConfiguration",
                format!("the network Configuration on {side} is applied; waiting for its Liqo to configure it (if this stays, see `liqoctl network reset`)"),
            ),
            Stage::WaitingForGatewayServer => (
                "WaitingForGatewayServer",
                "the GatewayServer is applied on the provider; waiting for its Liqo to publish the endpoint (if this stays, ask the provider whether its LoadBalancer gets an address)".to_string(),
            ),
            Stage::WaitingForGatewayKey(side) => (
                "WaitingForGatewayKey",
                format!("waiting for the gateway on {side} to publish its public key"),
            ),
            Stage::WaitingForConnection(side, state) => (
                "WaitingForConnection",
                if state.is_empty() {
                    format!("the keys are exchanged; waiting for the gateway on {side} to open its Connection")
                } else {
                    format!("the Connection on {side} is {state}; waiting for Connected (if this stays, check that the gateway endpoint is reachable from this cluster over UDP)")
                },
            ),
            Stage::Connected => (
                "Connected",
                "the network Connection is Connected on both clusters".to_string(),
            ),
            Stage::EstablishedReversed => (
                "EstablishedReversed",
                "networking with the provider exists the other way round (gateway server on this cluster): used as it is".to_string(),
            ),
            Stage::NotServed => (
                "NetworkingNotInstalled",
                "this cluster serves no networking.liqo.io kinds: enable Liqo's networking module, or run without networking (--networking false, or spec.networking: false)".to_string(),
            ),
            Stage::Provider(why) => ("ProviderUnreachable", why.clone()),
        }
    }
}

/// A cluster's CIDRs, as the other side's Configuration names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cidrs {
    pub pod: Vec<String>,
    pub external: String,
}

/// `utils/ipam/networks.go:35-110` `GetPodCIDRs` and `GetExternalCIDR`:
/// every pod-CIDR Network's and the one external-CIDR Network's
/// `status.cidr`, each required.
pub fn cidrs_of(networks: &[Value]) -> Result<Cidrs, String> {
    let of_type = |t: &str| -> Vec<&Value> {
        networks
            .iter()
            .filter(|n| n["metadata"]["labels"][NETWORK_TYPE].as_str() == Some(t))
            .collect()
    };
    let cidr = |n: &Value| -> Result<String, String> {
        n["status"]["cidr"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .ok_or_else(|| {
                format!(
                    "Network {} has no status.cidr yet",
                    n["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
    };
    let pods = of_type(POD_CIDR);
    if pods.is_empty() {
        return Err("no pod CIDR Network".to_string());
    }
    let pod = pods.into_iter().map(cidr).collect::<Result<Vec<_>, _>>()?;
    let external = match of_type(EXTERNAL_CIDR).as_slice() {
        [one] => cidr(one)?,
        [] => return Err("no external CIDR Network".to_string()),
        _ => return Err("more than one external CIDR Network".to_string()),
    };
    Ok(Cidrs { pod, external })
}

fn labels(remote: &str) -> Value {
    json!({REMOTE_CLUSTER_ID: remote, MANAGED_BY: MANAGER})
}

/// `networking/forge/configuration.go` `Configuration`/`MutateConfiguration`
/// (name: the remote cluster's ID, as `ConfigurationForRemoteCluster`
/// names it): in `namespace`, the `remote` cluster's CIDRs; `cidrutils`
/// `SetPrimary` makes the external CIDR a one-element list.
pub fn configuration_object(namespace: &str, remote: &str, cidrs: &Cidrs) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "Configuration",
           "metadata": {"name": remote, "namespace": namespace, "labels": labels(remote)},
           "spec": {"remote": {"cidr": {"pod": cidrs.pod, "external": [cidrs.external]}}}})
}

/// `networking/utils/configuration.go:29-36`
/// `AreConfigurationNetworkCIDRsConfigured`: the condition is True for the
/// current generation.
pub fn configuration_configured(conf: &Value) -> bool {
    let generation = conf["metadata"]["generation"].as_i64().unwrap_or_default();
    conf["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["type"] == CIDRS_CONFIGURED
                && c["status"] == "True"
                && c["observedGeneration"].as_i64().unwrap_or_default() == generation
        })
}

/// `networking/forge/gatewayserver.go` `GatewayServer`/`MutateGatewayServer`
/// with liqoctl's defaults: a LoadBalancer on port 51840, MTU 1340, the
/// `wireguard-server` template in the provider's Liqo namespace.
pub fn gateway_server_object(namespace: &str, consumer: &str, template_namespace: &str) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "GatewayServer",
           "metadata": {"name": consumer, "namespace": namespace, "labels": labels(consumer)},
           "spec": {"mtu": MTU,
                    "endpoint": {"port": SERVER_PORT, "serviceType": SERVER_SERVICE_TYPE},
                    "serverTemplateRef": {"name": SERVER_TEMPLATE, "namespace": template_namespace,
                                          "kind": SERVER_TEMPLATE_KIND, "apiVersion": API_VERSION}}})
}

/// `network/handler.go:190-200` with `forge/gatewayclient.go`: the
/// GatewayClient on [C] connecting to the server's `status.endpoint`.
pub fn gateway_client_object(
    namespace: &str,
    provider: &str,
    endpoint: &Value,
    template_namespace: &str,
) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "GatewayClient",
           "metadata": {"name": provider, "namespace": namespace, "labels": labels(provider)},
           "spec": {"mtu": MTU,
                    "endpoint": {"addresses": endpoint["addresses"], "port": endpoint["port"],
                                 "protocol": endpoint["protocol"]},
                    "clientTemplateRef": {"name": CLIENT_TEMPLATE, "namespace": template_namespace,
                                          "kind": CLIENT_TEMPLATE_KIND, "apiVersion": API_VERSION}}})
}

/// `wait.go` `ForGatewayServerStatusEndpoint`: the endpoint once it has an
/// address.
pub fn server_endpoint(server: &Value) -> Option<&Value> {
    let endpoint = &server["status"]["endpoint"];
    endpoint["addresses"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
        .then_some(endpoint)
}

/// A gateway's `status.secretRef` (namespace, name), once set.
pub fn secret_ref(gateway: &Value) -> Option<(String, String)> {
    let r = &gateway["status"]["secretRef"];
    let name = r["name"].as_str().filter(|n| !n.is_empty())?;
    let namespace = r["namespace"]
        .as_str()
        .or_else(|| gateway["metadata"]["namespace"].as_str())?;
    Some((namespace.to_string(), name.to_string()))
}

/// `networking/forge/publickey.go` `PublicKey`/`MutatePublicKey`, with
/// `cluster.go` `EnsurePublicKey`'s owner reference to the local gateway
/// (`key`: base64, as `spec.publicKey` travels in JSON).
pub fn public_key_object(namespace: &str, remote: &str, key: &str, gateway: &Value) -> Value {
    let mut labels = labels(remote);
    labels[GATEWAY_RESOURCE_LABEL] = json!("true");
    json!({"apiVersion": API_VERSION, "kind": "PublicKey",
           "metadata": {"name": remote, "namespace": namespace, "labels": labels,
                        "ownerReferences": [{"apiVersion": gateway["apiVersion"], "kind": gateway["kind"],
                                             "name": gateway["metadata"]["name"],
                                             "uid": gateway["metadata"]["uid"]}]},
           "spec": {"publicKey": key}})
}

/// The first Connection's `status.value` (empty if none or unset).
pub fn connection_state(connections: &[Value]) -> String {
    connections
        .first()
        .and_then(|c| c["status"]["value"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// What to do with an object found where `wanted` should be: keep it,
/// or (ours, with another value in a spec field `wanted` sets — Liqo
/// fills others, a Configuration's `spec.local`) replace it. One made by
/// someone else is used as it is.
pub fn needs_update(existing: &Value, wanted: &Value) -> bool {
    let Some(fields) = wanted["spec"].as_object() else {
        return false;
    };
    ours(existing) && fields.iter().any(|(k, v)| &existing["spec"][k] != v)
}

fn ours(object: &Value) -> bool {
    object["metadata"]["labels"][MANAGED_BY].as_str() == Some(MANAGER)
}

/// One side's objects, with its failures told apart: [C]'s are errors
/// (retried with backoff), [P]'s a [`Stage::Provider`].
struct On<'a> {
    client: &'a Client,
    side: Side,
}

impl On<'_> {
    fn api(&self, namespace: &str, ar: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, ar)
    }

    /// `what` failed: a Stage for [P], an error for [C].
    fn failed(&self, what: &str, e: kube::Error) -> Result<Stage, AuthError> {
        match self.side {
            Side::Provider => Ok(Stage::Provider(provider_failure(what, &e))),
            Side::Consumer => Err(e.into()),
        }
    }

    /// The objects of `ar` in `namespace` about `remote`, as
    /// `getters.Get*ByClusterID` finds them (by label).
    async fn about(
        &self,
        namespace: &str,
        ar: &ApiResource,
        remote: &str,
    ) -> Result<Vec<Value>, kube::Error> {
        let list = self
            .api(namespace, ar)
            .list(&ListParams::default().labels(&format!("{REMOTE_CLUSTER_ID}={remote}")))
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect())
    }

    /// [`On::about`] from the watch's cache (`stores`) when it is ready:
    /// for what a round only looks at, never for an absence that leads to
    /// a create ([`On::ensure_cached`]).
    async fn about_cached(
        &self,
        stores: &Stores,
        namespace: &str,
        ar: &ApiResource,
        remote: &str,
    ) -> Result<Vec<Value>, kube::Error> {
        match stores.labelled(ar, Some(namespace), REMOTE_CLUSTER_ID, remote) {
            Some(found) => Ok(found),
            None => self.about(namespace, ar, remote).await,
        }
    }

    /// [`On::ensure`], with the object from the watch's cache when it is
    /// there as wanted; a missing one, or one to replace, is read from the
    /// API server first (a cache that lags must not make it twice nor
    /// replace what is already replaced).
    async fn ensure_cached(
        &self,
        stores: &Stores,
        ar: &ApiResource,
        wanted: Value,
    ) -> Result<Value, kube::Error> {
        let namespace = wanted["metadata"]["namespace"].as_str().unwrap_or_default();
        let remote = wanted["metadata"]["labels"][REMOTE_CLUSTER_ID]
            .as_str()
            .unwrap_or_default();
        let cached = stores
            .labelled(ar, Some(namespace), REMOTE_CLUSTER_ID, remote)
            .and_then(|found| found.into_iter().next());
        match cached {
            Some(have) if !needs_update(&have, &wanted) => Ok(have),
            _ => self.ensure(ar, wanted).await,
        }
    }

    /// [`On::ensure`] of an object of the provider's, skipped while a copy
    /// remembered under `key` is as wanted and `done` says it let the step
    /// pass (the peering user may not watch there: each look is a call);
    /// the copy is remembered once `done`.
    async fn ensure_remembered(
        &self,
        cache: &Caches,
        key: &str,
        ar: &ApiResource,
        wanted: Value,
        done: fn(&Value) -> bool,
    ) -> Result<Value, kube::Error> {
        if let Some(have) = cache.recall::<Value>(key) {
            if !needs_update(&have, &wanted) && done(&have) {
                return Ok(have);
            }
        }
        let have = self.ensure(ar, wanted).await?;
        if done(&have) {
            cache.remember(key, have.clone());
        }
        Ok(have)
    }

    /// `resource.CreateOrUpdate` of `wanted` (an update made as a
    /// replacement), keeping the name of one that exists; the object as
    /// it now is.
    async fn ensure(&self, ar: &ApiResource, wanted: Value) -> Result<Value, kube::Error> {
        let namespace = wanted["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let remote = wanted["metadata"]["labels"][REMOTE_CLUSTER_ID]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let api = self.api(&namespace, ar);
        let existing = self.about(&namespace, ar, &remote).await?;
        let decode =
            |v: Value| serde_json::from_value::<DynamicObject>(v).map_err(kube::Error::SerdeError);
        match existing.into_iter().next() {
            None => {
                let created = api.create(&PostParams::default(), &decode(wanted)?).await?;
                tracing::info!(kind = %ar.kind, side = %self.side, "networking object created");
                serde_json::to_value(created).map_err(kube::Error::SerdeError)
            }
            Some(have) if needs_update(&have, &wanted) => {
                // Replaced rather than updated (as liqoctl replaces a
                // GatewayServer whose endpoint changed): Liqo fills the
                // rest again, and the controller needs no `update`.
                let name = have["metadata"]["name"].as_str().unwrap_or_default();
                api.delete(name, &DeleteParams::default()).await?;
                let mut again = wanted;
                again["metadata"]["name"] = json!(name);
                let created = api.create(&PostParams::default(), &decode(again)?).await?;
                tracing::info!(kind = %ar.kind, side = %self.side, "networking object replaced");
                serde_json::to_value(created).map_err(kube::Error::SerdeError)
            }
            Some(have) => Ok(have),
        }
    }

    /// This side's cluster ID, checked against `expected`; `None` if it
    /// matches.
    async fn check_cluster_id(
        &self,
        liqo_namespace: &str,
        expected: &str,
        cache: &Caches,
        whose: Whose<'_>,
    ) -> Result<Option<Stage>, AuthError> {
        // Remembered once it matched (`crate::cluster_id::read_remembered`).
        let key = remembered_key(whose, liqo_namespace);
        if cache.recall::<String>(&key).as_deref() == Some(expected) {
            return Ok(None);
        }
        let configmaps: Api<ConfigMap> = Api::namespaced(self.client.clone(), liqo_namespace);
        let list = match configmaps
            .list(&ListParams::default().labels(CLUSTER_ID_SELECTOR))
            .await
        {
            Ok(list) => list.items,
            Err(e) if is_status(&e, &[403]) => {
                let why = format!("no permission to list ConfigMaps in {liqo_namespace}");
                return Ok(Some(Stage::ClusterIdUnreadable(self.side, why)));
            }
            Err(e) => return self.failed("read its Liqo cluster ID", e).map(Some),
        };
        let values = list
            .into_iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(match cluster_id_of(&values) {
            Err(why) => Some(Stage::ClusterIdUnreadable(self.side, why)),
            Ok(found) if found != expected => Some(Stage::ClusterIdMismatch {
                side: self.side,
                found,
                expected: expected.to_string(),
            }),
            Ok(_) => {
                cache.remember(key, expected.to_string());
                None
            }
        })
    }

    /// This side's CIDRs (`Err`: the stage to report), remembered under
    /// `key` once known (Liqo's IPAM does not change them while it runs).
    async fn cidrs(
        &self,
        liqo_namespace: &str,
        cache: &Caches,
        key: &str,
    ) -> Result<Result<Cidrs, Stage>, AuthError> {
        if let Some(cidrs) = cache.recall::<Cidrs>(key) {
            return Ok(Ok(cidrs));
        }
        let list = match self
            .api(liqo_namespace, &NETWORK.api_resource())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list.items,
            Err(e) => return self.failed("read its Networks", e).map(Err),
        };
        let values = list
            .into_iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()?;
        let cidrs = cidrs_of(&values).map_err(|why| Stage::NetworkNotInitialized(self.side, why));
        if let Ok(cidrs) = &cidrs {
            cache.remember(key, cidrs.clone());
        }
        Ok(cidrs)
    }

    /// [`On::gateway_key`], remembered under `key` with the Secret it was
    /// read from (a gateway made again names another).
    async fn gateway_key_remembered(
        &self,
        gateway: &Value,
        cache: &Caches,
        key: &str,
    ) -> Result<Result<String, Stage>, AuthError> {
        let from = secret_ref(gateway);
        if let Some((seen_from, public)) = cache.recall::<(Option<(String, String)>, String)>(key) {
            if from.is_some() && seen_from == from {
                return Ok(Ok(public));
            }
        }
        let found = self.gateway_key(gateway).await?;
        if let Ok(public) = &found {
            cache.remember(key, (from, public.clone()));
        }
        Ok(found)
    }

    /// The public key in the Secret a gateway's `secretRef` names.
    async fn gateway_key(&self, gateway: &Value) -> Result<Result<String, Stage>, AuthError> {
        let waiting = Stage::WaitingForGatewayKey(self.side);
        let Some((namespace, name)) = secret_ref(gateway) else {
            return Ok(Err(waiting));
        };
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let secret = match secrets.get_opt(&name).await {
            Ok(secret) => secret,
            Err(e) => return self.failed("read its gateway's key Secret", e).map(Err),
        };
        let key = secret
            .and_then(|s| s.data)
            .and_then(|d| d.get(PUBLIC_KEY_FIELD).cloned())
            .filter(|k| !k.0.is_empty());
        Ok(key
            .map(|k| base64::engine::general_purpose::STANDARD.encode(k.0))
            .ok_or(waiting))
    }
}

/// Early return of a [`Stage`] from a step that yields `Result<T, Stage>`.
macro_rules! step {
    ($e:expr) => {
        match $e? {
            Ok(v) => v,
            Err(stage) => return Ok(stage),
        }
    };
}

/// One round of networking: the next step that can be done, and where it
/// then stands.
///
/// What this cluster holds is read from the watches' caches where there
/// are some (Connections, Configurations, GatewayClients); what the
/// provider holds is read only until it lets its step pass, then
/// remembered ([`crate::caches`]): a round reads the step it waits on.
pub async fn connect(peers: &Peers<'_>) -> Result<Stage, AuthError> {
    let c = On {
        client: peers.consumer,
        side: Side::Consumer,
    };
    let p = On {
        client: peers.provider,
        side: Side::Provider,
    };
    let (cache, stores) = (peers.cache, &peers.cache.stores);
    let remembered = |what: &str| provider_key(peers.provider_id, what);
    let on_consumer = tenant_namespace(peers.provider_id);
    let on_provider = tenant_namespace(peers.consumer_id);

    // Done already: both Connections Connected.
    let c_conns = match c
        .about_cached(
            stores,
            &on_consumer,
            &CONNECTION.api_resource(),
            peers.provider_id,
        )
        .await
    {
        Err(e) if is_status(&e, &[404]) => return Ok(Stage::NotServed),
        other => other?,
    };
    let p_connected = remembered("provider-connected");
    if connection_state(&c_conns) == CONNECTED {
        if cache.recall::<()>(&p_connected).is_some() {
            return Ok(Stage::Connected);
        }
        match p
            .about(&on_provider, &CONNECTION.api_resource(), peers.consumer_id)
            .await
        {
            Ok(p_conns) if connection_state(&p_conns) == CONNECTED => {
                cache.remember(p_connected, ());
                return Ok(Stage::Connected);
            }
            Ok(_) => {}
            Err(e) => return p.failed("read its Connection", e),
        }
    }

    // `cluster.go` `SetClusterIDs`: who each side says it is.
    if let Some(stage) = c
        .check_cluster_id(
            peers.liqo_namespace,
            peers.consumer_id,
            cache,
            Whose::Consumer,
        )
        .await?
    {
        return Ok(stage);
    }
    if let Some(stage) = p
        .check_cluster_id(
            peers.provider_liqo_namespace,
            peers.provider_id,
            cache,
            Whose::Provider(peers.provider_id),
        )
        .await?
    {
        return Ok(stage);
    }

    // `handler.go:313-344` `initNetworkConfigs`: each side's Configuration
    // names the other's CIDRs, then both are waited for. The tenant
    // namespaces: [C]'s made here (`SetNamespaces`), [P]'s by the
    // provider's peering-user controller.
    crate::authentication::ensure_tenant_namespace(peers.consumer, peers.provider_id, cache)
        .await?;
    let c_cidrs_key = format!("cidrs/consumer/{}", peers.liqo_namespace);
    let c_cidrs = step!(c.cidrs(peers.liqo_namespace, cache, &c_cidrs_key).await);
    let p_cidrs = step!(
        p.cidrs(
            peers.provider_liqo_namespace,
            cache,
            &remembered("provider-cidrs")
        )
        .await
    );
    let c_conf = c
        .ensure_cached(
            stores,
            &CONFIGURATION.api_resource(),
            configuration_object(&on_consumer, peers.provider_id, &p_cidrs),
        )
        .await?;
    let p_conf = match p
        .ensure_remembered(
            cache,
            &remembered("provider-configuration"),
            &CONFIGURATION.api_resource(),
            configuration_object(&on_provider, peers.consumer_id, &c_cidrs),
            configuration_configured,
        )
        .await
    {
        Ok(conf) => conf,
        Err(e) => return p.failed("apply the network Configuration", e),
    };
    if !configuration_configured(&c_conf) {
        return Ok(Stage::WaitingForConfiguration(Side::Consumer));
    }
    if !configuration_configured(&p_conf) {
        return Ok(Stage::WaitingForConfiguration(Side::Provider));
    }

    // `handler.go:158-170`: gateways the other way round are networking
    // already made (looked for once while remembered).
    let server_key = remembered("provider-gateway-server");
    let not_reversed = remembered("not-reversed");
    if cache.recall::<()>(&not_reversed).is_none() {
        let reversed_here = c
            .about(
                &on_consumer,
                &GATEWAY_SERVER.api_resource(),
                peers.provider_id,
            )
            .await?;
        let reversed_there = match p
            .about(
                &on_provider,
                &GATEWAY_CLIENT.api_resource(),
                peers.consumer_id,
            )
            .await
        {
            Ok(found) => found,
            Err(e) => return p.failed("read its GatewayClients", e),
        };
        if !reversed_here.is_empty() || !reversed_there.is_empty() {
            return Ok(Stage::EstablishedReversed);
        }
        cache.remember(not_reversed, ());
    }

    // `handler.go:173-205`: the server on [P], its endpoint, the client on
    // [C].
    let server = match p
        .ensure_remembered(
            cache,
            &server_key,
            &GATEWAY_SERVER.api_resource(),
            gateway_server_object(
                &on_provider,
                peers.consumer_id,
                peers.provider_liqo_namespace,
            ),
            |server| server_endpoint(server).is_some(),
        )
        .await
    {
        Ok(server) => server,
        Err(e) => return p.failed("apply the GatewayServer", e),
    };
    let Some(endpoint) = server_endpoint(&server) else {
        return Ok(Stage::WaitingForGatewayServer);
    };
    let client = c
        .ensure_cached(
            stores,
            &GATEWAY_CLIENT.api_resource(),
            gateway_client_object(
                &on_consumer,
                peers.provider_id,
                endpoint,
                peers.liqo_namespace,
            ),
        )
        .await?;

    // `handler.go:213-243`: each gateway's key to the other side, as a
    // PublicKey owned by the local gateway (each remembered with what it
    // was made from: the key and its gateway).
    let server_key = step!(
        p.gateway_key_remembered(&server, cache, &remembered("provider-gateway-key"))
            .await
    );
    let c_public = remembered("consumer-public-key");
    let c_made_from = (server_key.clone(), uid(&client));
    if cache.recall::<(String, String)>(&c_public).as_ref() != Some(&c_made_from) {
        c.ensure(
            &PUBLIC_KEY.api_resource(),
            public_key_object(&on_consumer, peers.provider_id, &server_key, &client),
        )
        .await?;
        cache.remember(c_public, c_made_from);
    }
    let client_key = step!(
        c.gateway_key_remembered(&client, cache, &remembered("consumer-gateway-key"))
            .await
    );
    let p_public = remembered("provider-public-key");
    let p_made_from = (client_key.clone(), uid(&server));
    if cache.recall::<(String, String)>(&p_public).as_ref() != Some(&p_made_from) {
        if let Err(e) = p
            .ensure(
                &PUBLIC_KEY.api_resource(),
                public_key_object(&on_provider, peers.consumer_id, &client_key, &server),
            )
            .await
        {
            return p.failed("apply the PublicKey", e);
        }
        cache.remember(p_public, p_made_from);
    }

    // `handler.go:245-262`: both Connections Connected.
    let c_state = connection_state(
        &c.about_cached(
            stores,
            &on_consumer,
            &CONNECTION.api_resource(),
            peers.provider_id,
        )
        .await?,
    );
    if c_state != CONNECTED {
        return Ok(Stage::WaitingForConnection(Side::Consumer, c_state));
    }
    let p_state = match p
        .about(&on_provider, &CONNECTION.api_resource(), peers.consumer_id)
        .await
    {
        Ok(found) => connection_state(&found),
        Err(e) => return p.failed("read its Connection", e),
    };
    if p_state != CONNECTED {
        return Ok(Stage::WaitingForConnection(Side::Provider, p_state));
    }
    cache.remember(p_connected, ());
    Ok(Stage::Connected)
}

/// An object's `metadata.uid` (empty if none).
fn uid(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Once peered: the Connection here about `provider`, as a [`Stage`]
/// (`Connected`, or waiting with its state); `None` without one (a
/// peering made without networking) or without Liqo's networking kinds.
pub async fn observe(
    consumer: &Client,
    provider: &str,
    stores: &Stores,
) -> Result<Option<Stage>, kube::Error> {
    let c = On {
        client: consumer,
        side: Side::Consumer,
    };
    let found = match c
        .about_cached(
            stores,
            &tenant_namespace(provider),
            &CONNECTION.api_resource(),
            provider,
        )
        .await
    {
        Err(e) if is_status(&e, &[404]) => return Ok(None),
        other => other?,
    };
    Ok(match connection_state(&found) {
        _ if found.is_empty() => None,
        state if state == CONNECTED => Some(Stage::Connected),
        state => Some(Stage::WaitingForConnection(Side::Consumer, state)),
    })
}

/// What [`disconnect`] removed on this cluster: the PublicKey before the
/// gateway that owns it, so it is removed by this controller whether or not
/// a garbage collector would have followed the owner reference first. Both
/// gateway kinds, as `network reset` deletes them on both clusters
/// (`pkg/liqoctl/network/handler.go:293-310` `RunDisconnect`): a peering
/// both ways has one tunnel, whose server may be on this cluster (made
/// when the provider peered with it first) — the last direction to go
/// takes it down whichever way it runs.
const TEARDOWN: [LiqoKind; 4] = [PUBLIC_KEY, GATEWAY_CLIENT, GATEWAY_SERVER, CONFIGURATION];
/// … and on the provider's, in `liqoctl unpeer`'s order (`network reset`:
/// gateways, then Configurations; the PublicKeys follow their gateway by
/// owner reference, deleted here in case no garbage collector runs).
const TEARDOWN_PROVIDER: [LiqoKind; 4] =
    [GATEWAY_CLIENT, GATEWAY_SERVER, PUBLIC_KEY, CONFIGURATION];

/// Unpeering what [`connect`] made, after the authentication
/// (`liqoctl unpeer`'s order): on [C] the PublicKey, the gateways (the
/// GatewayClient, or the GatewayServer of a tunnel the provider set up
/// when it peered with this cluster first) and the Configuration; then
/// (best effort: the provider's peering-user controller cleans its side when the consumer's last contract ends, and
/// the peering user may be gone) the same on [P]. Only objects carrying
/// this controller's mark; the provider is asked only when this cluster
/// had some.
pub async fn disconnect(
    consumer: &Client,
    provider: Option<&Client>,
    consumer_id: &str,
    provider_id: &str,
) -> Result<(), AuthError> {
    let c = On {
        client: consumer,
        side: Side::Consumer,
    };
    let mut removed = 0;
    for ar in TEARDOWN.map(|k| k.api_resource()) {
        removed += c
            .delete_ours(&tenant_namespace(provider_id), &ar, provider_id)
            .await?;
    }
    let (Some(provider), true) = (provider, removed > 0) else {
        return Ok(());
    };
    let p = On {
        client: provider,
        side: Side::Provider,
    };
    for ar in TEARDOWN_PROVIDER.map(|k| k.api_resource()) {
        if let Err(e) = p
            .delete_ours(&tenant_namespace(consumer_id), &ar, consumer_id)
            .await
        {
            let why = provider_failure(&format!("delete its {}", ar.kind), &e);
            tracing::warn!(%why, "the networking objects on the provider are left to the provider");
            break;
        }
    }
    Ok(())
}

impl On<'_> {
    /// Delete this controller's objects of `ar` about `remote`; how many.
    async fn delete_ours(
        &self,
        namespace: &str,
        ar: &ApiResource,
        remote: &str,
    ) -> Result<usize, kube::Error> {
        let api = self.api(namespace, ar);
        let mut deleted = 0;
        let found = match self.about(namespace, ar, remote).await {
            // Liqo's networking module is not installed: nothing to remove.
            Err(e) if is_status(&e, &[404]) => Vec::new(),
            other => other?,
        };
        for object in found {
            if !ours(&object) {
                continue;
            }
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {
                    deleted += 1;
                    tracing::info!(kind = %ar.kind, side = %self.side, %name, "networking object deleted");
                }
                Err(e) if is_status(&e, &[404]) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network(name: &str, kind: &str, cidr: Option<&str>) -> Value {
        json!({"metadata": {"name": name, "labels": {NETWORK_TYPE: kind}},
               "status": cidr.map(|c| json!({"cidr": c})).unwrap_or(json!({}))})
    }

    #[test]
    fn cidrs_need_every_pod_network_and_one_external_with_a_status() {
        let cidrs = cidrs_of(&[
            network("pod", POD_CIDR, Some("10.0.0.0/16")),
            network("ext", EXTERNAL_CIDR, Some("10.70.0.0/16")),
            network("svc", "service-cidr", Some("10.96.0.0/12")),
        ])
        .unwrap();
        assert_eq!(
            cidrs,
            Cidrs {
                pod: vec!["10.0.0.0/16".into()],
                external: "10.70.0.0/16".into()
            }
        );
        let pending = cidrs_of(&[
            network("pod", POD_CIDR, None),
            network("ext", EXTERNAL_CIDR, Some("10.70.0.0/16")),
        ]);
        assert!(pending.unwrap_err().contains("Network pod"));
        assert!(cidrs_of(&[network("pod", POD_CIDR, Some("10.0.0.0/16"))])
            .unwrap_err()
            .contains("external"));
    }

    #[test]
    fn a_configuration_names_the_other_sides_cidrs_and_is_ready_for_its_generation() {
        let cidrs = Cidrs {
            pod: vec!["10.0.0.0/16".into()],
            external: "10.70.0.0/16".into(),
        };
        let mut conf = configuration_object("liqo-tenant-p1", "p1", &cidrs);
        assert_eq!(conf["metadata"]["name"], "p1");
        assert_eq!(conf["metadata"]["labels"][REMOTE_CLUSTER_ID], "p1");
        assert_eq!(
            conf["spec"]["remote"]["cidr"],
            json!({"pod": ["10.0.0.0/16"], "external": ["10.70.0.0/16"]})
        );
        assert!(!configuration_configured(&conf));
        conf["metadata"]["generation"] = json!(2);
        conf["status"]["conditions"] =
            json!([{"type": CIDRS_CONFIGURED, "status": "True", "observedGeneration": 1}]);
        assert!(!configuration_configured(&conf), "an older generation's");
        conf["status"]["conditions"][0]["observedGeneration"] = json!(2);
        assert!(configuration_configured(&conf));
    }

    #[test]
    fn gateways_follow_liqoctls_defaults_and_the_servers_endpoint() {
        let server = gateway_server_object("liqo-tenant-c1", "c1", "liqo");
        assert_eq!(server["spec"]["mtu"], 1340);
        assert_eq!(
            server["spec"]["endpoint"],
            json!({"port": 51840, "serviceType": "LoadBalancer"})
        );
        assert_eq!(
            server["spec"]["serverTemplateRef"]["name"],
            "wireguard-server"
        );
        assert_eq!(server_endpoint(&server), None);
        let mut ready = server.clone();
        ready["status"]["endpoint"] =
            json!({"addresses": ["192.0.2.7"], "port": 51840, "protocol": "UDP"});
        let endpoint = server_endpoint(&ready).unwrap();
        let client = gateway_client_object("liqo-tenant-p1", "p1", endpoint, "liqo");
        assert_eq!(
            client["spec"]["endpoint"],
            json!({"addresses": ["192.0.2.7"], "port": 51840, "protocol": "UDP"})
        );
        assert_eq!(
            client["spec"]["clientTemplateRef"]["kind"],
            "WgGatewayClientTemplate"
        );
    }

    #[test]
    fn a_public_key_is_owned_by_the_local_gateway() {
        let gateway = json!({"apiVersion": API_VERSION, "kind": "GatewayClient",
                             "metadata": {"name": "p1", "namespace": "liqo-tenant-p1", "uid": "u-1"},
                             "status": {"secretRef": {"name": "gw-keys"}}});
        assert_eq!(
            secret_ref(&gateway),
            Some(("liqo-tenant-p1".into(), "gw-keys".into()))
        );
        let key = public_key_object("liqo-tenant-p1", "p1", "a2V5", &gateway);
        assert_eq!(key["spec"]["publicKey"], "a2V5");
        assert_eq!(key["metadata"]["labels"][GATEWAY_RESOURCE_LABEL], "true");
        assert_eq!(key["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(
            key["metadata"]["ownerReferences"][0]["kind"],
            "GatewayClient"
        );
    }

    #[test]
    fn only_its_own_objects_are_updated() {
        let cidrs = |pod: &str| Cidrs {
            pod: vec![pod.into()],
            external: "10.70.0.0/16".into(),
        };
        let have = configuration_object("ns", "p1", &cidrs("10.0.0.0/16"));
        let wanted = configuration_object("ns", "p1", &cidrs("10.1.0.0/16"));
        assert!(!needs_update(&have, &have));
        assert!(needs_update(&have, &wanted));
        // Fields Liqo fills are left to it.
        let mut filled = have.clone();
        filled["spec"]["local"] = json!({"cidr": {"pod": ["10.9.0.0/16"]}});
        assert!(!needs_update(&filled, &have));
        let mut theirs = have.clone();
        theirs["metadata"]["labels"] = json!({REMOTE_CLUSTER_ID: "p1"});
        assert!(!needs_update(&theirs, &wanted));
    }

    #[test]
    fn stages_say_what_to_do_and_only_connected_is_done() {
        assert!(Stage::Connected.done() && Stage::EstablishedReversed.done());
        let waiting = Stage::WaitingForConnection(Side::Provider, "Connecting".into());
        assert!(!waiting.done());
        let (reason, message) = waiting.reason();
        assert_eq!(reason, "WaitingForConnection");
        assert!(
            message.contains("the provider") && message.contains("Connecting"),
            "{message}"
        );
        let (reason, message) = Stage::ClusterIdMismatch {
            side: Side::Consumer,
            found: "x".into(),
            expected: "c1".into(),
        }
        .reason();
        assert_eq!(reason, "ClusterIDMismatch");
        assert!(message.contains("--cluster-id"), "{message}");
        assert_eq!(
            connection_state(&[json!({"status": {"value": "Connected"}})]),
            CONNECTED
        );
        assert_eq!(connection_state(&[]), "");
    }
}
