//! The contracts' task: reads the provider's active contracts from the
//! [`ContractFollower`] (the catalog's contract change stream; polled every
//! `--contracts-poll-interval` only while the stream is unavailable) as
//! soon as they change, publishes a new [`ContractBook`], and notifies the
//! consumers whose contracts changed (the controller reconciles them at
//! once). It also reads them every `--contracts-poll-interval` (a resync;
//! nothing is notified when nothing changed). While the catalog cannot be
//! reached the follower keeps the last contracts: decisions go on from
//! them, one WARN marks the outage (and one INFO its end), the
//! `slice_controller_catalog_reachable` gauge reads 0 and `/readyz` says
//! so; `slice_controller_contracts_streamed` says whether they come on the
//! stream.

use std::sync::Arc;
use std::time::Duration;

use catalog_client::contract_follower::{ContractFollower, Source};
use catalog_client::contracts::Listing;
use resource_reader::{Notification, NotificationStream, Notifier};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::book::{self, ContractBook};
use crate::metrics::Metrics;

/// How the contracts are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerSettings {
    /// `--contracts-poll-interval`: the resync, and the follower's fallback
    /// poll.
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

    /// Follow `follower` (provider `provider`'s contracts) until
    /// `shutdown`.
    pub fn follow(
        follower: ContractFollower,
        provider: String,
        settings: FollowerSettings,
        metrics: Metrics,
        shutdown: CancellationToken,
    ) -> Self {
        let (tx, book) = watch::channel(None);
        let notifier = Arc::new(Notifier::new());
        let span = tracing::info_span!("contracts", %provider);
        tokio::spawn(
            read(
                follower,
                provider,
                settings,
                metrics,
                tx,
                notifier.clone(),
                shutdown,
            )
            .instrument(span),
        );
        Contracts { book, notifier }
    }
}

async fn read(
    mut follower: ContractFollower,
    provider: String,
    settings: FollowerSettings,
    metrics: Metrics,
    tx: watch::Sender<Option<Arc<ContractBook>>>,
    notifier: Arc<Notifier>,
    shutdown: CancellationToken,
) {
    let mut etag: Option<String> = None;
    // None before the first answer; then whether the catalog is out.
    let mut outage: Option<bool> = None;
    loop {
        let now = follower.current();
        metrics.set_contracts_streamed(now.source == Source::Stream);
        // Read as JSON values, then one by one: a contract this build
        // cannot read is left out instead of failing the whole listing.
        match follower.active_contracts_as::<serde_json::Value>(etag.as_deref()) {
            Ok(listing) => {
                // The follower keeps the last contracts through an outage;
                // its last error says the catalog does not answer.
                let reachable = now.last_error.is_none();
                match (outage, reachable) {
                    (Some(true), true) => {
                        tracing::info!("the catalog answers again; contracts followed anew")
                    }
                    (Some(false) | None, false) => {
                        let known = tx.borrow().as_ref().map_or(0, |b| b.contracts);
                        tracing::warn!(error = now.last_error.as_deref().unwrap_or_default(), known_contracts = known, "cannot read contracts from the catalog; deciding from the last known ones until it answers");
                    }
                    _ => {}
                }
                outage = Some(!reachable);
                metrics.set_catalog_reachable(reachable);
                if let Listing::Contracts {
                    etag: tag,
                    contracts,
                } = listing
                {
                    publish(&provider, contracts, &metrics, &tx, &notifier);
                    etag = tag;
                }
            }
            Err(error) => {
                if outage != Some(true) {
                    tracing::warn!(%error, "cannot read contracts from the catalog yet");
                }
                outage = Some(true);
                metrics.set_catalog_reachable(false);
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(settings.interval) => {}
            () = follower.changed() => {}
        }
    }
}

/// Publish the book of `contracts`, naming the consumers whose contracts
/// changed.
fn publish(
    provider: &str,
    contracts: Vec<serde_json::Value>,
    metrics: &Metrics,
    tx: &watch::Sender<Option<Arc<ContractBook>>>,
    notifier: &Notifier,
) {
    let (contracts, skipped) = book::read(contracts);
    for s in skipped {
        tracing::warn!(contract = %s.id, why = %s.why, "contract left out: it cannot be read");
    }
    let next = ContractBook::new(provider, &contracts);
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
}
