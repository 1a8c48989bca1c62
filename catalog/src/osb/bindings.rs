//! Service bindings: the release of the provider's Liqo peering credentials
//! (`clusterID`, `clusterName`, `authURL`, `token`) as binding
//! `credentials`. Bindings are synchronous (201/200); unbinding forgets the
//! binding (the provider's token itself cannot be revoked by the catalog).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::OsbError;
use super::guard::guard;
use super::instances::{
    bindable, check_id, object_field, parse, read_body, request_digest, required_field, Query,
};
use super::model::{OsbBinding, OsbInstance};
use super::Osb;
use crate::buying::model::ReservationState;
use crate::buying::service;

#[derive(Deserialize)]
struct BindRequest {
    #[serde(default)]
    service_id: Option<String>,
    #[serde(default)]
    plan_id: Option<String>,
    #[serde(default)]
    app_guid: Option<String>,
    #[serde(default)]
    bind_resource: Option<Value>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    parameters: Option<Value>,
}

/// The credentials of `inst`'s purchase; 422 if it is no longer active.
async fn credentials(state: &Osb, inst: &OsbInstance) -> Result<Value, OsbError> {
    let rid = inst
        .reservation_id
        .as_deref()
        .ok_or_else(|| OsbError::internal(format!("instance {} has no purchase", inst.id)))?;
    let purchase = state
        .buying
        .store
        .get_reservation(rid)
        .await?
        .ok_or_else(|| {
            OsbError::internal(format!("purchase {rid} of instance {} is missing", inst.id))
        })?;
    if purchase.state != ReservationState::Purchased {
        return Err(OsbError::new(
            actix_web::http::StatusCode::UNPROCESSABLE_ENTITY,
            Some("PurchaseEnded"),
            format!(
                "the purchase behind service instance {} is {}",
                inst.id,
                purchase.state.as_str()
            ),
        ));
    }
    let c = service::credentials(&state.buying, &purchase.cluster_id).await?;
    Ok(json!({
        "clusterID": c.cluster_id,
        "clusterName": c.cluster_name,
        "authURL": c.auth_url,
        "token": c.token,
    }))
}

fn with_credentials(status: actix_web::http::StatusCode, credentials: Value) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header(("Cache-Control", "no-store"))
        .json(json!({ "credentials": credentials }))
}

pub async fn bind(
    state: web::Data<Osb>,
    req: HttpRequest,
    payload: web::Payload,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    let (instance_id, binding_id) = path.into_inner();
    check_id("binding_id", &binding_id)?;
    Query::parse(&req)?.accepts_incomplete()?;
    let body = read_body(&state, &req, payload).await?;
    let r: BindRequest = parse(&body)?;
    let service_id = required_field("service_id", r.service_id)?;
    let plan_id = required_field("plan_id", r.plan_id)?;
    if r.app_guid.as_deref() == Some("") {
        return Err(OsbError::bad_request(
            "app_guid: must not be empty when present",
        ));
    }
    object_field("bind_resource", &r.bind_resource)?;
    object_field("context", &r.context)?;
    object_field("parameters", &r.parameters)?;
    let inst = bindable(&state, &platform, &instance_id).await?;
    if inst.service_id != service_id || inst.plan_id != plan_id {
        return Err(OsbError::bad_request(format!(
            "service_id/plan_id: service instance {instance_id} is of service {} plan {}",
            inst.service_id, inst.plan_id
        )));
    }
    let digest = request_digest(&json!({
        "instance": instance_id, "service_id": service_id, "plan_id": plan_id,
        "app_guid": r.app_guid, "bind_resource": r.bind_resource, "parameters": r.parameters,
    }));
    let credentials = credentials(&state, &inst).await?;
    let binding = OsbBinding {
        id: binding_id.clone(),
        instance_id: instance_id.clone(),
        owner: inst.owner.clone(),
        request_digest: digest.clone(),
        parameters: r.parameters.as_ref().map(Value::to_string),
        created_at: crate::storage::now(),
    };
    if state.store.osb_insert_binding(&binding).await? {
        tracing::info!(instance = %instance_id, binding = %binding_id, "bound: peering credentials released");
        return Ok(with_credentials(
            actix_web::http::StatusCode::CREATED,
            credentials,
        ));
    }
    match state.store.osb_get_binding(&binding_id).await? {
        Some(existing)
            if existing.instance_id == instance_id && existing.request_digest == digest =>
        {
            Ok(with_credentials(
                actix_web::http::StatusCode::OK,
                credentials,
            ))
        }
        _ => Err(OsbError::conflict(format!(
            "service binding {binding_id} already exists with different parameters"
        ))),
    }
}

async fn binding_of(
    state: &Osb,
    instance_id: &str,
    binding_id: &str,
    owner_ok: impl Fn(&str) -> bool,
) -> Result<Option<OsbBinding>, OsbError> {
    Ok(state
        .store
        .osb_get_binding(binding_id)
        .await?
        .filter(|b| b.instance_id == instance_id && owner_ok(&b.owner)))
}

pub async fn fetch(
    state: web::Data<Osb>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    let (instance_id, binding_id) = path.into_inner();
    let binding = binding_of(&state, &instance_id, &binding_id, |o| {
        platform.may_act_on(o)
    })
    .await?
    .ok_or_else(|| OsbError::not_found(format!("no service binding {binding_id}")))?;
    let inst = bindable(&state, &platform, &instance_id).await?;
    let credentials = credentials(&state, &inst).await?;
    let parameters: Value = binding
        .parameters
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_else(|| json!({}));
    Ok(HttpResponse::Ok()
        .insert_header(("Cache-Control", "no-store"))
        .json(json!({ "credentials": credentials, "parameters": parameters })))
}

pub async fn unbind(
    state: web::Data<Osb>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    let (instance_id, binding_id) = path.into_inner();
    let query = Query::parse(&req)?;
    query.required("service_id")?;
    query.required("plan_id")?;
    query.accepts_incomplete()?;
    let Some(binding) = state.store.osb_get_binding(&binding_id).await? else {
        return Err(OsbError::gone(format!("no service binding {binding_id}")));
    };
    if binding.instance_id != instance_id {
        return Err(OsbError::gone(format!(
            "no service binding {binding_id} on service instance {instance_id}"
        )));
    }
    if !platform.may_act_on(&binding.owner) {
        return Err(OsbError::forbidden(format!(
            "service binding {binding_id} belongs to someone else"
        )));
    }
    if !state.store.osb_delete_binding(&binding_id).await? {
        return Err(OsbError::gone(format!("no service binding {binding_id}")));
    }
    tracing::info!(instance = %instance_id, binding = %binding_id, "unbound");
    Ok(HttpResponse::Ok().json(json!({})))
}

pub async fn last_operation(
    state: web::Data<Osb>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    let (instance_id, binding_id) = path.into_inner();
    // Bindings complete synchronously: one that exists has succeeded.
    match binding_of(&state, &instance_id, &binding_id, |o| {
        platform.may_act_on(o)
    })
    .await?
    {
        Some(_) => Ok(HttpResponse::Ok().json(json!({ "state": "succeeded" }))),
        None => Err(OsbError::gone(format!("no service binding {binding_id}"))),
    }
}
