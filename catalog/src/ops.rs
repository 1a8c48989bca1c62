//! Operability endpoints: liveness, readiness and Prometheus metrics.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use std::sync::Arc;

use crate::http::{ApiError, ErrorBody};
use crate::metrics::Metrics;
use crate::store::Health;

/// What the operability endpoints read (`web::Data<Ops>`). No offer or
/// provider store: `/metrics` reads none (`crate::metrics`).
#[derive(Clone)]
pub struct Ops {
    pub health: Arc<dyn Health>,
    pub metrics: Arc<Metrics>,
    /// Set while start-up work after the port is bound still runs (the
    /// `--demo` seeding): `/readyz` answers 503 until it is done.
    pub starting: Arc<std::sync::atomic::AtomicBool>,
}

/// Liveness: the process serves HTTP.
#[utoipa::path(
    get, path = "/healthz", tag = "ops", operation_id = "healthz",
    extensions(("x-roles" = json!(["anyone"]))),
    responses((status = 200, description = "Alive: `{\"status\": \"ok\"}`", body = crate::http::schemas::Health))
)]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// Readiness: the store answers.
#[utoipa::path(
    get, path = "/readyz", tag = "ops", operation_id = "readyz",
    extensions(("x-roles" = json!(["anyone"]))),
    responses(
        (status = 200, description = "Ready: `{\"status\": \"ready\", \"store\": <kind>}`", body = crate::http::schemas::Health),
        (status = 503, description = "The store is unreachable or not following changes yet, or `--demo` is still seeding", body = ErrorBody),
    )
)]
pub async fn readyz(state: web::Data<Ops>) -> Result<HttpResponse, ApiError> {
    if state.starting.load(std::sync::atomic::Ordering::Acquire) {
        return Err(ApiError::Unavailable(
            "starting: the demo provider and its offers are being created".into(),
        ));
    }
    // The store bounds its own ping (MongoDB: min(1s, --mongodb-timeout)),
    // so a hung database reads "not ready" well within a probe's timeout.
    state
        .health
        .ping()
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    if !state.health.following_changes() {
        return Err(ApiError::Unavailable(
            "the store is reachable but its change streams are not open yet: other processes' changes would be missed".into(),
        ));
    }
    Ok(HttpResponse::Ok().json(json!({ "status": "ready", "store": state.health.kind() })))
}

/// Prometheus metrics: OpenMetrics text when the scraper asks for it (as
/// Prometheus does), else the Prometheus text format (curl, promtool).
/// Rendered from the gauges and counters as they are: a scrape reads no
/// store.
#[utoipa::path(
    get, path = "/metrics", tag = "ops", operation_id = "metrics",
    extensions(("x-roles" = json!(["anyone"]))),
    responses((status = 200, description = "OpenMetrics text if `Accept` asks for `application/openmetrics-text`, else the Prometheus text format 0.0.4",
        content((String = "application/openmetrics-text"), (String = "text/plain"))))
)]
pub async fn metrics(state: web::Data<Ops>, request: HttpRequest) -> HttpResponse {
    let accept = request
        .headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let (content_type, body) = edge::metrics::exposition(state.metrics.render(), accept);
    HttpResponse::Ok().content_type(content_type).body(body)
}
