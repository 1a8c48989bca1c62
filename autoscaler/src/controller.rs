//! The controller: kube-rs reflectors for the MarketAutoscalers, pods,
//! nodes, namespaces, PodDisruptionBudgets and the autoscalers' Purchases
//! (by label), the catalogs' feeds, and an [`applier`] that runs one short
//! round ([`reconcile`]) per MarketAutoscaler at a time.
//!
//! An autoscaler's round runs when it changes, when a pod, PDB or
//! namespace it serves changes, when one of its Purchases or any node
//! changes, when its catalog's offers change, when its contracts change on
//! the catalog's contract stream, and every `--scan-interval`.
//! A round:
//!
//! 1. reads the spec (`InvalidSpec`), the catalog token
//!    (`CredentialsMissing`), the offers and the contracts
//!    (`CatalogUnreachable`, `PricingUnknown`): any of them missing, and
//!    nothing is bought or given back — the status keeps its last state
//!    with `Ready=False` saying why;
//! 2. settles the purchases in flight ([`crate::act`]): Ready ones leave
//!    `status.inFlight`; failed ones, and ones not Ready within
//!    `--purchase-deadline`, are deleted and their offer backed off;
//! 3. recreates the waiting pods Liqo's pod webhook never saw, once a
//!    bought node is Ready ([`controller_core::pods::stale`]);
//! 4. waits for the batch of new waiting pods to settle (`--batch-idle`
//!    since the last new one, at most `--batch-max` since the first), then
//!    decides ([`crate::decide::scale_up`]) and buys, the budget re-checked
//!    against fresh contracts right before each purchase;
//! 5. gives back what [`crate::scale_down`] says, and extends contracts
//!    about to expire that are still in use;
//! 6. writes the status if anything but the round's time changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use controller_core::retry;
use controller_core::runtime;
use futures::{stream, Stream, StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use kube::runtime::controller::{applier, Action, Config as ApplierConfig};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use purchase_controller::model::Purchase;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::context::{Clients, Context, ReconcileError, Settings, Stores};
use crate::events::Events;
use crate::metrics::Metrics;
use crate::model::{MarketAutoscaler, PURCHASE_LABEL};
use crate::observe_catalog::Catalogs;
use crate::round;

/// `ma`'s served namespaces contain `ns`.
fn serves(ma: &MarketAutoscaler, ns: Option<&str>) -> bool {
    ns.is_some_and(|ns| ma.spec.pods.namespaces.iter().any(|n| n == ns))
}

/// The autoscalers serving namespace `ns`.
fn serving(store: &Store<MarketAutoscaler>, ns: Option<&str>) -> Vec<ObjectRef<MarketAutoscaler>> {
    store
        .state()
        .iter()
        .filter(|ma| serves(ma, ns))
        .map(|ma| ObjectRef::from_obj(&**ma))
        .collect()
}

fn all(store: &Store<MarketAutoscaler>) -> Vec<ObjectRef<MarketAutoscaler>> {
    store
        .state()
        .iter()
        .map(|ma| ObjectRef::from_obj(&**ma))
        .collect()
}

/// A watch of `api` into `writer`, each change turned into the
/// autoscalers to run (`to`).
fn triggers<K: runtime::Watched>(
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    to: impl Fn(&K) -> Vec<ObjectRef<MarketAutoscaler>> + Send + 'static,
) -> impl Stream<Item = Result<ObjectRef<MarketAutoscaler>, watcher::Error>> + Send {
    runtime::cached_watch(api, config, writer)
        .map_ok(move |o| stream::iter(to(&o).into_iter().map(Ok)))
        .try_flatten()
}

/// Run the controller until `shutdown` is cancelled.
pub async fn run(
    clients: Clients,
    settings: Settings,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    let Clients {
        api: client,
        evictions,
    } = clients;
    let (autoscalers, ma_writer) = reflector::store::<MarketAutoscaler>();
    let (pods, pod_writer) = reflector::store::<Pod>();
    let (nodes, node_writer) = reflector::store::<Node>();
    let (purchases, purchase_writer) = reflector::store::<Purchase>();
    let (pdbs, pdb_writer) = reflector::store::<PodDisruptionBudget>();
    let (namespaces, ns_writer) = reflector::store::<Namespace>();

    let catalogs = match Catalogs::new(
        metrics.clone(),
        settings.catalog_timeout,
        // While the contract stream is unavailable, the contracts are
        // polled as often as a round read them before the stream.
        settings.scan_interval,
        shutdown.child_token(),
    ) {
        Ok(c) => c,
        Err(error) => {
            tracing::error!(%error, "cannot build the catalog client");
            return;
        }
    };
    let (catalogs, notices) = catalogs;
    let events = Events::new(client.clone(), settings.instance.clone());

    let ctx = Arc::new(Context {
        client: client.clone(),
        evictions,
        settings,
        metrics: metrics.clone(),
        events,
        catalogs,
        stores: Stores {
            autoscalers: autoscalers.clone(),
            pods: pods.clone(),
            nodes: nodes.clone(),
            purchases: purchases.clone(),
            pdbs: pdbs.clone(),
            namespaces: namespaces.clone(),
        },
        batches: Mutex::new(HashMap::new()),
        unneeded: Mutex::new(HashMap::new()),
    });

    let own = {
        let ctx = ctx.clone();
        retry::logged_watch(
            reflector::reflector(
                ma_writer,
                watcher(
                    Api::<MarketAutoscaler>::all(client.clone()),
                    watcher::Config::default(),
                ),
            ),
            "watch MarketAutoscaler",
        )
        .filter_map(move |event| {
            let ctx = ctx.clone();
            async move {
                match event {
                    Ok(watcher::Event::Apply(ma) | watcher::Event::InitApply(ma)) => {
                        Some(Ok(ObjectRef::from_obj(&ma)))
                    }
                    Ok(watcher::Event::Delete(ma)) => {
                        gone(&ctx, &ma);
                        None
                    }
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                }
            }
        })
    };
    let store = autoscalers.clone();
    let pod_events = triggers(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        pod_writer,
        move |p: &Pod| serving(&store, p.metadata.namespace.as_deref()),
    );
    let store = autoscalers.clone();
    let pdb_events = triggers(
        Api::<PodDisruptionBudget>::all(client.clone()),
        watcher::Config::default(),
        pdb_writer,
        move |p: &PodDisruptionBudget| serving(&store, p.metadata.namespace.as_deref()),
    );
    let store = autoscalers.clone();
    let ns_events = triggers(
        Api::<Namespace>::all(client.clone()),
        watcher::Config::default(),
        ns_writer,
        move |n: &Namespace| serving(&store, n.metadata.name.as_deref()),
    );
    let store = autoscalers.clone();
    let node_events = triggers(
        Api::<Node>::all(client.clone()),
        watcher::Config::default(),
        node_writer,
        move |_: &Node| all(&store),
    );
    let purchase_events = triggers(
        Api::<Purchase>::all(client.clone()),
        watcher::Config::default().labels(PURCHASE_LABEL),
        purchase_writer,
        |p: &Purchase| {
            let name = p.labels().get(PURCHASE_LABEL).cloned().unwrap_or_default();
            vec![ObjectRef::new(&name).within(p.metadata.namespace.as_deref().unwrap_or_default())]
        },
    );
    let from_catalog = catalog_triggers(notices, autoscalers.clone());

    let queue = stream::select_all([
        own.boxed(),
        pod_events.boxed(),
        pdb_events.boxed(),
        ns_events.boxed(),
        node_events.boxed(),
        purchase_events.boxed(),
        from_catalog.map(Ok).boxed(),
    ]);

    let stores = ctx.stores.clone();
    let ready_metrics = metrics.clone();
    let readiness = tokio::spawn(async move {
        let ok = stores.autoscalers.wait_until_ready().await.is_ok()
            && stores.purchases.wait_until_ready().await.is_ok()
            && stores.pods.wait_until_ready().await.is_ok()
            && stores.nodes.wait_until_ready().await.is_ok();
        if ok {
            ready_metrics.reconcile().set_reached_api();
        }
    });

    let span = tracing::info_span!("market_autoscaler");
    async move {
        tracing::info!("controller started");
        applier(
            |ma, ctx: Arc<Context>| Box::pin(reconcile(ma, ctx)),
            error_policy,
            ctx.clone(),
            autoscalers,
            retry::until_cancelled(queue, shutdown.clone()),
            ApplierConfig::default(),
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "round failed");
            }
        })
        .await;
        readiness.abort();
        tracing::info!("controller stopped");
    }
    .instrument(span)
    .await;
}

