//! Service bindings. Of a capacity offer: the release of the provider's
//! Liqo peering credentials (`clusterID`, `clusterName`, `authURL`,
//! `token`) as binding `credentials`, synchronous (201/200); unbinding
//! forgets the binding (the provider's token itself cannot be revoked by
//! the catalog). Of a service offer: asynchronous, made by the provider
//! ([`super::service_bindings`]).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::OsbError;
use super::guard::guard;
use super::instances::{bindable, check_plan};
use super::model::{answered_parameters, stored_parameters, OsbBinding, OsbInstance};
use super::request::{
    check_id, object_field, parse, read_body, request_digest, required_field, Query,
};
use super::service_bindings::{self, with_credentials};
use super::Osb;
use crate::buying::model::ReservationState;
use crate::buying::service;

/// A binding request (unknown fields are ignored, as the spec asks).
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct BindRequest {
    /// The instance's service id.
    #[serde(default)]
    #[schema(required = true, value_type = crate::http::schemas::OsbId)]
    service_id: Option<String>,
    /// The instance's plan id.
    #[serde(default)]
    #[schema(required = true, value_type = crate::http::schemas::OsbId)]
    plan_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1)]
    app_guid: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    bind_resource: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    context: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
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

/// Bind: release the provider's peering credentials of the instance's
/// purchase (synchronous), or, for a service offer's instance, record the
/// binding for its provider (asynchronous, 202).
#[utoipa::path(
    put, path = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}", tag = "osb", operation_id = "osbBind",
    params(
        super::responses::OsbBindingPath,
        ("accepts_incomplete" = Option<bool>, Query, description = "Required (`true`) to bind a service offer's instance, which its provider binds asynchronously; capacity bindings are synchronous"),
        super::responses::OsbHeaders,
    ),
    request_body = BindRequest,
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "Already bound with identical attributes", body = super::responses::OsbBindingCredentials,
            headers(("Cache-Control" = String, description = "`no-store`"))),
        (status = 201, description = "Bound", body = super::responses::OsbBindingCredentials,
            headers(("Cache-Control" = String, description = "`no-store`")),
            links(
                ("FetchBinding" = (operation_id = "osbFetchBinding", parameters(("instance_id" = "$request.path.instance_id"), ("binding_id" = "$request.path.binding_id")))),
                ("BindingLastOperation" = (operation_id = "osbBindingLastOperation", parameters(("instance_id" = "$request.path.instance_id"), ("binding_id" = "$request.path.binding_id")))),
            )),
        (status = 202, description = "A service offer's binding, recorded for its provider", body = super::responses::OsbAsyncOperation,
            links(
                ("BindingLastOperation" = (operation_id = "osbBindingLastOperation", parameters(("instance_id" = "$request.path.instance_id"), ("binding_id" = "$request.path.binding_id"), ("operation" = "$response.body#/operation")))),
            )),
        (status = 400, description = "A malformed request: header, query, path or body (named in `description`: `parameters.<field>` against the plan's schema; `parameters.namespace`/`parameters.secretName` for a service binding), or `service_id`/`plan_id` not the instance's", body = super::responses::OsbErrorBody),
        (status = 403, description = "A bearer token without the consumer or admin role, or another owner's instance", body = super::responses::OsbErrorBody),
        (status = 404, description = "No such provisioned instance", body = super::responses::OsbErrorBody),
        (status = 409, description = "The binding exists with other attributes", body = super::responses::OsbErrorBody),
        (status = 422, description = "`AsyncRequired` (a service binding without `accepts_incomplete=true`), `ConcurrencyError`, or `PurchaseEnded` (the purchase behind the instance was cancelled)", body = super::responses::OsbErrorBody),
        super::responses::OsbCommonResponses,
    )
)]
pub async fn bind(
    state: web::Data<Osb>,
    req: HttpRequest,
    payload: web::Payload,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    let (instance_id, binding_id) = path.into_inner();
    check_id("binding_id", &binding_id)?;
    let accepts = Query::parse(&req)?.accepts_incomplete()?;
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
    check_plan(&inst, &service_id, &plan_id)?;
    if inst.service && !accepts {
        return Err(OsbError::async_required());
    }
    super::instances::check_instance_parameters(
        &state,
        &inst,
        crate::offers::service::Parameters::BindingCreate,
        r.parameters.as_ref(),
    )
    .await?;
    let digest = request_digest(&json!({
        "instance": instance_id, "service_id": service_id, "plan_id": plan_id,
        "app_guid": r.app_guid, "bind_resource": r.bind_resource, "parameters": r.parameters,
    }));
    if inst.service {
        return service_bindings::bind(&state, &inst, &binding_id, digest, &r.parameters).await;
    }
    let credentials = credentials(&state, &inst).await?;
    let binding = OsbBinding {
        id: binding_id.clone(),
        instance_id: instance_id.clone(),
        owner: inst.owner.clone(),
        request_digest: digest.clone(),
        parameters: stored_parameters(&r.parameters),
        created_at: crate::store::now(),
        service: false,
        operation: None,
        credentials: None,
        revision: 0,
    };
    if state.store.osb_insert_binding(&binding).await? {
        tracing::info!(instance = %instance_id, binding = %binding_id, "bound: peering credentials released");
        return Ok(with_credentials(
            actix_web::http::StatusCode::CREATED,
            json!({ "credentials": credentials }),
        ));
    }
    match state.store.osb_get_binding(&binding_id).await? {
        Some(existing)
            if existing.instance_id == instance_id && existing.request_digest == digest =>
        {
            Ok(with_credentials(
                actix_web::http::StatusCode::OK,
                json!({ "credentials": credentials }),
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

/// A binding, with the credentials it released.
#[utoipa::path(
    get, path = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}", tag = "osb", operation_id = "osbFetchBinding",
    params(super::responses::OsbBindingPath, super::responses::OsbHeaders),
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "The binding", body = super::responses::OsbBindingView,
            headers(("Cache-Control" = String, description = "`no-store`"))),
        super::responses::OsbMalformed,
        super::responses::OsbNoRole,
        (status = 404, description = "No such binding or provisioned instance (or another owner's), or a service binding still being created or whose creation failed", body = super::responses::OsbErrorBody),
        (status = 422, description = "`ConcurrencyError`, or `PurchaseEnded`", body = super::responses::OsbErrorBody),
        super::responses::OsbCommonResponses,
    )
)]
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
    if binding.service {
        let inst = state
            .store
            .osb_get_instance(&instance_id)
            .await?
            .ok_or_else(|| OsbError::not_found(format!("no service instance {instance_id}")))?;
        return service_bindings::fetch(&state, &inst, &binding);
    }
    let inst = bindable(&state, &platform, &instance_id).await?;
    let credentials = credentials(&state, &inst).await?;
    Ok(with_credentials(
        actix_web::http::StatusCode::OK,
        json!({
            "credentials": credentials,
            "parameters": answered_parameters(binding.parameters.as_deref()),
        }),
    ))
}

