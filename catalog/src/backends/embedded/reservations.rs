//! The embedded [`ReservationStore`]: reservations and purchases, their
//! indexes (active holdings per plan, deadlines, consumers) and plan caps,
//! in the catalog's one redb file.
//!
//! Every change is one redb write transaction (fsynced before it is
//! acknowledged). redb runs one write transaction at a time, so counting a
//! plan's active holdings and inserting a new one can never interleave with
//! another reservation: the cap holds exactly. Which transition applies is
//! decided by [`step`]; this file only reads and writes.
//!
//! A record is the reservation's JSON plus `reservedPlan`, the plan as
//! reserved (the terms a purchase gets); records written before terms were
//! recorded have none and read as None.
//!
//! Every write of a record also takes the next number of the store-wide
//! contract sequence (issue 44), in the same transaction, kept in the
//! record as `seq` and indexed by `(seq)`, `(consumer, seq)` and
//! `(provider, seq)`, so [`ReservationStore::changed_since`] is a range
//! scan of the asking party's own writes. A rewrite moves the record's
//! index entries to its new sequence. Records written before sequences
//! were kept read 0 (and are indexed at 0 on open, see [`super::migrate`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{Database, ReadableDatabase, ReadableTable, WriteTransaction};

use super::tables::{
    BY_CONSUMER, BY_PROVIDER, BY_SEQ, CAPS, CONSUMER_SEQ, CONTRACT_SEQ, DUE, HOLDS, PROVIDER_SEQ,
    RESERVATIONS, SEQ_HEAD,
};
use super::{from_json, internal, millis, prefix_range, to_json, EmbeddedStore, Inner, SEP};
use crate::buying::contracts::claim::{self, claim_step, Claim, ClaimStep};
use crate::buying::model::{
    newest_first, sold_out, step, PlanUsage, Reservation, Step, Transition,
};
use crate::buying::store::{
    refused, written, ClaimError, Decide, Party, ReservationStore, ReserveError, Sequenced,
    TransitionError,
};
use crate::offers::Plan;
use crate::store::StoreError;
use serde::{Deserialize, Serialize};

/// Consumer cluster IDs bound to a consumer, per provider
/// ([`crate::buying::contracts::claim`]): `provider␟clusterID` → the
/// [`Claim`]'s JSON. Only ever opened in write transactions, so a store
/// from before it needs no migration.
const CLUSTER_IDS: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("cluster_ids");

fn cluster_id_key(provider: &str, cluster_id: &str) -> String {
    format!("{provider}{SEP}{cluster_id}")
}

/// Deadline of a purchase without expiry (an OSB purchase): never.
const PURCHASED: u64 = u64::MAX;
/// Most reservations one sweep expires in one transaction.
const SWEEP_BATCH: usize = 1000;

fn plan_key(offer_id: &str, plan_id: &str) -> String {
    format!("{offer_id}{SEP}{plan_id}")
}

fn hold_key(r: &Reservation) -> String {
    format!("{}{SEP}{}", plan_key(&r.offer_id, &r.plan_id), r.id)
}

fn due_key(r: &Reservation) -> String {
    format!("{:020}{SEP}{}", millis(r.expires_at), r.id)
}

/// `r`'s entry in the expiry index, if it is due some day.
fn due_entry(r: &Reservation) -> Option<String> {
    r.due_at()
        .map(|d| format!("{:020}{SEP}{}", millis(d), r.id))
}

fn consumer_key(r: &Reservation) -> String {
    format!("{}{SEP}{}", r.consumer, r.id)
}

/// The [`BY_PROVIDER`] key of `r`: a record's provider never changes, so
/// it is written once, with the record.
pub(super) fn provider_key(r: &Reservation) -> String {
    format!("{}{SEP}{}", r.cluster_id, r.id)
}

