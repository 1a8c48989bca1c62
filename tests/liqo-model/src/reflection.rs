//! The virtual kubelet's pod reflection, as Liqo v1.2.0 has it in
//! `pkg/virtualKubelet/reflection/workload/podns.go` (PODNS) with the
//! forging in `pkg/virtualKubelet/forge/pods.go` (FP) and `meta.go`: each
//! pod bound to the virtual node of peer R becomes a ShadowPod of its name
//! in the namespace R holds for its namespace (the NamespaceMap's
//! `currentMapping`, `Accepted`), labelled with the pod's labels plus
//! `offloading.liqo.io/origin`, `…/destination`, `…/nodename`
//! (`meta.go:36-66`, FP:163-205), its spec forged once, at creation
//! (FP:208-254: containers, init containers, volumes, restart policy and
//! the like; tolerations without Liqo's own; no node name or affinity; no
//! service account token); the ShadowPod is deleted with the pod
//! (PODNS:147-156); the local pod is labelled `liqo.io/shadowPod=true`
//! (PODNS:288-306), a label the ShadowPod does not get (FP:172-177); and
//! the remote pod's status is copied to the local pod
//! (PODNS:379-470, FP:101-124, the host IP the virtual node's), its
//! address translated into how the local cluster sees the peer's pods
//! ([`local_pod_status`], [`net_configuration`]). A remote pod's or
//! ShadowPod's change reaches only the virtual kubelet of the node it is
//! labelled with (`offloading.liqo.io/nodename`, Liqo's
//! `RemoteShadowNamespacedKeyer`), so several virtual nodes of one peer
//! each keep their own ShadowPods.
//!
//! The ShadowPod carries `liqo.io/creator-user` = the user the reflection
//! writes as: on a real provider Liqo's ShadowPod mutating webhook sets it
//! from the request's user (`pkg/webhooks/shadowpod/mutate.go`), and the
//! test server's hooks are not given the user. That user is the model's
//! `remote_user`. Liqo's virtual kubelet writes as its ResourceSlice's
//! identity: the kubeconfig Secret of the Identity `resourceslice-<slice>`
//! (`virtualnodecreator_controller.go:103-118`,
//! `pkg/virtualKubelet/liqoNodeProvider` reads it through
//! `spec.kubeconfigSecretRef`), whose certificate the provider signed for
//! CN `<slice>-<hash>`, O `<consumer>` (`authentication/csr.go:39-68`) —
//! the user whose Quota the ShadowPod webhook checks. [`SliceReflection`]
//! runs it so, the user read from that certificate;
//! `offloading::Peering::start` (no slice) gives the local
//! cluster's ID instead.
//!
//! Not modelled: restarts counting, the pod's own deletion protocol (the
//! test server deletes at once), terminal pods, the per-pod cache of the
//! last translation (PODNS:736-740, which gives what a new translation
//! would).

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::consts::{CREATOR_USER, REMOTE_CLUSTER_ID, VIRTUAL_NODE_TOLERATION_KEY};
use crate::identity::{Rule, READ};
use crate::offloading_consts::{
    namespace_maps, pods, shadow_pods, DESTINATION, ORIGIN, ORIGIN_NODE_NAME,
};
use crate::runner::{self, Key};
use crate::virtual_node_controller::LOCAL_POD_LABEL;
use crate::Error;

/// On the local cluster (`liqo-virtual-kubelet-local` ClusterRole, the part
/// this model uses).
pub const LOCAL_RULES: &[Rule] = &[
    Rule::new(&[""], &["pods"], &["get", "list", "watch", "patch"]),
    Rule::new(&[""], &["pods/status"], &["get", "update", "patch"]),
    Rule::new(&["offloading.liqo.io"], &["namespacemaps"], READ),
    // The peer's ForeignCluster and Configuration, read for the pods'
    // addresses (`cmd/virtual-kubelet/root/root.go:164-178`).
    Rule::new(&["core.liqo.io"], &["foreignclusters"], READ),
    Rule::new(&["networking.liqo.io"], &["configurations"], READ),
];
/// On the peer (`liqo-virtual-kubelet-remote` ClusterRole, the part this
/// model uses).
pub const REMOTE_RULES: &[Rule] = &[
    Rule::new(
        &["offloading.liqo.io"],
        &["shadowpods"],
        &["get", "list", "watch", "create", "delete"],
    ),
    Rule::new(&[""], &["pods"], READ),
];

