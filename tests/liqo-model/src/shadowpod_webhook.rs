//! The provider's ShadowPod validating webhook on creation, as Liqo v1.2.0
//! has it in `pkg/webhooks/shadowpod/webhook.go` (SPW below), with its
//! quota arithmetic from `peeringinfo.go` (PI) and `spdescription.go` (SPD):
//! a ShadowPod is admitted only while its creator's Quota has room for it,
//! and never while the Quota is cordoned.
//!
//! The decision is a pure function ([`validate_create`]) given what the
//! webhook reads; [`Hook`] is the webhook on the test API server's
//! admission chain, reading Quotas and Namespaces from watch caches as
//! Liqo's does from the manager's cached client, and keeping the pods it
//! admitted per creator as its peering cache does.

use std::collections::BTreeMap;
use std::sync::Mutex;

use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use kube::Client;
use kube_test_server::admission::{Attributes, Denial, ValidatingHook};
use quantity::Quantity;
use serde_json::Value;

use crate::identity::{Rule, READ};

use crate::consts::{CREATOR_USER, REMOTE_CLUSTER_ID};

/// Names the webhook's watch caches in the logs.
const CACHE: &str = "shadowpod-webhook-cache";

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

/// RBAC of the webhook's reads (the chart's `liqo-webhook` ClusterRole,
/// the part this model uses).
pub const RULES: &[Rule] = &[
    Rule::new(&["offloading.liqo.io"], &["quotas"], READ),
    Rule::new(&[""], &["namespaces"], READ),
];

/// The webhook's name in the chart
/// (`deployments/liqo/templates/webhooks/liqo-validating-webhook.yaml:33-49`).
pub const NAME: &str = "shadowpod.validate.liqo.io";

/// The ShadowPod validating webhook as an admission hook of the test API
/// server: CREATE of `offloading.liqo.io` `shadowpods` (the chart's rule,
/// :43-47); updates and deletions are let through (not modelled).
pub struct Hook {
    resource_enforcement: bool,
    quotas: Store<DynamicObject>,
    namespaces: Store<DynamicObject>,
    /// The pods admitted so far per creator (PI:109-112, 143-148); the
    /// cache refresh that drops deleted ShadowPods (`cache.go`) is not
    /// modelled.
    admitted: Mutex<BTreeMap<String, Vec<Value>>>,
}

impl Hook {
    /// The hook and the watch tasks filling its caches; the caches are
    /// filled once the returned future's first lists are in.
    pub async fn start(
        client: Client,
        resource_enforcement: bool,
    ) -> (Hook, Vec<tokio::task::JoinHandle<()>>) {
        let (quotas, quota_task) =
            crate::watch_cache::start(client.clone(), crate::consts::quotas(), CACHE);
        let (namespaces, namespace_task) =
            crate::watch_cache::start(client, crate::consts::namespaces(), CACHE);
        // SPW:69-72: no answer before the caches are ready.
        let _ = quotas.wait_until_ready().await;
        let _ = namespaces.wait_until_ready().await;
        let hook = Hook {
            resource_enforcement,
            quotas,
            namespaces,
            admitted: Mutex::new(BTreeMap::new()),
        };
        (hook, vec![quota_task, namespace_task])
    }
}

impl ValidatingHook for Hook {
    fn name(&self) -> &str {
        NAME
    }

    fn validate(&self, a: &Attributes<'_>) -> Result<(), Denial> {
        if a.def.group != "offloading.liqo.io"
            || a.def.plural != "shadowpods"
            || a.operation != "CREATE"
        {
            return Ok(());
        }
        let namespace = self
            .namespaces
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(a.namespace));
        let namespace_labels = namespace.map(|n| n.metadata.labels.clone().unwrap_or_default());
        let quotas: Vec<Value> = self
            .quotas
            .state()
            .iter()
            .filter_map(|q| serde_json::to_value(q.as_ref()).ok())
            .collect();
        let creator = a.object["metadata"]["labels"][CREATOR_USER]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut admitted = self.admitted.lock().unwrap_or_else(|e| e.into_inner());
        let mine = admitted.entry(creator).or_default();
        let world = World {
            resource_enforcement: self.resource_enforcement,
            namespace_labels: namespace_labels.as_ref(),
            quotas: &quotas,
            admitted: mine,
        };
        // `admission.Denied` answers 403 Forbidden with the message.
        validate_create(a.object, &world).map_err(|Denied(m)| Denial::new(403, "Forbidden", m))?;
        if self.resource_enforcement {
            mine.push(a.object.clone());
        }
        Ok(())
    }
}
