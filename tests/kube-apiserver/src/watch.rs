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
//! Status, end of stream; a watch from a resourceVersion the server has not
//! reached waits a while for it, then gets the same kind of answer holding
//! the 504 "Too large resource version" Status. With
//! `allowWatchBookmarks=true` a BOOKMARK carrying the resourceVersion the
//! stream has got to is sent every `bookmark_interval` (60 s by default,
//! about what a real server's watch cache does;
//! [`crate::KubeApiServer::set_bookmark_interval`]) — not at the start, so
//! a client whose watch sees no event for a while really does fall behind
//! a compaction, as against a real server. Watches can be held before they
//! start, ended, and cut mid-stream ([`crate::KubeApiServer::hold_watches`],
//! [`crate::KubeApiServer::end_watches`],
//! [`crate::KubeApiServer::reset_watches`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio_stream::wrappers::ReceiverStream;

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

fn line(event: &str, object: &Value) -> Bytes {
    let line = json!({ "type": event, "object": object });
    Bytes::from(format!("{line}\n"))
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
    if let Some(since) = since.filter(|_| !initial_events) {
        // As the real watch cache: once past authentication and a parsed
        // resourceVersion, errors are an ERROR event in a 200 stream.
        if let Err(too_large) = shared.wait_fresh(since).await {
            return error_stream(&too_large);
        }
    }
    let api_version = def.api_version(version);
    let versioned = move |o: &Value| {
        let mut o = o.clone();
        o["apiVersion"] = json!(api_version);
        o
    };
    // Subscribe before reading the world, so nothing falls in between.
    let mut live = shared.world().changes.subscribe();
    let mut ended = shared.epoch.subscribe();
    ended.borrow_and_update();
    let mut reset = shared.reset.subscribe();
    reset.borrow_and_update();
    let (first, last_sent, interval) = {
        let mut world = shared.world();
        let current = world.rv;
        let interval = world.bookmark_interval;
        match since {
            Some(since) if since < world.compacted && !initial_events => {
                world.counters(&gr).gone += 1;
                let message = format!("too old resource version: {since} ({})", world.compacted);
                return error_stream(&ApiError::gone(message));
            }
            Some(since) if !initial_events => {
                let backlog: Vec<Bytes> = world
                    .history
                    .iter()
                    .filter(|c| c.gr == gr && c.rv > since)
                    .filter_map(|c| event_for(c, &selector).map(|e| line(e, &versioned(&c.object))))
                    .collect();
                (backlog, current.max(since), interval)
            }
            _ => {
                let present: Vec<Bytes> = world
                    .objects
                    .get(&gr)
                    .into_iter()
                    .flat_map(|o| o.values())
                    .filter(|o| selector.matches(o))
                    .map(|o| line("ADDED", &versioned(o)))
                    .collect();
                (present, current, interval)
            }
        }
    };
    let bookmark = {
        let api_version = def.api_version(version);
        let kind = def.kind.clone();
        move |rv: u64, initial_end: bool| {
            let mut bookmark = json!({
                "apiVersion": api_version,
                "kind": kind,
                "metadata": { "resourceVersion": rv.to_string() }
            });
            if initial_end {
                bookmark["metadata"]["annotations"] =
                    json!({ "k8s.io/initial-events-end": "true" });
            }
            line("BOOKMARK", &bookmark)
        }
    };
    let mut first = first;
    if initial_events {
        first.push(bookmark(last_sent, true));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let gr = gr.clone();
    tokio::spawn(async move {
        for event in first {
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(Duration::from_secs(timeout));
        tokio::pin!(deadline);
        let start = tokio::time::Instant::now() + interval;
        let mut ticks = tokio::time::interval_at(start, interval.max(Duration::from_millis(1)));
        // The newest change this stream has been through, whatever its
        // resource: every later event is newer, so a BOOKMARK may say it.
        let mut progress = last_sent;
        loop {
            let event = tokio::select! {
                _ = &mut deadline => return,
                _ = ended.changed() => return,
                _ = reset.changed() => {
                    let cut = std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "watch reset by kube-test-server",
                    );
                    let _ = tx.send(Err(cut)).await;
                    return;
                }
                _ = ticks.tick(), if bookmarks => {
                    shared.world().counters(&gr).bookmarks += 1;
                    bookmark(progress, false)
                }
                change = live.recv() => match change {
                    Ok(c) => {
                        progress = progress.max(c.rv);
                        // The resource first: most changes are of others,
                        // and a selector looks into both objects.
                        if c.gr != gr || c.rv <= last_sent {
                            continue;
                        }
                        match event_for(&c, &selector) {
                            Some(e) => line(e, &versioned(&c.object)),
                            None => continue,
                        }
                    }
                    // A watcher that fell behind the broadcast would miss
                    // events: end its stream instead, so it re-watches from
                    // what it has seen.
                    Err(_) => return,
                },
            };
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
    });
    ok_stream(Body::from_stream(ReceiverStream::new(rx)))
}

/// A 200 stream of one `ERROR` event holding `error`'s Status.
fn error_stream(error: &ApiError) -> Response {
    let event: Result<Bytes, Infallible> = Ok(line("ERROR", &error.to_status()));
    ok_stream(Body::from_stream(futures::stream::iter([event])))
}

fn ok_stream(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
