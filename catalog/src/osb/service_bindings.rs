//! Bindings of service instances (issue 32), as OSB v2.17 has asynchronous
//! bindings work. The platform's requests only record what it wants; the
//! instance's provider does the work and reports
//! ([`super::provider_bindings`]):
//!
//! - bind needs `accepts_incomplete=true` (422 `AsyncRequired`), and
//!   `parameters.namespace` and `parameters.secretName` (where the
//!   customer wants the credentials Secret: a DNS-1123 label and
//!   subdomain; 400 naming them) besides the plan's binding schema; it
//!   answers 202 with an `operation` while the provider works (the same
//!   request again: 202 with the same operation), 200 with the
//!   credentials once made, 409 for other attributes;
//! - fetching answers 404 while the binding is being created (or after its
//!   creation failed), then the credentials;
//! - `last_operation` follows the operation; 410 once an unbind finished;
//! - unbind needs `accepts_incomplete=true` too, answers 202 and leaves the
//!   binding `deleting` for the provider; its `succeeded` removes it.
//!
//! Each bind and unbind request also stamps the instance's contract
//! (`bindingsChangedAt`, [`bindings_changed`]): that write is what carries
//! the news to the provider's controller on the contract change stream.
//!
//! The synchronous bindings of capacity offers are [`super::bindings`].

use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use serde_json::{json, Value};

use super::error::OsbError;
use super::instances::{busy, new_operation};
use super::model::{
    answered_parameters, stored_parameters, OperationKind, OperationState, OsbBinding, OsbInstance,
};
use super::provider_bindings::credentials_of;
use super::Osb;
use catalog_client::wire::names::{is_dns_label, is_dns_subdomain};

/// 400 unless `parameters` say where the customer wants the Secret:
/// `namespace` (a DNS-1123 label) and `secretName` (a DNS-1123 subdomain).
pub fn check_target(parameters: Option<&Value>) -> Result<(), OsbError> {
    for (name, rule, valid) in [
        (
            "namespace",
            "a DNS-1123 label (the customer's namespace that receives the credentials Secret)",
            is_dns_label as fn(&str) -> bool,
        ),
        (
            "secretName",
            "a DNS-1123 subdomain (the name of the credentials Secret)",
            is_dns_subdomain,
        ),
    ] {
        match parameters.and_then(|p| p.get(name)) {
            None | Some(Value::Null) => {
                return Err(OsbError::bad_request(format!(
                    "parameters.{name}: is required to bind a service: {rule}"
                )))
            }
            Some(Value::String(s)) if valid(s) => {}
            Some(_) => {
                return Err(OsbError::bad_request(format!(
                    "parameters.{name}: must be {rule}"
                )))
            }
        }
    }
    Ok(())
}

fn accepted(operation: &str) -> HttpResponse {
    HttpResponse::Accepted().json(json!({ "operation": operation }))
}

/// An answer that carries credentials: never cached on the way.
pub fn with_credentials(status: StatusCode, body: Value) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header(("Cache-Control", "no-store"))
        .json(body)
}

/// The credentials of a created binding, or None while it is not (being
/// created, its creation failed).
fn made_credentials(
    state: &Osb,
    inst: &OsbInstance,
    b: &OsbBinding,
) -> Result<Option<Value>, OsbError> {
    let created = b
        .operation
        .as_ref()
        .is_some_and(|op| op.kind != OperationKind::Bind || op.state == OperationState::Succeeded);
    if !created {
        return Ok(None);
    }
    let provider = inst.provider.as_deref().unwrap_or_default();
    Ok(credentials_of(state, provider, &inst.id, b)?.map(|c| json!(c)))
}

/// Bind service instance `inst` (checked bindable, its plan's binding
/// schema passed): record the binding for its provider.
pub async fn bind(
    state: &Osb,
    inst: &OsbInstance,
    binding_id: &str,
    digest: String,
    parameters: &Option<Value>,
) -> Result<HttpResponse, OsbError> {
    check_target(parameters.as_ref())?;
    let operation = new_operation(OperationKind::Bind)?;
    let op_id = operation.id.clone();
    let binding = OsbBinding {
        id: binding_id.to_string(),
        instance_id: inst.id.clone(),
        owner: inst.owner.clone(),
        request_digest: digest.clone(),
        parameters: stored_parameters(parameters),
        created_at: crate::store::now(),
        service: true,
        operation: Some(operation),
        credentials: None,
        revision: 1,
    };
    if state.store.osb_insert_binding(&binding).await? {
        tracing::info!(instance = %inst.id, binding = %binding_id, operation = %op_id, "service binding requested: waiting for the provider");
        bindings_changed(state, &inst.id).await;
        return Ok(accepted(&op_id));
    }
    let existing = state
        .store
        .osb_get_binding(binding_id)
        .await?
        .filter(|b| b.instance_id == inst.id && b.request_digest == digest)
        .ok_or_else(|| {
            OsbError::conflict(format!(
                "service binding {binding_id} already exists with different attributes"
            ))
        })?;
    if let Some(op) = existing.running() {
        return match op.kind {
            OperationKind::Bind => Ok(accepted(&op.id)),
            _ => Err(busy(op)),
        };
    }
    if let Some(credentials) = made_credentials(state, inst, &existing)? {
        return Ok(with_credentials(
            StatusCode::OK,
            json!({ "credentials": credentials }),
        ));
    }
    // Its creation failed: the platform tries again; start afresh.
    let expected = existing.revision;
    let retry = OsbBinding {
        operation: binding.operation,
        credentials: None,
        revision: expected + 1,
        ..existing
    };
    if !state.store.osb_replace_binding(&retry, expected).await? {
        return Err(OsbError::concurrency(
            "this service binding changed meanwhile; retry",
        ));
    }
    bindings_changed(state, &inst.id).await;
    Ok(accepted(&op_id))
}