/// A record as this store writes it: the reservation's JSON, plus the
/// plan it reserved as `reservedPlan` (the record's own serde form leaves
/// the plan out, as the API answers it).
#[derive(Serialize)]
struct Writing<'a> {
    #[serde(flatten)]
    record: &'a Reservation,
    #[serde(rename = "reservedPlan", skip_serializing_if = "Option::is_none")]
    reserved_plan: Option<&'a Plan>,
    /// The contract sequence of this write.
    seq: u64,
}

/// A record as this store reads it; records written before terms were
/// recorded have no `reservedPlan` and read as None, those written before
/// sequences were kept no `seq` and read 0.
#[derive(Deserialize)]
struct Stored {
    #[serde(flatten)]
    record: Reservation,
    #[serde(rename = "reservedPlan", default)]
    reserved_plan: Option<Plan>,
    #[serde(default)]
    seq: u64,
}

impl From<Stored> for Reservation {
    fn from(s: Stored) -> Self {
        Reservation {
            reserved_plan: s.reserved_plan,
            ..s.record
        }
    }
}

fn encode(r: &Reservation, seq: u64) -> Result<Vec<u8>, StoreError> {
    to_json(&Writing {
        record: r,
        reserved_plan: r.reserved_plan.as_ref(),
        seq,
    })
}

pub(super) fn decode(bytes: &[u8]) -> Result<Reservation, StoreError> {
    decode_sequenced(bytes).map(|s| s.record)
}

/// A stored record with the sequence of its last write.
pub(super) fn decode_sequenced(bytes: &[u8]) -> Result<Sequenced, StoreError> {
    let stored: Stored = from_json("reservation", bytes)?;
    let seq = stored.seq;
    Ok(Sequenced {
        seq,
        record: stored.into(),
    })
}

fn load(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    id: &str,
) -> Result<Option<Sequenced>, StoreError> {
    match table.get(id).map_err(internal)? {
        Some(v) => Ok(Some(decode_sequenced(v.value())?)),
        None => Ok(None),
    }
}

/// Take the next number of the contract sequence inside `txn`: it commits
/// (or not) with the write it stamps, and redb runs one write transaction
/// at a time, so numbers follow commit order.
fn next_seq(txn: &WriteTransaction) -> Result<u64, StoreError> {
    let mut t = txn.open_table(CONTRACT_SEQ).map_err(internal)?;
    let next = t
        .get(SEQ_HEAD)
        .map_err(internal)?
        .map_or(0, |v| v.value())
        .saturating_add(1);
    t.insert(SEQ_HEAD, next).map_err(internal)?;
    Ok(next)
}

/// Add (or, `add` false, remove) the sequence index entries of `r` at `seq`.
pub(super) fn index_seq(
    txn: &WriteTransaction,
    r: &Reservation,
    seq: u64,
    add: bool,
) -> Result<(), StoreError> {
    let mut by_seq = txn.open_table(BY_SEQ).map_err(internal)?;
    let mut consumer = txn.open_table(CONSUMER_SEQ).map_err(internal)?;
    let mut provider = txn.open_table(PROVIDER_SEQ).map_err(internal)?;
    let id = r.id.as_str();
    if add {
        by_seq.insert((seq, id), 0).map_err(internal)?;
        consumer
            .insert((r.consumer.as_str(), seq, id), 0)
            .map_err(internal)?;
        provider
            .insert((r.cluster_id.as_str(), seq, id), 0)
            .map_err(internal)?;
    } else {
        by_seq.remove((seq, id)).map_err(internal)?;
        consumer
            .remove((r.consumer.as_str(), seq, id))
            .map_err(internal)?;
        provider
            .remove((r.cluster_id.as_str(), seq, id))
            .map_err(internal)?;
    }
    Ok(())
}

/// Store `next` (replacing `old`, the record as read with its sequence)
/// at the next sequence, moving its sequence index entries; the sequence.
fn store(
    txn: &WriteTransaction,
    old: Option<(&Reservation, u64)>,
    next: &Reservation,
) -> Result<u64, StoreError> {
    let seq = next_seq(txn)?;
    if let Some((r, old_seq)) = old {
        index_seq(txn, r, old_seq, false)?;
    }
    index_seq(txn, next, seq, true)?;
    txn.open_table(RESERVATIONS)
        .map_err(internal)?
        .insert(next.id.as_str(), encode(next, seq)?.as_slice())
        .map_err(internal)?;
    Ok(seq)
}

