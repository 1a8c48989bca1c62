//! The work queue every modelled controller runs on, as controller-runtime
//! gives Liqo's: watch events become object keys, each key is reconciled
//! from a fresh read, and a failed reconcile is queued again after a short
//! backoff (controller-runtime requeues with rate limiting on error).

use std::future::Future;
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use kube::ResourceExt;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tracing::Instrument;

use crate::Error;

/// An object to reconcile: namespace ("" when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn of(obj: &DynamicObject) -> Key {
        Key {
            namespace: obj.namespace().unwrap_or_default(),
            name: obj.name_any(),
        }
    }
}

/// How long a failed reconcile waits before its next try.
const RETRY: Duration = Duration::from_millis(200);

/// Objects added, changed or deleted under `api`, with `selector`
/// (controller-runtime enqueues on every event kind).
pub fn touched(
    api: Api<DynamicObject>,
    selector: &str,
) -> BoxStream<'static, Result<DynamicObject, watcher::Error>> {
    watch(api, selector, None)
}

/// Held by a controller's watches until each has passed on its initial
/// list: a receiver's `recv` answers `None` once every clone is dropped.
pub type Syncing = tokio::sync::mpsc::Sender<()>;

/// [`touched`], dropping `syncing` once the initial list has been passed
/// on. A watch is read only when [`run`] asks for its next key, after the
/// previous reconcile, so by then every key the initial list mapped to has
/// been reconciled — controller-runtime's `Controller.Start` likewise
/// starts its workers only after `WaitForSync` on every source, so an
/// object made after the start is not also queued by a late initial list
/// of another kind (a Tenant's mapping to every slice).
pub fn touched_syncing(
    api: Api<DynamicObject>,
    selector: &str,
    syncing: Syncing,
) -> BoxStream<'static, Result<DynamicObject, watcher::Error>> {
    watch(api, selector, Some(syncing))
}

fn watch(
    api: Api<DynamicObject>,
    selector: &str,
    mut syncing: Option<Syncing>,
) -> BoxStream<'static, Result<DynamicObject, watcher::Error>> {
    let config = watcher::Config::default().labels(selector);
    watcher(api, config)
        .default_backoff()
        .inspect(move |event| {
            if let Ok(watcher::Event::InitDone) = event {
                syncing.take();
            }
        })
        .touched_objects()
        .boxed()
}

/// Keys of the objects in `objects`, watch errors logged (the watcher
/// retries them itself).
pub fn keys<F, I>(
    objects: BoxStream<'static, Result<DynamicObject, watcher::Error>>,
    map: F,
) -> BoxStream<'static, Key>
where
    F: Fn(DynamicObject) -> I + Send + 'static,
    I: IntoIterator<Item = Key>,
    I::IntoIter: Send + 'static,
{
    objects
        .filter_map(|event| async move {
            match event {
                Ok(obj) => Some(obj),
                Err(e) => {
                    tracing::warn!(error = %e, "watch failed; retrying");
                    None
                }
            }
        })
        .flat_map(move |obj| stream::iter(map(obj)))
        .boxed()
}

/// Keys `find` lists in `objects` for each object `related` yields (as
/// controller-runtime's `EnqueueRequestsFromMapFunc` on a watched object of
/// another kind); a watch error or a failed `find` yields none.
pub fn keys_via<F, Fut>(
    related: BoxStream<'static, Result<DynamicObject, watcher::Error>>,
    objects: Api<DynamicObject>,
    find: F,
) -> BoxStream<'static, Key>
where
    F: Fn(Api<DynamicObject>, DynamicObject) -> Fut + Send + 'static,
    Fut: Future<Output = Option<Vec<Key>>> + Send + 'static,
{
    related
        .filter_map(move |event| {
            let found = event.ok().map(|obj| find(objects.clone(), obj));
            async move { found?.await }
        })
        .flat_map(stream::iter)
        .boxed()
}

/// Reconcile every key `triggers` yields, one at a time, until the
/// triggers end; a failed key is tried again after `RETRY`.
pub async fn run<F, Fut>(name: &'static str, triggers: Vec<BoxStream<'static, Key>>, reconcile: F)
where
    F: Fn(Key) -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let (retry, retried) = tokio::sync::mpsc::unbounded_channel::<Key>();
    let mut all = stream::select_all(triggers);
    all.push(UnboundedReceiverStream::new(retried).boxed());
    let span = tracing::info_span!("liqo_model", controller = name);
    async move {
        while let Some(key) = all.next().await {
            if let Err(e) = reconcile(key.clone()).await {
                tracing::debug!(error = %e, ?key, "reconcile failed; queued again");
                let retry = retry.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(RETRY).await;
                    // The receiver is gone only when the controller stopped.
                    let _ = retry.send(key);
                });
            }
        }
    }
    .instrument(span)
    .await
}

/// controller-runtime's `CreateOrUpdate` (which Liqo's controllers call
/// through `pkg/utils/resource`): read the object, apply `mutate` to it (or
/// to a new one), then create it, or update it only if `mutate` changed it.
pub async fn create_or_update(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    namespace: &str,
    name: &str,
    mutate: impl FnOnce(&mut DynamicObject),
) -> Result<(), Error> {
    let existing = api.get_opt(name).await?;
    let mut obj = existing
        .clone()
        .unwrap_or_else(|| DynamicObject::new(name, resource).within(namespace));
    mutate(&mut obj);
    match existing {
        None => {
            api.create(&PostParams::default(), &obj).await?;
        }
        Some(old) if old != obj => {
            api.replace(name, &PostParams::default(), &obj).await?;
        }
        Some(_) => {}
    }
    Ok(())
}
