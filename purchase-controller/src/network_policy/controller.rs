//! The loop, while this replica leads: a pass reads the policies and what
//! they refer to, refines them ([`refine`]), writes this cluster's
//! NetworkPolicies ([`cluster::apply`]), puts each provider's document on
//! its contracts ([`Catalog::deliver`]) and the statuses. A pass runs at
//! the start, whenever a policy, a pod, a Service, a node, a
//! NamespaceOffloading, a Configuration or one of its NetworkPolicies
//! changes (watches used as triggers only; changes that arrive together
//! make one pass), after a failure (backed off), and every
//! the buyer's contracts change on the catalog's contract stream (a
//! provider's report, a contract come or gone), and every
//! `--network-policy-interval` all the same.
//!
//! With no policy at all, once a pass has removed what was rendered and
//! delivered before, nothing a pass reads can change its outcome: changes
//! of pods, Services, nodes, NamespaceOffloadings, Configurations and
//! contracts wake no pass (a policy created, one of its NetworkPolicies
//! touched, and the interval still do), so a cluster that writes no policy
//! pays no pass per Liqo step.
//!
//! The policies are read from a cache the policies' watch fills, not
//! listed per pass. Until that watch has listed them once, nothing else
//! runs: where the CRD is not installed the API server answers the list
//! 404 (kube-apiserver's `NotFound` "the server could not find the
//! requested resource"), and the watch alone retries, backed off up to
//! 30 s, instead of a pass per change of a pod, a Service or a node that
//! lists the policies to fail again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use controller_core::clock::now_rfc3339;
use controller_core::liqo::{CONFIGURATION, NAMESPACE_OFFLOADING};
use controller_core::retry;
use controller_core::runtime::{cached_watch, take_ready};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::Client;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::catalog::{Catalog, CatalogSettings};
use super::cluster;
use super::model::MultiClusterNetworkPolicy;
use super::refine::{self, MANAGED_BY, MANAGED_BY_LABEL};
use super::snapshot::{Dns, Snapshot};
use super::status::{self, Delivery, Told};
use catalog_client::contract_follower::FollowerOptions;

/// The loop's settings (the `--network-policy*` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// This consumer's cluster ID.
    pub consumer: String,
    pub domain: String,
    pub full_masquerade: BTreeSet<String>,
    pub dns: Option<Dns>,
    pub interval: Duration,
    /// `None`: providers are not told.
    pub catalog: Option<CatalogSettings>,
}

/// Run passes until `stop`.
pub async fn run(
    client: Client,
    settings: Settings,
    http: reqwest::Client,
    follower: FollowerOptions,
    stop: CancellationToken,
) {
    let span = tracing::info_span!("network_policies", domain = %settings.domain);
    async move {
        tracing::info!(
            catalog = settings.catalog.as_ref().map(|c| c.url.as_str()),
            full_masquerade = ?settings.full_masquerade,
            "multi-cluster network policies started"
        );
        let (policies, writer) = reflector::store::<MultiClusterNetworkPolicy>();
        let mut policy_changes = cached_watch(
            Api::<MultiClusterNetworkPolicy>::all(client.clone()),
            watcher::Config::default(),
            writer,
        )
        .filter_map(|r| async move { r.ok().map(|_| ()) })
        .boxed();
        if !policies_listed(&policies, &mut policy_changes, &stop).await {
            tracing::info!("multi-cluster network policies stopped");
            return;
        }
        tracing::info!("multi-cluster network policies listed");
        let mut catalog = settings
            .catalog
            .clone()
            .map(|c| Catalog::new(c, http, follower, stop.child_token()));
        let mut own = futures::stream::select(policy_changes, ours(&client)).boxed();
        let mut read = refs(&client).boxed();
        let mut backoff = retry::api_backoff();
        let mut failures = retry::Failures::new("refine multi-cluster network policies");
        'passes: loop {
            let (wait, idle) = match pass(&client, &settings, &policies, catalog.as_mut()).await {
                Ok(idle) => {
                    failures.succeeded();
                    backoff.reset();
                    (settings.interval, idle)
                }
                Err(error) => {
                    failures.failed(&error);
                    (backoff.next_delay().min(settings.interval), false)
                }
            };
            let next_pass = tokio::time::sleep(wait);
            tokio::pin!(next_pass);
            loop {
                let woken = tokio::select! {
                    _ = stop.cancelled() => break 'passes,
                    () = &mut next_pass => Wake::Interval,
                    () = contracts_changed(catalog.as_mut()) => Wake::Contracts,
                    next = own.next() => {
                        if next.is_none() {
                            own = futures::stream::pending().boxed();
                        }
                        take_ready(&mut own);
                        Wake::Own
                    }
                    next = read.next() => {
                        if next.is_none() {
                            read = futures::stream::pending().boxed();
                        }
                        take_ready(&mut read);
                        Wake::Read
                    }
                };
                if woken.wakes(idle) {
                    continue 'passes;
                }
            }
        }
        tracing::info!("multi-cluster network policies stopped");
    }
    .instrument(span)
    .await
}

