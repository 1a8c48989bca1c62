//! The storage backends, above every feature: each implements every
//! feature's store trait ([`crate::offers::OfferStore`],
//! [`crate::providers::ProviderStore`], [`crate::buying::ReservationStore`],
//! [`crate::osb::OsbStore`]) over ONE database handle per process.
//!
//! - [`embedded`]: one redb file in the data directory (the default; a
//!   write is fsynced before it is acknowledged).
//! - [`mongo`]: MongoDB through one client, for several catalog processes
//!   sharing one database.
//!
//! Backends only read, compare-and-swap and follow changes; the decisions
//! (ownership, versions, reservation transitions, caps) are the features'.
//! [`Backend::open`] chooses and opens one, once.

pub mod embedded;
pub mod mongo;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tracing::info;

use crate::buying::ReservationStore;
use crate::offers::OfferStore;
use crate::osb::OsbStore;
use crate::providers::ProviderStore;
use crate::store::Health;

pub use embedded::EmbeddedStore;
pub use mongo::{MongoConfig, MongoStore};

/// Which backend to open, and where.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// The embedded store's directory (used when `mongo` is `None`).
    pub data_dir: PathBuf,
    pub mongo: Option<MongoConfig>,
    /// How long MongoDB keeps offer tombstones (zero: for ever).
    pub tombstone_ttl: Duration,
}

/// The one opened backend, as each feature's trait object.
#[derive(Clone)]
pub struct Backend {
    pub health: Arc<dyn Health>,
    pub offers: Arc<dyn OfferStore>,
    pub providers: Arc<dyn ProviderStore>,
    pub reservations: Arc<dyn ReservationStore>,
    pub osb: Arc<dyn OsbStore>,
    /// The MongoDB store itself, for what only it does (the shared signing
    /// key).
    pub mongo: Option<MongoStore>,
}

impl Backend {
    /// Open the configured backend: MongoDB if a URI is given, else the
    /// embedded one in the data directory (migrating older layouts).
    pub async fn open(config: &BackendConfig) -> anyhow::Result<Backend> {
        match &config.mongo {
            Some(m) => {
                let mongo = MongoStore::connect(m)
                    .await
                    .context("connecting to MongoDB")?;
                if !config.tombstone_ttl.is_zero() {
                    mongo.purge_tombstones_every(config.tombstone_ttl);
                }
                info!(database = %m.database, "using the MongoDB store");
                Ok(Backend::of(mongo.clone(), Some(mongo)))
            }
            None => {
                let store = EmbeddedStore::open(&config.data_dir).with_context(|| {
                    format!(
                        "opening the embedded store in {}",
                        config.data_dir.display()
                    )
                })?;
                info!(dir = %config.data_dir.display(), "using the embedded store");
                Ok(Backend::of(store, None))
            }
        }
    }

    fn of<S>(store: S, mongo: Option<MongoStore>) -> Backend
    where
        S: Health + OfferStore + ProviderStore + ReservationStore + OsbStore + Clone,
    {
        Backend {
            health: Arc::new(store.clone()),
            offers: Arc::new(store.clone()),
            providers: Arc::new(store.clone()),
            reservations: Arc::new(store.clone()),
            osb: Arc::new(store),
            mongo,
        }
    }
}
