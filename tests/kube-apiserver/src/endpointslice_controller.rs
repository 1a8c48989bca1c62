//! kube-controller-manager's EndpointSlice controller
//! (`pkg/controller/endpointslice/endpointslice_controller.go`, `syncService`,
//! with the reconciler of `staging/src/k8s.io/endpointslice/`:
//! `reconciler.go` `Reconcile`, `reconcileByAddressType`; `utils.go`
//! `podToEndpoint`, `getEndpointPorts`, `newEndpointSlice`,
//! `setEndpointSliceLabels`, `getAddressTypesForService`, `FindPort`;
//! `util/controller_utils.go` `ShouldPodBeInEndpoints`, `ShouldSetHostname`),
//! one pass over every Service at a time:
//!
//! - a Service without a selector is left alone (`syncService`: "services
//!   without a selector receive no endpoint slices from this controller");
//! - its slices are those labelled `kubernetes.io/service-name=<service>`
//!   and `endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io`
//!   in its namespace; one not owned by it (a controller reference to its
//!   uid) is deleted, as is one of an address type it no longer has;
//! - the address types are the Service's `spec.ipFamilies`, else its
//!   cluster IP's family; the pods are those its selector selects in its
//!   namespace that are not terminal and have an address
//!   (`ShouldPodBeInEndpoints(pod, true)`: terminating pods included), whose
//!   node exists (unless `publishNotReadyAddresses`);
//! - each pod is an endpoint: its addresses of the type, `ready`
//!   (`publishNotReadyAddresses`, or Ready and not terminating), `serving`
//!   (Ready), `terminating` (a deletion timestamp), `targetRef` the Pod,
//!   `nodeName`, `zone` (the node's `topology.kubernetes.io/zone`), and the
//!   pod's `hostname` when its `subdomain` names the Service;
//! - endpoints are grouped by their ports (each Service port's name,
//!   protocol, app protocol and the pod's number for its target port: an
//!   int as it is, a name looked up in the pod's containers; a port not
//!   found left out); each group is one slice per 100 endpoints, made with
//!   `generateName: <service>-`, the Service's labels (not the reserved
//!   ones) plus `kubernetes.io/service-name`, the managed-by label and
//!   `service.kubernetes.io/headless` for a headless Service, and a
//!   controller reference to the Service; a Service with no endpoint gets
//!   one placeholder slice of no endpoints and no ports.
//!
//! Simplified: the test server allocates no cluster IP and fills no
//! `ipFamilies` (`pkg/registry/core/service/storage/alloc.go` does), so a
//! Service with neither is read as a single-stack IPv4 cluster's storage
//! would have written it: `IPv4` (the reconciler alone would take a Service
//! with neither for a headless dual-stack one). Likewise its ports'
//! defaults (`SetDefaults_ServicePort`: `protocol` TCP, `targetPort` the
//! `port`) are read in. Endpoints are put into slices anew at each change
//! (sorted by pod name, 100 a slice, existing slices of the same ports
//! reused in name order) rather than kept where they were
//! (`reconcileByPortMapping`'s churn minimising); no topology hints, no
//! traffic distribution, no `endpoints.kubernetes.io/last-change-trigger-time`
//! annotation, no Events, no metrics.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::crd::GroupResource;
use crate::endpoint_slice::{DISCOVERY, ENDPOINT_SLICES, LABEL_MANAGED_BY, LABEL_SERVICE_NAME};
use crate::store::{Target, World};
use crate::workload as w;

/// `ControllerName` (`pkg/controller/endpointslice/endpointslice_controller.go`).
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// `v1.IsHeadlessService`.
pub const HEADLESS: &str = "service.kubernetes.io/headless";
/// `v1.LabelTopologyZone`.
const ZONE: &str = "topology.kubernetes.io/zone";
/// `--max-endpoints-per-slice`'s default.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

fn services() -> GroupResource {
    GroupResource::new("", "services")
}

pub fn endpoint_slices() -> GroupResource {
    GroupResource::new(DISCOVERY, ENDPOINT_SLICES)
}

