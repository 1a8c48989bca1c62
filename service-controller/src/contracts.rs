//! The pass over the provider's service contracts, every `--poll-interval`
//! (the catalog has no feed of contracts; peering-user-controller follows
//! them the same way):
//!
//! - each active contract of a service some valid ServiceCatalog sells is
//!   provisioned: the instance namespace; the customer's peering
//!   kubeconfig (`GET /provider/contracts/{id}/customer-peering`) as a
//!   Secret; a Purchase that peers towards the customer and offloads the
//!   namespace with the plan's hosting policy; once the Purchase is Ready,
//!   the generated secrets, the rendered objects (server-side apply), and
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

use catalog_client::contracts::Listing;
use catalog_client::wire::{
    BindingReport, PendingBinding, PendingBindingState, ServiceReport, ServiceState,
};
use catalog_client::{Error as CatalogError, Session};
use kube::runtime::reflector::Store;
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

/// The follower of the contracts.
pub struct Follower {
    pub cluster: Cluster,
    pub metrics: Metrics,
    /// Per contract, the last service state and description reported, so
    /// each is sent once.
    reported: HashMap<String, (ServiceState, String)>,
    /// Renders the templates off the runtime, each verdict kept.
    renderer: Renderer,
}

impl Follower {
    pub fn new(cluster: Cluster, metrics: Metrics, renderer: Renderer) -> Self {
        Self {
            cluster,
            metrics,
            reported: HashMap::new(),
            renderer,
        }
    }

    /// Pass over the contracts every `poll` until `stop`.
    pub async fn run(
        mut self,
        session: Arc<tokio::sync::Mutex<Session>>,
        catalogs: Store<ServiceCatalog>,
        poll: Duration,
        stop: CancellationToken,
    ) {
        let span = tracing::info_span!("service_contracts");
        async move {
            loop {
                let started = Instant::now();
                self.pass(&mut *session.lock().await, &catalogs).await;
                self.metrics.observe_reconcile(started.elapsed());
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(poll) => {}
                }
            }
        }
        .instrument(span)
        .await
    }

    /// One pass: provision and bind what is active, deprovision the rest.
    pub async fn pass(&mut self, session: &mut Session, catalogs: &Store<ServiceCatalog>) {
        let contracts = match session.active_contracts(None).await {
            Ok(Listing::Contracts { contracts, .. }) => contracts,
            Ok(Listing::NotModified) => return,
            Err(error) => {
                self.metrics.catalog_reachable.set(0);
                self.metrics.reconcile().count_failure("catalog");
                tracing::warn!(%error, "cannot read the contracts");
                return;
            }
        };
        self.metrics.catalog_reachable.set(1);
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
        let mut active = HashSet::new();
        for contract in contracts.iter().filter(|c| c.active) {
            let Some((service, plan)) = catalogs
                .iter()
                .find_map(|c| c.spec.plan(&contract.offer_id, &contract.plan_id))
            else {
                continue;
            };
            active.insert(contract.id.clone());
            let span = tracing::info_span!("provision", contract = %contract.id, service = %service.id, plan = %plan.id);
            if let Err(error) = self
                .provision(session, &contract.id, service, plan)
                .instrument(span)
                .await
            {
                self.metrics.reconcile().count_failure(error.kind());
                tracing::warn!(contract = %contract.id, %error, "provisioning step failed; retried at the next pass");
            }
        }
        let found = match self.cluster.instances().await {
            Ok(found) => found,
            Err(error) => {
                self.metrics.reconcile().count_failure("kubernetes");
                tracing::warn!(%error, "cannot list the instance namespaces");
                return;
            }
        };
        self.metrics.instances.set(found.len() as i64);
        for instance in found
            .iter()
            .filter(|f| !active.contains(&f.contract_id) && !f.terminating)
        {
            let span = tracing::info_span!("deprovision", contract = %instance.contract_id);
            if let Err(error) = self.deprovision(session, instance).instrument(span).await {
                self.metrics.reconcile().count_failure(error.kind());
                tracing::warn!(contract = %instance.contract_id, %error, "deprovisioning step failed; retried at the next pass");
            }
        }
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
        let now = (state, description.to_string());
        if self.reported.get(contract) == Some(&now) {
            return Ok(());
        }
        let body = ServiceReport {
            state,
            description: Some(description.chars().take(1024).collect()),
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
    ) -> Result<(), StepError> {
        let names = Names::of(contract);
        self.cluster
            .namespace(&names, &service.id, &plan.id)
            .await?;
        let peering = match session.customer_peering(contract).await {
            Ok(p) => p,
            // Being deprovisioned: the next pass sees the contract end.
            Err(CatalogError::Ended(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
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
                return self
                    .report(session, contract, ServiceState::InProgress, &why)
                    .await
            }
            Peering::Failed(why) => {
                return self
                    .report(session, contract, ServiceState::Failed, &why)
                    .await
            }
            Peering::Ready => {}
        }
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
            instance_id: contract,
            namespace: &names.namespace,
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
                return self
                    .report(session, contract, ServiceState::Failed, &error.to_string())
                    .await;
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
                return self
                    .report(session, contract, ServiceState::Failed, &why)
                    .await;
            }
            Err(e) => return Err(e.into()),
        };
        let refs: Vec<_> = objects.iter().map(template::reference).collect();
        // Recorded before any is applied, so a half-done apply is removed
        // too.
        self.cluster.record_rendered(&names, &refs).await?;
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
        self.report(
            session,
            contract,
            ServiceState::Succeeded,
            &format!("the service is running in namespace {}", names.namespace),
        )
        .await?;
        for binding in session.pending_bindings(contract).await? {
            self.binding(session, &names, service, plan, &vars, &binding)
                .await?;
        }
        Ok(())
    }

    async fn binding(
        &mut self,
        session: &mut Session,
        names: &Names,
        service: &Service,
        plan: &ServicePlan,
        instance: &Vars<'_>,
        binding: &PendingBinding,
    ) -> Result<(), StepError> {
        let id = &binding.binding_id;
        let secret = instance::binding_secret(id);
        let report = match binding.state {
            PendingBindingState::Deleting => {
                self.cluster
                    .delete_secret(&names.namespace, &secret)
                    .await?;
                BindingReport {
                    state: ServiceState::Succeeded,
                    description: Some("the binding's Secret was removed".into()),
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
        match session
            .report_binding(&names.contract_id, id, &report)
            .await
        {
            Ok(())
            | Err(CatalogError::NotFound(_))
            | Err(CatalogError::Rejected { status: 409, .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.metrics.reports.inc();
        Ok(())
    }

    async fn deprovision(&mut self, session: &mut Session, found: &Found) -> Result<(), StepError> {
        let contract = &found.contract_id;
        let names = Names::of(contract);
        if !self
            .cluster
            .delete_objects(&found.namespace, &found.rendered)
            .await?
        {
            return self
                .report(
                    session,
                    contract,
                    ServiceState::InProgress,
                    "removing the service's objects",
                )
                .await;
        }
        if !self.cluster.delete_purchase(&names.purchase).await? {
            return self
                .report(
                    session,
                    contract,
                    ServiceState::InProgress,
                    "unpeering from the customer's cluster",
                )
                .await;
        }
        self.cluster
            .delete_secret(&self.cluster.own_namespace.clone(), &names.peering_secret)
            .await?;
        match self
            .report(
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
        Ok(())
    }
}
