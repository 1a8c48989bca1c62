//! A reservation's terms hold: what a purchase gets is the plan as it was
//! reserved, or nothing.
//!
//! A reservation records the whole plan it reserved (cost and resources;
//! [`Reservation::reserved_plan`]). When the purchase comes, the plan on
//! offer now is compared with it: equal terms are bought as reserved; if
//! the provider changed the cost or any resource meanwhile, the purchase
//! is refused (409) with what changed, and nothing is bought. Neither
//! "the reserved terms anyway" (a provider who lowered its resources would
//! have to grant what it no longer offers) nor "today's terms at the
//! reserved price" (a buyer silently gets less, or pays for terms never
//! offered together) is safe for both sides; a refusal that names the
//! change lets the buyer decide with the new terms in view.
//!
//! A reservation stored before terms were recorded knows only its cost.
//! The plan's `updatedAt` stamp (set by every write that changes its name,
//! cost or resources) tells whether the plan changed after it was
//! reserved: if not, today's plan is the plan reserved and it is bought
//! (the old way, now exact); if so, or if the cost differs, it is refused
//! the same way, saying when the plan changed.

use quantity::ResourceList;

use super::model::Reservation;
use crate::offers::Plan;

/// Written for a resource a plan does not list.
const NONE: &str = "(none)";

/// The changes between the terms `r` reserved and `current`, one
/// `what old → new` per changed term, cost first, then resources by name.
/// Empty when the terms hold. Plan names and stamps are not terms.
pub fn changes(r: &Reservation, current: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    if r.cost != current.cost {
        out.push(format!("cost {} → {}", r.cost, current.cost));
    }
    // A record from before terms were recorded: its cost is all it knows,
    // and the plan's stamp whether anything else may have changed since.
    let Some(reserved) = &r.reserved_plan else {
        if let Some(at) = current.updated_at.filter(|at| *at > r.created_at) {
            if out.is_empty() {
                out.push(format!(
                    "the plan was changed at {} (this reservation predates recorded terms, so what changed is not known)",
                    at.to_rfc3339()
                ));
            }
        }
        return out;
    };
    let (old, new) = (&reserved.resources.0, &current.resources.0);
    let names: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for name in names {
        let (a, b) = (old.get(name), new.get(name));
        if a != b {
            let show =
                |q: Option<&quantity::Quantity>| q.map_or(NONE.to_string(), |q| q.to_string());
            out.push(format!("{name} {} → {}", show(a), show(b)));
        }
    }
    out
}

/// The resources a purchase of `r` gets when `current` is the plan on
/// offer now, or the 409 message naming what changed since it was
/// reserved (see the module docs).
pub fn purchasable(r: &Reservation, current: &Plan) -> Result<ResourceList, String> {
    let changed = changes(r, current);
    if !changed.is_empty() {
        return Err(format!(
            "plan {} of offer {} changed since it was reserved: {}; release this reservation (DELETE /reservations/{}) and reserve again to buy the new terms",
            r.plan_id,
            r.offer_id,
            changed.join(", "),
            r.id
        ));
    }
    Ok(r.reserved_plan
        .as_ref()
        .map_or_else(|| current.resources.clone(), |p| p.resources.clone()))
}

