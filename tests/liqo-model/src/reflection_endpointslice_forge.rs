//! What the virtual kubelet writes on the peer for a local EndpointSlice,
//! and what the peer's ShadowEndpointSlice controller makes of it: the
//! pure halves of the EndpointSlice data path (their effects are
//! `reflection_endpointslices`' and
//! `shadowendpointslice_controller`'), as Liqo v1.2.0 has them in
//! `pkg/virtualKubelet/reflection/exposition/endpointslice.go` (EPS),
//! `pkg/virtualKubelet/forge/endpointslices.go` (FE), `forge/meta.go`
//! (META) and
//! `pkg/liqo-controller-manager/offloading/shadowendpointslice-controller/`
//! (`shadowendpointslice_controller.go` SESC, `mapping.go` MAP).
//!
//! The direction: the virtual kubelet runs on the cluster that offloads a
//! namespace (the *local* cluster, Liqo's consumer) and reflects the
//! EndpointSlices of that namespace to the remote namespace on the peer
//! (Liqo's provider) as ShadowEndpointSlices, dropping the endpoints that
//! run on the peer already (FE:46-75: pods on a virtual node of that peer,
//! whose own EndpointSlice controller lists them). The peer's controller
//! manager turns each ShadowEndpointSlice into an EndpointSlice, its
//! addresses remapped into how the peer sees the local cluster's networks
//! when the networking module is on (SESC:126-137, MAP:33-65). So the
//! endpoints of pods that stay at the local cluster (`Local` hosting)
//! reach the peer, where the peer's pods can use the reflected Service.
//!
//! Objects are JSON as the API serves them.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::networking::mapping::map_address_with_configuration;
use crate::networking::remap::Cidr;
// The reflection's explicit marks: `reflection/generic/namespaced.go`
// `ForcedAllowOrSkip`, shared with the other kinds' forge.
use crate::reflection_forge::{forced_allow_or_skip as forced, reflection_labels, Ends, Policy};

/// FE:31 `EndpointSliceManagedBy`, under `discoveryv1.LabelManagedBy`.
pub const MANAGED_BY_REFLECTION: &str = "endpointslice.reflection.liqo.io";
/// `discoveryv1.LabelManagedBy`.
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// `discoveryv1.LabelServiceName`.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// `pkg/consts/replication.go:46, 50`: what the peer's EndpointSlice is
/// labelled with besides the ShadowEndpointSlice's labels (SESC:147-148).
pub const MANAGED_BY_SHADOW: (&str, &str) = ("liqo.io/managed-by", "shadowendpointslice");
/// SESC:52: the peer's controller's field manager.
pub const SHADOW_FIELD_MANAGER: &str = "shadow-endpointslice-controller";

/// FE:41-44 with META:55-58: a ShadowEndpointSlice this virtual kubelet
/// made (both reflection labels and the managed-by label).
pub fn is_ours(remote: &Value, ends: &Ends) -> bool {
    let labels = &remote["metadata"]["labels"];
    reflection_labels(ends)
        .iter()
        .all(|(k, v)| labels[k] == v.as_str())
        && labels[LABEL_MANAGED_BY] == MANAGED_BY_REFLECTION
}

/// FE:46-75 `EndpointToBeReflected`: an endpoint without a node is
/// reflected (external); one whose node is not known is not; one on a node
/// of the peer this virtual kubelet reflects to (`liqo.io/remote-cluster-id`,
/// `pkg/utils/getters/dataGetters.go:42-52`; a node without labels at all
/// is an error, so not reflected) is not — the peer lists it itself.
pub fn endpoint_to_be_reflected(
    endpoint: &Value,
    nodes: &BTreeMap<String, Value>,
    ends: &Ends,
) -> bool {
    let Some(node_name) = endpoint["nodeName"].as_str() else {
        return true;
    };
    let Some(node) = nodes.get(node_name) else {
        return false;
    };
    let Some(labels) = node["metadata"]["labels"].as_object() else {
        return false;
    };
    let cluster = labels
        .get(crate::consts::REMOTE_CLUSTER_ID)
        .and_then(Value::as_str)
        .unwrap_or_default();
    cluster != ends.remote_cluster_id
}

