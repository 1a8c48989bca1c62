//! The Purchases this controller made, watched: a change of one's
//! `status` (purchase-controller's progress: peered, offloaded, Ready,
//! failed, or gone once unpeered) wakes the pass at once, where it used to
//! look again only after `--retry` (5 s by default).
//!
//! Only a status change (or a deletion) wakes: the controller's own
//! applies change the spec and would otherwise wake the pass that made
//! them. The watch is on the controller's own namespace only (its Role
//! there grants `list` and `watch` on Purchases); `--retry` stays the pace
//! while the watch is down, so a lost watch delays, never stalls.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// What a change of a Purchase means for the pass.
#[derive(Debug, Default)]
pub struct Statuses {
    /// Per Purchase name, the last status seen.
    seen: HashMap<String, Option<Value>>,
}

impl Statuses {
    /// Whether this event changes what the pass would find: a status that
    /// differs from the last seen, or a Purchase gone. A (re)list's
    /// objects are remembered without waking: the pass has read them.
    pub fn wakes(&mut self, event: &Event<DynamicObject>) -> bool {
        match event {
            Event::Apply(o) => self.changed(o),
            Event::Delete(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                self.seen.remove(&name);
                true
            }
            Event::Init => {
                self.seen.clear();
                false
            }
            Event::InitApply(o) => {
                self.changed(o);
                false
            }
            Event::InitDone => false,
        }
    }

    fn changed(&mut self, o: &DynamicObject) -> bool {
        let name = o.metadata.name.clone().unwrap_or_default();
        let status = o.data.get("status").cloned();
        match self.seen.insert(name, status.clone()) {
            Some(before) => before != status,
            // A Purchase first seen after the initial list is one this
            // controller just applied: no status of purchase-controller's
            // yet, unless it already wrote one.
            None => status.is_some(),
        }
    }
}

/// Watch `purchases` until `stop`, waking `wake` on each status change.
pub async fn run(purchases: Api<DynamicObject>, wake: Arc<Notify>, stop: CancellationToken) {
    let span = tracing::info_span!("purchase_watch");
    async move {
        let mut statuses = Statuses::default();
        let events = watcher::watcher(purchases, watcher::Config::default()).default_backoff();
        futures::pin_mut!(events);
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = events.next() => event,
            };
            match event {
                None => return,
                Some(Ok(event)) => {
                    if statuses.wakes(&event) {
                        wake.notify_one();
                    }
                }
                // The backoff retries; the pass keeps its `--retry` pace
                // meanwhile.
                Some(Err(e)) => tracing::debug!(error = %e, "watching the Purchases"),
            }
        }
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn purchase(name: &str, status: Option<Value>) -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "broker.liqo-broker.io/v1alpha1",
            "kind": "Purchase",
            "metadata": {"name": name, "namespace": "liqo"},
            "spec": {"offerId": "o"},
        }))
        .expect("a Purchase");
        if let Some(s) = status {
            o.data["status"] = s;
        }
        o
    }

    #[test]
    fn only_a_status_change_or_a_deletion_wakes() {
        let mut s = Statuses::default();
        assert!(!s.wakes(&Event::Init));
        assert!(!s.wakes(&Event::InitApply(purchase(
            "a",
            Some(json!({"phase": "Peering"}))
        ))));
        assert!(!s.wakes(&Event::InitDone));
        // Applied by the controller: no status yet.
        assert!(!s.wakes(&Event::Apply(purchase("b", None))));
        // The same status again (a spec change): nothing to do.
        assert!(!s.wakes(&Event::Apply(purchase(
            "a",
            Some(json!({"phase": "Peering"}))
        ))));
        // purchase-controller's progress.
        assert!(s.wakes(&Event::Apply(purchase(
            "a",
            Some(json!({"phase": "Ready"}))
        ))));
        assert!(s.wakes(&Event::Apply(purchase(
            "b",
            Some(json!({"phase": "Peering"}))
        ))));
        assert!(s.wakes(&Event::Delete(purchase("a", None))));
        // First seen with a status already written.
        assert!(s.wakes(&Event::Apply(purchase(
            "c",
            Some(json!({"phase": "Ready"}))
        ))));
    }
}
