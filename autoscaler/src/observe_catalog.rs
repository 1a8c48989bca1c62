//! What the autoscaler reads from its catalogs: the offers, followed live
//! on each catalog's WebSocket feed (`catalog_client::feed::follow`, one
//! follower per catalog URL however many autoscalers use it), and each
//! autoscaler's contracts, read with its own bearer token through a
//! `catalog_client::Session` — a conditional `GET /contracts?active=true`
//! every round (a 304 costs nothing), and the whole listing, ended
//! contracts included, only when the active set changed, since
//! month-to-date spend counts contracts cancelled earlier this month.
//!
//! When a feed drops, the last offers are kept (marked disconnected) and
//! the follower reconnects with backoff; the controller buys nothing while
//! a catalog is unreachable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use catalog_client::contracts::Listing;
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
    etag: Option<String>,
    contracts: Option<Arc<Vec<Contract>>>,
}

/// Every catalog the autoscalers use.
pub struct Catalogs {
    http: reqwest::Client,
    metrics: Metrics,
    stop: CancellationToken,
    timeout: Duration,
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
        let session = Arc::new(tokio::sync::Mutex::new(Session::new(
            Http::new(self.http.clone(), base),
            Login::Bearer {
                token: token.to_string(),
            },
        )));
        all.insert(
            key.to_string(),
            ContractCache {
                token: token.to_string(),
                session: session.clone(),
                etag: None,
                contracts: None,
            },
        );
        Ok(session)
    }

    /// Every contract autoscaler `key`'s token bought (active or not): the
    /// cached listing while `GET /contracts?active=true` says 304, else
    /// the whole listing read again.
    pub async fn contracts(
        &self,
        key: &str,
        url: &str,
        token: &str,
    ) -> Result<Arc<Vec<Contract>>, CatalogError> {
        let session = self.session(key, url, token)?;
        let (etag, cached) = {
            let all = self.contracts.lock().unwrap_or_else(|e| e.into_inner());
            all.get(key)
                .map(|c| (c.etag.clone(), c.contracts.clone()))
                .unwrap_or_default()
        };
        let timeout = self.timeout;
        let read = async {
            let mut session = session.lock().await;
            let etag = if cached.is_some() { etag } else { None };
            match session
                .active_contracts_as::<serde_json::Value>(etag.as_deref())
                .await?
            {
                Listing::NotModified => Ok::<_, catalog_client::Error>(None),
                Listing::Contracts { etag, .. } => {
                    let all: Vec<serde_json::Value> =
                        session.contracts_as(&ContractFilter::default()).await?;
                    // One contract this version cannot read is left out
                    // rather than failing the listing.
                    let contracts = all
                        .into_iter()
                        .filter_map(|v| serde_json::from_value::<Contract>(v).ok())
                        .collect::<Vec<_>>();
                    Ok(Some((etag, contracts)))
                }
            }
        };
        let fresh = tokio::time::timeout(timeout, read)
            .await
            .map_err(|_| CatalogError::Timeout(timeout))??;
        match fresh {
            None => Ok(cached.unwrap_or_default()),
            Some((etag, contracts)) => {
                let contracts = Arc::new(contracts);
                let mut all = self.contracts.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(c) = all.get_mut(key) {
                    c.etag = etag;
                    c.contracts = Some(contracts.clone());
                }
                Ok(contracts)
            }
        }
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
            c.etag = None;
            c.contracts = None;
        }
    }

    /// Bound on one catalog request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}
