//! The controller: kube-rs reflectors for Tenants and replicated
//! ResourceSlices, and an [`applier`] that reconciles one **consumer** (its
//! Tenant) at a time.
//!
//! Why per consumer and not per slice: a consumer's slices share one
//! allowance (what the chain offers it), so deciding two of them at once
//! could grant the same resources twice. The applier never runs two
//! reconciles of one Tenant at once, so a consumer's slices are always
//! decided together, in one pass, by [`decision::decide_all`]; different
//! consumers reconcile concurrently.
//!
//! A Tenant is reconciled when
//! - it changes (e.g. Liqo cordons or drains it);
//! - one of its slices of the class changes or goes (slices of other
//!   classes trigger nothing and are never written);
//! - the chain notifies that cluster, or all clusters;
//! - what Liqo's enforcement settings hold back changes (every Tenant;
//!   `crate::enforcement`);
//! - `resync` has passed since its last reconcile (the chain is re-read).
//!
//! A reconcile reads the chain for the consumer, decides, and writes each
//! slice whose status would change through the `status` subresource with the
//! `resourceVersion` it was read at ([`write_status`]): a `409 Conflict` is
//! answered by re-reading the slice and writing again on top of what the
//! other writer (usually Liqo) wrote. Before it ends, the reconcile waits
//! until the slice cache has seen its own writes, so the next pass of the
//! same consumer never decides on grants older than the ones just written.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{stream, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{applier, Action, Config as ApplierConfig};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{reflector::reflector, watcher, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use quantity::ResourceList;
use resource_reader::{Notification, ReadError, ResourceReader};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::contracts::Contracts;
use crate::decision::{self, Candidate, Context, Decision, GrantPolicy, ShrinkPolicy, Verdict};
use crate::enforcement::{self, reader::Enforcement};
use crate::index::ConsumerIndex;
use crate::metrics::{ErrorKind, Metrics, SliceCounts};
use crate::model::{ConditionStatus, NodeExtras, ResourceSlice, Tenant};
use crate::status::{desired_annotations, desired_status};
use controller_core::clock::now_rfc3339;
use controller_core::liqo::{REPLICATED_SELECTOR, RESOURCES_CONDITION};
use controller_core::{retry, runtime};

/// Status writes of one slice tried before the reconcile gives up and is
/// retried later (each 409 re-reads the slice first).
const WRITE_ATTEMPTS: u32 = 5;
/// Status writes of one consumer in flight at once.
const WRITES_IN_FLIGHT: usize = 16;
/// How long a reconcile waits for the slice cache to see its own writes.
const CATCH_UP: Duration = Duration::from_secs(2);

/// What the controller is told to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The ResourceSlice class this controller owns.
    pub class: String,
    pub policy: GrantPolicy,
    pub shrink: ShrinkPolicy,
    /// Re-read the chain for every consumer this often even without a
    /// notification.
    pub resync: Duration,
    /// Wait this long before retrying a failed reconcile.
    pub retry: Duration,
    /// Consumers reconciled at once (`--concurrency`): unbounded, every
    /// consumer's writes went out together when the chain or a start-up
    /// woke them all (docs/benchmarks.md, the class controller at 10,000
    /// slices).
    pub concurrency: u16,
    /// Names the controller and this replica in Events.
    pub reporter: Reporter,
    /// The keys every grant carries, with their defaults
    /// ([`Context::defaults`]).
    pub defaults: ResourceList,
    /// Written beside every accepted grant, for Liqo's virtual node.
    pub extras: NodeExtras,
}

/// Why a reconcile failed (it is retried after `retry`).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the chain cannot answer for {consumer}: {source}")]
    Chain { consumer: String, source: ReadError },
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("status of {slice} still conflicting after {WRITE_ATTEMPTS} attempts")]
    Conflicts { slice: String },
    #[error("the slice cache stopped")]
    CacheGone,
}

