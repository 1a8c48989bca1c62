//! The controller: kube-rs reflectors for the offloaded namespaces, their
//! pods, ResourceQuotas and NamespaceOffloadings, and an [`applier`] that
//! reconciles one namespace at a time.
//!
//! A namespace is reconciled when it, a pod or quota in it, or its
//! NamespaceOffloading changes; when the catalog's offers change (every
//! namespace); when a cheaper set's hold time ends; and every `resync`.
//! A reconcile builds the namespace's [`View`], decides
//! ([`View::decide`]), and writes the NamespaceOffloading only if the
//! selection, the pending cheaper set or the explanation's presence
//! changed — with the `resourceVersion` it read, so a `409 Conflict` is
//! answered by re-reading the object and deciding again on top of it.
//! A write that changes the providers is recorded as an Event on the
//! NamespaceOffloading (`Placed`, `Moved`); a namespace no provider
//! qualifies for gets a `NoProviderQualifies` warning and keeps what it has.
//!
//! Once Liqo labels a placed namespace for its pod webhook, the pods
//! created there before the placement ([`stale_pods`]) are deleted for
//! their controllers to recreate them through the webhook (bare pods get a
//! `MustBeRecreated` warning on the pod instead): Liqo's webhook acts only
//! at creation, so nothing else would ever offload them.
//!
//! Until the catalog's feed has delivered its first snapshot nothing is
//! decided, and when the feed drops the last offers stay: selections are
//! never cleared because the catalog is unreachable.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use controller_core::{retry, runtime};
use futures::{stream, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Pod, ResourceQuota};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::controller::{applier, Action, Config as ApplierConfig};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::decision::{Decision, Prepared, Rule};
use crate::feed::Snapshot;
use crate::metrics::Metrics;
use crate::offloaded::Offloaded;
use crate::offloading::NamespaceOffloading;
use crate::policy::Policy;
use crate::recorders::Recorders;
use crate::view::{consumer_of, View, ViewError, NAMESPACE_SELECTOR};
use controller_core::liqo::OFFLOADING_NAME;
use controller_core::pods::stale as stale_pods;

/// Writes of one namespace tried before the reconcile gives up and is
/// retried later (each 409 re-reads the object first).
const WRITE_ATTEMPTS: u32 = 5;

/// What the controller is told to do.
#[derive(Debug, Clone)]
pub struct Settings {
    pub policy: Arc<Policy>,
    /// Decide every namespace again this often.
    pub resync: Duration,
    /// Wait this long before retrying a failed reconcile.
    pub retry: Duration,
    /// Namespaces reconciled at once: unbounded, a change of the offers
    /// put every namespace's requests in flight together, and the CPU spent
    /// polling them grew much faster than the namespaces (docs/benchmarks.md,
    /// the orchestrator at scale).
    pub concurrency: u16,
    /// Names the controller and this replica in Events.
    pub reporter: Reporter,
}

/// Why a reconcile failed (it is retried after `retry`).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    View(#[from] ViewError),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(
        "NamespaceOffloading of {namespace} still conflicting after {WRITE_ATTEMPTS} attempts"
    )]
    Conflicts { namespace: String },
}

struct Shared {
    client: Client,
    settings: Settings,
    offers: watch::Receiver<Arc<Snapshot>>,
    pods: Store<Pod>,
    quotas: Store<ResourceQuota>,
    offloadings: Store<NamespaceOffloading>,
    metrics: Metrics,
    recorders: Recorders,
    /// Bare pods already told they must be recreated (by UID), so each is
    /// told once.
    announced: Mutex<HashSet<String>>,
    /// The offloaded namespaces in `namespaces`, by name (the gauge).
    offloaded: Arc<Mutex<Offloaded>>,
    /// The offers of the last snapshot decided on, made ready once for
    /// all namespaces.
    prepared: Mutex<Option<(Arc<Snapshot>, Arc<Prepared>)>>,
}

/// The offers of `snapshot` made ready to decide on: made once per
/// snapshot (a change of the offers), shared by every reconcile.
fn prepared_for(shared: &Shared, snapshot: &Arc<Snapshot>) -> Arc<Prepared> {
    let make = || Arc::new(Prepared::new(&snapshot.offers, &snapshot.disabled));
    let Ok(mut last) = shared.prepared.lock() else {
        return make();
    };
    match &*last {
        Some((seen, prepared)) if Arc::ptr_eq(seen, snapshot) => prepared.clone(),
        _ => {
            let prepared = make();
            *last = Some((snapshot.clone(), prepared.clone()));
            prepared
        }
    }
}