/// Apply `t` to `r` inside `txn` without checks (expiring what is due),
/// keeping every index in step.
fn apply(
    txn: &WriteTransaction,
    current: &Sequenced,
    t: Transition,
    now: DateTime<Utc>,
) -> Result<(Reservation, u64), StoreError> {
    let next = t.apply(&current.record, now);
    let seq = write(txn, current, &next)?;
    Ok((next, seq))
}

/// Replace `current` by `next` inside `txn`, keeping every index in step;
/// the sequence of the write.
fn write(
    txn: &WriteTransaction,
    current: &Sequenced,
    next: &Reservation,
) -> Result<u64, StoreError> {
    let r = &current.record;
    let seq = store(txn, Some((r, current.seq)), next)?;
    let mut holds = txn.open_table(HOLDS).map_err(internal)?;
    let mut due = txn.open_table(DUE).map_err(internal)?;
    if let Some(old) = due_entry(r) {
        due.remove(old.as_str()).map_err(internal)?;
    }
    if let Some(new) = due_entry(next) {
        due.insert(new.as_str(), 0).map_err(internal)?;
    }
    if next.holds() {
        let deadline = next.due_at().map_or(PURCHASED, millis);
        holds
            .insert(hold_key(next).as_str(), deadline)
            .map_err(internal)?;
    } else {
        holds.remove(hold_key(next).as_str()).map_err(internal)?;
    }
    if next.cluster_id != r.cluster_id {
        // No transition moves a record to another provider today; if one
        // ever does, its listing must follow.
        let mut by_provider = txn.open_table(BY_PROVIDER).map_err(internal)?;
        by_provider
            .remove(provider_key(r).as_str())
            .map_err(internal)?;
        by_provider
            .insert(provider_key(next).as_str(), 0)
            .map_err(internal)?;
    }
    Ok(seq)
}

impl Inner {
    /// Tell the contract stream a write committed at `seq` (the head only
    /// rises: writes finishing out of order never lower it).
    fn contract_written(&self, seq: Option<u64>) {
        if let Some(seq) = seq {
            self.contract_writes.send_if_modified(|head| {
                let raised = seq > *head;
                if raised {
                    *head = seq;
                }
                raised
            });
        }
    }
}

impl EmbeddedStore {
    /// The outcome, and the last sequence the transaction took.
    fn reserve_blocking(
        db: &Database,
        r: Reservation,
        now: DateTime<Utc>,
    ) -> Result<(Result<Reservation, u32>, Option<u64>), StoreError> {
        let mut last = None;
        let txn = db.begin_write().map_err(internal)?;
        let plan = plan_key(&r.offer_id, &r.plan_id);
        let cap = txn
            .open_table(CAPS)
            .map_err(internal)?
            .get(plan.as_str())
            .map_err(internal)?
            .map(|v| v.value());
        let now_ms = millis(now);
        let (mut active, mut due_ids) = (0u64, Vec::new());
        {
            let holds = txn.open_table(HOLDS).map_err(internal)?;
            let (lo, hi) = prefix_range(&plan);
            for entry in holds.range(lo.as_str()..hi.as_str()).map_err(internal)? {
                let (k, deadline) = entry.map_err(internal)?;
                if deadline.value() > now_ms {
                    active += 1;
                } else if let Some((_, id)) = k.value().rsplit_once(SEP) {
                    due_ids.push(id.to_string());
                }
            }
        }
        // Expire what is due on the way, so its units are free right now
        // whether or not the sweeper has run.
        for id in due_ids {
            let current = load(&txn.open_table(RESERVATIONS).map_err(internal)?, &id)?;
            if let Some(cur) = current.filter(|c| c.record.is_due(now)) {
                last = Some(apply(&txn, &cur, Transition::Expire, now)?.1);
            }
        }
        if let Some(cap) = cap {
            if sold_out(cap, active) {
                txn.commit().map_err(internal)?;
                return Ok((Err(cap), last));
            }
        }
        {
            let exists = txn
                .open_table(RESERVATIONS)
                .map_err(internal)?
                .get(r.id.as_str())
                .map_err(internal)?
                .is_some();
            if exists {
                return Err(internal(format!("reservation id {} already exists", r.id)));
            }
            last = Some(store(&txn, None, &r)?);
            txn.open_table(HOLDS)
                .map_err(internal)?
                .insert(hold_key(&r).as_str(), millis(r.expires_at))
                .map_err(internal)?;
            txn.open_table(DUE)
                .map_err(internal)?
                .insert(due_key(&r).as_str(), 0)
                .map_err(internal)?;
            txn.open_table(BY_CONSUMER)
                .map_err(internal)?
                .insert(consumer_key(&r).as_str(), 0)
                .map_err(internal)?;
            txn.open_table(BY_PROVIDER)
                .map_err(internal)?
                .insert(provider_key(&r).as_str(), 0)
                .map_err(internal)?;
        }
        txn.commit().map_err(internal)?;
        Ok((Ok(r), last))
    }