/// `pkg/virtualKubelet/forge/forge.go:29`.
pub const REFLECTION_FIELD_MANAGER: &str = "reflection.liqo.io";

/// `pkg/virtualKubelet/forge/forge.go:54`: the host IP offloaded pods show
/// (the virtual node's address; Liqo's tests use this one).
pub const NODE_IP: &str = "1.1.1.1";

/// One virtual node's reflection.
pub struct Reflector {
    /// The local cluster, as its virtual kubelet.
    pub local: Client,
    /// The peer, as the identity the peering gave the local cluster there
    /// (also the ShadowPods' creator).
    pub remote: Client,
    pub remote_user: String,
    pub node_name: String,
    pub local_cluster_id: String,
    pub remote_cluster_id: String,
    /// The chart's `networking.reflectIPs` (default `true`,
    /// `deployments/liqo/values.yaml:58`); `false` passes the virtual
    /// kubelet `--disable-ip-reflection`
    /// (`templates/liqo-vk-options-template.yaml:9-11`), and the local pods
    /// show no IP (FP:344-350).
    pub reflect_ips: bool,
}

/// Reflect until the task is dropped.
pub async fn run(r: Reflector) {
    let node = r.node_name.clone();
    let local = runner::keys(
        runner::touched(Api::all_with(r.local.clone(), &pods()), ""),
        move |p| (p.data["spec"]["nodeName"] == node.as_str()).then(|| Key::of(&p)),
    );
    // Remote pods and ShadowPods of this origin and this virtual node,
    // back to the local pod through the NamespaceMap's mapping (Liqo runs
    // one reflector per namespace pair, which knows both ends). Only this
    // node's: Liqo's `RemoteShadowNamespacedKeyer`
    // (`reflection/workload/shadowpod.go`, used for both remote informers
    // in `workload/pod.go` `NewNamespaced`) enqueues an object only when
    // its `offloading.liqo.io/nodename` is the virtual kubelet's node —
    // another virtual node's ShadowPod, whose local pod this one's lister
    // (pods bound to it) does not hold, would otherwise be deleted as
    // orphaned (PODNS:147-156), and two virtual nodes of one peer would
    // delete each other's ShadowPods for ever.
    let selector = format!(
        "{ORIGIN}={},{ORIGIN_NODE_NAME}={}",
        r.local_cluster_id, r.node_name
    );
    let maps: Api<DynamicObject> = Api::all_with(r.local.clone(), &namespace_maps());
    let back = |objects| {
        runner::keys_via(
            objects,
            maps.clone(),
            |maps, obj: DynamicObject| async move {
                let remote_ns = obj.metadata.namespace.clone()?;
                let name = obj.metadata.name.clone()?;
                let list = list_until_listed(&maps).await;
                let keys = list
                    .iter()
                    .flat_map(|nm| {
                        let mapping = nm.data["status"]["currentMapping"].as_object().cloned();
                        mapping.into_iter().flatten().filter_map(|(local, m)| {
                            (m["remoteNamespace"] == remote_ns.as_str()).then_some(local)
                        })
                    })
                    .map(|namespace| Key {
                        namespace,
                        name: name.clone(),
                    })
                    .collect();
                Some(keys)
            },
        )
    };
    let remote_pods = back(runner::touched(
        Api::all_with(r.remote.clone(), &pods()),
        &selector,
    ));
    let remote_shadows = back(runner::touched(
        Api::all_with(r.remote.clone(), &shadow_pods()),
        &selector,
    ));
    let r = &r;
    runner::run(
        "virtual-kubelet-pods",
        vec![local, remote_pods, remote_shadows],
        |key| reconcile(r, key),
    )
    .await;
}

/// Every NamespaceMap, listed again after [`LIST_RETRY`] until a list
/// succeeds: Liqo's reflector maps a remote object to its local one from
/// what it holds in memory (its namespace pair), which cannot fail — a
/// failed list must not lose the remote change (its status would never be
/// copied back, the local pod Pending for ever).
async fn list_until_listed(maps: &Api<DynamicObject>) -> Vec<DynamicObject> {
    loop {
        match maps.list(&ListParams::default()).await {
            Ok(list) => return list.items,
            Err(e) => {
                tracing::debug!(error = %e, "listing NamespaceMaps failed; listing again");
                tokio::time::sleep(LIST_RETRY).await;
            }
        }
    }
}

