//! Buying, independent of HTTP: reserve a plan, purchase or release a
//! reservation, cancel a purchase, and hand over peering credentials.
//! Used by the REST handlers ([`super::http`]) and the Open Service Broker
//! API (the `osb` feature).

use std::sync::Arc;
use std::time::Duration;

use quantity::ResourceList;

use super::error::BuyError;
use super::model::{
    new_id, purchase_step, Channel, ContractTerms, Reservation, ReservationState, Step, Transition,
};
use super::store::{ReservationStore, ReserveError, TransitionError};
use crate::auth::{Caller, Role};
use crate::offers::{OfferStore, Plan};
use crate::providers::{PeeringCredentials, Providers};

/// What the buying handlers share (`web::Data<Buying>`), and what the
/// Open Service Broker API buys through.
#[derive(Clone)]
pub struct Buying {
    pub store: Arc<dyn ReservationStore>,
    /// The offers whose plans are bought.
    pub offers: Arc<dyn OfferStore>,
    /// Disabled flags and the peering credentials a purchase hands over.
    pub providers: Providers,
    /// The longest (and default) reservation lifetime.
    pub ttl: Duration,
    /// The longest (and default) contract lifetime.
    pub contract_duration: Duration,
    /// How long before its end a contract reads `endingSoon`.
    pub ending_soon: Duration,
    pub sweep_interval: Duration,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// The unit of contracts' costs, stamped on every contract served.
    pub pricing: catalog_client::wire::Pricing,
}

/// Who is buying, and whether they may see everyone's records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buyer {
    /// The token's `sub`: owner of the records it makes.
    pub subject: String,
    pub admin: bool,
}

impl Buyer {
    /// The caller as a buyer: consumers and admins only (403 otherwise).
    pub fn from_caller(caller: &Caller) -> Result<Self, BuyError> {
        let admin = caller.roles.contains(&Role::Admin);
        if !admin && !caller.roles.contains(&Role::Consumer) {
            return Err(BuyError::forbidden("this needs the consumer or admin role"));
        }
        Ok(Buyer {
            subject: caller.cluster_id.clone(),
            admin,
        })
    }

    /// Whether this buyer may see (and end) `r`.
    pub fn may_see(&self, r: &Reservation) -> bool {
        self.admin || r.consumer == self.subject
    }
}

fn not_found(id: &str) -> BuyError {
    BuyError::not_found(format!("no reservation {id}"))
}

/// The record `id` as `who` may see it (404 for others' records), expired
/// on the spot if its deadline has passed; as answered (a contract's own
/// credentials left out, see [`Reservation::answered`]).
pub async fn lookup(state: &Buying, id: &str, who: &Buyer) -> Result<Reservation, BuyError> {
    let store = &state.store;
    let r = store
        .get_reservation(id)
        .await?
        .filter(|r| who.may_see(r))
        .ok_or_else(|| not_found(id))?;
    Ok(settle(state, r).await?.answered())
}

/// `r`, expired first if it is due.
pub async fn settle(state: &Buying, r: Reservation) -> Result<Reservation, BuyError> {
    let now = crate::store::now();
    if !r.is_due(now) {
        return Ok(r);
    }
    match state.store.transition(&r.id, Transition::Expire, now).await {
        Ok(expired) => Ok(expired),
        Err(TransitionError::WrongState(current)) => Ok(*current),
        Err(e) => Err(e.into()),
    }
}

