//! Validation of the built-in kinds the product writes, as the real API
//! server's registry strategies run it on create and update: object names
//! per kind, and the fields of Secrets, Events, Leases, Namespaces,
//! RoleBindings and CertificateSigningRequests. Each rule names the
//! function and file it follows in kubernetes/kubernetes, read at its
//! `master` of late 2025 (the v1.35 line). Field paths are the internal
//! type's, as the real errors print them.
//!
//! Causes are `details.causes[]` entries of the 422 the caller builds
//! ([`crate::status::ApiError::invalid`]); a body that cannot be decoded
//! (Secret data that is not base64) is a 400 ([`decode_error`]).

use serde_json::Value;

use crate::crd::ResourceDef;
use crate::status::Cause;
use crate::target::Target;

/// Lower-case RFC 1123 label: `IsDNS1123Label`
/// (`staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`).
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !label_chars(value) {
        errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errs
}

fn label_chars(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !value.starts_with('-')
        && !value.ends_with('-')
}

/// Lower-case RFC 1123 subdomain: `IsDNS1123Subdomain` (same file).
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !value.split('.').all(label_chars) {
        errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string());
    }
    errs
}

/// `IsValidPathSegmentName`
/// (`staging/src/k8s.io/apimachinery/pkg/api/validation/path/name.go`):
/// what RBAC objects may be called (`ValidateRBACName`), colons included.
pub fn path_segment_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    for bad in [".", ".."] {
        if value == bad {
            errs.push(format!("may not be '{bad}'"));
        }
    }
    for bad in ["/", "%"] {
        if value.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

/// `IsQualifiedName` (`util/validation/validation.go`): `[prefix/]name`,
/// the name at most 63 characters of `[A-Za-z0-9._-]` starting and ending
/// alphanumeric, the prefix a DNS subdomain.
pub fn qualified_name(value: &str) -> Vec<String> {
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else {
            errs.extend(
                dns1123_subdomain(p)
                    .into_iter()
                    .map(|m| format!("prefix part {m}")),
            );
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            errs.push("name part must be no more than 63 characters".to_string());
        }
        let ok = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !ok {
            errs.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string());
        }
    }
    if value.matches('/').count() > 1 {
        errs = vec!["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string()];
    }
    errs
}

/// How a kind's names are checked (its strategy's `ValidateXName`): RBAC
/// objects by `ValidateRBACName` (`pkg/apis/rbac/validation/validation.go`),
/// Namespaces by `ValidateNamespaceName` (a DNS label,
/// `pkg/apis/core/validation/validation.go`), CertificateSigningRequests
/// not at all (`ValidateCertificateRequestName`,
/// `pkg/apis/certificates/validation/validation.go`), Services by
/// `ValidateServiceName` (a DNS-1035 label), the rest as DNS subdomains
/// (`NameIsDNSSubdomain`; custom resources too).
pub fn name_errors(def: &ResourceDef, name: &str) -> Vec<String> {
    match (def.group.as_str(), def.plural.as_str()) {
        ("rbac.authorization.k8s.io", _) => path_segment_name(name),
        ("", "namespaces") => dns1123_label(name),
        ("certificates.k8s.io", "certificatesigningrequests") => Vec::new(),
        ("", "services") => {
            let mut errs = dns1123_label(name);
            if name.starts_with(|c: char| c.is_ascii_digit()) {
                errs = vec!["a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string()];
            }
            errs
        }
        _ => dns1123_subdomain(name),
    }
}

/// `IsValidLabelValue` (`util/validation/validation.go`).
pub(crate) fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let ok = value.is_empty()
        || (value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if !ok {
        errs.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string());
    }
    errs
}

/// What every write's metadata must satisfy: `ValidateObjectMeta`
/// (`staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go`) —
/// the name by the kind's rule ([`name_errors`]), labels
/// (`ValidateLabels`, `pkg/apis/meta/v1/validation/validation.go`),
/// annotations (`ValidateAnnotations`: qualified keys, 256 KiB in all) and
/// finalizers (qualified names).
pub fn object_meta(def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    for msg in name_errors(def, name) {
        out.push(invalid("metadata.name", &Value::from(name), &msg));
    }
    for (k, v) in meta["labels"].as_object().into_iter().flatten() {
        for msg in qualified_name(k) {
            out.push(invalid("metadata.labels", &Value::from(k.as_str()), &msg));
        }
        match v.as_str() {
            Some(text) => {
                for msg in label_value(text) {
                    out.push(invalid("metadata.labels", v, &msg));
                }
            }
            None => out.push(Cause::new(
                "FieldValueTypeInvalid",
                "metadata.labels",
                format!("Invalid value: {}: label values must be strings", shown(v)),
            )),
        }
    }
    let mut size = 0;
    for (k, v) in meta["annotations"].as_object().into_iter().flatten() {
        for msg in qualified_name(&k.to_lowercase()) {
            out.push(invalid(
                "metadata.annotations",
                &Value::from(k.as_str()),
                &msg,
            ));
        }
        match v.as_str() {
            Some(text) => size += k.len() + text.len(),
            None => out.push(Cause::new(
                "FieldValueTypeInvalid",
                "metadata.annotations",
                format!(
                    "Invalid value: {}: annotation values must be strings",
                    shown(v)
                ),
            )),
        }
    }
    if size > 256 * 1024 {
        out.push(Cause::new(
            "FieldValueTooLong",
            "metadata.annotations",
            "Too long: may not be more than 262144 bytes",
        ));
    }
    for (i, f) in meta["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for msg in qualified_name(f.as_str().unwrap_or_default()) {
            out.push(invalid(format!("metadata.finalizers[{i}]"), f, &msg));
        }
    }
    out
}

