//! Kubernetes Events (events.k8s.io/v1, reportingController
//! `market-autoscaler`) with the Cluster Autoscaler's reason names, so
//! dashboards and habits built on them carry over: on pods
//! `TriggeredScaleUp` and `NotTriggerScaleUp`, on nodes `ScaleDown` and
//! `ScaleDownFailed`; on the MarketAutoscaler itself what it did with
//! contracts.
//!
//! The same Event (object, reason, note) is recorded at most once per
//! [`DEDUP`] (5 minutes, as the Cluster Autoscaler's recorder does), so a
//! pod that waits for an hour is told why once per 5 minutes, not once per
//! scan. The memory of what was recorded is bounded ([`MAX_REMEMBERED`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use controller_core::runtime;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;

/// The same Event is recorded at most once within this.
pub const DEDUP: Duration = Duration::from_secs(5 * 60);
/// Most Events remembered for deduplication; beyond it the oldest are
/// forgotten (then one may be recorded again early).
pub const MAX_REMEMBERED: usize = 10_000;

/// The controller's name in Events.
pub const REPORTING_CONTROLLER: &str = "market-autoscaler";

/// Pod: a purchase was made for it.
pub const TRIGGERED_SCALE_UP: &str = "TriggeredScaleUp";
/// Pod: nothing will be bought for it (the note says why: budget, limit, fit).
pub const NOT_TRIGGER_SCALE_UP: &str = "NotTriggerScaleUp";
/// Node: given back (its pods evicted, its Purchase deleted).
pub const SCALE_DOWN: &str = "ScaleDown";
/// Node: could not be given back (an eviction refused).
pub const SCALE_DOWN_FAILED: &str = "ScaleDownFailed";
/// MarketAutoscaler: a Purchase was created.
pub const PURCHASE_CREATED: &str = "PurchaseCreated";
/// MarketAutoscaler: a Purchase was not Ready by the deadline, or failed.
pub const PURCHASE_FAILED: &str = "PurchaseFailed";
/// MarketAutoscaler: a contract was extended, or left to expire.
pub const CONTRACT_EXTENDED: &str = "ContractExtended";
pub const CONTRACT_LEFT_TO_EXPIRE: &str = "ContractLeftToExpire";
/// MarketAutoscaler deleted: its Purchases stay (named in the note).
pub const PURCHASES_LEFT: &str = "PurchasesLeftInPlace";

type Key = (String, String, String, String);

/// What was recorded when, for deduplication.
#[derive(Debug, Default)]
pub struct Dedup {
    seen: HashMap<Key, Instant>,
}

impl Dedup {
    /// Whether an Event with `key` may be recorded `now` (and remember it
    /// if so).
    pub fn first(&mut self, key: Key, now: Instant) -> bool {
        if let Some(at) = self.seen.get(&key) {
            if now.saturating_duration_since(*at) < DEDUP {
                return false;
            }
        }
        if self.seen.len() >= MAX_REMEMBERED {
            self.seen
                .retain(|_, at| now.saturating_duration_since(*at) < DEDUP);
            if self.seen.len() >= MAX_REMEMBERED {
                if let Some(oldest) = self
                    .seen
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(k, _)| k.clone())
                {
                    self.seen.remove(&oldest);
                }
            }
        }
        self.seen.insert(key, now);
        true
    }
}

/// The Event recorder with its deduplication.
pub struct Events {
    client: Client,
    reporter: Reporter,
    dedup: Mutex<Dedup>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    /// Events recorded as `market-autoscaler`, replica `instance`.
    pub fn new(client: Client, instance: String) -> Self {
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.to_string(),
            instance: Some(instance),
        };
        Self {
            client,
            reporter,
            dedup: Mutex::new(Dedup::default()),
        }
    }

    /// Record (in the background) unless the same Event was recorded in
    /// the last [`DEDUP`]; whether it was sent.
    pub fn publish(
        &self,
        reference: ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: &str,
    ) -> bool {
        let note = runtime::note(note);
        let key = (
            format!(
                "{}/{}",
                reference.kind.as_deref().unwrap_or_default(),
                reference.namespace.as_deref().unwrap_or_default()
            ),
            reference.name.clone().unwrap_or_default(),
            reason.to_string(),
            note.clone(),
        );
        let first = self
            .dedup
            .lock()
            .map(|mut d| d.first(key, Instant::now()))
            .unwrap_or(true);
        if !first {
            return false;
        }
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        // A fresh recorder each time: kube's remembers Events by object and
        // reason only (not the note) for 6 minutes and patches a repeat's
        // series, keeping the old note. Ours decides what is a repeat, so
        // every Event it lets through is created, and the account needs no
        // `patch` on Events.
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        runtime::publish_event(&recorder, event, reference);
        true
    }
}

/// A reference to the core (`v1`) object `kind` `name` (in `namespace`).
pub fn core_ref(kind: &str, namespace: Option<&str>, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some(kind.into()),
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, note: &str) -> Key {
        (
            "Pod/ns".into(),
            name.into(),
            NOT_TRIGGER_SCALE_UP.into(),
            note.into(),
        )
    }

    #[test]
    fn the_same_event_is_recorded_once_per_five_minutes() {
        let mut d = Dedup::default();
        let t0 = Instant::now();
        assert!(d.first(key("p", "budget"), t0));
        assert!(!d.first(key("p", "budget"), t0 + Duration::from_secs(299)));
        // Another note or another pod is another Event.
        assert!(d.first(key("p", "limit"), t0 + Duration::from_secs(1)));
        assert!(d.first(key("q", "budget"), t0 + Duration::from_secs(1)));
        assert!(d.first(key("p", "budget"), t0 + DEDUP));
    }

    #[test]
    fn memory_is_bounded() {
        let mut d = Dedup::default();
        let t0 = Instant::now();
        for i in 0..MAX_REMEMBERED + 10 {
            assert!(d.first(key(&i.to_string(), "n"), t0));
        }
        assert!(d.seen.len() <= MAX_REMEMBERED);
    }
}
