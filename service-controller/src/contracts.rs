//! The pass over the provider's service contracts, read from the
//! [`ContractFollower`] (the catalog's contract change stream; polled only
//! while the stream is unavailable, as peering-user-controller follows
//! them). A pass runs as soon as the contracts change (a purchase, an end,
//! a binding asked for), when a ServiceCatalog was reconciled, when
//! purchase-controller changes the status of one of its Purchases
//! ([`crate::purchase_watch`]), after
//! `--retry` while an instance is on its way (a Purchase peering, Liqo
//! naming the namespace, a deprovisioning step) or a failed step's wait
//! ends, and every `--poll-interval` as a resync:
//!
//! - each active contract of a service some valid ServiceCatalog sells is
//!   provisioned: the customer's peering kubeconfig and the instance's
//!   parameters (`GET /provider/contracts/{id}/customer-peering`); the
//!   instance namespace (named once: an existing one keeps its name, a new
//!   one takes the customer's `namespacePrefix`, [`instance_names`]); the
//!   kubeconfig as a Secret; a Purchase that peers towards the customer
//!   and offloads the namespace with the plan's hosting policy; once the
//!   Purchase is Ready and Liqo has named the namespace at the customer's
//!   cluster (read, never guessed: `remote_namespace`), the generated
//!   secrets, the rendered objects (server-side apply), and
//!   `succeeded` reported — every step's `in progress` description
//!   reported on the way, each report sent once;
//! - its pending bindings are made (a Secret `binding-<id>` in the
//!   instance namespace, marked for the customer's purchase-controller to
//!   copy, the credentials reported) or removed;
//! - each instance namespace whose contract is no longer active is
//!   deprovisioned: the rendered objects, then the Purchase (unpeering),
//!   then the kubeconfig Secret; `succeeded` reported; the namespace last.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use catalog_client::contract_follower::{ContractFollower, FollowedContracts, Source};
use catalog_client::contracts::Listing;
use catalog_client::wire::{
    BindingReport, PendingBinding, PendingBindingState, ServiceReport, ServiceState,
};
use catalog_client::{Error as CatalogError, Session};
use controller_core::retry::Failures;
use kube::runtime::reflector::Store;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cluster::{Cluster, ClusterError, Found};
use crate::instance::{self, Names, Peering};
use crate::metrics::Metrics;
use crate::model::{Service, ServiceCatalog, ServicePlan};
use crate::render::Renderer;
use crate::template::{self, BindingVars, Vars};

/// Why one contract's step failed (retried at the next pass).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("catalog: {0}")]
    Catalog(#[from] CatalogError),
    #[error("cannot draw a secret")]
    Random,
}

impl StepError {
    fn kind(&self) -> &'static str {
        match self {
            StepError::Cluster(_) | StepError::Random => "kubernetes",
            StepError::Catalog(_) => "catalog",
        }
    }
}

/// How long an instance reported `failed` waits before it is tried again
/// (a changed ServiceCatalog is tried at once), and the longest wait after
/// failed steps: a failure that goes on is not retried, nor logged, at
/// every pass (issue 41, U-08).
pub const FAILED_RETRY: Duration = Duration::from_secs(60);

/// Where one contract's provisioning got to in a pass.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Provisioned (its bindings made): nothing to wait for.
    Done,
    /// On its way (a Purchase peering, Liqo naming the namespace): the
    /// next pass, after `--retry`, goes on.
    Going,
    /// Reported `failed`, with this reason.
    Failed(String),
}

/// A contract whose provisioning failed: not tried again before `until`,
/// unless its ServiceCatalog (`version`: uid and generation) changes.
#[derive(Debug)]
struct Waiting {
    until: Instant,
    delay: Duration,
    version: String,
    attempts: u64,
    logged: Option<(Instant, String)>,
}

/// The follower of the contracts.
pub struct Follower {
    pub cluster: Cluster,
    pub metrics: Metrics,
    /// Per contract, the last service state and description reported, so
    /// each is sent once.
    reported: HashMap<String, (ServiceState, String, bool)>,
    /// Contracts whose provisioning failed, until they are tried again.
    waiting: HashMap<String, Waiting>,
    /// The first wait after a failed step (`--retry`).
    first_retry: Duration,
    /// Whether the last pass left an instance on its way.
    on_its_way: bool,
    /// Reading the contracts and listing the instance namespaces: a run of
    /// failures is logged once, then once a minute.
    reading: Failures,
    listing: Failures,
    /// Renders the templates off the runtime, each verdict kept.
    renderer: Renderer,
    /// Per contract, the update (OSB `PATCH`) its last customer-peering
    /// read named: a new one has its reports sent again, as for a new
    /// provisioning, and each report names it.
    updates: HashMap<String, String>,
}

