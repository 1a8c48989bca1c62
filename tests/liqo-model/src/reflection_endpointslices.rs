//! The virtual kubelet's reflection of EndpointSlices, as Liqo v1.2.0 runs
//! it in `pkg/virtualKubelet/reflection/exposition/endpointslice.go` (EPS
//! below), forged by [`crate::reflection_endpointslice_forge`]: for each
//! namespace the NamespaceMap of peer R maps `Accepted`, every
//! EndpointSlice of the local namespace is kept as a ShadowEndpointSlice
//! of the same name in the remote namespace (EPS:274-326), which the
//! peer's ShadowEndpointSlice controller
//! (`shadowendpointslice_controller`) turns into an EndpointSlice.
//! Local EndpointSlices, remote ShadowEndpointSlices (EPS:93-96) and local
//! Services (all the slices labelled with their name, EPS:116-118, 434-448)
//! queue the local key; a mapping turning `Accepted` queues its
//! namespace's slices, as [`crate::reflection_objects`] does.
//!
//! `Handle` (EPS:124-327): the `kubernetes` slice of `default` is skipped
//! (:128-132); a remote object not made by this reflection is left alone
//! (:147-156); a slice skipped by its marks or its Service's has its shadow
//! deleted (:158-179); a local slice gone has its shadow deleted with a UID
//! precondition (:183-193, `reflection/generic/namespaced.go:91-100`);
//! otherwise the shadow is forged — endpoints on the peer dropped, the
//! others' addresses translated (local pod CIDRs kept, others through the
//! local namespace's `ipam.liqo.io` IPs, EPS:340-398) — and created, or
//! updated when it differs (:286-326).
//!
//! Not modelled: direct connections between providers (EPS:195-272, 281-283:
//! no Service here asks for `liqo.io/use-direct-connection`), Events, the
//! per-slice translation cache (which gives what a new translation would).
//! As in [`crate::reflection_objects`], the peer-side user is the local
//! cluster's identity (user `<local cluster ID>`, group `liqo.io`), its
//! rules bound cluster-wide rather than in each remote namespace.

use std::collections::BTreeMap;

use futures::stream::BoxStream;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions,
};
use kube::core::GroupVersionKind;
use kube::Client;
use kube_test_server::KubeApiServer;
use serde_json::Value;

use crate::consts::REMOTE_CLUSTER_ID;
use crate::identity::{Rule, READ};
use crate::networking::remap::Cidr;
use crate::offloading_consts::{namespace_maps, services};
use crate::reflection_endpointslice_forge::{
    self as forge, forge_shadow, is_ours, remote_endpoints, should_skip, should_update,
};
use crate::reflection_forge::{Ends, Policy};
// The `Accepted` namespace pairs of the peer's NamespaceMaps
// (`reflection/namespacemap/namespace.go:45-56, 138-146`), read as the
// other kinds' reflection reads them.
use crate::reflection_objects::{accepted, pairs, Sides};
use crate::runner::{self, Key};
use crate::{Error, Tasks};

/// On the local cluster (`liqo-virtual-kubelet-local` ClusterRole,
/// `deployments/liqo/files/liqo-virtual-kubelet-local-ClusterRole.yaml`,
/// the part this reflection uses).
pub const LOCAL_RULES: &[Rule] = &[
    Rule::new(&["discovery.k8s.io"], &["endpointslices"], READ),
    Rule::new(&[""], &["services", "nodes"], READ),
    Rule::new(&["ipam.liqo.io"], &["ips"], READ),
    Rule::new(&["offloading.liqo.io"], &["namespacemaps"], READ),
];
/// On the peer (`liqo-virtual-kubelet-remote` ClusterRole, its
/// `shadowendpointslices` rule).
pub const REMOTE_RULES: &[Rule] = &[Rule::new(
    &["offloading.liqo.io"],
    &["shadowendpointslices"],
    &["create", "delete", "get", "list", "update", "watch"],
)];

/// `forge.ReflectionFieldManager` (`forge/forge.go:29`), EPS:289, 310.
pub const FIELD_MANAGER: &str = "reflection.liqo.io";

pub fn endpoint_slices() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("discovery.k8s.io", "v1", "EndpointSlice"),
        "endpointslices",
    )
}

pub fn shadow_endpoint_slices() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("offloading.liqo.io", "v1beta1", "ShadowEndpointSlice"),
        "shadowendpointslices",
    )
}

fn ips() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("ipam.liqo.io", "v1alpha1", "IP"),
        "ips",
    )
}

fn nodes() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Node"), "nodes")
}

