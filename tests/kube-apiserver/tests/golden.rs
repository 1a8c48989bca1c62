//! The server's answers held against what a Kubernetes v1.31.0 API server
//! answers for the operations the product uses. Every expectation here is
//! written in this file from reading Kubernetes' sources at tag v1.31.0
//! (the staging repositories `k8s.io/apimachinery`, `k8s.io/apiserver` and
//! `k8s.io/kubectl` at `v0.31.0`), citing beside it the file and lines it
//! follows; none is copied from those sources, none is produced by this
//! server. `golden/SOURCES.md` is the index.
//!
//! - A refusal is a `metav1.Status`: a [`StatusAnswer`] holds what the
//!   Kubernetes function that builds it fixes — code, reason, the message's
//!   format, the `details` fields — with `{placeholders}` for the request's
//!   own words; the test fills them in and compares the whole answer.
//! - An object is held against the `k8s-openapi` crate's type of its kind
//!   (generated from Kubernetes' OpenAPI): the answer read into the typed
//!   object and written back must be the answer again, so a field the kind
//!   does not have, a value of another JSON type or a timestamp in another
//!   format (`metav1.Time` to the second, `metav1.MicroTime` to the
//!   microsecond) is a difference.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube_test_server::{Kind, KubeApiServer};
use reqwest::Method;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::{json, Map, Value};

mod common;
use common::{answer, as_admin};

const GET: Method = Method::GET;
const POST: Method = Method::POST;
const PUT: Method = Method::PUT;
const PATCH: Method = Method::PATCH;

/// What a `metav1.Status` answer must be. It is written out as
/// `metav1.Status` serialises (apimachinery v0.31.0
/// `pkg/apis/meta/v1/types.go` 746–812): `kind` `Status`, `apiVersion`
/// `v1`, `metadata` `{}` (a struct: `omitempty` keeps it), `status`
/// `Failure` (every `New*` below sets `metav1.StatusFailure`), and
/// `message`, `details` and each field of `details` left out when empty.
struct StatusAnswer {
    code: u16,
    reason: &'static str,
    /// The message's format, `{placeholders}` for the request's words.
    message: &'static str,
    /// `details`' fields by name, their values as templates like `message`.
    details: &'static [(&'static str, &'static str)],
}

/// The `details` `NewNotFound`, `NewAlreadyExists`, `NewConflict` and
/// `NewForbidden` set (apimachinery v0.31.0 `pkg/api/errors/errors.go`
/// 149–153, 164–168, 221–225, 236–240): the resource's group, the
/// resource as `kind`, the name.
const RESOURCE_DETAILS: &[(&str, &str)] = &[
    ("name", "{name}"),
    ("group", "{group}"),
    ("kind", "{resource}"),
];

/// `NewNotFound` (apimachinery v0.31.0 `pkg/api/errors/errors.go` 143–156):
/// `%s %q not found` of the qualified resource and the name. A real server
/// answered a GET of a missing Service so in kubectl v0.31.0's recording
/// `pkg/cmd/edit/testdata/testcase-missing-service/0.response`.
const NOT_FOUND: StatusAnswer = StatusAnswer {
    code: 404,
    reason: "NotFound",
    message: r#"{gr} "{name}" not found"#,
    details: RESOURCE_DETAILS,
};

/// `NewAlreadyExists` (errors.go 158–171), as apiserver v0.31.0's
/// `TestAPIStatus` expects it (`pkg/endpoints/handlers/responsewriters/
/// status_test.go` 56–66).
const ALREADY_EXISTS: StatusAnswer = StatusAnswer {
    code: 409,
    reason: "AlreadyExists",
    message: r#"{gr} "{name}" already exists"#,
    details: RESOURCE_DETAILS,
};

/// `NewConflict` (errors.go 230–243; `TestAPIStatus`, status_test.go
/// 67–77): `Operation cannot be fulfilled on %s %q: %v`.
const CONFLICT: StatusAnswer = StatusAnswer {
    code: 409,
    reason: "Conflict",
    message: r#"Operation cannot be fulfilled on {gr} "{name}": {cause}"#,
    details: RESOURCE_DETAILS,
};

