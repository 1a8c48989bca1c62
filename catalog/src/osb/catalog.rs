//! `GET /v2/catalog`: offers as services, plans as plans.
//!
//! Each offer becomes a service (id derived from the offer id, name the
//! offer id made CLI-friendly, `tags: [type, liqo-v0?, liqo-v1?]`,
//! `metadata.liqo`: the provider's Liqo generations, `metadata.enforcement`
//! and `metadata.isolation`: the Liqo enforcement and tenant-isolation
//! levels it reported, if any), each plan a plan (id derived
//! from offer id and plan key, `free` when its cost is zero, costs in the
//! OSB pricing convention `metadata.costs: [{amount: {<currency>: n},
//! unit}]`, resources as `metadata.bullets`). Disabled providers' offers are
//! left out. A service offer's service is tagged `service` and carries
//! `metadata.kind: service`; its plans carry `metadata.hosting` and, when
//! declared, the OSB v2.17 `schemas` of their parameters. A service plan
//! is `plan_updateable` when another plan of its offer hosts the service
//! the same way ([`super::update`]); capacity plans never are.

use std::collections::BTreeSet;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::error::OsbError;
use super::guard::guard;
use super::ids;
use super::Osb;
use super::OsbSettings;
use crate::offers::{Offer, OfferFilter, Plan};

/// Longest description the spec recommends.
const MAX_DESCRIPTION: usize = 255;

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// A CLI-friendly name (alphanumerics, `.`, `-`), unique among `taken`.
fn cli_name(raw: &str, taken: &mut BTreeSet<String>) -> String {
    let base: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let base = if base.is_empty() {
        "x".to_string()
    } else {
        base
    };
    let mut name = base.clone();
    let mut n = 2;
    while !taken.insert(name.clone()) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

fn cost_number(plan: &Plan) -> Value {
    let nanos = plan.cost.nanos();
    let whole = nanos / 1_000_000_000;
    let frac = nanos % 1_000_000_000;
    // Whole-unit costs print as integers-valued floats (99.0), others
    // through f64's shortest round-trip form.
    json!(whole as f64 + frac as f64 / 1e9)
}

fn plan_entry(
    settings: &OsbSettings,
    offer: &Offer,
    key: &str,
    plan: &Plan,
    name: String,
) -> Value {
    let bullets: Vec<String> = plan
        .resources
        .0
        .iter()
        .map(|(r, q)| format!("{r}: {q}"))
        .collect();
    let description = if bullets.is_empty() {
        plan.name.clone()
    } else {
        format!("{}: {}", plan.name, bullets.join(", "))
    };
    let resources: serde_json::Map<String, Value> = plan
        .resources
        .0
        .iter()
        .map(|(r, q)| (r.clone(), Value::String(q.to_string())))
        .collect();
    let mut entry = json!({
        "id": ids::plan_id(&offer.id, key),
        "name": name,
        "description": truncate(&description, MAX_DESCRIPTION),
        "free": plan.cost.nanos() == 0,
        "bindable": true,
        "plan_updateable": plan_updateable(offer, key),
        "metadata": {
            "displayName": plan.name,
            "planID": key,
            "costs": [ { "amount": { settings.currency.as_str(): cost_number(plan) }, "unit": settings.cost_unit } ],
            "bullets": bullets,
            "resources": resources,
        },
    });
    if let Some(hosting) = plan.hosting {
        entry["metadata"]["hosting"] = json!(hosting);
    }
    if let Some(schemas) = &plan.schemas {
        entry["schemas"] = json!(schemas);
    }
    entry
}

/// A service's tags: the offer type, and `liqo-v0` / `liqo-v1` for the
/// Liqo generations its provider peers with.
fn tags(offer: &Offer) -> Vec<String> {
    std::iter::once(offer.offer_type.clone())
        .chain((!offer.kind.is_capacity()).then(|| offer.kind.as_str().to_string()))
        .chain(offer.liqo.iter().map(|g| format!("liqo-{}", g.as_str())))
        .collect()
}

/// The service entry of `offer`.
pub fn service_entry(settings: &OsbSettings, offer: &Offer, name: String) -> Value {
    let mut plan_names = BTreeSet::new();
    let plans: Vec<Value> = offer
        .plans
        .iter()
        .map(|(key, plan)| {
            let name = cli_name(key, &mut plan_names);
            plan_entry(settings, offer, key, plan, name)
        })
        .collect();
    let description = if offer.description.trim().is_empty() {
        format!("{} by {}", offer.name, offer.cluster_name)
    } else {
        // One stored before control characters were refused is cleaned.
        crate::offers::offer::clean_description(&offer.description).into_owned()
    };
    let mut service = json!({
        "id": ids::service_id(&offer.id),
        "name": name,
        "description": truncate(&description, MAX_DESCRIPTION),
        "tags": tags(offer),
        "bindable": true,
        "instances_retrievable": true,
        "bindings_retrievable": true,
        "allow_context_updates": false,
        "plan_updateable": offer.plans.keys().any(|k| plan_updateable(offer, k)),
        "metadata": {
            "displayName": offer.name,
            "providerDisplayName": offer.cluster_name,
            "clusterID": offer.cluster_id,
            "offerID": offer.id,
            "liqo": offer.liqo,
        },
        "plans": plans,
    });
    if let Some(metadata) = service["metadata"].as_object_mut() {
        // The levels the provider's self-checks reported, if any.
        let reported = [
            ("enforcement", offer.enforcement.map(|l| l.as_str())),
            ("isolation", offer.isolation.map(|l| l.as_str())),
        ];
        for (key, level) in reported {
            if let Some(level) = level {
                metadata.insert(key.into(), json!(level));
            }
        }
    }
    if !offer.kind.is_capacity() {
        service["metadata"]["kind"] = json!(offer.kind);
    }
    service
}

/// Offers on sale: every offer of a provider not disabled.
pub async fn offers_on_sale(state: &Osb) -> Result<Vec<Offer>, OsbError> {
    let disabled = state.buying.providers.store.disabled_providers().await?;
    Ok(state
        .buying
        .offers
        .list_offers(&OfferFilter::default())
        .await?
        .into_iter()
        .filter(|o| !disabled.contains_key(&o.cluster_id) && !o.plans.is_empty())
        .collect())
}

/// The offer and plan key behind OSB `service_id` and `plan_id`.
pub async fn resolve(
    state: &Osb,
    service_id: &str,
    plan_id: &str,
) -> Result<(Offer, String), OsbError> {
    let offer = offers_on_sale(state)
        .await?
        .into_iter()
        .find(|o| ids::service_id(&o.id) == service_id)
        .ok_or_else(|| {
            OsbError::bad_request(format!(
                "service_id: no service {service_id} in this broker's catalog"
            ))
        })?;
    let key = offer
        .plans
        .keys()
        .find(|k| ids::plan_id(&offer.id, k) == plan_id)
        .cloned()
        .ok_or_else(|| {
            OsbError::bad_request(format!(
                "plan_id: service {service_id} has no plan {plan_id}"
            ))
        })?;
    Ok((offer, key))
}

/// The catalog: every offer of a provider that is not disabled, as a
/// service, its plans as plans.
#[utoipa::path(
    get, path = "/v2/catalog", tag = "osb", operation_id = "osbGetCatalog",
    params(super::responses::OsbHeaders),
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "The services", body = super::responses::OsbCatalog),
        super::responses::OsbMalformed,
        super::responses::OsbNoRole,
        super::responses::OsbCommonResponses,
    )
)]
pub async fn get(state: web::Data<Osb>, req: HttpRequest) -> Result<HttpResponse, OsbError> {
    guard(&state, &req).await?;
    let mut names = BTreeSet::new();
    let services: Vec<Value> = offers_on_sale(&state)
        .await?
        .iter()
        .map(|o| service_entry(&state.settings, o, cli_name(&o.id, &mut names)))
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "services": services })))
}

