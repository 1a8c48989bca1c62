//! Liqo v1.2.0's authentication step of a peering, done by the controller
//! as `liqoctl peer` does it (`pkg/liqoctl/authenticate/handler.go:42-118`,
//! `cluster.go:76-233`), as a client of both API servers: the consumer's
//! ([C], the controller's own) and the provider's ([P], through the
//! contract's peering-user kubeconfig). Networking, which `liqoctl peer`
//! sets up first, is the `networking` module's.
//!
//! Nothing here blocks on Liqo: each round does the next step that can be
//! done and says which it waits for ([`Stage`]), so the controller resumes
//! where it stopped after a restart. The objects are built by the pure
//! `*_object` functions from Liqo's own forge code (cited beside each);
//! [`Stage`] names the step as a Purchase condition reason.
//!
//! Secrets: the kubeconfig text and the consumer's private key are never
//! logged nor put in an error message.

use base64::Engine;
use controller_core::bounded::{Bounds, Exceeded};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde_json::{json, Value};

use crate::caches::{provider_key, Caches};
use crate::liqo::{MANAGED_BY, MANAGER};

/// Which cluster a step is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Consumer,
    Provider,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Consumer => "this cluster",
            Side::Provider => "the provider",
        })
    }
}

/// `pkg/consts/authentication.go:19`: the consumer's key pair, in Liqo's
/// namespace.
pub const KEYS_SECRET: &str = "authentication-keys";
/// `forge/nonce.go:26-28`.
pub const NONCE_SECRET: &str = "liqo-nonce";
/// `forge/signednonce.go:26-28`.
pub const SIGNED_NONCE_SECRET: &str = "liqo-signed-nonce";
/// `pkg/consts/authentication.go:22-29`.
const SIGNED_NONCE_LABEL: &str = "liqo.io/signed-nonce";
const NONCE_LABEL: &str = "liqo.io/nonce";
const NONCE_FIELD: &str = "nonce";
const SIGNED_NONCE_FIELD: &str = "signedNonce";
/// `pkg/consts/externalnetwork.go:36-38`.
const PRIVATE_KEY_FIELD: &str = "privateKey";
const PUBLIC_KEY_FIELD: &str = "publicKey";
/// `pkg/consts/core.go:19` and Liqo's `liqo.io/remote-cluster-id`.
const TENANT_NAMESPACE_LABEL: &str = "liqo.io/tenant-namespace";
const REMOTE_CLUSTER_ID: &str = "liqo.io/remote-cluster-id";
/// `authentication/csr.go:100-103`: the group of every control-plane user.
const CONTROL_PLANE_ORGANIZATION: &str = "liqo.io";
/// `pkg/identityManager/const.go:38, 43`: where the provider's Liqo keeps
/// the certificate it issued for a consumer's control-plane CSR, with that
/// CSR (`certificateIdentityProvider.go:196-225`).
const REMOTE_CERTIFICATE_SECRET: &str = "liqo-remote-certificate";
const REMOTE_CERTIFICATE_CSR_FIELD: &str = "csr";

/// `authentication.liqo.io/v1beta1` Tenants and Identities.
pub fn tenants() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("authentication.liqo.io", "v1beta1", "Tenant"),
        "tenants",
    )
}

pub fn identities() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("authentication.liqo.io", "v1beta1", "Identity"),
        "identities",
    )
}

/// Where authentication stands; each is a reason on the Purchase's
/// `Authenticated` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// A cluster's Liqo cluster ID cannot be read from its
    /// `clusterid-configmap` (which, why): nothing is applied until it is.
    ClusterIdUnreadable(Side, String),
    /// A cluster's `clusterid-configmap` names another cluster than the one
    /// this authentication is for (`--cluster-id` and the contract's
    /// `consumerClusterID` here, the contract's provider there): refused,
    /// nothing applied with the wrong ID.
    ClusterIdMismatch {
        side: Side,
        found: String,
        expected: String,
    },
    /// [P] `liqo-tenant-<consumer>` is missing or unreadable: the
    /// provider's peering-user controller makes it with the peering user.
    ProviderTenantNamespaceMissing(String),
    /// [P] the nonce Secret is there, Liqo has yet to fill it.
    WaitingForNonce,
    /// [C] the signed-nonce Secret is there, Liqo has yet to sign it.
    WaitingForSignature,
    /// [C] the signed-nonce Secret holds another nonce than the provider's
    /// (`utils/nonce.go:70-77` refuses it the same way).
    NonceMismatch(String),
    /// [C] the consumer's Liqo key cannot be read (why).
    KeysUnreadable(String),
    /// [P] the Tenant is applied; Liqo has yet to accept it.
    WaitingForTenant(String),
    /// [C] the Identity is applied: Liqo makes the peering from it.
    IdentityCreated,
    /// A call to the provider's API server failed (why, no secrets).
    Provider(String),
    /// The provider's answer hit a bound (too large, too slow): it was
    /// not read further (which bound, and the message).
    ProviderAnswerRefused(Exceeded, String),
    /// The contract's peering kubeconfig is refused by the allow-list
    /// (what, why): nothing in it was run or read.
    KubeconfigRefused(String),
}

impl Stage {
    /// Authentication done (the rest is Liqo's).
    pub fn done(&self) -> bool {
        matches!(self, Stage::IdentityCreated)
    }

    /// The next change is on the provider's API server (or a call there
    /// failed), where the peering user may not watch: looked at again on
    /// the timer. The others are Liqo's objects here, watched
    /// (the `liqo_watch` module), or need a person.
    pub fn on_provider(&self) -> bool {
        match self {
            Stage::ClusterIdUnreadable(side, _) | Stage::ClusterIdMismatch { side, .. } => {
                *side == Side::Provider
            }
            Stage::ProviderTenantNamespaceMissing(_)
            | Stage::WaitingForNonce
            | Stage::WaitingForTenant(_)
            | Stage::Provider(_)
            | Stage::ProviderAnswerRefused(..) => true,
            Stage::WaitingForSignature
            | Stage::NonceMismatch(_)
            | Stage::KeysUnreadable(_)
            | Stage::IdentityCreated
            | Stage::KubeconfigRefused(_) => false,
        }
    }

