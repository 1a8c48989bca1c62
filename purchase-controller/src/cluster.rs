//! The objects a Purchase leads to on the consumer's cluster, created,
//! read and removed: the peering objects (v0.x) or the kubeconfig Secret
//! (v1), the ResourceSlice, the NamespaceOffloadings, and their clean-up.
//! What each object holds is built by [`crate::liqo`]; what it means is
//! judged by [`crate::decision`].

use std::collections::BTreeMap;
use std::sync::Arc;

use controller_core::liqo::{
    FOREIGN_CLUSTER, OFFLOADING_NAME, REMOTE_CLUSTER_ID_LABEL, RESOURCE_SLICE, V0_CLUSTER_ID_LABEL,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, Resource, ResourceExt};
use serde_json::Value;

use crate::authentication::{self, AuthError, Peers, Stage};
use crate::caches::Caches;
use crate::catalog::Contract;
use crate::decision::{NamespaceOutcome, Progress};
use crate::liqo::{self, Generation, Grant, Offloading, OffloadingPlan, SliceRequest};
use crate::model::{Purchase, PurchaseStatus};
use crate::networking;

/// Where taking down what a Purchase set up stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Teardown {
    Done,
    /// Liqo is still ending a shared v0.x peering no other Purchase uses:
    /// look again (why, in words).
    Unpeering(String),
}

/// The consumer's cluster, as the controller is told it is.
#[derive(Clone)]
pub struct Cluster {
    pub client: Client,
    /// The Liqo generation it runs.
    pub generation: Generation,
    /// Its Liqo cluster ID.
    pub cluster_id: String,
    /// Liqo's namespace (v0.x token Secrets live here, v1's
    /// `authentication-keys` too).
    pub liqo_namespace: String,
    /// v1: authenticate with the provider itself (`--auto-peer`) rather
    /// than ask a person to run `liqoctl peer`.
    pub auto_peer: bool,
    /// v1, `--auto-peer`: set up Liqo's networking first (`--networking`),
    /// unless a Purchase says otherwise (`spec.networking`).
    pub networking: bool,
    /// Liqo's namespace on the providers (`--provider-liqo-namespace`).
    pub provider_liqo_namespace: String,
    /// The watches' caches and what rounds remembered ([`crate::caches`]).
    pub cache: Arc<Caches>,
}

/// A Kubernetes call failed, or an object could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot read an object: {0}")]
    Decode(#[from] serde_json::Error),
}

