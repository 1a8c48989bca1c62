//! The provider cluster's side of a peering user, as `liqoctl generate
//! peering-user` makes it (`pkg/liqoctl/rest/peering-user/generate.go`,
//! `userfactory/{cert,roles}.go`) and `liqoctl delete peering-user`
//! removes it (`RemovePermissions`): the tenant namespace, the CSR (made,
//! checked, approved, its certificate awaited), the two RoleBindings; and
//! the key, which liqoctl only prints, kept in a Secret of this
//! controller's own namespace so that a restart or another replica picks
//! up where a pass left off. When the consumer's last contract ended:
//! its Tenants (drained first if asked, `unauthenticate`'s
//! `DeleteTenant`) and its networking objects ([`network`]), found by
//! Liqo's labels in its tenant namespace.
//!
//! Every object this controller makes carries [`MANAGED_BY`] beside Liqo's
//! [`liqo::PEERING_USER_NAME_LABEL`], so that peering users made by hand
//! with liqoctl are never found, changed or removed here.

use controller_core::liqo::{self, LiqoKind};
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use serde_json::json;

use crate::drain;
use crate::identity::{self, CsrRefused, IdentityError, KeyKind, StoredCsr, UserKey, Validity};
use crate::kubeconfig::{self, ApiServer};
use crate::names::ConsumerId;
use crate::network;
use crate::survey::Survey;

/// `app.kubernetes.io/managed-by` on every object this controller makes.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGED_BY: &str = "liqo-broker-peering-user-controller";
/// The key Secret's entries: the PKCS#8 PEM key and the CN it was made for.
const KEY_ENTRY: &str = "tls.key";
const CN_ENTRY: &str = "common-name";
/// `pkg/consts/labels.go:35-36` `ControllerManagerAppName`: the
/// controller-manager's container in its Deployment
/// (`pkg/liqoctl/utils/utils.go:31-42`).
const CONTROLLER_MANAGER_CONTAINER: &str = "controller-manager";
/// The approval's condition (`pkg/utils/csr.Approve` writes the reason and
/// message liqoctl passes).
const APPROVAL_REASON: &str = "LiqoBrokerPeeringUserApproval";
/// On a Tenant this controller drained: so that it activates again only
/// the drains it made (a provider's own `liqoctl drain tenant` stays).
pub const DRAINED_BY_ANNOTATION: &str = "liqo-broker.io/drained-by";
pub use crate::names::OWNER_ANNOTATION;
/// `apis/authentication/v1beta1/tenant_types.go:85-86`.
const TENANT_ACTIVE: &str = "Active";

/// A failed step, naming the object.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("CSR {name}: not approved: {why}")]
    Refused { name: String, why: CsrRefused },
    #[error("CSR {0} exists and was not made by this controller (liqoctl generate peering-user?): remove it with `liqoctl delete peering-user` to let the controller make its own")]
    Foreign(String),
    #[error("peering user {name}: {source}")]
    Identity {
        name: String,
        #[source]
        source: IdentityError,
    },
    #[error("peering user {name}: the kubeconfig cannot be written: {source}")]
    Kubeconfig {
        name: String,
        #[source]
        source: serde_yaml_ng::Error,
    },
}

impl ClusterError {
    /// The metric label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            ClusterError::Kube { .. } => "kubernetes",
            ClusterError::Refused { .. } | ClusterError::Foreign(_) => "csr",
            ClusterError::Identity { .. } | ClusterError::Kubeconfig { .. } => "identity",
        }
    }
}

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ClusterError {
    let what = what.into();
    move |source| ClusterError::Kube { what, source }
}

/// Where a consumer's peering user stands after a pass.
pub enum Progress {
    /// Waiting on the API server (approval stored, certificate not yet
    /// issued, …): this says for what.
    Pending(&'static str),
    /// Usable: its kubeconfig (holds the key: never log it), and the CN of
    /// its certificate (a new one for every certificate).
    Ready {
        kubeconfig: String,
        common_name: String,
    },
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Progress::Pending(why) => f.debug_tuple("Pending").field(why).finish(),
            Progress::Ready { common_name, .. } => f
                .debug_struct("Ready")
                .field("common_name", common_name)
                .finish_non_exhaustive(),
        }
    }
}

/// How peering users are made.
#[derive(Debug, Clone)]
pub struct UserSettings {
    /// This controller's namespace: the key Secrets live here.
    pub own_namespace: String,
    /// Liqo's namespace: the `liqo-ns-reader` RoleBinding lives here.
    pub liqo_namespace: String,
    /// Liqo's controller-manager Deployment there (its
    /// `--tls-compatibility-mode` decides the keys, [`Cluster::key_kind`]).
    pub controller_manager: String,
    /// `spec.expirationSeconds` of each CSR.
    pub expiration_seconds: i32,
    /// A certificate is replaced once this share of its lifetime passed.
    pub renew_share: f64,
    pub api_server: ApiServer,
}

