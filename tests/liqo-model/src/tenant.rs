//! The provider's Tenant controller, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/authentication/tenant-controller/tenant_controller.go`
//! (TC below) with the certificate identity provider it calls
//! (`pkg/identityManager/certificateIdentityProvider.go`, CIP below): a
//! Tenant that a consumer applied is accepted only if its `signature` is
//! the consumer key's Ed25519 signature of the nonce this cluster handed
//! out for it and its CSR asks, with that key, for the consumer's
//! control-plane identity (CN `<cluster ID>`, O `liqo.io`); then the CSR is
//! signed by this cluster's `kubernetes.io/kube-apiserver-client` signer,
//! the certificate goes to `status.authParams` with this API server's
//! address and CA, and the consumer's control-plane user is bound to
//! `liqo-remote-controlplane` in its tenant namespace. A refusal is an
//! Event with Liqo's reason and no status. With `authzPolicy:
//! TolerateNoHandshake` there is no nonce, no certificate and no binding:
//! only the tenant namespace.

use std::time::Duration;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::ByteString;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};

use crate::consts::{self, NONCE_FIELD, NONCE_SECRET, REMOTE_CLUSTER_ID};
use crate::events::{self, NORMAL, WARNING};
use crate::identity::{Rule, ALL, READ};
use crate::runner::{self, Key};
use crate::{cluster_keys, control_plane_csr, tenant_namespace, Error};

/// RBAC of this controller: TC:96-106; the CSRs the identity provider
/// makes and approves (`deployments/liqo/files/liqo-controller-manager-ClusterRole.yaml:83-113`,
/// `create` from the virtual kubelet's local role the chart also binds
/// the controller manager to, `pkg/virtualKubelet/roles/local/role.go:40`);
/// the Secret it keeps certificates in (CIP:196-225), the nonce it reads
/// and the Events it records.
pub const RULES: &[Rule] = &[
    Rule::new(
        &["authentication.liqo.io"],
        &["tenants", "tenants/status"],
        ALL,
    ),
    Rule::new(
        &["authentication.liqo.io"],
        &["tenants/finalizers"],
        &["update"],
    ),
    Rule::new(&[""], &["namespaces"], ALL),
    Rule::new(&[""], &["secrets"], ALL),
    Rule::new(&[""], &["events"], &["create", "patch"]),
    Rule::new(&["rbac.authorization.k8s.io"], &["rolebindings"], ALL),
    Rule::new(&["rbac.authorization.k8s.io"], &["clusterroles"], READ),
    Rule::new(
        &["certificates.k8s.io"],
        &["certificatesigningrequests"],
        &["create", "get", "list", "watch"],
    ),
    Rule::new(
        &["certificates.k8s.io"],
        &[
            "certificatesigningrequests/approval",
            "certificatesigningrequests/status",
        ],
        &["update"],
    ),
    Rule::new(&["certificates.k8s.io"], &["signers"], &["approve"]),
    // The drain (TC:430-460) lists and deletes the consumer's replicated
    // slices and NamespaceMaps; the chart's
    // `liqo-controller-manager-ClusterRole.yaml` grants both in full.
    Rule::new(
        &["authentication.liqo.io"],
        &["resourceslices"],
        &["list", "delete"],
    ),
    Rule::new(
        &["offloading.liqo.io"],
        &["namespacemaps"],
        &["list", "delete"],
    ),
];

/// `tenant-controller/finalizer.go:27`.
pub const FINALIZER: &str = "tenant.liqo.io/finalizer";
/// TC:47-49: the `app.kubernetes.io/name` of the ClusterRoles bound to a
/// consumer's control plane in its tenant namespace.
pub const CONTROL_PLANE_ROLES: &str = "remote-controlplane";
/// The ClusterRole the chart installs with that label
/// (`deployments/liqo/files/liqo-remote-controlplane-ClusterRole.yaml`).
pub const CONTROL_PLANE_ROLE: &str = "liqo-remote-controlplane";
/// The recorder's name (`cmd/liqo-controller-manager/modules/authentication.go:117`).
const COMPONENT: &str = "tenant-controller";
/// CIP:39-40, `pkg/identityManager/const.go:21, 39-44`.
const CERTIFICATE_SECRET: &str = "liqo-remote-certificate";
const CSR_LABEL: &str = "liqo.io/remote-tenant-csr";
/// CIP:144-146: how long the signer is waited for.
const SIGNING_WAIT: Duration = Duration::from_secs(30);

