//! Data written by catalog 235bcb7 keeps working.
//!
//! That catalog kept two redb files in its data directory — `catalog.redb`
//! (offers, versions, providers) and `buying.redb` (reservations and their
//! indexes, caps, sealed peering tokens, disabled flags, OSB records) — and
//! opened two MongoDB clients on one database. The records below are
//! written with raw redb and raw MongoDB documents, table by table and
//! field by field as 235bcb7 wrote them (JSON text literals, not today's
//! serializers), and the current code must read every one of them back; the
//! embedded migration must also be idempotent.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use catalog::backends::embedded::{DB_FILE, OLD_BUYING_DB_FILE};
use catalog::backends::{EmbeddedStore, MongoConfig, MongoStore};
use catalog::buying::ReservationStore;
use catalog::offers::{OfferFilter, OfferSpec, OfferStore, ProviderRef};
use catalog::osb::OsbStore;
use catalog::providers::ProviderStore;
use redb::{Database, TableDefinition};

const OFFER: &str = r#"{"id":"o1","name":"General purpose","type":"compute","description":"d","plans":{"p":{"name":"small","cost":"0.05","resources":{"cpu":"2","memory":"4Gi"}}},"clusterID":"c1","clusterName":"one","createdAt":"2026-11-01T10:00:00Z","updatedAt":"2026-11-02T10:00:00Z","version":3}"#;
const PROVIDER: &str = r#"{"clusterID":"c1","clusterName":"one","authURL":"https://one.example","secretHash":"$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA","createdAt":"2026-11-01T09:00:00Z","generation":2}"#;
const RESERVATION: &str = r#"{"id":"r1","consumer":"alice","offerID":"o1","planID":"p","clusterID":"c1","cost":"0.05","state":"reserved","channel":"rest","createdAt":"2026-11-02T10:00:00Z","expiresAt":"2999-01-01T00:00:00Z"}"#;
const PURCHASE: &str = r#"{"id":"r2","consumer":"bob","offerID":"o1","planID":"p","clusterID":"c1","cost":"0.05","state":"purchased","channel":"osb","createdAt":"2026-11-02T10:00:00Z","expiresAt":"2026-11-02T10:05:00Z","purchasedAt":"2026-11-02T10:01:00Z"}"#;
const INSTANCE: &str = r#"{"id":"i1","owner":"osb:platform","serviceID":"svc","planID":"pl","offerID":"o1","planKey":"p","requestDigest":"abc","reservationId":"r2","provisioned":true,"revision":4,"createdAt":"2026-11-02T10:00:00Z"}"#;
const BINDING: &str = r#"{"id":"b1","instanceID":"i1","owner":"osb:platform","requestDigest":"def","createdAt":"2026-11-02T10:02:00Z"}"#;
const SEP: char = '\u{1f}';

type Json = TableDefinition<'static, &'static str, &'static [u8]>;
type Count<V> = TableDefinition<'static, &'static str, V>;

/// `catalog.redb` and `buying.redb` as 235bcb7 left them.
fn write_235bcb7_data_dir(dir: &std::path::Path) {
    let db = Database::create(dir.join("catalog.redb")).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let offers: Json = TableDefinition::new("offers");
        let versions: Count<u64> = TableDefinition::new("offer_versions");
        let providers: Json = TableDefinition::new("providers");
        txn.open_table(offers)
            .unwrap()
            .insert("o1", OFFER.as_bytes())
            .unwrap();
        let mut v = txn.open_table(versions).unwrap();
        v.insert("o1", 3).unwrap();
        // A deleted offer: its id's version keeps counting.
        v.insert("gone", 5).unwrap();
        txn.open_table(providers)
            .unwrap()
            .insert("c1", PROVIDER.as_bytes())
            .unwrap();
    }
    txn.commit().unwrap();

    let db = Database::create(dir.join("buying.redb")).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let reservations: Json = TableDefinition::new("reservations");
        let holds: Count<u64> = TableDefinition::new("holds");
        let caps: Count<u32> = TableDefinition::new("plan_caps");
        let due: Count<u8> = TableDefinition::new("reservations_due");
        let by_consumer: Count<u8> = TableDefinition::new("reservations_by_consumer");
        let peering: Json = TableDefinition::new("peering_secrets");
        let disabled: Count<i64> = TableDefinition::new("disabled_providers");
        let instances: Json = TableDefinition::new("osb_instances");
        let bindings: Json = TableDefinition::new("osb_bindings");
        let by_instance: Count<u8> = TableDefinition::new("osb_bindings_by_instance");
        let mut r = txn.open_table(reservations).unwrap();
        r.insert("r1", RESERVATION.as_bytes()).unwrap();
        r.insert("r2", PURCHASE.as_bytes()).unwrap();
        let mut h = txn.open_table(holds).unwrap();
        h.insert(format!("o1{SEP}p{SEP}r1").as_str(), 32503680000000)
            .unwrap();
        h.insert(format!("o1{SEP}p{SEP}r2").as_str(), u64::MAX)
            .unwrap();
        txn.open_table(caps)
            .unwrap()
            .insert(format!("o1{SEP}p").as_str(), 2)
            .unwrap();
        txn.open_table(due)
            .unwrap()
            .insert(format!("{:020}{SEP}r1", 32503680000000u64).as_str(), 0)
            .unwrap();
        let mut c = txn.open_table(by_consumer).unwrap();
        c.insert(format!("alice{SEP}r1").as_str(), 0).unwrap();
        c.insert(format!("bob{SEP}r2").as_str(), 0).unwrap();
        txn.open_table(peering)
            .unwrap()
            .insert("c1", &b"sealed-bytes"[..])
            .unwrap();
        txn.open_table(disabled)
            .unwrap()
            .insert("c2", 1_700_000_000_000)
            .unwrap();
        txn.open_table(instances)
            .unwrap()
            .insert("i1", INSTANCE.as_bytes())
            .unwrap();
        txn.open_table(bindings)
            .unwrap()
            .insert("b1", BINDING.as_bytes())
            .unwrap();
        txn.open_table(by_instance)
            .unwrap()
            .insert(format!("i1{SEP}b1").as_str(), 0)
            .unwrap();
    }
    txn.commit().unwrap();
}

