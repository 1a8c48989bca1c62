//! The MongoDB [`ReservationStore`], safe for several catalog processes on
//! one database. Which transition applies is decided by [`step`]; this
//! file reads, writes with a state-conditioned replace and keeps the units.
//!
//! Collections:
//! - `reservations`: `{_id, consumer, state, expiresAt, contractEnds?,
//!   unit, body, reservedPlan?, seq}`, where `body` is the [`Reservation`],
//!   `reservedPlan` the plan as reserved (the terms a purchase gets;
//!   absent on records from before terms were recorded) and `contractEnds`
//!   a live contract's expiry (for the sweeper); every change is a
//!   `replace_one` conditioned on the state it expects (and, for a
//!   contract, its revision), so two processes never both purchase, or
//!   purchase and expire, one reservation, nor lose a state report.
//!   `seq` is the contract sequence of the document's last write: every
//!   insert and replace is a transaction taking the next one
//!   ([`super::sequence`]); absent (read as 0) on records last written
//!   before sequences were kept.
//! - `plan_units`: one document per held unit,
//!   `{_id: "offer␟plan␟slot", plan, reservation, expiresAt}`. For a capped
//!   plan the slot is a number below the cap, so the unique `_id` makes
//!   claiming a unit an atomic insert: however many clients race, at most
//!   `cap` slots exist. An uncapped plan's units are named after their
//!   reservation. A purchase sets `expiresAt` to the contract's expiry
//!   (clears it for an OSB purchase: held until cancelled).
//! - `plan_caps`: `{_id: "offer␟plan", cap}`.
//! - `cluster_id_claims`: `{_id: "provider␟clusterID", owner,
//!   reservations, rev}`, who holds a consumer cluster ID with a provider
//!   ([`crate::buying::contracts::claim`]). The first claim is an insert
//!   the unique `_id` makes atomic; every later one replaces the document
//!   only at the revision it read, so two consumers never both hold it.
//!
//! A process that dies between two writes (unit and reservation) leaves a
//! unit whose reservation is missing or over; whoever next needs the unit
//! (a reservation of that plan finding it sold out) checks each unit's
//! reservation and frees the stale ones.

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mongodb::bson::{self, doc, Bson, Document};
use serde::{Deserialize, Serialize};

use super::sequence::seq_of;
use super::{bt, classify, find_all, from_bt, is_duplicate_key, MongoStore, Op};
use crate::buying::contracts::claim::{self, claim_step, Claim, ClaimStep};
use crate::buying::model::{
    newest_first, sold_out, step, PlanUsage, Reservation, ReservationState, Step, Transition,
};
use crate::buying::store::{
    refused, written, ClaimError, Decide, Party, ReservationStore, ReserveError, Sequenced,
    TransitionError,
};
use crate::offers::Plan;
use crate::store::StoreError;

/// Attempts at a slot or a state change before answering 503.
const MAX_ATTEMPTS: usize = 32;
/// Most reservations one sweep expires.
const SWEEP_BATCH: i64 = 1000;
/// A unit younger than this whose reservation is missing may belong to a
/// reservation being written right now: leave it alone.
const ORPHAN_GRACE: chrono::Duration = chrono::Duration::seconds(30);
const SEP: char = '\u{1f}';

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReservationDoc {
    #[serde(rename = "_id")]
    id: String,
    consumer: String,
    state: String,
    expires_at: bson::DateTime,
    /// A purchased contract's expiry: what the sweeper looks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    contract_ends: Option<bson::DateTime>,
    unit: String,
    body: Reservation,
    /// The plan as reserved: the terms a purchase gets. Beside `body`, whose
    /// serde form (the API's) leaves it out; absent on records written
    /// before terms were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reserved_plan: Option<Plan>,
    /// The contract sequence of this write (see the module docs).
    #[serde(default)]
    seq: Option<i64>,
}