/// Drive the policies' watch until its first list succeeded: `false` if
/// `stop` came first (or the watch ended). A missing CRD keeps this
/// waiting on the watch's backed-off retries alone.
async fn policies_listed(
    policies: &Store<MultiClusterNetworkPolicy>,
    changes: &mut (impl Stream<Item = ()> + Unpin),
    stop: &CancellationToken,
) -> bool {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return false,
            ready = policies.wait_until_ready() => return ready.is_ok(),
            next = changes.next() => {
                if next.is_none() {
                    return false;
                }
            }
        }
    }
}

/// The buyer's contracts changed on the catalog (never without a catalog).
async fn contracts_changed(catalog: Option<&mut Catalog>) {
    match catalog {
        Some(c) => c.changed().await,
        None => std::future::pending().await,
    }
}

/// What woke the loop between passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// `--network-policy-interval` (or the backoff after a failure).
    Interval,
    /// A policy, or a NetworkPolicy this controller manages.
    Own,
    /// What policies are refined against: pods, Services, nodes,
    /// NamespaceOffloadings, Configurations.
    Read,
    /// The buyer's contracts on the catalog.
    Contracts,
}

impl Wake {
    /// Whether it calls for a pass, `idle` meaning the last pass found no
    /// policy and left nothing rendered or delivered: then only a change
    /// of the policies or of ours, or the interval, can change an outcome.
    fn wakes(self, idle: bool) -> bool {
        !idle || matches!(self, Wake::Interval | Wake::Own)
    }
}

/// One pass; `Ok(true)`: there was no policy, and what was rendered and
/// delivered before is gone (idle until a policy comes).
async fn pass(
    client: &Client,
    settings: &Settings,
    policies: &Store<MultiClusterNetworkPolicy>,
    catalog: Option<&mut Catalog>,
) -> Result<bool, kube::Error> {
    let policies: Vec<MultiClusterNetworkPolicy> =
        policies.state().iter().map(|p| (**p).clone()).collect();
    let none = policies.is_empty();
    let observed = cluster::observe(client, policies).await?;
    let mut catalog = catalog;
    let (mut session, mut told) = match catalog.as_deref_mut() {
        None => (
            None,
            Told::NoCatalogCredentials(
                "no --network-policy-catalog and --network-policy-credentials".to_string(),
            ),
        ),
        Some(c) => match c.session(client).await {
            Ok(s) => (Some(s), Told::Sent),
            Err(why) => (None, Told::NoCatalogCredentials(why)),
        },
    };
    // The contracts from the follower the session's token started.
    if let (Some(c), true) = (catalog.as_deref_mut(), session.is_some()) {
        if let Err(e) = c.refresh() {
            told = Told::CatalogUnavailable(e.to_string());
            session = None;
        }
    }
    let providers = catalog
        .as_deref()
        .and_then(|c| c.providers(&settings.consumer))
        .unwrap_or(observed.purchased_from);
    let snapshot = Snapshot {
        consumer: settings.consumer.clone(),
        domain: settings.domain.clone(),
        providers: providers.clone(),
        full_masquerade: settings.full_masquerade.clone(),
        dns: settings.dns.clone(),
        ..observed.snapshot
    };
    let outcomes: Vec<(
        &MultiClusterNetworkPolicy,
        Result<refine::Rendered, refine::Refusal>,
    )> = observed
        .policies
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (p, refine::refine(p, &snapshot)))
        .collect();
    let desired: Vec<NetworkPolicy> = outcomes
        .iter()
        .filter_map(|(_, o)| o.as_ref().ok().map(|r| r.local.clone()))
        .collect();
    let applied = cluster::apply(client, &desired).await?;
    let documents = refine::documents(
        outcomes.iter().filter_map(|(_, o)| o.as_ref().ok()),
        &providers,
    );
    let mut deliveries = BTreeMap::new();
    if let (Some(c), Some(s)) = (catalog, session.as_mut()) {
        match c.deliver(s, &settings.consumer, &documents).await {
            Ok(d) => deliveries = d,
            Err(e) => told = Told::CatalogUnavailable(e.to_string()),
        }
    }
    let not_told = match &told {
        Told::Sent => None,
        Told::NoCatalogCredentials(why) => Some(format!("not told: {why}")),
        Told::CatalogUnavailable(why) => Some(format!(
            "not told for now (the catalog is unavailable): {why}"
        )),
    };
    if let Some(why) = not_told {
        for provider in &providers {
            deliveries.insert(provider.clone(), Delivery::NotTold(why.clone()));
        }
    }
    let now = now_rfc3339();
    let mut failed = None;
    for (policy, outcome) in &outcomes {
        let local = match outcome {
            Ok(r) => {
                let at = format!(
                    "{}/{}",
                    r.local.metadata.namespace.as_deref().unwrap_or_default(),
                    r.local.metadata.name.as_deref().unwrap_or_default()
                );
                applied.get(&at).cloned().unwrap_or(Ok(()))
            }
            Err(_) => Ok(()),
        };
        let next = status::status(
            policy,
            &settings.consumer,
            outcome,
            &local,
            &told,
            &deliveries,
            &now,
        );
        let before = policy.status.clone().unwrap_or_default();
        let ready = |s: &super::model::MultiClusterNetworkPolicyStatus| {
            s.conditions
                .iter()
                .find(|c| c.type_ == status::READY)
                .map(|c| (c.status.clone(), c.reason.clone()))
        };
        if ready(&before) != ready(&next) {
            let condition = next.conditions.iter().find(|c| c.type_ == status::READY);
            tracing::info!(
                policy = %policy.key(),
                ready = condition.map(|c| c.status.as_str()),
                reason = condition.map(|c| c.reason.as_str()),
                message = condition.map(|c| c.message.as_str()),
                "multi-cluster network policy"
            );
        }
        if let Err(e) = cluster::write_status(client, policy, &next).await {
            failed = Some(e);
        }
    }
    // Idle only once the providers were told, or there was nothing to tell.
    let delivered = !matches!(told, Told::CatalogUnavailable(_));
    failed.map_or(Ok(none && delivered), Err)
}

