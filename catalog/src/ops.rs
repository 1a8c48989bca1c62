//! Operability endpoints: liveness, readiness and Prometheus metrics.

use actix_web::{web, HttpResponse};
use serde_json::json;

use std::sync::Arc;

use crate::http::{ApiError, ErrorBody};
use crate::metrics::Metrics;
use crate::offers::OfferStore;
use crate::providers::ProviderStore;
use crate::store::Health;

/// What the operability endpoints read (`web::Data<Ops>`).
#[derive(Clone)]
pub struct Ops {
    pub health: Arc<dyn Health>,
    pub offers: Arc<dyn OfferStore>,
    pub providers: Arc<dyn ProviderStore>,
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

/// Prometheus metrics (OpenMetrics text).
#[utoipa::path(
    get, path = "/metrics", tag = "ops", operation_id = "metrics",
    extensions(("x-roles" = json!(["anyone"]))),
    responses((status = 200, description = "OpenMetrics text", body = String,
        content_type = "application/openmetrics-text"))
)]
pub async fn metrics(state: web::Data<Ops>) -> Result<HttpResponse, ApiError> {
    // Counts come from the store at scrape time; if it is unreachable the
    // gauges keep their last values.
    if let Ok(offers) = state.offers.count_offers().await {
        state
            .metrics
            .offers
            .set(i64::try_from(offers).unwrap_or(i64::MAX));
    }
    if let Ok(providers) = state.providers.count_providers().await {
        state
            .metrics
            .providers
            .set(i64::try_from(providers).unwrap_or(i64::MAX));
    }
    let text = state
        .metrics
        .render()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(text))
}
