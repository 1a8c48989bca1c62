//! The customer's side of a service's peering (issue 32): a service runs
//! where its plan's hosting policy says, so its provider offloads the
//! instance's namespace to the customer's cluster — it peers *towards* the
//! customer, as a Liqo consumer of it. For that the customer hands over,
//! in the provisioning request's `context.peering.kubeconfig`, the
//! kubeconfig of a Liqo peering user of its cluster made for the service
//! provider (`liqoctl generate peering-user`). It passes the catalog's one
//! kubeconfig check ([`crate::providers::kubeconfig`]), is kept sealed with
//! the instance ([`super::sealed`]) and is read only by the selling
//! provider: `GET /provider/contracts/{id}/customer-peering`, until the
//! instance is deprovisioned or its contract ends (410).

use actix_web::{web, HttpResponse};
use serde_json::Value;

use super::error::OsbError;
use super::model::{answered_parameters, OperationKind, OsbInstance};
use super::sealed;
use super::sold::sold_instance;
use super::Osb;
use crate::auth::{Caller, Role};
use crate::buying::model::ReservationState;
use crate::buying::BuyError;
use crate::http::{ApiError, ErrorBody};
use crate::providers::kubeconfig;
use catalog_client::wire::CustomerPeering;

/// Where a provisioning request carries the customer's kubeconfig.
pub const FIELD: &str = "context.peering.kubeconfig";

/// The canonical copy of the customer's kubeconfig in a service plan's
/// provisioning `context`: 400 naming [`FIELD`] when it is missing, not a
/// string or refused by the kubeconfig check (the message names the part,
/// never a value).
pub fn from_context(context: &Option<Value>) -> Result<String, OsbError> {
    let given = context
        .as_ref()
        .and_then(|c| c.get("peering"))
        .and_then(|p| p.get("kubeconfig"));
    match given {
        None | Some(Value::Null) => Err(OsbError::bad_request(format!(
            "{FIELD}: is required to provision a service plan: the kubeconfig of a Liqo peering user of your cluster made for the service provider (liqoctl generate peering-user)"
        ))),
        Some(Value::String(text)) => kubeconfig::canonical(text)
            .map_err(|e| OsbError::bad_request(format!("{FIELD}: {e}"))),
        Some(_) => Err(OsbError::bad_request(format!(
            "{FIELD}: must be a string (the kubeconfig's YAML)"
        ))),
    }
}

/// The sealed copy of `context`'s kubeconfig for `instance`, sold by
/// `provider` (see [`from_context`]).
pub fn sealed_from_context(
    state: &Osb,
    provider: &str,
    instance: &str,
    context: &Option<Value>,
) -> Result<String, OsbError> {
    let canonical = from_context(context)?;
    Ok(sealed::seal_customer_peering(
        &state.buying.providers,
        provider,
        instance,
        &canonical,
    )?)
}

/// Why `inst`'s customer peering is no longer handed out, if it is not:
/// its deprovisioning started, or its contract ended.
async fn ended(state: &Osb, inst: &OsbInstance) -> Result<Option<String>, ApiError> {
    if inst
        .operation
        .as_ref()
        .is_some_and(|op| op.kind == OperationKind::Deprovision)
    {
        return Ok(Some(format!(
            "service instance {} is being deprovisioned",
            inst.id
        )));
    }
    let Some(rid) = &inst.reservation_id else {
        return Ok(None);
    };
    Ok(match state.buying.store.get_reservation(rid).await? {
        Some(r) if r.state == ReservationState::Purchased => None,
        Some(r) => Some(format!("contract {rid} is {}", r.state.as_str())),
        None => Some(format!("contract {rid} is gone")),
    })
}

/// The customer's peering kubeconfig for the service contract `id` (its
/// selling provider only).
#[utoipa::path(
    get, path = "/provider/contracts/{id}/customer-peering", tag = "osb", operation_id = "getContractCustomerPeering",
    params(("id" = String, Path, description = "Contract (purchase) id")),
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider (sold by its cluster)"]))),
    responses(
        (status = 200, description = "The kubeconfig of the Liqo peering user the customer made for this provider (canonical form), the instance's parameters, the contract its objects are named after and the update waiting, if any", body = CustomerPeering,
            headers(("Cache-Control" = String, description = "`no-store`"))),
        (status = 401, description = "No or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Not a provider", body = ErrorBody),
        (status = 404, description = "No service instance bought as this contract from the caller's cluster, or none with a customer peering", body = ErrorBody),
        (status = 410, description = "The instance is being deprovisioned, or its contract ended", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn get(
    state: web::Data<Osb>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, BuyError> {
    caller.require(Role::Provider)?;
    let inst = sold_instance(&state, &caller, &id).await?;
    if let Some(why) = ended(&state, &inst).await? {
        return Err(BuyError::Gone(why));
    }
    let sealed = inst.customer_peering.as_deref().ok_or_else(|| {
        BuyError::not_found(format!(
            "service instance {} was provisioned without a customer peering",
            inst.id
        ))
    })?;
    let provider = inst.provider.as_deref().unwrap_or_default();
    let kubeconfig =
        sealed::open_customer_peering(&state.buying.providers, provider, &inst.id, sealed)?;
    tracing::info!(instance = %inst.id, contract = %id, "customer peering handed to the service provider");
    Ok(HttpResponse::Ok()
        .insert_header(("Cache-Control", "no-store"))
        .json(CustomerPeering {
            kubeconfig,
            parameters: answered_parameters(inst.parameters.as_deref()),
            instance_contract_id: inst.instance_contract_id.clone(),
            update: inst
                .running()
                .filter(|op| op.kind == OperationKind::Update)
                .map(|op| op.id.clone()),
        }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_kubeconfig_is_required_and_checked() {
        for context in [
            None,
            Some(json!({})),
            Some(json!({ "peering": {} })),
            Some(json!({ "peering": { "kubeconfig": null } })),
        ] {
            let e = from_context(&context).unwrap_err();
            assert!(e.description.starts_with(FIELD), "{}", e.description);
            assert!(e.description.contains("required"), "{}", e.description);
        }
        let e = from_context(&Some(json!({ "peering": { "kubeconfig": 7 } }))).unwrap_err();
        assert!(
            e.description.contains("must be a string"),
            "{}",
            e.description
        );
        let e =
            from_context(&Some(json!({ "peering": { "kubeconfig": "kind: Pod" } }))).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        assert!(e.description.starts_with(FIELD), "{}", e.description);
    }
}