    /// The condition's reason and a message a person can act on.
    pub fn reason(&self) -> (&'static str, String) {
        match self {
            Stage::ClusterIdUnreadable(side, why) => (
                "ClusterIDUnreadable",
                format!("the Liqo cluster ID of {side} cannot be read ({why}): nothing is applied for the peering until it can"),
            ),
            Stage::ClusterIdMismatch { side: Side::Consumer, found, expected } => (
                "ClusterIDMismatch",
                format!("this cluster's Liqo is cluster {found:?} (its clusterid-configmap), but --cluster-id and the contract's consumerClusterID say {expected:?}: nothing is applied on the provider with the wrong ID; run the controller with --cluster-id {found} (a contract bought for {expected} is not this cluster's)"),
            ),
            Stage::ClusterIdMismatch { side: Side::Provider, found, expected } => (
                "ClusterIDMismatch",
                format!("the provider's Liqo is cluster {found:?} (its clusterid-configmap), but the contract names provider {expected:?}: nothing is applied there; ask the provider about its contract's cluster ID"),
            ),
            Stage::ProviderTenantNamespaceMissing(ns) => (
                "ProviderTenantNamespaceMissing",
                format!("the provider has no tenant namespace {ns} readable by this contract's peering user: the provider's peering-user controller makes it; ask the provider if it stays"),
            ),
            Stage::WaitingForNonce => (
                "WaitingForNonce",
                "waiting for the provider's Liqo to fill the nonce Secret liqo-nonce".to_string(),
            ),
            Stage::WaitingForSignature => (
                "WaitingForSignature",
                "waiting for this cluster's Liqo to sign the nonce (Secret liqo-signed-nonce)".to_string(),
            ),
            Stage::NonceMismatch(ns) => (
                "NonceMismatch",
                format!("Secret {ns}/{SIGNED_NONCE_SECRET} holds another nonce than the provider's: delete it to start the handshake again"),
            ),
            Stage::KeysUnreadable(why) => ("ConsumerKeyUnreadable", why.clone()),
            Stage::WaitingForTenant(ns) => (
                "WaitingForTenant",
                format!("Tenant applied on the provider; waiting for its Liqo to accept it (if this stays, see the provider's Events on the Tenant in {ns})"),
            ),
            Stage::IdentityCreated => (
                "IdentityCreated",
                "the control-plane Identity is applied; Liqo makes the peering from it".to_string(),
            ),
            Stage::Provider(why) => ("ProviderUnreachable", why.clone()),
            Stage::ProviderAnswerRefused(Exceeded::TooLarge { .. } | Exceeded::EventTooLarge { .. }, why) => {
                ("ProviderAnswerTooLarge", why.clone())
            }
            Stage::ProviderAnswerRefused(Exceeded::TooSlow(_) | Exceeded::Idle(_), why) => {
                ("ProviderAnswerTooSlow", why.clone())
            }
            Stage::KubeconfigRefused(why) => ("PeeringKubeconfigRefused", why.clone()),
        }
    }
}

/// Something this module could not do (not a wait).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("the contract's peering kubeconfig cannot be used: {0}")]
    Kubeconfig(&'static str),
    /// The allow-list refused it (the message names the part and why, never
    /// a secret): no client was built, nothing in it was run or read.
    #[error("the peering kubeconfig is refused (nothing in it was run or read): {0}")]
    Refused(#[from] catalog_client::kubeconfig::KubeconfigError),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot read an object: {0}")]
    Decode(#[from] serde_json::Error),
}

/// The bounds of every answer from a provider (`--provider-max-response-bytes`,
/// `--provider-request-timeout`). Process-wide, as the flags are: set once
/// by the binary's start-up (`config::run`) before the controller starts; the defaults
/// until then (tests).
static PROVIDER_BOUNDS: std::sync::OnceLock<Bounds> = std::sync::OnceLock::new();

/// Set the bounds of every provider client built from now on (the first
/// call wins: the flags are read once).
pub fn set_provider_bounds(bounds: Bounds) {
    let _ = PROVIDER_BOUNDS.set(bounds);
}

/// The bounds provider clients are built with.
pub fn provider_bounds() -> Bounds {
    PROVIDER_BOUNDS.get().copied().unwrap_or_default()
}

/// A client of the provider's API server from a kubeconfig another party
/// wrote (a Purchase's Secret, the contract's peering user). It passes the
/// workspace's one allow-list first (`catalog_client::kubeconfig`): what
/// would run a command (`exec`, `auth-provider`), read a local file
/// (`tokenFile`, the file keys) or weaken the connection
/// (`insecure-skip-tls-verify`, `proxy-url`) is refused before a client
/// exists, and the client is built from the canonical copy alone, so no
/// key the check did not read reaches it. Every answer is bounded
/// ([`provider_bounds`]). The parse errors are not passed on: they may
/// quote the text.
pub async fn provider_client(kubeconfig: &str) -> Result<Client, AuthError> {
    let checked = catalog_client::kubeconfig::canonical(kubeconfig)?;
    let parsed = Kubeconfig::from_yaml(&checked)
        .map_err(|_| AuthError::Kubeconfig("it does not parse as a kubeconfig"))?;
    let mut config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(|_| AuthError::Kubeconfig("it names no usable cluster, context or user"))?;
    // Per connection and per read, inside the total bound of each request.
    config.connect_timeout = Some(std::time::Duration::from_secs(10));
    config.read_timeout = Some(std::time::Duration::from_secs(10));
    controller_core::bounded::client(config, provider_bounds())
        .map_err(|_| AuthError::Kubeconfig("no client can be built from its credentials"))
}

/// `tenantNamespace/utils.go` `getNameForNamespace`: where a cluster keeps
/// what concerns `peer`.
pub fn tenant_namespace(peer: &str) -> String {
    format!("liqo-tenant-{peer}")
}

/// `tenantNamespace/namespaceManager.go:129-150` `ForgeNamespace`.
pub fn tenant_namespace_object(peer: &str) -> Value {
    let mut labels = json!({REMOTE_CLUSTER_ID: peer, TENANT_NAMESPACE_LABEL: "true"});
    for (key, value) in controller_core::liqo::TENANT_NAMESPACE_POD_SECURITY {
        labels[key] = json!(value);
    }
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": tenant_namespace(peer), "labels": labels}})
}

/// `forge/nonce.go:31-54`: the empty nonce Secret on [P] for `consumer`.
pub fn nonce_object(namespace: &str, consumer: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": NONCE_SECRET, "namespace": namespace,
                        "labels": {NONCE_LABEL: "true", REMOTE_CLUSTER_ID: consumer}}})
}

/// `forge/signednonce.go:31-49`: the provider's `nonce`, on [C], for Liqo
/// to sign.
pub fn signed_nonce_object(namespace: &str, provider: &str, nonce: &[u8]) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": SIGNED_NONCE_SECRET, "namespace": namespace,
                        "labels": {SIGNED_NONCE_LABEL: "true", REMOTE_CLUSTER_ID: provider,
                                   MANAGED_BY: MANAGER}},
           "data": {NONCE_FIELD: b64(nonce)}})
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The bytes of a Secret's `field` (`data`, base64 in JSON); empty if none.
fn secret_field(secret: &Value, field: &str) -> Vec<u8> {
    secret["data"][field]
        .as_str()
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .unwrap_or_default()
}

