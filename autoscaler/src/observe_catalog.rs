//! What the autoscaler reads from its catalogs: the offers, followed live
//! on each catalog's WebSocket feed (`catalog_client::feed::follow`, one
//! follower per catalog URL however many autoscalers use it), and each
//! autoscaler's contracts, followed with its own bearer token on the
//! catalog's contract stream (`catalog_client::contract_follower`, one
//! follower per autoscaler and token, polling only as its fallback): a
//! change of the active set starts a round, and the whole listing, ended
//! contracts included, is read through a `catalog_client::Session` only
//! when the follower's set changed (its generation), since month-to-date
//! spend counts contracts cancelled earlier this month. Until the follower
//! has answered once, the listing is read every round, as before it.
//!
//! When a feed drops, the last offers are kept (marked disconnected) and
//! the follower reconnects with backoff; the controller buys nothing while
//! a catalog is unreachable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use catalog_client::contract_follower::{ContractFollower, FollowerOptions};
use catalog_client::feed::{self, CatalogAddress, FollowOptions, OfferSet, Update};
use catalog_client::market::ContractFilter;
use catalog_client::wire::Contract;
use catalog_client::{Http, Login, Session};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::metrics::Metrics;

/// Sent as `User-Agent` with every catalog request.
pub const USER_AGENT: &str = "liqo-broker-market-autoscaler";

/// Offer-change notices queued for the controller before older ones are
/// dropped (a dropped notice only delays a decision to the next scan).
const NOTICES: usize = 64;

/// One catalog's offers as last seen.
#[derive(Debug, Clone, Default)]
pub struct Offers {
    pub offers: Arc<OfferSet>,
    /// A snapshot arrived at least once.
    pub loaded: bool,
    /// The feed is connected now.
    pub connected: bool,
}

/// Why a catalog cannot be used this round.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("spec.catalogURL {0:?}: the feed needs http://HOST:PORT")]
    Address(String),
    #[error("the catalog's feed is not connected (offers not received yet)")]
    NoOffers,
    #[error("the catalog's feed is disconnected")]
    Disconnected,
    #[error(transparent)]
    Catalog(#[from] catalog_client::Error),
    #[error("the catalog did not answer within {0:?}")]
    Timeout(Duration),
}

impl CatalogError {
    /// The catalog refused the token: credentials, not reachability.
    pub fn is_credentials(&self) -> bool {
        matches!(
            self,
            CatalogError::Catalog(catalog_client::Error::Unauthorized { .. })
        )
    }
}

struct ContractCache {
    token: String,
    session: Arc<tokio::sync::Mutex<Session>>,
    /// The follower of this autoscaler's contracts; stopped with `stop`
    /// when the token changes or the autoscaler goes.
    follower: ContractFollower,
    stop: CancellationToken,
    /// The follower's generation the cached listing was read at (None:
    /// read before the follower answered).
    generation: Option<u64>,
    contracts: Option<Arc<Vec<Contract>>>,
}

impl Drop for ContractCache {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Every catalog the autoscalers use.
pub struct Catalogs {
    http: reqwest::Client,
    metrics: Metrics,
    stop: CancellationToken,
    timeout: Duration,
    /// The contract followers' polls while their stream is unavailable.
    contracts_fallback: Duration,
    feeds: Mutex<HashMap<String, watch::Receiver<Offers>>>,
    notices: mpsc::Sender<String>,
    contracts: Mutex<HashMap<String, ContractCache>>,
}

impl std::fmt::Debug for Catalogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalogs").finish_non_exhaustive()
    }
}

impl Catalogs {
    /// Catalogs whose followers stop with `stop`; each change of a
    /// catalog's offers sends its URL on the returned receiver.
    pub fn new(
        metrics: Metrics,
        timeout: Duration,
        contracts_fallback: Duration,
        stop: CancellationToken,
    ) -> anyhow::Result<(Self, mpsc::Receiver<String>)> {
        let http = Http::client(timeout, USER_AGENT)?;
        let (notices, rx) = mpsc::channel(NOTICES);
        Ok((
            Self {
                http,
                metrics,
                stop,
                timeout,
                contracts_fallback,
                feeds: Mutex::new(HashMap::new()),
                notices,
                contracts: Mutex::new(HashMap::new()),
            },
            rx,
        ))
    }

