//! The virtual kubelet's reflection of Secrets, ConfigMaps and Services,
//! as Liqo v1.2.0 runs it: for each namespace the NamespaceMap of peer R
//! maps `Accepted` (`reflection/namespacemap/namespace.go:82-156`), every
//! object of the local namespace is kept as a copy of the same name (the
//! root CA ConfigMap renamed) in the remote namespace, forged and decided by
//! [`crate::reflection_forge`]; local and remote events both queue the
//! local key (`reflection/configuration/secret.go:65-68`,
//! `configmap.go:72-75`, `reflection/exposition/service.go:74-77`), and a
//! mapping turning `Accepted` queues its namespace's local objects (Liqo
//! starts informers on the local and the remote namespace,
//! `reflection/manager/manager.go:166-199`).
//!
//! The copy is written by server-side apply, forced, as field manager
//! `reflection.liqo.io` (`forge/forge.go:28-29, 65-71`), and deleted with a
//! UID precondition (`reflection/generic/namespaced.go:91-100`), with the
//! rules of the `liqo-virtual-kubelet-remote` ClusterRole it needs
//! (`deployments/liqo/files/liqo-virtual-kubelet-remote-ClusterRole.yaml:1-17`);
//! locally it reads as the virtual kubelet
//! (`liqo-virtual-kubelet-local-ClusterRole.yaml:1-12, 48-58, 118-126`).
//!
//! Simplified, and where the model differs from Liqo:
//! - the identity on the peer: Liqo's virtual kubelet writes with its
//!   ResourceSlice's kubeconfig
//!   (`virtualnodecreator-controller/virtualnodecreator_controller.go:104,115`),
//!   user `<slice>-<6 bytes of sha256(consumer ID), hex>`, group
//!   `<consumer ID>` (`authentication/csr.go:46-68`), the ClusterRole bound
//!   to that group in each remote namespace only
//!   (`namespacemap-controller/enforcement.go:82-104`); the model writes as
//!   the local cluster's identity (user `<local cluster ID>`, group
//!   `liqo.io`) bound cluster-wide, one reflection per peering rather than
//!   per virtual node. No test relies on the peer-side user of a copy
//!   beyond the model's own conformance test;
//! - Liqo watches each namespace pair apart; the model watches each kind
//!   once, mapping remote events back through the NamespaceMap (as
//!   [`crate::reflection`] does for pods), and on a mapping's start queues
//!   the local objects only: a copy whose local object went while its
//!   namespace was not reflected stays until a remote event touches it
//!   (Liqo's remote informer would find and delete it);
//! - one reflection policy for the three kinds (Liqo configures each
//!   reflector apart, `provider/provider.go:144-147`; the chart's default
//!   is DenyList for all three).
//!
//! Events (`Event(...)` on the local object) are not recorded. A
//! namespace whose mapping stops being `Accepted` is no longer reflected,
//! its copies left to the namespace's deletion, as Liqo stops its
//! reflector (`namespace.go:98-121`). EndpointSlices are reflected apart,
//! as ShadowEndpointSlices: `reflection_endpointslices`.

use futures::stream::BoxStream;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
};
use kube::Client;
use kube_test_server::KubeApiServer;
use serde_json::Value;

use crate::consts::REMOTE_CLUSTER_ID;
use crate::identity::{self, client_as, client_in_groups, Rule, READ};
use crate::offloading_consts::{config_maps, namespace_maps, secrets, services};
use crate::reflection_forge::{self, decide, At, Decision, Ends, Kind, Options};
use crate::runner::{self, Key};
use crate::{Error, Tasks, VIRTUAL_KUBELET};

/// On the local cluster (`liqo-virtual-kubelet-local` ClusterRole, the part
/// this model uses).
pub const LOCAL_RULES: &[Rule] = &[
    Rule::new(&[""], &["configmaps", "services"], READ),
    Rule::new(&[""], &["secrets"], READ),
    Rule::new(&["offloading.liqo.io"], &["namespacemaps"], READ),
];
/// On the peer (`liqo-virtual-kubelet-remote` ClusterRole, the part this
/// model uses).
pub const REMOTE_RULES: &[Rule] = &[Rule::new(
    &[""],
    &["configmaps", "secrets", "services"],
    &[
        "create", "delete", "get", "list", "patch", "update", "watch",
    ],
)];

