//! `PATCH /v2/service_instances/{id}`: updating a service instance.
//!
//! A purchase is a plan of an offer bought as it was, so the catalog
//! declares `plan_updateable: false` and changes neither the plan nor the
//! parameters of an instance. The spec still lets platforms send an update
//! (a new `context` after a namespace rename, or a re-send of the current
//! values), so this answers, as v2.17 asks: 200 `{}` when nothing would
//! change, 422 naming what cannot change, `ConcurrencyError` while an
//! operation runs, `MaintenanceInfoConflict` for a `maintenance_info` (the
//! catalog declares none). Nothing is ever written.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::OsbError;
use super::guard::guard;
use super::instances::{
    busy, check_id, object_field, parse, read_body, required_field, settle, Query,
};
use super::model::OperationState;
use super::Osb;
use actix_web::http::StatusCode;

#[derive(Deserialize)]
struct UpdateRequest {
    #[serde(default)]
    service_id: Option<String>,
    #[serde(default)]
    plan_id: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    previous_values: Option<Value>,
    #[serde(default)]
    maintenance_info: Option<Value>,
}

pub async fn update(
    state: web::Data<Osb>,
    req: HttpRequest,
    payload: web::Payload,
    id: web::Path<String>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    check_id("instance_id", &id)?;
    // Validated for its form; an update is always answered synchronously.
    Query::parse(&req)?.accepts_incomplete()?;
    let body = read_body(&state, &req, payload).await?;
    let r: UpdateRequest = parse(&body)?;
    let service_id = required_field("service_id", r.service_id)?;
    object_field("parameters", &r.parameters)?;
    object_field("context", &r.context)?;
    object_field("previous_values", &r.previous_values)?;
    object_field("maintenance_info", &r.maintenance_info)?;

    let inst = state
        .store
        .osb_get_instance(&id)
        .await?
        .filter(|i| platform.may_act_on(&i.owner))
        .ok_or_else(|| OsbError::not_found(format!("no service instance {id}")))?;
    let inst = settle(&state, inst).await?;
    if let Some(op) = inst
        .operation
        .as_ref()
        .filter(|op| op.state == OperationState::InProgress)
    {
        return Err(busy(op));
    }
    if !inst.provisioned {
        return Err(OsbError::unprocessable(format!(
            "service instance {id} is not provisioned"
        )));
    }
    if service_id != inst.service_id {
        return Err(OsbError::bad_request(format!(
            "service_id: service instance {id} is of service {}",
            inst.service_id
        )));
    }
    if r.maintenance_info.is_some() {
        return Err(OsbError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("MaintenanceInfoConflict"),
            "this broker's plans declare no maintenance_info",
        ));
    }
    if let Some(plan_id) = r.plan_id.filter(|p| *p != inst.plan_id) {
        return Err(OsbError::unprocessable(format!(
            "plan_id: plans cannot be changed (plan_updateable is false); instance {id} stays on plan {}, not {plan_id}: provision a new instance instead",
            inst.plan_id
        )));
    }
    if let Some(parameters) = r.parameters {
        let current: Value = inst
            .parameters
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_else(|| json!({}));
        if parameters != current {
            return Err(OsbError::unprocessable(
                "parameters: the parameters of a service instance cannot be changed",
            ));
        }
    }
    tracing::info!(instance = %id, owner = %platform.owner, "service instance update: nothing to change");
    Ok(HttpResponse::Ok().json(json!({})))
}