/// Every object of `api` (into the cache `writer` fills) as the namespace
/// it lives in, to reconcile.
fn by_namespace<K: runtime::Watched>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
) -> impl Stream<Item = Result<ObjectRef<Namespace>, watcher::Error>> + Send {
    runtime::cached_watch(api, watcher::Config::default(), writer)
        .map_ok(|o| ObjectRef::new(o.meta().namespace.as_deref().unwrap_or_default()))
}

/// Run the controller until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    settings: Settings,
    offers: watch::Receiver<Arc<Snapshot>>,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    let (namespaces, ns_writer) = reflector::store::<Namespace>();
    let (pods, pod_writer) = reflector::store::<Pod>();
    let (quotas, quota_writer) = reflector::store::<ResourceQuota>();
    let (offloadings, off_writer) = reflector::store::<NamespaceOffloading>();

    // As `runtime::cached_watch`, with the offloaded namespaces' names
    // kept from the events on the way (the gauge), before any reaches the
    // queue: a reconcile sees the count including its own namespace.
    let offloaded = Arc::new(Mutex::new(Offloaded::default()));
    let seen = offloaded.clone();
    let ns_events = retry::logged_watch(
        reflector::reflector(
            ns_writer,
            watcher::watcher(
                Api::<Namespace>::all(client.clone()),
                watcher::Config::default().labels(NAMESPACE_SELECTOR),
            ),
        ),
        "watch Namespace",
    )
    .inspect_ok(move |event| {
        if let Ok(mut seen) = seen.lock() {
            seen.apply(event);
        }
    })
    .touched_objects()
    .map_ok(|ns| ObjectRef::from_obj(&ns));
    let pod_events = by_namespace(Api::<Pod>::all(client.clone()), pod_writer);
    let quota_events = by_namespace(Api::<ResourceQuota>::all(client.clone()), quota_writer);
    let off_events = by_namespace(Api::<NamespaceOffloading>::all(client.clone()), off_writer);
    let from_catalog = catalog_triggers(offers.clone(), namespaces.clone());

    let queue = stream::select_all([
        ns_events.boxed(),
        pod_events.boxed(),
        quota_events.boxed(),
        off_events.boxed(),
        from_catalog.map(Ok).boxed(),
    ]);

    let ready = (namespaces.clone(), offloadings.clone(), metrics.clone());
    let readiness = tokio::spawn(async move {
        if ready.0.wait_until_ready().await.is_ok() && ready.1.wait_until_ready().await.is_ok() {
            ready.2.reconcile().set_reached_api();
        }
    });

    let shared = Arc::new(Shared {
        recorders: Recorders::new(client.clone(), settings.reporter.clone()),
        client,
        settings,
        offers,
        pods,
        quotas,
        offloadings,
        metrics,
        announced: Mutex::new(HashSet::new()),
        offloaded,
        prepared: Mutex::new(None),
    });
    let concurrency = shared.settings.concurrency;
    let span = tracing::info_span!("orchestrator");
    async move {
        tracing::info!("controller started");
        applier(
            |ns, shared: Arc<Shared>| Box::pin(reconcile(ns, shared)),
            error_policy,
            shared.clone(),
            namespaces,
            queue.take_until(shutdown.cancelled_owned()),
            ApplierConfig::default().concurrency(concurrency),
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile round failed");
            }
        })
        .await;
        readiness.abort();
        tracing::info!("controller stopped");
    }
    .instrument(span)
    .await;
}

