//! What the virtual kubelet writes on the peer for a local Secret,
//! ConfigMap or Service, and whether it writes it at all: the pure half of
//! the reflection (its effects are `reflection_objects`'), as Liqo v1.2.0 has it in
//! `pkg/virtualKubelet/forge/` (`meta.go`, `secrets.go`, `configmaps.go`,
//! `services.go`) and in each reflector's `Handle`
//! (`pkg/virtualKubelet/reflection/configuration/secret.go` (SEC),
//! `configmap.go` (CM), `reflection/exposition/service.go` (SVC),
//! `reflection/generic/namespaced.go` (GEN)).
//!
//! Objects are JSON as the API serves them (`data` values base64).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::offloading_consts::{
    ALLOW_REFLECTION, DESTINATION, FORCE_REMOTE_NODE_PORT, ORIGIN, SKIP_REFLECTION,
};

/// A kind the model reflects besides pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Secret,
    ConfigMap,
    Service,
}

/// `offloadingv1beta1.ReflectionType`: which objects are reflected unless
/// marked (`DenyList`) or only if marked (`AllowList`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// The chart's default for every kind (`deployments/liqo/values.yaml:332, 359, 364`).
    #[default]
    DenyList,
    AllowList,
}

/// The forging options of one virtual node (`forge/forge.go:74-97`, from
/// the VirtualNode's `offloadingPatch`, which the chart's
/// `liqo-vk-options-template.yaml:36-42` fills from
/// `offloading.reflection.skip`).
#[derive(Debug, Clone)]
pub struct Options {
    pub labels_not_reflected: Vec<String>,
    pub annotations_not_reflected: Vec<String>,
    pub policy: Policy,
    /// `enableLoadBalancer` with the remote's real class
    /// (`forge/services.go:61-65`); `None` when load balancers are not
    /// offered (the default of a slice without a load-balancer class).
    pub load_balancer_class: Option<String>,
}

impl Default for Options {
    /// The chart's (`deployments/liqo/values.yaml:306-324`): no label
    /// skipped, cloud load-balancer bookkeeping annotations skipped.
    fn default() -> Self {
        let annotations = [
            "cloud.google.com/neg",
            "cloud.google.com/neg-status",
            "kubernetes.digitalocean.com/load-balancer-id",
            "ingress.kubernetes.io/backends",
            "ingress.kubernetes.io/forwarding-rule",
            "ingress.kubernetes.io/target-proxy",
            "ingress.kubernetes.io/url-map",
            "metallb.universe.tf/address-pool",
            "metallb.universe.tf/ip-allocated-from-pool",
            "metallb.universe.tf/loadBalancerIPs",
            "loadbalancer.openstack.org/load-balancer-id",
        ];
        Options {
            labels_not_reflected: Vec::new(),
            annotations_not_reflected: annotations.iter().map(|a| a.to_string()).collect(),
            policy: Policy::DenyList,
            load_balancer_class: None,
        }
    }
}

/// The two ends of one virtual kubelet (`forge/forge.go:32-35`).
#[derive(Debug, Clone)]
pub struct Ends {
    pub local_cluster_id: String,
    pub remote_cluster_id: String,
}

/// What one reconcile does on the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Leave the peer as it is.
    Nothing,
    /// Delete the remote object of this UID (GEN:91-100, a UID
    /// precondition).
    Delete { uid: String },
    /// Server-side apply this object, forced, as `reflection.liqo.io`
    /// (`forge/forge.go:28-29, 65-71`).
    Apply(Value),
    /// Liqo returns an error and requeues (GEN:156-158: both marks set).
    Refuse(String),
}

