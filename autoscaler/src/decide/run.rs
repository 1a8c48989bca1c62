//! The decision round: screening, the room already there, then the
//! packing into new plans (see the module's notes in `decide/mod.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use quantity::{Quantity, ResourceList};

use super::choose::{self, Headroom, Objective, PlanType, PodItem, Problem, UNBOUNDED};
use super::fit::{self, NodeView, VirtualNode};
use super::{
    BudgetPeriod, Buy, Candidate, Input, Placed, PodReason, Reason, Rejected, ScaleUp, Search,
    Unplaceable, WaitingPod,
};
use crate::model::Strategy;
use crate::spend::{self, Money};

/// A plan no real cluster sells: larger than this, it is refused as
/// hostile (docs/limits.md). Cpu in cores.
pub const MAX_PLAN_CPU: i64 = 100_000;
/// Memory (and ephemeral storage) in bytes: 1 PiB.
pub const MAX_PLAN_BYTES: i64 = 1 << 50;
/// Pods one plan may run.
pub const MAX_PLAN_PODS: i64 = 1_000_000;
/// Any other resource, in units.
pub const MAX_PLAN_OTHER: i64 = 1 << 50;

/// A plan's resource the pods' scheduler counts as a pod count: a plan that
/// does not sell it puts no bound on the number of pods.
const PODS: &str = "pods";

/// Thousandths, rounded up (requests, limits' use): `None` when the value
/// is too large to count.
fn ceil_milli(q: &Quantity) -> Option<i128> {
    let v = q.milli_value();
    (v != i64::MAX && v != i64::MIN).then_some(i128::from(v))
}

/// Thousandths, rounded down (capacities, limits).
fn floor_milli(q: &Quantity) -> Option<i128> {
    let v = q.neg().milli_value();
    (v != i64::MAX && v != i64::MIN).then_some(-i128::from(v))
}

fn bound_of(resource: &str) -> i128 {
    let units = match resource {
        "cpu" => MAX_PLAN_CPU,
        "memory" | "ephemeral-storage" | "storage" => MAX_PLAN_BYTES,
        PODS => MAX_PLAN_PODS,
        _ => MAX_PLAN_OTHER,
    };
    i128::from(units) * 1000
}

/// Why an offer's plan is refused outright, if it is.
fn hostile(c: &Candidate) -> Option<String> {
    if c.cost.nanos() <= 0 {
        return Some("its cost is zero (a free plan is not a real offer)".into());
    }
    if c.resources.0.values().all(Quantity::is_zero) {
        return Some("it sells nothing".into());
    }
    for (name, q) in &c.resources.0 {
        if q.is_negative() {
            return Some(format!("it sells a negative {name} ({q})"));
        }
        match ceil_milli(q) {
            Some(m) if m <= bound_of(name) => {}
            _ => {
                return Some(format!(
                    "its {name} ({q}) is beyond what any cluster sells (bound {})",
                    Quantity::from_milli(
                        i64::try_from(bound_of(name)).unwrap_or(i64::MAX),
                        quantity::Format::DecimalSI
                    )
                ))
            }
        }
    }
    None
}

/// The reason a candidate is never bought, whatever the pods and limits.
fn screen(c: &Candidate, input: &Input<'_>) -> Option<Reason> {
    if c.service {
        return Some(Reason::ServiceOffer);
    }
    let Some(pricing) = &c.pricing else {
        return Some(Reason::Pricing);
    };
    if pricing.currency != input.limits.currency {
        return Some(Reason::Currency {
            offered: pricing.currency.clone(),
            wanted: input.limits.currency.clone(),
        });
    }
    if let Some(why) = hostile(c) {
        return Some(Reason::HostileOffer { why });
    }
    let offers = input.offers;
    if offers.deny.contains(&c.provider_id) {
        return Some(Reason::Provider {
            provider: c.provider_id.clone(),
            denied: true,
        });
    }
    if !offers.allow.is_empty() && !offers.allow.contains(&c.provider_id) {
        return Some(Reason::Provider {
            provider: c.provider_id.clone(),
            denied: false,
        });
    }
    if offers
        .selector
        .as_ref()
        .is_some_and(|s| !s.matches(&c.labels))
    {
        return Some(Reason::Selector);
    }
    if !offers.resources.is_empty() {
        if let Some((name, _)) = c
            .resources
            .0
            .iter()
            .find(|(name, q)| !q.is_zero() && !offers.resources.contains(name))
        {
            return Some(Reason::ResourceKind {
                resource: name.clone(),
            });
        }
    }
    if let Some(until) = input
        .backoff
        .get(&(c.offer_id.clone(), c.plan_id.clone()))
        .filter(|until| **until > input.now)
    {
        return Some(Reason::Backoff { until: *until });
    }
    None
}

