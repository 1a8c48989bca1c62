//! The isolation loop, while this replica leads: a pass reads the
//! namespaces, Configurations and NetworkPolicies, decides
//! ([`render::plan`]) and writes ([`cluster::apply`]). A pass runs at the
//! start, whenever one of those three kinds changes (watches used as
//! triggers only; changes that arrive together make one pass), after a
//! failure (backed off), and every `--isolation-resync`.

use std::collections::BTreeSet;
use std::time::Duration;

use controller_core::liqo::CONFIGURATION;
use controller_core::retry;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DynamicObject};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::cluster;
use super::render::{self, Settings};
use crate::metrics::Metrics;

/// What a pass found (counted in the metrics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Consumers whose namespaces carry the isolation policy.
    pub consumers: usize,
    /// Policies in place after the pass.
    pub policies: usize,
}

/// Run passes until `stop`.
pub async fn run(
    client: Client,
    settings: Settings,
    resync: Duration,
    metrics: Metrics,
    stop: CancellationToken,
) {
    let span = tracing::info_span!("isolation");
    async move {
        tracing::info!(
            protected = ?settings.protected,
            internet_egress = settings.internet_egress,
            "tenant isolation started"
        );
        let mut changes = triggers(&client).boxed();
        let mut backoff = retry::api_backoff();
        let mut failures = retry::Failures::new("keep tenants isolated");
        let mut last_skipped: BTreeSet<String> = BTreeSet::new();
        loop {
            let took = std::time::Instant::now();
            let wait = match pass(&client, &settings, &mut last_skipped).await {
                Ok(result) => {
                    failures.succeeded();
                    backoff.reset();
                    tracing::debug!(took = ?took.elapsed(), "isolation pass");
                    metrics.isolation_policies.set(result.policies as i64);
                    metrics.isolation_consumers.set(result.consumers as i64);
                    resync
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
                next = changes.next() => {
                    if next.is_none() {
                        // The watches never end; should they, passes go on
                        // at the resync interval.
                        changes = futures::stream::pending().boxed();
                    }
                    // Whatever else is already waiting joins this pass.
                    while let Some(Some(_)) = changes.next().now_or_never() {}
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
    last_skipped: &mut BTreeSet<String>,
) -> Result<Outcome, cluster::IsolationError> {
    let (observed, owned) = cluster::observe(client, &settings.protected).await?;
    let plan = render::plan(&observed, settings);
    // Said once while it lasts, not every pass.
    let skipped: BTreeSet<String> = plan
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.what, s.why))
        .collect();
    for s in skipped.difference(last_skipped) {
        tracing::warn!("not rendered: {s}");
    }
    *last_skipped = skipped;
    let written = cluster::apply(client, &plan, owned).await?;
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
    Ok(Outcome {
        consumers: plan.tenants.len(),
        policies: plan.policies.len(),
    })
}

/// One item per change of a namespace, a Configuration or a
/// NetworkPolicy, each watch backed off and its failures logged once.
fn triggers(client: &Client) -> impl Stream<Item = ()> + Send {
    fn touched<S, K>(stream: S, what: &'static str) -> impl Stream<Item = ()> + Send
    where
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
        K: Send,
    {
        retry::logged_watch(stream, what)
            .touched_objects()
            .filter_map(|r| async move { r.ok().map(|_| ()) })
    }
    let config = watcher::Config::default;
    futures::stream::select_all([
        touched(
            watcher(Api::<Namespace>::all(client.clone()), config()),
            "watch namespaces",
        )
        .boxed(),
        touched(
            watcher(
                Api::<DynamicObject>::all_with(client.clone(), &CONFIGURATION.api_resource()),
                config(),
            ),
            "watch Configurations",
        )
        .boxed(),
        touched(
            watcher(Api::<NetworkPolicy>::all(client.clone()), config()),
            "watch NetworkPolicies",
        )
        .boxed(),
    ])
}
