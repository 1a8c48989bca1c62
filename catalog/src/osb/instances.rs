//! Service instances: `PUT` provisions a plan as a purchase (reserve, then
//! purchase at once), `GET` fetches it, `DELETE` deprovisions it (cancels
//! the purchase, freeing its unit), and `GET .../last_operation` reports
//! asynchronous work.
//!
//! With `accepts_incomplete=true` (and `--osb-async allowed|required`) the
//! work runs in the background: the answer is 202 with an `operation`, and
//! `last_operation` says `in progress`, `succeeded` or `failed`. An
//! asynchronous provisioning that fails (the plan sold out meanwhile, the
//! provider disabled) stays recorded as failed until the platform deletes
//! the instance; an asynchronous deprovisioning that finished answers
//! `last_operation` with 410 Gone, as the spec asks.
//!
//! A service offer's plan is provisioned only asynchronously (422
//! `AsyncRequired` without `accepts_incomplete=true`, whatever
//! `--osb-async` says), its `parameters` checked against the plan's schema
//! and the customer's peering kubeconfig (`context.peering.kubeconfig`,
//! [`super::customer_peering`]) checked first (400 naming the field,
//! nothing recorded). The purchase made, the
//! operation stays `in progress` until the provider reports the service's
//! state for the contract ([`super::provider_report`]); deprovisioning
//! cancels the purchase and waits for the provider's report that the
//! service is gone, then the instance is gone too (410).

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};
use tracing::Instrument;

use super::catalog::resolve;
use super::config::AsyncMode;
use super::customer_peering;
use super::error::OsbError;
use super::guard::{guard, Platform};
use super::model::{
    answered_parameters, stored_parameters, Operation, OperationKind, OperationState, OsbInstance,
};
use super::request::{
    check_id, object_field, parse, read_body, request_digest, required_field, Query,
};
use super::Osb;
use crate::buying::model::{new_id, Channel, Transition};
use crate::buying::service::{self, Buyer};
use crate::buying::BuyError;
use crate::buying::TransitionError;
use crate::offers::service::{check_parameters, Parameters};
use crate::offers::OfferKind;

/// An operation still "in progress" after this long lost its worker (the
/// process stopped): it is reported failed.
const STALE_OPERATION: chrono::Duration = chrono::Duration::seconds(60);

/// Whether to answer asynchronously; 422 AsyncRequired when the broker
/// demands it and the platform does not accept it.
fn run_async(state: &Osb, accepts_incomplete: bool) -> Result<bool, OsbError> {
    match (state.settings.async_mode, accepts_incomplete) {
        (AsyncMode::Required, false) => Err(OsbError::async_required()),
        (AsyncMode::Never, _) => Ok(false),
        (_, accepts) => Ok(accepts),
    }
}

/// A provisioning request (unknown fields are ignored, as the spec asks).
/// (The example names a plan of the `--demo` catalog.)
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(example = json!({
    "service_id": super::ids::service_id("demo-general"),
    "plan_id": super::ids::plan_id("demo-general", "small"),
    "organization_guid": "org-1",
    "space_guid": "space-1",
}))]
pub(crate) struct ProvisionRequest {
    /// A service id from `GET /v2/catalog`.
    #[serde(default)]
    #[schema(required = true, value_type = crate::http::schemas::OsbId)]
    service_id: Option<String>,
    /// One of that service's plan ids.
    #[serde(default)]
    #[schema(required = true, value_type = crate::http::schemas::OsbId)]
    plan_id: Option<String>,
    /// Required by OSB v2.17 (a non-empty string); 400 without it.
    #[serde(default)]
    #[schema(required = true, value_type = crate::http::schemas::OsbId)]
    organization_guid: Option<String>,
    /// Required by OSB v2.17 (a non-empty string); 400 without it.
    #[serde(default)]
    #[schema(required = true, value_type = crate::http::schemas::OsbId)]
    space_guid: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    context: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    parameters: Option<Value>,
    #[serde(default)]
    maintenance_info: Option<Value>,
}

fn accepted(operation: &str) -> HttpResponse {
    HttpResponse::Accepted().json(json!({ "operation": operation }))
}