/// FE:33-34 `EndpointTranslator`: local addresses to remote ones (with
/// the error the reflector wraps it in, EPS:201-212).
pub type Translator<'a> = dyn FnMut(&[String]) -> Result<Vec<String>, String> + 'a;

/// FE:108-136 `RemoteEndpointSliceEndpoints`: the endpoints reflected,
/// their addresses through `translate` (EPS:201-212; the first error stops
/// the forging, EPS:275-279), only the `ready` condition kept, the target's
/// kind prefixed `Remote` (FE:139-145, META:92-95), the node name the local
/// cluster's ID.
pub fn remote_endpoints(
    locals: &[Value],
    nodes: &BTreeMap<String, Value>,
    ends: &Ends,
    translate: &mut Translator,
) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for local in locals {
        if !endpoint_to_be_reflected(local, nodes, ends) {
            continue;
        }
        let originals: Vec<String> = local["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        let mut remote = Map::new();
        remote.insert("addresses".into(), json!(translate(&originals)?));
        let mut conditions = Map::new();
        if let Some(ready) = local["conditions"]["ready"].as_bool() {
            conditions.insert("ready".into(), json!(ready));
        }
        remote.insert("conditions".into(), Value::Object(conditions));
        for field in ["hostname", "zone", "hints"] {
            if !local[field].is_null() {
                remote.insert(field.into(), local[field].clone());
            }
        }
        if local["targetRef"].is_object() {
            let mut target = local["targetRef"].clone();
            let kind = target["kind"].as_str().unwrap_or_default();
            target["kind"] = json!(format!("Remote{kind}"));
            remote.insert("targetRef".into(), target);
        }
        remote.insert("nodeName".into(), json!(ends.local_cluster_id));
        out.push(Value::Object(remote));
    }
    Ok(out)
}

/// EPS:358-398 `MapEndpointIPs` (direct connections off): an address of a
/// local pod CIDR as it is (EPS:381, 500-508), any other the remapped
/// address of the `ipam.liqo.io` IP resource of the local namespace that
/// holds it (EPS:340-356), an error when none does or it is not remapped
/// yet.
pub fn map_endpoint_ips(
    originals: &[String],
    local_pod_cidrs: &[Cidr],
    ips: &[Value],
) -> Result<Vec<String>, String> {
    originals
        .iter()
        .map(|original| {
            let local = original
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| local_pod_cidrs.iter().any(|c| c.contains(ip)));
            if local {
                return Ok(original.clone());
            }
            let wrap = |e: String| format!("failed to translate endpoint IP {original}: {e}");
            match ips.iter().find(|ip| ip["spec"]["ip"] == original.as_str()) {
                None => Err(wrap(format!("resource IP {original} not found"))),
                Some(ip) => match ip["status"]["ip"].as_str().filter(|r| !r.is_empty()) {
                    Some(remapped) => Ok(remapped.to_string()),
                    None => Err(wrap(format!(
                        "resource IP {:?} ({:?}) has not been mapped yet",
                        ip["metadata"]["name"].as_str().unwrap_or_default(),
                        original
                    ))),
                },
            }
        })
        .collect()
}

/// The generic decision of an object with no explicit mark under `policy`.
fn by_policy(obj: &Value, policy: Policy) -> Result<bool, String> {
    Ok(match forced(obj)? {
        Some(skip) => skip,
        None => policy == Policy::AllowList,
    })
}

/// EPS:401-432 `ShouldSkipReflection`: the slice's own marks first, then
/// its Service's (the reflection policy is the Service reflector's), or the
/// slice's under the policy when it names no Service or the Service is not
/// there.
pub fn should_skip(slice: &Value, service: Option<&Value>, policy: Policy) -> Result<bool, String> {
    if let Some(skip) = forced(slice)? {
        return Ok(skip);
    }
    match service {
        Some(svc) if slice["metadata"]["labels"][LABEL_SERVICE_NAME].is_string() => {
            by_policy(svc, policy)
        }
        _ => by_policy(slice, policy),
    }
}