impl ReservationDoc {
    /// The doc with its reserved plan back in the record.
    fn whole(mut self) -> Self {
        self.body.reserved_plan = self.reserved_plan.take();
        self
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UnitDoc {
    #[serde(rename = "_id")]
    id: String,
    plan: String,
    reservation: String,
    /// None once purchased.
    expires_at: Option<bson::DateTime>,
    created_at: bson::DateTime,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct CapDoc {
    #[serde(rename = "_id")]
    id: String,
    cap: i64,
}

impl super::StoreFailure for ClaimError {
    fn store_error_mut(&mut self) -> Option<&mut StoreError> {
        match self {
            Self::Store(e) => Some(e),
            Self::Held => None,
        }
    }
}

/// See the module docs: a [`Claim`] and its revision.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ClaimDoc {
    #[serde(rename = "_id")]
    id: String,
    #[serde(flatten)]
    claim: Claim,
    rev: i64,
}

fn plan_key(offer_id: &str, plan_id: &str) -> String {
    format!("{offer_id}{SEP}{plan_id}")
}

/// The document of `r` holding `unit`, written with sequence `seq`.
fn res_doc(r: &Reservation, unit: &str, seq: u64) -> ReservationDoc {
    ReservationDoc {
        id: r.id.clone(),
        consumer: r.consumer.clone(),
        state: r.state.as_str().to_string(),
        expires_at: bt(r.expires_at),
        contract_ends: (r.state == ReservationState::Purchased)
            .then(|| r.due_at().map(bt))
            .flatten(),
        unit: unit.to_string(),
        body: r.clone(),
        reserved_plan: r.reserved_plan.clone(),
        seq: Some(i64::try_from(seq).unwrap_or(i64::MAX)),
    }
}

/// A uniformly chosen index below `n` (n > 0), spreading racing clients
/// over the free slots.
fn pick(n: usize) -> usize {
    let mut b = [0u8; 4];
    if getrandom::fill(&mut b).is_err() {
        return 0;
    }
    u32::from_le_bytes(b) as usize % n
}

impl MongoStore {
    pub(super) async fn create_buying_indexes(self) {
        let units = [doc! { "plan": 1 }];
        let reservations = [
            doc! { "consumer": 1 },
            // The sweeper's queries: reservations due, contracts ended.
            doc! { "state": 1, "expiresAt": 1 },
            doc! { "state": 1, "contractEnds": 1 },
            doc! { "body.clusterID": 1 },
            // `changed_since`: by party and sequence, and all by sequence.
            doc! { "consumer": 1, "seq": 1 },
            doc! { "body.clusterID": 1, "seq": 1 },
            doc! { "seq": 1 },
        ];
        let bindings = [doc! { "instanceID": 1 }];
        let instances = super::osb::INSTANCE_INDEXES.map(|key| doc! { key: 1 });
        super::conn::create_indexes("reservations", || async {
            use super::conn::create_key_indexes;
            create_key_indexes(&self.units, &units).await?;
            create_key_indexes(&self.reservations, &reservations).await?;
            create_key_indexes(&self.bindings, &bindings).await?;
            create_key_indexes(&self.instances, &instances).await
        })
        .await;
    }

    /// The records matching `filter`, in the order every listing answers
    /// ([`newest_first`]).
    async fn find_newest_first(&self, filter: Document) -> Result<Vec<Reservation>, StoreError> {
        let docs: Vec<ReservationDoc> = find_all(self.reservations.find(filter)).await?;
        let mut out: Vec<Reservation> = docs.into_iter().map(|d| d.whole().body).collect();
        newest_first(&mut out);
        Ok(out)
    }

    async fn find_reservation(&self, id: &str) -> Result<Option<ReservationDoc>, StoreError> {
        Ok(self
            .reservations
            .find_one(doc! { "_id": id })
            .await
            .map_err(classify)?
            .map(ReservationDoc::whole))
    }

    /// Whether `unit` is still held after looking at its reservation; frees
    /// it (and expires the reservation if due) when not.
    async fn unit_still_held(
        &self,
        unit: &UnitDoc,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let Some(doc) = self.find_reservation(&unit.reservation).await? else {
            if from_bt(unit.created_at) + ORPHAN_GRACE > now {
                return Ok(true);
            }
            self.free_unit(&unit.id, &unit.reservation).await?;
            return Ok(false);
        };
        let r = doc.body;
        if r.is_due(now) {
            return match self.transition_now(&r.id, Transition::Expire, now).await {
                Ok(_) => Ok(false),
                // Someone else moved it first: look again next time.
                Err(TransitionError::WrongState(cur)) => Ok(cur.is_active(now)),
                Err(TransitionError::NotFound) => Ok(false),
                Err(TransitionError::Store(e)) => Err(e),
            };
        }
        match r.state {
            ReservationState::Reserved => Ok(true),
            ReservationState::Purchased => {
                let until = r.due_at().map(bt);
                if unit.expires_at != until {
                    self.hold_unit(&unit.id, &r.id, until).await?;
                }
                Ok(true)
            }
            _ => {
                self.free_unit(&unit.id, &r.id).await?;
                Ok(false)
            }
        }
    }

    /// Hold `unit_id` until `until` (None: until cancelled).
    async fn hold_unit(
        &self,
        unit_id: &str,
        reservation: &str,
        until: Option<bson::DateTime>,
    ) -> Result<(), StoreError> {
        let until = until.map_or(Bson::Null, Bson::DateTime);
        self.units
            .update_one(
                doc! { "_id": unit_id, "reservation": reservation },
                doc! { "$set": { "expiresAt": until } },
            )
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn free_unit(&self, unit_id: &str, reservation: &str) -> Result<(), StoreError> {
        self.units
            .delete_one(doc! { "_id": unit_id, "reservation": reservation })
            .await
            .map_err(classify)?;
        Ok(())
    }

    /// Claim a unit of `plan` for `reservation`: its id, or Err(cap) when
    /// every unit is held.
    async fn claim_unit(
        &self,
        plan: &str,
        r: &Reservation,
        now: DateTime<Utc>,
    ) -> Result<Result<String, u32>, StoreError> {
        let cap = self
            .caps
            .find_one(doc! { "_id": plan })
            .await
            .map_err(classify)?
            .map(|c| u32::try_from(c.cap.max(0)).unwrap_or(u32::MAX));
        let unit = |slot: &str| UnitDoc {
            id: format!("{plan}{SEP}{slot}"),
            plan: plan.to_string(),
            reservation: r.id.clone(),
            expires_at: Some(bt(r.expires_at)),
            created_at: bt(now),
        };
        let Some(cap) = cap else {
            let u = unit(&format!("r-{}", r.id));
            self.units.insert_one(&u).await.map_err(classify)?;
            return Ok(Ok(u.id));
        };
        for _ in 0..MAX_ATTEMPTS {
            let units: Vec<UnitDoc> = find_all(self.units.find(doc! { "plan": plan })).await?;
            let mut held = Vec::with_capacity(units.len());
            for u in units {
                let live = u.expires_at.is_none_or(|e| from_bt(e) > now);
                if live || self.unit_still_held(&u, now).await? {
                    held.push(u);
                }
            }
            if sold_out(cap, held.len() as u64) {
                // Before saying "sold out", make sure no unit outlived its
                // reservation (a process that died between two writes).
                let mut still = 0u64;
                for u in &held {
                    if self.unit_still_held(u, now).await? {
                        still += 1;
                    }
                }
                if sold_out(cap, still) {
                    return Ok(Err(cap));
                }
                continue;
            }
            let prefix_len = plan.len() + SEP.len_utf8();
            let used: HashSet<&str> = held.iter().filter_map(|u| u.id.get(prefix_len..)).collect();
            let free: Vec<u32> = (0..cap)
                .filter(|i| !used.contains(i.to_string().as_str()))
                .collect();
            if free.is_empty() {
                return Ok(Err(cap));
            }
            let u = unit(&free[pick(free.len())].to_string());
            match self.units.insert_one(&u).await {
                Ok(_) => return Ok(Ok(u.id)),
                // Another client took this slot first: look again.
                Err(e) if is_duplicate_key(&e) => continue,
                Err(e) => return Err(classify(e)),
            }
        }
        Err(StoreError::Unavailable(
            "too many concurrent reservations of this plan; retry".into(),
        ))
    }

    fn claims(&self) -> mongodb::Collection<ClaimDoc> {
        self.db.collection("cluster_id_claims")
    }

    /// [`ReservationStore::claim_cluster_id`], unbounded.
    async fn claim_now(
        &self,
        key: &str,
        cluster_id: &str,
        owner: &str,
        reservation: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        let claims = self.claims();
        for _ in 0..MAX_ATTEMPTS {
            let current = claims
                .find_one(doc! { "_id": key })
                .await
                .map_err(classify)?;
            let mut live = HashSet::new();
            if let Some(c) = &current {
                let ids: Vec<&str> = c.claim.reservations.iter().map(String::as_str).collect();
                let docs: Vec<ReservationDoc> =
                    find_all(self.reservations.find(doc! { "_id": { "$in": ids } })).await?;
                for d in docs {
                    if claim::holds(Some(&d.body), &c.claim.owner, cluster_id, now) {
                        live.insert(d.id);
                    }
                }
            }
            let next = match claim_step(
                current.as_ref().map(|c| &c.claim),
                owner,
                reservation,
                |id| live.contains(id),
            ) {
                ClaimStep::Held => return Err(ClaimError::Held),
                ClaimStep::Write(next) => next,
            };
            match current {
                None => {
                    let d = ClaimDoc {
                        id: key.to_string(),
                        claim: next,
                        rev: 0,
                    };
                    match claims.insert_one(&d).await {
                        Ok(_) => return Ok(()),
                        // Another claim came first: decide again on it.
                        Err(e) if is_duplicate_key(&e) => continue,
                        Err(e) => return Err(classify(e).into()),
                    }
                }
                Some(c) => {
                    let d = ClaimDoc {
                        id: key.to_string(),
                        claim: next,
                        rev: c.rev + 1,
                    };
                    let replaced = claims
                        .replace_one(doc! { "_id": key, "rev": c.rev }, &d)
                        .await
                        .map_err(classify)?;
                    if replaced.matched_count == 1 {
                        return Ok(());
                    }
                }
            }
        }
        Err(StoreError::Unavailable(
            "too many concurrent purchases naming this consumer cluster ID; retry".into(),
        )
        .into())
    }

    /// [`ReservationStore::transition`], unbounded: it also runs inside
    /// other operations (a reservation freeing a stale unit, the sweep).
    async fn transition_now(
        &self,
        id: &str,
        t: Transition,
        now: DateTime<Utc>,
    ) -> Result<Reservation, TransitionError> {
        self.update_now(id, &|r: &Reservation| step(r, t, now))
            .await
    }

    /// [`ReservationStore::update`], unbounded.
    async fn update_now(
        &self,
        id: &str,
        decide: &(dyn Fn(&Reservation) -> Step + Send + Sync),
    ) -> Result<Reservation, TransitionError> {
        for _ in 0..MAX_ATTEMPTS {
            let Some(doc) = self.find_reservation(id).await? else {
                return Err(TransitionError::NotFound);
            };
            let r = &doc.body;
            let (next, refused_as) = match decide(r) {
                Step::Refuse => return Err(refused(doc.body)),
                Step::Write { next, refused } => (next, refused),
            };
            let mut expected = doc! { "_id": id, "state": r.state.as_str() };
            if let Some(terms) = &r.contract {
                expected.insert("body.contract.revision", terms.revision);
            }
            let stored = self
                .in_sequence(|session, seq| {
                    let (coll, filter) = (self.reservations.clone(), expected.clone());
                    let d = res_doc(&next, &doc.unit, seq);
                    Box::pin(async move {
                        let replaced = coll.replace_one(filter, d).session(session).await?;
                        Ok(replaced.matched_count == 1)
                    })
                })
                .await?;
            if stored.is_none() {
                // Another process changed it in between: read again.
                continue;
            }
            if next.holds() {
                self.hold_unit(&doc.unit, id, next.due_at().map(bt)).await?;
            } else {
                self.free_unit(&doc.unit, id).await?;
            }
            return written(next, refused_as);
        }
        Err(StoreError::Unavailable(format!(
            "too many concurrent changes to reservation {id}; retry"
        ))
        .into())
    }
}

#[async_trait]
impl ReservationStore for MongoStore {
    async fn reserve(
        &self,
        r: Reservation,
        now: DateTime<Utc>,
    ) -> Result<Reservation, ReserveError> {
        let how = format!("List your reservations (GET /reservations) to see whether one of offer {} plan {} was made before retrying.", r.offer_id, r.plan_id);
        self.bounded(Op::Write(how), async {
            let plan = plan_key(&r.offer_id, &r.plan_id);
            let unit = match self.claim_unit(&plan, &r, now).await? {
                Ok(unit) => unit,
                Err(cap) => return Err(ReserveError::SoldOut { cap }),
            };
            let inserted = self
                .in_sequence(|session, seq| {
                    let (coll, d) = (self.reservations.clone(), res_doc(&r, &unit, seq));
                    Box::pin(async move {
                        coll.insert_one(d).session(session).await?;
                        Ok(true)
                    })
                })
                .await;
            if let Err(e) = inserted {
                // Give the unit back; if even that fails, the next sold-out
                // check frees it (its reservation is missing).
                let _ = self.free_unit(&unit, &r.id).await;
                return Err(e.into());
            }
            Ok(r)
        })
        .await
    }

    async fn get_reservation(&self, id: &str) -> Result<Option<Reservation>, StoreError> {
        self.bounded(Op::Read, async {
            Ok(self.find_reservation(id).await?.map(|d| d.body))
        })
        .await
    }

    async fn list_reservations(
        &self,
        consumer: Option<&str>,
    ) -> Result<Vec<Reservation>, StoreError> {
        let filter = match consumer {
            Some(c) => doc! { "consumer": c },
            None => doc! {},
        };
        self.bounded(Op::Read, self.find_newest_first(filter)).await
    }

    async fn transition(
        &self,
        id: &str,
        t: Transition,
        now: DateTime<Utc>,
    ) -> Result<Reservation, TransitionError> {
        let how = match t {
            Transition::Purchase => format!(
                "Read the reservation (GET /reservations/{id}): state `purchased` means the purchase was applied."
            ),
            Transition::Release => format!(
                "Read the reservation (GET /reservations/{id}): state `released` means the release was applied."
            ),
            Transition::Cancel => format!(
                "Read the purchase (GET /purchases/{id}): state `cancelled` means the cancellation was applied."
            ),
            Transition::Expire => format!("Read the reservation (GET /reservations/{id})."),
        };
        self.bounded(Op::Write(how), self.transition_now(id, t, now))
            .await
    }

    async fn update(&self, id: &str, decide: Decide) -> Result<Reservation, TransitionError> {
        let how = format!(
            "Read the record (GET /reservations/{id}) to see whether the change was applied."
        );
        self.bounded(Op::Write(how), self.update_now(id, &*decide))
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
        let key = format!("{provider}{SEP}{cluster_id}");
        let how = "Nothing was bought; purchase again.".to_string();
        self.bounded(
            Op::Write(how),
            self.claim_now(&key, cluster_id, owner, reservation, now),
        )
        .await
    }

    async fn unclaim_cluster_id(
        &self,
        provider: &str,
        cluster_id: &str,
        reservation: &str,
    ) -> Result<(), StoreError> {
        let key = format!("{provider}{SEP}{cluster_id}");
        let how = "The reservation holds the cluster ID until it is due.".to_string();
        self.bounded(Op::Write(how), async {
            self.claims()
                .update_one(
                    doc! { "_id": &key },
                    doc! { "$pull": { "reservations": reservation }, "$inc": { "rev": 1 } },
                )
                .await
                .map_err(classify)?;
            Ok(())
        })
        .await
    }

    async fn list_sold(&self, cluster_id: &str) -> Result<Vec<Reservation>, StoreError> {
        self.bounded(
            Op::Read,
            self.find_newest_first(doc! { "body.clusterID": cluster_id }),
        )
        .await
    }

    async fn expire_due(&self, now: DateTime<Utc>) -> Result<Vec<Reservation>, StoreError> {
        let how = "The next expiry sweep retries.".to_string();
        self.bounded(Op::Write(how), async {
            let due: Vec<ReservationDoc> = find_all(
                self.reservations
                    .find(doc! { "$or": [
                        { "state": "reserved", "expiresAt": { "$lte": bt(now) } },
                        { "state": "purchased", "contractEnds": { "$lte": bt(now) } },
                    ] })
                    .limit(SWEEP_BATCH),
            )
            .await?;
            let mut expired = Vec::new();
            for d in due {
                match self.transition_now(&d.id, Transition::Expire, now).await {
                    Ok(r) => expired.push(r),
                    Err(TransitionError::Store(e)) => return Err(e),
                    // Purchased, released or expired by someone else meanwhile.
                    Err(_) => {}
                }
            }
            Ok(expired)
        })
        .await
    }

    async fn set_plan_cap(
        &self,
        offer_id: &str,
        plan_id: &str,
        cap: Option<u32>,
    ) -> Result<(), StoreError> {
        let how = format!("Read the plan's capacity (GET /offer/{offer_id}/plans/{plan_id}/capacity) to see the cap in force.");
        self.bounded(Op::Write(how), async {
            let key = plan_key(offer_id, plan_id);
            match cap {
                Some(c) => {
                    self.caps
                        .update_one(
                            doc! { "_id": &key },
                            doc! { "$set": { "cap": i64::from(c) } },
                        )
                        .upsert(true)
                        .await
                        .map_err(classify)?;
                }
                None => {
                    self.caps
                        .delete_one(doc! { "_id": &key })
                        .await
                        .map_err(classify)?;
                }
            }
            Ok(())
        })
        .await
    }

    async fn plan_usage(
        &self,
        offer_id: &str,
        plan_id: &str,
        now: DateTime<Utc>,
    ) -> Result<PlanUsage, StoreError> {
        self.bounded(Op::Read, async {
            let key = plan_key(offer_id, plan_id);
            let cap = self
                .caps
                .find_one(doc! { "_id": &key })
                .await
                .map_err(classify)?
                .map(|c| u32::try_from(c.cap.max(0)).unwrap_or(u32::MAX));
            let active = self
                .units
                .count_documents(doc! {
                    "plan": &key,
                    "$or": [ { "expiresAt": Bson::Null }, { "expiresAt": { "$gt": bt(now) } } ],
                })
                .await
                .map_err(classify)?;
            Ok(PlanUsage { cap, active })
        })
        .await
    }

    async fn contract_head(&self) -> Result<u64, StoreError> {
        self.bounded(Op::Read, self.read_contract_head()).await
    }

    async fn changed_since(
        &self,
        party: &Party,
        since: u64,
        limit: usize,
    ) -> Result<Vec<Sequenced>, StoreError> {
        let Some(filter) = party_filter(party, since) else {
            return Ok(Vec::new());
        };
        if limit == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.bounded(Op::Read, async {
            let docs: Vec<ReservationDoc> = find_all(
                self.reservations
                    .find(filter)
                    .sort(doc! { "seq": 1 })
                    .limit(limit),
            )
            .await?;
            Ok(docs
                .into_iter()
                .map(|d| {
                    let seq = seq_of(d.seq);
                    Sequenced {
                        seq,
                        record: d.whole().body,
                    }
                })
                .collect())
        })
        .await
    }

    fn contract_writes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.contract_writes.subscribe()
    }
}

/// The query of [`ReservationStore::changed_since`]: `party`'s records
/// written after `since`, each branch served by its (party, seq) index;
/// None when the party names no one.
fn party_filter(party: &Party, since: u64) -> Option<Document> {
    let after = doc! { "$gt": i64::try_from(since).unwrap_or(i64::MAX) };
    let consumer = |c: &str| doc! { "consumer": c, "seq": after.clone() };
    let provider = |p: &str| doc! { "body.clusterID": p, "seq": after.clone() };
    match party {
        Party::All => Some(doc! { "seq": after.clone() }),
        Party::Of {
            consumer: Some(c),
            provider: Some(p),
        } => Some(doc! { "$or": [consumer(c), provider(p)] }),
        Party::Of {
            consumer: Some(c),
            provider: None,
        } => Some(consumer(c)),
        Party::Of {
            consumer: None,
            provider: Some(p),
        } => Some(provider(p)),
        Party::Of {
            consumer: None,
            provider: None,
        } => None,
    }
}
