//! Contract operations, independent of HTTP: the terms a REST purchase
//! fixes, the credentials a contract releases to its consumer, listing and
//! reading contracts as each party may see them, state reports, a
//! provider attaching a contract's kubeconfig, and extensions. The rules
//! are [`super::model`]'s, [`super::peering`]'s and [`super::extension`]'s;
//! this module reads and writes.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::extension::{self, check_extend, extend_step, ExtendError};
use super::model::{
    self, check_report, party, report_step, Contract, ContractCredentials, ContractFilter, Order,
    Party, Report, ReportError, V1Credentials, Viewer,
};
use super::network_policy::{
    self as policy_rules, ContractNetworkPolicy, PolicyRefusal, TenantPolicy, TenantPolicyReport,
};
use super::peering::{self, attach_step, check_attach, AttachError, Source};
use crate::auth::{Caller, Role};
use crate::buying::error::BuyError;
use crate::buying::model::{ContractTerms, Reservation, Step};
use crate::buying::service::settle;
use crate::buying::store::{ClaimError, TransitionError};
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

/// Which way a contract's peering goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peers {
    /// Capacity: the consumer's cluster peers with the provider's, on
    /// Liqo v1 through a peering user of the provider's made for exactly
    /// one consumer cluster, which the contract must therefore name.
    ConsumerWithProvider,
    /// A service (OSB): the provider's cluster peers with the customer's,
    /// with the kubeconfig the customer gave (`context.peering`, read back
    /// through `customer-peering`); the provider's peering users play no
    /// part, whatever the provider registered for its capacity.
    ProviderWithCustomer,
}

/// The terms a purchase of `r` fixes now: the plan's resources as
/// reserved (409 if the plan changed since, see [`crate::buying::terms`]),
/// the provider's name, ResourceSlice class and generations; and its
/// lifetime.
pub async fn terms(
    state: &Buying,
    r: &Reservation,
    order: &Order,
    peers: Peers,
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
    let info = state.providers.peering_info(&r.cluster_id).await?;
    if peers == Peers::ConsumerWithProvider {
        peering::require_cluster_id(
            &r.cluster_id,
            &info.liqo,
            order.consumer_cluster_id.as_deref(),
        )?;
    }
    // The plan as reserved, or nothing: a changed plan is refused here,
    // before anything is bought.
    let resources = crate::buying::service::reserved_terms(state, r).await?;
    let v1 = match peers {
        Peers::ConsumerWithProvider => {
            peering::initial(&info.liqo, info.single_consumer == Some(true))
        }
        Peers::ProviderWithCustomer => None,
    };
    let mut terms = ContractTerms::new(
        order.consumer_cluster_id.clone(),
        account.cluster_name,
        resources,
        info.resource_slice_class,
        info.liqo,
        now,
    );
    terms.v1 = v1;
    Ok((terms, lifetime))
}

/// `r` as a contract at `now`, with the catalog's ending-soon lead time.
pub fn view(state: &Buying, r: &Reservation, now: DateTime<Utc>) -> Option<Contract> {
    let lead = chrono::Duration::from_std(state.ending_soon).unwrap_or(chrono::Duration::MAX);
    let mut c = model::view(r, now, lead)?;
    c.pricing = Some(state.pricing.clone());
    Some(c)
}

/// What contract `r` releases to its consumer: the provider's v0
/// credentials if it peers with v0, and the v1 kubeconfig its terms say
/// (its own, the provider's, or none yet: see [`super::peering`]).
pub async fn credentials(state: &Buying, r: &Reservation) -> Result<ContractCredentials, BuyError> {
    let cluster_id = &r.cluster_id;
    let liqo = state.providers.liqo(cluster_id).await?;
    let v0 = if liqo.contains(&LiqoGeneration::V0) {
        state.providers.v0_credentials(cluster_id).await?
    } else {
        None
    };
    let kubeconfig = match peering::source(r) {
        Source::Nothing => None,
        Source::Provider => state.providers.kubeconfig(cluster_id).await?,
        Source::Own(sealed) => state
            .providers
            .contract_kubeconfig(cluster_id, &r.id, sealed)?,
    };
    Ok(ContractCredentials {
        v0,
        v1: kubeconfig.map(|kubeconfig| V1Credentials { kubeconfig }),
    })
}

