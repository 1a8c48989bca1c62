//! Per-request observation: a tracing span, a completion log line, and the
//! request count and latency metrics by route pattern (never by raw path, so
//! offer ids do not explode the label set).

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, Error};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tracing::Instrument;

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

/// The request metrics [`observe`] records (`web::Data<HttpMetrics>` on
/// the app).
#[derive(Clone)]
pub struct HttpMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub latency: Family<RouteLabels, Histogram>,
    /// Requests answered 503 (the store was unreachable, or a limit).
    pub store_unavailable: Counter<u64, AtomicU64>,
}

impl HttpMetrics {
    /// Create the metrics and register them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
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
        let store_unavailable = Counter::default();
        registry.register(
            "store_unavailable",
            "Requests refused because the store was unreachable",
            store_unavailable.clone(),
        );
        HttpMetrics {
            requests,
            latency,
            store_unavailable,
        }
    }
}

/// `actix_web::middleware::from_fn(observe)`.
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let metrics = req
        .app_data::<web::Data<HttpMetrics>>()
        .map(|m| m.clone().into_inner());
    let method = req.method().to_string();
    let span = tracing::info_span!(
        "request",
        method = %method,
        path = %req.path(),
        cluster_id = tracing::field::Empty,
    );
    let result = next.call(req).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let (status, route) = match &result {
        Ok(res) => (
            res.status().as_u16(),
            res.request()
                .match_pattern()
                .unwrap_or_else(|| "static".to_string()),
        ),
        Err(e) => (
            e.as_response_error().status_code().as_u16(),
            "unmatched".to_string(),
        ),
    };
    span.in_scope(|| {
        tracing::info!(status, route = %route, latency_ms = elapsed.as_secs_f64() * 1000.0, "request done");
    });
    if let Some(m) = metrics {
        m.requests
            .get_or_create(&RequestLabels {
                route: route.clone(),
                method: method.clone(),
                status,
            })
            .inc();
        m.latency
            .get_or_create(&RouteLabels { route, method })
            .observe(elapsed.as_secs_f64());
        if status == 503 {
            m.store_unavailable.inc();
        }
    }
    result
}
