//! The ClusterRole aggregation controller of kube-controller-manager, as
//! `pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go`
//! (Kubernetes v1.31.0) has it:
//!
//! - any add, update or delete of a ClusterRole queues every ClusterRole
//!   with an `aggregationRule` (`enqueue`: "since the set of all
//!   clusterroles is small and we don't know the dependency graph, just
//!   queue up every thing each time");
//! - `syncClusterRole`: for each of the rule's `clusterRoleSelectors` in
//!   order, the ClusterRoles it selects (`LabelSelectorAsSelector`: an
//!   empty selector selects every role) sorted by name (`byName`), the
//!   aggregated role itself skipped, each rule appended unless an equal one
//!   is already there (`ruleExists`, `equality.Semantic.DeepEqual`, for
//!   which an empty list and an absent one are equal);
//! - the result written over the role's `rules` unless equal to them
//!   (the real one applies it as field manager
//!   `clusterrole-aggregation-controller` with force; here an update of the
//!   role, which changes the same field).
//!
//! So a role aggregated follows its parts: adding, changing or removing a
//! labelled ClusterRole changes what the aggregate grants, and a write to
//! the aggregate's own `rules` is undone. RBAC ([`crate::rbac`]) reads the
//! stored rules, as the real authorizer does.

use serde_json::{json, Value};

use crate::crd::GroupResource;
use crate::store::{Target, World};

/// One pass: every aggregated ClusterRole brought up to date.
pub fn sync(world: &mut World) {
    let gr = GroupResource::new("rbac.authorization.k8s.io", "clusterroles");
    let Some(def) = world.registry.get(&gr) else {
        return;
    };
    let mut roles = world.list_objects(&gr);
    // `sort.Sort(byName(clusterRoles))`.
    roles.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    for role in &roles {
        let Some(rule) = role.get("aggregationRule").filter(|r| r.is_object()) else {
            continue;
        };
        let mut rules: Vec<Value> = Vec::new();
        let mut invalid = false;
        for selector in rule["clusterRoleSelectors"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for other in &roles {
                if name_of(other) == name_of(role) {
                    continue;
                }
                match crate::selector::label_selector_matches(
                    selector,
                    &other["metadata"]["labels"],
                ) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        // `LabelSelectorAsSelector` failed: the sync
                        // returns the error and writes nothing.
                        tracing::debug!(role = name_of(role), error = %e, "clusterrole aggregation");
                        invalid = true;
                        break;
                    }
                }
                for r in other["rules"].as_array().into_iter().flatten() {
                    let r = semantic(r);
                    if !rules.contains(&r) {
                        rules.push(r);
                    }
                }
            }
            if invalid {
                break;
            }
        }
        if invalid {
            continue;
        }
        let current: Vec<Value> = role["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .map(semantic)
            .collect();
        if current == rules {
            continue;
        }
        let mut new = role.clone();
        new["rules"] = json!(rules);
        if let Err(e) = world.update(&def, None, name_of(role), new, Target::Main) {
            tracing::debug!(role = name_of(role), error = %e, "clusterrole aggregation: update");
        }
    }
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// A PolicyRule as `equality.Semantic.DeepEqual` compares it: an empty or
/// absent list are the same (the forked `reflect.DeepEqual` of
/// `third_party/forked/golang/reflect/deep_equal.go` treats empty and nil
/// slices as equal).
fn semantic(rule: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (k, v) in rule.as_object().into_iter().flatten() {
        let empty = v.is_null() || v.as_array().is_some_and(Vec::is_empty);
        if !empty {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::label_selector_matches as selects;

    #[test]
    fn selectors_read_as_label_selector_as_selector() {
        let labels = json!({"agg": "yes", "tier": "a"});
        assert_eq!(selects(&json!({}), &labels), Ok(true));
        assert_eq!(
            selects(&json!({"matchLabels": {"agg": "yes"}}), &labels),
            Ok(true)
        );
        assert_eq!(
            selects(&json!({"matchLabels": {"agg": "no"}}), &labels),
            Ok(false)
        );
        let expr =
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]});
        assert_eq!(selects(&expr, &labels), Ok(false));
        let bad = json!({"matchExpressions": [{"key": "tier", "operator": "In"}]});
        assert!(selects(&bad, &labels).is_err());
    }

    #[test]
    fn empty_and_absent_lists_are_the_same_rule() {
        assert_eq!(
            semantic(&json!({"verbs": ["get"], "resourceNames": []})),
            semantic(&json!({"verbs": ["get"]}))
        );
    }
}
