//! One subscriber as the publisher and the housekeeping see it: a small,
//! bounded outbox of shared frames that its connection drains.
//!
//! The publisher only ever pushes into outboxes (never waits on a socket);
//! the connection's body ([`super::body`]) takes frames out when its socket
//! has room. An outbox holds at most:
//! - in snapshot mode, one list (a newer one replaces an unsent older one:
//!   the subscriber only needs the latest);
//! - in delta mode, `--feed-queue` messages; one more means the subscriber
//!   fell behind;
//! - one pending pong, one pending ping, and once closing, the close frame
//!   (which drops everything else).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::conn::ConnFd;
use super::envelope::{self, Message};
use super::params::Mode;

/// A data message waiting in an outbox.
struct Queued {
    frame: Bytes,
    /// When the publisher received the change (for the latency metric).
    published: Instant,
}

/// What the connection should write next.
pub(crate) enum Next {
    /// A data message, with its publication time.
    Data(Bytes, Instant),
    /// A ping, pong or close frame.
    Control(Bytes),
    /// The close frame has been handed over: end the connection.
    End,
    /// Nothing to write; the waker is stored.
    Pending,
}

#[derive(Default)]
struct Outbox {
    data: VecDeque<Queued>,
    pong: Option<Bytes>,
    ping: bool,
    /// Set when closing: the close frame not yet handed over.
    close: Option<Bytes>,
    closing: bool,
    /// When the connection must be cut if it has not ended by then.
    cut_at: Option<Instant>,
    /// Since when data has been waiting without a message completing.
    waiting_since: Option<Instant>,
    last_heard: Option<Instant>,
    waker: Option<Waker>,
    /// The connection's socket, while its body is alive (see [`ConnFd`]).
    fd: Option<ConnFd>,
    ended: bool,
}

impl Outbox {
    /// Queue a data frame; the waker to wake once the lock is released.
    /// Starts the stall clock if nothing was waiting: the housekeeping
    /// measures how long data waits without a message completing.
    fn queue(&mut self, frame: Bytes, published: Instant) -> Option<Waker> {
        self.data.push_back(Queued { frame, published });
        self.waiting_since.get_or_insert_with(Instant::now);
        self.waker.take()
    }
}

/// A subscriber shared between its connection, the publisher and the
/// housekeeping.
pub(crate) struct Subscriber {
    pub id: u64,
    pub mode: Mode,
    pub filter_key: String,
    /// Takes compressed frames.
    pub deflate: bool,
    outbox: Mutex<Outbox>,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("id", &self.id)
            .field("mode", &self.mode)
            .field("filter", &self.filter_key)
            .finish_non_exhaustive()
    }
}

/// A subscriber's timers, for the housekeeping sweep.
pub(crate) struct Health {
    /// How long data has waited with no message completing.
    pub stalled_for: Option<Duration>,
    /// How long since the client last sent anything.
    pub silent_for: Duration,
}