/// Whether a purchase from `cluster_id` would hand over something now or
/// later: 409 naming the provider's fix otherwise (neither v0 credentials
/// nor Liqo v1).
/// Bind the consumer cluster ID a purchase of `r` from a Liqo v1
/// provider names (`terms`) to the buyer, or refuse it (409) while
/// another consumer holds it with this provider (see [`super::claim`]).
/// The ID bound, if any: the caller gives it back with [`unclaim`] if the
/// purchase then does not happen.
pub async fn claim_cluster_id(
    state: &Buying,
    r: &Reservation,
    terms: &ContractTerms,
    now: DateTime<Utc>,
) -> Result<Option<String>, BuyError> {
    // Only a v1 provider makes a peering user per consumer cluster ID.
    if !terms.liqo.contains(&LiqoGeneration::V1) {
        return Ok(None);
    }
    let Some(id) = &terms.consumer_cluster_id else {
        return Ok(None);
    };
    match state
        .store
        .claim_cluster_id(&r.cluster_id, id, &r.consumer, &r.id, now)
        .await
    {
        Ok(()) => Ok(Some(id.clone())),
        Err(ClaimError::Held) => {
            tracing::info!(reservation = %r.id, provider = %r.cluster_id, consumer_cluster_id = %id, "purchase refused: another consumer holds the consumer cluster ID");
            Err(BuyError::conflict(super::claim::held_message(
                &r.cluster_id,
                id,
            )))
        }
        Err(ClaimError::Store(e)) => Err(e.into()),
    }
}

/// Give back the cluster ID [`claim_cluster_id`] bound for `r`, whose
/// purchase did not happen; on failure it stays bound until `r` is due.
pub async fn unclaim(state: &Buying, r: &Reservation, cluster_id: &str) {
    if let Err(error) = state
        .store
        .unclaim_cluster_id(&r.cluster_id, cluster_id, &r.id)
        .await
    {
        tracing::warn!(reservation = %r.id, %error, "cannot give back the consumer cluster ID claimed for a purchase that did not happen; it stays bound until the reservation is due");
    }
}

