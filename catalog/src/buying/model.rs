//! Reservations and purchases as stored and returned.
//!
//! One record follows a holding through its life: `reserved` (holds a unit of
//! the plan until `expiresAt`), then `purchased` (holds the unit until
//! cancelled — or, for a contract, until its `expiresAt`), or it ends as
//! `released`, `expired` or `cancelled`. A purchase keeps its reservation's
//! id, so `/purchases/{id}` and `/reservations/{id}` name the same record.
//! A REST purchase carries the [`ContractTerms`] of its contract (see
//! [`super::contracts`]); an Open Service Broker purchase carries none and
//! never expires.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use quantity::ResourceList;

use crate::offers::{Cost, Plan};
use crate::providers::{LiqoGeneration, PeeringCredentials};
pub use catalog_client::wire::tenant_policy::ContractNetworkPolicy;

/// Where a holding is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReservationState {
    /// Holds a unit until `expiresAt`; may be purchased or released.
    Reserved,
    /// Bought: holds a unit until cancelled (a contract: or until it expires).
    Purchased,
    /// Given back by the consumer before it expired.
    Released,
    /// Reached `expiresAt` without being purchased, or a contract that
    /// reached its expiry.
    Expired,
    /// A purchase the consumer (or an admin) cancelled.
    Cancelled,
}

impl ReservationState {
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationState::Reserved => "reserved",
            ReservationState::Purchased => "purchased",
            ReservationState::Released => "released",
            ReservationState::Expired => "expired",
            ReservationState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "reserved" => ReservationState::Reserved,
            "purchased" => ReservationState::Purchased,
            "released" => ReservationState::Released,
            "expired" => ReservationState::Expired,
            "cancelled" => ReservationState::Cancelled,
            _ => return None,
        })
    }

    /// Whether a record in this state ended for good.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            ReservationState::Reserved | ReservationState::Purchased
        )
    }
}

/// How a holding was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// `POST /reservations` and `POST /reservations/{id}/purchase`.
    Rest,
    /// An Open Service Broker provisioning.
    Osb,
}

/// A reservation (and, once bought, its purchase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub id: String,
    /// The buyer: the `sub` of the token that reserved.
    pub consumer: String,
    #[serde(rename = "offerID")]
    pub offer_id: String,
    /// The plan's key in the offer's `plans`.
    #[serde(rename = "planID")]
    pub plan_id: String,
    /// The selling provider's cluster ID.
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    /// The plan's cost when reserved (later price changes do not apply).
    #[schema(value_type = String, example = "1.0")]
    pub cost: Cost,
    pub state: ReservationState,
    pub channel: Channel,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// When it frees its unit: an unpurchased reservation's deadline; a
    /// contract's expiry once purchased (an OSB purchase keeps its
    /// reservation's deadline and never expires).
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub purchased_at: Option<DateTime<Utc>>,
    /// When it was released, expired or cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub ended_at: Option<DateTime<Utc>>,
    /// Who buys, as the buyer said on `POST /reservations` or on the
    /// purchase (which replaces it): served on the contract as `boughtBy`.
    #[serde(rename = "boughtBy", default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, max_length = 128)]
    pub bought_by: Option<String>,
    /// A REST purchase's contract terms (see `GET /contracts/{id}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub contract: Option<ContractTerms>,
    /// The whole plan as it was when reserved: the terms a purchase gets
    /// (see [`super::terms`]). Kept by the stores beside the record and
    /// never answered (the record's API form is unchanged); None for
    /// records stored before terms were recorded.
    #[serde(skip)]
    pub reserved_plan: Option<Plan>,
}

