//! Both stores publish every committed change on `OfferStore::changes`, in order,
//! once and with versions; a process's own write is published by the time it
//! is acknowledged (MongoDB's change stream delivers it again later: not
//! published twice); changes made through another store instance (another
//! catalog process) arrive through the change streams.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use catalog::backends::{EmbeddedStore, MongoConfig, MongoStore};
use catalog::offers::{OfferChange, OfferSpec, OfferStore, ProviderRef};
use catalog::providers::{ProviderAccount, ProviderStore};
use catalog::store::StoreError;

/// Offers and providers of one backend, as the tests drive them.
trait Store: OfferStore + ProviderStore {}
impl<S: OfferStore + ProviderStore> Store for S {}
use tokio::sync::broadcast;

fn draft(id: &str, owner: &str, name: &str) -> catalog::offers::OfferDraft {
    let body = format!(
        r#"{{"name":"{name}","type":"compute","plans":{{"p":{{"name":"p","cost":"1","resources":{{"cpu":"1"}}}}}}}}"#
    );
    let owner = ProviderRef {
        cluster_id: owner.into(),
        cluster_name: format!("{owner} name"),
        stamp: catalog::providers::OwnerStamp::default(),
    };
    OfferSpec::from_json(body.as_bytes())
        .unwrap()
        .into_draft(id.into(), owner)
}

fn account(id: &str) -> ProviderAccount {
    ProviderAccount {
        generation: 0,
        cluster_id: id.into(),
        cluster_name: format!("{id} name"),
        auth_url: "https://x.example".into(),
        secret_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".into(),
        created_at: catalog::store::now(),
    }
}

/// The next change that is not a `Resync`, within a few seconds.
async fn next(rx: &mut broadcast::Receiver<OfferChange>) -> OfferChange {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Ok(OfferChange::Resync)) => continue,
            Ok(Ok(change)) => return change,
            other => panic!("no change event: {other:?}"),
        }
    }
}

/// The next change that is not a `Resync`, already published.
fn published(rx: &mut broadcast::Receiver<OfferChange>) -> OfferChange {
    loop {
        match rx.try_recv() {
            Ok(OfferChange::Resync) => continue,
            Ok(change) => return change,
            other => panic!("not published by the acknowledgement: {other:?}"),
        }
    }
}

/// Drive `writer` and expect the same sequence on `observed`'s receiver —
/// when it is the writer itself (`own`), published before each write is
/// acknowledged. Returns the receiver, past the last write.
async fn check_changes(
    writer: Arc<dyn Store>,
    observed: Arc<dyn Store>,
    own: bool,
) -> broadcast::Receiver<OfferChange> {
    let mut rx = observed.changes();
    let mut expected = Vec::new();

    let (_, claimed) = writer.claim_provider(account("c1")).await.unwrap();
    assert!(claimed);

    let v1 = writer
        .put_offer(draft("o", "c1", "first"), None)
        .await
        .unwrap();
    assert!(v1.created);
    if own {
        expected.push(published(&mut rx));
    }
    let v2 = writer
        .put_offer(draft("o", "c1", "second"), Some(1))
        .await
        .unwrap();
    assert!(!v2.created);
    if own {
        expected.push(published(&mut rx));
    }
    // Refused writes publish nothing.
    assert_eq!(
        writer
            .put_offer(draft("o", "c2", "hijack"), None)
            .await
            .unwrap_err(),
        StoreError::NotOwner
    );
    assert!(matches!(
        writer
            .put_offer(draft("o", "c1", "stale"), Some(1))
            .await
            .unwrap_err(),
        StoreError::VersionConflict {
            expected: 1,
            current: 2
        }
    ));
    assert_eq!(
        writer.delete_offer("o", "c2").await.unwrap_err(),
        StoreError::NotOwner
    );
    writer.delete_offer("o", "c1").await.unwrap();
    if own {
        expected.push(published(&mut rx));
    }
    assert_eq!(
        writer.delete_offer("o", "c1").await.unwrap_err(),
        StoreError::NotFound
    );

    let mut changes = expected.into_iter();
    let mut take = async || match changes.next() {
        Some(change) => change,
        None => next(&mut rx).await,
    };
    match take().await {
        OfferChange::Upserted(o) => assert_eq!((o.name.as_str(), o.version), ("first", 1)),
        other => panic!("expected Upserted v1, got {other:?}"),
    }
    match take().await {
        OfferChange::Upserted(o) => {
            assert_eq!((o.name.as_str(), o.version), ("second", 2));
            assert_eq!(o, v2.offer, "the event carries the stored offer");
        }
        other => panic!("expected Upserted v2, got {other:?}"),
    }
    match take().await {
        OfferChange::Deleted {
            id,
            cluster_id,
            version,
        } => {
            assert_eq!((id.as_str(), cluster_id.as_str(), version), ("o", "c1", 3))
        }
        other => panic!("expected Deleted v3, got {other:?}"),
    }
    // Nothing else was published: the next change is a later write's.
    writer
        .put_offer(draft("marker", "c1", "marker"), None)
        .await
        .unwrap();
    match next(&mut rx).await {
        OfferChange::Upserted(o) if o.id == "marker" => {}
        other => panic!("expected the marker's upsert, got {other:?}"),
    }
    rx
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_store_publishes_its_changes() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    check_changes(store.clone(), store, true).await;
}

async fn mongo(server: &e2e::mongo::MongoServer) -> Arc<dyn Store> {
    let config = MongoConfig {
        uri: server.uri(),
        database: "changes".into(),
        timeout: Duration::from_secs(10),
    };
    Arc::new(MongoStore::connect(&config).await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn mongo_store_publishes_its_changes() {
    let server = e2e::mongo::MongoServer::start().unwrap();
    let store = mongo(&server).await;
    let mut rx = check_changes(store.clone(), store, true).await;
    // The change stream delivers copies of those writes, not published
    // again: another process's write, which it delivers after them, is the
    // next change.
    let other = mongo(&server).await;
    other
        .put_offer(draft("later", "c1", "later"), None)
        .await
        .unwrap();
    match next(&mut rx).await {
        OfferChange::Upserted(o) if o.id == "later" => {}
        other => panic!("expected the other process's upsert, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn mongo_store_publishes_changes_made_by_another_process() {
    let server = e2e::mongo::MongoServer::start().unwrap();
    let (writer, observer) = (mongo(&server).await, mongo(&server).await);
    check_changes(writer, observer, false).await;
}