/// The provider's API server, as this controller's ServiceAccount.
#[derive(Clone)]
pub struct Cluster {
    client: Client,
    settings: UserSettings,
    /// Whether the last read of Liqo's controller-manager Deployment
    /// failed (said once in the log, not at every pass).
    mode_unreadable: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Ready peering users as last found, by user name: a pass that finds
    /// a user's CSR and key Secret at the same `resourceVersion`s skips
    /// the key's and the certificate's parsing, the CSR's check and the
    /// kubeconfig's building, which would come to the same result (they
    /// were most of a pass's CPU at 1,000 consumers, docs/benchmarks.md).
    ready: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Remembered>>>,
}

/// A ready peering user as [`Cluster::ensure`] last found it.
#[derive(Clone)]
struct Remembered {
    /// The `resourceVersion`s of its CSR and key Secret then: any change
    /// to either (a new object has a new one) means looking again.
    csr_version: String,
    secret_version: String,
    /// The buyer its key was made for, and the keys' kind.
    owner: String,
    kind: KeyKind,
    validity: Validity,
    common_name: String,
    /// Holds the key: never logged.
    kubeconfig: String,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn selector() -> String {
    format!(
        "{},{MANAGED_BY_LABEL}={MANAGED_BY}",
        liqo::PEERING_USER_NAME_LABEL
    )
}

fn labels(consumer: &ConsumerId) -> serde_json::Value {
    json!({
        liqo::PEERING_USER_NAME_LABEL: consumer.user_name(),
        MANAGED_BY_LABEL: MANAGED_BY,
    })
}

fn b64(text: &str) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, text)
}

fn typed<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    // Only ever called on objects built here from fixed shapes.
    #[allow(clippy::expect_used)]
    serde_json::from_value(value).expect("a well-formed object")
}

fn is_ours(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY)
}

fn has_condition(csr: &CertificateSigningRequest, kind: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind))
}