/// Peering, grant, offloading: create what is missing, read how far it got.
pub async fn set_up(
    purchase: &Purchase,
    cluster: &Cluster,
    status: &mut PurchaseStatus,
    contract: &Contract,
    catalog_error: Option<String>,
) -> Result<Progress, ClusterError> {
    let key = purchase.key();
    let provider = contract.cluster_id.as_str();
    let creds = contract.credentials.clone().unwrap_or_default();
    let mut progress = Progress {
        generation: cluster.generation,
        catalog_error,
        peered: false,
        declarative: false,
        needs_peering_command: false,
        networking: None,
        authentication: None,
        grant: None,
        namespaces: Vec::new(),
    };
    let fc_api = cluster.generation.foreign_cluster();
    let fcs: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &fc_api);

    match cluster.generation {
        Generation::V0 => {
            let label = format!("{V0_CLUSTER_ID_LABEL}={provider}");
            let existing = first(&fcs, &label).await?;
            if let Some(v0) = &creds.v0 {
                let secrets: Api<Secret> =
                    Api::namespaced(cluster.client.clone(), &cluster.liqo_namespace);
                let wanted = liqo::v0_token_secret(v0, &cluster.liqo_namespace, &key);
                let name = format!("remote-token-{}", v0.cluster_id);
                // Created once: a contract's credentials do not change.
                if secrets.get_opt(&name).await?.is_none() {
                    secrets
                        .create(&PostParams::default(), &serde_json::from_value(wanted)?)
                        .await?;
                    tracing::info!(secret = %name, "v0 token Secret created");
                }
                // An existing ForeignCluster (ours from an earlier round, or
                // one the operator made) is used as it is.
                if existing.is_none() {
                    let wanted = liqo::v0_foreign_cluster(v0, &key);
                    fcs.create(&PostParams::default(), &serde_json::from_value(wanted)?)
                        .await?;
                    tracing::info!(foreign_cluster = %v0.cluster_name, "v0 ForeignCluster created");
                }
            }
            progress.peered = existing.as_ref().is_some_and(liqo::v0_peered);
        }
        Generation::V1 => {
            // From the watch's cache: one that lags says "not peered yet"
            // a moment longer, and the authentication finds its Identity.
            let existing = match cluster.cache.stores.labelled(
                &fc_api,
                None,
                REMOTE_CLUSTER_ID_LABEL,
                provider,
            ) {
                Some(found) => found.into_iter().next(),
                None => first(&fcs, &format!("{REMOTE_CLUSTER_ID_LABEL}={provider}")).await?,
            };
            let peering = liqo::v1_peering(existing.as_ref(), provider);
            progress.peered = peering.peered;
            progress.declarative = peering.declarative;
            if !peering.peered {
                progress.needs_peering_command = true;
                if let Some(v1) = &creds.v1 {
                    // Kept for unpeering too (the catalog releases it
                    // only while the contract is active).
                    let name = ensure_kubeconfig_secret(purchase, cluster, &v1.kubeconfig).await?;
                    let namespace = purchase.metadata.namespace.clone().unwrap_or_default();
                    status.peering_command = Some(liqo::peering_command(&namespace, &name));
                    status.kubeconfig_secret = Some(name);
                    if cluster.auto_peer {
                        let networking = purchase.spec.networking.unwrap_or(cluster.networking);
                        if let Some(steps) =
                            auto_peer(cluster, provider, &v1.kubeconfig, networking).await?
                        {
                            status.peering_command = None;
                            progress.networking = steps.networking;
                            progress.authentication = steps.authentication;
                        }
                    }
                }
            } else {
                status.peering_command = None;
                // The Connection, while this controller peers with
                // networking: a condition, not a gate (Liqo reconnects).
                if cluster.auto_peer && purchase.spec.networking.unwrap_or(cluster.networking) {
                    progress.networking =
                        networking::observe(&cluster.client, provider, &cluster.cache.stores)
                            .await?;
                }
                let resources = contract.resources.to_strings();
                let name = if crate::direct::is_direct(purchase) {
                    liqo::direct_slice_name(&contract.id)
                } else {
                    liqo::slice_name(&contract.id)
                };
                let request = SliceRequest {
                    name: &name,
                    class: &contract.resource_slice_class,
                    resources: &resources,
                    provider,
                };
                let wanted = liqo::v1_resource_slice(&request, &peering.tenant_namespace, &key);
                let slices: Api<DynamicObject> = Api::namespaced_with(
                    cluster.client.clone(),
                    &peering.tenant_namespace,
                    &liqo::resource_slice(),
                );
                // From the watch's cache (the grant is its status); one the
                // cache does not hold is asked of the API server before it is
                // made.
                let cached = cluster
                    .cache
                    .stores
                    .get(&liqo::resource_slice(), &peering.tenant_namespace, &name)
                    .flatten();
                let slice = match cached {
                    Some(have) => have,
                    None => match slices.get_opt(&name).await? {
                        None => match slices
                            .create(&PostParams::default(), &serde_json::from_value(wanted)?)
                            .await
                        {
                            Ok(created) => {
                                tracing::info!(slice = %name, namespace = %peering.tenant_namespace, "ResourceSlice created");
                                serde_json::to_value(created)?
                            }
                            // Made meanwhile (another replica's last round).
                            Err(kube::Error::Api(e)) if e.code == 409 => {
                                serde_json::to_value(slices.get(&name).await?)?
                            }
                            Err(e) => return Err(e.into()),
                        },
                        // A contract's class and resources never change.
                        Some(have) => serde_json::to_value(have)?,
                    },
                };
                let grant = liqo::slice_grant(&slice);
                if let (Some(v1), true, Some(csr)) =
                    (&creds.v1, cluster.auto_peer, liqo::denied_slice_csr(&slice))
                {
                    authentication::forget_slice_certificate_of_another_csr(
                        &v1.kubeconfig,
                        &cluster.cluster_id,
                        &name,
                        &csr,
                    )
                    .await;
                }
                status.granted = match &grant {
                    Grant::Accepted(granted) => granted.clone(),
                    _ => BTreeMap::new(),
                };
                progress.grant = Some(grant);
                // The last Purchase of the provider may not be the one that
                // authenticated: each keeps the kubeconfig to reach the
                // provider when it unpeers (stored after the slice, which
                // the grant waits on).
                if let (Some(v1), true) = (&creds.v1, cluster.auto_peer) {
                    let name = ensure_kubeconfig_secret(purchase, cluster, &v1.kubeconfig).await?;
                    status.kubeconfig_secret = Some(name);
                }
            }
        }
    }

    let granted = progress.peered && matches!(progress.grant, None | Some(Grant::Accepted(_)));
    if granted {
        progress.namespaces = offload(purchase, cluster, status, provider).await?;
    }
    Ok(progress)
}

