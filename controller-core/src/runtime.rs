//! The kube-rs plumbing the broker's controllers share (the class
//! controller, the orchestrator and the purchase controller): a watch that
//! fills a reflector cache, changes that arrive together taken as one, and
//! Kubernetes Events recorded off the reconcile path.

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::events::{Event, Recorder};
use kube::runtime::reflector::{reflector, store::Writer};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::retry;

/// A kind [`cached_watch`] can watch: what kube-rs's reflector asks of it,
/// named once so that callers generic over the kind need not repeat it.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// Watch `api` with `config` into the cache `writer` fills, backing off
/// after failures ([`retry::logged_watch`]: edge's backoff, a run of
/// failures logged once), yielding each object that changed (deleted ones
/// included), for the caller to turn into objects to reconcile.
pub fn cached_watch<K: Watched>(
    api: Api<K>,
    config: watcher::Config,
    writer: Writer<K>,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send {
    let what = format!("watch {}", K::kind(&()));
    retry::logged_watch(reflector(writer, watcher(api, config)), what).touched_objects()
}

/// Take every item `changes` has ready now, without waiting: a loop woken
/// by one change runs one pass for the changes that came with it.
pub fn take_ready<T>(changes: &mut (impl Stream<Item = T> + Unpin)) {
    while let Some(Some(_)) = changes.next().now_or_never() {}
}

/// An Event's note: `text`, cut to at most 1000 bytes on a character
/// boundary. The API server refuses notes over 1 kB (it counts bytes, not
/// characters), and a decision's explanation can be longer.
pub fn note(text: &str) -> String {
    const MAX: usize = 1000;
    let mut end = text.len().min(MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Record `event` on `reference` in the background, in the current span:
/// an Event is for people, so one that cannot be recorded is logged, never
/// retried, and never holds up a reconcile.
pub fn publish_event(recorder: &Recorder, event: Event, reference: ObjectReference) {
    let recorder = recorder.clone();
    tokio::spawn(
        async move {
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::debug!(%error, "cannot record an Event");
            }
        }
        .in_current_span(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_cut_at_1000_bytes_on_a_character_boundary() {
        assert_eq!(note("short"), "short");
        // "é" is two bytes: 500 of them fill the 1000 bytes exactly.
        assert_eq!(note(&"é".repeat(1500)), "é".repeat(500));
        // "€" is three bytes: 333 of them (999 bytes), never half of one.
        assert_eq!(note(&"€".repeat(1500)), "€".repeat(333));
        assert_eq!(note(&"a".repeat(1500)).len(), 1000);
    }
}
