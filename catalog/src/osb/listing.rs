//! The caller's service instances over the REST API, from the catalog's
//! own Open Service Broker records, so a customer finds its deployments
//! wherever it signs in (the web UI's "my deployments"):
//!
//! | route | who | what |
//! |---|---|---|
//! | `GET /service-instances` | consumer (own), provider (sold by its cluster), admin (all) | [`ServiceInstance`]s, newest first |
//! | `GET /service-instances/{id}` | its owner, its provider, admin | one; 404 for anyone else |
//!
//! The list is read from the instance records themselves, by owner and by
//! selling provider ([`OsbStore::osb_list_instances`](super::OsbStore),
//! an index on both stores): one read of the caller's own instances, not
//! one per purchase, and an instance whose provisioning failed before
//! anything was bought (a plan sold out: no purchase) is listed too, as
//! `failed`. Never the customer's peering kubeconfig nor a binding's
//! credentials.

use std::collections::BTreeSet;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use catalog_client::wire::service_instance::{
    BindingState, InstanceBinding, InstanceOperation, InstanceState, OperationType, OsbPlanIds,
    ServiceInstance,
};
use catalog_client::wire::OfferKind;
use serde::Deserialize;

use super::model::{answered_parameters, Operation, OperationState, OsbBinding, OsbInstance};
use super::{InstancesOf, Osb};
use crate::auth::Caller;
use crate::buying::contracts::model::Viewer;
use crate::buying::contracts::service::viewer;
use crate::buying::BuyError;
use crate::http::{ApiError, ErrorBody};

/// Register the routes (the REST API's, beside the others).
pub fn routes(cfg: &mut web::ServiceConfig) {
    let resource =
        |path: &str| web::resource(path).default_service(crate::http::method_not_allowed("GET"));
    cfg.service(resource("/service-instances").route(web::get().to(list)))
        .service(resource("/service-instances/{id}").route(web::get().to(get)));
}

/// The list takes no parameters: any is 400, named.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoQuery {}