/// What a reconcile needs, shared by all of them.
pub struct Shared {
    client: Client,
    reader: Arc<dyn ResourceReader>,
    settings: Settings,
    /// Under `contracts`: the provider's active contracts.
    contracts: Option<Contracts>,
    /// Liqo's enforcement settings as last read; `None`: not checked.
    enforcement: Option<Enforcement>,
    slices: Store<ResourceSlice>,
    /// The slice and Tenant caches by consumer.
    index: ConsumerIndex,
    metrics: Metrics,
    recorder: Recorder,
    /// Cancelled when the controller stops: waits end early.
    stopping: CancellationToken,
}

/// Run the controller until `shutdown` completes: watch Tenants and
/// replicated slices, and reconcile as described in the module docs.
pub async fn run(
    client: Client,
    reader: Arc<dyn ResourceReader>,
    settings: Settings,
    contracts: Option<Contracts>,
    enforcement: Option<Enforcement>,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    let (slices, slice_writer) = reflector::store::<ResourceSlice>();
    let (tenants, tenant_writer) = reflector::store::<Tenant>();

    let index = ConsumerIndex::default();
    let slice_index = index.clone();
    let slice_events = indexed_watch(
        Api::<ResourceSlice>::all(client.clone()),
        watcher::Config::default().labels(REPLICATED_SELECTOR),
        slice_writer,
        move |event| slice_index.observe_slice(event),
    );
    let tenant_index = index.clone();
    let tenant_events = indexed_watch(
        Api::<Tenant>::all(client.clone()),
        watcher::Config::default(),
        tenant_writer,
        move |event| tenant_index.observe_tenant(event),
    );

    // Ready (for /readyz) once the slice cache is filled.
    let ready = (slices.clone(), metrics.clone());
    let readiness = tokio::spawn(async move {
        if ready.0.wait_until_ready().await.is_ok() {
            ready.1.reconcile().set_reached_api();
        }
    });

    let class = settings.class.clone();
    let (lookup, slice_index) = (tenants.clone(), index.clone());
    let from_slices = slice_events.map_ok(move |slice| {
        let tenant = tenant_of_slice(&slice_index, &lookup, &class, &slice);
        stream::iter(tenant.map(Ok::<_, watcher::Error>))
    });
    let from_tenants = tenant_events.map_ok(|tenant| ObjectRef::from_obj(&tenant));
    let from_chain = chain_triggers(reader.subscribe(), tenants.clone(), index.clone());
    // A contract change reaches its consumer's slices like a chain
    // notification does, without waiting for a slice event.
    let from_contracts = match &contracts {
        Some(c) => chain_triggers(c.subscribe(), tenants.clone(), index.clone()).boxed(),
        None => stream::empty().boxed(),
    };
    let from_enforcement = match &enforcement {
        Some(e) => chain_triggers(e.subscribe(), tenants.clone(), index.clone()).boxed(),
        None => stream::empty().boxed(),
    };

    let queue = stream::select_all([
        from_slices.try_flatten().boxed(),
        from_tenants.boxed(),
        from_chain.map(Ok).boxed(),
        from_contracts.map(Ok).boxed(),
        from_enforcement.map(Ok).boxed(),
    ]);

    let shared = Arc::new(Shared {
        recorder: Recorder::new(client.clone(), settings.reporter.clone()),
        client,
        reader,
        settings,
        contracts,
        enforcement,
        slices,
        index,
        metrics,
        stopping: shutdown.clone(),
    });
    let span = tracing::info_span!("slice_controller", class = %shared.settings.class);
    async move {
        tracing::info!(
            policy = shared.settings.policy.as_str(),
            "controller started"
        );
        // The queue is dropped on shutdown (not merely ended), so an
        // applier still waiting for caches that never filled stops too; a
        // reconcile stuck on the API server gets `STOP_GRACE`, no more.
        let results = applier(
            |tenant, shared: Arc<Shared>| Box::pin(reconcile(tenant, shared)),
            error_policy,
            shared.clone(),
            tenants,
            retry::until_cancelled(queue, shutdown.clone()),
            ApplierConfig::default().concurrency(shared.settings.concurrency),
        );
        let work = results.for_each(|result| async move {
            match result {
                Ok((tenant, _)) => tracing::debug!(%tenant, "reconciled"),
                Err(error) => tracing::debug!(%error, "reconcile round failed"),
            }
        });
        retry::finish_within(work, &shutdown, retry::STOP_GRACE).await;
        readiness.abort();
        tracing::info!("controller stopped");
    }
    .instrument(span)
    .await;
}

