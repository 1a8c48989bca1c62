//! What the local monitor needs from a Node or a Pod, following Liqo's
//! rules: which nodes count (Ready, not virtual), which pods count (Running,
//! not shadow), what a pod requests, and which peer offloaded it.
//!
//! The same rules exist twice: as selectors sent to the API server, so it
//! filters before anything crosses the wire, and as the checks below, which
//! every received object still passes through (the Ready condition cannot be
//! selected server-side, and a server or proxy ignoring a selector must not
//! change the answer).

use std::collections::BTreeMap;

use controller_core::liqo::{NODE_TYPE_LABEL, SHADOW_POD_LABEL, VIRTUAL_NODE_TYPE};
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;
use quantity::{Quantity, ResourceList};

/// The label selector of the Node watch: everything but Liqo's virtual
/// nodes, whose "allocatable" is a peer's offer, not capacity of ours.
pub fn node_label_selector() -> String {
    format!("{NODE_TYPE_LABEL}!={VIRTUAL_NODE_TYPE}")
}

/// The label selector of the Pod watch: no shadow pods (they run on a peer).
pub fn pod_label_selector() -> String {
    format!("{SHADOW_POD_LABEL}!=true")
}

/// The field selector of the Pod watch: only Running pods. Finished pods
/// (Succeeded, Failed) can outnumber running ones by far in a busy cluster
/// and are never counted, so the API server keeps them to itself; a pod
/// that stops running leaves the watch as a DELETED event.
pub const POD_FIELD_SELECTOR: &str = "status.phase=Running";

/// A node's allocatable resources, if the node counts (Ready and not a
/// Liqo virtual node); `None` otherwise.
pub fn counted_node(node: &Node) -> Option<ResourceList> {
    let labels = node.metadata.labels.as_ref();
    if labels
        .and_then(|l| l.get(NODE_TYPE_LABEL))
        .map(String::as_str)
        == Some(VIRTUAL_NODE_TYPE)
    {
        return None;
    }
    let status = node.status.as_ref()?;
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if !ready {
        return None;
    }
    Some(to_list(
        status.allocatable.as_ref(),
        node.metadata.name.as_deref().unwrap_or(""),
    ))
}

/// What a counted pod takes from the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountedPod {
    /// Effective requests (as the scheduler computes them).
    pub requests: ResourceList,
    /// The peer that offloaded the pod here, if any.
    pub origin: Option<String>,
}

/// A pod's contribution, if it counts: Running and not a shadow pod.
pub fn counted_pod(pod: &Pod, origin_labels: &[String]) -> Option<CountedPod> {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Running") {
        return None;
    }
    let labels = pod.metadata.labels.as_ref();
    if labels
        .and_then(|l| l.get(SHADOW_POD_LABEL))
        .map(String::as_str)
        == Some("true")
    {
        return None;
    }
    let origin = labels.and_then(|l| {
        origin_labels
            .iter()
            .find_map(|key| l.get(key).filter(|v| !v.is_empty()).cloned())
    });
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let requests = pod
        .spec
        .as_ref()
        .map(|s| pod_requests(s, name))
        .unwrap_or_default();
    Some(CountedPod { requests, origin })
}

/// The effective requests of a pod, as kube-scheduler and kubectl compute
/// them: the sum of its containers (and restartable "sidecar" init
/// containers), or the largest init-container step if that is more,
/// pod-level requests where set, plus the runtime overhead.
fn pod_requests(spec: &k8s_openapi::api::core::v1::PodSpec, pod: &str) -> ResourceList {
    let mut total = ResourceList::new();
    for c in &spec.containers {
        total = total.add(&container_requests(c, pod));
    }
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let requests = container_requests(c, pod);
        let step = if c.restart_policy.as_deref() == Some("Always") {
            total = total.add(&requests);
            sidecars = sidecars.add(&requests);
            sidecars.clone()
        } else {
            requests.add(&sidecars)
        };
        init_peak = max_per_name(&init_peak, &step);
    }
    total = max_per_name(&total, &init_peak);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (name, q) in to_list(Some(pod_level), pod).0 {
            total.0.insert(name, q);
        }
    }
    if let Some(overhead) = spec.overhead.as_ref() {
        total = total.add(&to_list(Some(overhead), pod));
    }
    total
}

fn container_requests(c: &Container, pod: &str) -> ResourceList {
    to_list(c.resources.as_ref().and_then(|r| r.requests.as_ref()), pod)
}

fn max_per_name(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (name, q) in &b.0 {
        match out.0.get(name) {
            Some(have) if have >= q => {}
            _ => {
                out.0.insert(name.clone(), q.clone());
            }
        }
    }
    out
}

/// Convert a Kubernetes resource map, skipping (and reporting) entries the
/// API server should never have accepted.
fn to_list(map: Option<&BTreeMap<String, KubeQuantity>>, object: &str) -> ResourceList {
    let mut out = BTreeMap::new();
    for (name, q) in map.into_iter().flatten() {
        match q.0.parse::<Quantity>() {
            Ok(q) => {
                out.insert(name.clone(), q);
            }
            Err(error) => {
                tracing::warn!(object, resource = %name, value = %q.0, %error, "ignoring a bad quantity")
            }
        }
    }
    ResourceList(out)
}