/// FE:77-106 `RemoteShadowEndpointSlice` with META:60-66 `RemoteObjectMeta`:
/// the ShadowEndpointSlice for `local` — the local labels with the
/// reflection labels and the managed-by label (the latter win), less the
/// labels and annotations not reflected; the remote object's own metadata
/// (uid, resource version) kept when it exists.
pub fn forge_shadow(
    local: &Value,
    remote: Option<&Value>,
    remote_namespace: &str,
    ends: &Ends,
    labels_not_reflected: &[String],
    annotations_not_reflected: &[String],
    endpoints: Vec<Value>,
) -> Value {
    let name = local["metadata"]["name"].clone();
    let mut metadata = match remote {
        Some(r) => r["metadata"].clone(),
        None => json!({"name": name, "namespace": remote_namespace}),
    };
    let mut labels: Map<String, Value> = local["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (k, v) in reflection_labels(ends) {
        labels.insert(k, json!(v));
    }
    labels.insert(LABEL_MANAGED_BY.into(), json!(MANAGED_BY_REFLECTION));
    labels.retain(|k, _| !labels_not_reflected.contains(k));
    let mut annotations: Map<String, Value> = local["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    annotations.retain(|k, _| !annotations_not_reflected.contains(k));
    metadata["labels"] = Value::Object(labels);
    match metadata.as_object_mut() {
        Some(m) if annotations.is_empty() => {
            m.remove("annotations");
        }
        _ => metadata["annotations"] = Value::Object(annotations),
    }
    let mut template = Map::new();
    if !local["addressType"].is_null() {
        template.insert("addressType".into(), local["addressType"].clone());
    }
    if !endpoints.is_empty() {
        template.insert("endpoints".into(), Value::Array(endpoints));
    }
    // FE:147-156: the ports copied as they are.
    if local["ports"].as_array().is_some_and(|p| !p.is_empty()) {
        template.insert("ports".into(), local["ports"].clone());
    }
    json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowEndpointSlice",
           "metadata": metadata, "spec": {"template": template}})
}

/// EPS:329-338 `ShouldUpdateShadowEndpointSlice`.
pub fn should_update(remote: &Value, target: &Value) -> bool {
    let map = |v: &Value| v.as_object().cloned().unwrap_or_default();
    let (r, t) = (&remote["metadata"], &target["metadata"]);
    map(&r["labels"]) != map(&t["labels"])
        || map(&r["annotations"]) != map(&t["annotations"])
        || ["addressType", "endpoints", "ports"].iter().any(|f| {
            let (a, b) = (
                &remote["spec"]["template"][*f],
                &target["spec"]["template"][*f],
            );
            a != b
        })
}

/// What the peer knows of the cluster a ShadowEndpointSlice came from: its
/// ForeignCluster's modules and conditions (`pkg/utils/foreigncluster/status.go:20-39`,
/// `modules.go:50-52`, `conditions.go:126-132`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub networking_enabled: bool,
    pub networking_established: bool,
    /// `APIServerStatus` `Established` or not set (`None`).
    pub api_server_ready_or_disabled: bool,
}

impl Origin {
    /// Read from a ForeignCluster as the API serves it.
    pub fn of(fc: &Value) -> Origin {
        let status = |conditions: &Value, kind: &str| {
            conditions
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == kind)
                .and_then(|c| c["status"].as_str())
                .unwrap_or("None")
                .to_string()
        };
        let networking = &fc["status"]["modules"]["networking"];
        let api = status(&fc["status"]["conditions"], "APIServerStatus");
        Origin {
            networking_enabled: networking["enabled"] == true,
            networking_established: status(&networking["conditions"], "NetworkConnectionStatus")
                == "Established",
            api_server_ready_or_disabled: api == "Established" || api == "None",
        }
    }
}

