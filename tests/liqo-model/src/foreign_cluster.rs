//! The ForeignCluster controller, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/core/foreigncluster-controller/`
//! (`foreigncluster_controller.go` FCC, `status.go` STATUS,
//! `conditions.go` COND below): one ForeignCluster per peer, made when an
//! object naming the peer appears, whose status (role, modules and their
//! conditions, tenant namespaces) says what exists of the peering — what
//! the virtual kubelet reads to set the node's network condition and what
//! purchase-controller reads to know a provider is peered.

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::runtime::{predicates, Predicate, WatchStreamExt};
use kube::Client;
use serde_json::{json, Value};

use crate::consts::{self, CONTROL_PLANE, IDENTITY_TYPE, KUBECONFIG_FIELD, REMOTE_CLUSTER_ID};
use crate::identity::{Rule, ALL, READ};
use crate::runner::{self, Key};
use crate::Error;

/// RBAC of this controller (FCC:61-72; no networking objects are read).
pub const RULES: &[Rule] = &[
    Rule::new(
        &["core.liqo.io"],
        &[
            "foreignclusters",
            "foreignclusters/status",
            "foreignclusters/finalizers",
        ],
        ALL,
    ),
    Rule::new(
        &["authentication.liqo.io"],
        &["tenants", "identities"],
        READ,
    ),
    Rule::new(&["offloading.liqo.io"], &["virtualnodes"], READ),
    Rule::new(&[""], &["nodes", "secrets"], READ),
    // STATUS:65-253, when the networking module runs.
    Rule::new(
        &["networking.liqo.io"],
        &[
            "configurations",
            "gatewayservers",
            "gatewayclients",
            "connections",
        ],
        READ,
    ),
];

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client) {
    run_with(client, futures::stream::empty().boxed()).await;
}

/// [`run`], also reconciling the keys `more` yields (the networking
/// objects' ForeignClusters, once networking runs: [`crate::networking`]).
pub async fn run_with(client: Client, more: futures::stream::BoxStream<'static, Key>) {
    let fcs: Api<DynamicObject> = Api::all_with(client.clone(), &consts::foreign_clusters());
    // FCC:162-174: the ForeignCluster itself on generation or label
    // changes only, so its own status writes do not trigger it.
    let own = runner::touched(fcs.clone(), "")
        .predicate_filter(
            predicates::generation.combine(predicates::labels),
            Default::default(),
        )
        .boxed();
    let own = runner::keys(own, |fc| Some(Key::of(&fc)));
    // FCC:175-182, 187-233: the objects naming a peer (networking objects
    // aside) enqueue its ForeignCluster, made first if missing; Nodes only
    // when virtual.
    let related = |resource: kube::api::ApiResource, selector: &'static str| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        runner::keys_via(runner::touched(api, selector), fcs.clone(), enqueue)
    };
    let triggers = vec![
        own,
        related(consts::tenants(), ""),
        related(consts::identities(), ""),
        related(consts::virtual_nodes(), ""),
        related(consts::nodes(), "liqo.io/type=virtual-node"),
        more,
    ];
    let client = &client;
    runner::run("foreigncluster", triggers, |key| reconcile(client, key)).await;
}

/// FCC:175-182: the networking objects naming a peer enqueue its
/// ForeignCluster (made first if missing), passed on to the controller
/// `Consumer::start_as` runs (see `run_with`).
pub async fn wake_on_networking(
    client: kube::Client,
    more: tokio::sync::mpsc::UnboundedSender<crate::runner::Key>,
) {
    use crate::networking as net;
    let fcs: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(client.clone(), &crate::consts::foreign_clusters());
    let related = |resource: kube::api::ApiResource| {
        let api = kube::Api::all_with(client.clone(), &resource);
        crate::runner::keys_via(
            crate::runner::touched(api, crate::consts::REMOTE_CLUSTER_ID),
            fcs.clone(),
            enqueue,
        )
    };
    let mut keys = futures::stream::select_all([
        related(net::configurations()),
        related(net::gateway_servers()),
        related(net::gateway_clients()),
        related(net::connections()),
    ]);
    while let Some(key) = keys.next().await {
        if more.send(key).is_err() {
            return;
        }
    }
}

