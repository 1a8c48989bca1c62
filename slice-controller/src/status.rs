//! From a [`Verdict`] and the status as read, the status to write — or
//! nothing, when nothing would change.
//!
//! Only these are touched: the `Resources` entry of `status.conditions`,
//! `status.resources`, and — on an accepted slice — the node extras the
//! class is configured with ([`NodeExtras`]: storage, ingress and
//! load-balancer classes, node labels, node selector). Every other field, the
//! `Authentication` condition, the order of the conditions and any key of
//! the `Resources` entry this crate does not know stay exactly as read.
//! `lastTransitionTime` moves only when the condition's status changes
//! (Accepted ↔ Denied, or the condition is new); a new reason or message
//! alone keeps it. Grants are compared as quantities, so `"1000m"` written
//! by someone else equals a grant of `"1"` and is left alone.
//!
//! [`desired_annotations`] is the metadata side: this controller's cordon
//! of a revoked slice (`liqo.io/cordon`, with [`CORDONED_BY_ANNOTATION`]
//! saying it is ours), and its lifting — never of a cordon someone else
//! (`liqoctl cordon resourceslice`) set.

use serde_json::{Map, Value};

use crate::decision::Verdict;
use crate::model::{resource_list_json, ConditionStatus, NodeExtras, ResourceSlice};
use controller_core::liqo::{CORDON_ANNOTATION, NOT_CORDONED_VALUES, RESOURCES_CONDITION};

/// Ours, beside [`CORDON_ANNOTATION`]: the cordon was set by this
/// controller when it revoked the slice, so a new grant may lift it.
pub const CORDONED_BY_ANNOTATION: &str = "broker.liqo-broker.io/cordoned-by";
/// [`CORDONED_BY_ANNOTATION`]'s value.
pub const CORDONED_BY: &str = "slice-controller";

/// The merge patch of `metadata.annotations` that gives `slice` the cordon
/// `verdict` asks for, or `None` when nothing changes: a revocation cordons
/// (unless the slice is cordoned already, by anyone); another acceptance
/// lifts only a cordon this controller set; a denial touches nothing.
pub fn desired_annotations(slice: &ResourceSlice, verdict: &Verdict) -> Option<Value> {
    if verdict.status != ConditionStatus::Accepted {
        return None;
    }
    let cordoned = slice
        .annotation(CORDON_ANNOTATION)
        .is_some_and(|v| !NOT_CORDONED_VALUES.contains(&v));
    let ours = slice.annotation(CORDONED_BY_ANNOTATION) == Some(CORDONED_BY);
    let annotations = match (verdict.cordon, cordoned, ours) {
        (true, false, _) => {
            serde_json::json!({CORDON_ANNOTATION: "true", CORDONED_BY_ANNOTATION: CORDONED_BY})
        }
        (false, _, true) => {
            serde_json::json!({CORDON_ANNOTATION: null, CORDONED_BY_ANNOTATION: null})
        }
        _ => return None,
    };
    Some(serde_json::json!({"metadata": {"annotations": annotations}}))
}