/// The consumer's key pair as `authentication-keys` stores it
/// (`authentication/keys.go:184-218`): PKCS#8 private key and PKIX public
/// key, PEM.
pub struct ClusterKeys {
    private_pem: String,
    public_pem: String,
}

impl std::fmt::Debug for ClusterKeys {
    /// The private key is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterKeys")
            .field("public_pem", &self.public_pem)
            .finish_non_exhaustive()
    }
}

impl ClusterKeys {
    /// From the Secret's data, checked as `keys.go:190-217` checks it
    /// (both fields present, PEM); the error names the field, never its
    /// content.
    pub fn from_secret(secret: &Value) -> Result<Self, String> {
        let field = |name: &str| {
            let bytes = secret_field(secret, name);
            let text = String::from_utf8(bytes).unwrap_or_default();
            if text.contains("-----BEGIN ") {
                Ok(text)
            } else {
                Err(format!(
                    "Secret {KEYS_SECRET} has no PEM {name}: is Liqo's controller manager installed?"
                ))
            }
        };
        Ok(Self {
            private_pem: field(PRIVATE_KEY_FIELD)?,
            public_pem: field(PUBLIC_KEY_FIELD)?,
        })
    }

    /// The public key as PKIX DER (the PEM's body).
    fn public_der(&self) -> Option<Vec<u8>> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(self.public_pem.as_bytes()).ok()?;
        Some(pem.contents)
    }

    /// Whether `signed_crt` (an `authParams.signedCRT`: base64 of a PEM
    /// certificate) certifies this key: a cluster whose keys changed (Liqo
    /// reinstalled) cannot use a certificate issued for its old key.
    pub fn certifies(&self, signed_crt: &Value) -> bool {
        let Some(der) = signed_crt
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        else {
            return false;
        };
        let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(&der) else {
            return false;
        };
        let Ok(cert) = pem.parse_x509() else {
            return false;
        };
        self.public_der()
            .is_some_and(|public| cert.tbs_certificate.subject_pki.raw == public.as_slice())
    }

    /// `authentication/csr.go:71-73, 197-236` `GenerateCSRForControlPlane`:
    /// a PKCS#10 request signed with the private key for CN `cluster_id`,
    /// O `liqo.io`, PEM.
    pub fn control_plane_csr(&self, cluster_id: &str) -> Result<String, String> {
        let err = |_| "the consumer's private key cannot sign a certificate request".to_string();
        let key = rcgen::KeyPair::from_pem(&self.private_pem).map_err(err)?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        // Go's `pkix.Name.ToRDNSequence` puts O before CN.
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, CONTROL_PLANE_ORGANIZATION);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cluster_id);
        let request = params.serialize_request(&key).map_err(err)?;
        request.pem().map_err(err)
    }
}

/// `utils/tenant.go:34-51` with `forge/tenant.go:29-72`: the Tenant
/// `<consumer>` for [P]'s `namespace`, with the public key (PEM), the CSR
/// and the signature of the provider's nonce; no proxy URL (out-of-band).
/// Marked as this controller's, so that unpeering deletes only its own.
pub fn tenant_object(
    consumer: &str,
    public_pem: &str,
    csr: &str,
    signature: &[u8],
    namespace: &str,
) -> Value {
    json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
           "metadata": {"name": consumer, "namespace": namespace,
                        "labels": {REMOTE_CLUSTER_ID: consumer, MANAGED_BY: MANAGER}},
           "spec": {"clusterID": consumer, "publicKey": b64(public_pem.as_bytes()),
                    "csr": b64(csr.as_bytes()), "signature": b64(signature)}})
}

/// `utils/identity.go:37-57` with `forge/identity.go:26-72`: the Identity
/// `controlplane-<provider>` in [C]'s `namespace` from the Tenant's
/// status; `None` while the Tenant lacks `authParams` or
/// `tenantNamespace`.
pub fn identity_object(tenant: &Value, provider: &str, namespace: &str) -> Option<Value> {
    let status = &tenant["status"];
    let remote_ns = status["tenantNamespace"].as_str().unwrap_or_default();
    if status["authParams"].is_null() || remote_ns.is_empty() {
        return None;
    }
    Some(
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Identity",
        "metadata": {"name": identity_name(provider), "namespace": namespace,
                     "labels": {REMOTE_CLUSTER_ID: provider, MANAGED_BY: MANAGER}},
        "spec": {"clusterID": provider, "type": "ControlPlane",
                 "authParams": status["authParams"], "namespace": remote_ns}}),
    )
}

/// `forge/identity.go:26-28`.
pub fn identity_name(provider: &str) -> String {
    format!("controlplane-{provider}")
}

/// Who is who.
pub struct Peers<'a> {
    pub consumer: &'a Client,
    pub provider: &'a Client,
    pub consumer_id: &'a str,
    pub provider_id: &'a str,
    /// Liqo's namespace on [C] (where `authentication-keys` is).
    pub liqo_namespace: &'a str,
    /// Liqo's namespace on [P] (its cluster-ID ConfigMap, Networks and
    /// gateway templates).
    pub provider_liqo_namespace: &'a str,
    /// The watches' caches and what earlier rounds saw of this peering
    /// ([`crate::caches`]).
    pub cache: &'a Caches,
}

pub(crate) fn is_status(e: &kube::Error, codes: &[u16]) -> bool {
    matches!(e, kube::Error::Api(s) if codes.contains(&s.code))
}

/// A provider call's failure as a [`Stage`]: it is the provider's or the
/// network's to mend, so the Purchase waits and says so.
fn provider_failed(what: &str, e: &kube::Error) -> Stage {
    match Exceeded::find(e) {
        Some(bound) => Stage::ProviderAnswerRefused(bound.clone(), answer_refused(what, bound)),
        None => Stage::Provider(provider_failure(what, e)),
    }
}

/// Why a call to the provider failed, in words a person can act on (no
/// secrets).
pub(crate) fn provider_failure(what: &str, e: &kube::Error) -> String {
    if let Some(bound) = Exceeded::find(e) {
        return answer_refused(what, bound);
    }
    match e {
        kube::Error::Api(s) if s.code == 401 => {
            "the provider refuses the contract's peering user (401): its credentials were revoked or the contract ended".to_string()
        }
        kube::Error::Api(s) if s.code == 403 => format!(
            "the contract's peering user may not {what} on the provider (403): the provider's Liqo roles for peering users are missing"
        ),
        kube::Error::Api(s) => format!("the provider's API server answered {} to {what}", s.code),
        _ => format!("the provider's API server cannot be reached to {what}"),
    }
}

/// The provider's answer hit a bound of [`provider_bounds`]: which, and the
/// flag that sets it.
pub(crate) fn answer_refused(what: &str, bound: &Exceeded) -> String {
    let flag = match bound {
        Exceeded::TooLarge { .. } | Exceeded::EventTooLarge { .. } => {
            "--provider-max-response-bytes"
        }
        Exceeded::TooSlow(_) | Exceeded::Idle(_) => "--provider-request-timeout",
    };
    format!("the provider's API server's answer to {what} was cut off: {bound} ({flag})")
}

