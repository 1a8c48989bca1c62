//! The grant decision, a pure function: from one consumer's slices of the
//! class, its Tenant's condition and the chain's answer for that consumer,
//! to what each slice's `Resources` condition and `status.resources` should
//! say. No I/O, no clock: the `status` module turns a [`Verdict`] into a
//! status document and the `reconcile` module writes it.
//!
//! **Policies** ([`GrantPolicy`]), all measured against what *remains* for
//! the consumer — the chain's answer less what the consumer's other accepted
//! slices of this class already hold:
//! - `fit`: grant the request as asked if every resource fits; else deny,
//!   naming each resource that does not fit and by how much;
//! - `clamp`: grant per resource the smaller of the request and what
//!   remains; always accept;
//! - `offer`: grant everything that remains, whatever was asked (what a
//!   v0.x ResourceOffer did); always accept;
//! - `contracts`: the consumer's allowance is, per resource, the smaller of
//!   the sum of its active contracts with this provider (bought in the
//!   catalog) and the chain's answer — a resource in no contract is
//!   allowed nothing ([`contract_allowance`]); within it a slice is
//!   answered as under `clamp` (an over-asking slice is granted what its
//!   contracts leave, and says by how much it was clamped). A consumer
//!   without an active contract is denied (`NoActiveContract`).
//!
//! **Order.** A consumer's slices are decided one after another, each
//! seeing what the ones before hold: first the slices already accepted
//! (oldest first), then the others (oldest first). A newcomer never takes
//! from an incumbent.
//!
//! **When the allowance shrinks** ([`ShrinkPolicy`]): with `keep` an
//! accepted grant is never taken back (it may still grow under `clamp` and
//! `offer`); only slices not yet accepted see less. With `follow` every
//! slice is re-decided as if new: under `clamp`, `offer` and `contracts`
//! its grant shrinks in place; a consumer with no contract left (under
//! `contracts`), or an incumbent that no longer fits (under `fit`), is
//! **revoked**.
//!
//! **Grants Liqo honours.** Liqo v1.2's quota creator and virtual-node
//! creator act only on `Resources=Accepted` (`quotacreator_controller.go`
//! lines 81-86, `virtualnodecreator_controller.go` 155, 172-180), and the
//! virtual kubelet never removes a key from the node: writing `Denied`
//! after `Accepted`, or dropping a key, leaves the old capacity in force.
//! So, after the policy has spoken ([`decide_all`]):
//! - an accepted grant never loses a key: a key it held that the new grant
//!   lacks is written as `0`;
//! - a slice that holds a grant is never `Denied`: what would deny it
//!   **revokes** it instead — `Accepted`, reason `ResourcesRevoked`, every
//!   key it held, asked for or must carry at `0`, and [`Verdict::cordon`]
//!   set (the `liqo.io/cordon` annotation: the Quota is cordoned, the
//!   ShadowPod webhook admits no new pod). A later grant lifts the cordon.
//!   Under `keep`, a *changed* request that cannot be granted (`fit`'s
//!   `InsufficientResources`, `InvalidRequest`) leaves the held grant
//!   standing instead, `Accepted` with that reason;
//! - every accepted grant carries the keys of [`Context::defaults`] (cpu,
//!   memory and pods, checked at start-up): a key the policy's grant lacks —
//!   not asked for or, under `contracts`, sold by none of the consumer's
//!   contracts — gets its default, at most what was asked, what the chain
//!   offers the consumer and what its contracts sell (each when it names
//!   the key). Defaults are per
//!   slice and never counted against the allowance: they make the virtual
//!   node Ready (cpu > 0, memory > 0) and schedulable (`pods`), they are
//!   not sold;
//! - a slice the previous release left `Denied` with reason
//!   [`LEGACY_NO_CONTRACT`] (it wrote that after `Accepted` when the last
//!   contract ended) counts as holding a grant of unknown keys
//!   ([`held_grant`]), so it is revoked, or granted again if a contract is
//!   back: an upgrade in place needs no migration step. A slice never
//!   granted and without a contract is denied with reason
//!   `NoActiveContract`, which the previous release never wrote.
//!
//! **Tenants.** A cordoned Tenant keeps the grants it has and gets no new
//! ones; a drained Tenant gets nothing (every slice denied, grants cleared),
//! as Liqo's own controller does for the default class.
//!
//! A request that changed since it was granted (under `fit`: the grant no
//! longer equals the request; under `clamp`: the grant exceeds it) is a new
//! request and is decided afresh.

