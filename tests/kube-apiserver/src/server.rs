//! HTTP: the routes of a real API server (`/api/v1/…`,
//! `/apis/{group}/{version}/…`, `namespaces/{ns}/…`, `{name}`, `/status`),
//! each request in a real server's order: authenticated, turned into its
//! RBAC attributes and authorized ([`crate::rbac`]), logged, checked
//! against injected faults, and served by the store (which admits writes,
//! with the user RBAC holds to: [`crate::store::World::create_as`]), list
//! or watch.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::{json, Value};

use crate::audit::{query_bool, rbac_verb, AuditRecord, ResourceAttributes, SeenRequest};
use crate::crd::ResourceDef;
use crate::faults::Injected;
use crate::field_validation::{self, Directive, FieldCheck, Operation};
use crate::patch::PatchType;
use crate::rbac::{self, Attributes, Decision, Policy, UserInfo, MASTERS};
use crate::selector::Selector;
use crate::shared::{error_response, json_response, ClientCertUser, Shared};
use crate::status::ApiError;
use crate::store::{Deleter, PatchOptions, Target, Write, Writer};
use crate::{
    binding, csr, discovery, eviction, faults, list, openapi, protobuf, watch as watching,
};

/// A request path to a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    group: String,
    version: String,
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
    subresource: Option<String>,
}

enum Parsed {
    /// A non-resource URL and its document (`None`: not found).
    Discovery(Option<Value>),
    Resource(Route),
}

fn parse_path(shared: &Shared, path: &str) -> Parsed {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let world = shared.world();
    let registry = &world.registry;
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Parsed::Discovery(Some(discovery::version())),
        ["healthz" | "livez" | "readyz"] => return Parsed::Discovery(Some(json!("ok"))),
        ["api"] => {
            return Parsed::Discovery(Some(discovery::api_versions(&shared.addr.to_string())))
        }
        ["apis"] => return Parsed::Discovery(Some(discovery::group_list(registry))),
        ["openapi", "v3"] => return Parsed::Discovery(Some(openapi::root(registry))),
        ["openapi", "v3", rest @ ..] => {
            return Parsed::Discovery(openapi::document(registry, rest))
        }
        ["api", v] => return Parsed::Discovery(discovery::resource_list(registry, "", v)),
        ["apis", g] => return Parsed::Discovery(discovery::group(registry, g)),
        ["apis", g, v] => return Parsed::Discovery(discovery::resource_list(registry, g, v)),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Parsed::Discovery(None),
    };
    let owned = |s: Option<&&str>| s.map(|s| s.to_string());
    let route = |namespace: Option<&str>, tail: &[&str]| Route {
        group: group.to_string(),
        version: version.to_string(),
        namespace: namespace.map(str::to_string),
        plural: tail.first().map(|s| s.to_string()).unwrap_or_default(),
        name: owned(tail.get(1)),
        subresource: owned(tail.get(2)),
    };
    // `NewRequestInfo` (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go):
    // `/namespaces/{ns}/{x}/…` is resource `x` in namespace `ns`, whatever
    // group serves it or not, unless `x` is one of a namespace's own
    // subresources (`namespaceSubresources`: status, finalize). A request
    // for a kind nobody serves is so authorized as what it names, then 404.
    let parsed = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if tail.len() <= 2 && !["status", "finalize"].contains(plural) =>
        {
            let mut parts = vec![*plural];
            parts.extend_from_slice(tail);
            route(Some(ns), &parts)
        }
        tail if (1..=3).contains(&tail.len()) => route(None, tail),
        _ => return Parsed::Discovery(None),
    };
    Parsed::Resource(parsed)
}

