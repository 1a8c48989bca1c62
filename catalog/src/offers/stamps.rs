//! Who last changed each plan, and when: every write stamps the plans whose
//! content (name, planID, cost, resources, hosting, schemas) it changed with `updatedAt` and
//! `updatedBy`; plans it left as they were keep their stamps. The writer is
//! told apart by the `User-Agent` the provider agent sends
//! (`provider-agent/<version>`); any other client of the provider's token
//! (the web UI, curl) is the provider.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::Plan;

// `Writer` is a wire type, declared once in `catalog-client`.
pub use catalog_client::wire::offer::Writer;

/// The product names of the provider agent's `User-Agent` (the second is
/// the spelling with the project's name in front).
const AGENT_PRODUCTS: [&str; 2] = ["provider-agent", "liqo-broker-provider-agent"];

/// The writer of a request with this `User-Agent` header: the provider
/// agent when its first product is the agent's, else the provider.
pub fn writer_from_user_agent(user_agent: Option<&str>) -> Writer {
    let product = user_agent
        .and_then(|ua| ua.split_whitespace().next())
        .map(|p| p.split('/').next().unwrap_or(p));
    match product {
        Some(p) if AGENT_PRODUCTS.iter().any(|a| a.eq_ignore_ascii_case(p)) => {
            Writer::ProviderAgent
        }
        _ => Writer::Provider,
    }
}

/// Does `a` say the same as `b`, stamps aside?
fn same_content(a: &Plan, b: &Plan) -> bool {
    a.name == b.name
        && a.plan_id == b.plan_id
        && a.cost == b.cost
        && a.resources == b.resources
        && a.hosting == b.hosting
        && a.schemas == b.schemas
}

/// Stamp `plans`, about to replace `before` (the live offer's plans, if
/// any), as written by `writer` at `now`: a plan new or changed gets
/// `(now, writer)`, an unchanged one keeps the stamps it had.
pub fn stamp_plans(
    plans: &mut BTreeMap<String, Plan>,
    before: Option<&BTreeMap<String, Plan>>,
    writer: Writer,
    now: DateTime<Utc>,
) {
    for (key, plan) in plans.iter_mut() {
        match before.and_then(|b| b.get(key)) {
            Some(old) if same_content(old, plan) => {
                plan.updated_at = old.updated_at;
                plan.updated_by = old.updated_by;
            }
            _ => {
                plan.updated_at = Some(now);
                plan.updated_by = Some(writer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offers::OfferSpec;

    fn plans(body: &str) -> BTreeMap<String, Plan> {
        OfferSpec::from_json(format!(r#"{{"name":"n","type":"t","plans":{body}}}"#).as_bytes())
            .unwrap()
            .plans
    }

    #[test]
    fn the_agent_is_told_apart_by_its_user_agent() {
        for ua in [
            "provider-agent/0.1.0",
            "liqo-broker-provider-agent/1.2 (linux)",
            "Provider-Agent",
        ] {
            assert_eq!(
                writer_from_user_agent(Some(ua)),
                Writer::ProviderAgent,
                "{ua}"
            );
        }
        for ua in [
            None,
            Some(""),
            Some("Mozilla/5.0 (X11)"),
            Some("curl/8.5"),
            Some("my-provider-agent/1"),
        ] {
            assert_eq!(writer_from_user_agent(ua), Writer::Provider, "{ua:?}");
        }
    }

    #[test]
    fn only_new_and_changed_plans_get_new_stamps() {
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let t1 = DateTime::parse_from_rfc3339("2026-01-01T01:00:00Z")
            .unwrap()
            .to_utc();
        let mut first = plans(
            r#"{"a":{"name":"a","cost":"1","resources":{"cpu":"1"}},"b":{"name":"b","cost":"2","resources":{"cpu":"2"}}}"#,
        );
        stamp_plans(&mut first, None, Writer::Provider, t0);
        assert!(first
            .values()
            .all(|p| p.updated_at == Some(t0) && p.updated_by == Some(Writer::Provider)));
        // The agent changes b's resources (1000m is 1, but 2 → 3 is a change), keeps a, adds c.
        let mut second = plans(
            r#"{"a":{"name":"a","cost":"1.0","resources":{"cpu":"1000m"}},"b":{"name":"b","cost":"2","resources":{"cpu":"3"}},"c":{"name":"c","cost":"1","resources":{}}}"#,
        );
        stamp_plans(&mut second, Some(&first), Writer::ProviderAgent, t1);
        assert_eq!(
            (second["a"].updated_at, second["a"].updated_by),
            (Some(t0), Some(Writer::Provider))
        );
        assert_eq!(
            (second["b"].updated_at, second["b"].updated_by),
            (Some(t1), Some(Writer::ProviderAgent))
        );
        assert_eq!(
            (second["c"].updated_at, second["c"].updated_by),
            (Some(t1), Some(Writer::ProviderAgent))
        );
        // A renamed plan is a change too.
        let mut third = second.clone();
        third.get_mut("a").unwrap().name = "renamed".into();
        stamp_plans(&mut third, Some(&second), Writer::Provider, t1);
        assert_eq!(third["a"].updated_by, Some(Writer::Provider));
        assert_eq!(third["a"].updated_at, Some(t1));
    }
}
