//! The contract sequence ([`crate::buying::store::Sequenced`]): every write
//! of a `reservations` document takes the next value of one store-wide
//! counter, `sequences` `{_id: "contracts", seq}`, and carries it as its
//! `seq` field, in the order the writes commit — across every catalog
//! process on the database.
//!
//! Taking the number and writing the record are one multi-document
//! transaction ([`MongoStore::in_sequence`]): the transaction increments the
//! counter document first, so two concurrent ones conflict on it
//! (`WriteConflict`, labelled `TransientTransactionError`), one aborts and
//! runs again with the next number, and a number is only ever committed
//! after every lower one. Taking the number first and writing outside a
//! transaction would not do: writer A takes 10, B takes 11 and commits, a
//! reader resumes from 11, then A commits 10 — a change that reader never
//! sees. Transactions need MongoDB as a replica set (one member will do),
//! as change streams do.

use std::time::Duration;

use futures::future::BoxFuture;
use mongodb::bson::{doc, Document};
use mongodb::error::{ErrorKind, TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT};
use mongodb::options::ReturnDocument;
use mongodb::{ClientSession, Collection};
use tracing::warn;

use super::{classify, MongoStore};
use crate::store::StoreError;

/// The collection of counters and the contract counter's `_id`.
const SEQUENCES: &str = "sequences";
const CONTRACTS: &str = "contracts";

/// Code 20 (IllegalOperation): what a standalone server answers a
/// transaction with.
const ILLEGAL_OPERATION: i32 = 20;

/// What an operator is told when the server cannot run transactions.
pub(super) const NEEDS_REPLICA_SET: &str = "MongoDB refused a transaction: reservations need MongoDB as a replica set (a single member will do), for transactions and change streams";

/// The seq a stored document carries (0: written before sequences were
/// kept, or unreadable).
pub(super) fn seq_of(value: Option<i64>) -> u64 {
    value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
}

/// Commit, sending the commit again while its outcome is unknown
/// (`UnknownTransactionCommitResult`: committing twice is safe, the driver
/// makes the retry a majority commit), until the caller's deadline.
async fn commit(session: &mut ClientSession) -> mongodb::error::Result<()> {
    let mut attempt = 0u32;
    loop {
        match session.commit_transaction().await {
            Err(e) if e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) => {
                attempt = attempt.saturating_add(1);
                tokio::time::sleep(backoff(attempt)).await;
            }
            done => return done,
        }
    }
}

/// The pause before attempt `attempt` (1 and up) of a transaction that
/// conflicted: random below 5 ms × 1.5^attempt, at most 500 ms (the
/// driver's own schedule), so racing writers spread out.
fn backoff(attempt: u32) -> Duration {
    let mut b = [0u8; 2];
    let jitter = if getrandom::fill(&mut b).is_ok() {
        f64::from(u16::from_le_bytes(b)) / f64::from(u16::MAX)
    } else {
        0.5
    };
    let ms = (5.0 * 1.5f64.powi(attempt.min(20) as i32)).min(500.0) * jitter;
    Duration::from_micros((ms * 1000.0) as u64)
}

/// [`classify`], and a refused transaction named for what it is.
fn classify_tx(e: mongodb::error::Error) -> StoreError {
    if let ErrorKind::Command(c) = &*e.kind {
        if c.code == ILLEGAL_OPERATION && c.message.contains("replica set") {
            warn!(error = %e, "{NEEDS_REPLICA_SET}");
            return StoreError::Internal(NEEDS_REPLICA_SET.into());
        }
    }
    classify(e)
}

impl MongoStore {
    fn sequences(&self) -> Collection<Document> {
        self.db.collection(SEQUENCES)
    }

    /// The counter's value now (0 when no write has taken one).
    pub(super) async fn read_contract_head(&self) -> Result<u64, StoreError> {
        let counter = self
            .sequences()
            .find_one(doc! { "_id": CONTRACTS })
            .await
            .map_err(classify)?;
        Ok(seq_of(counter.and_then(|d| d.get_i64("seq").ok())))
    }