/// `cluster.go:76-91` on [C] (and `network/cluster.go` `SetNamespaces`):
/// this cluster's tenant namespace for `provider`, made if missing (once
/// seen, not looked for again while remembered).
pub(crate) async fn ensure_tenant_namespace(
    consumer: &Client,
    provider: &str,
    cache: &Caches,
) -> Result<(), AuthError> {
    let remembered = provider_key(provider, "consumer-tenant-namespace");
    if cache.recall::<()>(&remembered).is_some() {
        return Ok(());
    }
    let namespaces: Api<Namespace> = Api::all(consumer.clone());
    let name = tenant_namespace(provider);
    if namespaces.get_opt(&name).await?.is_none() {
        match namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(tenant_namespace_object(provider))?,
            )
            .await
        {
            Ok(_) => tracing::info!(namespace = %name, "tenant namespace created"),
            // Made meanwhile (by Liqo, say): there.
            Err(e) if is_status(&e, &[409]) => {}
            Err(e) => return Err(e.into()),
        }
    }
    cache.remember(remembered, ());
    Ok(())
}

/// One round of authentication: the next step that can be done, and where
/// it then stands. Consumer-side API failures are errors (retried with
/// backoff); provider-side ones are a [`Stage::Provider`].
///
/// Every round that gets as far re-applies the Tenant as `liqoctl peer`
/// does (`cluster.go:176-196`, `CreateOrUpdate` of its labels, annotations
/// and spec): a Tenant already there — accepted, refused, drained, or made
/// with keys this cluster no longer has — gets this cluster's key, CSR and
/// signature of the current nonce, and its `tenantCondition` back to the
/// CRD default `Active` (`apis/authentication/v1beta1/tenant_types.go:75-78`).
/// The Identity is applied the same way (`cluster.go:212-233`) from a
/// Tenant status whose certificate is for this cluster's key.
pub async fn authenticate(peers: &Peers<'_>) -> Result<Stage, AuthError> {
    let on_consumer = tenant_namespace(peers.provider_id);
    let on_provider = tenant_namespace(peers.consumer_id);
    let identities: Api<DynamicObject> =
        Api::namespaced_with(peers.consumer.clone(), &on_consumer, &identities());
    // An Identity seen in place (or made) here is remembered for
    // `--liqo-resync`, like the other objects a step passed on.
    let in_place = provider_key(peers.provider_id, "identity");
    if peers.cache.recall::<()>(&in_place).is_some() {
        return Ok(Stage::IdentityCreated);
    }
    // While a handshake is under way (the Identity was missing or stale
    // when it began) the Identity is read again only before it is
    // written, not on every round that waits on the provider.
    let under_way = provider_key(peers.provider_id, "identity-handshake");
    let deferred = peers.cache.recall::<()>(&under_way).is_some();
    // `cluster.go:213-233`: once applied, Liqo has what it needs — unless
    // its certificate is not for this cluster's key (Liqo reinstalled with
    // new keys): then the handshake is made again and the Identity
    // replaced.
    let identity = if deferred {
        None
    } else {
        read_identity(&identities, peers.provider_id).await?
    };
    if let Some(identity) = &identity {
        let stale = match read_keys(peers).await? {
            Ok(keys) => !keys.certifies(&identity["spec"]["authParams"]["signedCRT"]),
            Err(_) => false,
        };
        if !stale {
            peers.cache.remember(in_place, ());
            return Ok(Stage::IdentityCreated);
        }
        tracing::info!("the control-plane Identity's certificate is not for this cluster's key: authenticating again");
    }
    if !deferred {
        peers.cache.remember(under_way.clone(), ());
    }

    // `handler.go:46-56` (`SetLocalClusterID` on each side, `cluster.go:62-73`):
    // who each cluster's Liqo says it is, before anything names either.
    if let Some(stage) = check_cluster_ids(peers).await? {
        return Ok(stage);
    }

    // `cluster.go:76-91` on [P]: the peering user may only read it
    // (`tenantNamespace/namespaceManager.go:155-176` falls back to a get by
    // name). A 403 there is not final: the nonce Secret's create below
    // answers 404 if the namespace is missing.
    let seen = provider_key(peers.provider_id, "provider-tenant-namespace");
    if peers.cache.recall::<()>(&seen).is_none() {
        let provider_namespaces: Api<Namespace> = Api::all(peers.provider.clone());
        match provider_namespaces.get_opt(&on_provider).await {
            Ok(Some(_)) => peers.cache.remember(seen, ()),
            Ok(None) => return Ok(Stage::ProviderTenantNamespaceMissing(on_provider)),
            Err(e) if is_status(&e, &[403]) => {}
            Err(e) => return Ok(provider_failed("read its tenant namespace", &e)),
        }
    }

    // `cluster.go:76-91` on [C].
    ensure_tenant_namespace(peers.consumer, peers.provider_id, peers.cache).await?;

    // `cluster.go:95-121`, `utils/nonce.go:32-42`: [P]'s nonce. Liqo keeps
    // it (the nonce creator fills it once), so a handshake made again
    // signs the same nonce.
    let nonces: Api<DynamicObject> = Api::namespaced_with(
        peers.provider.clone(),
        &on_provider,
        &ApiResource::erase::<Secret>(&()),
    );
    let remembered_nonce = provider_key(peers.provider_id, "nonce");
    let recalled = peers.cache.recall::<Vec<u8>>(&remembered_nonce);
    let fresh = recalled.is_none();
    let nonce = match recalled {
        Some(nonce) => Ok(Some(nonce)),
        None => nonces.get_opt(NONCE_SECRET).await.and_then(|found| {
            found
                .map(|secret| serde_json::to_value(secret).map(|s| secret_field(&s, NONCE_FIELD)))
                .transpose()
                .map_err(kube::Error::SerdeError)
        }),
    };
    let nonce = match nonce {
        Ok(Some(nonce)) => nonce,
        Ok(None) => {
            let wanted = nonce_object(&on_provider, peers.consumer_id);
            if let Err(e) = nonces
                .create(&PostParams::default(), &serde_json::from_value(wanted)?)
                .await
            {
                if is_status(&e, &[404]) {
                    return Ok(Stage::ProviderTenantNamespaceMissing(on_provider));
                }
                if !is_status(&e, &[409]) {
                    return Ok(provider_failed("create the nonce Secret", &e));
                }
            }
            return Ok(Stage::WaitingForNonce);
        }
        Err(e) => return Ok(provider_failed("read the nonce Secret", &e)),
    };
    if nonce.is_empty() {
        return Ok(Stage::WaitingForNonce);
    }
    if fresh {
        peers.cache.remember(remembered_nonce, nonce.clone());
    }

    // `cluster.go:125-152`, `utils/nonce.go:48-80`: [C] signs it (again
    // after its keys changed: the signer re-signs with the key it has,
    // `noncesigner_controller.go:118-137`).
    let secrets: Api<Secret> = Api::namespaced(peers.consumer.clone(), &on_consumer);
    let signed = match secrets.get_opt(SIGNED_NONCE_SECRET).await? {
        None => {
            let wanted = signed_nonce_object(&on_consumer, peers.provider_id, &nonce);
            secrets
                .create(&PostParams::default(), &serde_json::from_value(wanted)?)
                .await?;
            return Ok(Stage::WaitingForSignature);
        }
        Some(secret) => serde_json::to_value(secret)?,
    };
    if secret_field(&signed, NONCE_FIELD) != nonce {
        return Ok(Stage::NonceMismatch(on_consumer));
    }
    let signature = secret_field(&signed, SIGNED_NONCE_FIELD);
    if signature.is_empty() {
        return Ok(Stage::WaitingForSignature);
    }

    // `utils/tenant.go:34-51`: the consumer's key, the CSR, the Tenant.
    let keys = match read_keys(peers).await? {
        Ok(keys) => keys,
        Err(why) => return Ok(Stage::KeysUnreadable(why)),
    };
    let csr = match keys.control_plane_csr(peers.consumer_id) {
        Ok(csr) => csr,
        Err(why) => return Ok(Stage::KeysUnreadable(why)),
    };
    // Looked at once per CSR while remembered: Liqo stores a CSR's
    // certificate record when it issues it, for this CSR.
    let checked = provider_key(peers.provider_id, "certificate-checked");
    if peers.cache.recall::<String>(&checked).as_deref() != Some(csr.as_str()) {
        if let Err(e) = forget_certificate_of_another_csr(
            peers.provider,
            &on_provider,
            REMOTE_CERTIFICATE_SECRET,
            &csr,
        )
        .await
        {
            return Ok(e.stage());
        }
        peers.cache.remember(checked, csr.clone());
    }
    let wanted = tenant_object(
        peers.consumer_id,
        &keys.public_pem,
        &csr,
        &signature,
        &on_provider,
    );
    let tenant = match apply_tenant(peers, &on_provider, wanted).await? {
        Ok(tenant) => tenant,
        Err(stage) => return Ok(stage),
    };

    // `cluster.go:190-233`: the Identity from the Tenant's status, once it
    // holds a certificate for this cluster's key.
    if !keys.certifies(&tenant["status"]["authParams"]["signedCRT"]) {
        return Ok(Stage::WaitingForTenant(on_provider));
    }
    let Some(wanted) = identity_object(&tenant, peers.provider_id, &on_consumer) else {
        return Ok(Stage::WaitingForTenant(on_provider));
    };
    // Asked of the API server before it is written, when not read above.
    let identity = if deferred {
        read_identity(&identities, peers.provider_id).await?
    } else {
        identity
    };
    match identity {
        None => {
            identities
                .create(&PostParams::default(), &serde_json::from_value(wanted)?)
                .await?;
            tracing::info!(namespace = %on_consumer, "control-plane Identity created");
        }
        // Made meanwhile for this cluster's key: in place.
        Some(existing) if keys.certifies(&existing["spec"]["authParams"]["signedCRT"]) => {}
        Some(mut existing) => {
            existing["metadata"]["labels"] = wanted["metadata"]["labels"].clone();
            existing["spec"] = wanted["spec"].clone();
            identities
                .replace(
                    &identity_name(peers.provider_id),
                    &PostParams::default(),
                    &serde_json::from_value(existing)?,
                )
                .await?;
            tracing::info!(namespace = %on_consumer, "control-plane Identity replaced with this cluster's certificate");
        }
    }
    peers.cache.forget(&under_way);
    peers.cache.remember(in_place, ());
    Ok(Stage::IdentityCreated)
}

