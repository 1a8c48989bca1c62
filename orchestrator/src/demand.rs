//! What a namespace needs from a plan: its ResourceQuota's `spec.hard`
//! (the requests it may make), or, without a quota, the sum of its pods'
//! requests — compared with plans as Kubernetes quantities.
//!
//! From a quota, `requests.<name>` and the plain `cpu`, `memory` and
//! `ephemeral-storage` (which Kubernetes treats as `requests.*`) count as
//! `<name>`; limits, object counts and storage-class keys do not. With
//! several quotas, each is enforced on its own, so the smallest hard value
//! of each resource is what the namespace can use. A pod's request is what
//! the scheduler reserves ([`controller_core::pods::requests`]: the larger
//! of its containers' sum and any one init container, sidecars counted as
//! kube-scheduler counts them, pod-level requests, plus its overhead);
//! finished pods (Succeeded, Failed) count for nothing.

use std::fmt;

use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use quantity::{Quantity, ResourceList};

/// Where a demand comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// These ResourceQuotas' `spec.hard`.
    Quota(Vec<String>),
    /// The requests of this many running or pending pods.
    Pods(usize),
}

/// A namespace's demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    pub resources: ResourceList,
    pub source: Source,
}

impl fmt::Display for Demand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = self
            .resources
            .0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        match &self.source {
            Source::Quota(names) => write!(f, "{{{list}}} from ResourceQuota {}", names.join(",")),
            Source::Pods(n) => write!(f, "{{{list}}} requested by {n} pod(s)"),
        }
    }
}

/// A quantity in the namespace's objects that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {resource}: {message}")]
pub struct DemandError {
    pub object: String,
    pub resource: String,
    pub message: String,
}

/// The demand of a namespace holding `quotas` and `pods`.
pub fn demand(quotas: &[&ResourceQuota], pods: &[&Pod]) -> Result<Demand, DemandError> {
    let with_hard: Vec<&ResourceQuota> = quotas
        .iter()
        .copied()
        .filter(|q| {
            q.spec
                .as_ref()
                .and_then(|s| s.hard.as_ref())
                .is_some_and(|h| !h.is_empty())
        })
        .collect();
    if !with_hard.is_empty() {
        let mut names = Vec::new();
        let mut out = ResourceList::new();
        for q in with_hard {
            let name = q.metadata.name.clone().unwrap_or_default();
            let hard = q.spec.as_ref().and_then(|s| s.hard.as_ref());
            for (key, value) in hard.into_iter().flatten() {
                let Some(resource) = quota_resource(key) else {
                    continue;
                };
                let q = parse(&format!("ResourceQuota {name}"), key, &value.0)?;
                match out.0.get(resource) {
                    Some(have) if *have <= q => {}
                    _ => {
                        out.insert(resource, q);
                    }
                }
            }
            names.push(name);
        }
        names.sort();
        return Ok(Demand {
            resources: out,
            source: Source::Quota(names),
        });
    }
    let mut total = ResourceList::new();
    let mut counted = 0;
    for pod in pods {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        total = total.add(&pod_request(pod)?);
        counted += 1;
    }
    Ok(Demand {
        resources: total,
        source: Source::Pods(counted),
    })
}

/// The resource a quota key limits requests of, if it does.
fn quota_resource(key: &str) -> Option<&str> {
    match key {
        "cpu" | "memory" | "ephemeral-storage" => Some(key),
        _ => key.strip_prefix("requests.").filter(|r| !r.is_empty()),
    }
}

/// What the scheduler reserves for `pod` (the rule every controller of the
/// broker shares).
fn pod_request(pod: &Pod) -> Result<ResourceList, DemandError> {
    controller_core::pods::requests(pod).map_err(|e| DemandError {
        object: format!("Pod {}", pod.metadata.name.as_deref().unwrap_or_default()),
        resource: e.resource,
        message: format!("{}: {}", e.part, e.message),
    })
}

fn parse(object: &str, resource: &str, text: &str) -> Result<Quantity, DemandError> {
    text.parse().map_err(|e: quantity::ParseError| DemandError {
        object: object.to_string(),
        resource: resource.to_string(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn quota_requests_win_over_pods() {
        let q1: ResourceQuota = serde_json::from_value(json!({"metadata": {"name": "a"},
            "spec": {"hard": {"requests.cpu": "4", "memory": "8Gi", "limits.cpu": "100", "pods": "10",
                              "requests.nvidia.com/gpu": "1"}}}))
        .unwrap();
        let q2: ResourceQuota = serde_json::from_value(json!({"metadata": {"name": "b"},
            "spec": {"hard": {"requests.cpu": "2"}}}))
        .unwrap();
        let p = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "64"}}}]}}),
        );
        let d = demand(&[&q1, &q2], &[&p]).unwrap();
        assert_eq!(d.source, Source::Quota(vec!["a".into(), "b".into()]));
        let got = d.resources.to_strings();
        assert_eq!(got["cpu"], "2");
        assert_eq!(got["memory"], "8Gi");
        assert_eq!(got["nvidia.com/gpu"], "1");
        assert_eq!(got.len(), 3, "{got:?}");
    }

    #[test]
    fn pods_sum_as_the_scheduler_counts() {
        let a = pod(json!({"metadata": {"name": "a"}, "spec": {
            "containers": [
                {"name": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                {"name": "y", "resources": {"requests": {"cpu": "250m"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}],
            "overhead": {"memory": "100Mi"}}}));
        let b = pod(json!({"metadata": {"name": "b"}, "spec": {"containers": [
            {"name": "x", "resources": {"requests": {"cpu": "1"}}}]}}));
        let done = pod(json!({"metadata": {"name": "c"}, "spec": {"containers": [
            {"name": "x", "resources": {"requests": {"cpu": "100"}}}]}, "status": {"phase": "Succeeded"}}));
        let d = demand(&[], &[&a, &b, &done]).unwrap();
        assert_eq!(d.source, Source::Pods(2));
        let got = d.resources.to_strings();
        assert_eq!(got["cpu"], "3");
        assert_eq!(got["memory"], "1124Mi");
        let bad = pod(json!({"metadata": {"name": "z"}, "spec": {"containers": [
            {"name": "x", "resources": {"requests": {"cpu": "lots"}}}]}}));
        assert_eq!(demand(&[], &[&bad]).unwrap_err().object, "Pod z");
    }
}
