//! Prometheus metrics: requests by route, method and status, request
//! latency, and the numbers of offers and providers (read from the store at
//! scrape time).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{text::encode, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: String,
    pub method: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
    pub method: String,
}

/// The catalog's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub latency: Family<RouteLabels, Histogram>,
    pub offers: Gauge<i64, std::sync::atomic::AtomicI64>,
    pub providers: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// Store calls that failed because the database was unreachable.
    pub store_unavailable: Counter<u64, AtomicU64>,
    /// The `/subscribe` feed's metrics (`catalog_feed_*`).
    pub feed: crate::feed::FeedMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("catalog");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by route, method and status",
            requests.clone(),
        );
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            // 0.5 ms .. ~16 s
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency by route",
            latency.clone(),
        );
        let offers = Gauge::default();
        registry.register("offers", "Live offers in the store", offers.clone());
        let providers = Gauge::default();
        registry.register(
            "providers",
            "Registered providers in the store",
            providers.clone(),
        );
        let store_unavailable = Counter::default();
        registry.register(
            "store_unavailable",
            "Requests refused because the store was unreachable",
            store_unavailable.clone(),
        );
        let feed = crate::feed::FeedMetrics::register(&mut registry);
        Metrics {
            feed,
            registry,
            requests,
            latency,
            offers,
            providers,
            store_unavailable,
        }
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}