    /// Run `write` with the next sequence number in one transaction with
    /// the counter's increment (see the module docs): `write` answers
    /// whether it wrote (false: its condition did not hold, and the
    /// transaction is aborted, the number never committed). As the
    /// driver's documentation prescribes, the whole transaction runs again
    /// on `TransientTransactionError` (a write conflict on the counter:
    /// another write took the number), after a growing random backoff, and
    /// the commit is sent again on `UnknownTransactionCommitResult`. The
    /// caller's deadline ([`super::bounded`]) cuts it short; dropping the
    /// session aborts a transaction left open. Returns the number
    /// committed, and tells this process's watchers
    /// ([`crate::buying::store::ReservationStore::contract_writes`]).
    ///
    /// (Not the driver's `and_run2`: its async closure trips the compiler's
    /// "Send is not general enough" inside the store's `async_trait`
    /// futures.)
    pub(super) async fn in_sequence<F>(&self, mut write: F) -> Result<Option<u64>, StoreError>
    where
        F: for<'s> FnMut(&'s mut ClientSession, u64) -> BoxFuture<'s, mongodb::error::Result<bool>>
            + Send,
    {
        let mut session = self.db.client().start_session().await.map_err(classify)?;
        let mut attempt = 0u32;
        loop {
            if attempt > 0 {
                tokio::time::sleep(backoff(attempt)).await;
            }
            attempt = attempt.saturating_add(1);
            session.start_transaction().await.map_err(classify_tx)?;
            let wrote = match self.take_and_write(&mut session, &mut write).await {
                Ok(Some(seq)) => seq,
                Ok(None) => {
                    session.abort_transaction().await.map_err(classify_tx)?;
                    return Ok(None);
                }
                Err(e) => {
                    // The server may have aborted it already; the driver
                    // knows and this is then a no-op.
                    let _ = session.abort_transaction().await;
                    if e.contains_label(TRANSIENT_TRANSACTION_ERROR) {
                        continue;
                    }
                    return Err(classify_tx(e));
                }
            };
            match commit(&mut session).await {
                Ok(()) => {
                    self.learn_contract_head(wrote);
                    return Ok(Some(wrote));
                }
                Err(e) if e.contains_label(TRANSIENT_TRANSACTION_ERROR) => continue,
                Err(e) => return Err(classify_tx(e)),
            }
        }
    }

    /// One attempt's writes: the counter's increment, first (so that a
    /// concurrent writer conflicts there before writing anything else),
    /// then `write` with the number taken (None: it did not write).
    async fn take_and_write<F>(
        &self,
        session: &mut ClientSession,
        write: &mut F,
    ) -> mongodb::error::Result<Option<u64>>
    where
        F: for<'s> FnMut(&'s mut ClientSession, u64) -> BoxFuture<'s, mongodb::error::Result<bool>>
            + Send,
    {
        let taken = self
            .sequences()
            .find_one_and_update(doc! { "_id": CONTRACTS }, doc! { "$inc": { "seq": 1i64 } })
            .upsert(true)
            .return_document(ReturnDocument::After)
            .session(&mut *session)
            .await?;
        let seq = seq_of(taken.and_then(|d| d.get_i64("seq").ok()));
        Ok(write(session, seq).await?.then_some(seq))
    }

    /// Raise the head this process knows to `seq`, waking the watchers of
    /// [`crate::buying::store::ReservationStore::contract_writes`] if it
    /// moved (a lower one committed before what they were told of).
    pub(super) fn learn_contract_head(&self, seq: u64) {
        self.contract_writes.send_if_modified(|head| {
            let moved = seq > *head;
            *head = (*head).max(seq);
            moved
        });
    }

    /// Wake the watchers whatever the head: writes may have committed
    /// unseen (no change stream was open), and they read from their own
    /// cursors anyway.
    pub(super) fn wake_contract_watchers(&self, head: Option<u64>) {
        self.contract_writes.send_modify(|known| {
            if let Some(h) = head {
                *known = (*known).max(h);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_below_half_a_second() {
        for attempt in [1, 5, 30, u32::MAX] {
            assert!(backoff(attempt) <= Duration::from_millis(500));
        }
        assert!(backoff(1) <= Duration::from_micros(7500));
    }

    #[test]
    fn a_missing_or_negative_seq_reads_as_zero() {
        assert_eq!(seq_of(None), 0);
        assert_eq!(seq_of(Some(-3)), 0);
        assert_eq!(seq_of(Some(7)), 7);
    }

    /// A standalone server's refusal of a transaction says what the
    /// operator must do; other failures keep their classification.
    #[test]
    fn a_refused_transaction_names_the_replica_set() {
        let c: mongodb::error::CommandError = mongodb::bson::from_document(doc! {
            "code": 20, "codeName": "IllegalOperation",
            "errmsg": "Transaction numbers are only allowed on a replica set member or mongos",
        })
        .unwrap();
        match classify_tx(mongodb::error::Error::from(ErrorKind::Command(c))) {
            StoreError::Internal(msg) => assert_eq!(msg, NEEDS_REPLICA_SET),
            other => panic!("{other:?}"),
        }
        let io =
            mongodb::error::Error::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(matches!(classify_tx(io), StoreError::Unavailable(_)));
    }
}
