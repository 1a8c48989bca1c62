//! The controller, in the shape of kube-rs's `controller-rs`: a
//! [`Controller`] over Purchases, a [`Context`] every round shares, a short
//! [`reconcile`] over kube's [`finalizer`] helper (set up on apply, clean up
//! on deletion) and an [`error_policy`] that retries with backoff.
//!
//! One round opens a catalog session from the credentials Secret (read and
//! checked once), reads or buys the contract ([`crate::catalog`]), sets up
//! what is missing on the cluster ([`crate::cluster`]), lets
//! [`crate::decision`] judge, and writes the status, an Event on each phase
//! change and the contract's state in the catalog.
//!
//! A Purchase from peering credentials ([`crate::direct`]) has no catalog:
//! its round makes the contract from the spec and the remote cluster and
//! goes on to the same set-up, reporting nowhere but on the Purchase.
//!
//! The contract id is written to the status before a purchase is made, so
//! a controller restarted half-way reads the contract instead of buying
//! again. While the catalog is unreachable the controller keeps what exists
//! and works from the contract as last read (kept in the status), retrying
//! with a doubling delay. On deletion, the finalizer removes what this
//! Purchase created — and only that (see [`crate::liqo`] on ownership).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use catalog_client::contract_follower::FollowerOptions;
use catalog_client::{Backoff, Session};
use controller_core::clock::now_rfc3339;
use controller_core::runtime;
use futures::{FutureExt, StreamExt};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::caches::Caches;
use crate::catalog::{self, Contract};
use crate::cluster::{Cluster, ClusterError, Teardown};
use crate::contract_stream::{self, Followers};
use crate::decision::{self, Assessment, Phase, Unusable};
use crate::direct;
use crate::last_written::LastWritten;
use crate::liqo::Generation;
use crate::liqo_watch;
use crate::metrics::Metrics;
use crate::model::{Purchase, PurchaseStatus, FINALIZER};
use crate::sharing;

/// What the controller is told to do.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Liqo generation this cluster runs.
    pub generation: Generation,
    /// This cluster's Liqo cluster ID.
    pub cluster_id: String,
    /// Liqo's namespace (v0.x token Secrets live here).
    pub liqo_namespace: String,
    /// While waiting for the provider or the catalog (the contract
    /// stream wakes the Purchase when its contract changes): look again
    /// this often all the same — the fallback, and the follower's fallback
    /// poll.
    pub poll: Duration,
    /// While a peering waits on the provider's API server (where no watch
    /// reaches, [`crate::liqo_watch`]) or on Liqo v0.x: look again after
    /// this, doubling while nothing changes up to `liqo_poll_max`.
    pub liqo_poll: Duration,
    pub liqo_poll_max: Duration,
    /// While a peering waits on Liqo's objects here (watched: their
    /// changes wake the Purchase): look again this often all the same.
    pub liqo_resync: Duration,
    /// Once ready: re-read the contract this often (expiry, cancellation).
    pub resync: Duration,
    /// First retry after a failure; doubles up to `retry_max`.
    pub retry: Duration,
    pub retry_max: Duration,
    /// Bounds each catalog request.
    pub catalog_timeout: Duration,
    /// Warn this long before a contract ends (`EndingSoon`, an Event).
    pub ending_soon: Duration,
    /// v1: authenticate with the provider itself.
    pub auto_peer: bool,
    /// v1, `auto_peer`: set up Liqo's networking first (a Purchase may
    /// override it).
    pub networking: bool,
    /// Liqo's namespace on the providers.
    pub provider_liqo_namespace: String,
    pub instance: String,
    /// The namespaces whose Secrets may be used (`--secret-namespaces`).
    pub secret_scope: crate::secret_scope::SecretScope,
}

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot read an object: {0}")]
    Decode(#[from] serde_json::Error),
    /// Adding or removing the finalizer failed, or so did the round it
    /// wraps.
    #[error(transparent)]
    Finalizer(Box<finalizer::Error<ReconcileError>>),
    /// Not a failure: the deleted Purchase keeps its finalizer while Liqo
    /// ends a peering nothing else uses.
    #[error("unpeering: {0}")]
    Unpeering(String),
}

