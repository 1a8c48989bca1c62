//! The placement decision, a pure function of the namespace, its
//! consumer's rules and the catalog's offers: which providers a namespace
//! goes to, by which rule, and why every other provider was left out.
//!
//! **Who qualifies.** A provider (a cluster ID with offers in the catalog)
//! qualifies for a namespace when it is not the namespace's consumer, is
//! not disabled in the catalog, passes the consumer's allow and deny lists, and has an offer carrying
//! every required label with a plan that fits the namespace's demand (every
//! resource of the demand at most the plan's, compared as Kubernetes
//! quantities). Its cost is its cheapest such plan.
//!
//! **Hysteresis** (the rule that keeps a namespace from flapping):
//! 1. the current providers that still qualify are kept;
//! 2. when fewer than `spread` are kept (one stopped qualifying, or none
//!    was chosen yet), the cheapest qualifying others fill the gap —
//!    `replaced` or `cheapest`;
//! 3. when all are kept, the namespace moves to the cheapest `spread`
//!    providers only when they cost less than the current ones by **more
//!    than `min_saving_percent`**, continuously for **longer than `hold`**
//!    (the first time a cheaper set is seen is remembered as *pending*;
//!    a different cheaper set starts the clock again) — `cheaper`;
//! 4. when nothing qualifies the current selection is kept as it is (the
//!    consumer's own cluster aside) — `none-qualifies`: a namespace is never
//!    emptied or sent everywhere by a selection that names nobody.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use quantity::ResourceList;
use serde::{Deserialize, Serialize};

use crate::offers::{Offers, Price};
use crate::policy::{Hysteresis, Rules};

mod index;
pub mod prepared;

pub use prepared::Prepared;

/// A cheaper set of providers, first seen at `since`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub providers: Vec<String>,
    pub since: Timestamp,
}

/// Everything the decision reads.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The namespace's consumer (its origin cluster ID).
    pub consumer: &'a str,
    pub demand: &'a ResourceList,
    pub rules: &'a Rules,
    pub hysteresis: Hysteresis,
    pub offers: &'a Offers,
    /// Providers an administrator disabled in the catalog.
    pub disabled: &'a BTreeSet<String>,
    /// The providers selected now (from the NamespaceOffloading).
    pub current: &'a [String],
    pub pending: Option<&'a Pending>,
    pub now: Timestamp,
}

/// A qualifying provider and its cheapest fitting plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub provider: String,
    #[serde(with = "price_text")]
    pub cost: Price,
    pub offer: String,
    pub plan: String,
}

/// Why a provider was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exclusion {
    /// It is the namespace's consumer.
    OwnCluster,
    /// Disabled by a catalog administrator.
    Disabled,
    /// On a deny list.
    Denied,
    /// Not on an allow list.
    NotAllowed,
    /// No offer carries these required labels.
    MissingLabels(Vec<String>),
    /// No plan of its offers with the required labels fits the demand.
    NoPlanFits,
    /// It has no offer in the catalog (any more).
    NoOffer,
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exclusion::OwnCluster => f.write_str("the consumer's own cluster"),
            Exclusion::Disabled => f.write_str("disabled in the catalog"),
            Exclusion::Denied => f.write_str("on a deny list"),
            Exclusion::NotAllowed => f.write_str("not on the allow list"),
            Exclusion::MissingLabels(l) => write!(f, "no offer carries {}", l.join(",")),
            Exclusion::NoPlanFits => f.write_str("no plan fits the demand"),
            Exclusion::NoOffer => f.write_str("no offer in the catalog"),
        }
    }
}

/// The rule that made the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// No provider was chosen yet: the cheapest qualifying.
    Cheapest,
    /// The current providers still qualify and nothing is cheaper enough
    /// for long enough.
    Kept,
    /// A current provider stopped qualifying; the cheapest other replaced it.
    Replaced,
    /// A cheaper set beat the current one by the margin for the hold time.
    Cheaper,
    /// Nothing qualifies: the current selection stays.
    NoneQualifies,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Cheapest => "cheapest",
            Rule::Kept => "kept",
            Rule::Replaced => "replaced",
            Rule::Cheaper => "cheaper",
            Rule::NoneQualifies => "none-qualifies",
        }
    }
}

/// The outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The providers to select, sorted.
    pub chosen: Vec<String>,
    pub rule: Rule,
    /// Every qualifying provider, cheapest first (shared by the decisions
    /// of namespaces with the same verdicts, see [`Prepared`]).
    pub candidates: Arc<[Candidate]>,
    pub excluded: Arc<BTreeMap<String, Exclusion>>,
    /// A cheaper set waiting out the hold time.
    pub pending: Option<Pending>,
    /// Decide again after this long (when `pending` matures).
    pub recheck: Option<Duration>,
}

impl Decision {
    /// Whether the selection differs from `current`.
    pub fn moves(&self, current: &[String]) -> bool {
        let now: BTreeSet<&String> = current.iter().collect();
        let next: BTreeSet<&String> = self.chosen.iter().collect();
        now != next
    }

