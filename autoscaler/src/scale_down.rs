//! Giving capacity back, pure: which bought nodes to give back now and
//! why every other is kept ([`candidates`]), and whether a contract about
//! to expire is extended or left to expire ([`expiry`]).
//!
//! Cluster Autoscaler's scale-down, applied to bought virtual nodes: a node
//! is **unneeded** when it is empty (no pod but DaemonSet pods) or, with
//! `WhenEmptyOrUnderutilized`, its cpu and memory requests are both below
//! the utilization threshold of its allocatable and every pod on it fits
//! elsewhere (simulated, first fit, largest first, on other nodes' free
//! room — room a node given back in the same pass had is not counted).
//! Blockers keep it: a pod with `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`
//! or `karpenter.sh/do-not-disrupt: "true"`, a pod without a controller
//! (nothing would recreate it), a PodDisruptionBudget with
//! `status.disruptionsAllowed` 0 covering a pod. An unneeded node is given
//! back once it has been unneeded for `unneededTime`, no sooner than
//! `delayAfterPurchase` after the autoscaler's last purchase, and at most
//! the disruption budget's count at once (nodes being given back count).

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Taint;
use quantity::{Quantity, ResourceList};

use crate::decide::fit::{self, NodeView};
use crate::decide::{BudgetPeriod, Reason, Room, WaitingPod};
use crate::model::{Limits, OnExpiry, ScaleDown, ScaleDownPolicy};
use crate::spend::{self, Money, Period, Spend};

/// `cluster-autoscaler.kubernetes.io/safe-to-evict`: `"false"` blocks.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// `karpenter.sh/do-not-disrupt`: `"true"` blocks.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// A pod on a bought node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePod {
    /// Key, requests and scheduling constraints (where else it may run).
    pub pod: WaitingPod,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Owned by a DaemonSet: ignored (it runs on every node anyway).
    pub daemon_set: bool,
    /// Has a controller owner that recreates it when evicted.
    pub has_controller: bool,
}

/// A node the autoscaler bought (a Ready Purchase's virtual node).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoughtNode {
    pub name: String,
    pub purchase: String,
    pub allocatable: ResourceList,
    /// The node's labels and taints (pods of other nodes may move to it).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub ready: bool,
    pub pods: Vec<NodePod>,
    /// Since when it has been unneeded, as the controller remembers it.
    pub unneeded_since: Option<Timestamp>,
    /// Its pods are being evicted / its Purchase deleted already.
    pub being_given_back: bool,
}

/// A PodDisruptionBudget, as far as giving back reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pdb {
    pub namespace: String,
    pub name: String,
    pub selector: crate::model::LabelSelector,
    pub disruptions_allowed: i32,
}

#[derive(Debug, Clone, Copy)]
pub struct DownInput<'a> {
    pub nodes: &'a [BoughtNode],
    /// Free room on every other schedulable node (not bought by this
    /// autoscaler): where pods of a node given back may go.
    pub elsewhere: &'a [Room],
    pub pdbs: &'a [Pdb],
    /// The served pods not scheduled yet (waiting, or just recreated): a
    /// node one of them fits on is room it is about to take, never given
    /// back.
    pub waiting: &'a [WaitingPod],
    pub policy: &'a ScaleDown,
    /// The autoscaler's last purchase (its Purchase's creation).
    pub last_purchase: Option<Timestamp>,
    pub now: Timestamp,
}

/// Why a node is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveBackWhy {
    Empty,
    /// Both cpu and memory below the threshold, in millionths.
    Underutilized {
        utilization_ppm: u32,
    },
}

/// Why a node is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeepReason {
    PolicyNever,
    NotReady,
    BeingGivenBack,
    /// Utilization (the larger of cpu and memory) at or above the threshold,
    /// or the policy gives back empty nodes only.
    InUse {
        utilization_ppm: u32,
    },
    /// A pod on it fits nowhere else.
    NoRoomElsewhere {
        pod: String,
    },
    /// A waiting pod fits on it: it is room about to be used (a node just
    /// bought is empty until its pods are recreated and scheduled).
    WaitingPodFits {
        pod: String,
    },
    SafeToEvict {
        pod: String,
    },
    DoNotDisrupt {
        pod: String,
    },
    /// A pod no controller would recreate.
    BarePod {
        pod: String,
    },
    /// A PodDisruptionBudget allows no disruption of a pod on it.
    Pdb {
        pod: String,
        pdb: String,
    },
    /// `delayAfterPurchase` has not passed since the last purchase.
    RecentPurchase {
        until: Timestamp,
    },
    /// Unneeded, but not for `unneededTime` yet.
    NotUnneededLongEnough {
        since: Timestamp,
        until: Timestamp,
    },
    /// The disruption budget allows no more at once.
    DisruptionBudget {
        allowed: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    GiveBack(GiveBackWhy),
    Keep(KeepReason),
}

