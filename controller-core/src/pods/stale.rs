//! Pods that were created in a namespace before Liqo's pod webhook acted in
//! it, and what to do with them: a pure decision, acted on by the
//! orchestrator (a namespace placed on providers) and the market
//! autoscaler (a namespace served by bought virtual nodes).
//!
//! Liqo v1.2.0's pod webhook acts only at pod **creation** and only in
//! namespaces labelled `liqo.io/scheduling-enabled=true`
//! (`deployments/liqo/templates/webhooks/liqo-mutating-webhook.yaml:11-30`, CREATE only,
//! `pkg/webhooks/pod/pod.go:76-99`): it adds the virtual-node toleration
//! and the NamespaceOffloading's cluster selector
//! (`pkg/webhooks/pod/mutations.go:29-35, 135-177`). The label is set by
//! Liqo's NamespaceOffloading controller once `offloading` exists
//! (`namespaceoffloading-controller/labels.go:28-48`). A pod created before
//! then has neither: it runs on the broker if it fits, else stays Pending,
//! and is never offloaded — nothing in Liqo revisits it.
//!
//! The same holds after a **move**: the webhook wrote the old selection
//! into each pod's required node affinity, and nothing rewrites it, so the
//! pods stay bound to the old provider's virtual node while Liqo deletes
//! the old remote namespace (and the pods running there).
//!
//! So, once the namespace carries the label (the webhook now acts on new
//! pods), a pod is **stale** when it lacks Liqo's toleration, or when its
//! required node affinity admits none of the providers selected now (every
//! term names providers under `liqo.io/remote-cluster-id In`, none of them
//! selected). A stale pod
//! - owned by a controller (a ShadowPod on the broker — Liqo's ShadowPod
//!   controller recreates its pod when it is deleted,
//!   `shadowpod-controller/shadowpod_controller.go:162-175` — or a
//!   ReplicaSet, a Job, …): it is deleted, and its controller recreates it
//!   through the webhook;
//! - a bare pod: nobody would recreate it, so it is left alone and its
//!   owner is told by an Event that it must be recreated to be offloaded.
//!
//! Pods being deleted, finished pods, and pods that already tolerate the
//! virtual nodes are left alone. Nothing is done before the label is there:
//! a pod recreated earlier would come back as stale as it went.

use k8s_openapi::api::core::v1::{Namespace, Pod};

use crate::liqo::{SCHEDULING_LABEL, SCHEDULING_VALUE, VIRTUAL_NODE_TOLERATION_KEY};

/// What to do with one stale pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Delete it (at this UID only): its controller recreates it offloaded.
    Recreate { name: String, uid: String },
    /// Tell its owner it must be recreated: nothing would recreate it.
    Announce { name: String, uid: String },
}

/// Whether Liqo's pod webhook now acts on new pods in `ns`.
pub fn webhook_active(ns: &Namespace) -> bool {
    ns.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SCHEDULING_LABEL))
        .is_some_and(|v| v == SCHEDULING_VALUE)
}

/// The key providers are selected by (on Liqo's virtual nodes).
const CLUSTER_ID_KEY: &str = crate::liqo::REMOTE_CLUSTER_ID_LABEL;

/// Whether `pod`'s required node affinity admits none of `selected`: every
/// term requires `liqo.io/remote-cluster-id In` values none of which is
/// selected. A term without such a requirement admits any provider.
fn pinned_elsewhere(pod: &Pod, selected: &[String]) -> bool {
    let terms = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    !selected.is_empty()
        && !terms.is_empty()
        && terms.iter().all(|term| {
            let named: Vec<&String> = term
                .match_expressions
                .iter()
                .flatten()
                .filter(|e| e.key == CLUSTER_ID_KEY && e.operator == "In")
                .flat_map(|e| e.values.iter().flatten())
                .collect();
            let constrained = term
                .match_expressions
                .iter()
                .flatten()
                .any(|e| e.key == CLUSTER_ID_KEY && e.operator == "In");
            constrained && !named.iter().any(|v| selected.contains(v))
        })
}

