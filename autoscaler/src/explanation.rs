//! Decisions in words, for people: the Events on pods, the status's
//! `lastDecision`, and `market-autoscaler explain` all print these.

use std::fmt::{self, Display, Formatter, Write as _};

use quantity::Quantity;

use crate::decide::{BudgetPeriod, PodReason, Reason, ScaleUp, Search};
use crate::spend::Money;

impl Display for BudgetPeriod {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BudgetPeriod::Hour => "maxSpendPerHour",
            BudgetPeriod::Month => "maxSpendPerMonth",
        })
    }
}

/// `6 cpu`, `8Gi memory`, `12 pods`.
fn amount(q: &Quantity, resource: &str) -> String {
    format!("{q} {resource}")
}

impl Display for Reason {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Budget {
                period: BudgetPeriod::Hour,
                limit,
                would_be,
            } => write!(
                f,
                "over budget: spend would be {would_be} per hour, above maxSpendPerHour {limit}"
            ),
            Reason::Budget {
                period: BudgetPeriod::Month,
                limit,
                would_be,
            } => write!(
                f,
                "over budget: this month's spend would reach {would_be}, above maxSpendPerMonth {limit}"
            ),
            Reason::Limit {
                resource,
                limit,
                would_be,
            } => write!(
                f,
                "over the {resource} limit: held, in flight and bought would be {would_be}, above {limit}"
            ),
            Reason::Contracts { limit } => {
                write!(f, "the contract limit ({limit}) is reached")
            }
            Reason::Selector => f.write_str("its labels do not match offers.selector"),
            Reason::Provider {
                provider,
                denied: true,
            } => write!(f, "provider {provider} is denied"),
            Reason::Provider {
                provider,
                denied: false,
            } => write!(f, "provider {provider} is not in the allow list"),
            Reason::ServiceOffer => f.write_str("service offer (only capacity is bought)"),
            Reason::ResourceKind { resource } => {
                write!(f, "it sells {resource}, not among offers.resources")
            }
            Reason::Fit => f.write_str("no waiting pod fits it"),
            Reason::Backoff { until } => {
                write!(f, "backed off after a failed purchase until {until}")
            }
            Reason::Pricing => {
                f.write_str("the catalog does not say what its cost is per (pricing unknown)")
            }
            Reason::Currency { offered, wanted } => {
                write!(f, "priced in {offered}, the limits are in {wanted}")
            }
            Reason::HostileOffer { why } => write!(f, "refused: {why}"),
        }
    }
}

impl Display for PodReason {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            PodReason::TooLarge {
                resource,
                needs,
                largest: Some(largest),
            } => write!(
                f,
                "needs {}, the largest allowed plan has {largest}",
                amount(needs, resource)
            ),
            PodReason::TooLarge {
                resource,
                needs,
                largest: None,
            } => write!(
                f,
                "needs {}, no allowed plan sells {resource}",
                amount(needs, resource)
            ),
            PodReason::NoPlanFitsAll => f.write_str(
                "each of its requests fits some allowed plan, but no single plan fits them all",
            ),
            PodReason::NotAdmitted => f.write_str(
                "its node selector, node affinity or tolerations admit no allowed offer's virtual node",
            ),
            PodReason::NoAllowedOffer => f.write_str("no offer may be bought"),
            PodReason::Blocked(reason) => write!(f, "a plan fits, but {reason}"),
            PodReason::Unreasonable { resource } => {
                write!(f, "its {resource} request is too large to count")
            }
            PodReason::Deferred => {
                f.write_str("left for the next round (the search for the cheapest set was cut short)")
            }
        }
    }
}

impl Display for Search {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Search::Trivial => "nothing to choose",
            Search::Exact => "exact search",
            Search::Bounded => "bounded search (best found)",
            Search::Heuristic => "heuristic",
        })
    }
}

/// A price per hour and per month: `0.5/h (360.0/month) EUR`.
pub fn price(per_hour: Money, per_month: Money, currency: &str) -> String {
    format!("{per_hour} {currency}/h ({per_month} {currency}/month)")
}

impl ScaleUp {
    /// One line: what is bought and what is left.
    pub fn summary(&self, currency: &str) -> String {
        let mut s = if self.buy.is_empty() {
            "buy nothing".to_string()
        } else {
            format!(
                "buy {} plan(s) for {} pod(s), {}",
                self.buy.len(),
                self.buy.iter().map(|b| b.pods.len()).sum::<usize>(),
                price(self.added_per_hour, self.added_per_month, currency)
            )
        };
        if !self.placed.is_empty() {
            let _ = write!(
                s,
                "; {} pod(s) fit capacity held or in flight",
                self.placed.len()
            );
        }
        if !self.unplaceable.is_empty() {
            let _ = write!(s, "; {} pod(s) get nothing", self.unplaceable.len());
        }
        s
    }

    /// The whole decision, several lines: every plan with its pods and
    /// prices, every pod left out and every offer rejected, with why.
    pub fn report(&self, currency: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Decision: {} ({}).",
            self.summary(currency),
            self.search
        );
        for b in &self.buy {
            let _ = writeln!(
                out,
                "  buy {}/{} from {} ({}): {} — for {}",
                b.offer_id,
                b.plan_id,
                b.provider_name,
                b.provider_id,
                price(b.cost_per_hour, b.cost_per_month, currency),
                b.pods.join(", ")
            );
        }
        if !self.buy.is_empty() {
            let _ = writeln!(
                out,
                "  spend after: {} {currency}/h; this month projected {} {currency}",
                self.spend_per_hour_after, self.month_projected_after
            );
        }
        for p in &self.placed {
            let _ = writeln!(out, "  {} fits {} (held or in flight)", p.pod, p.room);
        }
        for u in &self.unplaceable {
            let _ = writeln!(out, "  {} gets nothing: {}", u.pod, u.reason);
        }
        for r in &self.rejected {
            let _ = writeln!(
                out,
                "  offer {}/{} not bought: {}",
                r.offer_id, r.plan_id, r.reason
            );
        }
        out
    }
}
