//! Operability endpoints: liveness, readiness, Prometheus metrics, OpenAPI.

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::{ApiError, ErrorBody};
use crate::AppState;

/// Liveness: the process serves HTTP.
#[utoipa::path(
    get, path = "/healthz", tag = "ops", operation_id = "healthz",
    extensions(("x-roles" = json!(["anyone"]))),
    responses((status = 200, description = "Alive: `{\"status\": \"ok\"}`", body = crate::api::openapi::Health))
)]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// Readiness: the store answers.
#[utoipa::path(
    get, path = "/readyz", tag = "ops", operation_id = "readyz",
    extensions(("x-roles" = json!(["anyone"]))),
    responses(
        (status = 200, description = "Ready: `{\"status\": \"ready\", \"store\": <kind>}`", body = crate::api::openapi::Health),
        (status = 503, description = "The store is unreachable or not following changes yet", body = ErrorBody),
    )
)]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state
        .store
        .ping()
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    if !state.store.following_changes() {
        return Err(ApiError::Unavailable(
            "the store is reachable but its change streams are not open yet: other processes' changes would be missed".into(),
        ));
    }
    Ok(HttpResponse::Ok().json(json!({ "status": "ready", "store": state.store.kind() })))
}

/// Prometheus metrics (OpenMetrics text).
#[utoipa::path(
    get, path = "/metrics", tag = "ops", operation_id = "metrics",
    extensions(("x-roles" = json!(["anyone"]))),
    responses((status = 200, description = "OpenMetrics text", body = String,
        content_type = "application/openmetrics-text"))
)]
pub async fn metrics(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    // Counts come from the store at scrape time; if it is unreachable the
    // gauges keep their last values.
    if let Ok(stats) = state.store.stats().await {
        state
            .metrics
            .offers
            .set(i64::try_from(stats.offers).unwrap_or(i64::MAX));
        state
            .metrics
            .providers
            .set(i64::try_from(stats.providers).unwrap_or(i64::MAX));
    }
    let text = state
        .metrics
        .render()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(text))
}

/// This API's OpenAPI 3 document, generated from the code.
#[utoipa::path(
    get, path = "/openapi.json", tag = "ops", operation_id = "openapi",
    extensions(("x-roles" = json!(["anyone"]))),
    responses((status = 200, description = "This OpenAPI 3.1 document", body = Object))
)]
pub async fn openapi() -> Result<HttpResponse, ApiError> {
    let doc = super::openapi::document().map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(doc))
}
