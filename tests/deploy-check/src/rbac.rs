//! The RBAC the manifests ship, and the check of what the end-to-end tests
//! saw against it. Each ServiceAccount is a user
//! (`system:serviceaccount:<namespace>:<name>`) holding the rules of the
//! Roles and ClusterRoles bound to it — a RoleBinding only in its own
//! namespace, a ClusterRoleBinding everywhere — matched as the API server's
//! RBAC authorizer matches them (verbs, apiGroups, resources with
//! `resource/subresource` and `*`, resourceNames). The check fails on any
//! call no rule allows, on any permission (verb × apiGroup × resource of a
//! rule) that no call used, on a bound ServiceAccount with no call at
//! all, so a collection that broke cannot pass for a clean one, and on any
//! call without credentials (`system:anonymous`).
//!
//! A ClusterRole of the manifests that an account may `bind` (by name) is
//! held by that account in each namespace where it created a RoleBinding
//! (an account that binds itself a role, as the peering-user controller
//! does in its isolation probe's namespaces; the audit does not say which
//! role a RoleBinding names, so every bindable one counts there). Each of
//! such a role's permissions must be used in one of those namespaces.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::audit::Record;

/// One rule of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
    #[serde(default)]
    pub non_resource_urls: Vec<String>,
}

fn any_or<'a>(list: &'a [String], want: &str) -> Option<&'a str> {
    list.iter()
        .map(String::as_str)
        .find(|v| *v == "*" || *v == want)
}

impl Rule {
    fn verb(&self, verb: &str) -> bool {
        any_or(&self.verbs, verb).is_some()
    }

    fn group(&self, group: &str) -> bool {
        any_or(&self.api_groups, group).is_some()
    }

    /// As the authorizer's `ResourceMatches`: `*`, the exact
    /// `resource[/subresource]`, or `*/subresource`.
    fn resource_matches(rule_resource: &str, record: &Record) -> bool {
        rule_resource == "*"
            || rule_resource == record.rbac_resource()
            || record
                .subresource
                .as_deref()
                .is_some_and(|sub| rule_resource.strip_prefix("*/") == Some(sub))
    }

    fn resource(&self, record: &Record) -> bool {
        self.resources
            .iter()
            .any(|r| Self::resource_matches(r, record))
    }

    fn name(&self, record: &Record) -> bool {
        self.resource_names.is_empty()
            || record
                .name
                .as_deref()
                .is_some_and(|n| self.resource_names.iter().any(|r| r == n))
    }

    pub fn allows(&self, record: &Record) -> bool {
        self.verb(&record.verb)
            && self.group(&record.api_group)
            && self.resource(record)
            && self.name(record)
    }
}

/// A rule as some user holds it: where it comes from and where it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// `Role liqo/x via RoleBinding liqo/y`, for messages.
    pub source: String,
    /// `None`: in every namespace and cluster-wide (a ClusterRoleBinding).
    pub namespace: Option<String>,
    pub rule: Rule,
}

impl Grant {
    pub fn allows(&self, record: &Record) -> bool {
        let here = match &self.namespace {
            None => true,
            Some(ns) => record.namespace.as_deref() == Some(ns.as_str()),
        };
        here && self.rule.allows(record)
    }
}

/// Who may do what, from rendered manifests.
#[derive(Debug, Default, Clone)]
pub struct Policy {
    /// Every ServiceAccount's user name, with what it is granted (maybe
    /// nothing).
    pub users: BTreeMap<String, Vec<Grant>>,
    /// Every ClusterRole's rules, for the ones accounts bind themselves.
    pub cluster_roles: BTreeMap<String, Vec<Rule>>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RbacError {
    #[error("{binding}: binds {kind} {name}, which no manifest defines")]
    MissingRole {
        binding: String,
        kind: String,
        name: String,
    },
    #[error("{binding}: subject {subject} is not a ServiceAccount with a namespace that a manifest creates")]
    Subject { binding: String, subject: String },
    #[error("{object}: {message}")]
    Unsupported { object: String, message: String },
}

pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

fn meta(object: &Value) -> (String, Option<String>) {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_string);
    (name, namespace)
}

