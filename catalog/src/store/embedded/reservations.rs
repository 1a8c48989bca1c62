//! The embedded [`ReservationStore`]: its own redb file (`buying.redb`) in
//! the data directory, beside the offers' file.
//!
//! Every change is one redb write transaction (fsynced before it is
//! acknowledged). redb runs one write transaction at a time, so counting a
//! plan's active holdings and inserting a new one can never interleave with
//! another reservation: the cap holds exactly.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use redb::{Database, ReadableDatabase, ReadableTable, Table, TableDefinition, WriteTransaction};

use super::reservations::{ReservationStore, ReserveError, TransitionError};
use super::StoreError;
use crate::osb::model::{OsbBinding, OsbInstance};
use crate::reservation::model::{PlanUsage, Reservation, ReservationState, Transition};

/// id → JSON of [`Reservation`].
const RESERVATIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("reservations");
/// `offer␟plan␟id` → deadline in ms ([`PURCHASED`] for purchases): the
/// active holdings of each plan, found by prefix.
const HOLDS: TableDefinition<&str, u64> = TableDefinition::new("holds");
/// `offer␟plan` → cap.
const CAPS: TableDefinition<&str, u32> = TableDefinition::new("plan_caps");
/// `<deadline ms, 20 digits>␟id` for reservations still `reserved`, in
/// deadline order for the sweeper.
const DUE: TableDefinition<&str, u8> = TableDefinition::new("reservations_due");
/// `consumer␟id`.
const BY_CONSUMER: TableDefinition<&str, u8> = TableDefinition::new("reservations_by_consumer");
/// cluster ID → sealed peering token.
const PEERING: TableDefinition<&str, &[u8]> = TableDefinition::new("peering_secrets");
/// cluster ID → disabled since (ms).
const DISABLED: TableDefinition<&str, i64> = TableDefinition::new("disabled_providers");
const OSB_INSTANCES: TableDefinition<&str, &[u8]> = TableDefinition::new("osb_instances");
const OSB_BINDINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("osb_bindings");
/// `instance␟binding`.
const OSB_BINDINGS_BY_INSTANCE: TableDefinition<&str, u8> =
    TableDefinition::new("osb_bindings_by_instance");

/// Deadline of a purchase: never.
const PURCHASED: u64 = u64::MAX;
/// Separator inside composite keys; ids never contain control characters.
const SEP: char = '\u{1f}';
/// Most reservations one sweep expires in one transaction.
const SWEEP_BATCH: usize = 1000;

/// File name of the database inside the data directory.
pub const BUYING_DB_FILE: &str = "buying.redb";

/// See the module docs.
#[derive(Clone)]
pub struct EmbeddedReservationStore {
    db: Arc<Database>,
}

fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}

fn millis(t: DateTime<Utc>) -> u64 {
    u64::try_from(t.timestamp_millis()).unwrap_or(0)
}

fn from_millis(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

fn plan_key(offer_id: &str, plan_id: &str) -> String {
    format!("{offer_id}{SEP}{plan_id}")
}

fn hold_key(r: &Reservation) -> String {
    format!("{}{SEP}{}", plan_key(&r.offer_id, &r.plan_id), r.id)
}

fn due_key(r: &Reservation) -> String {
    format!("{:020}{SEP}{}", millis(r.expires_at), r.id)
}

fn consumer_key(r: &Reservation) -> String {
    format!("{}{SEP}{}", r.consumer, r.id)
}

/// The half-open key range of every key starting with `prefix␟`.
fn prefix_range(prefix: &str) -> (String, String) {
    // '\u{20}' is the character after SEP.
    (format!("{prefix}{SEP}"), format!("{prefix}\u{20}"))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(internal)
}

fn from_json<T: serde::de::DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| internal(format!("{what} is corrupt: {e}")))
}

/// The JSON record at `key` of `table`, decoded (`what` names it if it is
/// corrupt).
fn get_record<T: serde::de::DeserializeOwned>(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
    what: &str,
) -> Result<Option<T>, StoreError> {
    match table.get(key).map_err(internal)? {
        Some(v) => Ok(Some(from_json(what, v.value())?)),
        None => Ok(None),
    }
}

/// The revision of OSB instance `id`, if it exists: what a conditional
/// write compares.
fn instance_revision(table: &Table<'_, &str, &[u8]>, id: &str) -> Result<Option<u64>, StoreError> {
    Ok(get_record::<OsbInstance>(table, id, "OSB instance")?.map(|i| i.revision))
}

