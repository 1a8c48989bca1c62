//! `PUT /provider/enforcement`: the provider's ResourceSlice class
//! controller reports how strictly Liqo on its cluster enforces grants (the
//! level of its self-check: `off`, `none`, `soft`, `hard`, `unknown`). The
//! catalog keeps it with the provider's peering registration, in either
//! store, and stamps it on every offer of the provider; a change re-stamps
//! them, so buyers following the feed see it at once.
//!
//! It is kept beside what `PUT /provider/peering` registers, each of the
//! two writes keeping the other's part. Two of them racing may lose one
//! report; the controller reports again at every reading, so the level
//! comes back within one reading interval.

use actix_web::{web, HttpRequest, HttpResponse};

use super::model::{EnforcementLevel, ProviderPeering, DEFAULT_SLICE_CLASS};
use super::peering::{PeeringInfo, RegistrationInvalid, RegistrationRefused};
use super::Providers;
use crate::auth::Caller;
use crate::http::{parse_object, read_json_body, ApiError, ErrorBody};

// The body is a wire type, declared once in `catalog-client`.
pub use catalog_client::wire::provider::EnforcementReport;

/// `peering` (what the provider registered, if anything) with `level`
/// reported: a provider that registered nothing gets the registration it
/// would read back anyway (the default class, no Liqo v1).
pub fn with_level(peering: Option<ProviderPeering>, level: EnforcementLevel) -> ProviderPeering {
    let now = crate::store::now();
    let mut peering = peering.unwrap_or_else(|| ProviderPeering {
        resource_slice_class: DEFAULT_SLICE_CLASS.to_string(),
        sealed_kubeconfig: None,
        v1_per_contract: false,
        single_consumer: false,
        enforcement: None,
        updated_at: now,
    });
    peering.enforcement = Some(level);
    peering.updated_at = now;
    peering
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
    let cluster_id = super::peering::provider(&caller)?;
    state
        .require_enabled(cluster_id, "enforcement level")
        .await?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let report: EnforcementReport = parse_object(&body)?;
    let before = state.stamp(cluster_id).await?;
    if before.enforcement != Some(report.level) {
        let peering = state.store.get_provider_peering(cluster_id).await?;
        state
            .store
            .put_provider_peering(cluster_id, with_level(peering, report.level))
            .await?;
        tracing::info!(
            cluster_id,
            level = report.level.as_str(),
            "provider enforcement level reported"
        );
    }
    let info = state.peering_info(cluster_id).await?;
    state
        .stamp_changed(cluster_id, &before, &info.stamp())
        .await;
    Ok(HttpResponse::Ok().json(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_keeps_what_was_registered() {
        let fresh = with_level(None, EnforcementLevel::Hard);
        assert_eq!(fresh.resource_slice_class, DEFAULT_SLICE_CLASS);
        assert_eq!(fresh.enforcement, Some(EnforcementLevel::Hard));
        assert!(fresh.sealed_kubeconfig.is_none() && !fresh.v1_per_contract);
        let registered = ProviderPeering {
            resource_slice_class: "gold".into(),
            sealed_kubeconfig: Some("sealed".into()),
            v1_per_contract: false,
            single_consumer: true,
            enforcement: Some(EnforcementLevel::Hard),
            updated_at: crate::store::now(),
        };
        let after = with_level(Some(registered.clone()), EnforcementLevel::Off);
        assert_eq!(after.enforcement, Some(EnforcementLevel::Off));
        assert_eq!(
            ProviderPeering {
                enforcement: registered.enforcement,
                updated_at: registered.updated_at,
                ..after
            },
            registered
        );
    }

    #[test]
    fn bad_levels_are_named() {
        let e = parse_object::<EnforcementReport>(br#"{"level":"Hard"}"#).unwrap_err();
        assert_eq!(e.field, "level");
        let e = parse_object::<EnforcementReport>(br#"{}"#).unwrap_err();
        assert_eq!(e.field, "level");
        let e = parse_object::<EnforcementReport>(br#"{"level":"hard","x":1}"#).unwrap_err();
        assert_eq!(e.field, "x", "an unknown field is named: {e:?}");
    }
}
