//! Following a `Purchase` (`broker.liqo-broker.io/v1alpha1`, the
//! purchase-controller's kind) until it is Ready: a watch on the one
//! object, each change of its phase or of a condition printed as one line,
//! and a verdict — Ready (condition `Ready` `True`, as `kubectl wait
//! --for=condition=Ready` decides), failed (phase `Failed` or `Ended`, the
//! controller's terminal failures), or still going.
//!
//! The object is read as plain JSON ([`kube::api::DynamicObject`]): this
//! tool follows whatever version of the controller wrote it, and reads
//! only `status.phase` and `status.conditions` (`metav1.Condition`).
//! [`Tracker`] decides (pure); [`follow`] watches and prints.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use controller_core::bounded::{Bounds, Exceeded};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use serde_json::Value;
use tracing::Instrument;

use crate::exit::{Code, Failure};
use crate::output::escape;

/// The Purchase kind, as the purchase-controller's CRD declares it.
pub fn purchase_resource() -> ApiResource {
    ApiResource {
        group: "broker.liqo-broker.io".into(),
        version: "v1alpha1".into(),
        api_version: "broker.liqo-broker.io/v1alpha1".into(),
        kind: "Purchase".into(),
        plural: "purchases".into(),
    }
}

/// The bounds of every answer `purchase follow` reads from the API server:
/// controller-core's defaults (8 MiB per response or watch event, 30 s per
/// answer, a watch idle 320 s at most), far above what a Purchase takes.
pub fn bounds() -> Bounds {
    Bounds::default()
}

/// The size bound `error` reports, if it is one.
fn too_large(error: &watcher::Error) -> Option<&Exceeded> {
    Exceeded::find(error).filter(|e| {
        matches!(
            e,
            Exceeded::TooLarge { .. } | Exceeded::EventTooLarge { .. }
        )
    })
}

/// Where a followed Purchase stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Going,
    Ready,
    Failed(String),
}

/// What has been printed so far: the phase and each condition's
/// `(status, reason, message)`.
#[derive(Debug, Default)]
pub struct Tracker {
    phase: Option<String>,
    conditions: BTreeMap<String, (String, String, String)>,
}

impl Tracker {
    /// The lines to print for `status` (the object's `status`), and the
    /// verdict it gives.
    pub fn observe(&mut self, status: &Value) -> (Vec<String>, Verdict) {
        let mut lines = Vec::new();
        let phase = status["phase"].as_str().unwrap_or_default().to_string();
        if !phase.is_empty() && self.phase.as_deref() != Some(&phase) {
            lines.push(escape(&format!("phase {phase}")).into_owned());
            self.phase = Some(phase.clone());
        }
        let mut ready = false;
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        for condition in &conditions {
            let text = |key: &str| condition[key].as_str().unwrap_or_default().to_string();
            let kind = text("type");
            let now = (text("status"), text("reason"), text("message"));
            if kind == "Ready" && now.0 == "True" {
                ready = true;
            }
            if self.conditions.get(&kind) != Some(&now) {
                let (status, reason, message) = &now;
                let mut line = format!("{kind}={status}");
                if !reason.is_empty() {
                    line.push_str(&format!(" {reason}"));
                }
                if !message.is_empty() {
                    line.push_str(&format!(": {message}"));
                }
                // The API server's text, as whoever wrote the status
                // (a controller quoting a provider) put it (issue 41, F6).
                lines.push(escape(&line).into_owned());
                self.conditions.insert(kind, now);
            }
        }
        let verdict = if ready {
            Verdict::Ready
        } else if phase == "Failed" || phase == "Ended" {
            let why = self
                .conditions
                .get("Ready")
                .map(|(_, reason, message)| format!("{reason}: {message}"))
                .unwrap_or_default();
            Verdict::Failed(format!("phase {phase} {why}").trim_end().to_string())
        } else {
            Verdict::Going
        };
        (lines, verdict)
    }
}

