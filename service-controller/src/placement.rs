//! Where a template's pods run (issue 45, the thesis' hybrid policy: the
//! provider decides which objects the customer hosts). A template's
//! `runsAt` — `provider` or `customer` — is written into each pod template
//! it renders as the placement Liqo v1.2 honours: a required node affinity
//! on Liqo's node type label (`liqo.io/type`, `virtual-node` for the
//! virtual nodes a peering makes) — `NotIn` to stay on the provider's own
//! nodes, `In` to go to the customer's virtual node — and, for the
//! customer, the toleration of the virtual node's taint
//! (`virtual-node.liqo.io/not-allowed`, `pkg/consts/webhook.go`). Liqo's pod
//! webhook merges the namespace's own selector into the pod's required
//! affinity term by term (`pkg/webhooks/pod/mutations.go`), so the pod keeps
//! this choice within what the namespace's `podOffloadingStrategy` allows:
//! `LocalAndRemote` either, `Local` the provider only (no toleration is
//! added and virtual nodes are excluded), `Remote` the customer only. A
//! template that contradicts its plan's hosting is refused ([`check`]).

use serde_json::{json, Value};

/// Liqo's node type label and the value of its virtual nodes
/// (`pkg/consts/labels.go`: `TypeLabel`, `TypeNode`).
pub const TYPE_LABEL: &str = "liqo.io/type";
pub const VIRTUAL_NODE: &str = "virtual-node";
/// The taint of Liqo's virtual nodes (`VirtualNodeTolerationKey`).
pub const VIRTUAL_NODE_TAINT: &str = "virtual-node.liqo.io/not-allowed";

/// `runsAt` values.
pub const PROVIDER: &str = "provider";
pub const CUSTOMER: &str = "customer";

/// Why a template's `runsAt` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("runsAt {runs_at:?} is neither \"provider\" nor \"customer\"")]
    Unknown { runs_at: String },
    #[error("runs at the {runs_at}, but plan {plan} hosts {hosting}: {why}")]
    Contradicts {
        runs_at: String,
        plan: String,
        hosting: String,
        why: &'static str,
    },
    #[error("its pod template's {field} is not what Kubernetes reads (a mapping or a list)")]
    Malformed { field: &'static str },
}

/// `runs_at` checked against plan `plan`'s hosting policy.
pub fn check(runs_at: &str, plan: &str, hosting: &str) -> Result<(), Refused> {
    let contradicts = |why| {
        Err(Refused::Contradicts {
            runs_at: runs_at.to_string(),
            plan: plan.to_string(),
            hosting: hosting.to_string(),
            why,
        })
    };
    match (runs_at, hosting) {
        (PROVIDER | CUSTOMER, "LocalAndRemote") => Ok(()),
        (PROVIDER, "Local") | (CUSTOMER, "Remote") => Ok(()),
        (PROVIDER, _) => {
            contradicts("Liqo runs every pod of the instance namespace at the customer's cluster")
        }
        (CUSTOMER, _) => {
            contradicts("Liqo keeps every pod of the instance namespace at the provider's cluster")
        }
        _ => Err(Refused::Unknown {
            runs_at: runs_at.to_string(),
        }),
    }
}

/// The pod spec paths of the kinds that make pods.
fn pod_spec(object: &mut Value) -> Option<&mut Value> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let path = match (api_version, kind) {
        ("v1", "Pod") => "/spec",
        ("v1", "ReplicationController")
        | ("apps/v1", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch/v1", "Job") => "/spec/template/spec",
        ("batch/v1", "CronJob") => "/spec/jobTemplate/spec/template/spec",
        _ => return None,
    };
    object.pointer_mut(path).filter(|s| s.is_object())
}

/// The map at `key` of `map`, made empty when absent; `None` when it is
/// something else.
fn entry<'a>(
    map: &'a mut serde_json::Map<String, Value>,
    key: &str,
    empty: Value,
) -> Option<&'a mut Value> {
    let value = map.entry(key).or_insert(empty.clone());
    if value.is_null() {
        *value = empty;
    }
    Some(value)
}