fn not_found_path() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// The handler of every request.
pub async fn handle(
    State(shared): State<Shared>,
    certificate: Option<Extension<ClientCertUser>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let authorization = headers
        .get("authorization")
        .map(|v| v.to_str().unwrap_or_default());
    let user_info = shared.authenticate(certificate.as_ref().map(|c| &c.0), authorization);
    let user = user_info.as_ref().map(|u| u.name.clone());
    // Who RBAC holds to; `None`: allowed everything.
    let restricted = user_info.as_ref().filter(|u| restricted(&shared, u));
    let route = match parse_path(&shared, &path) {
        Parsed::Discovery(_) if user.is_none() => {
            shared.world().audit.push(AuditRecord {
                user: None,
                method: method.to_string(),
                path: path.clone(),
                verb: method.as_str().to_lowercase(),
                resource: None,
                code: 401,
                field_manager: None,
            });
            return error_response(&ApiError::unauthorized());
        }
        Parsed::Discovery(document) => {
            let verb = method.as_str().to_lowercase();
            let attributes = Attributes::NonResource {
                verb: &verb,
                path: &path,
            };
            let denied = restricted.and_then(|u| denial(&shared, u, &attributes));
            let code = match (&denied, &document) {
                (Some(_), _) => 403,
                (None, Some(_)) => 200,
                (None, None) => 404,
            };
            shared.world().audit.push(AuditRecord {
                user: user.clone(),
                method: method.to_string(),
                path: path.clone(),
                verb: method.as_str().to_lowercase(),
                resource: None,
                code,
                field_manager: None,
            });
            if let Some(error) = denied {
                return error_response(&error);
            }
            return match document {
                Some(_) if method != Method::GET => {
                    error_response(&ApiError::method_not_allowed(method.as_str(), &path))
                }
                Some(doc) => json_response(200, doc),
                None => error_response(&not_found_path()),
            };
        }
        Parsed::Resource(route) => route,
    };
    let watching = query_bool(query.get("watch").map(String::as_str));
    let verb = rbac_verb(method.as_str(), route.name.is_some(), watching);
    let attributes = ResourceAttributes {
        verb: verb.to_string(),
        api_group: route.group.clone(),
        resource: route.plural.clone(),
        subresource: route.subresource.clone(),
        // A namespace's own path is in that namespace: `/namespaces/{name}`
        // sets the request's namespace (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go,
        // `currentParts[0] == "namespaces"`), so a RoleBinding there can
        // allow reading it.
        namespace: route.namespace.clone().or_else(|| {
            (route.group.is_empty() && route.plural == "namespaces")
                .then(|| route.name.clone())
                .flatten()
        }),
        name: route.name.clone().or_else(|| {
            // A list or watch of one object by `metadata.name` names it, so
            // that `resourceNames` rules can allow it (requestinfo.go,
            // `RequiresExactMatch("metadata.name")`).
            (method == Method::GET)
                .then(|| query.get("fieldSelector").and_then(|s| exact_name(s)))
                .flatten()
        }),
    };
    let field_manager = query.get("fieldManager").cloned();
    let record = |shared: &Shared, code: u16| {
        shared.world().audit.push(AuditRecord {
            user: user.clone(),
            method: method.to_string(),
            path: path.clone(),
            verb: verb.to_string(),
            resource: Some(attributes.clone()),
            code,
            field_manager: field_manager.clone(),
        });
    };
    if user.is_none() {
        // Refused before anything else is looked at, as authentication
        // comes first in a real server.
        record(&shared, 401);
        return error_response(&ApiError::unauthorized());
    }
    // Authorized before the resource is looked up, as a real server's
    // filter chain does: a forbidden request for anything is 403.
    if let Some(error) =
        restricted.and_then(|u| denial(&shared, u, &Attributes::Resource(&attributes)))
    {
        record(&shared, 403);
        return error_response(&error);
    }
    let def = {
        let mut world = shared.world();
        let def = world
            .registry
            .find(&route.group, &route.version, &route.plural);
        match def {
            Some(def) if def.namespaced || route.namespace.is_none() => {
                let fired = faults::take(&mut world.faults, &attributes);
                if fired.is_some() {
                    world.faults_fired_at.push(std::time::Instant::now());
                }
                match fired {
                    Some(Injected::Status(error, retry_after)) => {
                        drop(world);
                        record(&shared, error.code);
                        let mut response = error_response(&error);
                        if let Some(seconds) = retry_after {
                            response.headers_mut().insert("retry-after", seconds.into());
                        }
                        return response;
                    }
                    Some(Injected::Reset) => {
                        drop(world);
                        record(&shared, 200);
                        return cut_response();
                    }
                    None => {}
                }
                def
            }
            _ => {
                drop(world);
                record(&shared, 404);
                return error_response(&not_found_path());
            }
        }
    };
    let users = Users {
        restricted,
        requester: user_info.as_ref(),
    };
    // A typed client's protobuf body, read as the JSON it stands for.
    let body = match protobuf::request_body(&headers, body) {
        Ok(body) => body,
        Err(error) => {
            record(&shared, error.code);
            return error_response(&error);
        }
    };
    let response = serve(
        &shared, &def, &route, &method, &headers, &query, &body, watching, users,
    )
    .await;
    record(&shared, response.status().as_u16());
    response
}