impl Cluster {
    pub fn new(client: Client, settings: UserSettings) -> Self {
        Self {
            client,
            settings,
            mode_unreadable: Default::default(),
            ready: Default::default(),
        }
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.settings.own_namespace)
    }

    fn csrs(&self) -> Api<CertificateSigningRequest> {
        Api::all(self.client.clone())
    }

    /// One item per change of one of this controller's CSRs (made,
    /// approved, its certificate issued, denied or failed): what a user on
    /// its way waits for, so its next step runs then rather than after
    /// `--retry`. The watch's failures (an RBAC without `watch`, say) are
    /// logged and retried, backed off; `--retry` still paces the passes
    /// meanwhile.
    pub fn csr_changes(&self) -> impl Stream<Item = ()> + Send + 'static {
        let config = watcher::Config::default().labels(&selector());
        watcher(self.csrs(), config)
            .default_backoff()
            .applied_objects()
            .filter_map(|event| async move {
                match event {
                    Ok(_) => Some(()),
                    Err(error) => {
                        tracing::debug!(%error, "watching this controller's CSRs");
                        None
                    }
                }
            })
    }

    /// The keys `liqoctl generate peering-user` would make here
    /// (`--tls-compatibility-mode auto`, its default; v1.2.0
    /// `pkg/liqoctl/rest/peering-user/generate.go:81-105`): RSA when
    /// Liqo's controller-manager runs with `--tls-compatibility-mode`
    /// (alone or `=true`), Ed25519 otherwise, the container
    /// `controller-manager` of its Deployment read (`utils.go:31-42`).
    /// liqoctl finds the Deployment by its labels
    /// (`getters.GetControllerManagerDeployment`,
    /// `app.kubernetes.io/name=controller-manager`,
    /// `app.kubernetes.io/component=controller-manager`); this reads the
    /// one the chart names (`--liqo-controller-manager-deployment`) with a
    /// `get`, so its RBAC can name that one Deployment instead of listing
    /// every Deployment of Liqo's namespace. No such Deployment or
    /// container: Ed25519, as liqoctl falls back; `None` when it cannot be
    /// read (a new user then gets Ed25519, an existing one is kept).
    pub async fn key_kind(&self) -> Option<KeyKind> {
        use std::sync::atomic::Ordering;
        let api: Api<Deployment> =
            Api::namespaced(self.client.clone(), &self.settings.liqo_namespace);
        let read = api.get_opt(&self.settings.controller_manager).await;
        let was_unreadable = self.mode_unreadable.swap(read.is_err(), Ordering::Relaxed);
        if let (Err(error), false) = (&read, was_unreadable) {
            tracing::warn!(%error, deployment = %self.settings.controller_manager, "cannot read Liqo's controller-manager Deployment for its --tls-compatibility-mode: new peering users get Ed25519 keys, existing ones are kept");
        }
        match read {
            Ok(Some(deployment)) => {
                let args = deployment
                    .spec
                    .template
                    .spec
                    .and_then(|s| {
                        s.containers
                            .into_iter()
                            .find(|c| c.name == CONTROLLER_MANAGER_CONTAINER)
                    })
                    .and_then(|c| c.args)
                    .unwrap_or_default();
                Some(KeyKind::from_controller_manager_args(&args))
            }
            Ok(None) => Some(KeyKind::Ed25519),
            Err(error) => {
                tracing::debug!(%error, "Liqo's controller-manager Deployment unreadable");
                None
            }
        }
    }

    /// One pass over `consumer`'s peering user: the next step towards a
    /// usable one, or the one there is; `kind` is the keys it should have
    /// ([`Cluster::key_kind`]; `None`: unknown). Its CSR, key Secret and
    /// RoleBindings in Liqo's namespace are taken from the pass's
    /// `survey` where it lists them, else read.
    pub async fn ensure(
        &self,
        consumer: &ConsumerId,
        owner: &str,
        kind: Option<KeyKind>,
        survey: Option<&Survey>,
    ) -> Result<Progress, ClusterError> {
        let name = consumer.user_name();
        if !survey.is_some_and(|s| s.has_namespace(&consumer.tenant_namespace())) {
            self.ensure_namespace(consumer).await?;
        }
        let csr = match survey.and_then(|s| s.csr(&name)) {
            Some(csr) => Some(csr.clone()),
            None => self
                .csrs()
                .get_opt(&name)
                .await
                .map_err(kube_err(format!("reading CSR {name}")))?,
        };
        if let Some(csr) = &csr {
            if !is_ours(csr.metadata.labels.as_ref()) {
                return Err(ClusterError::Foreign(name));
            }
            if let Some(ready) = self.still_ready(&name, csr, owner, kind, survey) {
                self.ensure_bindings(consumer, &ready.common_name, survey)
                    .await?;
                return Ok(Progress::Ready {
                    kubeconfig: ready.kubeconfig,
                    common_name: ready.common_name,
                });
            }
        }
        let stored = self.key(consumer, survey).await?;
        let secret_version = stored.as_ref().and_then(|(_, _, v)| v.clone());
        let stored = stored.map(|(k, o, _)| (k, o));
        match stored.as_ref().map(|(_, o)| o.as_deref()) {
            Some(None) => {
                // Made before users recorded their buyer: not handed on
                // unchecked, a new one is made for the buyer it serves.
                tracing::info!("peering user made before it recorded its buyer; making a new one");
                self.forget(consumer).await?;
                return Ok(Progress::Pending(
                    "making a peering user that records its buyer",
                ));
            }
            Some(Some(made_for)) if made_for != owner => {
                // Taken down first (`plan::to_remove`), never handed over.
                return Ok(Progress::Pending(
                    "the peering user of the cluster ID's earlier buyer is being taken down",
                ));
            }
            _ => {}
        }
        let Some(key) = stored.map(|(k, _)| k) else {
            // A CSR without its key can never be used: start over.
            if csr.is_some() {
                self.delete_csr(&name).await?;
            }
            let kind = kind.unwrap_or(KeyKind::Ed25519);
            let key =
                UserKey::generate(consumer, kind).map_err(|source| ClusterError::Identity {
                    name: name.clone(),
                    source,
                })?;
            tracing::info!(%kind, "peering user key made");
            self.store_key(consumer, owner, &key).await?;
            self.create_csr(consumer, &key).await?;
            return Ok(Progress::Pending("certificate requested"));
        };
        // The provider's TLS compatibility mode changed: a kubeconfig of
        // the other kind may not be usable by the consumers it is for.
        if let Some(wanted) = kind.filter(|k| *k != key.kind()) {
            tracing::info!(have = %key.kind(), %wanted, "Liqo's --tls-compatibility-mode changed; making a new peering user");
            self.forget(consumer).await?;
            return Ok(Progress::Pending("making a peering user with other keys"));
        }
        let Some(csr) = csr else {
            self.create_csr(consumer, &key).await?;
            return Ok(Progress::Pending("certificate requested"));
        };
        if has_condition(&csr, "Denied") || has_condition(&csr, "Failed") {
            tracing::warn!(csr = %name, "the CSR was denied or failed; making a new peering user");
            self.forget(consumer).await?;
            return Ok(Progress::Pending("the last request was denied or failed"));
        }
        let certificate = csr
            .status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .filter(|c| !c.0.is_empty());
        // Checked approved or not: a certificate is used (and its CN bound)
        // only for the request this controller made with its key. One
        // swapped by someone else is replaced, not reported every pass
        // (P-17).
        if let Err(error) = self.check(&csr, &key) {
            tracing::warn!(%error, "the CSR is not the one this controller requested; replacing it");
            self.delete_csr(&name).await?;
            self.create_csr(consumer, &key).await?;
            return Ok(Progress::Pending("replaced a CSR that was not ours"));
        }
        if !has_condition(&csr, "Approved") {
            self.approve(csr).await?;
            return Ok(Progress::Pending("approved; awaiting the certificate"));
        }
        let Some(certificate) = certificate else {
            return Ok(Progress::Pending("awaiting the certificate"));
        };
        let validity =
            Validity::of_pem(&certificate.0).map_err(|source| ClusterError::Identity {
                name: name.clone(),
                source,
            })?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if validity.due(now, self.settings.renew_share) {
            tracing::info!(csr = %name, not_after = validity.not_after, "certificate due for renewal; making a new peering user");
            self.forget(consumer).await?;
            return Ok(Progress::Pending("renewing the certificate"));
        }
        self.ensure_bindings(consumer, &key.common_name, survey)
            .await?;
        let cert_pem = String::from_utf8_lossy(&certificate.0);
        let kubeconfig = kubeconfig::build(
            &self.settings.api_server,
            consumer,
            &cert_pem,
            &key.key_pem(),
        )
        .map_err(|source| ClusterError::Kubeconfig {
            name: name.clone(),
            source,
        })?;
        if let (Some(csr_version), Some(secret_version)) =
            (csr.metadata.resource_version.clone(), secret_version)
        {
            self.remember(
                name,
                Remembered {
                    csr_version,
                    secret_version,
                    owner: owner.to_string(),
                    kind: key.kind(),
                    validity,
                    common_name: key.common_name.clone(),
                    kubeconfig: kubeconfig.clone(),
                },
            );
        }
        Ok(Progress::Ready {
            kubeconfig,
            common_name: key.common_name,
        })
    }

    /// The ready user `name` as last found, if its CSR (`csr`) and its key
    /// Secret (as the pass's `survey` lists it) are still at the versions
    /// it was found ready at, still for `owner`, of the keys `kind` asks
    /// for, and its certificate not due for renewal: everything else
    /// [`Cluster::ensure`] checks depends on those two objects only.
    fn still_ready(
        &self,
        name: &str,
        csr: &CertificateSigningRequest,
        owner: &str,
        kind: Option<KeyKind>,
        survey: Option<&Survey>,
    ) -> Option<Remembered> {
        let secret = survey?.secret(name)?;
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        let remembered = ready.get(name)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let same = csr.metadata.resource_version.as_deref() == Some(&remembered.csr_version)
            && secret.metadata.resource_version.as_deref() == Some(&remembered.secret_version)
            && remembered.owner == owner
            && kind.is_none_or(|k| k == remembered.kind)
            && !remembered.validity.due(now, self.settings.renew_share);
        if same {
            Some(remembered.clone())
        } else {
            // Looked at again in full; remembered again if still ready.
            ready.remove(name);
            None
        }
    }

    fn remember(&self, name: String, ready: Remembered) {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, ready);
    }

    /// `tenantNamespace.CreateNamespace`: Liqo's tenant namespace for the
    /// consumer, with Liqo's labels, unless it exists. One that exists is
    /// left as it is, labels and all, as Liqo leaves it
    /// (`namespaceManager.go:104-111` returns what `GetNamespace` finds).
    async fn ensure_namespace(&self, consumer: &ConsumerId) -> Result<(), ClusterError> {
        let name = consumer.tenant_namespace();
        let api: Api<Namespace> = Api::all(self.client.clone());
        if api
            .get_opt(&name)
            .await
            .map_err(kube_err(format!("reading namespace {name}")))?
            .is_some()
        {
            return Ok(());
        }
        let mut labels = json!({
            liqo::TENANT_NAMESPACE_LABEL: "true",
            liqo::REMOTE_CLUSTER_ID_LABEL: consumer.as_str(),
        });
        // Liqo's gateway pods run here privileged (`ForgeNamespace`,
        // `namespaceManager.go:143-149`): without these a cluster whose
        // default Pod Security level is baseline refuses them.
        for (key, value) in liqo::TENANT_NAMESPACE_POD_SECURITY {
            labels[key] = json!(value);
        }
        let ns: Namespace = typed(json!({"metadata": {"name": name, "labels": labels}}));
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => {
                tracing::info!(namespace = %name, "tenant namespace created");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(kube_err(format!("creating namespace {name}"))(e)),
        }
    }

    /// The consumer's key, the buyer it was made for (None: from before
    /// that was recorded) and the key Secret's `resourceVersion`, if stored
    /// and readable (an unreadable one is deleted: a new user is made).
    async fn key(
        &self,
        consumer: &ConsumerId,
        survey: Option<&Survey>,
    ) -> Result<Option<(UserKey, Option<String>, Option<String>)>, ClusterError> {
        let name = consumer.user_name();
        let listed = survey.and_then(|s| s.secret(&name)).cloned();
        let secret = match listed {
            Some(secret) => Some(secret),
            None => self
                .secrets()
                .get_opt(&name)
                .await
                .map_err(kube_err(format!("reading Secret {name}")))?,
        };
        let Some(secret) = secret else {
            return Ok(None);
        };
        let version = secret.metadata.resource_version.clone();
        let owner = secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(OWNER_ANNOTATION))
            .cloned();
        let data = secret.data.unwrap_or_default();
        let entry = |k: &str| {
            data.get(k)
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
        };
        let key = match (entry(CN_ENTRY), entry(KEY_ENTRY)) {
            (Some(cn), Some(pem)) if consumer.owns_common_name(&cn) => {
                UserKey::from_pem(&cn, &pem).ok()
            }
            _ => None,
        };
        if key.is_none() {
            tracing::warn!(secret = %name, "the stored key cannot be read; making a new peering user");
            self.delete_secret(&name).await?;
        }
        Ok(key.map(|k| (k, owner, version)))
    }

    async fn store_key(
        &self,
        consumer: &ConsumerId,
        owner: &str,
        key: &UserKey,
    ) -> Result<(), ClusterError> {
        let name = consumer.user_name();
        let secret: Secret = typed(json!({
            "metadata": {"name": name, "labels": labels(consumer),
                         "annotations": {OWNER_ANNOTATION: owner}},
            "type": "Opaque",
            // `data`, not `stringData`: the same stored object either way
            // on a real API server, and nothing left to convert.
            "data": {CN_ENTRY: b64(&key.common_name), KEY_ENTRY: b64(&key.key_pem())},
        }));
        self.secrets()
            .create(&PostParams::default(), &secret)
            .await
            .map_err(kube_err(format!("creating Secret {name}")))?;
        Ok(())
    }

    async fn create_csr(&self, consumer: &ConsumerId, key: &UserKey) -> Result<(), ClusterError> {
        let name = consumer.user_name();
        let request = key.request_pem().map_err(|source| ClusterError::Identity {
            name: name.clone(),
            source,
        })?;
        let csr: CertificateSigningRequest = typed(json!({
            "metadata": {"name": name, "labels": labels(consumer)},
            "spec": {
                "request": b64(&request),
                "signerName": identity::SIGNER,
                "usages": identity::USAGES,
                "expirationSeconds": self.settings.expiration_seconds,
            }
        }));
        self.csrs()
            .create(&PostParams::default(), &csr)
            .await
            .map_err(kube_err(format!("creating CSR {name}")))?;
        tracing::info!(csr = %name, common_name = %key.common_name, "certificate requested");
        Ok(())
    }

    /// The stored CSR is exactly ours (see [`identity::check_csr`]).
    fn check(&self, csr: &CertificateSigningRequest, key: &UserKey) -> Result<(), ClusterError> {
        let name = csr.metadata.name.clone().unwrap_or_default();
        let usages = csr.spec.usages.clone().unwrap_or_default();
        let stored = StoredCsr {
            request_pem: &csr.spec.request.0,
            signer: &csr.spec.signer_name,
            usages: usages.iter().map(String::as_str).collect(),
            expiration_seconds: csr.spec.expiration_seconds.map(i64::from),
        };
        identity::check_csr(&stored, key, i64::from(self.settings.expiration_seconds))
            .map_err(|why| ClusterError::Refused { name, why })
    }

    /// `UpdateApproval` with an `Approved` condition.
    async fn approve(&self, mut csr: CertificateSigningRequest) -> Result<(), ClusterError> {
        let name = csr.metadata.name.clone().unwrap_or_default();
        let mut status = csr.status.take().unwrap_or_default();
        let mut conditions = status.conditions.take().unwrap_or_default();
        conditions.push(typed(json!({
            "type": "Approved",
            "status": "True",
            "reason": APPROVAL_REASON,
            "message": "approved by the liqo-broker peering-user controller after checking its CN, O, key, usages and signer",
            "lastUpdateTime": controller_core::clock::now_rfc3339(),
        })));
        status.conditions = Some(conditions);
        csr.status = Some(status);
        self.csrs()
            .replace_subresource("approval", &name, &PostParams::default(), &csr)
            .await
            .map_err(kube_err(format!("approving CSR {name}")))?;
        tracing::info!(csr = %name, "CSR checked and approved");
        Ok(())
    }

    /// The two RoleBindings of `roles.go`, to the CN `user`: an existing
    /// one bound to another CN (an earlier certificate) is replaced.
    async fn ensure_bindings(
        &self,
        consumer: &ConsumerId,
        user: &str,
        survey: Option<&Survey>,
    ) -> Result<(), ClusterError> {
        let wanted = [
            (
                self.settings.liqo_namespace.clone(),
                consumer.liqo_ns_binding(),
                "Role",
                liqo::PEERING_USER_LIQO_NS_ROLE,
            ),
            (
                consumer.tenant_namespace(),
                consumer.tenant_ns_binding(),
                "ClusterRole",
                liqo::PEERING_USER_TENANT_NS_CLUSTER_ROLE,
            ),
        ];
        for (namespace, name, kind, role) in wanted {
            let api: Api<RoleBinding> = Api::namespaced(self.client.clone(), &namespace);
            let listed = survey.and_then(|s| s.bindings(&namespace, &consumer.user_name()));
            let existing = match listed {
                Some(listed) => listed,
                None => self.bindings_in(&namespace, consumer).await?,
            };
            let mut current = false;
            for b in existing {
                let bname = b.metadata.name.clone().unwrap_or_default();
                let right = bname == name
                    && b.role_ref.kind == kind
                    && b.role_ref.name == role
                    && b.subjects
                        .as_deref()
                        .is_some_and(|s| s.len() == 1 && s[0].kind == "User" && s[0].name == user);
                if right {
                    current = true;
                } else {
                    self.delete_binding(&namespace, &bname).await?;
                }
            }
            if current {
                continue;
            }
            let binding: RoleBinding = typed(json!({
                "metadata": {"name": name, "namespace": namespace, "labels": labels(consumer)},
                "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
                "roleRef": {"kind": kind, "name": role, "apiGroup": "rbac.authorization.k8s.io"},
            }));
            api.create(&PostParams::default(), &binding)
                .await
                .map_err(kube_err(format!("creating RoleBinding {namespace}/{name}")))?;
            tracing::info!(binding = %format!("{namespace}/{name}"), %role, "RoleBinding created");
        }
        Ok(())
    }

    async fn bindings_in(
        &self,
        namespace: &str,
        consumer: &ConsumerId,
    ) -> Result<Vec<RoleBinding>, ClusterError> {
        let api: Api<RoleBinding> = Api::namespaced(self.client.clone(), namespace);
        let selector = format!(
            "{}={},{MANAGED_BY_LABEL}={MANAGED_BY}",
            liqo::PEERING_USER_NAME_LABEL,
            consumer.user_name()
        );
        Ok(api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(kube_err(format!("listing RoleBindings in {namespace}")))?
            .items)
    }

    async fn delete_binding(&self, namespace: &str, name: &str) -> Result<(), ClusterError> {
        let api: Api<RoleBinding> = Api::namespaced(self.client.clone(), namespace);
        ignore_gone(api.delete(name, &DeleteParams::default()).await)
            .map_err(kube_err(format!("deleting RoleBinding {namespace}/{name}")))
    }

    async fn delete_csr(&self, name: &str) -> Result<(), ClusterError> {
        ignore_gone(self.csrs().delete(name, &DeleteParams::default()).await)
            .map_err(kube_err(format!("deleting CSR {name}")))
    }

    async fn delete_secret(&self, name: &str) -> Result<(), ClusterError> {
        ignore_gone(self.secrets().delete(name, &DeleteParams::default()).await)
            .map_err(kube_err(format!("deleting Secret {name}")))
    }

    /// Drop the key and CSR (the next pass makes a new user; the bindings
    /// then move to its CN).
    async fn forget(&self, consumer: &ConsumerId) -> Result<(), ClusterError> {
        let name = consumer.user_name();
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&name);
        self.delete_secret(&name).await?;
        self.delete_csr(&name).await
    }

    /// The consumers this controller has a peering user for (a CSR or a
    /// key Secret of its own), each with the buyer its key was made for.
    pub async fn present(&self) -> Result<crate::plan::Present, ClusterError> {
        Ok(self.survey().await?.present())
    }

    /// This controller's CSRs, key Secrets and RoleBindings, and the
    /// tenant namespaces (those two only when they can be listed: each
    /// consumer's are read on their own otherwise), read in one list each
    /// ([`Survey`]).
    pub async fn survey(&self) -> Result<Survey, ClusterError> {
        let lp = ListParams::default().labels(&selector());
        let csrs = self
            .csrs()
            .list(&lp)
            .await
            .map_err(kube_err("listing CSRs"))?;
        let secrets = self
            .secrets()
            .list(&lp)
            .await
            .map_err(kube_err("listing Secrets"))?;
        // The two below only spare reads: when they cannot be made, each
        // consumer's objects are read on their own, as before.
        let bindings = Api::<RoleBinding>::all(self.client.clone())
            .list(&lp)
            .await
            .map_err(|error| {
                tracing::debug!(%error, "cannot list the RoleBindings; listing them per consumer");
            })
            .ok();
        let namespaces = Api::<Namespace>::all(self.client.clone())
            .list(&ListParams::default().labels(liqo::TENANT_NAMESPACE_LABEL))
            .await
            .map_err(|error| {
                tracing::debug!(%error, "cannot list the tenant namespaces; reading them per consumer");
            })
            .map(|l| l.items)
            .unwrap_or_default();
        Ok(Survey::new(
            csrs.items,
            secrets.items,
            bindings.map(|l| l.items),
            namespaces.into_iter().filter_map(|n| n.metadata.name),
        ))
    }

    /// The consumer's tenant namespace and its Tenants' API there.
    fn tenant_api(&self, consumer: &ConsumerId) -> (String, Api<DynamicObject>) {
        let namespace = consumer.tenant_namespace();
        let api = Api::namespaced_with(
            self.client.clone(),
            &namespace,
            &liqo::TENANT.api_resource(),
        );
        (namespace, api)
    }

    /// The consumer's Tenants (`authentication.liqo.io`, in its tenant
    /// namespace, labelled with its cluster ID as `GetTenantByClusterID`
    /// finds them): each name and whether its `spec.tenantCondition` is
    /// already `Drained`.
    pub async fn tenants(
        &self,
        consumer: &ConsumerId,
    ) -> Result<Vec<(String, bool)>, ClusterError> {
        let (namespace, api) = self.tenant_api(consumer);
        let list = api
            .list(&ListParams::default().labels(&remote_cluster(consumer)))
            .await
            .map_err(kube_err(format!("listing Tenants in {namespace}")))?;
        Ok(list
            .items
            .into_iter()
            .map(|t| {
                let drained = t.data["spec"]["tenantCondition"] == liqo::TENANT_DRAINED;
                (t.metadata.name.unwrap_or_default(), drained)
            })
            .collect())
    }

    /// Set a Tenant's `spec.tenantCondition` to `Drained`: Liqo then
    /// evicts what the consumer runs here (`apis/authentication/v1beta1/tenant_types.go`).
    pub async fn drain_tenant(
        &self,
        consumer: &ConsumerId,
        name: &str,
    ) -> Result<(), ClusterError> {
        let (namespace, api) = self.tenant_api(consumer);
        let patch = json!({"metadata": {"annotations": {DRAINED_BY_ANNOTATION: MANAGED_BY}},
                           "spec": {"tenantCondition": liqo::TENANT_DRAINED}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kube_err(format!("draining Tenant {namespace}/{name}")))?;
        tracing::info!(tenant = %format!("{namespace}/{name}"), "Tenant drained: its consumer has no active contract");
        Ok(())
    }

    /// The consumer bought again before its drained Tenants were deleted:
    /// each Tenant this controller drained (marked
    /// [`DRAINED_BY_ANNOTATION`]) and still `Drained` is set `Active` again
    /// as `liqoctl activate tenant` does (v1.2.0
    /// `pkg/liqoctl/activate/handler.go:57-58`), so Liqo binds the
    /// consumer's control plane again and grants its slices
    /// (`tenant_controller.go:140-159`); a drained Tenant left as it is
    /// would deny every slice for ever (`remoteresourceslice_controller.go:297-298`).
    /// The names activated.
    pub async fn activate_drained(
        &self,
        consumer: &ConsumerId,
    ) -> Result<Vec<String>, ClusterError> {
        let (namespace, api) = self.tenant_api(consumer);
        let list = api
            .list(&ListParams::default().labels(&remote_cluster(consumer)))
            .await
            .map_err(kube_err(format!("listing Tenants in {namespace}")))?;
        let mut activated = Vec::new();
        for tenant in list.items {
            let ours = tenant
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DRAINED_BY_ANNOTATION))
                .is_some_and(|v| v == MANAGED_BY);
            if !ours || tenant.data["spec"]["tenantCondition"] != liqo::TENANT_DRAINED {
                continue;
            }
            let name = tenant.metadata.name.unwrap_or_default();
            let patch = json!({"metadata": {"annotations": {DRAINED_BY_ANNOTATION: null}},
                               "spec": {"tenantCondition": TENANT_ACTIVE}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(kube_err(format!("activating Tenant {namespace}/{name}")))?;
            tracing::info!(tenant = %format!("{namespace}/{name}"), "Tenant active again: its consumer has an active contract again");
            activated.push(name);
        }
        Ok(activated)
    }

    /// `unauthenticate`'s `DeleteTenant`: the consumer may no longer
    /// authenticate its control plane here.
    pub async fn delete_tenant(
        &self,
        consumer: &ConsumerId,
        name: &str,
    ) -> Result<(), ClusterError> {
        let (namespace, api) = self.tenant_api(consumer);
        ignore_gone(api.delete(name, &DeleteParams::default()).await)
            .map_err(kube_err(format!("deleting Tenant {namespace}/{name}")))?;
        tracing::info!(tenant = %format!("{namespace}/{name}"), "Tenant deleted: its consumer has no active contract");
        Ok(())
    }

    /// The objects of `kind` in the consumer's tenant namespace matching
    /// `selector`; none if this cluster does not serve the kind (Liqo
    /// installed without it: a 404 on the resource).
    async fn in_tenant_namespace(
        &self,
        consumer: &ConsumerId,
        kind: &LiqoKind,
        selector: &str,
    ) -> Result<Vec<DynamicObject>, ClusterError> {
        let namespace = consumer.tenant_namespace();
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &namespace, &kind.api_resource());
        match api.list(&ListParams::default().labels(selector)).await {
            Ok(list) => Ok(list.items),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
            Err(e) => Err(kube_err(format!("listing {}s in {namespace}", kind.kind))(
                e,
            )),
        }
    }

    /// How many of the consumer's replicas a drain removes are still here
    /// (see [`drain`]).
    pub async fn drain_left(&self, consumer: &ConsumerId) -> Result<usize, ClusterError> {
        let selector = drain::replicated_from(consumer);
        let mut left = 0;
        for kind in &drain::DRAINED_KINDS {
            left += self
                .in_tenant_namespace(consumer, kind, &selector)
                .await?
                .len();
        }
        Ok(left)
    }

    /// Whether this cluster's own peering with the consumer still uses the
    /// network (see [`network::still_used`]): the roles of the
    /// ForeignClusters labelled with its ID (`GetForeignClusterByID`).
    pub async fn network_still_used(&self, consumer: &ConsumerId) -> Result<bool, ClusterError> {
        let api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &liqo::FOREIGN_CLUSTER.api_resource());
        let list = match api
            .list(&ListParams::default().labels(&remote_cluster(consumer)))
            .await
        {
            Ok(list) => list.items,
            Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
            Err(e) => return Err(kube_err("listing ForeignClusters")(e)),
        };
        let roles: Vec<String> = list
            .iter()
            .filter_map(|fc| fc.data["status"]["role"].as_str().map(str::to_string))
            .collect();
        Ok(network::still_used(&roles))
    }

    /// `liqoctl network reset`, this cluster's half: the consumer's
    /// networking objects in its tenant namespace, in
    /// [`network::REMOVAL_ORDER`].
    pub async fn remove_network(&self, consumer: &ConsumerId) -> Result<(), ClusterError> {
        let namespace = consumer.tenant_namespace();
        let selector = remote_cluster(consumer);
        for kind in &network::REMOVAL_ORDER {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &namespace, &kind.api_resource());
            for object in self.in_tenant_namespace(consumer, kind, &selector).await? {
                let name = object.metadata.name.unwrap_or_default();
                ignore_gone(api.delete(&name, &DeleteParams::default()).await).map_err(
                    kube_err(format!("deleting {} {namespace}/{name}", kind.kind)),
                )?;
                tracing::info!(object = %format!("{namespace}/{name}"), kind = kind.kind, "networking object deleted: its consumer has no active contract");
            }
        }
        Ok(())
    }

    /// `RemovePermissions`: the RoleBindings, then the key, then the CSR
    /// (last, as it is how a half-removed user is found again). The tenant
    /// namespace stays: Liqo keeps its own objects there.
    pub async fn remove(&self, consumer: &ConsumerId) -> Result<(), ClusterError> {
        for namespace in [
            self.settings.liqo_namespace.clone(),
            consumer.tenant_namespace(),
        ] {
            for b in self.bindings_in(&namespace, consumer).await? {
                let name = b.metadata.name.unwrap_or_default();
                self.delete_binding(&namespace, &name).await?;
            }
        }
        self.forget(consumer).await?;
        tracing::info!(%consumer, "peering user removed: its consumer has no active contract");
        Ok(())
    }
}