/// A waiting pod, as integers over the round's dimensions.
struct Pod<'a> {
    pod: &'a WaitingPod,
    need: Vec<i128>,
}

/// A node's free room (`pods` absent: no bound; any other absent: none).
fn room_vector(list: &ResourceList, dims: &[String]) -> Vec<i128> {
    dims.iter()
        .map(|d| match list.get(d) {
            Some(q) => floor_milli(q).unwrap_or(UNBOUNDED).max(0),
            None if d == PODS => UNBOUNDED,
            None => 0,
        })
        .collect()
}

fn fits(room: &[i128], need: &[i128]) -> bool {
    room.iter()
        .zip(need)
        .all(|(r, n)| *r == UNBOUNDED || n <= r)
}

/// Limits' use by the committed resources plus `extra`, per limited name.
fn limit_reason(input: &Input<'_>, c: &Candidate, hour: Money, month: Money) -> Option<Reason> {
    let limits = input.limits;
    let committed = input.committed;
    if let Some(max) = limits.contracts {
        if committed.contracts.saturating_add(1) > max {
            return Some(Reason::Contracts { limit: max });
        }
    }
    for (name, limit) in &limits.resources.0 {
        let held = committed.resources.get(name).cloned().unwrap_or_default();
        let plan = c.resources.get(name).cloned().unwrap_or_default();
        let would_be = held.add(&plan);
        if would_be > *limit {
            return Some(Reason::Limit {
                resource: name.clone(),
                limit: limit.clone(),
                would_be,
            });
        }
    }
    if let Some(max) = limits.max_spend_per_hour {
        let would_be = committed.spend.per_hour.plus(hour);
        if would_be > max {
            return Some(Reason::Budget {
                period: BudgetPeriod::Hour,
                limit: max,
                would_be,
            });
        }
    }
    if let Some(max) = limits.max_spend_per_month {
        let s = committed.spend;
        let would_be = s.month_to_date.plus(s.rest_of_month).plus(month);
        if would_be > max {
            return Some(Reason::Budget {
                period: BudgetPeriod::Month,
                limit: max,
                would_be,
            });
        }
    }
    None
}