/// The cause of an update from a stale `resourceVersion`: the registry's
/// `OptimisticLockErrorMsg` (apiserver v0.31.0
/// `pkg/registry/generic/registry/store.go` 247–248, used at 714).
const OPTIMISTIC_LOCK: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// `responsewriters.Forbidden` with no reason (apiserver v0.31.0
/// `pkg/endpoints/handlers/responsewriters/errors.go` 35–49) of
/// `forbiddenMessage` (51–71) for a named resource request outside a
/// namespace, wrapped by `NewForbidden` with a name (errors.go 207–228).
const FORBIDDEN_NAMED_CLUSTER: StatusAnswer = StatusAnswer {
    code: 403,
    reason: "Forbidden",
    message: r#"{gr} "{name}" is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "{group}" at the cluster scope"#,
    details: RESOURCE_DETAILS,
};

/// The same for a named request in a namespace, which includes a
/// namespace's own path (`/api/v1/namespaces/{name}`: requestinfo.go sets
/// the request's namespace from it): `forbiddenMessage`'s namespace form.
const FORBIDDEN_NAMED_NAMESPACED: StatusAnswer = StatusAnswer {
    code: 403,
    reason: "Forbidden",
    message: r#"{gr} "{name}" is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "{group}" in the namespace "{namespace}""#,
    details: RESOURCE_DETAILS,
};

/// The same for an unnamed request in a namespace: `NewForbidden` without
/// a name (`%s is forbidden: %v`), `forbiddenMessage`'s namespace form.
const FORBIDDEN_UNNAMED_NAMESPACED: StatusAnswer = StatusAnswer {
    code: 403,
    reason: "Forbidden",
    message: r#"{gr} is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "{group}" in the namespace "{namespace}""#,
    details: &[("group", "{group}"), ("kind", "{resource}")],
};

/// `NewInvalid` (errors.go 281–310): one cause per field error (checked
/// apart, [`assert_causes`]), the message the kind, the name and the
/// field errors' aggregate ([`aggregate`]).
const INVALID: StatusAnswer = StatusAnswer {
    code: 422,
    reason: "Invalid",
    message: r#"{gk} "{name}" is invalid: {causes}"#,
    details: &[("name", "{name}"), ("group", "{group}"), ("kind", "{kind}")],
};

/// `NewResourceExpired` (errors.go 271–279) with the watch cache's message
/// `too old resource version: %d (%d)` (apiserver v0.31.0
/// `pkg/storage/cacher/watch_cache.go` 779–780): what the cacher sends as
/// the `ERROR` event of a watch from a compacted version
/// (`pkg/storage/cacher/cacher_whitebox_test.go` 619, 628).
const EXPIRED: StatusAnswer = StatusAnswer {
    code: 410,
    reason: "Expired",
    message: "too old resource version: {asked} ({oldest})",
    details: &[],
};

/// `errUnsupportedMediaType` (apiserver v0.31.0
/// `pkg/endpoints/handlers/negotiation/errors.go` 88–101), which the patch
/// handler returns for a `Content-Type` that is no patch type
/// (`pkg/endpoints/handlers/patch.go` 80–83).
const UNSUPPORTED_MEDIA_TYPE: StatusAnswer = StatusAnswer {
    code: 415,
    reason: "UnsupportedMediaType",
    message:
        "the body of the request was in an unknown format - accepted media types include: {types}",
    details: &[],
};

/// A built-in resource's patch types in the installer's order (apiserver
/// v0.31.0 `pkg/endpoints/installer.go` 874–879; their media types:
/// apimachinery `pkg/types/patch.go` 25–28), joined by `, `.
const PATCH_TYPES: &str = "application/json-patch+json, application/merge-patch+json, \
                           application/strategic-merge-patch+json, application/apply-patch+yaml";