/// Where the controller's own peering stands: networking (when it is
/// set up), then authentication (once networking is done).
struct AutoPeer {
    networking: Option<networking::Stage>,
    authentication: Option<Stage>,
}

/// A peering step's failure: the consumer's API server's is an error
/// (retried); an unusable kubeconfig means no automatic peering.
fn step_failed<T>(e: AuthError) -> Result<Option<T>, ClusterError> {
    match e {
        AuthError::Kube(e) => Err(e.into()),
        AuthError::Decode(e) => Err(e.into()),
        e @ (AuthError::Kubeconfig(_) | AuthError::Refused(_)) => {
            tracing::warn!(error = %e, "no automatic peering: falling back to the peering command");
            Ok(None)
        }
    }
}

/// One round of the controller's own peering with `provider` through the
/// contract's kubeconfig, `liqoctl peer`'s steps in its order: networking
/// (unless `networking` is off, as with `--networking-disabled`), then
/// authentication; `None` when that kubeconfig cannot be used (the
/// peering command stays the way forward).
async fn auto_peer(
    cluster: &Cluster,
    provider: &str,
    kubeconfig: &str,
    networking: bool,
) -> Result<Option<AutoPeer>, ClusterError> {
    let provider_client = match authentication::provider_client(kubeconfig).await {
        Ok(client) => client,
        // Said on the Purchase, and no peering command either: a person
        // running `liqoctl peer` with it would run what it says.
        Err(e @ AuthError::Refused(_)) => {
            tracing::warn!(error = %e, "no automatic peering: the contract's kubeconfig is refused");
            return Ok(Some(AutoPeer {
                networking: None,
                authentication: Some(Stage::KubeconfigRefused(e.to_string())),
            }));
        }
        Err(e) => {
            tracing::warn!(error = %e, "no automatic peering: falling back to the peering command");
            return Ok(None);
        }
    };
    let peers = Peers {
        consumer: &cluster.client,
        provider: &provider_client,
        consumer_id: &cluster.cluster_id,
        provider_id: provider,
        liqo_namespace: &cluster.liqo_namespace,
        provider_liqo_namespace: &cluster.provider_liqo_namespace,
        cache: &cluster.cache,
    };
    let mut steps = AutoPeer {
        networking: None,
        authentication: None,
    };
    if networking {
        let stage = match networking::connect(&peers).await {
            Ok(stage) => stage,
            Err(e) => return step_failed(e),
        };
        tracing::debug!(?stage, "networking");
        let done = stage.done();
        steps.networking = Some(stage);
        if !done {
            return Ok(Some(steps));
        }
    }
    match authentication::authenticate(&peers).await {
        Ok(stage) => {
            tracing::debug!(?stage, "authentication");
            steps.authentication = Some(stage);
            Ok(Some(steps))
        }
        Err(e) => step_failed(e),
    }
}

