//! The process's one fan-out: every open stream's slot, indexed by the
//! subject it reads for, and the task that reads each batch of changes
//! once (whatever the number of streams) and hands every record's line to
//! the slots of its parties only.
//!
//! A slot is a bounded queue: the fan-out never waits for a client. A
//! slot whose queue is full is dropped, which ends its stream; the client
//! resumes from the last sequence it read (`?since=`), so nothing is lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::lines::ChangeLines;
use super::metrics::{Outcome, StreamMetrics};
use crate::buying::contracts::model::{party, Party, Viewer};
use crate::buying::store::{Party as Whose, Sequenced};
use crate::buying::Buying;

/// Most records one read of the fan-out takes.
pub const BATCH: usize = 256;

/// How long the fan-out waits before reading again after a failed read.
const RETRY: Duration = Duration::from_millis(500);

/// A line queued for a stream, with the sequence of the record it shows.
#[derive(Debug, Clone)]
pub struct Line {
    pub seq: u64,
    pub bytes: Bytes,
}

/// An open stream as the fan-out sees it.
struct Slot {
    id: u64,
    viewer: Viewer,
    tx: mpsc::Sender<Line>,
}

/// Why a stream was not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("this identity already holds {0} open contract change streams (--contract-stream-per-identity); close one or follow with fewer")]
    Identity(u32),
    #[error("this catalog holds its most contract change streams ({0}, --contract-stream-max); retry later or on another catalog process")]
    Process(u32),
    #[error("the catalog is shutting down")]
    ShuttingDown,
}

/// The open slots, by subject (an administrator's also in `admins`: it
/// reads everyone's records).
#[derive(Default)]
struct Slots {
    next_id: u64,
    total: u32,
    by_subject: HashMap<String, Vec<Arc<Slot>>>,
    admins: Vec<Arc<Slot>>,
}

impl Slots {
    fn remove(&mut self, subject: &str, id: u64) -> bool {
        let Some(list) = self.by_subject.get_mut(subject) else {
            return false;
        };
        let before = list.len();
        list.retain(|s| s.id != id);
        let removed = list.len() < before;
        if list.is_empty() {
            self.by_subject.remove(subject);
        }
        self.admins.retain(|s| s.id != id);
        if removed {
            self.total -= 1;
        }
        removed
    }

    /// The slots that may see `r`: those reading for its consumer or its
    /// provider, and administrators; each once.
    fn candidates(&self, consumer: &str, provider: &str) -> Vec<Arc<Slot>> {
        let mut out: Vec<Arc<Slot>> = Vec::new();
        let mut add = |list: Option<&Vec<Arc<Slot>>>| {
            for s in list.into_iter().flatten() {
                if !out.iter().any(|o| o.id == s.id) {
                    out.push(s.clone());
                }
            }
        };
        add(self.by_subject.get(consumer));
        if provider != consumer {
            add(self.by_subject.get(provider));
        }
        add(Some(&self.admins));
        out
    }
}

/// See the module docs.
pub struct Hub {
    slots: Mutex<Slots>,
    /// Every record written up to here has been handed to the slots.
    cursor: AtomicU64,
    per_identity: u32,
    max: u32,
    queue: usize,
    pub metrics: StreamMetrics,
    pub shutdown: CancellationToken,
}

/// A registered stream: its queue, and its slot, dropped with it.
pub struct Registration {
    pub rx: mpsc::Receiver<Line>,
    guard: SlotGuard,
}

impl Registration {
    pub fn id(&self) -> u64 {
        self.guard.id
    }
}

struct SlotGuard {
    hub: Arc<Hub>,
    subject: String,
    id: u64,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.hub.unregister(&self.subject, self.id);
    }
}

impl Hub {
    pub fn new(
        per_identity: u32,
        max: u32,
        queue: usize,
        cursor: u64,
        metrics: StreamMetrics,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Hub {
            slots: Mutex::new(Slots::default()),
            cursor: AtomicU64::new(cursor),
            per_identity,
            max,
            queue: queue.max(1),
            metrics,
            shutdown,
        })
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every record written up to the answer has been handed to the slots
    /// open when it was: a stream whose queue is empty after reading this
    /// has sent everything of its party up to here.
    pub fn cursor(&self) -> u64 {
        self.cursor.load(Ordering::Acquire)
    }

