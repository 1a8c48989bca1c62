//! The MongoDB [`OfferStore`]: offers in `offers`, one document per id
//! ever written. Deleting replaces the document with a tombstone (`deleted:
//! true`) so the id's `version` keeps counting and other processes learn of
//! the deletion from the change stream with its version. Plans are an array
//! of sub-documents, each with `costNanos` and `resources: [{name, quantity,
//! milli}]`, so filters run as `find` queries with `$elemMatch` (no
//! aggregation expressions).
//!
//! Every write is one command conditioned on the version it read
//! (`replace_one` with `{_id, version}`; `insert_one` for a new id): read
//! from memory ([`super::memory`]) when trusted, so an acknowledged write
//! costs one round trip; what memory had wrong (another process wrote
//! first) fails the condition and the write is decided again from the
//! database. What to write is decided by [`crate::offers::rules`]. Lists
//! and reads come from memory too (the database while it is not trusted).
//! Also here: the shared JWT signing key (`settings`) and the purge of old
//! tombstones.

use std::time::Duration;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{self, doc, Document};
use mongodb::Collection;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tracing::{info, warn, Instrument};

use super::memory::Slot;
use super::{bt, classify, from_bt, is_duplicate_key, MongoStore, Op};
use crate::offers::{
    rules, Cost, Offer, OfferChange, OfferDraft, OfferFilter, OfferStore, Plan, PutOutcome,
};
use crate::providers::ProviderAccount;
use crate::store::StoreError;

/// How often a write retries after losing a version race before giving up.
const MAX_WRITE_ATTEMPTS: usize = 16;
/// `_id` of the shared signing key in `settings`.
const SIGNING_KEY_ID: &str = "jwt-signing-key";

/// An offer document: a live offer or the tombstone of a deleted one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct OfferDoc {
    #[serde(rename = "_id")]
    id: String,
    version: i64,
    #[serde(rename = "clusterID")]
    cluster_id: String,
    deleted: bool,
    updated_at: bson::DateTime,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    live: Option<LiveFields>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LiveFields {
    name: String,
    #[serde(rename = "type")]
    offer_type: String,
    /// `service` for service offers, queried by `kind=`; absent for
    /// capacity offers (as on every document written before service offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    description: String,
    cluster_name: String,
    created_at: bson::DateTime,
    plans: Vec<PlanDoc>,
    /// The owner's Liqo generations (`v0`, `v1`), queried by `liqo=`.
    #[serde(default)]
    liqo: Vec<String>,
    /// The owner's reported enforcement level, queried by `enforcement=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enforcement: Option<crate::providers::EnforcementLevel>,
    /// The owner's reported isolation level, queried by `isolation=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    isolation: Option<crate::providers::IsolationLevel>,
    /// Provider labels as `key=value` strings (a key never holds `=`), so
    /// `label.*` filters are one `$all` on a multikey index.
    #[serde(default)]
    labels: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PlanDoc {
    key: String,
    name: String,
    #[serde(rename = "planID", default, skip_serializing_if = "Option::is_none")]
    plan_id: Option<String>,
    cost: String,
    cost_nanos: i64,
    resources: Vec<ResourceDoc>,
    /// The plan's stamps (see `offers::stamps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<bson::DateTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_by: Option<crate::offers::Writer>,
    /// A service plan's hosting policy, queried by `hosting=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hosting: Option<crate::offers::HostingPolicy>,
    /// A service plan's `schemas` as JSON text: JSON Schemas are full of
    /// `$schema` and `$ref` keys, which MongoDB does not take as field names
    /// everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    schemas: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ResourceDoc {
    name: String,
    quantity: String,
    /// Milli-units rounded up: a superset prefilter for `min.<resource>`,
    /// refined exactly in Rust.
    milli: i64,
}

/// A provider account document, keyed by cluster ID.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ProviderDoc {
    #[serde(rename = "_id")]
    cluster_id: String,
    cluster_name: String,
    #[serde(rename = "authURL")]
    auth_url: String,
    secret_hash: String,
    created_at: bson::DateTime,
    #[serde(default)]
    generation: i64,
}