/// Decide what to buy for the waiting pods.
pub fn scale_up(input: &Input<'_>) -> ScaleUp {
    let mut out = ScaleUp::default();
    let candidates = input.candidates;

    // 1. Candidates on their own.
    let mut allowed: Vec<usize> = Vec::new();
    let mut static_reason: BTreeMap<usize, Reason> = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        match screen(c, input) {
            Some(r) => {
                static_reason.insert(i, r);
            }
            None => allowed.push(i),
        }
    }

    // 2. The round's dimensions: what pods request and what is limited.
    let mut names: BTreeSet<String> = input.limits.resources.0.keys().cloned().collect();
    for p in input.pods {
        names.extend(p.requests.0.keys().cloned());
    }
    let dims: Vec<String> = names.into_iter().collect();

    let mut pods: Vec<Pod<'_>> = Vec::new();
    for pod in input.pods {
        let mut need = Vec::with_capacity(dims.len());
        let mut bad = None;
        for d in &dims {
            match pod.requests.get(d).map(ceil_milli) {
                None => need.push(0),
                Some(Some(v)) if v >= 0 => need.push(v),
                Some(_) => {
                    bad = Some(d.clone());
                    break;
                }
            }
        }
        match bad {
            Some(resource) => out.unplaceable.push(Unplaceable {
                pod: pod.key.clone(),
                reason: PodReason::Unreasonable { resource },
            }),
            None => pods.push(Pod { pod, need }),
        }
    }
    // Higher priority first, then larger first (first fit decreasing).
    pods.sort_by(|a, b| {
        b.pod
            .priority
            .cmp(&a.pod.priority)
            .then_with(|| b.need.cmp(&a.need))
            .then_with(|| a.pod.key.cmp(&b.pod.key))
    });

    // 3. Room already there: bought nodes and purchases in flight.
    let mut rooms: Vec<Vec<i128>> = input
        .rooms
        .iter()
        .map(|r| room_vector(&r.free, &dims))
        .collect();
    let mut waiting: Vec<Pod<'_>> = Vec::new();
    for pod in pods {
        let spot = input.rooms.iter().zip(rooms.iter_mut()).find(|(r, free)| {
            fits(free, &pod.need)
                && fit::admits(
                    pod.pod,
                    &NodeView {
                        name: Some(&r.name),
                        labels: &r.labels,
                        unknown: None,
                        taints: &r.taints,
                    },
                )
        });
        match spot {
            Some((r, free)) => {
                for (f, n) in free.iter_mut().zip(&pod.need) {
                    if *f != UNBOUNDED {
                        *f -= n;
                    }
                }
                out.placed.push(Placed {
                    pod: pod.pod.key.clone(),
                    room: r.name.clone(),
                });
            }
            None => waiting.push(pod),
        }
    }

    // 4. What each allowed plan is, as integers; what it alone breaks.
    let plans: Vec<Plan<'_>> = allowed
        .iter()
        .map(|&i| Plan::new(&candidates[i], &dims, input))
        .collect();
    let nodes: HashMap<&str, VirtualNode> = allowed
        .iter()
        .map(|&i| {
            let p = candidates[i].provider_id.as_str();
            (p, VirtualNode::of_provider(p))
        })
        .collect();
    // Pod × allowed plan: admitted (labels, taints) and large enough.
    let mut admitted: Vec<Vec<bool>> = Vec::with_capacity(waiting.len());
    for pod in &waiting {
        let free = pod.pod.node_selector.is_empty() && pod.pod.affinity.is_none();
        let mut by_provider: HashMap<&str, bool> = HashMap::new();
        admitted.push(
            plans
                .iter()
                .map(|plan| {
                    free || *by_provider
                        .entry(plan.c.provider_id.as_str())
                        .or_insert_with(|| {
                            nodes
                                .get(plan.c.provider_id.as_str())
                                .is_some_and(|n| fit::admits(pod.pod, &NodeView::of_virtual(n)))
                        })
                })
                .collect(),
        );
    }
    let fitting = |w: usize, j: usize| admitted[w][j] && fits(&plans[j].cap, &waiting[w].need);

    // 5. Pods no plan can take, each with why.
    let mut placeable: Vec<usize> = Vec::new();
    for (w, pod) in waiting.iter().enumerate() {
        let feasible: Vec<usize> = (0..plans.len()).filter(|&j| fitting(w, j)).collect();
        if feasible.iter().any(|&j| plans[j].alone.is_none()) {
            placeable.push(w);
            continue;
        }
        let reason = if plans.is_empty() {
            PodReason::NoAllowedOffer
        } else if !admitted[w].iter().any(|a| *a) {
            PodReason::NotAdmitted
        } else if feasible.is_empty() {
            too_large(pod, &plans, &admitted[w], &dims)
        } else {
            let cheapest = feasible
                .iter()
                .copied()
                .min_by_key(|&j| (plans[j].hour, plans[j].month))
                .unwrap_or(feasible[0]);
            PodReason::Blocked(plans[cheapest].alone.clone().unwrap_or(Reason::Fit))
        };
        out.unplaceable.push(Unplaceable {
            pod: pod.pod.key.clone(),
            reason,
        });
    }

    // 6. Candidates: rejected by a limit alone, or fitting no pod.
    let mut types: Vec<usize> = Vec::new();
    for (j, plan) in plans.iter().enumerate() {
        let serves = (0..waiting.len()).any(|w| fitting(w, j));
        if let Some(r) = &plan.alone {
            static_reason.insert(allowed[j], r.clone());
        } else if !serves {
            static_reason.insert(allowed[j], Reason::Fit);
        } else {
            types.push(j);
        }
    }
    out.rejected = static_reason
        .into_iter()
        .map(|(i, reason)| Rejected {
            offer_id: candidates[i].offer_id.clone(),
            plan_id: candidates[i].plan_id.clone(),
            reason,
        })
        .collect();

    // 7. The packing.
    if !placeable.is_empty() {
        let problem = Problem {
            types: types
                .iter()
                .map(|&j| PlanType {
                    cap: plans[j].cap.clone(),
                    sell: plans[j].sell.clone(),
                    hour: plans[j].hour.nanos(),
                    month: plans[j].month.nanos(),
                    tier: plans[j].tier,
                })
                .collect(),
            pods: placeable
                .iter()
                .map(|&w| PodItem {
                    need: waiting[w].need.clone(),
                    admitted: types.iter().map(|&j| fitting(w, j)).collect(),
                    priority: waiting[w].pod.priority,
                })
                .collect(),
            headroom: headroom(input, &dims),
            objective: match input.strategy {
                Strategy::LeastWaste => Objective::Waste,
                Strategy::Cheapest | Strategy::Priority => Objective::Cost,
            },
            waste_dims: dims
                .iter()
                .enumerate()
                .filter(|(_, d)| *d == "cpu" || *d == "memory")
                .map(|(i, _)| i)
                .collect(),
        };
        let solution = choose::solve(&problem);
        out.search = solution.search;
        let mut covered = vec![false; placeable.len()];
        for bin in &solution.bins {
            let plan = &plans[types[bin.ty]];
            for &k in &bin.pods {
                covered[k] = true;
            }
            out.buy.push(Buy {
                offer_id: plan.c.offer_id.clone(),
                plan_id: plan.c.plan_id.clone(),
                provider_id: plan.c.provider_id.clone(),
                provider_name: plan.c.provider_name.clone(),
                resources: plan.c.resources.clone(),
                cost: plan.c.cost,
                per: plan.per,
                cost_per_hour: plan.hour,
                cost_per_month: spend::per_month(Money::from(plan.c.cost), plan.per),
                pods: bin
                    .pods
                    .iter()
                    .map(|&k| waiting[placeable[k]].pod.key.clone())
                    .collect(),
            });
            out.added_per_hour = out.added_per_hour.plus(plan.hour);
            out.added_per_month = out.added_per_month.plus(plan.month);
        }
        // What joint limits left out: why, against what is bought.
        for (k, &w) in placeable.iter().enumerate() {
            if covered[k] {
                continue;
            }
            let cheapest = types
                .iter()
                .copied()
                .filter(|&j| fitting(w, j))
                .min_by_key(|&j| (plans[j].hour, plans[j].month));
            let reason = cheapest
                .and_then(|j| joint_reason(input, &plans[j], &out.buy, &out))
                .map_or(PodReason::Deferred, PodReason::Blocked);
            out.unplaceable.push(Unplaceable {
                pod: waiting[w].pod.key.clone(),
                reason,
            });
        }
    }
    let s = input.committed.spend;
    out.spend_per_hour_after = s.per_hour.plus(out.added_per_hour);
    out.month_projected_after = s
        .month_to_date
        .plus(s.rest_of_month)
        .plus(out.added_per_month);
    if out.search == Search::Trivial && !out.buy.is_empty() {
        out.search = Search::Heuristic;
    }
    out.unplaceable.sort_by(|a, b| a.pod.cmp(&b.pod));
    out
}

