//! The OpenAPI document (`GET /openapi.json`), assembled by utoipa from the
//! handlers' annotations of every feature. (The Open Service Broker routes
//! follow the OSB specification and are not described here.)

use actix_web::HttpResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::auth::IssuedToken;
use crate::http::{ApiError, ErrorBody};
use crate::offers::handlers as offers;
use crate::offers::{Offer, OfferInput, Plan, PlanInput};
use crate::ops;
use crate::providers::{admin, authenticate, PeeringCredentials};

#[derive(OpenApi)]
#[openapi(
    info(title = "Liqo resource broker catalog", description = "Providers publish offers; consumers browse them."),
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
        crate::feed::handler::subscribe,
        admin::login,
        admin::consumer_token,
        admin::providers,
        admin::set_provider,
    ),
    components(schemas(
        Offer, Plan, OfferInput, PlanInput, authenticate::Credentials, authenticate::Rotation,
        IssuedToken, ErrorBody, PeeringCredentials, admin::AdminLogin,
        admin::ConsumerTokenRequest, admin::AdminProvider, admin::ProviderUpdate,
    )),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// The document as JSON.
pub fn document() -> Result<String, serde_json::Error> {
    ApiDoc::openapi()
        .merge_from(crate::buying::openapi::BuyingDoc::openapi())
        .to_json()
}

/// This API's OpenAPI 3 document, generated from the code.
#[utoipa::path(get, path = "/openapi.json", tag = "ops", responses((status = 200, description = "OpenAPI document")))]
pub async fn openapi() -> Result<HttpResponse, ApiError> {
    let doc = document().map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(doc))
}
