//! The agent's loop: on start, on every notification from the chain and
//! every `resync` interval, read the resources the chain offers and make
//! the catalog's plan say the same.
//!
//! - **Debounce.** The first notification opens a window of `debounce`;
//!   every notification inside it is folded into one sync at its end, so a
//!   burst makes one read and at most one write, and a change reaches the
//!   catalog at most `debounce` (plus the write) after it happened.
//! - **Change detection.** A sync writes only if the resources differ from
//!   what the catalog was last seen to hold; a read that gives the same
//!   answer costs no request. The periodic resync compares with the
//!   catalog itself, repairing an edit made behind the agent's back.
//! - **Failures.** An unreachable chain or catalog is retried with backoff
//!   (a chain that comes back cuts the wait short: it sends a notification
//!   when it reconnects); a version conflict is retried at once with a
//!   fresh copy; an offer the catalog refuses is logged and left until the
//!   next change; refused credentials, someone else's offer, and a missing
//!   offer or plan the agent may not create stop the loop with an error.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use quantity::ResourceList;
use resource_reader::{ReadError, ResourceReader};
use tokio::time::Instant;
use tracing::Instrument;

use edge::backoff::Backoff;

use crate::config::Target;
use crate::offer::{self, Edit, OfferError};
use crate::{CatalogClient, CatalogError};

/// Timing of the loop.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Notifications within this window after the first make one sync.
    pub debounce: Duration,
    /// Compare with the catalog this often even without notifications.
    pub resync: Duration,
    /// Delays between retries while the chain or the catalog is down.
    pub backoff: Backoff,
    /// Version conflicts retried at once before backing off.
    pub max_conflicts: u32,
}

impl Default for SyncOptions {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(500),
            resync: Duration::from_secs(300),
            backoff: Backoff::default(),
            max_conflicts: 5,
        }
    }
}

/// Why the loop stopped: nothing retrying could fix.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Catalog(CatalogError),
    #[error(transparent)]
    Offer(OfferError),
    #[error("the resource chain stopped sending notifications")]
    ChainEnded,
}

/// Which side a retry waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Chain,
    Catalog,
}

/// How one sync attempt failed.
#[derive(Debug)]
enum Failure {
    /// Try again after a backoff.
    Retry(Side, String),
    /// The catalog refused this offer: log it, wait for the next change.
    Refused(String),
    /// Stop the agent.
    Fatal(SyncError),
}

impl From<CatalogError> for Failure {
    fn from(e: CatalogError) -> Self {
        match e {
            e if e.is_fatal() => Failure::Fatal(SyncError::Catalog(e)),
            CatalogError::Rejected { .. } => Failure::Refused(e.to_string()),
            e => Failure::Retry(Side::Catalog, e.to_string()),
        }
    }
}

/// Keeps one plan of one offer in step with a reader.
pub struct Agent {
    reader: Arc<dyn ResourceReader>,
    catalog: CatalogClient,
    target: Target,
    options: SyncOptions,
    /// What the catalog's plan was last seen to hold.
    published: Option<ResourceList>,
}

impl Agent {
    pub fn new(
        reader: Arc<dyn ResourceReader>,
        catalog: CatalogClient,
        target: Target,
        options: SyncOptions,
    ) -> Self {
        Self {
            reader,
            catalog,
            target,
            options,
            published: None,
        }
    }