/// `forge/forge.go:28-29`.
pub const FIELD_MANAGER: &str = "reflection.liqo.io";

/// The kinds reflected, each with its resource.
const KINDS: &[(Kind, &str)] = &[
    (Kind::Secret, "virtual-kubelet-secrets"),
    (Kind::ConfigMap, "virtual-kubelet-configmaps"),
    (Kind::Service, "virtual-kubelet-services"),
];

fn resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::Secret => secrets(),
        Kind::ConfigMap => config_maps(),
        Kind::Service => services(),
    }
}

/// The reflection of one virtual kubelet; stops when dropped.
pub struct Reflection {
    _tasks: Tasks,
}

impl Reflection {
    /// Reflect what `local` (cluster `local_id`) offloads to `remote`
    /// (`remote_id`) through the NamespaceMap of `remote_id` (which
    /// [`crate::offloading::Peering::start_namespaces`] keeps): grants the
    /// virtual kubelet's RBAC on both and starts one task per kind.
    pub async fn start(
        local: &KubeApiServer,
        local_id: &str,
        remote: &KubeApiServer,
        remote_id: &str,
        options: Options,
    ) -> Result<Reflection, Error> {
        let sides = Sides::connect(
            (local, local_id),
            (remote, remote_id),
            "objects",
            (LOCAL_RULES, REMOTE_RULES),
        )
        .await?;
        let reflector = Reflector {
            local: sides.local,
            remote: sides.remote,
            ends: sides.ends,
            options,
        };
        let tasks = KINDS
            .iter()
            .map(|(kind, name)| tokio::spawn(run(reflector.clone(), *kind, name)))
            .collect();
        Ok(Reflection {
            _tasks: Tasks(tasks),
        })
    }
}

/// The two sides of one virtual kubelet's reflection, shared by this
/// reflection and the EndpointSlice one
/// ([`crate::reflection_endpointslices`]): its clients — locally as the
/// virtual kubelet, on the peer as the local cluster's identity (see the
/// module docs) — and the two cluster IDs.
pub(crate) struct Sides {
    pub local: Client,
    pub remote: Client,
    pub ends: Ends,
}

impl Sides {
    /// Grant the virtual kubelet `rules` (local, remote) on `local` and on
    /// `remote` (bindings named after `what`), then connect as it.
    pub async fn connect(
        (local, local_id): (&KubeApiServer, &str),
        (remote, remote_id): (&KubeApiServer, &str),
        what: &str,
        (local_rules, remote_rules): (&[Rule], &[Rule]),
    ) -> Result<Sides, Error> {
        identity::grant(
            local,
            VIRTUAL_KUBELET,
            &format!("liqo-model-virtual-kubelet-{what}"),
            local_rules,
        );
        identity::grant(
            remote,
            local_id,
            &format!("liqo-model-virtual-kubelet-remote-{what}-{local_id}"),
            remote_rules,
        );
        Ok(Sides {
            local: client_as(local, VIRTUAL_KUBELET).await?,
            remote: client_in_groups(remote, local_id, &["liqo.io"]).await?,
            ends: Ends {
                local_cluster_id: local_id.to_string(),
                remote_cluster_id: remote_id.to_string(),
            },
        })
    }
}

#[derive(Clone)]
struct Reflector {
    local: Client,
    remote: Client,
    ends: Ends,
    options: Options,
}

impl Reflector {
    fn maps(&self) -> Api<DynamicObject> {
        Api::all_with(self.local.clone(), &namespace_maps())
    }
}