/// Whether `offer`'s plan `key` may be changed for another (OSB
/// `plan_updateable`): a service plan with a sibling of the same hosting.
pub fn plan_updateable(offer: &Offer, key: &str) -> bool {
    let Some(plan) = offer.plans.get(key) else {
        return false;
    };
    !offer.kind.is_capacity()
        && offer
            .plans
            .iter()
            .any(|(k, p)| k != key && p.hosting == plan.hosting)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cli_friendly_and_unique() {
        let mut taken = BTreeSet::new();
        assert_eq!(cli_name("gp_small", &mut taken), "gp-small");
        assert_eq!(cli_name("gp-small", &mut taken), "gp-small-2");
        assert_eq!(cli_name("a~b.c", &mut taken), "a-b.c");
    }

    #[test]
    fn services_carry_the_reported_levels() {
        let settings = OsbSettings {
            basic: None,
            async_mode: crate::osb::config::AsyncMode::Never,
            currency: "USD".into(),
            cost_unit: "hour".into(),
            async_delay: std::time::Duration::ZERO,
        };
        let mut offer: Offer = serde_json::from_value(json!({
            "id": "o", "name": "n", "type": "t", "description": "", "clusterID": "p",
            "clusterName": "P", "createdAt": "2026-01-01T00:00:00Z",
            "updatedAt": "2026-01-01T00:00:00Z", "version": 1, "plans": {}
        }))
        .unwrap();
        let service = service_entry(&settings, &offer, "o".into());
        for key in ["enforcement", "isolation"] {
            assert!(service["metadata"].get(key).is_none(), "{service}");
        }
        offer.enforcement = Some(crate::providers::EnforcementLevel::Hard);
        let service = service_entry(&settings, &offer, "o".into());
        assert_eq!(service["metadata"]["enforcement"], "hard");
        assert!(service["metadata"].get("isolation").is_none(), "{service}");
        offer.isolation = Some(crate::providers::IsolationLevel::Unverified);
        let service = service_entry(&settings, &offer, "o".into());
        assert_eq!(service["metadata"]["enforcement"], "hard");
        assert_eq!(service["metadata"]["isolation"], "unverified");
    }

    #[test]
    fn long_descriptions_are_cut_on_a_char_boundary() {
        let s = "é".repeat(200);
        let t = truncate(&s, MAX_DESCRIPTION);
        assert!(t.len() <= MAX_DESCRIPTION && t.ends_with("..."));
    }
}