    /// Run until `shutdown` completes (then `Ok`) or a fatal error.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), SyncError> {
        let span = tracing::info_span!(
            "sync",
            offer = %self.target.offer_id,
            plan = %self.target.plan_id,
            cluster_id = %self.catalog.cluster_id(),
        );
        async move {
            tokio::pin!(shutdown);
            // Subscribed before the first read, so no change can slip
            // between them.
            let mut notifications = self.reader.subscribe();
            let mut backoff = self.options.backoff.clone();
            let mut due = Some(Instant::now());
            let mut waiting_on: Option<Side> = None;
            let mut failures = 0u32;
            // Ask the catalog itself (not just the last value we wrote).
            let mut check_catalog = true;
            let mut resync = tokio::time::interval_at(
                Instant::now() + self.options.resync,
                self.options.resync,
            );
            resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let originator = match self.target.originator.as_str() {
                "" => "(any consumer)",
                id => id,
            };
            tracing::info!(originator, debounce = ?self.options.debounce, "keeping the plan up to date");

            loop {
                let at = due;
                let sync_due = async move {
                    match at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    () = &mut shutdown => return Ok(()),
                    notification = notifications.next() => {
                        let Some(notification) = notification else {
                            return Err(SyncError::ChainEnded);
                        };
                        if !notification.concerns(&self.target.originator) {
                            continue;
                        }
                        let window_end = Instant::now() + self.options.debounce;
                        due = Some(match (due, waiting_on) {
                            (None, _) => window_end,
                            // The chain is back: no need to sit out the backoff.
                            (Some(at), Some(Side::Chain)) => at.min(window_end),
                            (Some(at), _) => at,
                        });
                    }
                    _ = resync.tick() => {
                        check_catalog = true;
                        due.get_or_insert_with(Instant::now);
                    }
                    () = sync_due => {
                        due = None;
                        let attempt = self.sync_once(check_catalog);
                        let result = tokio::select! {
                            () = &mut shutdown => return Ok(()),
                            result = attempt => result,
                        };
                        match result {
                            Ok(()) => {
                                if failures > 0 {
                                    tracing::info!(failures, "caught up");
                                }
                                failures = 0;
                                waiting_on = None;
                                check_catalog = false;
                                backoff.reset();
                            }
                            Err(Failure::Retry(side, reason)) => {
                                failures += 1;
                                let delay = backoff.next_delay();
                                let what = match side {
                                    Side::Chain => "cannot read the resource chain",
                                    Side::Catalog => "cannot update the catalog",
                                };
                                tracing::warn!(%reason, retry_in = ?delay, failures, "{what}; retrying");
                                waiting_on = Some(side);
                                due = Some(Instant::now() + delay);
                                check_catalog = true;
                            }
                            Err(Failure::Refused(reason)) => {
                                tracing::error!(%reason, "the catalog refused the plan; waiting for the next change");
                                failures = 0;
                                waiting_on = None;
                                self.published = None;
                                check_catalog = true;
                                backoff.reset();
                            }
                            Err(Failure::Fatal(error)) => return Err(error),
                        }
                    }
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Read the chain and bring the catalog's plan in line with it.
    async fn sync_once(&mut self, check_catalog: bool) -> Result<(), Failure> {
        // Credentials first: refused ones must stop the agent even while
        // the chain is down.
        self.catalog.ensure_token().await?;
        let resources = self
            .reader
            .read(&self.target.originator)
            .await
            .map_err(|e| match e {
                ReadError::Unavailable(m) | ReadError::Internal(m) => {
                    Failure::Retry(Side::Chain, m)
                }
                ReadError::InvalidArgument(m) => {
                    Failure::Retry(Side::Chain, format!("the chain refused the request: {m}"))
                }
            })?;
        if !check_catalog && self.published.as_ref() == Some(&resources) {
            tracing::debug!("resources unchanged");
            return Ok(());
        }
        let mut conflicts = 0;
        loop {
            let current = self.catalog.get_offer(&self.target.offer_id).await?;
            let body = match offer::edit(current.as_ref(), &self.target, &resources) {
                Ok(Edit::Unchanged) => {
                    tracing::debug!(resources = %offer::describe(&resources), "the catalog is up to date");
                    self.published = Some(resources);
                    return Ok(());
                }
                Ok(Edit::Write(body)) => body,
                Err(e) if e.is_fatal() => return Err(Failure::Fatal(SyncError::Offer(e))),
                Err(e) => return Err(Failure::Retry(Side::Catalog, e.to_string())),
            };
            match self.catalog.put_offer(&self.target.offer_id, &body).await {
                Ok(written) => {
                    let before = current
                        .as_ref()
                        .and_then(|o| offer::plan_resources(o, &self.target.plan_id));
                    tracing::info!(
                        version = written.version,
                        created = written.created,
                        before = %before.as_ref().map(offer::describe).unwrap_or_else(|| "(no plan)".into()),
                        resources = %offer::describe(&resources),
                        "plan updated"
                    );
                    self.published = Some(resources);
                    return Ok(());
                }
                Err(CatalogError::Conflict(reason)) => {
                    conflicts += 1;
                    if conflicts > self.options.max_conflicts {
                        return Err(Failure::Retry(
                            Side::Catalog,
                            format!("the offer kept changing under us ({conflicts} conflicts): {reason}"),
                        ));
                    }
                    tracing::debug!(%reason, "version conflict; reading the offer again");
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}