/// The control-plane Identity for `provider` on the consumer, as JSON.
async fn read_identity(
    identities: &Api<DynamicObject>,
    provider: &str,
) -> Result<Option<Value>, AuthError> {
    Ok(identities
        .get_opt(&identity_name(provider))
        .await?
        .map(serde_json::to_value)
        .transpose()?)
}

/// `handler.go:46-56`: both clusters' IDs from their `clusterid-configmap`
/// (`crate::cluster_id`), as `liqoctl` takes them (it reads them and uses
/// nothing else), each checked against the ID this authentication is
/// for: this cluster's against `--cluster-id` (which the contract's
/// `consumerClusterID` matches, else the contract is refused before),
/// the provider's against the contract's. `None` when both agree. With
/// a wrong ID the Tenant, its CSR and the nonce would name a cluster
/// Liqo does not know here: Liqo fills a slice's `consumerClusterID` with
/// the real ID (`localresourceslice_controller.go:83-85`) and the provider
/// skips it silently (`remoteresourceslice_controller.go:123-132`).
async fn check_cluster_ids(peers: &Peers<'_>) -> Result<Option<Stage>, AuthError> {
    use crate::cluster_id::{read_remembered, Whose};
    let consumer = read_remembered(
        peers.consumer,
        peers.liqo_namespace,
        peers.cache,
        Whose::Consumer,
        peers.consumer_id,
    )
    .await?;
    let provider = match read_remembered(
        peers.provider,
        peers.provider_liqo_namespace,
        peers.cache,
        Whose::Provider(peers.provider_id),
        peers.provider_id,
    )
    .await
    {
        Ok(read) => read,
        Err(e) => return Ok(Some(provider_failed("read its Liqo cluster ID", &e))),
    };
    for (side, read, expected) in [
        (Side::Consumer, consumer, peers.consumer_id),
        (Side::Provider, provider, peers.provider_id),
    ] {
        match read {
            Err(why) => return Ok(Some(Stage::ClusterIdUnreadable(side, why))),
            Ok(found) if found != expected => {
                return Ok(Some(Stage::ClusterIdMismatch {
                    side,
                    found,
                    expected: expected.to_string(),
                }))
            }
            Ok(_) => {}
        }
    }
    Ok(None)
}

/// The consumer's key pair from `authentication-keys` in Liqo's namespace
/// on [C], or why it cannot be had (a [`Stage::KeysUnreadable`]).
async fn read_keys(peers: &Peers<'_>) -> Result<Result<ClusterKeys, String>, AuthError> {
    let liqo_secrets: Api<Secret> = Api::namespaced(peers.consumer.clone(), peers.liqo_namespace);
    Ok(match liqo_secrets.get_opt(KEYS_SECRET).await {
        Ok(Some(secret)) => ClusterKeys::from_secret(&serde_json::to_value(secret)?),
        Ok(None) => Err(format!(
            "no Secret {}/{KEYS_SECRET}: is Liqo v1 installed in --liqo-namespace?",
            peers.liqo_namespace
        )),
        Err(e) if is_status(&e, &[403]) => Err(format!(
            "this controller may not read Secret {}/{KEYS_SECRET} (deploy its Role from deploy/kubernetes/purchase-controller)",
            peers.liqo_namespace
        )),
        Err(e) => return Err(e.into()),
    })
}

