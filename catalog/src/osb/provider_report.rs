//! `PUT /provider/contracts/{id}/service`: the provider that sold a
//! service reports where it is with the service a contract bought through
//! the Open Service Broker, so `last_operation` tells the truth.
//!
//! The report settles the operation waiting on it: while provisioning,
//! `succeeded` makes the instance provisioned (bindable), `failed` fails
//! it; while deprovisioning, `succeeded` removes the instance (then
//! `last_operation` answers 410), `failed` fails the deprovisioning.
//! `in progress` only updates the description platforms read. While
//! updating ([`super::update`]), `succeeded` settles the update and
//! cancels the contract a plan change replaced; `failed` puts the instance
//! back as it was (plan, parameters, contract) and cancels the contract
//! the plan change bought. The instance stays provisioned either way.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use super::instances::deprovision_work;
use super::model::{OperationKind, OsbInstance};
use super::sold::sold_instance;
use super::Osb;
use crate::auth::{Caller, Role};
use crate::http::{read_json_body, ApiError, ErrorBody, FieldError};
use catalog_client::wire::{ServiceReport, ServiceState};

/// Longest `description` accepted.
const MAX_DESCRIPTION: usize = 1024;

/// The instance as `report` leaves it, or None when the report removes it
/// (a finished deprovisioning). Pure: the caller writes.
fn apply(mut inst: OsbInstance, report: &ServiceReport) -> Result<Option<OsbInstance>, ApiError> {
    let running = inst
        .running()
        .filter(|_| inst.awaiting_provider)
        .map(|op| op.kind)
        .ok_or_else(|| {
            ApiError::Conflict(format!(
                "service instance {} has no operation waiting for the provider's report",
                inst.id
            ))
        })?;
    if running == OperationKind::Update
        && inst.operation.as_ref().map(|op| &op.id) != report.update.as_ref()
    {
        return Err(ApiError::Conflict(format!(
            "service instance {} is being updated ({}): this report does not answer that update",
            inst.id,
            inst.operation.as_ref().map_or("", |op| op.id.as_str())
        )));
    }
    let finished = report.state != ServiceState::InProgress;
    if finished && running == OperationKind::Deprovision && !report.removal {
        return Err(ApiError::Conflict(format!(
            "service instance {} is being deprovisioned: this report does not answer the removal",
            inst.id
        )));
    }
    if finished && running == OperationKind::Deprovision && report.state == ServiceState::Succeeded
    {
        return Ok(None);
    }
    if let Some(op) = inst.operation.as_mut() {
        op.state = report.state;
        if let Some(d) = &report.description {
            op.description = d.clone();
        }
        if finished && running == OperationKind::Update && report.state == ServiceState::Failed {
            op.description = format!(
                "the update failed; the instance keeps its plan and parameters: {}",
                op.description
            );
        }
    }
    if finished {
        inst.awaiting_provider = false;
        inst.provisioned = match running {
            OperationKind::Update => true,
            _ => running == OperationKind::Provision && report.state == ServiceState::Succeeded,
        };
        if let Some(previous) = inst
            .update
            .take()
            .filter(|_| report.state == ServiceState::Failed)
        {
            inst.plan_id = previous.plan_id;
            inst.plan_key = previous.plan_key;
            inst.parameters = previous.parameters;
            if previous.reservation_id.is_some() {
                inst.reservation_id = previous.reservation_id;
                inst.instance_contract_id = previous.instance_contract_id;
            }
        }
    }
    inst.revision += 1;
    Ok(Some(inst))
}

/// The contract an update settled by this report leaves behind, to cancel:
/// the replaced one when the plan change succeeded, the new one when it
/// failed (None: no plan change settled).
fn retired(before: &OsbInstance, after: &OsbInstance) -> Option<String> {
    let replaced = before.update.as_ref()?.reservation_id.clone()?;
    if after.update.is_some() {
        return None;
    }
    if after.reservation_id == before.reservation_id {
        Some(replaced)
    } else {
        before.reservation_id.clone()
    }
}

fn check(report: &ServiceReport) -> Result<(), ApiError> {
    check_description(&report.description)
}