/// The first object of `api` with `label`, as JSON.
async fn first(api: &Api<DynamicObject>, label: &str) -> Result<Option<Value>, ClusterError> {
    let list = api.list(&ListParams::default().labels(label)).await?;
    let mut items = list.items;
    items.sort_by(|a, b| {
        a.metadata
            .creation_timestamp
            .cmp(&b.metadata.creation_timestamp)
    });
    Ok(match items.into_iter().next() {
        Some(object) => Some(serde_json::to_value(object)?),
        None => None,
    })
}

/// Where "the kubeconfig Secret `namespace/name` exists" is remembered.
fn kubeconfig_key(namespace: &str, name: &str) -> String {
    format!("kubeconfig-secret/{namespace}/{name}")
}

/// The Secret holding the contract's kubeconfig (created once, owned by
/// the Purchase, never logged); its name.
async fn ensure_kubeconfig_secret(
    purchase: &Purchase,
    cluster: &Cluster,
    kubeconfig: &str,
) -> Result<String, ClusterError> {
    let namespace = purchase.metadata.namespace.clone().unwrap_or_default();
    let name = format!("{}-peering-kubeconfig", purchase.name_any());
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), &namespace);
    let owner = purchase
        .controller_owner_ref(&())
        .map(serde_json::to_value)
        .transpose()?;
    let wanted = liqo::kubeconfig_secret(
        &name,
        &namespace,
        kubeconfig,
        &purchase.key(),
        owner.unwrap_or(Value::Null),
    );
    // Looked for once while remembered: a round needs it only to exist.
    let remembered = kubeconfig_key(&namespace, &name);
    if cluster.cache.recall::<()>(&remembered).is_some() {
        return Ok(name);
    }
    if secrets.get_opt(&name).await?.is_none() {
        match secrets
            .create(&PostParams::default(), &serde_json::from_value(wanted)?)
            .await
        {
            Ok(_) => tracing::info!(secret = %name, "peering kubeconfig stored"),
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    cluster.cache.remember(remembered, ());
    Ok(name)
}

fn offloading_of<'a>(
    purchase: &'a Purchase,
    cluster: &Cluster,
    namespace: &'a str,
    key: &'a str,
    provider: &'a str,
) -> Offloading<'a> {
    Offloading {
        generation: cluster.generation,
        namespace,
        purchase: key,
        provider,
        pod_strategy: &purchase.spec.pod_offloading_strategy,
        mapping_strategy: &purchase.spec.namespace_mapping_strategy,
    }
}

/// Apply an offloading plan in `namespace`.
async fn apply_offloading(
    api: &Api<DynamicObject>,
    plan: OffloadingPlan,
) -> Result<(), ClusterError> {
    match plan {
        OffloadingPlan::Create(object) => {
            api.create(&PostParams::default(), &serde_json::from_value(object)?)
                .await?;
        }
        OffloadingPlan::Update(object) => {
            api.replace(
                OFFLOADING_NAME,
                &PostParams::default(),
                &serde_json::from_value(object)?,
            )
            .await?;
        }
        OffloadingPlan::Delete => {
            api.delete(OFFLOADING_NAME, &DeleteParams::default())
                .await?;
        }
        OffloadingPlan::Keep | OffloadingPlan::NotOurs | OffloadingPlan::Conflict(_) => {}
    }
    Ok(())
}

