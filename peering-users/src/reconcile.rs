//! The controller's loop, while this replica leads: every pass reads the
//! provider's active contracts from the [`ContractFollower`] (the
//! catalog's contract change stream, polled only while the stream is
//! unavailable), moves each wanted consumer's peering user one step on
//! ([`Cluster::ensure`], `--concurrency` consumers at a time, from the
//! pass's lists of what exists, [`crate::survey::Survey`]), attaches a usable one's kubeconfig to that
//! consumer's contracts only, and takes down the side of consumers left
//! without a contract (Tenant, networking objects, peering user). A pass
//! runs as soon as the followed contracts change; a pass with a user still
//! on its way (its CSR to approve, its certificate awaited) is followed by
//! another as soon as one of this controller's CSRs changes (they are
//! watched) or after `--retry`, otherwise after `--poll-interval` (the
//! resync: certificates to renew, Kubernetes-side state changed by
//! others).
//!
//! While the catalog cannot be read, the follower keeps the last contracts
//! it learnt: users are kept and renewed, none is removed (an outage is not
//! the end of a contract).
//!
//! Each listing read also gives the isolation loop the buyers' own network
//! policies of the contracts the peering users serve
//! ([`crate::isolation::render::buyer::from_contracts`]), through a watch
//! channel: no second read of the catalog.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use catalog_client::contract_follower::{ContractFollower, FollowedContracts, Source};
use catalog_client::contracts::Listing;
use catalog_client::{Error as CatalogError, Session};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use futures::StreamExt;

use crate::cluster::{Cluster, ClusterError, Progress};
use crate::drain;
use crate::isolation::render::buyer::{self, BuyerPolicies};
use crate::metrics::Metrics;
use crate::names::ConsumerId;
use crate::plan::{self, Wanted};
use crate::survey::Survey;

/// How often passes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// `--poll-interval`: between passes with nothing pending (the
    /// resync: contracts arrive on the stream, a pass runs at each change).
    pub poll: Duration,
    /// `--retry`: after a pass that left a user on its way or failed.
    pub retry: Duration,
    /// `--drain-tenant`: when a consumer's last contract ends, set its
    /// Tenant `Drained` and wait, at most this long (`--drain-grace`), for
    /// Liqo to remove the consumer's replicas before deleting it. None:
    /// the Tenant is deleted straight away.
    pub drain: Option<Duration>,
    /// `--concurrency`: consumers moved on at once in a pass.
    pub concurrency: usize,
    /// `--max-consumers`, `--max-new-per-pass`.
    pub bounds: plan::Bounds,
}

/// What the loop remembers between passes.
#[derive(Default)]
struct State {
    etag: Option<String>,
    wanted: Option<Wanted>,
    /// Contract id → the CN of the certificate whose kubeconfig it was
    /// given (see [`plan::to_attach`]).
    attached: BTreeMap<String, String>,
    catalog_down: bool,
    /// Consumers whose Tenants were drained, and since when.
    draining: BTreeMap<ConsumerId, Instant>,
    /// Wanted consumers whose Tenants were looked at, since this process
    /// started, for a drain of ours to undo (see [`Cluster::activate_drained`]).
    undrained: BTreeSet<ConsumerId>,
    /// Contracts already reported as left out (a cluster ID that cannot
    /// name a peering user, P-18) or as naming a cluster ID another buyer's
    /// peering user serves (F2): said once, not every pass.
    reported: BTreeSet<String>,
    /// Consumers waiting for room (`--max-consumers`,
    /// `--max-new-per-pass`): said once when they start waiting.
    waiting: BTreeSet<ConsumerId>,
}

/// Run passes until `stop`: reads from `contracts`, writes (kubeconfigs
/// attached) through `catalog`.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    cluster: Cluster,
    mut contracts: ContractFollower,
    catalog: &mut Session,
    pacing: Pacing,
    metrics: Metrics,
    listing: watch::Sender<Option<BuyerPolicies>>,
    stop: CancellationToken,
) {
    let mut state = State::default();
    let provider = catalog.cluster_id().to_string();
    let mut csr_changes = cluster.csr_changes().boxed();
    loop {
        let started = Instant::now();
        let span = tracing::info_span!("pass", %provider);
        let read = contracts.current().generation;
        let settled = pass(
            &cluster, &contracts, catalog, &provider, &mut state, &metrics, pacing, &listing,
        )
        .instrument(span)
        .await;
        metrics.observe_reconcile(started.elapsed());
        let wait = if settled { pacing.poll } else { pacing.retry };
        let next_pass = tokio::time::sleep(wait);
        tokio::pin!(next_pass);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = &mut next_pass => break,
                () = contracts.contracts_changed_from(read, |now| show_source(&metrics, now)) => break,
                next = csr_changes.next() => {
                    if next.is_none() {
                        csr_changes = futures::stream::pending().boxed();
                    }
                    controller_core::runtime::take_ready(&mut csr_changes);
                    // What a user on its way waits for (its CSR approved,
                    // its certificate): go on now, not after --retry.
                    if !settled {
                        break;
                    }
                }
            }
        }
    }
}

