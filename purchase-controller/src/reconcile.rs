//! The controller: a kube-rs [`Controller`] over Purchases. One reconcile
//! gathers the facts (the credentials Secret, the contract from the
//! catalog, the ForeignCluster, the ResourceSlice, the listed namespaces),
//! creates or updates what is missing (objects built by [`crate::liqo`]),
//! lets [`crate::decision`] judge, and writes the status, an Event on each
//! phase change, and the contract's state in the catalog.
//!
//! The contract id is written to the status before a purchase is made, so
//! a controller restarted half-way reads the contract instead of buying
//! again. While the catalog is unreachable the controller keeps what exists
//! and works from the contract as last read (kept in the status), retrying
//! with a doubling delay. A finalizer removes, on deletion, what this
//! Purchase created — and only that (see [`crate::liqo`] on ownership).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use controller_core::clock::now_rfc3339;
use controller_core::runtime;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::catalog::{CatalogClient, CatalogError, Contract};
use crate::cluster::{Cluster, ClusterError};
use crate::decision::{self, Assessment, Unusable};
use crate::liqo::Generation;
use crate::metrics::Metrics;
use crate::model::{Condition, Purchase, PurchaseStatus, FINALIZER};

/// What the controller is told to do.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Liqo generation this cluster runs.
    pub generation: Generation,
    /// This cluster's Liqo cluster ID.
    pub cluster_id: String,
    /// Liqo's namespace (v0.x token Secrets live here).
    pub liqo_namespace: String,
    /// While waiting for Liqo or the provider: look again this often.
    pub poll: Duration,
    /// Once ready: re-read the contract this often (expiry, cancellation).
    pub resync: Duration,
    /// First retry after a failure; doubles up to `retry_max`.
    pub retry: Duration,
    pub retry_max: Duration,
    /// Bounds each catalog request.
    pub catalog_timeout: Duration,
    pub instance: String,
}

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot read an object: {0}")]
    Decode(#[from] serde_json::Error),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl From<ClusterError> for ReconcileError {
    fn from(error: ClusterError) -> Self {
        match error {
            ClusterError::Kube(e) => ReconcileError::Kube(e),
            ClusterError::Decode(e) => ReconcileError::Decode(e),
        }
    }
}

struct Shared {
    client: Client,
    cluster: Cluster,
    settings: Settings,
    metrics: Metrics,
    recorder: Recorder,
    http: reqwest::Client,
    /// Consecutive failures per Purchase, for the retry delay.
    failures: Mutex<HashMap<String, u32>>,
}

impl Shared {
    fn backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = failures.entry(key.to_string()).or_insert(0);
        let delay = self
            .settings
            .retry
            .saturating_mul(1u32 << (*n).min(16))
            .min(self.settings.retry_max);
        *n = n.saturating_add(1);
        delay
    }

    fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