/// The name a field selector requires exactly (`metadata.name=x` or
/// `==x` among its terms), if a valid path segment.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term
            .strip_prefix("metadata.name==")
            .or_else(|| term.strip_prefix("metadata.name="))?;
        let valid = !value.is_empty()
            && value != "."
            && value != ".."
            && !value.contains('/')
            && !value.contains('%');
        valid.then(|| value.to_string())
    })
}

/// Whether RBAC holds `user` to its bindings: when enforced, everyone but
/// the members of `system:masters`, whom the privileged-group authorizer a
/// real server puts before RBAC allows everything
/// (`pkg/kubeapiserver/authorizer/config.go`, `NewPrivilegedGroups`).
/// A request without credentials is `system:anonymous` in
/// `system:unauthenticated` (`staging/src/k8s.io/apiserver/pkg/authentication/request/anonymous/anonymous.go`)
/// and held like anyone else: the default bindings give that group
/// `system:public-info-viewer` alone ([`crate::rbac`]), so it may read
/// `/healthz`, `/livez`, `/readyz` and `/version` and nothing more — a
/// client that lost its credentials fails here as it would on a cluster.
fn restricted(shared: &Shared, user: &UserInfo) -> bool {
    shared.rbac_enforced.load(Ordering::Relaxed) && !user.in_group(MASTERS)
}

/// The roles and bindings stored now.
fn policy(shared: &Shared) -> Policy {
    shared.world().rbac_policy()
}

/// The 403 of a request RBAC does not allow, if it does not.
fn denial(shared: &Shared, user: &UserInfo, attributes: &Attributes<'_>) -> Option<ApiError> {
    match policy(shared).authorize(user, attributes) {
        Decision::Allow => None,
        Decision::Deny(reason) => Some(rbac::forbidden(user, attributes, &reason)),
    }
}