/// What the provider tells a consumer about reaching it: the address and CA
/// of its API server (`APIServerAddressOverride` and the CA of the
/// controller manager's own configuration, CIP:168-177).
#[derive(Debug, Clone)]
pub struct Options {
    pub api_server: String,
    pub ca_pem: Option<String>,
}

/// The chart's `liqo-remote-controlplane` ClusterRole, labelled so TC
/// finds it, and its binding to the controller manager
/// (`deployments/liqo/templates/liqo-remote-controlplane-rbac.yaml`), which
/// lets the controller bind it in turn.
pub fn chart_objects(controller_manager: &str) -> Vec<Value> {
    let all = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": CONTROL_PLANE_ROLE,
                     "labels": {"app.kubernetes.io/name": CONTROL_PLANE_ROLES}},
        "rules": [
            {"apiGroups": ["authentication.liqo.io"],
             "resources": ["renews", "renews/status", "resourceslices", "resourceslices/status"],
             "verbs": all},
            {"apiGroups": ["offloading.liqo.io"],
             "resources": ["namespacemaps", "namespacemaps/status"],
             "verbs": all},
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": CONTROL_PLANE_ROLE},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": CONTROL_PLANE_ROLE},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": controller_manager}]}),
    ]
}

/// What `liqoctl` applies on the provider
/// (`authentication/utils/tenant.go:29-51`, `forge/tenant.go:28-72`): the
/// Tenant `<consumer>` in the provider's tenant namespace for it, with the
/// consumer's public key (PEM), a control-plane CSR made with its private
/// key, and its signature of the provider's nonce.
pub fn forge(
    consumer_id: &str,
    keys: &cluster_keys::Keys,
    signature: &[u8],
    provider_tenant_ns: &str,
) -> Result<Value, Error> {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let csr = control_plane_csr::generate(&keys.private_pem, consumer_id)?;
    Ok(json!({
        "apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
        "metadata": {"name": consumer_id, "namespace": provider_tenant_ns,
                     "labels": {REMOTE_CLUSTER_ID: consumer_id}},
        "spec": {"clusterID": consumer_id, "publicKey": b64(keys.public_pem.as_bytes()),
                 "csr": b64(csr.as_bytes()), "signature": b64(signature)},
    }))
}

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client, options: Options) {
    // TC:353-358: every Tenant event (tenant namespaces are not owned by
    // the Tenant, so `Owns(&Namespace{})` adds nothing here).
    let tenants: Api<DynamicObject> = Api::all_with(client.clone(), &consts::tenants());
    let own = runner::keys(runner::touched(tenants, ""), |t| Some(Key::of(&t)));
    let (client, options) = (&client, &options);
    runner::run("tenant", vec![own], |key| reconcile(client, options, key)).await;
}

/// What the handshake check decides (TC:261-306), apart from reading the
/// nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// Signature and CSR are the consumer's.
    Valid,
    /// Not accepted: an Event with this reason and message, and no retry.
    Refused {
        reason: &'static str,
        message: String,
    },
}

/// A Tenant's `spec` field holding bytes (base64 in JSON).
fn spec_bytes(tenant: &Value, field: &str) -> Vec<u8> {
    use base64::Engine;
    tenant["spec"][field]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_default()
}

/// TC:278-305: `tenant`'s signature of `nonce` and its CSR, checked. A
/// public key that does not parse, or of a type Ed25519 verification does
/// not take, is an error (retried), as in Liqo.
pub fn check_handshake(tenant: &Value, nonce: &[u8]) -> Result<Handshake, Error> {
    let name = tenant["metadata"]["name"].as_str().unwrap_or_default();
    let cluster = tenant["spec"]["clusterID"].as_str().unwrap_or_default();
    let public =
        cluster_keys::parse_tenant_public_key(&spec_bytes(tenant, "publicKey")).map_err(|e| {
            Error::Authentication(format!(
                "failed to parse public key in Tenant resource {name:?}: {e}"
            ))
        })?;
    if !cluster_keys::verify_nonce(&public, nonce, &spec_bytes(tenant, "signature"))? {
        return Ok(Handshake::Refused {
            reason: "SignatureVerificationFailed",
            message: format!("signature verification failed for Tenant {name:?}"),
        });
    }
    if let Err(invalid) = control_plane_csr::check(&spec_bytes(tenant, "csr"), &public, cluster) {
        return Ok(Handshake::Refused {
            reason: "InvalidCSR",
            message: invalid.to_string(),
        });
    }
    Ok(Handshake::Valid)
}