/// Every change of the offers as every offloaded namespace to reconcile.
fn catalog_triggers(
    offers: watch::Receiver<Arc<Snapshot>>,
    namespaces: Store<Namespace>,
) -> impl Stream<Item = ObjectRef<Namespace>> + Send {
    stream::unfold(offers, |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
    .flat_map(move |()| {
        let refs: Vec<ObjectRef<Namespace>> = namespaces
            .state()
            .iter()
            .filter(|ns| consumer_of(ns).is_some())
            .map(|ns| ObjectRef::from_obj(&**ns))
            .collect();
        stream::iter(refs)
    })
}

fn error_policy(ns: Arc<Namespace>, error: &ReconcileError, shared: Arc<Shared>) -> Action {
    tracing::warn!(namespace = %ns.name_any(), %error, "reconcile failed; retrying");
    shared.metrics.count_error(match error {
        ReconcileError::View(ViewError::Demand { .. }) => "demand",
        _ => "kubernetes",
    });
    Action::requeue(shared.settings.retry)
}

fn view_from_caches(
    shared: &Shared,
    ns: &Namespace,
    existing: Option<NamespaceOffloading>,
) -> Result<View, ViewError> {
    let name = ns.name_any();
    let in_ns = |n: Option<&str>| n == Some(name.as_str());
    let pods = shared.pods.state();
    let quotas = shared.quotas.state();
    let pods: Vec<&Pod> = pods
        .iter()
        .filter(|p| in_ns(p.metadata.namespace.as_deref()))
        .map(|p| &**p)
        .collect();
    let quotas: Vec<&ResourceQuota> = quotas
        .iter()
        .filter(|q| in_ns(q.metadata.namespace.as_deref()))
        .map(|q| &**q)
        .collect();
    View::build(ns, &quotas, &pods, existing)
}

async fn reconcile(ns: Arc<Namespace>, shared: Arc<Shared>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let name = ns.name_any();
    let Some(consumer) = consumer_of(&ns).map(str::to_string) else {
        return Ok(Action::await_change());
    };
    let span = tracing::info_span!("reconcile", namespace = %name, consumer = %consumer);
    async move {
        if let Ok(seen) = shared.offloaded.lock() {
            shared.metrics.set_namespaces(seen.len());
        }
        let snapshot = shared.offers.borrow().clone();
        if !snapshot.loaded {
            tracing::debug!("no offers from the catalog yet; deciding nothing");
            return Ok(Action::await_change());
        }
        let prepared = prepared_for(&shared, &snapshot);
        let _ = shared.pods.wait_until_ready().await;
        let _ = shared.quotas.wait_until_ready().await;
        let _ = shared.offloadings.wait_until_ready().await;
        recreate_stale_pods(&shared, &ns).await?;
        let api: Api<NamespaceOffloading> = Api::namespaced(shared.client.clone(), &name);
        let mut existing = shared
            .offloadings
            .get(&ObjectRef::new(OFFLOADING_NAME).within(&name))
            .map(|o| (*o).clone());
        for _ in 0..WRITE_ATTEMPTS {
            let view = view_from_caches(&shared, &ns, existing.clone())?;
            let now = jiff::Timestamp::now();
            let decision = view.decide_prepared(
                &shared.settings.policy,
                &prepared,
                &snapshot.offers,
                &snapshot.disabled,
                now,
            );
            shared
                .metrics
                .set_unplaced(&name, decision.rule == Rule::NoneQualifies);
            let requeue = decision
                .recheck
                .map_or(shared.settings.resync, |r| r.min(shared.settings.resync));
            if decision.chosen.is_empty() {
                // Nothing qualifies and nothing was chosen before: an empty
                // selector would mean every peered cluster, so write nothing.
                tracing::info!(reason = %decision.explain(), "no provider qualifies; not offloading");
                publish_event(&shared, None, &name, &decision, &[]);
                shared.metrics.observe_reconcile(started.elapsed());
                return Ok(Action::requeue(requeue));
            }
            let desired = NamespaceOffloading::apply(existing.as_ref(), &name, &decision, now);
            if existing.as_ref().is_some_and(|e| same(e, &desired)) {
                shared.metrics.observe_reconcile(started.elapsed());
                return Ok(Action::requeue(requeue));
            }
            let before = view.current();
            let written = match &existing {
                None => api.create(&PostParams::default(), &desired).await,
                Some(_) => api.replace(OFFLOADING_NAME, &PostParams::default(), &desired).await,
            };
            match written {
                Ok(obj) => {
                    let moved = decision.moves(&before);
                    shared.metrics.count_write(decision.rule.as_str(), moved);
                    if moved || decision.rule == Rule::NoneQualifies {
                        tracing::info!(chosen = ?decision.chosen, rule = decision.rule.as_str(), reason = %decision.explain(), "namespace placed");
                        publish_event(&shared, Some(&obj), &name, &decision, &before);
                    }
                    shared.metrics.observe_reconcile(started.elapsed());
                    return Ok(Action::requeue(requeue));
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    shared.metrics.count_error("conflict");
                    tracing::debug!("NamespaceOffloading write conflicted; re-reading");
                    existing = api.get_opt(OFFLOADING_NAME).await?;
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(ReconcileError::Conflicts { namespace: name.clone() })
    }
    .instrument(span)
    .await
}

/// Act on the pods of `ns` created before Liqo's pod webhook acted in it
/// ([`stale_pods::plan`]): delete the controlled ones at their UID (a pod
/// of the same name recreated meanwhile is not touched; one already gone is
/// fine), and warn once on each bare one.
async fn recreate_stale_pods(shared: &Arc<Shared>, ns: &Namespace) -> Result<(), ReconcileError> {
    let name = ns.name_any();
    let pods = shared.pods.state();
    let in_ns: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(name.as_str()))
        .map(|p| &**p)
        .collect();
    let api: Api<Pod> = Api::namespaced(shared.client.clone(), &name);
    let selected = shared
        .offloadings
        .get(&ObjectRef::new(OFFLOADING_NAME).within(&name))
        .map(|o| o.selected())
        .unwrap_or_default();
    for action in stale_pods::plan(ns, &in_ns, &selected) {
        match action {
            stale_pods::Action::Recreate { name: pod, uid } => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(&pod, &params).await {
                    Ok(_) => {
                        tracing::info!(%pod, "deleted a pod created before the placement; its controller recreates it offloaded");
                        pod_event(shared, &name, &pod, EventType::Normal, "RecreatedToOffload",
                            "deleted: created before the namespace's current placement, which Liqo's pod webhook applies to new pods only; its controller recreates it");
                    }
                    Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                    Err(error) => return Err(error.into()),
                }
            }
            stale_pods::Action::Announce { name: pod, uid } => {
                let first = shared
                    .announced
                    .lock()
                    .map(|mut seen| seen.insert(uid))
                    .unwrap_or(false);
                if first {
                    tracing::warn!(%pod, "a bare pod created before the placement stays where it is");
                    pod_event(shared, &name, &pod, EventType::Warning, "MustBeRecreated",
                        "created before the namespace's current placement, which Liqo's pod webhook applies to new pods only, and no controller owns it: delete and create it again to offload it there");
                }
            }
        }
    }
    Ok(())
}

fn pod_event(
    shared: &Arc<Shared>,
    namespace: &str,
    pod: &str,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note.to_string()),
        action: "Recreate".to_string(),
        secondary: None,
    };
    runtime::publish_event(
        shared.recorders.for_namespace(namespace),
        event,
        core_ref("Pod", namespace, pod),
    );
}