/// How long a failed NamespaceMap list waits before the next (the
/// runner's retry of a failed reconcile).
const LIST_RETRY: std::time::Duration = std::time::Duration::from_millis(200);

/// The namespace the peer holds for local `namespace`, once `Accepted`.
async fn remote_namespace(r: &Reflector, namespace: &str) -> Result<Option<String>, Error> {
    let maps: Api<DynamicObject> = Api::all_with(r.local.clone(), &namespace_maps());
    let selector = format!("{REMOTE_CLUSTER_ID}={}", r.remote_cluster_id);
    let list = maps.list(&ListParams::default().labels(&selector)).await?;
    Ok(list.items.iter().find_map(|nm| {
        let entry = &nm.data["status"]["currentMapping"][namespace];
        (entry["phase"] == "Accepted")
            .then(|| entry["remoteNamespace"].as_str().map(str::to_string))
            .flatten()
    }))
}

/// FP:208-254: the remote pod spec forged from the local one.
pub fn remote_pod_spec(local: &Value) -> Value {
    let mut spec = json!({});
    for field in [
        "containers",
        "initContainers",
        "volumes",
        "activeDeadlineSeconds",
        "dnsConfig",
        "dnsPolicy",
        "enableServiceLinks",
        "hostAliases",
        "hostname",
        "imagePullSecrets",
        "readinessGates",
        "restartPolicy",
        "securityContext",
        "serviceAccountName",
        "setHostnameAsFQDN",
        "shareProcessNamespace",
        "subdomain",
        "terminationGracePeriodSeconds",
        "topologySpreadConstraints",
    ] {
        if !local[field].is_null() {
            spec[field] = local[field].clone();
        }
    }
    // `RemoteTolerations`: Liqo's own toleration means nothing remotely.
    let tolerations: Vec<Value> = local["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["key"] != VIRTUAL_NODE_TOLERATION_KEY)
        .cloned()
        .collect();
    if !tolerations.is_empty() {
        spec["tolerations"] = Value::Array(tolerations);
    }
    spec["automountServiceAccountToken"] = json!(false);
    spec
}

async fn reconcile(r: &Reflector, key: Key) -> Result<(), Error> {
    let local_pods: Api<DynamicObject> =
        Api::namespaced_with(r.local.clone(), &key.namespace, &pods());
    let local = local_pods
        .get_opt(&key.name)
        .await?
        .filter(|p| p.data["spec"]["nodeName"] == r.node_name.as_str());
    let Some(remote_ns) = remote_namespace(r, &key.namespace).await? else {
        return match local {
            Some(_) => Err(Error::Waiting(format!(
                "no remote namespace for {} yet",
                key.namespace
            ))),
            None => Ok(()),
        };
    };
    let shadows: Api<DynamicObject> =
        Api::namespaced_with(r.remote.clone(), &remote_ns, &shadow_pods());
    let shadow = shadows.get_opt(&key.name).await?;
    // PODNS:147-156.
    let Some(mut local) = local.filter(|p| p.metadata.deletion_timestamp.is_none()) else {
        if shadow.is_some() {
            shadows.delete(&key.name, &Default::default()).await?;
        }
        return Ok(());
    };
    // PODNS:212-215, 288-306 (FP:91-99): the local pod marked as offloaded,
    // by a forced apply of the reflection's field manager (`forge.go:29,
    // 66-71`) — the label Liqo's drain finds the pods to evict by.
    let marked = local
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LOCAL_POD_LABEL))
        .is_some_and(|v| v == "true");
    if !marked {
        let mark = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": key.name, "namespace": key.namespace,
                         "labels": {LOCAL_POD_LABEL: "true"}}});
        local_pods
            .patch(
                &key.name,
                &PatchParams::apply(REFLECTION_FIELD_MANAGER).force(),
                &Patch::Apply(&mark),
            )
            .await?;
    }
    if shadow.is_none() {
        let mut labels = local.metadata.labels.clone().unwrap_or_default();
        // FP:172-177: meaningful only locally.
        labels.remove(LOCAL_POD_LABEL);
        labels.insert(ORIGIN.into(), r.local_cluster_id.clone());
        labels.insert(DESTINATION.into(), r.remote_cluster_id.clone());
        labels.insert(ORIGIN_NODE_NAME.into(), r.node_name.clone());
        labels.insert(CREATOR_USER.into(), r.remote_user.clone());
        let mut sp = DynamicObject::new(&key.name, &shadow_pods()).within(&remote_ns);
        sp.metadata.labels = Some(labels);
        sp.metadata.annotations = local.metadata.annotations.clone();
        sp.data["spec"] = json!({"pod": remote_pod_spec(&local.data["spec"])});
        shadows.create(&PostParams::default(), &sp).await?;
        return Ok(());
    }
    // PODNS:379-470: the remote pod's status, with the virtual node's IP
    // and the pod's as the local cluster sees it.
    let remote_pods: Api<DynamicObject> =
        Api::namespaced_with(r.remote.clone(), &remote_ns, &pods());
    let Some(remote) = remote_pods.get_opt(&key.name).await? else {
        return Ok(());
    };
    let remote_status = &remote.data["status"];
    if !remote_status.is_object() {
        return Ok(());
    }
    // FP:104-107: only an address there is translated; PODNS:444-449: a
    // failed translation leaves the local pod as it is, and is tried again.
    let translated = match remote_status["podIP"].as_str().filter(|ip| !ip.is_empty()) {
        Some(ip) => {
            let configuration = net_configuration(r).await?;
            Some(translate_pod_ip(configuration.as_ref(), ip)?)
        }
        None => None,
    };
    let status = local_pod_status(remote_status, translated.as_deref(), r.reflect_ips);
    if local.data["status"] != status {
        local.data["status"] = status;
        local_pods
            .replace_status(&key.name, &PostParams::default(), &local)
            .await?;
    }
    Ok(())
}

