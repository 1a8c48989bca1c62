//! The OpenAPI document, assembled by utoipa from the handlers' annotations.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{authenticate, offers, ops, ErrorBody};
use crate::auth::IssuedToken;
use crate::model::{Offer, OfferInput, Plan, PlanInput};

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
        ops::openapi,
        crate::feed::handler::subscribe,
    ),
    components(schemas(Offer, Plan, OfferInput, PlanInput, authenticate::Credentials, authenticate::Rotation, IssuedToken, ErrorBody)),
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
        .merge_from(crate::reservation::openapi::BuyingDoc::openapi())
        .to_json()
}
