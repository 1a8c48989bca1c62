//! The request log: every request the server answered, with what Kubernetes
//! RBAC would authorize it as — `(verb, apiGroup, resource, subresource,
//! namespace)` in RBAC's vocabulary (`get`, `list`, `watch`, `create`,
//! `update`, `patch`, `delete`, `deletecollection`) — so a test can check
//! that every call a controller makes is allowed by the Role it ships.
//! List and watch requests are also kept with their query
//! ([`SeenRequest`]), to tell watching from polling and see the selectors.

use crate::crd::GroupResource;

/// One request, as answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The authenticated user (`system:anonymous` without credentials);
    /// `None` when the credentials were refused (401).
    pub user: Option<String>,
    pub method: String,
    pub path: String,
    /// RBAC verb; for non-resource URLs (discovery), the lower-case method.
    pub verb: String,
    /// `None` for non-resource URLs (`/api`, `/apis/…`, `/version`).
    pub resource: Option<ResourceAttributes>,
    /// The HTTP status answered (200 for a watch that started).
    pub code: u16,
    pub field_manager: Option<String>,
}

impl AuditRecord {
    /// `verb resource[/subresource]` (`get secrets`, `patch purchases/status`),
    /// or the verb alone for a non-resource URL: the kind of request the
    /// benches count.
    pub fn kind(&self) -> String {
        match &self.resource {
            Some(a) => format!("{} {}", a.verb, a.rbac_resource()),
            None => self.verb.clone(),
        }
    }

    /// The kinds of `user`'s requests among `records`.
    pub fn kinds_of<'a>(
        records: &'a [AuditRecord],
        user: &'a str,
    ) -> impl Iterator<Item = String> + 'a {
        records
            .iter()
            .filter(move |r| r.user.as_deref() == Some(user))
            .map(AuditRecord::kind)
    }
}

/// What RBAC matches a resource request on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceAttributes {
    pub verb: String,
    /// `""` for the core group.
    pub api_group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl ResourceAttributes {
    /// `resource` or `resource/subresource`, as written in a Role's rules.
    pub fn rbac_resource(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        }
    }

    /// `(verb, apiGroup, resource, subresource, namespace)`.
    pub fn tuple(&self) -> (String, String, String, Option<String>, Option<String>) {
        (
            self.verb.clone(),
            self.api_group.clone(),
            self.resource.clone(),
            self.subresource.clone(),
            self.namespace.clone(),
        )
    }
}

impl AuditRecord {
    /// One line of the audit file written for `deploy-check`
    /// ([`crate::KubeApiServer`] writes them under `KUBE_TEST_AUDIT_DIR`):
    /// what RBAC decides on and what was answered. `None` for non-resource
    /// URLs (discovery), which every authenticated user may read through
    /// the `system:discovery` ClusterRole.
    pub fn to_json_line(&self) -> Option<String> {
        let r = self.resource.as_ref()?;
        let line = serde_json::json!({
            "user": self.user,
            "verb": r.verb,
            "apiGroup": r.api_group,
            "resource": r.resource,
            "subresource": r.subresource,
            "namespace": r.namespace,
            "name": r.name,
            "code": self.code,
        });
        Some(line.to_string())
    }
}

/// The RBAC verb of a request to a resource, as `NewRequestInfo`
/// (`staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`)
/// makes it: a GET is `get`, and becomes `list` or (with `watch`) `watch`
/// only when the path names no object — a GET of a named object with
/// `watch=true` is still a `get` (and is answered with the object). A name
/// taken from a `metadata.name` field selector comes after this, so such a
/// request stays a `list` or `watch`. `named`: the path names an object.
pub fn rbac_verb(method: &str, named: bool, watching: bool) -> &'static str {
    match (method, named) {
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) if watching => "watch",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// A list or watch request as the server received it (query parameters
/// decoded; `None` where absent).
/// Whether a query parameter's value asks for `true`, as a `bool` option
/// is decoded (`Convert_Slice_string_To_bool`,
/// `staging/src/k8s.io/apimachinery/pkg/runtime/conversion.go`): absent,
/// `0` or `false` (any case) is false; anything else, the empty string
/// included, true.
pub fn query_bool(value: Option<&str>) -> bool {
    value.is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    pub resource: GroupResource,
    pub namespace: Option<String>,
    pub watch: bool,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<String>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_in_rbac_vocabulary() {
        assert_eq!(rbac_verb("GET", false, true), "watch");
        assert_eq!(rbac_verb("GET", true, false), "get");
        // requestinfo.go: list and watch only without a name.
        assert_eq!(rbac_verb("GET", true, true), "get");
        assert_eq!(rbac_verb("GET", false, false), "list");
        assert_eq!(rbac_verb("DELETE", false, false), "deletecollection");
        for yes in ["true", "1", "True", "", "yes"] {
            assert!(query_bool(Some(yes)), "{yes:?}");
        }
        for no in [None, Some("false"), Some("FALSE"), Some("0")] {
            assert!(!query_bool(no), "{no:?}");
        }
        let attrs = ResourceAttributes {
            verb: "update".into(),
            api_group: "authentication.liqo.io".into(),
            resource: "resourceslices".into(),
            subresource: Some("status".into()),
            namespace: Some("t".into()),
            name: Some("s".into()),
        };
        assert_eq!(attrs.rbac_resource(), "resourceslices/status");
    }
}
