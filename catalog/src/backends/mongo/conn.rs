//! Connecting the one MongoDB client with the catalog's durability
//! settings and deadlines, noticing when the server behind an address is a
//! new process (see [`ProcessIds`]), and creating indexes in the background
//! until the database answers.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use mongodb::bson::{Bson, Document};
use mongodb::event::sdam::SdamEvent;
use mongodb::event::EventHandler;
use mongodb::options::{Acknowledgment, ClientOptions, WriteConcern};
use mongodb::{Client, Collection, Database, IndexModel};
use tokio::sync::watch;
use tracing::{info, warn};

use super::MongoConfig;
use crate::store::StoreError;

/// A handle on `config.database`. The driver connects lazily, so this
/// fails only on a malformed URI; an unreachable server shows up as
/// [`StoreError::Unavailable`] on the first operation, after
/// `config.timeout`.
///
/// The driver's own deadlines follow `--mongodb-timeout` (the flag wins over
/// the URI's `serverSelectionTimeoutMS` / `connectTimeoutMS`): selecting a
/// server and opening a connection each give up within it. The Rust driver
/// has no socket timeout, so a server that accepts but never answers (a
/// frozen process) is bounded by the per-operation deadline around every
/// store call instead. The server monitor checks at least that often (not
/// below the driver's 500 ms floor, not above its 10 s default), so a hung
/// server is marked unknown, and fails fast, about one timeout after it
/// stops answering; a URI's `heartbeatFrequencyMS` is kept.
///
/// Also returns a counter of server restarts: it moves each time a server
/// answers the monitor's heartbeat as another process than before.
pub async fn open(
    config: &MongoConfig,
    app_name: &str,
) -> Result<(Database, watch::Receiver<u64>), StoreError> {
    let mut options = ClientOptions::parse(&config.uri)
        .await
        .map_err(|e| StoreError::Internal(format!("invalid MongoDB URI: {e}")))?;
    options.app_name.get_or_insert_with(|| app_name.to_string());
    options.server_selection_timeout = Some(config.timeout);
    options.connect_timeout = Some(config.timeout);
    options.heartbeat_freq.get_or_insert(
        config
            .timeout
            .clamp(Duration::from_millis(500), Duration::from_secs(10)),
    );
    // An acknowledged write must survive the loss of the primary and a
    // crash: majority, journaled.
    options.write_concern = Some(
        WriteConcern::builder()
            .w(Acknowledgment::Majority)
            .journal(true)
            .build(),
    );
    let (restarts, restarted) = watch::channel(0u64);
    let seen = Mutex::new(ProcessIds::default());
    options.sdam_event_handler = Some(EventHandler::callback(move |event: SdamEvent| {
        if let SdamEvent::ServerHeartbeatSucceeded(hb) = event {
            let address = hb.server_address.to_string();
            let again = seen
                .lock()
                .map(|mut seen| seen.restarted(&address, &hb.reply))
                .unwrap_or(false);
            if again {
                warn!(server = %address, "the MongoDB server is a new process: it restarted");
                restarts.send_modify(|n| *n += 1);
            }
        }
    }));
    let client = Client::with_options(options)
        .map_err(|e| StoreError::Internal(format!("MongoDB client: {e}")))?;
    Ok((client.database(&config.database), restarted))
}

/// The process id (`topologyVersion.processId` of `hello`) last heard
/// from each server address. A new one at a known address means the server
/// restarted; the driver then resumes change streams by itself, and a
/// server whose history is gone (its data replaced) may accept the old
/// resume token and never deliver what is written from then on, without
/// any error (SecantusDB does). The followers take this as a reason to
/// start afresh. Failing over to another member changes the address, not
/// the process at one: no restart.
#[derive(Debug, Default)]
pub struct ProcessIds(HashMap<String, Bson>);

impl ProcessIds {
    /// Record `reply`'s process id for `address`: true when it replaces
    /// another one.
    pub fn restarted(&mut self, address: &str, reply: &Document) -> bool {
        let Some(id) = reply
            .get_document("topologyVersion")
            .ok()
            .and_then(|tv| tv.get("processId"))
        else {
            return false;
        };
        match self.0.insert(address.to_string(), id.clone()) {
            Some(before) => before != *id,
            None => false,
        }
    }
}

/// Run `create` until it succeeds, backing off from 200 ms to 10 s: the
/// catalog starts even while the database is away, and its queries only
/// get faster once the indexes exist.
pub async fn create_indexes<F, Fut>(what: &str, mut create: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), mongodb::error::Error>>,
{
    let mut delay = Duration::from_millis(200);
    loop {
        match create().await {
            Ok(()) => {
                info!("MongoDB indexes for {what} ready");
                return;
            }
            Err(e) => {
                warn!(error = %e, "creating MongoDB indexes for {what} failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        }
    }
}

/// One index per document of `keys` on `collection`, in that order (for
/// [`create_indexes`]; creating an index that exists is a no-op).
pub async fn create_key_indexes<T: Send + Sync>(
    collection: &Collection<T>,
    keys: &[Document],
) -> Result<(), mongodb::error::Error> {
    for k in keys {
        collection
            .create_index(IndexModel::builder().keys(k.clone()).build())
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::bson::{doc, oid::ObjectId};

    fn hello(process: ObjectId, counter: i64) -> Document {
        doc! { "isWritablePrimary": true, "topologyVersion": { "processId": process, "counter": counter } }
    }

    /// Only a different process at a known address is a restart: not the
    /// first answer, not the same process again (its counter moving), not
    /// another address, not a server that sends no topology version.
    #[test]
    fn a_new_process_at_a_known_address_is_a_restart() {
        let (one, two, other) = (ObjectId::new(), ObjectId::new(), ObjectId::new());
        let mut seen = ProcessIds::default();
        assert!(!seen.restarted("db:27017", &hello(one, 0)));
        assert!(!seen.restarted("db:27017", &hello(one, 3)));
        assert!(!seen.restarted("db2:27017", &hello(other, 0)));
        assert!(!seen.restarted("db:27017", &doc! { "isWritablePrimary": true }));
        assert!(seen.restarted("db:27017", &hello(two, 0)));
        assert!(!seen.restarted("db:27017", &hello(two, 1)));
        assert!(!seen.restarted("db2:27017", &hello(other, 9)));
    }
}
