//! `PATCH /v2/service_instances/{id}`: updating a service instance.
//!
//! A purchase is a plan of an offer bought as it was, so the catalog
//! declares `plan_updateable: false` and changes neither the plan nor the
//! parameters of an instance. The spec still lets platforms send an update
//! (a new `context` after a namespace rename, or a re-send of the current
//! values), so this answers, as v2.17 asks: 200 `{}` when nothing would
//! change, 422 naming what cannot change, `ConcurrencyError` while an
//! operation runs, `MaintenanceInfoConflict` for a `maintenance_info` (the
//! catalog declares none; a malformed one is a 400, see
//! [`super::maintenance`]). A service plan that declares
//! `schemas.service_instance.update` has `parameters` checked against it
//! first (400 naming the field). Nothing is ever written.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::OsbError;
use super::guard::guard;
use super::instances::{busy, check_instance_parameters, settle};
use super::model::answered_parameters;
use super::request::{check_id, object_field, parse, read_body, required_field, Query};
use super::Osb;
use crate::offers::service::Parameters;
use actix_web::http::StatusCode;

/// An update request (unknown fields are ignored, as the spec asks).
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct UpdateRequest {
    /// The instance's service id.
    #[serde(default)]
    #[schema(required = true, value_type = crate::http::schemas::OsbId)]
    service_id: Option<String>,
    /// Plans cannot change: absent, null or the instance's plan id.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    plan_id: Option<String>,
    /// Parameters cannot change: absent, null or the current ones.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    parameters: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    context: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    previous_values: Option<Value>,
    /// This broker declares none: any object is a `MaintenanceInfoConflict`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    maintenance_info: Option<Value>,
}

/// Update an instance. Plans and parameters cannot change, so this answers
/// 200 when nothing would change and 422 otherwise; nothing is written.
#[utoipa::path(
    patch, path = "/v2/service_instances/{instance_id}", tag = "osb", operation_id = "osbUpdate",
    params(
        super::responses::OsbInstancePath,
        ("accepts_incomplete" = Option<bool>, Query, description = "Accepted; updates always answer synchronously"),
        super::responses::OsbHeaders,
    ),
    request_body = UpdateRequest,
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "Nothing to change", body = super::responses::OsbEmpty),
        super::responses::OsbMalformed,
        super::responses::OsbNoRole,
        (status = 404, description = "No such instance (or another owner's)", body = super::responses::OsbErrorBody),
        (status = 422, description = "Not provisioned, a change that cannot be made, `ConcurrencyError` or `MaintenanceInfoConflict`", body = super::responses::OsbErrorBody),
        super::responses::OsbCommonResponses,
    )
)]
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
    // A malformed maintenance_info is a bad request (400) whatever else;
    // a well-formed one conflicts (422) once the instance is known.
    let maintenance = match super::maintenance::check(&r.maintenance_info) {
        Err(e) if e.status == StatusCode::BAD_REQUEST => return Err(e),
        other => other,
    };

    let inst = state
        .store
        .osb_get_instance(&id)
        .await?
        .filter(|i| platform.may_act_on(&i.owner))
        .ok_or_else(|| OsbError::not_found(format!("no service instance {id}")))?;
    let inst = settle(&state, inst).await?;
    if let Some(op) = inst.running() {
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
    maintenance?;
    if let Some(plan_id) = r.plan_id.filter(|p| *p != inst.plan_id) {
        return Err(OsbError::unprocessable(format!(
            "plan_id: plans cannot be changed (plan_updateable is false); instance {id} stays on plan {}, not {plan_id}: provision a new instance instead",
            inst.plan_id
        )));
    }
    if let Some(parameters) = r.parameters {
        // A service plan's update schema says what an update may carry:
        // parameters it refuses are a bad request (400 naming the field)
        // before anything else is said about them.
        check_instance_parameters(&state, &inst, Parameters::InstanceUpdate, Some(&parameters))
            .await?;
        if parameters != answered_parameters(inst.parameters.as_deref()) {
            return Err(OsbError::unprocessable(
                "parameters: the parameters of a service instance cannot be changed",
            ));
        }
    }
    tracing::info!(instance = %id, owner = %platform.owner, "service instance update: nothing to change");
    Ok(HttpResponse::Ok().json(json!({})))
}