/// Reserve plan `plan_id` of offer `offer_id` for `consumer`, for `ttl`;
/// `bought_by` (checked by the caller) is kept with the record.
pub async fn reserve(
    state: &Buying,
    consumer: &str,
    offer_id: &str,
    plan_id: &str,
    ttl: Duration,
    channel: Channel,
    bought_by: Option<String>,
) -> Result<Reservation, BuyError> {
    let offer = state
        .offers
        .get_offer(offer_id)
        .await?
        .ok_or_else(|| BuyError::not_found(format!("offerID: no offer {offer_id}")))?;
    let plan = offer.plans.get(plan_id).ok_or_else(|| {
        BuyError::not_found(format!("planID: offer {offer_id} has no plan {plan_id}"))
    })?;
    ensure_enabled(state, &offer.cluster_id).await?;
    // Refuse now rather than at purchase time if the credentials a purchase
    // must hand over are not on file.
    if let Some(why) = state.providers.cannot_sell(&offer.cluster_id).await? {
        return Err(BuyError::conflict(why));
    }
    let now = crate::store::now();
    let ttl = chrono::Duration::from_std(ttl)
        .map_err(|_| BuyError::bad_request("ttlSeconds", "is out of range"))?;
    let r = Reservation {
        id: new_id().map_err(BuyError::internal)?,
        consumer: consumer.to_string(),
        offer_id: offer.id.clone(),
        plan_id: plan_id.to_string(),
        cluster_id: offer.cluster_id.clone(),
        cost: plan.cost,
        state: ReservationState::Reserved,
        channel,
        created_at: now,
        expires_at: now + ttl,
        purchased_at: None,
        ended_at: None,
        contract: None,
        bought_by,
        // The terms a purchase gets (see `super::terms`).
        reserved_plan: Some(plan.clone()),
    };
    let r = state.store.reserve(r, now).await.map_err(|e| {
        if let ReserveError::SoldOut { cap } = &e {
            return BuyError::conflict(format!(
                "plan {plan_id} of offer {offer_id} is sold out: all {cap} units are reserved or purchased"
            ));
        }
        e.into()
    })?;
    tracing::info!(reservation = %r.id, offer = %r.offer_id, plan = %r.plan_id, consumer = %r.consumer, "reserved");
    Ok(r)
}

/// 403 if an administrator disabled provider `cluster_id`.
pub async fn ensure_enabled(state: &Buying, cluster_id: &str) -> Result<(), BuyError> {
    if state.providers.is_disabled(cluster_id).await? {
        return Err(BuyError::forbidden(format!(
            "provider {cluster_id} is disabled by an administrator"
        )));
    }
    Ok(())
}

fn wrong_state(r: &Reservation, purchasing: bool) -> BuyError {
    match r.state {
        ReservationState::Expired if purchasing => BuyError::Gone(format!(
            "reservation {} expired at {}; reserve again",
            r.id,
            r.expires_at.to_rfc3339()
        )),
        ReservationState::Purchased => {
            BuyError::conflict(format!("reservation {} is already purchased", r.id))
        }
        s => BuyError::conflict(format!("reservation {} is {}", r.id, s.as_str())),
    }
}

/// The resources a purchase of `r` gets: the plan as reserved, checked
/// against the plan on offer now (409 naming what changed, or that the
/// plan is gone; see [`super::terms`]).
pub async fn reserved_terms(state: &Buying, r: &Reservation) -> Result<ResourceList, BuyError> {
    let plan = plan_on_offer(state, r, "release this reservation").await?;
    super::terms::purchasable(r, &plan).map_err(BuyError::conflict)
}

/// The plan `r` holds, as on offer now; 409 when the offer no longer has
/// it, followed by `then` (what that means for `r`).
pub async fn plan_on_offer(state: &Buying, r: &Reservation, then: &str) -> Result<Plan, BuyError> {
    state
        .offers
        .get_offer(&r.offer_id)
        .await?
        .and_then(|o| o.plans.get(&r.plan_id).cloned())
        .ok_or_else(|| {
            BuyError::conflict(format!(
                "offer {} no longer has plan {}: {then}",
                r.offer_id, r.plan_id
            ))
        })
}