impl ReconcileError {
    /// The wait of [`ReconcileError::Unpeering`], however wrapped.
    fn unpeering(&self) -> Option<&str> {
        match self {
            ReconcileError::Unpeering(why) => Some(why),
            ReconcileError::Finalizer(e) => match e.as_ref() {
                finalizer::Error::CleanupFailed(inner) | finalizer::Error::ApplyFailed(inner) => {
                    inner.unpeering()
                }
                _ => None,
            },
            _ => None,
        }
    }
}

impl From<ClusterError> for ReconcileError {
    fn from(error: ClusterError) -> Self {
        match error {
            ClusterError::Kube(e) => ReconcileError::Kube(e),
            ClusterError::Decode(e) => ReconcileError::Decode(e),
        }
    }
}

/// What every round shares.
pub struct Context {
    client: Client,
    cluster: Cluster,
    settings: Settings,
    metrics: Metrics,
    recorder: Recorder,
    /// The HTTP client every catalog session uses.
    http: reqwest::Client,
    /// Per Purchase, the retry delay after consecutive failures.
    retries: Mutex<HashMap<String, Backoff>>,
    /// Per Purchase, the next look while waiting for the provider's Liqo.
    liqo_waits: Mutex<HashMap<String, Backoff>>,
    /// The Purchases whose last round waits on the provider's API server
    /// (set by the round, read when it ends).
    provider_waits: Mutex<std::collections::HashSet<String>>,
    /// Per Purchase, the status this replica last wrote.
    written: LastWritten,
    /// The contract followers whose changes wake the Purchases.
    followers: Followers,
    /// The controller's own cache of every Purchase (its watch's store).
    purchases: reflector::Store<Purchase>,
}

impl Context {
    fn backoff(&self, key: &str) -> Duration {
        let mut retries = self.retries.lock().unwrap_or_else(|e| e.into_inner());
        retries
            .entry(key.to_string())
            .or_insert_with(|| Backoff::new(self.settings.retry, self.settings.retry_max))
            .next_delay()
    }