/// FCC:187-233: the ForeignCluster of the object's peer, created (and not
/// enqueued: its creation is an event) when there is none.
pub(crate) async fn enqueue(fcs: Api<DynamicObject>, obj: DynamicObject) -> Option<Vec<Key>> {
    let cluster = obj
        .metadata
        .labels
        .as_ref()?
        .get(REMOTE_CLUSTER_ID)?
        .clone();
    let selector = format!("{REMOTE_CLUSTER_ID}={cluster}");
    let found = fcs
        .list(&ListParams::default().labels(&selector))
        .await
        .ok()?;
    if let Some(fc) = found.items.first() {
        return Some(vec![Key::of(fc)]);
    }
    let mut fc = DynamicObject::new(&cluster, &consts::foreign_clusters());
    fc.metadata.labels = Some([(REMOTE_CLUSTER_ID.to_string(), cluster.clone())].into());
    fc.data = json!({"spec": {"clusterID": cluster}});
    if let Err(e) = fcs.create(&PostParams::default(), &fc).await {
        tracing::warn!(error = %e, %cluster, "creating the ForeignCluster");
    }
    None
}

/// What the controller reads about one peer.
#[derive(Default)]
pub struct Peer {
    /// Tenants labelled with the peer's ID (STATUS:264-291).
    pub tenants: Vec<Value>,
    /// Identities labelled with the peer's ID (STATUS:293-345).
    pub identities: Vec<Value>,
    /// VirtualNodes labelled with the peer's ID, each with its Node if any
    /// (STATUS:359-408).
    pub virtual_nodes: Vec<(Value, Option<Value>)>,
    /// Secrets labelled with the peer's ID and `liqo.io/identity-type:
    /// ControlPlane` (STATUS:303-318).
    pub control_plane_secrets: Vec<Value>,
    /// The networking objects naming the peer; `None` when this cluster
    /// serves no `networking.liqo.io` (the networking module off).
    pub networking: Option<crate::networking::status::Objects>,
}

/// FCC:75-158.
async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let fcs: Api<DynamicObject> = Api::all_with(client.clone(), &consts::foreign_clusters());
    let Some(fc) = fcs.get_opt(&key.name).await? else {
        return Ok(());
    };
    // FCC:93-98.
    let Some(cluster) = fc.data["spec"]["clusterID"]
        .as_str()
        .filter(|c| !c.is_empty())
        .map(str::to_string)
    else {
        return Err(Error::Waiting(format!("{} has no clusterID", key.name)));
    };
    let selector = ListParams::default().labels(&format!("{REMOTE_CLUSTER_ID}={cluster}"));
    let list = |resource: kube::api::ApiResource| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let selector = selector.clone();
        async move {
            let items = api.list(&selector).await?.items;
            Ok::<Vec<Value>, Error>(
                items
                    .iter()
                    .filter_map(|o| serde_json::to_value(o).ok())
                    .collect(),
            )
        }
    };
    let nodes = list(consts::nodes()).await?;
    let virtual_nodes = list(consts::virtual_nodes())
        .await?
        .into_iter()
        .map(|vn| {
            // `pkg/utils/getters/k8sGetters.go:532-548`: the Node of the
            // VirtualNode's name among the peer's Nodes.
            let node = nodes
                .iter()
                .find(|n| n["metadata"]["name"] == vn["metadata"]["name"])
                .cloned();
            (vn, node)
        })
        .collect();
    let secrets = ListParams::default().labels(&format!(
        "{REMOTE_CLUSTER_ID}={cluster},{IDENTITY_TYPE}={CONTROL_PLANE}"
    ));
    let control_plane_secrets = Api::<DynamicObject>::all_with(client.clone(), &consts::secrets())
        .list(&secrets)
        .await?
        .items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect();
    let peer = Peer {
        tenants: list(consts::tenants()).await?,
        identities: list(consts::identities()).await?,
        virtual_nodes,
        control_plane_secrets,
        networking: networking_objects(client, &selector).await?,
    };
    let mut updated = fc.clone();
    updated.data["status"] = status(&fc.data["status"], &peer, fc.metadata.generation)?;
    // FCC:103-113: the status is written on every reconcile; one that
    // changes nothing is stored as nothing by an API server.
    if updated.data["status"] != fc.data["status"] {
        fcs.replace_status(&key.name, &PostParams::default(), &updated)
            .await?;
    }
    Ok(())
}

