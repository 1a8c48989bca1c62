//! The OpenAPI 3.1 document, assembled by utoipa from the handlers'
//! annotations ([`ApiDoc`], [`crate::reservation::openapi::BuyingDoc`],
//! [`crate::osb::openapi::OsbDoc`]) and completed by [`complete`] with
//! what holds for every operation alike: 401 wherever a credential is
//! required, 413 and 415 wherever a body is read, a description for every
//! response.
//!
//! The request schemas say what the server enforces (patterns, lengths,
//! ranges, required fields), so that a request generated from the document
//! is accepted, and one that breaks it is refused. Lengths are counted by
//! the server in UTF-8 bytes; JSON Schema counts characters, so `maxLength`
//! is exact for ASCII only (the descriptions say bytes).
//!
//! Roles: every operation carries `x-roles` (`anyone`, `provider`,
//! `consumer`, `admin`, `platform (osbBasic)`); its `security` names the
//! schemes that carry them: `bearer` (a catalog or OIDC JWT whose roles
//! claim decides) and, on `/v2`, `osbBasic` (the broker's platform account).

use std::borrow::Cow;

use serde_json::{json, Map, Value};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

use super::{authenticate, offers, ops, ErrorBody};
use crate::auth::IssuedToken;
use crate::model::{Offer, OfferInput, Plan, PlanInput};

/// Offer ids, plan keys and cluster IDs (`validate_id`).
pub const ID_PATTERN: &str = r"^[A-Za-z0-9._~-]{1,128}$";
/// Non-blank text without control characters (`char::is_control`, blank
/// as `str::trim` sees it).
pub const TEXT_PATTERN: &str = r"^[^\x00-\x1f\x7f-\x9f]*[^\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00-\x1f\x7f-\x9f]*$";
/// An `http://` or `https://` URL without control characters.
pub const URL_PATTERN: &str = r"^https?://[^\x00-\x1f\x7f-\x9f]*$";
/// A non-negative decimal below 9223372036 (`Cost` holds nano-units in an
/// i64) with at most 9 fraction digits (leading zeros and trailing fraction
/// zeros aside), as `Cost` parses it.
pub const DECIMAL_PATTERN: &str = r"^(\+?0*([0-9]{1,9}|[1-8][0-9]{9}|9[01][0-9]{8}|92[01][0-9]{7}|922[0-2][0-9]{6}|9223[0-2][0-9]{5}|92233[0-6][0-9]{4}|922337[01][0-9]{3}|92233720[0-2][0-9]|922337203[0-5])(\.[0-9]{1,9}0*)?|-0+(\.0+)?)$";
/// A Kubernetes quantity (`4Gi`, `500m`, `1e3`), the exponent kept to two
/// digits so that every value the pattern allows is in range.
pub const QUANTITY_PATTERN: &str =
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,2})?$";
/// A non-negative Kubernetes quantity.
pub const NON_NEGATIVE_QUANTITY_PATTERN: &str =
    r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,2})?$";
/// OSB ids: 1-255 bytes without control characters.
pub const OSB_ID_PATTERN: &str = r"^[^\x00-\x1f\x7f-\x9f]+$";

