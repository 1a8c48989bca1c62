//! Group commit of offer writes: concurrent `put_offer`/`delete_offer`
//! calls are queued to one committer thread, which applies every write
//! waiting at that moment inside ONE redb write transaction and commits it
//! with ONE fsync. Each caller is answered only after that commit returned,
//! so an acknowledged write is durable exactly as before; while one batch
//! is syncing, the next one gathers.
//!
//! The business rules stay in [`crate::offers::rules`]: each write in a
//! batch is decided against the state the writes before it in the same
//! transaction left (redb reads its own uncommitted writes), so the
//! outcome is the one the same writes would have had one transaction each.
//! A write the rules refuse (409, 403, 404) changes nothing and does not
//! affect its batch; a storage failure fails the whole batch, and nothing
//! of it is committed.

use std::sync::mpsc;
use std::sync::Weak;

use redb::{ReadableTable, Table};

use tokio::sync::oneshot;

use super::tables::{OFFERS, VERSIONS};
use super::{from_json, internal, to_json, Inner};
use crate::offers::{rules, Offer, OfferChange, OfferDraft, PutOutcome};
use crate::store::StoreError;

/// The most writes one transaction takes; more wait for the next.
const MAX_BATCH: usize = 512;

/// One queued offer write.
pub(super) enum Write {
    Put {
        draft: OfferDraft,
        expected_version: Option<u64>,
        reply: oneshot::Sender<Result<PutOutcome, StoreError>>,
    },
    Delete {
        id: String,
        owner: String,
        reply: oneshot::Sender<Result<Offer, StoreError>>,
    },
}

/// What a decided write did, kept until its batch is committed.
enum Done {
    Put(
        Result<PutOutcome, StoreError>,
        oneshot::Sender<Result<PutOutcome, StoreError>>,
    ),
    Delete(
        Result<(Offer, u64), StoreError>,
        oneshot::Sender<Result<Offer, StoreError>>,
    ),
}

impl Write {
    fn fail(self, e: StoreError) {
        // A caller that went away needs no answer.
        match self {
            Write::Put { reply, .. } => drop(reply.send(Err(e))),
            Write::Delete { reply, .. } => drop(reply.send(Err(e))),
        }
    }
}

impl Done {
    fn fail(self, e: StoreError) {
        match self {
            Done::Put(_, reply) => drop(reply.send(Err(e))),
            Done::Delete(_, reply) => drop(reply.send(Err(e))),
        }
    }
}

/// Start the committer thread for `inner`; it ends when the store is
/// dropped (the queue's sender with it).
pub(super) fn start(inner: Weak<Inner>, queue: mpsc::Receiver<Write>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("offer-commit".into())
        .spawn(move || {
            let span = tracing::info_span!("offer_group_commit");
            let _entered = span.enter();
            while let Ok(first) = queue.recv() {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match queue.try_recv() {
                        Ok(w) => batch.push(w),
                        Err(_) => break,
                    }
                }
                let Some(inner) = inner.upgrade() else {
                    for w in batch {
                        w.fail(internal("the store is closed"));
                    }
                    return;
                };
                inner.commit_batch(batch);
            }
        })
        .map(|_| ())
}