/// The instance with a stale "in progress" operation shown as failed (and
/// recorded so, best effort).
pub(crate) async fn settle(state: &Osb, mut inst: OsbInstance) -> Result<OsbInstance, OsbError> {
    let stale = !inst.awaiting_provider
        && inst.operation.as_ref().is_some_and(|op| {
            op.state == OperationState::InProgress
                && op.started_at + STALE_OPERATION < crate::store::now()
        });
    if stale {
        let expected = inst.revision;
        if let Some(op) = inst.operation.as_mut() {
            op.state = OperationState::Failed;
            op.description = "the operation was interrupted (the broker restarted); retry".into();
        }
        inst.revision += 1;
        if !state.store.osb_replace_instance(&inst, expected).await? {
            // Changed meanwhile: read it again.
            return state
                .store
                .osb_get_instance(&inst.id)
                .await?
                .ok_or_else(|| OsbError::gone(format!("no service instance {}", inst.id)));
        }
    }
    Ok(inst)
}

/// The `ConcurrencyError` for a request that meets `op` under way.
pub(crate) fn busy(op: &Operation) -> OsbError {
    OsbError::concurrency(match op.kind {
        OperationKind::Provision => "this service instance is being provisioned",
        OperationKind::Deprovision => "this service instance is being deprovisioned",
        OperationKind::Bind => "this service binding is being created",
        OperationKind::Unbind => "this service binding is being deleted",
        OperationKind::Update => "this service instance is being updated",
    })
}

/// What a `kind` request answers while an operation runs on `inst` (None
/// when none does): the same operation asked again, by a platform that
/// accepts incomplete answers, gets 202 with its id; anything else gets
/// `ConcurrencyError`.
fn answer_running(
    inst: &OsbInstance,
    kind: OperationKind,
    accepts: bool,
) -> Option<Result<HttpResponse, OsbError>> {
    let op = inst.running()?;
    Some(if op.kind == kind && accepts {
        Ok(accepted(&op.id))
    } else {
        Err(busy(op))
    })
}

/// Provision: reserve and purchase; the reservation id on success.
pub(crate) async fn provision_work(state: &Osb, inst: &OsbInstance) -> Result<String, OsbError> {
    let reserved = service::reserve(
        &state.buying,
        &inst.owner,
        &inst.offer_id,
        &inst.plan_key,
        state.buying.ttl,
        Channel::Osb,
        None,
    )
    .await
    .map_err(unavailable)?;
    let buyer = Buyer {
        subject: inst.owner.clone(),
        admin: false,
    };
    // A service is bought as a contract: its provider sees it among its
    // contracts (`GET /contracts`) and reports the service's state for it.
    let contract = if inst.service {
        let order = crate::buying::contracts::model::Order {
            consumer_cluster_id: None,
            duration_seconds: None,
        };
        let now = crate::store::now();
        let peers = crate::buying::contracts::service::Peers::ProviderWithCustomer;
        match crate::buying::contracts::service::terms(&state.buying, &reserved, &order, peers, now)
            .await
        {
            Ok(terms) => Some(terms),
            Err(e) => {
                let _ =
                    service::end(&state.buying, &reserved.id, &buyer, Transition::Release).await;
                return Err(unavailable(e));
            }
        }
    } else {
        None
    };
    match service::purchase(&state.buying, &reserved.id, &buyer, contract, None).await {
        Ok(purchase) => Ok(purchase.id),
        Err(e) => {
            let _ = service::end(&state.buying, &reserved.id, &buyer, Transition::Release).await;
            Err(unavailable(e))
        }
    }
}

/// A buying failure while provisioning: the plan cannot be had (422), or a
/// server-side problem.
fn unavailable(e: BuyError) -> OsbError {
    match e {
        BuyError::Api(api) => {
            let status = actix_web::ResponseError::status_code(&api);
            if status.is_client_error() {
                OsbError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    Some("PlanUnavailable"),
                    api.body().message,
                )
            } else {
                api.into()
            }
        }
        other => OsbError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("PlanUnavailable"),
            other.to_string(),
        ),
    }
}