/// The new status (FCC:119-153): the decision alone, no I/O.
pub fn status(old: &Value, peer: &Peer, generation: Option<i64>) -> Result<Value, Error> {
    let conditions = |module: &str| old["modules"][module]["conditions"].clone();
    let mut networking = module(false, conditions("networking"));
    let mut authentication = module(false, conditions("authentication"));
    let mut offloading = module(false, conditions("offloading"));
    let mut tenant_namespace = json!({});
    let mut status = json!({});
    let (mut consumer, mut provider) = (false, false);

    match &peer.networking {
        // STATUS:222-253 with no networking objects served: their
        // conditions go (:73, 127, 162, 204), the module stays disabled and
        // the exceptions are not written (:243-250).
        None => {
            for kind in [
                "NetworkConfigurationStatus",
                "NetworkGatewayServerStatus",
                "NetworkGatewayClientStatus",
                "NetworkConnectionStatus",
            ] {
                delete_condition(&mut networking, kind);
            }
        }
        Some(objects) => {
            let decided = crate::networking::status::module(objects);
            for kind in decided.delete {
                delete_condition(&mut networking, kind);
            }
            if decided.enabled {
                networking["enabled"] = json!(true);
            }
            for (kind, s, reason, message) in decided.ensure {
                ensure_condition(&mut networking, kind, s, reason, message);
            }
        }
    }

    // STATUS:264-291: a Tenant for the peer makes it a consumer.
    match peer.tenants.as_slice() {
        [] => delete_condition(&mut authentication, "AuthTenantStatus"),
        [tenant] => {
            consumer = true;
            authentication["enabled"] = json!(true);
            let ns = tenant["status"]["tenantNamespace"].as_str().unwrap_or("");
            if !ns.is_empty() {
                tenant_namespace["local"] = json!(ns);
            }
            // `apis/authentication/v1beta1/tenant_types.go`: the policy
            // defaults to KeysExchange.
            let keys_expected = tenant["spec"]["authzPolicy"] != "TolerateNoHandshake";
            let ready =
                !(keys_expected && tenant["status"]["authParams"].is_null() || ns.is_empty());
            let (s, reason, message) = if ready {
                (
                    "Ready",
                    "TenantReady",
                    "The tenant has been successfully configured",
                )
            } else {
                (
                    "NotReady",
                    "TenantNotReady",
                    "The tenant is not correctly configured",
                )
            };
            ensure_condition(&mut authentication, "AuthTenantStatus", s, reason, message);
        }
        _ => return Err(Error::Waiting("more than one Tenant for the peer".into())),
    }

    // STATUS:293-345: a control-plane Identity for the peer makes it a
    // provider.
    let control_planes: Vec<&Value> = peer
        .identities
        .iter()
        .filter(|i| i["spec"]["type"] == CONTROL_PLANE)
        .collect();
    match control_planes.as_slice() {
        [] => {
            delete_condition(&mut authentication, "AuthIdentityControlPlaneStatus");
            // STATUS:303-318: without one, a control-plane kubeconfig
            // Secret (a declarative peering) makes it a provider too, with
            // no condition; its server is the API server URL.
            match peer.control_plane_secrets.as_slice() {
                [] => {}
                [secret] => {
                    provider = true;
                    authentication["enabled"] = json!(true);
                    status["apiServerUrl"] = json!(kubeconfig_server(secret)?);
                }
                _ => {
                    return Err(Error::Waiting(
                        "found multiple secrets containing ControlPlane Kubeconfig for the peer"
                            .into(),
                    ))
                }
            }
        }
        [identity] => {
            provider = true;
            authentication["enabled"] = json!(true);
            let params = &identity["spec"]["authParams"];
            if let Some(url) = params["apiServer"].as_str().filter(|u| !u.is_empty()) {
                status["apiServerUrl"] = json!(url);
            }
            if let Some(url) = params["proxyURL"].as_str().filter(|u| !u.is_empty()) {
                status["foreignProxyUrl"] = json!(url);
            }
            tenant_namespace["local"] = identity["metadata"]["namespace"].clone();
            if let Some(remote) = identity["spec"]["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
            {
                tenant_namespace["remote"] = json!(remote);
            }
            let secret = identity["status"]["kubeconfigSecretRef"]["name"]
                .as_str()
                .unwrap_or("");
            let (s, reason, message) = if secret.is_empty() {
                (
                    "NotReady",
                    "IdentityNotReady",
                    "The identity is not correctly configured",
                )
            } else {
                (
                    "Ready",
                    "IdentityReady",
                    "The identity has been successfully configured",
                )
            };
            ensure_condition(
                &mut authentication,
                "AuthIdentityControlPlaneStatus",
                s,
                reason,
                message,
            );
        }
        _ => {
            return Err(Error::Waiting(
                "more than one control-plane Identity for the peer".into(),
            ))
        }
    }

    // STATUS:350-443.
    if peer.virtual_nodes.is_empty() {
        delete_condition(&mut offloading, "OffloadingVirtualNodeStatus");
        delete_condition(&mut offloading, "OffloadingNodeStatus");
    } else {
        provider = true;
        offloading["enabled"] = json!(true);
        let total = peer.virtual_nodes.len();
        // STATUS:450-458: nodes expected where `createNode` is true, which
        // the VirtualNode webhook defaults to true when unset.
        let expected = peer
            .virtual_nodes
            .iter()
            .filter(|(vn, _)| vn["spec"]["createNode"] != false)
            .count();
        // STATUS:384-393: a VirtualNode is ready when all its virtual
        // kubelet pods are; the model runs no such pods, so every one is.
        let ready_virtual = total;
        let ready_nodes = peer
            .virtual_nodes
            .iter()
            .filter(|(_, node)| node.as_ref().is_some_and(node_ready))
            .count();
        let (s, reason, message) = if ready_virtual == total {
            ("Ready", "VirtualNodesReady", "All virtual nodes are ready")
        } else if ready_virtual == 0 {
            (
                "NotReady",
                "VirtualNodesNotReady",
                "All virtual nodes are not ready",
            )
        } else {
            (
                "SomeNotReady",
                "VirtualNodesSomeNotReady",
                "Some virtual nodes are not ready",
            )
        };
        ensure_condition(
            &mut offloading,
            "OffloadingVirtualNodeStatus",
            s,
            reason,
            message,
        );
        // STATUS:427-440: the cases in Go's switch order.
        let (s, reason, message) = if ready_nodes == expected {
            ("Ready", "NodesReady", "All nodes are ready")
        } else if ready_nodes == 0 {
            ("NotReady", "NodesNotReady", "All nodes are not ready")
        } else {
            (
                "SomeNotReady",
                "NodesSomeNotReady",
                "Some nodes are not ready",
            )
        };
        ensure_condition(&mut offloading, "OffloadingNodeStatus", s, reason, message);
    }

    // `pkg/utils/foreigncluster/roles.go` SetRole.
    let role = match (consumer, provider) {
        (true, true) => "ConsumerAndProvider",
        (true, false) => "Consumer",
        (false, true) => "Provider",
        (false, false) => "Unknown",
    };
    status["role"] = json!(role);
    status["modules"] = json!({"networking": networking, "authentication": authentication, "offloading": offloading});
    if tenant_namespace.as_object().is_some_and(|t| !t.is_empty()) {
        status["tenantNamespace"] = tenant_namespace;
    }
    // STATUS:44-63: the ForeignCluster's own conditions are kept (the API
    // server checker that writes them, FCC:144-151, is not modelled).
    if old["conditions"].is_array() {
        status["conditions"] = old["conditions"].clone();
    }
    // FCC:153.
    status["observedGeneration"] = json!(generation.unwrap_or(0));
    Ok(status)
}

/// The first of each networking object naming the peer
/// (`pkg/utils/getters/k8sGetters.go`, `Get*ByClusterID`), or `None` when
/// the cluster serves none of them (a 404 on the list).
async fn networking_objects(
    client: &Client,
    selector: &ListParams,
) -> Result<Option<crate::networking::status::Objects>, Error> {
    use crate::networking as net;
    let first = |resource: kube::api::ApiResource| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let selector = selector.clone();
        async move {
            match api.list(&selector).await {
                Ok(list) => Ok(Some(
                    list.items
                        .first()
                        .and_then(|o| serde_json::to_value(o).ok()),
                )),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
                Err(e) => Err(Error::from(e)),
            }
        }
    };
    let Some(configuration) = first(net::configurations()).await? else {
        return Ok(None);
    };
    Ok(Some(net::status::Objects {
        configuration,
        server: first(net::gateway_servers()).await?.flatten(),
        client: first(net::gateway_clients()).await?.flatten(),
        connection: first(net::connections()).await?.flatten(),
    }))
}

