//! Liqo v1.2.0's pod mutating webhook (`pkg/webhooks/pod/`, `mutations.go`
//! MUT and `pod.go` POD below): at pod **creation**, in namespaces labelled
//! `liqo.io/scheduling-enabled=true` only (the chart's registration,
//! `deployments/liqo/templates/webhooks/liqo-mutating-webhook.yaml:11-30`:
//! `operations: ["CREATE"]`, that `namespaceSelector`), it adds the
//! virtual-node toleration and the NamespaceOffloading's cluster selector to
//! the pod's required node affinity, per the pod offloading strategy.
//!
//! The mutation is a pure function ([`mutate_pod`], with its parts public
//! for the conformance suite's ports of `pod_test.go`); [`Hook`] is the
//! webhook on the test API server's admission chain, reading Namespaces and
//! NamespaceOffloadings from watch caches.

use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use kube::Client;
use kube_test_server::admission::{Attributes, Denial, MutatingHook};
use serde_json::{json, Value};

use crate::consts::{TYPE, TYPE_NODE, VIRTUAL_NODE_TOLERATION_KEY};
use crate::identity::{Rule, READ};
use crate::offloading_consts::{
    namespace_offloadings, OFFLOADING_NAME, SCHEDULING_ENABLED, SCHEDULING_ENABLED_VALUE,
};
use crate::watch_cache;

/// The webhook's name in the chart (`liqo-mutating-webhook.yaml:11`).
pub const NAME: &str = "pod.mutate.liqo.io";
/// The Liqo runtime class's name (`deployments/liqo/values.yaml`,
/// `offloading.runtimeClass.name`).
pub const RUNTIME_CLASS: &str = "liqo";

/// RBAC of the webhook's reads (the chart's `liqo-webhook` ClusterRole,
/// the part this model uses).
pub const RULES: &[Rule] = &[
    Rule::new(&["offloading.liqo.io"], &["namespaceoffloadings"], READ),
    Rule::new(&[""], &["namespaces"], READ),
];

/// MUT:29-35: the toleration of Liqo's virtual-node taint.
pub fn virtual_node_toleration() -> Value {
    json!({"key": VIRTUAL_NODE_TOLERATION_KEY, "operator": "Exists", "effect": "NoExecute"})
}

/// MUT:39-52: the toleration a strategy adds (`None` for `Local`).
pub fn toleration_for(strategy: &str) -> Result<Option<Value>, String> {
    match strategy {
        "LocalAndRemote" | "Remote" => Ok(Some(virtual_node_toleration())),
        "Local" => Ok(None),
        other => Err(format!("unknown PodOffloadingStrategyType {other:?}")),
    }
}

fn requirement(operator: &str) -> Value {
    json!({"key": TYPE, "operator": operator, "values": [TYPE_NODE]})
}