impl Inner {
    /// Decide and write `batch` in one transaction, commit it (one fsync),
    /// then update the cache, publish in order and answer every caller.
    fn commit_batch(&self, batch: Vec<Write>) {
        let _order = self.lock_order();
        let n = batch.len();
        let started = std::time::Instant::now();
        let txn = match self.db.begin_write() {
            Ok(t) => t,
            Err(e) => {
                let e = internal(e);
                for w in batch {
                    w.fail(e.clone());
                }
                return;
            }
        };
        let mut done = Vec::with_capacity(n);
        let decided: Result<(), StoreError> = (|| {
            let mut offers = txn.open_table(OFFERS).map_err(internal)?;
            let mut versions = txn.open_table(VERSIONS).map_err(internal)?;
            let mut queue = batch.into_iter();
            for w in queue.by_ref() {
                let step = match w {
                    Write::Put {
                        draft,
                        expected_version,
                        reply,
                    } => match apply_put(&mut offers, &mut versions, draft, expected_version) {
                        Ok(r) => Ok(Done::Put(r, reply)),
                        Err(e) => {
                            let _ = reply.send(Err(e.clone()));
                            Err(e)
                        }
                    },
                    Write::Delete { id, owner, reply } => {
                        match apply_delete(&mut offers, &mut versions, &id, &owner) {
                            Ok(r) => Ok(Done::Delete(r, reply)),
                            Err(e) => {
                                let _ = reply.send(Err(e.clone()));
                                Err(e)
                            }
                        }
                    }
                };
                match step {
                    Ok(d) => done.push(d),
                    Err(e) => {
                        for w in queue {
                            w.fail(e.clone());
                        }
                        return Err(e);
                    }
                }
            }
            Ok(())
        })();
        let decided_at = started.elapsed();
        let committed = decided.and_then(|()| txn.commit().map_err(internal));
        let committed_at = started.elapsed();
        if let Err(e) = committed {
            tracing::error!(error = %e, writes = n, "offer batch not committed");
            for d in done {
                d.fail(e.clone());
            }
            return;
        }
        self.set_cached_batch(done.iter().filter_map(|d| match d {
            Done::Put(Ok(outcome), _) => Some((&outcome.offer.id, Some(&outcome.offer))),
            Done::Delete(Ok((offer, _)), _) => Some((&offer.id, None)),
            _ => None,
        }));
        for d in done {
            match d {
                Done::Put(Ok(outcome), reply) => {
                    self.publish(OfferChange::Upserted(outcome.offer.clone()));
                    let _ = reply.send(Ok(outcome));
                }
                Done::Delete(Ok((offer, version)), reply) => {
                    self.publish(OfferChange::Deleted {
                        id: offer.id.clone(),
                        cluster_id: offer.cluster_id.clone(),
                        version,
                    });
                    let _ = reply.send(Ok(offer));
                }
                Done::Put(Err(e), reply) => drop(reply.send(Err(e))),
                Done::Delete(Err(e), reply) => drop(reply.send(Err(e))),
            }
        }
        // Where a batch's time goes (RUST_LOG=catalog::backends::embedded=debug).
        tracing::debug!(
            writes = n,
            decide_us = decided_at.as_micros() as u64,
            commit_us = (committed_at - decided_at).as_micros() as u64,
            answer_us = (started.elapsed() - committed_at).as_micros() as u64,
            "offer batch committed"
        );
    }
}

type OffersTable<'t> = Table<'t, &'static str, &'static [u8]>;
type VersionsTable<'t> = Table<'t, &'static str, u64>;

/// Decide (by [`rules::put`]) and write one upsert inside the batch's
/// transaction. The outer error is a storage failure (the batch fails), the
/// inner one the rules' refusal (nothing written).
fn apply_put(
    offers: &mut OffersTable<'_>,
    versions: &mut VersionsTable<'_>,
    draft: OfferDraft,
    expected_version: Option<u64>,
) -> Result<Result<PutOutcome, StoreError>, StoreError> {
    let existing: Option<Offer> = match offers.get(draft.id.as_str()).map_err(internal)? {
        Some(v) => Some(from_json("offer", v.value())?),
        None => None,
    };
    let last_version = versions
        .get(draft.id.as_str())
        .map_err(internal)?
        .map(|v| v.value())
        .unwrap_or(0);
    let outcome = match rules::put(
        draft,
        existing.as_ref(),
        last_version,
        expected_version,
        crate::store::now(),
    ) {
        Ok(o) => o,
        Err(refused) => return Ok(Err(refused)),
    };
    let offer = &outcome.offer;
    offers
        .insert(offer.id.as_str(), to_json(offer)?.as_slice())
        .map_err(internal)?;
    versions
        .insert(offer.id.as_str(), offer.version)
        .map_err(internal)?;
    Ok(Ok(outcome))
}

/// Decide (by [`rules::delete`]) and write one deletion inside the batch's
/// transaction: the removed offer and its tombstone version. Errors as
/// [`apply_put`].
fn apply_delete(
    offers: &mut OffersTable<'_>,
    versions: &mut VersionsTable<'_>,
    id: &str,
    owner: &str,
) -> Result<Result<(Offer, u64), StoreError>, StoreError> {
    let live: Option<Offer> = match offers.get(id).map_err(internal)? {
        Some(v) => Some(from_json("offer", v.value())?),
        None => None,
    };
    let last = versions
        .get(id)
        .map_err(internal)?
        .map(|v| v.value())
        .unwrap_or(0);
    let version = match rules::delete(live.as_ref(), owner, last) {
        Ok(v) => v,
        Err(refused) => return Ok(Err(refused)),
    };
    let Some(offer) = live else {
        return Ok(Err(StoreError::NotFound));
    };
    offers.remove(id).map_err(internal)?;
    versions.insert(id, version).map_err(internal)?;
    Ok(Ok((offer, version)))
}