/// Liqo v1.2.0 issues a consumer's control-plane certificate once per CSR
/// and keeps it with that CSR in `liqo-remote-certificate`; a Tenant with
/// another CSR (a consumer whose keys changed) is refused for ever with
/// `NotMatchingCSRError`, a BadRequest that `EnsureCertificate` does not
/// take for "not found" (`certificateIdentityProvider.go:57-102`,
/// `interface.go:31-32`, `utils.go:38-47`), and the Tenant keeps the old
/// certificate in its status. A ResourceSlice's certificate is kept and
/// judged the same way, in `liqo-remote-certificate-<slice>`
/// (`remoteCertificateSecretName`, `certificateIdentityProvider.go:187-194`),
/// and its slice's authentication denied for ever
/// (`remoteresourceslice_controller.go:225-229`). So before its Tenant is
/// applied with `csr`, or while its slice's authentication is denied, a
/// record `secret` of another CSR in the tenant namespace `on_provider`
/// is deleted (the peering user may: Liqo's `liqo-peering-user-tenant-ns`
/// role grants Secrets `delete`), and Liqo issues a certificate for this
/// one.
async fn forget_certificate_of_another_csr(
    provider: &Client,
    on_provider: &str,
    secret: &str,
    csr: &str,
) -> Result<(), ForgetFailed> {
    let secrets: Api<Secret> = Api::namespaced(provider.clone(), on_provider);
    let stored = match secrets.get_opt(secret).await {
        // A Secret the API server sent always reads back as JSON.
        Ok(Some(stored)) => match serde_json::to_value(stored) {
            Ok(stored) => stored,
            Err(_) => return Ok(()),
        },
        Ok(None) => return Ok(()),
        Err(e) => return Err(ForgetFailed::Read(e)),
    };
    let stored_csr = secret_field(&stored, REMOTE_CERTIFICATE_CSR_FIELD);
    if stored_csr.is_empty() || stored_csr == csr.as_bytes() {
        return Ok(());
    }
    match secrets.delete(secret, &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(namespace = %on_provider, %secret, "the provider's certificate of another CSR of this cluster deleted: Liqo issues one for this cluster's key");
            Ok(())
        }
        Err(e) if is_status(&e, &[404]) => Ok(()),
        Err(e) => Err(ForgetFailed::Delete(e)),
    }
}

/// Why a stale certificate record could not be forgotten.
#[derive(Debug)]
enum ForgetFailed {
    Read(kube::Error),
    Delete(kube::Error),
}

impl ForgetFailed {
    fn stage(self) -> Stage {
        match self {
            ForgetFailed::Read(e) => provider_failed("read the stored certificate", &e),
            ForgetFailed::Delete(e) => {
                provider_failed("delete the stored certificate of another key", &e)
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            ForgetFailed::Read(e) => format!("reading the stored certificate: {e}"),
            ForgetFailed::Delete(e) => format!("deleting the stored certificate: {e}"),
        }
    }
}

/// The slice `slice` of this cluster (its `spec.csr`, made by Liqo from
/// this cluster's key) is denied authentication by the provider: a
/// certificate Liqo issued there for another CSR of the same slice name (a
/// consumer whose keys changed, see [`forget_certificate_of_another_csr`])
/// is deleted, so Liqo's next pass issues one for this CSR. Failures are
/// logged: the slice keeps waiting, and the next pass tries again.
pub async fn forget_slice_certificate_of_another_csr(
    kubeconfig: &str,
    consumer_id: &str,
    slice: &str,
    csr: &str,
) {
    let provider = match provider_client(kubeconfig).await {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!(%slice, error = %e, "cannot reach the provider to check its certificate of this slice");
            return;
        }
    };
    let secret = format!("{REMOTE_CERTIFICATE_SECRET}-{slice}");
    let on_provider = tenant_namespace(consumer_id);
    if let Err(e) = forget_certificate_of_another_csr(&provider, &on_provider, &secret, csr).await {
        tracing::warn!(%slice, error = %e.describe(), "the provider's certificate of this slice could not be checked");
    }
}

/// A Tenant's spec with the CRD's defaults filled in
/// (`tenant_types.go:62-66, 75-78`), as the API server stores it.
fn with_defaults(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(map) = spec.as_object_mut() {
        map.entry("authzPolicy")
            .or_insert_with(|| json!("KeysExchange"));
        map.entry("tenantCondition")
            .or_insert_with(|| json!("Active"));
    }
    spec
}

/// `cluster.go:176-196` `EnsureTenant`: `resource.CreateOrUpdate` of the
/// Tenant on [P], its labels, annotations and spec replaced by `wanted`'s
/// (the peering user may `create` and `update` Tenants, not `patch`). The
/// Tenant as the provider holds it, or the stage to stop at.
async fn apply_tenant(
    peers: &Peers<'_>,
    on_provider: &str,
    wanted: Value,
) -> Result<Result<Value, Stage>, AuthError> {
    let tenants_p: Api<DynamicObject> =
        Api::namespaced_with(peers.provider.clone(), on_provider, &tenants());
    let existing = match tenants_p.get_opt(peers.consumer_id).await {
        Ok(t) => t.map(serde_json::to_value).transpose()?,
        Err(e) => return Ok(Err(provider_failed("read the Tenant", &e))),
    };
    let Some(mut tenant) = existing else {
        return Ok(
            match tenants_p
                .create(&PostParams::default(), &serde_json::from_value(wanted)?)
                .await
            {
                Ok(created) => {
                    tracing::info!(namespace = %on_provider, "Tenant applied on the provider");
                    Ok(serde_json::to_value(created)?)
                }
                // Made meanwhile: the next round updates it.
                Err(e) if is_status(&e, &[409]) => Err(Stage::WaitingForTenant(on_provider.into())),
                Err(e) => Err(provider_failed("create the Tenant", &e)),
            },
        );
    };
    let metadata = &tenant["metadata"];
    let annotated = metadata["annotations"]
        .as_object()
        .is_some_and(|a| !a.is_empty());
    let same = metadata["labels"] == wanted["metadata"]["labels"]
        && !annotated
        && with_defaults(&tenant["spec"]) == with_defaults(&wanted["spec"]);
    if same {
        return Ok(Ok(tenant));
    }
    let drained = tenant["spec"]["tenantCondition"] != "Active";
    tenant["metadata"]["labels"] = wanted["metadata"]["labels"].clone();
    if let Some(m) = tenant["metadata"].as_object_mut() {
        m.remove("annotations");
    }
    // Without `tenantCondition`: the API server defaults it to `Active`.
    tenant["spec"] = wanted["spec"].clone();
    match tenants_p
        .replace(
            peers.consumer_id,
            &PostParams::default(),
            &serde_json::from_value(tenant)?,
        )
        .await
    {
        Ok(updated) => {
            tracing::info!(namespace = %on_provider, was_not_active = drained, "Tenant applied again on the provider");
            Ok(Ok(serde_json::to_value(updated)?))
        }
        // Changed meanwhile (Liqo's finalizer, say): the next round.
        Err(e) if is_status(&e, &[409]) => Ok(Err(Stage::WaitingForTenant(on_provider.into()))),
        Err(e) => Ok(Err(provider_failed("update the Tenant", &e))),
    }
}