/// Named schemas whose JSON is written out by hand (constrained strings and
/// open-ended objects that utoipa's model cannot hold). utoipa sees a
/// placeholder, which [`complete`] replaces with [`raw_schemas`]' JSON.
macro_rules! json_schemas {
    ($($(#[$doc:meta])* $name:ident => $json:expr;)*) => {
        $(
            $(#[$doc])*
            pub struct $name;

            impl PartialSchema for $name {
                fn schema() -> RefOr<Schema> {
                    RefOr::T(Schema::Object(Default::default()))
                }
            }

            impl ToSchema for $name {
                fn name() -> Cow<'static, str> {
                    Cow::Borrowed(stringify!($name))
                }
            }
        )*

        /// The JSON of the hand-written schemas, by name.
        pub fn raw_schemas() -> Vec<(&'static str, Value)> {
            vec![$((stringify!($name), $json)),*]
        }
    };
}

json_schemas! {
    /// An offer id, plan key or cluster ID.
    Id => json!({"type": "string", "minLength": 1, "maxLength": 128, "pattern": ID_PATTERN,
        "description": "1-128 characters from `A-Z a-z 0-9 . _ ~ -`"});
    /// A display name or subject.
    Name => json!({"type": "string", "minLength": 1, "maxLength": 256, "pattern": TEXT_PATTERN,
        "description": "1-256 bytes of text, not blank, without control characters"});
    /// A provider's peering secret.
    Secret => json!({"type": "string", "minLength": 1, "maxLength": 4096, "pattern": TEXT_PATTERN,
        "description": "1-4096 bytes of text, not blank, without control characters"});
    /// A provider's Liqo auth URL.
    HttpUrl => json!({"type": "string", "maxLength": 2048, "pattern": URL_PATTERN,
        "description": "An `http://` or `https://` URL of at most 2048 bytes, without control characters"});
    /// A non-negative decimal string.
    Decimal => json!({"type": "string", "pattern": DECIMAL_PATTERN, "maxLength": 256, "example": "1.5",
        "description": "A non-negative decimal below 9223372036 with at most 9 fraction digits"});
    /// A Kubernetes quantity.
    Quantity => json!({"type": "string", "pattern": QUANTITY_PATTERN, "maxLength": 256, "example": "4Gi",
        "description": "A Kubernetes quantity such as `4Gi`, `500m` or `2`"});
    /// The resources a plan provides, as clients write them.
    ResourcesInput => json!({"type": "object", "maxProperties": 64,
        "propertyNames": {"minLength": 1, "maxLength": 253, "pattern": r"^[^\x00-\x1f\x7f-\x9f]+$"},
        "additionalProperties": {"anyOf": [
            {"type": "string", "pattern": NON_NEGATIVE_QUANTITY_PATTERN},
            {"type": "integer", "minimum": 0, "maximum": 1_000_000_000_000_000_i64},
        ]},
        "example": {"cpu": "2", "memory": "4Gi"},
        "description": "Resource name (1-253 bytes, free-form: `cpu`, `memory`, `nvidia.com/gpu`) → non-negative Kubernetes quantity (a string, or a whole number); at most 64"});
    /// A plan's cost as clients write it.
    CostInput => json!({"anyOf": [
            {"type": "string", "pattern": DECIMAL_PATTERN},
            {"type": "integer", "minimum": 0, "maximum": 9_223_372_035_i64},
        ],
        "example": "1.0",
        "description": "A non-negative decimal string (below 9223372036, at most 9 fraction digits) or a whole number"});
    /// The `min.<resource>` filters.
    MinResources => json!({"type": "object",
        "propertyNames": {"pattern": r"^min\.[\s\S]+$"},
        "additionalProperties": {"type": "string", "pattern": QUANTITY_PATTERN, "maxLength": 256},
        "example": {"min.memory": "4Gi", "min.cpu": "2"},
        "description": "Query parameters `min.<resource>=<quantity>`: property names are the parameter names"});
    /// An Open Service Broker id (instance, binding, service, plan).
    OsbId => json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": OSB_ID_PATTERN,
        "description": "1-255 bytes without control characters"});
    /// `/subscribe` modes.
    FeedMode => json!({"type": "string", "enum": ["snapshot", "delta"]});
    /// `/healthz` and `/readyz`.
    Health => json!({"type": "object", "required": ["status"],
        "properties": {"status": {"type": "string"}, "store": {"type": "string"}}});
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Liqo resource broker catalog",
        description = "Providers publish offers; consumers browse, reserve and buy them (REST or the Open Service Broker API v2.17).\n\nRoles (`x-roles` on every operation): `anyone`, `provider` (token from `POST /authenticate`), `consumer` (token from `POST /consumer-tokens` or an OIDC issuer), `admin` (token from `POST /authenticate/admin`), `platform` (the OSB basic-auth account). Bearer tokens carry their roles; an operation refuses a token without its role with 403."
    ),
    paths(
        authenticate::authenticate,
        authenticate::rotate,
        offers::list,
        offers::get,
        offers::put,
        offers::delete,
        ops::healthz,
        ops::readyz,
        ops::metrics,
        ops::openapi,
        crate::feed::handler::subscribe,
    ),
    components(schemas(
        Offer, Plan, OfferInput, PlanInput, authenticate::Credentials, authenticate::Rotation,
        IssuedToken, ErrorBody, Id, Name, Secret, HttpUrl, Decimal, Quantity, ResourcesInput,
        CostInput, MinResources, OsbId, FeedMode, Health,
    )),
    modifiers(&SecuritySchemes)
)]
pub struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A catalog token (provider, consumer or admin) or, when configured, an OIDC issuer's",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "osbBasic",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Basic)
                    .description(Some(
                        "The Open Service Broker platform account (`--osb-username`, `--osb-password`); `/v2` only",
                    ))
                    .build(),
            ),
        );
    }
}

