//! Connecting the one MongoDB client with the catalog's durability
//! settings, and creating indexes in the background until the database
//! answers.

use std::future::Future;
use std::time::Duration;

use mongodb::options::{Acknowledgment, ClientOptions, WriteConcern};
use mongodb::{Client, Database};
use tracing::{info, warn};

use super::MongoConfig;
use crate::storage::StoreError;

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
pub async fn open(config: &MongoConfig, app_name: &str) -> Result<Database, StoreError> {
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
    let client = Client::with_options(options)
        .map_err(|e| StoreError::Internal(format!("MongoDB client: {e}")))?;
    Ok(client.database(&config.database))
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
