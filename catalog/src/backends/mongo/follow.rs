//! Following the change streams of the collections this process keeps in
//! memory ([`super::memory`]): `offers`, `providers`, `disabled_providers`
//! and `provider_peering`, one stream each. Each time a stream opens, its
//! collection is loaded into memory, then every event is applied; offer
//! changes are also published to this
//! process's subscribers, so changes written by any process reach them.
//!
//! A stream resumes after failures from its last event; it starts afresh
//! (and asks subscribers to resync, [`OfferChange::Resync`]) at first,
//! after a resume proved impossible — refused when reopening (real
//! MongoDB), or failing on a later read (SecantusDB), see
//! [`cannot_resume`] — and after the server restarted as a new process
//! (which may have lost the history a resume needs without saying so).
//! From a break until the reload after reopening, that part of memory is
//! not trusted and reads go to the database.
//!
//! Only the offers' stream asks for a resync (the feed lists nothing else),
//! and only once memory has applied its stream up to the cluster time read
//! just after the reload ([`caught_up`]): the feed reads its fresh list
//! from memory then, and a list the feed read meanwhile from the database
//! (offers not trusted yet) is never newer than it. Without this wait a
//! resync's list could be the reload's, older than such a read, and the
//! feed would go backwards (issue 29, finding 7).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use mongodb::bson::{self, doc, Document, Timestamp};
use mongodb::change_stream::event::{ChangeStreamEvent, OperationType};
use mongodb::change_stream::ChangeStream;
use mongodb::error::ErrorKind;
use mongodb::Collection;
use tracing::warn;

use super::memory::Part;
use super::offers::{OfferDoc, ProviderDoc};
use super::providers::DisabledDoc;
use super::{from_bt, MongoStore};
use crate::offers::OfferChange;
use crate::providers::ProviderAccount;

/// Logged (WARN) once each time a change stream starts afresh because it
/// could not resume.
const RESYNC_LOG: &str =
    "the change stream cannot resume from its last event; resyncing subscribers from a fresh snapshot";

/// Whether a change-stream error means resuming from the same token will
/// never work — the history behind it is gone or the stream is dead — so
/// the token must be dropped and subscribers resynced. Anything else
/// (network, a primary stepping down) is worth resuming. The driver marks
/// such errors `NonResumableChangeStreamError` on servers that say so;
/// the codes and wording cover servers that do not.
pub(super) fn cannot_resume(e: &mongodb::error::Error) -> bool {
    // 260 InvalidResumeToken, 280 ChangeStreamFatalError, 286
    // ChangeStreamHistoryLost, 40585 (resume token not found, before 4.2).
    const FATAL: [i32; 4] = [260, 280, 286, 40585];
    if e.contains_label("NonResumableChangeStreamError") {
        return true;
    }
    let (code, message) = match &*e.kind {
        ErrorKind::Command(c) => (c.code, c.message.as_str()),
        ErrorKind::Write(mongodb::error::WriteFailure::WriteConcernError(w)) => {
            (w.code, w.message.as_str())
        }
        _ => return false,
    };
    if FATAL.contains(&code) {
        return true;
    }
    let message = message.to_ascii_lowercase();
    (message.contains("resume token") && message.contains("not found"))
        || message.contains("resume of change stream was not possible")
}

/// Whether opening a change stream failed because the server has none (a
/// standalone server: code 40573, or its wording).
pub(super) fn no_change_streams(e: &mongodb::error::Error) -> bool {
    matches!(&*e.kind, ErrorKind::Command(c)
        if c.code == 40573 || c.message.contains("only supported on replica sets"))
}

impl Part {
    fn collection(self) -> &'static str {
        match self {
            Part::Offers => "offers",
            Part::Providers => "providers",
            Part::Disabled => "disabled_providers",
            Part::Peering => "provider_peering",
        }
    }

    /// The operations followed. Offer documents are only inserted,
    /// replaced, and deleted when purged; the others change every way.
    fn operations(self) -> Vec<&'static str> {
        match self {
            Part::Offers => vec!["insert", "replace", "delete"],
            _ => vec!["insert", "replace", "update", "delete"],
        }
    }
}

/// Why following one event failed: the follower reopens (and reloads).
type FollowError = mongodb::error::Error;

fn unreadable(e: impl std::fmt::Display) -> FollowError {
    FollowError::custom(e.to_string())
}

