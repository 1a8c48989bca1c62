//! The catalog's Prometheus registry, composed of each part's metrics:
//! `catalog_build_info` ([`edge::metrics::root_registry`]), requests by
//! route, method and status and their latency ([`crate::http::HttpMetrics`]),
//! the `/subscribe` feed's ([`crate::feed::FeedMetrics`]), the contract
//! change stream's ([`crate::buying::changes::StreamMetrics`]), and the
//! numbers of offers and providers.
//!
//! `/metrics` is public and a scrape must cost nothing but rendering, so
//! the two numbers are not read from the store when scraped (each scrape
//! was two store counts, with MongoDB two queries): [`follow_counts`] counts
//! them again when offers change and every [`RECOUNT_EVERY`], and a scrape
//! serves the gauges as they were last set.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::broadcast::Receiver;
use tokio_util::sync::CancellationToken;

use crate::buying::changes::StreamMetrics;
use crate::feed::FeedMetrics;
use crate::http::HttpMetrics;
use crate::offers::{OfferChange, OfferStore};
use crate::providers::ProviderStore;

/// How often the offers and providers are counted again with no offer
/// change to prompt it: a provider registering publishes no change, nor
/// does a change another catalog process made to the providers.
pub const RECOUNT_EVERY: Duration = Duration::from_secs(30);

/// At most one count per this, however fast offers change: a burst of
/// writes is counted once after it.
pub const RECOUNT_GAP: Duration = Duration::from_secs(1);

/// The catalog's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    /// Requests, latency, 503 answers (recorded by `http::observe`).
    pub http: HttpMetrics,
    /// Live offers, as last counted by [`follow_counts`].
    pub offers: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// Registered providers, as last counted by [`follow_counts`].
    pub providers: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// The `/subscribe` feed's metrics (`catalog_feed_*`).
    pub feed: FeedMetrics,
    /// `GET /contract-changes`' metrics (`catalog_contract_stream_*`).
    pub contract_stream: StreamMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut root = edge::metrics::root_registry("catalog");
        let registry = root.sub_registry_with_prefix("catalog");
        let http = HttpMetrics::register(registry);
        let offers = Gauge::default();
        registry.register("offers", "Live offers in the store", offers.clone());
        let providers = Gauge::default();
        registry.register(
            "providers",
            "Registered providers in the store",
            providers.clone(),
        );
        let feed = FeedMetrics::register(registry);
        let contract_stream = StreamMetrics::register(registry);
        Metrics {
            registry: root,
            http,
            offers,
            providers,
            feed,
            contract_stream,
        }
    }

    /// The OpenMetrics text exposition: no store is read.
    pub fn render(&self) -> String {
        edge::metrics::openmetrics(&self.registry)
    }

    /// Set the gauges from the stores' counts; a count that fails (the
    /// store unreachable) leaves its gauge at the last value.
    async fn count(&self, offers: &dyn OfferStore, providers: &dyn ProviderStore) {
        match offers.count_offers().await {
            Ok(n) => {
                self.offers.set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            Err(error) => tracing::debug!(%error, "cannot count the offers"),
        }
        match providers.count_providers().await {
            Ok(n) => {
                self.providers.set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            Err(error) => tracing::debug!(%error, "cannot count the providers"),
        }
    }
}

/// Keep `metrics`' offer and provider gauges current until `shutdown`:
/// counted at once, again after every offer change the store publishes
/// (this process's writes and, with MongoDB, other processes'), at most
/// once per `gap`, and every `every` whatever happens.
pub async fn follow_counts(
    metrics: Arc<Metrics>,
    offers: Arc<dyn OfferStore>,
    providers: Arc<dyn ProviderStore>,
    every: Duration,
    gap: Duration,
    shutdown: CancellationToken,
) {
    // Subscribed before the first count, so no change after it is missed.
    let mut changes = Some(offers.changes());
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        metrics.count(&*offers, &*providers).await;
        let counted = tokio::time::Instant::now();
        let closed = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => false,
            closed = changed(&mut changes) => closed,
        };
        if closed {
            changes = None;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(counted + gap) => {}
        }
        // The changes of the gap are all in the next count.
        if let Some(rx) = &mut changes {
            loop {
                match rx.try_recv() {
                    Ok(_) | Err(TryRecvError::Lagged(_)) => continue,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => {
                        changes = None;
                        break;
                    }
                }
            }
        }
    }
}

