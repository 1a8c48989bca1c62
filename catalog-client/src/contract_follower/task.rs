//! The follower task: the stream while it works, polls while it does not,
//! every outcome published to the handles through a watch channel.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lines::{Line, LineBuffer};
use super::state::ContractSet;
use super::stream::{self, Refusal};
use super::{FollowedContracts, FollowerOptions, Source};
use crate::contracts::{Listing, MAX_LISTING_BYTES};
use crate::session::Session;
use edge::backoff::Backoff;

/// Follow until `shutdown`.
pub(super) async fn run(
    session: Session,
    options: FollowerOptions,
    sender: watch::Sender<Arc<FollowedContracts>>,
    shutdown: CancellationToken,
) {
    let mut follower = Follower {
        session,
        options,
        sender,
        set: ContractSet::new(),
        generation: 0,
        source: Source::Connecting,
        last_error: None,
        warned_stream: None,
        warned_poll: None,
        poll_etag: None,
        next_poll: None,
    };
    tokio::select! {
        () = shutdown.cancelled() => tracing::debug!("the contract follower stops"),
        () = follower.follow() => {}
    }
}

/// How a stream that was open ended.
enum Ended {
    /// Never opened: refused or unreachable.
    Refused(Refusal),
    /// Opened and then lost (silent, broken, unreadable).
    Lost(String),
    /// The catalog closed it (its token expired, or it shuts down).
    Closed,
}

struct Follower {
    session: Session,
    options: FollowerOptions,
    sender: watch::Sender<Arc<FollowedContracts>>,
    set: ContractSet,
    generation: u64,
    source: Source,
    last_error: Option<String>,
    /// The last stream and poll failures logged at WARN: the same failure
    /// again is not logged again.
    warned_stream: Option<String>,
    warned_poll: Option<String>,
    poll_etag: Option<String>,
    /// While polling: when the next poll is due.
    next_poll: Option<Instant>,
}

impl Follower {
    async fn follow(&mut self) {
        let mut retry = self.options.retry.clone();
        loop {
            match self.stream(&mut retry).await {
                Ended::Refused(refusal) => {
                    if refusal.bad_resume {
                        tracing::info!(reason = %refusal.reason, since = self.set.seq(), "the catalog refused to resume the contract stream; the next connect takes a snapshot (the contracts held stay until then)");
                        self.set.forget_position();
                    }
                    self.stream_failed(&refusal.reason);
                    if self.source != Source::Polling {
                        tracing::info!(reason = %refusal.reason, every = ?self.options.fallback_poll, "the contract stream is unavailable: polling the contracts until it is back");
                        self.source = Source::Polling;
                        self.next_poll = Some(Instant::now());
                        self.publish(false);
                    }
                }
                Ended::Lost(reason) => self.stream_failed(&reason),
                Ended::Closed => {
                    tracing::debug!("the catalog closed the contract stream; resuming it")
                }
            }
            self.wait_polling(retry.next_delay()).await;
        }
    }

    /// Wait `delay` before the next stream attempt, polling whenever a
    /// poll is due meanwhile.
    async fn wait_polling(&mut self, delay: std::time::Duration) {
        let retry_at = Instant::now() + delay;
        loop {
            if let Some(due) = self.next_poll.filter(|&due| due <= Instant::now()) {
                self.poll().await;
                // From when it was due, not when it ended: a slow catalog
                // does not stretch the interval.
                self.next_poll = Some((due + self.options.fallback_poll).max(Instant::now()));
            }
            let wake = self.next_poll.map_or(retry_at, |due| due.min(retry_at));
            tokio::time::sleep_until(wake).await;
            if Instant::now() >= retry_at {
                return;
            }
        }
    }

    /// One stream: open it (resuming when a position is known), apply its
    /// lines until it ends.
    async fn stream(&mut self, retry: &mut Backoff) -> Ended {
        let idle = self.options.idle_timeout;
        let since = self.set.since();
        let mut response = match stream::open(&mut self.session, since, idle).await {
            Ok(response) => response,
            Err(refusal) => return Ended::Refused(refusal),
        };
        tracing::debug!(?since, "contract stream open");
        let mut buffer = LineBuffer::new(MAX_LISTING_BYTES);
        let mut first = true;
        loop {
            let chunk = match tokio::time::timeout(idle, response.chunk()).await {
                Err(_) => {
                    return Ended::Lost(format!(
                        "the contract stream was silent for {idle:?} (heartbeats expected)"
                    ))
                }
                Ok(Err(e)) => return Ended::Lost(stream::describe(&e)),
                Ok(Ok(None)) => return Ended::Closed,
                Ok(Ok(Some(chunk))) => chunk,
            };
            let lines = match buffer.push(&chunk) {
                Ok(lines) => lines,
                Err(e) => return Ended::Lost(e.to_string()),
            };
            for line in lines {
                let line: Line = match serde_json::from_slice(&line) {
                    Ok(line) => line,
                    Err(e) => {
                        // Reconnecting would be sent the same line again.
                        tracing::warn!(error = %e, "skipped an unreadable line of the contract stream");
                        continue;
                    }
                };
                if first {
                    first = false;
                    retry.reset();
                    self.streaming();
                }
                self.apply(line);
            }
        }
    }

