//! Contracts: what a REST purchase yields, and the rules about them that
//! both stores and every handler follow, written once here.
//!
//! A contract is the purchased record itself: a [`Reservation`] with
//! [`ContractTerms`](crate::buying::model::ContractTerms), both in
//! [`crate::buying::model`] with the purchase step that writes the terms.
//! Its id is the purchase's id. The terms fix, at
//! purchase time, the plan's resources, the provider's ResourceSlice class
//! and Liqo generations, and the expiry (the record's `expiresAt`, so the
//! expiry sweeper and the plan's unit accounting treat it like a
//! reservation's deadline). The consumer side reports a [`ContractState`]
//! (`pending`, `peered`, `granted`, `ready`, `failed` — any may follow any)
//! until the contract ends: expired, or cancelled with `DELETE
//! /purchases/{id}`.
//!
//! Who sees what ([`party`]): the buyer sees its contracts (and, one at a
//! time, their credentials), the selling provider its cluster's contracts
//! without credentials, an admin all without credentials; others nothing.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::buying::model::{contract_change, ContractState, Reservation, ReservationState, Step};
use crate::http::{validate_id, FieldError};

/// Longest `reason` accepted, in bytes (declared with the wire, where a
/// peering controller's step reasons are cut to it).
pub use catalog_client::wire::contract::MAX_REASON_LEN;

// What a contract looks like on the wire is declared once, in
// `catalog-client` (with its schema), so a renamed field fails the
// server's build and the clients' alike.
pub use catalog_client::wire::contract::{
    Contract, ContractCredentials, ContractPeering, Ended, V1Credentials,
};

/// `r` as a contract at `now` (without credentials); None if `r` is not
/// one (a reservation, or an Open Service Broker purchase). It reads
/// `endingSoon` from `lead` before its end.
pub fn view(r: &Reservation, now: DateTime<Utc>, lead: chrono::Duration) -> Option<Contract> {
    let terms = r.contract.as_ref()?;
    let purchased_at = r.purchased_at?;
    let (active, ended, ended_at) = match r.state {
        ReservationState::Purchased if r.is_due(now) => {
            (false, Some(Ended::Expired), Some(r.expires_at))
        }
        ReservationState::Purchased => (true, None, None),
        ReservationState::Cancelled => (false, Some(Ended::Cancelled), r.ended_at),
        _ => (
            false,
            Some(Ended::Expired),
            r.ended_at.or(Some(r.expires_at)),
        ),
    };
    Some(Contract {
        id: r.id.clone(),
        consumer: r.consumer.clone(),
        consumer_cluster_id: terms.consumer_cluster_id.clone(),
        cluster_id: r.cluster_id.clone(),
        cluster_name: terms.cluster_name.clone(),
        offer_id: r.offer_id.clone(),
        plan_id: r.plan_id.clone(),
        resources: terms.resources.clone(),
        cost: r.cost,
        // The catalog's, stamped by `super::service::view`.
        pricing: None,
        bought_by: r.bought_by.clone(),
        resource_slice_class: terms.resource_slice_class.clone(),
        liqo: terms.liqo.clone(),
        purchased_at,
        expires_at: r.expires_at,
        active,
        ended,
        ended_at,
        state: terms.state,
        reason: terms.reason.clone(),
        state_changed_at: terms.state_changed_at,
        peering_state: super::peering::state(r),
        ending_soon: active && r.expires_at - now <= lead,
        extended_at: terms.extended_at,
        bindings_changed_at: terms.bindings_changed_at,
        // For its two parties: `super::service` takes it out for others.
        network_policy: terms.network_policy.clone(),
        credentials: None,
    })
}

/// Who is asking about contracts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    /// The token's `sub` (a provider's is its cluster ID).
    pub subject: String,
    pub consumer: bool,
    pub provider: bool,
    pub admin: bool,
}

/// How a viewer stands to a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Party {
    /// Its buyer: sees it with credentials, reports its state.
    Consumer,
    /// The provider that sold it: sees it without credentials.
    Provider,
    /// An administrator: sees it without credentials.
    Admin,
}

/// How `who` stands to `r` (None: it does not exist for them, 404).
pub fn party(r: &Reservation, who: &Viewer) -> Option<Party> {
    if (who.consumer || who.admin) && r.consumer == who.subject {
        Some(Party::Consumer)
    } else if who.provider && r.cluster_id == who.subject {
        Some(Party::Provider)
    } else if who.admin {
        Some(Party::Admin)
    } else {
        None
    }
}