/// How `field.Error` shows a value: strings quoted, numbers and booleans
/// as they are.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}

pub(crate) fn invalid(field: impl Into<String>, value: &Value, detail: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {}: {detail}", shown(value)),
    )
}

pub(crate) fn required(field: impl Into<String>, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    Cause::new("FieldValueRequired", field, message)
}

pub(crate) fn forbidden(field: impl Into<String>, detail: &str) -> Cause {
    Cause::new("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

pub(crate) fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause::new(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: {}: supported values: {}",
            shown(value),
            list.join(", ")
        ),
    )
}

/// `ValidateImmutableField` (`staging/src/k8s.io/apimachinery/pkg/api/validation/generic.go`).
fn immutable(field: &str, new: &Value, old: &Value, out: &mut Vec<Cause>) {
    if new != old {
        out.push(invalid(field, new, "field is immutable"));
    }
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The defaults a real server fills in before validating, for the fields
/// these rules read: a Subject's `apiGroup` by kind (`SetDefaults_Subject`,
/// `pkg/apis/rbac/v1/defaults.go`) and a Secret's `type`
/// (`SetDefaults_Secret`, `pkg/apis/core/v1/defaults.go`), a
/// Namespace's `kubernetes.io/metadata.name` label.
pub fn default_kind(def: &ResourceDef, object: &mut Value) {
    match (def.group.as_str(), def.plural.as_str()) {
        (RBAC_GROUP, "rolebindings" | "clusterrolebindings") => {
            for subject in object["subjects"].as_array_mut().into_iter().flatten() {
                let kind = subject["kind"].as_str().unwrap_or_default();
                if matches!(kind, "User" | "Group") && text(subject, "/apiGroup").is_empty() {
                    subject["apiGroup"] = Value::from(RBAC_GROUP);
                }
            }
        }
        ("", "secrets") => {
            if text(object, "/type").is_empty() {
                object["type"] = Value::from("Opaque");
            }
            merge_string_data(object);
        }
        // Every namespace carries its own name as a label, set on create
        // and update so that no one can remove or change it
        // (`pkg/registry/core/namespace/strategy.go` `Canonicalize`,
        // `v1.LabelMetadataName`): NetworkPolicies select namespaces by it.
        ("", "namespaces") => {
            let name = text(object, "/metadata/name").to_string();
            if !object["metadata"]["labels"].is_object() {
                object["metadata"]["labels"] = Value::Object(Default::default());
            }
            object["metadata"]["labels"]["kubernetes.io/metadata.name"] = Value::from(name);
        }
        _ => {}
    }
}

/// A Secret's `stringData` is write-only: each key is merged into `data`
/// (base64), over a `data` key of the same name, and `stringData` is not
/// kept (`Convert_v1_Secret_To_core_Secret`,
/// `pkg/apis/core/v1/conversion.go`, Kubernetes v1.31.0) — so a reader
/// only ever sees `data`.
fn merge_string_data(object: &mut Value) {
    let Some(strings) = object.as_object_mut().and_then(|o| o.remove("stringData")) else {
        return;
    };
    let Value::Object(strings) = strings else {
        return;
    };
    if !object["data"].is_object() {
        object["data"] = Value::Object(Default::default());
    }
    for (key, value) in strings {
        let plain = value.as_str().unwrap_or_default();
        object["data"][key] = Value::from(base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            plain,
        ));
    }
}

/// Every violation of the kind's own rules by `object` (`old` on update;
/// `target`: the part of the object written).
pub fn kind_causes(
    def: &ResourceDef,
    object: &Value,
    old: Option<&Value>,
    target: Target,
) -> Vec<Cause> {
    let mut out = Vec::new();
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "secrets") => secret(object, old, &mut out),
        ("", "namespaces") => namespace(object, &mut out),
        ("", "events") => event(object, old, false, &mut out),
        ("events.k8s.io", "events") => event(object, old, true, &mut out),
        ("coordination.k8s.io", "leases") => lease(&object["spec"], &mut out),
        ("rbac.authorization.k8s.io", "rolebindings") => role_binding(object, old, true, &mut out),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            role_binding(object, old, false, &mut out)
        }
        ("certificates.k8s.io", "certificatesigningrequests") => csr(object, old, target, &mut out),
        _ => {}
    }
    out
}

