//! The predicates Kubernetes' scheduler (and Liqo, for cluster selectors)
//! decides with, as pure functions on JSON objects: node selector terms,
//! taints and tolerations, a node's readiness and room. Paths are in
//! `kubernetes/kubernetes` (files only, no lines: read at v1.33).
//!
//! - [`matches_terms`], after `staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`
//!   (NA): terms are ORed, a term's requirements ANDed, a term with none
//!   matches nothing, operators per
//!   `staging/src/k8s.io/apimachinery/pkg/labels/selector.go`;
//! - [`tolerates_all`], after `pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`
//!   (`NoSchedule` and `NoExecute` taints must be tolerated) with
//!   `staging/src/k8s.io/api/core/v1/toleration.go` (`ToleratesTaint`);
//! - [`filter`], after the default profile's filter plugins in their
//!   order — node unschedulable (`nodeunschedulable/node_unschedulable.go`),
//!   taints (`tainttoleration/taint_toleration.go`, the node lifecycle
//!   controller's `NoSchedule` taint on a node not `Ready` included),
//!   `spec.nodeSelector` and required node affinity
//!   (`nodeaffinity/node_affinity.go`), and room (`noderesources/fit.go`:
//!   the pods count and each requested resource within allocatable,
//!   requests counted as kube-scheduler's `PodRequests` does,
//!   [`controller_core::pods::requests`]) — each refusal with the plugin's
//!   reasons and whether preemption could help;
//! - [`unschedulable_message`], the `PodScheduled=False` message: the
//!   reasons' histogram over all nodes, then preemption's.

use std::collections::BTreeMap;

use kube_test_server::taints::tolerates;
use quantity::Quantity;
use serde_json::{json, Value};

use crate::shadowpod_webhook::resource_list;