/// Liqo's selector of a consumer's objects: `liqo.io/remote-cluster-id=X`.
fn remote_cluster(consumer: &ConsumerId) -> String {
    format!("{}={}", liqo::REMOTE_CLUSTER_ID_LABEL, consumer.as_str())
}

/// A delete of something already gone succeeded.
fn ignore_gone<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    fn cluster() -> Cluster {
        // Never asked anything: `still_ready` reads no API.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Cluster::new(
            Client::try_from(config).unwrap(),
            UserSettings {
                own_namespace: "broker".into(),
                liqo_namespace: "liqo".into(),
                controller_manager: "liqo-controller-manager".into(),
                expiration_seconds: 3600,
                renew_share: 0.5,
                api_server: ApiServer {
                    address: "https://provider:6443".into(),
                    ca_pem: None,
                },
            },
        )
    }

    fn remembered(not_after: i64) -> Remembered {
        Remembered {
            csr_version: "10".into(),
            secret_version: "7".into(),
            owner: "alice".into(),
            kind: KeyKind::Ed25519,
            validity: Validity {
                not_before: 0,
                not_after,
            },
            common_name: "cn".into(),
            kubeconfig: "kubeconfig".into(),
        }
    }

    /// The survey with the user's CSR and key Secret at these versions.
    fn objects(
        name: &str,
        csr_version: &str,
        secret_version: &str,
    ) -> (CertificateSigningRequest, Survey) {
        let csr: CertificateSigningRequest = object(json!({
            "metadata": {"name": name, "resourceVersion": csr_version},
            "spec": {"request": "", "signerName": "s"}}));
        let secret: Secret = object(json!({
            "metadata": {"name": name, "resourceVersion": secret_version}}));
        let survey = Survey::new(vec![csr.clone()], vec![secret], None, []);
        (csr, survey)
    }

    #[tokio::test]
    async fn a_ready_user_is_looked_at_again_once_its_csr_or_key_changes() {
        let cluster = cluster();
        let name = "peering-user-c1";
        let later = i64::MAX / 2;
        let ask = |csr_version: &str, secret_version: &str, owner: &str, kind| {
            let (csr, survey) = objects(name, csr_version, secret_version);
            cluster
                .still_ready(name, &csr, owner, kind, Some(&survey))
                .map(|r| r.kubeconfig)
        };

        // Never found ready: looked at in full.
        assert_eq!(ask("10", "7", "alice", None), None);

        cluster.remember(name.into(), remembered(later));
        assert_eq!(
            ask("10", "7", "alice", Some(KeyKind::Ed25519)).as_deref(),
            Some("kubeconfig")
        );
        // Each of these is looked at in full, and forgotten until then.
        for (csr, secret, owner, kind) in [
            ("11", "7", "alice", None),
            ("10", "8", "alice", None),
            ("10", "7", "bob", None),
            ("10", "7", "alice", Some(KeyKind::Rsa)),
        ] {
            cluster.remember(name.into(), remembered(later));
            assert_eq!(
                ask(csr, secret, owner, kind),
                None,
                "{csr} {secret} {owner}"
            );
            assert_eq!(ask("10", "7", "alice", None), None, "forgotten");
        }
        // A certificate due for renewal is looked at in full (and renewed).
        cluster.remember(name.into(), remembered(1));
        assert_eq!(ask("10", "7", "alice", None), None);
        // Without the Secret in the pass's lists: read, and looked at in full.
        cluster.remember(name.into(), remembered(later));
        let (csr, _) = objects(name, "10", "7");
        assert!(cluster
            .still_ready(name, &csr, "alice", None, None)
            .is_none());
    }
}