/// Record the outcome of a provisioning on `inst` (at its revision).
async fn finish_provision(
    state: &Osb,
    mut inst: OsbInstance,
    outcome: &Result<String, OsbError>,
) -> Result<OsbInstance, OsbError> {
    let expected = inst.revision;
    inst.revision += 1;
    match outcome {
        Ok(reservation) if inst.service => {
            // Bought; the service exists once its provider says so.
            inst.reservation_id = Some(reservation.clone());
            inst.awaiting_provider = true;
            if let Some(op) = inst.operation.as_mut() {
                op.description = format!(
                    "purchased: contract {reservation}; waiting for the provider to set the service up"
                );
            }
        }
        Ok(reservation) => {
            inst.reservation_id = Some(reservation.clone());
            inst.provisioned = true;
            if let Some(op) = inst.operation.as_mut() {
                op.state = OperationState::Succeeded;
                op.description = format!("purchased: reservation {reservation}");
            }
        }
        Err(e) => {
            if let Some(op) = inst.operation.as_mut() {
                op.state = OperationState::Failed;
                op.description = e.description.clone();
            }
        }
    }
    if !state.store.osb_replace_instance(&inst, expected).await? {
        return Err(OsbError::internal(format!(
            "instance {} changed while it was being provisioned",
            inst.id
        )));
    }
    Ok(inst)
}

/// Provision a plan: reserve and purchase one unit of it. With
/// `accepts_incomplete=true` (and `--osb-async allowed|required`) the work
/// runs in the background (202, then `last_operation`).
#[utoipa::path(
    put, path = "/v2/service_instances/{instance_id}", tag = "osb", operation_id = "osbProvision",
    params(
        super::responses::OsbInstancePath,
        ("accepts_incomplete" = Option<bool>, Query, description = "The platform accepts a 202 and polls `last_operation`"),
        super::responses::OsbHeaders,
    ),
    request_body = ProvisionRequest,
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "Already provisioned with identical attributes", body = super::responses::OsbEmpty),
        (status = 201, description = "Provisioned (a purchase)", body = super::responses::OsbEmpty,
            links(
                ("FetchInstance" = (operation_id = "osbFetchInstance", parameters(("instance_id" = "$request.path.instance_id")))),
                ("InstanceLastOperation" = (operation_id = "osbInstanceLastOperation", parameters(("instance_id" = "$request.path.instance_id")))),
            )),
        (status = 202, description = "Provisioning in the background", body = super::responses::OsbAsyncOperation,
            links(
                ("InstanceLastOperation" = (operation_id = "osbInstanceLastOperation", parameters(("instance_id" = "$request.path.instance_id"), ("operation" = "$response.body#/operation")))),
            )),
        (status = 400, description = "A malformed request: header, query, path or body (named in `description`), or a `service_id`/`plan_id` not in the catalog", body = super::responses::OsbErrorBody),
        super::responses::OsbNoRole,
        (status = 409, description = "The instance exists with other attributes", body = super::responses::OsbErrorBody),
        (status = 422, description = "`AsyncRequired`, `ConcurrencyError` (an operation is running) or `PlanUnavailable` (sold out, provider disabled)", body = super::responses::OsbErrorBody),
        super::responses::OsbCommonResponses,
    )
)]
pub async fn provision(
    state: web::Data<Osb>,
    req: HttpRequest,
    payload: web::Payload,
    id: web::Path<String>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    check_id("instance_id", &id)?;
    let query = Query::parse(&req)?;
    let accepts = query.accepts_incomplete()?;
    let body = read_body(&state, &req, payload).await?;
    let r: ProvisionRequest = parse(&body)?;
    let service_id = required_field("service_id", r.service_id)?;
    let plan_id = required_field("plan_id", r.plan_id)?;
    // REQUIRED non-empty strings in v2.17 (deprecated in favour of
    // `context`, which carries them too, but platforms must still send them).
    for (name, v) in [
        ("organization_guid", &r.organization_guid),
        ("space_guid", &r.space_guid),
    ] {
        match v.as_deref() {
            None => {
                return Err(OsbError::bad_request(format!(
                    "{name}: is required (OSB v2.17: the platform's organization and space GUIDs)"
                )))
            }
            Some(s) if s.trim().is_empty() => {
                return Err(OsbError::bad_request(format!("{name}: must not be empty")))
            }
            Some(_) => {}
        }
    }
    object_field("context", &r.context)?;
    object_field("parameters", &r.parameters)?;
    super::maintenance::check(&r.maintenance_info)?;
    let digest = request_digest(&json!({
        "service_id": service_id, "plan_id": plan_id,
        "organization_guid": r.organization_guid, "space_guid": r.space_guid,
        "parameters": r.parameters,
    }));
    let is_async = run_async(&state, accepts)?;

    if let Some(existing) = state.store.osb_get_instance(&id).await? {
        let existing = settle(&state, existing).await?;
        if existing.owner != platform.owner || existing.request_digest != digest {
            return Err(OsbError::conflict(format!(
                "service instance {id} already exists with different attributes"
            )));
        }
        if existing.service && !accepts {
            return Err(OsbError::async_required());
        }
        if let Some(answer) = answer_running(&existing, OperationKind::Provision, accepts) {
            return answer;
        }
        if existing.provisioned {
            return Ok(HttpResponse::Ok().json(json!({})));
        }
        // A failed provisioning: the platform tries again; start afresh.
        let expected = existing.revision;
        // The customer may send a fresh kubeconfig with the retry.
        let customer_peering = match (&existing.provider, existing.service) {
            (Some(provider), true) => Some(customer_peering::sealed_from_context(
                &state, provider, &id, &r.context,
            )?),
            _ => existing.customer_peering.clone(),
        };
        let retry = OsbInstance {
            operation: Some(new_operation(OperationKind::Provision)?),
            customer_peering,
            revision: expected + 1,
            ..existing
        };
        if !state.store.osb_replace_instance(&retry, expected).await? {
            return Err(OsbError::concurrency(
                "this service instance changed meanwhile; retry",
            ));
        }
        let is_async = is_async || retry.service;
        return start_provision(&state, retry, is_async).await;
    }

    let (offer, plan_key) = resolve(&state, &service_id, &plan_id).await?;
    let service = offer.kind == OfferKind::Service;
    if service && !accepts {
        return Err(OsbError::async_required());
    }
    check_parameters(
        &offer,
        &plan_key,
        Parameters::InstanceCreate,
        r.parameters.as_ref(),
    )
    .map_err(OsbError::bad_request)?;
    let customer_peering = if service {
        Some(customer_peering::sealed_from_context(
            &state,
            &offer.cluster_id,
            &id,
            &r.context,
        )?)
    } else {
        None
    };
    let provider = Some(offer.cluster_id.clone());
    let inst = OsbInstance {
        id: id.to_string(),
        owner: platform.owner.clone(),
        service_id,
        plan_id,
        offer_id: offer.id,
        plan_key,
        request_digest: digest,
        parameters: stored_parameters(&r.parameters),
        reservation_id: None,
        provisioned: false,
        service,
        provider,
        awaiting_provider: false,
        customer_peering,
        operation: Some(new_operation(OperationKind::Provision)?),
        revision: 1,
        created_at: crate::store::now(),
        instance_contract_id: None,
        update: None,
    };
    if !state.store.osb_insert_instance(&inst).await? {
        return Err(OsbError::concurrency(
            "another request is provisioning this service instance; retry",
        ));
    }
    start_provision(&state, inst, is_async || service).await
}