fn label(object: &Value) -> String {
    let (name, namespace) = meta(object);
    let kind = object["kind"].as_str().unwrap_or_default();
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

fn rules(object: &Value) -> Result<Vec<Rule>, RbacError> {
    let unsupported = |message: &str| RbacError::Unsupported {
        object: label(object),
        message: message.to_string(),
    };
    if !object["aggregationRule"].is_null() {
        return Err(unsupported("aggregated ClusterRoles are not checked"));
    }
    let rules: Vec<Rule> = match &object["rules"] {
        Value::Null => Vec::new(),
        value => serde_json::from_value(value.clone())
            .map_err(|e| unsupported(&format!("rules: {e}")))?,
    };
    if rules.iter().any(|r| !r.non_resource_urls.is_empty()) {
        return Err(unsupported(
            "nonResourceURLs are not checked (the audit holds resource requests only)",
        ));
    }
    Ok(rules)
}

impl Policy {
    /// The ServiceAccounts, Roles, ClusterRoles and bindings among
    /// `objects` (anything else is ignored).
    pub fn from_objects(objects: &[Value]) -> Result<Self, RbacError> {
        let mut policy = Policy::default();
        let mut roles: BTreeMap<(String, String), Vec<Rule>> = BTreeMap::new();
        let mut cluster_roles: BTreeMap<String, Vec<Rule>> = BTreeMap::new();
        for object in objects {
            let (name, namespace) = meta(object);
            match object["kind"].as_str() {
                Some("ServiceAccount") => {
                    let ns = namespace.unwrap_or_else(|| "default".to_string());
                    policy
                        .users
                        .entry(service_account_user(&ns, &name))
                        .or_default();
                }
                Some("Role") => {
                    let ns = namespace.unwrap_or_else(|| "default".to_string());
                    roles.insert((ns, name), rules(object)?);
                }
                Some("ClusterRole") => {
                    cluster_roles.insert(name, rules(object)?);
                }
                _ => {}
            }
        }
        for object in objects {
            let kind = object["kind"].as_str().unwrap_or_default();
            if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
                continue;
            }
            let binding = label(object);
            let (_, namespace) = meta(object);
            let namespace = match kind {
                "RoleBinding" => Some(namespace.unwrap_or_else(|| "default".to_string())),
                _ => None,
            };
            let role_kind = object["roleRef"]["kind"].as_str().unwrap_or_default();
            let role_name = object["roleRef"]["name"].as_str().unwrap_or_default();
            let missing = || RbacError::MissingRole {
                binding: binding.clone(),
                kind: role_kind.to_string(),
                name: role_name.to_string(),
            };
            let (role_rules, role_label) = match (role_kind, &namespace) {
                ("Role", Some(ns)) => (
                    roles
                        .get(&(ns.clone(), role_name.to_string()))
                        .ok_or_else(missing)?,
                    format!("Role {ns}/{role_name}"),
                ),
                ("ClusterRole", _) => (
                    cluster_roles.get(role_name).ok_or_else(missing)?,
                    format!("ClusterRole {role_name}"),
                ),
                _ => return Err(missing()),
            };
            let subjects = object["subjects"].as_array().cloned().unwrap_or_default();
            for subject in subjects {
                let user = match (
                    subject["kind"].as_str(),
                    subject["name"].as_str(),
                    subject["namespace"].as_str(),
                ) {
                    (Some("ServiceAccount"), Some(name), Some(ns)) => {
                        service_account_user(ns, name)
                    }
                    _ => {
                        return Err(RbacError::Subject {
                            binding: binding.clone(),
                            subject: subject.to_string(),
                        })
                    }
                };
                let Some(grants) = policy.users.get_mut(&user) else {
                    return Err(RbacError::Subject {
                        binding: binding.clone(),
                        subject: subject.to_string(),
                    });
                };
                for rule in role_rules {
                    grants.push(Grant {
                        source: format!("{role_label} via {binding}"),
                        namespace: namespace.clone(),
                        rule: rule.clone(),
                    });
                }
            }
        }
        policy.cluster_roles = cluster_roles;
        Ok(policy)
    }

    /// Merge another component's policy in.
    pub fn extend(&mut self, other: Policy) {
        for (user, grants) in other.users {
            self.users.entry(user).or_default().extend(grants);
        }
        self.cluster_roles.extend(other.cluster_roles);
    }

    /// The ClusterRoles of the manifests `grants` let their holder bind by
    /// name, with their rules.
    fn bindable<'a>(&'a self, grants: &[Grant]) -> Vec<(&'a str, &'a [Rule])> {
        let mut out: Vec<(&str, &[Rule])> = Vec::new();
        for grant in grants {
            let r = &grant.rule;
            if !(r.verbs.iter().any(|v| v == "bind")
                && r.api_groups
                    .iter()
                    .any(|g| g == "rbac.authorization.k8s.io")
                && r.resources.iter().any(|x| x == "clusterroles"))
            {
                continue;
            }
            for name in &r.resource_names {
                if let Some((n, rules)) = self.cluster_roles.get_key_value(name) {
                    if !out.iter().any(|(o, _)| *o == n.as_str()) {
                        out.push((n.as_str(), rules.as_slice()));
                    }
                }
            }
        }
        out
    }
}

