//! The RBAC authorizer: who may make a request, decided from the Roles,
//! ClusterRoles, RoleBindings and ClusterRoleBindings stored in the server
//! (`rbac.authorization.k8s.io/v1`, served as built-ins), as Kubernetes
//! decides it (files at tag v1.31.0):
//!
//! - `plugin/pkg/auth/authorizer/rbac/rbac.go` — `Authorize` visits the
//!   rules of every binding that applies and allows on the first rule that
//!   matches (`RuleAllows`); otherwise no opinion, with the RBAC reason
//!   naming roles that bindings refer to but that do not exist;
//! - `pkg/registry/rbac/validation/rule.go` — `VisitRulesFor`
//!   (ClusterRoleBindings everywhere, then the RoleBindings of the
//!   request's namespace, which may refer to a Role there or a
//!   ClusterRole), `appliesToUser` (User by name, Group by membership,
//!   ServiceAccount by `system:serviceaccount:<ns>:<name>`, its namespace
//!   defaulting to the binding's) and `ConfirmNoEscalation`;
//! - `pkg/apis/rbac/v1/evaluation_helper.go` — `VerbMatches`,
//!   `APIGroupMatches`, `ResourceMatches` (`*`, `resource/subresource`,
//!   `*/subresource`), `ResourceNameMatches`, `NonResourceURLMatches`
//!   (trailing `*` as a prefix) and `CompactString`;
//! - `pkg/registry/rbac/validation/policy_comparator.go` — `Covers`, for
//!   the escalation check;
//! - `pkg/registry/rbac/escalation_check.go` — `EscalationAllowed`
//!   (`system:masters`), `RoleEscalationAuthorized` (`escalate`) and
//!   `BindingAuthorized` (`bind`);
//! - `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go`
//!   — `forbiddenMessage`, the 403 a denied request gets, and
//!   `staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go` —
//!   `NewForbidden`, its `Status`;
//! - `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go` — the
//!   `system:discovery` and `system:public-info-viewer` ClusterRoles every
//!   cluster binds to `system:authenticated` (and, the second, to
//!   `system:unauthenticated`), so that discovery works for every user.
//!
//! On purpose unlike a real server: the bootstrap roles are built in, not
//! stored objects; `CompactRules` is not applied to the missing rules an
//! escalation error lists (each is listed as broken down). Aggregated
//! ClusterRoles are read as stored: the aggregation controller
//! (the `clusterrole_aggregation` module) keeps their rules.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use crate::audit::ResourceAttributes;
use crate::status::ApiError;

/// The group whose members every authorizer allows everything
/// (`user.SystemPrivilegedGroup`).
pub const MASTERS: &str = "system:masters";
/// Added to every authenticated user's groups.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of `system:anonymous`.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
const SA_PREFIX: &str = "system:serviceaccount:";
/// The API group of the RBAC kinds.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Who sent a request: a name and groups, as an authenticator gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    /// An authenticated user with `groups` (a client certificate's O), plus
    /// the ServiceAccount groups its name implies and
    /// `system:authenticated` — what the token authenticator
    /// (`pkg/serviceaccount/util.go` `UserInfo`) and the
    /// `AuthenticatedGroupAdder` add.
    pub fn authenticated(name: &str, groups: &[String]) -> Self {
        let mut all: Vec<String> = groups.to_vec();
        if let Some((ns, _)) = name
            .strip_prefix(SA_PREFIX)
            .and_then(|rest| rest.split_once(':'))
        {
            all.push("system:serviceaccounts".to_string());
            all.push(format!("system:serviceaccounts:{ns}"));
        }
        if !all.iter().any(|g| g == AUTHENTICATED) {
            all.push(AUTHENTICATED.to_string());
        }
        Self {
            name: name.to_string(),
            groups: all,
        }
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// `["a" "b"]`, as Go's `%q` prints a `[]string`.
    fn groups_text(&self) -> String {
        go_quoted(&self.groups)
    }
}

fn go_quoted(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// One rule of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
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
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == want)
}

fn has_all(list: &[String], wants: &[String]) -> bool {
    wants.iter().all(|w| has(list, w))
}

/// What is asked: a resource request, or a non-resource URL.
#[derive(Debug, Clone, Copy)]
pub enum Attributes<'a> {
    Resource(&'a ResourceAttributes),
    NonResource { verb: &'a str, path: &'a str },
}

impl Attributes<'_> {
    fn namespace(&self) -> &str {
        match self {
            Attributes::Resource(r) => r.namespace.as_deref().unwrap_or_default(),
            Attributes::NonResource { .. } => "",
        }
    }
}