/// A fresh operation of `kind`, in progress.
pub(crate) fn new_operation(kind: OperationKind) -> Result<Operation, OsbError> {
    Ok(Operation {
        id: format!(
            "{}-{}",
            match kind {
                OperationKind::Provision => "provision",
                OperationKind::Deprovision => "deprovision",
                OperationKind::Bind => "bind",
                OperationKind::Unbind => "unbind",
                OperationKind::Update => "update",
            },
            new_id().map_err(OsbError::internal)?
        ),
        kind,
        state: OperationState::InProgress,
        description: "in progress".into(),
        started_at: crate::store::now(),
    })
}

async fn start_provision(
    state: &Osb,
    inst: OsbInstance,
    is_async: bool,
) -> Result<HttpResponse, OsbError> {
    let op_id = inst
        .operation
        .as_ref()
        .map(|o| o.id.clone())
        .unwrap_or_default();
    if is_async {
        let state = state.clone();
        let span = tracing::info_span!("osb_provision", instance = %inst.id, operation = %op_id);
        actix_web::rt::spawn(
            async move {
                tokio::time::sleep(state.settings.async_delay).await;
                let outcome = provision_work(&state, &inst).await;
                match finish_provision(&state, inst, &outcome).await {
                    Ok(_) => tracing::info!(ok = outcome.is_ok(), "provisioning finished"),
                    Err(e) => {
                        tracing::warn!(error = %e, "recording the provisioning outcome failed")
                    }
                }
            }
            .instrument(span),
        );
        return Ok(accepted(&op_id));
    }
    let outcome = provision_work(state, &inst).await;
    match outcome {
        Ok(_) => {
            finish_provision(state, inst, &outcome).await?;
            tracing::info!("service instance provisioned");
            Ok(HttpResponse::Created().json(json!({})))
        }
        Err(e) => {
            // A synchronous failure leaves nothing behind.
            let _ = state
                .store
                .osb_delete_instance(&inst.id, inst.revision)
                .await;
            Err(e)
        }
    }
}

