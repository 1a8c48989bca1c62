//! Whether a pod may run on a node: its node selector, required node
//! affinity and tolerations against the node's labels and taints, as
//! kube-scheduler's filters decide — and the node Liqo v1.2 creates for a
//! provider, which is the node a plan not yet bought will become.

use std::collections::{BTreeMap, BTreeSet};

use controller_core::liqo;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, Taint, Toleration};

use super::WaitingPod;

/// The virtual node Liqo v1.2 creates for a ResourceSlice of `provider`.
///
/// Its labels are set in `pkg/virtualKubelet/liqoNodeProvider/setup.go:96-110`
/// (`node()`): `kubernetes.io/hostname` (the node's name, which Liqo takes
/// from the ResourceSlice, unknown before buying), `kubernetes.io/role=agent`,
/// `kubernetes.io/os=linux` (`strings.ToLower("Linux")`),
/// `kubernetes.io/arch=amd64`, `liqo.io/type=virtual-node`,
/// `liqo.io/remote-cluster-id=<provider>` and the two
/// exclude-from-load-balancers labels (`"true"`); then
/// `pkg/virtualKubelet/liqoNodeProvider/utils.go:40-50`
/// (`desiredVirtualNodeMetadata`) adds `storage.liqo.io/available`, `true`
/// or `false` by the provider's storage classes (unknown before buying), and
/// the VirtualNode's `spec.labels`, which
/// `pkg/liqo-controller-manager/offloading/forge/virtualnode.go:71-75` fills
/// with the remote cluster ID and the ResourceSlice's `status.nodeLabels`
/// (the provider's choice, unknown before buying).
///
/// Its one taint is `virtual-node.liqo.io/not-allowed=true:NoExecute`
/// (`setup.go:113-117`, `utils.go:57-62`).
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualNode {
    pub labels: BTreeMap<String, String>,
    /// Keys the node will carry with a value not known before buying: a
    /// requirement on their value is not met (the autoscaler does not buy
    /// on a guess), `Exists` is.
    pub unknown: BTreeSet<String>,
    pub taints: Vec<Taint>,
}

/// `kubernetes.io/hostname` (`corev1.LabelHostname`).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// `consts.StorageAvailableLabel` (`pkg/consts/storage.go:22`).
pub const STORAGE_AVAILABLE_LABEL: &str = "storage.liqo.io/available";

impl VirtualNode {
    pub fn of_provider(provider: &str) -> VirtualNode {
        let labels = [
            ("kubernetes.io/role", "agent"),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            (liqo::NODE_TYPE_LABEL, liqo::VIRTUAL_NODE_TYPE),
            (liqo::REMOTE_CLUSTER_ID_LABEL, provider),
            (
                "node.kubernetes.io/exclude-from-external-load-balancers",
                "true",
            ),
            (
                "alpha.service-controller.kubernetes.io/exclude-balancer",
                "true",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        VirtualNode {
            labels,
            unknown: [HOSTNAME_LABEL, STORAGE_AVAILABLE_LABEL]
                .into_iter()
                .map(String::from)
                .collect(),
            taints: vec![Taint {
                key: liqo::VIRTUAL_NODE_TOLERATION_KEY.to_string(),
                value: Some("true".to_string()),
                effect: "NoExecute".to_string(),
                time_added: None,
            }],
        }
    }
}

/// A node as the filters see it.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    /// `None` for a node not yet created (its name is Liqo's choice).
    pub name: Option<&'a str>,
    pub labels: &'a BTreeMap<String, String>,
    pub unknown: Option<&'a BTreeSet<String>>,
    pub taints: &'a [Taint],
}

impl<'a> NodeView<'a> {
    pub fn of_virtual(node: &'a VirtualNode) -> Self {
        NodeView {
            name: None,
            labels: &node.labels,
            unknown: Some(&node.unknown),
            taints: &node.taints,
        }
    }
}

/// A label's value on the node: known, known to exist with a value not
/// known, or absent.
enum Value<'a> {
    Known(&'a str),
    Unknown,
    Absent,
}

fn value<'a>(node: &NodeView<'a>, key: &str) -> Value<'a> {
    if let Some(v) = node.labels.get(key) {
        Value::Known(v)
    } else if node.unknown.is_some_and(|u| u.contains(key)) {
        Value::Unknown
    } else {
        Value::Absent
    }
}

