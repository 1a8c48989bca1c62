//! `metav1.Status`: the body of every error the server answers, with the
//! `reason`, `code` and `details` a real kube-apiserver puts there, so a
//! client's error handling (kube-rs `Error::Api`, client-go `IsConflict`…)
//! takes the same branch against this server as against a real one.

use serde_json::{json, Value};

use crate::crd::ResourceDef;

/// One field a request was refused for (`details.causes[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`,
    /// `FieldValueTypeInvalid`, `FieldValueForbidden`.
    pub reason: String,
    /// Without the field: `Required value`, `Invalid value: "x": …`.
    pub message: String,
    /// The field's path: `spec.resources.cpu`, `status.conditions[0].type`.
    pub field: String,
}

impl Cause {
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// `spec.x: Required value`, as the real server joins them.
    pub fn text(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// An API error: HTTP code, `reason` and message, rendered as a `Status`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub details: Option<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `resourceslices.authentication.liqo.io`, or `pods` for the core group:
/// how the real server names a resource in its messages.
pub fn qualified(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.plural.clone()
    } else {
        format!("{}.{}", def.plural, def.group)
    }
}

fn name_details(def: &ResourceDef, name: &str) -> Value {
    json!({ "name": name, "group": def.group, "kind": def.plural })
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// The same answer with `details`.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(def)),
        )
        .with_details(name_details(def, name))
    }

    /// A namespaced create into a namespace that does not exist.
    pub fn namespace_not_found(namespace: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("namespaces \"{namespace}\" not found"),
        )
        .with_details(json!({ "name": namespace, "kind": "namespaces" }))
    }

    pub fn already_exists(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(def)),
        )
        .with_details(name_details(def, name))
    }

    /// A stale `metadata.resourceVersion` (or a failed precondition).
    pub fn conflict(def: &ResourceDef, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(def)
            ),
        )
        .with_details(name_details(def, name))
    }

    pub fn modified(def: &ResourceDef, name: &str) -> Self {
        Self::conflict(
            def,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with one cause per refused field.
    pub fn invalid(def: &ResourceDef, name: &str, causes: Vec<Cause>) -> Self {
        let group_kind = if def.group.is_empty() {
            def.kind.clone()
        } else {
            format!("{}.{}", def.kind, def.group)
        };
        let (joined, causes_json) = Self::joined_causes(&causes);
        Self::new(
            422,
            "Invalid",
            format!("{group_kind} \"{name}\" is invalid: {joined}"),
        )
        .with_details(json!({
            "name": name, "group": def.group, "kind": def.kind, "causes": causes_json,
        }))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// Credentials that name nobody (a real server's exact answer).
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// A read at a resourceVersion the server has not reached: what the
    /// real server's `storage.NewTooLargeResourceVersionError` answers —
    /// a 504 `Timeout` ("Timeout: Too large resource version: N, current:
    /// M") telling the client to retry after a second, with the cause
    /// `ResourceVersionTooLarge` that client-go's
    /// `IsTooLargeResourceVersion` looks for.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
            "retryAfterSeconds": 1,
        }))
    }

    /// `ListOptions` the real server's `ValidateListOptions` refuses: 422,
    /// one `FieldValueForbidden`/`FieldValueNotSupported` cause each.
    pub fn invalid_list_options(causes: Vec<Cause>) -> Self {
        let (joined, causes_json) = Self::joined_causes(&causes);
        Self::new(
            422,
            "Invalid",
            format!("ListOptions.meta.k8s.io \"\" is invalid: {joined}"),
        )
        .with_details(json!({
            "group": "meta.k8s.io", "kind": "ListOptions", "causes": causes_json,
        }))
    }

    /// A 422's causes as the real server words them: the message's part
    /// (the one cause's text, or all in brackets) and the `details.causes`.
    fn joined_causes(causes: &[Cause]) -> (String, Vec<Value>) {
        let texts: Vec<String> = causes.iter().map(Cause::text).collect();
        let joined = match texts.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let json = causes
            .iter()
            .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
            .collect();
        (joined, json)
    }

    /// `retryAfterSeconds` in `details`, as the real server sets it on 429
    /// and 504 answers (beside the `Retry-After` header).
    pub fn retry_after(mut self, seconds: u64) -> Self {
        let details = self.details.get_or_insert_with(|| json!({}));
        details["retryAfterSeconds"] = json!(seconds);
        self
    }

    pub fn method_not_allowed(method: &str, what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("{method} is not supported on {what}"),
        )
    }

    /// A PATCH whose content type the resource does not take: the real
    /// server's words (`negotiation.NewUnsupportedMediaTypeError`, with the
    /// patch types of apiserver `installer.go` or, for custom resources,
    /// apiextensions' `customresource_handler.go`), which do not name the
    /// type refused — hence `_refused`, kept for the callers' sake.
    pub fn unsupported_patch(_refused: &str, custom: bool) -> Self {
        let accepted = if custom {
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        } else {
            "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
        };
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {accepted}"),
        )
    }

    pub fn forbidden(def: &ResourceDef, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{} \"{name}\" is forbidden: {why}", qualified(def)),
        )
        .with_details(name_details(def, name))
    }

    /// The reason a real server gives for an injected status code.
    pub fn injected(code: u16) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        let message = match code {
            // The real server's words for its max-in-flight refusal.
            429 => "Too many requests, please try again later.".to_string(),
            _ => format!("injected fault: {code} {reason}"),
        };
        Self::new(code, reason, message)
    }

    /// The `Status` object, written as the real server serialises
    /// `metav1.Status`: every field of `Status`, `StatusDetails` and
    /// `StatusCause` is `omitempty` (apimachinery `pkg/apis/meta/v1/types.go`),
    /// so an empty `group` (the core group), `name` (a list) or `message`
    /// is absent, not `""` — as the golden answers of `tests/golden.rs`
    /// expect (their sources in `golden/SOURCES.md`).
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        if let Some(fields) = status.as_object_mut() {
            omit_empty(fields);
        }
        status
    }
}