/// MUT:55-97: the node selector a NamespaceOffloading imposes: `Remote`
/// adds `liqo.io/type In [virtual-node]` to each term (one empty term when
/// there is none); `LocalAndRemote` adds a term for the local nodes (unless
/// the selector is empty: nothing imposed); `Local` imposes nothing.
pub fn imposed_selector(nsoff: &Value) -> Result<Option<Value>, String> {
    let mut selector = nsoff["spec"]["clusterSelector"].clone();
    if !selector.is_object() {
        selector = json!({});
    }
    let mut terms = selector["nodeSelectorTerms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match nsoff["spec"]["podOffloadingStrategy"]
        .as_str()
        .unwrap_or_default()
    {
        "Remote" => {
            if terms.is_empty() {
                terms.push(json!({}));
            }
            for term in &mut terms {
                let mut exprs = term["matchExpressions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                exprs.push(requirement("In"));
                term["matchExpressions"] = Value::Array(exprs);
            }
        }
        "LocalAndRemote" => {
            if terms.is_empty() {
                return Ok(None);
            }
            terms.push(json!({"matchExpressions": [requirement("NotIn")]}));
        }
        "Local" => return Ok(None),
        other => return Err(format!("unknown PodOffloadingStrategyType {other:?}")),
    }
    selector["nodeSelectorTerms"] = Value::Array(terms);
    Ok(Some(selector))
}

/// `pkg/utils/nodeUtils.go:90-101`: each term of `a` ANDed with each of `b`.
pub fn merge_selectors(a: &Value, b: &Value) -> Value {
    let terms = |s: &Value| {
        s["nodeSelectorTerms"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let mut merged = Vec::new();
    for ta in terms(a) {
        for tb in terms(b) {
            let mut exprs = ta["matchExpressions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            exprs.extend(
                tb["matchExpressions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            );
            merged.push(json!({"matchExpressions": exprs}));
        }
    }
    json!({"nodeSelectorTerms": merged})
}

/// MUT:101-127: put `imposed` in the pod's required node affinity, merged
/// with the one the pod has (other affinities kept).
pub fn fill_pod(imposed: Option<&Value>, pod: &mut Value) {
    let Some(imposed) = imposed else { return };
    let spec = &mut pod["spec"];
    if !spec["affinity"].is_object() {
        spec["affinity"] = json!({});
    }
    if !spec["affinity"]["nodeAffinity"].is_object() {
        spec["affinity"]["nodeAffinity"] = json!({});
    }
    let required =
        &mut spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    let has_terms = required["nodeSelectorTerms"]
        .as_array()
        .is_some_and(|t| !t.is_empty());
    *required = if has_terms {
        merge_selectors(required, imposed)
    } else {
        imposed.clone()
    };
}

/// MUT:135-177: mutate `pod` as the NamespaceOffloading `nsoff` says,
/// unless it runs on Liqo's runtime class `runtime_class`.
pub fn mutate_pod(nsoff: &Value, pod: &mut Value, runtime_class: &str) -> Result<(), String> {
    if nsoff["spec"]["podOffloadingStrategy"] == "Local" {
        return Ok(());
    }
    if pod["spec"]["runtimeClassName"] == runtime_class {
        return Ok(());
    }
    let strategy = nsoff["spec"]["podOffloadingStrategy"]
        .as_str()
        .unwrap_or_default();
    if let Some(toleration) = toleration_for(strategy)? {
        let mut tolerations = pod["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        tolerations.push(toleration);
        pod["spec"]["tolerations"] = Value::Array(tolerations);
    }
    let imposed = imposed_selector(nsoff)?;
    fill_pod(imposed.as_ref(), pod);
    Ok(())
}

/// The webhook on the test API server's admission chain.
pub struct Hook {
    namespaces: Store<DynamicObject>,
    offloadings: Store<DynamicObject>,
}

impl Hook {
    /// The hook reading through `client`, and the tasks filling its caches
    /// (filled when this returns).
    pub async fn start(client: Client) -> (Hook, Vec<tokio::task::JoinHandle<()>>) {
        let (namespaces, ns_task) = watch_cache::start(
            client.clone(),
            crate::consts::namespaces(),
            "pod-webhook-cache",
        );
        let (offloadings, off_task) =
            watch_cache::start(client, namespace_offloadings(), "pod-webhook-cache");
        let _ = namespaces.wait_until_ready().await;
        let _ = offloadings.wait_until_ready().await;
        (
            Hook {
                namespaces,
                offloadings,
            },
            vec![ns_task, off_task],
        )
    }
}

impl MutatingHook for Hook {
    fn name(&self) -> &str {
        NAME
    }

    fn admit(&self, a: &Attributes<'_>, object: &mut Value) -> Result<(), Denial> {
        if !a.def.group.is_empty()
            || a.def.plural != "pods"
            || a.operation != "CREATE"
            || !a.subresource.is_empty()
        {
            return Ok(());
        }
        // The registration's namespaceSelector, evaluated by the API server.
        let labelled = watch_cache::get(&self.namespaces, "", a.namespace).is_some_and(|ns| {
            ns.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SCHEDULING_ENABLED))
                .is_some_and(|v| v == SCHEDULING_ENABLED_VALUE)
        });
        if !labelled {
            return Ok(());
        }
        // POD:83-92: no NamespaceOffloading in a labelled namespace is a 500.
        let nsoff = watch_cache::get(&self.offloadings, a.namespace, OFFLOADING_NAME)
            .and_then(|o| serde_json::to_value(o).ok())
            .ok_or_else(|| {
                Denial::new(
                    500,
                    "InternalError",
                    "failed retrieving NamespaceOffloading",
                )
            })?;
        // POD:94-96.
        mutate_pod(&nsoff, object, RUNTIME_CLASS)
            .map_err(|_| Denial::new(500, "InternalError", "failed constructing pod mutation"))
    }
}