/// Whether the pod may run on the node (kube-scheduler's NodeAffinity and
/// TaintToleration filters). Liqo's virtual-node taint counts as tolerated:
/// Liqo's pod webhook adds its toleration to every pod created in an
/// offloaded namespace (`pkg/webhooks/pod/mutations.go:29-35`), and the
/// autoscaler's pods reach bought nodes through it (docs/autoscaling.md).
pub fn admits(pod: &WaitingPod, node: &NodeView<'_>) -> bool {
    node_selector_matches(&pod.node_selector, node)
        && pod
            .affinity
            .as_ref()
            .is_none_or(|a| required_affinity_matches(a, node))
        && tolerates(&pod.tolerations, node.taints)
}

/// `spec.nodeSelector`: every pair, exactly
/// (`pkg/scheduler/framework/plugins/nodeaffinity`, via
/// `component-helpers/scheduling/corev1/nodeaffinity.GetRequiredNodeAffinity`).
fn node_selector_matches(selector: &BTreeMap<String, String>, node: &NodeView<'_>) -> bool {
    selector
        .iter()
        .all(|(k, v)| matches!(value(node, k), Value::Known(x) if x == v))
}

/// `requiredDuringSchedulingIgnoredDuringExecution`: the terms are ORed, a
/// term's requirements ANDed, a term with neither expressions nor fields
/// matches nothing, and no terms match nothing
/// (`staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`,
/// `nodeSelectorTerms.Match`).
pub fn required_affinity_matches(selector: &NodeSelector, node: &NodeView<'_>) -> bool {
    selector.node_selector_terms.iter().any(|term| {
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if expressions.is_empty() && fields.is_empty() {
            return false;
        }
        expressions.iter().all(|r| requirement_matches(r, node))
            && fields.iter().all(|r| field_matches(r, node))
    })
}

/// One label requirement (`labels.Selector` semantics, as
/// `nodeaffinity.go` builds them with `nodeSelectorRequirementsAsSelector`):
/// `NotIn` and `DoesNotExist` match an absent label; `Gt`/`Lt` compare
/// integers and fail on anything else. A value Liqo sets only later meets
/// `Exists` and nothing that reads it.
fn requirement_matches(r: &NodeSelectorRequirement, node: &NodeView<'_>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let v = value(node, &r.key);
    match r.operator.as_str() {
        "In" => matches!(v, Value::Known(x) if values.iter().any(|w| w == x)),
        "NotIn" => match v {
            Value::Known(x) => !values.iter().any(|w| w == x),
            Value::Absent => true,
            Value::Unknown => false,
        },
        "Exists" => !matches!(v, Value::Absent),
        "DoesNotExist" => matches!(v, Value::Absent),
        "Gt" | "Lt" => {
            let (Value::Known(x), [w]) = (v, values) else {
                return false;
            };
            match (x.parse::<i64>(), w.parse::<i64>()) {
                (Ok(x), Ok(w)) if r.operator == "Gt" => x > w,
                (Ok(x), Ok(w)) => x < w,
                _ => false,
            }
        }
        _ => false,
    }
}

/// `matchFields`: only `metadata.name`, with `In` or `NotIn`
/// (`nodeaffinity.go`, `nodeSelectorRequirementsAsFieldSelector`). A node
/// not created yet has no name to match.
fn field_matches(r: &NodeSelectorRequirement, node: &NodeView<'_>) -> bool {
    if r.key != "metadata.name" {
        return false;
    }
    let Some(name) = node.name else {
        return false;
    };
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => values.len() == 1 && values[0] == name,
        "NotIn" => values.len() == 1 && values[0] != name,
        _ => false,
    }
}

/// Every `NoSchedule` and `NoExecute` taint tolerated
/// (`pkg/scheduler/framework/plugins/tainttoleration`, filtering with
/// `v1helper.FindMatchingUntoleratedTaint` over those two effects), Liqo's
/// own taint aside (see [`admits`]).
pub fn tolerates(tolerations: &[Toleration], taints: &[Taint]) -> bool {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .filter(|t| t.key != liqo::VIRTUAL_NODE_TOLERATION_KEY)
        .all(|t| tolerations.iter().any(|tol| tolerates_taint(tol, t)))
}

/// `Toleration.ToleratesTaint`
/// (`staging/src/k8s.io/api/core/v1/toleration.go`): an empty effect
/// matches every effect, an empty key every key; `Exists` ignores the
/// value, `Equal` (or empty) compares it.
fn tolerates_taint(tol: &Toleration, taint: &Taint) -> bool {
    let effect = tol.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = tol.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match tol.operator.as_deref().unwrap_or_default() {
        "Exists" => true,
        "Equal" | "" => {
            tol.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}