/// FP:101-124 `LocalPodStatus` (restart counts aside), with FP:344-350
/// `OpaqueIPTranslationMutator` when IPs are not reflected
/// (PODNS:434-438): the remote pod's status, its `podIP` replaced by
/// `translated` (given when the remote pod has one, [`translate_pod_ip`])
/// and `podIPs` by that one address, the host IPs the virtual node's
/// ([`NODE_IP`]); without `reflect_ips`, no pod IP at all (Go's empty
/// `PodIP` and `PodIPs`, omitted from the JSON).
pub fn local_pod_status(remote: &Value, translated: Option<&str>, reflect_ips: bool) -> Value {
    let mut status = remote.clone();
    if let Some(ip) = translated {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{ "ip": ip }]);
    }
    status["hostIP"] = json!(NODE_IP);
    status["hostIPs"] = json!([{ "ip": NODE_IP }]);
    if !reflect_ips {
        if let Some(fields) = status.as_object_mut() {
            fields.remove("podIP");
            fields.remove("podIPs");
        }
    }
    status
}

/// The translator of PODNS:410-423: with no Configuration (the networking
/// module off for the peer) the remote address as it is, else
/// PODNS:734-753 `MapPodIP` — `MapAddressWithConfiguration`
/// (`pkg/utils/ipam/mapping/ips.go:134-160`,
/// [`crate::networking::mapping::map_address_with_configuration`]): an
/// address of the peer's pod CIDR becomes the same host of the network the
/// local cluster sees that CIDR as (the Configuration's
/// `status.remote.cidr.pod`), an address in no remote network stays as it
/// is, and a Configuration not remapped yet is an error.
pub fn translate_pod_ip(configuration: Option<&Value>, ip: &str) -> Result<String, Error> {
    match configuration {
        None => Ok(ip.to_string()),
        Some(cfg) => crate::networking::mapping::map_address_with_configuration(cfg, ip)
            .map_err(|e| Error::Waiting(format!("failed to translate pod IP {ip}: {e}"))),
    }
}