    /// The stream answers: it is the source now, polling stops.
    fn streaming(&mut self) {
        match self.source {
            Source::Polling => {
                tracing::info!("the contract stream is back: polling stops")
            }
            Source::Connecting => tracing::info!("following the contract stream"),
            Source::Stream => {}
        }
        self.source = Source::Stream;
        self.next_poll = None;
        self.last_error = None;
        self.warned_stream = None;
        self.warned_poll = None;
        self.publish(false);
    }

    fn apply(&mut self, line: Line) {
        let changed = match line {
            Line::Snapshot {
                seq,
                contracts,
                reason,
            } => {
                if let Some(reason) = reason {
                    tracing::info!(%reason, seq, "the catalog could not resume the contract stream: its snapshot replaces the contracts");
                }
                self.set.snapshot(seq, contracts)
            }
            Line::Resumed { seq } => {
                tracing::debug!(seq, "contract stream resumed");
                self.set.position(seq);
                false
            }
            Line::Change { seq, contract } => self.set.change(seq, contract),
            Line::Heartbeat { seq } => {
                self.set.position(seq);
                false
            }
            Line::Unknown => false,
        };
        self.log_unreadable();
        self.publish(changed);
    }

    /// One fallback poll, conditional on the last one's `ETag`.
    async fn poll(&mut self) {
        let etag = self.poll_etag.clone();
        match self
            .session
            .active_contracts_as::<Value>(etag.as_deref())
            .await
        {
            Ok(listing) => {
                let changed = match listing {
                    Listing::NotModified => false,
                    Listing::Contracts { etag, contracts } => {
                        self.poll_etag = etag;
                        self.set.polled(contracts)
                    }
                };
                self.log_unreadable();
                if self.warned_poll.take().is_some() {
                    tracing::info!("polling the contracts works again");
                }
                // Polling works, the stream still does not: its refusal
                // is what is wrong now (None if it was only lost).
                self.last_error.clone_from(&self.warned_stream);
                self.publish(changed);
            }
            Err(e) => {
                let reason = format!("polling the contracts: {e}");
                if self.warned_poll.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(%reason, every = ?self.options.fallback_poll, "the contract poll failed");
                    self.warned_poll = Some(reason.clone());
                }
                self.last_error = Some(reason);
                self.publish(false);
            }
        }
    }

    /// A stream attempt failed: logged at WARN and published when it is a
    /// new failure (the same one at every retry is not news).
    fn stream_failed(&mut self, reason: &str) {
        if self.warned_stream.as_deref() == Some(reason) {
            tracing::debug!(%reason, "the contract stream is still unavailable");
            return;
        }
        tracing::warn!(%reason, since = ?self.set.since(), "the contract stream failed; the contracts held stay in force, retrying");
        self.warned_stream = Some(reason.to_string());
        self.last_error = Some(reason.to_string());
        self.publish(false);
    }

    fn log_unreadable(&mut self) {
        for e in self.set.take_unreadable() {
            tracing::warn!(error = %e, "a contract from the catalog cannot be followed");
        }
    }

    /// Tell the handles: always the position, and wake them when the
    /// contracts, the source or the error changed.
    fn publish(&mut self, contracts_changed: bool) {
        let fresh = if contracts_changed {
            self.generation += 1;
            self.set.contracts()
        } else {
            None
        };
        let (generation, source, seq, error) = (
            self.generation,
            self.source,
            self.set.seq(),
            &self.last_error,
        );
        self.sender.send_if_modified(|now| {
            let wake = fresh.is_some() || now.source != source || now.last_error != *error;
            if !wake && now.seq == seq {
                return false;
            }
            let now = Arc::make_mut(now);
            if let Some((contracts, raw)) = fresh {
                now.contracts = Some(contracts);
                now.raw = Arc::new(raw);
                now.generation = generation;
            }
            now.source = source;
            now.seq = seq;
            now.last_error.clone_from(error);
            wake
        });
    }
}