impl Rule {
    fn verb_matches(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == "*" || v == verb)
    }

    fn api_group_matches(&self, group: &str) -> bool {
        self.api_groups.iter().any(|g| g == "*" || g == group)
    }

    fn resource_matches(&self, combined: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            r == "*"
                || r == combined
                || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
        })
    }

    fn resource_name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || has(&self.resource_names, name)
    }

    fn non_resource_url_matches(&self, path: &str) -> bool {
        self.non_resource_urls.iter().any(|u| {
            u == "*"
                || u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        })
    }

    /// `RuleAllows` (rbac.go).
    pub fn allows(&self, attributes: &Attributes<'_>) -> bool {
        match attributes {
            Attributes::Resource(r) => {
                let subresource = r.subresource.as_deref().unwrap_or_default();
                self.verb_matches(&r.verb)
                    && self.api_group_matches(&r.api_group)
                    && self.resource_matches(&r.rbac_resource(), subresource)
                    && self.resource_name_matches(r.name.as_deref().unwrap_or_default())
            }
            Attributes::NonResource { verb, path } => {
                self.verb_matches(verb) && self.non_resource_url_matches(path)
            }
        }
    }

    /// `CompactString` (evaluation_helper.go).
    pub fn compact_string(&self) -> String {
        let mut parts = Vec::new();
        for (label, list) in [
            ("APIGroups", &self.api_groups),
            ("Resources", &self.resources),
            ("NonResourceURLs", &self.non_resource_urls),
            ("ResourceNames", &self.resource_names),
            ("Verbs", &self.verbs),
        ] {
            if !list.is_empty() {
                parts.push(format!("{label}:{}", go_quoted(list)));
            }
        }
        format!("{{{}}}", parts.join(", "))
    }
}

// ---- Covers (policy_comparator.go) ---------------------------------------

/// One rule per verb × group × resource (× name), and per verb × URL.
fn breakdown(rule: &Rule) -> Vec<Rule> {
    let one = |v: &str| vec![v.to_string()];
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                if rule.resource_names.is_empty() {
                    out.push(Rule {
                        api_groups: one(group),
                        resources: one(resource),
                        verbs: one(verb),
                        ..Rule::default()
                    });
                }
                for name in &rule.resource_names {
                    out.push(Rule {
                        api_groups: one(group),
                        resources: one(resource),
                        verbs: one(verb),
                        resource_names: one(name),
                        ..Rule::default()
                    });
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(Rule {
                non_resource_urls: one(url),
                verbs: one(verb),
                ..Rule::default()
            });
        }
    }
    out
}

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

fn non_resource_url_covers(owner: &str, sub: &str) -> bool {
    owner == sub
        || owner
            .strip_suffix('*')
            .is_some_and(|_| sub.starts_with(owner.trim_end_matches('*')))
}

fn rule_covers(owner: &Rule, sub: &Rule) -> bool {
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

/// `Covers`: whether `owner` holds every permission of `servant`, and the
/// broken-down rules it does not hold.
pub fn covers(owner: &[Rule], servant: &[Rule]) -> (bool, Vec<Rule>) {
    let missing: Vec<Rule> = servant
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    (missing.is_empty(), missing)
}

// ---- the stored policy -----------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct Subject {
    kind: String,
    name: String,
    #[serde(default)]
    namespace: String,
}

/// What a binding refers to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    #[serde(default)]
    pub api_group: String,
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone)]
struct Binding {
    /// `""` for a ClusterRoleBinding.
    namespace: String,
    role_ref: RoleRef,
    subjects: Vec<Subject>,
}

#[derive(Debug, Clone)]
struct Role {
    /// `""` for a ClusterRole.
    namespace: String,
    name: String,
    rules: Vec<Rule>,
}

/// The stored RBAC objects, by kind.
#[derive(Debug, Default, Clone)]
pub struct Stored {
    pub roles: Vec<Value>,
    pub cluster_roles: Vec<Value>,
    pub role_bindings: Vec<Value>,
    pub cluster_role_bindings: Vec<Value>,
}

/// Roles and bindings, ready to evaluate.
#[derive(Debug, Default, Clone)]
pub struct Policy {
    roles: Vec<Role>,
    cluster_roles: Vec<Role>,
    role_bindings: Vec<Binding>,
    cluster_role_bindings: Vec<Binding>,
    /// The resource permissions this policy allowed, oldest first: the
    /// checks admission and the RBAC storage make beyond the request's own
    /// (`approve` on a signer, `bind` on a role, `update` on an owner's
    /// finalizers), which the audit file must show as used.
    allowed: std::sync::Arc<std::sync::Mutex<Vec<ResourceAttributes>>>,
}

