//! The OpenAPI 3.1 document, assembled by utoipa from the handlers'
//! annotations ([`ApiDoc`], [`crate::buying::openapi::BuyingDoc`],
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

use actix_web::HttpResponse;
use serde_json::{json, Map, Value};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::auth::IssuedToken;
use crate::http::schemas::*;
use crate::http::{ApiError, ErrorBody};
use crate::offers::handlers as offers;
use crate::offers::{Offer, OfferInput, Plan, PlanInput};
use crate::ops;
use crate::providers::{admin, authenticate, PeeringCredentials};

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
        openapi,
        admin::login,
        admin::consumer_token,
        admin::providers,
        admin::set_provider,
        crate::providers::peering::put,
        crate::providers::peering::get,
        crate::providers::enforcement::put,
        crate::providers::isolation::put,
        crate::feed::handler::subscribe,
    ),
    components(schemas(
        Offer, Plan, OfferInput, PlanInput, authenticate::Credentials, authenticate::Rotation,
        IssuedToken, ErrorBody, Id, Name, Secret, HttpUrl, Decimal, Quantity, ResourcesInput,
        CostInput, MinResources, LabelsInput, LabelFilters, OsbId, FeedMode, Health, PeeringCredentials, admin::AdminLogin,
        admin::ConsumerTokenRequest, admin::AdminProvider, admin::ProviderUpdate,
        crate::http::schemas::AuthUrl, crate::providers::peering::PeeringRequest,
        crate::providers::peering::V1Peering, crate::providers::peering::PeeringInfo,
        crate::providers::LiqoGeneration, crate::providers::EnforcementLevel,
        crate::providers::enforcement::EnforcementReport, crate::providers::IsolationLevel,
        crate::providers::isolation::IsolationReport,
        catalog_client::wire::Pricing, catalog_client::wire::CostPeriod,
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
        .merge_from(crate::buying::openapi::BuyingDoc::openapi())
        .merge_from(crate::osb::openapi::OsbDoc::openapi())
        .merge_from(crate::osb::listing::ListingDoc::openapi());
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
                    // A body whose schema admits `null` may be left out
                    // too (`POST /reservations/{id}/purchase` reads no
                    // body as `null`: the defaults): not required, or a
                    // request without one would read as invalid.
                    let nullable = body
                        .get("content")
                        .and_then(|c| c.pointer("/application~1json/schema/oneOf"))
                        .and_then(Value::as_array)
                        .is_some_and(|shapes| shapes.contains(&json!({"type": "null"})));
                    body.insert("required".into(), Value::Bool(!nullable));
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
            plans.insert("maxProperties".into(), json!(crate::offers::MAX_PLANS));
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

/// This API's OpenAPI 3 document, generated from the code.
#[utoipa::path(
    get, path = "/openapi.json", tag = "ops", operation_id = "openapi",
    extensions(("x-roles" = json!(["anyone"]))),
    responses((status = 200, description = "This OpenAPI 3.1 document", body = Object))
)]
pub async fn openapi() -> Result<HttpResponse, ApiError> {
    let doc = document().map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(doc))
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
        ("get", "/contracts"),
        ("get", "/contracts/{id}"),
        ("get", "/contract-changes"),
        ("get", "/service-instances"),
        ("get", "/service-instances/{id}"),
        ("put", "/contracts/{id}/state"),
        ("post", "/contracts/{id}/extend"),
        ("put", "/provider/contracts/{id}/peering"),
        ("put", "/contracts/{id}/network-policy"),
        ("delete", "/contracts/{id}/network-policy"),
        ("put", "/provider/contracts/{id}/network-policy/status"),
        ("get", "/provider/peering"),
        ("put", "/provider/peering"),
        ("put", "/provider/enforcement"),
        ("put", "/provider/isolation"),
        ("get", "/offer/{id}/plans/{plan}/capacity"),
        ("put", "/offer/{id}/plans/{plan}/capacity"),
        ("post", "/authenticate/admin"),
        ("post", "/consumer-tokens"),
        ("get", "/admin/providers"),
        ("put", "/admin/providers/{clusterID}"),
        ("put", "/provider/contracts/{id}/service"),
        ("get", "/provider/contracts/{id}/customer-peering"),
        ("get", "/provider/contracts/{id}/bindings"),
        ("put", "/provider/contracts/{id}/bindings/{binding_id}"),
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

    /// The levels a provider's self-checks report are described by the
    /// names the server reads and writes (never the Rust variants' names),
    /// wherever they appear: the report bodies, the registration, the
    /// offers and the filters of the list and the feed.
    #[test]
    fn reported_levels_are_described_by_their_wire_names() {
        use crate::providers::{EnforcementLevel, IsolationLevel};
        let doc = document_value().expect("document");
        let schemas = &doc["components"]["schemas"];
        assert_eq!(
            schemas["EnforcementLevel"]["enum"],
            json!(EnforcementLevel::ALL.map(EnforcementLevel::as_str))
        );
        assert_eq!(
            schemas["IsolationLevel"]["enum"],
            json!(IsolationLevel::ALL.map(IsolationLevel::as_str))
        );
        for (field, schema) in [
            ("enforcement", "EnforcementLevel"),
            ("isolation", "IsolationLevel"),
        ] {
            let reference = format!("#/components/schemas/{schema}");
            for object in ["Offer", "PeeringInfo"] {
                assert_eq!(
                    schemas[object]["properties"][field]["$ref"],
                    reference.as_str(),
                    "{object}.{field}"
                );
            }
            let report = &schemas[format!("{}Report", &schema[..schema.len() - "Level".len()])];
            assert_eq!(report["properties"]["level"]["$ref"], reference.as_str());
            assert_eq!(report["required"], json!(["level"]));
            assert_eq!(report["additionalProperties"], json!(false));
            for path in ["/offers", "/subscribe"] {
                let parameters = doc["paths"][path]["get"]["parameters"]
                    .as_array()
                    .expect("parameters");
                let filter = parameters
                    .iter()
                    .find(|p| p["name"] == field)
                    .unwrap_or_else(|| panic!("{path} has no {field} filter"));
                assert_eq!(filter["schema"]["$ref"], reference.as_str(), "{path}");
            }
        }
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

    /// Only the purchase's body may be left out (none buys with the
    /// defaults); every other body is required.
    #[test]
    fn bodies_are_required_but_the_purchases() {
        let doc = document_value().expect("document");
        for (method, path, op) in operations(&doc) {
            let Some(body) = op.get("requestBody") else {
                continue;
            };
            let optional = method == "post" && path == "/reservations/{id}/purchase";
            assert_eq!(body["required"], json!(!optional), "{method} {path}");
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