/// [`runtime::cached_watch`] that also shows each event, once the cache
/// has taken it in, to `observe` (the consumer index follows the cache).
fn indexed_watch<K: runtime::Watched>(
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    observe: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send {
    let what = format!("watch {}", K::kind(&()));
    retry::logged_watch(reflector(writer, watcher(api, config)), what)
        .inspect_ok(observe)
        .touched_objects()
}

/// The Tenant whose consumer owns `slice`, if the slice is of `class`.
/// Liqo names a Tenant after its consumer and finds it by the
/// `liqo.io/remote-cluster-id` label in the slice's namespace; until the
/// Tenant is cached, the conventional name is used (the applier skips a
/// reference that is not cached, and the Tenant's own arrival triggers it).
fn tenant_of_slice(
    index: &ConsumerIndex,
    tenants: &Store<Tenant>,
    class: &str,
    slice: &ResourceSlice,
) -> Option<ObjectRef<Tenant>> {
    if slice.class() != class || !slice.is_replicated() {
        return None;
    }
    let consumer = slice.consumer()?;
    let namespace = slice.metadata.namespace.as_deref()?;
    let cached = index.tenants_of(tenants, consumer).into_iter().find(|t| {
        t.metadata.namespace.as_deref() == Some(namespace) && t.cluster_id() == Some(consumer)
    });
    Some(match cached {
        Some(tenant) => ObjectRef::from_obj(&*tenant),
        None => ObjectRef::new(consumer).within(namespace),
    })
}

/// Chain notifications as Tenants to reconcile: `All` → every Tenant,
/// `Cluster(id)` → the Tenants of that consumer (from the index, not a walk
/// over every Tenant).
fn chain_triggers(
    notifications: resource_reader::NotificationStream,
    tenants: Store<Tenant>,
    index: ConsumerIndex,
) -> impl Stream<Item = ObjectRef<Tenant>> + Send {
    notifications.flat_map(move |notification| {
        let cached = match &notification {
            Notification::All => tenants.state(),
            Notification::Cluster(id) => index.tenants_of(&tenants, id),
        };
        let refs: Vec<ObjectRef<Tenant>> = cached
            .into_iter()
            .filter(|t| match &notification {
                Notification::All => true,
                Notification::Cluster(id) => t.cluster_id() == Some(id.as_str()),
            })
            .map(|t| ObjectRef::from_obj(&*t))
            .collect();
        stream::iter(refs)
    })
}

fn error_policy(tenant: Arc<Tenant>, error: &ReconcileError, shared: Arc<Shared>) -> Action {
    tracing::warn!(tenant = %tenant.name_any(), %error, "reconcile failed; retrying");
    shared.metrics.count_error(match error {
        ReconcileError::Chain { .. } => ErrorKind::Chain,
        _ => ErrorKind::Kubernetes,
    });
    Action::requeue(shared.settings.retry)
}

/// The slice as the decision sees it.
fn candidate(slice: &ResourceSlice) -> Candidate {
    let condition = slice.condition(RESOURCES_CONDITION);
    let (status, reason) = condition
        .map(|c| (c.status, c.reason))
        .unwrap_or((None, String::new()));
    Candidate {
        accepted: decision::held_grant(status, &reason, slice.granted()),
        legacy: decision::is_legacy_denial(status, &reason),
        created: slice
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        name: slice.metadata.name.clone().unwrap_or_default(),
        requested: slice.requested(),
    }
}

/// The outcome of one slice's status write.
enum Written {
    /// Written; the server's new `resourceVersion`.
    Done(String),
    /// Nothing needed writing after all (another writer got there first),
    /// or the slice is gone.
    Nothing,
    /// The slice changed underneath in a way that needs a new decision (its
    /// request, class or authentication): the consumer is reconciled again.
    Redecide,
}

async fn reconcile(tenant: Arc<Tenant>, shared: Arc<Shared>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    shared
        .slices
        .wait_until_ready()
        .await
        .map_err(|_| ReconcileError::CacheGone)?;
    let Some(consumer) = tenant.cluster_id().map(str::to_string) else {
        return Ok(Action::await_change());
    };
    let namespace = tenant.metadata.namespace.clone().unwrap_or_default();
    let span = tracing::info_span!("reconcile", consumer = %consumer, namespace = %namespace);
    async move {
        // Which Tenant this decision read: tells an operator (and a test)
        // that a change to the Tenant, such as a cordon, has been seen.
        tracing::debug!(
            tenant_version = %tenant.metadata.resource_version.as_deref().unwrap_or("none"),
            "deciding the consumer's slices"
        );
        let settings = &shared.settings;
        // The consumer's slices from the index, checked again against the
        // cached objects as the whole cache once was.
        let mine: Vec<Arc<ResourceSlice>> = shared
            .index
            .slices_of(&shared.slices, &namespace, &consumer)
            .into_iter()
            .filter(|s| {
                s.metadata.namespace.as_deref() == Some(namespace.as_str())
                    && s.is_replicated()
                    && s.class() == settings.class
                    && s.consumer() == Some(consumer.as_str())
            })
            .collect();
        let (ready, waiting): (Vec<_>, Vec<_>) =
            mine.into_iter().partition(|s| s.is_authenticated());
        let mut counts = SliceCounts {
            waiting: i64::try_from(waiting.len()).unwrap_or(i64::MAX),
            ..SliceCounts::default()
        };
        if ready.is_empty() {
            shared.metrics.set_consumer_counts(&consumer, counts);
            return Ok(Action::requeue(settings.resync));
        }

        let contracted = match (&shared.contracts, settings.policy) {
            (Some(contracts), GrantPolicy::Contracts) => match contracts.current() {
                Some(book) => book.contracted(&consumer).cloned(),
                // Nothing read from the catalog yet: decide nothing (the
                // first book notifies every consumer).
                None => return Ok(Action::requeue(settings.retry)),
            },
            _ => None,
        };
        let ctx = Context {
            policy: settings.policy,
            shrink: settings.shrink,
            tenant: tenant.condition(),
            consumer: consumer.clone(),
            contracted,
            defaults: settings.defaults.clone(),
        };
        let offered =
            match ctx.tenant {
                crate::model::TenantCondition::Active => shared
                    .reader
                    .read(&consumer)
                    .await
                    .map_err(|source| ReconcileError::Chain {
                        consumer: consumer.clone(),
                        source,
                    })?,
                // Cordoned and drained tenants get nothing new: no need to ask.
                _ => ResourceList::new(),
            };
        let candidates: Vec<Candidate> = ready.iter().map(|s| candidate(s)).collect();
        let decisions = decision::decide_all(&ctx, &offered, &candidates);
        let held = shared.enforcement.as_ref().and_then(Enforcement::hold);
        let decisions = enforcement::apply_hold(decisions, &candidates, held.as_ref());

        let now = now_rfc3339();
        let mut writes = Vec::new();
        for ((slice, decision), candidate) in ready.iter().zip(decisions).zip(&candidates) {
            let verdict = match decision {
                Decision::Keep => None,
                Decision::Set(verdict) => Some(verdict),
            };
            match verdict.as_ref().map(|v| v.status) {
                None | Some(ConditionStatus::Accepted) => counts.accepted += 1,
                Some(ConditionStatus::Denied) => counts.denied += 1,
            }
            let annotations = verdict.as_ref().and_then(|v| desired_annotations(slice, v));
            let status = desired_status(slice, verdict.as_ref(), &settings.extras, &now);
            if annotations.is_some() || status.is_some() {
                writes.push((
                    slice.clone(),
                    verdict,
                    annotations,
                    candidate.requested.clone(),
                ));
            }
        }
        shared.metrics.set_consumer_counts(&consumer, counts);

        let outcomes: Vec<Result<(Arc<ResourceSlice>, Written), ReconcileError>> =
            stream::iter(writes)
                .map(|(slice, verdict, annotations, requested)| {
                    let shared = shared.clone();
                    let now = now.clone();
                    async move {
                        let written = write_slice(
                            &shared,
                            &slice,
                            verdict.as_ref(),
                            annotations,
                            &requested,
                            &now,
                        )
                        .await?;
                        if let (Written::Done(_), Some(verdict)) = (&written, &verdict) {
                            shared.metrics.count_decision(verdict.reason.as_str());
                            publish_event(&shared, &slice, verdict);
                        }
                        Ok((slice, written))
                    }
                })
                .buffer_unordered(WRITES_IN_FLIGHT)
                .collect()
                .await;

        let mut again = false;
        let mut written = Vec::new();
        let mut failure = None;
        for outcome in outcomes {
            match outcome {
                Ok((slice, Written::Done(version))) => written.push((slice, version)),
                Ok((_, Written::Nothing)) => {}
                Ok((_, Written::Redecide)) => again = true,
                Err(error) => failure = Some(error),
            }
        }
        tokio::select! {
            () = catch_up(&shared.slices, &written) => {}
            () = shared.stopping.cancelled() => {}
        }
        shared.metrics.observe_reconcile(started.elapsed());
        if let Some(error) = failure {
            return Err(error);
        }
        tracing::debug!(
            slices = ready.len(),
            written = written.len(),
            "consumer reconciled"
        );
        Ok(if again {
            Action::requeue(Duration::ZERO)
        } else {
            Action::requeue(settings.resync)
        })
    }
    .instrument(span)
    .await
}

/// Write what `verdict` (`None`: a kept grant) asks of `slice`: first the
/// cordon's `annotations` patch (a revocation is cordoned before its zeros
/// land), then the status.
async fn write_slice(
    shared: &Shared,
    slice: &ResourceSlice,
    verdict: Option<&Verdict>,
    annotations: Option<serde_json::Value>,
    requested: &Result<ResourceList, crate::model::ModelError>,
    now: &str,
) -> Result<Written, ReconcileError> {
    let api: Api<ResourceSlice> = Api::namespaced(
        shared.client.clone(),
        slice.metadata.namespace.as_deref().unwrap_or_default(),
    );
    let mut patched = None;
    if let Some(patch) = annotations {
        match api
            .patch(
                &slice.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(updated) => {
                tracing::info!(slice = %slice.key(), cordon = verdict.is_some_and(|v| v.cordon), "cordon annotation written");
                patched = Some(updated);
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Written::Nothing),
            Err(error) => return Err(error.into()),
        }
    }
    let base = patched.as_ref().unwrap_or(slice);
    match desired_status(base, verdict, &shared.settings.extras, now) {
        Some(status) => write_status(shared, &api, base, verdict, status, requested, now).await,
        None => Ok(match patched {
            Some(updated) => Written::Done(updated.resource_version().unwrap_or_default()),
            None => Written::Nothing,
        }),
    }
}

/// Write `status` to `slice` with the `resourceVersion` it was read at. On
/// `409 Conflict` re-read it and, if it is still the same request, apply
/// the same verdict on top of what is there now.
async fn write_status(
    shared: &Shared,
    api: &Api<ResourceSlice>,
    slice: &ResourceSlice,
    verdict: Option<&Verdict>,
    status: serde_json::Value,
    requested: &Result<ResourceList, crate::model::ModelError>,
    now: &str,
) -> Result<Written, ReconcileError> {
    let name = slice.name_any();
    let mut body = ResourceSlice {
        status: Some(status),
        ..slice.clone()
    };
    for _ in 0..WRITE_ATTEMPTS {
        match api
            .replace_status(&name, &PostParams::default(), &body)
            .await
        {
            Ok(updated) => {
                return Ok(Written::Done(
                    updated.resource_version().unwrap_or_default(),
                ))
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                shared.metrics.count_error(ErrorKind::Conflict);
                tracing::debug!(slice = %slice.key(), "status write conflicted; re-reading");
                let fresh = match api.get(&name).await {
                    Ok(fresh) => fresh,
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        return Ok(Written::Nothing)
                    }
                    Err(error) => return Err(error.into()),
                };
                let same_request = fresh.class() == slice.class()
                    && fresh.consumer() == slice.consumer()
                    && fresh.is_authenticated()
                    && fresh.requested() == *requested;
                // A kept grant is kept only while it is still accepted.
                let same_grant = verdict.is_some()
                    || fresh.condition(RESOURCES_CONDITION) == slice.condition(RESOURCES_CONDITION);
                if !same_request || !same_grant {
                    return Ok(Written::Redecide);
                }
                match desired_status(&fresh, verdict, &shared.settings.extras, now) {
                    Some(status) => {
                        body = ResourceSlice {
                            status: Some(status),
                            ..fresh
                        }
                    }
                    None => return Ok(Written::Nothing),
                }
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Written::Nothing),
            Err(error) => return Err(error.into()),
        }
    }
    Err(ReconcileError::Conflicts { slice: slice.key() })
}

