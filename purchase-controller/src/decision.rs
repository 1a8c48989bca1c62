//! The pure decision: from what is known of the contract and what the
//! cluster shows, the Purchase's phase, conditions and the state to report
//! to the catalog. The reconciler gathers the facts and applies the
//! objects ([`crate::liqo`] builds them); this module only judges.

use crate::authentication::Stage;
use crate::liqo::{Generation, Grant};
use crate::model::Condition;
use catalog_client::wire::{step_reason, Contract, ContractState};

/// Condition types a Purchase reports.
pub const CONTRACT_VALID: &str = "ContractValid";
/// A Purchase from peering credentials (module `direct`): in place of
/// [`CONTRACT_VALID`], whether they reach the remote cluster.
pub const CREDENTIALS_VALID: &str = "PeeringCredentialsValid";
pub const CATALOG_REACHABLE: &str = "CatalogReachable";
pub const PEERED: &str = "Peered";
/// v1 `--auto-peer`: where the controller's own authentication stands.
pub const AUTHENTICATED: &str = "Authenticated";
/// v1 `--auto-peer` with networking: where Liqo's networking stands.
pub const NETWORK_CONNECTED: &str = "NetworkConnected";
pub const RESOURCES_GRANTED: &str = "ResourcesGranted";
pub const NAMESPACES_OFFLOADED: &str = "NamespacesOffloaded";
pub const READY: &str = "Ready";
/// The contract ends within the lead time (its own condition: a Ready
/// Purchase stays Ready while it warns).
pub const ENDING_SOON: &str = "EndingSoon";

/// Where a Purchase is, as `status.phase` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Phase {
    /// The contract has not been read yet (the catalog is unreachable).
    Pending,
    /// A plan is reserved and being bought.
    Purchasing,
    Peering,
    Granting,
    Offloading,
    Ready,
    /// Unusable: its conditions say why.
    Failed,
    /// The contract was cancelled or has expired.
    Ended,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Purchasing => "Purchasing",
            Phase::Peering => "Peering",
            Phase::Granting => "Granting",
            Phase::Offloading => "Offloading",
            Phase::Ready => "Ready",
            Phase::Failed => "Failed",
            Phase::Ended => "Ended",
        }
    }

    /// Settled: nothing happens until the contract changes, so it is
    /// re-read at the resync interval rather than polled.
    pub fn is_settled(self) -> bool {
        matches!(self, Phase::Ready | Phase::Ended | Phase::Failed)
    }

    /// A phase change to it is a Warning Event.
    pub fn is_bad(self) -> bool {
        matches!(self, Phase::Failed | Phase::Ended)
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a contract cannot be used (a clear condition, and nothing created).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    /// The catalog answers 404: unknown, or someone else's.
    NotFound(String),
    /// `expired` or `cancelled`.
    Ended(String),
    /// Bought for another consumer cluster.
    OtherConsumer(String),
    /// The provider does not peer with our Liqo generation.
    Generation {
        ours: Generation,
        offered: Vec<String>,
    },
    /// The contract lacks the credentials of our generation.
    NoCredentials(Generation),
    /// The consumer's catalog credentials: Secret missing, key missing,
    /// token refused.
    Credentials(String),
    /// The catalog refused a request for another reason.
    Refused(String),
    /// The spec asks for neither a contract nor an offer and plan.
    Spec(String),
    /// The API server refused an object built from the contract (422): a
    /// value Liqo's CRD does not accept, such as an auth URL.
    Rejected(String),
    /// Peering credentials given directly: the remote cluster does not
    /// answer (waited for).
    RemoteUnreachable(String),
}

impl Unusable {
    pub fn reason(&self) -> &'static str {
        match self {
            Unusable::NotFound(_) => "ContractNotFound",
            Unusable::Ended(how) if how == "cancelled" => "ContractCancelled",
            Unusable::Ended(_) => "ContractExpired",
            Unusable::OtherConsumer(_) => "ContractOfAnotherCluster",
            Unusable::Generation { .. } => "LiqoGenerationNotOffered",
            Unusable::NoCredentials(_) => "NoPeeringCredentials",
            Unusable::Credentials(_) => "CredentialsInvalid",
            Unusable::Refused(_) => "CatalogRefused",
            Unusable::Spec(_) => "InvalidSpec",
            Unusable::Rejected(_) => "ObjectRejected",
            Unusable::RemoteUnreachable(_) => "RemoteClusterUnreachable",
        }
    }

    pub fn message(&self) -> String {
        match self {
            Unusable::NotFound(id) => format!(
                "the catalog has no contract {id} for these credentials: it is unknown, or it was bought by someone else"
            ),
            Unusable::Ended(how) => format!("the contract has ended ({how}); what it set up is removed"),
            Unusable::OtherConsumer(other) => {
                format!("the contract was bought for consumer cluster {other}, not this one")
            }
            Unusable::Generation { ours, offered } => format!(
                "this cluster runs Liqo {}, the provider peers with [{}] only",
                ours.as_str(),
                offered.join(", ")
            ),
            Unusable::NoCredentials(g) => format!(
                "the contract carries no Liqo {} peering credentials yet: a provider running the peering-user-controller attaches them to each contract within seconds of the sale; if none come, the provider has to register them (PUT /provider/peering); retrying",
                g.as_str()
            ),
            Unusable::Credentials(m) | Unusable::Refused(m) | Unusable::Spec(m) => m.clone(),
            Unusable::RemoteUnreachable(m) => format!("{m}; retrying"),
            Unusable::Rejected(m) => format!("the API server refused an object made from the contract: {m}"),
        }
    }

    /// What the catalog should hear, if anything: `failed` for a problem
    /// of a contract that is ours and still active; `pending` while the
    /// peering credentials a provider's controller attaches a moment after
    /// the sale are not there yet (the Purchase waits for them).
    pub fn reported_state(&self) -> Option<ContractState> {
        match self {
            Unusable::Generation { .. } | Unusable::Rejected(_) => Some(ContractState::Failed),
            Unusable::NoCredentials(_) => Some(ContractState::Pending),
            _ => None,
        }
    }
}