/// A field error's body by its type (`StatusCause.reason`): what
/// `ErrorBody` starts with (apimachinery v0.31.0
/// `pkg/util/validation/field/errors.go` 51–100; the types and their
/// `String()`s: 106–166). Types without a value end there.
const CAUSE_BODIES: &[(&str, &str)] = &[
    ("FieldValueNotFound", "Not found: "),
    ("FieldValueRequired", "Required value"),
    ("FieldValueDuplicate", "Duplicate value: "),
    ("FieldValueInvalid", "Invalid value: "),
    ("FieldValueNotSupported", "Unsupported value: "),
    ("FieldValueForbidden", "Forbidden"),
    ("FieldValueTooLong", "Too long"),
    ("FieldValueTooMany", "Too many"),
    ("FieldValueTypeInvalid", "Invalid value: "),
];

/// `GroupResource.String()` and `GroupKind.String()` (apimachinery
/// v0.31.0 `pkg/runtime/schema/group_version.go` 69–74, 133–138): the name
/// alone in the core group, else `name.group`.
fn qualified(name: &str, group: &str) -> String {
    if group.is_empty() {
        name.to_string()
    } else {
        format!("{name}.{group}")
    }
}

/// `template` with every `{word}` of `words` filled in; a placeholder
/// left unfilled fails the test (a word the test forgot).
fn fill(template: &str, words: &[(&str, String)]) -> String {
    let mut text = template.to_string();
    for (word, value) in words {
        text = text.replace(&format!("{{{word}}}"), value);
    }
    assert!(
        !text.contains('{'),
        "{template}: a placeholder is left in {text:?}"
    );
    text
}

/// The whole answer `status` makes with `words`, as it is serialised.
fn expected(status: &StatusAnswer, words: &[(&str, String)]) -> Value {
    let details: Map<String, Value> = status
        .details
        .iter()
        .map(|(key, template)| (key.to_string(), fill(template, words)))
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| (key, Value::from(value)))
        .collect();
    let mut out = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": status.reason, "code": status.code,
    });
    let message = fill(status.message, words);
    if !message.is_empty() {
        out["message"] = Value::from(message);
    }
    if !details.is_empty() {
        out["details"] = Value::Object(details);
    }
    out
}

/// The words of a request on `resource` in `group`: `{resource}`,
/// `{group}` and the qualified `{gr}`, with `more`.
fn words(
    group: &str,
    resource: &str,
    more: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("resource", resource.to_string()),
        ("group", group.to_string()),
        ("gr", qualified(resource, group)),
    ];
    out.extend(more.iter().map(|(k, v)| (*k, v.to_string())));
    out
}

/// A client without credentials: `system:anonymous`'s.
fn anonymous() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// A client as the tests' own user unless a request names another.
fn client(kube: &KubeApiServer) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10));
    as_admin(builder, kube).build().unwrap()
}