use std::fmt::Write as _;

use quantity::{Quantity, ResourceList};

use crate::model::{ConditionStatus, ModelError, TenantCondition};

/// How much of a request is granted. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum GrantPolicy {
    /// Accept only requests that fit entirely; grant them as asked.
    #[default]
    Fit,
    /// Grant per resource the smaller of the request and what remains.
    Clamp,
    /// Grant what remains of the chain's offer, whatever was asked.
    Offer,
    /// Grant as `clamp`, within what the consumer's active contracts in the
    /// catalog allow (`--catalog-url`).
    Contracts,
}

impl GrantPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantPolicy::Fit => "fit",
            GrantPolicy::Clamp => "clamp",
            GrantPolicy::Offer => "offer",
            GrantPolicy::Contracts => "contracts",
        }
    }
}

/// What happens to an accepted grant when the consumer's allowance shrinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum ShrinkPolicy {
    /// Never take back what was granted; only new requests see less.
    #[default]
    Keep,
    /// Re-decide accepted slices too: shrink them in place (clamp, offer,
    /// contracts) or revoke them (fit when they no longer fit, contracts
    /// when none is left): see the module docs.
    Follow,
}

/// The machine-readable reason of a verdict (the condition's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Granted exactly as requested.
    ResourcesGranted,
    /// Granted, some resources less than requested (`clamp`).
    ResourcesClamped,
    /// Granted what the chain offers (`offer`).
    ResourcesOffered,
    /// Denied: the request does not fit what remains (`fit`).
    InsufficientResources,
    /// Denied: the Tenant is cordoned and this would be a new grant.
    TenantCordoned,
    /// Denied: the Tenant is drained.
    TenantDrained,
    /// Denied: `spec.resources` cannot be read.
    InvalidRequest,
    /// Denied: the consumer has no active contract and this slice holds
    /// no grant (`contracts`). Not the previous release's `NoContract`
    /// ([`LEGACY_NO_CONTRACT`]).
    NoActiveContract,
    /// Accepted with every resource at zero and cordoned: what would have
    /// denied a slice that holds a grant (see the module docs).
    ResourcesRevoked,
    /// Denied: Liqo's settings on this provider do not enforce what the
    /// capacity is sold with, the provider self-check.
    EnforcementOff,
    /// Denied: Liqo's settings cannot be read and
    /// `--if-enforcement-unknown refuse`, the provider self-check.
    EnforcementUnknown,
}

/// The reason the previous release wrote, with `Denied`, when a consumer
/// had no contract left — also after `Accepted`, which Liqo ignores. A
/// slice left so is revoked on the next reconcile ([`held_grant`]).
pub const LEGACY_NO_CONTRACT: &str = "NoContract";

/// The grant a slice holds as far as the decision is concerned, from its
/// `Resources` condition (status, reason) and `status.resources`: `Some`
/// when `Accepted` (the list, empty if absent), and `Some(empty)` when the
/// previous release left it `Denied` with [`LEGACY_NO_CONTRACT`] (its old
/// grant may still be in force in Liqo); `None` otherwise.
pub fn held_grant(
    status: Option<ConditionStatus>,
    reason: &str,
    granted: Option<ResourceList>,
) -> Option<ResourceList> {
    match status {
        Some(ConditionStatus::Accepted) => Some(granted.unwrap_or_default()),
        _ if is_legacy_denial(status, reason) => Some(ResourceList::new()),
        _ => None,
    }
}