/// Each listed namespace: offloaded to the provider, missing, or holding
/// someone else's NamespaceOffloading. Namespaces no longer listed are
/// released.
async fn offload(
    purchase: &Purchase,
    cluster: &Cluster,
    status: &mut PurchaseStatus,
    provider: &str,
) -> Result<Vec<(String, NamespaceOutcome)>, ClusterError> {
    let key = purchase.key();
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let ar = cluster.generation.namespace_offloading();
    let mut outcomes = Vec::new();
    let mut owned = Vec::new();
    // The controller's own namespace is never offloaded (`POD_NAMESPACE`,
    // as the Lease's default namespace is found).
    let own = std::env::var("POD_NAMESPACE").unwrap_or_default();
    let protected = [cluster.liqo_namespace.as_str(), own.as_str()];
    let purchase_namespace = purchase.metadata.namespace.as_deref().unwrap_or_default();
    for namespace in &purchase.spec.namespaces {
        let Some(object) = namespaces.get_opt(namespace).await? else {
            outcomes.push((namespace.clone(), NamespaceOutcome::Missing));
            continue;
        };
        if let Some(why) = crate::decision::offload_refusal(purchase_namespace, &object, &protected)
        {
            // Offloaded before the rule: this Purchase's share goes.
            if status.offloaded_namespaces.contains(namespace) {
                release(purchase, cluster, namespace, &ar).await?;
            }
            outcomes.push((namespace.clone(), NamespaceOutcome::Refused(why)));
            continue;
        }
        let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), namespace, &ar);
        let offloading = offloading_of(purchase, cluster, namespace, &key, provider);
        // From the watch's cache when it is already as wanted (its status
        // is what this round reads); anything to write is planned on the
        // API server's copy (a replace needs its version).
        let cached = cluster
            .cache
            .stores
            .get(&ar, namespace, OFFLOADING_NAME)
            .flatten()
            .map(|have| {
                let plan = liqo::plan_offloading(Some(&have), &offloading);
                (have, plan)
            });
        let (existing, plan) = match cached {
            Some((have, plan @ OffloadingPlan::Keep)) => (Some(have), plan),
            _ => {
                let existing = api
                    .get_opt(OFFLOADING_NAME)
                    .await?
                    .map(serde_json::to_value)
                    .transpose()?;
                let plan = liqo::plan_offloading(existing.as_ref(), &offloading);
                (existing, plan)
            }
        };
        let outcome = match (&plan, &existing) {
            (OffloadingPlan::NotOurs, _) => NamespaceOutcome::NotOurs,
            (OffloadingPlan::Conflict(why), _) => NamespaceOutcome::Conflict(why.clone()),
            (OffloadingPlan::Keep, Some(have)) => match liqo::offloading_ready(have) {
                Ok(()) => NamespaceOutcome::Offloaded,
                Err(phase) => NamespaceOutcome::Offloading(phase),
            },
            // Just written: Liqo has yet to look at it.
            _ => NamespaceOutcome::Offloading(String::new()),
        };
        if !matches!(
            outcome,
            NamespaceOutcome::NotOurs | NamespaceOutcome::Conflict(_)
        ) {
            owned.push(namespace.clone());
        }
        apply_offloading(&api, plan).await?;
        outcomes.push((namespace.clone(), outcome));
    }
    for gone in status
        .offloaded_namespaces
        .iter()
        .filter(|n| !purchase.spec.namespaces.contains(n))
    {
        release(purchase, cluster, gone, &ar).await?;
    }
    status.offloaded_namespaces = owned;
    Ok(outcomes)
}

async fn release(
    purchase: &Purchase,
    cluster: &Cluster,
    namespace: &str,
    ar: &ApiResource,
) -> Result<(), ClusterError> {
    let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), namespace, ar);
    let Some(existing) = api.get_opt(OFFLOADING_NAME).await? else {
        return Ok(());
    };
    let key = purchase.key();
    let plan = liqo::release_offloading(
        &serde_json::to_value(existing)?,
        &offloading_of(purchase, cluster, namespace, &key, ""),
    );
    apply_offloading(&api, plan).await
}

