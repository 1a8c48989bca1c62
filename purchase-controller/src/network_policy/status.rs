//! The status a pass writes, judged purely: `Ready`, `ProvidersTold`,
//! and per cluster what is in force there — this consumer's from what it
//! applied, each provider's from the report the provider left on the
//! contract (`network_policy.report`): Applied or Refused once the report
//! is of the stored revision and names the policy, Pending before.

use std::collections::BTreeMap;

use catalog_client::wire::ContractNetworkPolicy;

use super::model::{
    ClusterState, Condition, MultiClusterNetworkPolicy, MultiClusterNetworkPolicyStatus,
};
use super::refine::{ForProvider, Refusal, Rendered};

pub const READY: &str = "Ready";
pub const PROVIDERS_TOLD: &str = "ProvidersTold";
pub const APPLIED: &str = "Applied";
pub const PENDING: &str = "Pending";
pub const REFUSED: &str = "Refused";
pub const NOT_RENDERED: &str = "NotRendered";
/// Reasons of `ProvidersTold`.
pub const NO_CATALOG_CREDENTIALS: &str = "NoCatalogCredentials";
pub const CATALOG_UNAVAILABLE: &str = "CatalogUnavailable";

/// Whether the providers could be told this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    Sent,
    /// No `--network-policy-catalog` and `--network-policy-credentials`,
    /// or the Secret cannot be used: why.
    NoCatalogCredentials(String),
    CatalogUnavailable(String),
}

/// What became of one provider's document.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// Not sent (see [`Told`]).
    NotTold(String),
    /// Not accepted (its own check, or the catalog's): why.
    Refused(String),
    /// What the catalog holds on each active contract with the provider.
    Stored(Vec<Option<ContractNetworkPolicy>>),
}

/// The new status of `policy`.
pub fn status(
    policy: &MultiClusterNetworkPolicy,
    consumer: &str,
    outcome: &Result<Rendered, Refusal>,
    local: &Result<(), String>,
    told: &Told,
    deliveries: &BTreeMap<String, Delivery>,
    now: &str,
) -> MultiClusterNetworkPolicyStatus {
    let before = policy.status.clone().unwrap_or_default();
    let generation = policy.metadata.generation.unwrap_or(0);
    let key = policy.key();
    let mut conditions = Vec::new();
    let mut clusters = Vec::new();
    match outcome {
        Err(refusal) => {
            conditions.push((
                READY,
                false,
                refusal.reason.as_str().to_string(),
                format!(
                    "{}. Nothing of it is applied on any cluster; what was applied for it before is removed.",
                    refusal.message
                ),
            ));
            clusters.push(ClusterState {
                cluster: consumer.to_string(),
                state: REFUSED.into(),
                network_policies: Vec::new(),
                message: refusal.message.clone(),
            });
        }
        Ok(rendered) => {
            let local_name = format!(
                "{}/{}",
                rendered
                    .local
                    .metadata
                    .namespace
                    .as_deref()
                    .unwrap_or_default(),
                rendered.local.metadata.name.as_deref().unwrap_or_default()
            );
            clusters.push(match local {
                Ok(()) => ClusterState {
                    cluster: consumer.to_string(),
                    state: APPLIED.into(),
                    network_policies: vec![local_name],
                    message: rendered.local_notes.join("; "),
                },
                Err(why) => ClusterState {
                    cluster: consumer.to_string(),
                    state: REFUSED.into(),
                    network_policies: Vec::new(),
                    message: why.clone(),
                },
            });
            for (provider, what) in &rendered.providers {
                clusters.push(provider_state(
                    &key,
                    provider,
                    what,
                    deliveries.get(provider),
                ));
            }
            match local {
                Ok(()) => {
                    let count =
                        |state: &str| clusters.iter().skip(1).filter(|c| c.state == state).count();
                    conditions.push((
                        READY,
                        true,
                        APPLIED.to_string(),
                        format!(
                            "applied on this cluster; providers: {} applied, {} pending, {} refused, {} not rendered",
                            count(APPLIED),
                            count(PENDING),
                            count(REFUSED),
                            count(NOT_RENDERED)
                        ),
                    ));
                }
                Err(why) => conditions.push((
                    READY,
                    false,
                    "ApplyFailed".to_string(),
                    format!("the NetworkPolicy on this cluster could not be applied: {why}"),
                )),
            }
            conditions.push(match told {
                Told::Sent => (
                    PROVIDERS_TOLD,
                    true,
                    "Sent".to_string(),
                    "each provider's document is on its contracts in the catalog".to_string(),
                ),
                Told::NoCatalogCredentials(why) => (
                    PROVIDERS_TOLD,
                    false,
                    NO_CATALOG_CREDENTIALS.to_string(),
                    format!("providers are not told: {why}"),
                ),
                Told::CatalogUnavailable(why) => (
                    PROVIDERS_TOLD,
                    false,
                    CATALOG_UNAVAILABLE.to_string(),
                    format!("providers are not told for now: {why}"),
                ),
            });
        }
    }
    let conditions = conditions
        .into_iter()
        .map(|(type_, ok, reason, message)| {
            let status = if ok { "True" } else { "False" };
            let since = before
                .conditions
                .iter()
                .find(|b| b.type_ == type_ && b.status == status)
                .map(|b| b.last_transition_time.clone())
                .unwrap_or_else(|| now.to_string());
            Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason,
                message: message.chars().take(1000).collect(),
                last_transition_time: since,
                observed_generation: generation,
            }
        })
        .collect();
    for c in &mut clusters {
        if c.message.chars().count() > 1000 {
            c.message = c.message.chars().take(1000).collect();
        }
    }
    MultiClusterNetworkPolicyStatus {
        observed_generation: generation,
        conditions,
        clusters,
    }
}