/// Whether the previous release left the slice `Denied` with
/// [`LEGACY_NO_CONTRACT`]: such a slice is always re-decided (never kept
/// as it is, whatever `--on-shrink` says).
pub fn is_legacy_denial(status: Option<ConditionStatus>, reason: &str) -> bool {
    status == Some(ConditionStatus::Denied) && reason == LEGACY_NO_CONTRACT
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ResourcesGranted => "ResourcesGranted",
            Reason::ResourcesClamped => "ResourcesClamped",
            Reason::ResourcesOffered => "ResourcesOffered",
            Reason::InsufficientResources => "InsufficientResources",
            Reason::TenantCordoned => "TenantCordoned",
            Reason::TenantDrained => "TenantDrained",
            Reason::InvalidRequest => "InvalidRequest",
            Reason::NoActiveContract => "NoActiveContract",
            Reason::ResourcesRevoked => "ResourcesRevoked",
            Reason::EnforcementOff => "LiqoEnforcementOff",
            Reason::EnforcementUnknown => "LiqoEnforcementUnknown",
        }
    }
}

/// What one slice's `Resources` condition and `status.resources` should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub status: ConditionStatus,
    pub reason: Reason,
    pub message: String,
    /// `status.resources`; `None` removes the field (denials grant nothing).
    pub granted: Option<ResourceList>,
    /// Whether the slice should carry this controller's cordon (only
    /// revocations set it; any other `Accepted` verdict lifts it).
    pub cordon: bool,
}

/// The outcome for one slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Leave the slice as it is: an accepted grant that stands (its grant
    /// keeps counting against the consumer's allowance).
    Keep,
    /// Write this verdict.
    Set(Verdict),
}

/// One slice as the decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Orders slices of one age (the oldest decides first): the creation
    /// timestamp (RFC 3339 sorts as text), then the name.
    pub created: String,
    pub name: String,
    /// `spec.resources`, or why it cannot be read.
    pub requested: Result<ResourceList, ModelError>,
    /// The grant it holds ([`held_grant`]): `Some` when its `Resources`
    /// condition is `Accepted` (with `status.resources`, empty if absent),
    /// or left `Denied/NoContract` by the previous release.
    pub accepted: Option<ResourceList>,
    /// Left `Denied/NoContract` by the previous release
    /// ([`is_legacy_denial`]): re-decided even where a grant would be kept.
    pub legacy: bool,
}

/// What the decision of one consumer depends on besides its slices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub policy: GrantPolicy,
    pub shrink: ShrinkPolicy,
    pub tenant: TenantCondition,
    /// The consumer's cluster ID, for messages.
    pub consumer: String,
    /// Under `contracts`: the sum of the resources of the consumer's active
    /// contracts with this provider; `None` when it has none.
    pub contracted: Option<ResourceList>,
    /// The keys every accepted grant carries, each with the value it gets
    /// when the policy's grant lacks it (see the module docs).
    pub defaults: ResourceList,
}

/// What a consumer may be granted under `contracts`: per resource of its
/// contracts, the smaller of the contracted sum and the chain's answer;
/// resources in no contract are absent (allowed nothing).
pub fn contract_allowance(offered: &ResourceList, contracted: &ResourceList) -> ResourceList {
    contracted
        .0
        .iter()
        .map(|(name, bought)| {
            let available = offered.get(name).cloned().unwrap_or_else(zero);
            let allowed = if *bought <= available {
                bought.clone()
            } else {
                available
            };
            (name.clone(), allowed)
        })
        .collect()
}