    /// One line for people: what was chosen, by which rule, who was left out.
    pub fn explain(&self) -> String {
        let mut out = match self.chosen.is_empty() {
            true => "no provider chosen".to_string(),
            false => format!("chosen {}", self.chosen.join(",")),
        };
        out.push_str(&format!(" (rule {})", self.rule.as_str()));
        for p in &self.chosen {
            if let Some(c) = self.candidates.iter().find(|c| &c.provider == p) {
                out.push_str(&format!(
                    "; {p}: offer {} plan {} at {}",
                    c.offer, c.plan, c.cost
                ));
            }
        }
        if let Some(p) = &self.pending {
            out.push_str(&format!(
                "; cheaper {} pending since {}",
                p.providers.join(","),
                p.since
            ));
        }
        if !self.excluded.is_empty() {
            let list: Vec<String> = self
                .excluded
                .iter()
                .map(|(p, why)| format!("{p}: {why}"))
                .collect();
            out.push_str(&format!("; excluded {}", list.join("; ")));
        }
        out
    }
}

/// Every provider's verdict for one namespace: the qualifying ones
/// (cheapest first, ties by cluster ID) and why the others were left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Qualified {
    pub candidates: Arc<[Candidate]>,
    pub excluded: Arc<BTreeMap<String, Exclusion>>,
}

/// Decide where the namespace goes (see the module docs). Deciding many
/// namespaces on the same offers: [`Prepared::decide`], the same decision.
pub fn decide(input: &Input<'_>) -> Decision {
    let index = index::Index::new(input.offers);
    let qualified = index.qualify(input.consumer, input.disabled, input.rules, input.demand);
    decide_qualified(input, &index, &qualified)
}

/// [`decide`] with the offers' `index` and the providers' verdicts
/// (`qualified`) for `input` already worked out.
fn decide_qualified(input: &Input<'_>, index: &index::Index, qualified: &Qualified) -> Decision {
    let candidates = &qualified.candidates;
    // A current provider gone from the catalog is said so (the verdicts
    // cover the providers with offers only).
    let mut excluded = qualified.excluded.clone();
    for p in input.current {
        if p != input.consumer && !index.offers_from(p) {
            Arc::make_mut(&mut excluded).insert(p.clone(), Exclusion::NoOffer);
        }
    }
    let spread = input.rules.spread.max(1);
    let current: Vec<&String> = input
        .current
        .iter()
        .filter(|p| p.as_str() != input.consumer)
        .collect();
    let mut kept: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| current.contains(&&c.provider))
        .collect();
    kept.truncate(spread);

    let decision = |chosen: Vec<String>, rule, pending, recheck| {
        let mut chosen = chosen;
        chosen.sort();
        chosen.dedup();
        Decision {
            chosen,
            rule,
            candidates: candidates.clone(),
            excluded: excluded.clone(),
            pending,
            recheck,
        }
    };

    if candidates.is_empty() {
        let chosen = current.into_iter().cloned().collect();
        return decision(chosen, Rule::NoneQualifies, None, None);
    }
    let names = |cs: &[&Candidate]| cs.iter().map(|c| c.provider.clone()).collect::<Vec<_>>();
    let lost_some = kept.len() < current.len().min(spread);
    let room = kept.len() < spread.min(candidates.len());
    if lost_some || room || kept.is_empty() {
        let mut chosen = names(&kept);
        for c in candidates.iter() {
            if chosen.len() >= spread {
                break;
            }
            if !chosen.contains(&c.provider) {
                chosen.push(c.provider.clone());
            }
        }
        let rule = if lost_some {
            Rule::Replaced
        } else if kept.is_empty() {
            Rule::Cheapest
        } else {
            Rule::Kept
        };
        return decision(chosen, rule, None, None);
    }

    let ideal: Vec<&Candidate> = candidates.iter().take(spread).collect();
    let ideal_names: BTreeSet<String> = names(&ideal).into_iter().collect();
    let kept_names: BTreeSet<String> = names(&kept).into_iter().collect();
    // Each provider is a candidate once, so a list's sum is its set's.
    let total = |cs: &[&Candidate]| {
        cs.iter()
            .fold(Price::default(), |sum, c| sum.saturating_add(c.cost))
    };
    let (ideal_cost, kept_cost) = (total(&ideal), total(&kept));
    let margin = u128::from(100 - input.hysteresis.min_saving_percent.min(100));
    let cheaper_enough = ideal_names != kept_names
        && ideal_cost.nanos().saturating_mul(100) < kept_cost.nanos().saturating_mul(margin);
    if !cheaper_enough {
        return decision(names(&kept), Rule::Kept, None, None);
    }
    let ideal_list: Vec<String> = ideal_names.into_iter().collect();
    let since = input
        .pending
        .filter(|p| p.providers == ideal_list)
        .map_or(input.now, |p| p.since);
    let waited = input.now.duration_since(since).unsigned_abs();
    if waited > input.hysteresis.hold || (input.hysteresis.hold.is_zero() && waited.is_zero()) {
        return decision(ideal_list, Rule::Cheaper, None, None);
    }
    let left = input.hysteresis.hold.saturating_sub(waited) + Duration::from_millis(1);
    decision(
        names(&kept),
        Rule::Kept,
        Some(Pending {
            providers: ideal_list,
            since,
        }),
        Some(left),
    )
}

mod price_text {
    use super::Price;
    pub fn serialize<S: serde::Serializer>(p: &Price, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(p)
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Price, D::Error> {
        serde::Deserialize::deserialize(d)
    }
}

#[cfg(test)]
mod tests;