/// Purchase reservation `id` (which `who` may see). With `contract`
/// (a REST purchase: its terms and lifetime) the purchase is a contract
/// that expires; without (an Open Service Broker purchase) it holds its
/// unit until cancelled, and the provider's v0 credentials must be on file.
/// `bought_by` (a contract's; checked by the caller) replaces what the
/// reservation said.
pub async fn purchase(
    state: &Buying,
    id: &str,
    who: &Buyer,
    contract: Option<(ContractTerms, chrono::Duration)>,
    bought_by: Option<String>,
) -> Result<Reservation, BuyError> {
    let r = lookup(state, id, who).await?;
    if r.state != ReservationState::Reserved {
        return Err(wrong_state(&r, true));
    }
    ensure_enabled(state, &r.cluster_id).await?;
    if contract.is_none() {
        credentials(state, &r.cluster_id).await?;
        // A contract's terms were checked when they were made; an Open
        // Service Broker purchase holds to its reservation's terms too.
        reserved_terms(state, &r).await?;
    }
    let now = crate::store::now();
    let written = match contract {
        Some((terms, lifetime)) => {
            let decide = std::sync::Arc::new(move |r: &Reservation| -> Step {
                match purchase_step(r, &terms, lifetime, now) {
                    Step::Write {
                        mut next,
                        refused: false,
                    } => {
                        if let Some(by) = &bought_by {
                            next.bought_by = Some(by.clone());
                        }
                        Step::Write {
                            next,
                            refused: false,
                        }
                    }
                    other => other,
                }
            });
            state.store.update(id, decide).await
        }
        None => state.store.transition(id, Transition::Purchase, now).await,
    };
    let purchase = match written {
        Ok(p) => p,
        Err(TransitionError::WrongState(current)) => return Err(wrong_state(&current, true)),
        Err(e) => return Err(e.into()),
    };
    tracing::info!(reservation = %purchase.id, offer = %purchase.offer_id, plan = %purchase.plan_id, consumer = %purchase.consumer, contract = purchase.contract.is_some(), "purchased");
    Ok(purchase)
}

/// End record `id` with `t` (release a reservation or cancel a purchase).
pub async fn end(
    state: &Buying,
    id: &str,
    who: &Buyer,
    t: Transition,
) -> Result<Reservation, BuyError> {
    let r = lookup(state, id, who).await?;
    if r.state != t.from() {
        return Err(match (t, r.state) {
            (Transition::Release, ReservationState::Purchased) => BuyError::conflict(format!(
                "reservation {id} is purchased: cancel it with DELETE /purchases/{id}"
            )),
            (Transition::Cancel, ReservationState::Reserved) => BuyError::not_found(format!(
                "no purchase {id}: it is a reservation not yet purchased"
            )),
            _ => wrong_state(&r, false),
        });
    }
    let now = crate::store::now();
    match state.store.transition(id, t, now).await {
        Ok(ended) => {
            tracing::info!(reservation = %ended.id, state = ended.state.as_str(), "ended");
            Ok(ended.answered())
        }
        Err(TransitionError::WrongState(current)) => Err(wrong_state(&current, false)),
        Err(e) => Err(e.into()),
    }
}

/// The peering credentials of `cluster_id` to hand to a buyer.
pub async fn credentials(state: &Buying, cluster_id: &str) -> Result<PeeringCredentials, BuyError> {
    Ok(state.providers.credentials(cluster_id).await?)
}

/// The requested lifetime: `ttl_seconds` if given (1 s up to the
/// configured maximum), else the configured default.
pub fn lifetime(state: &Buying, ttl_seconds: Option<u64>) -> Result<Duration, BuyError> {
    let max = state.ttl;
    match ttl_seconds {
        None => Ok(max),
        Some(0) => Err(BuyError::bad_request("ttlSeconds", "must be at least 1")),
        Some(s) if Duration::from_secs(s) > max => Err(BuyError::bad_request(
            "ttlSeconds",
            format!(
                "must be at most {} (the catalog's reservation TTL)",
                max.as_secs()
            ),
        )),
        Some(s) => Ok(Duration::from_secs(s)),
    }
}

/// Records visible to `who`, each settled (due ones expired).
pub async fn list(
    state: &Buying,
    who: &Buyer,
    consumer: Option<&str>,
) -> Result<Vec<Reservation>, BuyError> {
    let filter = if who.admin {
        consumer
    } else {
        Some(who.subject.as_str())
    };
    let records = state.store.list_reservations(filter).await?;
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        out.push(settle(state, r).await?.answered());
    }
    Ok(out)
}