/// The gauges saying where contracts come from: `catalog_reachable` (the
/// last read, stream or poll, worked) and `contracts_streamed`.
fn show_source(metrics: &Metrics, now: &FollowedContracts) {
    metrics.catalog_reachable.set(i64::from(now.reachable()));
    metrics
        .contracts_streamed
        .set(i64::from(now.source == Source::Stream));
}

/// One pass; whether everything wanted is done.
#[allow(clippy::too_many_arguments)]
async fn pass(
    cluster: &Cluster,
    contracts: &ContractFollower,
    catalog: &mut Session,
    provider: &str,
    state: &mut State,
    metrics: &Metrics,
    pacing: Pacing,
    listing: &watch::Sender<Option<BuyerPolicies>>,
) -> bool {
    let drain = pacing.drain;
    let now = contracts.current();
    show_source(metrics, &now);
    if now.contracts.is_some() && now.last_error.is_some() {
        // The catalog does not answer (the follower says so, once, in the
        // log): this pass goes on from the last contracts it learnt.
        metrics.reconcile().count_failure("catalog");
    }
    let fresh = match read_contracts(contracts, provider, state, listing) {
        Ok(fresh) => {
            if state.catalog_down {
                tracing::info!("the catalog answers again");
            }
            state.catalog_down = false;
            fresh
        }
        Err(error) => {
            // Only until the catalog first answered: then the follower
            // keeps the last contracts through an outage (and logs it).
            if !state.catalog_down {
                tracing::warn!(%error, "cannot read the contracts yet");
            }
            state.catalog_down = true;
            metrics.reconcile().count_failure("catalog");
            false
        }
    };
    let Some(wanted) = state.wanted.clone() else {
        return false;
    };
    let mut settled = !state.catalog_down;
    // Read every pass: what exists decides the room for new users, and
    // the lists spare each consumer's step reading its objects one by one.
    let survey = match cluster.survey().await {
        Ok(survey) => Some(survey),
        Err(error) => {
            tracing::warn!(error = %controller_core::retry::causes(&error), "cannot list the peering users");
            metrics.reconcile().count_failure(error.kind());
            settled = false;
            None
        }
    };
    let present = survey.as_ref().map(Survey::present);
    // Unknown: only the bound on new users applies this pass.
    let known = present.clone().unwrap_or_default();
    let (admitted, waiting) = plan::admit(&wanted, &known, pacing.bounds);
    metrics.waiting.set(waiting.len() as i64);
    for consumer in &waiting {
        if state.waiting.insert(consumer.clone()) {
            tracing::warn!(%consumer, max_consumers = pacing.bounds.total, max_new_per_pass = pacing.bounds.new_per_pass, max_consumers_per_buyer = pacing.bounds.per_buyer, "peering user waits for room: served once peering users are removed or within the next passes");
        }
    }
    state.waiting.retain(|c| waiting.contains(c));
    if !waiting.is_empty() {
        settled = false;
    }
    let mut ready = 0;
    // Read once a pass: Liqo's TLS compatibility mode decides the keys.
    let kind = if wanted.consumers.is_empty() {
        None
    } else {
        cluster.key_kind().await
    };
    // Each consumer's steps touch its own objects only: up to
    // `--concurrency` consumers are moved on at once, and each one's
    // outcome is acted on (attachments, the loop's state) as it comes.
    let work: Vec<_> = admitted
        .iter()
        .filter_map(|consumer| {
            let served = wanted.consumers.get(consumer)?;
            // Wanted again while its Tenants were drained (or, once after a
            // start, maybe drained by an earlier process): the drain is
            // undone, not only stopped.
            let activate =
                state.draining.contains_key(consumer) || !state.undrained.contains(consumer);
            Some((consumer, served, activate))
        })
        .collect();
    // Made here, not in a closure of the stream: a closure returning a
    // future that borrows defeats the compiler's proof that the pass is
    // `Send`.
    let steps: Vec<_> = work
        .into_iter()
        .map(|(consumer, served, activate)| {
            step(cluster, consumer, served, activate, kind, survey.as_ref())
        })
        .collect();
    let mut steps = futures::stream::iter(steps).buffer_unordered(pacing.concurrency.max(1));
    while let Some(Step {
        consumer,
        served,
        span,
        activated,
        progress,
    }) = steps.next().await
    {
        let contracts = &served.contracts;
        match activated {
            Some(Ok(_)) => {
                state.draining.remove(consumer);
                state.undrained.insert(consumer.clone());
            }
            Some(Err(error)) => {
                tracing::warn!(parent: &span, error = %controller_core::retry::causes(&error), "cannot activate the consumer's drained Tenants");
                metrics.reconcile().count_failure(error.kind());
                settled = false;
            }
            None => {}
        }
        if progress.is_ok() {
            metrics.reconcile().set_reached_api();
        }
        match progress {
            Ok(Progress::Ready {
                kubeconfig,
                common_name,
            }) => {
                ready += 1;
                for id in plan::to_attach(contracts, &state.attached, &common_name) {
                    match catalog
                        .attach_credentials(id, &kubeconfig)
                        .instrument(span.clone())
                        .await
                    {
                        Ok(_) => {
                            tracing::info!(parent: &span, contract = %id, %common_name, "kubeconfig attached to the contract");
                            metrics.attached.inc();
                            state.attached.insert(id.to_string(), common_name.clone());
                        }
                        // Ended since the listing: nothing to give it.
                        Err(CatalogError::Ended(_)) | Err(CatalogError::NotFound(_)) => {}
                        Err(error) => {
                            tracing::warn!(parent: &span, contract = %id, %error, "cannot attach the kubeconfig");
                            metrics.reconcile().count_failure("catalog");
                            settled = false;
                        }
                    }
                }
            }
            Ok(Progress::Pending(what)) => {
                tracing::debug!(parent: &span, what, "peering user on its way");
                settled = false;
            }
            Err(error) => {
                tracing::warn!(parent: &span, error = %controller_core::retry::causes(&error), "peering user step failed");
                metrics.reconcile().count_failure(error.kind());
                settled = false;
            }
        }
    }
    drop(steps);
    metrics.users.set(ready);
    if fresh {
        // Forget contracts that are no longer active.
        let active: BTreeSet<&String> = wanted
            .consumers
            .values()
            .flat_map(|s| &s.contracts)
            .collect();
        state.attached.retain(|id, _| active.contains(id));
        match present {
            Some(present) => {
                metrics.reconcile().set_reached_api();
                for consumer in plan::to_remove(&present, &wanted) {
                    let span = tracing::info_span!("peering_user", %consumer);
                    let done = teardown(cluster, &consumer, drain, &mut state.draining)
                        .instrument(span.clone())
                        .await;
                    match done {
                        Ok(true) => {
                            metrics.removed.inc();
                        }
                        Ok(false) => settled = false,
                        Err(error) => {
                            tracing::warn!(parent: &span, error = %controller_core::retry::causes(&error), "cannot take down the consumer's side");
                            metrics.reconcile().count_failure(error.kind());
                            settled = false;
                        }
                    }
                }
            }
            None => settled = false,
        }
    }
    settled
}