impl Reservation {
    /// Whether this record holds a unit of its plan at `now`.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.holds() && !self.is_due(now)
    }

    /// Whether its state holds a unit (until [`Reservation::due_at`]).
    pub fn holds(&self) -> bool {
        matches!(
            self.state,
            ReservationState::Reserved | ReservationState::Purchased
        )
    }

    /// When it stops holding its unit unless something happens first: a
    /// reservation's deadline, a contract's expiry; None for what holds
    /// until cancelled (an OSB purchase) or holds nothing. The stores index
    /// this for the sweeper and the plan's unit count.
    pub fn due_at(&self) -> Option<DateTime<Utc>> {
        match self.state {
            ReservationState::Reserved => Some(self.expires_at),
            ReservationState::Purchased if self.contract.is_some() => Some(self.expires_at),
            _ => None,
        }
    }

    /// Its time is up (the store has not noticed yet).
    pub fn is_due(&self, now: DateTime<Utc>) -> bool {
        self.due_at().is_some_and(|d| d <= now)
    }

    /// How a contract ended by `now` (`cancelled` or `expired`), None
    /// while it is live (purchased and not due).
    pub fn ended_as(&self, now: DateTime<Utc>) -> Option<&'static str> {
        if self.state == ReservationState::Purchased && !self.is_due(now) {
            return None;
        }
        Some(if self.state == ReservationState::Cancelled {
            "cancelled"
        } else {
            "expired"
        })
    }

    /// The record as a handler answers it: a contract's own credentials
    /// stay in the store (the sealed kubeconfig is opened only for the
    /// contract's consumer, in `GET /contracts/{id}`; the contract's
    /// `peering` says where they stand), and so does its network policy
    /// (served on the contract, `networkPolicy`, to its two parties).
    pub fn answered(mut self) -> Self {
        if let Some(terms) = self.contract.as_mut() {
            terms.v1 = None;
            terms.network_policy = None;
            terms.network_policy_revision = 0;
        }
        self
    }
}

/// A state change a store applies atomically, only from the state it expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// reserved (and not yet due) → purchased.
    Purchase,
    /// reserved → released.
    Release,
    /// reserved or contract (and due) → expired.
    Expire,
    /// purchased → cancelled.
    Cancel,
}

impl Transition {
    /// The state the record must be in.
    pub fn from(self) -> ReservationState {
        match self {
            Transition::Purchase | Transition::Release | Transition::Expire => {
                ReservationState::Reserved
            }
            Transition::Cancel => ReservationState::Purchased,
        }
    }

    /// The state it ends in.
    pub fn to(self) -> ReservationState {
        match self {
            Transition::Purchase => ReservationState::Purchased,
            Transition::Release => ReservationState::Released,
            Transition::Expire => ReservationState::Expired,
            Transition::Cancel => ReservationState::Cancelled,
        }
    }

    /// `r` after this transition at `now` (no checks).
    pub fn apply(self, r: &Reservation, now: DateTime<Utc>) -> Reservation {
        let mut next = r.clone();
        next.state = self.to();
        match self {
            Transition::Purchase => next.purchased_at = Some(now),
            // An expiry happened at the deadline, whenever it is noticed.
            Transition::Expire => next.ended_at = Some(r.expires_at),
            Transition::Release | Transition::Cancel => next.ended_at = Some(now),
        }
        next
    }
}

/// What a store does to apply a transition to a record as it read it: the
/// one decision both backends follow (each then writes with its own
/// compare-and-swap).
#[derive(Debug, Clone, PartialEq)]
// A short-lived decision, built once per write: boxing `next` buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum Step {
    /// Leave the record as it is and answer that it is in another state.
    Refuse,
    /// Write `next`. `refused`: the asked transition did not happen (a
    /// purchase after the deadline expires the record instead), so the
    /// caller is answered with the new state as a refusal.
    Write { next: Reservation, refused: bool },
}

/// Decide how `t` applies to `r` at `now`: only from `t.from()`; a purchase
/// of a due reservation (or a cancellation of a due contract) expires it
/// instead; an expiry only of a due record, reserved or a contract.
pub fn step(r: &Reservation, t: Transition, now: DateTime<Utc>) -> Step {
    if t == Transition::Expire {
        if !r.is_due(now) {
            return Step::Refuse;
        }
    } else if r.state != t.from() {
        return Step::Refuse;
    }
    let (effective, refused) = match t {
        Transition::Purchase | Transition::Cancel if r.is_due(now) => (Transition::Expire, true),
        _ => (t, false),
    };
    Step::Write {
        next: effective.apply(r, now),
        refused,
    }
}

/// The order every listing of reservations comes in: newest first, ties
/// by id.
pub fn newest_first(records: &mut [Reservation]) {
    records.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
}

/// Whether a plan with `cap` units and `active` holdings has none left.
pub fn sold_out(cap: u32, active: u64) -> bool {
    active >= u64::from(cap)
}

/// A plan's cap and how much of it is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanUsage {
    /// Most concurrent holdings (reservations + purchases); None: no cap.
    pub cap: Option<u32>,
    /// Holdings active now.
    pub active: u64,
}

/// What `GET /purchases/{id}` answers its buyer: the purchase and the
/// provider's v0 credentials.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurchaseWithPeering {
    #[serde(flatten)]
    pub purchase: Reservation,
    pub peering: PeeringCredentials,
}

