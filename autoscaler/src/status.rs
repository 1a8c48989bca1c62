//! The MarketAutoscaler's status, written through the status subresource
//! with the resourceVersion that was read (a `PUT`, never a blind patch):
//! a 409 means another writer — a former leader, a person — changed it,
//! and the round starts over from what is there now. The status is the
//! autoscaler's memory across restarts and leader changes: the purchases
//! in flight and `purchasesMade`, which names the next Purchase, are
//! written **before** the Purchase is created (see [`crate::act`]).
//!
//! A round that changes nothing writes nothing: timestamps that only say
//! when a round ran (`lastDecision.at`) do not count as a change, so a
//! status write never triggers an endless series of rounds through the
//! autoscaler's own watch.

use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, PostParams};

use crate::decide::ScaleUp;
use crate::model::{
    BackoffStatus, BoughtStatus, Condition, DecisionStatus, MarketAutoscaler,
    MarketAutoscalerStatus, RejectedStatus, UnplaceableStatus, STATUS_LIST_CAP,
};

/// Condition types.
pub const READY: &str = "Ready";
pub const SCALED_UP: &str = "ScaledUp";
pub const SCALE_DOWN: &str = "ScaleDown";

/// `Ready` reasons.
pub const RUNNING: &str = "Running";
pub const CATALOG_UNREACHABLE: &str = "CatalogUnreachable";
pub const PRICING_UNKNOWN: &str = "PricingUnknown";
pub const CREDENTIALS_MISSING: &str = "CredentialsMissing";
/// The spec does not parse (a field the schema cannot check).
pub const INVALID_SPEC: &str = "InvalidSpec";

/// RFC 3339, as the API server writes times.
pub fn rfc3339(at: Timestamp) -> String {
    controller_core::clock::rfc3339(at)
}

/// Set condition `type_` (its transition time moves only when its status
/// does).
pub fn set_condition(
    status: &mut MarketAutoscalerStatus,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: i64,
    now: Timestamp,
) {
    let value = if ok { "True" } else { "False" };
    let message = controller_core::runtime::note(message);
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = rfc3339(now);
            }
            c.status = value.to_string();
            c.reason = reason.to_string();
            c.message = message;
            c.observed_generation = generation;
        }
        None => status.conditions.push(Condition {
            type_: type_.to_string(),
            status: value.to_string(),
            reason: reason.to_string(),
            message,
            last_transition_time: rfc3339(now),
            observed_generation: generation,
        }),
    }
}

/// The condition `type_`, if set.
pub fn condition<'a>(status: &'a MarketAutoscalerStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// Whether writing `after` over `before` would change more than when the
/// last round ran.
pub fn changed(before: &MarketAutoscalerStatus, after: &MarketAutoscalerStatus) -> bool {
    let strip = |s: &MarketAutoscalerStatus| {
        let mut s = s.clone();
        if let Some(d) = &mut s.last_decision {
            d.at.clear();
        }
        s
    };
    strip(before) != strip(after)
}

/// The decision as the status shows it: each list capped to
/// [`STATUS_LIST_CAP`] entries, the full counts beside.
pub fn decision(up: &ScaleUp, summary: String, now: Timestamp) -> DecisionStatus {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    DecisionStatus {
        at: rfc3339(now),
        summary: controller_core::runtime::note(&summary),
        bought: up
            .buy
            .iter()
            .take(STATUS_LIST_CAP)
            .map(|b| BoughtStatus {
                offer_id: b.offer_id.clone(),
                plan_id: b.plan_id.clone(),
                provider: b.provider_id.clone(),
                cost_per_hour: b.cost_per_hour.to_string(),
                cost_per_month: b.cost_per_month.to_string(),
            })
            .collect(),
        bought_count: count(up.buy.len()),
        unplaceable: up
            .unplaceable
            .iter()
            .take(STATUS_LIST_CAP)
            .map(|u| UnplaceableStatus {
                pod: u.pod.clone(),
                reason: u.reason.to_string(),
            })
            .collect(),
        unplaceable_count: count(up.unplaceable.len()),
        rejected: up
            .rejected
            .iter()
            .take(STATUS_LIST_CAP)
            .map(|r| RejectedStatus {
                offer_id: r.offer_id.clone(),
                plan_id: r.plan_id.clone(),
                reason: r.reason.to_string(),
            })
            .collect(),
        rejected_count: count(up.rejected.len()),
    }
}

/// How long an offer is backed off after its `failures`-th failure in a
/// row: `initial`, doubling, at most `max`.
pub fn backoff_delay(failures: u32, initial: Duration, max: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    initial.saturating_mul(1u32 << doublings).min(max)
}

