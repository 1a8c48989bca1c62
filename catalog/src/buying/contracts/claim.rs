//! A consumer cluster ID belongs to one consumer at a time, per provider
//! (issue 41, F2; probes P-01, P-02 of the hostile review of 2026-12-01).
//!
//! A Liqo v1 provider's peering user is made for one consumer cluster ID
//! (`liqo-peer-user-<id>`, its RoleBindings in `liqo-tenant-<id>`): two
//! consumers whose contracts name the same ID would share one peering
//! user, so one would receive the other's kubeconfig. The catalog
//! therefore binds the ID, with that provider, to the first consumer
//! (token `sub`) that buys with it, while that consumer holds a purchase
//! under way (its reservation, not yet due) or a live contract naming the
//! ID; another consumer naming it then is refused (409, without saying
//! who holds it). Once every one of those has ended, the next consumer
//! takes the ID over: a cluster that really changes hands works, after
//! the first owner's contracts end (cancelled or expired).
//!
//! Per provider, not across providers: the peering user lives in each
//! provider's cluster, so that is where sharing does harm, and a binding
//! across all providers would let one purchase anywhere lock a cluster
//! ID out of the whole market.
//!
//! The stores keep one record per (provider, cluster ID): its owner and
//! the reservations it was claimed for. A claim is decided here
//! ([`claim_step`]) from that record and the reservations it lists, and
//! written by the store atomically (one redb write transaction; a
//! compare-and-swap on the record's revision in MongoDB). Ended
//! reservations are dropped from the list lazily, so no end of a contract
//! has to reach this record.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::buying::model::{Reservation, ReservationState};

/// Who holds a consumer cluster ID with one provider, and through which
/// reservations (purchases under way or contracts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The consumer (token `sub`) the ID is bound to.
    pub owner: String,
    /// Reservation ids the owner claimed the ID for; some may have ended.
    pub reservations: Vec<String>,
}

/// What a claim does to the stored [`Claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimStep {
    /// Store this claim (the caller's reservation is in it).
    Write(Claim),
    /// Another consumer holds the ID: refuse.
    Held,
}

/// Whether reservation `r` (as stored; None when missing) still holds
/// `cluster_id` for `owner` at `now`: the owner's purchase under way (a
/// reservation not yet due) or a live contract naming the ID.
pub fn holds(r: Option<&Reservation>, owner: &str, cluster_id: &str, now: DateTime<Utc>) -> bool {
    let Some(r) = r else {
        return false;
    };
    if r.consumer != owner || !r.is_active(now) {
        return false;
    }
    match r.state {
        ReservationState::Reserved => true,
        // Bought naming another ID (a purchase that claimed this one then
        // failed, and was bought again naming another): not a holder.
        ReservationState::Purchased => {
            r.contract
                .as_ref()
                .and_then(|t| t.consumer_cluster_id.as_deref())
                == Some(cluster_id)
        }
        _ => false,
    }
}

/// `owner` claiming the ID for `reservation`, given the stored claim
/// (`current`) and whether each reservation it lists still holds the ID
/// ([`holds`], as `live`): the owner's own claim is kept (its ended
/// reservations dropped), another owner's is taken over only when none of
/// its reservations holds the ID any more.
pub fn claim_step(
    current: Option<&Claim>,
    owner: &str,
    reservation: &str,
    live: impl Fn(&str) -> bool,
) -> ClaimStep {
    let mut reservations = match current {
        Some(c) if c.owner == owner => c
            .reservations
            .iter()
            .filter(|id| id.as_str() != reservation && live(id))
            .cloned()
            .collect(),
        Some(c) if c.reservations.iter().any(|id| live(id)) => return ClaimStep::Held,
        _ => Vec::new(),
    };
    reservations.push(reservation.to_string());
    ClaimStep::Write(Claim {
        owner: owner.to_string(),
        reservations,
    })
}

/// The claim without `reservation` (a purchase that did not happen).
pub fn unclaim(current: &Claim, reservation: &str) -> Claim {
    Claim {
        owner: current.owner.clone(),
        reservations: current
            .reservations
            .iter()
            .filter(|id| id.as_str() != reservation)
            .cloned()
            .collect(),
    }
}

/// The 409's message: names the ID and provider, not who holds it.
pub fn held_message(provider: &str, cluster_id: &str) -> String {
    format!(
        "consumerClusterID {cluster_id} is held by another consumer with provider {provider} (a live contract or a purchase under way): a cluster ID belongs to one consumer at a time, since its Liqo peering user serves that one cluster; it can be taken over once that consumer's contracts with this provider have all ended"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buying::model::tests::{bought, reserved};
    use crate::buying::model::Transition;

    fn claim(owner: &str, ids: &[&str]) -> Claim {
        Claim {
            owner: owner.into(),
            reservations: ids.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn first_buyer_binds_and_others_are_refused_while_it_holds() {
        assert_eq!(
            claim_step(None, "bob", "r1", |_| true),
            ClaimStep::Write(claim("bob", &["r1"]))
        );
        let bob = claim("bob", &["r1"]);
        assert_eq!(
            claim_step(Some(&bob), "alice", "r2", |_| true),
            ClaimStep::Held
        );
        // Bob buys again: his ended reservations are dropped.
        let bob2 = claim("bob", &["r0", "r1"]);
        assert_eq!(
            claim_step(Some(&bob2), "bob", "r3", |id| id == "r1"),
            ClaimStep::Write(claim("bob", &["r1", "r3"]))
        );
    }

    #[test]
    fn taken_over_once_every_holding_ended() {
        let bob = claim("bob", &["r0", "r1"]);
        assert_eq!(
            claim_step(Some(&bob), "alice", "r2", |_| false),
            ClaimStep::Write(claim("alice", &["r2"]))
        );
        assert_eq!(
            claim_step(Some(&claim("bob", &[])), "alice", "r2", |_| true),
            ClaimStep::Write(claim("alice", &["r2"]))
        );
        assert_eq!(unclaim(&bob, "r0"), claim("bob", &["r1"]));
    }

    #[test]
    fn what_holds_an_id() {
        let now = crate::store::now();
        let mut contract = bought(now, 60);
        contract.contract.as_mut().unwrap().consumer_cluster_id = Some("c1".into());
        assert!(holds(Some(&contract), "alice", "c1", now));
        assert!(!holds(Some(&contract), "bob", "c1", now));
        assert!(!holds(Some(&contract), "alice", "c2", now));
        let later = now + chrono::Duration::seconds(61);
        assert!(!holds(Some(&contract), "alice", "c1", later));
        let cancelled = Transition::Cancel.apply(&contract, now);
        assert!(!holds(Some(&cancelled), "alice", "c1", now));
        // A purchase under way holds whatever ID it claimed, until due.
        let r = reserved(60);
        assert!(holds(Some(&r), "alice", "any", now));
        assert!(!holds(Some(&reserved(-1)), "alice", "any", now));
        assert!(!holds(None, "alice", "c1", now));
    }
}