/// Run the controller until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> Result<(), CatalogError> {
    let http = CatalogClient::http(settings.catalog_timeout)?;
    let reporter = Reporter {
        controller: "liqo-broker-purchase-controller".to_string(),
        instance: Some(settings.instance.clone()),
    };
    let cluster = Cluster {
        client: client.clone(),
        generation: settings.generation,
        cluster_id: settings.cluster_id.clone(),
        liqo_namespace: settings.liqo_namespace.clone(),
    };
    let shared = Arc::new(Shared {
        recorder: Recorder::new(client.clone(), reporter),
        client: client.clone(),
        cluster,
        settings,
        metrics: metrics.clone(),
        http,
        failures: Mutex::new(HashMap::new()),
    });
    let purchases: Api<Purchase> = Api::all(client);
    let span = tracing::info_span!("purchase_controller", cluster_id = %shared.settings.cluster_id);
    async move {
        tracing::info!(
            liqo = shared.settings.generation.as_str(),
            "controller started"
        );
        // Ready (for /readyz) once the API server has answered a list.
        let probe = purchases.clone();
        let ready = metrics.clone();
        let readiness = tokio::spawn(
            async move {
                loop {
                    match probe.list(&ListParams::default().limit(1)).await {
                        Ok(_) => break ready.set_reached_api(),
                        Err(error) => {
                            tracing::debug!(%error, "the API server has not answered yet")
                        }
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            .in_current_span(),
        );
        let controller = Controller::new(purchases, watcher::Config::default());
        controller
            .graceful_shutdown_on(shutdown.cancelled_owned())
            .run(reconcile, error_policy, shared)
            .for_each(|result| async move {
                match result {
                    Ok((purchase, _)) => tracing::debug!(%purchase, "reconciled"),
                    Err(error) => tracing::debug!(%error, "reconcile round failed"),
                }
            })
            .await;
        readiness.abort();
        tracing::info!("controller stopped");
    }
    .instrument(span)
    .await;
    Ok(())
}

fn error_policy(purchase: Arc<Purchase>, error: &ReconcileError, shared: Arc<Shared>) -> Action {
    let delay = shared.backoff(&purchase.key());
    tracing::warn!(purchase = %purchase.key(), %error, ?delay, "reconcile failed; retrying");
    shared.metrics.count_error(match error {
        ReconcileError::Catalog(_) => "catalog",
        _ => "kubernetes",
    });
    Action::requeue(delay)
}

async fn reconcile(purchase: Arc<Purchase>, shared: Arc<Shared>) -> Result<Action, ReconcileError> {
    let key = purchase.key();
    let span = tracing::info_span!("reconcile", purchase = %key);
    async move {
        let timer = std::time::Instant::now();
        let result = reconcile_inner(&purchase, &shared).await;
        shared.metrics.observe_reconcile(timer.elapsed());
        result
    }
    .instrument(span)
    .await
}

async fn reconcile_inner(
    purchase: &Purchase,
    shared: &Arc<Shared>,
) -> Result<Action, ReconcileError> {
    let key = purchase.key();
    let namespace = purchase.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Purchase> = Api::namespaced(shared.client.clone(), &namespace);
    if purchase.is_deleting() {
        if purchase.has_finalizer() {
            crate::cluster::cleanup(purchase, &shared.cluster, true).await?;
            let finalizers: Vec<String> = purchase
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER)
                .cloned()
                .collect();
            set_finalizers(&api, purchase, finalizers).await?;
            tracing::info!("cleaned up; finalizer removed");
        }
        shared.metrics.forget(&key);
        shared.succeeded(&key);
        return Ok(Action::await_change());
    }
    if !purchase.has_finalizer() {
        let mut finalizers = purchase.finalizers().to_vec();
        finalizers.push(FINALIZER.to_string());
        set_finalizers(&api, purchase, finalizers).await?;
        // The patch brings the Purchase back through the watch.
        return Ok(Action::await_change());
    }

    let before = purchase.status();
    let mut status = before.clone();
    let (assessment, contract) = match drive(purchase, shared, &mut status).await {
        // An object built from the contract that Liqo's schema refuses is
        // not worth retrying: say so.
        Err(ReconcileError::Kube(kube::Error::Api(e))) if e.code == 422 => (
            decision::assess_unusable(&Unusable::Rejected(e.message)),
            None,
        ),
        other => other?,
    };

    // Tell the catalog, when it answered this round and needs telling.
    if let (Some(contract), Some((state, reason))) = (&contract, &assessment.report) {
        let stale = contract.state != *state
            || contract.reason.as_deref() != reason.as_deref()
            || contract.consumer_cluster_id.is_none();
        if stale {
            let consumer = contract
                .consumer_cluster_id
                .is_none()
                .then_some(shared.settings.cluster_id.as_str());
            let client = catalog_client(purchase, shared).await;
            match client {
                Ok(client) => match client
                    .report(&contract.id, state, reason.as_deref(), consumer)
                    .await
                {
                    Ok(()) => {
                        tracing::info!(state, "contract state reported to the catalog");
                        status.catalog_state = Some(state.to_string());
                    }
                    Err(error) => {
                        shared.metrics.count_error("catalog");
                        tracing::warn!(%error, "cannot report the contract's state");
                    }
                },
                Err(error) => {
                    tracing::warn!(error = %error.message(), "cannot report the contract's state")
                }
            }
        } else {
            status.catalog_state = Some(state.to_string());
        }
    }

    let now = now_rfc3339();
    let generation = purchase.metadata.generation.unwrap_or_default();
    status.phase = assessment.phase.to_string();
    status.observed_generation = generation;
    status.conditions = merge_conditions(&before.conditions, &assessment, generation, &now);
    if status != before {
        api.patch_status(
            &purchase.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status_patch(&before, &status)?})),
        )
        .await?;
    }
    if before.phase != status.phase {
        publish_event(shared, purchase, &before.phase, &assessment);
    }
    shared.metrics.set_phase(&key, assessment.phase);

    let unreachable = assessment
        .conditions
        .iter()
        .any(|c| c.type_ == decision::CATALOG_REACHABLE && !c.status);
    Ok(if unreachable {
        Action::requeue(shared.backoff(&key))
    } else {
        shared.succeeded(&key);
        match assessment.phase {
            "Ready" | "Ended" | "Failed" => Action::requeue(shared.settings.resync),
            _ => Action::requeue(shared.settings.poll),
        }
    })
}