impl Subscriber {
    pub fn new(
        id: u64,
        mode: Mode,
        filter_key: String,
        deflate: bool,
        fd: Option<ConnFd>,
        now: Instant,
    ) -> Self {
        Subscriber {
            id,
            mode,
            filter_key,
            deflate,
            outbox: Mutex::new(Outbox {
                fd,
                last_heard: Some(now),
                ..Outbox::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Outbox> {
        // Nothing in an outbox is left half-updated by a panic that matters
        // more than keeping the feed running.
        self.outbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wake(waker: Option<Waker>) {
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// A full list: replaces whatever data is waiting (in delta mode too:
    /// a list supersedes the deltas before it).
    pub fn push_list(&self, message: &Message, published: Instant) {
        let waker = {
            let mut o = self.lock();
            if o.closing {
                return;
            }
            o.data.clear();
            o.queue(message.frame(self.deflate), published)
        };
        Self::wake(waker);
    }

    /// A delta; false when the outbox already holds `cap` messages (the
    /// subscriber fell behind; nothing was queued).
    pub fn push_delta(&self, message: &Message, published: Instant, cap: usize) -> bool {
        let waker = {
            let mut o = self.lock();
            if o.closing {
                return true;
            }
            if o.data.len() >= cap {
                return false;
            }
            o.queue(message.frame(self.deflate), published)
        };
        Self::wake(waker);
        true
    }

    pub fn request_ping(&self) {
        let waker = {
            let mut o = self.lock();
            if o.closing {
                return;
            }
            o.ping = true;
            o.waker.take()
        };
        Self::wake(waker);
    }

    /// Answer the client's ping (only the latest one: RFC 6455 §5.5.3).
    pub fn push_pong(&self, payload: &[u8]) {
        let mut o = self.lock();
        if !o.closing {
            o.pong = Some(envelope::pong(payload));
        }
    }

    /// The client sent something: it is alive.
    pub fn heard(&self, now: Instant) {
        self.lock().last_heard = Some(now);
    }

    /// Start closing with `code`: everything waiting is dropped and the
    /// close frame goes next. The connection is cut if it has not ended by
    /// `cut_after` from now. False if it was already closing.
    pub fn close(&self, code: u16, reason: &str, cut_after: Duration) -> bool {
        let waker = {
            let mut o = self.lock();
            if o.closing {
                return false;
            }
            o.closing = true;
            o.data.clear();
            o.pong = None;
            o.ping = false;
            o.waiting_since = None;
            o.close = Some(envelope::close(code, reason));
            o.cut_at = Some(Instant::now() + cut_after);
            o.waker.take()
        };
        Self::wake(waker);
        true
    }

    /// What to write next; stores `waker` when there is nothing.
    pub fn next(&self, waker: &Waker) -> Next {
        let mut o = self.lock();
        if let Some(c) = o.close.take() {
            return Next::Control(c);
        }
        if o.closing {
            return Next::End;
        }
        if let Some(p) = o.pong.take() {
            return Next::Control(p);
        }
        if std::mem::take(&mut o.ping) {
            return Next::Control(envelope::ping());
        }
        if let Some(q) = o.data.pop_front() {
            return Next::Data(q.frame, q.published);
        }
        match &o.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => o.waker = Some(waker.clone()),
        }
        Next::Pending
    }

    /// The connection finished handing a data message to its socket.
    pub fn message_done(&self) {
        let mut o = self.lock();
        o.waiting_since = if o.data.is_empty() {
            None
        } else {
            Some(Instant::now())
        };
    }

    pub fn health(&self, now: Instant) -> Health {
        let o = self.lock();
        Health {
            stalled_for: o.waiting_since.map(|t| now.saturating_duration_since(t)),
            silent_for: o
                .last_heard
                .map(|t| now.saturating_duration_since(t))
                .unwrap_or_default(),
        }
    }

    pub fn is_closing(&self) -> bool {
        self.lock().closing
    }

    /// The connection's body is gone (so is, right after, its socket).
    pub fn detach(&self) {
        let mut o = self.lock();
        o.fd = None;
        o.ended = true;
        o.waker = None;
    }

    /// Whether a closing subscriber is done with: its connection ended, or
    /// (past its deadline) its socket was cut now. True means forget it.
    pub fn reap(&self, now: Instant) -> Reaped {
        let mut o = self.lock();
        if o.ended {
            return Reaped::Ended;
        }
        if o.cut_at.is_some_and(|t| now >= t) {
            // Cutting while holding the lock: `detach` (which runs before
            // the connection's socket is closed) waits for it, so the
            // descriptor is still this connection's.
            if let Some(fd) = o.fd.take() {
                fd.cut();
            }
            o.cut_at = None;
            return Reaped::Cut;
        }
        Reaped::Waiting
    }
}

/// See [`Subscriber::reap`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reaped {
    Ended,
    Cut,
    Waiting,
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn sub(mode: Mode) -> Subscriber {
        Subscriber::new(1, mode, String::new(), false, None, Instant::now())
    }

    /// A message whose payload is `text` (a delete of that id is one).
    fn msg(text: &str) -> Message {
        envelope::delete(0, text)
    }

    fn payload(frame: Bytes) -> String {
        let v: serde_json::Value = serde_json::from_slice(&frame[2..]).unwrap();
        v["id"].as_str().unwrap().to_string()
    }

    fn data(n: Next) -> Bytes {
        match n {
            Next::Data(b, _) => b,
            _ => panic!("expected data"),
        }
    }

    #[test]
    fn a_newer_list_replaces_an_unsent_one() {
        let s = sub(Mode::Snapshot);
        let (_, w) = waker();
        s.push_list(&msg("one"), Instant::now());
        s.push_list(&msg("two"), Instant::now());
        assert_eq!(payload(data(s.next(&w))), "two");
        assert!(matches!(s.next(&w), Next::Pending));
    }

    #[test]
    fn deltas_are_bounded_and_kept_in_order() {
        let s = sub(Mode::Delta);
        let (_, w) = waker();
        assert!(s.push_delta(&msg("a"), Instant::now(), 2));
        assert!(s.push_delta(&msg("b"), Instant::now(), 2));
        assert!(!s.push_delta(&msg("c"), Instant::now(), 2));
        assert_eq!(payload(data(s.next(&w))), "a");
        assert_eq!(payload(data(s.next(&w))), "b");
    }

    #[test]
    fn pushing_wakes_the_connection() {
        let s = sub(Mode::Delta);
        let (count, w) = waker();
        assert!(matches!(s.next(&w), Next::Pending));
        s.push_delta(&msg("a"), Instant::now(), 8);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn close_drops_the_rest_and_ends() {
        let s = sub(Mode::Delta);
        let (_, w) = waker();
        s.push_delta(&msg("a"), Instant::now(), 8);
        s.request_ping();
        assert!(s.close(1008, "too slow", Duration::from_secs(1)));
        assert!(!s.close(1001, "again", Duration::from_secs(1)));
        assert!(s.push_delta(&msg("b"), Instant::now(), 8));
        match s.next(&w) {
            Next::Control(c) => assert_eq!(c, envelope::close(1008, "too slow")),
            _ => panic!("expected the close frame"),
        }
        assert!(matches!(s.next(&w), Next::End));
    }

    #[test]
    fn stall_is_measured_until_a_message_completes() {
        let s = sub(Mode::Delta);
        let (_, w) = waker();
        let t0 = Instant::now();
        assert!(s.health(t0).stalled_for.is_none());
        s.push_delta(&msg("a"), t0, 8);
        let later = Instant::now() + Duration::from_secs(5);
        assert!(s.health(later).stalled_for.unwrap() >= Duration::from_secs(4));
        data(s.next(&w));
        s.message_done();
        assert!(s.health(later).stalled_for.is_none());
    }

    #[test]
    fn reaping_waits_for_the_deadline() {
        let s = sub(Mode::Snapshot);
        let now = Instant::now();
        assert_eq!(s.reap(now), Reaped::Waiting);
        s.close(1001, "bye", Duration::from_secs(1));
        assert_eq!(s.reap(now), Reaped::Waiting);
        // No socket to cut here, but the deadline passes all the same.
        assert_eq!(s.reap(now + Duration::from_secs(2)), Reaped::Cut);
        s.detach();
        assert_eq!(s.reap(now), Reaped::Ended);
    }
}