pub async fn ensure_sellable(state: &Buying, cluster_id: &str) -> Result<(), BuyError> {
    match state.providers.cannot_sell(cluster_id).await? {
        Some(why) => Err(BuyError::conflict(why)),
        None => Ok(()),
    }
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
        let Some(p) = party(&r, who).filter(|_| r.contract.is_some()) else {
            continue;
        };
        let r = settle(state, r).await?;
        if let Some(mut c) = view(state, &r, now).filter(|c| filter.matches(c)) {
            for_party(&mut c, p);
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

/// The record of contract `id` for its consumer `who`, who `does` what
/// only the consumer does: 403 for its provider or an admin, 404 for
/// anyone else.
async fn consumers_contract(
    state: &Buying,
    id: &str,
    who: &Viewer,
    does: &str,
) -> Result<Reservation, BuyError> {
    let r = contract_record(state, id).await?;
    match party(&r, who) {
        Some(Party::Consumer) => Ok(r),
        Some(_) => Err(BuyError::forbidden(format!(
            "only the consumer of contract {id} {does}"
        ))),
        None => Err(not_found(id)),
    }
}

/// Contract `id` as `who` sees it (404 for others): with credentials for
/// its consumer while it is active.
pub async fn get(state: &Buying, id: &str, who: &Viewer) -> Result<Contract, BuyError> {
    let r = contract_record(state, id).await?;
    let Some(p) = party(&r, who) else {
        return Err(not_found(id));
    };
    let r = settle(state, r).await?;
    let mut c = view(state, &r, crate::store::now()).ok_or_else(|| not_found(id))?;
    for_party(&mut c, p);
    if p == Party::Consumer && c.active {
        let released = credentials(state, &r).await?;
        promised_only_what_is_released(&mut c, &released);
        c.credentials = Some(released);
    }
    Ok(c)
}

/// Contract `c` as party `p` may see it: its network policy is for its
/// consumer and provider only (not an admin looking on).
pub fn for_party(c: &mut Contract, p: Party) {
    if p == Party::Admin {
        c.network_policy = None;
    }
}

/// A contract that reads `credentialsReady` but whose kubeconfig could not
/// be released (the provider dropped it, or it no longer passes the
/// check) says so rather than promise it.
pub fn promised_only_what_is_released(c: &mut Contract, released: &ContractCredentials) {
    let ready = c
        .peering_state
        .as_ref()
        .is_some_and(|p| p.state == peering::PeeringState::CredentialsReady);
    if ready && released.v1.is_none() {
        c.peering_state = Some(peering::not_released(&c.cluster_id));
    }
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
    consumers_contract(state, id, who, "reports its state").await?;
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
    view(state, &written, now).ok_or_else(|| not_found(id))
}

/// Attach `kubeconfig` (checked by the catalog's one kubeconfig check,
/// 400 naming `kubeconfig`) to contract `id` as its provider `who` (404
/// for anyone else's, 409 once ended); the contract after it, without
/// credentials.
pub async fn attach(
    state: &Buying,
    id: &str,
    who: &Viewer,
    kubeconfig: &str,
) -> Result<Contract, BuyError> {
    let r = contract_record(state, id).await?;
    // Only the provider that sold it: for anyone else it does not exist.
    if !who.provider || r.cluster_id != who.subject {
        return Err(not_found(id));
    }
    crate::buying::service::ensure_enabled(state, &r.cluster_id).await?;
    let now = crate::store::now();
    check_attach(&r, now).map_err(|e| attach_refused(id, e))?;
    let sealed =
        state
            .providers
            .seal_contract_kubeconfig(&r.cluster_id, id, "kubeconfig", kubeconfig)?;
    let decide = Arc::new(move |r: &Reservation| -> Step { attach_step(r, &sealed, now) });
    let written = change(state, id, decide, |current| {
        check_attach(current, now).map_err(|e| attach_refused(id, e))
    })
    .await?;
    let consumer_cluster = written
        .contract
        .as_ref()
        .and_then(|t| t.consumer_cluster_id.clone())
        .unwrap_or_default();
    tracing::info!(contract = %id, provider = %written.cluster_id, consumer_cluster = %consumer_cluster, "contract credentials attached");
    view(state, &written, now).ok_or_else(|| not_found(id))
}

/// Write `decide`'s change of contract `id`; a refusal is answered with
/// what `recheck` finds wrong with the contract as it is now (or, if
/// nothing, that it changed meanwhile).
async fn change(
    state: &Buying,
    id: &str,
    decide: crate::buying::store::Decide,
    recheck: impl Fn(&Reservation) -> Result<(), BuyError>,
) -> Result<Reservation, BuyError> {
    match state.store.update(id, decide).await {
        Ok(written) => Ok(written),
        Err(TransitionError::WrongState(current)) => {
            Err(recheck(&current).err().unwrap_or_else(|| {
                BuyError::conflict(format!("contract {id} changed meanwhile; retry"))
            }))
        }
        Err(e) => Err(e.into()),
    }
}

fn attach_refused(id: &str, e: AttachError) -> BuyError {
    match e {
        AttachError::NotAContract(_) => not_found(id),
        e => BuyError::conflict(e.to_string()),
    }
}

/// Extend contract `id` as its consumer `who` (403 for its provider or an
/// admin, 404 for others) by `duration_seconds` (see
/// [`super::extension`]); the contract after it, without credentials.
pub async fn extend(
    state: &Buying,
    id: &str,
    who: &Viewer,
    duration_seconds: Option<u64>,
) -> Result<Contract, BuyError> {
    let r = consumers_contract(state, id, who, "extends it").await?;
    let now = crate::store::now();
    check_extend(&r, now).map_err(|e| extend_refused(id, e))?;
    crate::buying::service::ensure_enabled(state, &r.cluster_id).await?;
    // The terms continue only while the plan still offers them.
    let plan =
        crate::buying::service::plan_on_offer(state, &r, &format!("contract {id} runs to its end"))
            .await?;
    crate::buying::terms::extendable(&r, &plan).map_err(BuyError::conflict)?;
    let end = extension::new_end(r.expires_at, now, state.contract_duration, duration_seconds)?;
    let decide = Arc::new(move |r: &Reservation| -> Step { extend_step(r, end, now) });
    let written = change(state, id, decide, |current| {
        check_extend(current, now).map_err(|e| extend_refused(id, e))
    })
    .await?;
    tracing::info!(contract = %id, expires_at = %written.expires_at, "contract extended");
    view(state, &written, now).ok_or_else(|| not_found(id))
}

fn extend_refused(id: &str, e: ExtendError) -> BuyError {
    match e {
        ExtendError::NotAContract(_) => not_found(id),
        e => BuyError::conflict(e.to_string()),
    }
}

/// The record of contract `id` whose network policy its consumer `who`
/// may set now: 403 for its provider or an admin, 404 for others, 409
/// once ended.
pub async fn network_policy_contract(
    state: &Buying,
    id: &str,
    who: &Viewer,
) -> Result<Reservation, BuyError> {
    let r = consumers_contract(state, id, who, "sets its network policy").await?;
    policy_rules::check_live(&r, crate::store::now()).map_err(|e| policy_refused(id, e))?;
    Ok(r)
}

/// The record of contract `id` for its provider `who` reporting on its
/// network policy: 404 for anyone else's, 403 while the provider is
/// disabled.
pub async fn reporting_provider_contract(
    state: &Buying,
    id: &str,
    who: &Viewer,
) -> Result<Reservation, BuyError> {
    let r = contract_record(state, id).await?;
    // Only the provider that sold it: for anyone else it does not exist.
    if !who.provider || r.cluster_id != who.subject {
        return Err(not_found(id));
    }
    crate::buying::service::ensure_enabled(state, &r.cluster_id).await?;
    Ok(r)
}

/// Set `policy` (already checked) on contract `r` (from
/// [`network_policy_contract`]; 409 once ended); the policy as stored,
/// with its revision. The policy already stored changes
/// nothing and is answered as it is.
pub async fn set_network_policy(
    state: &Buying,
    r: Reservation,
    policy: TenantPolicy,
) -> Result<ContractNetworkPolicy, BuyError> {
    let id = r.id.as_str();
    let now = crate::store::now();
    if let Some(p) = policy_rules::stored(&r).filter(|p| p.policy == policy) {
        return Ok(p.clone());
    }
    let asked = policy.clone();
    let decide =
        Arc::new(move |r: &Reservation| -> Step { policy_rules::set_step(r, &asked, now) });
    let written = match state.store.update(id, decide).await {
        Ok(w) => w,
        Err(TransitionError::WrongState(current)) => {
            policy_rules::check_live(&current, now).map_err(|e| policy_refused(id, e))?;
            // Refused while live: the same policy was stored meanwhile.
            return policy_rules::stored(&current)
                .filter(|p| p.policy == policy)
                .cloned()
                .ok_or_else(|| {
                    BuyError::conflict(format!("contract {id} changed meanwhile; retry"))
                });
        }
        Err(e) => return Err(e.into()),
    };
    let stored = policy_rules::stored(&written)
        .cloned()
        .ok_or_else(|| BuyError::internal(format!("contract {id}: network policy not stored")))?;
    tracing::info!(contract = %id, revision = stored.revision, policies = stored.policy.policies.len(), "contract network policy set");
    Ok(stored)
}

/// Remove contract `id`'s network policy as its consumer `who` (403 for
/// its provider or an admin, 404 for others); none is done already. An
/// ended contract's policy no longer changes (409).
pub async fn remove_network_policy(state: &Buying, id: &str, who: &Viewer) -> Result<(), BuyError> {
    let r = consumers_contract(state, id, who, "removes its network policy").await?;
    if policy_rules::stored(&r).is_none() {
        return Ok(());
    }
    let now = crate::store::now();
    policy_rules::check_live(&r, now).map_err(|e| policy_refused(id, e))?;
    let decide = Arc::new(move |r: &Reservation| -> Step { policy_rules::remove_step(r, now) });
    match state.store.update(id, decide).await {
        Ok(_) => {
            tracing::info!(contract = %id, "contract network policy removed");
            Ok(())
        }
        Err(TransitionError::WrongState(current)) => {
            if policy_rules::stored(&current).is_none() {
                return Ok(());
            }
            policy_rules::check_live(&current, now).map_err(|e| policy_refused(id, e))?;
            Err(BuyError::conflict(format!(
                "contract {id} changed meanwhile; retry"
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// Record the provider's `report` (already checked) on contract `r` (from
/// [`reporting_provider_contract`]; 409 once ended, without a policy, or
/// naming a revision beyond the stored one); the policy as now stored. A report older than the stored report's changes nothing.
pub async fn report_network_policy(
    state: &Buying,
    r: Reservation,
    report: TenantPolicyReport,
) -> Result<ContractNetworkPolicy, BuyError> {
    let id = r.id.as_str();
    let now = crate::store::now();
    policy_rules::check_report(&r, &report, now).map_err(|e| policy_refused(id, e))?;
    let current = |r: &Reservation| {
        policy_rules::stored(r)
            .cloned()
            .ok_or_else(|| policy_refused(id, PolicyRefusal::NoPolicy(id.to_string())))
    };
    if policy_rules::report_is_stale(&r, &report) {
        return current(&r);
    }
    let asked = report.clone();
    let decide =
        Arc::new(move |r: &Reservation| -> Step { policy_rules::report_step(r, &asked, now) });
    let written = match state.store.update(id, decide).await {
        Ok(w) => w,
        Err(TransitionError::WrongState(now_stored)) => {
            policy_rules::check_report(&now_stored, &report, now)
                .map_err(|e| policy_refused(id, e))?;
            if policy_rules::report_is_stale(&now_stored, &report) {
                return current(&now_stored);
            }
            return Err(BuyError::conflict(format!(
                "contract {id} changed meanwhile; retry"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    tracing::info!(contract = %id, revision = report.revision, applied = report.applied.len(), refused = report.refused.len(), "contract network policy reported");
    current(&written)
}

fn policy_refused(id: &str, e: PolicyRefusal) -> BuyError {
    match e {
        PolicyRefusal::NotAContract(_) => not_found(id),
        e => BuyError::conflict(e.to_string()),
    }
}