    /// Open a slot for `viewer`, within the limits.
    pub fn register(self: &Arc<Self>, viewer: Viewer) -> Result<Registration, Refused> {
        if self.shutdown.is_cancelled() {
            return Err(Refused::ShuttingDown);
        }
        let mut slots = self.slots();
        let own = slots.by_subject.get(&viewer.subject).map_or(0, |l| l.len());
        if own >= self.per_identity as usize {
            self.metrics.count(Outcome::IdentityLimit);
            return Err(Refused::Identity(self.per_identity));
        }
        if slots.total >= self.max {
            self.metrics.count(Outcome::ProcessLimit);
            return Err(Refused::Process(self.max));
        }
        slots.next_id += 1;
        let id = slots.next_id;
        let (tx, rx) = mpsc::channel(self.queue);
        let subject = viewer.subject.clone();
        let admin = viewer.admin;
        let slot = Arc::new(Slot { id, viewer, tx });
        if admin {
            slots.admins.push(slot.clone());
        }
        slots
            .by_subject
            .entry(subject.clone())
            .or_default()
            .push(slot);
        slots.total += 1;
        self.metrics.streams.inc();
        drop(slots);
        Ok(Registration {
            rx,
            guard: SlotGuard {
                hub: self.clone(),
                subject,
                id,
            },
        })
    }

    fn unregister(&self, subject: &str, id: u64) {
        if self.slots().remove(subject, id) {
            self.metrics.streams.dec();
        }
    }

    /// Hand `record`'s line to the slots of its parties; a slot whose
    /// queue is full is dropped (its stream ends). The number of slots it
    /// went to.
    pub fn fan_out(&self, record: &Sequenced, line: &dyn Fn(Party) -> Option<Bytes>) -> usize {
        let r = &record.record;
        if r.contract.is_none() {
            return 0;
        }
        let candidates = self.slots().candidates(&r.consumer, &r.cluster_id);
        let mut sent = 0;
        let mut slow = Vec::new();
        for slot in candidates {
            let Some(p) = party(r, &slot.viewer) else {
                continue;
            };
            let Some(bytes) = line(p) else {
                continue;
            };
            match slot.tx.try_send(Line {
                seq: record.seq,
                bytes,
            }) {
                Ok(()) => sent += 1,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    slow.push((slot.viewer.subject.clone(), slot.id))
                }
                // Its stream ended; its guard removes it.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        for (subject, id) in slow {
            tracing::info!(stream = id, %subject, "contract change stream closed: its client fell too far behind (it resumes with ?since=)");
            self.metrics.count(Outcome::Slow);
            self.unregister(&subject, id);
        }
        sent
    }

    /// Every record up to `seq` has been handed out.
    fn advance(&self, seq: u64) {
        self.cursor.fetch_max(seq, Ordering::AcqRel);
    }

    /// The store went back (replaced or restored): drop every slot, so
    /// their clients reconnect and get a snapshot, and follow from `head`.
    fn restart(&self, head: u64) {
        let mut slots = self.slots();
        let dropped = slots.total;
        *slots = Slots {
            next_id: slots.next_id,
            ..Slots::default()
        };
        self.metrics.streams.set(0);
        self.cursor.store(head, Ordering::Release);
        drop(slots);
        tracing::warn!(
            head,
            dropped,
            "the contract sequence went back (the store was replaced or restored): every contract change stream closed"
        );
    }

    /// Open streams.
    pub fn open(&self) -> u32 {
        self.slots().total
    }
}

