//! A pod's effective resource requests: what kube-scheduler's
//! `NodeResourcesFit` filter reserves for it on a node, so that every
//! controller of the broker that asks "does this pod fit there?" (the
//! orchestrator's demand, the market autoscaler's plans) counts as the
//! scheduler that will place it.
//!
//! kube-scheduler computes it with `PodRequests`
//! (`staging/src/k8s.io/component-helpers/resource/helpers.go`, which
//! `pkg/api/v1/resource/helpers.go` forwards to; called from
//! `pkg/scheduler/framework/plugins/noderesources/fit.go`
//! `computePodResourceRequest` with the pod-level resources on as
//! `PodLevelResources` is by default since v1.34), read at v1.34:
//!
//! 1. the regular containers' requests, summed (`aggregateContainerResourcesByFn`);
//! 2. the init containers in order: a **restartable** one (a sidecar,
//!    `restartPolicy: Always`) is added to that sum and runs beside every
//!    later init container, so each later init container's need is its own
//!    requests plus the sidecars started before it (KEP 753, "Resources
//!    calculation for scheduling and pod admission"); the result is, per
//!    resource, the larger of the sum and the largest such need
//!    (`maxResourceList`);
//! 3. pod-level requests (`spec.resources.requests`), when any of cpu,
//!    memory or `hugepages-*` is set, replace those resources' values
//!    (`applyPodLevelResources`, `IsSupportedPodLevelResource`);
//! 4. plus `spec.overhead` (the RuntimeClass's, set at admission).
//!
//! Not counted, as a pending pod has none: the resources a resize reported
//! in the pod's status (`UseStatusResources`, only for bound pods), and DRA
//! claims' node-allocatable resources. The pod itself (`pods: 1`) is not a
//! request: the scheduler checks the node's pod count on its own, and a
//! caller that compares with a plan selling `pods` adds it.

use k8s_openapi::api::core::v1::{Container, Pod};
use quantity::{Quantity, ResourceList};

/// A request in the pod that is not a quantity this crate reads (the API
/// server validated it, so only a value beyond [`quantity`]'s documented
/// bounds gets here).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{part}: {resource}: {message}")]
pub struct RequestError {
    /// Where it is: `container <name>`, `init container <name>`,
    /// `pod-level resources` or `overhead`.
    pub part: String,
    pub resource: String,
    pub message: String,
}

type Quantities =
    std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;

fn parse(part: &str, list: Option<&Quantities>) -> Result<ResourceList, RequestError> {
    list.into_iter()
        .flatten()
        .map(|(name, q)| {
            q.0.parse::<Quantity>()
                .map(|q| (name.clone(), q))
                .map_err(|e| RequestError {
                    part: part.to_string(),
                    resource: name.clone(),
                    message: e.to_string(),
                })
        })
        .collect()
}

fn container_requests(part: &str, c: &Container) -> Result<ResourceList, RequestError> {
    parse(
        &format!("{part} {}", c.name),
        c.resources.as_ref().and_then(|r| r.requests.as_ref()),
    )
}

/// helpers.go `maxResourceList`: per resource, the larger (a resource only
/// in `other` is taken as it is).
fn max_into(list: &mut ResourceList, other: &ResourceList) {
    for (name, q) in &other.0 {
        if list.get(name).is_none_or(|have| q > have) {
            list.insert(name.clone(), q.clone());
        }
    }
}