/// A 200 whose body breaks off after its first bytes: the connection is
/// closed without the end of the chunked body, as when the server or a
/// proxy in between dies mid-response.
fn cut_response() -> Response {
    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
        Ok(Bytes::from_static(b"{\"kind\":")),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "injected fault: connection reset",
        )),
    ];
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Who a request is by: the user RBAC holds to (`None`: allowed
/// everything), and whoever sent it.
#[derive(Clone, Copy)]
struct Users<'a> {
    restricted: Option<&'a UserInfo>,
    requester: Option<&'a UserInfo>,
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    shared: &Shared,
    def: &ResourceDef,
    route: &Route,
    method: &Method,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    body: &[u8],
    watching: bool,
    users: Users<'_>,
) -> Response {
    let namespaces = def.group.is_empty() && def.plural == "namespaces";
    let pods = !def.custom && def.group.is_empty() && def.plural == "pods";
    let target = match route.subresource.as_deref() {
        None | Some("binding" | "eviction") if pods => Target::Main,
        None => Target::Main,
        Some("status") if def.status_subresource => Target::Status,
        Some("finalize") if namespaces && method == Method::PUT => Target::Finalize,
        Some("approval") if csr::is_csr(def) => Target::Approval,
        Some(_) => return error_response(&not_found_path()),
    };
    if pods && route.subresource.as_deref() == Some("eviction") {
        // Before the refusal of dry runs: an eviction carries its own out
        // (`propagateDryRun`, [`crate::eviction`]).
        return match (
            method.as_str(),
            route.namespace.as_deref(),
            route.name.as_deref(),
        ) {
            ("POST", Some(ns), Some(name)) => evict_pod(shared, def, ns, name, body, query, users),
            (m, _, _) => error_response(&ApiError::method_not_allowed(m, "pods/eviction")),
        };
    }
    if query.get("dryRun").is_some_and(|d| !d.is_empty()) {
        // Refused rather than carried out: a dry run that wrote would
        // let a test pass on a write the client never meant to make.
        return error_response(&ApiError::bad_request(
            "dryRun is not supported by kube-test-server",
        ));
    }
    let ns = route.namespace.as_deref();
    let name = route.name.as_deref();
    if def.namespaced && ns.is_none() && (method != Method::GET || name.is_some()) {
        // Across namespaces there is only list and watch.
        return error_response(&not_found_path());
    }
    if route.subresource.as_deref() == Some("binding") {
        return match (method.as_str(), ns, name) {
            ("POST", Some(ns), Some(name)) => bind_pod(shared, def, ns, name, body, query),
            (m, _, _) => error_response(&ApiError::method_not_allowed(m, "pods/binding")),
        };
    }
    let version = route.version.as_str();
    let versioned = |mut o: Value| {
        o["apiVersion"] = json!(def.api_version(version));
        o
    };
    let answer = |result: Result<Value, ApiError>, code: u16| match result {
        Ok(o) => json_response(code, versioned(o)),
        Err(e) => error_response(&e),
    };
    let parse_body = || -> Result<Value, ApiError> {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))
    };
    // A DELETE's `DeleteOptions` (`Null`: none sent).
    let delete_options = || {
        if body.is_empty() {
            Ok(Value::Null)
        } else {
            parse_body()
        }
    };
    let patch_options = PatchOptions {
        field_manager: query.get("fieldManager").cloned(),
        force: query.get("force").is_some_and(|f| f == "true"),
    };
    // A create, update or patch: the write, its options' kind, its code.
    let write = match (method.as_str(), name) {
        ("POST", None) if target == Target::Main => {
            Some((parse_body().map(Write::Create), "CreateOptions", 201))
        }
        ("PUT", Some(name)) => {
            let write = parse_body().map(|body| Write::Update { name, body, target });
            Some((write, "UpdateOptions", 200))
        }
        ("PATCH", Some(name)) => {
            let content_type = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let Some(patch_type) = PatchType::from_content_type(content_type) else {
                return error_response(&ApiError::unsupported_patch(content_type, def.custom));
            };
            let write = Write::Patch {
                name,
                patch_type,
                body,
                target,
                options: &patch_options,
            };
            Some((Ok(write), "PatchOptions", 200))
        }
        _ => None,
    };
    if let Some((write, options, code)) = write {
        let request = ClientWrite {
            version,
            namespace: ns,
            write,
            body,
            options,
            code,
        };
        return written(shared, def, request, query, users);
    }
    match (method.as_str(), name) {
        ("GET", None) => {
            let param = |name: &str| query.get(name).filter(|v| !v.is_empty()).cloned();
            let seen = SeenRequest {
                resource: def.group_resource(),
                namespace: route.namespace.clone(),
                watch: watching,
                label_selector: param("labelSelector"),
                field_selector: param("fieldSelector"),
                limit: param("limit"),
                continue_token: param("continue"),
                resource_version: param("resourceVersion"),
                resource_version_match: param("resourceVersionMatch"),
            };
            shared.world().requests.push(seen.clone());
            let selector = match Selector::parse(
                def,
                seen.label_selector.as_deref().unwrap_or(""),
                seen.field_selector.as_deref().unwrap_or(""),
            ) {
                Ok(selector) => selector.in_namespace(ns),
                Err(message) => return error_response(&ApiError::bad_request(message)),
            };
            if watching {
                watching::watch(shared.clone(), def, version, query, &seen, selector).await
            } else {
                list::list(shared, def, version, &seen, &selector).await
            }
        }
        ("GET", Some(name)) => answer(shared.world().get(def, ns, name), 200),
        ("DELETE", Some(name)) if target == Target::Main => {
            let options = match delete_options() {
                Ok(o) => o,
                Err(e) => return error_response(&e),
            };
            let deleter = Deleter {
                requester: users.requester,
                collection: false,
            };
            answer(
                shared.world().delete_by(def, ns, name, &options, deleter),
                200,
            )
        }
        ("DELETE", None) => {
            let param = |name: &str| query.get(name).cloned().unwrap_or_default();
            let selector =
                match Selector::parse(def, &param("labelSelector"), &param("fieldSelector")) {
                    Ok(s) => s.in_namespace(ns),
                    Err(message) => return error_response(&ApiError::bad_request(message)),
                };
            // `DeleteCollection` passes its `DeleteOptions` to each delete.
            let options = match delete_options() {
                Ok(o) => o,
                Err(e) => return error_response(&e),
            };
            let mut world = shared.world();
            let victims: Vec<Value> = world
                .list_objects(&def.group_resource())
                .into_iter()
                .filter(|o| selector.matches(o))
                .collect();
            let mut items = Vec::new();
            for v in victims {
                let vns = v["metadata"]["namespace"].as_str().map(str::to_string);
                let vname = v["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let deleter = Deleter {
                    requester: users.requester,
                    collection: true,
                };
                match world.delete_by(def, vns.as_deref(), &vname, &options, deleter) {
                    Ok(o) => items.push(versioned(o)),
                    Err(e) => return error_response(&e),
                }
            }
            let rv = world.rv.to_string();
            json_response(
                200,
                json!({
                    "apiVersion": def.api_version(version), "kind": def.list_kind,
                    "metadata": {"resourceVersion": rv}, "items": items,
                }),
            )
        }
        (m, _) => error_response(&ApiError::method_not_allowed(
            m,
            &format!("{}", def.group_resource()),
        )),
    }
}