/// Remove what this Purchase created: its ResourceSlice (v1), its share of
/// NamespaceOffloadings, (`all`: on deletion) the kubeconfig Secret, and
/// — v0.x, when no other Purchase of the provider remains — the
/// out-of-band peering this controller made ([`unpeer_v0`]). Objects
/// without the controller's mark are left alone.
pub async fn cleanup(
    purchase: &Purchase,
    cluster: &Cluster,
    all: bool,
) -> Result<Teardown, ClusterError> {
    let key = purchase.key();
    let status = purchase.status();
    let selector = format!("{}={}", liqo::MANAGED_BY, liqo::MANAGER);
    let ar = cluster.generation.namespace_offloading();
    let mut namespaces = status.offloaded_namespaces.clone();
    namespaces.extend(purchase.spec.namespaces.iter().cloned());
    namespaces.sort();
    namespaces.dedup();
    for namespace in &namespaces {
        match release(purchase, cluster, namespace, &ar).await {
            Err(ClusterError::Kube(kube::Error::Api(e))) if e.code == 404 => {}
            other => other?,
        }
    }
    // The names of those still there after the delete (finalizers).
    let owned_dynamic = |api: Api<DynamicObject>| {
        let selector = selector.clone();
        let key = key.clone();
        async move {
            let mut remaining = Vec::new();
            for object in api.list(&ListParams::default().labels(&selector)).await? {
                let value = serde_json::to_value(&object)?;
                if liqo::owned_by(&value, &key) {
                    let name = object.name_any();
                    let scoped: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
                        Some(ns) => Api::namespaced_with(
                            api.clone().into_client(),
                            ns,
                            &api_resource(&value),
                        ),
                        None => api.clone(),
                    };
                    match scoped.delete(&name, &DeleteParams::default()).await {
                        // Still there: held by finalizers.
                        Ok(answer) if answer.is_left() => {
                            tracing::info!(kind = %value["kind"], %name, "deleting");
                            remaining.push(name);
                        }
                        Ok(_) => tracing::info!(kind = %value["kind"], %name, "deleted"),
                        Err(kube::Error::Api(e)) if e.code == 404 => {}
                        Err(e) => return Err(ClusterError::from(e)),
                    }
                }
            }
            Ok::<Vec<String>, ClusterError>(remaining)
        }
    };
    let mut teardown = Teardown::Done;
    match cluster.generation {
        Generation::V1 => {
            let slices = owned_dynamic(Api::all_with(
                cluster.client.clone(),
                &liqo::resource_slice(),
            ))
            .await?;
            // `liqoctl unpeer` waits for the slices' absence (Liqo's
            // controllers hold them by finalizers while they take the
            // virtual node down) before it unauthenticates
            // (`pkg/liqoctl/unpeer/utils.go` `deleteResourceSlicesByClusterID`,
            // `ForResourceSlicesAbsence`).
            if !slices.is_empty() {
                return Ok(Teardown::Unpeering(format!(
                    "waiting for Liqo to remove the ResourceSlice(s) {} before the authentication is taken down",
                    slices.join(", ")
                )));
            }
            unpeer_v1(purchase, cluster).await?;
        }
        Generation::V0 => {
            teardown = unpeer_v0(purchase, cluster).await?;
        }
    }
    if all {
        if let Some(name) = &status.kubeconfig_secret {
            let namespace = purchase.metadata.namespace.as_deref().unwrap_or_default();
            // A Purchase made again under this name stores it again.
            cluster.cache.forget(&kubeconfig_key(namespace, name));
            let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), namespace);
            if let Some(secret) = secrets.get_opt(name).await? {
                if liqo::owned_by(&serde_json::to_value(&secret)?, &key) {
                    secrets.delete(name, &DeleteParams::default()).await?;
                }
            }
        }
    }
    Ok(teardown)
}