/// `forge/secrets.go:33-37`: the labels of Secrets holding the tokens Liqo
/// reflects itself (with the ServiceAccount reflector).
const SA_SECRET_FOR_POD: &str = "offloading.liqo.io/service-account-for-pod-name";
const SA_SECRET_FOR_SERVICE_ACCOUNT: &str = "offloading.liqo.io/service-account-name";
/// `corev1.SecretTypeServiceAccountToken`.
pub const SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";
/// `forge/configmaps.go:23`.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// The name of the peer's copy (`forge/configmaps.go:49-68`: the root CA
/// ConfigMap, which every namespace of the peer has already, gets
/// `.<first five characters of the local cluster ID>`, and an `a` if that
/// ends in neither letter nor digit).
pub fn remote_name(kind: Kind, local: &str, ends: &Ends) -> String {
    if kind != Kind::ConfigMap || local != ROOT_CA_CONFIG_MAP {
        return local.to_string();
    }
    let suffix: String = ends.local_cluster_id.chars().take(5).collect();
    let mut name = format!("{ROOT_CA_CONFIG_MAP}.{suffix}");
    if !name.ends_with(|c: char| c.is_ascii_alphanumeric()) {
        name.push('a');
    }
    name
}

/// The local name of a remote object (`forge/configmaps.go:40-47`; CM:59-65
/// keys remote events by it).
pub fn local_name(kind: Kind, remote: &str, ends: &Ends) -> String {
    if kind == Kind::ConfigMap && remote == remote_name(kind, ROOT_CA_CONFIG_MAP, ends) {
        return ROOT_CA_CONFIG_MAP.to_string();
    }
    remote.to_string()
}

/// `forge/meta.go:36-41`.
pub fn reflection_labels(ends: &Ends) -> BTreeMap<String, String> {
    BTreeMap::from([
        (ORIGIN.to_string(), ends.local_cluster_id.clone()),
        (DESTINATION.to_string(), ends.remote_cluster_id.clone()),
    ])
}

/// `forge/meta.go:55-58`: made by this virtual kubelet (both labels).
pub fn is_reflected(obj: &Value, ends: &Ends) -> bool {
    reflection_labels(ends)
        .iter()
        .all(|(k, v)| obj["metadata"]["labels"][k] == v.as_str())
}

/// One object's place: its kind and local name, in one namespace pair.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub kind: Kind,
    pub name: &'a str,
    pub local_namespace: &'a str,
    pub remote_namespace: &'a str,
}