/// Every change of a catalog's offers as the autoscalers buying from it.
fn catalog_triggers(
    notices: mpsc::Receiver<String>,
    store: Store<MarketAutoscaler>,
) -> impl Stream<Item = ObjectRef<MarketAutoscaler>> + Send {
    stream::unfold(notices, |mut rx| async move {
        let url = rx.recv().await?;
        Some((url, rx))
    })
    .flat_map(move |url| {
        let refs: Vec<ObjectRef<MarketAutoscaler>> = store
            .state()
            .iter()
            .filter(|ma| ma.spec.catalog_url == url)
            .map(|ma| ObjectRef::from_obj(&**ma))
            .collect();
        stream::iter(refs)
    })
}

/// A MarketAutoscaler was deleted: its Purchases stay (an Event names
/// them); its metrics and sessions go.
fn gone(ctx: &Context, ma: &MarketAutoscaler) {
    let key = crate::observe::key_of(&ma.metadata);
    ctx.metrics.set_autoscaler(&key, None);
    ctx.metrics.set_catalog_unreachable(&key, None);
    ctx.catalogs.forget(&key);
    ctx.batches
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&key);
    let left: Vec<String> = ctx
        .stores
        .purchases
        .state()
        .iter()
        .filter(|p| crate::observe::is_mine(ma, p))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    if !left.is_empty() {
        let note = format!(
            "deleted; its Purchases stay, and their contracts run until deleted or expired: {}",
            left.join(", ")
        );
        tracing::info!(autoscaler = %key, purchases = ?left, "autoscaler deleted; its Purchases are left in place");
        ctx.events.publish(
            ma.object_ref(&()),
            true,
            crate::events::PURCHASES_LEFT,
            "Delete",
            &note,
        );
    }
}

fn error_policy(ma: Arc<MarketAutoscaler>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    tracing::warn!(autoscaler = %crate::observe::key_of(&ma.metadata), %error, "round failed; retrying");
    ctx.metrics.count_error(match error {
        ReconcileError::Status(crate::status::WriteError::Conflict) => "conflict",
        _ => "kubernetes",
    });
    Action::requeue(ctx.settings.retry)
}

async fn reconcile(ma: Arc<MarketAutoscaler>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let key = crate::observe::key_of(&ma.metadata);
    let span = tracing::info_span!("round", autoscaler = %key);
    async move {
        let _ = ctx.stores.pods.wait_until_ready().await;
        let _ = ctx.stores.purchases.wait_until_ready().await;
        let _ = ctx.stores.nodes.wait_until_ready().await;
        let result = round::run(&ctx, &ma, Timestamp::now()).await;
        ctx.metrics.observe_reconcile(started.elapsed());
        result
    }
    .instrument(span)
    .await
}
