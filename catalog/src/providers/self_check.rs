//! What a provider's self-checks report, handled once for every report:
//! `PUT /provider/enforcement` (the Liqo enforcement level its class
//! controller reads, [`super::enforcement`]) and `PUT /provider/isolation`
//! (the tenant-isolation level its isolation controller checks,
//! [`super::isolation`]). Each report is one level: the catalog keeps it
//! with the provider's peering registration, in either store, and stamps it
//! on every offer of the provider; a change re-stamps them, so buyers
//! following the feed see it at once.
//!
//! A level is kept beside what `PUT /provider/peering` registers and the
//! other reports, each write keeping the others' parts. Two of them racing
//! may lose one report; the controllers report again at every reading, so
//! the level comes back within one reading interval.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;

use super::model::{OwnerStamp, ProviderPeering, ReportedLevel, DEFAULT_SLICE_CLASS};
use super::Providers;
use crate::auth::Caller;
use crate::http::{parse_object, read_json_body, ApiError};

/// The body of one self-check report (a wire type, `{level}`), and where
/// its level is kept and stamped.
pub trait SelfCheckReport: DeserializeOwned {
    type Level: ReportedLevel;
    /// What it reports, as refusals and log lines name it.
    const WHAT: &'static str;
    /// The level reported.
    fn level(&self) -> Self::Level;
    /// Where a registration keeps it.
    fn kept(peering: &mut ProviderPeering) -> &mut Option<Self::Level>;
    /// What a stamp carries of it.
    fn stamped(stamp: &OwnerStamp) -> Option<Self::Level>;
}

/// `peering` (what the provider registered, if anything) with `report`'s
/// level kept: a provider that registered nothing gets the registration it
/// would read back anyway (the default class, no Liqo v1, no other level).
pub fn with_report<R: SelfCheckReport>(
    peering: Option<ProviderPeering>,
    report: &R,
) -> ProviderPeering {
    let now = crate::store::now();
    let mut peering = peering.unwrap_or_else(|| ProviderPeering {
        resource_slice_class: DEFAULT_SLICE_CLASS.to_string(),
        sealed_kubeconfig: None,
        v1_per_contract: false,
        single_consumer: false,
        enforcement: None,
        isolation: None,
        updated_at: now,
    });
    *R::kept(&mut peering) = Some(report.level());
    peering.updated_at = now;
    peering
}

/// Keep the calling provider's report `R` (replacing its last one) and
/// answer its registration, as `GET /provider/peering` does. A provider an
/// administrator disabled cannot change it (403); a bad body is a 400
/// naming the field (`level`), nothing changed.
pub async fn put<R: SelfCheckReport>(
    state: web::Data<Providers>,
    caller: Caller,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let cluster_id = super::peering::provider(&caller)?;
    state.require_enabled(cluster_id, R::WHAT).await?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let report: R = parse_object(&body)?;
    let before = state.stamp(cluster_id).await?;
    if R::stamped(&before) != Some(report.level()) {
        let peering = state.store.get_provider_peering(cluster_id).await?;
        state
            .store
            .put_provider_peering(cluster_id, with_report(peering, &report))
            .await?;
        tracing::info!(
            cluster_id,
            level = report.level().name(),
            "provider {} reported",
            R::WHAT
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
    use crate::http::parse_object;
    use crate::providers::enforcement::EnforcementReport;
    use crate::providers::isolation::IsolationReport;
    use crate::providers::{EnforcementLevel, IsolationLevel};

    #[test]
    fn a_report_keeps_what_was_registered_and_the_other_level() {
        let level = EnforcementReport {
            level: EnforcementLevel::Hard,
        };
        let fresh = with_report(None, &level);
        assert_eq!(fresh.resource_slice_class, DEFAULT_SLICE_CLASS);
        assert_eq!(fresh.enforcement, Some(EnforcementLevel::Hard));
        assert!(fresh.sealed_kubeconfig.is_none() && !fresh.v1_per_contract);
        assert!(fresh.isolation.is_none());
        let isolated = IsolationReport {
            level: IsolationLevel::Unverified,
        };
        let fresh = with_report(None, &isolated);
        assert_eq!(fresh.isolation, Some(IsolationLevel::Unverified));
        assert!(fresh.enforcement.is_none());

        let registered = ProviderPeering {
            resource_slice_class: "gold".into(),
            sealed_kubeconfig: Some("sealed".into()),
            v1_per_contract: false,
            single_consumer: true,
            enforcement: Some(EnforcementLevel::Hard),
            isolation: Some(IsolationLevel::Enforced),
            updated_at: crate::store::now(),
        };
        let off = EnforcementReport {
            level: EnforcementLevel::Off,
        };
        let after = with_report(Some(registered.clone()), &off);
        assert_eq!(
            after,
            ProviderPeering {
                enforcement: Some(EnforcementLevel::Off),
                updated_at: after.updated_at,
                ..registered.clone()
            }
        );
        let failed = IsolationReport {
            level: IsolationLevel::Failed,
        };
        let after = with_report(Some(registered.clone()), &failed);
        assert_eq!(
            after,
            ProviderPeering {
                isolation: Some(IsolationLevel::Failed),
                updated_at: after.updated_at,
                ..registered
            }
        );
    }

    #[test]
    fn reports_read_their_level_from_where_it_is_stamped() {
        let stamp = OwnerStamp {
            liqo: Vec::new(),
            enforcement: Some(EnforcementLevel::Soft),
            isolation: Some(IsolationLevel::Off),
        };
        assert_eq!(
            EnforcementReport::stamped(&stamp),
            Some(EnforcementLevel::Soft)
        );
        assert_eq!(IsolationReport::stamped(&stamp), Some(IsolationLevel::Off));
        assert_eq!(EnforcementReport::WHAT, "enforcement level");
        assert_eq!(IsolationReport::WHAT, "isolation level");
    }

    /// `good` is read; `bad` (a level in the wrong case, absent, or with
    /// an unknown field beside it) is refused naming the field.
    fn bad_levels_are_named_in<R: SelfCheckReport + std::fmt::Debug>(good: &str, bad: &str) {
        let ok = format!(r#"{{"level":"{good}"}}"#);
        assert_eq!(
            parse_object::<R>(ok.as_bytes()).unwrap().level().name(),
            good
        );
        for (body, field) in [
            (format!(r#"{{"level":"{bad}"}}"#), "level"),
            ("{}".to_string(), "level"),
            (r#"{"level":3}"#.to_string(), "level"),
            (format!(r#"{{"level":"{good}","x":1}}"#), "x"),
        ] {
            let e = parse_object::<R>(body.as_bytes()).unwrap_err();
            assert_eq!(e.field, field, "{body}: {e:?}");
        }
    }

    #[test]
    fn bad_levels_are_named() {
        bad_levels_are_named_in::<EnforcementReport>("hard", "Hard");
        bad_levels_are_named_in::<IsolationReport>("enforced", "Enforced");
        // A level of the other report is no level of this one.
        bad_levels_are_named_in::<IsolationReport>("off", "hard");
        bad_levels_are_named_in::<EnforcementReport>("off", "failed");
    }
}
