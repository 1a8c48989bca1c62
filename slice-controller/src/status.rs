//! From a [`Verdict`] and the status as read, the status to write — or
//! nothing, when nothing would change.
//!
//! Only two things are touched: the `Resources` entry of
//! `status.conditions` and `status.resources`. Every other field, the
//! `Authentication` condition, the order of the conditions and any key of
//! the `Resources` entry this crate does not know stay exactly as read.
//! `lastTransitionTime` moves only when the condition's status changes
//! (Accepted ↔ Denied, or the condition is new); a new reason or message
//! alone keeps it. Grants are compared as quantities, so `"1000m"` written
//! by someone else equals a grant of `"1"` and is left alone.

use serde_json::{Map, Value};

use crate::decision::Verdict;
use crate::model::{resource_list_json, ResourceSlice};
use controller_core::liqo::RESOURCES_CONDITION;

/// The status `slice` should have under `verdict`, or `None` when it
/// already has it. `now` is the RFC 3339 timestamp for a transition.
pub fn desired_status(slice: &ResourceSlice, verdict: &Verdict, now: &str) -> Option<Value> {
    let mut status = match &slice.status {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    let mut changed = false;

    // status.resources
    let grant_matches = match (&verdict.granted, slice.granted()) {
        (Some(want), Some(have)) => *want == have,
        (None, _) => !status.contains_key("resources"),
        (Some(_), None) => false,
    };
    if !grant_matches {
        changed = true;
        match &verdict.granted {
            Some(list) => {
                status.insert("resources".into(), resource_list_json(list));
            }
            None => {
                status.remove("resources");
            }
        }
    }

    // status.conditions[type=Resources]
    let conditions = status
        .entry("conditions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !conditions.is_array() {
        *conditions = Value::Array(Vec::new());
    }
    if let Value::Array(list) = conditions {
        let want_status = verdict.status.as_str();
        let existing = list
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(RESOURCES_CONDITION));
        match existing {
            Some(Value::Object(entry)) => {
                let same =
                    |key: &str, want: &str| entry.get(key).and_then(Value::as_str) == Some(want);
                let status_same = same("status", want_status);
                if !status_same
                    || !same("reason", verdict.reason.as_str())
                    || !same("message", &verdict.message)
                {
                    changed = true;
                    if !status_same || !entry.contains_key("lastTransitionTime") {
                        entry.insert("lastTransitionTime".into(), Value::from(now));
                    }
                    entry.insert("status".into(), Value::from(want_status));
                    entry.insert("reason".into(), Value::from(verdict.reason.as_str()));
                    entry.insert("message".into(), Value::from(verdict.message.as_str()));
                }
            }
            _ => {
                changed = true;
                let mut entry = Map::new();
                entry.insert("type".into(), Value::from(RESOURCES_CONDITION));
                entry.insert("status".into(), Value::from(want_status));
                entry.insert("lastTransitionTime".into(), Value::from(now));
                entry.insert("reason".into(), Value::from(verdict.reason.as_str()));
                entry.insert("message".into(), Value::from(verdict.message.as_str()));
                list.retain(|c| c.get("type").and_then(Value::as_str) != Some(RESOURCES_CONDITION));
                list.push(Value::Object(entry));
            }
        }
    }
    changed.then_some(Value::Object(status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Reason;
    use crate::model::ConditionStatus;
    use quantity::ResourceList;
    use serde_json::json;

    const NOW: &str = "2026-11-23T01:00:00Z";
    const EARLIER: &str = "2026-11-20T08:00:00Z";

    fn slice(status: Value) -> ResourceSlice {
        serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": {}, "status": status}))
            .expect("slice")
    }

    fn auth() -> Value {
        json!({"type": "Authentication", "status": "Accepted",
               "reason": "ResourceSliceAuthenticationAccepted",
               "message": "ResourceSlice authentication accepted",
               "lastTransitionTime": EARLIER})
    }

    fn accepted(cpu: &str) -> Verdict {
        Verdict {
            status: ConditionStatus::Accepted,
            reason: Reason::ResourcesGranted,
            message: format!("granted as requested: cpu {cpu}"),
            granted: Some(ResourceList::from_strings([("cpu", cpu)]).expect("list")),
        }
    }

    #[test]
    fn first_grant_adds_the_condition_and_keeps_everything_else() {
        let before = json!({
            "conditions": [auth()],
            "authParams": {"ca": "Q0E=", "signedCRT": "Q1JU", "apiServer": "https://p:6443"},
            "storageClasses": [{"storageClass": "standard", "default": true}],
            "nodeLabels": {"zone": "a"}
        });
        let after = desired_status(&slice(before.clone()), &accepted("2"), NOW).expect("changed");
        assert_eq!(after["authParams"], before["authParams"]);
        assert_eq!(after["storageClasses"], before["storageClasses"]);
        assert_eq!(after["nodeLabels"], before["nodeLabels"]);
        assert_eq!(after["conditions"][0], auth());
        assert_eq!(
            after["conditions"][1],
            json!({"type": "Resources", "status": "Accepted", "lastTransitionTime": NOW,
                   "reason": "ResourcesGranted", "message": "granted as requested: cpu 2"})
        );
        assert_eq!(after["resources"], json!({"cpu": "2"}));
    }

    #[test]
    fn nothing_to_write_when_equal_as_quantities() {
        let before = json!({
            "conditions": [auth(), {"type": "Resources", "status": "Accepted", "lastTransitionTime": EARLIER,
                "reason": "ResourcesGranted", "message": "granted as requested: cpu 2"}],
            "resources": {"cpu": "2000m"}
        });
        assert_eq!(desired_status(&slice(before), &accepted("2"), NOW), None);
    }

    #[test]
    fn transition_time_moves_only_when_the_status_changes() {
        let before = json!({
            "conditions": [{"type": "Resources", "status": "Accepted", "lastTransitionTime": EARLIER,
                "reason": "ResourcesGranted", "message": "granted as requested: cpu 2", "extra": 1}, auth()],
            "resources": {"cpu": "2"}
        });
        // Same status, new message and grant: the time stays.
        let after = desired_status(&slice(before.clone()), &accepted("3"), NOW).expect("changed");
        assert_eq!(after["conditions"][0]["lastTransitionTime"], EARLIER);
        assert_eq!(
            after["conditions"][0]["message"],
            "granted as requested: cpu 3"
        );
        assert_eq!(after["conditions"][0]["extra"], 1);
        assert_eq!(after["conditions"][1], auth());
        assert_eq!(after["resources"], json!({"cpu": "3"}));

        // Accepted -> Denied: the time moves and the grant goes.
        let denied = Verdict {
            status: ConditionStatus::Denied,
            reason: Reason::TenantDrained,
            message: "tenant c1 is drained: no resources are granted".into(),
            granted: None,
        };
        let after = desired_status(&slice(before), &denied, NOW).expect("changed");
        assert_eq!(after["conditions"][0]["lastTransitionTime"], NOW);
        assert_eq!(after["conditions"][0]["status"], "Denied");
        assert_eq!(after["conditions"][0]["reason"], "TenantDrained");
        assert!(after.get("resources").is_none());
    }

    #[test]
    fn a_denial_without_a_grant_is_written_once() {
        let denied = Verdict {
            status: ConditionStatus::Denied,
            reason: Reason::InsufficientResources,
            message: "does not fit".into(),
            granted: None,
        };
        let first = desired_status(&slice(json!({"conditions": [auth()]})), &denied, NOW)
            .expect("first write");
        assert_eq!(desired_status(&slice(first), &denied, NOW), None);
    }
}