impl From<&ProviderAccount> for ProviderDoc {
    fn from(a: &ProviderAccount) -> Self {
        ProviderDoc {
            cluster_id: a.cluster_id.clone(),
            cluster_name: a.cluster_name.clone(),
            auth_url: a.auth_url.clone(),
            secret_hash: a.secret_hash.clone(),
            created_at: bt(a.created_at),
            generation: i64::try_from(a.generation).unwrap_or(i64::MAX),
        }
    }
}

impl From<ProviderDoc> for ProviderAccount {
    fn from(d: ProviderDoc) -> Self {
        ProviderAccount {
            cluster_id: d.cluster_id,
            cluster_name: d.cluster_name,
            auth_url: d.auth_url,
            secret_hash: d.secret_hash,
            created_at: from_bt(d.created_at),
            generation: u64::try_from(d.generation).unwrap_or(0),
        }
    }
}

fn version_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl OfferDoc {
    fn live(offer: &Offer) -> Self {
        let plans = offer
            .plans
            .iter()
            .map(|(key, p)| PlanDoc {
                key: key.clone(),
                name: p.name.clone(),
                plan_id: p.plan_id.clone(),
                cost: p.cost.to_string(),
                cost_nanos: p.cost.nanos(),
                resources: p
                    .resources
                    .0
                    .iter()
                    .map(|(n, q)| ResourceDoc {
                        name: n.clone(),
                        quantity: q.to_string(),
                        milli: q.milli_value(),
                    })
                    .collect(),
                updated_at: p.updated_at.map(bt),
                updated_by: p.updated_by,
                hosting: p.hosting,
                schemas: p.schemas.as_ref().map(|s| serde_json::json!(s).to_string()),
            })
            .collect();
        OfferDoc {
            id: offer.id.clone(),
            version: offer.version as i64,
            cluster_id: offer.cluster_id.clone(),
            deleted: false,
            updated_at: bt(offer.updated_at),
            live: Some(LiveFields {
                name: offer.name.clone(),
                offer_type: offer.offer_type.clone(),
                kind: (!offer.kind.is_capacity()).then(|| offer.kind.as_str().to_string()),
                description: offer.description.clone(),
                cluster_name: offer.cluster_name.clone(),
                created_at: bt(offer.created_at),
                plans,
                liqo: offer.liqo.iter().map(|g| g.as_str().to_string()).collect(),
                enforcement: offer.enforcement,
                isolation: offer.isolation,
                labels: label_pairs(&offer.labels),
            }),
        }
    }

    fn into_offer(self) -> Result<Option<Offer>, StoreError> {
        let live = match (self.deleted, self.live) {
            (false, Some(live)) => live,
            _ => return Ok(None),
        };
        let mut plans = std::collections::BTreeMap::new();
        for p in live.plans {
            let cost: Cost = p
                .cost
                .parse()
                .map_err(|e| corrupt(&self.id, format!("plan {} cost: {e}", p.key)))?;
            let mut resources = quantity::ResourceList::new();
            for r in p.resources {
                let q = r
                    .quantity
                    .parse()
                    .map_err(|e| corrupt(&self.id, format!("resource {}: {e}", r.name)))?;
                resources.0.insert(r.name, q);
            }
            let schemas = match &p.schemas {
                Some(text) => Some(
                    serde_json::from_str(text)
                        .map_err(|e| corrupt(&self.id, format!("plan {} schemas: {e}", p.key)))?,
                ),
                None => None,
            };
            plans.insert(
                p.key,
                Plan {
                    name: p.name,
                    plan_id: p.plan_id,
                    cost,
                    resources,
                    updated_at: p.updated_at.map(from_bt),
                    updated_by: p.updated_by,
                    hosting: p.hosting,
                    schemas,
                },
            );
        }
        let mut labels = crate::offers::Labels::new();
        for pair in live.labels {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| corrupt(&self.id, format!("label {pair}")))?;
            labels.insert(k.to_string(), v.to_string());
        }
        let kind = match live.kind.as_deref() {
            None => crate::offers::OfferKind::Capacity,
            Some(k) => crate::offers::OfferKind::parse(k)
                .ok_or_else(|| corrupt(&self.id, format!("kind {k}")))?,
        };
        Ok(Some(Offer {
            id: self.id,
            name: live.name,
            offer_type: live.offer_type,
            kind,
            description: live.description,
            plans,
            labels,
            cluster_id: self.cluster_id,
            cluster_name: live.cluster_name,
            liqo: live
                .liqo
                .iter()
                .filter_map(|g| crate::providers::LiqoGeneration::parse(g))
                .collect(),
            enforcement: live.enforcement,
            isolation: live.isolation,
            pricing: None,
            created_at: from_bt(live.created_at),
            updated_at: from_bt(self.updated_at),
            version: version_u64(self.version),
        }))
    }

    pub(super) fn id(&self) -> &str {
        &self.id
    }

    /// What memory keeps of this document.
    pub(super) fn slot(&self) -> Result<Slot, StoreError> {
        Ok(Slot {
            version: version_u64(self.version),
            cluster_id: self.cluster_id.clone(),
            offer: self.clone().into_offer()?,
            written_at: from_bt(self.updated_at),
        })
    }
}