/// `GET /contracts` filters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContractFilter {
    pub active: Option<bool>,
    pub state: Option<ContractState>,
}

impl ContractFilter {
    pub fn matches(&self, c: &Contract) -> bool {
        self.active.is_none_or(|a| c.active == a) && self.state.is_none_or(|s| c.state == s)
    }
}

/// What a REST purchase asks for besides the reservation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Order {
    pub consumer_cluster_id: Option<String>,
    /// None: the longest (`--contract-duration`).
    pub duration_seconds: Option<u64>,
}

/// The contract's lifetime: `asked` seconds (1 up to `max`), else `max`.
pub fn lifetime(max: Duration, asked: Option<u64>) -> Result<chrono::Duration, FieldError> {
    let d = match asked {
        None => max,
        Some(0) => return Err(FieldError::new("durationSeconds", "must be at least 1")),
        Some(s) if Duration::from_secs(s) > max => {
            return Err(FieldError::new(
                "durationSeconds",
                format!(
                    "must be at most {} (the catalog's contract duration)",
                    max.as_secs()
                ),
            ))
        }
        Some(s) => Duration::from_secs(s),
    };
    chrono::Duration::from_std(d).map_err(|_| FieldError::new("durationSeconds", "is out of range"))
}

/// Longest `boughtBy`, in characters (declared with the wire).
pub use catalog_client::wire::contract::MAX_BOUGHT_BY_CHARS;

/// A `boughtBy` (who buys, shown to people beside the contract: in the
/// web UI, brokerctl's tables): 1 to [`MAX_BOUGHT_BY_CHARS`] characters,
/// one line, none of the characters an offer's description refuses
/// (control and bidirectional formatting characters, issue 41 F6) nor a
/// line feed or tab.
pub fn check_bought_by(v: &str) -> Result<(), FieldError> {
    let field = "boughtBy";
    let count = v.chars().count();
    if count == 0 || count > MAX_BOUGHT_BY_CHARS {
        return Err(FieldError::new(
            field,
            format!("must be 1 to {MAX_BOUGHT_BY_CHARS} characters"),
        ));
    }
    if let Some(c) = v
        .chars()
        .find(|c| c.is_control() || crate::offers::offer::unsafe_in_description(*c))
    {
        return Err(FieldError::new(
            field,
            format!(
                "must not contain the control or bidirectional formatting character U+{:04X}",
                u32::from(c)
            ),
        ));
    }
    Ok(())
}

/// A consumer cluster ID as Liqo writes them (a UUID for v0, a name for
/// v1): 1-128 of `A-Z a-z 0-9 . _ ~ -`.
pub fn check_cluster_id(v: &str) -> Result<(), FieldError> {
    validate_id("consumerClusterID", v)
}

/// A state report (`PUT /contracts/{id}/state`), checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub state: ContractState,
    pub reason: Option<String>,
    pub consumer_cluster_id: Option<String>,
}

impl Report {
    /// A report; `reason` is required for `failed`, at most
    /// [`MAX_REASON_LEN`] bytes of text without control characters.
    pub fn new(
        state: &str,
        reason: Option<String>,
        consumer_cluster_id: Option<String>,
    ) -> Result<Self, FieldError> {
        let state = ContractState::parse(state).ok_or_else(|| {
            FieldError::new("state", "must be pending, peered, granted, ready or failed")
        })?;
        if let Some(r) = &reason {
            if r.trim().is_empty() || r.len() > MAX_REASON_LEN || r.chars().any(char::is_control) {
                return Err(FieldError::new(
                    "reason",
                    format!(
                        "must be 1 to {MAX_REASON_LEN} bytes of text without control characters"
                    ),
                ));
            }
        }
        if state == ContractState::Failed && reason.is_none() {
            return Err(FieldError::new(
                "reason",
                "is required when state is failed",
            ));
        }
        if let Some(id) = &consumer_cluster_id {
            check_cluster_id(id)?;
        }
        Ok(Report {
            state,
            reason,
            consumer_cluster_id,
        })
    }
}

/// Why a report cannot apply to a contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("no contract {0}")]
    NotAContract(String),
    #[error("contract {id} has ended ({how}); its state no longer changes")]
    Ended { id: String, how: &'static str },
    #[error("consumerClusterID: contract {id} is already bound to consumer cluster {current}; it never changes")]
    ClusterIdFixed { id: String, current: String },
}

