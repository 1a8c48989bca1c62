//! Pods that were created in a namespace before it was placed, and what to
//! do with them: a pure decision, acted on by the controller.
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
//! So, once the namespace carries the label (the webhook now acts on new
//! pods), a pod without Liqo's toleration is **stale**:
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

/// `pkg/consts/namespace_mapping.go:32` (`SchedulingLiqoLabel`): set on a namespace by
/// Liqo's NamespaceOffloading controller; the pod webhook's namespace selector.
pub const SCHEDULING_LABEL: &str = "liqo.io/scheduling-enabled";
/// `pkg/consts/namespace_mapping.go:34` (`SchedulingLiqoLabelValue`).
pub const SCHEDULING_VALUE: &str = "true";
/// `pkg/consts/webhook.go:20` (`VirtualNodeTolerationKey`): the toleration
/// the pod webhook adds (`Exists`, `NoExecute`, `mutations.go:29-35`).
pub const VIRTUAL_NODE_TOLERATION_KEY: &str = "virtual-node.liqo.io/not-allowed";

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

/// What to do with the pods of `ns` (its `pods`) now; none until Liqo's
/// webhook acts in it.
pub fn plan(ns: &Namespace, pods: &[&Pod]) -> Vec<Action> {
    if !webhook_active(ns) {
        return Vec::new();
    }
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !finished(p) && !tolerates_virtual_nodes(p))
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

        assert_eq!(plan(&ns(false), &pods), []);
        assert_eq!(
            plan(&ns(true), &pods),
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
            plan(&ns(true), &[&p])[..],
            [Action::Announce { .. }]
        ));
    }
}