/// A reference to the core (`v1`) object `kind` `name` in `namespace`.
fn core_ref(kind: &str, namespace: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some(kind.into()),
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        ..ObjectReference::default()
    }
}

/// Whether writing `desired` over `existing` would change anything.
fn same(existing: &NamespaceOffloading, desired: &NamespaceOffloading) -> bool {
    existing.spec == desired.spec
        && existing.metadata.labels == desired.metadata.labels
        && existing.metadata.annotations == desired.metadata.annotations
}

/// Record the decision as a Kubernetes Event on the NamespaceOffloading
/// (in the background: an Event that cannot be recorded is logged).
fn publish_event(
    shared: &Arc<Shared>,
    obj: Option<&NamespaceOffloading>,
    namespace: &str,
    decision: &Decision,
    before: &[String],
) {
    let (type_, reason, action) = match (decision.rule, before.is_empty()) {
        (Rule::NoneQualifies, _) => (EventType::Warning, "NoProviderQualifies", "Keep"),
        (_, true) => (EventType::Normal, "Placed", "Place"),
        (_, false) => (EventType::Normal, "Moved", "Move"),
    };
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(runtime::note(&decision.explain())),
        action: action.to_string(),
        secondary: None,
    };
    let reference: ObjectReference = match obj {
        Some(o) => o.object_ref(&()),
        None => core_ref("Namespace", namespace, namespace),
    };
    runtime::publish_event(shared.recorders.for_namespace(namespace), event, reference);
}