/// The `Accepted` (local, remote) namespace pairs of the NamespaceMaps for
/// `remote_cluster_id` (`reflection/namespacemap/namespace.go:45-56,
/// 138-146`); the EndpointSlice reflection reads them too.
pub(crate) async fn accepted(
    maps: &Api<DynamicObject>,
    remote_cluster_id: &str,
) -> Result<Vec<(String, String)>, kube::Error> {
    let selector = format!("{REMOTE_CLUSTER_ID}={remote_cluster_id}");
    let list = maps.list(&ListParams::default().labels(&selector)).await?;
    Ok(list.items.iter().flat_map(|nm| pairs(&nm.data)).collect())
}

/// The `Accepted` (local, remote) pairs of one NamespaceMap.
pub(crate) fn pairs(map: &Value) -> Vec<(String, String)> {
    let mapping = map["status"]["currentMapping"].as_object();
    mapping
        .into_iter()
        .flatten()
        .filter(|(_, m)| m["phase"] == "Accepted")
        .filter_map(|(local, m)| Some((local.clone(), m["remoteNamespace"].as_str()?.to_string())))
        .collect()
}

async fn run(r: Reflector, kind: Kind, name: &'static str) {
    let api = resource(kind);
    let local = runner::keys(
        runner::touched(Api::all_with(r.local.clone(), &api), ""),
        |obj| Some(Key::of(&obj)),
    );
    let remote_id = r.ends.remote_cluster_id.clone();
    let ends = r.ends.clone();
    // Remote events, keyed by the local namespace and name.
    let remote = runner::keys_via(
        runner::touched(Api::all_with(r.remote.clone(), &api), ""),
        r.maps(),
        move |maps, obj: DynamicObject| {
            let remote_id = remote_id.clone();
            let ends = ends.clone();
            async move {
                let remote_ns = obj.metadata.namespace.clone()?;
                let name = reflection_forge::local_name(kind, obj.metadata.name.as_deref()?, &ends);
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
    let mapped = mappings_started(&r, kind);
    let r = &r;
    runner::run(name, vec![local, remote, mapped], |key| {
        reconcile(r, kind, key)
    })
    .await;
}

/// The keys of the local objects of each namespace the NamespaceMap maps
/// `Accepted` (the objects already there when a namespace's reflection
/// starts).
fn mappings_started(r: &Reflector, kind: Kind) -> BoxStream<'static, Key> {
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
                    let objects: Api<DynamicObject> =
                        Api::namespaced_with(local.clone(), &namespace, &resource(kind));
                    let list = objects.list(&ListParams::default()).await.ok()?;
                    keys.extend(list.items.iter().map(Key::of));
                }
                Some(keys)
            }
        },
    )
}

async fn reconcile(r: &Reflector, kind: Kind, key: Key) -> Result<(), Error> {
    let pairs = accepted(&r.maps(), &r.ends.remote_cluster_id).await?;
    let Some((_, remote_ns)) = pairs.into_iter().find(|(local, _)| *local == key.namespace) else {
        return Ok(());
    };
    let api = resource(kind);
    let locals: Api<DynamicObject> = Api::namespaced_with(r.local.clone(), &key.namespace, &api);
    let remotes: Api<DynamicObject> = Api::namespaced_with(r.remote.clone(), &remote_ns, &api);
    let remote_name = reflection_forge::remote_name(kind, &key.name, &r.ends);
    let local = locals.get_opt(&key.name).await?.map(json);
    let remote = remotes.get_opt(&remote_name).await?.map(json);
    let at = At {
        kind,
        name: &key.name,
        local_namespace: &key.namespace,
        remote_namespace: &remote_ns,
    };
    let decision = decide(at, local.as_ref(), remote.as_ref(), &r.ends, &r.options);
    match decision {
        Decision::Nothing => Ok(()),
        Decision::Refuse(why) => Err(Error::Waiting(why)),
        Decision::Delete { uid } => {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match remotes.delete(&remote_name, &params).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        Decision::Apply(obj) => {
            let params = PatchParams::apply(FIELD_MANAGER).force();
            remotes
                .patch(&remote_name, &params, &Patch::Apply(&obj))
                .await?;
            Ok(())
        }
    }
}

fn json(obj: DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or_default()
}