/// `getAddressTypesForService`, with the storage's defaults (module docs).
pub fn address_types(service: &Value) -> Vec<&'static str> {
    let spec = &service["spec"];
    let mut types: Vec<&'static str> = Vec::new();
    for family in spec["ipFamilies"].as_array().into_iter().flatten() {
        let t = match family.as_str() {
            Some("IPv4") => "IPv4",
            Some("IPv6") => "IPv6",
            _ => continue,
        };
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if !types.is_empty() {
        return types;
    }
    match spec["clusterIP"].as_str() {
        Some(ip) if !ip.is_empty() && ip != "None" && ip.contains(':') => vec!["IPv6"],
        _ => vec!["IPv4"],
    }
}

/// The Service's ports with `SetDefaults_ServicePort`'s defaults read in.
fn service_ports(service: &Value) -> Vec<Value> {
    service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let mut p = p.clone();
            if p["protocol"].is_null() {
                p["protocol"] = json!("TCP");
            }
            if p["targetPort"].is_null() || p["targetPort"] == json!(0) {
                p["targetPort"] = p["port"].clone();
            }
            p
        })
        .collect()
}

/// `FindPort`: an int target port as it is, a name looked up in the pod's
/// containers (and restartable init containers) with the port's protocol.
fn find_port(pod: &Value, port: &Value) -> Option<i64> {
    let target = &port["targetPort"];
    if let Some(n) = target.as_i64() {
        return Some(n);
    }
    let name = target.as_str()?;
    let protocol = port["protocol"].as_str().unwrap_or("TCP");
    let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
    let sidecars = pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["restartPolicy"] == "Always");
    containers
        .chain(sidecars)
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .find(|p| p["name"] == name && p["protocol"].as_str().unwrap_or("TCP") == protocol)
        .and_then(|p| p["containerPort"].as_i64())
}

/// `getEndpointPorts`.
pub fn endpoint_ports(service: &Value, pod: &Value) -> Vec<Value> {
    let ports = service_ports(service);
    if ports.is_empty() && service["spec"]["clusterIP"] == "None" {
        return Vec::new();
    }
    ports
        .iter()
        .filter_map(|p| {
            let number = find_port(pod, p)?;
            let mut out = json!({"name": p["name"].as_str().unwrap_or_default(),
                                 "port": number, "protocol": p["protocol"]});
            if !p["appProtocol"].is_null() {
                out["appProtocol"] = p["appProtocol"].clone();
            }
            Some(out)
        })
        .collect()
}

/// `ShouldPodBeInEndpoints(pod, true)`: not terminal, with an address.
pub fn should_be_in_endpoints(pod: &Value) -> bool {
    let terminal = matches!(w::phase(pod), "Succeeded" | "Failed");
    let has_ip = pod["status"]["podIP"]
        .as_str()
        .is_some_and(|ip| !ip.is_empty())
        || pod["status"]["podIPs"]
            .as_array()
            .is_some_and(|ips| !ips.is_empty());
    !terminal && has_ip
}

/// `getEndpointAddresses`: the pod's addresses of `address_type`.
fn addresses(pod: &Value, address_type: &str) -> Vec<Value> {
    let mut ips: Vec<&str> = pod["status"]["podIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["ip"].as_str())
        .collect();
    // A status with `podIP` alone (written by hand) counts as its one
    // address, as the API server's defaulting of `podIPs` would make it.
    if ips.is_empty() {
        ips.extend(pod["status"]["podIP"].as_str());
    }
    ips.into_iter()
        .filter_map(|ip| ip.parse::<std::net::IpAddr>().ok())
        .filter(|ip| ip.is_ipv6() == (address_type == "IPv6"))
        .map(|ip| json!(ip.to_string()))
        .collect()
}

/// `podToEndpoint`.
pub fn pod_to_endpoint(
    pod: &Value,
    node: Option<&Value>,
    service: &Value,
    address_type: &str,
) -> Value {
    let serving = w::is_ready(pod);
    let terminating = w::deleting(pod);
    let publish = service["spec"]["publishNotReadyAddresses"] == true;
    let ready = publish || (serving && !terminating);
    let mut endpoint = json!({
        "addresses": addresses(pod, address_type),
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "targetRef": {"kind": "Pod", "namespace": w::namespace(pod), "name": w::name(pod),
                      "uid": w::uid(pod)},
    });
    if let Some(node_name) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        endpoint["nodeName"] = json!(node_name);
    }
    if let Some(zone) = node
        .and_then(|n| n["metadata"]["labels"][ZONE].as_str())
        .filter(|z| !z.is_empty())
    {
        endpoint["zone"] = json!(zone);
    }
    // `ShouldSetHostname`.
    let hostname = pod["spec"]["hostname"].as_str().unwrap_or_default();
    if !hostname.is_empty()
        && pod["spec"]["subdomain"] == service["metadata"]["name"]
        && w::namespace(pod) == w::namespace(service)
    {
        endpoint["hostname"] = json!(hostname);
    }
    endpoint
}

