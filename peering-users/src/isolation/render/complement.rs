//! The pods NO buyer policy selects, as label selectors (pure).
//!
//! NetworkPolicies are an additive union: a pod a buyer's policy selects
//! for a direction must not also be selected, for that direction, by the
//! default tenant isolation, or the latter's rules would widen the
//! buyer's. So, in a namespace where buyer policies select pods for a
//! direction, the tenant isolation for that direction selects the
//! complement of the union of their selectors:
//!
//! - the complement of one selector (an AND of requirements) is the OR of
//!   its negated requirements: `k=v` (a `matchLabels` entry, `k In [v]`)
//!   → `k NotIn [v]`, `In` ↔ `NotIn`, `Exists` ↔ `DoesNotExist`
//!   (Kubernetes' `NotIn` matches a pod without the key, so each pair
//!   splits the pods in two: `labels/selector.go` `Requirement.Matches`);
//! - the complement of a union is the AND of the complements, which,
//!   multiplied out, is an OR of [`Term`]s (one requirement of each
//!   complement, ANDed): one NetworkPolicy per term.
//!
//! A term whose requirements contradict each other (`k In [a]` with
//! `k NotIn [a]`, `Exists` with `DoesNotExist`) selects nothing and is
//! dropped; a selector without requirements (every pod) has an empty
//! complement, so nothing is left for the tenant isolation. The number of
//! terms is the product of the selectors' requirement counts: callers
//! bound it ([`MAX_TERMS`]).

use std::collections::{BTreeMap, BTreeSet};

use catalog_client::wire::tenant_policy::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Most NetworkPolicies the tenant isolation of one direction of one
/// namespace is split into; a buyer policy that would take more is
/// refused.
pub const MAX_TERMS: usize = 64;

/// What one term asks of one label key, normalised.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    /// `In`: the value is one of these (several `In`s intersect).
    one_of: Option<BTreeSet<String>>,
    /// `NotIn`: none of these (absent allowed).
    none_of: BTreeSet<String>,
    exists: bool,
    absent: bool,
}

impl Key {
    fn add(&mut self, operator: &str, values: &[String]) {
        match operator {
            "In" => {
                let values: BTreeSet<String> = values.iter().cloned().collect();
                self.one_of = Some(match self.one_of.take() {
                    Some(before) => before.intersection(&values).cloned().collect(),
                    None => values,
                });
            }
            "NotIn" => self.none_of.extend(values.iter().cloned()),
            "Exists" => self.exists = true,
            _ => self.absent = true,
        }
    }

    /// Whether no label value (or absence) satisfies it.
    fn contradictory(&self) -> bool {
        if self.absent && (self.exists || self.one_of.is_some()) {
            return true;
        }
        self.one_of
            .as_ref()
            .is_some_and(|one| one.iter().all(|v| self.none_of.contains(v)))
    }

    /// The fewest requirements that say the same.
    fn requirements(&self, key: &str) -> Vec<LabelSelectorRequirement> {
        let req = |operator: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
            key: key.to_string(),
            operator: operator.to_string(),
            values,
        };
        if self.absent {
            return vec![req("DoesNotExist", None)];
        }
        if let Some(one) = &self.one_of {
            let left: Vec<String> = one.difference(&self.none_of).cloned().collect();
            return vec![req("In", Some(left))];
        }
        let mut out = Vec::new();
        if self.exists {
            out.push(req("Exists", None));
        }
        if !self.none_of.is_empty() {
            out.push(req("NotIn", Some(self.none_of.iter().cloned().collect())));
        }
        out
    }
}

/// An AND of requirements, by key: one pod selector of the complement.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Term(BTreeMap<String, Key>);

impl Term {
    /// This term ANDed with `key operator values`; None when that selects
    /// nothing.
    fn and(&self, key: &str, operator: &str, values: &[String]) -> Option<Term> {
        let mut next = self.clone();
        let entry = next.0.entry(key.to_string()).or_default();
        entry.add(operator, values);
        (!entry.contradictory()).then_some(next)
    }

    /// As a pod selector (an empty term selects every pod).
    pub fn selector(&self) -> LabelSelector {
        let expressions: Vec<LabelSelectorRequirement> =
            self.0.iter().flat_map(|(k, c)| c.requirements(k)).collect();
        LabelSelector {
            match_labels: None,
            match_expressions: (!expressions.is_empty()).then_some(expressions),
        }
    }
}

/// The negation of each requirement of `selector` (its `matchLabels`
/// entries as `In [v]`): the OR that is its complement.
fn negated(selector: &Selector) -> Vec<(String, &'static str, Vec<String>)> {
    let mut out: Vec<(String, &'static str, Vec<String>)> = selector
        .match_labels
        .iter()
        .map(|(k, v)| (k.clone(), "NotIn", vec![v.clone()]))
        .collect();
    for r in &selector.match_expressions {
        let operator = match r.operator.as_str() {
            "In" => "NotIn",
            "NotIn" => "In",
            "Exists" => "DoesNotExist",
            _ => "Exists",
        };
        let values = if matches!(operator, "In" | "NotIn") {
            r.values.clone()
        } else {
            Vec::new()
        };
        out.push((r.key.clone(), operator, values));
    }
    out
}

/// The pods selected by no selector so far: starts as every pod.
pub fn everything() -> Vec<Term> {
    vec![Term::default()]
}

/// `terms` (an OR) ANDed with the complement of `selector`: the pods that
/// neither an earlier selector nor this one selects, contradictions and
/// repeats dropped, in a stable order.
pub fn without(terms: &[Term], selector: &Selector) -> Vec<Term> {
    let negated = negated(selector);
    let mut out = BTreeSet::new();
    for term in terms {
        for (key, operator, values) in &negated {
            if let Some(next) = term.and(key, operator, values) {
                out.insert(next);
            }
        }
    }
    out.into_iter().collect()
}
