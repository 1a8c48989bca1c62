//! The isolation loop, while this replica leads: a pass reads the
//! namespaces, Configurations, NetworkPolicies, NamespaceOffloadings and
//! ShadowEndpointSlices, decides ([`render::plan`]) and writes
//! ([`cluster::apply`]). A pass runs at the start, whenever one of those
//! kinds changes (watches used as triggers only; changes that arrive
//! together make one pass; of the ShadowEndpointSlices, only those that
//! carry or carried Liqo's direct-connection annotation, as the others
//! change with every endpoint and say nothing here), whenever
//! the buyers' own policies read from the catalog change (the contracts'
//! loop publishes them with each listing), after a
//! failure (backed off), and every `--isolation-resync`.
//!
//! The first pass waits, at most [`FIRST_LISTING_WAIT`], for the first
//! listing, so a restart does not take the buyers' policies down while the
//! catalog is read. After applying, each contract's report
//! ([`render::Plan::reports`]) is sent when it differs from the one the
//! contract carries and from the last one sent; a failed send is logged
//! and tried again by the next pass (after [`REPORT_RETRY`] at most).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use catalog_client::wire::TenantPolicyReport;
use catalog_client::Error as CatalogError;
use controller_core::liqo::{CONFIGURATION, NAMESPACE_OFFLOADING, SHADOW_ENDPOINT_SLICE};
use controller_core::{retry, runtime};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::cluster;
use super::render::{self, BuyerPolicies, Settings};
use super::report::SharedSession;
use crate::metrics::Metrics;

/// Longest the first pass waits for the first contract listing.
pub const FIRST_LISTING_WAIT: Duration = Duration::from_secs(30);
/// Longest wait before a failed report is sent again.
pub const REPORT_RETRY: Duration = Duration::from_secs(30);

/// The buyers' policies of the last contract listing read (None before
/// the first).
pub type Listing = watch::Receiver<Option<BuyerPolicies>>;

/// What a pass found (counted in the metrics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Consumers whose namespaces carry the isolation policy.
    pub consumers: usize,
    /// Policies in place after the pass.
    pub policies: usize,
    /// Buyers' policies applied and refused.
    pub buyer_applied: usize,
    pub buyer_refused: usize,
    /// Whether a report could not be sent (tried again soon).
    pub reports_pending: bool,
}

/// What the loop remembers between passes.
#[derive(Default)]
struct Memory {
    /// Said once while it lasts, not every pass.
    last_skipped: BTreeSet<String>,
    /// Per contract, the report last sent successfully.
    sent: BTreeMap<String, TenantPolicyReport>,
    /// Contracts whose report fails to go: warned once.
    failing: BTreeSet<String>,
}

/// Run passes until `stop`.
pub async fn run(
    client: Client,
    settings: Settings,
    resync: Duration,
    metrics: Metrics,
    mut listing: Listing,
    session: SharedSession,
    stop: CancellationToken,
) {
    let span = tracing::info_span!("isolation");
    async move {
        tracing::info!(
            protected = ?settings.protected,
            internet_egress = settings.internet_egress,
            "tenant isolation started"
        );
        let mut changes = triggers(&client, settings.direct_connections).boxed();
        let mut backoff = retry::api_backoff();
        let mut failures = retry::Failures::new("keep tenants isolated");
        let mut memory = Memory::default();
        let mut listing_open = true;
        if listing.borrow().is_none() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(FIRST_LISTING_WAIT) => {
                    tracing::info!(waited = ?FIRST_LISTING_WAIT, "no contract listing yet: isolating without the buyers' own policies until one is read");
                }
                _ = listing.changed() => {}
            }
        }
        loop {
            let took = std::time::Instant::now();
            let buyers = listing.borrow_and_update().clone().unwrap_or_default();
            let wait = match pass(&client, &settings, buyers, &session, &mut memory).await {
                Ok(result) => {
                    failures.succeeded();
                    backoff.reset();
                    tracing::debug!(took = ?took.elapsed(), "isolation pass");
                    metrics.isolation_policies.set(result.policies as i64);
                    metrics.isolation_consumers.set(result.consumers as i64);
                    metrics.isolation_buyer_applied.set(result.buyer_applied as i64);
                    metrics.isolation_buyer_refused.set(result.buyer_refused as i64);
                    if result.reports_pending {
                        resync.min(REPORT_RETRY)
                    } else {
                        resync
                    }
                }
                Err(error) => {
                    failures.failed(&error);
                    metrics.reconcile().count_failure("isolation");
                    backoff.next_delay()
                }
            };
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
                changed = async {
                    if listing_open {
                        listing.changed().await
                    } else {
                        std::future::pending().await
                    }
                } => {
                    // The contracts' loop gone (its term ended): the last
                    // listing stands.
                    listing_open = changed.is_ok();
                }
                next = changes.next() => {
                    if next.is_none() {
                        // The watches never end; should they, passes go on
                        // at the resync interval.
                        changes = futures::stream::pending().boxed();
                    }
                    // Whatever else is already waiting joins this pass.
                    runtime::take_ready(&mut changes);
                }
            }
        }
        tracing::info!("tenant isolation stopped");
    }
    .instrument(span)
    .await
}