/// The string `_id` of an event's document.
fn event_key(ev: &ChangeStreamEvent<Document>) -> Option<String> {
    ev.document_key
        .as_ref()
        .and_then(|k| k.get_str("_id").ok())
        .map(str::to_string)
}

impl MongoStore {
    fn stream_opened(&self) {
        self.streams_opened.send_modify(|n| *n += 1);
    }

    /// Load `part`'s whole collection into memory; with `announce`, publish
    /// the offers it finds newer than memory's (see
    /// [`super::memory::Memory::load_offers`]).
    async fn load(&self, part: Part, announce: bool) -> Result<(), FollowError> {
        match part {
            Part::Offers => {
                self.memory.begin_offers_load();
                let docs: Vec<OfferDoc> = self.offers.find(doc! {}).await?.try_collect().await?;
                let mut slots = BTreeMap::new();
                for d in docs {
                    slots.insert(d.id().to_string(), d.slot().map_err(unreadable)?);
                }
                self.memory.load_offers(slots, announce, |id, slot| {
                    let _ = self.changes.send(slot.change(id));
                });
            }
            Part::Providers => {
                let docs: Vec<ProviderDoc> =
                    self.providers.find(doc! {}).await?.try_collect().await?;
                let accounts: HashMap<String, ProviderAccount> = docs
                    .into_iter()
                    .map(|d| {
                        let a = ProviderAccount::from(d);
                        (a.cluster_id.clone(), a)
                    })
                    .collect();
                self.memory.load_providers(accounts);
            }
            Part::Disabled => {
                let docs: Vec<DisabledDoc> =
                    self.disabled.find(doc! {}).await?.try_collect().await?;
                self.memory
                    .load_disabled(docs.into_iter().map(|d| (d.id, from_bt(d.since))).collect());
            }
            Part::Peering => {
                let docs: Vec<super::providers::PeeringDoc> = self
                    .provider_peering()
                    .find(doc! {})
                    .await?
                    .try_collect()
                    .await?;
                self.memory
                    .load_peering(docs.into_iter().map(|d| (d.id, d.body)).collect());
            }
        }
        Ok(())
    }

    /// Apply one change event of `part` to memory (and publish what
    /// subscribers follow).
    async fn apply(&self, part: Part, ev: ChangeStreamEvent<Document>) -> Result<(), FollowError> {
        let inserted = ev.operation_type == OperationType::Insert;
        let key = event_key(&ev);
        match part {
            Part::Offers => match (ev.operation_type, ev.full_document) {
                (OperationType::Insert | OperationType::Replace, Some(d)) => {
                    let doc: OfferDoc = bson::from_document(d).map_err(unreadable)?;
                    match doc.slot() {
                        // Published unless this process's own copy of the
                        // write (or a later one) was published first.
                        Ok(slot) => {
                            let change = slot.change(doc.id());
                            self.memory.apply_offer(doc.id(), slot, inserted, || {
                                let _ = self.changes.send(change);
                            })
                        }
                        Err(e) => warn!(error = %e, "ignoring an unreadable change event"),
                    }
                }
                (OperationType::Delete, _) => {
                    if let Some(id) = key {
                        self.memory.forget_tombstone(&id);
                    }
                }
                _ => {}
            },
            Part::Providers => {
                let Some(id) = key else {
                    return Ok(());
                };
                let now = self.providers.find_one(doc! { "_id": &id }).await?;
                self.memory
                    .set_provider(&id, now.map(ProviderAccount::from));
            }
            Part::Disabled => {
                let Some(id) = key else {
                    return Ok(());
                };
                let now = self.disabled.find_one(doc! { "_id": &id }).await?;
                self.memory.set_disabled(&id, now.map(|d| from_bt(d.since)));
            }
            Part::Peering => {
                let Some(id) = key else {
                    return Ok(());
                };
                let now = self
                    .provider_peering()
                    .find_one(doc! { "_id": &id })
                    .await?;
                self.memory.set_peering(&id, now.map(|d| d.body));
            }
        }
        Ok(())
    }

    /// The database's cluster time now: the `operationTime` of a ping
    /// (`None` from a server that keeps none). Every write committed
    /// before this call, and every read started before it, is at or
    /// before it.
    async fn cluster_time(&self) -> Result<Option<Timestamp>, FollowError> {
        let mut session = self.db.client().start_session().await?;
        self.db
            .run_command(doc! { "ping": 1 })
            .session(&mut session)
            .await?;
        Ok(session.operation_time())
    }

