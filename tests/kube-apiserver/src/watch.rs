//! Watches: `GET …?watch=true&resourceVersion=N` streams newline-delimited
//! `{"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": …}` events
//! newer than N, then live ones, until `timeoutSeconds` (without N, or with
//! `0`, the current objects first, as ADDED; with `sendInitialEvents=true`
//! the same, closed by a BOOKMARK annotated
//! `k8s.io/initial-events-end: "true"`). Under a selector, an object that
//! starts matching arrives as ADDED, one that stops matching as DELETED
//! (carrying its new state), one that never matches not at all. After a
//! compaction a watch from an older resourceVersion gets what the real
//! server sends: HTTP 200, one `ERROR` event holding a 410 `Expired`
//! Status, end of stream. With `allowWatchBookmarks=true` a BOOKMARK
//! follows the backlog. Watches can be held before they start and ended
//! ([`crate::KubeApiServer::hold_watches`],
//! [`crate::KubeApiServer::end_watches`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use crate::audit::SeenRequest;
use crate::crd::{GroupResource, ResourceDef};
use crate::selector::Selector;
use crate::shared::{error_response, Shared};
use crate::status::ApiError;
use crate::store::Change;

/// What a watcher under `selector` is told of `change`, if anything: the
/// event type is decided by whether the object matched before and after.
pub fn event_for(change: &Change, selector: &Selector) -> Option<&'static str> {
    let before = change
        .previous
        .as_ref()
        .is_some_and(|o| selector.matches(o));
    let after = !change.deleted && selector.matches(&change.object);
    match (before, after) {
        (false, true) => Some("ADDED"),
        (true, true) => Some("MODIFIED"),
        (true, false) => Some("DELETED"),
        (false, false) => None,
    }
}

fn line(event: &str, object: &Value) -> Result<Bytes, Infallible> {
    let line = json!({ "type": event, "object": object });
    Ok(Bytes::from(format!("{line}\n")))
}

/// Decrements the waiting-watch counter however the wait ends (the client
/// may hang up while held).
struct Waiting<'a> {
    shared: &'a Shared,
    gr: GroupResource,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut world = self.shared.world();
        let counters = world.counters(&self.gr);
        counters.waiting = counters.waiting.saturating_sub(1);
    }
}

pub async fn watch(
    shared: Shared,
    def: &ResourceDef,
    version: &str,
    query: &HashMap<String, String>,
    seen: &SeenRequest,
    selector: Selector,
) -> Response {
    let gr = def.group_resource();
    let since: Option<u64> = match seen.resource_version.as_deref() {
        None | Some("0") => None,
        Some(v) => match v.parse() {
            Ok(v) => Some(v),
            Err(_) => {
                return error_response(&ApiError::bad_request(format!(
                    "invalid resource version: {v}"
                )));
            }
        },
    };
    let timeout: u64 = query
        .get("timeoutSeconds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1800);
    let bookmarks = query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let initial_events = query.get("sendInitialEvents").map(String::as_str) == Some("true");
    shared.world().counters(&gr).watches += 1;
    {
        let mut hold = shared.hold.subscribe();
        if *hold.borrow_and_update() {
            shared.world().counters(&gr).waiting += 1;
            let _waiting = Waiting {
                shared: &shared,
                gr: gr.clone(),
            };
            let _ = hold.wait_for(|held| !*held).await;
        }
    }
    let api_version = def.api_version(version);
    let versioned = move |o: &Value| {
        let mut o = o.clone();
        o["apiVersion"] = json!(api_version);
        o
    };
    // Subscribe before reading the world, so nothing falls in between.
    let live = shared.world().changes.subscribe();
    let mut ended = shared.epoch.subscribe();
    ended.borrow_and_update();
    let (first, last_sent) = {
        let mut world = shared.world();
        let current = world.rv;
        match since {
            Some(since) if since < world.compacted && !initial_events => {
                world.counters(&gr).gone += 1;
                let message = format!("too old resource version: {since} ({})", world.compacted);
                let error = line("ERROR", &ApiError::gone(message).to_status());
                let body = Body::from_stream(futures::stream::iter([error]));
                return ok_stream(body);
            }
            Some(since) if !initial_events => {
                let backlog: Vec<Result<Bytes, Infallible>> = world
                    .history
                    .iter()
                    .filter(|c| c.gr == gr && c.rv > since)
                    .filter_map(|c| event_for(c, &selector).map(|e| line(e, &versioned(&c.object))))
                    .collect();
                (backlog, current.max(since))
            }
            _ => {
                let present: Vec<Result<Bytes, Infallible>> = world
                    .objects
                    .get(&gr)
                    .into_iter()
                    .flat_map(|o| o.values())
                    .filter(|o| selector.matches(o))
                    .map(|o| line("ADDED", &versioned(o)))
                    .collect();
                (present, current)
            }
        }
    };
    let mut first = first;
    if bookmarks || initial_events {
        let mut bookmark = json!({
            "apiVersion": def.api_version(version),
            "kind": def.kind,
            "metadata": { "resourceVersion": last_sent.to_string() }
        });
        if initial_events {
            bookmark["metadata"]["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        first.push(line("BOOKMARK", &bookmark));
    }
    // A watcher that fell behind the broadcast would miss events: end its
    // stream instead, so it re-watches from what it has seen.
    let live = tokio_stream::wrappers::BroadcastStream::new(live)
        .take_while(|c| std::future::ready(!matches!(c, Err(BroadcastStreamRecvError::Lagged(_)))))
        .filter_map(move |c| {
            let item = match c {
                Ok(c) if c.gr == gr && c.rv > last_sent => {
                    event_for(&c, &selector).map(|e| line(e, &versioned(&c.object)))
                }
                _ => None,
            };
            std::future::ready(item)
        });
    let stop = async move {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(timeout)) => {}
            _ = ended.changed() => {}
        }
    };
    let stream = futures::stream::iter(first).chain(live).take_until(stop);
    ok_stream(Body::from_stream(stream))
}

fn ok_stream(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