/// The verdict on one bought node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub node: String,
    pub purchase: String,
    /// Whether it is unneeded now: the controller keeps `unneeded_since`
    /// while this holds and forgets it otherwise.
    pub unneeded: bool,
    pub action: Action,
}

impl KeepReason {
    pub fn code(&self) -> &'static str {
        match self {
            KeepReason::PolicyNever => "policy",
            KeepReason::NotReady => "not-ready",
            KeepReason::BeingGivenBack => "being-given-back",
            KeepReason::InUse { .. } => "in-use",
            KeepReason::NoRoomElsewhere { .. } => "no-room",
            KeepReason::WaitingPodFits { .. } => "waiting-pod",
            KeepReason::SafeToEvict { .. } => "safe-to-evict",
            KeepReason::DoNotDisrupt { .. } => "do-not-disrupt",
            KeepReason::BarePod { .. } => "bare-pod",
            KeepReason::Pdb { .. } => "pdb",
            KeepReason::RecentPurchase { .. } => "recent-purchase",
            KeepReason::NotUnneededLongEnough { .. } => "unneeded-time",
            KeepReason::DisruptionBudget { .. } => "disruption-budget",
        }
    }
}

fn add_duration(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// `requests / allocatable` for one resource, in millionths (a resource
/// the node does not have counts as fully used when requested).
fn share(requested: Option<&Quantity>, allocatable: Option<&Quantity>) -> u32 {
    let r = requested.map_or(0, |q| i128::from(q.milli_value()));
    let a = allocatable.map_or(0, |q| i128::from(q.milli_value()));
    if r <= 0 {
        return 0;
    }
    if a <= 0 {
        return 1_000_000;
    }
    u32::try_from((r * 1_000_000 / a).min(1_000_000)).unwrap_or(1_000_000)
}

/// Whether `need` fits `room` (a room without `pods` puts no bound on them).
fn fits(need: &ResourceList, room: &ResourceList) -> bool {
    need.0.iter().all(|(name, q)| match room.get(name) {
        Some(r) => q <= r,
        None => name == "pods" || q.is_zero(),
    })
}

fn blocker(pod: &NodePod, pdbs: &[Pdb]) -> Option<KeepReason> {
    let key = pod.pod.key.clone();
    if pod.annotations.get(SAFE_TO_EVICT).map(String::as_str) == Some("false") {
        return Some(KeepReason::SafeToEvict { pod: key });
    }
    if pod.annotations.get(DO_NOT_DISRUPT).map(String::as_str) == Some("true") {
        return Some(KeepReason::DoNotDisrupt { pod: key });
    }
    if !pod.has_controller {
        return Some(KeepReason::BarePod { pod: key });
    }
    // policy/v1: an empty selector selects every pod of the namespace.
    pdbs.iter()
        .find(|b| {
            b.namespace == pod.namespace
                && b.disruptions_allowed <= 0
                && b.selector.matches(&pod.labels)
        })
        .map(|b| KeepReason::Pdb {
            pod: key,
            pdb: format!("{}/{}", b.namespace, b.name),
        })
}

/// The verdict on every bought node, in the input's order.
pub fn candidates(input: &DownInput<'_>) -> Vec<Verdict> {
    let policy = input.policy;
    let now = input.now;
    let total = u32::try_from(input.nodes.len()).unwrap_or(u32::MAX);
    let in_progress = input.nodes.iter().filter(|n| n.being_given_back).count() as u32;
    let mut allowed = policy
        .disruption_budget
        .allowed(total)
        .saturating_sub(in_progress);
    let budget_allowed = policy.disruption_budget.allowed(total);
    let cooldown = input
        .last_purchase
        .map(|t| add_duration(t, policy.delay_after_purchase))
        .filter(|until| *until > now);

    // Free room pods may move to: other nodes, and bought nodes kept.
    let mut room: Vec<Spot<'_>> = input
        .elsewhere
        .iter()
        .map(|r| Spot {
            name: &r.name,
            labels: &r.labels,
            taints: &r.taints,
            bought: None,
            free: r.free.clone(),
        })
        .collect();
    for (i, n) in input.nodes.iter().enumerate() {
        if n.ready && !n.being_given_back {
            let used = n
                .pods
                .iter()
                .fold(ResourceList::new(), |s, p| s.add(&p.pod.requests));
            room.push(Spot {
                name: &n.name,
                labels: &n.labels,
                taints: &n.taints,
                bought: Some(i),
                free: n.allocatable.saturating_sub(&used),
            });
        }
    }

    // Utilization first: empty nodes, then the least used.
    let usage: Vec<(Vec<&NodePod>, u32)> = input
        .nodes
        .iter()
        .map(|n| {
            let pods: Vec<&NodePod> = n.pods.iter().filter(|p| !p.daemon_set).collect();
            let requested = pods
                .iter()
                .fold(ResourceList::new(), |s, p| s.add(&p.pod.requests));
            let u = ["cpu", "memory"]
                .iter()
                .map(|r| share(requested.get(r), n.allocatable.get(r)))
                .max()
                .unwrap_or(0);
            (pods, u)
        })
        .collect();
    let mut order: Vec<usize> = (0..input.nodes.len()).collect();
    order.sort_by_key(|&i| {
        (
            !usage[i].0.is_empty(),
            usage[i].1,
            input.nodes[i].name.clone(),
        )
    });

    let mut verdicts: Vec<Option<Verdict>> = vec![None; input.nodes.len()];
    let mut gone: Vec<bool> = vec![false; input.nodes.len()];
    for i in order {
        let node = &input.nodes[i];
        let (pods, utilization) = (&usage[i].0, usage[i].1);
        let verdict = |unneeded: bool, action: Action| Verdict {
            node: node.name.clone(),
            purchase: node.purchase.clone(),
            unneeded,
            action,
        };
        let keep = |unneeded: bool, r: KeepReason| verdict(unneeded, Action::Keep(r));
        let v = 'v: {
            if node.being_given_back {
                break 'v keep(true, KeepReason::BeingGivenBack);
            }
            if policy.policy == ScaleDownPolicy::Never {
                break 'v keep(false, KeepReason::PolicyNever);
            }
            if !node.ready {
                break 'v keep(false, KeepReason::NotReady);
            }
            let view = NodeView {
                name: Some(&node.name),
                labels: &node.labels,
                unknown: None,
                taints: &node.taints,
            };
            let free = node.allocatable.saturating_sub(
                &node
                    .pods
                    .iter()
                    .fold(ResourceList::new(), |s, p| s.add(&p.pod.requests)),
            );
            if let Some(w) = input
                .waiting
                .iter()
                .find(|w| fits(&w.requests, &free) && fit::admits(w, &view))
            {
                break 'v keep(false, KeepReason::WaitingPodFits { pod: w.key.clone() });
            }
            let why = if pods.is_empty() {
                GiveBackWhy::Empty
            } else if policy.policy == ScaleDownPolicy::WhenEmptyOrUnderutilized
                && utilization < policy.utilization_threshold_ppm
            {
                GiveBackWhy::Underutilized {
                    utilization_ppm: utilization,
                }
            } else {
                break 'v keep(
                    false,
                    KeepReason::InUse {
                        utilization_ppm: utilization,
                    },
                );
            };
            if let Some(r) = pods.iter().find_map(|p| blocker(p, input.pdbs)) {
                break 'v keep(false, r);
            }
            // Where its pods would go: largest first, first fit.
            let mut moved = room.clone();
            let mut sorted = pods.clone();
            sorted.sort_by(|a, b| {
                let size = |p: &NodePod| {
                    (
                        p.pod.requests.get("cpu").cloned().unwrap_or_default(),
                        p.pod.requests.get("memory").cloned().unwrap_or_default(),
                    )
                };
                size(b).cmp(&size(a))
            });
            for p in sorted {
                let spot = moved.iter_mut().find(|spot| {
                    spot.bought.is_none_or(|j| j != i && !gone[j])
                        && fits(&p.pod.requests, &spot.free)
                        && fit::admits(
                            &p.pod,
                            &NodeView {
                                name: Some(spot.name),
                                labels: spot.labels,
                                unknown: None,
                                taints: spot.taints,
                            },
                        )
                });
                match spot {
                    Some(spot) => spot.free = spot.free.saturating_sub(&p.pod.requests),
                    None => {
                        break 'v keep(
                            false,
                            KeepReason::NoRoomElsewhere {
                                pod: p.pod.key.clone(),
                            },
                        )
                    }
                }
            }
            if let Some(until) = cooldown {
                break 'v keep(true, KeepReason::RecentPurchase { until });
            }
            let since = node.unneeded_since.unwrap_or(now);
            let until = add_duration(since, policy.unneeded_time);
            if until > now {
                break 'v keep(true, KeepReason::NotUnneededLongEnough { since, until });
            }
            if allowed == 0 {
                break 'v keep(
                    true,
                    KeepReason::DisruptionBudget {
                        allowed: budget_allowed,
                    },
                );
            }
            allowed -= 1;
            gone[i] = true;
            room = moved;
            verdict(true, Action::GiveBack(why))
        };
        verdicts[i] = Some(v);
    }
    verdicts.into_iter().flatten().collect()
}