/// helpers.go `isRestartableInitContainer`.
fn restartable(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// helpers.go `IsSupportedPodLevelResource`.
fn pod_level(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with("hugepages-")
}

/// `pod`'s effective requests, as kube-scheduler reserves them (see the
/// module docs); empty for a pod without a spec.
pub fn requests(pod: &Pod) -> Result<ResourceList, RequestError> {
    let Some(spec) = &pod.spec else {
        return Ok(ResourceList::new());
    };
    let mut sum = ResourceList::new();
    for c in &spec.containers {
        sum = sum.add(&container_requests("container", c)?);
    }
    let mut sidecars = ResourceList::new();
    let mut init = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let own = container_requests("init container", c)?;
        let need = if restartable(c) {
            sum = sum.add(&own);
            sidecars = sidecars.add(&own);
            sidecars.clone()
        } else {
            own.add(&sidecars)
        };
        max_into(&mut init, &need);
    }
    max_into(&mut sum, &init);
    let level = parse(
        "pod-level resources",
        spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
    )?;
    // helpers.go `IsPodLevelRequestsSet`: only when a supported one is set.
    if level.0.keys().any(|k| pod_level(k)) {
        for (name, q) in level.0.into_iter().filter(|(k, _)| pod_level(k)) {
            sum.insert(name, q);
        }
    }
    Ok(sum.add(&parse("overhead", spec.overhead.as_ref())?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn c(name: &str, requests: Value) -> Value {
        json!({"name": name, "image": "i", "resources": {"requests": requests}})
    }

    fn got(spec: Value) -> std::collections::BTreeMap<String, String> {
        requests(&pod(spec)).unwrap().to_strings()
    }

    fn list(entries: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn containers_sum_and_the_largest_init_container_wins_per_resource() {
        // fit.go's own example for computePodResourceRequest: IC1 2/1G,
        // IC2 2/3G, C1 2/1G, C2 1/1G → cpu 3, memory 3G.
        let spec = json!({
            "initContainers": [c("ic1", json!({"cpu": "2", "memory": "1G"})),
                               c("ic2", json!({"cpu": "2", "memory": "3G"}))],
            "containers": [c("c1", json!({"cpu": "2", "memory": "1G"})),
                           c("c2", json!({"cpu": "1", "memory": "1G"}))]});
        assert_eq!(got(spec), list(&[("cpu", "3"), ("memory", "3G")]));
        // A resource only an init container asks for counts too.
        let spec = json!({
            "initContainers": [c("i", json!({"nvidia.com/gpu": "1"}))],
            "containers": [c("c", json!({"cpu": "500m"}))]});
        assert_eq!(got(spec), list(&[("cpu", "500m"), ("nvidia.com/gpu", "1")]));
    }

    #[test]
    fn sidecars_add_to_the_containers_and_to_every_later_init_container() {
        // KEP 753's example shape: a sidecar (restartPolicy Always) of 1
        // cpu runs beside the regular containers (1 cpu) and beside the
        // init container after it (2 cpu, so 3 while it runs); an init
        // container before it runs alone.
        let mut sidecar = c("sidecar", json!({"cpu": "1", "memory": "100Mi"}));
        sidecar["restartPolicy"] = json!("Always");
        let spec = json!({
            "initContainers": [c("first", json!({"cpu": "1500m"})), sidecar,
                               c("migrate", json!({"cpu": "2", "memory": "50Mi"}))],
            "containers": [c("app", json!({"cpu": "1", "memory": "1Gi"}))]});
        // cpu: max(1 + 1, 1.5, 1 + 2) = 3; memory: max(1Gi + 100Mi, 100Mi + 50Mi).
        assert_eq!(got(spec), list(&[("cpu", "3"), ("memory", "1124Mi")]));
    }

    #[test]
    fn overhead_is_added_and_pod_level_requests_replace_cpu_and_memory() {
        let spec = json!({
            "initContainers": [c("i", json!({"cpu": "4"}))],
            "containers": [c("c", json!({"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}))],
            "overhead": {"cpu": "250m", "memory": "120Mi"}});
        assert_eq!(
            got(spec.clone()),
            list(&[
                ("cpu", "4250m"),
                ("memory", "1144Mi"),
                ("ephemeral-storage", "1Gi")
            ])
        );
        let mut level = spec.clone();
        level["resources"] = json!({"requests": {"cpu": "6", "memory": "2Gi"}});
        assert_eq!(
            got(level),
            list(&[
                ("cpu", "6250m"),
                ("memory", "2168Mi"),
                ("ephemeral-storage", "1Gi")
            ])
        );
        // Pod-level requests of an unsupported resource alone change nothing.
        let mut other = spec;
        other["resources"] = json!({"requests": {"ephemeral-storage": "9Gi"}});
        assert_eq!(
            got(other),
            list(&[
                ("cpu", "4250m"),
                ("memory", "1144Mi"),
                ("ephemeral-storage", "1Gi")
            ])
        );
    }

    #[test]
    fn no_spec_is_nothing_and_a_bad_quantity_names_its_place() {
        let bare: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        assert_eq!(requests(&bare).unwrap(), ResourceList::new());
        let bad = pod(
            json!({"initContainers": [c("setup", json!({"cpu": "lots"}))],
                             "containers": [c("c", json!({}))]}),
        );
        let e = requests(&bad).unwrap_err();
        assert_eq!(
            (e.part.as_str(), e.resource.as_str()),
            ("init container setup", "cpu")
        );
    }
}