/// A new random identifier: 128 bits as 32 lower-case hex digits.
pub fn new_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

// Where the consumer side says a contract is: a wire type, declared once
// in `catalog-client` (with its schema).
pub use catalog_client::wire::contract::ContractState;

/// What a REST purchase fixes, stored with the purchased record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractTerms {
    /// The consumer's Liqo cluster ID, once known (set once).
    #[serde(
        rename = "consumerClusterID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub consumer_cluster_id: Option<String>,
    /// The provider's cluster name at purchase time.
    pub cluster_name: String,
    /// The plan's resources at purchase time.
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub resources: ResourceList,
    /// The ResourceSlice class the provider enforces.
    pub resource_slice_class: String,
    /// The Liqo generations the provider peered with at purchase time.
    pub liqo: Vec<LiqoGeneration>,
    pub state: ContractState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub state_changed_at: DateTime<Utc>,
    /// Bumped by every change of the contract (state report, attached
    /// credentials, extension): the stores' compare-and-swap token.
    #[serde(default)]
    pub revision: i64,
    /// Liqo v1: where this contract's peering user comes from (see
    /// [`super::contracts::peering`]). None on contracts without v1, and
    /// on contracts bought before per-contract credentials (they keep the
    /// provider's registered kubeconfig).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(ignore)]
    pub v1: Option<ContractV1>,
    /// When the consumer last extended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime, nullable = false)]
    pub extended_at: Option<DateTime<Utc>>,
    /// When a binding of this (service) contract was last requested or
    /// its removal asked (Open Service Broker): the change that tells the
    /// provider's controller, on the contract change stream, that bindings
    /// wait for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime, nullable = false)]
    pub bindings_changed_at: Option<DateTime<Utc>>,
    /// The buyer's network policy for its pods on this provider, with the
    /// provider's last report (see [`super::contracts::network_policy`]).
    /// Served on the contract (`networkPolicy`) to its two parties only:
    /// [`Reservation::answered`] takes it out of the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(ignore)]
    pub network_policy: Option<ContractNetworkPolicy>,
    /// The last network policy revision this contract issued, kept when
    /// the policy is removed so that a later one never reuses a revision
    /// a provider has seen.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schema(ignore)]
    pub network_policy_revision: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A Liqo v1 contract's own peering credentials, as stored with its terms.
/// Never answered: [`Reservation::answered`] takes it out of every record
/// a handler returns.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractV1 {
    /// The provider had declared itself single-consumer when this was
    /// bought: the contract releases the provider's registered kubeconfig.
    #[serde(default)]
    pub single_consumer: bool,
    /// The kubeconfig the provider attached to this contract, sealed
    /// (base64 of the seal layout, bound to the provider and the contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_kubeconfig: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_at: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for ContractV1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContractV1")
            .field("single_consumer", &self.single_consumer)
            .field("attached", &self.sealed_kubeconfig.is_some())
            .field("attached_at", &self.attached_at)
            .finish()
    }
}

impl ContractTerms {
    /// Fresh terms (state `pending` since `now`).
    pub fn new(
        consumer_cluster_id: Option<String>,
        cluster_name: String,
        resources: ResourceList,
        resource_slice_class: String,
        liqo: Vec<LiqoGeneration>,
        now: DateTime<Utc>,
    ) -> Self {
        ContractTerms {
            consumer_cluster_id,
            cluster_name,
            resources,
            resource_slice_class,
            liqo,
            state: ContractState::Pending,
            reason: None,
            state_changed_at: now,
            revision: 0,
            v1: None,
            extended_at: None,
            bindings_changed_at: None,
            network_policy: None,
            network_policy_revision: 0,
        }
    }
}

/// `r` changed by `change` as the next revision of its contract (the
/// revision is the stores' compare-and-swap token, so every change of a
/// contract goes through here).
pub fn contract_change(r: &Reservation, change: impl FnOnce(&mut Reservation)) -> Step {
    let mut next = r.clone();
    change(&mut next);
    if let Some(terms) = next.contract.as_mut() {
        terms.revision += 1;
    }
    Step::Write {
        next,
        refused: false,
    }
}