fn load(table: &Table<'_, &str, &[u8]>, id: &str) -> Result<Option<Reservation>, StoreError> {
    get_record(table, id, "reservation")
}

/// Apply `t` to `r` inside `txn`, keeping every index in step.
fn apply(
    txn: &WriteTransaction,
    r: &Reservation,
    t: Transition,
    now: DateTime<Utc>,
) -> Result<Reservation, StoreError> {
    let next = t.apply(r, now);
    let mut reservations = txn.open_table(RESERVATIONS).map_err(internal)?;
    let mut holds = txn.open_table(HOLDS).map_err(internal)?;
    let mut due = txn.open_table(DUE).map_err(internal)?;
    reservations
        .insert(next.id.as_str(), to_json(&next)?.as_slice())
        .map_err(internal)?;
    if r.state == ReservationState::Reserved {
        due.remove(due_key(r).as_str()).map_err(internal)?;
    }
    if next.state == ReservationState::Purchased {
        holds
            .insert(hold_key(&next).as_str(), PURCHASED)
            .map_err(internal)?;
    } else {
        holds.remove(hold_key(&next).as_str()).map_err(internal)?;
    }
    Ok(next)
}

impl EmbeddedReservationStore {
    /// Open (or create) `<dir>/buying.redb`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| internal(format!("creating {}: {e}", dir.display())))?;
        let path = dir.join(BUYING_DB_FILE);
        let db = Database::create(&path)
            .map_err(|e| internal(format!("opening {}: {e}", path.display())))?;
        // It holds sealed peering tokens: readable by the catalog's user only.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| internal(format!("restricting {}: {e}", path.display())))?;
        }
        let txn = db.begin_write().map_err(internal)?;
        {
            txn.open_table(RESERVATIONS).map_err(internal)?;
            txn.open_table(HOLDS).map_err(internal)?;
            txn.open_table(CAPS).map_err(internal)?;
            txn.open_table(DUE).map_err(internal)?;
            txn.open_table(BY_CONSUMER).map_err(internal)?;
            txn.open_table(PEERING).map_err(internal)?;
            txn.open_table(DISABLED).map_err(internal)?;
            txn.open_table(OSB_INSTANCES).map_err(internal)?;
            txn.open_table(OSB_BINDINGS).map_err(internal)?;
            txn.open_table(OSB_BINDINGS_BY_INSTANCE).map_err(internal)?;
        }
        txn.commit().map_err(internal)?;
        Ok(Self { db: Arc::new(db) })
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| internal(format!("store task failed: {e}")))?
    }

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
            if active >= u64::from(cap) {
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
                .insert(r.id.as_str(), to_json(&r)?.as_slice())
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
        }
        txn.commit().map_err(internal)?;
        Ok(Ok(r))
    }

    fn transition_blocking(
        db: &Database,
        id: &str,
        t: Transition,
        now: DateTime<Utc>,
    ) -> Result<Result<Reservation, TransitionError>, StoreError> {
        let txn = db.begin_write().map_err(internal)?;
        let current = load(&txn.open_table(RESERVATIONS).map_err(internal)?, id)?;
        let Some(r) = current else {
            return Ok(Err(TransitionError::NotFound));
        };
        if r.state != t.from() {
            return Ok(Err(TransitionError::WrongState(Box::new(r))));
        }
        let outcome = match t {
            Transition::Purchase if r.is_due(now) => {
                let expired = apply(&txn, &r, Transition::Expire, now)?;
                Err(TransitionError::WrongState(Box::new(expired)))
            }
            Transition::Expire if !r.is_due(now) => {
                return Ok(Err(TransitionError::WrongState(Box::new(r))));
            }
            _ => Ok(apply(&txn, &r, t, now)?),
        };
        txn.commit().map_err(internal)?;
        Ok(outcome)
    }

    fn expire_due_blocking(
        db: &Database,
        now: DateTime<Utc>,
    ) -> Result<Vec<Reservation>, StoreError> {
        let txn = db.begin_write().map_err(internal)?;
        let upper = format!("{:020}", millis(now).saturating_add(1));
        let ids: Vec<String> = {
            let due = txn.open_table(DUE).map_err(internal)?;
            let mut ids = Vec::new();
            for entry in due.range(..upper.as_str()).map_err(internal)? {
                let (k, _) = entry.map_err(internal)?;
                if let Some((_, id)) = k.value().split_once(SEP) {
                    ids.push(id.to_string());
                }
                if ids.len() >= SWEEP_BATCH {
                    break;
                }
            }
            ids
        };
        let mut expired = Vec::new();
        for id in ids {
            let current = load(&txn.open_table(RESERVATIONS).map_err(internal)?, &id)?;
            match current {
                Some(r) if r.is_due(now) => expired.push(apply(&txn, &r, Transition::Expire, now)?),
                // An index entry without a due reservation: drop it.
                Some(r) => {
                    txn.open_table(DUE)
                        .map_err(internal)?
                        .remove(due_key(&r).as_str())
                        .map_err(internal)?;
                }
                None => {}
            }
        }
        if !expired.is_empty() {
            txn.commit().map_err(internal)?;
        }
        Ok(expired)
    }
}