/// Unpeering what [`authenticate`] made, in `liqoctl unpeer`'s order
/// (after the ResourceSlices): the Identity on [C], then (best effort: the
/// provider's peering-user controller removes it too once the consumer's
/// last contract ends, and the peering user may be gone already) the
/// Tenant on [P]. Only objects carrying this controller's mark.
pub async fn unpeer(
    consumer: &Client,
    provider: Option<&Client>,
    consumer_id: &str,
    provider_id: &str,
) -> Result<(), AuthError> {
    let identities: Api<DynamicObject> = Api::namespaced_with(
        consumer.clone(),
        &tenant_namespace(provider_id),
        &identities(),
    );
    let name = identity_name(provider_id);
    // Only a peering this controller made (an Identity made by `liqoctl`
    // or a person stays), and the provider is asked once: when the
    // Identity goes.
    let Some(identity) = identities.get_opt(&name).await? else {
        return Ok(());
    };
    if !ours(&serde_json::to_value(identity)?) {
        return Ok(());
    }
    match identities.delete(&name, &DeleteParams::default()).await {
        Ok(_) => tracing::info!(identity = %name, "control-plane Identity deleted"),
        Err(e) if is_status(&e, &[404]) => {}
        Err(e) => return Err(e.into()),
    }
    let Some(provider) = provider else {
        return Ok(());
    };
    let tenants_p: Api<DynamicObject> =
        Api::namespaced_with(provider.clone(), &tenant_namespace(consumer_id), &tenants());
    let outcome = match tenants_p.get_opt(consumer_id).await {
        Ok(Some(tenant)) if ours(&serde_json::to_value(&tenant)?) => tenants_p
            .delete(consumer_id, &DeleteParams::default())
            .await
            .map(|_| tracing::info!("Tenant deleted on the provider")),
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    };
    if let Err(e) = outcome {
        let why = provider_failure("delete the Tenant", &e);
        tracing::warn!(%why, "the Tenant on the provider is left to the provider");
    }
    Ok(())
}