/// `apis/authentication/v1beta1`: `GetAuthzPolicyValue`, the policy
/// defaulting to `KeysExchange`.
fn keys_exchange(tenant: &Value) -> bool {
    tenant["spec"]["authzPolicy"] != "TolerateNoHandshake"
}

/// TC:109-259.
async fn reconcile(client: &Client, options: &Options, key: Key) -> Result<(), Error> {
    // TC:110-113, 308-350: the roles to bind are found by label.
    let roles = control_plane_roles(client).await?;
    let tenants: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::tenants());
    let Some(mut tenant) = tenants.get_opt(&key.name).await? else {
        return Ok(());
    };
    // TC:125-133: a deleted Tenant loses the finalizer (the cluster-wide
    // bindings it would remove first are not modelled).
    if tenant.metadata.deletion_timestamp.is_some() {
        if let Some(f) = tenant.metadata.finalizers.as_mut() {
            f.retain(|f| f != FINALIZER);
        }
        tenants
            .replace(&key.name, &PostParams::default(), &tenant)
            .await?;
        return Ok(());
    }
    // TC:135-138: the finalizer first, alone.
    if !tenant.finalizers().iter().any(|f| f == FINALIZER) {
        tenant
            .metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(FINALIZER.to_string());
        tenants
            .replace(&key.name, &PostParams::default(), &tenant)
            .await?;
        return Ok(());
    }
    let value = serde_json::to_value(&tenant).map_err(|e| Error::Authentication(e.to_string()))?;
    let cluster = value["spec"]["clusterID"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // TC:140-148: a Drained Tenant loses its consumer's bindings and
    // replicated slices, and nothing else is done (no handshake, no
    // status): a Tenant set back to Active (the CRD default,
    // `apis/authentication/v1beta1/tenant_types.go:75-78`) is handled as
    // any other on its next reconcile, which binds the roles again. (The
    // Cordoned handling, TC:149-153, 360-413, is not modelled.)
    if value["spec"]["tenantCondition"] == TENANT_DRAINED {
        return drain(client, &tenant, &cluster, &roles).await;
    }
    // TC:161-170.
    if keys_exchange(&value) {
        let nonce = match find_nonce(client, &cluster).await {
            Ok(nonce) => nonce,
            Err(e) => {
                warn(client, &tenant, "NonceNotFound", &e.to_string()).await;
                return Err(e);
            }
        };
        if let Handshake::Refused { reason, message } = check_handshake(&value, &nonce)? {
            warn(client, &tenant, reason, &message).await;
            return Ok(());
        }
    }
    // TC:172-181.
    let tenant_ns = match tenant_namespace::create(client, &cluster).await {
        Ok(ns) => ns,
        Err(e) => {
            warn(
                client,
                &tenant,
                "TenantNamespaceCreationFailed",
                &e.to_string(),
            )
            .await;
            return Err(e);
        }
    };
    let mut status = value["status"].clone();
    if !status.is_object() {
        status = json!({});
    }
    status["tenantNamespace"] = json!(tenant_ns);
    // TC:200-246 (the certificate renewal, TC:204-215, is not modelled).
    let mut outcome = Ok(());
    if keys_exchange(&value) {
        outcome = authorize(
            client,
            options,
            &value,
            &tenant,
            &tenant_ns,
            &roles,
            &mut status,
        )
        .await;
    }
    // TC:184-198: the status is written whatever happened after the tenant
    // namespace; a write that changes nothing is not sent.
    if status != value["status"] {
        let mut updated = tenant.clone();
        updated.data["status"] = status;
        if let Err(e) = tenants
            .replace_status(&key.name, &PostParams::default(), &updated)
            .await
        {
            warn(client, &tenant, "UpdateFailed", &e.to_string()).await;
            return Err(e.into());
        }
        if outcome.is_ok() {
            events::record(
                client,
                events::reference_to_dynamic(&tenant),
                COMPONENT,
                NORMAL,
                "Reconciled",
                "Tenant reconciled",
            )
            .await;
        }
    }
    outcome
}