/// A client's create, update or patch, as the handler read it.
struct ClientWrite<'a> {
    version: &'a str,
    namespace: Option<&'a str>,
    write: Result<Write<'a>, ApiError>,
    /// The request body.
    body: &'a [u8],
    /// The kind of its options (`CreateOptions`…), for a refusal of them.
    options: &'a str,
    /// The answer's code when nothing is created.
    code: u16,
}

/// Answer a client's create, update or patch: its `fieldValidation`
/// read (`options` names the request's options kind for a refusal), the
/// write made ([`World::write`](crate::store::World::write)), and the
/// object answered with `code` (201 for an object an apply patch created)
/// and a `Warning` header per field warning.
fn written(
    shared: &Shared,
    def: &ResourceDef,
    request: ClientWrite<'_>,
    query: &HashMap<String, String>,
    users: Users<'_>,
) -> Response {
    let ClientWrite {
        version,
        namespace,
        write,
        body,
        options,
        code,
    } = request;
    let directive = Directive::parse(query.get("fieldValidation").map(String::as_str), options);
    let result = directive.and_then(|directive| {
        let write = write?;
        let mut check = FieldCheck::new(directive);
        if !matches!(write, Write::Patch { .. }) {
            // A patch's body is checked as a patch, by the store.
            check.body(body, "");
        }
        let writer = Writer {
            user: users.restricted,
            fields: Some(check),
            requester: users.requester,
        };
        shared.world().write(def, namespace, write, writer)
    });
    match result {
        Ok(w) => {
            let code = if w.created { 201 } else { code };
            let mut object = w.object;
            object["apiVersion"] = json!(def.api_version(version));
            with_warnings(json_response(code, object), &w.warnings)
        }
        Err(e) => error_response(&e),
    }
}

/// POST of a `Binding` to `pods/{name}/binding` ([`binding`]): decoded
/// under its `fieldValidation` as any create, then bound.
fn bind_pod(
    shared: &Shared,
    pods: &ResourceDef,
    namespace: &str,
    name: &str,
    body: &[u8],
    query: &HashMap<String, String>,
) -> Response {
    let kind = ResourceDef {
        kind: "Binding".into(),
        plural: "bindings".into(),
        ..pods.clone()
    };
    let decoded = Directive::parse(
        query.get("fieldValidation").map(String::as_str),
        "CreateOptions",
    )
    .and_then(|directive| {
        let mut binding: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))?;
        let mut check = FieldCheck::new(directive);
        check.body(body, "");
        check.object(&kind, &mut binding);
        let warnings = check.finish(&kind, "v1", Operation::Decode, &binding)?;
        Ok((binding, warnings))
    });
    let result = decoded.and_then(|(binding, warnings)| {
        binding::bind(&mut shared.world(), pods, namespace, name, &binding)
            .map(|status| (status, warnings))
    });
    match result {
        Ok((status, warnings)) => with_warnings(json_response(201, status), &warnings),
        Err(e) => error_response(&e),
    }
}