/// What is wrong between the shipped RBAC and the calls seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A call no rule bound to its user allows.
    Denied { user: String, record: Record },
    /// A permission no call of its user used.
    Unused {
        user: String,
        source: String,
        namespace: Option<String>,
        verb: String,
        api_group: String,
        resource: String,
    },
    /// A ServiceAccount holding permissions made no call at all.
    NoRecords { user: String },
    /// A request without credentials reached an API server: a client the
    /// tests started lost its token or certificate (the test server, as a
    /// real one, answers it as `system:anonymous`, refused nearly
    /// everything, which a test may never notice if its client retries).
    Anonymous { record: Record },
}

/// Who a request without credentials is (the anonymous authenticator,
/// `staging/src/k8s.io/apiserver/pkg/authentication/request/anonymous/anonymous.go`).
pub const ANONYMOUS: &str = "system:anonymous";

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Denied { user, record } => {
                write!(
                    f,
                    "denied: {user} made a call no shipped rule allows: {record}"
                )
            }
            Finding::Unused {
                user,
                source,
                namespace,
                verb,
                api_group,
                resource,
            } => {
                let group = if api_group.is_empty() {
                    "core"
                } else {
                    api_group
                };
                let place = match namespace {
                    Some(ns) => format!("in namespace {ns}"),
                    None => "cluster-wide".to_string(),
                };
                write!(
                    f,
                    "unused: {user} is granted {verb} {group}/{resource} {place} ({source}), \
                     and no end-to-end test made that call"
                )
            }
            Finding::NoRecords { user } => write!(
                f,
                "no records: {user} is granted permissions but the audit holds no call of it \
                 (were the end-to-end tests run with KUBE_TEST_AUDIT_DIR set, as that user?)"
            ),
            Finding::Anonymous { record } => write!(
                f,
                "anonymous: a request without credentials ({ANONYMOUS}) reached a test API \
                 server: {record}; every client a test starts must authenticate (a controller \
                 as its ServiceAccount, `write_kubeconfig_as`; the tests' own clients as the \
                 test administrator, `write_kubeconfig` or `admin_token`), and a test that \
                 probes anonymous access on purpose clears its requests (`clear_requests`)"
            ),
        }
    }
}