/// The document, utoipa's parts merged and [`complete`]d.
pub fn document_value() -> Result<Value, serde_json::Error> {
    let doc = ApiDoc::openapi()
        .merge_from(crate::reservation::openapi::BuyingDoc::openapi())
        .merge_from(crate::osb::openapi::OsbDoc::openapi());
    let mut v = serde_json::to_value(doc)?;
    complete(&mut v);
    Ok(v)
}

/// The document as JSON.
pub fn document() -> Result<String, serde_json::Error> {
    serde_json::to_string(&document_value()?)
}

fn error_ref(osb: bool) -> Value {
    let name = if osb { "OsbErrorBody" } else { "ErrorBody" };
    json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}})
}

/// Add `status` to `responses` unless present.
fn add_response(responses: &mut Map<String, Value>, status: &str, description: &str, osb: bool) {
    responses
        .entry(status.to_string())
        .or_insert_with(|| json!({"description": description, "content": error_ref(osb)}));
}

/// What holds for every operation alike (see the module docs).
pub fn complete(doc: &mut Value) {
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in raw_schemas() {
            schemas.insert(name.to_string(), schema);
        }
    }
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let osb = path.starts_with("/v2/");
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (_method, op) in item.iter_mut() {
                let Some(op) = op.as_object_mut() else {
                    continue;
                };
                let secured = op
                    .get("security")
                    .and_then(Value::as_array)
                    .is_some_and(|s| !s.is_empty());
                let has_body = op.contains_key("requestBody");
                if let Some(body) = op.get_mut("requestBody").and_then(Value::as_object_mut) {
                    body.insert("required".into(), Value::Bool(true));
                    body.entry("description").or_insert_with(|| {
                        json!("A JSON object (`Content-Type: application/json`)")
                    });
                }
                let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                    continue;
                };
                if secured {
                    add_response(
                        responses,
                        "401",
                        "Missing, malformed, invalid or expired credentials (`WWW-Authenticate` says which schemes)",
                        osb,
                    );
                }
                if has_body {
                    add_response(
                        responses,
                        "413",
                        "The body is larger than the catalog's `--max-body-bytes`",
                        osb,
                    );
                    if !osb {
                        // The OSB routes answer a non-JSON body with 400, as
                        // the spec asks.
                        add_response(
                            responses,
                            "415",
                            "A declared `Content-Type` that is not JSON",
                            osb,
                        );
                    }
                }
                for (status, response) in responses.iter_mut() {
                    let Some(response) = response.as_object_mut() else {
                        continue;
                    };
                    let missing = response
                        .get("description")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty);
                    if missing {
                        let reason = status
                            .parse::<u16>()
                            .ok()
                            .and_then(|s| actix_web::http::StatusCode::from_u16(s).ok())
                            .and_then(|s| s.canonical_reason())
                            .unwrap_or("Response");
                        response.insert("description".into(), json!(reason));
                    }
                }
            }
        }
    }
    // 1 to 64 plans (`MAX_PLANS`); utoipa has no attribute for it.
    if let Some(plans) = doc.pointer_mut("/components/schemas/OfferInput/properties/plans") {
        if let Some(plans) = plans.as_object_mut() {
            plans.insert("minProperties".into(), json!(1));
            plans.insert("maxProperties".into(), json!(crate::model::MAX_PLANS));
            // Map keys are inlined, so the placeholder would stand there.
            plans.insert(
                "propertyNames".into(),
                json!({"minLength": 1, "maxLength": 128, "pattern": ID_PATTERN}),
            );
        }
    }
    // Plans name themselves `name` or `planName`: one of the two.
    if let Some(plan) = doc.pointer_mut("/components/schemas/PlanInput") {
        if let Some(plan) = plan.as_object_mut() {
            plan.insert(
                "oneOf".into(),
                json!([
                    {"required": ["name"], "not": {"required": ["planName"]}},
                    {"required": ["planName"], "not": {"required": ["name"]}},
                ]),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// Every route of the route table (`api::configure`,
    /// `reservation::routes`, `osb::routes`), as the document names it.
    /// A route added there must be added here and documented.
    const ROUTES: &[(&str, &str)] = &[
        ("post", "/authenticate"),
        ("post", "/authenticate/rotate"),
        ("get", "/offers"),
        ("get", "/offer/{id}"),
        ("post", "/offer/{id}"),
        ("delete", "/offer/{id}"),
        ("get", "/subscribe"),
        ("get", "/healthz"),
        ("get", "/readyz"),
        ("get", "/metrics"),
        ("get", "/openapi.json"),
        ("post", "/reservations"),
        ("get", "/reservations"),
        ("get", "/reservations/{id}"),
        ("delete", "/reservations/{id}"),
        ("post", "/reservations/{id}/purchase"),
        ("get", "/purchases"),
        ("get", "/purchases/{id}"),
        ("delete", "/purchases/{id}"),
        ("get", "/offer/{id}/plans/{plan}/capacity"),
        ("put", "/offer/{id}/plans/{plan}/capacity"),
        ("post", "/authenticate/admin"),
        ("post", "/consumer-tokens"),
        ("get", "/admin/providers"),
        ("put", "/admin/providers/{clusterID}"),
        ("get", "/v2/catalog"),
        ("put", "/v2/service_instances/{instance_id}"),
        ("patch", "/v2/service_instances/{instance_id}"),
        ("get", "/v2/service_instances/{instance_id}"),
        ("delete", "/v2/service_instances/{instance_id}"),
        ("get", "/v2/service_instances/{instance_id}/last_operation"),
        (
            "put",
            "/v2/service_instances/{instance_id}/service_bindings/{binding_id}",
        ),
        (
            "get",
            "/v2/service_instances/{instance_id}/service_bindings/{binding_id}",
        ),
        (
            "delete",
            "/v2/service_instances/{instance_id}/service_bindings/{binding_id}",
        ),
        (
            "get",
            "/v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation",
        ),
    ];

    const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "head", "options"];

    fn operations(doc: &Value) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("path item") {
                if METHODS.contains(&method.as_str()) {
                    out.push((method.clone(), path.clone(), op.clone()));
                }
            }
        }
        out
    }

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let doc = document_value().expect("document");
        assert_eq!(doc["openapi"], "3.1.0");
        let documented: BTreeSet<(String, String)> = operations(&doc)
            .into_iter()
            .map(|(m, p, _)| (m, p))
            .collect();
        let routes: BTreeSet<(String, String)> = ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        assert_eq!(routes.len(), ROUTES.len(), "a route is listed twice");
        let undocumented: Vec<_> = routes.difference(&documented).collect();
        let unrouted: Vec<_> = documented.difference(&routes).collect();
        assert!(
            undocumented.is_empty() && unrouted.is_empty(),
            "undocumented routes: {undocumented:?}; documented but not routed: {unrouted:?}"
        );
    }

    #[test]
    fn operation_ids_are_unique_and_every_response_is_described() {
        let doc = document_value().expect("document");
        let mut ids: BTreeMap<String, String> = BTreeMap::new();
        for (method, path, op) in operations(&doc) {
            let label = format!("{method} {path}");
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{label} has no operationId"))
                .to_string();
            if let Some(other) = ids.insert(id.clone(), label.clone()) {
                panic!("operationId {id} is shared by {other} and {label}");
            }
            assert!(op["x-roles"].is_array(), "{label} declares no x-roles");
            let responses = op["responses"].as_object().expect("responses");
            assert!(!responses.is_empty(), "{label} has no responses");
            for (status, r) in responses {
                assert!(
                    r["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{label} {status} has no description"
                );
            }
            if op["security"].as_array().is_some_and(|s| !s.is_empty()) {
                assert!(responses.contains_key("401"), "{label} lacks 401");
            }
            if op.get("requestBody").is_some() {
                assert!(responses.contains_key("413"), "{label} lacks 413");
            }
        }
    }

    #[test]
    fn links_name_existing_operations() {
        let doc = document_value().expect("document");
        let ids: BTreeSet<String> = operations(&doc)
            .into_iter()
            .filter_map(|(_, _, op)| op["operationId"].as_str().map(str::to_string))
            .collect();
        let mut links = 0;
        for (method, path, op) in operations(&doc) {
            for (status, r) in op["responses"].as_object().expect("responses") {
                for (name, link) in r["links"].as_object().into_iter().flatten() {
                    links += 1;
                    let target = link["operationId"].as_str().unwrap_or_default();
                    assert!(
                        ids.contains(target),
                        "{method} {path} {status} link {name} names unknown {target}"
                    );
                }
            }
        }
        assert!(links >= 8, "only {links} links");
    }
}
