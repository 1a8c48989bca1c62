//! Contracts that continue: its consumer extends a contract before it ends
//! (`POST /contracts/{id}/extend`), keeping its id, its peering and its
//! grant; the rules written once (pure).
//!
//! - **Length.** `durationSeconds` is added to the contract's end; without
//!   it, the contract is renewed to end a whole `--contract-duration` from
//!   now. Either way the new end is at most `--contract-duration` from now,
//!   the longest a purchase may ask for today: an extension is not a way
//!   to buy further ahead than a purchase could.
//! - **Terms.** The contract continues on its own terms (cost and
//!   resources) only while the plan still offers them: if the provider
//!   changed the plan's cost or any resource since the contract was bought,
//!   or removed the plan, the extension is refused with 409 naming each
//!   change — the rule a reservation's terms already follow (neither side
//!   may be held to terms the other changed). The contract then runs to
//!   its end as bought; new terms are a new purchase.
//! - **Caps.** The contract keeps the unit it holds; nothing is reserved.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::buying::model::{contract_change, Reservation, Step};
use crate::http::FieldError;

/// The contract's new end: `asked` seconds after `current`, or (None) a
/// whole `max` from `now`; at most `max` from `now`.
pub fn new_end(
    current: DateTime<Utc>,
    now: DateTime<Utc>,
    max: Duration,
    asked: Option<u64>,
) -> Result<DateTime<Utc>, FieldError> {
    let max = chrono::Duration::from_std(max)
        .map_err(|_| FieldError::new("durationSeconds", "is out of range"))?;
    let latest = now + max;
    let end = match asked {
        None => latest,
        Some(0) => return Err(FieldError::new("durationSeconds", "must be at least 1")),
        Some(s) => i64::try_from(s)
            .ok()
            .and_then(chrono::Duration::try_seconds)
            .and_then(|d| current.checked_add_signed(d))
            .ok_or_else(|| FieldError::new("durationSeconds", "is out of range"))?,
    };
    if end > latest {
        let room = (latest - current).num_seconds().max(0);
        return Err(FieldError::new(
            "durationSeconds",
            format!(
                "may be at most {room} now: an extended contract ends at most {} s (the catalog's contract duration) from now",
                max.num_seconds()
            ),
        ));
    }
    Ok(end.max(current))
}

/// Why a contract cannot be extended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtendError {
    #[error("no contract {0}")]
    NotAContract(String),
    #[error("contract {id} has ended ({how}); buy the plan again instead")]
    Ended { id: String, how: &'static str },
}

/// Whether `r` may be extended at `now`.
pub fn check_extend(r: &Reservation, now: DateTime<Utc>) -> Result<(), ExtendError> {
    if r.contract.is_none() {
        return Err(ExtendError::NotAContract(r.id.clone()));
    }
    if let Some(how) = r.ended_as(now) {
        return Err(ExtendError::Ended {
            id: r.id.clone(),
            how,
        });
    }
    Ok(())
}

/// `r` ending at `end`, extended at `now` ([`Step::Refuse`] when
/// [`check_extend`] refuses). Its id, state, peering and terms stay.
pub fn extend_step(r: &Reservation, end: DateTime<Utc>, now: DateTime<Utc>) -> Step {
    if check_extend(r, now).is_err() {
        return Step::Refuse;
    }
    contract_change(r, |next| {
        next.expires_at = end.max(r.expires_at);
        if let Some(terms) = next.contract.as_mut() {
            terms.extended_at = Some(now);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buying::contracts::model::view;
    use crate::buying::model::tests::bought;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn an_extension_adds_time_up_to_a_whole_term_from_now() {
        let now = crate::store::now();
        let end = now + chrono::Duration::hours(1);
        assert_eq!(
            new_end(end, now, DAY, Some(60)).unwrap(),
            end + chrono::Duration::seconds(60)
        );
        assert_eq!(
            new_end(end, now, DAY, None).unwrap(),
            now + chrono::Duration::days(1)
        );
        let e = new_end(end, now, DAY, Some(86_400)).unwrap_err();
        assert_eq!(e.field, "durationSeconds");
        assert!(e.message.contains("at most 82800"), "{}", e.message);
        assert!(new_end(end, now, DAY, Some(0)).is_err());
        assert!(new_end(end, now, DAY, Some(u64::MAX)).is_err());
    }

    #[test]
    fn an_extended_contract_keeps_its_id_and_peering_and_stops_ending_soon() {
        let now = crate::store::now();
        let lead = chrono::Duration::seconds(30);
        let c = bought(now, 10);
        let before = view(&c, now, lead).unwrap();
        assert!(before.ending_soon);
        let end = now + chrono::Duration::seconds(100);
        let Step::Write { next, .. } = extend_step(&c, end, now) else {
            panic!()
        };
        let after = view(&next, now, lead).unwrap();
        assert_eq!(after.id, before.id);
        assert_eq!(after.expires_at, end);
        assert_eq!(after.peering_state, before.peering_state);
        assert!(!after.ending_soon && after.extended_at == Some(now));
        assert_eq!(next.contract.as_ref().unwrap().revision, 1);
        // Ended contracts do not continue.
        let later = now + chrono::Duration::seconds(11);
        assert!(matches!(
            check_extend(&c, later),
            Err(ExtendError::Ended { how: "expired", .. })
        ));
        assert_eq!(extend_step(&c, end, later), Step::Refuse);
    }
}