/// One allowed candidate, as the round counts it.
struct Plan<'a> {
    c: &'a Candidate,
    per: spend::Period,
    cap: Vec<i128>,
    sell: Vec<i128>,
    hour: Money,
    /// What it adds to this calendar month.
    month: Money,
    tier: u32,
    /// The limit it breaks on its own, if any.
    alone: Option<Reason>,
}

impl<'a> Plan<'a> {
    fn new(c: &'a Candidate, dims: &[String], input: &Input<'_>) -> Plan<'a> {
        let per = c.pricing.as_ref().map_or(spend::Period::Hour, |p| p.per);
        let cost = Money::from(c.cost);
        let hour = spend::per_hour(cost, per);
        let month = spend::rest_of_month(cost, per, input.term, input.now);
        let cap = room_vector(&c.resources, dims);
        let sell = dims
            .iter()
            .map(|d| c.resources.get(d).and_then(ceil_milli).unwrap_or(0))
            .collect();
        let tier = if input.strategy == Strategy::Priority {
            input
                .priority
                .iter()
                .position(|p| *p == c.offer_id || *p == c.provider_id)
                .unwrap_or(input.priority.len()) as u32
        } else {
            0
        };
        Plan {
            c,
            per,
            cap,
            sell,
            hour,
            month,
            tier,
            alone: limit_reason(input, c, hour, month),
        }
    }
}