/// The server of the current context of a kubeconfig Secret's
/// `kubeconfig` (`pkg/utils/kubeconfig/restcfg.go`,
/// `clientcmd.RESTConfigFromKubeConfig`'s `Host`); one that does not read
/// is an error.
fn kubeconfig_server(secret: &Value) -> Result<String, Error> {
    use base64::Engine;
    let bad = |why: &str| Error::Identity(format!("control-plane kubeconfig Secret: {why}"));
    let text = secret["data"][KUBECONFIG_FIELD]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .ok_or_else(|| bad("no kubeconfig"))?;
    let text = String::from_utf8(text).map_err(|_| bad("not text"))?;
    let config = kube::config::Kubeconfig::from_yaml(&text).map_err(|e| bad(&e.to_string()))?;
    let context = config
        .contexts
        .iter()
        .find(|c| Some(&c.name) == config.current_context.as_ref())
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| bad("no current context"))?;
    config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .ok_or_else(|| bad("no server"))
}

/// A module as STATUS:44-63 starts it: disabled, conditions kept.
fn module(enabled: bool, conditions: Value) -> Value {
    let mut module = json!({"enabled": enabled});
    if conditions.as_array().is_some_and(|c| !c.is_empty()) {
        module["conditions"] = conditions;
    }
    module
}

/// `pkg/utils/foreigncluster/conditions.go:86-113`: transition time moved
/// only when status, reason or message change.
fn ensure_condition(module: &mut Value, kind: &str, status: &str, reason: &str, message: &str) {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let fresh = json!({"type": kind, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now});
    let Some(module) = module.as_object_mut() else {
        return;
    };
    let list = module.entry("conditions").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let Value::Array(list) = list else {
        return;
    };
    match list.iter_mut().find(|c| c["type"] == kind) {
        Some(c) if c["status"] == status && c["reason"] == reason && c["message"] == message => {}
        Some(c) => *c = fresh,
        None => list.push(fresh),
    }
}

/// `pkg/utils/foreigncluster/conditions.go:120-123, 163-168`.
fn delete_condition(module: &mut Value, kind: &str) {
    if let Some(list) = module.get_mut("conditions").and_then(Value::as_array_mut) {
        list.retain(|c| c["type"] != kind);
        if list.is_empty() {
            if let Some(m) = module.as_object_mut() {
                m.remove("conditions");
            }
        }
    }
}

/// `pkg/utils/nodeUtils.go:68` IsNodeReady: the Ready condition is True.
fn node_ready(node: &Value) -> bool {
    node["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}
