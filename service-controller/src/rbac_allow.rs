//! The RBAC a service's templates may make, checked against the provider's
//! allow-list (`allowedRBAC`, [`AllowedRbac`]) — pure, no cluster.
//!
//! A customer's parameter written into a template must not hand the
//! instance namespace (or a customer's ServiceAccount) rights the provider
//! did not mean to give: a Role is made only when the allow-list's rules
//! cover every one of its rules, compared as Kubernetes' own escalation
//! check compares a new Role with its creator's rights
//! ([`covers`]); a RoleBinding only when it binds a Role the same
//! templates make (so checked) or a ClusterRole the allow-list names. A
//! RoleBinding to any other ClusterRole (`cluster-admin`, `admin`, or a
//! custom one granting `*`) is refused whatever its rules: a ClusterRole's
//! rules are not the templates' and can change (aggregation), so only the
//! provider's word, its name in the list, lets one be bound.

use serde_json::Value;

use crate::model::{AllowedRbac, PolicyRule};

/// The API group of Roles and RoleBindings.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Why a rendered RBAC object is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RbacRefused {
    #[error("Role {name} grants {rule}, which allowedRBAC.rules does not cover")]
    Uncovered { name: String, rule: String },
    #[error("Role {name}: rules are not rbac.authorization.k8s.io/v1 PolicyRules: {why}")]
    Unreadable { name: String, why: String },
    #[error(
        "RoleBinding {name} binds ClusterRole {role}, which allowedRBAC.clusterRoles does not name"
    )]
    ClusterRole { name: String, role: String },
    #[error("RoleBinding {name} binds Role {role}, which these templates do not make")]
    ForeignRole { name: String, role: String },
    #[error(
        "RoleBinding {name} has no roleRef a Role or ClusterRole of rbac.authorization.k8s.io"
    )]
    RoleRef { name: String },
    #[error("{kind} {name} ({api_version}) is not a Role or RoleBinding; no other RBAC kind may be made")]
    OtherKind {
        kind: String,
        name: String,
        api_version: String,
    },
}

impl RbacRefused {
    /// The kind of the refused object.
    pub fn kind(&self) -> &str {
        match self {
            RbacRefused::Uncovered { .. } | RbacRefused::Unreadable { .. } => "Role",
            RbacRefused::ClusterRole { .. }
            | RbacRefused::ForeignRole { .. }
            | RbacRefused::RoleRef { .. } => "RoleBinding",
            RbacRefused::OtherKind { kind, .. } => kind,
        }
    }

    /// The name of the refused object.
    pub fn name(&self) -> &str {
        match self {
            RbacRefused::Uncovered { name, .. }
            | RbacRefused::Unreadable { name, .. }
            | RbacRefused::ClusterRole { name, .. }
            | RbacRefused::ForeignRole { name, .. }
            | RbacRefused::RoleRef { name }
            | RbacRefused::OtherKind { name, .. } => name,
        }
    }
}