fn headroom(input: &Input<'_>, dims: &[String]) -> Headroom {
    let limits = input.limits;
    let committed = input.committed;
    let s = committed.spend;
    Headroom {
        res: dims
            .iter()
            .map(|d| {
                limits.resources.get(d).map(|l| {
                    let held = committed.resources.get(d).and_then(ceil_milli).unwrap_or(0);
                    floor_milli(l).unwrap_or(UNBOUNDED).saturating_sub(held)
                })
            })
            .collect(),
        contracts: limits
            .contracts
            .map(|c| u64::from(c.saturating_sub(committed.contracts))),
        hour: limits
            .max_spend_per_hour
            .map(|m| m.minus(s.per_hour).nanos()),
        month: limits
            .max_spend_per_month
            .map(|m| m.minus(s.month_to_date).minus(s.rest_of_month).nanos()),
    }
}

/// The limit `plan` would break on top of what the round buys.
fn joint_reason(input: &Input<'_>, plan: &Plan<'_>, buys: &[Buy], out: &ScaleUp) -> Option<Reason> {
    let limits = input.limits;
    let committed = input.committed;
    if let Some(max) = limits.contracts {
        if committed.contracts as usize + buys.len() + 1 > max as usize {
            return Some(Reason::Contracts { limit: max });
        }
    }
    for (name, limit) in &limits.resources.0 {
        let mut would_be = committed.resources.get(name).cloned().unwrap_or_default();
        for b in buys {
            if let Some(q) = b.resources.get(name) {
                would_be = would_be.add(q);
            }
        }
        if let Some(q) = plan.c.resources.get(name) {
            would_be = would_be.add(q);
        }
        if would_be > *limit {
            return Some(Reason::Limit {
                resource: name.clone(),
                limit: limit.clone(),
                would_be,
            });
        }
    }
    let s = committed.spend;
    if let Some(max) = limits.max_spend_per_hour {
        let would_be = s.per_hour.plus(out.added_per_hour).plus(plan.hour);
        if would_be > max {
            return Some(Reason::Budget {
                period: BudgetPeriod::Hour,
                limit: max,
                would_be,
            });
        }
    }
    if let Some(max) = limits.max_spend_per_month {
        let would_be = s
            .month_to_date
            .plus(s.rest_of_month)
            .plus(out.added_per_month)
            .plus(plan.month);
        if would_be > max {
            return Some(Reason::Budget {
                period: BudgetPeriod::Month,
                limit: max,
                would_be,
            });
        }
    }
    None
}

/// The shortfall of a pod no admitted plan is large enough for: the first
/// resource (cpu, memory, then by name) it needs more of than the largest
/// admitted plan has.
fn too_large(pod: &Pod<'_>, plans: &[Plan<'_>], admitted: &[bool], dims: &[String]) -> PodReason {
    let mut order: Vec<usize> = (0..dims.len()).collect();
    order.sort_by_key(|&d| match dims[d].as_str() {
        "cpu" => (0, d),
        "memory" => (1, d),
        _ => (2, d),
    });
    for d in order {
        if pod.need[d] == 0 {
            continue;
        }
        let largest = plans
            .iter()
            .zip(admitted)
            .filter(|(_, a)| **a)
            .map(|(p, _)| p)
            .max_by_key(|p| p.cap[d]);
        let Some(largest) = largest else {
            continue;
        };
        if largest.cap[d] != UNBOUNDED && largest.cap[d] < pod.need[d] {
            let needs = pod.pod.requests.get(&dims[d]).cloned().unwrap_or_default();
            let has = largest.c.resources.get(&dims[d]).cloned();
            return PodReason::TooLarge {
                resource: dims[d].clone(),
                needs,
                largest: has,
            };
        }
    }
    PodReason::NoPlanFitsAll
}
