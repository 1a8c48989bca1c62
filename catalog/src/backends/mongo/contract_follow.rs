//! Learning of other processes' contract writes
//! ([`crate::buying::store::ReservationStore::contract_writes`]): the
//! change stream of `reservations`, projected to each document's `seq`,
//! raises the head this process knows. It is only a wake-up — the `seq`
//! stored with each record is the truth, and a woken reader reads from its
//! own cursor ([`crate::buying::store::ReservationStore::changed_since`]) —
//! so an event lost in a break costs nothing as long as the watchers are
//! woken once the stream is open again: they are, at every (re)open, with
//! the counter's value read then.
//!
//! The stream resumes and restarts as [`super::follow`]'s do (resume after
//! a break; start afresh when a resume proves impossible or the server
//! restarted as a new process). On a server without change streams the
//! counter is read every [`POLL`] instead, and a change wakes the watchers.

use std::time::Duration;

use futures::StreamExt;
use mongodb::bson::{doc, Document};
use mongodb::error::ErrorKind;
use mongodb::Collection;
use tracing::warn;

use super::follow::{cannot_resume, no_change_streams};
use super::sequence::seq_of;
use super::MongoStore;

/// How often the counter is read when there are no change streams.
const POLL: Duration = Duration::from_secs(1);

/// The `seq` an event's document carries (None: none, e.g. a delete).
fn event_seq(event: &Document) -> Option<u64> {
    let full = event.get_document("fullDocument").ok()?;
    Some(seq_of(full.get_i64("seq").ok()))
}

impl MongoStore {
    /// Follow the `reservations` change stream for ever (see the module
    /// docs).
    pub(super) async fn follow_contract_writes(self) {
        let coll: Collection<Document> = self.db.collection("reservations");
        let mut resume = None;
        let mut delay = Duration::from_millis(200);
        let mut restarts = self.server_restarts.clone();
        restarts.mark_unchanged();
        loop {
            let opened = coll
                .watch()
                .pipeline([
                    doc! { "$match": { "operationType": { "$in": ["insert", "replace", "update", "delete"] } } },
                    // Little to carry: the resume token (`_id`) and the seq.
                    doc! { "$project": { "operationType": 1, "fullDocument.seq": 1 } },
                ])
                .resume_after(resume.clone())
                .await;
            let mut stream = match opened {
                Ok(s) => s.with_type::<Document>(),
                Err(e) => {
                    if no_change_streams(&e) {
                        warn!("MongoDB has no change streams (standalone server): other processes' contract writes are learnt by reading the contract sequence every second");
                        self.poll_contract_head().await;
                        return;
                    }
                    // As in `follow`: a server that answers but refuses
                    // the token never will accept it.
                    if resume.is_some()
                        && (cannot_resume(&e) || matches!(&*e.kind, ErrorKind::Command(_)))
                    {
                        warn!(error = %e, "the contract change stream cannot resume; starting afresh");
                        resume = None;
                        continue;
                    }
                    warn!(error = %e, "opening the contract change stream failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            delay = Duration::from_millis(200);
            // What committed while no stream was open is known only by the
            // counter: wake the watchers (with it, if it can be read).
            let head = tokio::time::timeout(self.timeout, self.read_contract_head()).await;
            self.wake_contract_watchers(head.ok().and_then(Result::ok));
            loop {
                let event = tokio::select! {
                    event = stream.next() => event,
                    Ok(()) = restarts.changed() => {
                        warn!("the database server restarted; the contract change stream starts afresh");
                        resume = None;
                        break;
                    }
                };
                match event {
                    None => break,
                    Some(Ok(ev)) => {
                        match event_seq(&ev) {
                            Some(seq) if seq > 0 => self.learn_contract_head(seq),
                            // No seq to compare (a delete, a write by an
                            // older catalog): wake them anyway.
                            _ => self.wake_contract_watchers(None),
                        }
                        resume = stream.resume_token();
                    }
                    Some(Err(e)) if cannot_resume(&e) => {
                        warn!(error = %e, "the contract change stream cannot resume; starting afresh");
                        resume = None;
                        break;
                    }
                    Some(Err(e)) => {
                        warn!(error = %e, "contract change stream interrupted; resuming");
                        if let Some(token) = stream.resume_token() {
                            resume = Some(token);
                        }
                        break;
                    }
                }
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// Without change streams: read the counter every [`POLL`] and wake
    /// the watchers when it moved.
    async fn poll_contract_head(&self) {
        loop {
            // A failure (an outage, logged by the classifier): try again.
            if let Ok(Ok(head)) =
                tokio::time::timeout(self.timeout, self.read_contract_head()).await
            {
                self.learn_contract_head(head);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_seq_is_read_from_its_projected_document() {
        assert_eq!(
            event_seq(&doc! { "fullDocument": { "seq": 12i64 } }),
            Some(12)
        );
        assert_eq!(event_seq(&doc! { "fullDocument": {} }), Some(0));
        assert_eq!(event_seq(&doc! { "operationType": "delete" }), None);
    }
}