    fn succeeded(&self, key: &str) {
        self.retries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// The next look at a Purchase waiting for Liqo: soon after a round
    /// that changed something, then less often while nothing does.
    fn liqo_wait(&self, key: &str, progressed: bool) -> Duration {
        let mut waits = self.liqo_waits.lock().unwrap_or_else(|e| e.into_inner());
        let wait = waits
            .entry(key.to_string())
            .or_insert_with(|| Backoff::new(self.settings.liqo_poll, self.settings.liqo_poll_max));
        if progressed {
            wait.reset();
        }
        wait.next_delay()
    }

    fn not_waiting_for_liqo(&self, key: &str) {
        self.liqo_waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// This round's peering waits on the provider's API server (`true`)
    /// or on what is watched here.
    fn waits_on_provider(&self, key: &str, on_provider: bool) {
        let mut waits = self
            .provider_waits
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if on_provider {
            waits.insert(key.to_string());
        } else {
            waits.remove(key);
        }
    }

    /// Whether this round's peering waits on the provider's API server
    /// (forgotten: the next round says again).
    fn took_provider_wait(&self, key: &str) -> bool {
        self.provider_waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
    }
}

/// Who writes the Events: this controller, this replica.
pub fn reporter(settings: &Settings) -> Reporter {
    Reporter {
        controller: "liqo-broker-purchase-controller".to_string(),
        instance: Some(settings.instance.clone()),
    }
}

/// Run the controller until `shutdown` is cancelled.
///
/// `lost` is cancelled when this replica lost the Lease: the controller
/// then stops at once, dropping in-flight reconciles (another replica may
/// already be writing), where `shutdown` lets them finish.
pub async fn run(
    client: Client,
    http: reqwest::Client,
    settings: Settings,
    metrics: Metrics,
    shutdown: CancellationToken,
    lost: CancellationToken,
) {
    let reporter = reporter(&settings);
    // The Liqo objects here: their changes wake the Purchases, their
    // stores serve the rounds (caches).
    let (stores, liqo_changes) = liqo_watch::changes(
        &client,
        settings.generation,
        settings.auto_peer,
        &settings.secret_scope,
    );
    let cluster = Cluster {
        cache: Arc::new(Caches::new(stores, settings.liqo_resync)),
        client: client.clone(),
        generation: settings.generation,
        cluster_id: settings.cluster_id.clone(),
        liqo_namespace: settings.liqo_namespace.clone(),
        auto_peer: settings.auto_peer,
        networking: settings.networking,
        provider_liqo_namespace: settings.provider_liqo_namespace.clone(),
    };
    let options = FollowerOptions::polling_every(settings.poll);
    let (followers, changes) = Followers::new(http.clone(), options, shutdown.child_token());
    let (reader, writer) = reflector::store();
    let context = Arc::new(Context {
        purchases: reader.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        client: client.clone(),
        cluster,
        settings,
        metrics: metrics.clone(),
        http,
        retries: Mutex::new(HashMap::new()),
        liqo_waits: Mutex::new(HashMap::new()),
        provider_waits: Mutex::new(Default::default()),
        written: LastWritten::default(),
        followers,
    });
    let purchases: Api<Purchase> = Api::all(client);
    let span =
        tracing::info_span!("purchase_controller", cluster_id = %context.settings.cluster_id);
    async move {
        tracing::info!(
            liqo = context.settings.generation.as_str(),
            "controller started"
        );
        // Ready (for /readyz) once the API server has answered a list.
        let probe = purchases.clone();
        let ready = metrics.clone();
        let readiness = tokio::spawn(
            async move {
                loop {
                    match probe.list(&ListParams::default().limit(1)).await {
                        Ok(_) => break ready.reconcile().set_reached_api(),
                        Err(error) => {
                            tracing::debug!(%error, "the API server has not answered yet")
                        }
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            .in_current_span(),
        );
        // A round per change of what asks for one (asks_for_a_round): not
        // per status write, the controller's own above all (a round that
        // wrote has acted; what it waits for wakes it: the contract stream,
        // Liqo's objects, the timers).
        let main = watcher::watcher(purchases.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .applied_objects()
            .predicate_filter(asks_for_a_round, Default::default());
        let controller = Controller::for_stream(main, reader);
        // A Purchase's change reaches the other Purchases of its provider
        // whose NodesShared condition it changes (sharing::affected).
        let cache = controller.store();
        // A contract that changed on the catalog's stream reaches the
        // Purchases that name it (contract_stream).
        let named = controller.store();
        let woken = futures::stream::unfold(changes, |mut changes| async move {
            changes.recv().await.map(|ids| (ids, changes))
        })
        .flat_map(move |ids| {
            let all = named.state();
            let purchases: Vec<_> = contract_stream::purchases_of(&ids, &all)
                .map(|p| ObjectRef::from_obj(&**p))
                .collect();
            tracing::debug!(contracts = ?ids, purchases = purchases.len(), "contracts changed on the catalog");
            futures::stream::iter(purchases)
        });
        // A change Liqo made to its objects here reaches the Purchases it
        // concerns (liqo_watch).
        let concerned = controller.store();
        let liqo = liqo_changes.flat_map(move |wake| {
            let all = concerned.state();
            let purchases: Vec<_> = liqo_watch::purchases_woken(&wake, &all)
                .map(|p| ObjectRef::from_obj(&**p))
                .collect();
            tracing::debug!(?wake, purchases = purchases.len(), "Liqo's objects changed");
            futures::stream::iter(purchases)
        });
        let work = controller
            .watches(purchases, watcher::Config::default(), move |changed| {
                let all = cache.state();
                sharing::affected(&changed, &all)
                    .into_iter()
                    .map(ObjectRef::from_obj)
                    .collect::<Vec<_>>()
            })
            .reconcile_on(woken)
            .reconcile_on(liqo)
            .graceful_shutdown_on(shutdown.cancelled_owned())
            .run(reconcile, error_policy, context)
            .for_each(|result| async move {
                match result {
                    Ok((purchase, _)) => tracing::debug!(%purchase, "reconciled"),
                    Err(error) => tracing::debug!(%error, "reconcile round failed"),
                }
            });
        tokio::select! {
            () = work => {}
            () = lost.cancelled() => tracing::warn!("lost the Lease: in-flight reconciles dropped"),
        }
        readiness.abort();
        tracing::info!("controller stopped");
    }
    .instrument(span)
    .await;
}

/// What of a Purchase asks for a round when it changes: its spec (the
/// generation), its deletion and its finalizers — not its status, which
/// this controller writes.
fn asks_for_a_round(purchase: &Purchase) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let meta = &purchase.metadata;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    meta.generation.hash(&mut hasher);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0)
        .hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    Some(hasher.finish())
}

/// A failed round: counted, and retried after the Purchase's backoff.
pub fn error_policy(purchase: Arc<Purchase>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    if let Some(why) = error.unpeering() {
        tracing::info!(purchase = %purchase.key(), why, "deleted; waiting for the unpeering");
        return Action::requeue(ctx.liqo_wait(&purchase.key(), false));
    }
    let delay = ctx.backoff(&purchase.key());
    tracing::warn!(purchase = %purchase.key(), %error, ?delay, "reconcile failed; retrying");
    // Every catalog failure is judged inside the round; what fails a round
    // is the API server.
    ctx.metrics.count_error("kubernetes");
    Action::requeue(delay)
}

/// One round: the finalizer first (the helper adds it and waits for the
/// change), then [`apply`], or [`cleanup`] on deletion.
pub async fn reconcile(
    purchase: Arc<Purchase>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let key = purchase.key();
    let span = tracing::info_span!("reconcile", purchase = %key);
    async move {
        let timer = std::time::Instant::now();
        let namespace = purchase.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Purchase> = Api::namespaced(ctx.client.clone(), &namespace);
        let deleting = purchase.is_deleting();
        let result = finalizer(&api, FINALIZER, purchase, |event| async {
            match event {
                finalizer::Event::Apply(purchase) => apply(&purchase, &ctx).await,
                finalizer::Event::Cleanup(purchase) => cleanup(&purchase, &ctx).await,
            }
        })
        .await
        .map_err(|e| ReconcileError::Finalizer(Box::new(e)));
        if deleting && result.is_ok() {
            ctx.metrics.forget(&key);
            ctx.succeeded(&key);
            ctx.not_waiting_for_liqo(&key);
            ctx.took_provider_wait(&key);
            ctx.written.forget(&key);
            ctx.followers.release(&key);
        }
        ctx.metrics.observe_reconcile(timer.elapsed());
        result
    }
    .instrument(span)
    .await
}

/// Deletion: remove what this Purchase created; the helper then removes
/// the finalizer.
async fn cleanup(purchase: &Purchase, ctx: &Context) -> Result<Action, ReconcileError> {
    if let Teardown::Unpeering(why) = crate::cluster::cleanup(purchase, &ctx.cluster, true).await? {
        return Err(ReconcileError::Unpeering(why));
    }
    tracing::info!("cleaned up; removing the finalizer");
    Ok(Action::await_change())
}

/// Bring the Purchase one step further and say where it is.
async fn apply(purchase: &Purchase, ctx: &Context) -> Result<Action, ReconcileError> {
    let key = purchase.key();
    // A cache that has not seen this replica's last write yet: from what
    // was written (last_written).
    let before = ctx.written.before(&key, purchase);
    let mut status = before.clone();
    let mut superseded: Vec<String> = purchase.resource_version().into_iter().collect();
    let is_direct = direct::is_direct(purchase);
    let namespace = purchase.metadata.namespace.as_deref().unwrap_or_default();
    let round = if let Err(refused) = ctx.settings.secret_scope.purchase(namespace) {
        Ok((refused.assessment(), None))
    } else if is_direct {
        drive_direct(purchase, ctx, &mut status).await
    } else {
        from_catalog(purchase, ctx, &mut status, &mut superseded).await
    };
    let (mut assessment, contract) = match round {
        // An object built from the contract that Liqo's schema refuses
        // is not worth retrying: say so.
        Err(ReconcileError::Kube(kube::Error::Api(e))) if e.code == 422 => {
            let assessment = decision::assess_unusable(&Unusable::Rejected(e.message));
            let assessment = if is_direct {
                direct::without_catalog(assessment)
            } else {
                assessment
            };
            (assessment, None)
        }
        other => other?,
    };

    // The warning before the end, for a contract in use.
    let now = jiff::Timestamp::now();
    let ending = decision::contract_usable(&assessment)
        .then(|| catalog::ending(&status, contract.as_ref()))
        .flatten();
    if let Some(ending) = &ending {
        assessment
            .conditions
            .push(decision::ending_soon(ending, now, ctx.settings.ending_soon));
    }
    assessment
        .conditions
        .extend(nodes_shared(purchase, ctx, &status, assessment.phase).await?);

    let generation = purchase.metadata.generation.unwrap_or_default();
    status.phase = assessment.phase.as_str().to_string();
    status.observed_generation = generation;
    status.conditions =
        decision::merge_conditions(&before.conditions, &assessment, generation, &now_rfc3339());
    if status != before {
        let version = patch_status(ctx, purchase, status.merge_patch_over(&before)?).await?;
        ctx.written.wrote(&key, superseded, version, status.clone());
    }
    if before.phase != status.phase {
        publish_event(ctx, purchase, &before.phase, &assessment);
    }
    publish_refusals(ctx, purchase, &before.conditions, &status.conditions);
    if let Some(warning) = decision::ending_soon_warning(&before.conditions, &assessment) {
        publish_ending_soon(ctx, purchase, &warning.message);
    }
    if let Some(warning) = sharing::warning(&before.conditions, &assessment.conditions) {
        publish_nodes_shared(ctx, purchase, &warning.message);
    }
    ctx.metrics.set_phase(&key, assessment.phase.as_str());

    let progressed = status != before;
    Ok(if decision::catalog_unreachable(&assessment) {
        Action::requeue(ctx.backoff(&key))
    } else {
        ctx.succeeded(&key);
        if assessment.phase.is_settled() && !decision::is_unpeering(&assessment) {
            ctx.not_waiting_for_liqo(&key);
            // In time for the warning, if it falls before the resync.
            let warn_in =
                ending.and_then(|e| decision::until_ending_soon(&e, now, ctx.settings.ending_soon));
            Action::requeue(warn_in.map_or(ctx.settings.resync, |w| w.min(ctx.settings.resync)))
        } else if !is_direct && decision::waits_for_contract(&assessment) {
            // The provider's part (its peering credentials, say) comes on
            // the contract stream, which wakes this Purchase: the poll is
            // the fallback.
            ctx.not_waiting_for_liqo(&key);
            Action::requeue(ctx.settings.poll)
        } else if ctx.took_provider_wait(&key) {
            // No watch reaches the provider's API server: the timer.
            Action::requeue(ctx.liqo_wait(&key, progressed))
        } else if before.provider_cluster_id != status.provider_cluster_id {
            // Liqo's changes made while this round ran were matched to
            // Purchases by a status that did not name this provider yet
            // (liqo_watch::purchases_woken): one look on the timer sees
            // what they would have woken.
            Action::requeue(ctx.settings.liqo_poll)
        } else {
            // Liqo's objects here are watched: their changes wake it.
            ctx.not_waiting_for_liqo(&key);
            Action::requeue(ctx.settings.liqo_resync)
        }
    })
}

/// The `NodesShared` condition ([`sharing`]) of a Purchase that has a
/// provider and has not ended, among every Purchase in the cluster: from
/// the controller's cache, each with the status this replica last wrote
/// if the cache has not seen it yet (last_written); a change the cache
/// has yet to bring wakes the Purchases it concerns when it comes
/// (`sharing::affected`). Before the cache's first listing, from the API
/// server.
async fn nodes_shared(
    purchase: &Purchase,
    ctx: &Context,
    status: &PurchaseStatus,
    phase: Phase,
) -> Result<Option<decision::Cond>, ReconcileError> {
    let Some(provider) = status.provider_cluster_id.as_deref() else {
        return Ok(None);
    };
    if phase == Phase::Ended || purchase.is_deleting() {
        return Ok(None);
    }
    let me = sharing::Served::of(purchase, provider);
    let listed = matches!(
        ctx.purchases.wait_until_ready().now_or_never(),
        Some(Ok(()))
    );
    let all: Vec<Purchase> = if listed {
        ctx.purchases
            .state()
            .iter()
            .map(|cached| {
                let mut p = Purchase::clone(cached);
                p.status = Some(ctx.written.before(&p.key(), &p));
                p
            })
            .collect()
    } else {
        Api::<Purchase>::all(ctx.client.clone())
            .list(&ListParams::default())
            .await?
            .items
    };
    Ok(Some(sharing::assess(&me, &all)))
}

/// A JSON merge patch of the Purchase's status.
/// The Purchase's version after the patch.
async fn patch_status(
    ctx: &Context,
    purchase: &Purchase,
    status: serde_json::Value,
) -> Result<Option<String>, kube::Error> {
    let namespace = purchase.metadata.namespace.clone().unwrap_or_default();
    let patched = Api::<Purchase>::namespaced(ctx.client.clone(), &namespace)
        .patch_status(
            &purchase.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
    Ok(patched.resource_version())
}

/// Tell the catalog where the contract is, when it does not know yet.
async fn report(
    ctx: &Context,
    session: &mut Session,
    contract: &Contract,
    state: catalog::ContractState,
    reason: Option<&str>,
    status: &mut PurchaseStatus,
) {
    if !decision::report_due(contract, state, reason) {
        status.catalog_state = Some(state.as_str().to_string());
        return;
    }
    let consumer = contract
        .consumer_cluster_id
        .is_none()
        .then_some(ctx.settings.cluster_id.as_str());
    match session.report(&contract.id, state, reason, consumer).await {
        Ok(()) => {
            tracing::info!(
                state = state.as_str(),
                "contract state reported to the catalog"
            );
            status.catalog_state = Some(state.as_str().to_string());
        }
        Err(error) => {
            ctx.metrics.count_error("catalog");
            tracing::warn!(%error, "cannot report the contract's state");
        }
    }
}

/// The catalog's part of a round: the session, [`drive`], and the state
/// the catalog must hear; `Some(contract)` when the catalog answered.
async fn from_catalog(
    purchase: &Purchase,
    ctx: &Context,
    status: &mut PurchaseStatus,
    superseded: &mut Vec<String>,
) -> Result<(Assessment, Option<Contract>), ReconcileError> {
    let key = purchase.key();
    let mut session =
        match catalog::open(&ctx.client, &ctx.http, purchase, &ctx.cluster.cache).await {
            Err(problem) => {
                ctx.followers.release(&key);
                return Ok((decision::assess_unusable(&problem), None));
            }
            Ok(opened) => {
                ctx.followers
                    .follow(&opened.credentials, &opened.token, &key);
                opened.session
            }
        };
    let (assessment, contract) = drive(purchase, ctx, &mut session, status, superseded).await?;
    if let (Some(contract), Some((state, reason))) = (&contract, &assessment.report) {
        report(
            ctx,
            &mut session,
            contract,
            *state,
            reason.as_deref(),
            status,
        )
        .await;
    }
    Ok((assessment, contract))
}

/// A round of a Purchase from peering credentials ([`direct`]): the
/// contract made from the spec and the remote cluster, then the set-up of
/// any Purchase; no catalog to read or tell.
async fn drive_direct(
    purchase: &Purchase,
    ctx: &Context,
    status: &mut PurchaseStatus,
) -> Result<(Assessment, Option<Contract>), ReconcileError> {
    let settings = &ctx.settings;
    let read = direct::read(
        &ctx.client,
        purchase,
        settings.generation,
        &settings.provider_liqo_namespace,
        status.provider_cluster_id.as_deref(),
    )
    .await;
    let contract = match read {
        Ok(contract) => contract,
        Err(problem) => {
            // The remote cluster's API server (unreachable, refusing):
            // no watch reaches it, the timer looks again.
            ctx.waits_on_provider(&purchase.key(), true);
            let assessment = decision::assess_unusable(&problem);
            return Ok((direct::without_catalog(assessment), None));
        }
    };
    status.provider_cluster_id = Some(contract.cluster_id.clone());
    status.resources = contract.resources.to_strings();
    status.resource_slice_class = purchase.spec.resource_slice_class.clone();
    if let Err(refused) = tenant_in_scope(settings, &contract) {
        return Ok((refused.assessment(), None));
    }
    let progress = crate::cluster::set_up(purchase, &ctx.cluster, status, &contract, None).await?;
    ctx.waits_on_provider(&purchase.key(), progress.waits_on_provider());
    Ok((direct::without_catalog(decision::assess(&progress)), None))
}

/// Everything up to the assessment; `Some(contract)` when the catalog
/// answered this round (its `state` is then what the catalog holds).
async fn drive(
    purchase: &Purchase,
    ctx: &Context,
    session: &mut Session,
    status: &mut PurchaseStatus,
    superseded: &mut Vec<String>,
) -> Result<(Assessment, Option<Contract>), ReconcileError> {
    let settings = &ctx.settings;
    let spec = &purchase.spec;

    // The contract id: given, recorded, or bought now (recorded first).
    let from_offer = spec.contract_id.is_none();
    let id = match (
        &spec.contract_id,
        &status.contract_id,
        &spec.offer_id,
        &spec.plan_id,
    ) {
        (Some(id), _, _, _) | (None, Some(id), _, _) => id.clone(),
        (None, None, Some(offer), Some(plan)) => match session
            .reserve(offer, plan, spec.bought_by.as_deref())
            .await
        {
            Ok(reservation) => {
                superseded.extend(record_reservation(purchase, ctx, &reservation.id).await?);
                status.contract_id = Some(reservation.id.clone());
                status.phase = Phase::Purchasing.as_str().to_string();
                reservation.id
            }
            Err(error) => {
                refused_credentials(ctx, purchase, &error);
                let assessment = match catalog::unusable(error, offer) {
                    Ok(problem) => decision::assess_unusable(&problem),
                    Err(message) => decision::waiting_for_catalog(&message),
                };
                return Ok((assessment, None));
            }
        },
        _ => {
            let problem =
                Unusable::Spec("set spec.contractID, or spec.offerID and spec.planID".to_string());
            return Ok((decision::assess_unusable(&problem), None));
        }
    };

    let read = catalog::read_or_buy(
        session,
        &id,
        from_offer,
        &settings.cluster_id,
        spec.bought_by.as_deref(),
        spec.duration_seconds,
    )
    .await;
    if let Err(error) = &read {
        refused_credentials(ctx, purchase, error);
    }
    let (contract, catalog_error) = match read {
        Ok(contract) => {
            if let Err(problem) =
                decision::check_contract(&contract, settings.generation, &settings.cluster_id)
            {
                let mut assessment = decision::assess_unusable(&problem);
                if matches!(problem, Unusable::Ended(_)) {
                    let teardown = crate::cluster::cleanup(purchase, &ctx.cluster, false).await?;
                    if let Teardown::Unpeering(why) = teardown {
                        decision::unpeering(&mut assessment, why);
                    }
                    status.granted.clear();
                    status.offloaded_namespaces.clear();
                    status.peering_command = None;
                }
                return Ok((assessment, Some(contract)));
            }
            status.provider_cluster_id = Some(contract.cluster_id.clone());
            status.resources = contract.resources.to_strings();
            status.resource_slice_class = Some(contract.resource_slice_class.clone());
            status.expires_at = catalog::expires_at(&contract);
            (contract, None)
        }
        Err(error) => match catalog::unusable(error, &id) {
            Ok(problem) => return Ok((decision::assess_unusable(&problem), None)),
            Err(message) => match catalog::cached_contract(status, &id) {
                Some(cached) => (cached, Some(message)),
                None => return Ok((decision::waiting_for_catalog(&message), None)),
            },
        },
    };
    let fresh = catalog_error.is_none();
    if let Err(refused) = tenant_in_scope(settings, &contract) {
        return Ok((refused.assessment(), None));
    }
    let progress =
        crate::cluster::set_up(purchase, &ctx.cluster, status, &contract, catalog_error).await?;
    ctx.waits_on_provider(&purchase.key(), progress.waits_on_provider());
    Ok((decision::assess(&progress), fresh.then_some(contract)))
}

/// Whether the set-up may touch the Secrets of the provider's Liqo
/// tenant namespace here (`--secret-namespaces`, [`crate::secret_scope`]).
fn tenant_in_scope(
    settings: &Settings,
    contract: &Contract,
) -> Result<(), crate::secret_scope::NotListed> {
    settings.secret_scope.tenant(
        settings.generation,
        settings.auto_peer,
        &contract.cluster_id,
    )
}

/// The catalog refused the consumer's token: the credentials Secret is read
/// again next round (it may have been replaced since it was remembered).
fn refused_credentials(ctx: &Context, purchase: &Purchase, error: &catalog_client::Error) {
    if matches!(error, catalog_client::Error::Unauthorized { .. }) {
        catalog::forget_credentials(&ctx.cluster.cache, purchase);
    }
}

/// Write the reserved contract's id to the status before buying it, so a
/// restart reads it instead of buying again; the Purchase's version then.
async fn record_reservation(
    purchase: &Purchase,
    ctx: &Context,
    id: &str,
) -> Result<Option<String>, ReconcileError> {
    let patch = json!({"contractID": id, "phase": Phase::Purchasing});
    let version = patch_status(ctx, purchase, patch).await?;
    tracing::info!(reservation = %id, "plan reserved; contract id recorded");
    Ok(version)
}

/// The contract ends soon: a Warning Event, once per end (the message
/// names it).
fn publish_ending_soon(ctx: &Context, purchase: &Purchase, message: &str) {
    let event = Event {
        type_: EventType::Warning,
        reason: "ContractEndingSoon".to_string(),
        note: Some(runtime::note(message)),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    tracing::info!(message, "the contract ends soon");
    runtime::publish_event(&ctx.recorder, event, purchase.object_ref(&()));
}

/// Other Purchases of the provider serve other namespaces: a Warning
/// Event, once per set of them (the message names them).
fn publish_nodes_shared(ctx: &Context, purchase: &Purchase, message: &str) {
    let event = Event {
        type_: EventType::Warning,
        reason: sharing::SHARES_PROVIDER_NODES.to_string(),
        note: Some(runtime::note(message)),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    tracing::warn!(message, "the provider's virtual nodes are shared");
    runtime::publish_event(&ctx.recorder, event, purchase.object_ref(&()));
}

/// Condition reasons that stop a peering until a person acts on the
/// configuration (a cluster whose Liqo says it is another cluster).
const REFUSALS: [&str; 2] = ["ClusterIDMismatch", "ClusterIDUnreadable"];

/// A Warning Event, with the condition's reason and message, for each
/// condition that now carries a refusal it did not carry before (the
/// phase does not change: the Purchase keeps waiting, as a fixed flag or
/// ConfigMap lets it go on).
fn publish_refusals(
    ctx: &Context,
    purchase: &Purchase,
    before: &[crate::model::Condition],
    after: &[crate::model::Condition],
) {
    for condition in after {
        let new = REFUSALS.contains(&condition.reason.as_str())
            && !before
                .iter()
                .any(|b| b.type_ == condition.type_ && b.reason == condition.reason);
        if new {
            let event = Event {
                type_: EventType::Warning,
                reason: condition.reason.clone(),
                note: Some(runtime::note(&condition.message)),
                action: "Reconcile".to_string(),
                secondary: None,
            };
            tracing::warn!(reason = %condition.reason, message = %condition.message, "peering refused");
            runtime::publish_event(&ctx.recorder, event, purchase.object_ref(&()));
        }
    }
}

fn publish_event(ctx: &Context, purchase: &Purchase, from: &str, assessment: &Assessment) {
    let ready = assessment
        .conditions
        .iter()
        .find(|c| c.type_ == decision::READY);
    let event = Event {
        type_: if assessment.phase.is_bad() {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: ready
            .map(|c| c.reason.clone())
            .unwrap_or_else(|| assessment.phase.to_string()),
        // The same arrival says the same thing (a repeat is counted on one
        // Event); where it came from is in the log.
        note: Some(runtime::note(&format!(
            "{}: {}",
            assessment.phase,
            ready.map(|c| c.message.as_str()).unwrap_or_default()
        ))),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    tracing::info!(from, to = %assessment.phase, "phase changed");
    runtime::publish_event(&ctx.recorder, event, purchase.object_ref(&()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PurchaseSpec;

    #[test]
    fn a_status_write_asks_for_no_round_a_spec_change_or_deletion_does() {
        let mut purchase = Purchase::new("p", PurchaseSpec::default());
        purchase.metadata.generation = Some(1);
        let first = asks_for_a_round(&purchase);
        purchase.status = Some(PurchaseStatus {
            phase: "Ready".into(),
            ..PurchaseStatus::default()
        });
        purchase.metadata.resource_version = Some("7".into());
        assert_eq!(asks_for_a_round(&purchase), first);
        let mut changed = purchase.clone();
        changed.metadata.generation = Some(2);
        assert_ne!(asks_for_a_round(&changed), first);
        let mut finalized = purchase.clone();
        finalized.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
        assert_ne!(asks_for_a_round(&finalized), first);
        let mut deleted = purchase;
        deleted.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        );
        assert_ne!(asks_for_a_round(&deleted), first);
    }
}