/// A consumer's step of a pass, and what came of it.
struct Step<'a> {
    consumer: &'a ConsumerId,
    served: &'a plan::Served,
    span: tracing::Span,
    /// Its drained Tenants activated, if that was asked.
    activated: Option<Result<(), ClusterError>>,
    progress: Result<Progress, ClusterError>,
}

/// Move `consumer`'s peering user one step on (first undoing a drain of
/// its Tenants when `activate`).
async fn step<'a>(
    cluster: &'a Cluster,
    consumer: &'a ConsumerId,
    served: &'a plan::Served,
    activate: bool,
    kind: Option<crate::identity::KeyKind>,
    survey: Option<&'a Survey>,
) -> Step<'a> {
    let span = tracing::info_span!("peering_user", %consumer);
    let activated = match activate {
        true => Some(
            cluster
                .activate_drained(consumer)
                .instrument(span.clone())
                .await
                .map(|_| ()),
        ),
        false => None,
    };
    let progress = cluster
        .ensure(consumer, &served.owner, kind, survey)
        .instrument(span.clone())
        .await;
    Step {
        consumer,
        served,
        span,
        activated,
        progress,
    }
}

/// One step of taking down `consumer`'s side once its last contract
/// ended, in `liqoctl unpeer`'s order — its Tenants (drained first with
/// `--drain-tenant`), then its networking objects — and its peering user
/// last, as its CSR and key are how a half-done teardown is found again
/// ([`Cluster::present`]). Whether it is done.
async fn teardown(
    cluster: &Cluster,
    consumer: &ConsumerId,
    drain: Option<Duration>,
    draining: &mut BTreeMap<ConsumerId, Instant>,
) -> Result<bool, ClusterError> {
    if !remove_tenants(cluster, consumer, drain, draining).await? {
        return Ok(false);
    }
    if cluster.network_still_used(consumer).await? {
        tracing::info!("networking kept: the consumer is also this cluster's provider");
    } else {
        cluster.remove_network(consumer).await?;
    }
    cluster.remove(consumer).await?;
    Ok(true)
}