/// Write the finalizer list, at the `resourceVersion` it was read at (a
/// concurrent change answers 409 and the Purchase is reconciled again).
async fn set_finalizers(
    api: &Api<Purchase>,
    purchase: &Purchase,
    finalizers: Vec<String>,
) -> Result<(), ReconcileError> {
    api.patch(
        &purchase.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizers,
            "resourceVersion": purchase.resource_version()}})),
    )
    .await?;
    Ok(())
}

/// The catalog client with the consumer's token from its Secret.
async fn catalog_client(purchase: &Purchase, shared: &Shared) -> Result<CatalogClient, Unusable> {
    let spec = &purchase.spec;
    let reference = &spec.credentials_secret_ref;
    let namespace = purchase.metadata.namespace.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(shared.client.clone(), &namespace);
    let secret = match secrets.get_opt(&reference.name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => {
            return Err(Unusable::Credentials(format!(
                "credentials Secret {namespace}/{} does not exist",
                reference.name
            )))
        }
        Err(error) => {
            return Err(Unusable::Credentials(format!(
                "cannot read credentials Secret {namespace}/{}: {error}",
                reference.name
            )))
        }
    };
    let token = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&reference.key))
        .map(|b| String::from_utf8_lossy(&b.0).trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Unusable::Credentials(format!(
                "credentials Secret {namespace}/{} has no non-empty key {:?}",
                reference.name, reference.key
            ))
        })?;
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Unusable::Credentials(format!(
            "credentials Secret {namespace}/{} key {:?} is not a bearer token",
            reference.name, reference.key
        )));
    }
    Ok(CatalogClient::new(
        shared.http.clone(),
        &spec.catalog_url,
        &token,
    ))
}

fn unusable(error: CatalogError, id: &str) -> Result<Unusable, String> {
    match error {
        CatalogError::NotFound(_) => Ok(Unusable::NotFound(id.to_string())),
        CatalogError::Unauthorized { status, message } => Ok(Unusable::Credentials(format!(
            "the catalog refused the consumer's token (HTTP {status}): {message}"
        ))),
        CatalogError::Refused { .. } | CatalogError::Ended(_) => {
            Ok(Unusable::Refused(error.to_string()))
        }
        CatalogError::Unavailable(message) => Err(message),
    }
}