/// A provisioned instance.
#[utoipa::path(
    get, path = "/v2/service_instances/{instance_id}", tag = "osb", operation_id = "osbFetchInstance",
    params(super::responses::OsbInstancePath, super::responses::OsbHeaders),
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "The instance", body = super::responses::OsbInstanceView),
        super::responses::OsbMalformed,
        super::responses::OsbNoRole,
        (status = 404, description = "No such provisioned instance (or another owner's)", body = super::responses::OsbErrorBody),
        super::responses::OsbCommonResponses,
    )
)]
pub async fn fetch(
    state: web::Data<Osb>,
    req: HttpRequest,
    id: web::Path<String>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    let inst = state
        .store
        .osb_get_instance(&id)
        .await?
        .filter(|i| platform.may_act_on(&i.owner) && i.provisioned)
        .ok_or_else(|| OsbError::not_found(format!("no service instance {id}")))?;
    Ok(HttpResponse::Ok().json(json!({
        "service_id": inst.service_id,
        "plan_id": inst.plan_id,
        "parameters": answered_parameters(inst.parameters.as_deref()),
    })))
}

/// Check `parameters` against the schema `inst`'s plan declares for
/// `which` (400 naming the field). The offer gone, there is nothing to
/// check against.
pub(crate) async fn check_instance_parameters(
    state: &Osb,
    inst: &OsbInstance,
    which: Parameters,
    parameters: Option<&Value>,
) -> Result<(), OsbError> {
    if !inst.service {
        return Ok(());
    }
    match state.buying.offers.get_offer(&inst.offer_id).await? {
        Some(offer) => check_parameters(&offer, &inst.plan_key, which, parameters)
            .map_err(OsbError::bad_request),
        None => Ok(()),
    }
}

/// Cancel the purchase, drop the bindings and the record.
pub(crate) async fn deprovision_work(state: &Osb, inst: &OsbInstance) -> Result<(), OsbError> {
    let store = &state.store;
    for b in store.osb_bindings_of(&inst.id).await? {
        store.osb_delete_binding(&b.id).await?;
    }
    cancel_purchase(state, inst).await?;
    if !store.osb_delete_instance(&inst.id, inst.revision).await? {
        return Err(OsbError::concurrency(
            "this service instance changed meanwhile; retry",
        ));
    }
    Ok(())
}

/// Cancel the instance's purchase (freeing its unit); an ended one is fine.
async fn cancel_purchase(state: &Osb, inst: &OsbInstance) -> Result<(), OsbError> {
    match &inst.reservation_id {
        Some(rid) => cancel_contract(state, rid).await,
        None => Ok(()),
    }
}

/// Cancel purchase (contract) `rid`, freeing its unit; an ended one is
/// fine.
pub(crate) async fn cancel_contract(state: &Osb, rid: &str) -> Result<(), OsbError> {
    let reservations = &state.buying.store;
    let now = crate::store::now();
    match reservations.transition(rid, Transition::Cancel, now).await {
        Ok(_) | Err(TransitionError::NotFound) => {}
        // Already ended (cancelled through the REST API, say): fine.
        Err(TransitionError::WrongState(r)) if r.state.is_final() => {}
        Err(TransitionError::WrongState(r)) => {
            let _ = reservations
                .transition(&r.id, Transition::Release, now)
                .await;
        }
        Err(TransitionError::Store(e)) => return Err(e.into()),
    }
    Ok(())
}

