//! Admission, in the real API server's order for a create or update:
//! mutating hooks, then schema and kind validation (the store's part),
//! then ValidatingAdmissionPolicies, then validating hooks.
//!
//! Hooks ([`MutatingHook`], [`ValidatingHook`]) are how in-process models
//! of other systems (Liqo's webhooks, say) take part, registered with
//! [`crate::KubeApiServer::add_mutating_hook`] and
//! [`crate::KubeApiServer::add_validating_hook`]; a refusal is answered as
//! the API server answers a webhook's (`ToStatusErr`,
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/errors/statuserror.go`).
//!
//! ValidatingAdmissionPolicies and their bindings
//! (`admissionregistration.k8s.io/v1`) stored in the server are evaluated
//! with the same CEL environment as CRD rules ([`crate::cel`]), following
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/`
//! (`dispatcher.go`, `validator.go`): `matchConstraints` and the binding's
//! `matchResources` (resource rules, namespace and object selectors),
//! `matchConditions`, `variables`, `validations` with `message`,
//! `messageExpression` and `reason`, `failurePolicy`, and the binding's
//! `validationActions` (only `Deny` refuses). The refusal: `<resource>
//! "<name>" is forbidden: ValidatingAdmissionPolicy '<p>' with binding
//! '<b>' denied request: <message>`, code from the reason (422 for the
//! default `Invalid`). Not evaluated, so refused loudly when a policy
//! uses them: `paramKind`, `auditAnnotations`, the `authorizer` variable.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::cel::{self, CelValue};
use crate::crd::ResourceDef;
use crate::status::ApiError;

/// The group the policy kinds are served in.
pub const GROUP: &str = "admissionregistration.k8s.io";

/// What a hook or policy is asked about.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// `CREATE` or `UPDATE`.
    pub operation: &'a str,
    pub def: &'a ResourceDef,
    /// `""`, or `status` for a write to the status subresource.
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub object: &'a Value,
    pub old_object: Option<&'a Value>,
}

/// A hook's refusal, as a webhook's `AdmissionResponse.status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The HTTP code (below 400 becomes 400, as for a webhook).
    pub code: u16,
    /// `Forbidden`, `Invalid`, … (may be empty).
    pub reason: String,
    pub message: String,
}

impl Denial {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
        }
    }

    /// The API server's answer for hook `name`'s refusal (`ToStatusErr`).
    pub fn into_error(self, name: &str) -> ApiError {
        let denied = format!("admission webhook {name:?} denied the request");
        let message = if !self.message.is_empty() {
            format!("{denied}: {}", self.message)
        } else if !self.reason.is_empty() {
            format!("{denied}: {}", self.reason)
        } else {
            format!("{denied} without explanation")
        };
        ApiError::new(self.code.max(400), &self.reason, message)
    }
}

/// A mutating admission hook: may change the object, or refuse it.
pub trait MutatingHook: Send + Sync {
    fn name(&self) -> &str;
    fn admit(&self, attributes: &Attributes<'_>, object: &mut Value) -> Result<(), Denial>;
}

/// A validating admission hook: may refuse the object, not change it.
pub trait ValidatingHook: Send + Sync {
    fn name(&self) -> &str;
    fn validate(&self, attributes: &Attributes<'_>) -> Result<(), Denial>;
}

/// The hooks registered, each list in registration order.
#[derive(Clone, Default)]
pub struct Hooks {
    pub mutating: Vec<Arc<dyn MutatingHook>>,
    pub validating: Vec<Arc<dyn ValidatingHook>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: Vec<&str>| v.join(", ");
        f.debug_struct("Hooks")
            .field(
                "mutating",
                &names(self.mutating.iter().map(|h| h.name()).collect()),
            )
            .field(
                "validating",
                &names(self.validating.iter().map(|h| h.name()).collect()),
            )
            .finish()
    }
}

impl Hooks {
    /// Run the mutating hooks in order on `object`.
    pub fn mutate(&self, attributes: &Attributes<'_>, object: &mut Value) -> Result<(), ApiError> {
        for hook in &self.mutating {
            hook.admit(attributes, object)
                .map_err(|d| d.into_error(hook.name()))?;
        }
        Ok(())
    }