fn ours(object: &Value) -> bool {
    object["metadata"]["labels"][MANAGED_BY].as_str() == Some(MANAGER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::certification_request::X509CertificationRequest;
    use x509_parser::prelude::FromDer;

    fn keys() -> ClusterKeys {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        ClusterKeys {
            private_pem: pair.serialize_pem(),
            public_pem: pair.public_key_pem(),
        }
    }

    #[test]
    fn the_csr_asks_for_the_consumer_control_plane_with_its_key() {
        let keys = keys();
        let csr = keys.control_plane_csr("consumer-1").unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(csr.as_bytes()).unwrap();
        let (_, request) = X509CertificationRequest::from_der(&pem.contents).unwrap();
        request.verify_signature().unwrap();
        let subject = &request.certification_request_info.subject;
        let cn: Vec<_> = subject
            .iter_common_name()
            .map(|a| a.as_str().unwrap())
            .collect();
        let o: Vec<_> = subject
            .iter_organization()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!((cn, o), (vec!["consumer-1"], vec!["liqo.io"]));
        let (_, public) = x509_parser::pem::parse_x509_pem(keys.public_pem.as_bytes()).unwrap();
        assert_eq!(
            request.certification_request_info.subject_pki.raw,
            public.contents.as_slice()
        );
    }

    #[test]
    fn keys_need_both_pem_fields_and_never_print_the_private_one() {
        let k = keys();
        let secret = json!({"data": {PRIVATE_KEY_FIELD: b64(k.private_pem.as_bytes()),
                                     PUBLIC_KEY_FIELD: b64(k.public_pem.as_bytes())}});
        let read = ClusterKeys::from_secret(&secret).unwrap();
        assert!(!format!("{read:?}").contains("PRIVATE"));
        let half = json!({"data": {PUBLIC_KEY_FIELD: b64(k.public_pem.as_bytes())}});
        let err = ClusterKeys::from_secret(&half).unwrap_err();
        assert!(
            err.contains("privateKey") && !err.contains("BEGIN"),
            "{err}"
        );
    }

    /// `authParams.signedCRT` as Liqo writes it: base64 of a PEM
    /// certificate, here self-signed with `keys`' private key.
    fn signed_crt(keys: &ClusterKeys) -> Value {
        let pair = rcgen::KeyPair::from_pem(&keys.private_pem).unwrap();
        let cert = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .self_signed(&pair)
            .unwrap();
        json!(b64(cert.pem().as_bytes()))
    }

    #[test]
    fn a_wrong_cluster_id_is_refused_naming_both_values() {
        let stage = Stage::ClusterIdMismatch {
            side: Side::Consumer,
            found: "real-id".into(),
            expected: "wrong-id".into(),
        };
        let (reason, message) = stage.reason();
        assert_eq!(reason, "ClusterIDMismatch");
        assert!(
            message.contains("\"real-id\"") && message.contains("\"wrong-id\""),
            "{message}"
        );
        assert!(message.contains("--cluster-id real-id"), "{message}");
        assert!(!stage.done());
        let (reason, message) = Stage::ClusterIdMismatch {
            side: Side::Provider,
            found: "p-real".into(),
            expected: "p-contract".into(),
        }
        .reason();
        assert_eq!(reason, "ClusterIDMismatch");
        assert!(
            message.contains("p-real") && message.contains("p-contract"),
            "{message}"
        );
    }

    #[test]
    fn a_certificate_certifies_its_own_key_only() {
        let (mine, other) = (keys(), keys());
        assert!(mine.certifies(&signed_crt(&mine)));
        assert!(!mine.certifies(&signed_crt(&other)), "another key's");
        assert!(!mine.certifies(&json!("Y3J0")), "not a certificate");
        assert!(!mine.certifies(&Value::Null), "none");
    }

    #[test]
    fn a_tenant_compares_with_the_crd_defaults_filled_in() {
        let applied = tenant_object("c1", "PUB", "CSR", b"sig", "liqo-tenant-c1");
        let mut stored = applied["spec"].clone();
        stored["authzPolicy"] = json!("KeysExchange");
        stored["tenantCondition"] = json!("Active");
        assert_eq!(with_defaults(&applied["spec"]), with_defaults(&stored));
        stored["tenantCondition"] = json!("Drained");
        assert_ne!(with_defaults(&applied["spec"]), with_defaults(&stored));
        assert!(
            applied["spec"]["tenantCondition"].is_null(),
            "left to the CRD default"
        );
    }

    #[test]
    fn the_identity_waits_for_the_tenant_status_and_copies_its_auth_params() {
        let mut tenant = json!({"metadata": {"name": "consumer-1"}, "status": {}});
        assert_eq!(identity_object(&tenant, "p1", "liqo-tenant-p1"), None);
        tenant["status"] = json!({"authParams": {"apiServer": "https://p:6443", "ca": "Y2E=", "signedCRT": "Y3J0"},
                                  "tenantNamespace": "liqo-tenant-consumer-1"});
        let identity = identity_object(&tenant, "p1", "liqo-tenant-p1").unwrap();
        assert_eq!(identity["metadata"]["name"], "controlplane-p1");
        assert_eq!(identity["metadata"]["namespace"], "liqo-tenant-p1");
        assert_eq!(identity["spec"]["type"], "ControlPlane");
        assert_eq!(identity["spec"]["clusterID"], "p1");
        assert_eq!(identity["spec"]["namespace"], "liqo-tenant-consumer-1");
        assert_eq!(
            identity["spec"]["authParams"],
            tenant["status"]["authParams"]
        );
    }

    #[test]
    fn the_tenant_carries_keys_csr_and_signature_base64() {
        let t = tenant_object("c1", "PUB", "CSR", b"sig", "liqo-tenant-c1");
        assert_eq!(t["metadata"]["name"], "c1");
        assert_eq!(t["spec"]["clusterID"], "c1");
        assert_eq!(t["spec"]["publicKey"], b64(b"PUB"));
        assert_eq!(t["spec"]["csr"], b64(b"CSR"));
        assert_eq!(t["spec"]["signature"], b64(b"sig"));
        assert!(t["spec"]["proxyURL"].is_null());
        let s = signed_nonce_object("liqo-tenant-p1", "p1", b"n0nce");
        assert_eq!(s["data"]["nonce"], b64(b"n0nce"));
        assert_eq!(s["metadata"]["labels"][SIGNED_NONCE_LABEL], "true");
    }

    /// A kubeconfig in the shape the allow-list accepts (a token user, no
    /// CA) for a server nothing listens on, with `user` and `cluster` as
    /// given (YAML flow mappings).
    fn kubeconfig(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {cluster}}}]\n\
             users: [{{name: u, user: {user}}}]\n\
             contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
        )
    }

    const SERVER: &str = "{server: 'https://127.0.0.1:1'}";

    /// A file name of its own under the temporary directory.
    fn marker(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("purchase-controller-{}-{name}", std::process::id()))
    }

    /// What `provider_client` made of `yaml`: if it built a client (the
    /// old code did), the client is used once, as a reconcile would, so
    /// that whatever it was told to run or read is run or read.
    async fn built(yaml: &str) -> Result<(), AuthError> {
        let client = provider_client(yaml).await?;
        let _ = client.apiserver_version().await;
        Ok(())
    }

    /// H-07: `users[].exec` is refused before any client exists: the
    /// command (which would create a file) never runs, and the refusal
    /// names the key.
    #[tokio::test]
    async fn an_exec_kubeconfig_is_refused_and_nothing_runs() {
        let ran = marker("exec-ran");
        let _ = std::fs::remove_file(&ran);
        let credential = r#"{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}"#;
        let user = format!(
            "{{exec: {{apiVersion: client.authentication.k8s.io/v1beta1, interactiveMode: Never, \
             command: /bin/sh, args: ['-c', 'touch {}; echo \"{credential}\"']}}}}",
            ran.display()
        );
        let outcome = built(&kubeconfig(SERVER, &user)).await;
        let ran_it = ran.exists();
        let _ = std::fs::remove_file(&ran);
        assert!(!ran_it, "the kubeconfig's command ran");
        let e = outcome.expect_err("refused");
        let message = e.to_string();
        assert!(
            matches!(e, AuthError::Refused(_))
                && message.contains("users[0].user.exec is not accepted"),
            "{message}"
        );
    }

    /// H-08: `tokenFile` is refused before any client exists: the file is
    /// never read (nor sent), and the refusal names the key.
    #[tokio::test]
    async fn a_token_file_kubeconfig_is_refused() {
        let file = marker("token-file");
        std::fs::write(&file, "secret-token").unwrap();
        let outcome = built(&kubeconfig(
            SERVER,
            &format!("{{tokenFile: {}}}", file.display()),
        ))
        .await;
        let _ = std::fs::remove_file(&file);
        let message = outcome.expect_err("refused").to_string();
        assert!(
            message.contains("users[0].user.tokenFile is not accepted"),
            "{message}"
        );
        assert!(!message.contains("secret-token"), "{message}");
    }

    /// H-09: `insecure-skip-tls-verify` is refused, wherever the key is
    /// spelled the client's way.
    #[tokio::test]
    async fn an_insecure_kubeconfig_is_refused() {
        let cluster = "{server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}";
        let message = built(&kubeconfig(cluster, "{token: abc}"))
            .await
            .expect_err("refused")
            .to_string();
        assert!(
            message.contains("clusters[0].cluster.insecure-skip-tls-verify is not accepted"),
            "{message}"
        );
    }

    /// What the allow-list accepts still makes a client (the refusals
    /// above are the check's, not a kubeconfig the test wrote wrong).
    #[tokio::test]
    async fn an_accepted_kubeconfig_makes_a_client() {
        provider_client(&kubeconfig(SERVER, "{token: abc}"))
            .await
            .expect("a client");
    }

    /// An answer cut off by a bound is said as such, with the flag to
    /// change, under its own reason.
    #[test]
    fn a_cut_off_answer_names_its_bound_and_flag() {
        let big = Exceeded::TooLarge { limit: 1024 };
        let stage =
            Stage::ProviderAnswerRefused(big.clone(), answer_refused("read the Tenant", &big));
        let (reason, message) = stage.reason();
        assert_eq!(reason, "ProviderAnswerTooLarge");
        assert!(
            message.contains("larger than 1024 bytes")
                && message.contains("--provider-max-response-bytes"),
            "{message}"
        );
        let slow = Exceeded::TooSlow(std::time::Duration::from_secs(2));
        let (reason, message) =
            Stage::ProviderAnswerRefused(slow.clone(), answer_refused("read the Tenant", &slow))
                .reason();
        assert_eq!(reason, "ProviderAnswerTooSlow");
        assert!(message.contains("--provider-request-timeout"), "{message}");
    }
}