/// The authentication this controller made with the Purchase's provider
/// (Identity on this cluster, Tenant on the provider's), then its
/// networking (gateways, PublicKeys, Configurations), taken down when
/// no other Purchase of the provider remains, after the ResourceSlices
/// (`liqoctl unpeer`'s order). The provider is reached through the
/// kubeconfig Secret kept for the Purchase, if there is one and it still
/// works.
async fn unpeer_v1(purchase: &Purchase, cluster: &Cluster) -> Result<(), ClusterError> {
    let status = purchase.status();
    let Some(provider) = status.provider_cluster_id.as_deref() else {
        return Ok(());
    };
    let purchases: Vec<Purchase> = Api::<Purchase>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let users = crate::decision::peering_users(&purchases, provider, &purchase.key());
    if !users.is_empty() {
        tracing::debug!(?users, "the authentication stays: other Purchases use it");
        return Ok(());
    }
    // What rounds remembered of this peering goes with it.
    cluster
        .cache
        .forget_prefix(&crate::caches::provider_prefix(provider));
    let mut provider_client = None;
    if let Some(name) = &status.kubeconfig_secret {
        let secrets: Api<Secret> = Api::namespaced(
            cluster.client.clone(),
            purchase.metadata.namespace.as_deref().unwrap_or_default(),
        );
        if let Some(secret) = secrets.get_opt(name).await? {
            let text = secret
                .data
                .as_ref()
                .and_then(|d| d.get("kubeconfig"))
                .and_then(|b| String::from_utf8(b.0.clone()).ok());
            if let Some(text) = text {
                // The kept Secret passes the same check: one written
                // before it existed (or by hand) is refused here too.
                provider_client = match authentication::provider_client(&text).await {
                    Ok(client) => Some(client),
                    Err(e) => {
                        tracing::warn!(error = %e, "the provider's side is left to the provider");
                        None
                    }
                };
            }
        }
    }
    // Read before the authentication goes, as `liqoctl unpeer` reads it
    // (`pkg/liqoctl/unpeer/handler.go:82-87`): a provider that is also a
    // consumer of this cluster shares the tunnel with that other direction.
    let fcs: Api<DynamicObject> =
        Api::all_with(cluster.client.clone(), &Generation::V1.foreign_cluster());
    let fc = first(&fcs, &format!("{REMOTE_CLUSTER_ID_LABEL}={provider}")).await?;
    let bidirectional = liqo::bidirectional(fc.as_ref());
    let (consumer, provider_client) = (&cluster.client, provider_client.as_ref());
    let id = &cluster.cluster_id;
    let unpeered = match authentication::unpeer(consumer, provider_client, id, provider).await {
        // Then the network, as `liqoctl unpeer` does (`handler.go:105-111`):
        // only `--auto-peer` makes any, and a bidirectional peering keeps it.
        Ok(()) if cluster.auto_peer && bidirectional => {
            tracing::info!(
                provider,
                "the network stays: the provider also peers with this cluster the other way (ForeignCluster role ConsumerAndProvider), over the same tunnel"
            );
            Ok(())
        }
        Ok(()) if cluster.auto_peer => {
            networking::disconnect(consumer, provider_client, id, provider).await
        }
        Ok(()) => Ok(()),
        Err(e) => Err(e),
    };
    match unpeered {
        Ok(()) => Ok(()),
        Err(AuthError::Kube(e)) => Err(e.into()),
        Err(AuthError::Decode(e)) => Err(e.into()),
        Err(e @ (AuthError::Kubeconfig(_) | AuthError::Refused(_))) => {
            tracing::warn!(error = %e, "the provider's side is left to the provider");
            Ok(())
        }
    }
}

