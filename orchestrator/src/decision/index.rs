//! The catalog's offers arranged for the decision once per change of the
//! offers, not once per namespace: grouped by provider, each provider's
//! plans sorted cheapest first (ties by offer id, then plan key — the order
//! in which [`decide`](super::decide) picks a provider's plan), so that
//! finding a provider's cheapest fitting plan is a walk that stops at the
//! first plan that fits.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use quantity::ResourceList;

use super::{Candidate, Exclusion, Qualified};
use crate::offers::{Offers, Price};
use crate::policy::Rules;

/// The offers by provider, plans pre-sorted.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// By cluster ID (the order providers are judged in).
    providers: BTreeMap<String, Provider>,
}

#[derive(Debug, Clone, Default)]
struct Provider {
    /// Each offer's id and labels.
    offers: Vec<(String, BTreeMap<String, String>)>,
    /// Every plan of every offer, cheapest first.
    plans: Vec<PlanEntry>,
}

#[derive(Debug, Clone)]
struct PlanEntry {
    cost: Price,
    /// Into `Provider::offers`.
    offer: usize,
    key: String,
    resources: ResourceList,
}

impl Index {
    pub fn new(offers: &Offers) -> Index {
        let mut providers: BTreeMap<String, Provider> = BTreeMap::new();
        for offer in offers.values() {
            let p = providers.entry(offer.cluster_id.clone()).or_default();
            let at = p.offers.len();
            p.offers.push((offer.id.clone(), offer.labels.clone()));
            p.plans
                .extend(offer.plans.iter().map(|(key, plan)| PlanEntry {
                    cost: plan.cost,
                    offer: at,
                    key: key.clone(),
                    resources: plan.resources.clone(),
                }));
        }
        for p in providers.values_mut() {
            let offers = &p.offers;
            p.plans.sort_by(|a, b| {
                a.cost
                    .cmp(&b.cost)
                    .then_with(|| offers[a.offer].0.cmp(&offers[b.offer].0))
                    .then_with(|| a.key.cmp(&b.key))
            });
        }
        Index { providers }
    }

    /// Whether `provider` has offers.
    pub fn offers_from(&self, provider: &str) -> bool {
        self.providers.contains_key(provider)
    }

    /// Every provider's verdict for a namespace of `consumer` under
    /// `rules` needing `demand`: the qualifying ones (cheapest first, ties
    /// by cluster ID) and why the others were left out.
    pub fn qualify(
        &self,
        consumer: &str,
        disabled: &BTreeSet<String>,
        rules: &Rules,
        demand: &ResourceList,
    ) -> Qualified {
        let mut candidates = Vec::new();
        let mut excluded = BTreeMap::new();
        for (provider, p) in &self.providers {
            let provider = provider.as_str();
            let verdict = if provider == consumer {
                Err(Exclusion::OwnCluster)
            } else if disabled.contains(provider) {
                Err(Exclusion::Disabled)
            } else if rules.deny.contains(provider) {
                Err(Exclusion::Denied)
            } else if rules.allow.iter().any(|a| !a.contains(provider)) {
                Err(Exclusion::NotAllowed)
            } else {
                p.best_plan(provider, rules, demand)
            };
            match verdict {
                Ok(c) => candidates.push(c),
                Err(why) => {
                    excluded.insert(provider.to_string(), why);
                }
            }
        }
        candidates.sort_by(|a, b| {
            a.cost
                .cmp(&b.cost)
                .then_with(|| a.provider.cmp(&b.provider))
        });
        Qualified {
            candidates: candidates.into(),
            excluded: Arc::new(excluded),
        }
    }
}

impl Provider {
    /// The cheapest plan fitting `demand` among the offers carrying the
    /// required labels.
    fn best_plan(
        &self,
        provider: &str,
        rules: &Rules,
        demand: &ResourceList,
    ) -> Result<Candidate, Exclusion> {
        let labelled: Vec<bool> = self
            .offers
            .iter()
            .map(|(_, labels)| {
                rules
                    .required_labels
                    .iter()
                    .all(|(k, v)| labels.get(k) == Some(v))
            })
            .collect();
        if !labelled.contains(&true) {
            let missing = rules
                .required_labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            return Err(Exclusion::MissingLabels(missing));
        }
        self.plans
            .iter()
            .find(|plan| labelled[plan.offer] && demand.fits_within(&plan.resources))
            .map(|plan| Candidate {
                provider: provider.to_string(),
                cost: plan.cost,
                offer: self.offers[plan.offer].0.clone(),
                plan: plan.key.clone(),
            })
            .ok_or(Exclusion::NoPlanFits)
    }
}