async fn pass(
    client: &Client,
    settings: &Settings,
    buyers: BuyerPolicies,
    session: &SharedSession,
    memory: &mut Memory,
) -> Result<Outcome, cluster::IsolationError> {
    let (mut observed, owned) = cluster::observe(client, settings).await?;
    observed.buyer_policies = buyers;
    let mut plan = render::plan(&observed, settings);
    // Said once while it lasts, not every pass.
    let skipped: BTreeSet<String> = plan
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.what, s.why))
        .collect();
    for s in skipped.difference(&memory.last_skipped) {
        tracing::warn!("not rendered: {s}");
    }
    memory.last_skipped = skipped;
    let written = cluster::apply(client, &plan, owned).await?;
    // A buyer's policy whose NetworkPolicy the API server refused is not
    // applied.
    for report in plan.reports.values_mut() {
        not_written(report, &written.refused_policies);
    }
    for r in &written.refused {
        tracing::warn!("{r}");
    }
    if written.created + written.replaced + written.deleted > 0 {
        tracing::info!(
            created = written.created,
            replaced = written.replaced,
            deleted = written.deleted,
            consumers = plan.tenants.len(),
            "isolation policies written"
        );
    }
    let reports_pending = send_reports(&plan, &observed.buyer_policies, session, memory).await;
    Ok(Outcome {
        consumers: plan.tenants.len(),
        policies: plan.policies.len(),
        buyer_applied: plan.reports.values().map(|r| r.applied.len()).sum(),
        buyer_refused: plan.reports.values().map(|r| r.refused.len()).sum(),
        reports_pending,
    })
}

/// Move the applied policies of `report` whose NetworkPolicy could not be
/// written (`refused`: `<namespace>/<name>` → why) to its refused ones.
pub fn not_written(report: &mut TenantPolicyReport, refused: &BTreeMap<String, String>) {
    let (kept, lost): (Vec<_>, Vec<_>) = std::mem::take(&mut report.applied)
        .into_iter()
        .partition(|a| a.network_policies.iter().all(|n| !refused.contains_key(n)));
    report.applied = kept;
    for a in lost {
        let why: Vec<String> = a
            .network_policies
            .iter()
            .filter_map(|n| {
                refused
                    .get(n)
                    .map(|why| format!("NetworkPolicy {n}: {why}"))
            })
            .collect();
        report
            .refused
            .push(catalog_client::wire::tenant_policy::RefusedTenantPolicy {
                name: a.name,
                reason: why.join("; "),
            });
    }
}

/// Send each contract's report that the catalog does not hold yet;
/// whether one failed.
async fn send_reports(
    plan: &render::Plan,
    buyers: &BuyerPolicies,
    session: &SharedSession,
    memory: &mut Memory,
) -> bool {
    let held: BTreeMap<&str, Option<&TenantPolicyReport>> = buyers
        .values()
        .map(|b| (b.contract.as_str(), b.reported.as_ref()))
        .collect();
    memory.sent.retain(|id, _| plan.reports.contains_key(id));
    memory.failing.retain(|id| plan.reports.contains_key(id));
    let mut pending = false;
    for (contract, report) in &plan.reports {
        let on_contract = held.get(contract.as_str()).copied().flatten();
        if on_contract == Some(report) || memory.sent.get(contract) == Some(report) {
            continue;
        }
        let sent = session
            .lock()
            .await
            .report_network_policy(contract, report)
            .await;
        match sent {
            Ok(()) => {
                tracing::info!(%contract, revision = report.revision, applied = report.applied.len(), refused = report.refused.len(), "buyer's network policy reported");
                memory.failing.remove(contract);
                memory.sent.insert(contract.clone(), report.clone());
            }
            // Ended (or gone) since the listing: nothing to report to.
            Err(CatalogError::Ended(_)) | Err(CatalogError::NotFound(_)) => {
                memory.sent.insert(contract.clone(), report.clone());
            }
            Err(error) => {
                if memory.failing.insert(contract.clone()) {
                    tracing::warn!(%contract, %error, "cannot report the buyer's network policy; trying again next pass");
                }
                pending = true;
            }
        }
    }
    pending
}

