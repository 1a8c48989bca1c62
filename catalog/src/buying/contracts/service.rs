//! Contract operations, independent of HTTP: the terms a REST purchase
//! fixes, the credentials a contract releases to its consumer, listing and
//! reading contracts as each party may see them, and state reports. The
//! rules are [`super::model`]'s; this module reads and writes.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::model::{
    self, check_report, party, report_step, view, Contract, ContractCredentials, ContractFilter,
    Order, Party, Report, ReportError, V1Credentials, Viewer,
};
use crate::auth::{Caller, Role};
use crate::buying::error::BuyError;
use crate::buying::model::{ContractTerms, Reservation, Step};
use crate::buying::service::settle;
use crate::buying::store::TransitionError;
use crate::buying::Buying;
use crate::providers::LiqoGeneration;

/// The caller as a viewer of contracts: consumers, providers and admins
/// (403 otherwise).
pub fn viewer(caller: &Caller) -> Result<Viewer, BuyError> {
    let has = |r: Role| caller.roles.contains(&r);
    let v = Viewer {
        subject: caller.cluster_id.clone(),
        consumer: has(Role::Consumer),
        provider: has(Role::Provider),
        admin: has(Role::Admin),
    };
    if !(v.consumer || v.provider || v.admin) {
        return Err(BuyError::forbidden(
            "this needs the consumer, provider or admin role",
        ));
    }
    Ok(v)
}

/// The terms a purchase of `r` fixes now: the plan's resources as
/// reserved (409 if the plan changed since, see [`crate::buying::terms`]),
/// the provider's name, ResourceSlice class and generations; and its
/// lifetime.
pub async fn terms(
    state: &Buying,
    r: &Reservation,
    order: &Order,
    now: DateTime<Utc>,
) -> Result<(ContractTerms, chrono::Duration), BuyError> {
    let lifetime = model::lifetime(state.contract_duration, order.duration_seconds)?;
    let account = state
        .providers
        .store
        .get_provider(&r.cluster_id)
        .await?
        .ok_or_else(|| {
            BuyError::conflict(format!("provider {} has no account any more", r.cluster_id))
        })?;
    // The plan as reserved, or nothing: a changed plan is refused here,
    // before anything is bought.
    let resources = crate::buying::service::reserved_terms(state, r).await?;
    let info = state.providers.peering_info(&r.cluster_id).await?;
    let terms = ContractTerms::new(
        order.consumer_cluster_id.clone(),
        account.cluster_name,
        resources,
        info.resource_slice_class,
        info.liqo,
        now,
    );
    Ok((terms, lifetime))
}

/// What contract `c` releases to its consumer: the provider's credentials
/// for every generation it peers with now.
pub async fn credentials(
    state: &Buying,
    cluster_id: &str,
) -> Result<ContractCredentials, BuyError> {
    let liqo = state.providers.liqo(cluster_id).await?;
    let v0 = if liqo.contains(&LiqoGeneration::V0) {
        state.providers.v0_credentials(cluster_id).await?
    } else {
        None
    };
    let v1 = if liqo.contains(&LiqoGeneration::V1) {
        state
            .providers
            .kubeconfig(cluster_id)
            .await?
            .map(|kubeconfig| V1Credentials { kubeconfig })
    } else {
        None
    };
    if v0.is_none() && v1.is_none() {
        // Missing v0 credentials failed above; what is missing is a v1
        // kubeconfig, which only PUT /provider/peering registers.
        let why = crate::providers::peering::sell_blocker(cluster_id, false, false, false)
            .unwrap_or_default();
        return Err(BuyError::conflict(why));
    }
    Ok(ContractCredentials { v0, v1 })
}

fn not_found(id: &str) -> BuyError {
    BuyError::not_found(format!("no contract {id}"))
}

/// Contracts `who` may see that match `filter`, newest first, without
/// credentials (due ones expired on the way).
pub async fn list(
    state: &Buying,
    who: &Viewer,
    filter: &ContractFilter,
) -> Result<Vec<Contract>, BuyError> {
    let records = if who.admin {
        state.store.list_reservations(None).await?
    } else {
        let mut records = Vec::new();
        if who.consumer {
            records.extend(state.store.list_reservations(Some(&who.subject)).await?);
        }
        if who.provider {
            records.extend(state.store.list_sold(&who.subject).await?);
        }
        let mut seen = BTreeSet::new();
        records.retain(|r| seen.insert(r.id.clone()));
        crate::buying::model::newest_first(&mut records);
        records
    };
    let now = crate::store::now();
    let mut out = Vec::new();
    for r in records {
        if r.contract.is_none() || party(&r, who).is_none() {
            continue;
        }
        let r = settle(state, r).await?;
        if let Some(c) = view(&r, now).filter(|c| filter.matches(c)) {
            out.push(c);
        }
    }
    Ok(out)
}

/// The record of contract `id`: a purchase with contract terms (404
/// otherwise, as for a contract that does not exist).
async fn contract_record(state: &Buying, id: &str) -> Result<Reservation, BuyError> {
    state
        .store
        .get_reservation(id)
        .await?
        .filter(|r| r.contract.is_some())
        .ok_or_else(|| not_found(id))
}

/// Contract `id` as `who` sees it (404 for others): with credentials for
/// its consumer while it is active.
pub async fn get(state: &Buying, id: &str, who: &Viewer) -> Result<Contract, BuyError> {
    let r = contract_record(state, id).await?;
    let Some(p) = party(&r, who) else {
        return Err(not_found(id));
    };
    let r = settle(state, r).await?;
    let mut c = view(&r, crate::store::now()).ok_or_else(|| not_found(id))?;
    if p == Party::Consumer && c.active {
        c.credentials = Some(credentials(state, &r.cluster_id).await?);
    }
    Ok(c)
}

/// Apply a state report of contract `id` by `who` (its consumer only: 403
/// for its provider or an admin, 404 for others); the contract after it,
/// without credentials.
pub async fn report(
    state: &Buying,
    id: &str,
    who: &Viewer,
    report: Report,
) -> Result<Contract, BuyError> {
    let r = contract_record(state, id).await?;
    match party(&r, who) {
        Some(Party::Consumer) => {}
        Some(_) => {
            return Err(BuyError::forbidden(format!(
                "only the consumer of contract {id} reports its state"
            )))
        }
        None => return Err(not_found(id)),
    }
    let now = crate::store::now();
    let asked = report.clone();
    let decide = Arc::new(move |r: &Reservation| -> Step { report_step(r, &asked, now) });
    let written = match state.store.update(id, decide).await {
        Ok(w) => w,
        Err(TransitionError::WrongState(current)) => {
            return Err(match check_report(&current, &report, now) {
                Err(ReportError::NotAContract(_)) => not_found(id),
                Err(e) => BuyError::conflict(e.to_string()),
                // Refused, yet fine now: it changed in between; say so.
                Ok(()) => {
                    BuyError::conflict(format!("contract {id} changed while reporting; retry"))
                }
            });
        }
        Err(e) => return Err(e.into()),
    };
    // A due contract was refused above; settle in case it is due now.
    let written = settle(state, written).await?;
    tracing::info!(contract = %id, state = ?report.state, "contract state reported");
    view(&written, now).ok_or_else(|| not_found(id))
}