/// Whether `report` may apply to `r` at `now`.
pub fn check_report(
    r: &Reservation,
    report: &Report,
    now: DateTime<Utc>,
) -> Result<(), ReportError> {
    let Some(terms) = &r.contract else {
        return Err(ReportError::NotAContract(r.id.clone()));
    };
    if let Some(how) = r.ended_as(now) {
        return Err(ReportError::Ended {
            id: r.id.clone(),
            how,
        });
    }
    if let (Some(current), Some(asked)) = (&terms.consumer_cluster_id, &report.consumer_cluster_id)
    {
        if current != asked {
            return Err(ReportError::ClusterIdFixed {
                id: r.id.clone(),
                current: current.clone(),
            });
        }
    }
    Ok(())
}

/// Apply `report` to `r` at `now` ([`Step::Refuse`] when [`check_report`]
/// refuses: the caller asks it why).
pub fn report_step(r: &Reservation, report: &Report, now: DateTime<Utc>) -> Step {
    if check_report(r, report, now).is_err() {
        return Step::Refuse;
    }
    contract_change(r, |next| {
        if let Some(terms) = next.contract.as_mut() {
            terms.state = report.state;
            terms.reason = report.reason.clone();
            terms.state_changed_at = now;
            if terms.consumer_cluster_id.is_none() {
                terms.consumer_cluster_id = report.consumer_cluster_id.clone();
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buying::model::tests::{bought, reserved, terms};
    use crate::buying::model::{purchase_step, step, Transition};
    use proptest::prelude::*;

    #[test]
    fn bought_by_is_one_short_line_of_plain_text() {
        for good in [
            "market-autoscaler/team-a/web",
            "x",
            "équipe ☃",
            &"é".repeat(MAX_BOUGHT_BY_CHARS),
        ] {
            assert_eq!(check_bought_by(good), Ok(()), "{good:?}");
        }
        for bad in [
            "",
            "a\nb",
            "tab\there",
            "esc\u{1b}[2J",
            "del\u{7f}",
            "c1\u{85}",
            "rtl\u{202E}gpj.exe",
            "iso\u{2067}late",
            &"a".repeat(MAX_BOUGHT_BY_CHARS + 1),
        ] {
            let e = check_bought_by(bad).unwrap_err();
            assert_eq!(e.field, "boughtBy", "{bad:?}");
        }
    }

    const LEAD: chrono::Duration = chrono::Duration::seconds(5);

    #[test]
    fn a_purchase_stamps_terms_and_expiry() {
        let now = crate::store::now();
        let c = bought(now, 100);
        assert_eq!(c.state, ReservationState::Purchased);
        assert_eq!(c.expires_at, now + chrono::Duration::seconds(100));
        let v = view(&c, now, LEAD).unwrap();
        assert!(v.active && v.ended.is_none());
        assert_eq!(v.state, ContractState::Pending);
        assert_eq!(v.resources.to_strings()["memory"], "4Gi");
        // A late purchase is refused (the record expires instead).
        let late = purchase_step(
            &reserved(-1),
            &terms(now),
            chrono::Duration::seconds(5),
            now,
        );
        assert!(matches!(late, Step::Write { refused: true, .. }));
        // A reservation is no contract.
        assert!(view(&reserved(60), now, LEAD).is_none());
    }

    #[test]
    fn expiry_and_cancellation_end_it() {
        let now = crate::store::now();
        let c = bought(now, 10);
        let later = now + chrono::Duration::seconds(11);
        let v = view(&c, later, LEAD).unwrap();
        assert_eq!((v.active, v.ended), (false, Some(Ended::Expired)));
        assert!(c.is_due(later) && !c.is_due(now));
        match step(&c, Transition::Expire, later) {
            Step::Write { next, .. } => {
                assert_eq!(next.state, ReservationState::Expired);
                assert_eq!(next.ended_at, Some(c.expires_at));
                assert!(!next.is_active(later));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(step(&c, Transition::Expire, now), Step::Refuse);
        // Cancelling a contract past its expiry expires it instead.
        assert!(matches!(
            step(&c, Transition::Cancel, later),
            Step::Write { refused: true, ref next } if next.state == ReservationState::Expired
        ));
        match step(&c, Transition::Cancel, now) {
            Step::Write {
                next,
                refused: false,
            } => {
                let v = view(&next, now, LEAD).unwrap();
                assert_eq!((v.active, v.ended), (false, Some(Ended::Cancelled)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn who_sees_what() {
        let now = crate::store::now();
        let c = bought(now, 10);
        let who = |subject: &str, consumer, provider, admin| Viewer {
            subject: subject.into(),
            consumer,
            provider,
            admin,
        };
        assert_eq!(
            party(&c, &who("alice", true, false, false)),
            Some(Party::Consumer)
        );
        assert_eq!(party(&c, &who("bob", true, false, false)), None);
        assert_eq!(
            party(&c, &who("prov", false, true, false)),
            Some(Party::Provider)
        );
        assert_eq!(party(&c, &who("other", false, true, false)), None);
        assert_eq!(
            party(&c, &who("admin", false, false, true)),
            Some(Party::Admin)
        );
        // A consumer token whose subject happens to be the provider's ID
        // is not the provider.
        assert_eq!(party(&c, &who("prov", true, false, false)), None);
    }

    #[test]
    fn reports_validate_and_bind_the_cluster_once() {
        assert_eq!(
            Report::new("ready2", None, None).unwrap_err().field,
            "state"
        );
        assert_eq!(
            Report::new("failed", None, None).unwrap_err().field,
            "reason"
        );
        assert_eq!(
            Report::new("peered", Some("\u{7}".into()), None)
                .unwrap_err()
                .field,
            "reason"
        );
        assert_eq!(
            Report::new("peered", None, Some("a b".into()))
                .unwrap_err()
                .field,
            "consumerClusterID"
        );
        let now = crate::store::now();
        let c = bought(now, 10);
        let bind = Report::new("peered", None, Some("cons-1".into())).unwrap();
        let Step::Write { next, .. } = report_step(&c, &bind, now) else {
            panic!()
        };
        let t = next.contract.as_ref().unwrap();
        assert_eq!((t.state, t.revision), (ContractState::Peered, 1));
        assert_eq!(t.consumer_cluster_id.as_deref(), Some("cons-1"));
        let rebind = Report::new("ready", None, Some("cons-2".into())).unwrap();
        assert!(matches!(
            check_report(&next, &rebind, now),
            Err(ReportError::ClusterIdFixed { .. })
        ));
        assert_eq!(report_step(&next, &rebind, now), Step::Refuse);
        let later = now + chrono::Duration::seconds(11);
        assert!(matches!(
            check_report(&next, &bind, later),
            Err(ReportError::Ended { how: "expired", .. })
        ));
    }

    #[test]
    fn a_peering_step_round_trips_as_state_and_reason() {
        use catalog_client::wire::{reason_step, step_reason};
        let now = crate::store::now();
        let mut c = bought(now, 10);
        for (state, code, words) in [
            (
                "pending",
                "WaitingForSignature",
                "waiting for the provider's Liqo to sign the nonce",
            ),
            ("pending", "WaitingForPeering", &"é".repeat(300)),
            (
                "peered",
                "WaitingForProvider",
                "waiting for the provider to decide",
            ),
            ("ready", "Ready", "peered, granted and offloaded"),
        ] {
            let reason = step_reason(code, words);
            let report = Report::new(state, Some(reason.clone()), None).unwrap();
            let Step::Write { next, .. } = report_step(&c, &report, now) else {
                panic!("{state} {code} refused")
            };
            c = next;
            let shown = view(&c, now, chrono::Duration::zero()).unwrap();
            assert_eq!(shown.state.as_str(), state);
            assert_eq!(shown.reason.as_deref(), Some(reason.as_str()));
            assert_eq!(reason_step(&reason), Some(code));
        }
    }

    proptest! {
        /// Any sequence of reports applies in order while the contract
        /// lives: the last one is what is stored, revisions count them,
        /// and the consumer cluster ID is the first one given.
        #[test]
        fn any_state_may_follow_any(seq in proptest::collection::vec((0usize..5, proptest::option::of(0u8..3)), 1..20)) {
            let states = ["pending", "peered", "granted", "ready", "failed"];
            let now = crate::store::now();
            let mut c = bought(now, 1000);
            let mut first_id = None;
            for (i, (s, id)) in seq.iter().enumerate() {
                let id = id.map(|n| format!("c{n}"));
                let report = Report::new(states[*s], Some("why".into()), id.clone()).unwrap();
                let bound = first_id.clone();
                match report_step(&c, &report, now) {
                    Step::Write { next, .. } => {
                        prop_assert!(bound.is_none() || id.is_none() || id == bound);
                        c = next;
                        if first_id.is_none() { first_id = id; }
                    }
                    Step::Refuse => prop_assert!(bound.is_some() && id.is_some() && id != bound),
                }
                let t = c.contract.as_ref().unwrap();
                prop_assert!(t.revision as usize <= i + 1);
                prop_assert_eq!(&t.consumer_cluster_id, &first_id);
            }
        }
    }
}
