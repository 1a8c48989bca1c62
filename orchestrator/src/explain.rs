//! The dry run, `orchestrator explain --namespace NS`: reads the namespace
//! (its pods, quotas and NamespaceOffloading) from the cluster and the
//! offers from the catalog, decides with the controller's own code
//! ([`View::decide`]), and prints the decision and its reasons. It writes
//! nothing.

use serde_json::{json, Value};

use crate::decision::Decision;
use crate::offers::Offers;
use crate::policy::Policy;
use crate::view::View;

/// The decision for `view` as a JSON document (`--output json`).
pub fn to_json(view: &View, decision: &Decision) -> Value {
    json!({
        "namespace": view.namespace,
        "consumer": view.consumer,
        "demand": view.demand.resources,
        "demandSource": view.demand.to_string(),
        "current": view.current(),
        "chosen": decision.chosen,
        "rule": decision.rule,
        "candidates": &decision.candidates[..],
        "excluded": decision.excluded.iter().map(|(p, why)| (p.clone(), why.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
        "pending": decision.pending,
        "reason": decision.explain(),
    })
}

/// The decision for `view` for people (`--output text`).
pub fn to_text(view: &View, decision: &Decision) -> String {
    let mut out = format!(
        "namespace {} (consumer {})\ndemand: {}\ncurrent: {}\ndecision: {} (rule {})\n",
        view.namespace,
        view.consumer,
        view.demand,
        list(&view.current()),
        list(&decision.chosen),
        decision.rule.as_str(),
    );
    if !decision.candidates.is_empty() {
        out.push_str("candidates (cheapest first):\n");
        for c in decision.candidates.iter() {
            out.push_str(&format!(
                "  {}: {} (offer {}, plan {})\n",
                c.provider, c.cost, c.offer, c.plan
            ));
        }
    }
    if !decision.excluded.is_empty() {
        out.push_str("excluded:\n");
        for (p, why) in decision.excluded.iter() {
            out.push_str(&format!("  {p}: {why}\n"));
        }
    }
    if let Some(p) = &decision.pending {
        out.push_str(&format!(
            "pending: {} is cheaper enough since {}\n",
            list(&p.providers),
            p.since
        ));
    }
    out
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".to_string()
    } else {
        items.join(", ")
    }
}

/// Decide `view` now, as the controller would.
pub fn explain(
    view: &View,
    policy: &Policy,
    offers: &Offers,
    disabled: &std::collections::BTreeSet<String>,
) -> Decision {
    view.decide(policy, offers, disabled, jiff::Timestamp::now())
}