/// The service instances the caller may see, newest first.
///
/// A consumer sees those it provisioned, a provider those it sells, an
/// admin all, each with its state, last operation and bindings.
#[utoipa::path(
    get, path = "/service-instances", tag = "buying", operation_id = "listServiceInstances",
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own)", "provider (sold by its cluster)", "admin"]))),
    responses(
        (status = 200, description = "Service instances, newest first", body = Vec<ServiceInstance>),
        (status = 400, description = "A query parameter (this list takes none), named in `field`", body = ErrorBody),
        (status = 403, description = "Not a consumer, provider or admin", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn list(
    state: web::Data<Osb>,
    caller: Caller,
    req: actix_web::HttpRequest,
) -> Result<HttpResponse, BuyError> {
    let who = viewer(&caller)?;
    serde_urlencoded::from_str::<NoQuery>(req.query_string())
        .map_err(crate::buying::contracts::http::query_error)?;
    let store = &state.store;
    let instances = if who.admin {
        store.osb_list_instances(InstancesOf::All).await?
    } else {
        let mut instances = Vec::new();
        if who.consumer {
            let owned = InstancesOf::Owner(&who.subject);
            instances.extend(store.osb_list_instances(owned).await?);
        }
        if who.provider {
            let sold = InstancesOf::Provider(&who.subject);
            instances.extend(store.osb_list_instances(sold).await?);
        }
        instances
    };
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for inst in instances {
        // A caller both consumer and provider may find one instance twice.
        if !may_see(&who, &inst) || !seen.insert(inst.id.clone()) {
            continue;
        }
        if let Some(view) = view(&state, inst).await? {
            out.push(view);
        }
    }
    out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    Ok(HttpResponse::Ok()
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .json(out))
}

/// One service instance: its owner's, its provider's or an admin's.
#[utoipa::path(
    get, path = "/service-instances/{id}", tag = "buying", operation_id = "getServiceInstance",
    params(("id" = String, Path, description = "The instance id the platform chose")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["consumer (own)", "provider (sold by its cluster)", "admin"]))),
    responses(
        (status = 200, description = "The instance", body = ServiceInstance),
        (status = 403, description = "Not a consumer, provider or admin", body = ErrorBody),
        (status = 404, description = "No such instance, or not the caller's", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn get(
    state: web::Data<Osb>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    let who = viewer(&caller)?;
    let missing = || BuyError::not_found(format!("no service instance {id}"));
    let inst = state
        .store
        .osb_get_instance(&id)
        .await?
        .filter(|i| may_see(&who, i))
        .ok_or_else(missing)?;
    let view = view(&state, inst).await?.ok_or_else(missing)?;
    Ok(HttpResponse::Ok()
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .json(view))
}

/// Whether `who` may see `inst`: its owner (a consumer), its selling
/// provider, an admin.
fn may_see(who: &Viewer, inst: &OsbInstance) -> bool {
    who.admin
        || (who.consumer && inst.owner == who.subject)
        || (who.provider && inst.provider.as_deref() == Some(who.subject.as_str()))
}

/// `inst` as listed (None if it went meanwhile), a stale operation shown
/// failed as `last_operation` shows it.
async fn view(state: &Osb, inst: OsbInstance) -> Result<Option<ServiceInstance>, BuyError> {
    let inst = match super::instances::settle(state, inst).await {
        Ok(inst) => inst,
        Err(e) if e.status == StatusCode::GONE => return Ok(None),
        Err(e) => return Err(from_osb(e)),
    };
    let mut bindings = Vec::new();
    for b in state.store.osb_bindings_of(&inst.id).await? {
        bindings.push(binding(b)?);
    }
    bindings.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    let last_operation = inst.operation.as_ref().map(operation).transpose()?;
    let state = match &last_operation {
        Some(op) if op.state == OperationState::InProgress => match op.kind {
            OperationType::Provision => InstanceState::Provisioning,
            OperationType::Deprovision => InstanceState::Deprovisioning,
            OperationType::Update | OperationType::Bind | OperationType::Unbind => {
                InstanceState::Updating
            }
        },
        _ if inst.provisioned => InstanceState::Ready,
        _ => InstanceState::Failed,
    };
    Ok(Some(ServiceInstance {
        parameters: answered_parameters(inst.parameters.as_deref()),
        id: inst.id,
        owner: inst.owner,
        offer_id: inst.offer_id,
        plan_id: inst.plan_key,
        osb: OsbPlanIds {
            service_id: inst.service_id,
            plan_id: inst.plan_id,
        },
        kind: if inst.service {
            OfferKind::Service
        } else {
            OfferKind::Capacity
        },
        cluster_id: inst.provider,
        contract_id: inst.reservation_id,
        state,
        last_operation,
        bindings,
        created_at: inst.created_at,
    }))
}

fn binding(b: OsbBinding) -> Result<InstanceBinding, BuyError> {
    let last_operation = b.operation.as_ref().map(operation).transpose()?;
    let state = match &last_operation {
        Some(op) => match (op.kind, op.state) {
            (OperationType::Unbind, OperationState::InProgress) => BindingState::Deleting,
            (_, OperationState::InProgress) => BindingState::Creating,
            (OperationType::Bind, OperationState::Failed) => BindingState::Failed,
            _ => BindingState::Bound,
        },
        None => BindingState::Bound,
    };
    Ok(InstanceBinding {
        parameters: answered_parameters(b.parameters.as_deref()),
        id: b.id,
        state,
        last_operation,
        created_at: b.created_at,
    })
}

/// A stored operation on the wire. Its kind goes through its serde name,
/// the one spelling both sides share, so a kind the records gain is a
/// clear error here rather than a silent guess.
fn operation(op: &Operation) -> Result<InstanceOperation, BuyError> {
    let kind = serde_json::to_value(op.kind)
        .and_then(serde_json::from_value::<OperationType>)
        .map_err(|e| BuyError::internal(format!("operation {}: {e}", op.id)))?;
    Ok(InstanceOperation {
        operation: op.id.clone(),
        kind,
        state: op.state,
        description: op.description.clone(),
        started_at: op.started_at,
    })
}

/// An OSB record error in the REST shape: the store unreachable stays 503.
fn from_osb(e: super::OsbError) -> BuyError {
    if e.status == StatusCode::SERVICE_UNAVAILABLE {
        BuyError::Api(ApiError::Unavailable(e.description))
    } else {
        BuyError::internal(e.description)
    }
}

/// This module's part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(list, get),
    components(schemas(
        ServiceInstance,
        InstanceBinding,
        InstanceOperation,
        InstanceState,
        BindingState,
        OperationType,
        OsbPlanIds,
    ))
)]
pub struct ListingDoc;