/// `setEndpointSliceLabels`: the Service's labels but the reserved ones,
/// the headless label when it has no cluster IP, the service name and the
/// controller's.
pub fn slice_labels(service: &Value) -> Value {
    let mut labels = serde_json::Map::new();
    for (k, v) in service["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if ![LABEL_SERVICE_NAME, LABEL_MANAGED_BY, HEADLESS].contains(&k.as_str()) {
            labels.insert(k.clone(), v.clone());
        }
    }
    // `isServiceIPSet`: a cluster IP neither empty nor `None`. The test
    // server allocates none, so only an explicit `None` is headless here.
    if service["spec"]["clusterIP"] == "None" {
        labels.insert(HEADLESS.into(), json!(""));
    }
    labels.insert(
        LABEL_SERVICE_NAME.into(),
        service["metadata"]["name"].clone(),
    );
    labels.insert(LABEL_MANAGED_BY.into(), json!(CONTROLLER_NAME));
    Value::Object(labels)
}

/// `newEndpointSlice`: `generateName` `<service>-` (the name alone when
/// that is not a valid prefix), a controller reference to the Service.
fn new_slice(service: &Value, address_type: &str, ports: &Value, endpoints: Vec<Value>) -> Value {
    let name = w::name(service);
    let prefix = format!("{name}-");
    let prefix = if prefix.len() <= 253 - 5 {
        prefix
    } else {
        name.to_string()
    };
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "generateName": prefix,
            "namespace": w::namespace(service),
            "labels": slice_labels(service),
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                                 "uid": w::uid(service), "controller": true,
                                 "blockOwnerDeletion": true}],
        },
        "addressType": address_type,
        "endpoints": endpoints,
        "ports": ports,
    })
}

/// `ownedBy`: a reference to the Service's uid, kind `Service`, `v1`.
fn owned_by(slice: &Value, service: &Value) -> bool {
    slice["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| {
            o["uid"] == service["metadata"]["uid"]
                && o["kind"] == "Service"
                && o["apiVersion"] == "v1"
        })
}

/// What one Service's slices should hold: for each address type, the
/// endpoints grouped by their ports (`reconcileByAddressType`).
pub fn desired(
    service: &Value,
    pods: &[Value],
    nodes: &BTreeMap<String, Value>,
) -> BTreeMap<&'static str, BTreeMap<String, (Value, Vec<Value>)>> {
    let publish = service["spec"]["publishNotReadyAddresses"] == true;
    let selector = service["spec"]["selector"].as_object();
    let mut selected: Vec<&Value> = pods
        .iter()
        .filter(|p| w::namespace(p) == w::namespace(service))
        .filter(|p| {
            selector
                .into_iter()
                .flatten()
                .all(|(k, v)| p["metadata"]["labels"][k] == *v)
        })
        .filter(|p| should_be_in_endpoints(p))
        .collect();
    selected.sort_by(|a, b| w::name(a).cmp(w::name(b)));
    let mut out = BTreeMap::new();
    for address_type in address_types(service) {
        let mut by_ports: BTreeMap<String, (Value, Vec<Value>)> = BTreeMap::new();
        for pod in &selected {
            let node = pod["spec"]["nodeName"].as_str().and_then(|n| nodes.get(n));
            // A pod whose node is not there is left out (and the Service
            // tried again) unless its addresses are published anyway.
            if node.is_none() && !publish {
                continue;
            }
            let ports = json!(endpoint_ports(service, pod));
            let endpoint = pod_to_endpoint(pod, node, service, address_type);
            let entry = by_ports
                .entry(ports.to_string())
                .or_insert_with(|| (ports.clone(), Vec::new()));
            if endpoint["addresses"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
            {
                entry.1.push(endpoint);
            }
        }
        out.insert(address_type, by_ports);
    }
    out
}