/// One item per change of what a pass refines the policies against (their
/// own watch fills the cache passes read), each watch backed off and its
/// failures logged once.
fn refs(client: &Client) -> impl Stream<Item = ()> + Send {
    let config = watcher::Config::default;
    futures::stream::select_all([
        retry::touches(
            watcher(Api::<Pod>::all(client.clone()), config()),
            "watch pods",
        )
        .boxed(),
        retry::touches(
            watcher(Api::<Service>::all(client.clone()), config()),
            "watch Services",
        )
        .boxed(),
        retry::touches(
            watcher(Api::<Node>::all(client.clone()), config()),
            "watch nodes",
        )
        .boxed(),
        retry::touches(
            watcher(
                Api::<DynamicObject>::all_with(
                    client.clone(),
                    &NAMESPACE_OFFLOADING.api_resource(),
                ),
                config(),
            ),
            "watch NamespaceOffloadings",
        )
        .boxed(),
        retry::touches(
            watcher(
                Api::<DynamicObject>::all_with(client.clone(), &CONFIGURATION.api_resource()),
                config(),
            ),
            "watch Configurations",
        )
        .boxed(),
    ])
}

/// One item per change of a NetworkPolicy this controller manages.
fn ours(client: &Client) -> impl Stream<Item = ()> + Send {
    let ours = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    retry::touches(
        watcher(
            Api::<NetworkPolicy>::all(client.clone()),
            watcher::Config::default().labels(&ours),
        ),
        "watch NetworkPolicies",
    )
}

#[cfg(test)]
mod tests {
    use super::Wake;

    #[test]
    fn with_no_policy_only_the_policies_or_the_interval_wake_a_pass() {
        assert!(Wake::Own.wakes(true));
        assert!(Wake::Interval.wakes(true));
        assert!(!Wake::Read.wakes(true), "a pod or a Liqo object changed");
        assert!(!Wake::Contracts.wakes(true), "a contract changed");
    }

    #[test]
    fn with_policies_every_change_wakes_a_pass() {
        for wake in [Wake::Own, Wake::Interval, Wake::Read, Wake::Contracts] {
            assert!(wake.wakes(false), "{wake:?}");
        }
    }
}