    /// Follow `part`'s change stream for ever (see the module docs).
    pub(super) async fn follow(self, part: Part) {
        let coll: Collection<Document> = self.db.collection(part.collection());
        let mut resume = None;
        let mut delay = Duration::from_millis(200);
        let mut first_open = true;
        // A resync the feed is owed (the stream started afresh) and has not
        // been sent: it survives a break while catching up.
        let mut resync_owed = false;
        let mut restarts = self.server_restarts.clone();
        restarts.mark_unchanged();
        loop {
            self.memory.set_trusted(part, false);
            let opened = coll
                .watch()
                .pipeline([doc! { "$match": { "operationType": { "$in": part.operations() } } }])
                .resume_after(resume.clone())
                .max_await_time(CATCH_UP_WAIT)
                .await;
            let mut stream = match opened {
                Ok(s) => s,
                Err(e) => {
                    if no_change_streams(&e) {
                        warn!("MongoDB has no change streams (standalone server): only this process's writes are published, and every read goes to the database");
                        self.stream_opened();
                        return;
                    }
                    // Any refusal of a token (not a network failure) counts:
                    // a server that answers but will not resume never will.
                    if resume.is_some()
                        && (cannot_resume(&e) || matches!(&*e.kind, ErrorKind::Command(_)))
                    {
                        warn!(error = %e, "{RESYNC_LOG}");
                        resume = None;
                        continue;
                    }
                    warn!(error = %e, "opening the change stream failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            // What is committed from now on comes by the stream; what was
            // before, by this load. A resumed stream re-delivers events the
            // load may hold already (and memory would not publish): the
            // load announces them; a fresh one is followed by a resync.
            let announce = resume.is_some();
            let loaded = tokio::time::timeout(self.timeout, self.load(part, announce)).await;
            if !matches!(loaded, Ok(Ok(()))) {
                match loaded {
                    Ok(Err(e)) => warn!(error = %e, "loading into memory failed; retrying"),
                    _ => warn!("loading into memory timed out; retrying"),
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
                continue;
            }
            self.memory.set_trusted(part, true);
            // Only offers make the feed's list: a resync for anything else
            // would only make it read again (and while offers are not
            // trusted, from the database: a read newer than the offers'
            // load, which the next resync's list from memory would undo).
            let mut resync_at = None;
            resync_owed |= resume.is_none() && part == Part::Offers;
            if resync_owed {
                // The feed's read for this resync must not be older than
                // any list it took before: those were read (from the
                // database, while offers were not trusted) before now, so
                // the resync waits until memory has applied the stream up
                // to now.
                match tokio::time::timeout(self.timeout, self.cluster_time()).await {
                    Ok(Ok(Some(now))) => resync_at = Some(now),
                    Ok(Ok(None)) => {
                        resync_owed = false;
                        let _ = self.changes.send(OfferChange::Resync);
                    }
                    Ok(Err(e)) => {
                        warn!(error = %e, "reading the cluster time failed; reopening");
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                    Err(_) => {
                        warn!("reading the cluster time timed out; reopening");
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                }
            }
            delay = Duration::from_millis(200);
            if first_open {
                first_open = false;
                self.stream_opened();
            }
            loop {
                let event = tokio::select! {
                    event = next_event(&mut stream, resync_at.is_some()) => event,
                    Ok(()) = restarts.changed() => {
                        warn!("{RESYNC_LOG} (the database server restarted)");
                        resume = None;
                        break;
                    }
                };
                match event {
                    None => break,
                    Some(Ok(next)) => {
                        let (caught_up, ev) = caught_up(next, resync_at);
                        if let Some(ev) = ev {
                            let token = ev.id.clone();
                            match tokio::time::timeout(self.timeout, self.apply(part, ev)).await {
                                Ok(Ok(())) => resume = Some(token),
                                Ok(Err(e)) => {
                                    warn!(error = %e, "applying a change failed; reopening and reloading");
                                    break;
                                }
                                Err(_) => {
                                    warn!("applying a change timed out; reopening and reloading");
                                    break;
                                }
                            }
                        }
                        if caught_up {
                            resync_at = None;
                            resync_owed = false;
                            let _ = self.changes.send(OfferChange::Resync);
                        }
                    }
                    Some(Err(e)) if cannot_resume(&e) => {
                        warn!(error = %e, "{RESYNC_LOG}");
                        resume = None;
                        break;
                    }
                    Some(Err(e)) => {
                        warn!(error = %e, "change stream interrupted; resuming");
                        if let Some(token) = stream.resume_token() {
                            resume = Some(token);
                        }
                        break;
                    }
                }
            }
            self.memory.set_trusted(part, false);
            tokio::time::sleep(delay).await;
        }
    }
}

/// How long one read of a change stream waits for an event before
/// answering an empty batch (`maxAwaitTime`): an empty batch is how a
/// follower catching up learns it has seen everything committed so far.
const CATCH_UP_WAIT: Duration = Duration::from_millis(200);

/// The next read of `stream`: `Some(Ok(None))` is an empty batch, which
/// only a stream `catching_up` asks for (one read at a time); otherwise
/// it waits for an event. `None`: the stream ended.
async fn next_event(
    stream: &mut ChangeStream<ChangeStreamEvent<Document>>,
    catching_up: bool,
) -> Option<Result<Option<ChangeStreamEvent<Document>>, FollowError>> {
    if catching_up {
        Some(stream.next_if_any().await)
    } else {
        stream.next().await.map(|r| r.map(Some))
    }
}

/// Whether a follower waiting to reach cluster time `resync_at` has done
/// so with `next` (an event at or past it, or an empty batch: nothing more
/// is committed); the event to apply either way.
fn caught_up<E: HasClusterTime>(
    next: Option<E>,
    resync_at: Option<Timestamp>,
) -> (bool, Option<E>) {
    let Some(at) = resync_at else {
        return (false, next);
    };
    let reached = match &next {
        None => true,
        Some(ev) => ev.cluster_time().is_some_and(|t| t >= at),
    };
    (reached, next)
}

/// An event's cluster time (a trait so [`caught_up`] can be tested without
/// building driver events).
trait HasClusterTime {
    fn cluster_time(&self) -> Option<Timestamp>;
}

impl HasClusterTime for ChangeStreamEvent<Document> {
    fn cluster_time(&self) -> Option<Timestamp> {
        self.cluster_time
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command_error(code: i32, errmsg: &str) -> mongodb::error::Error {
        let c: mongodb::error::CommandError =
            bson::from_document(doc! { "code": code, "codeName": "X", "errmsg": errmsg }).unwrap();
        mongodb::error::Error::from(ErrorKind::Command(c))
    }

    struct At(Option<Timestamp>);

    impl HasClusterTime for At {
        fn cluster_time(&self) -> Option<Timestamp> {
            self.0
        }
    }

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    /// A follower owing a resync sends it once memory has applied the
    /// stream up to the cluster time read after its load: an event at or
    /// past it, or an empty batch (nothing more committed); never on an
    /// earlier event or one without a time.
    #[test]
    fn a_resync_waits_until_the_stream_reaches_its_cluster_time() {
        let mark = Some(ts(100, 5));
        let reached = |next: Option<At>| caught_up(next, mark).0;
        assert!(!reached(Some(At(Some(ts(100, 4))))));
        assert!(!reached(Some(At(Some(ts(99, 9))))));
        assert!(!reached(Some(At(None))));
        assert!(reached(Some(At(Some(ts(100, 5))))));
        assert!(reached(Some(At(Some(ts(101, 0))))));
        assert!(reached(None));
        // Not catching up: nothing to reach, the event passes through.
        let (done, ev) = caught_up(Some(At(Some(ts(1, 1)))), None);
        assert!(!done && ev.is_some());
    }

    /// A lost history or a dead stream is "start afresh"; a lost connection
    /// or a primary stepping down is "resume".
    #[test]
    fn which_change_stream_errors_cannot_resume() {
        for (code, msg) in [
            (286, "Resume of change stream was not possible, as the resume point may no longer be in the oplog."),
            (280, "Executor error during getMore :: caused by :: cannot resume stream"),
            (260, "Invalid resume token"),
            (40585, "resume of change stream was not possible, as the resume token was not found"),
            (2, "the resume token was not found in the oplog"),
        ] {
            assert!(cannot_resume(&command_error(code, msg)), "{code} {msg}");
        }
        for (code, msg) in [
            (43, "cursor id 123 not found"),
            (189, "PrimarySteppedDown"),
            (11600, "interrupted at shutdown"),
            (91, "ShutdownInProgress"),
        ] {
            assert!(!cannot_resume(&command_error(code, msg)), "{code} {msg}");
        }
        let io =
            mongodb::error::Error::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(!cannot_resume(&io));
    }
}