/// Record the decision as a Kubernetes Event on the slice (in the
/// background: an Event that cannot be recorded is logged, never retried).
fn publish_event(shared: &Arc<Shared>, slice: &ResourceSlice, verdict: &Verdict) {
    let event = Event {
        type_: match (verdict.status, verdict.cordon) {
            (ConditionStatus::Accepted, false) => EventType::Normal,
            _ => EventType::Warning,
        },
        reason: verdict.reason.as_str().to_string(),
        note: Some(runtime::note(&verdict.message)),
        action: match (verdict.status, verdict.cordon) {
            (ConditionStatus::Accepted, false) => "Grant".to_string(),
            (ConditionStatus::Accepted, true) => "Revoke".to_string(),
            (ConditionStatus::Denied, _) => "Deny".to_string(),
        },
        secondary: None,
    };
    let reference: ObjectReference = slice.object_ref(&());
    // A failure is logged in a span naming the slice: its consumer's
    // reconcile span does not say which of its slices it was.
    let _event = tracing::debug_span!("event", slice = %slice.key()).entered();
    runtime::publish_event(&shared.recorder, event, reference);
}

/// Wait (at most [`CATCH_UP`]) until the cache holds each written slice at
/// the version the write returned, or later, or no longer holds it.
async fn catch_up(slices: &Store<ResourceSlice>, written: &[(Arc<ResourceSlice>, String)]) {
    let mut pending: BTreeSet<usize> = (0..written.len()).collect();
    let deadline = Instant::now() + CATCH_UP;
    while !pending.is_empty() {
        pending.retain(|&i| {
            let (slice, version) = &written[i];
            match slices.get(&ObjectRef::from_obj(&**slice)) {
                None => false,
                Some(cached) => !seen(cached.resource_version().as_deref(), version),
            }
        });
        if pending.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                slices = pending.len(),
                "the slice cache has not caught up with our writes"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Whether a cached `resourceVersion` is the written one or later. Versions
/// are compared as numbers when both are (etcd's always are); otherwise only
/// equality counts.
fn seen(cached: Option<&str>, written: &str) -> bool {
    match cached {
        None => false,
        Some(cached) if cached == written => true,
        Some(cached) => match (cached.parse::<u64>(), written.parse::<u64>()) {
            (Ok(c), Ok(w)) => c >= w,
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_numbers_when_they_are() {
        assert!(seen(Some("12"), "12"));
        assert!(seen(Some("13"), "12"));
        assert!(!seen(Some("9"), "12"));
        assert!(!seen(None, "12"));
        assert!(seen(Some("abc"), "abc"));
        assert!(!seen(Some("abd"), "abc"));
    }

    #[test]
    fn only_replicated_slices_of_the_class_map_to_a_tenant() {
        let (tenants, _writer) = reflector::store::<Tenant>();
        let index = ConsumerIndex::default();
        let slice: ResourceSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s", "namespace": "liqo-tenant-c1",
                "labels": {"liqo.io/replicated": "true", "liqo.io/originID": "c1"}},
            "spec": {"class": "gold", "consumerClusterID": "c1"}
        }))
        .expect("slice");
        assert_eq!(
            tenant_of_slice(&index, &tenants, "gold", &slice),
            Some(ObjectRef::new("c1").within("liqo-tenant-c1"))
        );
        assert_eq!(tenant_of_slice(&index, &tenants, "silver", &slice), None);
        let mut local = slice.clone();
        local.metadata.labels = None;
        assert_eq!(tenant_of_slice(&index, &tenants, "gold", &local), None);
    }
}