/// The status `slice` should have under `verdict` (`None`: the decision
/// keeps the slice's condition and grant) with `extras` on an accepted
/// slice, or `None` when it already has it. `now` is the RFC 3339
/// timestamp for a transition.
pub fn desired_status(
    slice: &ResourceSlice,
    verdict: Option<&Verdict>,
    extras: &NodeExtras,
    now: &str,
) -> Option<Value> {
    let mut status = match &slice.status {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    let accepted = match verdict {
        Some(v) => v.status == ConditionStatus::Accepted,
        None => slice
            .condition(RESOURCES_CONDITION)
            .is_some_and(|c| c.status == Some(ConditionStatus::Accepted)),
    };
    let mut changed = false;
    if accepted {
        for (key, value) in extras.fields() {
            if status.get(key) != Some(&value) {
                status.insert(key.into(), value);
                changed = true;
            }
        }
    }
    let Some(verdict) = verdict else {
        return changed.then_some(Value::Object(status));
    };

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

    fn does_not_fit() -> Verdict {
        Verdict {
            status: ConditionStatus::Denied,
            reason: Reason::InsufficientResources,
            message: "does not fit".into(),
            granted: None,
            cordon: false,
        }
    }

    fn none() -> NodeExtras {
        NodeExtras::default()
    }

    /// The status `verdict` writes on a slice authenticated and not
    /// judged yet, with `extras`.
    fn first_status(verdict: &Verdict, extras: &NodeExtras) -> Value {
        desired_status(
            &slice(json!({"conditions": [auth()]})),
            Some(verdict),
            extras,
            NOW,
        )
        .expect("first write")
    }

    fn accepted(cpu: &str) -> Verdict {
        Verdict {
            status: ConditionStatus::Accepted,
            reason: Reason::ResourcesGranted,
            message: format!("granted as requested: cpu {cpu}"),
            granted: Some(ResourceList::from_strings([("cpu", cpu)]).expect("list")),
            cordon: false,
        }
    }

    #[test]
    fn first_grant_adds_the_condition_and_keeps_everything_else() {
        let before = json!({
            "conditions": [auth()],
            "authParams": {"ca": "Q0E=", "signedCRT": "Q1JU", "apiServer": "https://p:6443"},
            "storageClasses": [{"storageClassName": "standard", "default": true}],
            "nodeLabels": {"zone": "a"}
        });
        let after = desired_status(&slice(before.clone()), Some(&accepted("2")), &none(), NOW)
            .expect("changed");
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
        assert_eq!(
            desired_status(&slice(before), Some(&accepted("2")), &none(), NOW),
            None
        );
    }

    #[test]
    fn transition_time_moves_only_when_the_status_changes() {
        let before = json!({
            "conditions": [{"type": "Resources", "status": "Accepted", "lastTransitionTime": EARLIER,
                "reason": "ResourcesGranted", "message": "granted as requested: cpu 2", "extra": 1}, auth()],
            "resources": {"cpu": "2"}
        });
        // Same status, new message and grant: the time stays.
        let after = desired_status(&slice(before.clone()), Some(&accepted("3")), &none(), NOW)
            .expect("changed");
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
            cordon: false,
        };
        let after = desired_status(&slice(before), Some(&denied), &none(), NOW).expect("changed");
        assert_eq!(after["conditions"][0]["lastTransitionTime"], NOW);
        assert_eq!(after["conditions"][0]["status"], "Denied");
        assert_eq!(after["conditions"][0]["reason"], "TenantDrained");
        assert!(after.get("resources").is_none());
    }

    #[test]
    fn a_denial_without_a_grant_is_written_once() {
        let denied = does_not_fit();
        let first = first_status(&denied, &none());
        assert_eq!(
            desired_status(&slice(first), Some(&denied), &none(), NOW),
            None
        );
    }

    fn extras() -> NodeExtras {
        NodeExtras {
            storage_classes: vec![
                "standard:default".parse().expect("class"),
                "fast".parse().expect("class"),
            ],
            ingress_classes: vec!["nginx".parse().expect("class")],
            load_balancer_classes: vec!["metallb:default".parse().expect("class")],
            node_labels: [(
                "topology.kubernetes.io/region".to_string(),
                "eu-west".to_string(),
            )]
            .into(),
            node_selector: [("pool".to_string(), "sold".to_string())].into(),
        }
    }

    #[test]
    fn an_accepted_slice_gets_the_configured_extras_as_liqo_spells_them() {
        let after = first_status(&accepted("2"), &extras());
        assert_eq!(
            after["storageClasses"],
            json!([{"storageClassName": "standard", "default": true}, {"storageClassName": "fast"}])
        );
        assert_eq!(
            after["ingressClasses"],
            json!([{"ingressClassName": "nginx"}])
        );
        assert_eq!(
            after["loadBalancerClasses"],
            json!([{"loadBalancerClassName": "metallb", "default": true}])
        );
        assert_eq!(
            after["nodeLabels"],
            json!({"topology.kubernetes.io/region": "eu-west"})
        );
        assert_eq!(after["nodeSelector"], json!({"pool": "sold"}));
        // A kept grant gets them too, once.
        let kept = slice(
            json!({"conditions": [auth(), {"type": "Resources", "status": "Accepted",
            "reason": "ResourcesGranted", "message": "m", "lastTransitionTime": EARLIER}],
            "resources": {"cpu": "2"}}),
        );
        let status = desired_status(&kept, None, &extras(), NOW).expect("extras written");
        assert_eq!(status["resources"], json!({"cpu": "2"}));
        assert_eq!(desired_status(&slice(status), None, &extras(), NOW), None);
        // Never on a denied slice, nor when none is configured.
        let denied = does_not_fit();
        let after = first_status(&denied, &extras());
        assert!(after.get("storageClasses").is_none());
        assert_eq!(desired_status(&kept, None, &none(), NOW), None);
        assert!("Bad_Name".parse::<crate::model::ClassOffer>().is_err());
        assert!("x:other".parse::<crate::model::ClassOffer>().is_err());
    }

    #[test]
    fn a_revocation_cordons_and_a_grant_lifts_only_our_cordon() {
        let revoked = Verdict {
            cordon: true,
            ..accepted("0")
        };
        let plain = slice(json!({}));
        assert_eq!(
            desired_annotations(&plain, &revoked),
            Some(
                json!({"metadata": {"annotations": {"liqo.io/cordon": "true",
                "broker.liqo-broker.io/cordoned-by": "slice-controller"}}})
            )
        );
        assert_eq!(desired_annotations(&plain, &accepted("1")), None);
        let with = |annotations: Value| -> ResourceSlice {
            serde_json::from_value(
                json!({"metadata": {"name": "s", "annotations": annotations}, "spec": {}}),
            )
            .expect("slice")
        };
        let ours = with(
            json!({"liqo.io/cordon": "true", "broker.liqo-broker.io/cordoned-by": "slice-controller"}),
        );
        assert_eq!(desired_annotations(&ours, &revoked), None);
        assert_eq!(
            desired_annotations(&ours, &accepted("1")),
            Some(json!({"metadata": {"annotations": {"liqo.io/cordon": null,
                "broker.liqo-broker.io/cordoned-by": null}}}))
        );
        // An operator's cordon (liqoctl cordon resourceslice) stays.
        let theirs = with(json!({"liqo.io/cordon": "true"}));
        assert_eq!(desired_annotations(&theirs, &accepted("1")), None);
        assert_eq!(desired_annotations(&theirs, &revoked), None);
        // "false" does not cordon (Liqo's isFalse): a revocation cordons.
        let off = with(json!({"liqo.io/cordon": "false"}));
        assert!(desired_annotations(&off, &revoked).is_some());
    }
}