/// One item per change of a namespace, a Configuration, a NetworkPolicy, a
/// NamespaceOffloading or (with `direct`) a ShadowEndpointSlice that
/// carries or carried Liqo's direct-connection annotation, each watch
/// backed off and its failures logged once.
fn triggers(client: &Client, direct: bool) -> impl Stream<Item = ()> + Send {
    let config = watcher::Config::default;
    let slices = if direct {
        let mut annotated = Annotated::default();
        retry::touches(
            watcher(
                Api::<DynamicObject>::all_with(
                    client.clone(),
                    &SHADOW_ENDPOINT_SLICE.api_resource(),
                ),
                config(),
            )
            .filter(move |event| std::future::ready(annotated.concerns(event))),
            "watch ShadowEndpointSlices",
        )
        .boxed()
    } else {
        futures::stream::pending().boxed()
    };
    futures::stream::select_all([
        slices,
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
            watcher(Api::<Namespace>::all(client.clone()), config()),
            "watch namespaces",
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
        retry::touches(
            watcher(Api::<NetworkPolicy>::all(client.clone()), config()),
            "watch NetworkPolicies",
        )
        .boxed(),
    ])
}

/// The ShadowEndpointSlices seen with Liqo's direct-connection
/// annotation, to tell which watch events concern isolation: one of an
/// annotated slice, or of one that was annotated (its annotation removed,
/// or it deleted). Errors and the watch's own markers pass, so the watch
/// is backed off and logged as the others.
#[derive(Debug, Default)]
struct Annotated {
    seen: BTreeSet<(String, String)>,
}

impl Annotated {
    fn concerns(&mut self, event: &Result<watcher::Event<DynamicObject>, watcher::Error>) -> bool {
        let (object, deleted) = match event {
            Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => (o, false),
            Ok(watcher::Event::Delete(o)) => (o, true),
            Ok(watcher::Event::Init) | Ok(watcher::Event::InitDone) | Err(_) => return true,
        };
        let key = (
            object.metadata.namespace.clone().unwrap_or_default(),
            object.metadata.name.clone().unwrap_or_default(),
        );
        let carries = object
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(render::direct::ANNOTATION));
        if carries && !deleted {
            self.seen.insert(key);
            true
        } else {
            // Gone, or its annotation removed: it concerns isolation if it
            // had one.
            self.seen.remove(&key) || carries
        }
    }
}

#[cfg(test)]
mod tests {
    use catalog_client::wire::tenant_policy::AppliedTenantPolicy;

    use super::*;

    #[test]
    fn only_slices_that_carry_or_carried_the_annotation_start_a_pass() {
        let slice = |annotated: bool| -> Result<watcher::Event<DynamicObject>, watcher::Error> {
            let mut o = DynamicObject::new("s", &SHADOW_ENDPOINT_SLICE.api_resource()).within("ns");
            if annotated {
                o.metadata.annotations = Some(std::collections::BTreeMap::from([(
                    render::direct::ANNOTATION.to_string(),
                    "{}".to_string(),
                )]));
            }
            Ok(watcher::Event::Apply(o))
        };
        let mut a = Annotated::default();
        assert!(!a.concerns(&slice(false)), "an ordinary slice's endpoints");
        assert!(a.concerns(&slice(true)), "the annotation appears");
        assert!(a.concerns(&slice(true)), "it changes");
        assert!(a.concerns(&slice(false)), "it is removed");
        assert!(!a.concerns(&slice(false)), "then an ordinary slice again");
        let Ok(watcher::Event::Apply(o)) = slice(true) else {
            unreachable!()
        };
        assert!(a.concerns(&Ok(watcher::Event::Delete(o))));
        assert!(a.concerns(&Ok(watcher::Event::InitDone)));
    }

    #[test]
    fn a_policy_the_api_server_refused_is_reported_refused() {
        let mut report = TenantPolicyReport {
            revision: 2,
            applied: vec![
                AppliedTenantPolicy {
                    name: "a".into(),
                    network_policies: vec!["ns/np-a".into()],
                },
                AppliedTenantPolicy {
                    name: "b".into(),
                    network_policies: vec!["ns/np-b".into()],
                },
            ],
            refused: Vec::new(),
        };
        let refused = BTreeMap::from([("ns/np-b".to_string(), "exists, not ours".to_string())]);
        not_written(&mut report, &refused);
        assert_eq!(report.applied.len(), 1);
        assert_eq!(report.applied[0].name, "a");
        assert_eq!(report.refused.len(), 1);
        assert_eq!(report.refused[0].name, "b");
        assert!(report.refused[0]
            .reason
            .contains("ns/np-b: exists, not ours"));
    }
}