    fn update_blocking(
        db: &Database,
        id: &str,
        decide: &Decide,
    ) -> Result<(Result<Reservation, TransitionError>, Option<u64>), StoreError> {
        let txn = db.begin_write().map_err(internal)?;
        let current = load(&txn.open_table(RESERVATIONS).map_err(internal)?, id)?;
        let Some(current) = current else {
            return Ok((Err(TransitionError::NotFound), None));
        };
        let (outcome, seq) = match decide(&current.record) {
            Step::Refuse => return Ok((Err(refused(current.record)), None)),
            Step::Write { next, refused } => {
                let seq = write(&txn, &current, &next)?;
                (written(next, refused), seq)
            }
        };
        txn.commit().map_err(internal)?;
        Ok((outcome, Some(seq)))
    }

    fn claim_blocking(
        db: &Database,
        key: &str,
        cluster_id: &str,
        owner: &str,
        reservation: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<(), ClaimError>, StoreError> {
        // One write transaction: redb runs one at a time, so reading the
        // claim and its reservations and writing it never interleaves with
        // another claim or purchase.
        let txn = db.begin_write().map_err(internal)?;
        {
            let mut claims = txn.open_table(CLUSTER_IDS).map_err(internal)?;
            let reservations = txn.open_table(RESERVATIONS).map_err(internal)?;
            let current: Option<Claim> = match claims.get(key).map_err(internal)? {
                Some(v) => Some(from_json("cluster ID claim", v.value())?),
                None => None,
            };
            let mut live = std::collections::BTreeSet::new();
            if let Some(c) = &current {
                for id in &c.reservations {
                    let r = load(&reservations, id)?.map(|s| s.record);
                    if claim::holds(r.as_ref(), &c.owner, cluster_id, now) {
                        live.insert(id.clone());
                    }
                }
            }
            match claim_step(current.as_ref(), owner, reservation, |id| live.contains(id)) {
                ClaimStep::Held => return Ok(Err(ClaimError::Held)),
                ClaimStep::Write(next) => {
                    claims
                        .insert(key, to_json(&next)?.as_slice())
                        .map_err(internal)?;
                }
            }
        }
        txn.commit().map_err(internal)?;
        Ok(Ok(()))
    }

    fn unclaim_blocking(db: &Database, key: &str, reservation: &str) -> Result<(), StoreError> {
        let txn = db.begin_write().map_err(internal)?;
        {
            let mut claims = txn.open_table(CLUSTER_IDS).map_err(internal)?;
            let current: Option<Claim> = match claims.get(key).map_err(internal)? {
                Some(v) => Some(from_json("cluster ID claim", v.value())?),
                None => None,
            };
            let Some(current) = current else {
                return Ok(());
            };
            let next = claim::unclaim(&current, reservation);
            claims
                .insert(key, to_json(&next)?.as_slice())
                .map_err(internal)?;
        }
        txn.commit().map_err(internal)
    }

    /// The records expired, and the last sequence the transaction took.
    fn expire_due_blocking(
        db: &Database,
        now: DateTime<Utc>,
    ) -> Result<(Vec<Reservation>, Option<u64>), StoreError> {
        let txn = db.begin_write().map_err(internal)?;
        let upper = format!("{:020}", millis(now).saturating_add(1));
        let keys: Vec<String> = {
            let due = txn.open_table(DUE).map_err(internal)?;
            let mut keys = Vec::new();
            for entry in due.range(..upper.as_str()).map_err(internal)? {
                let (k, _) = entry.map_err(internal)?;
                keys.push(k.value().to_string());
                if keys.len() >= SWEEP_BATCH {
                    break;
                }
            }
            keys
        };
        let (mut expired, mut dropped, mut last) = (Vec::new(), false, None);
        for key in keys {
            let Some((_, id)) = key.split_once(SEP) else {
                continue;
            };
            let current = load(&txn.open_table(RESERVATIONS).map_err(internal)?, id)?;
            match current {
                Some(r) if r.record.is_due(now) => {
                    let (next, seq) = apply(&txn, &r, Transition::Expire, now)?;
                    expired.push(next);
                    last = Some(seq);
                }
                // An index entry without a due record: drop it.
                _ => {
                    txn.open_table(DUE)
                        .map_err(internal)?
                        .remove(key.as_str())
                        .map_err(internal)?;
                    dropped = true;
                }
            }
        }
        if !expired.is_empty() || dropped {
            txn.commit().map_err(internal)?;
        }
        Ok((expired, last))
    }

    /// Run a record write on the blocking pool and, once it committed,
    /// raise the contract head to the last sequence it took.
    async fn record_write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> Result<(T, Option<u64>), StoreError> + Send + 'static,
    {
        self.blocking(move |inner| {
            let (out, seq) = f(&inner.db)?;
            inner.contract_written(seq);
            Ok(out)
        })
        .await
    }
}

#[async_trait]
impl ReservationStore for EmbeddedStore {
    async fn reserve(
        &self,
        r: Reservation,
        now: DateTime<Utc>,
    ) -> Result<Reservation, ReserveError> {
        match self
            .record_write(move |db| Self::reserve_blocking(db, r, now))
            .await?
        {
            Ok(r) => Ok(r),
            Err(cap) => Err(ReserveError::SoldOut { cap }),
        }
    }

