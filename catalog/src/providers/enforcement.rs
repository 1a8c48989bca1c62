//! `PUT /provider/enforcement`: the provider's ResourceSlice class
//! controller reports how strictly Liqo on its cluster enforces grants (the
//! level of its self-check: `off`, `none`, `soft`, `hard`, `unknown`),
//! kept and stamped on the provider's offers as `enforcement` by
//! [`super::self_check`].

use actix_web::{web, HttpRequest, HttpResponse};

use super::model::{EnforcementLevel, OwnerStamp, ProviderPeering};
use super::peering::{PeeringInfo, RegistrationInvalid, RegistrationRefused};
use super::self_check::SelfCheckReport;
use super::Providers;
use crate::auth::Caller;
use crate::http::{ApiError, ErrorBody};

// The body is a wire type, declared once in `catalog-client`.
pub use catalog_client::wire::provider::EnforcementReport;

impl SelfCheckReport for EnforcementReport {
    type Level = EnforcementLevel;
    const WHAT: &'static str = "enforcement level";

    fn level(&self) -> EnforcementLevel {
        self.level
    }

    fn kept(peering: &mut ProviderPeering) -> &mut Option<EnforcementLevel> {
        &mut peering.enforcement
    }

    fn stamped(stamp: &OwnerStamp) -> Option<EnforcementLevel> {
        stamp.enforcement
    }
}

/// Report the provider's Liqo enforcement level (replacing the last one).
///
/// Stamped on each of its offers as `enforcement`; a change re-publishes
/// them on the feed. A provider an administrator disabled cannot change it
/// (403).
#[utoipa::path(
    put, path = "/provider/enforcement", tag = "providers", operation_id = "putProviderEnforcement",
    request_body = EnforcementReport,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider"]))),
    responses(
        (status = 200, description = "Kept; the provider's registration with it", body = PeeringInfo),
        RegistrationInvalid,
        (status = 401, description = "No valid token", body = ErrorBody),
        RegistrationRefused,
        crate::http::StoreUnreachable,
    )
)]
pub async fn put(
    state: web::Data<Providers>,
    caller: Caller,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    super::self_check::put::<EnforcementReport>(state, caller, req, payload).await
}
