//! `PATCH /v2/service_instances/{id}`: updating a service instance.
//!
//! **Service offers** (issue 45): new `parameters` and a new `plan_id` are
//! taken, asynchronously (`accepts_incomplete=true`, else 422
//! `AsyncRequired`): 202 with an `operation`, then `last_operation` says
//! `in progress` until the provider has rendered the instance's objects
//! again and reports `succeeded` or `failed` ([`super::provider_report`]).
//!
//! - `parameters` are checked against the (target) plan's
//!   `schemas.service_instance.update` (400 naming the field) and merged
//!   into the instance's: a key given replaces the one stored, `null`
//!   removes it, keys not given stay.
//! - A plan change is **a new contract replacing the old**: a contract's
//!   cost is the plan's when bought and never changes (what it costs is
//!   its cost over its own life), and a plan's units are held by the
//!   contracts bought on it. So the target plan is bought (422
//!   `PlanUnavailable` when it cannot be: sold out, provider disabled —
//!   nothing changes), the instance moves to the new contract at once, and
//!   the old contract is cancelled when the provider reports the update
//!   `succeeded`. The provider keeps the instance's objects (named after
//!   its first contract, `instanceContractID` of the customer peering) and
//!   renders them with the new plan. Only a plan of the same hosting can
//!   be the target (`plan_updateable`): Liqo does not change how an
//!   offloaded namespace's pods are placed (422 naming both).
//! - A `failed` report puts the instance back as it was (plan, parameters,
//!   contract) and cancels the new contract; the provider renders nothing
//!   it refused, so the objects stay as they were too.
//! - Nothing to change (the current values, a new `context`): 200 `{}`.
//!
//! The provider learns of an update on the contract change stream: a plan
//! change is a new contract; new parameters stamp the contract
//! (`bindingsChangedAt`, [`super::service_bindings::bindings_changed`]).
//!
//! **Capacity offers** declare `plan_updateable: false` and change neither
//! plan nor parameters: 200 `{}` when nothing would change, 422 naming
//! what cannot change, nothing written.
//!
//! Either way: `ConcurrencyError` while an operation runs,
//! `MaintenanceInfoConflict` for a `maintenance_info` (the catalog declares
//! none; a malformed one is a 400, see [`super::maintenance`]).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::catalog::resolve;
use super::error::OsbError;
use super::guard::guard;
use super::instances::{busy, cancel_contract, new_operation, provision_work, settle};
use super::model::{
    answered_parameters, stored_parameters, OperationKind, OsbInstance, PendingUpdate,
};
use super::request::{check_id, object_field, parse, read_body, required_field, Query};
use super::Osb;
use crate::offers::service::{check_parameters, Parameters};
use crate::offers::Offer;
use actix_web::http::StatusCode;