/// The Configuration the virtual kubelet translates addresses with
/// (`cmd/virtual-kubelet/root/root.go:164-178`): the peer's ForeignCluster
/// (`pkg/utils/foreigncluster/getters.go:34-47` `GetForeignClusterByID`: by its
/// `liqo.io/remote-cluster-id` label); when its networking module is
/// enabled (`status.modules.networking.enabled`), the peer's Configuration
/// (`pkg/utils/getters/k8sGetters.go:742-758`
/// `GetConfigurationByClusterID`: by the same label, in any namespace,
/// exactly one), else none — the networking module off, addresses copied
/// as they are.
///
/// Liqo reads them once, when the virtual kubelet starts, and does not
/// start without its ForeignCluster, nor without the Configuration when
/// networking is on. The model reads them at each reflection of a pod's
/// address, so it sees what a virtual kubelet started then would: the
/// model's peerings run without a ForeignCluster (then networking is taken
/// as off, the address copied), and a missing Configuration with
/// networking on is an error tried again, as the virtual kubelet's
/// restarts would.
pub async fn net_configuration(r: &Reflector) -> Result<Option<Value>, Error> {
    let selector = format!("{REMOTE_CLUSTER_ID}={}", r.remote_cluster_id);
    let listed = |resource: kube::api::ApiResource| {
        let api: Api<DynamicObject> = Api::all_with(r.local.clone(), &resource);
        let params = ListParams::default().labels(&selector);
        async move {
            match api.list(&params).await {
                Ok(list) => Ok(list.items),
                // Not served: Liqo's CRDs (or its networking ones) not there.
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
                Err(e) => Err(Error::from(e)),
            }
        }
    };
    let fcs = listed(crate::consts::foreign_clusters()).await?;
    let fc = match fcs.as_slice() {
        [] => return Ok(None),
        [fc] => fc,
        _ => {
            return Err(Error::Waiting(format!(
                "multiple ForeignClusters with ID {}",
                r.remote_cluster_id
            )))
        }
    };
    if fc.data["status"]["modules"]["networking"]["enabled"] != true {
        return Ok(None);
    }
    match listed(crate::networking::configurations())
        .await?
        .as_slice()
    {
        [] => Err(Error::Waiting(format!(
            "no Configuration for ForeignCluster {}",
            r.remote_cluster_id
        ))),
        [cfg] => Ok(Some(json!({
            "metadata": {"generation": cfg.metadata.generation},
            "spec": cfg.data["spec"],
            "status": cfg.data["status"],
        }))),
        _ => Err(Error::Waiting(format!(
            "multiple Configurations found for ForeignCluster {}",
            r.remote_cluster_id
        ))),
    }
}

/// The user and groups a kubeconfig Secret's client certificate
/// authenticates as on the peer (the CN and the O's, as the API server's
/// x509 authenticator reads them,
/// `k8s.io/apiserver/pkg/authentication/request/x509/x509.go` `CommonNameUserConversion`).
pub fn certificate_user(kubeconfig_secret: &DynamicObject) -> Result<(String, Vec<String>), Error> {
    use base64::Engine;
    let bad = |m: &str| Error::Identity(format!("kubeconfig Secret: {m}"));
    let decode = |v: &Value| {
        v.as_str()
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
    };
    let text = decode(&kubeconfig_secret.data["data"][crate::consts::KUBECONFIG_FIELD])
        .ok_or_else(|| bad("no kubeconfig"))?;
    // The model's Identity controller writes the kubeconfig as JSON
    // (see `identity_controller::kubeconfig`).
    let config: Value = serde_json::from_slice(&text).map_err(|e| bad(&e.to_string()))?;
    let pem = decode(&config["users"][0]["user"]["client-certificate-data"])
        .ok_or_else(|| bad("no client certificate"))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).map_err(|e| bad(&e.to_string()))?;
    let certificate = pem.parse_x509().map_err(|e| bad(&e.to_string()))?;
    let subject = certificate.subject();
    let user = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .ok_or_else(|| bad("no CN"))?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Ok((user, groups))
}

/// The virtual kubelet of one ResourceSlice's virtual node: the pod
/// reflection written to the peer as the slice's Identity; stops when
/// dropped.
pub struct SliceReflection {
    _task: crate::Tasks,
    /// The user the peer sees (the certificate's CN).
    pub user: String,
}