/// One provider's entry.
fn provider_state(
    key: &str,
    provider: &str,
    what: &ForProvider,
    delivery: Option<&Delivery>,
) -> ClusterState {
    let entry = |state: &str, network_policies: Vec<String>, message: String| ClusterState {
        cluster: provider.to_string(),
        state: state.to_string(),
        network_policies,
        message,
    };
    let (policy, notes) = match what {
        ForProvider::NotOffloaded(why) => return entry(NOT_RENDERED, Vec::new(), why.clone()),
        ForProvider::Policy { policy, notes } => (policy, notes),
    };
    let with_notes = |message: String| {
        std::iter::once(message)
            .chain(notes.iter().cloned())
            .filter(|m| !m.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let stored = match delivery {
        None => return entry(PENDING, Vec::new(), with_notes("not sent yet".into())),
        Some(Delivery::NotTold(why)) => {
            return entry(NOT_RENDERED, Vec::new(), with_notes(why.clone()))
        }
        Some(Delivery::Refused(why)) => return entry(REFUSED, Vec::new(), with_notes(why.clone())),
        Some(Delivery::Stored(stored)) => stored,
    };
    let mut state = APPLIED;
    let mut names = Vec::new();
    let mut messages = Vec::new();
    if stored.is_empty() {
        state = PENDING;
        messages.push(format!("no active contract with {provider} to carry it"));
    }
    // The provider renders, per consumer, the policy of the contract
    // updated last (docs/isolation.md), and reports on that one only.
    let latest = stored
        .iter()
        .flatten()
        .filter(|h| h.policy.policies.contains(policy))
        .max_by_key(|h| h.updated_at);
    match latest {
        None if !stored.is_empty() => {
            state = PENDING;
            messages.push("not stored in the catalog yet".to_string());
        }
        None => {}
        Some(held) => match held.report.as_ref().filter(|r| r.revision == held.revision) {
            Some(report) => {
                if let Some(applied) = report.applied.iter().find(|a| a.name == key) {
                    names.extend(applied.network_policies.iter().cloned());
                } else if let Some(refused) = report.refused.iter().find(|r| r.name == key) {
                    state = REFUSED;
                    messages.push(format!("refused by {provider}: {}", refused.reason));
                } else {
                    state = PENDING;
                    messages.push(format!(
                        "{provider}'s report of revision {} does not name it",
                        held.revision
                    ));
                }
            }
            None => {
                state = PENDING;
                messages.push(format!(
                    "waiting for {provider}'s report of revision {}",
                    held.revision
                ));
            }
        },
    }
    names.sort();
    names.dedup();
    messages.dedup();
    entry(state, names, with_notes(messages.join("; ")))
}