/// The fan-out task: after every change of the store's head (and at
/// start), read the records written after the cursor in batches, once for
/// the whole process, and hand each to its parties' slots; until
/// `hub.shutdown`.
pub async fn run(hub: Arc<Hub>, buying: Buying, mut writes: watch::Receiver<u64>) {
    loop {
        let head = *writes.borrow_and_update();
        if head < hub.cursor() {
            hub.restart(head);
        }
        // Nothing new (a notification already read through): no read.
        let failed = head > hub.cursor() && catch_up(&hub, &buying).await;
        let retry = async {
            if failed {
                tokio::time::sleep(RETRY).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = hub.shutdown.cancelled() => return,
            changed = writes.changed() => {
                if changed.is_err() {
                    // The store is gone: nothing more will be written.
                    hub.shutdown.cancelled().await;
                    return;
                }
            }
            _ = retry => {}
        }
    }
}

/// Read and hand out everything after the cursor; whether a read failed.
async fn catch_up(hub: &Hub, buying: &Buying) -> bool {
    let mut reads = 0u32;
    let failed = loop {
        let from = hub.cursor();
        hub.metrics.store_reads.inc();
        let batch = match buying.store.changed_since(&Whose::All, from, BATCH).await {
            Ok(b) => b,
            Err(error) => {
                tracing::warn!(%error, from, "the contract fan-out cannot read the changes; retrying");
                break true;
            }
        };
        reads += 1;
        let now = crate::store::now();
        for record in &batch {
            let lines = ChangeLines::new(buying, record, now);
            hub.fan_out(record, &|p| lines.line(p));
        }
        if let Some(last) = batch.last() {
            hub.advance(last.seq);
        }
        if batch.len() < BATCH {
            break false;
        }
    };
    if reads > 0 {
        hub.metrics.reads_per_batch.observe(f64::from(reads));
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buying::model::tests::bought;

    fn viewer(subject: &str, consumer: bool, provider: bool, admin: bool) -> Viewer {
        Viewer {
            subject: subject.into(),
            consumer,
            provider,
            admin,
        }
    }

    fn hub(per_identity: u32, max: u32, queue: usize) -> Arc<Hub> {
        Hub::new(
            per_identity,
            max,
            queue,
            0,
            StreamMetrics::default(),
            CancellationToken::new(),
        )
    }

    fn record(seq: u64) -> Sequenced {
        // Bought by alice from provider `prov`.
        Sequenced {
            seq,
            record: bought(crate::store::now(), 100),
        }
    }

    fn line(p: Party) -> Option<Bytes> {
        Some(Bytes::from(format!("{p:?}\n")))
    }

    /// Limits per identity and per process; a closed stream frees its place.
    #[test]
    fn limits_hold_and_free() {
        let h = hub(2, 3, 4);
        let a1 = h.register(viewer("alice", true, false, false)).unwrap();
        let _a2 = h.register(viewer("alice", true, false, false)).unwrap();
        assert_eq!(
            h.register(viewer("alice", true, false, false)).err(),
            Some(Refused::Identity(2))
        );
        let _b = h.register(viewer("bob", true, false, false)).unwrap();
        assert_eq!(
            h.register(viewer("carol", true, false, false)).err(),
            Some(Refused::Process(3))
        );
        drop(a1);
        assert_eq!(h.open(), 2);
        assert!(h.register(viewer("alice", true, false, false)).is_ok());
    }

    /// A record goes to its consumer's and provider's streams (the
    /// party's line) and administrators' (theirs), nobody else's; a
    /// record without contract terms to nobody.
    #[test]
    fn a_record_reaches_its_parties_only() {
        let h = hub(4, 100, 4);
        let mut alice = h.register(viewer("alice", true, false, false)).unwrap();
        let mut prov = h.register(viewer("prov", false, true, false)).unwrap();
        let mut admin = h.register(viewer("root", false, false, true)).unwrap();
        let mut bob = h.register(viewer("bob", true, false, false)).unwrap();
        // A consumer token named like the provider is not the provider.
        let mut fake = h.register(viewer("prov", true, false, false)).unwrap();
        assert_eq!(h.fan_out(&record(7), &line), 3);
        let got = |r: &mut Registration| r.rx.try_recv().ok().map(|l| (l.seq, l.bytes));
        assert_eq!(got(&mut alice), Some((7, Bytes::from("Consumer\n"))));
        assert_eq!(got(&mut prov), Some((7, Bytes::from("Provider\n"))));
        assert_eq!(got(&mut admin), Some((7, Bytes::from("Admin\n"))));
        assert_eq!(got(&mut bob), None);
        assert_eq!(got(&mut fake), None);
        let mut reservation = record(8);
        reservation.record.contract = None;
        assert_eq!(h.fan_out(&reservation, &line), 0);
    }

    /// A stream whose queue is full is dropped (its stream ends, the
    /// client resumes); the others are not delayed.
    #[test]
    fn a_slow_stream_is_dropped() {
        let h = hub(4, 100, 2);
        let mut slow = h.register(viewer("alice", true, false, false)).unwrap();
        let mut fast = h.register(viewer("prov", false, true, false)).unwrap();
        for seq in 1..=2 {
            h.fan_out(&record(seq), &line);
            assert!(fast.rx.try_recv().is_ok());
        }
        h.fan_out(&record(3), &line);
        assert!(fast.rx.try_recv().is_ok());
        assert_eq!(h.open(), 1);
        // Its two queued lines, then the end.
        assert!(slow.rx.try_recv().is_ok() && slow.rx.try_recv().is_ok());
        assert_eq!(
            slow.rx.try_recv().err(),
            Some(mpsc::error::TryRecvError::Disconnected)
        );
    }
}