/// Check a contract read from the catalog against this consumer.
pub fn check_contract(
    contract: &Contract,
    ours: Generation,
    cluster_id: &str,
) -> Result<(), Unusable> {
    if !contract.active || contract.ended.is_some() {
        return Err(Unusable::Ended(
            contract
                .ended
                .map_or("expired", |how| how.as_str())
                .to_string(),
        ));
    }
    if let Some(other) = contract
        .consumer_cluster_id
        .as_deref()
        .filter(|c| !c.is_empty() && *c != cluster_id)
    {
        return Err(Unusable::OtherConsumer(other.to_string()));
    }
    if !contract.liqo.iter().any(|g| g.as_str() == ours.as_str()) {
        return Err(Unusable::Generation {
            ours,
            offered: contract
                .liqo
                .iter()
                .map(|g| g.as_str().to_string())
                .collect(),
        });
    }
    let creds = contract.credentials.clone().unwrap_or_default();
    let has = match ours {
        Generation::V0 => creds.v0.is_some(),
        Generation::V1 => creds.v1.is_some(),
    };
    if !has {
        return Err(Unusable::NoCredentials(ours));
    }
    Ok(())
}

/// A listed namespace, as the reconciler found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceOutcome {
    /// Its NamespaceOffloading selects the provider and Liqo reports it
    /// `Ready`.
    Offloaded,
    /// Its NamespaceOffloading is written; Liqo has not reported it
    /// `Ready` yet (the phase it reports).
    Offloading(String),
    Missing,
    /// Not this Purchase's to offload ([`offload_refusal`]): nothing
    /// written there, the Purchase's share of it released.
    Refused(String),
    /// A NamespaceOffloading someone else made is there: left alone.
    NotOurs,
    /// Shared with Purchases that chose other strategies: left alone.
    Conflict(String),
}

/// On a namespace (annotation): the namespaces whose Purchases may
/// offload it besides its own, a list (commas or blanks).
pub const OFFLOADABLE_BY: &str = "broker.liqo-broker.io/offloadable-by";

/// Namespaces no Purchase offloads, whatever they say: Kubernetes' own
/// (`kube-system`, `kube-public`, `kube-node-lease`: Kubernetes
/// `pkg/apis/core/types.go` `NamespaceSystem`, `NamespacePublic`,
/// `NamespaceNodeLease`) and Liqo's (`liqo`, `liqo-tenant-<peer>`,
/// `liqo-storage`, …). A Liqo offloading there would make the provider
/// run what the cluster runs on itself.
const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// Why a Purchase in `purchase_namespace` may not offload `target` (a
/// clear message), or `None` when it may: its own namespace, or one whose
/// [`OFFLOADABLE_BY`] names the Purchase's namespace — never a system
/// namespace nor one of `protected` (the controller's and Liqo's). Who may
/// create a Purchase in a namespace may then offload that namespace only,
/// not `kube-system`.
pub fn offload_refusal(
    purchase_namespace: &str,
    target: &k8s_openapi::api::core::v1::Namespace,
    protected: &[&str],
) -> Option<String> {
    let name = target.metadata.name.as_deref().unwrap_or_default();
    if SYSTEM_NAMESPACES.contains(&name) || name.starts_with("liqo") || protected.contains(&name) {
        return Some(format!(
            "namespace {name} is a system namespace (Kubernetes', Liqo's or the controller's): never offloaded"
        ));
    }
    if name == purchase_namespace {
        return None;
    }
    let allowed = target
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(OFFLOADABLE_BY))
        .is_some_and(|list| {
            list.split(|c: char| c == ',' || c.is_whitespace())
                .any(|ns| ns == purchase_namespace)
        });
    if allowed {
        return None;
    }
    Some(format!(
        "namespace {name} is not the Purchase's and does not name {purchase_namespace} in its annotation {OFFLOADABLE_BY}"
    ))
}

/// How far the Purchase has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub generation: Generation,
    /// Why the catalog did not answer the last read, if it did not (the
    /// controller then works from the last known contract).
    pub catalog_error: Option<String>,
    pub peered: bool,
    /// v1: peered the declarative way (no control-plane Identity).
    pub declarative: bool,
    /// v1: no peering yet, the operator must run `liqoctl peer`.
    pub needs_peering_command: bool,
    /// v1, `--auto-peer` with networking: how far it came.
    pub networking: Option<crate::networking::Stage>,
    /// v1, `--auto-peer`: how far the controller's authentication came.
    pub authentication: Option<Stage>,
    /// v1: the provider's answer; v0 has no grant step.
    pub grant: Option<Grant>,
    pub namespaces: Vec<(String, NamespaceOutcome)>,
}

impl Progress {
    /// Whether what the peering waits for next is on the provider's API
    /// server (or a call there failed) — or in Liqo v0.x, whose objects
    /// are not watched —, so that only the timer brings the next look;
    /// else Liqo's objects here are watched (the `liqo_watch` module) and
    /// their changes bring it.
    pub fn waits_on_provider(&self) -> bool {
        if self.generation == Generation::V0 {
            return true;
        }
        if self.peered {
            return false;
        }
        if let Some(network) = self.networking.as_ref().filter(|n| !n.done()) {
            return network.on_provider();
        }
        self.authentication
            .as_ref()
            .is_some_and(|a| !a.done() && a.on_provider())
    }
}