/// TC:217-245: the AuthParams of the Tenant's certificate and the
/// control-plane bindings, written into `status`.
async fn authorize(
    client: &Client,
    options: &Options,
    value: &Value,
    tenant: &DynamicObject,
    tenant_ns: &str,
    roles: &[String],
    status: &mut Value,
) -> Result<(), Error> {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let cluster = value["spec"]["clusterID"].as_str().unwrap_or_default();
    let csr = spec_bytes(value, "csr");
    let certificate =
        match ensure_certificate(client, cluster, tenant_ns, CERTIFICATE_SECRET, &csr).await {
            Ok(c) => c,
            Err(e) => {
                warn(client, tenant, "AuthParamsFailed", &e.to_string()).await;
                return Err(e);
            }
        };
    // CIP:179-184.
    let mut params = json!({"signedCRT": b64(&certificate), "apiServer": options.api_server});
    if let Some(ca) = &options.ca_pem {
        params["ca"] = json!(b64(ca.as_bytes()));
    }
    if let Some(proxy) = value["spec"]["proxyURL"].as_str() {
        params["proxyURL"] = json!(proxy);
    }
    status["authParams"] = params;
    if let Err(e) = bind(client, cluster, tenant, tenant_ns, roles).await {
        warn(client, tenant, "ClusterRolesBindingFailed", &e.to_string()).await;
        return Err(e);
    }
    Ok(())
}

/// `apis/authentication/v1beta1/tenant_types.go:90-91`.
pub const TENANT_DRAINED: &str = "Drained";

/// TC:415-463 `handleTenantDrained`: the control plane's RoleBindings in
/// the consumer's tenant namespace deleted
/// (`pkg/tenantNamespace/bindings.go:55-71, 122-126`; the cluster-wide
/// ones, TC:416-421, are not modelled), then every ResourceSlice and every
/// NamespaceMap replicated from the consumer, in any namespace
/// (`pkg/utils/labels` `RemoteLabelSelectorForCluster`:
/// `liqo.io/replicated=true`, `liqo.io/originID=<consumer>`), gone already
/// or not.
async fn drain(
    client: &Client,
    tenant: &DynamicObject,
    cluster: &str,
    roles: &[String],
) -> Result<(), Error> {
    // `UnbindClusterRoles` needs the tenant namespace (bindings.go:58-62).
    let Some(namespace) = tenant_namespace::get(client, cluster).await? else {
        let message = format!("no tenant namespace for cluster {cluster:?}");
        warn(client, tenant, "ClusterRolesUnbindingFailed", &message).await;
        return Err(Error::Waiting(message));
    };
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &namespace);
    for role in roles {
        match bindings
            .delete(&format!("liqo-binding-{role}"), &Default::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                warn(
                    client,
                    tenant,
                    "ClusterRolesUnbindingFailed",
                    &e.to_string(),
                )
                .await;
                return Err(e.into());
            }
        }
    }
    events::record(
        client,
        events::reference_to_dynamic(tenant),
        COMPONENT,
        NORMAL,
        "ClusterRolesUnbindingSuccess",
        "ClusterRoles unbinded",
    )
    .await;
    let selector = format!(
        "{}=true,{}={cluster}",
        consts::REPLICATED,
        consts::REPLICATION_ORIGIN
    );
    let namespace_maps = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("offloading.liqo.io", "v1beta1", "NamespaceMap"),
        "namespacemaps",
    );
    for (kind, reason, message) in [
        (
            consts::resource_slices(),
            "ResourceSlicesDeleted",
            "ResourceSlices deleted",
        ),
        (
            namespace_maps,
            "NamespaceMapsDeleted",
            "NamespaceMaps deleted",
        ),
    ] {
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &kind);
        let found = match all.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => list.items,
            // A kind this cluster does not serve has none to delete.
            Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        for object in found {
            let (Some(ns), Some(name)) = (object.metadata.namespace, object.metadata.name) else {
                continue;
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &kind);
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        let involved = events::reference_to_dynamic(tenant);
        events::record(client, involved, COMPONENT, NORMAL, reason, message).await;
    }
    Ok(())
}

async fn warn(client: &Client, tenant: &DynamicObject, reason: &str, message: &str) {
    let involved = events::reference_to_dynamic(tenant);
    events::record(client, involved, COMPONENT, WARNING, reason, message).await;
}