/// Deprovision: cancel the purchase (freeing its unit) and drop the
/// instance's bindings.
#[utoipa::path(
    delete, path = "/v2/service_instances/{instance_id}", tag = "osb", operation_id = "osbDeprovision",
    params(
        super::responses::OsbInstancePath,
        ("service_id" = crate::http::schemas::OsbId, Query, description = "The instance's service id"),
        ("plan_id" = crate::http::schemas::OsbId, Query, description = "The instance's plan id"),
        ("accepts_incomplete" = Option<bool>, Query, description = "The platform accepts a 202 and polls `last_operation`"),
        super::responses::OsbHeaders,
    ),
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "Deprovisioned", body = super::responses::OsbEmpty),
        (status = 202, description = "Deprovisioning in the background", body = super::responses::OsbAsyncOperation),
        super::responses::OsbMalformed,
        (status = 403, description = "A bearer token without the consumer or admin role, or another owner's instance", body = super::responses::OsbErrorBody),
        (status = 410, description = "No such instance", body = super::responses::OsbErrorBody),
        (status = 422, description = "`AsyncRequired` or `ConcurrencyError`", body = super::responses::OsbErrorBody),
        super::responses::OsbCommonResponses,
    )
)]
pub async fn deprovision(
    state: web::Data<Osb>,
    req: HttpRequest,
    id: web::Path<String>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    let query = Query::parse(&req)?;
    let service_id = query.required("service_id")?.to_string();
    let plan_id = query.required("plan_id")?.to_string();
    let accepts = query.accepts_incomplete()?;
    let is_async = run_async(&state, accepts)?;
    let Some(inst) = state.store.osb_get_instance(&id).await? else {
        return Err(OsbError::gone(format!("no service instance {id}")));
    };
    let inst = settle(&state, inst).await?;
    check_owner(&platform, &inst)?;
    check_plan(&inst, &service_id, &plan_id)?;
    if let Some(answer) = answer_running(&inst, OperationKind::Deprovision, accepts) {
        return answer;
    }
    if inst.service && !accepts {
        return Err(OsbError::async_required());
    }
    // S1-79: a binding still being created is refused a deprovision with
    // 422 `ConcurrencyError`, as OSB v2.17 "Blocking Operations" allows
    // (spec.md: a broker that cannot process a request "due a concurrency
    // issue … MUST reject the request with a HTTP 422 … ConcurrencyError";
    // a broker "MAY choose to treat the creation of a Service Binding as a
    // mutation of the corresponding Service Instance"). Accepted, the
    // provider could still complete the binding and the platform fetch
    // credentials for a service being removed. The platform retries once
    // the binding's creation has succeeded or failed.
    if let Some(op) = state
        .store
        .osb_bindings_of(&inst.id)
        .await?
        .iter()
        .filter_map(|b| b.running())
        .find(|op| op.kind == OperationKind::Bind)
    {
        return Err(busy(op));
    }
    if inst.service && inst.reservation_id.is_some() {
        return deprovision_service(&state, inst).await;
    }
    if !is_async {
        deprovision_work(&state, &inst).await?;
        tracing::info!(instance = %inst.id, "service instance deprovisioned");
        return Ok(HttpResponse::Ok().json(json!({})));
    }
    let expected = inst.revision;
    let operation = new_operation(OperationKind::Deprovision)?;
    let op_id = operation.id.clone();
    let marked = OsbInstance {
        operation: Some(operation),
        revision: expected + 1,
        ..inst
    };
    if !state.store.osb_replace_instance(&marked, expected).await? {
        return Err(OsbError::concurrency(
            "this service instance changed meanwhile; retry",
        ));
    }
    let state = state.clone();
    let span = tracing::info_span!("osb_deprovision", instance = %marked.id, operation = %op_id);
    actix_web::rt::spawn(
        async move {
            tokio::time::sleep(state.settings.async_delay).await;
            if let Err(e) = deprovision_work(&state, &marked).await {
                tracing::warn!(error = %e, "deprovisioning failed");
                let mut failed = marked.clone();
                if let Some(op) = failed.operation.as_mut() {
                    op.state = OperationState::Failed;
                    op.description = e.description.clone();
                }
                failed.revision += 1;
                let _ = state
                    .store
                    .osb_replace_instance(&failed, marked.revision)
                    .await;
            } else {
                tracing::info!("service instance deprovisioned");
            }
        }
        .instrument(span),
    );
    Ok(accepted(&op_id))
}

/// Deprovision a service instance: cancel its purchase (the contract ends,
/// which its provider sees) and wait for the provider's report that the
/// service is gone ([`super::provider_report`]).
async fn deprovision_service(state: &Osb, inst: OsbInstance) -> Result<HttpResponse, OsbError> {
    cancel_purchase(state, &inst).await?;
    let expected = inst.revision;
    let mut operation = new_operation(OperationKind::Deprovision)?;
    operation.description =
        "contract cancelled; waiting for the provider to remove the service".into();
    let op_id = operation.id.clone();
    let marked = OsbInstance {
        operation: Some(operation),
        awaiting_provider: true,
        revision: expected + 1,
        ..inst
    };
    if !state.store.osb_replace_instance(&marked, expected).await? {
        return Err(OsbError::concurrency(
            "this service instance changed meanwhile; retry",
        ));
    }
    tracing::info!(instance = %marked.id, operation = %op_id, "service instance deprovisioning: waiting for the provider");
    Ok(accepted(&op_id))
}