    async fn get_reservation(&self, id: &str) -> Result<Option<Reservation>, StoreError> {
        let id = id.to_string();
        self.blocking_db(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(RESERVATIONS).map_err(internal)?;
            Ok(load(&table, &id)?.map(|s| s.record))
        })
        .await
    }

    async fn list_reservations(
        &self,
        consumer: Option<&str>,
    ) -> Result<Vec<Reservation>, StoreError> {
        let consumer = consumer.map(str::to_string);
        let mut out: Vec<Reservation> = self
            .blocking_db(move |db| {
                let read = db.begin_read().map_err(internal)?;
                let table = read.open_table(RESERVATIONS).map_err(internal)?;
                let mut out = Vec::new();
                match consumer {
                    Some(c) => {
                        let index = read.open_table(BY_CONSUMER).map_err(internal)?;
                        let (lo, hi) = prefix_range(&c);
                        for entry in index.range(lo.as_str()..hi.as_str()).map_err(internal)? {
                            let (k, _) = entry.map_err(internal)?;
                            let Some((_, id)) = k.value().rsplit_once(SEP) else {
                                continue;
                            };
                            if let Some(v) = table.get(id).map_err(internal)? {
                                out.push(decode(v.value())?);
                            }
                        }
                    }
                    None => {
                        for entry in table.iter().map_err(internal)? {
                            let (_, v) = entry.map_err(internal)?;
                            out.push(decode(v.value())?);
                        }
                    }
                }
                Ok(out)
            })
            .await?;
        newest_first(&mut out);
        Ok(out)
    }