/// TC:308-326: the names of the ClusterRoles labelled for the control
/// plane; none is an error.
async fn control_plane_roles(client: &Client) -> Result<Vec<String>, Error> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let selector = format!("app.kubernetes.io/name={CONTROL_PLANE_ROLES}");
    let found = roles.list(&ListParams::default().labels(&selector)).await?;
    if found.items.is_empty() {
        return Err(Error::Waiting(format!(
            "required ClusterRole resources with app.kubernetes.io/name={CONTROL_PLANE_ROLES:?} not found"
        )));
    }
    Ok(found.items.iter().map(|r| r.name_any()).collect())
}

/// TC:264-276 with `pkg/utils/getters/k8sGetters.go:220-242` and
/// `authentication/getters/nonce.go:25-35`: the nonce of the one Secret,
/// in any namespace, labelled as `cluster`'s nonce.
async fn find_nonce(client: &Client, cluster: &str) -> Result<Vec<u8>, Error> {
    let secrets: Api<Secret> = Api::all(client.clone());
    let selector = format!("{REMOTE_CLUSTER_ID}={cluster},{NONCE_SECRET}=true");
    let found = secrets
        .list(&ListParams::default().labels(&selector))
        .await?;
    let secret = match found.items.as_slice() {
        [] => {
            return Err(Error::Authentication(format!(
                "secrets {cluster:?} not found"
            )))
        }
        [one] => one,
        _ => {
            return Err(Error::Authentication(format!(
                "multiple nonce secrets found for remote cluster {cluster:?}"
            )))
        }
    };
    match secret.data.as_ref().and_then(|d| d.get(NONCE_FIELD)) {
        None => Err(Error::Authentication("nonce not found".into())),
        Some(n) if n.0.is_empty() => Err(Error::Authentication("empty nonce found".into())),
        Some(n) => Ok(n.0.clone()),
    }
}

/// `pkg/identityManager/utils.go:28-51` `EnsureCertificate`: the
/// certificate issued before for this very CSR (CIP:57-102), else a new
/// one (CIP:104-159). A stored certificate of another CSR is an error
/// (`NotMatchingCSRError`, a BadRequest, not a NotFound).
/// The record is `secret` in `tenant_ns`: `liqo-remote-certificate` for a
/// Tenant, `liqo-remote-certificate-<slice>` for a ResourceSlice
/// (`remoteCertificateSecretName`, CIP:187-194).
pub(crate) async fn ensure_certificate(
    client: &Client,
    cluster: &str,
    tenant_ns: &str,
    secret: &str,
    csr: &[u8],
) -> Result<Vec<u8>, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), tenant_ns);
    if let Some(stored) = secrets.get_opt(secret).await? {
        let field = |k: &str| {
            stored
                .data
                .as_ref()
                .and_then(|d| d.get(k))
                .map(|b| b.0.clone())
        };
        if let Some(stored_csr) = field("csr") {
            if stored_csr != csr {
                return Err(Error::Authentication(format!(
                    "the stored and the provided CSR for cluster {cluster} does not match"
                )));
            }
            if let Some(certificate) = field("certificate") {
                return Ok(certificate);
            }
        }
    }
    let certificate = approve_signing_request(client, csr).await?;
    // CIP:196-225.
    runner::create_or_update(
        &Api::namespaced_with(client.clone(), tenant_ns, &consts::secrets()),
        &consts::secrets(),
        tenant_ns,
        secret,
        |secret| {
            use base64::Engine;
            let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
            secret
                .metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(REMOTE_CLUSTER_ID.to_string(), cluster.to_string());
            if !secret.data["data"].is_object() {
                secret.data["data"] = json!({});
            }
            secret.data["data"]["csr"] = json!(b64(csr));
            secret.data["data"]["certificate"] = json!(b64(&certificate));
        },
    )
    .await?;
    Ok(certificate)
}