/// What to do for the object at `at`, given the local object and the
/// peer's (either absent), as each reflector's `Handle` decides
/// (SEC:81-166, CM:91-163, SVC:91-169).
pub fn decide(
    at: At,
    local: Option<&Value>,
    remote: Option<&Value>,
    ends: &Ends,
    options: &Options,
) -> Decision {
    let At {
        kind,
        name,
        local_namespace,
        remote_namespace,
    } = at;
    // SVC:94-98: the `kubernetes` Service of `default` means nothing
    // remotely.
    if kind == Kind::Service && local_namespace == "default" && name == "kubernetes" {
        return Decision::Nothing;
    }
    if kind == Kind::Secret {
        // SEC:93-98: service-account tokens are the ServiceAccount
        // reflector's (`provider.go:147`: the Secret reflector copies them
        // only in the `Legacy` API-server support, which a cluster with the
        // TokenRequest API, any supported one, does not use).
        if local.is_some_and(|l| l["type"] == SERVICE_ACCOUNT_TOKEN) {
            return Decision::Nothing;
        }
        // SEC:100-104 with `forge/secrets.go:58-61`.
        if remote.is_some_and(is_service_account_secret) {
            return Decision::Nothing;
        }
    }
    // SEC:106-113, CM:103-110, SVC:108-115: never another's object.
    if remote.is_some_and(|r| !is_reflected(r, ends)) {
        return Decision::Nothing;
    }
    let mut local = local;
    if let Some(l) = local {
        match should_skip(kind, name, l, options.policy) {
            Err(e) => return Decision::Refuse(e),
            // SEC:129-134 (CM:126-131, SVC:131-136): a skipped object's
            // copy goes as if the local one were gone.
            Ok(true) => local = None,
            Ok(false) => {}
        }
    }
    match (local, remote) {
        (None, None) => Decision::Nothing,
        // SEC:140-145.
        (None, Some(r)) => Decision::Delete {
            uid: r["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        },
        (Some(l), _) => Decision::Apply(forge(kind, l, remote_namespace, ends, options)),
    }
}

/// `forge/secrets.go:58-61`: both token labels, among labels or
/// annotations.
fn is_service_account_secret(obj: &Value) -> bool {
    let meta = &obj["metadata"];
    [SA_SECRET_FOR_POD, SA_SECRET_FOR_SERVICE_ACCOUNT]
        .iter()
        .all(|k| !meta["labels"][k].is_null() || !meta["annotations"][k].is_null())
}

/// Whether the policy or the object's marks skip it (GEN:115-132; CM:166-184
/// reflects the root CA ConfigMap whatever the policy, unless marked).
pub fn should_skip(kind: Kind, name: &str, obj: &Value, policy: Policy) -> Result<bool, String> {
    if kind == Kind::ConfigMap && name == ROOT_CA_CONFIG_MAP {
        return Ok(forced_allow_or_skip(obj)?.unwrap_or(false));
    }
    let annotation = |key: &str| obj["metadata"]["annotations"][key].as_str();
    Ok(match policy {
        Policy::AllowList => match annotation(ALLOW_REFLECTION) {
            Some(v) => v.eq_ignore_ascii_case("false"),
            None => true,
        },
        Policy::DenyList => match annotation(SKIP_REFLECTION) {
            Some(v) => !v.eq_ignore_ascii_case("false"),
            None => false,
        },
    })
}

/// GEN:144-168: `Some(skip)` when explicitly marked, an error when marked
/// both ways. The EndpointSlice reflection's explicit marks too
/// ([`crate::reflection_endpointslice_forge`], EPS:401-432 calls the same
/// `ForcedAllowOrSkip`).
pub(crate) fn forced_allow_or_skip(obj: &Value) -> Result<Option<bool>, String> {
    let marked = |key: &str| {
        obj["metadata"]["annotations"][key]
            .as_str()
            .is_some_and(|v| !v.eq_ignore_ascii_case("false"))
    };
    match (marked(ALLOW_REFLECTION), marked(SKIP_REFLECTION)) {
        (true, true) => Err(format!(
            "object {:?} can't have both the allow and deny annotations set",
            obj["metadata"]["name"]
        )),
        (true, false) => Ok(Some(false)),
        (false, true) => Ok(Some(true)),
        (false, false) => Ok(None),
    }
}

/// `forge/meta.go:97-101`: `m` without the keys in `skipped`.
fn filtered(m: &Value, skipped: &[String]) -> Map<String, Value> {
    m.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !skipped.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The apply configuration of the peer's copy of `local`.
pub fn forge(
    kind: Kind,
    local: &Value,
    remote_namespace: &str,
    ends: &Ends,
    options: &Options,
) -> Value {
    let name = local["metadata"]["name"].as_str().unwrap_or_default();
    // `WithLabels(FilterNotReflected(labels)).WithLabels(ReflectionLabels())`
    // (`forge/secrets.go:66`, `configmaps.go:28`, `services.go:32`): the
    // reflection labels win.
    let mut labels = filtered(&local["metadata"]["labels"], &options.labels_not_reflected);
    for (k, v) in reflection_labels(ends) {
        labels.insert(k, Value::String(v));
    }
    let annotations = filtered(
        &local["metadata"]["annotations"],
        &options.annotations_not_reflected,
    );
    let (kind_name, body) = match kind {
        Kind::Secret => ("Secret", secret_body(local)),
        Kind::ConfigMap => ("ConfigMap", config_map_body(local)),
        Kind::Service => ("Service", service_body(local, options)),
    };
    let mut obj = json!({
        "apiVersion": "v1",
        "kind": kind_name,
        "metadata": {
            "name": remote_name(kind, name, ends),
            "namespace": remote_namespace,
            "labels": labels,
        },
    });
    if !annotations.is_empty() {
        obj["metadata"]["annotations"] = Value::Object(annotations);
    }
    for (k, v) in body {
        obj[k] = v;
    }
    obj
}

/// Copy the fields of `local` that are set, as the apply configurations'
/// `With…` calls on fields a local object may lack.
fn copied(local: &Value, fields: &[&'static str]) -> Vec<(&'static str, Value)> {
    fields
        .iter()
        .filter(|f| !local[**f].is_null())
        .map(|f| (*f, local[*f].clone()))
        .collect()
}

/// `forge/secrets.go:64-84`: data, type and immutability. (A
/// service-account token would become `Opaque` with the ServiceAccount's
/// name as a label, :78-81; such Secrets are never reflected here, see
/// [`decide`].)
fn secret_body(local: &Value) -> Vec<(&'static str, Value)> {
    copied(local, &["data", "type", "immutable"])
}

/// `forge/configmaps.go:26-38`.
fn config_map_body(local: &Value) -> Vec<(&'static str, Value)> {
    copied(local, &["binaryData", "data", "immutable"])
}

/// `forge/services.go:28-68`: type, selector, ports, external name and the
/// traffic fields; the cluster IP only when headless (`None`), so the peer
/// allocates its own; a load balancer's class replaced by the peer's when
/// load balancers are offered.
fn service_body(local: &Value, options: &Options) -> Vec<(&'static str, Value)> {
    let spec = &local["spec"];
    let mut remote = Map::new();
    for field in [
        "type",
        "selector",
        "externalName",
        "allocateLoadBalancerNodePorts",
        "externalTrafficPolicy",
        "internalTrafficPolicy",
        "ipFamilyPolicy",
        "loadBalancerSourceRanges",
        "publishNotReadyAddresses",
        "sessionAffinity",
    ] {
        if !spec[field].is_null() {
            remote.insert(field.into(), spec[field].clone());
        }
    }
    let force_node_port = local["metadata"]["annotations"][FORCE_REMOTE_NODE_PORT] == "true";
    let ports: Vec<Value> = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| service_port(p, force_node_port))
        .collect();
    if !ports.is_empty() {
        remote.insert("ports".into(), Value::Array(ports));
    }
    if spec["clusterIP"] == "None" {
        remote.insert("clusterIP".into(), json!("None"));
    }
    if spec["type"] == "LoadBalancer" {
        if let Some(class) = &options.load_balancer_class {
            remote.insert("loadBalancerClass".into(), json!(class));
        }
    }
    vec![("spec", Value::Object(remote))]
}

/// `forge/services.go:71-96`: name, port, target port, protocol and app
/// protocol; the node port only when forced. (Liqo sends a `nodePort` of
/// 0 when the local one is unset, which the API server reads as unset; the
/// model leaves it out, which the server's apply treats alike: a node port
/// this manager applied before is removed.)
fn service_port(local: &Value, force_node_port: bool) -> Value {
    let mut port = Map::new();
    for field in ["name", "port", "targetPort", "protocol", "appProtocol"] {
        if !local[field].is_null() {
            port.insert(field.into(), local[field].clone());
        }
    }
    if force_node_port && local["nodePort"].as_i64().is_some_and(|n| n != 0) {
        port.insert("nodePort".into(), local["nodePort"].clone());
    }
    Value::Object(port)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ends() -> Ends {
        Ends {
            local_cluster_id: "origin".into(),
            remote_cluster_id: "p2".into(),
        }
    }

    fn decide_secret(local: Option<&Value>, remote: Option<&Value>) -> Decision {
        let at = At {
            kind: Kind::Secret,
            name: "s",
            local_namespace: "app",
            remote_namespace: "app-origin",
        };
        decide(at, local, remote, &ends(), &Options::default())
    }

    #[test]
    fn the_root_ca_config_map_is_renamed_and_mapped_back() {
        let ends = |id: &str| Ends {
            local_cluster_id: id.into(),
            remote_cluster_id: "p".into(),
        };
        // `forge/configmaps.go:51-62`: a long ID cut to five characters, a
        // short one kept, a trailing non-alphanumeric completed with `a`.
        assert_eq!(
            remote_name(Kind::ConfigMap, ROOT_CA_CONFIG_MAP, &ends("origin-1")),
            "kube-root-ca.crt.origi"
        );
        assert_eq!(
            remote_name(Kind::ConfigMap, ROOT_CA_CONFIG_MAP, &ends("ab")),
            "kube-root-ca.crt.ab"
        );
        assert_eq!(
            remote_name(Kind::ConfigMap, ROOT_CA_CONFIG_MAP, &ends("abcd-xyz")),
            "kube-root-ca.crt.abcd-a"
        );
        assert_eq!(
            local_name(Kind::ConfigMap, "kube-root-ca.crt.ab", &ends("ab")),
            ROOT_CA_CONFIG_MAP
        );
        assert_eq!(
            remote_name(Kind::Secret, ROOT_CA_CONFIG_MAP, &ends("ab")),
            ROOT_CA_CONFIG_MAP
        );
    }

    #[test]
    fn a_service_account_token_is_not_reflected_nor_is_a_token_secret_touched() {
        let token = json!({"metadata": {"name": "s"}, "type": SERVICE_ACCOUNT_TOKEN});
        assert_eq!(decide_secret(Some(&token), None), Decision::Nothing);
        let theirs = json!({"metadata": {"name": "s", "uid": "u", "labels": {
            "offloading.liqo.io/origin": "origin", "offloading.liqo.io/destination": "p2",
            SA_SECRET_FOR_SERVICE_ACCOUNT: "sa"},
            "annotations": {SA_SECRET_FOR_POD: "pod"}}});
        assert_eq!(decide_secret(None, Some(&theirs)), Decision::Nothing);
    }

    #[test]
    fn marks_decide_under_each_policy_and_both_marks_are_refused() {
        let with =
            |annotations: Value| json!({"metadata": {"name": "x", "annotations": annotations}});
        let plain = with(json!({}));
        let skip = with(json!({SKIP_REFLECTION: "true"}));
        let unskip = with(json!({SKIP_REFLECTION: "False"}));
        let allow = with(json!({ALLOW_REFLECTION: ""}));
        let deny = Policy::DenyList;
        assert_eq!(should_skip(Kind::Secret, "x", &plain, deny), Ok(false));
        assert_eq!(should_skip(Kind::Secret, "x", &skip, deny), Ok(true));
        assert_eq!(should_skip(Kind::Secret, "x", &unskip, deny), Ok(false));
        let allow_list = Policy::AllowList;
        assert_eq!(should_skip(Kind::Secret, "x", &plain, allow_list), Ok(true));
        assert_eq!(
            should_skip(Kind::Secret, "x", &allow, allow_list),
            Ok(false)
        );
        // The root CA is reflected under AllowList unless marked.
        let root = ROOT_CA_CONFIG_MAP;
        assert_eq!(
            should_skip(Kind::ConfigMap, root, &plain, allow_list),
            Ok(false)
        );
        assert_eq!(
            should_skip(Kind::ConfigMap, root, &skip, allow_list),
            Ok(true)
        );
        let both = with(json!({SKIP_REFLECTION: "1", ALLOW_REFLECTION: "1"}));
        assert!(should_skip(Kind::ConfigMap, root, &both, deny).is_err());
    }

    #[test]
    fn a_service_keeps_its_shape_but_not_its_addresses() {
        let local = json!({"metadata": {"name": "db", "namespace": "app",
                "annotations": {"metallb.universe.tf/address-pool": "x", "keep": "y"}},
            "spec": {"type": "NodePort", "clusterIP": "10.0.0.7", "selector": {"app": "db"},
                "ports": [{"name": "sql", "port": 5432, "targetPort": 5432, "protocol": "TCP",
                           "nodePort": 30007}]}});
        let remote = forge(
            Kind::Service,
            &local,
            "app-origin",
            &ends(),
            &Options::default(),
        );
        assert_eq!(
            remote["spec"],
            json!({"type": "NodePort", "selector": {"app": "db"},
                   "ports": [{"name": "sql", "port": 5432, "targetPort": 5432, "protocol": "TCP"}]})
        );
        assert_eq!(remote["metadata"]["annotations"], json!({"keep": "y"}));
        let mut forced = local.clone();
        forced["metadata"]["annotations"][FORCE_REMOTE_NODE_PORT] = json!("true");
        forced["spec"]["clusterIP"] = json!("None");
        let remote = forge(
            Kind::Service,
            &forced,
            "app-origin",
            &ends(),
            &Options::default(),
        );
        assert_eq!(remote["spec"]["ports"][0]["nodePort"], 30007);
        assert_eq!(remote["spec"]["clusterIP"], "None");
    }
}