    async fn transition(
        &self,
        id: &str,
        t: Transition,
        now: DateTime<Utc>,
    ) -> Result<Reservation, TransitionError> {
        self.update(id, std::sync::Arc::new(move |r| step(r, t, now)))
            .await
    }

    async fn update(&self, id: &str, decide: Decide) -> Result<Reservation, TransitionError> {
        let id = id.to_string();
        self.record_write(move |db| Self::update_blocking(db, &id, &decide))
            .await?
    }

    async fn list_sold(&self, cluster_id: &str) -> Result<Vec<Reservation>, StoreError> {
        let cluster_id = cluster_id.to_string();
        let mut out: Vec<Reservation> = self
            .blocking_db(move |db| {
                // By the provider index: a poll reads the caller's records
                // only, however many others the catalog holds.
                let read = db.begin_read().map_err(internal)?;
                let table = read.open_table(RESERVATIONS).map_err(internal)?;
                let index = read.open_table(BY_PROVIDER).map_err(internal)?;
                let (lo, hi) = prefix_range(&cluster_id);
                let mut out = Vec::new();
                for entry in index.range(lo.as_str()..hi.as_str()).map_err(internal)? {
                    let (k, _) = entry.map_err(internal)?;
                    let Some((_, id)) = k.value().rsplit_once(SEP) else {
                        continue;
                    };
                    if let Some(v) = table.get(id).map_err(internal)? {
                        out.push(decode(v.value())?);
                    }
                }
                Ok(out)
            })
            .await?;
        newest_first(&mut out);
        Ok(out)
    }

    async fn expire_due(&self, now: DateTime<Utc>) -> Result<Vec<Reservation>, StoreError> {
        self.record_write(move |db| Self::expire_due_blocking(db, now))
            .await
    }

    async fn set_plan_cap(
        &self,
        offer_id: &str,
        plan_id: &str,
        cap: Option<u32>,
    ) -> Result<(), StoreError> {
        let key = plan_key(offer_id, plan_id);
        self.blocking_db(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut caps = txn.open_table(CAPS).map_err(internal)?;
                match cap {
                    Some(c) => caps.insert(key.as_str(), c).map(|_| ()),
                    None => caps.remove(key.as_str()).map(|_| ()),
                }
                .map_err(internal)?;
            }
            txn.commit().map_err(internal)
        })
        .await
    }

    async fn claim_cluster_id(
        &self,
        provider: &str,
        cluster_id: &str,
        owner: &str,
        reservation: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        let key = cluster_id_key(provider, cluster_id);
        let (cluster_id, owner, reservation) = (
            cluster_id.to_string(),
            owner.to_string(),
            reservation.to_string(),
        );
        self.blocking_db(move |db| {
            Self::claim_blocking(db, &key, &cluster_id, &owner, &reservation, now)
        })
        .await?
    }

    async fn unclaim_cluster_id(
        &self,
        provider: &str,
        cluster_id: &str,
        reservation: &str,
    ) -> Result<(), StoreError> {
        let key = cluster_id_key(provider, cluster_id);
        let reservation = reservation.to_string();
        self.blocking_db(move |db| Self::unclaim_blocking(db, &key, &reservation))
            .await
    }

    async fn plan_usage(
        &self,
        offer_id: &str,
        plan_id: &str,
        now: DateTime<Utc>,
    ) -> Result<PlanUsage, StoreError> {
        let key = plan_key(offer_id, plan_id);
        self.blocking_db(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let cap = read
                .open_table(CAPS)
                .map_err(internal)?
                .get(key.as_str())
                .map_err(internal)?
                .map(|v| v.value());
            let holds = read.open_table(HOLDS).map_err(internal)?;
            let (lo, hi) = prefix_range(&key);
            let now_ms = millis(now);
            let mut active = 0;
            for entry in holds.range(lo.as_str()..hi.as_str()).map_err(internal)? {
                let (_, deadline) = entry.map_err(internal)?;
                if deadline.value() > now_ms {
                    active += 1;
                }
            }
            Ok(PlanUsage { cap, active })
        })
        .await
    }

    async fn contract_head(&self) -> Result<u64, StoreError> {
        self.blocking_db(|db| {
            let read = db.begin_read().map_err(internal)?;
            let t = read.open_table(CONTRACT_SEQ).map_err(internal)?;
            Ok(t.get(SEQ_HEAD).map_err(internal)?.map_or(0, |v| v.value()))
        })
        .await
    }

    async fn changed_since(
        &self,
        party: &Party,
        since: u64,
        limit: usize,
    ) -> Result<Vec<Sequenced>, StoreError> {
        let party = party.clone();
        self.blocking_db(move |db| changed_since_blocking(db, &party, since, limit))
            .await
    }

    fn contract_writes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.contract_writes.subscribe()
    }
}