/// A condition to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

fn cond(type_: &'static str, status: bool, reason: &str, message: impl Into<String>) -> Cond {
    Cond {
        type_,
        status,
        reason: reason.to_string(),
        message: message.into(),
    }
}

/// What the Purchase should show, and what the catalog should hear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    pub phase: Phase,
    pub conditions: Vec<Cond>,
    /// `(state, reason)` for `PUT /contracts/{id}/state`, if one applies.
    pub report: Option<(ContractState, Option<String>)>,
}

/// A contract that cannot be used.
pub fn assess_unusable(problem: &Unusable) -> Assessment {
    let phase = match problem {
        Unusable::Ended(_) => Phase::Ended,
        Unusable::NoCredentials(_) | Unusable::RemoteUnreachable(_) => Phase::Pending,
        _ => Phase::Failed,
    };
    let mut conditions = vec![
        cond(CONTRACT_VALID, false, problem.reason(), problem.message()),
        cond(READY, false, problem.reason(), problem.message()),
    ];
    if !matches!(
        problem,
        Unusable::Credentials(_) | Unusable::Spec(_) | Unusable::RemoteUnreachable(_)
    ) {
        conditions.push(cond(
            CATALOG_REACHABLE,
            true,
            "CatalogAnswered",
            "the catalog answered",
        ));
    }
    Assessment {
        phase,
        conditions,
        report: problem.reported_state().map(|state| {
            (
                state,
                Some(step_reason(problem.reason(), &problem.message())),
            )
        }),
    }
}

/// A step that failed: its condition and `Ready` say why, and so does the
/// catalog (`failed` with the reason).
fn failed(
    mut conditions: Vec<Cond>,
    step: &'static str,
    reason: &str,
    message: String,
) -> Assessment {
    conditions.push(cond(step, false, reason, message.clone()));
    conditions.push(cond(READY, false, reason, message.clone()));
    let report = step_reason(reason, &message);
    Assessment {
        phase: Phase::Failed,
        conditions,
        report: Some((ContractState::Failed, Some(report))),
    }
}

