//! The kube-rs plumbing the broker's controllers share (this crate's class
//! controller, the orchestrator and the purchase controller): a watch that
//! fills a reflector cache, and Kubernetes Events recorded off the
//! reconcile path.

use futures::Stream;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::events::{Event, Recorder};
use kube::runtime::reflector::{reflector, store::Writer};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;
use tracing::Instrument;

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

/// Watch `api` with `config` into the cache `writer` fills, with the
/// watcher's default back-off, yielding each object that changed (deleted
/// ones included), for the caller to turn into objects to reconcile.
pub fn cached_watch<K: Watched>(
    api: Api<K>,
    config: watcher::Config,
    writer: Writer<K>,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send {
    reflector(writer, watcher(api, config))
        .default_backoff()
        .touched_objects()
}

/// An Event's note: `text`, cut to its first 1000 characters (the API
/// server refuses notes over 1 kB, and a decision's explanation can be
/// longer).
pub fn note(text: &str) -> String {
    text.chars().take(1000).collect()
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
    fn a_note_is_cut_at_1000_characters() {
        assert_eq!(note("short"), "short");
        let long = "é".repeat(1500);
        assert_eq!(note(&long).chars().count(), 1000);
    }
}