/// Whether contract `r` may continue on its terms when `current` is the
/// plan on offer now: Ok, or the 409 message naming what the provider
/// changed since it was bought (the same comparison as a purchase's, with
/// the contract's cost and resources as the terms held).
pub fn extendable(r: &Reservation, current: &Plan) -> Result<(), String> {
    let Some(terms) = &r.contract else {
        return Err(format!("{} is no contract", r.id));
    };
    let held = Reservation {
        reserved_plan: Some(Plan {
            cost: r.cost,
            resources: terms.resources.clone(),
            ..current.clone()
        }),
        ..r.clone()
    };
    let changed = changes(&held, current);
    if changed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "plan {} of offer {} changed since contract {} was bought: {}; the contract runs to its end on its terms, and the new terms are a new purchase",
        r.plan_id,
        r.offer_id,
        r.id,
        changed.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buying::model::tests::sample;
    use crate::buying::model::ReservationState;

    fn plan(cost: &str, resources: &[(&str, &str)]) -> Plan {
        let mut list = ResourceList::new();
        for (name, q) in resources {
            list.0.insert((*name).to_string(), q.parse().unwrap());
        }
        Plan {
            name: "s".into(),
            plan_id: None,
            cost: cost.parse().unwrap(),
            resources: list,
            updated_at: None,
            updated_by: None,
            hosting: None,
            schemas: None,
        }
    }

    fn reserved(p: &Plan) -> Reservation {
        let mut r = sample(ReservationState::Reserved, 60);
        r.plan_id = "s".into();
        r.cost = p.cost;
        r.reserved_plan = Some(p.clone());
        r
    }

    #[test]
    fn unchanged_terms_are_bought_as_reserved() {
        let p = plan("1", &[("cpu", "4"), ("memory", "8Gi")]);
        let r = reserved(&p);
        // The same quantities spelled otherwise, a new name: same terms.
        let mut again = plan("1.0", &[("cpu", "4000m"), ("memory", "8Gi")]);
        again.name = "renamed".into();
        assert_eq!(purchasable(&r, &again).unwrap(), p.resources);
    }

    #[test]
    fn a_changed_plan_is_refused_naming_each_change() {
        let r = reserved(&plan("1", &[("cpu", "4"), ("memory", "8Gi")]));
        let now = plan("100", &[("cpu", "1"), ("nvidia.com/gpu", "1")]);
        let e = purchasable(&r, &now).unwrap_err();
        assert!(
            e.starts_with(
                "plan s of offer o changed since it was reserved: cost 1.0 → 100.0, cpu 4 → 1, memory 8Gi → (none), nvidia.com/gpu (none) → 1;"
            ),
            "{e}"
        );
        // More resources at the same price is a change too: the provider
        // must not be held to them, nor the buyer surprised.
        let more = plan("1", &[("cpu", "8"), ("memory", "8Gi")]);
        assert_eq!(changes(&r, &more), ["cpu 4 → 8"]);
    }

    #[test]
    fn a_contract_continues_only_on_its_terms() {
        let p = plan("1", &[("cpu", "4")]);
        let mut c = reserved(&p);
        c.contract = Some(crate::buying::model::ContractTerms::new(
            None,
            "n".into(),
            p.resources.clone(),
            "liqo-broker".into(),
            vec![],
            crate::store::now(),
        ));
        extendable(&c, &plan("1.0", &[("cpu", "4000m")])).unwrap();
        let e = extendable(&c, &plan("2", &[("cpu", "4")])).unwrap_err();
        assert!(e.contains("cost 1.0 → 2.0"), "{e}");
        let e = extendable(&c, &plan("1", &[("cpu", "2")])).unwrap_err();
        assert!(e.contains("cpu 4 → 2"), "{e}");
    }

    #[test]
    fn records_without_recorded_terms_go_by_cost_and_the_plans_stamp() {
        let mut r = reserved(&plan("1", &[("cpu", "4")]));
        r.reserved_plan = None;
        // Unchanged since before it was reserved (or never stamped): the
        // plan on offer is the plan reserved.
        let mut same = plan("1", &[("cpu", "4")]);
        assert_eq!(purchasable(&r, &same).unwrap(), same.resources);
        same.updated_at = Some(r.created_at - chrono::Duration::seconds(1));
        assert_eq!(purchasable(&r, &same).unwrap(), same.resources);
        // Changed after: refused, though only the cost was recorded.
        let mut fewer = plan("1", &[("cpu", "1")]);
        fewer.updated_at = Some(r.created_at + chrono::Duration::seconds(1));
        let e = purchasable(&r, &fewer).unwrap_err();
        assert!(e.contains("predates recorded terms"), "{e}");
        let dearer = plan("2", &[("cpu", "4")]);
        assert_eq!(changes(&r, &dearer), ["cost 1.0 → 2.0"]);
        assert!(purchasable(&r, &dearer).is_err());
    }
}
