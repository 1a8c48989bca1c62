//! The controller's loop, while this replica leads: every pass reads the
//! provider's active contracts from the catalog, moves each wanted
//! consumer's peering user one step on ([`Cluster::ensure`]), attaches a
//! usable one's kubeconfig to that consumer's contracts only, and removes
//! the peering users of consumers left without a contract. A pass with a
//! user still on its way (certificate awaited) is followed by another
//! after `--retry`, otherwise after `--poll-interval`.
//!
//! While the catalog cannot be read, the last contracts read stand: users
//! are kept and renewed, none is removed (an outage is not the end of a
//! contract).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use catalog_client::contracts::Listing;
use catalog_client::{Error as CatalogError, Session};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cluster::{Cluster, ClusterError, Progress};
use crate::metrics::Metrics;
use crate::names::ConsumerId;
use crate::plan::{self, Wanted};

/// How often passes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// `--poll-interval`: between passes with nothing pending.
    pub poll: Duration,
    /// `--retry`: after a pass that left a user on its way or failed.
    pub retry: Duration,
    /// `--drain-tenant`: when a consumer's last contract ends, set its
    /// Tenant `Drained`, wait this long, and delete it, before its peering
    /// user goes. None: the Tenant is left to Liqo and liqoctl.
    pub drain: Option<Duration>,
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
}

/// Run passes until `stop`.
pub async fn run(
    cluster: Cluster,
    catalog: &mut Session,
    pacing: Pacing,
    metrics: Metrics,
    stop: CancellationToken,
) {
    let mut state = State::default();
    let provider = catalog.cluster_id().to_string();
    loop {
        let started = Instant::now();
        let span = tracing::info_span!("pass", %provider);
        let settled = pass(
            &cluster,
            catalog,
            &provider,
            &mut state,
            &metrics,
            pacing.drain,
        )
        .instrument(span)
        .await;
        metrics.observe_reconcile(started.elapsed());
        let wait = if settled { pacing.poll } else { pacing.retry };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// One pass; whether everything wanted is done.
async fn pass(
    cluster: &Cluster,
    catalog: &mut Session,
    provider: &str,
    state: &mut State,
    metrics: &Metrics,
    drain: Option<Duration>,
) -> bool {
    let fresh = match read_contracts(catalog, provider, state).await {
        Ok(fresh) => {
            if state.catalog_down {
                tracing::info!("the catalog answers again");
            }
            state.catalog_down = false;
            metrics.catalog_reachable.set(1);
            fresh
        }
        Err(error) => {
            if !state.catalog_down {
                tracing::warn!(%error, "cannot read the contracts; keeping the peering users of the last ones read");
            }
            state.catalog_down = true;
            metrics.catalog_reachable.set(0);
            metrics.reconcile().count_failure("catalog");
            false
        }
    };
    let Some(wanted) = state.wanted.clone() else {
        return false;
    };
    let mut settled = !state.catalog_down;
    let mut ready = 0;
    for (consumer, contracts) in &wanted.consumers {
        let span = tracing::info_span!("peering_user", %consumer);
        let progress = cluster.ensure(consumer).instrument(span.clone()).await;
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
    metrics.users.set(ready);
    if fresh {
        // Forget contracts that are no longer active.
        let active: BTreeSet<&String> = wanted.consumers.values().flatten().collect();
        state.attached.retain(|id, _| active.contains(id));
        match cluster.present().await {
            Ok(present) => {
                metrics.reconcile().set_reached_api();
                for consumer in plan::to_remove(&present, &wanted) {
                    let span = tracing::info_span!("peering_user", %consumer);
                    if let Some(grace) = drain {
                        let drained = drain_step(cluster, &consumer, grace, &mut state.draining)
                            .instrument(span.clone())
                            .await;
                        match drained {
                            Ok(true) => {}
                            Ok(false) => {
                                settled = false;
                                continue;
                            }
                            Err(error) => {
                                tracing::warn!(parent: &span, error = %controller_core::retry::causes(&error), "cannot drain the Tenant");
                                metrics.reconcile().count_failure(error.kind());
                                settled = false;
                                continue;
                            }
                        }
                    }
                    match cluster.remove(&consumer).instrument(span.clone()).await {
                        Ok(()) => {
                            metrics.removed.inc();
                        }
                        Err(error) => {
                            tracing::warn!(parent: &span, error = %controller_core::retry::causes(&error), "cannot remove the peering user");
                            metrics.reconcile().count_failure(error.kind());
                            settled = false;
                        }
                    }
                }
            }
            Err(error) => {
                tracing::warn!(error = %controller_core::retry::causes(&error), "cannot list the peering users");
                metrics.reconcile().count_failure(error.kind());
                settled = false;
            }
        }
    }
    settled
}

/// One step of draining `consumer`'s Tenants: mark each `Drained`, and
/// once `grace` has passed since, delete them. Whether none is left.
async fn drain_step(
    cluster: &Cluster,
    consumer: &ConsumerId,
    grace: Duration,
    draining: &mut BTreeMap<ConsumerId, Instant>,
) -> Result<bool, ClusterError> {
    let tenants = cluster.tenants(consumer).await?;
    if tenants.is_empty() {
        draining.remove(consumer);
        return Ok(true);
    }
    for (name, drained) in &tenants {
        if !drained {
            cluster.drain_tenant(consumer, name).await?;
        }
    }
    let since = *draining
        .entry(consumer.clone())
        .or_insert_with(Instant::now);
    if since.elapsed() < grace {
        return Ok(false);
    }
    for (name, _) in &tenants {
        cluster.delete_tenant(consumer, name).await?;
    }
    draining.remove(consumer);
    Ok(true)
}

/// Read the contracts into `state`; whether a listing was read this time
/// (true also when unchanged since the last).
async fn read_contracts(
    catalog: &mut Session,
    provider: &str,
    state: &mut State,
) -> Result<bool, CatalogError> {
    // Without a listing in hand, ask for one in full.
    let etag = state.wanted.as_ref().and(state.etag.as_deref());
    match catalog
        .active_contracts_as::<serde_json::Value>(etag)
        .await?
    {
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
                tracing::warn!(contract = %id, why = %why, "contract left out");
            }
            if state.wanted.as_ref() != Some(&wanted) {
                tracing::info!(consumers = wanted.consumers.len(), "contracts read");
            }
            state.wanted = Some(wanted);
            state.etag = etag;
            Ok(true)
        }
    }
}
