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
//! admitted per creator as its peering cache does. A deletion releases the
//! pod's share ([`release`], SPW:186-223); the test server calls hooks on
//! CREATE and UPDATE only, so [`Hook`] releases a pod when its ShadowPod
//! watch reports it deleted, where Liqo does on the DELETE request.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
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

/// Why a ShadowPod is refused, with the webhook's own HTTP code and
/// message: 403 for `admission.Denied`, 400 for the
/// `admission.Errored(http.StatusBadRequest, …)` of a missing namespace
/// (SPW:103-107).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Denied {
    pub code: u16,
    pub message: String,
}

fn denied(message: impl Into<String>) -> Denied {
    Denied {
        code: 403,
        message: message.into(),
    }
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

/// `namespace/name` of a ShadowPod: its key in the peering cache (PI:110).
fn cache_key(shadowpod: &Value) -> (&str, &str) {
    let meta = &shadowpod["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default(),
    )
}

/// SPW:87-146: whether creating `shadowpod` is allowed.
pub fn validate_create(shadowpod: &Value, world: &World<'_>) -> Result<(), Denied> {
    let labels = &shadowpod["metadata"]["labels"];
    // SPW:94-99.
    let Some(cluster) = labels[ORIGIN_CLUSTER_ID].as_str() else {
        return Err(denied("missing origin Cluster ID label"));
    };
    // SPW:103-107, 225-230: a missing namespace is the client's NotFound,
    // answered 400.
    let Some(namespace_labels) = world.namespace_labels else {
        let namespace = cache_key(shadowpod).0;
        return Err(Denied {
            code: 400,
            message: format!("namespaces {namespace:?} not found"),
        });
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
    // The CRD has no default: a Quota without the field is `""`, which is
    // not `None` (SPD:140), so requests are then required.
    let enforcement = quota["spec"]["limitsEnforcement"]
        .as_str()
        .unwrap_or_default();
    let wanted = pod_quota(shadowpod, enforcement)?;
    // SPD:58-62: a pod of that name still counted is not admitted twice
    // (here the cache holds only running pods: a released one is gone).
    if world
        .admitted
        .iter()
        .any(|other| cache_key(other) == cache_key(shadowpod))
    {
        let name = cache_key(shadowpod).1;
        return Err(denied(format!("ShadowPod {name} is already running")));
    }
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

/// SPW:186-223, PI:152-175, SPD:74-86: a deletion, with resource
/// enforcement on, takes the pod out of its creator's cache (`cache`:
/// creator → admitted pods) so its share is free again. It is always
/// allowed — `Ok(Some(message))` when the cache did not hold the pod —
/// except without a creator label.
pub fn release(
    shadowpod: &Value,
    cache: &mut BTreeMap<String, Vec<Value>>,
) -> Result<Option<String>, Denied> {
    let name = cache_key(shadowpod).1;
    // SPW:197-201.
    let Some(creator) = shadowpod["metadata"]["labels"][CREATOR_USER].as_str() else {
        return Err(denied("missing creator label"));
    };
    // SPW:204-211.
    let Some(pods) = cache.get_mut(creator) else {
        return Ok(Some(format!(
            "Peering not found in cache for user {creator:?}"
        )));
    };
    // SPD:75-85, SPW:213-220.
    let Some(at) = pods
        .iter()
        .position(|p| cache_key(p) == cache_key(shadowpod))
    else {
        return Ok(Some(format!(
            "ShadowPod {name} not found (Maybe Cache problem)"
        )));
    };
    // Validating hooks see the uid `rest.BeforeCreate` gave the object, so
    // the one counted is the one deleted only if the uids agree.
    if pods[at]["metadata"]["uid"] != shadowpod["metadata"]["uid"] {
        return Ok(Some(format!("ShadowPod {name}: UID mismatch")));
    }
    // PI:114-118: terminated, its quota subtracted (the refresh drops the
    // description later, `cache.go:130-144`; here at once).
    pods.remove(at);
    Ok(None)
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
            // A missing limit reads as a zero quantity (SPD:132).
            let equal = limits
                .get(k)
                .map_or(req.is_zero(), |lim| lim.sub(req).is_zero());
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
    Rule::new(&["offloading.liqo.io"], &["shadowpods"], READ),
];

/// The webhook's name in the chart
/// (`deployments/liqo/templates/webhooks/liqo-validating-webhook.yaml:33-49`).
pub const NAME: &str = "shadowpod.validate.liqo.io";

/// The ShadowPod validating webhook as an admission hook of the test API
/// server: CREATE of `offloading.liqo.io` `shadowpods` (the chart's rule,
/// :43-47); updates are let through (not modelled); deletions are taken
/// from a ShadowPod watch (see the module docs).
pub struct Hook {
    resource_enforcement: bool,
    quotas: Store<DynamicObject>,
    namespaces: Store<DynamicObject>,
    /// The pods admitted and not deleted, per creator (PI:109-118), from
    /// those there at start (`cache.go:49-74`); the periodic refresh
    /// (`cache.go:76-110`) is not modelled.
    admitted: Arc<Mutex<BTreeMap<String, Vec<Value>>>>,
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
            crate::watch_cache::start(client.clone(), crate::consts::namespaces(), CACHE);
        // SPW:69-72: no answer before the caches are ready.
        let _ = quotas.wait_until_ready().await;
        let _ = namespaces.wait_until_ready().await;
        let admitted = Arc::new(Mutex::new(initial_cache(&client, &quotas).await));
        let deletions = tokio::spawn(release_deleted(client, admitted.clone()));
        let hook = Hook {
            resource_enforcement,
            quotas,
            namespaces,
            admitted,
        };
        (hook, vec![quota_task, namespace_task, deletions])
    }
}

/// `cache.go:49-74`: each Quota's user starts with the ShadowPods it
/// already created counted (at level `None`, `cache.go:162`); a failed
/// list starts it empty (Liqo retries the initialisation).
async fn initial_cache(
    client: &Client,
    quotas: &Store<DynamicObject>,
) -> BTreeMap<String, Vec<Value>> {
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &crate::offloading_consts::shadow_pods());
    let pods: Vec<Value> = match api.list(&Default::default()).await {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "listing ShadowPods for the webhook's cache");
            Vec::new()
        }
    };
    let quotas: Vec<Value> = quotas
        .state()
        .iter()
        .filter_map(|q| serde_json::to_value(q.as_ref()).ok())
        .collect();
    cache_of(&quotas, &pods)
}