/// Secret `data` that a real server cannot decode: values are base64 in
/// JSON (`[]byte`), so a bad one fails decoding with a 400 before any
/// validation runs.
pub fn decode_error(def: &ResourceDef, object: &Value) -> Option<String> {
    use base64::Engine;
    if !(def.group.is_empty() && def.plural == "secrets") {
        return None;
    }
    for (key, value) in object["data"].as_object().into_iter().flatten() {
        let Some(s) = value.as_str() else {
            return Some(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: data[{key}] is not a base64 string"
            ));
        };
        if let Err(e) = base64::engine::general_purpose::STANDARD.decode(s) {
            return Some(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data ({e})"
            ));
        }
    }
    None
}

/// Where a service-account token Secret names its ServiceAccount.
const SA_NAME_POINTER: &str = "/metadata/annotations/kubernetes.io~1service-account.name";

/// `ValidateSecret` and `ValidateSecretUpdate`
/// (`pkg/apis/core/validation/validation.go`).
fn secret(object: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    use base64::Engine;
    let data = object["data"].as_object();
    let mut total = 0;
    for (key, value) in data.into_iter().flatten() {
        for msg in config_map_key(key) {
            out.push(invalid(
                format!("data[{key}]"),
                &Value::from(key.as_str()),
                &msg,
            ));
        }
        total += value
            .as_str()
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
            .map_or(0, |b| b.len());
    }
    // core.MaxSecretSize
    if total > 1024 * 1024 {
        out.push(Cause::new(
            "FieldValueTooLong",
            "data",
            "Too long: may not be more than 1048576 bytes",
        ));
    }
    let has = |key: &str| data.is_some_and(|d| d.contains_key(key));
    match object["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" if text(object, SA_NAME_POINTER).is_empty() => {
            out.push(required(
                "metadata.annotations[kubernetes.io/service-account.name]",
                "",
            ));
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => {
            out.push(required("data[.dockercfg]", ""));
        }
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            out.push(required("data[.dockerconfigjson]", ""));
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            out.push(required("data[username]", ""));
            out.push(required("data[password]", ""));
        }
        "kubernetes.io/ssh-auth" if text(object, "/data/ssh-privatekey").is_empty() => {
            out.push(required("data[ssh-privatekey]", ""));
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    out.push(required(format!("data[{key}]"), ""));
                }
            }
        }
        _ => {}
    }
    if let Some(old) = old {
        // Objects stored before defaulting existed here had no type.
        let ty = |o: &Value| o["type"].as_str().unwrap_or("Opaque").to_string();
        immutable("type", &Value::from(ty(object)), &Value::from(ty(old)), out);
        if old["immutable"] == true {
            if object["immutable"] != true {
                out.push(forbidden(
                    "immutable",
                    "field is immutable when `immutable` is set",
                ));
            }
            if object["data"] != old["data"] {
                out.push(forbidden(
                    "data",
                    "field is immutable when `immutable` is set",
                ));
            }
        }
    }
}