/// A report's `description`: what platforms read, so bounded and printable.
pub(crate) fn check_description(description: &Option<String>) -> Result<(), ApiError> {
    if let Some(d) = description {
        if d.len() > MAX_DESCRIPTION {
            return Err(ApiError::BadRequest(FieldError::new(
                "description",
                format!("must be at most {MAX_DESCRIPTION} bytes"),
            )));
        }
        if d.chars().any(char::is_control) {
            return Err(ApiError::BadRequest(FieldError::new(
                "description",
                "must not contain control characters",
            )));
        }
    }
    Ok(())
}

/// Report the state of the service contract `id` bought (Open Service
/// Broker service offers): settles the instance's operation waiting on it.
#[utoipa::path(
    put, path = "/provider/contracts/{id}/service", tag = "osb", operation_id = "reportContractService",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    request_body = ServiceReport,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider (sold by its cluster)"]))),
    responses(
        (status = 200, description = "Recorded: the instance's operation as `last_operation` now reports it (`state`, `description`)", body = super::responses::OsbLastOperation),
        (status = 400, description = "Invalid body; `field` names the bad field (nothing changed)", body = ErrorBody),
        (status = 401, description = "No or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Not a provider", body = ErrorBody),
        (status = 404, description = "No service instance bought as this contract from the caller's cluster", body = ErrorBody),
        (status = 409, description = "No operation of the instance waits for a report (or it changed meanwhile: retry)", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn put(
    state: web::Data<Osb>,
    caller: Caller,
    id: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(Role::Provider)?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let report: ServiceReport = crate::http::parse_json(&body).map_err(ApiError::BadRequest)?;
    check(&report)?;
    let inst = sold_instance(&state, &caller, &id).await?;
    let expected = inst.revision;
    let Some(next) = apply(inst.clone(), &report)? else {
        deprovision_work(&state, &inst)
            .await
            .map_err(|e| ApiError::Conflict(e.description))?;
        tracing::info!(instance = %inst.id, contract = %id, "service instance deprovisioned: its provider removed the service");
        return Ok(HttpResponse::Ok().json(json!({
            "state": "succeeded", "description": "the service is gone",
        })));
    };
    if !state.store.osb_replace_instance(&next, expected).await? {
        return Err(ApiError::Conflict(format!(
            "service instance {} changed meanwhile; retry",
            next.id
        )));
    }
    if let Some(contract) = retired(&inst, &next) {
        // The instance no longer stands on it: its unit is freed. A
        // failure leaves a contract no instance uses, which the catalog's
        // owner can cancel; the report itself is recorded.
        match super::instances::cancel_contract(&state, &contract).await {
            Ok(()) => {
                tracing::info!(instance = %next.id, %contract, "the contract an update left behind cancelled")
            }
            Err(e) => {
                tracing::warn!(instance = %next.id, %contract, error = %e.description, "cannot cancel the contract an update left behind")
            }
        }
    }
    tracing::info!(instance = %next.id, contract = %id, state = ?report.state, "provider reported the service's state");
    let op = next.operation.as_ref();
    Ok(HttpResponse::Ok().json(json!({
        "state": op.map(|o| o.state),
        "description": op.map(|o| o.description.clone()),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::osb::model::{Operation, OperationState};

    fn waiting(kind: OperationKind) -> OsbInstance {
        serde_json::from_value(json!({
            "id": "i", "owner": "o", "serviceID": "s", "planID": "p", "offerID": "db",
            "planKey": "small", "requestDigest": "d", "provisioned": kind == OperationKind::Deprovision,
            "service": true, "provider": "c1", "awaitingProvider": true, "revision": 3,
            "createdAt": "2026-01-01T00:00:00Z", "reservationId": "r1",
            "operation": Operation {
                id: "op".into(), kind, state: OperationState::InProgress,
                description: "waiting".into(), started_at: crate::store::now(),
            },
        }))
        .unwrap()
    }

    fn report(state: ServiceState) -> ServiceReport {
        ServiceReport {
            state,
            description: Some("step".into()),
            update: None,
            removal: false,
        }
    }

    #[test]
    fn a_report_settles_the_operation_waiting_on_it() {
        let done = apply(
            waiting(OperationKind::Provision),
            &report(ServiceState::Succeeded),
        )
        .unwrap()
        .unwrap();
        assert!(done.provisioned && !done.awaiting_provider);
        assert_eq!(
            done.operation.as_ref().unwrap().state,
            OperationState::Succeeded
        );
        assert_eq!(done.revision, 4);
        let still = apply(
            waiting(OperationKind::Provision),
            &report(ServiceState::InProgress),
        )
        .unwrap()
        .unwrap();
        assert!(!still.provisioned && still.awaiting_provider);
        assert_eq!(still.operation.as_ref().unwrap().description, "step");
        let failed = apply(
            waiting(OperationKind::Provision),
            &report(ServiceState::Failed),
        )
        .unwrap()
        .unwrap();
        assert!(!failed.provisioned);
        assert_eq!(
            failed.operation.as_ref().unwrap().state,
            OperationState::Failed
        );
        let removed = ServiceReport {
            removal: true,
            ..report(ServiceState::Succeeded)
        };
        assert!(apply(waiting(OperationKind::Deprovision), &removed)
            .unwrap()
            .is_none());
    }

    /// A provisioning report that arrives after the deprovisioning began
    /// (sent before the provider read the cancellation) settles nothing.
    #[test]
    fn a_late_report_does_not_settle_a_removal() {
        for state in [ServiceState::Succeeded, ServiceState::Failed] {
            match apply(waiting(OperationKind::Deprovision), &report(state)) {
                Err(ApiError::Conflict(why)) => assert!(why.contains("removal"), "{why}"),
                other => panic!("{state:?}: {other:?}"),
            }
        }
        let failed = ServiceReport {
            removal: true,
            ..report(ServiceState::Failed)
        };
        let kept = apply(waiting(OperationKind::Deprovision), &failed)
            .unwrap()
            .unwrap();
        assert_eq!(kept.operation.unwrap().state, OperationState::Failed);
    }

    /// Issue 45: an update the provider fails puts the instance back (plan,
    /// parameters, contract) and retires the contract it bought; one it
    /// completes retires the contract it replaced. Either way the instance
    /// stays provisioned.
    #[test]
    fn an_update_settles_forward_or_back() {
        let mut updating = waiting(OperationKind::Update);
        updating.provisioned = true;
        updating.plan_key = "large".into();
        updating.parameters = Some(r#"{"size":3}"#.into());
        updating.reservation_id = Some("r2".into());
        updating.instance_contract_id = Some("r1".into());
        updating.update = Some(crate::osb::model::PendingUpdate {
            plan_id: "p".into(),
            plan_key: "small".into(),
            parameters: Some(r#"{"size":2}"#.into()),
            reservation_id: Some("r1".into()),
            instance_contract_id: None,
        });
        // A report from before the update was read (none, or another's).
        for stale in [None, Some("older".to_string())] {
            let mut r = report(ServiceState::Succeeded);
            r.update = stale;
            assert!(matches!(
                apply(updating.clone(), &r),
                Err(ApiError::Conflict(_))
            ));
        }
        let done = apply(updating.clone(), &answer(ServiceState::Succeeded))
            .unwrap()
            .unwrap();
        assert!(done.provisioned && done.update.is_none());
        assert_eq!(
            (done.plan_key.as_str(), done.reservation_id.as_deref()),
            ("large", Some("r2"))
        );
        assert_eq!(retired(&updating, &done).as_deref(), Some("r1"));
        let back = apply(updating.clone(), &answer(ServiceState::Failed))
            .unwrap()
            .unwrap();
        assert!(back.provisioned && back.update.is_none());
        assert_eq!(
            (
                back.plan_key.as_str(),
                back.parameters.as_deref(),
                back.reservation_id.as_deref(),
                back.instance_contract_id.as_deref()
            ),
            ("small", Some(r#"{"size":2}"#), Some("r1"), None)
        );
        assert_eq!(retired(&updating, &back).as_deref(), Some("r2"));
        let description = &back.operation.as_ref().unwrap().description;
        assert!(
            description.starts_with("the update failed"),
            "{description}"
        );
        // Still going: nothing settled, nothing retired.
        let going = apply(updating.clone(), &answer(ServiceState::InProgress))
            .unwrap()
            .unwrap();
        assert!(going.update.is_some());
        assert_eq!(retired(&updating, &going), None);
    }

    fn answer(state: ServiceState) -> ServiceReport {
        ServiceReport {
            update: Some("op".into()),
            ..report(state)
        }
    }

    #[test]
    fn nothing_waiting_is_a_conflict() {
        let done = apply(
            waiting(OperationKind::Provision),
            &report(ServiceState::Succeeded),
        )
        .unwrap()
        .unwrap();
        assert!(matches!(
            apply(done, &report(ServiceState::Succeeded)),
            Err(ApiError::Conflict(_))
        ));
    }
}