/// The state of the instance's last (asynchronous) operation.
#[utoipa::path(
    get, path = "/v2/service_instances/{instance_id}/last_operation", tag = "osb", operation_id = "osbInstanceLastOperation",
    params(
        super::responses::OsbInstancePath,
        ("operation" = Option<String>, Query, description = "The `operation` of the 202 answer (400 if it is not the last one)"),
        ("service_id" = Option<String>, Query, description = "Accepted and ignored"),
        ("plan_id" = Option<String>, Query, description = "Accepted and ignored"),
        super::responses::OsbHeaders,
    ),
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "The operation's state", body = super::responses::OsbLastOperation,
            headers(("Retry-After" = String, description = "Seconds to wait before polling again, while in progress"))),
        super::responses::OsbMalformed,
        super::responses::OsbNoRole,
        (status = 404, description = "Another owner's instance", body = super::responses::OsbErrorBody),
        (status = 410, description = "No such instance (deprovisioned)", body = super::responses::OsbErrorBody),
        super::responses::OsbCommonResponses,
    )
)]
pub async fn last_operation(
    state: web::Data<Osb>,
    req: HttpRequest,
    id: web::Path<String>,
) -> Result<HttpResponse, OsbError> {
    let platform = guard(&state, &req).await?;
    let query = Query::parse(&req)?;
    let Some(inst) = state.store.osb_get_instance(&id).await? else {
        return Err(OsbError::gone(format!("no service instance {id}")));
    };
    if !platform.may_act_on(&inst.owner) {
        return Err(OsbError::not_found(format!("no service instance {id}")));
    }
    let inst = settle(&state, inst).await?;
    let Some(op) = &inst.operation else {
        return Ok(HttpResponse::Ok().json(json!({ "state": "succeeded" })));
    };
    if let Some(asked) = query.0.get("operation") {
        if asked != &op.id {
            return Err(OsbError::bad_request(format!(
                "operation: {asked} is not the last operation of service instance {id}"
            )));
        }
    }
    let mut resp = HttpResponse::Ok();
    if op.state == OperationState::InProgress {
        resp.insert_header(("Retry-After", "1"));
    }
    Ok(resp.json(json!({ "state": op.state, "description": op.description })))
}

/// 403 unless `platform` may act on `inst` (its owner, or an admin).
fn check_owner(platform: &Platform, inst: &OsbInstance) -> Result<(), OsbError> {
    if !platform.may_act_on(&inst.owner) {
        return Err(OsbError::forbidden(format!(
            "service instance {} belongs to someone else",
            inst.id
        )));
    }
    Ok(())
}

/// 400 unless the request names the instance's own service and plan: the
/// spec has platforms send them back, and a mismatch means the platform
/// confused two instances.
pub(crate) fn check_plan(
    inst: &OsbInstance,
    service_id: &str,
    plan_id: &str,
) -> Result<(), OsbError> {
    if inst.service_id != service_id || inst.plan_id != plan_id {
        return Err(OsbError::bad_request(format!(
            "service_id/plan_id: service instance {} is of service {} plan {}",
            inst.id, inst.service_id, inst.plan_id
        )));
    }
    Ok(())
}

/// Whether `platform` may bind instance `id`: the instance, provisioned.
pub async fn bindable(state: &Osb, platform: &Platform, id: &str) -> Result<OsbInstance, OsbError> {
    let inst = state
        .store
        .osb_get_instance(id)
        .await?
        .ok_or_else(|| OsbError::not_found(format!("no service instance {id}")))?;
    check_owner(platform, &inst)?;
    let inst = settle(state, inst).await?;
    if inst.running().is_some() {
        return Err(OsbError::concurrency(format!(
            "service instance {id} has an operation in progress"
        )));
    }
    if !inst.provisioned {
        return Err(OsbError::not_found(format!(
            "service instance {id} is not provisioned"
        )));
    }
    Ok(inst)
}
