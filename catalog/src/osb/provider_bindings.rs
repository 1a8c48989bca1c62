//! The provider's side of service bindings (issue 32). Binding a service
//! instance is asynchronous: the platform's bind or unbind leaves the
//! binding pending, its provider reads the pending ones
//! (`GET /provider/contracts/{id}/bindings`: `creating` or `deleting`,
//! with the bind request's `parameters`) and reports on each
//! (`PUT /provider/contracts/{id}/bindings/{bindingID}`): `in progress`
//! updates the description the platform polls; `succeeded` on a creation
//! stores the credentials (required then, refused otherwise; sealed, see
//! [`super::sealed`]) that the platform fetches; `succeeded` on a deletion
//! removes the binding (its `last_operation` then answers 410); `failed`
//! fails the operation.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use super::model::{answered_parameters, OperationKind, OsbBinding};
use super::provider_report::check_description;
use super::sealed;
use super::sold::sold_instance;
use super::Osb;
use crate::auth::{Caller, Role};
use crate::http::{read_json_body, ApiError, ErrorBody, FieldError};
use catalog_client::wire::{is_credential_key, BindingReport, PendingBinding, ServiceState};

/// Largest credentials accepted (keys and values together): they become
/// one Secret, and Kubernetes keeps a Secret under 1 MiB; a binding's
/// connection details are far smaller.
pub const MAX_CREDENTIALS_BYTES: usize = 64 * 1024;