fn namespace_of(object: &Value) -> String {
    object["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The rules of a Role or ClusterRole object (malformed rules: none, as a
/// real server would never have stored them).
pub fn rules_of(object: &Value) -> Vec<Rule> {
    serde_json::from_value(object["rules"].clone()).unwrap_or_default()
}

fn role(object: &Value) -> Role {
    Role {
        namespace: namespace_of(object),
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        rules: rules_of(object),
    }
}

fn binding(object: &Value) -> Option<Binding> {
    Some(Binding {
        namespace: namespace_of(object),
        role_ref: serde_json::from_value(object["roleRef"].clone()).ok()?,
        subjects: serde_json::from_value(object["subjects"].clone()).unwrap_or_default(),
    })
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The bootstrap ClusterRoles and bindings that make discovery readable
/// (bootstrappolicy/policy.go `ClusterRoles` and `ClusterRoleBindings`).
fn bootstrap() -> (Vec<Role>, Vec<Binding>) {
    let get = strings(&["get"]);
    let discovery = Role {
        namespace: String::new(),
        name: "system:discovery".into(),
        rules: vec![Rule {
            verbs: get.clone(),
            non_resource_urls: strings(&[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ]),
            ..Rule::default()
        }],
    };
    let public = Role {
        namespace: String::new(),
        name: "system:public-info-viewer".into(),
        rules: vec![Rule {
            verbs: get,
            non_resource_urls: strings(&["/healthz", "/livez", "/readyz", "/version", "/version/"]),
            ..Rule::default()
        }],
    };
    let bind = |role: &str, groups: &[&str]| Binding {
        namespace: String::new(),
        role_ref: RoleRef {
            api_group: RBAC_GROUP.into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: groups
            .iter()
            .map(|g| Subject {
                kind: "Group".into(),
                name: g.to_string(),
                namespace: String::new(),
            })
            .collect(),
    };
    (
        vec![discovery, public],
        vec![
            bind("system:discovery", &[AUTHENTICATED]),
            bind(
                "system:public-info-viewer",
                &[AUTHENTICATED, UNAUTHENTICATED],
            ),
        ],
    )
}

/// `appliesToUser` (rule.go).
fn applies_to(user: &UserInfo, subject: &Subject, namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.name == subject.name,
        "Group" => user.in_group(&subject.name),
        "ServiceAccount" => {
            let ns = if subject.namespace.is_empty() {
                namespace
            } else {
                &subject.namespace
            };
            !ns.is_empty() && user.name == format!("{SA_PREFIX}{ns}:{}", subject.name)
        }
        _ => false,
    }
}

/// Whether the authorizer allows a request, and if not, why (the RBAC
/// reason, maybe empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(String),
}

impl Policy {
    pub fn new(stored: &Stored) -> Self {
        let (mut cluster_roles, mut cluster_role_bindings) = bootstrap();
        cluster_roles.extend(stored.cluster_roles.iter().map(role));
        cluster_role_bindings.extend(stored.cluster_role_bindings.iter().filter_map(binding));
        Self {
            roles: stored.roles.iter().map(role).collect(),
            cluster_roles,
            role_bindings: stored.role_bindings.iter().filter_map(binding).collect(),
            cluster_role_bindings,
            allowed: Default::default(),
        }
    }

    /// `GetRoleReferenceRules`: the rules a binding in `namespace` refers
    /// to, or the error a real server names a missing role with.
    pub fn role_ref_rules(&self, role_ref: &RoleRef, namespace: &str) -> Result<&[Rule], String> {
        let (found, what) = match role_ref.kind.as_str() {
            "ClusterRole" => (
                self.cluster_roles.iter().find(|r| r.name == role_ref.name),
                "clusterrole",
            ),
            "Role" => (
                self.roles
                    .iter()
                    .find(|r| r.name == role_ref.name && r.namespace == namespace),
                "role",
            ),
            other => return Err(format!("unsupported role reference kind: {other:?}")),
        };
        found
            .map(|r| r.rules.as_slice())
            .ok_or_else(|| format!("{what}.{RBAC_GROUP} {:?} not found", role_ref.name))
    }

    /// `VisitRulesFor`: every rule bound to `user` in `namespace` (`""`:
    /// cluster-wide only) to `visit` until it returns `false`; the errors
    /// of bindings whose role is missing.
    fn visit_rules(
        &self,
        user: &UserInfo,
        namespace: &str,
        visit: &mut dyn FnMut(&Rule) -> bool,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        let bindings = self.cluster_role_bindings.iter().chain(
            self.role_bindings
                .iter()
                .filter(|b| !namespace.is_empty() && b.namespace == namespace),
        );
        for b in bindings {
            if !b.subjects.iter().any(|s| applies_to(user, s, &b.namespace)) {
                continue;
            }
            match self.role_ref_rules(&b.role_ref, &b.namespace) {
                Ok(rules) => {
                    for rule in rules {
                        if !visit(rule) {
                            return errors;
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        errors
    }

    /// `RulesFor`: every rule `user` holds in `namespace`.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<Rule>, Vec<String>) {
        let mut rules = Vec::new();
        let errors = self.visit_rules(user, namespace, &mut |r| {
            rules.push(r.clone());
            true
        });
        (rules, errors)
    }

    /// `Authorize` (rbac.go), behind the privileged-group authorizer that a
    /// real server puts first (`system:masters` may do anything).
    /// The resource permissions allowed so far (see the `allowed` field),
    /// taken: a second call returns only those allowed since.
    pub fn take_allowed(&self) -> Vec<ResourceAttributes> {
        self.allowed
            .lock()
            .map(|mut seen| std::mem::take(&mut *seen))
            .unwrap_or_default()
    }

    pub fn authorize(&self, user: &UserInfo, attributes: &Attributes<'_>) -> Decision {
        if user.in_group(MASTERS) {
            return Decision::Allow;
        }
        let mut allowed = false;
        let errors = self.visit_rules(user, attributes.namespace(), &mut |rule| {
            allowed = rule.allows(attributes);
            !allowed
        });
        if allowed {
            if let Attributes::Resource(attrs) = attributes {
                if let Ok(mut seen) = self.allowed.lock() {
                    seen.push((*attrs).clone());
                }
            }
            Decision::Allow
        } else if errors.is_empty() {
            Decision::Deny(String::new())
        } else {
            // rbac.go: `fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errors))`.
            Decision::Deny(format!("RBAC: {}", aggregate(&errors)))
        }
    }
}

/// An `errors.Aggregate` printed (`staging/src/k8s.io/apimachinery/pkg/util/errors/errors.go`,
/// `aggregate.Error`): one error bare; several with the same message that
/// message once, bare; else the distinct messages in order, joined by
/// `, `, in brackets.
pub fn aggregate(errors: &[String]) -> String {
    let mut distinct: Vec<&str> = Vec::new();
    for e in errors {
        if !distinct.contains(&e.as_str()) {
            distinct.push(e);
        }
    }
    match distinct.as_slice() {
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

// ---- answers ---------------------------------------------------------------

/// `NewForbidden`'s message prefix and details: `<resource>[.<group>]
/// ["<name>"] is forbidden: <why>`.
pub fn forbidden_status(group: &str, resource: &str, name: &str, why: &str) -> ApiError {
    let qualified = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    let message = match (resource.is_empty(), name.is_empty()) {
        (true, _) => format!("forbidden: {why}"),
        (false, true) => format!("{qualified} is forbidden: {why}"),
        (false, false) => format!("{qualified} {name:?} is forbidden: {why}"),
    };
    let mut e = ApiError::new(403, "Forbidden", message);
    e.details = Some(serde_json::json!({ "name": name, "group": group, "kind": resource }));
    e
}

/// The 403 of a request the authorizer denied (`Forbidden` and
/// `forbiddenMessage`, responsewriters/errors.go).
pub fn forbidden(user: &UserInfo, attributes: &Attributes<'_>, reason: &str) -> ApiError {
    let (message, group, resource, name) = match attributes {
        Attributes::NonResource { verb, path } => (
            format!("User {:?} cannot {verb} path {path:?}", user.name),
            "",
            "",
            "",
        ),
        Attributes::Resource(r) => {
            let place = match r.namespace.as_deref().filter(|n| !n.is_empty()) {
                Some(ns) => format!("in the namespace {ns:?}"),
                None => "at the cluster scope".to_string(),
            };
            (
                format!(
                    "User {:?} cannot {} resource {:?} in API group {:?} {place}",
                    user.name,
                    r.verb,
                    r.rbac_resource(),
                    r.api_group
                ),
                r.api_group.as_str(),
                r.resource.as_str(),
                r.name.as_deref().unwrap_or_default(),
            )
        }
    };
    let why = if reason.is_empty() {
        message
    } else {
        format!("{message}: {reason}")
    };
    forbidden_status(group, resource, name, &why)
}

// ---- escalation (escalation_check.go, role and binding storage) ----------

/// A write to a Role, ClusterRole or binding, as its storage sees it.
#[derive(Debug, Clone, Copy)]
pub enum RbacWrite<'a> {
    /// A Role (`namespace` set) or ClusterRole with these rules.
    Role {
        resource: &'a str,
        namespace: &'a str,
        name: &'a str,
        rules: &'a [Rule],
    },
    /// A RoleBinding (`namespace` set) or ClusterRoleBinding.
    Binding {
        resource: &'a str,
        namespace: &'a str,
        name: &'a str,
        role_ref: &'a RoleRef,
    },
}

/// `ConfirmNoEscalation`: `user` must hold `rules` in `namespace`.
fn confirm_no_escalation(
    policy: &Policy,
    user: &UserInfo,
    namespace: &str,
    rules: &[Rule],
) -> Result<(), String> {
    let (owned, errors) = policy.rules_for(user, namespace);
    let (ok, missing) = covers(&owned, rules);
    if ok {
        return Ok(());
    }
    let described: BTreeSet<String> = missing.iter().map(Rule::compact_string).collect();
    let mut message = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        user.groups_text(),
        described.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !errors.is_empty() {
        // rule.go: `"; resolution errors: %v"` of a `[]error` holding the one
        // aggregate `RulesFor` returned — Go prints the slice in brackets.
        message.push_str(&format!("; resolution errors: [{}]", aggregate(&errors)));
    }
    Err(message)
}

/// Whether the role and binding storage lets `user` write this: members
/// of `system:masters` always; else a Role write needs `escalate` on it or
/// only rules the user holds, a binding `bind` on the role it refers to or
/// only that role's rules held by the user in the binding's namespace.
pub fn check_escalation(
    policy: &Policy,
    user: &UserInfo,
    write: &RbacWrite<'_>,
) -> Result<(), ApiError> {
    if user.in_group(MASTERS) {
        return Ok(());
    }
    let ask = |verb: &str, resource: &str, namespace: &str, name: &str| {
        let attrs = ResourceAttributes {
            verb: verb.to_string(),
            api_group: RBAC_GROUP.to_string(),
            resource: resource.to_string(),
            subresource: None,
            namespace: Some(namespace.to_string()).filter(|n| !n.is_empty()),
            name: Some(name.to_string()),
        };
        policy.authorize(user, &Attributes::Resource(&attrs)) == Decision::Allow
    };
    match *write {
        RbacWrite::Role {
            resource,
            namespace,
            name,
            rules,
        } => {
            if ask("escalate", resource, namespace, name) {
                return Ok(());
            }
            confirm_no_escalation(policy, user, namespace, rules)
                .map_err(|why| forbidden_status(RBAC_GROUP, resource, name, &why))
        }
        RbacWrite::Binding {
            resource,
            namespace,
            name,
            role_ref,
        } => {
            let role_resource = match role_ref.kind.as_str() {
                "ClusterRole" => Some("clusterroles"),
                "Role" => Some("roles"),
                _ => None,
            };
            if role_resource.is_some_and(|r| ask("bind", r, namespace, &role_ref.name)) {
                return Ok(());
            }
            let rules = policy
                .role_ref_rules(role_ref, namespace)
                .map_err(|why| forbidden_status(RBAC_GROUP, resource, name, &why))?;
            confirm_no_escalation(policy, user, namespace, rules)
                .map_err(|why| forbidden_status(RBAC_GROUP, resource, name, &why))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SA: &str = "system:serviceaccount:liqo:ctl";

    fn sa() -> UserInfo {
        UserInfo::authenticated(SA, &[])
    }

    fn attrs(
        verb: &str,
        group: &str,
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> ResourceAttributes {
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r.to_string(), Some(s.to_string())),
            None => (resource.to_string(), None),
        };
        ResourceAttributes {
            verb: verb.into(),
            api_group: group.into(),
            resource,
            subresource,
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
        }
    }

    fn cluster_role(name: &str, rules: Value) -> Value {
        json!({"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
    }

    fn role_in(ns: &str, name: &str, rules: Value) -> Value {
        json!({"kind": "Role", "metadata": {"name": name, "namespace": ns}, "rules": rules})
    }

    fn binding_to(ns: Option<&str>, kind: &str, role: &str, subjects: Value) -> Value {
        let mut meta = json!({"name": format!("b-{role}")});
        if let Some(ns) = ns {
            meta["namespace"] = json!(ns);
        }
        json!({"metadata": meta,
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role},
               "subjects": subjects})
    }

    fn sa_subject() -> Value {
        json!([{"kind": "ServiceAccount", "name": "ctl", "namespace": "liqo"}])
    }

    /// A ClusterRole bound cluster-wide to the ServiceAccount.
    fn with_cluster_rules(rules: Value) -> Policy {
        Policy::new(&Stored {
            cluster_roles: vec![cluster_role("r", rules)],
            cluster_role_bindings: vec![binding_to(None, "ClusterRole", "r", sa_subject())],
            ..Stored::default()
        })
    }

    /// A request of the test ServiceAccount and whether it is allowed:
    /// (allowed, verb, group, resource, namespace, name).
    type Case<'a> = (
        bool,
        &'a str,
        &'a str,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
    );

    /// Whether the test ServiceAccount may make each request is as its case says.
    fn sa_may_each(policy: &Policy, cases: &[Case]) {
        for &(want, verb, group, resource, ns, name) in cases {
            let a = attrs(verb, group, resource, ns, name);
            assert_eq!(allowed(policy, &sa(), &a), want, "{a:?}");
        }
    }

    fn allowed(policy: &Policy, user: &UserInfo, a: &ResourceAttributes) -> bool {
        policy.authorize(user, &Attributes::Resource(a)) == Decision::Allow
    }

    #[test]
    fn verbs_match_exactly_or_by_wildcard() {
        let p = with_cluster_rules(
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
        );
        sa_may_each(
            &p,
            &[
                (true, "list", "", "pods", None, None),
                (false, "watch", "", "pods", None, None),
            ],
        );
        let p =
            with_cluster_rules(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]));
        sa_may_each(
            &p,
            &[(true, "deletecollection", "", "pods", Some("x"), None)],
        );
    }

    #[test]
    fn api_groups_match_exactly_or_by_wildcard() {
        let p = with_cluster_rules(
            json!([{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}]),
        );
        sa_may_each(
            &p,
            &[
                (true, "create", "events.k8s.io", "events", Some("a"), None),
                // The core group's events are another resource.
                (false, "create", "", "events", Some("a"), None),
            ],
        );
        let p = with_cluster_rules(
            json!([{"apiGroups": ["*"], "resources": ["events"], "verbs": ["create"]}]),
        );
        sa_may_each(&p, &[(true, "create", "", "events", Some("a"), None)]);
    }

    #[test]
    fn subresources_are_their_own_resources() {
        // A rule on updates in group g of one resource, and whether an
        // update of each resource named "t" is allowed by it.
        let table: [(&str, &[(&str, bool)]); 4] = [
            (
                "things/status",
                &[("things/status", true), ("things", false)],
            ),
            ("things", &[("things/status", false)]),
            (
                "*/status",
                &[("others/status", true), ("others/finalizers", false)],
            ),
            ("*", &[("others/finalizers", true)]),
        ];
        for (rule, requests) in table {
            let p = with_cluster_rules(
                json!([{"apiGroups": ["g"], "resources": [rule], "verbs": ["update"]}]),
            );
            for &(resource, allowed) in requests {
                sa_may_each(&p, &[(allowed, "update", "g", resource, None, Some("t"))]);
            }
        }
    }

    #[test]
    fn resource_names_restrict_to_named_objects() {
        let p = with_cluster_rules(json!([{"apiGroups": [""], "resources": ["configmaps"],
                                            "resourceNames": ["settings"], "verbs": ["get", "list"]}]));
        sa_may_each(
            &p,
            &[
                (true, "get", "", "configmaps", Some("a"), Some("settings")),
                (false, "get", "", "configmaps", Some("a"), Some("other")),
                // A list names nothing, so a rule with resourceNames never allows it.
                (false, "list", "", "configmaps", Some("a"), None),
            ],
        );
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix() {
        let p = with_cluster_rules(
            json!([{"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]}]),
        );
        let ask = |path: &str, verb: &str| {
            p.authorize(&sa(), &Attributes::NonResource { verb, path }) == Decision::Allow
        };
        assert!(ask("/metrics", "get"));
        assert!(ask("/logs/a/b", "get"));
        assert!(!ask("/metrics/x", "get"));
        assert!(!ask("/metrics", "post"));
        // A non-resource rule never allows a resource request.
        sa_may_each(&p, &[(false, "get", "", "metrics", None, None)]);
        // Discovery is every authenticated user's, not an anonymous one's.
        let anonymous = UserInfo {
            name: "system:anonymous".into(),
            groups: vec![UNAUTHENTICATED.into()],
        };
        let discovery = Attributes::NonResource {
            verb: "get",
            path: "/apis/g/v1",
        };
        assert_eq!(p.authorize(&sa(), &discovery), Decision::Allow);
        assert_ne!(p.authorize(&anonymous, &discovery), Decision::Allow);
        let version = Attributes::NonResource {
            verb: "get",
            path: "/version",
        };
        assert_eq!(p.authorize(&anonymous, &version), Decision::Allow);
    }

    #[test]
    fn role_bindings_hold_in_their_namespace_only() {
        let p = Policy::new(&Stored {
            roles: vec![role_in(
                "liqo",
                "leases",
                json!([{"apiGroups": ["coordination.k8s.io"],
                                                         "resources": ["leases"], "verbs": ["get"]}]),
            )],
            cluster_roles: vec![cluster_role(
                "reader",
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
            )],
            role_bindings: vec![
                binding_to(Some("liqo"), "Role", "leases", sa_subject()),
                // A ClusterRole bound by a RoleBinding holds in its namespace.
                binding_to(Some("team"), "ClusterRole", "reader", sa_subject()),
            ],
            ..Stored::default()
        });
        sa_may_each(
            &p,
            &[
                (
                    true,
                    "get",
                    "coordination.k8s.io",
                    "leases",
                    Some("liqo"),
                    Some("l"),
                ),
                (
                    false,
                    "get",
                    "coordination.k8s.io",
                    "leases",
                    Some("default"),
                    Some("l"),
                ),
                (true, "get", "", "pods", Some("team"), Some("p")),
                (false, "get", "", "pods", Some("other"), Some("p")),
                (false, "get", "", "pods", None, Some("p")),
            ],
        );
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let rules = json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]);
        let policy_for = |subjects: Value| {
            Policy::new(&Stored {
                cluster_roles: vec![cluster_role("r", rules.clone())],
                cluster_role_bindings: vec![binding_to(None, "ClusterRole", "r", subjects)],
                ..Stored::default()
            })
        };
        let list = attrs("list", "", "nodes", None, None);
        let cert = UserInfo::authenticated("alice", &["ops".to_string()]);
        let p = policy_for(json!([{"kind": "User", "name": "alice"}]));
        assert!(allowed(&p, &cert, &list));
        assert!(!allowed(&p, &sa(), &list));
        let p = policy_for(json!([{"kind": "Group", "name": "ops"}]));
        assert!(allowed(&p, &cert, &list));
        assert!(!allowed(&p, &sa(), &list));
        for group in [
            "system:serviceaccounts",
            "system:serviceaccounts:liqo",
            AUTHENTICATED,
        ] {
            let p = policy_for(json!([{"kind": "Group", "name": group}]));
            assert!(allowed(&p, &sa(), &list), "{group}");
        }
        let p = policy_for(json!([{"kind": "Group", "name": "system:serviceaccounts:other"}]));
        assert!(!allowed(&p, &sa(), &list));
        let p =
            policy_for(json!([{"kind": "ServiceAccount", "name": "ctl", "namespace": "other"}]));
        assert!(!allowed(&p, &sa(), &list));
        // A ServiceAccount subject without a namespace is the binding's.
        let p = Policy::new(&Stored {
            cluster_roles: vec![cluster_role(
                "r",
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
            )],
            role_bindings: vec![binding_to(
                Some("liqo"),
                "ClusterRole",
                "r",
                json!([{"kind": "ServiceAccount", "name": "ctl"}]),
            )],
            ..Stored::default()
        });
        sa_may_each(&p, &[(true, "list", "", "pods", Some("liqo"), None)]);
        // system:masters may do anything, bound or not.
        let admin = UserInfo::authenticated("admin", &[MASTERS.to_string()]);
        assert!(allowed(&Policy::default(), &admin, &list));
    }

    #[test]
    fn a_denied_request_gets_the_real_forbidden_status() {
        let p = with_cluster_rules(json!([]));
        let a = attrs(
            "update",
            "authentication.liqo.io",
            "resourceslices/status",
            Some("t1"),
            Some("s"),
        );
        let Decision::Deny(reason) = p.authorize(&sa(), &Attributes::Resource(&a)) else {
            panic!("allowed");
        };
        let status = forbidden(&sa(), &Attributes::Resource(&a), &reason).to_status();
        assert_eq!(status["code"], 403);
        assert_eq!(status["reason"], "Forbidden");
        assert_eq!(
            status["message"],
            "resourceslices.authentication.liqo.io \"s\" is forbidden: User \"system:serviceaccount:liqo:ctl\" \
             cannot update resource \"resourceslices/status\" in API group \"authentication.liqo.io\" in the namespace \"t1\""
        );
        assert_eq!(
            status["details"],
            json!({"name": "s", "group": "authentication.liqo.io", "kind": "resourceslices"})
        );
        let list = attrs("list", "", "nodes", None, None);
        let status = forbidden(&sa(), &Attributes::Resource(&list), "").to_status();
        assert_eq!(
            status["message"],
            "nodes is forbidden: User \"system:serviceaccount:liqo:ctl\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        );
        // A binding to a missing role is named in the reason.
        let p = Policy::new(&Stored {
            cluster_role_bindings: vec![binding_to(None, "ClusterRole", "gone", sa_subject())],
            ..Stored::default()
        });
        // One error: Go's aggregate prints it bare (errors.go).
        assert_eq!(
            p.authorize(&sa(), &Attributes::Resource(&list)),
            Decision::Deny("RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found".into())
        );
        // Two: in brackets, joined by ", "; the same one twice: once, bare.
        let p = Policy::new(&Stored {
            cluster_role_bindings: vec![
                binding_to(None, "ClusterRole", "gone", sa_subject()),
                binding_to(None, "ClusterRole", "lost", sa_subject()),
            ],
            ..Stored::default()
        });
        assert_eq!(
            p.authorize(&sa(), &Attributes::Resource(&list)),
            Decision::Deny(
                "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, \
                 clusterrole.rbac.authorization.k8s.io \"lost\" not found]"
                    .into()
            )
        );
        let twice = ["e".to_string(), "e".to_string()];
        assert_eq!(aggregate(&twice), "e");
    }

    #[test]
    fn role_writes_need_escalate_or_only_held_rules() {
        let held = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                          {"apiGroups": [RBAC_GROUP], "resources": ["roles"], "verbs": ["create"]}]);
        let p = with_cluster_rules(held);
        let within: Vec<Rule> = serde_json::from_value(
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
        )
        .unwrap();
        let beyond: Vec<Rule> = serde_json::from_value(
            json!([{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get"]}]),
        )
        .unwrap();
        fn write(rules: &[Rule]) -> RbacWrite<'_> {
            RbacWrite::Role {
                resource: "roles",
                namespace: "a",
                name: "r",
                rules,
            }
        }
        assert!(check_escalation(&p, &sa(), &write(&within)).is_ok());
        let e = check_escalation(&p, &sa(), &write(&beyond)).unwrap_err();
        assert_eq!(e.code, 403);
        assert!(
            e.message.starts_with(
                "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"system:serviceaccount:liqo:ctl\" \
                 (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:liqo\" \"system:authenticated\"]) \
                 is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
            ),
            "{}",
            e.message
        );
        // `escalate` lets it grant anything.
        let p = with_cluster_rules(
            json!([{"apiGroups": [RBAC_GROUP], "resources": ["roles"], "verbs": ["escalate"]}]),
        );
        assert!(check_escalation(&p, &sa(), &write(&beyond)).is_ok());
    }

    #[test]
    fn binding_writes_need_bind_or_the_roles_rules() {
        let role_ref = RoleRef {
            api_group: RBAC_GROUP.into(),
            kind: "ClusterRole".into(),
            name: "admin".into(),
        };
        let stored = |held: Value| Stored {
            cluster_roles: vec![
                cluster_role(
                    "admin",
                    json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
                ),
                cluster_role("held", held),
            ],
            cluster_role_bindings: vec![binding_to(None, "ClusterRole", "held", sa_subject())],
            ..Stored::default()
        };
        let write = RbacWrite::Binding {
            resource: "rolebindings",
            namespace: "a",
            name: "b",
            role_ref: &role_ref,
        };
        let p = Policy::new(&stored(json!([])));
        let e = check_escalation(&p, &sa(), &write).unwrap_err();
        assert!(
            e.message
                .contains("is attempting to grant RBAC permissions not currently held"),
            "{}",
            e.message
        );
        // `bind` on that ClusterRole, in the binding's namespace.
        let p = Policy::new(&stored(
            json!([{"apiGroups": [RBAC_GROUP], "resources": ["clusterroles"],
                                            "resourceNames": ["admin"], "verbs": ["bind"]}]),
        ));
        assert!(check_escalation(&p, &sa(), &write).is_ok());
        let p = Policy::new(&stored(
            json!([{"apiGroups": [RBAC_GROUP], "resources": ["clusterroles"],
                                            "resourceNames": ["view"], "verbs": ["bind"]}]),
        ));
        assert!(check_escalation(&p, &sa(), &write).is_err());
        // A binding to a role that does not exist.
        let missing = RoleRef {
            name: "nope".into(),
            ..role_ref.clone()
        };
        let w = RbacWrite::Binding {
            resource: "rolebindings",
            namespace: "a",
            name: "b",
            role_ref: &missing,
        };
        let e = check_escalation(&Policy::new(&stored(json!([]))), &sa(), &w).unwrap_err();
        assert!(
            e.message
                .ends_with("clusterrole.rbac.authorization.k8s.io \"nope\" not found"),
            "{}",
            e.message
        );
    }

    #[test]
    fn covers_as_the_policy_comparator() {
        let rules = |v: Value| -> Vec<Rule> { serde_json::from_value(v).unwrap() };
        let owner = rules(
            json!([{"apiGroups": ["g"], "resources": ["*/status", "things"], "verbs": ["get"]},
                                 {"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}]),
        );
        assert!(covers(&owner, &rules(json!([{"apiGroups": ["g"], "resources": ["x/status", "things"], "verbs": ["get"]}]))).0);
        assert!(
            covers(
                &owner,
                &rules(json!([{"nonResourceURLs": ["/logs/a"], "verbs": ["get"]}]))
            )
            .0
        );
        let (ok, missing) = covers(
            &owner,
            &rules(json!([{"apiGroups": ["g"], "resources": ["x"], "verbs": ["get", "list"]}])),
        );
        assert!(!ok);
        assert_eq!(missing.len(), 2);
        // Holding a named object does not cover every object.
        let named = rules(
            json!([{"apiGroups": ["g"], "resources": ["things"], "resourceNames": ["a"], "verbs": ["get"]}]),
        );
        assert!(
            !covers(
                &named,
                &rules(json!([{"apiGroups": ["g"], "resources": ["things"], "verbs": ["get"]}]))
            )
            .0
        );
        assert!(covers(&owner, &named).0);
    }
}