/// `IsConfigMapKey` (`util/validation/validation.go`).
fn config_map_key(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
    {
        errs.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string());
    }
    if key == "." {
        errs.push("must not be '.'".to_string());
    } else if key == ".." {
        errs.push("must not be '..'".to_string());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// `ValidateNamespace` (`pkg/apis/core/validation/validation.go`): the
/// name rule is [`name_errors`]; the finalizers are qualified names.
fn namespace(object: &Value, out: &mut Vec<Cause>) {
    for f in object["spec"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = f.as_str().unwrap_or_default();
        for msg in qualified_name(name) {
            out.push(invalid("spec.finalizers", f, &msg));
        }
    }
}

/// `ValidateEventCreate`/`ValidateEventUpdate` and `legacyValidateEvent`
/// (`pkg/apis/core/validation/events.go`). `strict`: written through
/// events.k8s.io/v1, whose wire names (`regarding`, `note`,
/// `deprecated…`) map to the internal ones the errors name.
fn event(object: &Value, old: Option<&Value>, strict: bool, out: &mut Vec<Cause>) {
    let (involved, controller, message) = if strict {
        ("regarding", "reportingController", "note")
    } else {
        ("involvedObject", "reportingComponent", "message")
    };
    let namespace = text(object, "/metadata/namespace");
    let involved_ns = &object[involved]["namespace"];
    let involved_ns_text = involved_ns.as_str().unwrap_or_default();
    let event_time = object["eventTime"].as_str().filter(|t| !t.is_empty());
    let ns_mismatch = || {
        invalid(
            "involvedObject.namespace",
            &Value::from(involved_ns_text),
            "does not match event.namespace",
        )
    };
    if event_time.is_none() {
        if involved_ns_text.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                out.push(ns_mismatch());
            }
        } else if namespace != involved_ns_text {
            out.push(ns_mismatch());
        }
    } else {
        if involved_ns_text.is_empty() && namespace != "default" && namespace != "kube-system" {
            out.push(ns_mismatch());
        }
        let reporting = text(object, &format!("/{controller}"));
        if reporting.is_empty() {
            out.push(required("reportingController", ""));
        }
        for msg in qualified_name(reporting) {
            out.push(invalid(
                "reportingController",
                &Value::from(reporting),
                &msg,
            ));
        }
        let limits = [
            ("reportingInstance", "reportingInstance", 128),
            ("action", "action", 128),
            ("reason", "reason", 128),
        ];
        for (wire, field, limit) in limits {
            let v = text(object, &format!("/{wire}"));
            if v.is_empty() {
                out.push(required(field, ""));
            }
            if v.len() > limit {
                out.push(invalid(
                    field,
                    &Value::from(""),
                    &format!("can have at most {limit} characters"),
                ));
            }
        }
        if text(object, &format!("/{message}")).len() > 1024 {
            out.push(invalid(
                "message",
                &Value::from(""),
                "can have at most 1024 characters",
            ));
        }
    }
    for msg in dns1123_subdomain(namespace) {
        out.push(invalid("namespace", &Value::from(namespace), &msg));
    }
    if !strict {
        return;
    }
    if let Some(old) = old {
        for (wire, field) in [
            ("regarding", "involvedObject"),
            ("reason", "reason"),
            ("note", "message"),
            ("deprecatedSource", "source"),
            ("deprecatedFirstTimestamp", "firstTimestamp"),
            ("deprecatedLastTimestamp", "lastTimestamp"),
            ("deprecatedCount", "count"),
            ("type", "type"),
            ("eventTime", "eventTime"),
            ("action", "action"),
            ("related", "related"),
            ("reportingController", "reportingController"),
            ("reportingInstance", "reportingInstance"),
        ] {
            let (new_v, old_v) = (&object[wire], &old[wire]);
            if new_v != old_v {
                // Objects are shown by Go as their struct; the message is
                // what matters here.
                out.push(invalid(
                    field,
                    if new_v.is_object() {
                        &Value::Null
                    } else {
                        new_v
                    },
                    "field is immutable",
                ));
            }
        }
        return;
    }
    if let Some(series) = object["series"].as_object() {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            out.push(invalid(
                "series.count",
                &Value::from(""),
                "should be at least 2",
            ));
        }
        if series.get("lastObservedTime").is_none_or(Value::is_null) {
            out.push(required("series.lastObservedTime", ""));
        }
    }
    if event_time.is_none() {
        out.push(required("eventTime", ""));
    }
    let ty = text(object, "/type");
    if ty != "Normal" && ty != "Warning" {
        out.push(invalid(
            "type",
            &Value::from(""),
            &format!("has invalid value: {ty}"),
        ));
    }
    for (wire, field) in [
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
    ] {
        if object[wire].as_str().is_some_and(|t| !t.is_empty()) {
            out.push(invalid(field, &Value::from(""), "needs to be unset"));
        }
    }
    if object["deprecatedCount"].as_i64().unwrap_or(0) != 0 {
        out.push(invalid("count", &Value::from(""), "needs to be unset"));
    }
    let source = &object["deprecatedSource"];
    if !text(source, "/component").is_empty() || !text(source, "/host").is_empty() {
        out.push(invalid("source", &Value::from(""), "needs to be unset"));
    }
}

/// An integer `spec.{key}` below `min` is invalid, for `detail`.
fn spec_at_least(spec: &Value, key: &str, min: i64, detail: &str, out: &mut Vec<Cause>) {
    if spec[key].as_i64().is_some_and(|n| n < min) {
        out.push(invalid(format!("spec.{key}"), &spec[key], detail));
    }
}