/// How the virtual kubelet reflects EndpointSlices.
#[derive(Debug, Clone)]
pub struct Options {
    /// The local cluster's pod CIDRs (the virtual kubelet's
    /// `localPodCIDRs`, EPS:79-103: from the local IPAM's pod-CIDR
    /// Network): addresses in them are reflected as they are, the peer
    /// remaps them.
    pub local_pod_cidrs: Vec<String>,
    /// The reflection policy (the chart's `reflection.endpointslice.type`,
    /// default `DenyList`).
    pub policy: Policy,
    /// The forging options' labels and annotations not reflected
    /// (`forge/forge.go:74-97`; [`crate::reflection_forge::Options`]'s
    /// defaults).
    pub labels_not_reflected: Vec<String>,
    pub annotations_not_reflected: Vec<String>,
}

impl Default for Options {
    /// The chart's defaults, on a cluster whose pods are in kind's
    /// `10.244.0.0/16` (as [`crate::networking::Options`]).
    fn default() -> Self {
        let objects = crate::reflection_forge::Options::default();
        Options {
            local_pod_cidrs: vec!["10.244.0.0/16".into()],
            policy: Policy::DenyList,
            labels_not_reflected: objects.labels_not_reflected,
            annotations_not_reflected: objects.annotations_not_reflected,
        }
    }
}

/// The EndpointSlice reflection of one virtual kubelet; stops when dropped.
pub struct Reflection {
    _tasks: Tasks,
}

