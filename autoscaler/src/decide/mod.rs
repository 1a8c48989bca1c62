//! The scale-up decision, a pure function of what waits, what is offered,
//! what is held and the limits: which plans to buy, for which pods, and why
//! every other offer and pod was left out.
//!
//! **Order.** (1) Every candidate (offer × plan) is screened on its own —
//! service offers, providers, the offer selector, resource kinds, pricing
//! and currency, hostile sizes or prices, backoff — and a survivor that
//! alone breaks a limit in resources, contracts or money is rejected with
//! that limit. (2) Waiting pods go into the free room of nodes already
//! bought and purchases in flight, first fit, largest first. (3) The rest
//! are packed into new plans chosen by the strategy, inside every limit
//! jointly. A pod no allowed plan can take is named with the shortfall.
//!
//! **Fit** ([`fit`]): resources compare as Kubernetes quantities; a pod is
//! admitted by a plan when the virtual node Liqo v1.2 would create for the
//! plan's provider — its labels and its taint — satisfies the pod's node
//! selector, required node affinity and tolerations.
//!
//! **Choice** ([`choose`]): `Cheapest` is the minimum cost per hour that
//! covers every placeable pod (exact by branch and bound when the search
//! ends within [`choose::EXACT_NODE_LIMIT`] nodes, else the best found,
//! never worse than the greedy heuristic it starts from); `LeastWaste`
//! fills plans best; `Priority` takes the listed offers/providers first.

use std::collections::BTreeMap;
use std::time::Duration;

use catalog_client::wire::cost::Cost;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NodeSelector, Taint, Toleration};
use quantity::{Quantity, ResourceList};

use crate::model::{Limits, OfferFilter, Strategy};
use crate::spend::{Money, Period, Pricing, Spend};

pub mod choose;
pub mod fit;
pub mod recheck;
pub mod run;

pub use run::scale_up;

#[cfg(test)]
mod tests;

/// A pod waiting for a node (`PodScheduled=False`, `Unschedulable`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WaitingPod {
    /// `namespace/name`.
    pub key: String,
    /// What the scheduler counts (`controller_core::pods` effective
    /// requests: max(init) vs sum(containers), plus overhead), with `pods: 1`.
    pub requests: ResourceList,
    pub node_selector: BTreeMap<String, String>,
    /// `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub affinity: Option<NodeSelector>,
    pub tolerations: Vec<Toleration>,
    /// `spec.priority`: higher goes first when limits leave room for some only.
    pub priority: i32,
}

/// One plan of one offer, as the catalog's feed has it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidate {
    pub offer_id: String,
    pub plan_id: String,
    /// The provider's cluster ID (Liqo's `liqo.io/remote-cluster-id`).
    pub provider_id: String,
    pub provider_name: String,
    /// The offer's labels (`spec.offers.selector` reads them).
    pub labels: BTreeMap<String, String>,
    /// A service offer (never bought).
    pub service: bool,
    pub resources: ResourceList,
    pub cost: Cost,
    /// Absent from an older catalog: never bought.
    pub pricing: Option<Pricing>,
}

/// Free room where a waiting pod may go without buying: a bought node, or
/// a purchase in flight (its virtual node forged as Liqo will make it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Room {
    /// The node's name, or the in-flight Purchase's.
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Allocatable minus the requests of the pods on it.
    pub free: ResourceList,
}

impl Room {
    /// The room of a purchase in flight from `provider` with `resources`:
    /// the virtual node Liqo will create, with nothing on it yet.
    pub fn in_flight(name: &str, provider: &str, resources: ResourceList) -> Room {
        let node = fit::VirtualNode::of_provider(provider);
        Room {
            name: name.to_string(),
            labels: node.labels,
            taints: node.taints,
            free: resources,
        }
    }
}

/// What is held and in flight: counted against the limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    pub resources: ResourceList,
    pub contracts: u32,
    pub spend: Spend,
}

/// Everything the decision reads.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub pods: &'a [WaitingPod],
    pub candidates: &'a [Candidate],
    pub rooms: &'a [Room],
    pub committed: &'a Committed,
    pub limits: &'a Limits,
    pub offers: &'a OfferFilter,
    /// The term new contracts are bought for (`None`: the catalog's
    /// default, unknown here — a new plan then counts to the month's end).
    pub term: Option<Duration>,
    /// `(offer ID, plan ID)` → backed off until.
    pub backoff: &'a BTreeMap<(String, String), Timestamp>,
    pub strategy: Strategy,
    pub priority: &'a [String],
    pub now: Timestamp,
}

/// Which money limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetPeriod {
    /// `maxSpendPerHour`.
    Hour,
    /// `maxSpendPerMonth`.
    Month,
}