/// The contract as last read, from the status (no credentials).
fn cached_contract(status: &PurchaseStatus, id: &str) -> Option<Contract> {
    Some(Contract {
        id: id.to_string(),
        cluster_id: status.provider_cluster_id.clone()?,
        resources: status.resources.clone(),
        resource_slice_class: status.resource_slice_class.clone().unwrap_or_default(),
        active: true,
        ..Contract::default()
    })
}

/// Everything up to the assessment; `Some(contract)` when the catalog
/// answered this round (its `state` is then what the catalog holds).
async fn drive(
    purchase: &Purchase,
    shared: &Shared,
    status: &mut PurchaseStatus,
) -> Result<(Assessment, Option<Contract>), ReconcileError> {
    let settings = &shared.settings;
    let spec = &purchase.spec;
    let client = match catalog_client(purchase, shared).await {
        Ok(client) => client,
        Err(problem) => return Ok((decision::assess_unusable(&problem), None)),
    };

    // The contract id: given, recorded, or bought now (recorded first).
    let from_offer = spec.contract_id.is_none();
    let id = match (
        &spec.contract_id,
        &status.contract_id,
        &spec.offer_id,
        &spec.plan_id,
    ) {
        (Some(id), _, _, _) => id.clone(),
        (None, Some(id), _, _) => id.clone(),
        (None, None, Some(offer), Some(plan)) => {
            match client.reserve(offer, plan).await {
                Ok(reservation) => {
                    status.contract_id = Some(reservation.id.clone());
                    status.phase = "Purchasing".into();
                    let api: Api<Purchase> = Api::namespaced(
                        shared.client.clone(),
                        purchase.metadata.namespace.as_deref().unwrap_or_default(),
                    );
                    api.patch_status(
                    &purchase.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"contractID": reservation.id, "phase": "Purchasing"}})),
                )
                .await?;
                    tracing::info!(reservation = %reservation.id, "plan reserved; contract id recorded");
                    reservation.id
                }
                Err(error) => {
                    return match unusable(error, offer) {
                        Ok(problem) => Ok((decision::assess_unusable(&problem), None)),
                        Err(message) => Ok((waiting_for_catalog(&message), None)),
                    }
                }
            }
        }
        _ => {
            let problem =
                Unusable::Spec("set spec.contractID, or spec.offerID and spec.planID".to_string());
            return Ok((decision::assess_unusable(&problem), None));
        }
    };

    let mut read = client.contract(&id).await;
    if from_offer && matches!(read, Err(CatalogError::NotFound(_))) {
        // Reserved (recorded above or in an earlier round) but not bought.
        match client.purchase(&id, &settings.cluster_id).await {
            Ok(()) => {
                tracing::info!(contract = %id, "reservation purchased");
                read = client.contract(&id).await;
            }
            Err(error) => read = Err(error),
        }
    }
    let (contract, catalog_error) = match read {
        Ok(contract) => {
            if let Err(problem) =
                decision::check_contract(&contract, settings.generation, &settings.cluster_id)
            {
                if matches!(problem, Unusable::Ended(_)) {
                    crate::cluster::cleanup(purchase, &shared.cluster, false).await?;
                    status.granted.clear();
                    status.offloaded_namespaces.clear();
                    status.peering_command = None;
                }
                return Ok((decision::assess_unusable(&problem), Some(contract)));
            }
            status.provider_cluster_id = Some(contract.cluster_id.clone());
            status.resources = contract.resources.clone();
            status.resource_slice_class = Some(contract.resource_slice_class.clone());
            status.expires_at = Some(contract.expires_at.clone()).filter(|e| !e.is_empty());
            (contract, None)
        }
        Err(error) => match unusable(error, &id) {
            Ok(problem) => return Ok((decision::assess_unusable(&problem), None)),
            Err(message) => match cached_contract(status, &id) {
                Some(cached) => (cached, Some(message)),
                None => return Ok((waiting_for_catalog(&message), None)),
            },
        },
    };
    let fresh = catalog_error.is_none();
    let progress =
        crate::cluster::set_up(purchase, &shared.cluster, status, &contract, catalog_error).await?;
    Ok((decision::assess(&progress), fresh.then_some(contract)))
}