/// Labels as stored: `key=value` each.
fn label_pairs(labels: &crate::offers::Labels) -> Vec<String> {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

fn corrupt(id: &str, what: String) -> StoreError {
    StoreError::Internal(format!("offer {id} in MongoDB is corrupt: {what}"))
}

/// The database query for `filter`: a superset of its exact semantics
/// (quantities compare in rounded-up milli-units), refined in Rust.
fn query_for(filter: &OfferFilter) -> Document {
    let mut q = doc! { "deleted": false };
    if let Some(t) = &filter.offer_type {
        q.insert("live.type", t.as_str());
    }
    match filter.kind {
        Some(crate::offers::OfferKind::Service) => {
            q.insert("live.kind", "service");
        }
        // Capacity offers have no `kind` in their document.
        Some(crate::offers::OfferKind::Capacity) => {
            q.insert("live.kind", doc! { "$exists": false });
        }
        None => {}
    }
    if let Some(g) = filter.liqo {
        q.insert("live.liqo", g.as_str());
    }
    if let Some(level) = filter.enforcement {
        q.insert("live.enforcement", level.as_str());
    }
    if let Some(level) = filter.isolation {
        q.insert("live.isolation", level.as_str());
    }
    if let Some(p) = &filter.provider {
        q.insert(
            "$or",
            vec![
                doc! { "clusterID": p.as_str() },
                doc! { "live.clusterName": p.as_str() },
            ],
        );
    }
    if !filter.labels.is_empty() {
        q.insert("live.labels", doc! { "$all": label_pairs(&filter.labels) });
    }
    if filter.has_plan_conditions() {
        let mut plan = Document::new();
        if let Some(max) = filter.max_cost {
            plan.insert("costNanos", doc! { "$lte": max.nanos() });
        }
        if let Some(h) = filter.hosting {
            plan.insert("hosting", h.as_str());
        }
        // One `$elemMatch` per resource, all on the same plan: `$all` of
        // `$elemMatch`es (plain find operators, no aggregation expressions).
        let each: Vec<Document> = filter
            .min_resources
            .iter()
            .map(|(name, min)| doc! { "$elemMatch": { "name": name.as_str(), "milli": { "$gte": min.milli_value() } } })
            .collect();
        match each.len() {
            0 => {}
            1 => {
                plan.insert("resources", each.into_iter().next().unwrap_or_default());
            }
            _ => {
                plan.insert("resources", doc! { "$all": each });
            }
        }
        q.insert("live.plans", doc! { "$elemMatch": plan });
    }
    q
}

impl MongoStore {
    /// Indexes for the filters; retried until the database is reachable.
    pub(super) async fn create_offer_indexes(self) {
        let models = [
            doc! { "clusterID": 1 },
            doc! { "live.type": 1 },
            doc! { "live.clusterName": 1 },
            doc! { "live.plans.costNanos": 1 },
            doc! { "live.labels": 1 },
            doc! { "live.plans.resources.name": 1, "live.plans.resources.milli": 1 },
            // Finding old tombstones to purge.
            doc! { "deleted": 1, "updatedAt": 1 },
        ];
        super::conn::create_indexes("offers", || async {
            super::conn::create_key_indexes(&self.offers, &models).await
        })
        .await;
    }

    /// Delete the tombstones of offers deleted more than `ttl` ago; returns
    /// how many. Until then a deleted id's `version` keeps counting (a
    /// write conditioned on a version read before the deletion fails);
    /// after, the id starts again at version 1. Several processes may purge
    /// at once: a tombstone is deleted once, and a write racing the purge
    /// retries on its version condition.
    pub async fn purge_tombstones(&self, ttl: Duration) -> Result<u64, StoreError> {
        let cutoff = chrono::Duration::from_std(ttl)
            .ok()
            .and_then(|ttl| crate::store::now().checked_sub_signed(ttl))
            .ok_or_else(|| StoreError::Internal(format!("tombstone TTL {ttl:?} out of range")))?;
        let purge = async {
            self.offers
                .delete_many(doc! { "deleted": true, "updatedAt": { "$lt": bt(cutoff) } })
                .await
                .map_err(classify)
        };
        let how = "The next purge retries.".to_string();
        Ok(self.bounded(Op::Write(how), purge).await?.deleted_count)
    }

    /// Purge tombstones older than `ttl` in the background, every `ttl / 4`
    /// (at least every hour, at most every second), for as long as the
    /// process runs.
    pub fn purge_tombstones_every(&self, ttl: Duration) {
        let store = self.clone();
        let every = (ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
        tokio::spawn(
            async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    match store.purge_tombstones(ttl).await {
                        Ok(0) => {}
                        Ok(n) => info!(purged = n, "purged old offer tombstones"),
                        Err(e) => warn!(error = %e, "purging offer tombstones failed; will retry"),
                    }
                }
            }
            .instrument(tracing::info_span!("mongodb_tombstones")),
        );
    }

    /// One attempt at [`MongoStore::shared_signing_key`], bounded by the
    /// store's timeout.
    async fn signing_key_once(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let settings: Collection<Document> = self.db.collection("settings");
        let attempt = async {
            settings
                .update_one(
                    doc! { "_id": SIGNING_KEY_ID },
                    doc! { "$setOnInsert": { "key": b64.encode(candidate) } },
                )
                .upsert(true)
                .await?;
            settings.find_one(doc! { "_id": SIGNING_KEY_ID }).await
        };
        // A hung database must not hang a caller on one attempt.
        let found = tokio::time::timeout(self.timeout, attempt)
            .await
            .unwrap_or_else(|_| Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()))
            .map_err(classify)?;
        let Some(d) = found else {
            return Err(StoreError::Internal(
                "signing key vanished after upsert".into(),
            ));
        };
        let key = d
            .get_str("key")
            .map_err(|e| StoreError::Internal(format!("signing key: {e}")))?;
        b64.decode(key)
            .map_err(|e| StoreError::Internal(format!("signing key: {e}")))
    }

    /// The JWT signing key shared by every process on this database: the
    /// stored one, or `candidate` if none is stored yet. Retries until the
    /// database answers, since tokens must verify on every process.
    pub async fn shared_signing_key(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        let mut delay = Duration::from_millis(200);
        loop {
            match self.signing_key_once(candidate).await {
                Err(StoreError::Unavailable(msg)) => {
                    warn!(error = %msg, "waiting for MongoDB to load the shared signing key");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
    }

    async fn find_doc(&self, id: &str) -> Result<Option<OfferDoc>, StoreError> {
        self.offers
            .find_one(doc! { "_id": id })
            .await
            .map_err(classify)
    }

    /// Write `new` in place of the document at `old_version` (`None`: no
    /// document with this id exists), only if nobody else wrote in between:
    /// one command. Ok(false) means "lost the race" (or memory was behind).
    async fn swap(&self, old_version: Option<i64>, new: &OfferDoc) -> Result<bool, StoreError> {
        match old_version {
            None => match self.offers.insert_one(new).await {
                Ok(_) => Ok(true),
                Err(e) if is_duplicate_key(&e) => Ok(false),
                Err(e) => Err(classify(e)),
            },
            Some(version) => {
                let r = self
                    .offers
                    .replace_one(doc! { "_id": &new.id, "version": version }, new)
                    .await
                    .map_err(classify)?;
                Ok(r.matched_count == 1)
            }
        }
    }

    /// After an acknowledged write of `doc`: memory holds it at once (this
    /// process reads its own writes) and it is published at once — a feed
    /// subscriber that connects after the acknowledgement finds it — unless
    /// the change stream's copy came first.
    fn wrote(&self, doc: &OfferDoc, inserted: bool) {
        match doc.slot() {
            Ok(slot) => {
                let change = slot.change(&doc.id);
                self.memory.apply_offer(&doc.id, slot, inserted, || {
                    let _ = self.changes.send(change);
                })
            }
            Err(e) => warn!(error = %e, "an offer just written does not read back"),
        }
    }
}

/// The key [`crate::auth::TokenService`] follows: re-read (and restored
/// if the database lost it) with one bounded attempt.
#[async_trait]
impl crate::auth::KeySource for MongoStore {
    async fn shared_key(&self, ours: &[u8]) -> Result<Vec<u8>, String> {
        self.signing_key_once(ours).await.map_err(|e| e.to_string())
    }
}

#[async_trait]
impl OfferStore for MongoStore {
    /// From memory while it is trusted, else a database query.
    async fn list_offers_page(
        &self,
        filter: &OfferFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Offer>, StoreError> {
        if let Some(offers) = self.memory.list_offers(filter, after, limit) {
            return Ok(offers);
        }
        self.bounded(Op::Read, self.list_offers_page_now(filter, after, limit))
            .await
    }

    async fn get_offer(&self, id: &str) -> Result<Option<Offer>, StoreError> {
        if let Some(slot) = self.memory.offer_slot(id) {
            return Ok(slot.and_then(|s| s.offer));
        }
        self.bounded(Op::Read, async {
            match self.find_doc(id).await? {
                Some(d) => d.into_offer(),
                None => Ok(None),
            }
        })
        .await
    }

    async fn put_offer(
        &self,
        draft: OfferDraft,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        let how = format!(
            "Read the offer (GET /offer/{}) and compare its `version` with the one you expected before retrying.",
            draft.id
        );
        self.bounded(Op::Write(how), self.put_offer_now(draft, expected_version))
            .await
    }

    async fn delete_offer(&self, id: &str, owner_cluster_id: &str) -> Result<Offer, StoreError> {
        let how = format!("Read the offer (GET /offer/{id}): 404 means the deletion was applied.");
        self.bounded(Op::Write(how), self.delete_offer_now(id, owner_cluster_id))
            .await
    }

    async fn count_offers(&self) -> Result<u64, StoreError> {
        if let Some(n) = self.memory.count_offers() {
            return Ok(n);
        }
        self.bounded(Op::Read, async {
            self.offers
                .count_documents(doc! { "deleted": false })
                .await
                .map_err(classify)
        })
        .await
    }

    fn changes(&self) -> broadcast::Receiver<OfferChange> {
        self.changes.subscribe()
    }
}

/// What one attempt at a write starts from: the id's document as last
/// written (from memory or read), or none.
struct Current {
    live: Option<Offer>,
    last_version: u64,
    /// The version the write is conditioned on (`None`: insert).
    condition: Option<i64>,
}

impl Current {
    fn of_slot(slot: Option<Slot>) -> Self {
        match slot {
            Some(s) => Current {
                live: s.offer,
                last_version: s.version,
                condition: Some(i64::try_from(s.version).unwrap_or(i64::MAX)),
            },
            None => Current {
                live: None,
                last_version: 0,
                condition: None,
            },
        }
    }

    fn of_doc(doc: Option<OfferDoc>) -> Result<Self, StoreError> {
        Ok(match doc {
            Some(d) => Current {
                last_version: version_u64(d.version),
                condition: Some(d.version),
                live: d.into_offer()?,
            },
            None => Current {
                live: None,
                last_version: 0,
                condition: None,
            },
        })
    }
}

/// The operations themselves, unbounded: the trait above bounds each whole.
impl MongoStore {
    async fn list_offers_page_now(
        &self,
        filter: &OfferFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Offer>, StoreError> {
        let mut query = query_for(filter);
        if let Some(after) = after {
            query.insert("_id", doc! { "$gt": after });
        }
        // The query may match a little more than the filter (see
        // `query_for`), so the page is cut here, not with a `limit`.
        let mut cursor = self
            .offers
            .find(query)
            .sort(doc! { "_id": 1 })
            .batch_size(u32::try_from(limit.min(1000)).unwrap_or(1000))
            .await
            .map_err(classify)?;
        let mut out = Vec::with_capacity(limit.min(1000));
        while out.len() < limit {
            let Some(d) = cursor.try_next().await.map_err(classify)? else {
                break;
            };
            if let Some(offer) = d.into_offer()? {
                if filter.matches(&offer) {
                    out.push(offer);
                }
            }
        }
        Ok(out)
    }

    /// The first attempt starts from memory (when trusted): one round
    /// trip, the write conditioned on the version memory holds. If memory
    /// was behind, the write matches nothing (or hits the duplicate key),
    /// and a refusal decided from memory (409, 403) is decided again: both
    /// from the document as read from the database.
    async fn put_offer_now(
        &self,
        draft: OfferDraft,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        let mut from_memory = self.memory.offer_slot(&draft.id).map(Current::of_slot);
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let remembered = from_memory.is_some();
            let current = match from_memory.take() {
                Some(c) => c,
                None => Current::of_doc(self.find_doc(&draft.id).await?)?,
            };
            let decided = rules::put(
                draft.clone(),
                current.live.as_ref(),
                current.last_version,
                expected_version,
                crate::store::now(),
            );
            let PutOutcome { offer, created } = match decided {
                Ok(outcome) => outcome,
                Err(_) if remembered => continue,
                Err(e) => return Err(e),
            };
            let doc = OfferDoc::live(&offer);
            if self.swap(current.condition, &doc).await? {
                let inserted = current.condition.is_none();
                self.wrote(&doc, inserted);
                return Ok(PutOutcome { offer, created });
            }
        }
        Err(StoreError::Unavailable(format!(
            "too many concurrent writes to offer {}; retry",
            draft.id
        )))
    }

    /// As [`Self::put_offer_now`]: from memory first, a refusal decided
    /// again from the database.
    async fn delete_offer_now(
        &self,
        id: &str,
        owner_cluster_id: &str,
    ) -> Result<Offer, StoreError> {
        let mut from_memory = self.memory.offer_slot(id).map(Current::of_slot);
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let remembered = from_memory.is_some();
            let current = match from_memory.take() {
                Some(c) => c,
                None => Current::of_doc(self.find_doc(id).await?)?,
            };
            let decided = rules::delete(
                current.live.as_ref(),
                owner_cluster_id,
                current.last_version,
            );
            let version = match decided {
                Ok(v) => v,
                Err(_) if remembered => continue,
                Err(e) => return Err(e),
            };
            let (Some(offer), Some(condition)) = (current.live, current.condition) else {
                return Err(StoreError::NotFound);
            };
            let tomb = OfferDoc {
                id: id.to_string(),
                version: i64::try_from(version).unwrap_or(i64::MAX),
                cluster_id: offer.cluster_id.clone(),
                deleted: true,
                updated_at: bt(crate::store::now()),
                live: None,
            };
            if self.swap(Some(condition), &tomb).await? {
                self.wrote(&tomb, false);
                return Ok(offer);
            }
        }
        Err(StoreError::Unavailable(format!(
            "too many concurrent writes to offer {id}; retry"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::super::MongoConfig;
    use super::*;
    use crate::offers::{OfferSpec, ProviderRef};

    fn draft(id: &str, body: &str) -> OfferDraft {
        let owner = ProviderRef {
            cluster_id: "c1".into(),
            cluster_name: "one".into(),
            stamp: crate::providers::OwnerStamp::default(),
        };
        OfferSpec::from_json(body.as_bytes())
            .unwrap()
            .into_draft(id.into(), owner)
    }

    /// `liqo=`, `enforcement=` and `isolation=` run as database queries on
    /// the stamped generations and levels, and find what the reference
    /// filter finds.
    #[tokio::test(flavor = "multi_thread")]
    async fn liqo_filter_runs_as_a_query() {
        use crate::providers::EnforcementLevel::{Hard, Off};
        use crate::providers::IsolationLevel::{Enforced, Failed};
        use crate::providers::LiqoGeneration::{V0, V1};
        let server = e2e::mongo::MongoServer::start().unwrap();
        let store = MongoStore::connect(&MongoConfig {
            uri: server.uri(),
            database: "liqo".into(),
            timeout: Duration::from_secs(10),
        })
        .await
        .unwrap();
        let body = r#"{"name":"x","type":"compute","plans":{"p":{"name":"p","cost":"1","resources":{"cpu":"1"}}}}"#;
        for (id, liqo, enforcement, isolation) in [
            ("none", vec![], None, None),
            ("old", vec![V0], Some(Off), Some(Failed)),
            ("new", vec![V1], Some(Hard), Some(Enforced)),
            ("both", vec![V0, V1], Some(Hard), None),
        ] {
            let mut d = draft(id, body);
            d.owner.stamp = crate::providers::OwnerStamp {
                liqo,
                enforcement,
                isolation,
            };
            store.put_offer(d, None).await.unwrap();
        }
        for (key, value, expected) in [
            ("liqo", "v0", vec!["both", "old"]),
            ("liqo", "v1", vec!["both", "new"]),
            ("enforcement", "hard", vec!["both", "new"]),
            ("enforcement", "off", vec!["old"]),
            ("enforcement", "soft", vec![]),
            ("isolation", "enforced", vec!["new"]),
            ("isolation", "failed", vec!["old"]),
            ("isolation", "off", vec![]),
        ] {
            let filter = OfferFilter::from_pairs([(key, value)]).unwrap();
            let docs: Vec<OfferDoc> = store
                .offers
                .find(query_for(&filter))
                .sort(doc! { "_id": 1 })
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
            assert_eq!(ids, expected, "database query for {key}={value}");
            let listed = store.list_offers(&filter).await.unwrap();
            assert!(listed.iter().all(|o| filter.matches(o)));
            assert_eq!(listed.len(), expected.len());
        }
    }

    /// Tombstones keep a deleted id's version counting until purged; live
    /// offers are never purged.
    #[tokio::test(flavor = "multi_thread")]
    async fn old_tombstones_are_purged() {
        let server = e2e::mongo::MongoServer::start().unwrap();
        let store = MongoStore::connect(&MongoConfig {
            uri: server.uri(),
            database: "tombstones".into(),
            timeout: Duration::from_secs(10),
        })
        .await
        .unwrap();
        let body = r#"{"name":"a","type":"compute","plans":{"p":{"name":"p","cost":"1","resources":{"cpu":"1"}}}}"#;
        store.put_offer(draft("kept", body), None).await.unwrap();
        store.put_offer(draft("gone", body), None).await.unwrap();
        store.delete_offer("gone", "c1").await.unwrap();
        let docs = || async {
            let cursor = store
                .offers
                .find(doc! {})
                .sort(doc! { "_id": 1 })
                .await
                .unwrap();
            let docs: Vec<OfferDoc> = cursor.try_collect().await.unwrap();
            docs.into_iter()
                .map(|d| (d.id, d.deleted))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            docs().await,
            [("gone".to_string(), true), ("kept".to_string(), false)]
        );

        // Younger than the TTL: kept, and the id goes on counting.
        assert_eq!(
            store
                .purge_tombstones(Duration::from_secs(3600))
                .await
                .unwrap(),
            0
        );
        let again = store.put_offer(draft("gone", body), None).await.unwrap();
        assert_eq!((again.created, again.offer.version), (true, 3));
        store.delete_offer("gone", "c1").await.unwrap();

        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            store
                .purge_tombstones(Duration::from_millis(10))
                .await
                .unwrap(),
            1
        );
        assert_eq!(docs().await, [("kept".to_string(), false)]);
        let fresh = store.put_offer(draft("gone", body), None).await.unwrap();
        assert_eq!((fresh.created, fresh.offer.version), (true, 1));
        assert_eq!(
            store.get_offer("kept").await.unwrap().map(|o| o.version),
            Some(1)
        );
    }

    /// The filters run in the database: the documents MongoDB returns for
    /// each query are already the right ones (before the exact refinement).
    #[tokio::test(flavor = "multi_thread")]
    async fn filters_run_as_database_queries() {
        let server = e2e::mongo::MongoServer::start().unwrap();
        let store = MongoStore::connect(&MongoConfig {
            uri: server.uri(),
            database: "filters".into(),
            timeout: Duration::from_secs(10),
        })
        .await
        .unwrap();
        let offers = [
            (
                "a",
                r#"{"name":"a","type":"compute","plans":{"p":{"name":"p","cost":"0.5","resources":{"cpu":"2","memory":"4Gi"}},
                                                         "q":{"name":"q","cost":"3","resources":{"cpu":"16","memory":"64Gi"}}}}"#,
            ),
            (
                "b",
                r#"{"name":"b","type":"gpu","plans":{"p":{"name":"p","cost":"2.5","resources":{"cpu":"8","nvidia.com/gpu":"2"}}}}"#,
            ),
            (
                "c",
                r#"{"name":"c","type":"compute","labels":{"region":"eu","tier":""},"plans":{"p":{"name":"p","cost":"1.0","resources":{"cpu":"500m","memory":"4G"}}}}"#,
            ),
            (
                "d",
                r#"{"name":"d","type":"db","kind":"service","plans":{"l":{"name":"l","cost":"10","hosting":"Local"},
                    "r":{"name":"r","cost":"20","hosting":"Remote","schemas":{"service_instance":{"create":{"parameters":
                        {"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}}}}}}}"#,
            ),
        ];
        for (id, body) in offers {
            store.put_offer(draft(id, body), None).await.unwrap();
        }
        store
            .put_offer(draft("gone", offers[0].1), None)
            .await
            .unwrap();
        store.delete_offer("gone", "c1").await.unwrap();

        for (query, expected) in [
            (vec![], vec!["a", "b", "c", "d"]),
            (vec![("type", "compute")], vec!["a", "c"]),
            (vec![("provider", "one")], vec!["a", "b", "c", "d"]),
            (vec![("kind", "service")], vec!["d"]),
            (vec![("kind", "capacity")], vec!["a", "b", "c"]),
            (vec![("hosting", "Remote")], vec!["d"]),
            (vec![("hosting", "LocalAndRemote")], vec![]),
            // same plan: the Remote plan costs 20.
            (vec![("hosting", "Remote"), ("maxCost", "15")], vec![]),
            (vec![("hosting", "Local"), ("maxCost", "15")], vec!["d"]),
            (vec![("provider", "c2")], vec![]),
            (vec![("label.region", "eu")], vec!["c"]),
            (vec![("label.region", "eu"), ("label.tier", "")], vec!["c"]),
            (vec![("label.region", "eu"), ("label.tier", "x")], vec![]),
            (vec![("label.region", "us")], vec![]),
            (vec![("maxCost", "1")], vec!["a", "c"]),
            (vec![("maxCost", "0.4")], vec![]),
            (vec![("min.memory", "4Gi")], vec!["a"]),
            (vec![("min.memory", "4G")], vec!["a", "c"]),
            (vec![("min.nvidia.com/gpu", "1")], vec!["b"]),
            (vec![("min.cpu", "600m")], vec!["a", "b"]),
            // same-plan semantics in the database: a's cheap plan is small.
            (vec![("maxCost", "1"), ("min.cpu", "4")], vec![]),
            (vec![("min.cpu", "16"), ("min.memory", "64Gi")], vec!["a"]),
            (vec![("min.cpu", "16"), ("min.memory", "65Gi")], vec![]),
            (
                vec![("type", "compute"), ("maxCost", "3"), ("min.memory", "8Gi")],
                vec!["a"],
            ),
        ] {
            let filter = OfferFilter::from_pairs(query.clone()).unwrap();
            let cursor = store
                .offers
                .find(query_for(&filter))
                .sort(doc! { "_id": 1 })
                .await
                .unwrap();
            let docs: Vec<OfferDoc> = cursor.try_collect().await.unwrap();
            let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
            assert_eq!(ids, expected, "database query for {query:?}");
        }
        // A service offer reads back whole: kind, hosting and schemas.
        let d = store.find_doc("d").await.unwrap().unwrap();
        let d = d.into_offer().unwrap().unwrap();
        assert_eq!(d.kind, crate::offers::OfferKind::Service);
        assert_eq!(
            d.plans["r"].hosting,
            Some(crate::offers::HostingPolicy::Remote)
        );
        let schemas = d.plans["r"].schemas.as_ref().unwrap();
        assert_eq!(
            schemas.each()[0].1["$schema"],
            "http://json-schema.org/draft-04/schema#"
        );
    }
}