/// Whether `pod` went through the pod webhook (it carries the toleration).
fn tolerates_virtual_nodes(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .is_some_and(|ts| {
            ts.iter()
                .any(|t| t.key.as_deref() == Some(VIRTUAL_NODE_TOLERATION_KEY))
        })
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn controlled(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .as_ref()
        .is_some_and(|refs| refs.iter().any(|r| r.controller == Some(true)))
}

/// What to do with the pods of `ns` (its `pods`), placed on `selected`
/// now; none until Liqo's webhook acts in it.
pub fn plan(ns: &Namespace, pods: &[&Pod], selected: &[String]) -> Vec<Action> {
    if !webhook_active(ns) {
        return Vec::new();
    }
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !finished(p))
        .filter(|p| !tolerates_virtual_nodes(p) || pinned_elsewhere(p, selected))
        .filter_map(|p| {
            let name = p.metadata.name.clone()?;
            let uid = p.metadata.uid.clone()?;
            Some(if controlled(p) {
                Action::Recreate { name, uid }
            } else {
                Action::Announce { name, uid }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn ns(labelled: bool) -> Namespace {
        let labels = if labelled {
            json!({"liqo.io/remote-cluster-id": "c1", "liqo.io/scheduling-enabled": "true"})
        } else {
            json!({"liqo.io/remote-cluster-id": "c1"})
        };
        serde_json::from_value(json!({"metadata": {"name": "app", "labels": labels}})).unwrap()
    }

    fn pod(name: &str, extra: Value) -> Pod {
        let mut v = json!({"metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}")},
                           "spec": {"containers": [{"name": "c", "image": "i"}]}});
        for (path, value) in extra.as_object().unwrap() {
            let (outer, inner) = path.split_once('.').unwrap();
            v[outer][inner] = value.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    fn owned() -> Value {
        json!({"metadata.ownerReferences": [{"apiVersion": "offloading.liqo.io/v1beta1",
            "kind": "ShadowPod", "name": "x", "uid": "u", "controller": true}]})
    }

    #[test]
    fn stale_pods_are_recreated_or_announced_once_the_webhook_acts() {
        let controlled = pod("web", owned());
        let bare = pod("bare", json!({}));
        let mutated = pod(
            "new",
            json!({"spec.tolerations": [{"key": VIRTUAL_NODE_TOLERATION_KEY,
                "operator": "Exists", "effect": "NoExecute"}], "metadata.ownerReferences":
                owned()["metadata.ownerReferences"]}),
        );
        let done = pod("job", json!({"status.phase": "Succeeded"}));
        let going = pod(
            "going",
            json!({"metadata.deletionTimestamp": "2026-01-01T00:00:00Z"}),
        );
        let pods = [&controlled, &bare, &mutated, &done, &going];

        assert_eq!(plan(&ns(false), &pods, &[]), []);
        assert_eq!(
            plan(&ns(true), &pods, &[]),
            [
                Action::Recreate {
                    name: "web".into(),
                    uid: "uid-web".into()
                },
                Action::Announce {
                    name: "bare".into(),
                    uid: "uid-bare".into()
                },
            ]
        );
    }

    #[test]
    fn an_owner_that_is_not_the_controller_does_not_recreate() {
        let p = pod(
            "p",
            json!({"metadata.ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                "name": "x", "uid": "u"}]}),
        );
        assert!(matches!(
            plan(&ns(true), &[&p], &[])[..],
            [Action::Announce { .. }]
        ));
    }

    #[test]
    fn pods_pinned_to_providers_no_longer_selected_are_recreated() {
        let pinned = |name: &str, values: Value| {
            let mut extra = owned();
            extra["spec.tolerations"] = json!([{"key": VIRTUAL_NODE_TOLERATION_KEY,
                "operator": "Exists", "effect": "NoExecute"}]);
            extra["spec.affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "liqo.io/remote-cluster-id", "operator": "In", "values": values},
                    {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}]}]}}});
            pod(name, extra)
        };
        let old = pinned("old", json!(["p1"]));
        let current = pinned("current", json!(["p1", "p2"]));
        let selected = ["p2".to_string()];
        assert_eq!(
            plan(&ns(true), &[&old, &current], &selected),
            [Action::Recreate {
                name: "old".into(),
                uid: "uid-old".into()
            }]
        );
        // Nothing selected (nothing read yet): no pod is judged by affinity.
        assert_eq!(plan(&ns(true), &[&old], &[]), []);
    }
}