/// Drop the empty strings, empty arrays and zeros of a `Status` and the
/// objects under it (`details`, `details.causes[]`), which Go's
/// `omitempty` leaves out; `metadata` (a struct) stays `{}` as in Go.
fn omit_empty(fields: &mut serde_json::Map<String, Value>) {
    fields.retain(|_, value| match value {
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Null => false,
        _ => true,
    });
    for value in fields.values_mut() {
        match value {
            Value::Object(inner) => omit_empty(inner),
            Value::Array(items) => items
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(omit_empty),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;

    #[test]
    fn statuses_read_as_the_real_servers() {
        let pods = builtin::definitions()
            .into_iter()
            .find(|d| d.plural == "pods")
            .unwrap();
        let e = ApiError::not_found(&pods, "web");
        assert_eq!(e.to_status()["message"], "pods \"web\" not found");
        assert_eq!(e.to_status()["details"]["kind"], "pods");
        let e = ApiError::invalid(
            &pods,
            "web",
            vec![
                Cause::new("FieldValueRequired", "spec.containers", "Required value"),
                Cause::new("FieldValueInvalid", "metadata.name", "Invalid value: \"A\""),
            ],
        );
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "Pod \"web\" is invalid: [spec.containers: Required value, metadata.name: Invalid value: \"A\"]"
        );
        assert_eq!(
            e.to_status()["details"]["causes"][0]["field"],
            "spec.containers"
        );
        assert_eq!(ApiError::injected(500).reason, "InternalError");
        assert_eq!(ApiError::modified(&pods, "web").reason, "Conflict");
    }

    /// The wire shape of apimachinery's `NewTooLargeResourceVersionError`
    /// (`NewTimeoutError(msg, 1)` plus its cause).
    #[test]
    fn too_large_resource_version_reads_as_the_real_servers() {
        let status = ApiError::too_large_resource_version(9, 4).to_status();
        assert_eq!(
            status,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "code": 504, "reason": "Timeout",
                "message": "Timeout: Too large resource version: 9, current: 4",
                "details": {
                    "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
                    "retryAfterSeconds": 1,
                },
            })
        );
        let e = ApiError::injected(429).retry_after(3);
        assert_eq!(e.to_status()["details"]["retryAfterSeconds"], 3);
        assert_eq!(e.message, "Too many requests, please try again later.");
    }
}