/// Why a candidate (offer × plan) was not bought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Buying it would take spend past a money limit.
    Budget {
        period: BudgetPeriod,
        limit: Money,
        would_be: Money,
    },
    /// Buying it would take a resource past `limits.resources`.
    Limit {
        resource: String,
        limit: Quantity,
        would_be: Quantity,
    },
    /// `limits.contracts` reached.
    Contracts {
        limit: u32,
    },
    /// The offer's labels do not match `offers.selector`.
    Selector,
    /// The provider is denied, or not allowed.
    Provider {
        provider: String,
        denied: bool,
    },
    ServiceOffer,
    /// It sells a resource kind outside `offers.resources`.
    ResourceKind {
        resource: String,
    },
    /// No waiting pod fits it (size, or its virtual node's labels/taint).
    Fit,
    /// A purchase of it failed recently.
    Backoff {
        until: Timestamp,
    },
    /// The catalog did not say what its cost is per (older catalog).
    Pricing,
    /// Priced in another currency than `limits.currency`.
    Currency {
        offered: String,
        wanted: String,
    },
    /// Zero or absurd cost or sizes: never bought.
    HostileOffer {
        why: String,
    },
}

impl Reason {
    /// A short machine name (metrics' `reason` label, Event reasons).
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Budget { .. } => "budget",
            Reason::Limit { .. } => "limit",
            Reason::Contracts { .. } => "contracts",
            Reason::Selector => "selector",
            Reason::Provider { .. } => "provider",
            Reason::ServiceOffer => "service-offer",
            Reason::ResourceKind { .. } => "resource-kind",
            Reason::Fit => "fit",
            Reason::Backoff { .. } => "backoff",
            Reason::Pricing => "pricing",
            Reason::Currency { .. } => "currency",
            Reason::HostileOffer { .. } => "hostile-offer",
        }
    }
}

/// Why a waiting pod gets no capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodReason {
    /// No allowed plan is large enough in `resource`.
    TooLarge {
        resource: String,
        needs: Quantity,
        /// The largest allowed plan's, `None` when none sells it.
        largest: Option<Quantity>,
    },
    /// Every resource fits some allowed plan, but no single plan fits all.
    NoPlanFitsAll,
    /// The pod's node selector, affinity or tolerations admit no allowed
    /// offer's virtual node.
    NotAdmitted,
    /// No offer may be bought at all (every one rejected).
    NoAllowedOffer,
    /// Plans fit, but buying one for it breaks a limit.
    Blocked(Reason),
    /// Its requests are beyond what can be counted.
    Unreasonable { resource: String },
    /// A plan may fit it within the limits, but the bounded search did not
    /// take it this round (the next round starts from what is bought).
    Deferred,
}

impl PodReason {
    pub fn code(&self) -> &'static str {
        match self {
            PodReason::TooLarge { .. } | PodReason::NoPlanFitsAll => "fit",
            PodReason::NotAdmitted => "selector",
            PodReason::NoAllowedOffer => "no-offer",
            PodReason::Blocked(r) => r.code(),
            PodReason::Unreasonable { .. } => "fit",
            PodReason::Deferred => "deferred",
        }
    }
}

/// A plan to buy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buy {
    pub offer_id: String,
    pub plan_id: String,
    pub provider_id: String,
    pub provider_name: String,
    pub resources: ResourceList,
    pub cost: Cost,
    pub per: Period,
    pub cost_per_hour: Money,
    pub cost_per_month: Money,
    /// The pods it is bought for.
    pub pods: Vec<String>,
}

/// A waiting pod that fits room already there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub pod: String,
    pub room: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unplaceable {
    pub pod: String,
    pub reason: PodReason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub offer_id: String,
    pub plan_id: String,
    pub reason: Reason,
}

/// How the set of plans was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Search {
    /// Nothing to choose.
    #[default]
    Trivial,
    /// Proven the best by exhaustive branch and bound.
    Exact,
    /// The search hit its bound: the best found (at least the heuristic's).
    Bounded,
    /// The greedy heuristic alone (large inputs, or `LeastWaste`).
    Heuristic,
}

/// The decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScaleUp {
    pub buy: Vec<Buy>,
    pub placed: Vec<Placed>,
    pub unplaceable: Vec<Unplaceable>,
    pub rejected: Vec<Rejected>,
    /// What the plans to buy add, per hour and per (30-day) month.
    pub added_per_hour: Money,
    pub added_per_month: Money,
    /// Spend per hour and projected for this calendar month after buying.
    pub spend_per_hour_after: Money,
    pub month_projected_after: Money,
    pub search: Search,
}