/// A usable contract, and how far its set-up has come.
pub fn assess(p: &Progress) -> Assessment {
    let mut conditions = vec![cond(
        CONTRACT_VALID,
        true,
        "ContractActive",
        "the contract is active and this cluster's",
    )];
    conditions.push(match &p.catalog_error {
        None => cond(
            CATALOG_REACHABLE,
            true,
            "CatalogAnswered",
            "the catalog answered",
        ),
        Some(error) => cond(
            CATALOG_REACHABLE,
            false,
            "CatalogUnreachable",
            format!("{error}; working from the last known contract, retrying with backoff"),
        ),
    });
    // The catalog hears the step as `Code: words` ([`step_reason`]).
    let not_ready = |mut conditions: Vec<Cond>,
                     phase,
                     reason: &str,
                     message: String,
                     report: Option<(ContractState, Option<String>)>| {
        let report =
            report.map(|(state, why)| (state, why.or_else(|| Some(step_reason(reason, &message)))));
        conditions.push(cond(READY, false, reason, message));
        Assessment {
            phase,
            conditions,
            report,
        }
    };

    if !p.peered {
        if let Some(network) = &p.networking {
            let (reason, message) = network.reason();
            conditions.push(cond(
                NETWORK_CONNECTED,
                network.done(),
                reason,
                message.clone(),
            ));
            if !network.done() {
                conditions.push(cond(PEERED, false, "ConnectingNetwork", message.clone()));
                return not_ready(
                    conditions,
                    Phase::Peering,
                    "ConnectingNetwork",
                    message.clone(),
                    Some((ContractState::Pending, Some(step_reason(reason, &message)))),
                );
            }
        }
        if let Some(stage) = &p.authentication {
            let (reason, message) = stage.reason();
            conditions.push(cond(AUTHENTICATED, stage.done(), reason, message.clone()));
            let (peered_reason, peered_message) = if stage.done() {
                (
                    "WaitingForPeering",
                    "waiting for Liqo to make the peering from the Identity".to_string(),
                )
            } else {
                ("Authenticating", message)
            };
            conditions.push(cond(PEERED, false, peered_reason, peered_message.clone()));
            // The handshake's own step (WaitingForNonce, ...) says more
            // than "Authenticating" (the same words).
            let step = if stage.done() {
                step_reason(peered_reason, &peered_message)
            } else {
                step_reason(reason, &peered_message)
            };
            return not_ready(
                conditions,
                Phase::Peering,
                peered_reason,
                peered_message,
                Some((ContractState::Pending, Some(step))),
            );
        }
        let (reason, message) = if p.needs_peering_command {
            (
                "PeeringCommandRequired",
                "no Liqo v1 peering with the provider: run status.peeringCommand on this cluster"
                    .to_string(),
            )
        } else {
            (
                "WaitingForPeering",
                "waiting for Liqo to establish the outgoing peering".to_string(),
            )
        };
        conditions.push(cond(PEERED, false, reason, message.clone()));
        return not_ready(
            conditions,
            Phase::Peering,
            reason,
            message,
            Some((ContractState::Pending, None)),
        );
    }
    if let Some(network) = &p.networking {
        let (reason, message) = network.reason();
        conditions.push(cond(NETWORK_CONNECTED, network.done(), reason, message));
    }
    conditions.push(cond(
        PEERED,
        true,
        "PeeringEstablished",
        if p.declarative {
            "the provider is peered (declaratively: a control-plane kubeconfig Secret, no Identity)"
        } else {
            "the provider is peered"
        },
    ));

    match &p.grant {
        Some(Grant::Waiting) => {
            let message = "waiting for the provider to decide on the ResourceSlice".to_string();
            conditions.push(cond(
                RESOURCES_GRANTED,
                false,
                "WaitingForProvider",
                message.clone(),
            ));
            return not_ready(
                conditions,
                Phase::Granting,
                "WaitingForProvider",
                message,
                Some((ContractState::Peered, None)),
            );
        }
        Some(Grant::Denied(why)) => {
            let message = format!("the provider denied the ResourceSlice: {why}");
            return failed(conditions, RESOURCES_GRANTED, "ResourcesDenied", message);
        }
        Some(Grant::Accepted(_)) => conditions.push(cond(
            RESOURCES_GRANTED,
            true,
            "ResourcesAccepted",
            "the provider accepted the ResourceSlice",
        )),
        None => {}
    }

    let missing: Vec<&str> = p
        .namespaces
        .iter()
        .filter(|(_, o)| *o == NamespaceOutcome::Missing)
        .map(|(n, _)| n.as_str())
        .collect();
    let foreign: Vec<&str> = p
        .namespaces
        .iter()
        .filter(|(_, o)| *o == NamespaceOutcome::NotOurs)
        .map(|(n, _)| n.as_str())
        .collect();
    let refused: Vec<&str> = p
        .namespaces
        .iter()
        .filter_map(|(_, o)| match o {
            NamespaceOutcome::Refused(why) => Some(why.as_str()),
            _ => None,
        })
        .collect();
    if !refused.is_empty() {
        return failed(
            conditions,
            NAMESPACES_OFFLOADED,
            "NamespaceNotAllowed",
            refused.join("; "),
        );
    }
    if !missing.is_empty() {
        let message = format!("namespace(s) {} do not exist", missing.join(", "));
        return failed(
            conditions,
            NAMESPACES_OFFLOADED,
            "NamespaceNotFound",
            message,
        );
    }
    if !foreign.is_empty() {
        let message = format!(
            "namespace(s) {} hold a NamespaceOffloading this controller did not create; left alone",
            foreign.join(", ")
        );
        return failed(
            conditions,
            NAMESPACES_OFFLOADED,
            "OffloadingNotOurs",
            message,
        );
    }
    let waiting: Vec<String> = p
        .namespaces
        .iter()
        .filter_map(|(n, o)| match o {
            NamespaceOutcome::Offloading(phase) if phase.is_empty() => Some(n.clone()),
            NamespaceOutcome::Offloading(phase) => Some(format!("{n} ({phase})")),
            _ => None,
        })
        .collect();
    if let Some(why) = p.namespaces.iter().find_map(|(_, o)| match o {
        NamespaceOutcome::Conflict(why) => Some(why.clone()),
        _ => None,
    }) {
        return failed(conditions, NAMESPACES_OFFLOADED, "StrategyConflict", why);
    }
    if !waiting.is_empty() {
        let message = format!(
            "waiting for Liqo to offload namespace(s) {}",
            waiting.join(", ")
        );
        conditions.push(cond(
            NAMESPACES_OFFLOADED,
            false,
            "WaitingForLiqo",
            message.clone(),
        ));
        return not_ready(
            conditions,
            Phase::Offloading,
            "WaitingForLiqo",
            message,
            Some((ContractState::Granted, None)),
        );
    }
    conditions.push(cond(
        NAMESPACES_OFFLOADED,
        true,
        "NamespacesOffloaded",
        format!(
            "{} namespace(s) offloaded to the provider",
            p.namespaces.len()
        ),
    ));
    let message = "peered, granted and offloaded";
    conditions.push(cond(READY, true, "Ready", message));
    Assessment {
        phase: Phase::Ready,
        conditions,
        report: Some((ContractState::Ready, Some(step_reason("Ready", message)))),
    }
}

/// When a contract ends, as the Purchase knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// `expiresAt`.
    pub at: jiff::Timestamp,
    /// The catalog's own `endingSoon` (its `--contract-ending-soon`), as
    /// last read; false while the catalog is unreachable.
    pub catalog_says_soon: bool,
    /// The contract was extended at least once.
    pub extended: bool,
}

/// Whether `ending` is within `lead` of `now`, or the catalog says so.
fn is_ending_soon(ending: &Ending, now: jiff::Timestamp, lead: std::time::Duration) -> bool {
    let lead = jiff::SignedDuration::try_from(lead).unwrap_or(jiff::SignedDuration::MAX);
    ending.catalog_says_soon || ending.at.duration_since(now) <= lead
}

/// The `EndingSoon` condition: True (reason `ContractEndingSoon`, the end
/// time in the message, which is what makes a repeat the same warning)
/// while the contract ends within `lead` or the catalog reads it
/// `endingSoon`; False otherwise (`ContractExtended` once extended).
pub fn ending_soon(ending: &Ending, now: jiff::Timestamp, lead: std::time::Duration) -> Cond {
    let at = controller_core::clock::rfc3339(ending.at);
    if is_ending_soon(ending, now, lead) {
        cond(
            ENDING_SOON,
            true,
            "ContractEndingSoon",
            format!("the contract ends at {at}: extend it in the catalog (POST /contracts/{{id}}/extend) to keep what it set up"),
        )
    } else if ending.extended {
        cond(
            ENDING_SOON,
            false,
            "ContractExtended",
            format!("the contract was extended; it ends at {at}"),
        )
    } else {
        cond(
            ENDING_SOON,
            false,
            "ContractNotEndingSoon",
            format!("the contract ends at {at}"),
        )
    }
}