/// The purchase of `r` at `now` as a contract with `terms`, lasting
/// `lifetime`: [`step`]'s purchase, stamped with the terms and the expiry.
pub fn purchase_step(
    r: &Reservation,
    terms: &ContractTerms,
    lifetime: chrono::Duration,
    now: DateTime<Utc>,
) -> Step {
    match step(r, Transition::Purchase, now) {
        Step::Write {
            mut next,
            refused: false,
        } => {
            next.contract = Some(terms.clone());
            next.expires_at = now + lifetime;
            Step::Write {
                next,
                refused: false,
            }
        }
        other => other,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A REST reservation in `state`, expiring `expires_in` seconds from
    /// now (the contracts tests build theirs from it too).
    pub(crate) fn sample(state: ReservationState, expires_in: i64) -> Reservation {
        let now = crate::store::now();
        Reservation {
            id: "r1".into(),
            consumer: "alice".into(),
            offer_id: "o".into(),
            plan_id: "p".into(),
            cluster_id: "c".into(),
            cost: Cost::ZERO,
            state,
            channel: Channel::Rest,
            created_at: now,
            expires_at: now + chrono::Duration::seconds(expires_in),
            purchased_at: None,
            ended_at: None,
            contract: None,
            bought_by: None,
            reserved_plan: None,
        }
    }

    /// A REST reservation of provider `prov`'s plan, expiring
    /// `expires_in` seconds from now.
    pub(crate) fn reserved(expires_in: i64) -> Reservation {
        Reservation {
            id: "k1".into(),
            cluster_id: "prov".into(),
            ..sample(ReservationState::Reserved, expires_in)
        }
    }

    pub(crate) fn terms(now: DateTime<Utc>) -> ContractTerms {
        ContractTerms::new(
            None,
            "provider".into(),
            ResourceList::from_strings([("cpu", "2"), ("memory", "4Gi")]).unwrap(),
            "liqo-broker".into(),
            vec![LiqoGeneration::V1],
            now,
        )
    }

    /// A contract bought at `now` from a Liqo v1 provider, lasting
    /// `lifetime_s` (the other contract tests build theirs from it too).
    pub(crate) fn bought(now: DateTime<Utc>, lifetime_s: i64) -> Reservation {
        match purchase_step(
            &reserved(60),
            &terms(now),
            chrono::Duration::seconds(lifetime_s),
            now,
        ) {
            Step::Write {
                next,
                refused: false,
            } => next,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn activity_follows_state_and_deadline() {
        let now = crate::store::now();
        assert!(sample(ReservationState::Reserved, 10).is_active(now));
        assert!(!sample(ReservationState::Reserved, -1).is_active(now));
        assert!(sample(ReservationState::Reserved, -1).is_due(now));
        assert!(sample(ReservationState::Purchased, -100).is_active(now));
        for s in [
            ReservationState::Released,
            ReservationState::Expired,
            ReservationState::Cancelled,
        ] {
            assert!(!sample(s, 10).is_active(now));
            assert!(s.is_final());
            assert_eq!(ReservationState::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn transitions_stamp_times() {
        let now = crate::store::now();
        let r = sample(ReservationState::Reserved, -5);
        let e = Transition::Expire.apply(&r, now);
        assert_eq!(
            (e.state, e.ended_at),
            (ReservationState::Expired, Some(r.expires_at))
        );
        let p = Transition::Purchase.apply(&r, now);
        assert_eq!(
            (p.state, p.purchased_at),
            (ReservationState::Purchased, Some(now))
        );
        assert_eq!(Transition::Cancel.from(), ReservationState::Purchased);
    }

    #[test]
    fn steps_follow_state_and_deadline() {
        let now = crate::store::now();
        let due = sample(ReservationState::Reserved, -5);
        let fresh = sample(ReservationState::Reserved, 60);
        match step(&due, Transition::Purchase, now) {
            Step::Write { next, refused } => {
                assert!(refused);
                assert_eq!(next.state, ReservationState::Expired);
            }
            other => panic!("a late purchase expires: {other:?}"),
        }
        assert_eq!(step(&fresh, Transition::Expire, now), Step::Refuse);
        assert_eq!(
            step(
                &sample(ReservationState::Released, 60),
                Transition::Purchase,
                now
            ),
            Step::Refuse
        );
        match step(&fresh, Transition::Purchase, now) {
            Step::Write { next, refused } => {
                assert!(!refused);
                assert_eq!(next.state, ReservationState::Purchased);
            }
            other => panic!("a purchase in time: {other:?}"),
        }
        assert!(sold_out(2, 2) && !sold_out(2, 1) && sold_out(0, 0));
    }
}
