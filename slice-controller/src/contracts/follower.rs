//! The polling task: asks the catalog for the provider's active contracts
//! every `--contracts-poll-interval` with the last `ETag`, publishes a new
//! [`ContractBook`] when they changed, and notifies the consumers whose
//! contracts changed (the controller reconciles them at once). While the
//! catalog cannot be reached the last book stays in force: decisions go on
//! from it, one WARN marks the outage (and one INFO its end), the
//! `slice_controller_catalog_reachable` gauge reads 0 and `/readyz` says so.

use std::sync::Arc;
use std::time::Duration;

use resource_reader::{Notification, NotificationStream, Notifier};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use catalog_client::contracts::Listing;

use super::book::{self, ContractBook};
use super::CatalogClient;
use crate::metrics::Metrics;

/// How the follower polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerSettings {
    /// `--contracts-poll-interval`.
    pub interval: Duration,
}

/// The contracts as last read, shared with the controller; cheap to clone.
#[derive(Clone)]
pub struct Contracts {
    book: watch::Receiver<Option<Arc<ContractBook>>>,
    notifier: Arc<Notifier>,
}

impl std::fmt::Debug for Contracts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contracts")
            .field("loaded", &self.book.borrow().is_some())
            .finish_non_exhaustive()
    }
}

impl Contracts {
    /// The last book read; None until the catalog first answered.
    pub fn current(&self) -> Option<Arc<ContractBook>> {
        self.book.borrow().clone()
    }

    /// `Cluster(consumer)` whenever that consumer's contracts change
    /// (`All` when the first book arrives).
    pub fn subscribe(&self) -> NotificationStream {
        self.notifier.subscribe()
    }

    /// Follow the catalog through `client` until `shutdown`.
    pub fn follow(
        client: CatalogClient,
        settings: FollowerSettings,
        metrics: Metrics,
        shutdown: CancellationToken,
    ) -> Self {
        let (tx, book) = watch::channel(None);
        let notifier = Arc::new(Notifier::new());
        let span = tracing::info_span!("contracts", provider = %client.cluster_id());
        tokio::spawn(
            poll(client, settings, metrics, tx, notifier.clone(), shutdown).instrument(span),
        );
        Contracts { book, notifier }
    }
}

async fn poll(
    mut client: CatalogClient,
    settings: FollowerSettings,
    metrics: Metrics,
    tx: watch::Sender<Option<Arc<ContractBook>>>,
    notifier: Arc<Notifier>,
    shutdown: CancellationToken,
) {
    let mut etag: Option<String> = None;
    // None before the first answer; then whether the last poll failed.
    let mut outage: Option<bool> = None;
    let provider = client.cluster_id().to_string();
    loop {
        // Read as JSON values, then one by one: a contract this build
        // cannot read is left out instead of failing the whole listing.
        match client
            .active_contracts_as::<serde_json::Value>(etag.as_deref())
            .await
        {
            Ok(listing) => {
                if outage == Some(true) {
                    tracing::info!("the catalog answers again; contracts followed anew");
                }
                outage = Some(false);
                metrics.set_catalog_reachable(true);
                if let Listing::Contracts {
                    etag: tag,
                    contracts,
                } = listing
                {
                    let (contracts, skipped) = book::read(contracts);
                    for s in skipped {
                        tracing::warn!(contract = %s.id, why = %s.why, "contract left out: it cannot be read");
                    }
                    let next = ContractBook::new(&provider, &contracts);
                    let previous = tx.borrow().clone();
                    metrics.set_contracts(next.contracts);
                    let changed = previous.as_ref().map(|p| p.changed(&next));
                    tracing::debug!(contracts = next.contracts, "contracts read");
                    tx.send_replace(Some(Arc::new(next)));
                    match changed {
                        None => notifier.notify(Notification::All),
                        Some(consumers) => {
                            for consumer in consumers {
                                tracing::info!(%consumer, "contracts changed; reconciling the consumer");
                                notifier.notify(Notification::Cluster(consumer));
                            }
                        }
                    }
                    etag = tag;
                }
            }
            Err(error) => {
                if outage != Some(true) {
                    let known = tx.borrow().as_ref().map_or(0, |b| b.contracts);
                    tracing::warn!(%error, known_contracts = known, "cannot read contracts from the catalog; deciding from the last known ones until it answers");
                }
                outage = Some(true);
                metrics.set_catalog_reachable(false);
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(settings.interval) => {}
        }
    }
}