/// An update request (unknown fields are ignored, as the spec asks).
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct UpdateRequest {
    /// The instance's service id.
    #[serde(default)]
    #[schema(required = true, value_type = crate::http::schemas::OsbId)]
    service_id: Option<String>,
    /// The plan to move to: a plan of the same service and hosting
    /// (service offers); absent, null or the instance's plan: unchanged.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    plan_id: Option<String>,
    /// Service offers: merged into the instance's parameters (`null`
    /// removes a key), checked against the plan's update schema.
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

/// `stored` with `update`'s keys: each replaces the stored one, `null`
/// removes it.
pub fn merged(stored: &Value, update: &Value) -> Value {
    let mut out = stored.as_object().cloned().unwrap_or_default();
    if let Some(changes) = update.as_object() {
        for (key, value) in changes {
            if value.is_null() {
                out.remove(key);
            } else {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// 422 unless plan `to` of `offer` may replace plan `from`: both exist and
/// host the service the same way.
pub fn check_plan_change(offer: &Offer, from: &str, to: &str) -> Result<(), OsbError> {
    let hosting = |key: &str| offer.plans.get(key).map(|p| p.hosting);
    match (hosting(from), hosting(to)) {
        (Some(a), Some(b)) if a == b => Ok(()),
        (Some(a), Some(b)) => Err(OsbError::unprocessable(format!(
            "plan_id: plan {to} hosts the service {}, the instance's plan {from} {}: a plan change keeps the hosting (Liqo does not change where an offloaded namespace's pods run); provision a new instance instead",
            hosting_name(b),
            hosting_name(a)
        ))),
        (None, _) => Err(OsbError::unprocessable(format!(
            "plan_id: the instance's plan {from} is no longer sold; it cannot be changed"
        ))),
        (_, None) => Err(OsbError::bad_request(format!(
            "plan_id: service {} has no plan {to}",
            offer.id
        ))),
    }
}

fn hosting_name(h: Option<catalog_client::wire::HostingPolicy>) -> String {
    match serde_json::to_value(h) {
        Ok(Value::String(name)) => name,
        _ => "as Liqo decides".to_string(),
    }
}

/// Update an instance: a service offer's parameters or plan, in the
/// background (202, then `last_operation`); 200 when nothing would change.
#[utoipa::path(
    patch, path = "/v2/service_instances/{instance_id}", tag = "osb", operation_id = "osbUpdate",
    params(
        super::responses::OsbInstancePath,
        ("accepts_incomplete" = Option<bool>, Query, description = "Required (true) to change a service offer's instance: its provider renders it again"),
        super::responses::OsbHeaders,
    ),
    request_body = UpdateRequest,
    security(("osbBasic" = []), ("bearer" = [])),
    extensions(("x-roles" = json!(["platform (osbBasic)", "consumer", "admin"]))),
    responses(
        (status = 200, description = "Nothing to change", body = super::responses::OsbEmpty),
        (status = 202, description = "Updating in the background (service offers)", body = super::responses::OsbAsyncOperation,
            links(
                ("InstanceLastOperation" = (operation_id = "osbInstanceLastOperation", parameters(("instance_id" = "$request.path.instance_id"), ("operation" = "$response.body#/operation")))),
            )),
        super::responses::OsbMalformed,
        super::responses::OsbNoRole,
        (status = 404, description = "No such instance (or another owner's)", body = super::responses::OsbErrorBody),
        (status = 422, description = "Not provisioned, a change that cannot be made, `AsyncRequired`, `ConcurrencyError`, `PlanUnavailable` or `MaintenanceInfoConflict`", body = super::responses::OsbErrorBody),
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
    let accepts = Query::parse(&req)?.accepts_incomplete()?;
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
    let new_plan = r.plan_id.filter(|p| *p != inst.plan_id);
    if !inst.service {
        return unchanged_capacity(&state, &inst, new_plan, r.parameters).await;
    }
    // The plan the instance will be on: its own, or the one asked for.
    let target = match &new_plan {
        None => None,
        Some(plan_id) => {
            let (offer, key) = resolve(&state, &service_id, plan_id).await?;
            check_plan_change(&offer, &inst.plan_key, &key)?;
            Some((plan_id.clone(), key))
        }
    };
    let plan_key = target.as_ref().map_or(inst.plan_key.as_str(), |t| &t.1);
    let current = answered_parameters(inst.parameters.as_deref());
    let parameters = match &r.parameters {
        None => None,
        Some(given) => {
            // What an update may carry is the update schema's to say (400
            // naming the field), before anything else is said about it.
            check_update_parameters(&state, &inst, plan_key, given).await?;
            Some(merged(&current, given)).filter(|p| *p != current)
        }
    };
    if target.is_none() && parameters.is_none() {
        tracing::info!(instance = %id, owner = %platform.owner, "service instance update: nothing to change");
        return Ok(HttpResponse::Ok().json(json!({})));
    }
    if !accepts {
        return Err(OsbError::async_required());
    }
    start(&state, inst, target, parameters).await
}

/// Check an update's `parameters` against plan `key`'s update schema.
async fn check_update_parameters(
    state: &Osb,
    inst: &OsbInstance,
    key: &str,
    parameters: &Value,
) -> Result<(), OsbError> {
    match state.buying.offers.get_offer(&inst.offer_id).await? {
        Some(offer) => check_parameters(&offer, key, Parameters::InstanceUpdate, Some(parameters))
            .map_err(OsbError::bad_request),
        None => Err(OsbError::unprocessable(format!(
            "service instance {}: its offer {} is no longer sold; it cannot be updated",
            inst.id, inst.offer_id
        ))),
    }
}

/// A capacity offer's update: nothing may change (422 naming what would),
/// so 200 `{}`; nothing is written.
async fn unchanged_capacity(
    state: &Osb,
    inst: &OsbInstance,
    new_plan: Option<String>,
    parameters: Option<Value>,
) -> Result<HttpResponse, OsbError> {
    if let Some(plan_id) = new_plan {
        return Err(OsbError::unprocessable(format!(
            "plan_id: plans cannot be changed (plan_updateable is false); instance {} stays on plan {}, not {plan_id}: provision a new instance instead",
            inst.id, inst.plan_id
        )));
    }
    if let Some(parameters) = parameters {
        super::instances::check_instance_parameters(
            state,
            inst,
            Parameters::InstanceUpdate,
            Some(&parameters),
        )
        .await?;
        if parameters != answered_parameters(inst.parameters.as_deref()) {
            return Err(OsbError::unprocessable(
                "parameters: the parameters of a capacity plan's instance cannot be changed",
            ));
        }
    }
    tracing::info!(instance = %inst.id, "service instance update: nothing to change");
    Ok(HttpResponse::Ok().json(json!({})))
}

/// Record the update for the provider (a plan change: bought first) and
/// answer 202.
async fn start(
    state: &Osb,
    inst: OsbInstance,
    target: Option<(String, String)>,
    parameters: Option<Value>,
) -> Result<HttpResponse, OsbError> {
    let new_contract = match &target {
        Some((_, key)) => {
            let moved = OsbInstance {
                plan_key: key.clone(),
                ..inst.clone()
            };
            Some(provision_work(state, &moved).await?)
        }
        None => None,
    };
    let mut operation = new_operation(OperationKind::Update)?;
    operation.description = match (&target, &new_contract) {
        (Some((_, key)), Some(contract)) => format!(
            "moving to plan {key}: contract {contract} bought; waiting for the provider to render the service again"
        ),
        _ => "waiting for the provider to render the service with the new parameters".into(),
    };
    let op_id = operation.id.clone();
    let expected = inst.revision;
    let previous = PendingUpdate {
        plan_id: inst.plan_id.clone(),
        plan_key: inst.plan_key.clone(),
        parameters: inst.parameters.clone(),
        reservation_id: new_contract.as_ref().and(inst.reservation_id.clone()),
        instance_contract_id: inst.instance_contract_id.clone(),
    };
    let (plan_id, plan_key) = target.unwrap_or((inst.plan_id.clone(), inst.plan_key.clone()));
    let next = OsbInstance {
        plan_id,
        plan_key,
        parameters: match parameters {
            Some(p) => stored_parameters(&Some(p)),
            None => inst.parameters.clone(),
        },
        // The objects keep the names of the instance's first contract.
        instance_contract_id: match &new_contract {
            Some(_) => inst
                .instance_contract_id
                .clone()
                .or_else(|| inst.reservation_id.clone()),
            None => inst.instance_contract_id.clone(),
        },
        reservation_id: new_contract.clone().or(inst.reservation_id.clone()),
        update: Some(previous),
        awaiting_provider: true,
        operation: Some(operation),
        revision: expected + 1,
        ..inst
    };
    if !state.store.osb_replace_instance(&next, expected).await? {
        if let Some(contract) = &new_contract {
            let _ = cancel_contract(state, contract).await;
        }
        return Err(OsbError::concurrency(
            "this service instance changed meanwhile; retry",
        ));
    }
    if new_contract.is_none() {
        // The same contract: stamped, so its provider hears of it now.
        super::service_bindings::bindings_changed(state, &next.id).await;
    }
    tracing::info!(instance = %next.id, operation = %op_id, plan = %next.plan_key, contract = ?next.reservation_id, "service instance update: waiting for the provider");
    Ok(HttpResponse::Accepted().json(json!({ "operation": op_id })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::osb::catalog::plan_updateable;

    #[test]
    fn parameters_merge_key_by_key_and_null_removes() {
        let stored = json!({"size": 2, "name": "a", "keep": true});
        let update = json!({"size": 3, "name": null, "new": "x"});
        assert_eq!(
            merged(&stored, &update),
            json!({"size": 3, "keep": true, "new": "x"})
        );
        assert_eq!(merged(&json!({}), &json!({})), json!({}));
    }

    fn offer() -> Offer {
        serde_json::from_value(json!({
            "id": "db", "name": "n", "type": "database", "kind": "service", "description": "",
            "clusterID": "p", "clusterName": "P", "createdAt": "2026-01-01T00:00:00Z",
            "updatedAt": "2026-01-01T00:00:00Z", "version": 1, "plans": {
                "small": {"name": "small", "cost": "1", "hosting": "Remote", "resources": {}},
                "large": {"name": "large", "cost": "5", "hosting": "Remote", "resources": {}},
                "local": {"name": "local", "cost": "2", "hosting": "Local", "resources": {}},
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_plan_changes_only_for_one_of_the_same_hosting() {
        let offer = offer();
        assert!(check_plan_change(&offer, "small", "large").is_ok());
        let e = check_plan_change(&offer, "small", "local").unwrap_err();
        assert_eq!(e.status.as_u16(), 422);
        assert!(
            e.description.starts_with(
                "plan_id: plan local hosts the service Local, the instance's plan small Remote"
            ),
            "{}",
            e.description
        );
        assert_eq!(
            check_plan_change(&offer, "small", "nope")
                .unwrap_err()
                .status
                .as_u16(),
            400
        );
        assert!(plan_updateable(&offer, "small") && plan_updateable(&offer, "large"));
        assert!(!plan_updateable(&offer, "local"));
    }
}
