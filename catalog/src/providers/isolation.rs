//! `PUT /provider/isolation`: the provider's tenant-isolation controller
//! reports how it keeps its buyers' pods apart (the level of its
//! self-check: `enforced` — a NetworkPolicy per tenant, and its probe
//! proved the CNI enforces them; `unverified` — policies rendered, not
//! proven; `failed` — the probe saw denied traffic get through; `off` —
//! isolation turned off), kept and stamped on the provider's offers as
//! `isolation` by [`super::self_check`].

use actix_web::{web, HttpRequest, HttpResponse};

use super::model::{IsolationLevel, OwnerStamp, ProviderPeering};
use super::peering::{PeeringInfo, RegistrationInvalid, RegistrationRefused};
use super::self_check::SelfCheckReport;
use super::Providers;
use crate::auth::Caller;
use crate::http::{ApiError, ErrorBody};

// The body is a wire type, declared once in `catalog-client`.
pub use catalog_client::wire::provider::IsolationReport;

impl SelfCheckReport for IsolationReport {
    type Level = IsolationLevel;
    const WHAT: &'static str = "isolation level";

    fn level(&self) -> IsolationLevel {
        self.level
    }

    fn kept(peering: &mut ProviderPeering) -> &mut Option<IsolationLevel> {
        &mut peering.isolation
    }

    fn stamped(stamp: &OwnerStamp) -> Option<IsolationLevel> {
        stamp.isolation
    }
}

/// Report the provider's tenant-isolation level (replacing the last one).
///
/// Stamped on each of its offers as `isolation`; a change re-publishes
/// them on the feed. A provider an administrator disabled cannot change it
/// (403).
#[utoipa::path(
    put, path = "/provider/isolation", tag = "providers", operation_id = "putProviderIsolation",
    request_body = IsolationReport,
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
    super::self_check::put::<IsolationReport>(state, caller, req, payload).await
}