/// Record a failed purchase of `offer`/`plan` at `now`.
pub fn record_failure(
    backoff: &mut Vec<BackoffStatus>,
    offer: &str,
    plan: &str,
    now: Timestamp,
    initial: Duration,
    max: Duration,
) {
    let entry = match backoff
        .iter_mut()
        .find(|b| b.offer_id == offer && b.plan_id == plan)
    {
        Some(e) => e,
        None => {
            backoff.push(BackoffStatus {
                offer_id: offer.to_string(),
                plan_id: plan.to_string(),
                until: String::new(),
                failures: 0,
            });
            let last = backoff.len() - 1;
            &mut backoff[last]
        }
    };
    entry.failures = entry.failures.saturating_add(1);
    let delay = backoff_delay(entry.failures, initial, max);
    let until = now
        .checked_add(jiff::SignedDuration::try_from(delay).unwrap_or(jiff::SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX);
    entry.until = rfc3339(until);
}

/// Forget backoffs that ended more than `reset` ago (the Cluster
/// Autoscaler's 3 h): the next failure starts again at the initial delay.
pub fn prune_backoff(backoff: &mut Vec<BackoffStatus>, now: Timestamp, reset: Duration) {
    let reset = jiff::SignedDuration::try_from(reset).unwrap_or(jiff::SignedDuration::MAX);
    backoff.retain(|b| {
        b.until
            .parse::<Timestamp>()
            .ok()
            .and_then(|until| until.checked_add(reset).ok())
            .is_some_and(|forget| forget > now)
    });
}

/// Why a status write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Another writer changed the MarketAutoscaler since it was read.
    #[error("the MarketAutoscaler changed since it was read (409)")]
    Conflict,
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

/// `PUT` `status` over `ma` at the resourceVersion `ma` was read at; the
/// object as now stored.
pub async fn write(
    api: &Api<MarketAutoscaler>,
    ma: &MarketAutoscaler,
    status: MarketAutoscalerStatus,
) -> Result<MarketAutoscaler, WriteError> {
    let mut obj = ma.clone();
    obj.status = Some(status);
    let name = ma.metadata.name.clone().unwrap_or_default();
    match api
        .replace_status(&name, &PostParams::default(), &obj)
        .await
    {
        Ok(written) => Ok(written),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(WriteError::Conflict),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn backoff_doubles_from_the_initial_delay_up_to_the_max_and_is_forgotten_after_reset() {
        let (initial, max) = (Duration::from_secs(300), Duration::from_secs(1800));
        assert_eq!(backoff_delay(1, initial, max), initial);
        assert_eq!(backoff_delay(2, initial, max), Duration::from_secs(600));
        assert_eq!(backoff_delay(3, initial, max), Duration::from_secs(1200));
        assert_eq!(backoff_delay(4, initial, max), max);
        assert_eq!(backoff_delay(99, initial, max), max);

        let now = t("2026-12-02T10:00:00Z");
        let mut b = Vec::new();
        record_failure(&mut b, "o", "p", now, initial, max);
        record_failure(&mut b, "o", "p", now, initial, max);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].failures, 2);
        assert_eq!(b[0].until, "2026-12-02T10:10:00Z");
        let reset = Duration::from_secs(3 * 3600);
        prune_backoff(&mut b, t("2026-12-02T13:09:59Z"), reset);
        assert_eq!(b.len(), 1);
        prune_backoff(&mut b, t("2026-12-02T13:10:00Z"), reset);
        assert!(b.is_empty());
    }

    #[test]
    fn a_round_that_only_ran_again_changes_nothing() {
        let before = MarketAutoscalerStatus {
            last_decision: Some(DecisionStatus {
                at: "2026-12-02T10:00:00Z".into(),
                summary: "nothing waits".into(),
                ..DecisionStatus::default()
            }),
            ..MarketAutoscalerStatus::default()
        };
        let mut after = before.clone();
        after.last_decision.as_mut().unwrap().at = "2026-12-02T10:00:10Z".into();
        assert!(!changed(&before, &after));
        after.purchases_made = 1;
        assert!(changed(&before, &after));
    }

    #[test]
    fn a_condition_moves_its_transition_time_only_when_its_status_changes() {
        let mut s = MarketAutoscalerStatus::default();
        set_condition(
            &mut s,
            READY,
            true,
            RUNNING,
            "ok",
            1,
            t("2026-12-02T10:00:00Z"),
        );
        set_condition(
            &mut s,
            READY,
            true,
            RUNNING,
            "still ok",
            2,
            t("2026-12-02T10:05:00Z"),
        );
        let c = condition(&s, READY).unwrap();
        assert_eq!(c.last_transition_time, "2026-12-02T10:00:00Z");
        assert_eq!(c.message, "still ok");
        set_condition(
            &mut s,
            READY,
            false,
            CATALOG_UNREACHABLE,
            "down",
            2,
            t("2026-12-02T10:06:00Z"),
        );
        let c = condition(&s, READY).unwrap();
        assert_eq!(c.last_transition_time, "2026-12-02T10:06:00Z");
        assert_eq!(s.conditions.len(), 1);
    }
}