/// `method path` with a JSON `body`, as `token`'s user if any (else the
/// tests' own).
async fn call(
    kube: &KubeApiServer,
    method: Method,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut request = client(kube).request(method, format!("{}{path}", kube.url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    answer(request).await
}

async fn get(kube: &KubeApiServer, path: &str) -> (u16, Value) {
    call(kube, GET, path, None, None).await
}

/// Every way `actual` differs from `want`: keys missing or extra at any
/// level, arrays of another length, other values.
fn differences(want: &Value, actual: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(want, actual, "", &mut out);
    out
}

fn walk(want: &Value, actual: &Value, path: &str, out: &mut Vec<String>) {
    match (want, actual) {
        (Value::Object(w), Value::Object(a)) => {
            for key in w.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{key}: missing"));
            }
            for (key, value) in a {
                let here = format!("{path}.{key}");
                match w.get(key) {
                    None => out.push(format!("{here}: not expected ({value})")),
                    Some(w) => walk(w, value, &here, out),
                }
            }
        }
        (Value::Array(w), Value::Array(a)) if w.len() == a.len() => {
            for (i, (w, a)) in w.iter().zip(a).enumerate() {
                walk(w, a, &format!("{path}[{i}]"), out);
            }
        }
        _ if want == actual => {}
        _ => out.push(format!("{path}: {actual} where {want} is expected")),
    }
}

#[track_caller]
fn assert_same(what: &str, diffs: Vec<String>, actual: &Value) {
    assert!(
        diffs.is_empty(),
        "{what} differs from a real server's answer:\n  {}\nthe answer: {actual}",
        diffs.join("\n  ")
    );
}

/// An answer with `want`'s code and exactly `want`'s body.
#[track_caller]
fn assert_answer(what: &str, want: &Value, (code, body): (u16, Value)) {
    assert_eq!(
        Some(u64::from(code)),
        want["code"].as_u64(),
        "{what}: {body}"
    );
    assert_same(what, differences(want, &body), &body);
}

/// An object read into `K`, the `k8s-openapi` type of its kind, and
/// written back: the same JSON, or the differences (a field `K` drops as
/// unknown, a value `K` writes in another type or format). `K` writes
/// `kind` and `apiVersion` always; `typed` says whether `object` has them
/// (list items of built-in kinds do not).
fn round_trip<K: Serialize + DeserializeOwned>(object: &Value, typed: bool) -> Vec<String> {
    let read: K = match serde_json::from_value(object.clone()) {
        Ok(read) => read,
        Err(e) => return vec![format!("not a {}: {e}", std::any::type_name::<K>())],
    };
    let mut back = serde_json::to_value(read).unwrap();
    if !typed {
        let back = back.as_object_mut().unwrap();
        back.remove("kind");
        back.remove("apiVersion");
    }
    differences(&back, object)
}

/// A GET of an object that does not exist.
#[tokio::test]
async fn a_missing_object_is_the_real_404() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let want = expected(&NOT_FOUND, &words("", "services", &[("name", "absent")]));
    let answer = get(&kube, "/api/v1/namespaces/default/services/absent").await;
    assert_answer("GET of a missing Service", &want, answer);
}

/// A request RBAC denies, named and cluster-scoped, a namespace's own
/// (named, in itself), and unnamed in a namespace of a named API group.
#[tokio::test]
async fn a_denied_request_is_the_real_403() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let token = kube.token_for("ci-user");

    let want = expected(
        &FORBIDDEN_NAMED_CLUSTER,
        &words(
            "",
            "nodes",
            &[("name", "n1"), ("user", "ci-user"), ("verb", "get")],
        ),
    );
    let answer = call(&kube, GET, "/api/v1/nodes/n1", None, Some(&token)).await;
    assert_answer("a denied named get", &want, answer);

    let want = expected(
        &FORBIDDEN_NAMED_NAMESPACED,
        &words(
            "",
            "namespaces",
            &[
                ("name", "team-a"),
                ("user", "ci-user"),
                ("verb", "get"),
                ("namespace", "team-a"),
            ],
        ),
    );
    let answer = call(&kube, GET, "/api/v1/namespaces/team-a", None, Some(&token)).await;
    assert_answer("a denied get of a namespace", &want, answer);

    let want = expected(
        &FORBIDDEN_UNNAMED_NAMESPACED,
        &words(
            "coordination.k8s.io",
            "leases",
            &[
                ("user", "ci-user"),
                ("verb", "list"),
                ("namespace", "team-b"),
            ],
        ),
    );
    let path = "/apis/coordination.k8s.io/v1/namespaces/team-b/leases";
    let answer = call(&kube, GET, path, None, Some(&token)).await;
    assert_answer("a denied list", &want, answer);
}

