//! The decisions of an offer write, made once for every backend: who may
//! write or delete an offer, whether a conditional write is stale, and
//! which version and timestamps the result carries. A backend reads the
//! current state, calls [`put`] or [`delete`], and writes the answer with
//! its own compare-and-swap (a redb write transaction, a
//! version-conditioned MongoDB replace).

use chrono::{DateTime, Utc};

use super::stamps::stamp_plans;
use super::{Offer, OfferDraft, PutOutcome};
use crate::store::StoreError;

/// The result of creating or replacing `draft.id`, given the live offer
/// with that id (if any) and the id's last version ever written (deleted
/// ones included, so a re-created offer continues the count).
///
/// [`StoreError::NotOwner`] if `live` belongs to another cluster;
/// [`StoreError::VersionConflict`] if `expected_version` is given and is not
/// the live version (0 meaning "must not exist"). Replacing keeps
/// `createdAt`; the new version is one past the last. Plans the write
/// changes are stamped with `now` and the draft's writer; the others keep
/// their stamps.
pub fn put(
    mut draft: OfferDraft,
    live: Option<&Offer>,
    last_version: u64,
    expected_version: Option<u64>,
    now: DateTime<Utc>,
) -> Result<PutOutcome, StoreError> {
    if let Some(l) = live {
        if l.cluster_id != draft.owner.cluster_id {
            return Err(StoreError::NotOwner);
        }
    }
    let current = live.map(|l| l.version).unwrap_or(0);
    if let Some(expected) = expected_version {
        if expected != current {
            return Err(StoreError::VersionConflict { expected, current });
        }
    }
    let created_at = live.map(|l| l.created_at).unwrap_or(now);
    stamp_plans(&mut draft.plans, live.map(|l| &l.plans), draft.writer, now);
    let version = last_version.max(current) + 1;
    Ok(PutOutcome {
        offer: draft.into_offer(created_at, now, version),
        created: live.is_none(),
    })
}

/// The version of the deletion of `live` by `owner` (one past the id's last
/// version): [`StoreError::NotFound`] without a live offer,
/// [`StoreError::NotOwner`] if it belongs to another cluster.
pub fn delete(live: Option<&Offer>, owner: &str, last_version: u64) -> Result<u64, StoreError> {
    let offer = live.ok_or(StoreError::NotFound)?;
    if offer.cluster_id != owner {
        return Err(StoreError::NotOwner);
    }
    Ok(last_version.max(offer.version) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offers::{OfferSpec, ProviderRef};

    fn draft(owner: &str) -> OfferDraft {
        let owner = ProviderRef {
            cluster_id: owner.into(),
            cluster_name: owner.into(),
            stamp: crate::providers::OwnerStamp::default(),
        };
        OfferSpec::from_json(
            br#"{"name":"n","type":"t","plans":{"p":{"name":"p","cost":"1","resources":{"cpu":"1"}}}}"#,
        )
        .unwrap()
        .into_draft("o1".into(), owner)
    }

    #[test]
    fn versions_continue_past_deletions_and_ownership_holds() {
        let now = crate::store::now();
        let first = put(draft("a"), None, 0, None, now).unwrap();
        assert!(first.created);
        assert_eq!(first.offer.version, 1);
        // A re-created id continues its count.
        let again = put(draft("a"), None, 7, Some(0), now).unwrap();
        assert_eq!(again.offer.version, 8);
        let live = first.offer;
        assert_eq!(
            put(draft("b"), Some(&live), 1, None, now).unwrap_err(),
            StoreError::NotOwner
        );
        assert_eq!(
            put(draft("a"), Some(&live), 1, Some(3), now).unwrap_err(),
            StoreError::VersionConflict {
                expected: 3,
                current: 1
            }
        );
        let replaced = put(draft("a"), Some(&live), 1, Some(1), now).unwrap();
        assert!(!replaced.created);
        assert_eq!(replaced.offer.created_at, live.created_at);
        assert_eq!(delete(Some(&live), "b", 1), Err(StoreError::NotOwner));
        assert_eq!(delete(None, "a", 1), Err(StoreError::NotFound));
        assert_eq!(delete(Some(&live), "a", 1), Ok(2));
    }
}