impl Follower {
    pub fn new(cluster: Cluster, metrics: Metrics, renderer: Renderer) -> Self {
        Self {
            cluster,
            metrics,
            reported: HashMap::new(),
            waiting: HashMap::new(),
            first_retry: Duration::from_secs(1),
            on_its_way: false,
            reading: Failures::new("read the contracts"),
            listing: Failures::new("list the instance namespaces"),
            renderer,
            updates: HashMap::new(),
        }
    }

    /// Pass over the contracts read from `contracts` (reports written
    /// through `session`) until `stop`: at each change of the contracts,
    /// at each ServiceCatalog reconciled (`catalogs_changed`), at each
    /// change of a Purchase's status (`purchases_changed`), after
    /// `retry` while an instance is on its way, when a failed step's wait
    /// ends, and every `poll` (the resync).
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        mut self,
        mut contracts: ContractFollower,
        session: Arc<tokio::sync::Mutex<Session>>,
        catalogs: Store<ServiceCatalog>,
        catalogs_changed: Arc<Notify>,
        purchases_changed: Arc<Notify>,
        (poll, retry): (Duration, Duration),
        stop: CancellationToken,
    ) {
        let span = tracing::info_span!("service_contracts");
        self.first_retry = retry.min(FAILED_RETRY);
        async move {
            // The whole list first: with part of it, a contract's offer id
            // could look held by another ServiceCatalog, or by none.
            tokio::select! {
                _ = stop.cancelled() => return,
                ready = catalogs.wait_until_ready() => if ready.is_err() { return },
            }
            loop {
                let started = Instant::now();
                let read = contracts.current().generation;
                self.pass(&contracts, &mut *session.lock().await, &catalogs)
                    .await;
                self.metrics.observe_reconcile(started.elapsed());
                let wait = self.next_pass(poll, retry, Instant::now());
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(wait) => {}
                    _ = contracts.contracts_changed_from(read, |now| show_source(&self.metrics, now)) => {}
                    _ = catalogs_changed.notified() => {}
                    _ = purchases_changed.notified() => {}
                }
            }
        }
        .instrument(span)
        .await
    }

    /// How long until the next pass: `retry` while an instance is on its
    /// way, the end of the first failed step's wait, at most `poll`.
    fn next_pass(&self, poll: Duration, retry: Duration, now: Instant) -> Duration {
        let mut wait = poll;
        if self.on_its_way {
            wait = wait.min(retry);
        }
        if let Some(until) = self.waiting.values().map(|w| w.until).min() {
            wait = wait.min(until.saturating_duration_since(now));
        }
        wait
    }

    /// One pass: provision and bind what is active, deprovision the rest.
    pub async fn pass(
        &mut self,
        contracts: &ContractFollower,
        session: &mut Session,
        catalogs: &Store<ServiceCatalog>,
    ) {
        let now = contracts.current();
        show_source(&self.metrics, &now);
        if now.contracts.is_some() && now.last_error.is_some() {
            // The catalog does not answer (the follower says so in the
            // log): this pass goes on from the last contracts it learnt.
            self.metrics.reconcile().count_failure("catalog");
        }
        self.on_its_way = false;
        let contracts = match contracts.active_contracts(None) {
            Ok(Listing::Contracts { contracts, .. }) => contracts,
            Ok(Listing::NotModified) => return,
            Err(error) => {
                // Only until the catalog first answered: the follower then
                // keeps the last contracts through an outage.
                self.metrics.reconcile().count_failure("catalog");
                self.reading.failed(&error);
                self.on_its_way = true;
                return;
            }
        };
        self.reading.succeeded();
        // Who holds each offer id, over every ServiceCatalog: a contract
        // is served by its holder's templates or not at all, never by
        // another's that declares the same id.
        let holders = crate::offer::holders(catalogs.state().iter().map(|c| c.as_ref()));
        let mut valid: Vec<Arc<ServiceCatalog>> = Vec::new();
        for c in catalogs.state() {
            // Kept verdicts: a refused template is not rendered again.
            if c.metadata.deletion_timestamp.is_none()
                && self.renderer.validate(&c.spec).await.is_ok()
            {
                valid.push(c);
            }
        }
        let catalogs = valid;
        // The instance namespaces first: one that exists keeps its name
        // (and its mapping strategy), whatever the parameters say now.
        let found = match self.cluster.instances().await {
            Ok(found) => found,
            Err(error) => {
                self.metrics.reconcile().count_failure("kubernetes");
                self.listing.failed(&error);
                self.on_its_way = true;
                return;
            }
        };
        self.listing.succeeded();
        self.metrics.instances.set(found.len() as i64);
        let mut active = HashSet::new();
        for contract in contracts.iter().filter(|c| c.active) {
            let holder = holders
                .get(&contract.offer_id)
                .and_then(|key| catalogs.iter().find(|c| &c.key() == key));
            let Some((service, plan)) =
                holder.and_then(|c| c.spec.plan(&contract.offer_id, &contract.plan_id))
            else {
                continue;
            };
            active.insert(contract.id.clone());
            // The holder's generation: a changed ServiceCatalog is tried at
            // once, whatever the wait; so is a contract stamped since (an
            // update, a binding asked for).
            let version = holder.map_or_else(String::new, |c| {
                format!(
                    "{}/{}/{:?}",
                    c.metadata.uid.as_deref().unwrap_or_default(),
                    c.metadata.generation.unwrap_or_default(),
                    contract.bindings_changed_at,
                )
            });
            // Replaced by a plan change whose contract now holds the
            // instance (its namespace names the new one as current): the
            // new contract is served, this one waits for its end.
            if replaced(&contract.id, &found, |id| {
                contracts.iter().any(|c| c.active && c.id == id)
            }) {
                continue;
            }
            let now = Instant::now();
            if self
                .waiting
                .get(&contract.id)
                .is_some_and(|w| w.version == version && now < w.until)
            {
                continue;
            }
            let span = tracing::info_span!("provision", contract = %contract.id, service = %service.id, plan = %plan.id);
            let outcome = self
                .provision(session, &contract.id, service, plan, &found)
                .instrument(span)
                .await;
            if matches!(outcome, Ok(Outcome::Going)) {
                self.on_its_way = true;
            }
            self.after(&contract.id, version, outcome, now);
        }
        self.waiting
            .retain(|id, _| contracts.iter().any(|c| c.active && &c.id == id));
        self.updates
            .retain(|id, _| contracts.iter().any(|c| c.active && &c.id == id));
        // An instance goes when neither the contract it is named after nor
        // the one it is sold under now (after a plan change) is active.
        for instance in found.iter().filter(|f| !kept(f, &active) && !f.terminating) {
            let span = tracing::info_span!("deprovision", contract = %instance.contract_id);
            match self.deprovision(session, instance).instrument(span).await {
                Ok(true) => {}
                Ok(false) => self.on_its_way = true,
                Err(error) => {
                    self.metrics.reconcile().count_failure(error.kind());
                    self.on_its_way = true;
                    tracing::warn!(contract = %instance.contract_id, %error, "deprovisioning step failed; retried at the next pass");
                }
            }
        }
    }

    /// Keep when `contract` is tried again after `outcome`: a `failed`
    /// reported waits [`FAILED_RETRY`]; a step that failed waits `--retry`
    /// doubling to [`FAILED_RETRY`]; anything else is tried at the next
    /// pass. A failure is logged once, then when its message changes or
    /// a minute has passed (with how many attempts failed), its end once.
    fn after(
        &mut self,
        contract: &str,
        version: String,
        outcome: Result<Outcome, StepError>,
        now: Instant,
    ) {
        let (delay, message) = match outcome {
            Ok(Outcome::Going | Outcome::Done) => {
                if let Some(w) = self.waiting.remove(contract) {
                    tracing::info!(%contract, attempts = w.attempts, "provisioning goes on again");
                }
                return;
            }
            Ok(Outcome::Failed(why)) => (FAILED_RETRY, format!("reported failed: {why}")),
            Err(error) => {
                self.metrics.reconcile().count_failure(error.kind());
                let last = self
                    .waiting
                    .get(contract)
                    .map_or(Duration::ZERO, |w| w.delay);
                let delay = (last * 2).clamp(self.first_retry, FAILED_RETRY);
                (delay, format!("provisioning step failed: {error}"))
            }
        };
        let w = self.waiting.entry(contract.to_string()).or_insert(Waiting {
            until: now,
            delay,
            version: version.clone(),
            attempts: 0,
            logged: None,
        });
        w.attempts += 1;
        w.delay = delay;
        w.until = now + delay;
        w.version = version;
        let last = w.logged.as_ref().map(|(at, m)| (*at, m.as_str()));
        if controller_core::retry::worth_logging(last, &message, now, FAILED_RETRY) {
            tracing::warn!(%contract, attempts = w.attempts, retry_in = ?delay, "{message}");
            w.logged = Some((now, message));
        }
    }

    /// Report `failed` with `why` (once): the instance waits.
    async fn fail(
        &mut self,
        session: &mut Session,
        contract: &str,
        why: String,
    ) -> Result<Outcome, StepError> {
        self.report(session, contract, ServiceState::Failed, &why)
            .await?;
        Ok(Outcome::Failed(why))
    }

    /// Report the service's state once per change. A report no operation
    /// waits for (a contract bought outside the Open Service Broker, or
    /// settled already) is not an error.
    async fn report(
        &mut self,
        session: &mut Session,
        contract: &str,
        state: ServiceState,
        description: &str,
    ) -> Result<(), StepError> {
        self.send_report(session, contract, state, description, false)
            .await
    }

    /// A report of taking the service down: marked as answering the
    /// removal, so the catalog tells it from a late report of setting up.
    async fn report_removal(
        &mut self,
        session: &mut Session,
        contract: &str,
        state: ServiceState,
        description: &str,
    ) -> Result<(), StepError> {
        self.send_report(session, contract, state, description, true)
            .await
    }

    async fn send_report(
        &mut self,
        session: &mut Session,
        contract: &str,
        state: ServiceState,
        description: &str,
        removal: bool,
    ) -> Result<(), StepError> {
        let now = (state, description.to_string(), removal);
        if self.reported.get(contract) == Some(&now) {
            return Ok(());
        }
        let body = ServiceReport {
            state,
            description: Some(description.chars().take(1024).collect()),
            // The update this pass read, if any: a report from before it
            // must not settle it.
            update: self.updates.get(contract).cloned(),
            removal,
        };
        match session.report_service(contract, &body).await {
            Ok(()) | Err(CatalogError::Rejected { status: 409, .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.metrics.reports.inc();
        self.reported.insert(contract.to_string(), now);
        Ok(())
    }

    async fn provision(
        &mut self,
        session: &mut Session,
        contract: &str,
        service: &Service,
        plan: &ServicePlan,
        found: &[Found],
    ) -> Result<Outcome, StepError> {
        let peering = match session.customer_peering(contract).await {
            Ok(p) => p,
            // Being deprovisioned: the next pass sees the contract end.
            Err(CatalogError::Ended(_)) => return Ok(Outcome::Going),
            Err(e) => return Err(e.into()),
        };
        // An update waiting: its outcome is reported even if it reads as
        // the last report sent (the same objects, say).
        match &peering.update {
            Some(update) if self.updates.get(contract) != Some(update) => {
                self.reported.remove(contract);
                self.updates.insert(contract.to_string(), update.clone());
            }
            Some(_) => {}
            None => {
                self.updates.remove(contract);
            }
        }
        // After a plan change the instance keeps the names of its first
        // contract; it is sold under this one.
        let named_after = peering.instance_contract_id.as_deref().unwrap_or(contract);
        let names = match instance_names(named_after, &peering.parameters, found) {
            Ok(names) => names.serving(contract),
            Err(why) => return self.fail(session, contract, why).await,
        };
        self.cluster
            .namespace(&names, &service.id, &plan.id)
            .await?;
        let own = self.cluster.own_namespace.clone();
        let kubeconfig = [(instance::KUBECONFIG_KEY.to_string(), peering.kubeconfig)].into();
        let marks = [(
            instance::CONTRACT_ANNOTATION.to_string(),
            contract.to_string(),
        )]
        .into();
        self.cluster
            .secret(
                &own,
                &names.peering_secret,
                &kubeconfig,
                &BTreeMap::new(),
                &marks,
            )
            .await?;
        let status = self
            .cluster
            .purchase(&names.purchase, instance::purchase(&names, &own, plan))
            .await?;
        match instance::peering(status.as_ref()) {
            Peering::Waiting(why) => {
                self.report(session, contract, ServiceState::InProgress, &why)
                    .await?;
                return Ok(Outcome::Going);
            }
            Peering::Failed(why) => return self.fail(session, contract, why).await,
            Peering::Ready => {}
        }
        // The name the customer's pods use, as Liqo wrote it: until it
        // has, nothing is rendered (nor any binding) with a guess.
        let Some(remote_namespace) = self.cluster.remote_namespace(&names.namespace).await? else {
            self.report(
                session,
                contract,
                ServiceState::InProgress,
                "waiting for Liqo to name the instance namespace on the customer's cluster",
            )
            .await?;
            return Ok(Outcome::Going);
        };
        let kept = self
            .cluster
            .read_secret(&names.namespace, instance::GENERATED_SECRET)
            .await?;
        let (secrets, drew) = instance::generated(
            &kept.clone().unwrap_or_default(),
            &service.secrets,
            template::draw_secret,
        )
        .map_err(|_| StepError::Random)?;
        if drew || kept.is_none() {
            self.cluster
                .secret(
                    &names.namespace,
                    instance::GENERATED_SECRET,
                    &secrets,
                    &BTreeMap::new(),
                    &BTreeMap::new(),
                )
                .await?;
        }
        let parameters = &peering.parameters;
        let vars = Vars {
            // The first contract: the same through plan changes.
            instance_id: &names.contract_id,
            namespace: &names.namespace,
            remote_namespace: &remote_namespace,
            service: &service.id,
            plan: &plan.id,
            hosting: &plan.hosting,
            parameters,
            secrets: &secrets,
            binding: None,
        };
        let objects = match self.renderer.objects(service, plan, &vars).await {
            Ok(objects) => objects,
            Err(error) => {
                self.metrics.reconcile().count_failure("template");
                return self.fail(session, contract, error.to_string()).await;
            }
        };
        // Checked before the progress report: a refusal reported at every
        // pass would follow an `in progress` each time, so be sent again
        // and again. Before the record too, so what deprovisioning removes
        // is what can be made.
        let resolved = match self.cluster.resolve(&objects).await {
            Ok(resolved) => resolved,
            Err(ClusterError::Refused(why)) => {
                let why = format!("service {}, plan {}: {why}", service.id, plan.id);
                return self.fail(session, contract, why).await;
            }
            Err(e) => return Err(e.into()),
        };
        let refs: Vec<_> = objects.iter().map(template::reference).collect();
        // What an earlier render made that this one does not (an update's
        // parameters or plan dropped it): removed once the new objects are
        // applied.
        let stale: Vec<_> = found
            .iter()
            .find(|f| f.namespace == names.namespace)
            .map(|f| {
                f.rendered
                    .iter()
                    .filter(|r| !refs.contains(r))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        // Recorded before any is applied (with what they replace), so a
        // half-done apply is removed too.
        let recorded: Vec<_> = refs.iter().chain(&stale).cloned().collect();
        self.cluster.record_rendered(&names, &recorded).await?;
        self.report(
            session,
            contract,
            ServiceState::InProgress,
            "applying the service's objects",
        )
        .await?;
        self.cluster
            .apply_objects(&names.namespace, resolved)
            .await?;
        if !stale.is_empty() {
            if !self
                .cluster
                .delete_objects(&names.namespace, &stale)
                .await?
            {
                return Ok(Outcome::Going);
            }
            self.cluster.record_rendered(&names, &refs).await?;
        }
        let running = if remote_namespace == names.namespace {
            format!("the service is running in namespace {}", names.namespace)
        } else {
            format!(
                "the service is running in namespace {} ({remote_namespace} on your cluster)",
                names.namespace
            )
        };
        self.report(session, contract, ServiceState::Succeeded, &running)
            .await?;
        // What each binding made beside its Secret, as recorded.
        let made = found
            .iter()
            .find(|f| f.namespace == names.namespace)
            .map(|f| f.bindings.clone())
            .unwrap_or_default();
        let mut settled = true;
        for binding in session.pending_bindings(contract).await? {
            settled &= self
                .binding(session, &names, service, plan, &vars, &binding, &made)
                .await?;
        }
        // A binding whose objects are still going is on its way: the next
        // pass comes after `--retry`, not the resync.
        Ok(if settled {
            Outcome::Done
        } else {
            Outcome::Going
        })
    }

    /// One pending binding made or removed, and reported; false while its
    /// objects are still going (reported at a later pass).
    // The instance's parts as provision holds them, and what its bindings
    // made: bundling them would only rename them.
    #[allow(clippy::too_many_arguments)]
    async fn binding(
        &mut self,
        session: &mut Session,
        names: &Names,
        service: &Service,
        plan: &ServicePlan,
        instance: &Vars<'_>,
        binding: &PendingBinding,
        made: &BTreeMap<String, Vec<template::ObjectRef>>,
    ) -> Result<bool, StepError> {
        let id = &binding.binding_id;
        let secret = instance::binding_secret(id);
        let label = instance::label_value(id);
        let report = match binding.state {
            PendingBindingState::Deleting => {
                // Its objects first: the binding is gone once they are
                // (until then it stays `in progress`, tried again at the
                // next pass).
                if let Some(objects) = made.get(&label) {
                    if !self
                        .cluster
                        .delete_objects(&names.namespace, objects)
                        .await?
                    {
                        return Ok(false);
                    }
                    self.cluster
                        .record_binding_objects(&names.namespace, &label, None)
                        .await?;
                }
                self.cluster
                    .delete_secret(&names.namespace, &secret)
                    .await?;
                BindingReport {
                    state: ServiceState::Succeeded,
                    description: Some("the binding's Secret and objects were removed".into()),
                    credentials: None,
                }
            }
            PendingBindingState::Creating => {
                // The instance's variables, and the binding's.
                let vars = Vars {
                    binding: Some(BindingVars {
                        id,
                        parameters: &binding.parameters,
                    }),
                    ..instance.clone()
                };
                match (
                    instance::binding_target(&binding.parameters),
                    self.renderer.credentials(service, plan, &vars).await,
                ) {
                    (None, _) => BindingReport {
                        state: ServiceState::Failed,
                        description: Some(
                            "parameters.namespace and parameters.secretName are required".into(),
                        ),
                        credentials: None,
                    },
                    (_, Err(error)) => BindingReport {
                        state: ServiceState::Failed,
                        description: Some(error.to_string()),
                        credentials: None,
                    },
                    (Some((target_namespace, target_name)), Ok(credentials)) => {
                        if let Err(why) = self
                            .binding_objects(names, service, plan, &vars, &label)
                            .await?
                        {
                            self.report_binding(
                                session,
                                names,
                                id,
                                &BindingReport {
                                    state: ServiceState::Failed,
                                    description: Some(why),
                                    credentials: None,
                                },
                            )
                            .await?;
                            return Ok(true);
                        }
                        let labels = [(
                            instance::BINDING_LABEL.to_string(),
                            instance::label_value(id),
                        )]
                        .into();
                        let annotations = [
                            (
                                instance::TARGET_NAMESPACE_ANNOTATION.to_string(),
                                target_namespace,
                            ),
                            (instance::TARGET_NAME_ANNOTATION.to_string(), target_name),
                        ]
                        .into();
                        self.cluster
                            .secret(
                                &names.namespace,
                                &secret,
                                &credentials,
                                &labels,
                                &annotations,
                            )
                            .await?;
                        BindingReport {
                            state: ServiceState::Succeeded,
                            description: Some("credentials ready".into()),
                            credentials: Some(credentials),
                        }
                    }
                }
            }
        };
        self.report_binding(session, names, id, &report).await?;
        Ok(true)
    }

    async fn report_binding(
        &mut self,
        session: &mut Session,
        names: &Names,
        id: &str,
        report: &BindingReport,
    ) -> Result<(), StepError> {
        match session.report_binding(&names.current, id, report).await {
            Ok(())
            | Err(CatalogError::NotFound(_))
            | Err(CatalogError::Rejected { status: 409, .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.metrics.reports.inc();
        Ok(())
    }

    /// Make the objects of binding `label` (its `bindingTemplates`): rendered,
    /// checked namespaced, recorded on the namespace, then applied, each
    /// labelled with the binding. `Ok(Err(why))`: refused (a template that
    /// fails with this binding), nothing applied.
    async fn binding_objects(
        &mut self,
        names: &Names,
        service: &Service,
        plan: &ServicePlan,
        vars: &Vars<'_>,
        label: &str,
    ) -> Result<Result<(), String>, StepError> {
        if service.binding_templates.is_empty() {
            return Ok(Ok(()));
        }
        let mut objects = match self.renderer.binding_objects(service, plan, vars).await {
            Ok(objects) => objects,
            Err(error) => {
                self.metrics.reconcile().count_failure("template");
                return Ok(Err(error.to_string()));
            }
        };
        for object in &mut objects {
            if let Some(labels) = object
                .pointer_mut("/metadata/labels")
                .and_then(Value::as_object_mut)
            {
                labels.insert(instance::BINDING_LABEL.into(), Value::from(label));
            }
        }
        let resolved = match self.cluster.resolve(&objects).await {
            Ok(resolved) => resolved,
            Err(ClusterError::Refused(why)) => {
                return Ok(Err(format!(
                    "service {}, plan {}: {why}",
                    service.id, plan.id
                )))
            }
            Err(e) => return Err(e.into()),
        };
        let refs: Vec<_> = objects.iter().map(template::reference).collect();
        // Recorded before any is applied, so a half-done apply is removed
        // on unbind too.
        self.cluster
            .record_binding_objects(&names.namespace, label, Some(&refs))
            .await?;
        self.cluster
            .apply_objects(&names.namespace, resolved)
            .await?;
        Ok(Ok(()))
    }

    /// One step of taking `found` down; whether it is gone.
    async fn deprovision(
        &mut self,
        session: &mut Session,
        found: &Found,
    ) -> Result<bool, StepError> {
        // Named after its first contract; reported under the current one.
        let names = Names::of(&found.contract_id);
        let contract = found.current();
        // The bindings' objects (those not unbound first) with the rendered.
        let objects: Vec<_> = found
            .bindings
            .values()
            .flatten()
            .chain(&found.rendered)
            .cloned()
            .collect();
        if !self
            .cluster
            .delete_objects(&found.namespace, &objects)
            .await?
        {
            self.report_removal(
                session,
                contract,
                ServiceState::InProgress,
                "removing the service's objects",
            )
            .await?;
            return Ok(false);
        }
        if !self.cluster.delete_purchase(&names.purchase).await? {
            self.report_removal(
                session,
                contract,
                ServiceState::InProgress,
                "unpeering from the customer's cluster",
            )
            .await?;
            return Ok(false);
        }
        self.cluster
            .delete_secret(&self.cluster.own_namespace.clone(), &names.peering_secret)
            .await?;
        match self
            .report_removal(
                session,
                contract,
                ServiceState::Succeeded,
                "the service was removed",
            )
            .await
        {
            // An ended contract bought outside the broker has no
            // instance to settle.
            Ok(()) | Err(StepError::Catalog(CatalogError::NotFound(_))) => {}
            Err(e) => return Err(e),
        }
        self.cluster.delete_namespace(&found.namespace).await?;
        self.reported.remove(contract);
        Ok(true)
    }
}

/// The gauges saying where contracts come from: `catalog_reachable` (the
/// last read, stream or poll, worked) and `contracts_streamed`.
fn show_source(metrics: &Metrics, now: &FollowedContracts) {
    metrics.catalog_reachable.set(i64::from(now.reachable()));
    metrics
        .contracts_streamed
        .set(i64::from(now.source == Source::Stream));
}

/// Whether contract `id` was replaced by a plan change: the instance
/// named after it is sold under another contract now, still `active`.
pub fn replaced(id: &str, found: &[Found], active: impl Fn(&str) -> bool) -> bool {
    found
        .iter()
        .any(|f| f.contract_id == id && f.current() != id && active(f.current()))
}

/// Whether the instance `f` stays: the contract it is named after, or the
/// one it is sold under now (after a plan change), is `active`.
pub fn kept(f: &Found, active: &HashSet<String>) -> bool {
    active.contains(&f.contract_id) || active.contains(f.current())
}

/// The names of `contract`'s instance: those of its namespace when it
/// exists (it keeps its name and mapping strategy, whatever the
/// parameters say now), else new ones with the customer's prefix, if any
/// — refused when the prefix is not a bounded DNS label, or when the name
/// is another contract's namespace.
pub fn instance_names(
    contract: &str,
    parameters: &Value,
    found: &[Found],
) -> Result<Names, String> {
    if let Some(own) = found.iter().find(|f| f.contract_id == contract) {
        return Ok(Names::found(
            contract,
            &own.namespace,
            own.mapping.as_deref(),
        ));
    }
    let prefix = instance::namespace_prefix(parameters)?;
    let names = Names::new(contract, prefix.as_deref());
    if found.iter().any(|f| f.namespace == names.namespace) {
        return Err(format!(
            "namespace {} is already another service instance's; choose another parameters.{}",
            names.namespace,
            instance::PREFIX_PARAMETER
        ));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn follower() -> Follower {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let cluster = Cluster {
            client: kube::Client::try_from(config).unwrap(),
            own_namespace: "liqo".into(),
        };
        let mut f = Follower::new(cluster, Metrics::new(), Renderer::new(Default::default()));
        f.first_retry = Duration::from_millis(200);
        f
    }

    /// U-08 (issue 41): an instance whose step keeps failing is tried again
    /// after the poll interval doubling up to a minute, its failure logged
    /// once (then once a minute, or when it changes); one reported
    /// `failed` waits a minute; a changed ServiceCatalog or a step that
    /// goes on ends the wait.
    #[tokio::test]
    async fn a_failing_instance_waits_longer_each_time_up_to_a_minute() {
        let mut f = follower().await;
        let start = Instant::now();
        let mut now = start;
        let (mut waits, mut logs) = (Vec::new(), Vec::new());
        let mut last_logged = None;
        for _ in 0..12 {
            f.after("c1", "uid/1".into(), Err(StepError::Random), now);
            let w = &f.waiting["c1"];
            waits.push(w.delay);
            let logged = w.logged.as_ref().map(|(at, _)| *at);
            if logged != last_logged {
                logs.push(now - start);
                last_logged = logged;
            }
            now = w.until;
        }
        let ms = |m: u64| Duration::from_millis(m);
        assert_eq!(
            waits[..6],
            [ms(200), ms(400), ms(800), ms(1600), ms(3200), ms(6400)]
        );
        assert_eq!(waits[11], FAILED_RETRY);
        assert_eq!(f.waiting["c1"].attempts, 12);
        // Logged at the first attempt, then never twice within a minute:
        // 4 of the 12 attempts (at 0 s, 102.2 s, 162.2 s, 222.2 s).
        assert_eq!(logs.len(), 4, "{logs:?}");
        assert_eq!(logs[0], Duration::ZERO);
        assert!(
            logs.windows(2).all(|p| p[1] - p[0] >= FAILED_RETRY),
            "{logs:?}"
        );
        // A changed ServiceCatalog is not held back: the pass compares
        // the version kept.
        assert_eq!(f.waiting["c1"].version, "uid/1");

        // A `failed` reported waits a minute at once.
        f.after(
            "c2",
            "uid/1".into(),
            Ok(Outcome::Failed("no".into())),
            start,
        );
        assert_eq!(f.waiting["c2"].until, start + FAILED_RETRY);
        // Going on again ends the wait.
        f.after("c2", "uid/1".into(), Ok(Outcome::Going), start);
        assert!(!f.waiting.contains_key("c2"));
    }

    /// Contracts come on the stream: between passes the resync
    /// (`--poll-interval`), unless an instance is on its way (`--retry`) or
    /// a failed step's wait ends sooner.
    #[tokio::test]
    async fn the_next_pass_comes_when_something_waits_else_at_the_resync() {
        let mut f = follower().await;
        let (poll, retry) = (Duration::from_secs(300), Duration::from_secs(5));
        let now = Instant::now();
        assert_eq!(f.next_pass(poll, retry, now), poll);
        f.on_its_way = true;
        assert_eq!(f.next_pass(poll, retry, now), retry);
        f.on_its_way = false;
        // A `failed` reported: retried when its minute is up.
        f.after("c1", "uid/1".into(), Ok(Outcome::Failed("no".into())), now);
        assert_eq!(f.next_pass(poll, retry, now), FAILED_RETRY);
        assert_eq!(
            f.next_pass(poll, retry, now + FAILED_RETRY * 2),
            Duration::ZERO
        );
        // A first wait longer than the longest is the longest (no panic).
        f.first_retry = Duration::from_secs(120).min(FAILED_RETRY);
        f.after("c2", "uid/1".into(), Err(StepError::Random), now);
        assert_eq!(f.waiting["c2"].delay, FAILED_RETRY);
    }

    fn found(contract: &str, namespace: &str, mapping: Option<&str>) -> Found {
        Found {
            namespace: namespace.into(),
            contract_id: contract.into(),
            rendered: Vec::new(),
            terminating: false,
            mapping: mapping.map(str::to_string),
            current: None,
            bindings: BTreeMap::new(),
        }
    }

    /// Issue 45: after a plan change the instance, named after its first
    /// contract, is sold under the new one: the first is not served while
    /// the new one is active, and the instance stays while either is; once
    /// both ended it goes.
    #[test]
    fn a_plan_change_keeps_the_instance_under_its_new_contract() {
        let mut moved = found("c1", "svc-c1", Some("EnforceSameName"));
        moved.current = Some("c2".into());
        let set = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<HashSet<_>>();
        let both = set(&["c1", "c2"]);
        let found = [moved.clone()];
        assert!(replaced("c1", &found, |id| both.contains(id)));
        assert!(!replaced("c2", &found, |id| both.contains(id)));
        // The plan change failed (c2 ended): c1 is served again.
        let first = set(&["c1"]);
        assert!(!replaced("c1", &found, |id| first.contains(id)));
        assert!(kept(&moved, &first));
        assert!(kept(&moved, &set(&["c2"])));
        assert!(!kept(&moved, &set(&[])));
        // Never changed: its own contract.
        let plain = found_one("c3");
        assert!(kept(&plain, &set(&["c3"])) && !kept(&plain, &set(&["c2"])));
        assert!(!replaced("c3", &[plain], |_| true));
        // Its names: the first contract's, sold under the current one.
        let names = instance_names("c1", &serde_json::json!({}), &found)
            .unwrap()
            .serving("c2");
        assert_eq!(
            (
                names.namespace.as_str(),
                names.purchase.as_str(),
                names.current.as_str()
            ),
            ("svc-c1", "service-c1", "c2")
        );
    }

    fn found_one(contract: &str) -> Found {
        found(
            contract,
            &format!("svc-{contract}"),
            Some("EnforceSameName"),
        )
    }

    /// Issue 45: a new instance is named with the customer's prefix and
    /// offloaded with EnforceSameName; one that exists keeps its name and
    /// strategy (an instance made before: DefaultName) whatever the
    /// parameters say now; a bad prefix, or a name another contract's
    /// namespace has, is refused.
    #[test]
    fn an_instance_is_named_once() {
        let prefix = serde_json::json!({"namespacePrefix": "shop"});
        let new = instance_names("c1", &prefix, &[]).unwrap();
        assert_eq!(
            (new.namespace.as_str(), new.mapping.as_str()),
            ("svc-shop-c1", "EnforceSameName")
        );
        let none = instance_names("c1", &serde_json::json!({}), &[]).unwrap();
        assert_eq!(none.namespace, "svc-c1");
        let kept = [found("c1", "svc-c1", None)];
        let old = instance_names("c1", &prefix, &kept).unwrap();
        assert_eq!(
            (old.namespace.as_str(), old.mapping.as_str()),
            ("svc-c1", "DefaultName")
        );
        let kept = [found("c1", "svc-shop-c1", Some("EnforceSameName"))];
        let bad = serde_json::json!({"namespacePrefix": "Not A Label"});
        assert_eq!(
            instance_names("c1", &bad, &kept).unwrap().namespace,
            "svc-shop-c1"
        );
        let e = instance_names("c2", &bad, &kept).unwrap_err();
        assert!(e.starts_with("parameters.namespacePrefix: "), "{e}");
        // c1-x with prefix shop and x with prefix shop-c1: one name.
        let taken = [found("x", "svc-shop-c1-x", Some("EnforceSameName"))];
        let e = instance_names("c1-x", &prefix, &taken).unwrap_err();
        assert!(
            e.contains("namespace svc-shop-c1-x is already another service instance's"),
            "{e}"
        );
    }
}