/// SESC:103-167: the EndpointSlice the peer makes of `shadow` — its
/// endpoints' addresses remapped with `configuration` (the peer's
/// Configuration for the origin cluster, MAP:33-65 through
/// `pkg/utils/ipam/mapping/ips.go:123-160`) when the origin's networking
/// module is enabled, as they are otherwise; its labels plus
/// `liqo.io/managed-by=shadowendpointslice`; each endpoint whose `ready` is
/// unset or true made ready only if the origin's network is established
/// (or networking disabled) and its API server ready (or not checked).
/// The controller reference to the ShadowEndpointSlice is added at
/// creation (SESC:176). An error (no Configuration, not remapped yet) is
/// Liqo's requeue.
pub fn forge_endpoint_slice(
    shadow: &Value,
    origin: Origin,
    configuration: Option<&Value>,
) -> Result<Value, String> {
    let template = &shadow["spec"]["template"];
    let mut endpoints: Vec<Value> = template["endpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if origin.networking_enabled {
        let Some(cfg) = configuration else {
            return Err(
                "an error occurred while remapping endpoints: configuration not found".into(),
            );
        };
        for endpoint in &mut endpoints {
            let addresses = endpoint["addresses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut mapped = Vec::new();
            for a in addresses {
                mapped.push(json!(map_address_with_configuration(
                    cfg,
                    a.as_str().unwrap_or_default()
                )
                .map_err(|e| format!(
                    "an error occurred while remapping endpoints: {e}"
                ))?));
            }
            endpoint["addresses"] = Value::Array(mapped);
        }
    }
    let ready = (origin.networking_established || !origin.networking_enabled)
        && origin.api_server_ready_or_disabled;
    for endpoint in &mut endpoints {
        if endpoint["conditions"]["ready"] != false {
            endpoint["conditions"]["ready"] = json!(ready);
        }
    }
    let mut labels = shadow["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(MANAGED_BY_SHADOW.0.into(), json!(MANAGED_BY_SHADOW.1));
    let mut slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": shadow["metadata"]["name"], "namespace": shadow["metadata"]["namespace"],
                     "labels": labels},
        "addressType": template["addressType"].as_str().unwrap_or_default(),
        "endpoints": endpoints,
    });
    // SESC:139-140: the direct-connection data annotation is not passed on
    // (the model makes none).
    if let Some(annotations) = shadow["metadata"]["annotations"].as_object() {
        let mut annotations = annotations.clone();
        annotations.remove("liqo.io/direct-connection-data");
        if !annotations.is_empty() {
            slice["metadata"]["annotations"] = Value::Object(annotations);
        }
    }
    if template["ports"].is_array() {
        slice["ports"] = template["ports"].clone();
    }
    Ok(slice)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::offloading_consts::{ALLOW_REFLECTION, SKIP_REFLECTION};

    fn ends() -> Ends {
        Ends {
            local_cluster_id: "origin".into(),
            remote_cluster_id: "peer".into(),
        }
    }

    fn nodes() -> BTreeMap<String, Value> {
        BTreeMap::from([
            (
                "real".to_string(),
                json!({"metadata": {"name": "real", "labels": {"kubernetes.io/hostname": "real"}}}),
            ),
            (
                "virtual".to_string(),
                json!({"metadata": {"name": "virtual", "labels": {"liqo.io/remote-cluster-id": "peer"}}}),
            ),
            (
                "other-virtual".to_string(),
                json!({"metadata": {"name": "other-virtual", "labels": {"liqo.io/remote-cluster-id": "third"}}}),
            ),
            ("bare".to_string(), json!({"metadata": {"name": "bare"}})),
        ])
    }

    fn endpoint(ip: &str, node: Option<&str>) -> Value {
        let mut e = json!({"addresses": [ip],
                           "conditions": {"ready": true, "serving": true, "terminating": false},
                           "targetRef": {"kind": "Pod", "namespace": "app", "name": "db-0", "uid": "u"},
                           "zone": "z1"});
        if let Some(n) = node {
            e["nodeName"] = json!(n);
        }
        e
    }

    /// FE:46-75 and FE:108-136.
    #[test]
    fn endpoints_on_the_peer_are_dropped_and_the_rest_forged_as_liqo_does() {
        let locals = [
            endpoint("10.244.0.2", Some("real")),
            endpoint("10.0.0.7", Some("virtual")),
            endpoint("10.1.0.7", Some("other-virtual")),
            endpoint("192.168.1.1", None),
            endpoint("10.244.0.9", Some("unknown")),
            endpoint("10.244.0.10", Some("bare")),
        ];
        let mut seen = Vec::new();
        let mut same = |a: &[String]| {
            seen.extend(a.to_vec());
            Ok(a.to_vec())
        };
        let remote = remote_endpoints(&locals, &nodes(), &ends(), &mut same).unwrap();
        assert_eq!(seen, ["10.244.0.2", "10.1.0.7", "192.168.1.1"]);
        assert_eq!(
            remote[0],
            json!({"addresses": ["10.244.0.2"], "conditions": {"ready": true},
                   "targetRef": {"kind": "RemotePod", "namespace": "app", "name": "db-0", "uid": "u"},
                   "nodeName": "origin", "zone": "z1"})
        );
        let mut failing = |_: &[String]| Err("no".to_string());
        assert_eq!(
            remote_endpoints(&locals, &nodes(), &ends(), &mut failing).unwrap_err(),
            "no"
        );
    }

    /// EPS:340-398.
    #[test]
    fn local_pod_addresses_are_kept_and_others_read_from_ip_resources() {
        let cidrs = [Cidr::parse("10.244.0.0/16").unwrap()];
        let ips = [
            json!({"metadata": {"name": "ext"}, "spec": {"ip": "192.168.1.1"}, "status": {"ip": "10.71.0.1"}}),
            json!({"metadata": {"name": "pending"}, "spec": {"ip": "192.168.1.2"}}),
        ];
        let map = |a: &str| map_endpoint_ips(&[a.to_string()], &cidrs, &ips);
        assert_eq!(map("10.244.3.4").unwrap(), ["10.244.3.4"]);
        assert_eq!(map("192.168.1.1").unwrap(), ["10.71.0.1"]);
        assert_eq!(
            map("192.168.1.2").unwrap_err(),
            r#"failed to translate endpoint IP 192.168.1.2: resource IP "pending" ("192.168.1.2") has not been mapped yet"#
        );
        assert_eq!(
            map("172.16.0.1").unwrap_err(),
            "failed to translate endpoint IP 172.16.0.1: resource IP 172.16.0.1 not found"
        );
    }

    /// EPS:401-432.
    #[test]
    fn a_slice_follows_its_own_marks_then_its_services() {
        let slice = |annotations: Value| {
            json!({"metadata": {"name": "db-x", "labels": {LABEL_SERVICE_NAME: "db"},
                                "annotations": annotations}})
        };
        let svc =
            |annotations: Value| json!({"metadata": {"name": "db", "annotations": annotations}});
        let deny = Policy::DenyList;
        assert_eq!(
            should_skip(&slice(json!({})), Some(&svc(json!({}))), deny),
            Ok(false)
        );
        assert_eq!(
            should_skip(
                &slice(json!({})),
                Some(&svc(json!({SKIP_REFLECTION: "true"}))),
                deny
            ),
            Ok(true)
        );
        assert_eq!(
            should_skip(
                &slice(json!({ALLOW_REFLECTION: "true"})),
                Some(&svc(json!({SKIP_REFLECTION: "true"}))),
                deny
            ),
            Ok(false)
        );
        assert_eq!(
            should_skip(&slice(json!({})), None, Policy::AllowList),
            Ok(true)
        );
        assert!(should_skip(
            &slice(json!({ALLOW_REFLECTION: "1", SKIP_REFLECTION: "1"})),
            None,
            deny
        )
        .is_err());
    }

    /// FE:77-106, META:60-66, EPS:329-338.
    #[test]
    fn the_shadow_carries_the_local_labels_and_liqos_and_is_updated_on_change() {
        let local = json!({"metadata": {"name": "db-abcde", "namespace": "app",
                "labels": {LABEL_SERVICE_NAME: "db", LABEL_MANAGED_BY: "endpointslice-controller.k8s.io",
                           "drop": "me"}},
            "addressType": "IPv4",
            "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}]});
        let shadow = forge_shadow(
            &local,
            None,
            "app",
            &ends(),
            &["drop".into()],
            &[],
            vec![json!({"addresses": ["10.244.0.2"]})],
        );
        assert_eq!(
            shadow["metadata"],
            json!({"name": "db-abcde", "namespace": "app",
                   "labels": {LABEL_SERVICE_NAME: "db", LABEL_MANAGED_BY: MANAGED_BY_REFLECTION,
                              "offloading.liqo.io/origin": "origin",
                              "offloading.liqo.io/destination": "peer"}})
        );
        assert!(is_ours(&shadow, &ends()));
        assert_eq!(shadow["spec"]["template"]["addressType"], "IPv4");
        assert!(!should_update(&shadow, &shadow));
        let moved = forge_shadow(
            &local,
            Some(&shadow),
            "app",
            &ends(),
            &["drop".into()],
            &[],
            vec![json!({"addresses": ["10.244.0.3"]})],
        );
        assert!(should_update(&shadow, &moved));
    }

    fn configured() -> Value {
        json!({"metadata": {"generation": 1},
               "spec": {"remote": {"cidr": {"pod": ["10.244.0.0/16"], "external": ["10.70.0.0/16"]}}},
               "status": {"remote": {"cidr": {"pod": ["10.1.0.0/16"], "external": ["10.2.0.0/16"]}},
                          "conditions": [{"type": "NetworkCIDRsConfigured", "status": "True",
                                          "observedGeneration": 1}]}})
    }

    fn shadow() -> Value {
        json!({"metadata": {"name": "db-abcde", "namespace": "app",
                            "labels": {"offloading.liqo.io/origin": "origin"}},
               "spec": {"template": {"addressType": "IPv4",
                   "endpoints": [{"addresses": ["10.244.0.2"], "conditions": {"ready": true}},
                                 {"addresses": ["10.244.0.3"], "conditions": {"ready": false}}],
                   "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}]}}})
    }

    /// SESC:103-167 with MAP:33-65: remapped with networking, as it is
    /// without; ready only with the network established.
    #[test]
    fn the_peer_remaps_the_addresses_only_with_networking_and_gates_readiness() {
        let on = Origin {
            networking_enabled: true,
            networking_established: true,
            api_server_ready_or_disabled: true,
        };
        let slice = forge_endpoint_slice(&shadow(), on, Some(&configured())).unwrap();
        assert_eq!(slice["endpoints"][0]["addresses"], json!(["10.1.0.2"]));
        assert_eq!(slice["endpoints"][0]["conditions"]["ready"], true);
        assert_eq!(slice["endpoints"][1]["conditions"]["ready"], false);
        assert_eq!(
            slice["metadata"]["labels"]["liqo.io/managed-by"],
            "shadowendpointslice"
        );
        assert_eq!(slice["ports"], shadow()["spec"]["template"]["ports"]);
        let connecting = Origin {
            networking_established: false,
            ..on
        };
        let slice = forge_endpoint_slice(&shadow(), connecting, Some(&configured())).unwrap();
        assert_eq!(slice["endpoints"][0]["conditions"]["ready"], false);
        assert!(forge_endpoint_slice(&shadow(), on, None).is_err());
        let off = Origin {
            networking_enabled: false,
            networking_established: false,
            api_server_ready_or_disabled: true,
        };
        let slice = forge_endpoint_slice(&shadow(), off, None).unwrap();
        assert_eq!(slice["endpoints"][0]["addresses"], json!(["10.244.0.2"]));
        assert_eq!(slice["endpoints"][0]["conditions"]["ready"], true);
        assert_eq!(
            Origin::of(
                &json!({"status": {"modules": {"networking": {"enabled": true,
                "conditions": [{"type": "NetworkConnectionStatus", "status": "Established"}]}}}})
            ),
            on
        );
    }
}