fn group(object: &Value) -> &str {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    api_version.split_once('/').map(|(g, _)| g).unwrap_or("")
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Check every RBAC object of `objects` (one render of a service's
/// templates) against `allowed`; objects of other groups pass.
pub fn check(objects: &[Value], allowed: &AllowedRbac) -> Result<(), RbacRefused> {
    let rbac: Vec<&Value> = objects.iter().filter(|o| group(o) == RBAC_GROUP).collect();
    let mut roles = Vec::new();
    for object in &rbac {
        let name = text(object, "/metadata/name").to_string();
        match text(object, "/kind") {
            "Role" => {
                let rules: Vec<PolicyRule> =
                    serde_json::from_value(object.get("rules").cloned().unwrap_or(Value::Null))
                        .or_else(|e| {
                            // A Role without rules grants nothing.
                            if object.get("rules").is_none_or(Value::is_null) {
                                Ok(Vec::new())
                            } else {
                                Err(e)
                            }
                        })
                        .map_err(|e| RbacRefused::Unreadable {
                            name: name.clone(),
                            why: e.to_string(),
                        })?;
                if let Some(rule) = covers(&allowed.rules, &rules).into_iter().next() {
                    return Err(RbacRefused::Uncovered {
                        name,
                        rule: describe(&rule),
                    });
                }
                roles.push(name);
            }
            "RoleBinding" => {}
            kind => {
                return Err(RbacRefused::OtherKind {
                    kind: kind.to_string(),
                    name,
                    api_version: text(object, "/apiVersion").to_string(),
                })
            }
        }
    }
    for object in rbac.iter().filter(|o| text(o, "/kind") == "RoleBinding") {
        let name = text(object, "/metadata/name").to_string();
        let role = text(object, "/roleRef/name").to_string();
        if text(object, "/roleRef/apiGroup") != RBAC_GROUP || role.is_empty() {
            return Err(RbacRefused::RoleRef { name });
        }
        match text(object, "/roleRef/kind") {
            "Role" if roles.contains(&role) => {}
            "Role" => return Err(RbacRefused::ForeignRole { name, role }),
            "ClusterRole" if allowed.cluster_roles.contains(&role) => {}
            "ClusterRole" => return Err(RbacRefused::ClusterRole { name, role }),
            _ => return Err(RbacRefused::RoleRef { name }),
        }
    }
    Ok(())
}

/// One broken-down rule, for a message.
fn describe(rule: &PolicyRule) -> String {
    let one = |v: &[String]| v.first().cloned().unwrap_or_default();
    if !rule.non_resource_urls.is_empty() {
        return format!(
            "{} on non-resource URL {}",
            one(&rule.verbs),
            one(&rule.non_resource_urls)
        );
    }
    let group = one(&rule.api_groups);
    let mut text = format!(
        "{} on {} in API group {:?}",
        one(&rule.verbs),
        one(&rule.resources),
        group
    );
    if let Some(name) = rule.resource_names.first() {
        text.push_str(&format!(" named {name:?}"));
    }
    text
}

/// The rules of `servant` that `owner` does not cover, broken down (empty:
/// covered). Kubernetes' `Covers`
/// (staging/src/k8s.io/component-helpers/auth/rbac/validation/policy_comparator.go:27-54),
/// the check the API server makes before it lets anyone create a Role
/// granting more than they hold: each servant rule broken into one verb,
/// one group, one resource and one name, each covered by one owner rule.
pub fn covers(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect()
}

/// `BreakdownRule` (policy_comparator.go:58-82): a rule with no API group
/// or no resource breaks down to nothing but its non-resource URLs, as
/// there.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut subrules = Vec::new();
    let one = |s: &String| vec![s.clone()];
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                if rule.resource_names.is_empty() {
                    subrules.push(PolicyRule {
                        api_groups: one(group),
                        resources: one(resource),
                        verbs: one(verb),
                        ..PolicyRule::default()
                    });
                }
                for name in &rule.resource_names {
                    subrules.push(PolicyRule {
                        api_groups: one(group),
                        resources: one(resource),
                        verbs: one(verb),
                        resource_names: one(name),
                        ..PolicyRule::default()
                    });
                }
            }
        }
    }
    // policy_comparator.go:74-79: non-resource URLs combine with verbs only.
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            subrules.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: one(verb),
                ..PolicyRule::default()
            });
        }
    }
    subrules
}

fn has(set: &[String], element: &str) -> bool {
    set.iter().any(|s| s == element)
}

fn has_all(set: &[String], contains: &[String]) -> bool {
    contains.iter().all(|c| has(set, c))
}

/// `resourceCoversAll` (policy_comparator.go:106-129): `*`, an exact
/// match, or `*/<subresource>` for a subresource.
fn resource_covers_all(set: &[String], covers: &[String]) -> bool {
    if has(set, "*") || has_all(set, covers) {
        return true;
    }
    covers.iter().all(|path| {
        has(set, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(set, &format!("*/{sub}")))
    })
}

/// `nonResourceURLCovers` (policy_comparator.go:147-152): exact, or a
/// trailing `*` as a prefix.
fn non_resource_url_covers(owner: &str, path: &str) -> bool {
    owner == path || (owner.ends_with('*') && path.starts_with(owner.trim_end_matches('*')))
}

