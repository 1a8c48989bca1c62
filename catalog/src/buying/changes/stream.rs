//! One stream's body: its first line (a snapshot, or `resumed` and the
//! party's changes after `since`, read through the store's per-party
//! index), then the lines the fan-out queues for it, each sent only if it
//! is newer than the stream's position ([`crate::store::sequence::newer`]:
//! a record already sent at that sequence or later, by the catch-up or a
//! snapshot, is not sent again), and a heartbeat carrying the position
//! when nothing else was sent for a while. It ends when its token expires,
//! when the catalog shuts down, or when the fan-out dropped it as too
//! slow; its client then resumes with `?since=`.

use std::convert::Infallible;
use std::pin::Pin;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::Stream;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::time::{Instant, Interval, MissedTickBehavior, Sleep};
use tracing::Instrument;

use super::hub::{Line, Refused, Registration, BATCH};
use super::lines::{encode, ChangeLines};
use super::metrics::Outcome;
use super::query::{party_of, StreamQuery};
use super::ContractChanges;
use crate::buying::contracts::model::{party, Viewer};
use crate::buying::contracts::service;
use crate::buying::error::BuyError;
use crate::buying::store::Party as Whose;
use crate::http::ApiError;
use crate::store::sequence::newer;
use catalog_client::wire::contract_stream::ContractEvent;

/// A stream's state between two lines.
struct State {
    changes: ContractChanges,
    who: Viewer,
    whose: Whose,
    reg: Registration,
    /// The sequence up to which everything of the party was sent.
    pos: u64,
    /// Reading the party's changes after `since` (a resume) before
    /// following the fan-out.
    catching_up: bool,
    first: Option<Bytes>,
    heartbeat: Interval,
    expires: Pin<Box<Sleep>>,
    span: tracing::Span,
}

/// How a stream's opening went wrong: refusals as the API answers them.
fn refused(e: Refused) -> BuyError {
    match e {
        Refused::Identity(_) => BuyError::Api(ApiError::TooMany(e.to_string())),
        Refused::Process(_) | Refused::ShuttingDown => {
            BuyError::Api(ApiError::Unavailable(e.to_string()))
        }
    }
}

/// When a token expiring at `exp` (Unix seconds) stops being valid.
fn expiry(exp: i64) -> Instant {
    let left = exp.saturating_sub(chrono::Utc::now().timestamp()).max(0);
    Instant::now() + Duration::from_secs(u64::try_from(left).unwrap_or(0))
}

/// Open `who`'s stream as `q` asks: registered with the fan-out first (so
/// no change after its opening reads is missed), then its first line read.
/// Refusals and store failures are answered before anything is sent.
pub async fn open(
    changes: &ContractChanges,
    who: Viewer,
    q: StreamQuery,
    expires_at: i64,
) -> Result<impl Stream<Item = Result<Bytes, Infallible>> + 'static, BuyError> {
    let reg = changes.hub.register(who.clone()).map_err(refused)?;
    let span = tracing::info_span!("contract_stream", stream = reg.id(), subject = %who.subject, since = q.since);
    let store = &changes.buying.store;
    let head = store.contract_head().instrument(span.clone()).await?;
    let snapshot = |reason: Option<String>| async {
        let contracts = service::list(&changes.buying, &who, &q.filter())
            .instrument(span.clone())
            .await?;
        Ok::<_, BuyError>(encode(&ContractEvent::Snapshot {
            seq: head,
            contracts,
            reason,
        }))
    };
    let (first, catching_up) = match q.since {
        None => (snapshot(None).await?, false),
        Some(since) if since > head => {
            let reason = format!(
                "sequence {since} is ahead of this catalog's ({head}): its store was replaced or restored; this snapshot replaces what you held"
            );
            (snapshot(Some(reason)).await?, false)
        }
        Some(since) => (encode(&ContractEvent::Resumed { seq: since }), true),
    };
    let pos = match q.since {
        Some(since) if since <= head => since,
        _ => head,
    };
    let period = changes.heartbeat;
    let mut heartbeat = tokio::time::interval_at(Instant::now() + period, period);
    heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    span.in_scope(|| tracing::info!(head, resumed = catching_up, "contract change stream opened"));
    let state = State {
        changes: changes.clone(),
        whose: party_of(&who),
        who,
        reg,
        pos,
        catching_up,
        first: Some(first),
        heartbeat,
        expires: Box::pin(tokio::time::sleep_until(expiry(expires_at))),
        span,
    };
    Ok(futures::stream::unfold(state, |mut st| async move {
        let span = st.span.clone();
        let next = next(&mut st).instrument(span).await;
        next.map(|bytes| {
            st.changes.hub.metrics.lines_sent.inc_by(lines(&bytes));
            (Ok(bytes), st)
        })
    }))
}