#[async_trait]
impl ReservationStore for EmbeddedReservationStore {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn reserve(
        &self,
        r: Reservation,
        now: DateTime<Utc>,
    ) -> Result<Reservation, ReserveError> {
        match self
            .blocking(move |db| Self::reserve_blocking(db, r, now))
            .await?
        {
            Ok(r) => Ok(r),
            Err(cap) => Err(ReserveError::SoldOut { cap }),
        }
    }

    async fn get_reservation(&self, id: &str) -> Result<Option<Reservation>, StoreError> {
        let id = id.to_string();
        self.blocking(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(RESERVATIONS).map_err(internal)?;
            get_record(&table, &id, "reservation")
        })
        .await
    }

    async fn list_reservations(
        &self,
        consumer: Option<&str>,
    ) -> Result<Vec<Reservation>, StoreError> {
        let consumer = consumer.map(str::to_string);
        let mut out: Vec<Reservation> = self
            .blocking(move |db| {
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
                                out.push(from_json("reservation", v.value())?);
                            }
                        }
                    }
                    None => {
                        for entry in table.iter().map_err(internal)? {
                            let (_, v) = entry.map_err(internal)?;
                            out.push(from_json("reservation", v.value())?);
                        }
                    }
                }
                Ok(out)
            })
            .await?;
        out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    async fn transition(
        &self,
        id: &str,
        t: Transition,
        now: DateTime<Utc>,
    ) -> Result<Reservation, TransitionError> {
        let id = id.to_string();
        self.blocking(move |db| Self::transition_blocking(db, &id, t, now))
            .await?
    }

    async fn expire_due(&self, now: DateTime<Utc>) -> Result<Vec<Reservation>, StoreError> {
        self.blocking(move |db| Self::expire_due_blocking(db, now))
            .await
    }

    async fn set_plan_cap(
        &self,
        offer_id: &str,
        plan_id: &str,
        cap: Option<u32>,
    ) -> Result<(), StoreError> {
        let key = plan_key(offer_id, plan_id);
        self.blocking(move |db| {
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

    async fn plan_usage(
        &self,
        offer_id: &str,
        plan_id: &str,
        now: DateTime<Utc>,
    ) -> Result<PlanUsage, StoreError> {
        let key = plan_key(offer_id, plan_id);
        self.blocking(move |db| {
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

    async fn put_peering_secret(
        &self,
        cluster_id: &str,
        sealed: Vec<u8>,
    ) -> Result<(), StoreError> {
        let id = cluster_id.to_string();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            txn.open_table(PEERING)
                .map_err(internal)?
                .insert(id.as_str(), sealed.as_slice())
                .map_err(internal)?;
            txn.commit().map_err(internal)
        })
        .await
    }

    async fn get_peering_secret(&self, cluster_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let id = cluster_id.to_string();
        self.blocking(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(PEERING).map_err(internal)?;
            Ok(table
                .get(id.as_str())
                .map_err(internal)?
                .map(|v| v.value().to_vec()))
        })
        .await
    }

    async fn set_provider_disabled(
        &self,
        cluster_id: &str,
        disabled: bool,
    ) -> Result<(), StoreError> {
        let id = cluster_id.to_string();
        let since = crate::model::now().timestamp_millis();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(DISABLED).map_err(internal)?;
                if disabled {
                    if table.get(id.as_str()).map_err(internal)?.is_none() {
                        table.insert(id.as_str(), since).map_err(internal)?;
                    }
                } else {
                    table.remove(id.as_str()).map_err(internal)?;
                }
            }
            txn.commit().map_err(internal)
        })
        .await
    }

    async fn disabled_providers(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
        self.blocking(|db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(DISABLED).map_err(internal)?;
            let mut out = BTreeMap::new();
            for entry in table.iter().map_err(internal)? {
                let (k, v) = entry.map_err(internal)?;
                out.insert(k.value().to_string(), from_millis(v.value()));
            }
            Ok(out)
        })
        .await
    }

    async fn osb_insert_instance(&self, inst: &OsbInstance) -> Result<bool, StoreError> {
        let inst = inst.clone();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
                if table.get(inst.id.as_str()).map_err(internal)?.is_some() {
                    return Ok(false);
                }
                table
                    .insert(inst.id.as_str(), to_json(&inst)?.as_slice())
                    .map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
        })
        .await
    }

    async fn osb_get_instance(&self, id: &str) -> Result<Option<OsbInstance>, StoreError> {
        let id = id.to_string();
        self.blocking(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(OSB_INSTANCES).map_err(internal)?;
            get_record(&table, &id, "OSB instance")
        })
        .await
    }

    async fn osb_replace_instance(
        &self,
        inst: &OsbInstance,
        expected_revision: u64,
    ) -> Result<bool, StoreError> {
        let inst = inst.clone();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
                if instance_revision(&table, &inst.id)? != Some(expected_revision) {
                    return Ok(false);
                }
                table
                    .insert(inst.id.as_str(), to_json(&inst)?.as_slice())
                    .map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
        })
        .await
    }

    async fn osb_delete_instance(
        &self,
        id: &str,
        expected_revision: u64,
    ) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(OSB_INSTANCES).map_err(internal)?;
                if instance_revision(&table, &id)? != Some(expected_revision) {
                    return Ok(false);
                }
                table.remove(id.as_str()).map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
        })
        .await
    }

    async fn osb_insert_binding(&self, b: &OsbBinding) -> Result<bool, StoreError> {
        let b = b.clone();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(OSB_BINDINGS).map_err(internal)?;
                if table.get(b.id.as_str()).map_err(internal)?.is_some() {
                    return Ok(false);
                }
                table
                    .insert(b.id.as_str(), to_json(&b)?.as_slice())
                    .map_err(internal)?;
                txn.open_table(OSB_BINDINGS_BY_INSTANCE)
                    .map_err(internal)?
                    .insert(format!("{}{SEP}{}", b.instance_id, b.id).as_str(), 0)
                    .map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
        })
        .await
    }

    async fn osb_get_binding(&self, id: &str) -> Result<Option<OsbBinding>, StoreError> {
        let id = id.to_string();
        self.blocking(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let table = read.open_table(OSB_BINDINGS).map_err(internal)?;
            get_record(&table, &id, "OSB binding")
        })
        .await
    }

    async fn osb_delete_binding(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(internal)?;
            {
                let mut table = txn.open_table(OSB_BINDINGS).map_err(internal)?;
                let existing: Option<OsbBinding> =
                    match table.remove(id.as_str()).map_err(internal)? {
                        Some(v) => Some(from_json("OSB binding", v.value())?),
                        None => None,
                    };
                let Some(b) = existing else {
                    return Ok(false);
                };
                txn.open_table(OSB_BINDINGS_BY_INSTANCE)
                    .map_err(internal)?
                    .remove(format!("{}{SEP}{}", b.instance_id, b.id).as_str())
                    .map_err(internal)?;
            }
            txn.commit().map_err(internal)?;
            Ok(true)
        })
        .await
    }

    async fn osb_bindings_of(&self, instance_id: &str) -> Result<Vec<OsbBinding>, StoreError> {
        let instance = instance_id.to_string();
        self.blocking(move |db| {
            let read = db.begin_read().map_err(internal)?;
            let index = read
                .open_table(OSB_BINDINGS_BY_INSTANCE)
                .map_err(internal)?;
            let table = read.open_table(OSB_BINDINGS).map_err(internal)?;
            let (lo, hi) = prefix_range(&instance);
            let mut out = Vec::new();
            for entry in index.range(lo.as_str()..hi.as_str()).map_err(internal)? {
                let (k, _) = entry.map_err(internal)?;
                let Some((_, id)) = k.value().rsplit_once(SEP) else {
                    continue;
                };
                if let Some(v) = table.get(id).map_err(internal)? {
                    out.push(from_json("OSB binding", v.value())?);
                }
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Cost;
    use crate::reservation::model::Channel;

    fn reservation(id: &str, plan: &str, ttl_ms: i64) -> Reservation {
        let now = crate::model::now();
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
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn exactly_the_cap_wins_and_expiry_frees_units() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedReservationStore::open(dir.path()).unwrap();
        store.set_plan_cap("o", "p", Some(3)).await.unwrap();
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .reserve(
                            reservation(&format!("r{i}"), "p", 60_000),
                            crate::model::now(),
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
        let now = crate::model::now();
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
