//! Pure rules about pods that more than one controller of the broker
//! applies, so they agree on what a pod asks for and when it waits:
//!
//! - [`requests()`]: a pod's effective resource requests, as kube-scheduler
//!   counts them;
//! - [`waiting`]: whether a pod waits for room the scheduler found nowhere;
//! - [`stale`]: pods created before Liqo's pod webhook acted in their
//!   namespace, and what to do with them.

pub mod requests;
pub mod stale;

use k8s_openapi::api::core::v1::Pod;

pub use requests::{requests, RequestError};

/// Whether `pod` is waiting for room: the scheduler tried it and found no
/// node (`PodScheduled=False`, reason `Unschedulable`, which
/// `pkg/scheduler/schedule_one.go` `handleSchedulingFailure` writes — a
/// pod held by scheduling gates has reason `SchedulingGated` instead and is
/// not waiting for room), it is still unbound (no `spec.nodeName`), not
/// being deleted and not finished. These are the pods cluster-autoscaler
/// scales up for (`cluster-autoscaler/utils/kubernetes/listers.go`
/// `isUnschedulable`: `PodScheduled` False with reason `Unschedulable`, no
/// node name, no deletion timestamp); a finished pod is left out besides,
/// as no room would run it again.
pub fn waiting(pod: &Pod) -> bool {
    let unbound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    let status = pod.status.as_ref();
    let terminal = matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
    unbound && !terminal && unschedulable && pod.metadata.deletion_timestamp.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn pod(extra: Value) -> Pod {
        let mut v = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient cpu."}]}});
        for (path, value) in extra.as_object().unwrap() {
            let (outer, inner) = path.split_once('.').unwrap();
            v[outer][inner] = value.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_unbound_live_pods_the_scheduler_found_no_room_for_are_waiting() {
        assert!(waiting(&pod(json!({}))));
        let not = [
            json!({"spec.nodeName": "n1"}),
            json!({"metadata.deletionTimestamp": "2026-01-01T00:00:00Z"}),
            json!({"status.phase": "Failed"}),
            json!({"status.phase": "Succeeded"}),
            json!({"status.conditions": [{"type": "PodScheduled", "status": "False",
                "reason": "SchedulingGated"}]}),
            json!({"status.conditions": [{"type": "PodScheduled", "status": "True"}]}),
            json!({"status.conditions": []}),
        ];
        for extra in not {
            assert!(!waiting(&pod(extra.clone())), "{extra}");
        }
    }
}