/// Decide every slice of one consumer. `offered` is the chain's answer for
/// the consumer. Returns one decision per candidate, in the input order.
pub fn decide_all(
    ctx: &Context,
    offered: &ResourceList,
    candidates: &[Candidate],
) -> Vec<Decision> {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&candidates[a], &candidates[b]);
        (a.accepted.is_none(), &a.created, &a.name).cmp(&(
            b.accepted.is_none(),
            &b.created,
            &b.name,
        ))
    });
    let allowance;
    let allowance_or_offer = match (ctx.policy, &ctx.contracted) {
        (GrantPolicy::Contracts, Some(contracted)) => {
            allowance = contract_allowance(offered, contracted);
            &allowance
        }
        _ => offered,
    };
    // Under `contracts`, a default key no contract sells is not asked of
    // the allowance (it would be clamped to 0): it is completed below.
    let unsold: Vec<&String> = match (ctx.policy, &ctx.contracted) {
        (GrantPolicy::Contracts, Some(contracted)) => ctx
            .defaults
            .0
            .keys()
            .filter(|key| contracted.get(key).is_none())
            .collect(),
        _ => Vec::new(),
    };
    let mut decisions = vec![Decision::Keep; candidates.len()];
    let mut held = ResourceList::new();
    for index in order {
        let slice = &candidates[index];
        let view = sold_view(ctx, slice, &unsold);
        let decision = decide(ctx, allowance_or_offer, &held, &view);
        let holds = match &decision {
            Decision::Keep => view.accepted.clone(),
            Decision::Set(v) if v.status == ConditionStatus::Accepted => v.granted.clone(),
            Decision::Set(_) => None,
        };
        if let Some(grant) = holds {
            held = held.add(&grant);
        }
        decisions[index] = finish(ctx, offered, allowance_or_offer, slice, decision);
    }
    decisions
}

/// The slice as the policy sees it: without the request's `unsold` keys,
/// and holding only what it asks for (completed defaults and zeros of
/// dropped keys are never counted, nor kept as a floor).
fn sold_view(ctx: &Context, slice: &Candidate, unsold: &[&String]) -> Candidate {
    let requested = slice.requested.clone().map(|asked| {
        asked
            .0
            .into_iter()
            .filter(|(name, _)| !unsold.contains(&name))
            .collect::<ResourceList>()
    });
    let accepted = match (&slice.accepted, &requested) {
        // Under `offer` a grant is not bound to the request.
        (Some(grant), Ok(asked)) if ctx.policy != GrantPolicy::Offer => Some(
            grant
                .0
                .iter()
                .filter(|(name, _)| asked.get(name).is_some())
                .map(|(name, q)| (name.clone(), q.clone()))
                .collect::<ResourceList>(),
        ),
        (accepted, _) => accepted.clone(),
    };
    Candidate {
        requested,
        accepted,
        ..slice.clone()
    }
}

/// Make the policy's decision one Liqo honours (see the module docs):
/// revoke instead of denying a slice that holds a grant; complete an
/// accepted grant with the defaults and with zeros for keys it held.
/// `offered` is the chain's answer for the consumer, `allowance` what the
/// policy measured against (under `contracts`, [`contract_allowance`]).
pub fn finish(
    ctx: &Context,
    offered: &ResourceList,
    allowance: &ResourceList,
    slice: &Candidate,
    decision: Decision,
) -> Decision {
    let verdict = match decision {
        Decision::Keep => return Decision::Keep,
        Decision::Set(verdict) => verdict,
    };
    let keep = ctx.shrink == ShrinkPolicy::Keep && !slice.legacy;
    let changed_request = matches!(
        verdict.reason,
        Reason::InsufficientResources | Reason::InvalidRequest
    );
    match (verdict.status, &slice.accepted) {
        (ConditionStatus::Denied, None) => Decision::Set(verdict),
        // Under `keep`, a changed request that cannot be granted leaves
        // the grant the slice holds (still cordoned if it was revoked).
        (ConditionStatus::Denied, Some(held)) if keep && changed_request => {
            Decision::Set(Verdict {
                status: ConditionStatus::Accepted,
                message: format!("{}; the grant it holds stands", verdict.message),
                granted: Some(held.clone()),
                cordon: !held.0.is_empty() && held.0.values().all(Quantity::is_zero),
                ..verdict
            })
        }
        (ConditionStatus::Denied, Some(held)) => {
            let mut zeros: ResourceList = held.0.keys().map(|k| (k.clone(), zero())).collect();
            if let Ok(asked) = &slice.requested {
                for name in asked.0.keys() {
                    zeros.insert(name.clone(), zero());
                }
            }
            for name in ctx.defaults.0.keys() {
                zeros.insert(name.clone(), zero());
            }
            Decision::Set(Verdict {
                status: ConditionStatus::Accepted,
                reason: Reason::ResourcesRevoked,
                message: format!(
                    "revoked: every resource is 0 and the slice is cordoned ({})",
                    verdict.message
                ),
                granted: Some(zeros),
                cordon: true,
            })
        }
        (ConditionStatus::Accepted, held) => {
            let mut granted = verdict.granted.clone().unwrap_or_default();
            let asked = slice.requested.as_ref().ok();
            let mut completed = Vec::new();
            for (name, default) in &ctx.defaults.0 {
                // Present: decided by the policy. Unsold under `contracts`
                // keys were taken out of the request (`sold_view`).
                if granted.get(name).is_some() {
                    continue;
                }
                let mut value = default.clone();
                let caps = [
                    asked.and_then(|a| a.get(name)),
                    offered.get(name),
                    allowance.get(name),
                ];
                for cap in caps.into_iter().flatten() {
                    if *cap < value {
                        value = cap.clone();
                    }
                }
                completed.push(format!("{name} {value}"));
                granted.insert(name.clone(), value);
            }
            if let Some(held) = held {
                for name in held.0.keys() {
                    if granted.get(name).is_none() {
                        granted.insert(name.clone(), zero());
                    }
                }
            }
            let mut message = verdict.message;
            if !completed.is_empty() {
                let _ = write!(
                    message,
                    "; with the class's defaults for a usable node: {}",
                    completed.join(", ")
                );
            }
            Decision::Set(Verdict {
                message,
                granted: Some(granted),
                cordon: false,
                ..verdict
            })
        }
    }
}