/// POST of an `Eviction` to `pods/{name}/eviction` ([`eviction`]):
/// decoded under its `fieldValidation` as any create (a policy/v1
/// `Eviction`, `apiVersion` and `kind` optional as the endpoint's decoder
/// defaults them), then carried out; a 429 or 5xx with
/// `retryAfterSeconds` gets the `Retry-After` header, as
/// `responsewriters.ErrorNegotiated` adds it
/// (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/writers.go`).
fn evict_pod(
    shared: &Shared,
    pods: &ResourceDef,
    namespace: &str,
    name: &str,
    body: &[u8],
    query: &HashMap<String, String>,
    users: Users<'_>,
) -> Response {
    let kind = ResourceDef {
        group: crate::builtin::POLICY.into(),
        kind: "Eviction".into(),
        plural: "evictions".into(),
        ..pods.clone()
    };
    let decoded = Directive::parse(
        query.get("fieldValidation").map(String::as_str),
        "CreateOptions",
    )
    .and_then(|directive| {
        let mut eviction: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))?;
        let mut check = FieldCheck::new(directive);
        check.body(body, "");
        check.object(&kind, &mut eviction);
        let warnings = check.finish(&kind, "v1", Operation::Decode, &eviction)?;
        Ok((eviction, warnings))
    });
    let dry_run = eviction::query_dry_run(query.get("dryRun").map(String::as_str));
    let result = decoded.and_then(|(eviction, warnings)| {
        eviction::evict(
            &mut shared.world(),
            pods,
            namespace,
            name,
            &eviction,
            &dry_run,
            users.requester,
        )
        .map(|status| (status, warnings))
    });
    match result {
        Ok((status, warnings)) => with_warnings(json_response(201, status), &warnings),
        Err(e) => {
            let mut response = error_response(&e);
            let retry = e
                .details
                .as_ref()
                .and_then(|d| d["retryAfterSeconds"].as_u64())
                .filter(|s| *s > 0);
            if let Some(seconds) = retry.filter(|_| e.code == 429 || e.code >= 500) {
                response.headers_mut().insert("retry-after", seconds.into());
            }
            response
        }
    }
}

/// `response` with one `Warning` header per warning.
pub fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for header in field_validation::warning_headers(warnings) {
        if let Ok(value) = header.parse() {
            response.headers_mut().append("warning", value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;
    use crate::crd::Registry;
    use crate::store::World;
    use std::sync::{Arc, Mutex};
    use tokio::sync::watch;

    fn shared() -> Shared {
        let mut registry = Registry::default();
        for def in builtin::definitions() {
            registry.register(def);
        }
        let (tx, _) = tokio::sync::broadcast::channel(4);
        Shared {
            world: Arc::new(Mutex::new(World::new(registry, tx))),
            hold: watch::Sender::new(false),
            epoch: watch::Sender::new(0),
            reset: watch::Sender::new(0),
            addr: "127.0.0.1:1".parse().unwrap(),
            tokens: Default::default(),
            rbac_enforced: Default::default(),
        }
    }

    fn resource(shared: &Shared, path: &str) -> Route {
        match parse_path(shared, path) {
            Parsed::Resource(r) => r,
            Parsed::Discovery(_) => panic!("{path} is not a resource path"),
        }
    }

    #[test]
    fn a_field_selector_on_the_name_names_the_request() {
        assert_eq!(exact_name("metadata.name=l1").as_deref(), Some("l1"));
        assert_eq!(
            exact_name("status.phase=Running,metadata.name==p").as_deref(),
            Some("p")
        );
        assert_eq!(exact_name("metadata.name!=l1"), None);
        assert_eq!(exact_name("metadata.namespace=a"), None);
        assert_eq!(exact_name("metadata.name=a/b"), None);
    }

    #[test]
    fn paths_route_like_the_real_server() {
        let s = shared();
        let r = resource(&s, "/api/v1/namespaces/default/pods");
        assert_eq!(
            (r.namespace.as_deref(), r.plural.as_str(), r.name),
            (Some("default"), "pods", None)
        );
        let r = resource(&s, "/api/v1/namespaces/default/pods/web/status");
        assert_eq!(
            (r.name.as_deref(), r.subresource.as_deref()),
            (Some("web"), Some("status"))
        );
        let r = resource(&s, "/api/v1/namespaces/default");
        assert_eq!(
            (r.plural.as_str(), r.name.as_deref(), r.namespace),
            ("namespaces", Some("default"), None)
        );
        let r = resource(&s, "/api/v1/namespaces/default/status");
        assert_eq!(
            (r.plural.as_str(), r.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let r = resource(
            &s,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
        );
        assert_eq!(
            (r.group.as_str(), r.plural.as_str(), r.name.as_deref()),
            ("coordination.k8s.io", "leases", Some("l"))
        );
        let r = resource(&s, "/api/v1/nodes/n1");
        assert_eq!(
            (r.plural.as_str(), r.name.as_deref(), r.namespace),
            ("nodes", Some("n1"), None)
        );
        assert!(matches!(
            parse_path(&s, "/apis"),
            Parsed::Discovery(Some(_))
        ));
        assert!(matches!(
            parse_path(&s, "/apis/nope.io/v1"),
            Parsed::Discovery(None)
        ));
    }
}