    /// The offers of the catalog at `url` (its follower started on first
    /// use).
    pub fn offers(&self, url: &str) -> Result<Offers, CatalogError> {
        let mut feeds = self.feeds.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rx) = feeds.get(url) {
            return Ok(rx.borrow().clone());
        }
        let address =
            CatalogAddress::parse(url).map_err(|_| CatalogError::Address(url.to_string()))?;
        let (tx, rx) = watch::channel(Offers::default());
        feeds.insert(url.to_string(), rx.clone());
        let metrics = self.metrics.clone();
        let notices = self.notices.clone();
        let key = url.to_string();
        let on_update = move |update: Update<'_>| {
            match update {
                Update::Connected(up) => {
                    metrics.set_catalog_connected(&key, up);
                    tx.send_modify(|o| o.connected = up);
                }
                Update::Offers(all) => {
                    tx.send_modify(|o| {
                        o.offers = Arc::new(all.clone());
                        o.loaded = true;
                    });
                }
            }
            let _ = notices.try_send(key.clone());
        };
        let span = tracing::info_span!("catalog_feed", url = %address.url());
        tokio::spawn(
            feed::follow(
                address,
                FollowOptions::default(),
                on_update,
                self.stop.clone().cancelled_owned(),
            )
            .instrument(span),
        );
        let offers = rx.borrow().clone();
        Ok(offers)
    }

    /// The offers, if the catalog can be used for buying now.
    pub fn usable_offers(&self, url: &str) -> Result<Offers, CatalogError> {
        let offers = self.offers(url)?;
        if !offers.loaded {
            return Err(CatalogError::NoOffers);
        }
        if !offers.connected {
            return Err(CatalogError::Disconnected);
        }
        Ok(offers)
    }

    /// The session of autoscaler `key` with `token` (a new one when the
    /// token changed).
    pub fn session(
        &self,
        key: &str,
        url: &str,
        token: &str,
    ) -> Result<Arc<tokio::sync::Mutex<Session>>, CatalogError> {
        let mut all = self.contracts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = all.get(key).filter(|c| c.token == token) {
            return Ok(c.session.clone());
        }
        let base = reqwest::Url::parse(url).map_err(|_| CatalogError::Address(url.to_string()))?;
        let new_session = || {
            Session::new(
                Http::new(self.http.clone(), base.clone()),
                Login::Bearer {
                    token: token.to_string(),
                },
            )
        };
        let session = Arc::new(tokio::sync::Mutex::new(new_session()));
        let stop = self.stop.child_token();
        let follower = ContractFollower::start(
            new_session(),
            FollowerOptions::polling_every(self.contracts_fallback),
            stop.clone(),
        );
        tokio::spawn(notify_changes(
            follower.clone(),
            stop.clone(),
            self.notices.clone(),
            url.to_string(),
        ));
        // The one replaced (a new token) stops as it is dropped.
        all.insert(
            key.to_string(),
            ContractCache {
                token: token.to_string(),
                session: session.clone(),
                follower,
                stop,
                generation: None,
                contracts: None,
            },
        );
        Ok(session)
    }

    /// Every contract autoscaler `key`'s token bought (active or not): the
    /// cached listing while the follower's active set is the one it was
    /// read at, else the whole listing read again (and every time until
    /// the follower has answered once).
    pub async fn contracts(
        &self,
        key: &str,
        url: &str,
        token: &str,
    ) -> Result<Arc<Vec<Contract>>, CatalogError> {
        let session = self.session(key, url, token)?;
        let (generation, cached) = {
            let all = self.contracts.lock().unwrap_or_else(|e| e.into_inner());
            let Some(c) = all.get(key) else {
                return Err(CatalogError::Catalog(catalog_client::Error::Unavailable(
                    "the autoscaler was forgotten meanwhile".to_string(),
                )));
            };
            // Read before the listing: a change during it reads again.
            let now = c.follower.current();
            let generation = now.contracts.is_some().then_some(now.generation);
            (
                generation,
                c.contracts
                    .clone()
                    .filter(|_| c.generation == generation && generation.is_some()),
            )
        };
        if let Some(cached) = cached {
            return Ok(cached);
        }
        let timeout = self.timeout;
        let read = async {
            let mut session = session.lock().await;
            let all: Vec<serde_json::Value> =
                session.contracts_as(&ContractFilter::default()).await?;
            // One contract this version cannot read is left out rather
            // than failing the listing.
            Ok::<_, catalog_client::Error>(
                all.into_iter()
                    .filter_map(|v| serde_json::from_value::<Contract>(v).ok())
                    .collect::<Vec<_>>(),
            )
        };
        let contracts = tokio::time::timeout(timeout, read)
            .await
            .map_err(|_| CatalogError::Timeout(timeout))??;
        let contracts = Arc::new(contracts);
        let mut all = self.contracts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = all.get_mut(key).filter(|c| c.token == token) {
            c.generation = generation;
            c.contracts = Some(contracts.clone());
        }
        Ok(contracts)
    }

    /// Forget autoscaler `key` (it was deleted).
    pub fn forget(&self, key: &str) {
        self.contracts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Make the next [`Catalogs::contracts`] of `key` read everything
    /// again (after a purchase or a cancellation of its own).
    pub fn invalidate(&self, key: &str) {
        if let Some(c) = self
            .contracts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(key)
        {
            c.generation = None;
            c.contracts = None;
        }
    }

    /// Bound on one catalog request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// A change of the contracts `follower` keeps starts a round of the
/// autoscalers of catalog `url` (as an offer change does), until `stop`.
async fn notify_changes(
    mut follower: ContractFollower,
    stop: CancellationToken,
    notices: mpsc::Sender<String>,
    url: String,
) {
    let first = follower.current();
    let (mut generation, mut answered) = (first.generation, first.contracts.is_some());
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = follower.changed() => {}
        }
        let now = follower.current();
        if now.generation != generation {
            generation = now.generation;
            // The first answer is what the round that started the follower
            // read itself: no round for it.
            if answered {
                // A full queue already holds a round to come.
                let _ = notices.try_send(url.clone());
            }
            answered = now.contracts.is_some();
        }
    }
}