/// `cache.go:55-69`: per Quota user, the ShadowPods labelled as created by
/// that user (`getters.ListShadowPodsByCreator`).
pub fn cache_of(quotas: &[Value], pods: &[Value]) -> BTreeMap<String, Vec<Value>> {
    quotas
        .iter()
        .filter_map(|q| q["spec"]["user"].as_str())
        .map(|user| {
            let mine = pods
                .iter()
                .filter(|p| p["metadata"]["labels"][CREATOR_USER] == user)
                .cloned()
                .collect();
            (user.to_string(), mine)
        })
        .collect()
}

/// SPW:186-223 for each ShadowPod the watch reports deleted.
async fn release_deleted(client: Client, admitted: Arc<Mutex<BTreeMap<String, Vec<Value>>>>) {
    let api: Api<DynamicObject> = Api::all_with(client, &crate::offloading_consts::shadow_pods());
    let events = watcher(api, watcher::Config::default()).default_backoff();
    let span = tracing::info_span!("liqo_model", controller = CACHE, kind = "ShadowPod");
    let release_each = events.for_each(|event| {
        if let Ok(watcher::Event::Delete(shadowpod)) = event {
            if let Ok(shadowpod) = serde_json::to_value(&shadowpod) {
                let mut cache = admitted.lock().unwrap_or_else(|e| e.into_inner());
                match release(&shadowpod, &mut cache) {
                    Ok(None) => {}
                    Ok(Some(note)) => tracing::debug!(note, "ShadowPod deletion"),
                    Err(e) => tracing::debug!(error = %e, "ShadowPod deletion"),
                }
            }
        }
        futures::future::ready(())
    });
    tracing::Instrument::instrument(release_each, span).await;
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
        let world = World {
            resource_enforcement: self.resource_enforcement,
            namespace_labels: namespace_labels.as_ref(),
            quotas: &quotas,
            admitted: admitted.get(&creator).map_or(&[], Vec::as_slice),
        };
        validate_create(a.object, &world).map_err(|d| {
            let reason = if d.code == 400 {
                "BadRequest"
            } else {
                "Forbidden"
            };
            Denial::new(d.code, reason, d.message)
        })?;
        // SPW:137, PI:143-148: the creator's cache made once its Quota is
        // found, the admitted pod counted.
        if self.resource_enforcement {
            admitted.entry(creator).or_default().push(a.object.clone());
        }
        Ok(())
    }
}