/// Unbind: forget the binding (the provider's token itself cannot be
/// revoked by the catalog); a service binding is left for its provider to
/// remove (asynchronous, 202).
#[utoipa::path(
    delete, path = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}", tag = "osb", operation_id = "osbUnbind",
    params(
        super::responses::OsbBindingPath,
        ("service_id" = crate::http::schemas::OsbId, Query, description = "The instance's service id"),
        ("plan_id" = crate::http::schemas::OsbId, Query, description = "The instance's plan id"),
        ("accepts_incomplete" = Option<bool>, Query, description = "Required (`true`) to unbind a service offer's binding, which its provider removes asynchronously; capacity unbinding is synchronous"),
        super::responses::OsbHeaders,
    ),
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "Unbound", body = super::responses::OsbEmpty),
        (status = 202, description = "A service binding left for its provider to remove", body = super::responses::OsbAsyncOperation),
        super::responses::OsbMalformed,
        (status = 403, description = "A bearer token without the consumer or admin role, or another owner's binding", body = super::responses::OsbErrorBody),
        (status = 410, description = "No such binding", body = super::responses::OsbErrorBody),
        (status = 422, description = "`AsyncRequired` (a service binding without `accepts_incomplete=true`) or `ConcurrencyError` (it is still being created)", body = super::responses::OsbErrorBody),
        super::responses::OsbCommonResponses,
    )
)]
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
    let accepts = query.accepts_incomplete()?;
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
    if binding.service {
        return service_bindings::unbind(&state, binding, accepts).await;
    }
    if !state.store.osb_delete_binding(&binding_id).await? {
        return Err(OsbError::gone(format!("no service binding {binding_id}")));
    }
    tracing::info!(instance = %instance_id, binding = %binding_id, "unbound");
    Ok(HttpResponse::Ok().json(json!({})))
}

/// A binding's last operation: a service binding's bind or unbind; a
/// capacity binding that exists has succeeded.
#[utoipa::path(
    get, path = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation", tag = "osb", operation_id = "osbBindingLastOperation",
    params(
        super::responses::OsbBindingPath,
        ("operation" = Option<String>, Query, description = "The `operation` of a service binding's 202 answer (400 if it is not its last one); ignored for capacity bindings"),
        ("service_id" = Option<String>, Query, description = "Accepted and ignored"),
        ("plan_id" = Option<String>, Query, description = "Accepted and ignored"),
        super::responses::OsbHeaders,
    ),
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "The state of a service binding's last operation; `succeeded` for a capacity binding", body = super::responses::OsbLastOperation,
            headers(("Retry-After" = String, description = "Seconds to wait before polling again, while in progress"))),
        super::responses::OsbMalformed,
        super::responses::OsbNoRole,
        (status = 410, description = "No such binding", body = super::responses::OsbErrorBody),
        super::responses::OsbCommonResponses,
    )
)]
pub async fn last_operation(
    state: web::Data<Osb>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    let (instance_id, binding_id) = path.into_inner();
    let query = Query::parse(&req)?;
    match binding_of(&state, &instance_id, &binding_id, |o| {
        platform.may_act_on(o)
    })
    .await?
    {
        Some(b) if b.service => service_bindings::last_operation(&b, query.0.get("operation")),
        // Capacity bindings complete synchronously: one that exists has
        // succeeded.
        Some(_) => Ok(HttpResponse::Ok().json(json!({ "state": "succeeded" }))),
        None => Err(OsbError::gone(format!("no service binding {binding_id}"))),
    }
}
