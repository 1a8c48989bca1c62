//! A buyer's network policy for its pods on a contract's provider, carried
//! on the contract, and the provider's report of what it did with it; the
//! rules written once (pure). What the document means is
//! `catalog_client::wire::tenant_policy`'s.
//!
//! - **Who.** Only the contract's consumer sets (`PUT
//!   /contracts/{id}/network-policy`) or removes (`DELETE`) it; only its
//!   provider reports (`PUT /provider/contracts/{id}/network-policy/status`).
//!   Both read it on the contract (`networkPolicy`); nobody else does.
//! - **Revisions.** Each change of the policy is a new `revision`: one more
//!   than the last this contract issued (1 at first), counted across a
//!   removal, so a revision a provider saw never names another policy. A
//!   `PUT` of the policy already stored changes nothing (a retry).
//! - **Reports.** A report names the revision it rendered: one beyond the
//!   stored revision is refused (409, the provider cannot have seen it); one
//!   older than the stored report's is ignored (it arrived late). The report
//!   stays with the policy when the buyer changes it, so the buyer sees what
//!   the provider last did until it renders the new revision.
//! - **Live contracts only.** An ended contract's policy no longer changes
//!   (409), except that removing an absent one is always done.

use chrono::{DateTime, Utc};

use crate::buying::model::{contract_change, Reservation, Step};

pub use catalog_client::wire::tenant_policy::{
    ContractNetworkPolicy, TenantPolicy, TenantPolicyReport,
};

/// Largest body of `PUT /contracts/{id}/network-policy` and of the
/// provider's report, in bytes (the documents' own bounds, checked after,
/// are in `catalog_client::wire::tenant_policy`).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Why a contract's network policy cannot change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyRefusal {
    #[error("no contract {0}")]
    NotAContract(String),
    #[error("contract {id} has ended ({how}); its network policy no longer changes")]
    Ended { id: String, how: &'static str },
    #[error("contract {0} has no network policy to report on: its consumer has not set one (or removed it)")]
    NoPolicy(String),
    #[error("revision: contract {id}'s network policy is at revision {current}; a report of revision {asked} cannot be")]
    FutureRevision {
        id: String,
        current: u64,
        asked: u64,
    },
}

/// Whether `r`'s network policy may change at `now`.
pub fn check_live(r: &Reservation, now: DateTime<Utc>) -> Result<(), PolicyRefusal> {
    if r.contract.is_none() {
        return Err(PolicyRefusal::NotAContract(r.id.clone()));
    }
    if let Some(how) = r.ended_as(now) {
        return Err(PolicyRefusal::Ended {
            id: r.id.clone(),
            how,
        });
    }
    Ok(())
}

/// The policy stored on `r`, if any.
pub fn stored(r: &Reservation) -> Option<&ContractNetworkPolicy> {
    r.contract.as_ref()?.network_policy.as_ref()
}

/// Whether `policy` is already what `r` holds (a `PUT` that changes
/// nothing).
pub fn holds(r: &Reservation, policy: &TenantPolicy) -> bool {
    stored(r).is_some_and(|p| &p.policy == policy)
}

/// `r` with `policy` set at `now` as its next revision, the provider's
/// last report kept. [`Step::Refuse`] when [`check_live`] refuses, and
/// when `r` already holds `policy` (nothing to write: the caller answers
/// what is stored).
pub fn set_step(r: &Reservation, policy: &TenantPolicy, now: DateTime<Utc>) -> Step {
    if check_live(r, now).is_err() || holds(r, policy) {
        return Step::Refuse;
    }
    contract_change(r, |next| {
        if let Some(terms) = next.contract.as_mut() {
            let last = terms
                .network_policy
                .as_ref()
                .map_or(0, |p| p.revision)
                .max(terms.network_policy_revision);
            let revision = last + 1;
            let report = terms.network_policy.take().and_then(|p| p.report);
            terms.network_policy = Some(ContractNetworkPolicy {
                revision,
                updated_at: now,
                policy: policy.clone(),
                report,
            });
            terms.network_policy_revision = revision;
        }
    })
}

/// `r` without its network policy. [`Step::Refuse`] when it has none
/// (nothing to do) or [`check_live`] refuses.
pub fn remove_step(r: &Reservation, now: DateTime<Utc>) -> Step {
    if stored(r).is_none() || check_live(r, now).is_err() {
        return Step::Refuse;
    }
    contract_change(r, |next| {
        if let Some(terms) = next.contract.as_mut() {
            if let Some(p) = terms.network_policy.take() {
                terms.network_policy_revision = terms.network_policy_revision.max(p.revision);
            }
        }
    })
}

/// Whether the provider's `report` may be recorded on `r` at `now`.
pub fn check_report(
    r: &Reservation,
    report: &TenantPolicyReport,
    now: DateTime<Utc>,
) -> Result<(), PolicyRefusal> {
    check_live(r, now)?;
    let Some(p) = stored(r) else {
        return Err(PolicyRefusal::NoPolicy(r.id.clone()));
    };
    if report.revision > p.revision {
        return Err(PolicyRefusal::FutureRevision {
            id: r.id.clone(),
            current: p.revision,
            asked: report.revision,
        });
    }
    Ok(())
}