/// Room a pod may move to.
#[derive(Clone)]
struct Spot<'a> {
    name: &'a str,
    labels: &'a BTreeMap<String, String>,
    taints: &'a [Taint],
    /// The bought node it is, if it is one.
    bought: Option<usize>,
    free: ResourceList,
}

/// A contract of the autoscaler near its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expiring {
    pub contract_id: String,
    pub purchase: String,
    pub expires_at: Timestamp,
    /// When its current term began: its last extension, or its purchase.
    pub term_began: Timestamp,
    /// Its node runs served pods (it is not unneeded).
    pub in_use: bool,
    pub cost: Money,
    pub per: Period,
}

#[derive(Debug, Clone, Copy)]
pub struct ExpiryInput<'a> {
    pub contracts: &'a [Expiring],
    pub on_expiry: OnExpiry,
    /// How long before `expiresAt` to act: `max(scan interval × 3, 10 min)`,
    /// and at most half the contract's current term, so a term shorter
    /// than the lead is extended once per half-term, not every round.
    pub lead: Duration,
    /// The extension asked for (`terms.duration`; `None`: the catalog's default, counted to the month's end).
    pub extension: Option<Duration>,
    pub limits: &'a Limits,
    /// Held and in flight, as the scale-up counts it.
    pub spend: Spend,
    pub now: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpiryReason {
    /// `terms.onExpiry: Expire`.
    Policy,
    NotInUse,
    /// Extending would break a money limit.
    Budget(Reason),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpiryAction {
    /// Not within the lead time yet.
    NotYet,
    Extend {
        /// What the extension adds to this calendar month's spend.
        adds_this_month: Money,
    },
    LetExpire(ExpiryReason),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiryVerdict {
    pub contract_id: String,
    pub purchase: String,
    pub action: ExpiryAction,
}

/// Extend or let expire, per contract. Extensions granted in one call
/// count against the budget of the next ones.
pub fn expiry(input: &ExpiryInput<'_>) -> Vec<ExpiryVerdict> {
    let (_, month_end) = spend::month_of(input.now);
    let mut projected = input.spend.month_to_date.plus(input.spend.rest_of_month);
    let mut contracts: Vec<&Expiring> = input.contracts.iter().collect();
    contracts.sort_by_key(|c| (c.expires_at, c.contract_id.clone()));
    contracts
        .into_iter()
        .map(|c| {
            let term =
                Duration::try_from(c.expires_at.duration_since(c.term_began)).unwrap_or_default();
            let horizon = add_duration(input.now, input.lead.min(term / 2));
            let action = if c.expires_at > horizon {
                ExpiryAction::NotYet
            } else if input.on_expiry == OnExpiry::Expire {
                ExpiryAction::LetExpire(ExpiryReason::Policy)
            } else if !c.in_use {
                ExpiryAction::LetExpire(ExpiryReason::NotInUse)
            } else {
                // The rate goes on as it is; the month gains the time from
                // the old end to the new one (or the month's end).
                let end = input
                    .extension
                    .map_or(month_end, |d| add_duration(c.expires_at, d).min(month_end));
                let adds = spend::accrued(c.cost, c.per, spend::seconds_between(c.expires_at, end));
                let hour = input.spend.per_hour;
                match (
                    input.limits.max_spend_per_hour,
                    input.limits.max_spend_per_month,
                ) {
                    (Some(max), _) if hour > max => {
                        ExpiryAction::LetExpire(ExpiryReason::Budget(Reason::Budget {
                            period: BudgetPeriod::Hour,
                            limit: max,
                            would_be: hour,
                        }))
                    }
                    (_, Some(max)) if projected.plus(adds) > max => {
                        ExpiryAction::LetExpire(ExpiryReason::Budget(Reason::Budget {
                            period: BudgetPeriod::Month,
                            limit: max,
                            would_be: projected.plus(adds),
                        }))
                    }
                    _ => {
                        projected = projected.plus(adds);
                        ExpiryAction::Extend {
                            adds_this_month: adds,
                        }
                    }
                }
            };
            ExpiryVerdict {
                contract_id: c.contract_id.clone(),
                purchase: c.purchase.clone(),
                action,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