/// Hold `records` against `policy`. Any record of `system:anonymous` is a
/// finding: nothing the tests start may call without credentials. Records
/// of other users the policy does not know (the tests' own administrator,
/// users a test binds itself) are not its business.
pub fn check(policy: &Policy, records: &[Record]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut anonymous: Vec<Record> = Vec::new();
    for record in records
        .iter()
        .filter(|r| r.user.as_deref() == Some(ANONYMOUS))
    {
        // One finding per distinct call (the code aside).
        let mut key = record.clone();
        key.code = 0;
        if !anonymous.contains(&key) {
            anonymous.push(key);
            findings.push(Finding::Anonymous {
                record: record.clone(),
            });
        }
    }
    for (user, grants) in &policy.users {
        let mine: Vec<&Record> = records
            .iter()
            .filter(|r| r.user.as_deref() == Some(user.as_str()))
            .collect();
        if mine.is_empty() {
            if !grants.is_empty() {
                findings.push(Finding::NoRecords { user: user.clone() });
            }
            continue;
        }
        // What it bound itself: each bindable role, in each namespace
        // where it made a RoleBinding.
        let bound_in: std::collections::BTreeSet<&str> = mine
            .iter()
            .filter(|r| {
                r.verb == "create"
                    && r.api_group == "rbac.authorization.k8s.io"
                    && r.resource == "rolebindings"
                    && r.code < 300
            })
            .filter_map(|r| r.namespace.as_deref())
            .collect();
        let self_bound: Vec<(&str, Vec<Grant>)> = policy
            .bindable(grants)
            .into_iter()
            .map(|(role, rules)| {
                let grants = bound_in
                    .iter()
                    .flat_map(|ns| {
                        rules.iter().map(move |rule| Grant {
                            source: format!(
                                "ClusterRole {role}, bound by the account itself in {ns}"
                            ),
                            namespace: Some(ns.to_string()),
                            rule: rule.clone(),
                        })
                    })
                    .collect();
                (role, grants)
            })
            .collect();
        let mut denied: Vec<Record> = Vec::new();
        for record in &mine {
            if !grants
                .iter()
                .chain(self_bound.iter().flat_map(|(_, g)| g))
                .any(|g| g.allows(record))
            {
                // One finding per distinct call (the code aside).
                let mut key = (*record).clone();
                key.code = 0;
                if !denied.contains(&key) {
                    denied.push(key);
                    findings.push(Finding::Denied {
                        user: user.clone(),
                        record: (*record).clone(),
                    });
                }
            }
        }
        for grant in grants {
            let rule = &grant.rule;
            for verb in &rule.verbs {
                for api_group in &rule.api_groups {
                    for resource in &rule.resources {
                        let used = mine.iter().any(|r| {
                            grant.allows(r)
                                && (verb == "*" || *verb == r.verb)
                                && (api_group == "*" || *api_group == r.api_group)
                                && Rule::resource_matches(resource, r)
                        });
                        if !used {
                            findings.push(Finding::Unused {
                                user: user.clone(),
                                source: grant.source.clone(),
                                namespace: grant.namespace.clone(),
                                verb: verb.clone(),
                                api_group: api_group.clone(),
                                resource: resource.clone(),
                            });
                        }
                    }
                }
            }
        }
        for (role, derived) in &self_bound {
            let Some(rules) = policy.cluster_roles.get(*role) else {
                continue;
            };
            for rule in rules {
                for verb in &rule.verbs {
                    for api_group in &rule.api_groups {
                        for resource in &rule.resources {
                            let used = mine.iter().any(|r| {
                                derived.iter().any(|g| g.rule == *rule && g.allows(r))
                                    && (verb == "*" || *verb == r.verb)
                                    && (api_group == "*" || *api_group == r.api_group)
                                    && Rule::resource_matches(resource, r)
                            });
                            if !used {
                                findings.push(Finding::Unused {
                                    user: user.clone(),
                                    source: format!(
                                        "ClusterRole {role} (bound by the account itself)"
                                    ),
                                    namespace: None,
                                    verb: verb.clone(),
                                    api_group: api_group.clone(),
                                    resource: resource.clone(),
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const USER: &str = "system:serviceaccount:liqo:ctl";

    fn objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "ctl", "namespace": "liqo"}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "idle", "namespace": "liqo"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "leases", "namespace": "liqo"},
                   "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "update"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "leases", "namespace": "liqo"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
                   "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": "liqo"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "slices"},
                   "rules": [{"apiGroups": ["authentication.liqo.io"],
                              "resources": ["resourceslices/status"], "verbs": ["update"]},
                             {"apiGroups": [""], "resources": ["configmaps"],
                              "resourceNames": ["settings"], "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "slices"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "slices"},
                   "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": "liqo"}]}),
        ]
    }

    fn record(
        verb: &str,
        group: &str,
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Record {
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r.to_string(), Some(s.to_string())),
            None => (resource.to_string(), None),
        };
        Record {
            user: Some(USER.to_string()),
            verb: verb.to_string(),
            api_group: group.to_string(),
            resource,
            subresource,
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
            code: 200,
        }
    }

    fn every_permission_used() -> Vec<Record> {
        vec![
            record(
                "get",
                "coordination.k8s.io",
                "leases",
                Some("liqo"),
                Some("l"),
            ),
            record(
                "update",
                "coordination.k8s.io",
                "leases",
                Some("liqo"),
                Some("l"),
            ),
            record(
                "update",
                "authentication.liqo.io",
                "resourceslices/status",
                Some("t1"),
                Some("s"),
            ),
            record("get", "", "configmaps", Some("liqo"), Some("settings")),
        ]
    }

    #[test]
    fn allowed_calls_that_use_every_permission_pass() {
        let policy = Policy::from_objects(&objects()).unwrap();
        assert_eq!(policy.users[USER].len(), 3);
        assert_eq!(check(&policy, &every_permission_used()), vec![]);
    }

    #[test]
    fn a_role_an_account_binds_itself_holds_where_it_made_a_binding() {
        let mut objects = objects();
        objects.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "probe"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]}),
        );
        objects.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "binder"},
            "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"],
                       "verbs": ["create"]},
                      {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                       "resourceNames": ["probe"], "verbs": ["bind"]}]}),
        );
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "binder"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "binder"},
            "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": "liqo"}]}));
        let policy = Policy::from_objects(&objects).unwrap();
        let bind = record(
            "bind",
            "rbac.authorization.k8s.io",
            "clusterroles",
            None,
            Some("probe"),
        );
        let mut calls = every_permission_used();
        calls.push(bind);
        calls.push(record(
            "create",
            "rbac.authorization.k8s.io",
            "rolebindings",
            Some("p"),
            None,
        ));
        // Not used yet: reported as the role's.
        let findings = check(&policy, &calls);
        assert!(
            findings
                .iter()
                .any(|f| matches!(f, Finding::Unused { source, resource, .. }
                if source.contains("ClusterRole probe") && resource == "pods")),
            "{findings:?}"
        );
        // Used where it bound it: clean; elsewhere: denied.
        calls.push(record("create", "", "pods", Some("p"), None));
        assert_eq!(check(&policy, &calls), vec![]);
        calls.push(record("create", "", "pods", Some("q"), None));
        let findings = check(&policy, &calls);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(matches!(&findings[0], Finding::Denied { record, .. }
            if record.namespace.as_deref() == Some("q")));
    }

    #[test]
    fn a_call_outside_the_rules_is_denied() {
        let policy = Policy::from_objects(&objects()).unwrap();
        for bad in [
            // A Role holds in its own namespace only.
            record(
                "get",
                "coordination.k8s.io",
                "leases",
                Some("default"),
                Some("l"),
            ),
            // A verb not granted.
            record(
                "create",
                "coordination.k8s.io",
                "leases",
                Some("liqo"),
                None,
            ),
            // The main resource is not its status subresource.
            record(
                "update",
                "authentication.liqo.io",
                "resourceslices",
                Some("t1"),
                Some("s"),
            ),
            // resourceNames hold.
            record("get", "", "configmaps", Some("liqo"), Some("other")),
            // Another group.
            record(
                "update",
                "liqo.io",
                "resourceslices/status",
                Some("t1"),
                Some("s"),
            ),
        ] {
            let mut records = every_permission_used();
            records.push(bad.clone());
            let findings = check(&policy, &records);
            assert_eq!(
                findings,
                vec![Finding::Denied {
                    user: USER.into(),
                    record: bad.clone()
                }],
                "{bad}"
            );
            assert!(
                findings[0].to_string().starts_with("denied: "),
                "{}",
                findings[0]
            );
        }
    }

    #[test]
    fn a_permission_no_call_used_is_reported() {
        let policy = Policy::from_objects(&objects()).unwrap();
        let mut records = every_permission_used();
        records.retain(|r| r.verb != "update" || r.resource != "leases");
        let findings = check(&policy, &records);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let text = findings[0].to_string();
        assert!(
            text.contains("update coordination.k8s.io/leases in namespace liqo")
                && text.contains("Role liqo/leases via RoleBinding liqo/leases"),
            "{text}"
        );
    }

    #[test]
    fn a_bound_account_without_records_fails_and_an_unbound_one_does_not() {
        let policy = Policy::from_objects(&objects()).unwrap();
        let findings = check(&policy, &[]);
        assert_eq!(findings, vec![Finding::NoRecords { user: USER.into() }]);
        // Records of users the manifests do not create are not checked; an
        // account without permissions may not call anything.
        let mut stranger = record("delete", "", "pods", Some("x"), Some("p"));
        stranger.user = Some("kube-test-admin".into());
        let mut idle = stranger.clone();
        idle.user = Some("system:serviceaccount:liqo:idle".into());
        let mut records = every_permission_used();
        records.extend([stranger, idle.clone()]);
        assert_eq!(
            check(&policy, &records),
            vec![Finding::Denied {
                user: idle.user.clone().unwrap(),
                record: idle
            }]
        );
    }

    #[test]
    fn a_request_without_credentials_fails_the_check() {
        let policy = Policy::from_objects(&objects()).unwrap();
        let mut anonymous = record("list", "", "pods", Some("x"), None);
        anonymous.user = Some(ANONYMOUS.into());
        anonymous.code = 403;
        let mut records = every_permission_used();
        // Twice, refused or not: one finding.
        records.extend([anonymous.clone(), anonymous.clone()]);
        records.last_mut().unwrap().code = 200;
        let findings = check(&policy, &records);
        assert_eq!(
            findings,
            vec![Finding::Anonymous {
                record: anonymous.clone()
            }]
        );
        let text = findings[0].to_string();
        assert!(
            text.starts_with(
                "anonymous: a request without credentials (system:anonymous) reached a test \
                 API server: list core/pods in namespace x (answered 403);"
            ),
            "{text}"
        );
    }

    #[test]
    fn wildcards_match_as_the_authorizer_does() {
        let rule = Rule {
            verbs: vec!["*".into()],
            api_groups: vec!["*".into()],
            resources: vec!["*/status".into()],
            ..Rule::default()
        };
        assert!(rule.allows(&record("patch", "x", "things/status", None, None)));
        assert!(!rule.allows(&record("patch", "x", "things", None, None)));
    }

    #[test]
    fn bindings_to_missing_roles_or_foreign_accounts_are_errors() {
        let mut objects = objects();
        objects.retain(|o| o["kind"] != "Role");
        assert!(matches!(
            Policy::from_objects(&objects),
            Err(RbacError::MissingRole { .. })
        ));
        let mut objects = self::objects();
        objects[3]["subjects"][0]["namespace"] = json!("elsewhere");
        assert!(matches!(
            Policy::from_objects(&objects),
            Err(RbacError::Subject { .. })
        ));
    }
}