/// Whether one requirement `{key, operator, values}` holds on `labels`.
fn requirement(labels: &Value, req: &Value) -> bool {
    let value = labels[req["key"].as_str().unwrap_or_default()].as_str();
    let values: Vec<&str> = req["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let number = |v: &str| v.parse::<i64>().ok();
    match req["operator"].as_str().unwrap_or_default() {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        // selector.go: both sides integers, else no match.
        "Gt" | "Lt" => {
            let (Some(have), Some(limit)) = (
                value.and_then(number),
                values.first().and_then(|v| number(v)),
            ) else {
                return false;
            };
            if req["operator"] == "Gt" {
                have > limit
            } else {
                have < limit
            }
        }
        _ => false,
    }
}

/// NA: one term, its label and field (`metadata.name`) requirements.
fn term_matches(node: &Value, term: &Value) -> bool {
    let exprs = term["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let fields = term["matchFields"].as_array().cloned().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let name_fields = json!({"metadata.name": node["metadata"]["name"]});
    exprs
        .iter()
        .all(|r| requirement(&node["metadata"]["labels"], r))
        && fields.iter().all(|r| requirement(&name_fields, r))
}

/// Whether `node` matches the `NodeSelector` `selector`
/// (`{nodeSelectorTerms: [...]}`): any of its terms.
pub fn matches_terms(node: &Value, selector: &Value) -> bool {
    selector["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| term_matches(node, t))
}

/// Whether `tolerations` tolerate every `NoSchedule` and `NoExecute` taint.
pub fn tolerates_all(taints: &Value, tolerations: &Value) -> bool {
    let tolerations = tolerations.as_array().cloned().unwrap_or_default();
    taints
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
        .all(|t| tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// Whether `node`'s `Ready` condition is `True`.
pub fn ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// What a pod asks of a node: its requests as kube-scheduler counts them
/// ([`controller_core::pods::requests`]: containers summed, sidecar and
/// init containers, pod-level requests, overhead); a pod that does not
/// read as a Pod asks for nothing.
pub fn requests(pod: &Value) -> BTreeMap<String, Quantity> {
    serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(pod.clone())
        .ok()
        .and_then(|p| controller_core::pods::requests(&p).ok())
        .map(|list| list.0)
        .unwrap_or_default()
}

/// How a filter plugin refuses a node (`fwk.Code`): whether preemption
/// could help there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// `Unschedulable`: removing pods could make room (NodeResourcesFit).
    Unschedulable,
    /// `UnschedulableAndUnresolvable`: no preemption helps (the node's
    /// cordon, taints, the pod's affinity).
    Unresolvable,
}

/// A node refused: the first failing filter's code and reasons (the
/// framework stops at the first plugin that fails, `RunFilterPlugins`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: Code,
    pub reasons: Vec<String>,
}

impl Refusal {
    fn unresolvable(reason: impl Into<String>) -> Refusal {
        Refusal {
            code: Code::Unresolvable,
            reasons: vec![reason.into()],
        }
    }
}

/// `v1.TaintNodeUnschedulable`, `v1.TaintNodeNotReady`, `v1.TaintNodeUnreachable`.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// The node's taints with the `NoSchedule` one the node lifecycle
/// controller keeps on a node whose `Ready` condition is not `True`
/// (`pkg/controller/nodelifecycle/node_lifecycle_controller.go`,
/// `doNoScheduleTaintingPass`, `nodeConditionToTaintKeyStatusMap`:
/// `not-ready` for False, `unreachable` for Unknown or no condition). The
/// test server adds only the `NoExecute` ones (for taint eviction), which
/// pods tolerate for 300 s by default, so the scheduler model adds these.
fn effective_taints(node: &Value) -> Vec<Value> {
    let mut taints: Vec<Value> = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let status = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["status"].as_str());
    let lifecycle = match status {
        Some("True") => None,
        Some("False") => Some(NOT_READY_TAINT),
        _ => Some(UNREACHABLE_TAINT),
    };
    if let Some(key) = lifecycle {
        if !taints
            .iter()
            .any(|t| t["key"] == key && t["effect"] == "NoSchedule")
        {
            taints.push(json!({"key": key, "effect": "NoSchedule"}));
        }
    }
    taints
}

/// Whether a resource is checked by NodeResourcesFit beyond cpu, memory
/// and ephemeral storage (`schedutil.IsScalarResourceName`: extended
/// resources, hugepages, attachable volumes).
fn scalar(name: &str) -> bool {
    let extended =
        name.contains('/') && !name.starts_with("kubernetes.io/") && !name.starts_with("requests.");
    extended || name.starts_with("hugepages-") || name.starts_with("attachable-volumes-")
}

/// `noderesources/fit.go` `fitsRequest`: every resource short on `node`
/// given what `bound` (its pods, not finished) already requests.
fn insufficient(pod: &Value, node: &Value, bound: &[&Value]) -> Vec<String> {
    let allocatable = resource_list(&node["status"]["allocatable"]);
    let max_pods = allocatable.get("pods").map_or(0, Quantity::value);
    let mut out = Vec::new();
    if i64::try_from(bound.len())
        .unwrap_or(i64::MAX)
        .saturating_add(1)
        > max_pods
    {
        out.push("Too many pods".to_string());
    }
    let mut used: BTreeMap<String, Quantity> = BTreeMap::new();
    for other in bound {
        for (k, v) in requests(other) {
            let sum = used.get(&k).map_or(v.clone(), |u| u.add(&v));
            used.insert(k, sum);
        }
    }
    for (k, want) in requests(pod) {
        let checked = matches!(k.as_str(), "cpu" | "memory" | "ephemeral-storage") || scalar(&k);
        // A zero request never fails (`podRequest.MilliCPU > 0 && …`).
        if !checked || want.is_zero() {
            continue;
        }
        let have = allocatable.get(&k).cloned().unwrap_or_else(Quantity::zero);
        let free = used.get(&k).map_or(have.clone(), |u| have.sub(u));
        if free.sub(&want).is_negative() {
            out.push(format!("Insufficient {k}"));
        }
    }
    out
}

/// The default profile's filters, in its order
/// (`pkg/scheduler/apis/config/v1/default_plugins.go`): NodeUnschedulable,
/// TaintToleration, NodeAffinity, NodeResourcesFit; `Ok` when `node`
/// (running `bound`) takes `pod`.
pub fn filter(pod: &Value, node: &Value, bound: &[&Value]) -> Result<(), Refusal> {
    let spec = &pod["spec"];
    // `nodeunschedulable/node_unschedulable.go`: unless the pod tolerates
    // the cordon's taint.
    let cordon = json!({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"});
    let tolerations = spec["tolerations"].as_array().cloned().unwrap_or_default();
    if node["spec"]["unschedulable"] == true && !tolerations.iter().any(|t| tolerates(t, &cordon)) {
        return Err(Refusal::unresolvable("node(s) were unschedulable"));
    }
    // `tainttoleration/taint_toleration.go` `Filter`: the first untolerated
    // NoSchedule or NoExecute taint, by key and value.
    let untolerated = effective_taints(node).into_iter().find(|t| {
        matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute"))
            && !tolerations.iter().any(|tol| tolerates(tol, t))
    });
    if let Some(t) = untolerated {
        return Err(Refusal::unresolvable(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t["key"].as_str().unwrap_or_default(),
            t["value"].as_str().unwrap_or_default()
        )));
    }
    // `nodeaffinity/node_affinity.go`: `spec.nodeSelector` and required
    // node affinity (`ErrReasonPod`).
    let labels = &node["metadata"]["labels"];
    let selector_ok = spec["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels[k] == *v);
    let affinity =
        &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    if !selector_ok || (!affinity.is_null() && !matches_terms(node, affinity)) {
        return Err(Refusal::unresolvable(
            "node(s) didn't match Pod's node affinity/selector",
        ));
    }
    let short = insufficient(pod, node, bound);
    if short.is_empty() {
        Ok(())
    } else {
        Err(Refusal {
            code: Code::Unschedulable,
            reasons: short,
        })
    }
}

/// Why `pod` cannot go to `node`, which already runs `bound` (pods not
/// finished), or `None` when it can: [`filter`]'s reasons, joined.
pub fn feasible(pod: &Value, node: &Value, bound: &[&Value]) -> Option<String> {
    filter(pod, node, bound).err().map(|r| r.reasons.join(", "))
}

/// `"<count> <reason>"` per reason, sorted as strings, joined by `", "`
/// (`pkg/scheduler/framework/types.go`, `FitError.Error`'s histogram).
fn histogram<'a>(reasons: impl IntoIterator<Item = &'a str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reasons {
        *counts.entry(r).or_default() += 1;
    }
    let mut lines: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    lines.sort();
    lines.join(", ")
}

fn priority(pod: &Value) -> i64 {
    pod["spec"]["priority"].as_i64().unwrap_or(0)
}

/// The `PodScheduled=False` message kube-scheduler writes for `pod` refused
/// by every node: `(node, its pods)` each with its [`filter`] result.
///
/// - No node at all: `ErrNoNodesAvailable`'s text (`schedule_one.go`,
///   `schedulingCycle`, an `UnschedulableAndUnresolvable` status, so the
///   reason is still `Unschedulable`).
/// - Else `FitError.Error` (`framework/types.go`): `0/N nodes are
///   available: <histogram of every node's reasons>.`, then the
///   DefaultPreemption PostFilter's message (`defaultpreemption/default_preemption.go`
///   `PostFilter` prefixes `preemption: `; `preemption/preemption.go`
///   `Preempt`): `not eligible due to preemptionPolicy=Never.` for such a
///   pod, else a FitError over the same nodes where a node refused as
///   unresolvable is `Preemption is not helpful for scheduling`
///   (`nodesWherePreemptionMightHelp`) and one short of room is `No
///   preemption victims found for incoming pod` when it runs no pod of a
///   lower priority (`SelectVictimsOnNode`), else the reasons it still
///   has once those are gone. A node where removing lower-priority pods
///   would make room is where kube-scheduler preempts them: the model
///   does not preempt, and reports that node as having no victims. Since
///   v1.33 the DynamicResources PostFilter adds nothing for a pod without
///   ResourceClaims (kubernetes#129823).
pub fn unschedulable_message(pod: &Value, refused: &[(&Value, Vec<&Value>, Refusal)]) -> String {
    if refused.is_empty() {
        return "no nodes available to schedule pods".into();
    }
    let n = refused.len();
    let filtered = histogram(
        refused
            .iter()
            .flat_map(|(_, _, r)| r.reasons.iter().map(String::as_str)),
    );
    let preemption = if pod["spec"]["preemptionPolicy"] == "Never" {
        "not eligible due to preemptionPolicy=Never.".to_string()
    } else {
        let per_node: Vec<Vec<String>> = refused
            .iter()
            .map(|(node, bound, r)| match r.code {
                Code::Unresolvable => vec!["Preemption is not helpful for scheduling".into()],
                Code::Unschedulable => {
                    let mine = priority(pod);
                    let kept: Vec<&Value> = bound
                        .iter()
                        .copied()
                        .filter(|p| priority(p) >= mine)
                        .collect();
                    match filter(pod, node, &kept) {
                        Err(still) if kept.len() < bound.len() => still.reasons,
                        _ => vec!["No preemption victims found for incoming pod".into()],
                    }
                }
            })
            .collect();
        format!(
            "0/{n} nodes are available: {}.",
            histogram(per_node.iter().flatten().map(String::as_str))
        )
    };
    format!("0/{n} nodes are available: {filtered}. preemption: {preemption}")
}
