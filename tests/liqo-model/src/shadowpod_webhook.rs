//! The provider's ShadowPod validating webhook on creation, as Liqo v1.2.0
//! has it in `pkg/webhooks/shadowpod/webhook.go` (SPW below), with its
//! quota arithmetic from `peeringinfo.go` (PI) and `spdescription.go` (SPD):
//! a ShadowPod is admitted only while its creator's Quota has room for it,
//! and never while the Quota is cordoned.
//!
//! A pure function: the test API server has no admission hook yet, so the
//! caller gives it what the webhook would read (the namespace's labels, the
//! Quotas, the ShadowPods already admitted for the creator).

use std::collections::BTreeMap;

use quantity::Quantity;
use serde_json::Value;

use crate::consts::{CREATOR_USER, REMOTE_CLUSTER_ID};

/// `pkg/virtualKubelet/forge/meta.go:28`: the origin cluster of a ShadowPod.
pub const ORIGIN_CLUSTER_ID: &str = "offloading.liqo.io/origin";

/// Why a ShadowPod is refused, with the webhook's own message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub String);

fn denied(message: impl Into<String>) -> Denied {
    Denied(message.into())
}

/// What the webhook reads besides the ShadowPod itself.
pub struct World<'a> {
    /// `controllerManager.config.enableResourceEnforcement`
    /// (`deployments/liqo/values.yaml:431`, default on).
    pub resource_enforcement: bool,
    /// Labels of the ShadowPod's namespace; `None` when it does not exist.
    pub namespace_labels: Option<&'a BTreeMap<String, String>>,
    /// Every Quota in the cluster (whole objects).
    pub quotas: &'a [Value],
    /// The ShadowPods already admitted and not terminated for the same
    /// creator (whole objects): the webhook's cache of used quota (PI:98-118).
    pub admitted: &'a [Value],
}

/// SPW:87-146: whether creating `shadowpod` is allowed.
pub fn validate_create(shadowpod: &Value, world: &World<'_>) -> Result<(), Denied> {
    let labels = &shadowpod["metadata"]["labels"];
    // SPW:94-99.
    let Some(cluster) = labels[ORIGIN_CLUSTER_ID].as_str() else {
        return Err(denied("missing origin Cluster ID label"));
    };
    // SPW:103-109, 225-240: a missing namespace is a 400 in Liqo, here a denial too.
    let Some(namespace_labels) = world.namespace_labels else {
        return Err(denied("namespace not found"));
    };
    if namespace_labels.get(REMOTE_CLUSTER_ID).map(String::as_str) != Some(cluster) {
        return Err(denied("shadowpod Cluster ID label mismatch"));
    }
    // SPW:111-113.
    if !world.resource_enforcement {
        return Ok(());
    }
    // SPW:115-121.
    let Some(creator) = labels[CREATOR_USER].as_str() else {
        return Err(denied("missing creator label"));
    };
    // SPW:123-127 (`pkg/utils/getters`, GetQuotaByUser: by `spec.user`).
    let Some(quota) = world.quotas.iter().find(|q| q["spec"]["user"] == creator) else {
        return Err(denied("failed getting quota"));
    };
    // SPW:132-135.
    if quota["spec"]["cordoned"] == true {
        return Err(denied("user is cordoned"));
    }
    // SPW:137-143, PI:124-150.
    let enforcement = quota["spec"]["limitsEnforcement"]
        .as_str()
        .unwrap_or("None");
    let wanted = pod_quota(shadowpod, enforcement)?;
    let total = resource_list(&quota["spec"]["resources"]);
    let mut used: BTreeMap<String, Quantity> = BTreeMap::new();
    for other in world.admitted {
        // What an admitted pod counted when it was admitted; a pod admitted
        // under another level counts what this level counts.
        for (k, v) in pod_quota(other, "None")? {
            let sum = used.get(&k).map_or(v.clone(), |u| u.add(&v));
            used.insert(k, sum);
        }
    }
    check_resources(&total, &used, &wanted)
}

/// PI:74-82, 177-190: every requested key must be in the Quota and fit in
/// what is free of it.
fn check_resources(
    total: &BTreeMap<String, Quantity>,
    used: &BTreeMap<String, Quantity>,
    wanted: &BTreeMap<String, Quantity>,
) -> Result<(), Denied> {
    for (key, want) in wanted {
        let Some(limit) = total.get(key) else {
            return Err(denied(format!(
                "{key} quota limit not found for this peering"
            )));
        };
        let free = used.get(key).map_or(limit.clone(), |u| limit.sub(u));
        if free.sub(want).is_negative() {
            return Err(denied(format!(
                "peering {key} quota usage exceeded - free {free} / requested {want}"
            )));
        }
    }
    Ok(())
}

/// SPD:101-188: the sum of the containers' requests, at least the largest
/// init container's; `Soft` and `Hard` need cpu and memory requests on
/// every container, `Hard` also limits equal to requests.
pub fn pod_quota(
    shadowpod: &Value,
    enforcement: &str,
) -> Result<BTreeMap<String, Quantity>, Denied> {
    let pod = &shadowpod["spec"]["pod"];
    let name = shadowpod["metadata"]["name"].as_str().unwrap_or_default();
    let Some(containers) = pod["containers"].as_array() else {
        return Err(denied(format!(
            "ShadowPod {name} has no containers defined"
        )));
    };
    let mut sum: BTreeMap<String, Quantity> = BTreeMap::new();
    for c in containers {
        for (k, v) in container_requests(c, enforcement, "container")? {
            let total = sum.get(&k).map_or(v.clone(), |s| s.add(&v));
            sum.insert(k, total);
        }
    }
    let mut init_max: BTreeMap<String, Quantity> = BTreeMap::new();
    for c in pod["initContainers"].as_array().into_iter().flatten() {
        for (k, v) in container_requests(c, enforcement, "initContainer")? {
            if init_max.get(&k).is_none_or(|m| m.value() < v.value()) {
                init_max.insert(k, v);
            }
        }
    }
    // SPD:186 (`quotav1.Max`): per key, the larger of the two.
    for (k, v) in init_max {
        if sum.get(&k).is_none_or(|s| s.sub(&v).is_negative()) {
            sum.insert(k, v);
        }
    }
    Ok(sum)
}

/// SPD:112-146 for one container.
fn container_requests(
    container: &Value,
    enforcement: &str,
    what: &str,
) -> Result<BTreeMap<String, Quantity>, Denied> {
    let name = container["name"].as_str().unwrap_or_default();
    let requests = resource_list(&container["resources"]["requests"]);
    let limits = resource_list(&container["resources"]["limits"]);
    if enforcement == "Hard" {
        for (k, req) in &requests {
            let equal = limits.get(k).is_some_and(|lim| lim.sub(req).is_zero());
            if !equal {
                return Err(denied(format!(
                    "{k} limits and requests are not equal for container {name}"
                )));
            }
        }
    }
    if enforcement != "None" && !(requests.contains_key("cpu") && requests.contains_key("memory")) {
        return Err(denied(format!(
            "CPU and/or memory requests not set for {what} {name}"
        )));
    }
    Ok(requests)
}

/// A JSON resource list (quantities as strings or numbers); entries that
/// are not quantities are skipped, as the API server would have refused them.
pub fn resource_list(list: &Value) -> BTreeMap<String, Quantity> {
    list.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let text = v
                .as_str()
                .map(str::to_string)
                .or_else(|| v.as_i64().map(|n| n.to_string()))?;
            Some((k.clone(), text.parse().ok()?))
        })
        .collect()
}