impl Reflection {
    /// Reflect the EndpointSlices `local` (cluster `local_id`) offloads to
    /// `remote` (`remote_id`) through the NamespaceMap of `remote_id`:
    /// grants the virtual kubelet's RBAC on both and starts the reflector.
    pub async fn start(
        local: &KubeApiServer,
        local_id: &str,
        remote: &KubeApiServer,
        remote_id: &str,
        options: Options,
    ) -> Result<Reflection, Error> {
        let cidrs = options
            .local_pod_cidrs
            .iter()
            .map(|c| Cidr::parse(c).ok_or_else(|| Error::Config(format!("local pod CIDR {c:?}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let sides = Sides::connect(
            (local, local_id),
            (remote, remote_id),
            "endpointslices",
            (LOCAL_RULES, REMOTE_RULES),
        )
        .await?;
        let reflector = Reflector {
            local: sides.local,
            remote: sides.remote,
            ends: sides.ends,
            cidrs,
            options,
        };
        Ok(Reflection {
            _tasks: Tasks(vec![tokio::spawn(run(reflector))]),
        })
    }
}

#[derive(Clone)]
struct Reflector {
    local: Client,
    remote: Client,
    ends: Ends,
    cidrs: Vec<Cidr>,
    options: Options,
}

impl Reflector {
    fn maps(&self) -> Api<DynamicObject> {
        Api::all_with(self.local.clone(), &namespace_maps())
    }
}

async fn run(r: Reflector) {
    let local = runner::keys(
        runner::touched(Api::all_with(r.local.clone(), &endpoint_slices()), ""),
        |obj| Some(Key::of(&obj)),
    );
    let remote_id = r.ends.remote_cluster_id.clone();
    // EPS:95-96: remote events keyed by the local namespace.
    let remote = runner::keys_via(
        runner::touched(
            Api::all_with(r.remote.clone(), &shadow_endpoint_slices()),
            "",
        ),
        r.maps(),
        move |maps, obj: DynamicObject| {
            let remote_id = remote_id.clone();
            async move {
                let remote_ns = obj.metadata.namespace.clone()?;
                let name = obj.metadata.name.clone()?;
                let pairs = accepted(&maps, &remote_id).await.ok()?;
                Some(
                    pairs
                        .into_iter()
                        .filter(|(_, remote)| *remote == remote_ns)
                        .map(|(namespace, _)| Key {
                            namespace,
                            name: name.clone(),
                        })
                        .collect(),
                )
            }
        },
    );
    // EPS:116-118, 434-448: a Service queues the slices labelled with it.
    let slices_api: Api<DynamicObject> = Api::all_with(r.local.clone(), &endpoint_slices());
    let by_service = runner::keys_via(
        runner::touched(Api::all_with(r.local.clone(), &services()), ""),
        slices_api,
        |slices, svc: DynamicObject| async move {
            let ns = svc.metadata.namespace.clone()?;
            let name = svc.metadata.name.clone()?;
            let selector = format!("{}={name}", forge::LABEL_SERVICE_NAME);
            let list = slices
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            Some(
                list.items
                    .iter()
                    .filter(|s| s.metadata.namespace.as_deref() == Some(ns.as_str()))
                    .map(Key::of)
                    .collect(),
            )
        },
    );
    let mapped = mappings_started(&r);
    let r = &r;
    runner::run(
        "virtual-kubelet-endpointslices",
        vec![local, remote, by_service, mapped],
        |key| reconcile(r, key),
    )
    .await;
}

/// The keys of the local slices of each namespace mapped `Accepted`.
fn mappings_started(r: &Reflector) -> BoxStream<'static, Key> {
    let selector = format!("{REMOTE_CLUSTER_ID}={}", r.ends.remote_cluster_id);
    let local = r.local.clone();
    runner::keys_via(
        runner::touched(r.maps(), &selector),
        r.maps(),
        move |_, map: DynamicObject| {
            let local = local.clone();
            async move {
                let mut keys = Vec::new();
                for (namespace, _) in pairs(&map.data) {
                    let slices: Api<DynamicObject> =
                        Api::namespaced_with(local.clone(), &namespace, &endpoint_slices());
                    let list = slices.list(&ListParams::default()).await.ok()?;
                    keys.extend(list.items.iter().map(Key::of));
                }
                Some(keys)
            }
        },
    )
}

fn json(obj: DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or_default()
}

/// A list that is empty when the resource is not served (Liqo's IPAM CRDs
/// are not on every test cluster).
async fn list_or_empty(api: Api<DynamicObject>) -> Result<Vec<Value>, Error> {
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items.into_iter().map(json).collect()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

async fn reconcile(r: &Reflector, key: Key) -> Result<(), Error> {
    // EPS:128-132.
    if key.namespace == "default" && key.name == "kubernetes" {
        return Ok(());
    }
    let pairs = accepted(&r.maps(), &r.ends.remote_cluster_id).await?;
    let Some((_, remote_ns)) = pairs.into_iter().find(|(local, _)| *local == key.namespace) else {
        return Ok(());
    };
    let locals: Api<DynamicObject> =
        Api::namespaced_with(r.local.clone(), &key.namespace, &endpoint_slices());
    let shadows: Api<DynamicObject> =
        Api::namespaced_with(r.remote.clone(), &remote_ns, &shadow_endpoint_slices());
    let mut local = locals.get_opt(&key.name).await?.map(json);
    let remote = shadows.get_opt(&key.name).await?.map(json);
    // EPS:147-156: never another's object.
    if remote.as_ref().is_some_and(|s| !is_ours(s, &r.ends)) {
        return Ok(());
    }
    // EPS:158-179: a skipped slice is as if gone.
    if let Some(l) = &local {
        let service = match l["metadata"]["labels"][forge::LABEL_SERVICE_NAME].as_str() {
            Some(svc) => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(r.local.clone(), &key.namespace, &services());
                api.get_opt(svc).await?.map(json)
            }
            None => None,
        };
        if should_skip(l, service.as_ref(), r.options.policy).map_err(Error::Waiting)? {
            local = None;
        }
    }
    // EPS:183-193.
    let Some(local) = local else {
        if let Some(remote) = remote {
            let uid = remote["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match shadows.delete(&key.name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        return Ok(());
    };
    // EPS:201-212, 274-279: the endpoints forged, addresses translated.
    let node_list = list_or_empty(Api::all_with(r.local.clone(), &nodes())).await?;
    let nodes: BTreeMap<String, Value> = node_list
        .into_iter()
        .map(|n| {
            (
                n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                n,
            )
        })
        .collect();
    let ip_list = list_or_empty(Api::namespaced_with(
        r.local.clone(),
        &key.namespace,
        &ips(),
    ))
    .await?;
    let mut translate =
        |originals: &[String]| forge::map_endpoint_ips(originals, &r.cidrs, &ip_list);
    let endpoints = remote_endpoints(
        local["endpoints"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default(),
        &nodes,
        &r.ends,
        &mut translate,
    )
    .map_err(|e| {
        Error::Waiting(format!(
            "Reflection of local EndpointSlice {}/{} failed: {e}",
            key.namespace, key.name
        ))
    })?;
    let target = forge_shadow(
        &local,
        remote.as_ref(),
        &remote_ns,
        &r.ends,
        &r.options.labels_not_reflected,
        &r.options.annotations_not_reflected,
        endpoints,
    );
    let target: DynamicObject =
        serde_json::from_value(target).map_err(|e| Error::Waiting(e.to_string()))?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match remote {
        // EPS:286-306: an AlreadyExists is not an error.
        None => match shadows.create(&params, &target).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        },
        // EPS:308-326.
        Some(remote) => {
            if should_update(&remote, &json(target.clone())) {
                shadows.replace(&key.name, &params, &target).await?;
            }
            Ok(())
        }
    }
}