/// The pending bindings of a service contract, for its provider.
#[utoipa::path(
    get, path = "/provider/contracts/{id}/bindings", tag = "osb", operation_id = "listContractBindings",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider (sold by its cluster)"]))),
    responses(
        (status = 200, description = "The bindings waiting for the provider (`creating` or `deleting`), by binding id", body = Vec<PendingBinding>),
        (status = 401, description = "No or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Not a provider", body = ErrorBody),
        (status = 404, description = "No service instance bought as this contract from the caller's cluster", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn list(
    state: web::Data<Osb>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Role::Provider)?;
    let inst = sold_instance(&state, &caller, &id).await?;
    let mut pending: Vec<PendingBinding> = state
        .store
        .osb_bindings_of(&inst.id)
        .await?
        .into_iter()
        .filter_map(|b| {
            Some(PendingBinding {
                state: b.pending()?,
                parameters: answered_parameters(b.parameters.as_deref()),
                binding_id: b.id,
            })
        })
        .collect();
    pending.sort_by(|a, b| a.binding_id.cmp(&b.binding_id));
    Ok(HttpResponse::Ok().json(pending))
}

/// 400 unless `credentials` come exactly with a succeeded creation, keyed
/// as Secret data keys and within [`MAX_CREDENTIALS_BYTES`].
fn check_credentials(kind: OperationKind, report: &BindingReport) -> Result<(), ApiError> {
    let bad = |message: String| ApiError::BadRequest(FieldError::new("credentials", message));
    let creating_done = kind == OperationKind::Bind && report.state == ServiceState::Succeeded;
    let Some(credentials) = &report.credentials else {
        if creating_done {
            return Err(bad(
                "are required when a binding's creation succeeded: the connection details the customer's application reads".into(),
            ));
        }
        return Ok(());
    };
    if !creating_done {
        return Err(bad(
            "are taken only with `succeeded` on a binding being created".into(),
        ));
    }
    if let Some(key) = credentials.keys().find(|k| !is_credential_key(k)) {
        return Err(ApiError::BadRequest(FieldError::new(
            format!("credentials.{key}"),
            "a credential key must be a Secret data key: 1 to 253 of A-Z a-z 0-9 - _ ., not `.` or `..`",
        )));
    }
    let size: usize = credentials.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_CREDENTIALS_BYTES {
        return Err(bad(format!(
            "are {size} bytes; at most {MAX_CREDENTIALS_BYTES} are accepted"
        )));
    }
    Ok(())
}

/// The binding as `report` leaves it, with `sealed` credentials (already
/// checked), or None when the report removes it (a finished deletion).
/// Pure: the caller writes.
fn apply(
    mut b: OsbBinding,
    report: &BindingReport,
    sealed: Option<String>,
) -> Result<Option<OsbBinding>, ApiError> {
    let kind = b.running().map(|op| op.kind).ok_or_else(|| {
        ApiError::Conflict(format!(
            "service binding {} has no operation waiting for the provider's report",
            b.id
        ))
    })?;
    if kind == OperationKind::Unbind && report.state == ServiceState::Succeeded {
        return Ok(None);
    }
    if let Some(op) = b.operation.as_mut() {
        op.state = report.state;
        if let Some(d) = &report.description {
            op.description = d.clone();
        }
    }
    if sealed.is_some() {
        b.credentials = sealed;
    }
    b.revision += 1;
    Ok(Some(b))
}

/// Report where the provider is with one pending binding of the service
/// contract `id`.
#[utoipa::path(
    put, path = "/provider/contracts/{id}/bindings/{binding_id}", tag = "osb", operation_id = "reportContractBinding",
    params(
        ("id" = String, Path, description = "Contract (purchase) id"),
        ("binding_id" = String, Path, description = "The binding id (`bindingID` of the pending binding)"),
    ),
    request_body = BindingReport,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider (sold by its cluster)"]))),
    responses(
        (status = 200, description = "Recorded: the binding's operation as its `last_operation` now reports it (`state`, `description`)", body = super::responses::OsbLastOperation),
        (status = 400, description = "Invalid body; `field` names the bad field (`credentials` missing on a succeeded creation, given otherwise, or a bad key); nothing changed", body = ErrorBody),
        (status = 401, description = "No or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Not a provider", body = ErrorBody),
        (status = 404, description = "No such binding of a service instance bought as this contract from the caller's cluster", body = ErrorBody),
        (status = 409, description = "No operation of the binding waits for a report (or it changed meanwhile: retry)", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn put(
    state: web::Data<Osb>,
    caller: Caller,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(Role::Provider)?;
    let (id, binding_id) = path.into_inner();
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let report: BindingReport = crate::http::parse_json(&body).map_err(ApiError::BadRequest)?;
    check_description(&report.description)?;
    let inst = sold_instance(&state, &caller, &id).await?;
    let binding = state
        .store
        .osb_get_binding(&binding_id)
        .await?
        .filter(|b| b.instance_id == inst.id && b.service)
        .ok_or_else(|| {
            ApiError::NotFound(format!("no service binding {binding_id} of contract {id}"))
        })?;
    if let Some(op) = binding.running() {
        check_credentials(op.kind, &report)?;
    }
    let sealed = match &report.credentials {
        Some(c) => Some(sealed::seal_credentials(
            &state.buying.providers,
            &caller.cluster_id,
            &inst.id,
            &binding_id,
            c,
        )?),
        None => None,
    };
    let expected = binding.revision;
    match apply(binding, &report, sealed)? {
        None => {
            state.store.osb_delete_binding(&binding_id).await?;
            tracing::info!(instance = %inst.id, binding = %binding_id, contract = %id, "service binding removed by its provider");
            Ok(HttpResponse::Ok().json(json!({
                "state": "succeeded", "description": "the binding is gone",
            })))
        }
        Some(next) => {
            if !state.store.osb_replace_binding(&next, expected).await? {
                return Err(ApiError::Conflict(format!(
                    "service binding {binding_id} changed meanwhile; retry"
                )));
            }
            tracing::info!(instance = %inst.id, binding = %binding_id, contract = %id, state = ?report.state, "provider reported the binding's state");
            let op = next.operation.as_ref();
            Ok(HttpResponse::Ok().json(json!({
                "state": op.map(|o| o.state),
                "description": op.map(|o| o.description.clone()),
            })))
        }
    }
}

/// The credentials stored for `b` of instance `instance` sold by
/// `provider`, opened (None before its provider reported them).
pub(crate) fn credentials_of(
    state: &Osb,
    provider: &str,
    instance: &str,
    b: &OsbBinding,
) -> Result<Option<BTreeMap<String, String>>, ApiError> {
    b.credentials
        .as_deref()
        .map(|s| sealed::open_credentials(&state.buying.providers, provider, instance, &b.id, s))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::osb::model::{Operation, OperationState};

    fn pending(kind: OperationKind) -> OsbBinding {
        serde_json::from_value(json!({
            "id": "b1", "instanceID": "i", "owner": "o", "requestDigest": "d",
            "createdAt": "2026-01-01T00:00:00Z", "service": true, "revision": 2,
            "operation": Operation {
                id: "op".into(), kind, state: OperationState::InProgress,
                description: "waiting".into(), started_at: crate::store::now(),
            },
        }))
        .unwrap()
    }

    fn report(state: ServiceState, credentials: Option<&[(&str, &str)]>) -> BindingReport {
        BindingReport {
            state,
            description: Some("step".into()),
            credentials: credentials.map(|c| {
                c.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
        }
    }

    #[test]
    fn credentials_come_with_a_succeeded_creation_only() {
        let pw: &[(&str, &str)] = &[("password", "x")];
        assert!(check_credentials(
            OperationKind::Bind,
            &report(ServiceState::Succeeded, Some(pw))
        )
        .is_ok());
        for (kind, state, creds) in [
            (OperationKind::Bind, ServiceState::Succeeded, None),
            (OperationKind::Bind, ServiceState::InProgress, Some(pw)),
            (OperationKind::Unbind, ServiceState::Succeeded, Some(pw)),
        ] {
            let e = check_credentials(kind, &report(state, creds)).unwrap_err();
            assert_eq!(
                e.body().field.as_deref(),
                Some("credentials"),
                "{kind:?} {state:?}"
            );
        }
        let e = check_credentials(
            OperationKind::Bind,
            &report(ServiceState::Succeeded, Some(&[("a/b", "x")])),
        )
        .unwrap_err();
        assert_eq!(e.body().field.as_deref(), Some("credentials.a/b"));
        let big = "x".repeat(MAX_CREDENTIALS_BYTES);
        let e = check_credentials(
            OperationKind::Bind,
            &report(ServiceState::Succeeded, Some(&[("k", big.as_str())])),
        )
        .unwrap_err();
        assert_eq!(e.body().field.as_deref(), Some("credentials"));
        assert!(
            check_credentials(OperationKind::Unbind, &report(ServiceState::Failed, None)).is_ok()
        );
    }

    #[test]
    fn a_report_settles_the_binding_operation() {
        let Some(done) = apply(
            pending(OperationKind::Bind),
            &report(ServiceState::Succeeded, None),
            Some("sealed".into()),
        )
        .unwrap() else {
            panic!("kept")
        };
        assert_eq!(
            done.operation.as_ref().unwrap().state,
            OperationState::Succeeded
        );
        assert_eq!(done.credentials.as_deref(), Some("sealed"));
        assert_eq!((done.revision, done.pending()), (3, None));
        assert_eq!(
            apply(
                pending(OperationKind::Unbind),
                &report(ServiceState::Succeeded, None),
                None
            )
            .unwrap(),
            None
        );
        let Some(failed) = apply(
            pending(OperationKind::Unbind),
            &report(ServiceState::Failed, None),
            None,
        )
        .unwrap() else {
            panic!("kept")
        };
        assert_eq!(
            failed.operation.as_ref().unwrap().state,
            OperationState::Failed
        );
        assert!(matches!(
            apply(done, &report(ServiceState::Succeeded, None), None),
            Err(ApiError::Conflict(_))
        ));
    }
}
