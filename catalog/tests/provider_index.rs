//! The embedded store answers a provider's listing from an index of the
//! records by provider (issue 44: a poll costs the caller's records, not the
//! catalog's). The index is rebuilt on open whenever it does not hold one
//! entry per record — here, a directory whose index lost an entry, as one
//! written meanwhile by a catalog without the index would be.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use catalog::backends::embedded::DB_FILE;
use catalog::backends::EmbeddedStore;
use catalog::buying::ReservationStore;
use records::reservation;
use redb::{Database, ReadableTableMetadata, TableDefinition};

#[path = "support/records.rs"]
mod records;

const BY_PROVIDER: TableDefinition<'static, &'static str, u8> =
    TableDefinition::new("reservations_by_provider");

async fn sold(store: &EmbeddedStore, provider: &str) -> Vec<String> {
    let mut ids: Vec<_> = store
        .list_sold(provider)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_lists_only_its_records_and_a_short_index_is_rebuilt_on_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let now = catalog::store::now();
        for (id, provider) in [("r1", "p1"), ("r2", "p2"), ("r3", "p1"), ("r4", "p10")] {
            store
                .reserve(reservation(id, "alice", provider, now), now)
                .await
                .unwrap();
        }
        assert_eq!(sold(&store, "p1").await, ["r1", "r3"]);
        // A provider whose ID begins another's sees only its own.
        assert_eq!(sold(&store, "p10").await, ["r4"]);
        assert!(sold(&store, "p").await.is_empty());
    }
    // An entry goes missing from the index, the records stay.
    {
        let db = Database::create(dir.path().join(DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut index = txn.open_table(BY_PROVIDER).unwrap();
            assert_eq!(index.len().unwrap(), 4);
            index.remove("p1\u{1f}r3").unwrap().expect("r3's entry");
        }
        txn.commit().unwrap();
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(sold(&store, "p1").await, ["r1", "r3"]);
    assert_eq!(sold(&store, "p2").await, ["r2"]);
}