/// A request without credentials is `system:anonymous`'s, in group
/// `system:unauthenticated` (apiserver v0.31.0
/// `pkg/authentication/request/anonymous/anonymous.go`, `NewAuthenticator`). The
/// default policy binds that group to `system:public-info-viewer` alone
/// (kubernetes v1.31.0 `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`,
/// `ClusterRoles`: `get` on `/healthz`, `/livez`, `/readyz`, `/version`,
/// `/version/`; `ClusterRoleBindings`: `system:discovery` and
/// `system:basic-user` to `system:authenticated` only), so it may read
/// those paths and gets `responsewriters.Forbidden`'s 403 for anything
/// else: a resource request as any user's, a non-resource one with
/// `forbiddenMessage`'s path form (`User %q cannot %s path %q`, errors.go
/// 51–71) through `NewForbidden` of an empty GroupResource (errors.go
/// 207–228: the message `forbidden: %v`, and `Details` set, though empty,
/// so serialised as `{}` — `*StatusDetails` is left out only when nil,
/// types.go 746–812).
#[tokio::test]
async fn an_anonymous_request_may_read_the_public_paths_only() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let as_anonymous = |method: Method, path: &str, body: Option<Value>| {
        let mut request = anonymous().request(method, format!("{}{path}", kube.url()));
        if let Some(body) = body {
            request = request.json(&body);
        }
        answer(request)
    };
    for path in ["/healthz", "/livez", "/readyz", "/version", "/version/"] {
        let (code, body) = as_anonymous(GET, path, None).await;
        assert_eq!(code, 200, "GET {path} without credentials: {body}");
    }

    for path in ["/api", "/apis", "/openapi/v3"] {
        let want = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\""),
            "reason": "Forbidden", "details": {}, "code": 403,
        });
        let answer = as_anonymous(GET, path, None).await;
        assert_answer(&format!("GET {path} without credentials"), &want, answer);
    }

    let want = expected(
        &FORBIDDEN_UNNAMED_NAMESPACED,
        &words(
            "",
            "pods",
            &[
                ("user", "system:anonymous"),
                ("verb", "list"),
                ("namespace", "x"),
            ],
        ),
    );
    let answer = as_anonymous(GET, "/api/v1/namespaces/x/pods", None).await;
    assert_answer("a list without credentials", &want, answer);

    let want = expected(
        &FORBIDDEN_UNNAMED_NAMESPACED,
        &words(
            "",
            "configmaps",
            &[
                ("user", "system:anonymous"),
                ("verb", "create"),
                ("namespace", "default"),
            ],
        ),
    );
    let sent = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let path = "/api/v1/namespaces/default/configmaps";
    let answer = as_anonymous(POST, path, Some(sent)).await;
    assert_answer("a create without credentials", &want, answer);
    assert!(kube.get(Kind::ConfigMap, Some("default"), "c").is_none());

    // deploy-check fails on any request without credentials in the audit
    // files; these were made on purpose.
    kube.clear_requests();
}

/// `ErrorList.ToAggregate()` printed (apimachinery v0.31.0
/// `pkg/util/errors/errors.go` 69–95) of field errors printed as
/// `field: body` (`pkg/util/validation/field/errors.go` 41–43): one bare,
/// several (distinct) in brackets, joined by `, `.
fn aggregate(causes: &[Value]) -> String {
    let mut printed: Vec<String> = Vec::new();
    for cause in causes {
        let one = format!(
            "{}: {}",
            cause["field"].as_str().unwrap_or_default(),
            cause["message"].as_str().unwrap_or_default()
        );
        if !printed.contains(&one) {
            printed.push(one);
        }
    }
    match printed.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// An object's keys, sorted.
fn keys_of(object: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = object
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

/// Each cause is a `StatusCause` from a field error (errors.go 284–290):
/// exactly `reason` (its type), `message` (its body, which starts as
/// [`CAUSE_BODIES`] says for the type) and `field`.
#[track_caller]
fn assert_causes(causes: &[Value]) {
    assert!(!causes.is_empty(), "an Invalid answer names its causes");
    for cause in causes {
        assert_eq!(keys_of(cause), ["field", "message", "reason"], "{cause}");
        let reason = cause["reason"].as_str().unwrap();
        let body = CAUSE_BODIES.iter().find(|(r, _)| *r == reason);
        let Some((_, body)) = body else {
            panic!("{reason} is no field error type: {cause}")
        };
        let message = cause["message"].as_str().unwrap();
        assert!(
            message.starts_with(body),
            "{reason} starts {body:?}: {cause}"
        );
    }
}

/// A write refused for two fields: 422 `Invalid`, one cause each, the
/// message made of the causes.
#[tokio::test]
async fn a_refused_update_is_the_real_422() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    kube.apply(
        Kind::Secret,
        json!({ "metadata": { "name": "s1", "namespace": "default" }, "type": "Opaque" }),
    );
    let (code, body) = call(
        &kube,
        PUT,
        "/api/v1/namespaces/default/secrets/s1",
        Some(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "s1", "namespace": "default" },
            "type": "example.com/other",
            "data": { "a b": "eA==" },
        })),
        None,
    )
    .await;
    let causes = body["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(causes.len(), 2, "a changed type and a bad key: {body}");
    assert_causes(&causes);
    let mut want = expected(
        &INVALID,
        &[
            ("gk", qualified("Secret", "")),
            ("kind", "Secret".into()),
            ("group", String::new()),
            ("name", "s1".into()),
            ("causes", aggregate(&causes)),
        ],
    );
    want["details"]["causes"] = Value::Array(causes);
    assert_answer("a refused update", &want, (code, body));
}