/// `ruleCovers` (policy_comparator.go:156-171).
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resource_covers_all(&owner.resources, &sub.resources);
    let urls = sub.non_resource_urls.iter().all(|path| {
        owner
            .non_resource_urls
            .iter()
            .any(|o| non_resource_url_covers(o, path))
    });
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && names && urls
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        PolicyRule {
            api_groups: v(groups),
            resources: v(resources),
            verbs: v(verbs),
            ..PolicyRule::default()
        }
    }

    #[test]
    fn rules_are_covered_as_kubernetes_compares_them() {
        let owner = [
            rule(&[""], &["configmaps", "pods/log"], &["get", "list"]),
            rule(&["apps"], &["*"], &["get"]),
            rule(&[""], &["*/status"], &["get"]),
        ];
        assert!(covers(&owner, &[rule(&[""], &["configmaps"], &["get"])]).is_empty());
        assert!(covers(&owner, &[rule(&["apps"], &["deployments"], &["get"])]).is_empty());
        assert!(covers(&owner, &[rule(&[""], &["pods/status"], &["get"])]).is_empty());
        let mut named = rule(&[""], &["configmaps"], &["get"]);
        named.resource_names = vec!["x".into()];
        assert!(covers(&owner, &[named]).is_empty());
        // A verb, a group, a resource more: one uncovered piece each.
        assert_eq!(
            covers(&owner, &[rule(&[""], &["configmaps"], &["get", "delete"])]),
            vec![rule(&[""], &["configmaps"], &["delete"])]
        );
        assert_eq!(covers(&owner, &[rule(&["*"], &["*"], &["*"])]).len(), 1);
        assert_eq!(
            covers(&owner, &[rule(&[""], &["secrets"], &["get"])]).len(),
            1
        );
        // An owner rule with resource names covers only those names.
        let mut narrow = rule(&[""], &["secrets"], &["get"]);
        narrow.resource_names = vec!["a".into()];
        assert_eq!(
            covers(&[narrow], &[rule(&[""], &["secrets"], &["get"])]).len(),
            1
        );
        assert!(covers(
            &[rule(&["*"], &["*"], &["*"])],
            &[rule(&["x"], &["y"], &["z"])]
        )
        .is_empty());
        let url = |u: &str| PolicyRule {
            verbs: vec!["get".into()],
            non_resource_urls: vec![u.into()],
            ..PolicyRule::default()
        };
        assert!(covers(&[url("/metrics*")], &[url("/metrics/x")]).is_empty());
        assert_eq!(covers(&[url("/metrics")], &[url("/healthz")]).len(), 1);
    }

    fn role(name: &str, rules: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name}, "rules": rules})
    }

    fn binding(name: &str, kind: &str, role: &str) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
               "subjects": [{"kind": "ServiceAccount", "name": "default"}]})
    }

    /// T-09: a RoleBinding to a ClusterRole is refused unless the provider
    /// names it — `cluster-admin` and a custom ClusterRole granting `*`
    /// alike; a Role is refused unless the allow-list covers its rules.
    #[test]
    fn roles_and_bindings_need_the_allow_list() {
        let allowed = AllowedRbac {
            rules: vec![rule(&[""], &["configmaps"], &["get", "list", "watch"])],
            cluster_roles: vec!["view".into()],
        };
        let reader = role(
            "reader",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
        );
        let ok = [
            reader.clone(),
            binding("read", "Role", "reader"),
            binding("view", "ClusterRole", "view"),
        ];
        check(&ok, &allowed).unwrap();
        for role_name in ["cluster-admin", "star", "admin"] {
            assert_eq!(
                check(&[binding("b", "ClusterRole", role_name)], &allowed),
                Err(RbacRefused::ClusterRole {
                    name: "b".into(),
                    role: role_name.into()
                })
            );
        }
        let star = role(
            "star",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
        );
        let e = check(&[star.clone(), binding("b", "Role", "star")], &allowed).unwrap_err();
        assert!(
            matches!(&e, RbacRefused::Uncovered { name, .. } if name == "star"),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "Role star grants * on * in API group \"*\", which allowedRBAC.rules does not cover"
        );
        // Nothing allowed: not even a harmless Role.
        assert!(check(std::slice::from_ref(&reader), &AllowedRbac::default()).is_err());
        // A Role made elsewhere (say by hand, with more rights) is not
        // bindable by name.
        assert!(matches!(
            check(&[binding("b", "Role", "someone-elses")], &allowed),
            Err(RbacRefused::ForeignRole { .. })
        ));
        let mut odd = binding("b", "Role", "reader");
        odd["roleRef"]["apiGroup"] = json!("example.com");
        assert!(matches!(
            check(&[reader.clone(), odd], &allowed),
            Err(RbacRefused::RoleRef { .. })
        ));
        assert!(matches!(
            check(&[role("r", json!("all"))], &allowed),
            Err(RbacRefused::Unreadable { .. })
        ));
        check(&[role("empty", Value::Null)], &AllowedRbac::default()).unwrap();
    }
}
