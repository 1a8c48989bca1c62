//! `OsbStore::osb_list_instances` (issue 45: "my deployments" from the
//! catalog) on both stores — the embedded one and MongoDB (SecantusDB): a
//! customer's instances by owner, a provider's by provider, an admin's all,
//! whether or not the instance ever got a purchase; an owner or provider
//! whose name begins another's gets only its own; a replaced instance is
//! listed once, as written; a deleted one no longer. The embedded store
//! keeps the lists as indexes, rebuilt on open when the owner index lacks
//! an entry (a data directory written by a catalog without them); MongoDB
//! indexes `body.owner`, `body.provider` and `body.reservationId`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use catalog::backends::embedded::DB_FILE;
use catalog::backends::{EmbeddedStore, MongoConfig, MongoStore};
use catalog::osb::model::OsbInstance;
use catalog::osb::{InstancesOf, OsbStore};
use e2e::mongo::MongoServer;
use redb::{Database, ReadableTableMetadata, TableDefinition};

const BY_OWNER: TableDefinition<'static, &'static str, u8> =
    TableDefinition::new("osb_instances_by_owner");

/// Instance `id` provisioned by `owner` from `provider`'s offer, bought
/// as `reservation` (None: provisioning failed before the purchase).
fn instance(
    id: &str,
    owner: &str,
    provider: Option<&str>,
    reservation: Option<&str>,
) -> OsbInstance {
    OsbInstance {
        id: id.into(),
        owner: owner.into(),
        service_id: "svc".into(),
        plan_id: "pl".into(),
        offer_id: "db".into(),
        plan_key: "local".into(),
        request_digest: "digest".into(),
        parameters: None,
        reservation_id: reservation.map(Into::into),
        provisioned: reservation.is_some(),
        service: true,
        provider: provider.map(Into::into),
        awaiting_provider: false,
        customer_peering: None,
        operation: None,
        revision: 1,
        created_at: catalog::store::now(),
        instance_contract_id: None,
        update: None,
    }
}

/// The ids `of` lists on `store`, sorted.
async fn ids(store: &dyn OsbStore, of: InstancesOf<'_>) -> Vec<String> {
    let mut ids: Vec<String> = store
        .osb_list_instances(of)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    ids.sort();
    ids
}

/// The listing's behaviour, the same on every store.
async fn lists_by_party(store: &dyn OsbStore) {
    for inst in [
        instance("a1", "alice", Some("p1"), Some("r1")),
        // Failed before its purchase: no reservation.
        instance("a2", "alice", Some("p10"), None),
        instance("al", "ali", Some("p1"), Some("r3")),
        instance("b1", "bob", Some("p1"), Some("r4")),
        // Written before instances named their provider.
        instance("old", "osb:platform", None, Some("r5")),
    ] {
        assert!(store.osb_insert_instance(&inst).await.unwrap());
    }
    assert_eq!(ids(store, InstancesOf::Owner("alice")).await, ["a1", "a2"]);
    assert_eq!(ids(store, InstancesOf::Owner("ali")).await, ["al"]);
    assert_eq!(ids(store, InstancesOf::Owner("bob")).await, ["b1"]);
    assert!(ids(store, InstancesOf::Owner("carol")).await.is_empty());
    assert_eq!(
        ids(store, InstancesOf::Provider("p1")).await,
        ["a1", "al", "b1"]
    );
    assert_eq!(ids(store, InstancesOf::Provider("p10")).await, ["a2"]);
    assert!(ids(store, InstancesOf::Provider("p")).await.is_empty());
    assert_eq!(
        ids(store, InstancesOf::All).await,
        ["a1", "a2", "al", "b1", "old"]
    );

    // Replaced (a later revision): listed once, as written.
    let mut a1 = instance("a1", "alice", Some("p1"), Some("r1"));
    a1.revision = 2;
    a1.parameters = Some(r#"{"replaced":true}"#.into());
    assert!(store.osb_replace_instance(&a1, 1).await.unwrap());
    let listed = store
        .osb_list_instances(InstancesOf::Owner("alice"))
        .await
        .unwrap();
    let a1s: Vec<_> = listed.iter().filter(|i| i.id == "a1").collect();
    assert_eq!(a1s.len(), 1, "{listed:?}");
    assert_eq!((a1s[0].revision, &a1s[0].parameters), (2, &a1.parameters));
    // A replacement at a stale revision writes nothing, in the lists too.
    let mut moved = a1.clone();
    moved.owner = "bob".into();
    assert!(!store.osb_replace_instance(&moved, 1).await.unwrap());
    assert_eq!(ids(store, InstancesOf::Owner("bob")).await, ["b1"]);

    // Deleted: gone from every list.
    assert!(store.osb_delete_instance("a2", 1).await.unwrap());
    assert_eq!(ids(store, InstancesOf::Owner("alice")).await, ["a1"]);
    assert!(ids(store, InstancesOf::Provider("p10")).await.is_empty());
    assert_eq!(
        ids(store, InstancesOf::All).await,
        ["a1", "al", "b1", "old"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_lists_by_party_and_rebuilds_a_short_index_on_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        lists_by_party(&store).await;
    }
    // An owner entry goes missing (as a catalog without the index would
    // leave a directory); the records stay.
    {
        let db = Database::create(dir.path().join(DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut index = txn.open_table(BY_OWNER).unwrap();
            assert_eq!(index.len().unwrap(), 4);
            index.remove("bob\u{1f}b1").unwrap().expect("b1's entry");
        }
        txn.commit().unwrap();
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(ids(&store, InstancesOf::Owner("bob")).await, ["b1"]);
    assert_eq!(ids(&store, InstancesOf::Owner("alice")).await, ["a1"]);
    assert_eq!(
        ids(&store, InstancesOf::Provider("p1")).await,
        ["a1", "al", "b1"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mongo_lists_by_party_from_indexes() {
    let server = MongoServer::start().unwrap();
    let config = MongoConfig {
        uri: server.uri(),
        database: "osb_listing".into(),
        timeout: Duration::from_secs(10),
    };
    let store = MongoStore::connect(&config).await.unwrap();
    lists_by_party(&store).await;

    // The indexes the listing and the provider's reports read by, created
    // in the background once the store is connected.
    let client = mongodb::Client::with_uri_str(server.uri()).await.unwrap();
    let instances = client
        .database("osb_listing")
        .collection::<mongodb::bson::Document>("osb_instances");
    let wanted = ["body.owner_1", "body.provider_1", "body.reservationId_1"];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let names = instances.list_index_names().await.unwrap();
        if wanted.iter().all(|w| names.iter().any(|n| n == w)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "indexes of osb_instances: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