/// A ConfigMap read back, and a list of ConfigMaps: each item a
/// ConfigMap without `kind` and `apiVersion`, and list metadata holding
/// the list's `resourceVersion` — as a real server answered in kubectl
/// v0.31.0's recording `pkg/cmd/edit/testdata/testcase-list-errors/
/// 0.response` (lines 1–8: `kind`, `apiVersion`, `metadata`, `items`;
/// 9–22: an item of `metadata` and `data` only), less `selfLink`, which
/// servers stopped setting in v1.20 (KEP-1164).
#[tokio::test]
async fn an_object_and_a_list_are_the_real_ones() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let sent = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "settings" }, "data": { "a": "1", "b": "two" },
    });
    let (code, created) = call(&kube, POST, path, Some(sent.clone()), None).await;
    assert_eq!(code, 201, "{created}");
    let (code, read) = get(&kube, &format!("{path}/settings")).await;
    assert_eq!(code, 200, "{read}");
    assert_eq!(read["data"], sent["data"], "{read}");
    assert_same("a ConfigMap", round_trip::<ConfigMap>(&read, true), &read);

    let (code, list) = get(&kube, path).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(
        keys_of(&list),
        ["apiVersion", "items", "kind", "metadata"],
        "{list}"
    );
    assert_eq!(
        (&list["kind"], &list["apiVersion"]),
        (&json!("ConfigMapList"), &json!("v1"))
    );
    let metadata = list["metadata"].as_object().unwrap();
    assert!(metadata["resourceVersion"].is_string(), "{list}");
    assert!(!metadata.contains_key("selfLink"), "{list}");
    let [item] = list["items"].as_array().unwrap().as_slice() else {
        panic!("one ConfigMap: {list}")
    };
    assert!(
        item.get("kind").is_none() && item.get("apiVersion").is_none(),
        "{item}"
    );
    assert_same(
        "a ConfigMapList's item",
        round_trip::<ConfigMap>(item, false),
        item,
    );
}

/// A Lease (whose times are `MicroTime`), a Namespace and a Secret as the
/// server answers a create and a read: each exactly what its `k8s-openapi`
/// type reads and writes back.
#[tokio::test]
async fn objects_are_shaped_as_their_kinds() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": { "name": "leader", "labels": { "app": "x" } },
        "spec": {
            "holderIdentity": "a", "leaseDurationSeconds": 15,
            "acquireTime": "2024-05-01T10:00:00.000000Z",
            "renewTime": "2024-05-01T10:00:05.123456Z", "leaseTransitions": 0,
        },
    });
    let namespace =
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "team-a" } });
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "kubeconfig", "annotations": { "a": "b" } },
        "data": { "kubeconfig": "eA==" },
    });
    type Check = fn(&Value, bool) -> Vec<String>;
    let cases: [(&str, Value, Check); 3] = [
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            lease,
            round_trip::<Lease>,
        ),
        ("/api/v1/namespaces", namespace, round_trip::<Namespace>),
        (
            "/api/v1/namespaces/default/secrets",
            secret,
            round_trip::<Secret>,
        ),
    ];
    for (path, object, check) in cases {
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        let (code, created) = call(&kube, POST, path, Some(object), None).await;
        assert_eq!(code, 201, "{created}");
        assert_same(path, check(&created, true), &created);
        let (code, read) = get(&kube, &format!("{path}/{name}")).await;
        assert_eq!(code, 200, "{read}");
        assert_same(path, check(&read, true), &read);
    }
}