/// How long until `ending` comes within `lead` (None: it is there
/// already), so a settled Purchase is looked at again in time to warn.
pub fn until_ending_soon(
    ending: &Ending,
    now: jiff::Timestamp,
    lead: std::time::Duration,
) -> Option<std::time::Duration> {
    if is_ending_soon(ending, now, lead) {
        return None;
    }
    let lead = jiff::SignedDuration::try_from(lead).unwrap_or(jiff::SignedDuration::MAX);
    std::time::Duration::try_from(ending.at.duration_since(now) - lead).ok()
}

/// The warning to publish as an Event: the `EndingSoon` condition when it
/// has just turned True, or names another end than the one warned about
/// before (an extension that still ends soon). Once per contract end: the
/// condition kept in the status remembers the warning across restarts.
pub fn ending_soon_warning<'a>(
    before: &[Condition],
    assessment: &'a Assessment,
) -> Option<&'a Cond> {
    let now = assessment
        .conditions
        .iter()
        .find(|c| c.type_ == ENDING_SOON && c.status)?;
    let warned = before
        .iter()
        .any(|b| b.type_ == ENDING_SOON && b.status == "True" && b.message == now.message);
    (!warned).then_some(now)
}

/// The other Purchases still using the peering with `provider`: those of
/// the same provider (as their status records it) that are neither being
/// deleted nor ended. A peering this controller made goes only when none
/// remains.
pub fn peering_users(
    purchases: &[crate::model::Purchase],
    provider: &str,
    me: &str,
) -> Vec<String> {
    purchases
        .iter()
        .filter(|p| p.key() != me && !p.is_deleting())
        .filter(|p| {
            let status = p.status();
            status.provider_cluster_id.as_deref() == Some(provider)
                && status.phase != Phase::Ended.as_str()
        })
        .map(|p| p.key())
        .collect()
}

/// An ended Purchase whose peering is still being taken down: `Peered`
/// says where it is (`Unpeering`), and the Purchase is looked at again at
/// the poll interval, not the resync.
pub fn unpeering(assessment: &mut Assessment, message: String) {
    assessment
        .conditions
        .push(cond(PEERED, false, "Unpeering", message));
}

/// Whether the contract was read (or is known from the status) and is
/// usable: what the warning before its end is about.
pub fn contract_usable(assessment: &Assessment) -> bool {
    assessment
        .conditions
        .iter()
        .any(|c| c.type_ == CONTRACT_VALID && c.status)
}

/// Whether the Purchase waits on Liqo to unpeer.
pub fn is_unpeering(assessment: &Assessment) -> bool {
    assessment
        .conditions
        .iter()
        .any(|c| c.type_ == PEERED && c.reason == "Unpeering")
}

/// The catalog has not answered and no contract was read before: wait.
pub fn waiting_for_catalog(message: &str) -> Assessment {
    Assessment {
        phase: Phase::Pending,
        conditions: vec![
            cond(
                CATALOG_REACHABLE,
                false,
                "CatalogUnreachable",
                format!("{message}; retrying with backoff"),
            ),
            cond(
                READY,
                false,
                "CatalogUnreachable",
                "the contract has not been read yet",
            ),
        ],
        report: None,
    }
}

/// Whether the catalog, which holds `contract` as read this round, must
/// hear `state` and `reason` (it also learns our cluster ID while the
/// contract has none).
pub fn report_due(contract: &Contract, state: ContractState, reason: Option<&str>) -> bool {
    contract.state != state
        || contract.reason.as_deref() != reason
        || contract.consumer_cluster_id.is_none()
}

/// Whether the catalog is unreachable (the next round then backs off).
pub fn catalog_unreachable(assessment: &Assessment) -> bool {
    assessment
        .conditions
        .iter()
        .any(|c| c.type_ == CATALOG_REACHABLE && !c.status)
}

/// Whether the Purchase waits for its contract to change in the catalog
/// (the provider's peering credentials, a purchase to go through) rather
/// than for Liqo: the contract stream wakes it, so it is looked at again
/// only at the fallback poll.
pub fn waits_for_contract(assessment: &Assessment) -> bool {
    matches!(assessment.phase, Phase::Pending | Phase::Purchasing)
}