/// A v0.x peering this Purchase used, taken down when no other Purchase
/// of the provider remains (reference-counted over the Purchases'
/// status), in `liqoctl unpeer out-of-band`'s order: outgoing peering
/// disabled, its end awaited, the ForeignCluster deleted only without an
/// incoming peering, then the token Secret. Only what this controller
/// made (for any Purchase): a ForeignCluster made by a person stays.
async fn unpeer_v0(purchase: &Purchase, cluster: &Cluster) -> Result<Teardown, ClusterError> {
    let key = purchase.key();
    let fcs: Api<DynamicObject> =
        Api::all_with(cluster.client.clone(), &Generation::V0.foreign_cluster());
    let managed = format!("{}={}", liqo::MANAGED_BY, liqo::MANAGER);
    // The provider's ForeignCluster, and any this Purchase made (its
    // status may not name the provider if a round failed half-way).
    let mut candidates: Vec<Value> = Vec::new();
    for object in fcs.list(&ListParams::default().labels(&managed)).await? {
        let value = serde_json::to_value(&object)?;
        let id = value["metadata"]["labels"][V0_CLUSTER_ID_LABEL].as_str();
        let ours = purchase.status().provider_cluster_id.as_deref() == id && id.is_some();
        if ours || liqo::owned_by(&value, &key) {
            candidates.push(value);
        }
    }
    let purchases: Vec<Purchase> = Api::<Purchase>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let mut teardown = Teardown::Done;
    for fc in candidates {
        let name = fc["metadata"]["name"].as_str().unwrap_or_default();
        let provider = fc["metadata"]["labels"][V0_CLUSTER_ID_LABEL]
            .as_str()
            .unwrap_or_default();
        let users = crate::decision::peering_users(&purchases, provider, &key);
        if !users.is_empty() {
            tracing::info!(foreign_cluster = %name, ?users, "the peering stays: other Purchases use it");
            continue;
        }
        match liqo::v0_unpeer_step(&fc) {
            liqo::V0Unpeer::Disable => {
                fcs.patch(
                    name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(liqo::v0_disable_outgoing()),
                )
                .await?;
                tracing::info!(foreign_cluster = %name, "outgoing peering disabled");
                teardown = Teardown::Unpeering(format!(
                    "outgoing peering with {provider} disabled; waiting for Liqo to end it"
                ));
            }
            liqo::V0Unpeer::WaitOutgoing => {
                teardown = Teardown::Unpeering(format!(
                    "waiting for Liqo to end the outgoing peering with {provider}"
                ));
            }
            liqo::V0Unpeer::IncomingRemains => {
                // liqoctl stops here too: the provider still peers with
                // this cluster, and only it can end that.
                tracing::warn!(foreign_cluster = %name, "an incoming peering remains: the ForeignCluster stays, its outgoing peering disabled");
            }
            liqo::V0Unpeer::Delete => {
                match fcs.delete(name, &DeleteParams::default()).await {
                    Ok(_) => tracing::info!(foreign_cluster = %name, "v0 ForeignCluster deleted"),
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
                delete_token_secrets(cluster, provider).await?;
            }
        }
    }
    Ok(teardown)
}

/// The `remote-token-<provider>` Secret this controller made, once its
/// ForeignCluster is gone.
async fn delete_token_secrets(cluster: &Cluster, provider: &str) -> Result<(), ClusterError> {
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), &cluster.liqo_namespace);
    let selector = format!(
        "{}={},{V0_CLUSTER_ID_LABEL}={provider}",
        liqo::MANAGED_BY,
        liqo::MANAGER
    );
    for secret in secrets
        .list(&ListParams::default().labels(&selector))
        .await?
    {
        // Gone already is done; anything else (a 403 from RBAC that does
        // not allow the delete, say) fails the round, which logs it and
        // keeps the finalizer until it works.
        match secrets
            .delete(&secret.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => tracing::info!(secret = %secret.name_any(), "v0 token Secret deleted"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn api_resource(object: &Value) -> ApiResource {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let plural = if kind == RESOURCE_SLICE.kind {
        RESOURCE_SLICE.plural
    } else {
        FOREIGN_CLUSTER.plural
    };
    ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}