impl SliceReflection {
    /// Reflect the pods of `local`'s virtual node `slice` (cluster
    /// `local_id`) to `remote` (`remote_id`) as the user of the Identity
    /// `resourceslice-<slice>` in `liqo-tenant-<remote_id>`, waiting until
    /// its kubeconfig Secret is there. The user is granted
    /// [`REMOTE_RULES`] on the peer cluster-wide, where Liqo binds its group
    /// (the consumer's ID) through the Tenant and NamespaceMap controllers.
    /// The test server takes a bearer token for the same user and groups
    /// in place of the certificate.
    pub async fn start(
        local: &kube_test_server::KubeApiServer,
        local_id: &str,
        remote: &kube_test_server::KubeApiServer,
        remote_id: &str,
        slice: &str,
        within: std::time::Duration,
    ) -> Result<SliceReflection, Error> {
        use crate::identity::{self, client_as, client_in_groups};
        let namespace = format!("liqo-tenant-{remote_id}");
        let identity_name = crate::identity_creator::identity_name(slice);
        let deadline = tokio::time::Instant::now() + within;
        let secret = loop {
            let found = local
                .get(
                    ("authentication.liqo.io", "identities"),
                    Some(&namespace),
                    &identity_name,
                )
                .and_then(|i| {
                    i["status"]["kubeconfigSecretRef"]["name"]
                        .as_str()
                        .map(str::to_string)
                })
                .and_then(|name| local.get(("", "secrets"), Some(&namespace), &name));
            if let Some(secret) = found {
                break secret;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(Error::Waiting(format!(
                    "the kubeconfig Secret of Identity {namespace}/{identity_name}"
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let secret: DynamicObject =
            serde_json::from_value(secret).map_err(|e| Error::Identity(e.to_string()))?;
        let (user, groups) = certificate_user(&secret)?;
        identity::grant(
            local,
            crate::VIRTUAL_KUBELET,
            "liqo-model-virtual-kubelet-pods",
            LOCAL_RULES,
        );
        identity::grant(
            remote,
            &user,
            &format!("liqo-model-virtual-kubelet-remote-{user}"),
            REMOTE_RULES,
        );
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        let reflector = Reflector {
            local: client_as(local, crate::VIRTUAL_KUBELET).await?,
            remote: client_in_groups(remote, &user, &groups).await?,
            remote_user: user.clone(),
            node_name: slice.to_string(),
            local_cluster_id: local_id.to_string(),
            remote_cluster_id: remote_id.to_string(),
            reflect_ips: true,
        };
        Ok(SliceReflection {
            _task: crate::Tasks(vec![tokio::spawn(run(reflector))]),
            user,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote() -> Value {
        json!({"phase": "Running", "podIP": "10.244.0.2",
               "podIPs": [{"ip": "10.244.0.2"}, {"ip": "fd00::2"}],
               "hostIP": "172.18.0.3", "hostIPs": [{"ip": "172.18.0.3"}]})
    }

    /// FP:104-111: the one translated address in both fields, the host the
    /// virtual node.
    #[test]
    fn the_translated_address_replaces_the_remote_ones_and_the_host_is_the_virtual_node() {
        let status = local_pod_status(&remote(), Some("10.0.0.2"), true);
        assert_eq!(status["podIP"], "10.0.0.2");
        assert_eq!(status["podIPs"], json!([{"ip": "10.0.0.2"}]));
        assert_eq!(status["hostIP"], NODE_IP);
        assert_eq!(status["hostIPs"], json!([{ "ip": NODE_IP }]));
        assert_eq!(status["phase"], "Running");
    }

    /// FP:104: a remote pod without an address gets none.
    #[test]
    fn a_remote_pod_without_an_address_shows_none() {
        let status = local_pod_status(&json!({"phase": "Pending"}), None, true);
        assert!(status["podIP"].is_null() && status["podIPs"].is_null());
        assert_eq!(status["hostIP"], NODE_IP);
    }

    /// FP:344-350 with `--disable-ip-reflection`.
    #[test]
    fn without_ip_reflection_no_address_is_shown() {
        let status = local_pod_status(&remote(), Some("10.0.0.2"), false);
        assert!(status.get("podIP").is_none() && status.get("podIPs").is_none());
        assert_eq!(status["hostIP"], NODE_IP);
    }

    /// PODNS:413-416: no Configuration, the address as it is; with one,
    /// `MapAddressWithConfiguration`, an error while not remapped.
    #[test]
    fn the_translator_copies_without_a_configuration_and_maps_with_one() {
        assert_eq!(translate_pod_ip(None, "10.244.0.2").unwrap(), "10.244.0.2");
        let mut cfg = json!({"metadata": {"generation": 1},
            "spec": {"remote": {"cidr": {"pod": ["10.244.0.0/16"], "external": ["10.70.0.0/16"]}}},
            "status": {"remote": {"cidr": {"pod": ["10.0.0.0/16"], "external": ["10.1.0.0/16"]}},
                       "conditions": [{"type": "NetworkCIDRsConfigured", "status": "True",
                                       "observedGeneration": 1}]}});
        assert_eq!(
            translate_pod_ip(Some(&cfg), "10.244.0.2").unwrap(),
            "10.0.0.2"
        );
        cfg["metadata"]["generation"] = json!(2);
        let refused = translate_pod_ip(Some(&cfg), "10.244.0.2").unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("configuration not remapped yet"),
            "{refused}"
        );
    }
}