/// Whether `report` would change nothing on `r`: it is the stored report,
/// or older than it (a late one, ignored).
pub fn report_is_stale(r: &Reservation, report: &TenantPolicyReport) -> bool {
    stored(r)
        .and_then(|p| p.report.as_ref())
        .is_some_and(|had| had == report || had.revision > report.revision)
}

/// `r` with the provider's `report` recorded. [`Step::Refuse`] when
/// [`check_report`] refuses, and when [`report_is_stale`] (nothing to
/// write: the caller answers what is stored).
pub fn report_step(r: &Reservation, report: &TenantPolicyReport, now: DateTime<Utc>) -> Step {
    if check_report(r, report, now).is_err() || report_is_stale(r, report) {
        return Step::Refuse;
    }
    contract_change(r, |next| {
        if let Some(p) = next
            .contract
            .as_mut()
            .and_then(|t| t.network_policy.as_mut())
        {
            p.report = Some(report.clone());
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buying::contracts::model::view;
    use crate::buying::model::tests::bought;

    fn policy(namespace: &str) -> TenantPolicy {
        serde_json::from_value(serde_json::json!({"policies": [{
            "name": "shop/backend",
            "namespace": namespace,
            "podSelector": {"matchLabels": {"app": "backend"}},
            "ingress": []
        }]}))
        .unwrap()
    }

    fn written(step: Step) -> Reservation {
        match step {
            Step::Write {
                next,
                refused: false,
            } => next,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn revisions_count_changes_and_survive_a_removal() {
        let now = crate::store::now();
        let c = bought(now, 100);
        let one = written(set_step(&c, &policy("a"), now));
        let p = stored(&one).unwrap();
        assert_eq!((p.revision, p.updated_at), (1, now));
        assert_eq!(one.contract.as_ref().unwrap().revision, 1);
        // The same policy again: nothing to write.
        assert_eq!(set_step(&one, &policy("a"), now), Step::Refuse);
        assert!(holds(&one, &policy("a")));
        let two = written(set_step(&one, &policy("b"), now));
        assert_eq!(stored(&two).unwrap().revision, 2);
        // Removed, then set again: revision 3, never 1 again.
        let gone = written(remove_step(&two, now));
        assert!(stored(&gone).is_none());
        assert_eq!(remove_step(&gone, now), Step::Refuse);
        let three = written(set_step(&gone, &policy("a"), now));
        assert_eq!(stored(&three).unwrap().revision, 3);
        // Served on the contract; never in the record's answer.
        let shown = view(&three, now, chrono::Duration::zero()).unwrap();
        assert_eq!(shown.network_policy.as_ref(), stored(&three));
        let answered = serde_json::to_string(&three.clone().answered()).unwrap();
        assert!(!answered.contains("shop/backend"), "{answered}");
        // The record keeps it in its stored (serde) form.
        let back: Reservation =
            serde_json::from_str(&serde_json::to_string(&three).unwrap()).unwrap();
        assert_eq!(back, three);
        // Ended: refused.
        let later = now + chrono::Duration::seconds(101);
        assert!(matches!(
            check_live(&three, later),
            Err(PolicyRefusal::Ended { how: "expired", .. })
        ));
        assert_eq!(set_step(&three, &policy("b"), later), Step::Refuse);
        assert_eq!(remove_step(&three, later), Step::Refuse);
    }

    #[test]
    fn reports_name_a_revision_that_was() {
        let now = crate::store::now();
        let c = bought(now, 100);
        let report = |revision| TenantPolicyReport {
            revision,
            ..Default::default()
        };
        assert!(matches!(
            check_report(&c, &report(1), now),
            Err(PolicyRefusal::NoPolicy(_))
        ));
        let one = written(set_step(&c, &policy("a"), now));
        let two = written(set_step(&one, &policy("b"), now));
        assert!(matches!(
            check_report(&two, &report(3), now),
            Err(PolicyRefusal::FutureRevision {
                current: 2,
                asked: 3,
                ..
            })
        ));
        let reported = written(report_step(&two, &report(2), now));
        assert_eq!(stored(&reported).unwrap().report, Some(report(2)));
        // The same again, or an older one: nothing changes.
        assert_eq!(report_step(&reported, &report(2), now), Step::Refuse);
        assert!(report_is_stale(&reported, &report(1)));
        assert_eq!(report_step(&reported, &report(1), now), Step::Refuse);
        // A new revision keeps the last report until the provider renders it.
        let three = written(set_step(&reported, &policy("c"), now));
        let p = stored(&three).unwrap();
        assert_eq!((p.revision, p.report.clone()), (3, Some(report(2))));
    }
}
