//! The last look before buying: a plan decided on is bought only if the
//! catalog still offers it on the terms the decision weighed (the offer
//! and plan there, the same cost, period and resources). The feed may
//! have changed between the decision and the purchase; when it did, the
//! round decides again on what is offered now instead of buying terms
//! nobody chose.

use super::{Buy, Candidate};

/// `Ok` when `candidates` (the offers now) still hold `buy` as decided;
/// otherwise what changed, for the log and the status.
pub fn still_offered(buy: &Buy, candidates: &[Candidate]) -> Result<(), String> {
    let (offer, plan) = (&buy.offer_id, &buy.plan_id);
    let Some(now) = candidates
        .iter()
        .find(|c| &c.offer_id == offer && &c.plan_id == plan)
    else {
        return Err(if candidates.iter().any(|c| &c.offer_id == offer) {
            format!("offer {offer} no longer has plan {plan}")
        } else {
            format!("offer {offer} was withdrawn")
        });
    };
    if now.cost != buy.cost {
        return Err(format!(
            "offer {offer} plan {plan} was repriced from {} to {}",
            buy.cost, now.cost
        ));
    }
    if now.pricing.as_ref().map(|p| p.per) != Some(buy.per) {
        return Err(format!("offer {offer} plan {plan} changed its cost period"));
    }
    if now.resources != buy.resources {
        return Err(format!("offer {offer} plan {plan} changed what it sells"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spend::{Money, Period, Pricing};
    use quantity::ResourceList;

    fn candidate(offer: &str, plan: &str, cost: &str, cpu: &str) -> Candidate {
        Candidate {
            offer_id: offer.into(),
            plan_id: plan.into(),
            resources: ResourceList::from_strings([("cpu", cpu)]).expect("resources"),
            cost: cost.parse().expect("cost"),
            pricing: Some(Pricing {
                currency: "EUR".into(),
                per: Period::Hour,
            }),
            ..Candidate::default()
        }
    }

    fn buy(c: &Candidate) -> Buy {
        Buy {
            offer_id: c.offer_id.clone(),
            plan_id: c.plan_id.clone(),
            resources: c.resources.clone(),
            provider_id: String::new(),
            provider_name: String::new(),
            cost: c.cost,
            per: Period::Hour,
            cost_per_hour: c.cost.into(),
            cost_per_month: Money::ZERO,
            pods: Vec::new(),
        }
    }

    #[test]
    fn a_plan_is_bought_only_on_the_terms_decided() {
        let b = candidate("b", "b6", "3.50", "6");
        let decided = buy(&b);
        assert_eq!(still_offered(&decided, std::slice::from_ref(&b)), Ok(()));

        let withdrawn = still_offered(&decided, &[candidate("a", "a4", "2", "4")]);
        assert!(withdrawn.unwrap_err().contains("withdrawn"));
        let no_plan = still_offered(&decided, &[candidate("b", "b8", "3.50", "8")]);
        assert!(no_plan.unwrap_err().contains("no longer has plan b6"));
        let repriced = still_offered(&decided, &[candidate("b", "b6", "3.60", "6")]);
        let repriced = repriced.unwrap_err();
        assert!(
            repriced.contains("repriced from 3.5") && repriced.contains("to 3.6"),
            "{repriced}"
        );
        let smaller = still_offered(&decided, &[candidate("b", "b6", "3.50", "5")]);
        assert!(smaller.unwrap_err().contains("changed what it sells"));
        let mut monthly = b;
        monthly.pricing = Some(Pricing {
            currency: "EUR".into(),
            per: Period::Month,
        });
        assert!(still_offered(&decided, &[monthly]).is_err());
    }
}