/// The `(seq, id)` entries of `owner` in `index` after `since`, at most
/// `limit`, in sequence order.
fn party_entries(
    index: &impl ReadableTable<(&'static str, u64, &'static str), u8>,
    owner: &str,
    since: u64,
    limit: usize,
) -> Result<Vec<(u64, String)>, StoreError> {
    let mut out = Vec::new();
    let Some(from) = since.checked_add(1) else {
        return Ok(out);
    };
    let range = index
        .range((owner, from, "")..=(owner, u64::MAX, "\u{10ffff}"))
        .map_err(internal)?;
    for entry in range {
        if out.len() >= limit {
            break;
        }
        let (k, _) = entry.map_err(internal)?;
        let (_, seq, id) = k.value();
        out.push((seq, id.to_string()));
    }
    Ok(out)
}

fn changed_since_blocking(
    db: &Database,
    party: &Party,
    since: u64,
    limit: usize,
) -> Result<Vec<Sequenced>, StoreError> {
    let read = db.begin_read().map_err(internal)?;
    let mut entries: Vec<(u64, String)> = match party {
        Party::All => {
            let index = read.open_table(BY_SEQ).map_err(internal)?;
            let mut out = Vec::new();
            if let Some(from) = since.checked_add(1) {
                for entry in index.range((from, "")..).map_err(internal)? {
                    if out.len() >= limit {
                        break;
                    }
                    let (k, _) = entry.map_err(internal)?;
                    let (seq, id) = k.value();
                    out.push((seq, id.to_string()));
                }
            }
            out
        }
        Party::Of { consumer, provider } => {
            let mut out = Vec::new();
            if let Some(c) = consumer {
                let index = read.open_table(CONSUMER_SEQ).map_err(internal)?;
                out.extend(party_entries(&index, c, since, limit)?);
            }
            if let Some(p) = provider {
                let index = read.open_table(PROVIDER_SEQ).map_err(internal)?;
                out.extend(party_entries(&index, p, since, limit)?);
            }
            // Both sides in one order; a record bought from oneself is in
            // both at the same sequence: once.
            out.sort();
            out.dedup();
            out.truncate(limit);
            out
        }
    };
    let table = read.open_table(RESERVATIONS).map_err(internal)?;
    let mut out = Vec::with_capacity(entries.len());
    for (seq, id) in entries.drain(..) {
        // Read in the same snapshot as the index: the record is at `seq`.
        if let Some(s) = load(&table, &id)? {
            debug_assert_eq!(s.seq, seq);
            out.push(s);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buying::model::{Channel, ReservationState};
    use crate::offers::Cost;

    fn reservation(id: &str, plan: &str, ttl_ms: i64) -> Reservation {
        let now = crate::store::now();
        Reservation {
            id: id.into(),
            consumer: format!("c-{id}"),
            offer_id: "o".into(),
            plan_id: plan.into(),
            cluster_id: "cluster".into(),
            cost: Cost::ZERO,
            state: ReservationState::Reserved,
            channel: Channel::Rest,
            created_at: now,
            expires_at: now + chrono::Duration::milliseconds(ttl_ms),
            purchased_at: None,
            ended_at: None,
            contract: None,
            reserved_plan: None,
            bought_by: None,
        }
    }

    #[tokio::test]
    async fn the_reserved_plan_is_kept_and_old_records_read_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let plan: Plan =
            serde_json::from_str(r#"{"name":"s","cost":"1","resources":{"cpu":"4"}}"#).unwrap();
        let r = Reservation {
            reserved_plan: Some(plan.clone()),
            ..reservation("with", "p", 60_000)
        };
        store.reserve(r, crate::store::now()).await.unwrap();
        let read = store.get_reservation("with").await.unwrap().unwrap();
        assert_eq!(read.reserved_plan, Some(plan.clone()));
        let listed = store.list_reservations(Some("c-with")).await.unwrap();
        assert_eq!(listed[0].reserved_plan, Some(plan.clone()));
        // A transition keeps it.
        let now = crate::store::now();
        let released = store
            .transition("with", Transition::Release, now)
            .await
            .unwrap();
        assert_eq!(released.reserved_plan, Some(plan));
        // The API form never carries it.
        assert!(!serde_json::to_string(&read)
            .unwrap()
            .contains("reservedPlan"));

        // A record as written before terms were recorded.
        let old = r#"{"id":"old","consumer":"alice","offerID":"o","planID":"p","clusterID":"cluster","cost":"0.05","state":"reserved","channel":"rest","createdAt":"2026-11-02T10:00:00Z","expiresAt":"2999-01-01T00:00:00Z"}"#;
        let legacy = decode(old.as_bytes()).unwrap();
        assert_eq!((legacy.id.as_str(), &legacy.reserved_plan), ("old", &None));
        assert_eq!(
            decode(&encode(&legacy, 0).unwrap())
                .unwrap()
                .cost
                .to_string(),
            "0.05"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn exactly_the_cap_wins_and_expiry_frees_units() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        store.set_plan_cap("o", "p", Some(3)).await.unwrap();
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .reserve(
                            reservation(&format!("r{i}"), "p", 60_000),
                            crate::store::now(),
                        )
                        .await
                })
            })
            .collect();
        let mut won = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(r) => won.push(r.id),
                Err(ReserveError::SoldOut { cap: 3 }) => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(won.len(), 3);
        let now = crate::store::now();
        assert_eq!(store.plan_usage("o", "p", now).await.unwrap().active, 3);

        // Purchase one, release one: one unit frees.
        store
            .transition(&won[0], Transition::Purchase, now)
            .await
            .unwrap();
        store
            .transition(&won[1], Transition::Release, now)
            .await
            .unwrap();
        let again = store.transition(&won[1], Transition::Release, now).await;
        assert!(matches!(again, Err(TransitionError::WrongState(_))));
        assert_eq!(store.plan_usage("o", "p", now).await.unwrap().active, 2);

        // Past the deadline: the sweep expires the reserved one only.
        let later = now + chrono::Duration::minutes(2);
        let expired = store.expire_due(later).await.unwrap();
        assert_eq!(
            expired.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            [won[2].as_str()]
        );
        assert!(store.expire_due(later).await.unwrap().is_empty());
        assert_eq!(store.plan_usage("o", "p", later).await.unwrap().active, 1);
        // A purchase attempted after the deadline expires the record instead.
        let late = reservation("late", "q", 10);
        store.reserve(late, now).await.unwrap();
        match store.transition("late", Transition::Purchase, later).await {
            Err(TransitionError::WrongState(r)) => assert_eq!(r.state, ReservationState::Expired),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            store.list_reservations(Some("c-late")).await.unwrap().len(),
            1
        );
        assert_eq!(store.list_reservations(None).await.unwrap().len(), 4);
    }
}