/// The next offer change; `true` when the channel has closed (the store is
/// gone: from then on the timer alone counts). Never resolves without a
/// channel.
async fn changed(changes: &mut Option<Receiver<OfferChange>>) -> bool {
    match changes {
        Some(rx) => matches!(rx.recv().await, Err(RecvError::Closed)),
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};

    use actix_web::web;
    use async_trait::async_trait;
    use chrono::{DateTime, Utc};
    use tokio::sync::broadcast;

    use super::*;
    use crate::offers::{Offer, OfferDraft, OfferFilter, PutOutcome};
    use crate::ops::Ops;
    use crate::providers::{IdentityKind, ProviderAccount, ProviderInfo, ProviderPeering};
    use crate::store::{Health, StoreError};

    /// A store that only counts, and counts every read it is asked for:
    /// anything else is a read no test here expects.
    struct Counting {
        offers: AtomicU64,
        providers: AtomicU64,
        reads: AtomicU64,
        tx: broadcast::Sender<OfferChange>,
    }

    impl Counting {
        fn new(offers: u64, providers: u64) -> Arc<Self> {
            Arc::new(Counting {
                offers: AtomicU64::new(offers),
                providers: AtomicU64::new(providers),
                reads: AtomicU64::new(0),
                tx: broadcast::channel(16).0,
            })
        }

        fn reads(&self) -> u64 {
            self.reads.load(Ordering::SeqCst)
        }
    }

    #[async_trait]
    impl Health for Counting {
        fn kind(&self) -> &'static str {
            "counting"
        }
        async fn ping(&self) -> Result<(), StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[async_trait]
    impl OfferStore for Counting {
        async fn list_offers_page(
            &self,
            _: &OfferFilter,
            _: Option<&str>,
            _: usize,
        ) -> Result<Vec<Offer>, StoreError> {
            unreachable!("offers listed")
        }
        async fn get_offer(&self, _: &str) -> Result<Option<Offer>, StoreError> {
            unreachable!("an offer read")
        }
        async fn put_offer(&self, _: OfferDraft, _: Option<u64>) -> Result<PutOutcome, StoreError> {
            unreachable!("an offer written")
        }
        async fn delete_offer(&self, _: &str, _: &str) -> Result<Offer, StoreError> {
            unreachable!("an offer deleted")
        }
        async fn count_offers(&self) -> Result<u64, StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(self.offers.load(Ordering::SeqCst))
        }
        fn changes(&self) -> broadcast::Receiver<OfferChange> {
            self.tx.subscribe()
        }
    }

    #[async_trait]
    impl ProviderStore for Counting {
        async fn get_provider(&self, _: &str) -> Result<Option<ProviderAccount>, StoreError> {
            unreachable!("a provider read")
        }
        async fn claim_provider(
            &self,
            _: ProviderAccount,
        ) -> Result<(ProviderAccount, bool), StoreError> {
            unreachable!("a provider claimed")
        }
        async fn claim_identity(
            &self,
            _: &str,
            _: IdentityKind,
        ) -> Result<IdentityKind, StoreError> {
            unreachable!("an identity claimed")
        }
        async fn rotate_provider(&self, _: &str, _: ProviderAccount) -> Result<bool, StoreError> {
            unreachable!("a provider rotated")
        }
        async fn list_providers(&self) -> Result<Vec<ProviderInfo>, StoreError> {
            unreachable!("providers listed")
        }
        async fn count_providers(&self) -> Result<u64, StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(self.providers.load(Ordering::SeqCst))
        }
        async fn put_peering_secret(&self, _: &str, _: Vec<u8>) -> Result<(), StoreError> {
            unreachable!("a peering secret written")
        }
        async fn get_peering_secret(&self, _: &str) -> Result<Option<Vec<u8>>, StoreError> {
            unreachable!("a peering secret read")
        }
        async fn set_provider_disabled(&self, _: &str, _: bool) -> Result<(), StoreError> {
            unreachable!("a provider disabled")
        }
        async fn disabled_providers(&self) -> Result<BTreeMap<String, DateTime<Utc>>, StoreError> {
            unreachable!("disabled providers read")
        }
        async fn put_provider_peering(
            &self,
            _: &str,
            _: ProviderPeering,
        ) -> Result<(), StoreError> {
            unreachable!("a provider's peering written")
        }
        async fn get_provider_peering(
            &self,
            _: &str,
        ) -> Result<Option<ProviderPeering>, StoreError> {
            unreachable!("a provider's peering read")
        }
    }

    /// Poll `done` for up to 5 s.
    async fn eventually(what: &str, done: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(tokio::time::Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `/metrics` as the route serves it, with `accept`.
    async fn scrape(ops: &web::Data<Ops>, accept: Option<&str>) -> String {
        let mut request = actix_web::test::TestRequest::get().uri("/metrics");
        if let Some(accept) = accept {
            request = request.insert_header(("accept", accept));
        }
        let response = crate::ops::metrics(ops.clone(), request.to_http_request()).await;
        assert_eq!(response.status(), 200);
        let body = actix_web::body::to_bytes(response.into_body())
            .await
            .unwrap_or_else(|_| panic!("a metrics body"));
        String::from_utf8(body.to_vec()).unwrap()
    }

    /// Issue 46: each scrape of the public `/metrics` counted the offers
    /// and the providers in the store. Now a scrape reads nothing; the
    /// counts follow the offers' changes instead.
    #[tokio::test]
    async fn a_scrape_reads_no_store_and_the_counts_follow_changes() {
        let store = Counting::new(2, 1);
        let metrics = Arc::new(Metrics::new());
        let shutdown = CancellationToken::new();
        let follower = tokio::spawn(follow_counts(
            metrics.clone(),
            store.clone(),
            store.clone(),
            Duration::from_secs(3600),
            Duration::from_millis(10),
            shutdown.clone(),
        ));
        eventually("the first count", || store.reads() == 2).await;
        let ops = web::Data::new(Ops {
            health: store.clone(),
            metrics: metrics.clone(),
            starting: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        });
        for accept in [None, Some("application/openmetrics-text; version=1.0.0")] {
            for _ in 0..5 {
                let text = scrape(&ops, accept).await;
                assert!(text.contains("\ncatalog_offers 2\n"), "{text}");
                assert!(text.contains("\ncatalog_providers 1\n"), "{text}");
                assert!(text.starts_with("# HELP catalog_build_info "), "{text}");
            }
        }
        assert_eq!(store.reads(), 2, "a scrape read the store");

        // A write is published as a change: counted again, once for a burst.
        store.offers.store(3, Ordering::SeqCst);
        store.providers.store(2, Ordering::SeqCst);
        for _ in 0..3 {
            store.tx.send(OfferChange::Resync).unwrap();
        }
        eventually("the count after the change", || {
            metrics.offers.get() == 3 && metrics.providers.get() == 2
        })
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(store.reads() <= 6, "{} reads for one burst", store.reads());
        shutdown.cancel();
        follower.await.unwrap();
    }
}