fn draft(id: &str) -> catalog::offers::OfferDraft {
    let body = r#"{"name":"n","type":"compute","plans":{"p":{"name":"p","cost":"1","resources":{"cpu":"1"}}}}"#;
    OfferSpec::from_json(body.as_bytes()).unwrap().into_draft(
        id.into(),
        ProviderRef {
            cluster_id: "c1".into(),
            cluster_name: "one".into(),
            stamp: catalog::providers::OwnerStamp::default(),
        },
    )
}

/// Everything 235bcb7 wrote reads back through every feature's store.
async fn reads_everything<S>(store: &S)
where
    S: OfferStore + ProviderStore + ReservationStore + OsbStore,
{
    let now = catalog::store::now();
    let offer = store.get_offer("o1").await.unwrap().expect("the offer");
    assert_eq!((offer.version, offer.cluster_id.as_str()), (3, "c1"));
    assert_eq!(offer.plans["p"].cost.to_string(), "0.05");
    let listed = store.list_offers(&OfferFilter::default()).await.unwrap();
    assert!(listed.iter().any(|o| o.id == "o1"), "{listed:?}");
    let account = store
        .get_provider("c1")
        .await
        .unwrap()
        .expect("the provider");
    assert_eq!(
        (account.generation, account.auth_url.as_str()),
        (2, "https://one.example")
    );
    assert_eq!(
        store.get_peering_secret("c1").await.unwrap().as_deref(),
        Some(&b"sealed-bytes"[..])
    );
    assert!(store.disabled_providers().await.unwrap().contains_key("c2"));
    let r1 = store.get_reservation("r1").await.unwrap().expect("r1");
    assert_eq!(r1.consumer, "alice");
    assert_eq!(store.list_reservations(Some("bob")).await.unwrap().len(), 1);
    // 235bcb7 had no provider index: it is built from the records on open.
    let sold = store.list_sold("c1").await.unwrap();
    let mut ids: Vec<_> = sold.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["r1", "r2"]);
    let usage = store.plan_usage("o1", "p", now).await.unwrap();
    assert_eq!((usage.cap, usage.active), (Some(2), 2));
    let inst = store.osb_get_instance("i1").await.unwrap().expect("i1");
    assert_eq!(inst.revision, 4);
    // 235bcb7 had no instance index by owner: built from the records on
    // open (the embedded store), a query on MongoDB.
    let owned = store
        .osb_list_instances(catalog::osb::InstancesOf::Owner("osb:platform"))
        .await
        .unwrap();
    assert_eq!(owned.len(), 1);
    assert_eq!(owned[0].id, "i1");
    let bound = store.osb_bindings_of("i1").await.unwrap();
    assert_eq!(bound.len(), 1);
    assert_eq!(bound[0].id, "b1");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_235bcb7_data_dir_is_migrated_into_one_file() {
    let dir = tempfile::tempdir().unwrap();
    write_235bcb7_data_dir(dir.path());
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        reads_everything(&store).await;
        // A deleted id continues its version count.
        let again = store.put_offer(draft("gone"), Some(0)).await.unwrap();
        assert_eq!(again.offer.version, 6);
        // The cap holds across the migration: both units are taken.
        let reserve = catalog::buying::model::Reservation {
            id: "r3".into(),
            ..store.get_reservation("r1").await.unwrap().unwrap()
        };
        assert!(store.reserve(reserve, catalog::store::now()).await.is_err());
    }
    assert!(dir.path().join(DB_FILE).exists());
    assert!(!dir.path().join(OLD_BUYING_DB_FILE).exists());
    let aside = dir.path().join(format!("{OLD_BUYING_DB_FILE}.migrated"));
    assert!(aside.exists(), "the old file is kept aside, not deleted");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(DB_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the one file holds sealed tokens");
    }

    // Opening again changes nothing; a migration interrupted before its
    // rename (the old file still there) runs again without harm.
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        reads_everything(&store).await;
    }
    std::fs::copy(&aside, dir.path().join(OLD_BUYING_DB_FILE)).unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    reads_everything(&store).await;
    assert_eq!(store.get_offer("gone").await.unwrap().unwrap().version, 6);
    assert!(!dir.path().join(OLD_BUYING_DB_FILE).exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_235bcb7_mongodb_database_is_read_as_it_is() {
    use mongodb::bson::{doc, Binary, Bson, DateTime as BsonTime, Document};
    let server = e2e::mongo::MongoServer::start().unwrap();
    let client = mongodb::Client::with_uri_str(server.uri()).await.unwrap();
    let db = client.database("old235");
    let t = |s: &str| BsonTime::parse_rfc3339_str(s).unwrap();
    let json = |s: &str| -> Bson {
        let v: serde_json::Value = serde_json::from_str(s).unwrap();
        mongodb::bson::to_bson(&v).unwrap()
    };
    let insert = |coll: &'static str, d: Document| {
        let db = db.clone();
        async move { db.collection::<Document>(coll).insert_one(d).await.unwrap() }
    };
    insert(
        "offers",
        doc! {
            "_id": "o1", "version": 3i64, "clusterID": "c1", "deleted": false,
            "updatedAt": t("2026-11-02T10:00:00Z"),
            "live": {
                "name": "General purpose", "type": "compute", "description": "d",
                "clusterName": "one", "createdAt": t("2026-11-01T10:00:00Z"),
                "plans": [{
                    "key": "p", "name": "small", "cost": "0.05", "costNanos": 50_000_000i64,
                    "resources": [
                        { "name": "cpu", "quantity": "2", "milli": 2000i64 },
                        { "name": "memory", "quantity": "4Gi", "milli": 4_294_967_296_000i64 },
                    ],
                }],
            },
        },
    )
    .await;
    insert(
        "offers",
        doc! {
            "_id": "gone", "version": 5i64, "clusterID": "c1", "deleted": true,
            "updatedAt": t("2026-11-02T10:00:00Z"),
        },
    )
    .await;
    insert(
        "providers",
        doc! {
            "_id": "c1", "clusterName": "one", "authURL": "https://one.example",
            "secretHash": "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
            "createdAt": t("2026-11-01T09:00:00Z"), "generation": 2i64,
        },
    )
    .await;
    insert("peering_secrets", doc! {
        "_id": "c1",
        "sealed": Binary { subtype: mongodb::bson::spec::BinarySubtype::Generic, bytes: b"sealed-bytes".to_vec() },
    }).await;
    insert(
        "disabled_providers",
        doc! { "_id": "c2", "since": t("2026-11-01T00:00:00Z") },
    )
    .await;
    insert(
        "plan_caps",
        doc! { "_id": format!("o1{SEP}p"), "cap": 2i64 },
    )
    .await;
    insert(
        "plan_units",
        doc! {
            "_id": format!("o1{SEP}p{SEP}0"), "plan": format!("o1{SEP}p"), "reservation": "r1",
            "expiresAt": t("2999-01-01T00:00:00Z"), "createdAt": t("2026-11-02T10:00:00Z"),
        },
    )
    .await;
    insert(
        "plan_units",
        doc! {
            "_id": format!("o1{SEP}p{SEP}1"), "plan": format!("o1{SEP}p"), "reservation": "r2",
            "expiresAt": Bson::Null, "createdAt": t("2026-11-02T10:00:00Z"),
        },
    )
    .await;
    insert(
        "reservations",
        doc! {
            "_id": "r1", "consumer": "alice", "state": "reserved",
            "expiresAt": t("2999-01-01T00:00:00Z"), "unit": format!("o1{SEP}p{SEP}0"),
            "body": json(RESERVATION),
        },
    )
    .await;
    insert(
        "reservations",
        doc! {
            "_id": "r2", "consumer": "bob", "state": "purchased",
            "expiresAt": t("2026-11-02T10:05:00Z"), "unit": format!("o1{SEP}p{SEP}1"),
            "body": json(PURCHASE),
        },
    )
    .await;
    insert(
        "osb_instances",
        doc! { "_id": "i1", "revision": 4i64, "body": json(INSTANCE) },
    )
    .await;
    insert(
        "osb_bindings",
        doc! { "_id": "b1", "instanceID": "i1", "body": json(BINDING) },
    )
    .await;

    let store = MongoStore::connect(&MongoConfig {
        uri: server.uri(),
        database: "old235".into(),
        timeout: Duration::from_secs(10),
    })
    .await
    .unwrap();
    reads_everything(&store).await;
    let again = store.put_offer(draft("gone"), Some(0)).await.unwrap();
    assert_eq!(again.offer.version, 6);
}
