//! The catalog's Prometheus registry, composed of each part's metrics:
//! requests by route, method and status and their latency
//! ([`crate::http::HttpMetrics`]), the `/subscribe` feed's
//! ([`crate::feed::FeedMetrics`]), and the numbers of offers and providers
//! (read from the store at scrape time).

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::feed::FeedMetrics;
use crate::http::HttpMetrics;

/// The catalog's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    /// Requests, latency, 503 answers (recorded by `http::observe`).
    pub http: HttpMetrics,
    pub offers: Gauge<i64, std::sync::atomic::AtomicI64>,
    pub providers: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// The `/subscribe` feed's metrics (`catalog_feed_*`).
    pub feed: FeedMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("catalog");
        let http = HttpMetrics::register(&mut registry);
        let offers = Gauge::default();
        registry.register("offers", "Live offers in the store", offers.clone());
        let providers = Gauge::default();
        registry.register(
            "providers",
            "Registered providers in the store",
            providers.clone(),
        );
        let feed = FeedMetrics::register(&mut registry);
        Metrics {
            registry,
            http,
            offers,
            providers,
            feed,
        }
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}