/// Decide one slice, given what the consumer's slices decided before it
/// hold (`held`). Under `contracts`, `offered` is already the
/// [`contract_allowance`].
pub fn decide(
    ctx: &Context,
    offered: &ResourceList,
    held: &ResourceList,
    slice: &Candidate,
) -> Decision {
    match ctx.tenant {
        TenantCondition::Drained => {
            return Decision::Set(deny(
                Reason::TenantDrained,
                format!(
                    "tenant {} is drained: no resources are granted",
                    ctx.consumer
                ),
            ))
        }
        TenantCondition::Cordoned => {
            return match slice.accepted {
                Some(_) if !slice.legacy => Decision::Keep,
                _ => Decision::Set(deny(
                    Reason::TenantCordoned,
                    format!(
                        "tenant {} is cordoned: no new resources are granted",
                        ctx.consumer
                    ),
                )),
            }
        }
        TenantCondition::Active => {}
    }
    let requested = match &slice.requested {
        Ok(list) => list,
        Err(error) => return Decision::Set(deny(Reason::InvalidRequest, error.to_string())),
    };
    let remaining = remaining(offered, held);
    let keep = ctx.shrink == ShrinkPolicy::Keep && !slice.legacy;
    match ctx.policy {
        GrantPolicy::Fit => {
            if keep && slice.accepted.as_ref() == Some(requested) {
                return Decision::Keep;
            }
            fit(requested, offered, held, &remaining)
        }
        GrantPolicy::Clamp => {
            let floor = slice
                .accepted
                .as_ref()
                .filter(|grant| keep && within(grant, requested));
            clamp(requested, &remaining, floor)
        }
        GrantPolicy::Offer => {
            let floor = slice.accepted.as_ref().filter(|_| keep);
            offer(&remaining, floor)
        }
        GrantPolicy::Contracts => {
            if ctx.contracted.is_none() {
                return match slice.accepted {
                    Some(_) if keep => Decision::Keep,
                    _ => Decision::Set(deny(
                        Reason::NoActiveContract,
                        format!(
                            "consumer {} has no active contract with this provider: nothing is granted",
                            ctx.consumer
                        ),
                    )),
                };
            }
            let floor = slice
                .accepted
                .as_ref()
                .filter(|grant| keep && within(grant, requested));
            clamp(requested, &remaining, floor)
        }
    }
}