/// Lines in `bytes`.
fn lines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64
}

/// The next bytes to send; None ends the stream.
async fn next(st: &mut State) -> Option<Bytes> {
    if let Some(first) = st.first.take() {
        return Some(first);
    }
    while st.catching_up {
        let batch = match st
            .changes
            .buying
            .store
            .changed_since(&st.whose, st.pos, BATCH)
            .await
        {
            Ok(b) => b,
            Err(error) => {
                tracing::warn!(%error, pos = st.pos, "contract change stream ends: cannot read the changes to resume (the client resumes again)");
                return None;
            }
        };
        st.catching_up = batch.len() >= BATCH;
        let now = crate::store::now();
        let mut out = BytesMut::new();
        for record in &batch {
            if let Some(p) = party(&record.record, &st.who) {
                if let Some(line) = ChangeLines::new(&st.changes.buying, record, now).line(p) {
                    out.extend_from_slice(&line);
                }
            }
            st.pos = st.pos.max(record.seq);
        }
        if !out.is_empty() {
            return Some(out.freeze());
        }
    }
    loop {
        tokio::select! {
            biased;
            _ = st.changes.hub.shutdown.cancelled() => {
                tracing::info!("contract change stream closed: the catalog is shutting down");
                st.changes.hub.metrics.count(Outcome::Shutdown);
                return None;
            }
            _ = &mut st.expires => {
                tracing::info!("contract change stream closed: its token expired (the client reconnects with a fresh one)");
                st.changes.hub.metrics.count(Outcome::TokenExpired);
                return None;
            }
            line = st.reg.rx.recv() => match line {
                Some(line) => {
                    if let Some(bytes) = take(&mut st.pos, line) {
                        st.heartbeat.reset();
                        return Some(bytes);
                    }
                }
                // Dropped by the fan-out (too slow, or the store went back).
                None => return None,
            },
            _ = st.heartbeat.tick() => return Some(heartbeat(st)),
        }
    }
}

/// `line`'s bytes if it is newer than `pos` (which it then advances).
fn take(pos: &mut u64, line: Line) -> Option<Bytes> {
    if newer(Some(*pos), line.seq) {
        *pos = line.seq;
        Some(line.bytes)
    } else {
        None
    }
}

/// What was queued, then a heartbeat at the position: the fan-out's
/// cursor is read before the queue is emptied, so every line up to it is
/// in the queue or already sent.
fn heartbeat(st: &mut State) -> Bytes {
    let cursor = st.changes.hub.cursor();
    let mut out = BytesMut::new();
    loop {
        match st.reg.rx.try_recv() {
            Ok(line) => {
                if let Some(bytes) = take(&mut st.pos, line) {
                    out.extend_from_slice(&bytes);
                }
            }
            Err(TryRecvError::Empty) => {
                st.pos = st.pos.max(cursor);
                break;
            }
            // Dropped: the position is what was sent.
            Err(TryRecvError::Disconnected) => break,
        }
    }
    out.extend_from_slice(&encode(&ContractEvent::Heartbeat { seq: st.pos }));
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64) -> Line {
        Line {
            seq,
            bytes: Bytes::from(format!("{seq}\n")),
        }
    }

    /// A line at or below the position (sent by the snapshot or the
    /// catch-up) is dropped; a newer one is taken and moves it.
    #[test]
    fn only_newer_lines_are_sent() {
        let mut pos = 5;
        assert!(take(&mut pos, line(3)).is_none());
        assert!(take(&mut pos, line(5)).is_none());
        assert_eq!(take(&mut pos, line(7)).as_deref(), Some(&b"7\n"[..]));
        assert_eq!(pos, 7);
        assert!(take(&mut pos, line(6)).is_none());
        assert_eq!(lines(b"a\nb\n"), 2);
    }
}