    /// Run the validating hooks in order.
    pub fn validate(&self, attributes: &Attributes<'_>) -> Result<(), ApiError> {
        for hook in &self.validating {
            hook.validate(attributes)
                .map_err(|d| d.into_error(hook.name()))?;
        }
        Ok(())
    }
}

/// `matchLabels` and `matchExpressions` of a `LabelSelector`; an absent
/// selector matches everything.
fn selector_matches(selector: &Value, labels: &Value) -> Result<bool, String> {
    if selector.is_null() {
        return Ok(true);
    }
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    for (k, v) in selector["matchLabels"].as_object().into_iter().flatten() {
        if label(k) != v.as_str() {
            return Ok(false);
        }
    }
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let ok = match e["operator"].as_str().unwrap_or_default() {
            "In" => label(key).is_some_and(|l| values.contains(&l)),
            "NotIn" => label(key).is_none_or(|l| !values.contains(&l)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            other => return Err(format!("unknown label selector operator {other:?}")),
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn listed(list: &Value, value: &str) -> bool {
    list.as_array()
        .into_iter()
        .flatten()
        .any(|v| v == "*" || v.as_str() == Some(value))
}

/// Whether a `NamedRuleWithOperations` covers the request.
fn rule_matches(rule: &Value, a: &Attributes<'_>) -> bool {
    let resource = if a.subresource.is_empty() {
        a.def.plural.clone()
    } else {
        format!("{}/{}", a.def.plural, a.subresource)
    };
    let resource_ok = rule["resources"].as_array().into_iter().flatten().any(|r| {
        let r = r.as_str().unwrap_or_default();
        r == "*"
            || r == resource
            || (a.subresource.is_empty() && r == a.def.plural)
            || (r == "*/*")
            || r == format!("{}/*", a.def.plural)
    });
    let names_ok = rule["resourceNames"]
        .as_array()
        .is_none_or(|n| n.is_empty() || n.iter().any(|v| v.as_str() == Some(a.name)));
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Namespaced" => a.def.namespaced,
        "Cluster" => !a.def.namespaced,
        _ => true,
    };
    listed(&rule["apiGroups"], &a.def.group)
        && listed(&rule["apiVersions"], a.def.storage_version())
        && listed(&rule["operations"], a.operation)
        && resource_ok
        && names_ok
        && scope_ok
}

/// Whether `MatchResources` covers the request (`namespace_labels`: the
/// labels of the request's namespace).
fn resources_match(
    m: &Value,
    a: &Attributes<'_>,
    namespace_labels: &Value,
) -> Result<bool, String> {
    if m.is_null() {
        return Ok(true);
    }
    if let Some(rules) = m["resourceRules"].as_array() {
        if !rules.iter().any(|r| rule_matches(r, a)) {
            return Ok(false);
        }
    }
    if m["excludeResourceRules"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| rule_matches(r, a))
    {
        return Ok(false);
    }
    if a.def.namespaced && !selector_matches(&m["namespaceSelector"], namespace_labels)? {
        return Ok(false);
    }
    selector_matches(&m["objectSelector"], &a.object["metadata"]["labels"])
}

/// The `request` variable (an `AdmissionRequest`).
fn request(a: &Attributes<'_>, user: Option<&crate::rbac::UserInfo>) -> Value {
    let user_info = user.map_or(
        json!({}),
        |u| json!({"username": u.name, "groups": u.groups}),
    );
    let version = a.def.storage_version();
    json!({
        "operation": a.operation,
        "name": a.name,
        "namespace": a.namespace,
        "kind": {"group": a.def.group, "version": version, "kind": a.def.kind},
        "resource": {"group": a.def.group, "version": version, "resource": a.def.plural},
        "subResource": a.subresource,
        "userInfo": user_info,
        "dryRun": false,
    })
}

const POLICY_VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "namespaceObject",
    "variables",
];

/// Evaluate `expr` with the policy's variables; `Err` is the API
/// server's error text for an expression that failed.
fn eval(expr: &str, vars: &[(&str, &Value)]) -> Result<CelValue, String> {
    let compiled =
        cel::compile(expr, POLICY_VARIABLES).map_err(|e| format!("compilation failed: {e}"))?;
    compiled
        .eval(vars)
        .map_err(|e| format!("expression '{expr}' resulted in error: {e}"))
}

fn cel_to_json(v: &CelValue) -> Value {
    match v {
        CelValue::Null => Value::Null,
        CelValue::Bool(b) => json!(b),
        CelValue::Int(i) => json!(i),
        CelValue::UInt(u) => json!(u),
        CelValue::Float(f) => json!(f),
        CelValue::String(s) => json!(s.as_str()),
        CelValue::List(items) => Value::Array(items.iter().map(cel_to_json).collect()),
        CelValue::Map(m) => {
            let mut out = Map::new();
            for (k, v) in m.map.iter() {
                out.insert(k.to_string(), cel_to_json(v));
            }
            Value::Object(out)
        }
        other => json!(format!("{other:?}")),
    }
}

/// One policy's decision on a request it matches: `Ok(None)` admits,
/// `Ok(Some((reason, message)))` refuses, `Err` is an evaluation error
/// (left to `failurePolicy`).
fn decide(
    policy: &Value,
    a: &Attributes<'_>,
    namespace: &Value,
    user: Option<&crate::rbac::UserInfo>,
) -> Result<Option<(String, String)>, String> {
    let spec = &policy["spec"];
    for unsupported in ["paramKind", "auditAnnotations"] {
        if !spec[unsupported].is_null() {
            return Err(format!(
                "{unsupported} is not evaluated by this test server"
            ));
        }
    }
    let object = a.object.clone();
    let old = a.old_object.cloned().unwrap_or(Value::Null);
    let req = request(a, user);
    let mut variables = Map::new();
    let mut bound = Value::Object(variables.clone());
    let vars = |bound: &Value| -> Vec<(&str, Value)> {
        vec![
            ("object", object.clone()),
            ("oldObject", old.clone()),
            ("request", req.clone()),
            ("namespaceObject", namespace.clone()),
            ("variables", bound.clone()),
        ]
    };
    let call = |expr: &str, bound: &Value| {
        let owned = vars(bound);
        let refs: Vec<(&str, &Value)> = owned.iter().map(|(n, v)| (*n, v)).collect();
        eval(expr, &refs)
    };
    for condition in spec["matchConditions"].as_array().into_iter().flatten() {
        let expr = condition["expression"].as_str().unwrap_or_default();
        match call(expr, &bound)? {
            CelValue::Bool(true) => {}
            CelValue::Bool(false) => return Ok(None),
            other => {
                return Err(format!(
                    "matchCondition '{expr}' gave {other:?}, not a bool"
                ))
            }
        }
    }
    for variable in spec["variables"].as_array().into_iter().flatten() {
        let name = variable["name"].as_str().unwrap_or_default();
        let expr = variable["expression"].as_str().unwrap_or_default();
        let value = call(expr, &bound)?;
        variables.insert(name.to_string(), cel_to_json(&value));
        bound = Value::Object(variables.clone());
    }
    for validation in spec["validations"].as_array().into_iter().flatten() {
        let expr = validation["expression"].as_str().unwrap_or_default();
        if call(expr, &bound)? == CelValue::Bool(true) {
            continue;
        }
        let message = validation["messageExpression"]
            .as_str()
            .and_then(|m| match call(m, &bound) {
                Ok(CelValue::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
                _ => None,
            })
            .or_else(|| validation["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("failed expression: {}", expr.trim()));
        let reason = validation["reason"]
            .as_str()
            .unwrap_or("Invalid")
            .to_string();
        return Ok(Some((reason, message)));
    }
    Ok(None)
}

/// `reasonToCode` of the policy dispatcher.
fn reason_to_code(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// Evaluate every binding of every policy on the request; the first `Deny`
/// refuses it.
pub fn check_policies(
    policies: &[Value],
    bindings: &[Value],
    a: &Attributes<'_>,
    namespace: &Value,
    user: Option<&crate::rbac::UserInfo>,
) -> Result<(), ApiError> {
    let namespace_labels = &namespace["metadata"]["labels"];
    for binding in bindings {
        let policy_name = binding["spec"]["policyName"].as_str().unwrap_or_default();
        let Some(policy) = policies
            .iter()
            .find(|p| p["metadata"]["name"] == policy_name)
        else {
            continue;
        };
        let spec = &policy["spec"];
        let matched =
            resources_match(&spec["matchConstraints"], a, namespace_labels).and_then(|m| {
                Ok(m && resources_match(&binding["spec"]["matchResources"], a, namespace_labels)?)
            });
        let decision = match matched {
            Ok(false) => continue,
            Ok(true) => decide(policy, a, namespace, user),
            Err(e) => Err(e),
        };
        let (reason, message) = match decision {
            Ok(None) => continue,
            Ok(Some(refusal)) => refusal,
            Err(_) if spec["failurePolicy"] == "Ignore" => continue,
            Err(e) => ("Invalid".to_string(), e),
        };
        let denies = binding["spec"]["validationActions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v == "Deny");
        if !denies {
            continue;
        }
        let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
        let text = format!(
            "ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' denied request: {message}"
        );
        let mut e = ApiError::new(
            reason_to_code(&reason),
            &reason,
            format!(
                "{} \"{}\" is forbidden: {text}",
                crate::status::qualified(a.def),
                a.name
            ),
        );
        e.details = Some(json!({
            "name": a.name, "group": a.def.group, "kind": a.def.plural,
            "causes": [{"message": text}],
        }));
        return Err(e);
    }
    Ok(())
}