/// Watch Purchase `name` through `api` until it is Ready (its last state
/// returned), printing each change to `out`; [`Code::PurchaseFailed`] if it
/// fails, [`Code::Timeout`] after `timeout`, [`Code::NotFound`] if there
/// is no such Purchase (or it is deleted meanwhile).
pub async fn follow(
    api: Api<DynamicObject>,
    name: &str,
    timeout: Duration,
    out: &mut impl Write,
) -> Result<Value, Failure> {
    let span = tracing::info_span!("follow_purchase", purchase = name);
    let watching = async {
        let mut tracker = Tracker::default();
        let mut seen = false;
        let mut stream = watcher::watch_object(api, name).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            let object = match event {
                Ok(Some(object)) => object,
                Ok(None) if seen => {
                    return Err(Failure::new(
                        Code::NotFound,
                        format!("Purchase {name} was deleted"),
                    ))
                }
                Ok(None) => {
                    return Err(Failure::new(
                        Code::NotFound,
                        format!("no Purchase {name} in this namespace"),
                    ))
                }
                // An answer too large is refused, not retried: the server
                // would send it again, and it is not a Purchase this
                // tool can follow (issue 41, B-19).
                Err(error) if too_large(&error).is_some() => {
                    let exceeded = too_large(&error).map(|e| e.to_string()).unwrap_or_default();
                    return Err(Failure::new(
                        Code::Error,
                        format!(
                            "the API server's answer about Purchase {name} is refused: {exceeded}"
                        ),
                    ));
                }
                // The watcher re-lists after the backoff; a lasting
                // failure shows as the timeout, with its cause logged.
                Err(error) => {
                    tracing::warn!(%error, "watching the Purchase failed; retrying");
                    continue;
                }
            };
            seen = true;
            let status = object.data.get("status").cloned().unwrap_or(Value::Null);
            let (lines, verdict) = tracker.observe(&status);
            for line in lines {
                writeln!(out, "{line}")
                    .and_then(|()| out.flush())
                    .map_err(|e| Failure::new(Code::Error, format!("cannot write: {e}")))?;
            }
            match verdict {
                Verdict::Going => {}
                Verdict::Ready => {
                    return serde_json::to_value(&object)
                        .map_err(|e| Failure::new(Code::Error, e.to_string()))
                }
                Verdict::Failed(why) => {
                    return Err(Failure::new(
                        Code::PurchaseFailed,
                        format!("Purchase {name} failed: {why}"),
                    ))
                }
            }
        }
        Err(Failure::new(Code::Error, "the watch ended"))
    };
    match tokio::time::timeout(timeout, watching.instrument(span)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failure::new(
            Code::Timeout,
            format!(
                "Purchase {name} was not Ready within {}",
                edge::duration::format(timeout)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cond(kind: &str, status: &str, reason: &str, message: &str) -> Value {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn each_change_is_one_line_and_ready_ends_it() {
        let mut t = Tracker::default();
        let first = json!({"phase": "Peering", "conditions": [
            cond("Purchased", "True", "ContractFound", "contract c1"),
            cond("Ready", "False", "WaitingForPeering", "peer first")]});
        let (lines, verdict) = t.observe(&first);
        assert_eq!(
            lines,
            [
                "phase Peering",
                "Purchased=True ContractFound: contract c1",
                "Ready=False WaitingForPeering: peer first"
            ]
        );
        assert_eq!(verdict, Verdict::Going);
        // Nothing changed: nothing printed.
        assert_eq!(t.observe(&first), (vec![], Verdict::Going));
        let done = json!({"phase": "Ready", "conditions": [
            cond("Purchased", "True", "ContractFound", "contract c1"),
            cond("Ready", "True", "Ready", "offloading")]});
        let (lines, verdict) = t.observe(&done);
        assert_eq!(lines, ["phase Ready", "Ready=True Ready: offloading"]);
        assert_eq!(verdict, Verdict::Ready);
    }

    #[test]
    fn condition_text_is_printed_escaped() {
        // B-17: a condition's message (a controller quoting a provider),
        // reason, type and the phase, each able to clear the screen.
        use crate::output::{assert_terminal_safe, HOSTILE};
        let mut t = Tracker::default();
        let (lines, verdict) = t.observe(&json!({"phase": HOSTILE, "conditions": [
            cond("Peered", "False", "ProviderUnreachable",
                 &format!("provider said: {HOSTILE}\rall good")),
            cond(HOSTILE, HOSTILE, HOSTILE, HOSTILE)]}));
        assert_eq!(verdict, Verdict::Going);
        assert_eq!(lines.len(), 3, "{lines:?}");
        for line in &lines {
            assert_terminal_safe(line);
            assert!(!line.contains('\n'), "{line:?}");
        }
        assert!(
            lines[1].starts_with("Peered=False ProviderUnreachable: provider said: a\\x1b[2J"),
            "{lines:?}"
        );
        // The failure message is escaped where it is printed (error_line).
        let (_, verdict) = t.observe(&json!({"phase": "Failed", "conditions": [
            cond("Ready", "False", HOSTILE, HOSTILE)]}));
        let Verdict::Failed(why) = verdict else {
            panic!("{verdict:?}")
        };
        assert_terminal_safe(&crate::output::error_line(&Failure::new(
            Code::PurchaseFailed,
            why,
        )));
    }

    #[test]
    fn only_a_size_bound_ends_the_follow() {
        // B-19: an answer too large, in the list or a watch event (kube
        // wraps the watch body's error in an io::Error), is refused; one
        // too slow is retried until --timeout like any other failure.
        let list =
            watcher::Error::InitialListFailed(kube::Error::Service(Box::new(Exceeded::TooLarge {
                limit: 8,
            })));
        assert_eq!(too_large(&list), Some(&Exceeded::TooLarge { limit: 8 }));
        let event = watcher::Error::WatchFailed(kube::Error::ReadEvents(std::io::Error::other(
            Exceeded::EventTooLarge { limit: 8 },
        )));
        assert!(too_large(&event).is_some());
        let slow = watcher::Error::InitialListFailed(kube::Error::Service(Box::new(
            Exceeded::TooSlow(Duration::from_secs(30)),
        )));
        assert_eq!(too_large(&slow), None);
    }

    #[test]
    fn failed_and_ended_phases_fail_with_the_reason() {
        let mut t = Tracker::default();
        let (_, verdict) = t.observe(&json!({"phase": "Failed", "conditions": [
            cond("Ready", "False", "ResourcesDenied", "the provider refused")]}));
        assert_eq!(
            verdict,
            Verdict::Failed("phase Failed ResourcesDenied: the provider refused".into())
        );
        let mut t = Tracker::default();
        assert!(matches!(
            t.observe(&json!({"phase": "Ended"})).1,
            Verdict::Failed(_)
        ));
        // No status yet: still going, nothing to print.
        assert_eq!(
            Tracker::default().observe(&Value::Null),
            (vec![], Verdict::Going)
        );
    }
}