/// One pass over every Service.
pub fn sync(world: &mut World) {
    let Some(def) = world.registry.get(&endpoint_slices()) else {
        return;
    };
    let mut all_services = world.list_objects(&services());
    all_services.sort_by_key(crate::store::key_of);
    let pods = world.list_objects(&w::pods());
    let nodes: BTreeMap<String, Value> = world
        .list_objects(&GroupResource::new("", "nodes"))
        .into_iter()
        .map(|n| (w::name(&n).to_string(), n))
        .collect();
    for service in all_services {
        // `syncService`: no selector, no slices from this controller; a
        // Service being deleted takes its slices with it (owner references).
        if !service["spec"]["selector"].is_object() || w::deleting(&service) {
            continue;
        }
        let ns = w::namespace(&service).to_string();
        let name = w::name(&service).to_string();
        let mut existing: Vec<Value> = world
            .list_objects(&endpoint_slices())
            .into_iter()
            .filter(|s| {
                w::namespace(s) == ns
                    && s["metadata"]["labels"][LABEL_SERVICE_NAME] == name.as_str()
                    && s["metadata"]["labels"][LABEL_MANAGED_BY] == CONTROLLER_NAME
                    && !w::deleting(s)
            })
            .collect();
        existing.sort_by(|a, b| w::name(a).cmp(w::name(b)));
        let wanted = desired(&service, &pods, &nodes);
        let mut to_delete = Vec::new();
        let mut to_write: Vec<(Option<Value>, Value)> = Vec::new();
        for slice in &existing {
            let kept_type = wanted.contains_key(slice["addressType"].as_str().unwrap_or_default());
            if !kept_type || !owned_by(slice, &service) {
                to_delete.push(slice.clone());
            }
        }
        for (address_type, groups) in &wanted {
            let mut mine: Vec<&Value> = existing
                .iter()
                .filter(|s| s["addressType"] == *address_type && owned_by(s, &service))
                .collect();
            let mut placed = 0;
            for (ports, endpoints) in groups.values() {
                if endpoints.is_empty() {
                    continue;
                }
                for chunk in endpoints.chunks(MAX_ENDPOINTS_PER_SLICE) {
                    let reuse = mine
                        .iter()
                        .position(|s| {
                            s["ports"] == *ports
                                || s["ports"].is_null()
                                    && ports.as_array().is_some_and(Vec::is_empty)
                        })
                        .map(|i| mine.remove(i).clone());
                    let mut slice = new_slice(&service, address_type, ports, chunk.to_vec());
                    if let Some(old) = &reuse {
                        slice["metadata"] = old["metadata"].clone();
                        slice["metadata"]["labels"] = slice_labels(&service);
                    }
                    to_write.push((reuse, slice));
                    placed += 1;
                }
            }
            if placed == 0 {
                // The placeholder: no endpoints, no ports; one already
                // there is kept.
                let reuse = mine
                    .iter()
                    .position(|s| {
                        s["endpoints"].as_array().is_none_or(Vec::is_empty)
                            && s["ports"].as_array().is_none_or(Vec::is_empty)
                    })
                    .map(|i| mine.remove(i).clone());
                let mut slice = new_slice(&service, address_type, &json!([]), Vec::new());
                if let Some(old) = &reuse {
                    slice["metadata"] = old["metadata"].clone();
                    slice["metadata"]["labels"] = slice_labels(&service);
                    slice["ports"] = old["ports"].clone();
                }
                to_write.push((reuse, slice));
            }
            to_delete.extend(mine.into_iter().cloned());
        }
        for (old, slice) in to_write {
            match old {
                None => {
                    if let Err(e) = world.create(&def, Some(&ns), slice) {
                        tracing::debug!(error = %e, service = %name, "endpointslice: create");
                    }
                }
                Some(old) => {
                    let same = ["addressType", "endpoints", "ports"].iter().all(|f| {
                        old[*f] == slice[*f] || (old[*f].is_null() && slice[*f] == json!([]))
                    }) && old["metadata"]["labels"] == slice["metadata"]["labels"];
                    if same {
                        continue;
                    }
                    let slice_name = w::name(&old).to_string();
                    if let Err(e) = world.update(&def, Some(&ns), &slice_name, slice, Target::Main)
                    {
                        tracing::debug!(error = %e, service = %name, "endpointslice: update");
                    }
                }
            }
        }
        for slice in to_delete {
            if let Err(e) = world.delete(&def, Some(&ns), w::name(&slice), &json!({})) {
                tracing::debug!(error = %e, service = %name, "endpointslice: delete");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(ports: Value) -> Value {
        json!({"metadata": {"name": "db", "namespace": "app", "uid": "svc-uid",
                            "labels": {"app": "db", LABEL_MANAGED_BY: "someone"}},
               "spec": {"selector": {"app": "db"}, "ports": ports}})
    }

    fn pod(name: &str, ip: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "namespace": "app", "uid": format!("{name}-uid"),
                            "labels": {"app": "db"}},
               "spec": {"nodeName": "n1", "hostname": "h", "subdomain": "db",
                        "containers": [{"name": "c", "ports": [{"name": "sql", "containerPort": 5433}]}]},
               "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                          "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    /// `podToEndpoint`, `getEndpointPorts` with `FindPort`.
    #[test]
    fn a_pod_is_an_endpoint_with_its_ports_found_by_number_or_name() {
        let svc = service(json!([{"name": "sql", "port": 5432, "targetPort": "sql"},
                                 {"name": "admin", "port": 9000},
                                 {"name": "missing", "port": 1, "targetPort": "nope"}]));
        let p = pod("db-0", "10.244.0.2", true);
        assert_eq!(
            endpoint_ports(&svc, &p),
            vec![
                json!({"name": "sql", "port": 5433, "protocol": "TCP"}),
                json!({"name": "admin", "port": 9000, "protocol": "TCP"})
            ]
        );
        let node = json!({"metadata": {"name": "n1", "labels": {ZONE: "z1"}}});
        assert_eq!(
            pod_to_endpoint(&p, Some(&node), &svc, "IPv4"),
            json!({"addresses": ["10.244.0.2"],
                   "conditions": {"ready": true, "serving": true, "terminating": false},
                   "targetRef": {"kind": "Pod", "namespace": "app", "name": "db-0", "uid": "db-0-uid"},
                   "nodeName": "n1", "zone": "z1", "hostname": "h"})
        );
        // Not ready: listed, not ready; an IPv6 slice gets no address.
        let not_ready = pod_to_endpoint(&pod("db-1", "10.244.0.3", false), None, &svc, "IPv4");
        assert_eq!(not_ready["conditions"]["ready"], false);
        assert_eq!(
            pod_to_endpoint(&p, None, &svc, "IPv6")["addresses"],
            json!([])
        );
    }

    /// `ShouldPodBeInEndpoints`, the node check, `getAddressTypesForService`.
    #[test]
    fn only_running_pods_with_an_address_on_a_known_node_are_endpoints() {
        let svc = service(json!([{"port": 80}]));
        let mut done = pod("done", "10.244.0.4", false);
        done["status"]["phase"] = json!("Succeeded");
        let mut pending = pod("pending", "", false);
        pending["status"] = json!({"phase": "Pending"});
        let mut elsewhere = pod("elsewhere", "10.244.1.2", true);
        elsewhere["spec"]["nodeName"] = json!("gone");
        let mut other = pod("other", "10.244.0.9", true);
        other["metadata"]["labels"] = json!({"app": "web"});
        let pods = [
            pod("db-0", "10.244.0.2", true),
            done,
            pending,
            elsewhere,
            other,
        ];
        let nodes = BTreeMap::from([("n1".to_string(), json!({"metadata": {"name": "n1"}}))]);
        let wanted = desired(&svc, &pods, &nodes);
        assert_eq!(wanted.keys().copied().collect::<Vec<_>>(), ["IPv4"]);
        let groups = &wanted["IPv4"];
        assert_eq!(groups.len(), 1);
        let (ports, endpoints) = groups.values().next().unwrap();
        assert_eq!(ports, &json!([{"name": "", "port": 80, "protocol": "TCP"}]));
        let names: Vec<&Value> = endpoints.iter().map(|e| &e["targetRef"]["name"]).collect();
        assert_eq!(names, [&json!("db-0")]);
        let mut dual = svc.clone();
        dual["spec"]["ipFamilies"] = json!(["IPv6", "IPv4"]);
        assert_eq!(address_types(&dual), ["IPv6", "IPv4"]);
    }

    /// `setEndpointSliceLabels`.
    #[test]
    fn slices_carry_the_services_labels_but_the_reserved_ones() {
        let mut svc = service(json!([]));
        svc["spec"]["clusterIP"] = json!("None");
        assert_eq!(
            slice_labels(&svc),
            json!({"app": "db", LABEL_SERVICE_NAME: "db", LABEL_MANAGED_BY: CONTROLLER_NAME,
                   HEADLESS: ""})
        );
    }
}