/// Write `runs_at`'s placement into `object`'s pods (objects that make
/// none are left as they are): the node type requirement added to every
/// required node selector term (one term made when there is none), and
/// for the customer the virtual node's toleration. A pod spec whose
/// affinity or tolerations are not what Kubernetes reads is refused.
pub fn place(object: &mut Value, runs_at: &str) -> Result<(), Refused> {
    let Some(spec) = pod_spec(object).and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let malformed = |field: &'static str| Refused::Malformed { field };
    let operator = if runs_at == CUSTOMER { "In" } else { "NotIn" };
    let requirement = json!({"key": TYPE_LABEL, "operator": operator, "values": [VIRTUAL_NODE]});
    let required = entry(spec, "affinity", json!({}))
        .and_then(Value::as_object_mut)
        .and_then(|a| entry(a, "nodeAffinity", json!({})))
        .and_then(Value::as_object_mut)
        .and_then(|n| {
            entry(
                n,
                "requiredDuringSchedulingIgnoredDuringExecution",
                json!({}),
            )
        })
        .and_then(Value::as_object_mut)
        .ok_or(malformed("affinity.nodeAffinity"))?;
    let terms = entry(required, "nodeSelectorTerms", json!([]))
        .and_then(Value::as_array_mut)
        .ok_or(malformed("nodeSelectorTerms"))?;
    if terms.is_empty() {
        terms.push(json!({}));
    }
    for term in terms {
        term.as_object_mut()
            .and_then(|t| entry(t, "matchExpressions", json!([])))
            .and_then(Value::as_array_mut)
            .ok_or(malformed("nodeSelectorTerms[].matchExpressions"))?
            .push(requirement.clone());
    }
    if runs_at == CUSTOMER {
        let toleration =
            json!({"key": VIRTUAL_NODE_TAINT, "operator": "Exists", "effect": "NoExecute"});
        let tolerations = entry(spec, "tolerations", json!([]))
            .and_then(Value::as_array_mut)
            .ok_or(malformed("tolerations"))?;
        if !tolerations.contains(&toleration) {
            tolerations.push(toleration);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_runs_where_its_plan_allows() {
        assert!(check(PROVIDER, "p", "LocalAndRemote").is_ok());
        assert!(check(CUSTOMER, "p", "LocalAndRemote").is_ok());
        assert!(check(PROVIDER, "p", "Local").is_ok());
        assert!(check(CUSTOMER, "p", "Remote").is_ok());
        assert_eq!(
            check(CUSTOMER, "local", "Local").unwrap_err().to_string(),
            "runs at the customer, but plan local hosts Local: Liqo keeps every pod of the instance namespace at the provider's cluster"
        );
        assert_eq!(
            check(PROVIDER, "remote", "Remote").unwrap_err().to_string(),
            "runs at the provider, but plan remote hosts Remote: Liqo runs every pod of the instance namespace at the customer's cluster"
        );
        assert!(matches!(
            check("edge", "p", "LocalAndRemote"),
            Err(Refused::Unknown { .. })
        ));
    }

    #[test]
    fn the_customer_gets_the_virtual_node_and_its_toleration() {
        let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "spec": {"template": {"spec": {"containers": [], "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}}}}}}});
        place(&mut deployment, CUSTOMER).unwrap();
        let spec = &deployment["spec"]["template"]["spec"];
        let virtual_node =
            json!({"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]});
        let terms = &spec["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        // Every term: an OR of terms must each keep the choice.
        assert_eq!(terms[0]["matchExpressions"][1], virtual_node);
        assert_eq!(terms[1]["matchExpressions"], json!([virtual_node]));
        assert_eq!(
            spec["tolerations"],
            json!([{"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists", "effect": "NoExecute"}])
        );
    }

    #[test]
    fn the_provider_keeps_its_pods_off_virtual_nodes() {
        let mut cron = json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}});
        place(&mut cron, PROVIDER).unwrap();
        let spec = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
            json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "liqo.io/type", "operator": "NotIn", "values": ["virtual-node"]}]}]})
        );
        assert!(spec.get("tolerations").is_none());
        // What makes no pods is left as it is.
        let mut map = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {}});
        let before = map.clone();
        place(&mut map, CUSTOMER).unwrap();
        assert_eq!(map, before);
        // A hostile affinity is refused, never a panic.
        let mut odd = json!({"apiVersion": "v1", "kind": "Pod",
            "spec": {"containers": [], "affinity": "anywhere"}});
        assert_eq!(
            place(&mut odd, CUSTOMER),
            Err(Refused::Malformed {
                field: "affinity.nodeAffinity"
            })
        );
    }
}
