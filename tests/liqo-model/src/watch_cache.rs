//! A cache of one kind filled by a watch, as the cached client of
//! controller-runtime's manager gives Liqo's webhooks and controllers: hooks
//! answer synchronously from it, the way Liqo's webhooks read through the
//! manager's informers.

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, store::Writer, Store};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use kube::Client;
use tokio::task::JoinHandle;

/// The cache of every `resource` `client` may watch, and the task filling it
/// (stopped by aborting it); `owner` names it in the logs.
pub fn start(
    client: Client,
    resource: ApiResource,
    owner: &'static str,
) -> (Store<DynamicObject>, JoinHandle<()>) {
    let writer = Writer::new(resource.clone());
    let store = writer.as_reader();
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .touched_objects();
    let span = tracing::info_span!("liqo_model", controller = owner, kind = %resource.kind);
    let task = tokio::spawn(tracing::Instrument::instrument(
        stream.for_each(|event| async move {
            if let Err(e) = event {
                tracing::warn!(error = %e, "watch failed; retrying");
            }
        }),
        span,
    ));
    (store, task)
}

/// The cached object `name` in `namespace` ("" when cluster-scoped).
pub fn get(store: &Store<DynamicObject>, namespace: &str, name: &str) -> Option<DynamicObject> {
    store
        .state()
        .iter()
        .find(|o| {
            o.metadata.name.as_deref() == Some(name)
                && o.metadata.namespace.as_deref().unwrap_or_default() == namespace
        })
        .map(|o| (**o).clone())
}