/// `ValidateLeaseSpec` (`pkg/apis/coordination/validation/validation.go`).
fn lease(spec: &Value, out: &mut Vec<Cause>) {
    spec_at_least(
        spec,
        "leaseDurationSeconds",
        1,
        "must be greater than 0",
        out,
    );
    spec_at_least(
        spec,
        "leaseTransitions",
        0,
        "must be greater than or equal to 0",
        out,
    );
    let preferred = text(spec, "/preferredHolder");
    if !preferred.is_empty() && text(spec, "/strategy").is_empty() {
        out.push(forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `ValidateRoleBinding`/`ValidateClusterRoleBinding`, their updates and
/// `ValidateRoleBindingSubject` (`pkg/apis/rbac/validation/validation.go`).
fn role_binding(object: &Value, old: Option<&Value>, namespaced: bool, out: &mut Vec<Cause>) {
    let role_ref = &object["roleRef"];
    let group = &role_ref["apiGroup"];
    if group.as_str() != Some(RBAC_GROUP) {
        out.push(not_supported(
            "roleRef.apiGroup",
            &group_or_empty(group),
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = role_ref["kind"].as_str().unwrap_or_default();
    if !kinds.contains(&kind) {
        out.push(not_supported("roleRef.kind", &Value::from(kind), kinds));
    }
    let name = role_ref["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        out.push(required("roleRef.name", ""));
    } else {
        for msg in path_segment_name(name) {
            out.push(invalid("roleRef.name", &Value::from(name), &msg));
        }
    }
    for (i, subject) in object["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("subjects[{i}]");
        let name = text(subject, "/name");
        if name.is_empty() {
            out.push(required(format!("{path}.name"), ""));
        }
        let api_group = &subject["apiGroup"];
        match text(subject, "/kind") {
            "ServiceAccount" => {
                if !name.is_empty() {
                    for msg in dns1123_subdomain(name) {
                        out.push(invalid(format!("{path}.name"), &Value::from(name), &msg));
                    }
                }
                if !text(subject, "/apiGroup").is_empty() {
                    out.push(not_supported(format!("{path}.apiGroup"), api_group, &[""]));
                }
                if !namespaced && text(subject, "/namespace").is_empty() {
                    out.push(required(format!("{path}.namespace"), ""));
                }
            }
            "User" | "Group" => {
                if api_group.as_str() != Some(RBAC_GROUP) {
                    out.push(not_supported(
                        format!("{path}.apiGroup"),
                        &group_or_empty(api_group),
                        &[RBAC_GROUP],
                    ));
                }
            }
            other => out.push(not_supported(
                format!("{path}.kind"),
                &Value::from(other),
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
    if let Some(old) = old {
        if old["roleRef"] != object["roleRef"] {
            out.push(Cause::new(
                "FieldValueInvalid",
                "roleRef",
                format!("Invalid value: {}: cannot change roleRef", role_ref),
            ));
        }
    }
}

/// An absent group is Go's empty string.
fn group_or_empty(v: &Value) -> Value {
    if v.is_null() {
        Value::from("")
    } else {
        v.clone()
    }
}

/// Key usages a CSR may ask for (`allValidUsages`,
/// `pkg/apis/certificates/validation/validation.go`).
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// Which of a CSR's three write paths a write takes: what
/// `certificateValidationOptions` allow on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CsrWrite {
    Main,
    /// May set `status.certificate` (`allowSettingCertificate`).
    Status,
    /// May add Approved and Denied (`allowSettingApprovalConditions`).
    Approval,
}

/// A `[]byte` field: base64 in JSON, empty when absent (or not base64, a
/// decoding error a real server answers 400 before validation).
fn bytes_field(value: &Value) -> Vec<u8> {
    use base64::Engine;
    value
        .as_str()
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .unwrap_or_default()
}

/// The conditions of a CSR.
fn csr_conditions(object: &Value) -> &[Value] {
    object["status"]["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// `validateCertificateSigningRequest`,
/// `ValidateCertificateSigningRequestSignerName` and
/// `validateCertificateSigningRequestUpdate` with the options each
/// subresource's strategy passes
/// (`pkg/apis/certificates/validation/validation.go`; the request must be a
/// PKCS#10 CSR whose signature verifies, [`crate::x509::check_request`]).
fn csr(object: &Value, old: Option<&Value>, target: Target, out: &mut Vec<Cause>) {
    let write = match target {
        Target::Approval => CsrWrite::Approval,
        Target::Status => CsrWrite::Status,
        Target::Main | Target::Finalize => CsrWrite::Main,
    };
    let spec = &object["spec"];
    let request = bytes_field(&spec["request"]);
    if let Err(e) = crate::x509::check_request(&request) {
        out.push(invalid(
            "spec.request",
            &Value::from(String::from_utf8_lossy(&request).into_owned()),
            &e,
        ));
    }
    let usages = spec["usages"].as_array().cloned().unwrap_or_default();
    if usages.is_empty() {
        out.push(required("spec.usages", "usages must be provided"));
    }
    let mut seen = Vec::new();
    for (i, usage) in usages.iter().enumerate() {
        let u = usage.as_str().unwrap_or_default();
        if !USAGES.contains(&u) {
            out.push(not_supported(format!("spec.usages[{i}]"), usage, USAGES));
        }
        if seen.contains(&u) {
            out.push(Cause::new(
                "FieldValueDuplicate",
                format!("spec.usages[{i}]"),
                format!("Duplicate value: {}", shown(usage)),
            ));
        }
        seen.push(u);
    }
    let signer = spec["signerName"].as_str().unwrap_or_default();
    if signer == "kubernetes.io/legacy-unknown" {
        out.push(invalid(
            "spec.signerName",
            &Value::from(signer),
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        signer_name(signer, out);
    }
    spec_at_least(
        spec,
        "expirationSeconds",
        600,
        "may not specify a duration less than 600 seconds (10 minutes)",
        out,
    );
    csr_condition_causes(csr_conditions(object), out);
    let certificate = bytes_field(&object["status"]["certificate"]);
    // `allowArbitraryCertificate`: an update that leaves the certificate
    // as it was, or one of a stored object whose certificate is already
    // invalid, is not held to it.
    let arbitrary = old.is_some_and(|old| {
        let before = bytes_field(&old["status"]["certificate"]);
        before == certificate || crate::x509::check_certificates(&before).is_err()
    });
    if !arbitrary {
        if let Err(e) = crate::x509::check_certificates(&certificate) {
            out.push(invalid(
                "status.certificate",
                &Value::from("<certificate data>"),
                &e,
            ));
        }
    }
    if let Some(old) = old {
        csr_update_causes(object, old, write, out);
    }
}

/// `validateConditions`: a type and a status on each, `True` the only
/// status of Approved, Denied and Failed, Approved and Denied not both,
/// no type twice.
fn csr_condition_causes(conditions: &[Value], out: &mut Vec<Cause>) {
    const ANY_STATUS: &[&str] = &["False", "True", "Unknown"];
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, condition) in conditions.iter().enumerate() {
        let field = |f: &str| format!("status.conditions[{i}].{f}");
        let kind = condition["type"].as_str().unwrap_or_default();
        if kind.is_empty() {
            out.push(required(field("type"), ""));
        }
        let allowed = if matches!(kind, "Approved" | "Denied" | "Failed") {
            &ANY_STATUS[1..2]
        } else {
            ANY_STATUS
        };
        let status = condition["status"].as_str().unwrap_or_default();
        if status.is_empty() {
            out.push(required(field("status"), ""));
        } else if !allowed.contains(&status) {
            out.push(not_supported(
                field("status"),
                &condition["status"],
                allowed,
            ));
        }
        approved |= kind == "Approved";
        denied |= kind == "Denied";
        if matches!(kind, "Approved" | "Denied") && approved && denied {
            out.push(invalid(
                field("type"),
                &Value::from(kind),
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        if seen.contains(&kind) {
            out.push(Cause::new(
                "FieldValueDuplicate",
                field("type"),
                format!("Duplicate value: {kind:?}"),
            ));
        }
        seen.push(kind);
    }
}

/// The update rules of `validateCertificateSigningRequestUpdate`: no
/// Approved, Denied or Failed condition removed; Approved and Denied added
/// or changed only through `/approval`; `status.certificate` set only
/// through `/status`, and only once.
fn csr_update_causes(object: &Value, old: &Value, write: CsrWrite, out: &mut Vec<Cause>) {
    let of_type = |o: &Value, t: &str| -> Vec<Value> {
        csr_conditions(o)
            .iter()
            .filter(|c| c["type"] == t)
            .cloned()
            .collect()
    };
    for t in ["Approved", "Denied", "Failed"] {
        if of_type(object, t).len() < of_type(old, t).len() {
            out.push(forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {t:?}"),
            ));
        }
    }
    if write != CsrWrite::Approval {
        for t in ["Approved", "Denied"] {
            let (new, before) = (of_type(object, t), of_type(old, t));
            if new.len() > before.len() {
                out.push(forbidden(
                    "status.conditions",
                    &format!("updates may not add a condition of type {t:?}"),
                ));
            } else if new.len() == before.len() && new != before {
                // The real message goes on with a cmp.Diff of the two.
                out.push(forbidden(
                    "status.conditions",
                    &format!("updates may not modify a condition of type {t:?}"),
                ));
            }
        }
    }
    let (new_cert, old_cert) = (
        bytes_field(&object["status"]["certificate"]),
        bytes_field(&old["status"]["certificate"]),
    );
    if new_cert != old_cert {
        if write != CsrWrite::Status {
            out.push(forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !old_cert.is_empty() {
            out.push(forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
}

/// `ValidateCertificateSigningRequestSignerName`: `example.com/name`.
fn signer_name(signer: &str, out: &mut Vec<Cause>) {
    const FIELD: &str = "spec.signerName";
    if signer.is_empty() {
        out.push(required(FIELD, "signerName must be provided"));
        return;
    }
    let segments: Vec<&str> = signer.split('/').collect();
    let [domain, path] = segments.as_slice() else {
        out.push(invalid(
            FIELD,
            &Value::from(signer),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    if domain.len() > 253 {
        out.push(Cause::new(
            "FieldValueTooLong",
            FIELD,
            "Too long: may not be more than 253 bytes",
        ));
    }
    first_bad_part(FIELD, domain, dns1123_label, out);
    if domain.split('.').count() < 2 {
        out.push(invalid(
            FIELD,
            &Value::from(*domain),
            "should be a domain with at least two segments separated by dots",
        ));
    }
    first_bad_part(FIELD, path, dns1123_subdomain, out);
    if signer.len() > 253 + 253 + 63 + 2 {
        out.push(Cause::new(
            "FieldValueTooLong",
            FIELD,
            "Too long: may not be more than 571 bytes",
        ));
    }
}

/// The errors of the first dot-separated part of `value` that `check`
/// refuses, each naming that part (the signer name's domain and path are
/// checked so).
fn first_bad_part(field: &str, value: &str, check: fn(&str) -> Vec<String>, out: &mut Vec<Cause>) {
    if let Some((part, errs)) = value
        .split('.')
        .map(|p| (p, check(p)))
        .find(|(_, e)| !e.is_empty())
    {
        for e in errs {
            out.push(invalid(
                field,
                &Value::from(value),
                &format!("validating label {part:?}: {e}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::builtin;

    fn def(group: &str, plural: &str) -> ResourceDef {
        builtin::definitions()
            .into_iter()
            .find(|d| d.group == group && d.plural == plural)
            .unwrap_or_else(|| {
                let mut d = builtin::definitions().remove(0);
                d.group = group.into();
                d.plural = plural.into();
                d
            })
    }

    #[test]
    fn a_namespace_carries_its_name_as_a_label_whatever_was_sent() {
        let mut bare = json!({"metadata": {"name": "team"}});
        default_kind(&def("", "namespaces"), &mut bare);
        assert_eq!(
            bare["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "team"})
        );
        let mut forged = json!({"metadata": {"name": "team",
            "labels": {"kubernetes.io/metadata.name": "kube-system", "a": "b"}}});
        default_kind(&def("", "namespaces"), &mut forged);
        assert_eq!(
            forged["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "team", "a": "b"})
        );
    }

    #[test]
    fn a_secrets_string_data_is_merged_into_data_and_not_kept() {
        let mut secret = json!({"metadata": {"name": "s"},
            "data": {"a": "b2xk", "b": "Yg=="}, "stringData": {"a": "new", "c": "c"}});
        default_kind(&def("", "secrets"), &mut secret);
        assert_eq!(
            secret["data"],
            json!({"a": "bmV3", "b": "Yg==", "c": "Yw=="})
        );
        assert!(secret.get("stringData").is_none(), "{secret}");
        assert_eq!(secret["type"], "Opaque");
    }

    fn causes(
        group: &str,
        plural: &str,
        object: Value,
        old: Option<Value>,
    ) -> Vec<(String, String, String)> {
        let mut out: Vec<_> = kind_causes(&def(group, plural), &object, old.as_ref(), Target::Main)
            .into_iter()
            .map(|c| (c.field, c.reason, c.message))
            .collect();
        out.sort();
        out
    }

    fn fields(list: &[(String, String, String)]) -> Vec<&str> {
        list.iter().map(|(f, _, _)| f.as_str()).collect()
    }

    #[test]
    fn names_follow_each_kinds_rule() {
        let ns = def("", "namespaces");
        assert!(
            name_errors(&ns, "a.b").len() == 1,
            "a namespace is a DNS label"
        );
        assert!(name_errors(&def("", "secrets"), "a.b").is_empty());
        let rb = def(RBAC_GROUP, "rolebindings");
        assert!(
            name_errors(&rb, "system:liqo:a").is_empty(),
            "RBAC names may hold colons"
        );
        assert_eq!(name_errors(&rb, "a/b"), ["may not contain '/'"]);
        assert!(name_errors(
            &def("certificates.k8s.io", "certificatesigningrequests"),
            "Any_Name"
        )
        .is_empty());
        assert_eq!(name_errors(&def("", "secrets"), "Bad_Name").len(), 1);
    }

    #[test]
    fn metadata_labels_annotations_and_finalizers() {
        let object = json!({"metadata": {"name": "ok", "labels": {"a/b/c": "x", "k": "-bad-", "n": 1},
            "annotations": {"Fine.Example/Key": "v", "bad key": "v"}, "finalizers": ["liqo.io/x", "not ok"]}});
        let got: Vec<_> = object_meta(&def("", "secrets"), &object)
            .into_iter()
            .map(|c| (c.field, c.reason))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "metadata.labels".to_string(),
                    "FieldValueInvalid".to_string()
                ),
                (
                    "metadata.labels".to_string(),
                    "FieldValueInvalid".to_string()
                ),
                (
                    "metadata.labels".to_string(),
                    "FieldValueTypeInvalid".to_string()
                ),
                (
                    "metadata.annotations".to_string(),
                    "FieldValueInvalid".to_string()
                ),
                (
                    "metadata.finalizers[1]".to_string(),
                    "FieldValueInvalid".to_string()
                ),
            ]
        );
    }

    #[test]
    fn secrets_keys_types_and_immutability() {
        let bad = json!({"metadata": {"name": "s", "namespace": "a"}, "type": "kubernetes.io/tls",
            "data": {"bad key": "YQ==", "tls.crt": "YQ=="}});
        let got = causes("", "secrets", bad, None);
        assert_eq!(fields(&got), ["data[bad key]", "data[tls.key]"]);
        assert_eq!(got[1].2, "Required value");
        let old = json!({"type": "Opaque", "immutable": true, "data": {"a": "YQ=="}});
        let new =
            json!({"type": "kubernetes.io/basic-auth", "data": {"a": "Yg==", "username": "YQ=="}});
        let got = causes("", "secrets", new, Some(old));
        assert_eq!(fields(&got), ["data", "immutable", "type"]);
        assert_eq!(
            got[2].2,
            "Invalid value: \"kubernetes.io/basic-auth\": field is immutable"
        );
        let secrets = def("", "secrets");
        assert!(decode_error(&secrets, &json!({"data": {"a": "not base64!"}})).is_some());
        assert!(decode_error(&secrets, &json!({"data": {"a": "YQ=="}})).is_none());
    }

    #[test]
    fn csrs_duration_signer_and_usages() {
        use base64::Engine;
        let pem = base64::engine::general_purpose::STANDARD.encode(crate::x509::test_request("a"));
        let good = json!({"spec": {"request": pem, "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"], "expirationSeconds": 600}});
        assert!(causes(
            "certificates.k8s.io",
            "certificatesigningrequests",
            good.clone(),
            None
        )
        .is_empty());
        let mut bad = good.clone();
        bad["spec"]["expirationSeconds"] = json!(300);
        bad["spec"]["signerName"] = json!("liqo");
        bad["spec"]["usages"] = json!(["client auth", "client auth", "flying"]);
        let got = causes(
            "certificates.k8s.io",
            "certificatesigningrequests",
            bad,
            None,
        );
        assert_eq!(
            fields(&got),
            [
                "spec.expirationSeconds",
                "spec.signerName",
                "spec.usages[1]",
                "spec.usages[2]"
            ]
        );
        assert_eq!(
            got[0].2,
            "Invalid value: 300: may not specify a duration less than 600 seconds (10 minutes)"
        );
        let mut approved = good.clone();
        approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
        let got = causes(
            "certificates.k8s.io",
            "certificatesigningrequests",
            approved,
            Some(good),
        );
        assert_eq!(
            got[0].2,
            "Forbidden: updates may not add a condition of type \"Approved\""
        );
    }

    #[test]
    fn leases_events_namespaces_and_role_bindings() {
        let got = causes(
            "coordination.k8s.io",
            "leases",
            json!({"spec": {"leaseDurationSeconds": 0, "preferredHolder": "a"}}),
            None,
        );
        assert_eq!(
            fields(&got),
            ["spec.leaseDurationSeconds", "spec.preferredHolder"]
        );
        let ev = json!({"metadata": {"name": "e", "namespace": "a"}, "eventTime": "2024-01-01T00:00:00.000000Z",
            "regarding": {"namespace": "a"}, "reportingController": "liqo.io/broker", "reportingInstance": "x",
            "action": "Buy", "reason": "Bought", "type": "Normal"});
        assert!(causes("events.k8s.io", "events", ev.clone(), None).is_empty());
        let mut bad = ev.clone();
        bad["type"] = json!("Info");
        bad["action"] = json!("");
        bad["regarding"]["namespace"] = json!("b");
        assert_eq!(
            fields(&causes("events.k8s.io", "events", bad, None)),
            ["action", "type"]
        );
        let core = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "b"}});
        assert_eq!(
            fields(&causes("", "events", core, None)),
            ["involvedObject.namespace"]
        );
        let got = causes(
            "",
            "namespaces",
            json!({"spec": {"finalizers": ["a/b/c"]}}),
            None,
        );
        assert_eq!(fields(&got), ["spec.finalizers"]);
        let rb = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "a"}]});
        assert!(causes(RBAC_GROUP, "rolebindings", rb.clone(), None).is_empty());
        let mut changed = rb.clone();
        changed["roleRef"]["name"] = json!("other");
        changed["subjects"] =
            json!([{"kind": "User", "name": "u"}, {"kind": "Robot", "name": "r"}]);
        let got = causes(RBAC_GROUP, "rolebindings", changed, Some(rb));
        assert_eq!(
            fields(&got),
            ["roleRef", "subjects[0].apiGroup", "subjects[1].kind"]
        );
        assert_eq!(
            got[1].2,
            "Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\""
        );
    }
}
