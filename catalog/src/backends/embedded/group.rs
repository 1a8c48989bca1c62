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
//!
//! The committer holds the store only while it works on a batch, and lets
//! go of it before answering anyone: once its write is answered, a caller
//! holding the last handle closes the file when it drops it, then and
//! there. Were the committer still holding the store, the file would close
//! later, on this thread, and reopening the data directory at once would
//! fail with redb's "Database already open" (seen in
//! `tests/migrate_235bcb7.rs` on a loaded machine).

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

/// A caller's answer, sent once the committer let go of the store.
enum Answer {
    Put(
        Result<PutOutcome, StoreError>,
        oneshot::Sender<Result<PutOutcome, StoreError>>,
    ),
    Delete(
        Result<Offer, StoreError>,
        oneshot::Sender<Result<Offer, StoreError>>,
    ),
}

impl Answer {
    fn send(self) {
        // A caller that went away needs no answer.
        match self {
            Answer::Put(r, reply) => drop(reply.send(r)),
            Answer::Delete(r, reply) => drop(reply.send(r)),
        }
    }
}

impl Write {
    fn fail(self, e: StoreError) -> Answer {
        match self {
            Write::Put { reply, .. } => Answer::Put(Err(e), reply),
            Write::Delete { reply, .. } => Answer::Delete(Err(e), reply),
        }
    }
}

impl Done {
    fn fail(self, e: StoreError) -> Answer {
        match self {
            Done::Put(_, reply) => Answer::Put(Err(e), reply),
            Done::Delete(_, reply) => Answer::Delete(Err(e), reply),
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
                        w.fail(internal("the store is closed")).send();
                    }
                    return;
                };
                let answers = inner.commit_batch(batch);
                // Let go of the store before answering (see the module
                // docs): an answered caller may hold the last handle.
                drop(inner);
                for a in answers {
                    a.send();
                }
            }
        })
        .map(|_| ())
}

impl Inner {
    /// Decide and write `batch` in one transaction, commit it (one fsync),
    /// then update the cache and publish in order: every caller's answer,
    /// for the committer to send once it let go of the store.
    fn commit_batch(&self, batch: Vec<Write>) -> Vec<Answer> {
        let _order = self.lock_order();
        let n = batch.len();
        let started = std::time::Instant::now();
        let txn = match self.db.begin_write() {
            Ok(t) => t,
            Err(e) => {
                let e = internal(e);
                return batch.into_iter().map(|w| w.fail(e.clone())).collect();
            }
        };
        let mut done = Vec::with_capacity(n);
        let mut answers = Vec::with_capacity(n);
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
                            answers.push(Answer::Put(Err(e.clone()), reply));
                            Err(e)
                        }
                    },
                    Write::Delete { id, owner, reply } => {
                        match apply_delete(&mut offers, &mut versions, &id, &owner) {
                            Ok(r) => Ok(Done::Delete(r, reply)),
                            Err(e) => {
                                answers.push(Answer::Delete(Err(e.clone()), reply));
                                Err(e)
                            }
                        }
                    }
                };
                match step {
                    Ok(d) => done.push(d),
                    Err(e) => {
                        answers.extend(queue.map(|w| w.fail(e.clone())));
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
            answers.extend(done.into_iter().map(|d| d.fail(e.clone())));
            return answers;
        }
        self.set_cached_batch(done.iter().filter_map(|d| match d {
            Done::Put(Ok(outcome), _) => Some((&outcome.offer.id, Some(&outcome.offer))),
            Done::Delete(Ok((offer, _)), _) => Some((&offer.id, None)),
            _ => None,
        }));
        for d in done {
            answers.push(match d {
                Done::Put(Ok(outcome), reply) => {
                    self.publish(OfferChange::Upserted(outcome.offer.clone()));
                    Answer::Put(Ok(outcome), reply)
                }
                Done::Delete(Ok((offer, version)), reply) => {
                    self.publish(OfferChange::Deleted {
                        id: offer.id.clone(),
                        cluster_id: offer.cluster_id.clone(),
                        version,
                    });
                    Answer::Delete(Ok(offer), reply)
                }
                Done::Put(Err(e), reply) => Answer::Put(Err(e), reply),
                Done::Delete(Err(e), reply) => Answer::Delete(Err(e), reply),
            });
        }
        // Where a batch's time goes (RUST_LOG=catalog::backends::embedded=debug).
        tracing::debug!(
            writes = n,
            decide_us = decided_at.as_micros() as u64,
            commit_us = (committed_at - decided_at).as_micros() as u64,
            publish_us = (started.elapsed() - committed_at).as_micros() as u64,
            "offer batch committed"
        );
        answers
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

#[cfg(test)]
mod tests {
    use crate::backends::EmbeddedStore;
    use crate::offers::{OfferSpec, OfferStore, ProviderRef};

    /// Once its write is answered, dropping the last handle closes the
    /// file at once: the data directory opens again straight away. (With
    /// the committer still holding the store, the reopen raced its
    /// reference and failed with "Database already open" whenever the
    /// committer was descheduled between answering and letting go; this
    /// repeats the sequence to give such a race many chances.)
    #[tokio::test(flavor = "multi_thread")]
    async fn the_file_is_released_when_the_last_handle_goes_after_a_write() {
        let dir = tempfile::tempdir().unwrap();
        let owner = ProviderRef {
            cluster_id: "c1".into(),
            cluster_name: "one".into(),
            stamp: crate::providers::OwnerStamp::default(),
        };
        for round in 0..50 {
            let store = EmbeddedStore::open(dir.path())
                .unwrap_or_else(|e| panic!("reopening after round {round}: {e}"));
            let draft = OfferSpec::from_json(
                br#"{"name":"n","type":"t","plans":{"p":{"name":"p","cost":"1","resources":{"cpu":"1"}}}}"#,
            )
            .unwrap()
            .into_draft("o1".into(), owner.clone());
            store.put_offer(draft, None).await.unwrap();
        }
    }
}
