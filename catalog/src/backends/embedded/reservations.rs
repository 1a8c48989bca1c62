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

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{Database, ReadableDatabase, ReadableTable, WriteTransaction};

use super::tables::{BY_CONSUMER, BY_PROVIDER, CAPS, DUE, HOLDS, RESERVATIONS};
use super::{from_json, get_record, internal, millis, prefix_range, to_json, EmbeddedStore, SEP};
use crate::buying::contracts::claim::{self, claim_step, Claim, ClaimStep};
use crate::buying::model::{
    newest_first, sold_out, step, PlanUsage, Reservation, Step, Transition,
};
use crate::buying::store::{
    refused, written, ClaimError, Decide, ReservationStore, ReserveError, TransitionError,
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
}

/// A record as this store reads it; records written before terms were
/// recorded have no `reservedPlan` and read as None.
#[derive(Deserialize)]
struct Stored {
    #[serde(flatten)]
    record: Reservation,
    #[serde(rename = "reservedPlan", default)]
    reserved_plan: Option<Plan>,
}

impl From<Stored> for Reservation {
    fn from(s: Stored) -> Self {
        Reservation {
            reserved_plan: s.reserved_plan,
            ..s.record
        }
    }
}

fn encode(r: &Reservation) -> Result<Vec<u8>, StoreError> {
    to_json(&Writing {
        record: r,
        reserved_plan: r.reserved_plan.as_ref(),
    })
}

pub(super) fn decode(bytes: &[u8]) -> Result<Reservation, StoreError> {
    from_json::<Stored>("reservation", bytes).map(Reservation::from)
}

fn load(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    id: &str,
) -> Result<Option<Reservation>, StoreError> {
    Ok(get_record::<Stored>(table, id, "reservation")?.map(Reservation::from))
}

/// Apply `t` to `r` inside `txn` without checks (expiring what is due),
/// keeping every index in step.
fn apply(
    txn: &WriteTransaction,
    r: &Reservation,
    t: Transition,
    now: DateTime<Utc>,
) -> Result<Reservation, StoreError> {
    let next = t.apply(r, now);
    write(txn, r, &next)?;
    Ok(next)
}

/// Replace `r` by `next` inside `txn`, keeping every index in step.
fn write(txn: &WriteTransaction, r: &Reservation, next: &Reservation) -> Result<(), StoreError> {
    let mut reservations = txn.open_table(RESERVATIONS).map_err(internal)?;
    let mut holds = txn.open_table(HOLDS).map_err(internal)?;
    let mut due = txn.open_table(DUE).map_err(internal)?;
    reservations
        .insert(next.id.as_str(), encode(next)?.as_slice())
        .map_err(internal)?;
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
    Ok(())
}

impl EmbeddedStore {
    fn reserve_blocking(
        db: &Database,
        r: Reservation,
        now: DateTime<Utc>,
    ) -> Result<Result<Reservation, u32>, StoreError> {
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
            if let Some(cur) = current.filter(|c| c.is_due(now)) {
                apply(&txn, &cur, Transition::Expire, now)?;
            }
        }
        if let Some(cap) = cap {
            if sold_out(cap, active) {
                txn.commit().map_err(internal)?;
                return Ok(Err(cap));
            }
        }
        {
            let mut reservations = txn.open_table(RESERVATIONS).map_err(internal)?;
            if reservations.get(r.id.as_str()).map_err(internal)?.is_some() {
                return Err(internal(format!("reservation id {} already exists", r.id)));
            }
            reservations
                .insert(r.id.as_str(), encode(&r)?.as_slice())
                .map_err(internal)?;
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
        Ok(Ok(r))
    }

    fn update_blocking(
        db: &Database,
        id: &str,
        decide: &Decide,
    ) -> Result<Result<Reservation, TransitionError>, StoreError> {
        let txn = db.begin_write().map_err(internal)?;
        let current = load(&txn.open_table(RESERVATIONS).map_err(internal)?, id)?;
        let Some(r) = current else {
            return Ok(Err(TransitionError::NotFound));
        };
        let outcome = match decide(&r) {
            Step::Refuse => return Ok(Err(refused(r))),
            Step::Write { next, refused } => {
                write(&txn, &r, &next)?;
                written(next, refused)
            }
        };
        txn.commit().map_err(internal)?;
        Ok(outcome)
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
                    let r = load(&reservations, id)?;
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

    fn expire_due_blocking(
        db: &Database,
        now: DateTime<Utc>,
    ) -> Result<Vec<Reservation>, StoreError> {
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
        let (mut expired, mut dropped) = (Vec::new(), false);
        for key in keys {
            let Some((_, id)) = key.split_once(SEP) else {
                continue;
            };
            let current = load(&txn.open_table(RESERVATIONS).map_err(internal)?, id)?;
            match current {
                Some(r) if r.is_due(now) => expired.push(apply(&txn, &r, Transition::Expire, now)?),
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
        Ok(expired)
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
            .blocking_db(move |db| Self::reserve_blocking(db, r, now))
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
            load(&table, &id)
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
        self.blocking_db(move |db| Self::update_blocking(db, &id, &decide))
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
        self.blocking_db(move |db| Self::expire_due_blocking(db, now))
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

    // PLACEHOLDER (issue 44): replaced by the store's sequence and index.
    async fn contract_head(&self) -> Result<u64, StoreError> {
        Err(StoreError::Unavailable(
            "contract sequence not kept yet".into(),
        ))
    }

    async fn changed_since(
        &self,
        _party: &crate::buying::store::Party,
        _since: u64,
        _limit: usize,
    ) -> Result<Vec<crate::buying::store::Sequenced>, StoreError> {
        Err(StoreError::Unavailable(
            "contract sequence not kept yet".into(),
        ))
    }

    fn contract_writes(&self) -> tokio::sync::watch::Receiver<u64> {
        tokio::sync::watch::channel(0).1
    }
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
            decode(&encode(&legacy).unwrap()).unwrap().cost.to_string(),
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