/// Stamp `bindingsChangedAt` on the contract of instance `instance_id`, so
/// its provider's controller learns on the contract change stream that a
/// binding waits for it. The binding is already stored: if the stamp
/// cannot be written, the request still succeeded and the provider finds
/// the binding at its next resync (`--poll-interval`), so this only warns.
pub async fn bindings_changed(state: &Osb, instance_id: &str) {
    let reservation = match state.store.osb_get_instance(instance_id).await {
        Ok(Some(inst)) => inst.reservation_id,
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(instance = %instance_id, %error, "cannot read the instance to tell its provider of a binding; it sees it at its next resync");
            return;
        }
    };
    let Some(id) = reservation else { return };
    let now = crate::store::now();
    let stamp: crate::buying::store::Decide = std::sync::Arc::new(move |r| {
        crate::buying::model::contract_change(r, |r| {
            if let Some(terms) = r.contract.as_mut() {
                terms.bindings_changed_at = Some(now);
            }
        })
    });
    if let Err(error) = state.buying.store.update(&id, stamp).await {
        tracing::warn!(instance = %instance_id, contract = %id, %error, "cannot stamp the contract for its provider; it sees the binding at its next resync");
    }
}

/// `GET` a service binding: its credentials once its provider made them.
pub fn fetch(state: &Osb, inst: &OsbInstance, b: &OsbBinding) -> Result<HttpResponse, OsbError> {
    if let Some(op) = b.running() {
        return Err(OsbError::not_found(format!(
            "service binding {} is not ready: {}",
            b.id,
            match op.kind {
                OperationKind::Unbind => "it is being deleted",
                _ => "it is being created",
            }
        )));
    }
    let credentials = made_credentials(state, inst, b)?.ok_or_else(|| {
        OsbError::not_found(format!(
            "service binding {} has no credentials: its creation failed",
            b.id
        ))
    })?;
    Ok(with_credentials(
        StatusCode::OK,
        json!({
            "credentials": credentials,
            "parameters": answered_parameters(b.parameters.as_deref()),
        }),
    ))
}

/// `DELETE` a service binding: leave it `deleting` for its provider.
pub async fn unbind(state: &Osb, b: OsbBinding, accepts: bool) -> Result<HttpResponse, OsbError> {
    if !accepts {
        return Err(OsbError::async_required());
    }
    if let Some(op) = b.running() {
        return match op.kind {
            OperationKind::Unbind => Ok(accepted(&op.id)),
            _ => Err(busy(op)),
        };
    }
    let expected = b.revision;
    let mut operation = new_operation(OperationKind::Unbind)?;
    operation.description = "waiting for the provider to remove the binding".into();
    let op_id = operation.id.clone();
    let marked = OsbBinding {
        operation: Some(operation),
        revision: expected + 1,
        ..b
    };
    if !state.store.osb_replace_binding(&marked, expected).await? {
        return Err(OsbError::concurrency(
            "this service binding changed meanwhile; retry",
        ));
    }
    tracing::info!(instance = %marked.instance_id, binding = %marked.id, operation = %op_id, "service unbinding: waiting for the provider");
    bindings_changed(state, &marked.instance_id).await;
    Ok(accepted(&op_id))
}

/// A service binding's `last_operation`: its operation's state (400 for
/// an `operation` that is not its last one).
pub fn last_operation(b: &OsbBinding, asked: Option<&String>) -> Result<HttpResponse, OsbError> {
    let Some(op) = &b.operation else {
        return Ok(HttpResponse::Ok().json(json!({ "state": "succeeded" })));
    };
    if let Some(asked) = asked.filter(|a| **a != op.id) {
        return Err(OsbError::bad_request(format!(
            "operation: {asked} is not the last operation of service binding {}",
            b.id
        )));
    }
    let mut resp = HttpResponse::Ok();
    if op.state == OperationState::InProgress {
        resp.insert_header(("Retry-After", "1"));
    }
    Ok(resp.json(json!({ "state": op.state, "description": op.description })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_required_and_named() {
        assert!(check_target(Some(
            &json!({ "namespace": "app", "secretName": "db.creds" })
        ))
        .is_ok());
        for (parameters, field) in [
            (None, "parameters.namespace"),
            (Some(json!({ "secretName": "db" })), "parameters.namespace"),
            (
                Some(json!({ "namespace": "App", "secretName": "db" })),
                "parameters.namespace",
            ),
            (Some(json!({ "namespace": "app" })), "parameters.secretName"),
            (
                Some(json!({ "namespace": "app", "secretName": "a/b" })),
                "parameters.secretName",
            ),
            (
                Some(json!({ "namespace": "app", "secretName": 5 })),
                "parameters.secretName",
            ),
        ] {
            let e = check_target(parameters.as_ref()).unwrap_err();
            assert_eq!(e.status.as_u16(), 400);
            assert!(
                e.description.starts_with(field),
                "{field}: {}",
                e.description
            );
        }
    }
}