/// A create of a name that exists, and an update from a stale
/// `resourceVersion`.
#[tokio::test]
async fn a_taken_name_and_a_stale_update_are_the_real_409s() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let secret = |rv: Option<&str>, value: &str| {
        let mut s = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "taken", "namespace": "default" },
            "data": { "k": value },
        });
        if let Some(rv) = rv {
            s["metadata"]["resourceVersion"] = json!(rv);
        }
        s
    };
    let path = "/api/v1/namespaces/default/secrets";
    let (code, created) = call(&kube, POST, path, Some(secret(None, "eA==")), None).await;
    assert_eq!(code, 201, "{created}");
    let first_rv = created["metadata"]["resourceVersion"].as_str().unwrap();

    let want = expected(&ALREADY_EXISTS, &words("", "secrets", &[("name", "taken")]));
    let answer = call(&kube, POST, path, Some(secret(None, "eA==")), None).await;
    assert_answer("a create of a taken name", &want, answer);

    let path = format!("{path}/taken");
    let (code, _) = call(
        &kube,
        PUT,
        &path,
        Some(secret(Some(first_rv), "eQ==")),
        None,
    )
    .await;
    assert_eq!(code, 200);
    let want = expected(
        &CONFLICT,
        &words(
            "",
            "secrets",
            &[("name", "taken"), ("cause", OPTIMISTIC_LOCK)],
        ),
    );
    let answer = call(
        &kube,
        PUT,
        &path,
        Some(secret(Some(first_rv), "eg==")),
        None,
    )
    .await;
    assert_answer("an update from a stale resourceVersion", &want, answer);
}

/// A watch from a `resourceVersion` compacted away: HTTP 200 and one
/// `ERROR` event (`metav1.WatchEvent`, apimachinery v0.31.0
/// `pkg/apis/meta/v1/watch.go` 31–40: `type` and `object`) holding the
/// expired Status.
#[tokio::test]
async fn a_watch_from_a_compacted_version_is_the_real_410_event() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let old = kube.resource_version();
    kube.apply(
        Kind::ConfigMap,
        json!({ "metadata": { "name": "a", "namespace": "default" } }),
    );
    kube.compact();
    let response = client(&kube)
        .get(format!(
            "{}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={old}",
            kube.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let [event] = lines.as_slice() else {
        panic!("one event, then the end: {text}")
    };
    // The second number is the cache's oldest version less one, which only
    // the server knows; it must be a version after the one asked for.
    let message = event["object"]["message"].as_str().unwrap_or_default();
    let oldest = message
        .rsplit_once(" (")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no oldest version in {message:?}"));
    assert!(oldest > old, "{message}");
    let status = expected(
        &EXPIRED,
        &[("asked", old.to_string()), ("oldest", oldest.to_string())],
    );
    let want = json!({ "type": "ERROR", "object": status });
    assert_same(
        "a watch from a compacted resourceVersion",
        differences(&want, event),
        event,
    );
}

/// A PATCH in a format that is not a patch (`application/json`, as `call`
/// sends): 415 naming the built-in kinds' patch types, as the apiserver's
/// patch handler answers before it looks for the object.
#[tokio::test]
async fn a_body_that_is_no_patch_is_the_real_415() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let want = expected(
        &UNSUPPORTED_MEDIA_TYPE,
        &[("types", PATCH_TYPES.to_string())],
    );
    let path = "/api/v1/namespaces/default/configmaps/settings";
    let answer = call(&kube, PATCH, path, Some(json!({ "data": {} })), None).await;
    assert_answer("a PATCH of application/json", &want, answer);
}