/// CIP:104-159 `ApproveSigningRequest`: a CSR of the
/// `kubernetes.io/kube-apiserver-client` signer for the request, approved
/// by this controller (`pkg/utils/csr/approve.go:28-53`), and the
/// certificate the signer issues for it, waited for.
pub(crate) async fn approve_signing_request(
    client: &Client,
    request: &[u8],
) -> Result<Vec<u8>, Error> {
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    let mut csr = CertificateSigningRequest {
        spec: CertificateSigningRequestSpec {
            groups: Some(vec!["system:authenticated".into()]),
            signer_name: "kubernetes.io/kube-apiserver-client".into(),
            request: ByteString(request.to_vec()),
            usages: Some(vec![
                "digital signature".into(),
                "key encipherment".into(),
                "client auth".into(),
            ]),
            ..Default::default()
        },
        ..Default::default()
    };
    csr.metadata.generate_name = Some("liqo-identity-".into());
    csr.metadata.labels = Some([(CSR_LABEL.to_string(), "true".to_string())].into());
    let mut csr = csrs.create(&PostParams::default(), &csr).await?;
    let name = csr.name_any();
    csr.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: "Approved".into(),
            status: "True".into(),
            reason: Some("IdentityManagerApproval".into()),
            message: Some("This CSR was approved by Liqo Identity Manager".into()),
            ..Default::default()
        });
    csrs.replace_subresource("approval", &name, &PostParams::default(), &csr)
        .await?;
    // `pkg/utils/csr/watcher.go:143-172`: the certificate of the approved
    // CSR, within the wait.
    let issued = |csr: Option<&CertificateSigningRequest>| {
        csr.and_then(|c| c.status.as_ref())
            .and_then(|s| s.certificate.as_ref())
            .is_some_and(|c| !c.0.is_empty())
    };
    let csr = tokio::time::timeout(
        SIGNING_WAIT,
        kube::runtime::wait::await_condition(csrs, &name, issued),
    )
    .await
    .map_err(|_| Error::Authentication(format!("timed out waiting for the certificate of {name}")))?
    .map_err(|e| Error::Authentication(e.to_string()))?;
    csr.and_then(|c| c.status)
        .and_then(|s| s.certificate)
        .map(|c| c.0)
        .ok_or_else(|| Error::Authentication(format!("{name} has no certificate")))
}

/// `pkg/tenantNamespace/bindings.go:34-130` `BindClusterRoles`: for each
/// role, the RoleBinding `liqo-binding-<role>` in the tenant namespace
/// binding user `<cluster>` to it, controlled by the Tenant; one that
/// exists is kept.
async fn bind(
    client: &Client,
    cluster: &str,
    tenant: &DynamicObject,
    tenant_ns: &str,
    roles: &[String],
) -> Result<(), Error> {
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), tenant_ns);
    let owner = OwnerReference {
        api_version: "authentication.liqo.io/v1beta1".into(),
        kind: "Tenant".into(),
        name: tenant.name_any(),
        uid: tenant.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    for role in roles {
        let name = format!("liqo-binding-{role}");
        let mut binding = RoleBinding {
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: role.clone(),
            },
            subjects: Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "User".into(),
                name: cluster.to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        binding.metadata.name = Some(name.clone());
        binding.metadata.labels = Some(
            [
                ("app.kubernetes.io/managed-by", "liqo"),
                (REMOTE_CLUSTER_ID, cluster),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        binding.metadata.owner_references = Some(vec![owner.clone()]);
        match bindings.create(&PostParams::default(), &binding).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    fn tenant(keys: &cluster_keys::Keys, signature: &[u8], csr: &str) -> Value {
        json!({"metadata": {"name": "consumer"},
               "spec": {"clusterID": "consumer", "publicKey": b64(keys.public_pem.as_bytes()),
                        "signature": b64(signature), "csr": b64(csr.as_bytes())}})
    }

    #[test]
    fn the_handshake_takes_the_nonce_signed_by_the_key_of_the_csr() {
        let keys = cluster_keys::generate().unwrap();
        let csr = control_plane_csr::generate(&keys.private_pem, "consumer").unwrap();
        let signed = cluster_keys::sign_nonce(&keys.private_pem, b"n1").unwrap();
        assert_eq!(
            check_handshake(&tenant(&keys, &signed, &csr), b"n1").unwrap(),
            Handshake::Valid
        );
        let Handshake::Refused { reason, .. } =
            check_handshake(&tenant(&keys, &signed, &csr), b"n2").unwrap()
        else {
            panic!("a signature of another nonce was taken");
        };
        assert_eq!(reason, "SignatureVerificationFailed");
        let other = control_plane_csr::generate(&keys.private_pem, "someone-else").unwrap();
        assert_eq!(
            check_handshake(&tenant(&keys, &signed, &other), b"n1").unwrap(),
            Handshake::Refused {
                reason: "InvalidCSR",
                message: "invalid common name".into()
            }
        );
    }
}