/// `offered - held`, per resource, never below zero.
fn remaining(offered: &ResourceList, held: &ResourceList) -> ResourceList {
    offered.saturating_sub(held)
}

/// Whether every resource of `grant` is requested and at most the request.
fn within(grant: &ResourceList, requested: &ResourceList) -> bool {
    grant
        .0
        .iter()
        .all(|(name, q)| requested.get(name).is_some_and(|asked| q <= asked))
}

fn deny(reason: Reason, message: String) -> Verdict {
    Verdict {
        status: ConditionStatus::Denied,
        reason,
        message,
        granted: None,
        cordon: false,
    }
}

fn accept(reason: Reason, message: String, granted: ResourceList) -> Verdict {
    Verdict {
        status: ConditionStatus::Accepted,
        reason,
        message,
        granted: Some(granted),
        cordon: false,
    }
}

fn zero() -> Quantity {
    Quantity::zero()
}

/// `cpu 2, memory 4Gi`, or `nothing`.
fn list_text(list: &ResourceList) -> String {
    if list.0.is_empty() {
        return "nothing".to_string();
    }
    list.0
        .iter()
        .map(|(name, q)| format!("{name} {q}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fit(
    requested: &ResourceList,
    offered: &ResourceList,
    held: &ResourceList,
    remaining: &ResourceList,
) -> Decision {
    let mut short = String::new();
    for (name, asked) in &requested.0 {
        let left = remaining.get(name).cloned().unwrap_or_else(zero);
        if *asked > left {
            if !short.is_empty() {
                short.push_str("; ");
            }
            let _ = write!(
                short,
                "{name}: requested {asked}, remaining {left} (offered {}, held by other accepted slices {}), short by {}",
                offered.get(name).cloned().unwrap_or_else(zero),
                held.get(name).cloned().unwrap_or_else(zero),
                asked.sub(&left),
            );
        }
    }
    if short.is_empty() {
        Decision::Set(accept(
            Reason::ResourcesGranted,
            format!("granted as requested: {}", list_text(requested)),
            requested.clone(),
        ))
    } else {
        Decision::Set(deny(
            Reason::InsufficientResources,
            format!("does not fit: {short}"),
        ))
    }
}

fn clamp(
    requested: &ResourceList,
    remaining: &ResourceList,
    floor: Option<&ResourceList>,
) -> Decision {
    let mut granted = ResourceList::new();
    let mut parts = Vec::new();
    let mut clamped = false;
    for (name, asked) in &requested.0 {
        let left = remaining.get(name).cloned().unwrap_or_else(zero);
        let mut grant = if *asked <= left {
            asked.clone()
        } else {
            left.clone()
        };
        if let Some(kept) = floor.and_then(|f| f.get(name)) {
            if *kept > grant {
                grant = kept.clone();
            }
        }
        if grant < *asked {
            clamped = true;
            parts.push(format!(
                "{name} {grant} (requested {asked}, remaining {left})"
            ));
        } else {
            parts.push(format!("{name} {grant}"));
        }
        granted.insert(name.clone(), grant);
    }
    let verdict = if clamped {
        accept(
            Reason::ResourcesClamped,
            format!("granted less than requested: {}", parts.join(", ")),
            granted,
        )
    } else {
        accept(
            Reason::ResourcesGranted,
            format!("granted as requested: {}", list_text(requested)),
            granted,
        )
    };
    Decision::Set(verdict)
}

fn offer(remaining: &ResourceList, floor: Option<&ResourceList>) -> Decision {
    let mut granted = remaining.clone();
    if let Some(kept) = floor {
        for (name, q) in &kept.0 {
            let grow = granted.get(name).is_none_or(|now| q > now);
            if grow {
                granted.insert(name.clone(), q.clone());
            }
        }
    }
    Decision::Set(accept(
        Reason::ResourcesOffered,
        format!("granted what is offered: {}", list_text(&granted)),
        granted,
    ))
}

#[cfg(test)]
mod tests;
