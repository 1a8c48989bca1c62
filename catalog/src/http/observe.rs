//! Per-request observation: a tracing span, a completion log line, and the
//! request count and latency metrics by route pattern (never by raw path, so
//! offer ids do not explode the label set).

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, Error};
use tracing::Instrument;

use crate::metrics::{RequestLabels, RouteLabels};
use crate::AppState;

/// `actix_web::middleware::from_fn(observe)`.
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let metrics = req
        .app_data::<web::Data<AppState>>()
        .map(|s| s.metrics.clone());
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