fn waiting_for_catalog(message: &str) -> Assessment {
    Assessment {
        phase: "Pending",
        conditions: vec![
            decision::Cond {
                type_: decision::CATALOG_REACHABLE,
                status: false,
                reason: "CatalogUnreachable".into(),
                message: format!("{message}; retrying with backoff"),
            },
            decision::Cond {
                type_: decision::READY,
                status: false,
                reason: "CatalogUnreachable".into(),
                message: "the contract has not been read yet".into(),
            },
        ],
        report: None,
    }
}

/// `after` as a JSON merge patch over `before`: fields that are gone are
/// sent as `null`, which is how a merge patch removes them.
fn status_patch(
    before: &PurchaseStatus,
    after: &PurchaseStatus,
) -> Result<Value, serde_json::Error> {
    let mut patch = serde_json::to_value(after)?;
    if let (Value::Object(old), Value::Object(new)) = (serde_json::to_value(before)?, &mut patch) {
        for key in old.keys() {
            if !new.contains_key(key) {
                new.insert(key.clone(), Value::Null);
            }
        }
    }
    Ok(patch)
}

/// The new conditions: `lastTransitionTime` moves only when a condition's
/// status changes.
fn merge_conditions(
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

fn publish_event(shared: &Arc<Shared>, purchase: &Purchase, from: &str, assessment: &Assessment) {
    let failed = matches!(assessment.phase, "Failed" | "Ended");
    let ready = assessment
        .conditions
        .iter()
        .find(|c| c.type_ == decision::READY);
    let event = Event {
        type_: if failed {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: ready
            .map(|c| c.reason.clone())
            .unwrap_or_else(|| assessment.phase.to_string()),
        // The same arrival says the same thing (a repeat is counted on one
        // Event); where it came from is in the log.
        note: Some(runtime::note(&format!(
            "{}: {}",
            assessment.phase,
            ready.map(|c| c.message.as_str()).unwrap_or_default()
        ))),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    tracing::info!(from, to = assessment.phase, "phase changed");
    runtime::publish_event(&shared.recorder, event, purchase.object_ref(&()));
}

#[cfg(test)]
mod tests {
    use super::*;

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
            phase: "Ready",
            conditions: vec![decision::Cond {
                type_: "Peered",
                status,
                reason: "y".into(),
                message: "n".into(),
            }],
            report: None,
        };
        let kept = merge_conditions(&before, &assessment(true), 2, "T1");
        assert_eq!(kept[0].last_transition_time, "T0");
        assert_eq!(kept[0].observed_generation, 2);
        let moved = merge_conditions(&before, &assessment(false), 2, "T1");
        assert_eq!(moved[0].last_transition_time, "T1");
    }

    #[test]
    fn fields_that_go_are_sent_as_null() {
        let before = PurchaseStatus {
            peering_command: Some("liqoctl peer".into()),
            phase: "Peering".into(),
            ..PurchaseStatus::default()
        };
        let after = PurchaseStatus {
            phase: "Ready".into(),
            ..PurchaseStatus::default()
        };
        let patch = status_patch(&before, &after).unwrap();
        assert_eq!(patch["peeringCommand"], Value::Null);
        assert!(patch.as_object().unwrap().contains_key("peeringCommand"));
        assert_eq!(patch["phase"], "Ready");
    }

    #[test]
    fn cached_contracts_need_a_known_provider() {
        let mut status = PurchaseStatus::default();
        assert!(cached_contract(&status, "c").is_none());
        status.provider_cluster_id = Some("p".into());
        assert_eq!(
            cached_contract(&status, "c").map(|c| c.cluster_id),
            Some("p".into())
        );
    }
}