/// The new conditions: `lastTransitionTime` moves only when a condition's
/// status changes.
pub fn merge_conditions(
    before: &[Condition],
    assessment: &Assessment,
    generation: i64,
    now: &str,
) -> Vec<Condition> {
    assessment
        .conditions
        .iter()
        .map(|c| {
            let status = if c.status { "True" } else { "False" };
            let since = before
                .iter()
                .find(|b| b.type_ == c.type_ && b.status == status)
                .map(|b| b.last_transition_time.clone())
                .unwrap_or_else(|| now.to_string());
            Condition {
                type_: c.type_.to_string(),
                status: status.to_string(),
                reason: c.reason.clone(),
                message: c.message.chars().take(1000).collect(),
                last_transition_time: since,
                observed_generation: generation,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use catalog_client::wire::{ContractCredentials, V1Credentials};
    use catalog_client::wire::{Ended, LiqoGeneration};

    fn contract() -> Contract {
        Contract {
            id: "c".into(),
            cluster_id: "p".into(),
            liqo: vec![LiqoGeneration::V1],
            active: true,
            credentials: Some(ContractCredentials {
                v0: None,
                v1: Some(V1Credentials {
                    kubeconfig: "k".into(),
                }),
            }),
            ..Contract::default()
        }
    }

    fn progress() -> Progress {
        Progress {
            generation: Generation::V1,
            catalog_error: None,
            peered: true,
            declarative: false,
            needs_peering_command: false,
            networking: None,
            authentication: None,
            grant: Some(Grant::Accepted(BTreeMap::new())),
            namespaces: vec![("apps".into(), NamespaceOutcome::Offloaded)],
        }
    }

    #[test]
    fn contracts_are_checked_against_this_consumer() {
        assert_eq!(check_contract(&contract(), Generation::V1, "me"), Ok(()));
        let mut c = contract();
        c.active = false;
        c.ended = Some(Ended::Cancelled);
        let problem = check_contract(&c, Generation::V1, "me").unwrap_err();
        assert_eq!(problem.reason(), "ContractCancelled");
        assert_eq!(assess_unusable(&problem).phase, Phase::Ended);
        assert_eq!(assess_unusable(&problem).report, None);

        let mut c = contract();
        c.consumer_cluster_id = Some("other".into());
        assert_eq!(
            check_contract(&c, Generation::V1, "me"),
            Err(Unusable::OtherConsumer("other".into()))
        );
        let problem = check_contract(&contract(), Generation::V0, "me").unwrap_err();
        assert_eq!(problem.reason(), "LiqoGenerationNotOffered");
        assert!(problem.message().contains("[v1]"));
        assert_eq!(
            assess_unusable(&problem).report.map(|r| r.0),
            Some(ContractState::Failed)
        );

        let mut c = contract();
        c.liqo.push(LiqoGeneration::V0);
        assert_eq!(
            check_contract(&c, Generation::V0, "me"),
            Err(Unusable::NoCredentials(Generation::V0))
        );
        // Credentials attached after the sale: the Purchase waits (not
        // settled, so it is looked at again at the next poll) and the
        // catalog hears it is pending, not failed.
        let waiting = assess_unusable(&Unusable::NoCredentials(Generation::V1));
        assert_eq!(waiting.phase, Phase::Pending);
        assert!(!waiting.phase.is_settled());
        assert_eq!(
            waiting.report.clone().map(|r| r.0),
            Some(ContractState::Pending)
        );
        assert!(reported(&waiting).starts_with("NoPeeringCredentials: "));
        // Woken by the contract stream, not a Liqo wait.
        assert!(waits_for_contract(&waiting));
        assert!(!waits_for_contract(&assess(&Progress {
            generation: Generation::V1,
            catalog_error: None,
            peered: false,
            declarative: false,
            needs_peering_command: false,
            networking: None,
            authentication: Some(Stage::WaitingForNonce),
            grant: None,
            namespaces: Vec::new(),
        })));
    }

    /// The reason the catalog hears.
    fn reported(a: &Assessment) -> String {
        a.report.clone().and_then(|r| r.1).unwrap_or_default()
    }

    #[test]
    fn networking_comes_first_each_step_a_reason_and_then_authentication() {
        use crate::networking::{Side, Stage as Net};
        let find = |a: &Assessment, t: &str| a.conditions.iter().find(|c| c.type_ == t).cloned();
        let mut p = progress();
        p.peered = false;
        p.networking = Some(Net::WaitingForConfiguration(Side::Provider));
        let a = assess(&p);
        assert_eq!(a.phase, Phase::Peering);
        let net = find(&a, NETWORK_CONNECTED).unwrap();
        assert_eq!(
            (net.status, net.reason.as_str()),
            (false, "WaitingForConfiguration")
        );
        assert!(net.message.contains("the provider"), "{}", net.message);
        assert_eq!(find(&a, PEERED).unwrap().reason, "ConnectingNetwork");
        assert_eq!(find(&a, READY).unwrap().reason, "ConnectingNetwork");
        assert!(find(&a, AUTHENTICATED).is_none());
        assert!(
            reported(&a).starts_with("WaitingForConfiguration: "),
            "{}",
            reported(&a)
        );
        // Connected: the condition is True and authentication follows.
        p.networking = Some(Net::Connected);
        p.authentication = Some(Stage::WaitingForNonce);
        let a = assess(&p);
        assert!(find(&a, NETWORK_CONNECTED).unwrap().status);
        assert_eq!(find(&a, PEERED).unwrap().reason, "Authenticating");
        assert!(
            reported(&a).starts_with("WaitingForNonce: "),
            "{}",
            reported(&a)
        );
    }

    #[test]
    fn the_controller_s_own_authentication_is_a_condition_with_an_actionable_reason() {
        let mut p = progress();
        p.peered = false;
        p.needs_peering_command = true;
        p.authentication = Some(Stage::WaitingForNonce);
        let a = assess(&p);
        assert_eq!(a.phase, Phase::Peering);
        let find = |a: &Assessment, t: &str| a.conditions.iter().find(|c| c.type_ == t).cloned();
        let auth = find(&a, AUTHENTICATED).unwrap();
        assert_eq!(
            (auth.status, auth.reason.as_str()),
            (false, "WaitingForNonce")
        );
        assert_eq!(find(&a, PEERED).unwrap().reason, "Authenticating");
        assert_eq!(find(&a, READY).unwrap().reason, "Authenticating");
        assert!(!a
            .conditions
            .iter()
            .any(|c| c.reason == "PeeringCommandRequired"));
        // The catalog hears the handshake's own step, not "Authenticating".
        assert_eq!(a.report.clone().map(|r| r.0), Some(ContractState::Pending));
        assert!(
            reported(&a).starts_with("WaitingForNonce: "),
            "{}",
            reported(&a)
        );
        p.authentication = Some(Stage::WaitingForSignature);
        assert!(reported(&assess(&p)).starts_with("WaitingForSignature: "));

        p.authentication = Some(Stage::IdentityCreated);
        let a = assess(&p);
        assert!(find(&a, AUTHENTICATED).unwrap().status);
        assert_eq!(find(&a, PEERED).unwrap().reason, "WaitingForPeering");
        assert!(reported(&a).starts_with("WaitingForPeering: "));

        // Once Liqo reports the peering, the condition is not kept.
        p.peered = true;
        assert!(find(&assess(&p), AUTHENTICATED).is_none());
    }

    #[test]
    fn each_step_maps_to_a_phase_and_a_catalog_state() {
        let ready = assess(&progress());
        assert_eq!(ready.phase, Phase::Ready);
        assert_eq!(
            ready.report,
            Some((
                ContractState::Ready,
                Some("Ready: peered, granted and offloaded".into())
            ))
        );
        assert!(ready.conditions.iter().all(|c| c.status));

        let mut p = progress();
        p.peered = false;
        p.needs_peering_command = true;
        let a = assess(&p);
        assert_eq!(a.phase, Phase::Peering);
        assert_eq!(a.report.clone().map(|r| r.0), Some(ContractState::Pending));
        assert!(reported(&a).starts_with("PeeringCommandRequired: "));
        assert!(a
            .conditions
            .iter()
            .any(|c| c.reason == "PeeringCommandRequired"));

        let mut p = progress();
        p.namespaces.push((
            "web".into(),
            NamespaceOutcome::Offloading("InProgress".into()),
        ));
        let a = assess(&p);
        assert_eq!(a.phase, Phase::Offloading);
        assert_eq!(
            a.report.clone(),
            Some((
                ContractState::Granted,
                Some(
                    "WaitingForLiqo: waiting for Liqo to offload namespace(s) web (InProgress)"
                        .into()
                )
            ))
        );
        let waiting = a
            .conditions
            .iter()
            .find(|c| c.type_ == NAMESPACES_OFFLOADED)
            .unwrap();
        assert!(
            waiting.message.contains("web (InProgress)"),
            "{}",
            waiting.message
        );

        let mut p = progress();
        p.grant = Some(Grant::Waiting);
        assert_eq!(
            assess(&p).report,
            Some((
                ContractState::Peered,
                Some(
                    "WaitingForProvider: waiting for the provider to decide on the ResourceSlice"
                        .into()
                )
            ))
        );
        p.grant = Some(Grant::Denied("Short: no".into()));
        let a = assess(&p);
        assert_eq!(a.phase, Phase::Failed);
        assert_eq!(a.report.clone().map(|r| r.0), Some(ContractState::Failed));
        assert_eq!(
            reported(&a),
            "ResourcesDenied: the provider denied the ResourceSlice: Short: no"
        );

        let mut p = progress();
        p.grant = None; // v0
        p.namespaces
            .push(("gone".into(), NamespaceOutcome::Missing));
        let a = assess(&p);
        assert_eq!(a.phase, Phase::Failed);
        let reason = a.report.and_then(|r| r.1).unwrap();
        assert!(reason.contains("gone"), "{reason}");

        let mut p = progress();
        p.catalog_error = Some("cannot connect".into());
        let a = assess(&p);
        assert_eq!(a.phase, Phase::Ready);
        let reach = a
            .conditions
            .iter()
            .find(|c| c.type_ == CATALOG_REACHABLE)
            .unwrap();
        assert!(!reach.status);
    }
    #[test]
    fn phases_are_spelt_as_the_status_always_has() {
        let all = [
            Phase::Pending,
            Phase::Purchasing,
            Phase::Peering,
            Phase::Granting,
            Phase::Offloading,
            Phase::Ready,
            Phase::Failed,
            Phase::Ended,
        ];
        for phase in all {
            assert_eq!(
                serde_json::to_value(phase).unwrap(),
                serde_json::json!(phase.as_str())
            );
        }
        let spelt: Vec<&str> = all.iter().map(|p| p.as_str()).collect();
        assert_eq!(
            spelt,
            [
                "Pending",
                "Purchasing",
                "Peering",
                "Granting",
                "Offloading",
                "Ready",
                "Failed",
                "Ended"
            ]
        );
    }

    #[test]
    fn transition_times_move_only_with_the_status() {
        let before = vec![Condition {
            type_: "Peered".into(),
            status: "True".into(),
            reason: "x".into(),
            message: "m".into(),
            last_transition_time: "T0".into(),
            observed_generation: 1,
        }];
        let assessment = |status| Assessment {
            phase: Phase::Ready,
            conditions: vec![cond(PEERED, status, "y", "n")],
            report: None,
        };
        let kept = merge_conditions(&before, &assessment(true), 2, "T1");
        assert_eq!(kept[0].last_transition_time, "T0");
        assert_eq!(kept[0].observed_generation, 2);
        let moved = merge_conditions(&before, &assessment(false), 2, "T1");
        assert_eq!(moved[0].last_transition_time, "T1");
    }

    #[test]
    fn the_catalog_hears_only_what_it_does_not_hold() {
        let mut c = contract();
        c.consumer_cluster_id = Some("me".into());
        c.state = ContractState::Peered;
        assert!(!report_due(&c, ContractState::Peered, None));
        assert!(report_due(&c, ContractState::Ready, None));
        assert!(report_due(&c, ContractState::Peered, Some("why")));
        c.consumer_cluster_id = None;
        assert!(report_due(&c, ContractState::Peered, None));
        assert!(catalog_unreachable(&waiting_for_catalog("down")));
        assert!(!catalog_unreachable(&assess(&progress())));
    }

    fn at(text: &str) -> jiff::Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn the_end_is_warned_about_once_and_an_extension_clears_it() {
        let hour = std::time::Duration::from_secs(3600);
        let ending = Ending {
            at: at("2026-01-01T12:00:00Z"),
            catalog_says_soon: false,
            extended: false,
        };
        let early = at("2026-01-01T10:00:00Z");
        let quiet = ending_soon(&ending, early, hour);
        assert!(!quiet.status);
        assert_eq!(quiet.reason, "ContractNotEndingSoon");
        assert_eq!(
            until_ending_soon(&ending, early, hour),
            Some(hour),
            "looked at again when the lead time starts"
        );
        let late = at("2026-01-01T11:30:00Z");
        let warning = ending_soon(&ending, late, hour);
        assert!(warning.status);
        assert_eq!(warning.reason, "ContractEndingSoon");
        assert!(
            warning.message.contains("2026-01-01T12:00:00Z"),
            "{}",
            warning.message
        );
        assert_eq!(until_ending_soon(&ending, late, hour), None);
        // The catalog's own lead time counts too.
        let told = Ending {
            catalog_says_soon: true,
            ..ending.clone()
        };
        assert!(ending_soon(&told, early, hour).status);

        let assessment = |c: Cond| Assessment {
            phase: Phase::Ready,
            conditions: vec![c],
            report: None,
        };
        let warned = merge_conditions(&[], &assessment(warning.clone()), 1, "T");
        assert_eq!(
            ending_soon_warning(&[], &assessment(warning.clone())),
            Some(&warning)
        );
        assert_eq!(
            ending_soon_warning(&warned, &assessment(warning.clone())),
            None,
            "once per end"
        );
        let extended = Ending {
            at: at("2026-01-01T12:15:00Z"),
            extended: true,
            ..ending.clone()
        };
        let again = ending_soon(&extended, late, hour);
        assert!(again.status);
        assert!(
            ending_soon_warning(&warned, &assessment(again)).is_some(),
            "a new end is warned about"
        );
        let far = Ending {
            at: at("2026-02-01T00:00:00Z"),
            extended: true,
            ..ending
        };
        let cleared = ending_soon(&far, late, hour);
        assert!(!cleared.status);
        assert_eq!(cleared.reason, "ContractExtended");
        assert_eq!(ending_soon_warning(&warned, &assessment(cleared)), None);
    }

    #[test]
    fn a_peering_is_used_by_every_live_purchase_of_its_provider() {
        use crate::model::{Purchase, PurchaseSpec, PurchaseStatus};
        let purchase = |name: &str, provider: &str, phase: Phase, deleting: bool| {
            let mut p = Purchase::new(name, PurchaseSpec::default());
            p.metadata.namespace = Some("team".into());
            if deleting {
                p.metadata.deletion_timestamp = Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
                );
            }
            p.status = Some(PurchaseStatus {
                provider_cluster_id: Some(provider.into()),
                phase: phase.as_str().into(),
                ..PurchaseStatus::default()
            });
            p
        };
        let all = [
            purchase("me", "p", Phase::Ready, true),
            purchase("other", "p", Phase::Ready, false),
            purchase("elsewhere", "q", Phase::Ready, false),
            purchase("ended", "p", Phase::Ended, false),
            purchase("going", "p", Phase::Ready, true),
            purchase("peering", "p", Phase::Peering, false),
        ];
        assert_eq!(
            peering_users(&all, "p", "team/me"),
            ["team/other", "team/peering"]
        );
        assert!(peering_users(&all[..1], "p", "team/me").is_empty());
    }

    fn namespace(
        name: &str,
        offloadable_by: Option<&str>,
    ) -> k8s_openapi::api::core::v1::Namespace {
        let mut ns = k8s_openapi::api::core::v1::Namespace::default();
        ns.metadata.name = Some(name.into());
        ns.metadata.annotations =
            offloadable_by.map(|v| BTreeMap::from([(OFFLOADABLE_BY.to_string(), v.to_string())]));
        ns
    }

    /// Issue 41 (hostile review, "read in the code", decision.rs:472-503):
    /// a Purchase in `team` offloads `team`, and another namespace only
    /// when that one names `team`; never kube-system, Liqo's namespaces or
    /// the controller's, whatever they say; a refusal fails the Purchase
    /// with its own reason.
    #[test]
    fn a_purchase_offloads_its_own_namespace_or_one_that_names_it() {
        let protected = ["liqo-broker"];
        let may =
            |ns: &k8s_openapi::api::core::v1::Namespace| offload_refusal("team", ns, &protected);
        assert_eq!(may(&namespace("team", None)), None);
        assert_eq!(may(&namespace("apps", Some("other, team"))), None);
        assert_eq!(may(&namespace("apps", Some("other\tteam"))), None);
        let not_named = may(&namespace("apps", None)).unwrap();
        assert!(
            not_named.contains(OFFLOADABLE_BY) && not_named.contains("team"),
            "{not_named}"
        );
        assert!(may(&namespace("apps", Some("teams,tea"))).is_some());
        for system in [
            "kube-system",
            "kube-public",
            "kube-node-lease",
            "liqo",
            "liqo-tenant-p",
            "liqo-broker",
        ] {
            let why = may(&namespace(system, Some("team"))).unwrap();
            assert!(why.contains("system namespace"), "{system}: {why}");
            // Not even from a Purchase living there.
            assert!(offload_refusal(system, &namespace(system, None), &protected).is_some());
        }

        let mut p = progress();
        p.namespaces.push((
            "kube-system".into(),
            NamespaceOutcome::Refused(may(&namespace("kube-system", None)).unwrap()),
        ));
        p.namespaces
            .push(("gone".into(), NamespaceOutcome::Missing));
        let a = assess(&p);
        assert_eq!(a.phase, Phase::Failed);
        let offloaded = a
            .conditions
            .iter()
            .find(|c| c.type_ == NAMESPACES_OFFLOADED)
            .unwrap();
        assert!(!offloaded.status);
        assert_eq!(offloaded.reason, "NamespaceNotAllowed");
        assert!(
            offloaded.message.contains("kube-system"),
            "{}",
            offloaded.message
        );
    }
}