/// One step towards `consumer` without Tenants: with `drain`, each is
/// first set `Drained` and deleted once Liqo removed the consumer's
/// replicas or `drain` ran out (see [`drain::step`]). Whether none is
/// left.
async fn remove_tenants(
    cluster: &Cluster,
    consumer: &ConsumerId,
    drain: Option<Duration>,
    draining: &mut BTreeMap<ConsumerId, Instant>,
) -> Result<bool, ClusterError> {
    let tenants = cluster.tenants(consumer).await?;
    if tenants.is_empty() {
        draining.remove(consumer);
        return Ok(true);
    }
    if let Some(grace) = drain {
        // Since this replica first saw the drain: a new leader waits anew.
        let since = *draining
            .entry(consumer.clone())
            .or_insert_with(Instant::now);
        let left = cluster.drain_left(consumer).await?;
        match drain::step(&tenants, left, since.elapsed(), grace) {
            drain::Step::Mark(names) => {
                for name in &names {
                    cluster.drain_tenant(consumer, name).await?;
                }
                return Ok(false);
            }
            drain::Step::Wait => return Ok(false),
            drain::Step::Delete { timed_out: true } => {
                tracing::warn!(left, ?grace, "--drain-grace ran out before Liqo removed the consumer's slices and namespace maps; deleting its Tenant anyway");
            }
            drain::Step::Delete { timed_out: false } => {}
        }
    }
    for (name, _) in &tenants {
        cluster.delete_tenant(consumer, name).await?;
    }
    draining.remove(consumer);
    Ok(true)
}

/// Read the followed contracts into `state`; whether a listing was read
/// this time (true also when unchanged since the last).
fn read_contracts(
    contracts: &ContractFollower,
    provider: &str,
    state: &mut State,
    listing: &watch::Sender<Option<BuyerPolicies>>,
) -> Result<bool, CatalogError> {
    // Without a listing in hand, ask for one in full.
    let etag = state.wanted.as_ref().and(state.etag.as_deref());
    match contracts.active_contracts_as::<serde_json::Value>(etag)? {
        Listing::NotModified => Ok(true),
        Listing::Contracts { etag, contracts } => {
            // One by one: a contract this build cannot read is left out,
            // not the whole listing.
            let mut read = Vec::with_capacity(contracts.len());
            for value in contracts {
                let id = value["id"].as_str().unwrap_or_default().to_string();
                match serde_json::from_value(value) {
                    Ok(c) => read.push(c),
                    Err(error) => {
                        tracing::warn!(contract = %id, %error, "contract left out: it cannot be read")
                    }
                }
            }
            let wanted = plan::wanted(provider, &read);
            for (id, why) in &wanted.skipped {
                if state.reported.insert(id.clone()) {
                    tracing::warn!(contract = %id, why = %why, "contract left out");
                }
            }
            for (id, consumer) in &wanted.conflicts {
                if state.reported.insert(id.clone()) {
                    tracing::warn!(contract = %id, %consumer, "contract left out: its consumer cluster ID's peering user serves another buyer's contracts, bought earlier; a peering user serves one buyer");
                }
            }
            // Forget contracts no longer listed (the set stays bounded by
            // the listing).
            let listed: BTreeSet<&str> = read.iter().map(|c| c.id.as_str()).collect();
            state.reported.retain(|id| listed.contains(id.as_str()));
            if state.wanted.as_ref() != Some(&wanted) {
                tracing::info!(consumers = wanted.consumers.len(), "contracts read");
            }
            // The buyers' policies of the contracts served (another buyer's
            // contract naming a served cluster ID has no say on its pods).
            let served: BTreeSet<&str> = wanted
                .consumers
                .values()
                .flat_map(|s| s.contracts.iter().map(String::as_str))
                .collect();
            let policies =
                buyer::from_contracts(read.iter().filter(|c| served.contains(c.id.as_str())));
            listing.send_if_modified(|last| {
                let changed = last.as_ref() != Some(&policies);
                if changed {
                    *last = Some(policies);
                }
                changed
            });
            state.wanted = Some(wanted);
            state.etag = etag;
            Ok(true)
        }
    }
}
