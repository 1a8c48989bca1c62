//! The provider's remote ResourceSlice controller, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/authentication/remoteresourceslice-controller/remoteresourceslice_controller.go`
//! (RRS below): it judges the authentication of every replicated slice —
//! its CSR checked (`authentication/csr.go`, CSR below) and signed through
//! the CSR API by the certificate identity provider
//! (`pkg/identityManager/certificateIdentityProvider.go`, CIP below), the
//! certificate given back in `status.authParams` — and grants resources
//! itself only to the default class.
//!
//! The slice's user (CN `<slice>-<hash>`, O `<consumer>`) gets no binding
//! here: RRS binds nothing; its rights on the provider come from its group,
//! the consumer's cluster ID, which the Tenant controller binds
//! cluster-wide (`tenant_controller.go:248-256`, `pkg/tenantNamespace/bindings.go:136-180`,
//! a `Group` subject) and the NamespaceMap controller in each remote
//! namespace.

use std::collections::BTreeMap;

use base64::Engine;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::runtime::{predicates, WatchStreamExt};
use kube::Client;
use serde_json::{json, Value};

use crate::consts::{self, REMOTE_CLUSTER_ID, REPLICATED, REPLICATED_SELECTOR, TENANT_NAMESPACE};
use crate::control_plane_csr::Invalid;
use crate::identity::{Rule, ALL, READ};
use crate::runner::{self, Key};
use crate::slice::{self, ACCEPTED, AUTHENTICATION, DENIED, RESOURCES};
use crate::Error;

/// RBAC of this controller (RRS:98-102), and the namespace reads of its
/// tenant namespace manager (`pkg/tenantNamespace/namespaceManager.go:155-190`).
pub const RULES: &[Rule] = &[
    Rule::new(
        &["authentication.liqo.io"],
        &["resourceslices", "resourceslices/status"],
        ALL,
    ),
    Rule::new(&["authentication.liqo.io"], &["tenants"], READ),
    Rule::new(&[""], &["secrets"], ALL),
    Rule::new(&[""], &["namespaces"], READ),
    // CIP:104-159: the CSR made and approved for the slice, as the
    // chart's controller-manager ClusterRole grants
    // (`liqo-controller-manager-ClusterRole.yaml:83-113`).
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
];

/// CIP:185-192 `remoteCertificateSecretName` for a ResourceSlice identity:
/// `liqo-remote-certificate-<slice>` in the tenant namespace.
pub fn certificate_secret(slice: &str) -> String {
    format!("liqo-remote-certificate-{slice}")
}

/// What the default class is given besides the request
/// (`slicestatus.go:29-37`, set from the chart's `offloading.*` values).
#[derive(Debug, Clone)]
pub struct Options {
    /// `offloading.defaultNodeResources` (`deployments/liqo/values.yaml:265-273`):
    /// granted for every one of these keys the slice does not request.
    pub default_resources: BTreeMap<String, String>,
    /// Ingress classes, name and whether default (`slicestatus.go:39-50`).
    pub ingress_classes: Vec<(String, bool)>,
    /// Load-balancer classes, name and whether default (`slicestatus.go:52-63`).
    pub load_balancer_classes: Vec<(String, bool)>,
    /// The cluster labels given as node labels (`slicestatus.go:101-106`).
    pub node_labels: BTreeMap<String, String>,
}

impl Default for Options {
    fn default() -> Self {
        let defaults = [
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("pods", "110"),
            ("ephemeral-storage", "20Gi"),
        ];
        Options {
            default_resources: defaults
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ingress_classes: Vec::new(),
            load_balancer_classes: Vec::new(),
            node_labels: BTreeMap::new(),
        }
    }
}

/// The classes this controller grants itself (RRS:72-75).
const RECONCILED_CLASSES: [&str; 2] = ["default", ""];

/// Run the controller on `client` until the task is dropped, dropping
/// `syncing` once both its watches have passed on their initial lists;
/// the AuthParams name `endpoint`'s address and CA.
pub async fn run(
    client: Client,
    options: Options,
    endpoint: crate::tenant::Options,
    syncing: runner::Syncing,
) {
    let slices: Api<DynamicObject> = Api::all_with(client.clone(), &consts::resource_slices());
    let tenants: Api<DynamicObject> = Api::all_with(client.clone(), &consts::tenants());
    // Replicas with a CSR, on creation and on spec (generation) changes only:
    // a status-only edit does not trigger it (RRS:313-318, 354-362).
    let own = runner::touched_syncing(slices.clone(), REPLICATED_SELECTOR, syncing.clone())
        .predicate_filter(predicates::generation, Default::default())
        .boxed();
    let own = runner::keys(own, |slice| has_csr(&slice).then(|| Key::of(&slice)));
    // Any Tenant event reconciles the consumer's replicas (RRS:319, 323-352).
    let tenants = runner::touched_syncing(tenants, "", syncing);
    let by_tenant = runner::keys_via(tenants, slices, slices_of_tenant);
    let reconciler = Reconciler {
        client,
        options,
        endpoint,
    };
    runner::run("remote-resourceslice", vec![own, by_tenant], |key| {
        reconciler.reconcile(key)
    })
    .await;
}

fn has_csr(slice: &DynamicObject) -> bool {
    slice.data["spec"]["csr"]
        .as_str()
        .is_some_and(|c| !c.is_empty())
}

/// The replicas whose origin is the Tenant's cluster (RRS:331-349,
/// `pkg/utils/labels/labelSelectors.go:95-116`).
async fn slices_of_tenant(slices: Api<DynamicObject>, tenant: DynamicObject) -> Option<Vec<Key>> {
    let cluster = tenant.data["spec"]["clusterID"]
        .as_str()
        .filter(|c| !c.is_empty())?;
    let selector = format!("{REPLICATED}=true,{}={cluster}", consts::REPLICATION_ORIGIN);
    match slices.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => Some(list.items.iter().map(Key::of).collect()),
        Err(e) => {
            tracing::warn!(error = %e, "listing the Tenant's ResourceSlices");
            None
        }
    }
}

struct Reconciler {
    client: Client,
    options: Options,
    endpoint: crate::tenant::Options,
}

impl Reconciler {
    /// RRS:105-181.
    async fn reconcile(&self, key: Key) -> Result<(), Error> {
        let slices: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &key.namespace,
            &consts::resource_slices(),
        );
        let Some(mut slice) = slices.get_opt(&key.name).await? else {
            return Ok(());
        };
        // RRS:116-121: without a consumer ID the slice is left alone.
        let Some(consumer) = slice::consumer_cluster_id(&slice).map(str::to_string) else {
            return Ok(());
        };
        // RRS:123-132: the consumer's tenant namespace must be this one.
        let tenant_namespace = self.tenant_namespace(&consumer).await?;
        let Some(namespace_name) = tenant_namespace.metadata.name.clone() else {
            return Ok(());
        };
        if namespace_name != key.namespace {
            return Ok(());
        }
        // RRS:134-140 (`pkg/utils/getters/k8sGetters.go:271-292`).
        let tenants: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &consts::tenants());
        let found = tenants
            .list(&ListParams::default().labels(&format!("{REMOTE_CLUSTER_ID}={consumer}")))
            .await?;
        let [tenant] = found.items.as_slice() else {
            return Err(Error::Waiting(format!(
                "{} Tenants for cluster {consumer} in {}",
                found.items.len(),
                key.namespace
            )));
        };
        let outcome = self.judge(&mut slice, &tenant_namespace, tenant).await;
        // RRS:142-154: the status is written back whatever was decided.
        slices
            .replace_status(&key.name, &PostParams::default(), &slice)
            .await?;
        outcome
    }

    /// RRS:156-178 with RRS:183-243: the namespace, then the CSR and its
    /// certificate, then the resources. A failed signing denies
    /// authentication and is an error (the status is still written,
    /// RRS:225-229), so the key is tried again.
    async fn judge(
        &self,
        slice: &mut DynamicObject,
        tenant_namespace: &DynamicObject,
        tenant: &DynamicObject,
    ) -> Result<(), Error> {
        if !namespace_is_the_consumers(slice, tenant_namespace) {
            deny_authentication(slice);
            return Ok(());
        }
        if let Err(invalid) = check_csr(slice, tenant) {
            tracing::debug!(%invalid, "InvalidCSR");
            deny_authentication(slice);
        } else {
            match self.forge_auth_params(slice, tenant).await {
                Ok(params) => {
                    slice::object_at(&mut slice.data, "status")["authParams"] = params;
                    accept_authentication(slice);
                }
                Err(e) => {
                    // RRS:225-229: AuthParamsFailed.
                    deny_authentication(slice);
                    return Err(e);
                }
            }
        }
        grant(slice, tenant, &self.options);
        Ok(())
    }

    /// CIP:161-183 `ForgeAuthParams` for the slice's identity
    /// (RRS:211-223: cluster the consumer, the slice's namespace and name,
    /// its CSR, the Tenant's proxy): the certificate issued before for this
    /// very CSR or a new one (`pkg/identityManager/utils.go:28-51`), with
    /// this API server's address and CA.
    async fn forge_auth_params(
        &self,
        slice: &DynamicObject,
        tenant: &DynamicObject,
    ) -> Result<Value, Error> {
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let csr = csr_bytes(&slice.data["spec"]["csr"]).unwrap_or_default();
        let namespace = slice.metadata.namespace.clone().unwrap_or_default();
        let name = slice.metadata.name.clone().unwrap_or_default();
        let consumer = slice::consumer_cluster_id(slice)
            .unwrap_or_default()
            .to_string();
        // CIP:57-102 `GetRemoteCertificate` (a stored certificate of
        // another CSR is `NotMatchingCSRError`, CIP:86-89), else
        // CIP:104-159 and CIP:195-225, as for a Tenant.
        let certificate = crate::tenant::ensure_certificate(
            &self.client,
            &consumer,
            &namespace,
            &certificate_secret(&name),
            &csr,
        )
        .await?;
        let mut params = json!({"signedCRT": b64(&certificate),
                                "apiServer": self.endpoint.api_server});
        if let Some(ca) = &self.endpoint.ca_pem {
            params["ca"] = json!(b64(ca.as_bytes()));
        }
        if let Some(proxy) = tenant.data["spec"]["proxyURL"].as_str() {
            params["proxyURL"] = json!(proxy);
        }
        Ok(params)
    }

    /// The one namespace labelled as the consumer's tenant namespace
    /// (`pkg/tenantNamespace/namespaceManager.go:155-190`).
    async fn tenant_namespace(&self, consumer: &str) -> Result<DynamicObject, Error> {
        let namespaces: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &consts::namespaces());
        let selector = format!("{REMOTE_CLUSTER_ID}={consumer},{TENANT_NAMESPACE}");
        let mut found = namespaces
            .list(&ListParams::default().labels(&selector))
            .await?
            .items;
        match found.len() {
            1 => Ok(found.remove(0)),
            n => Err(Error::Waiting(format!(
                "{n} tenant namespaces for cluster {consumer}"
            ))),
        }
    }
}

/// RRS:156-167, 451-469 `validateRSNamespace`: the namespace must be
/// labelled as the consumer's tenant namespace, else authentication is
/// denied and nothing else done.
pub fn namespace_is_the_consumers(slice: &DynamicObject, tenant_namespace: &DynamicObject) -> bool {
    let consumer = slice::consumer_cluster_id(slice).unwrap_or_default();
    let labels = tenant_namespace.metadata.labels.clone().unwrap_or_default();
    let is_tenant = labels
        .get(TENANT_NAMESPACE)
        .is_some_and(|v| !v.eq_ignore_ascii_case("false"));
    is_tenant && labels.get(REMOTE_CLUSTER_ID).map(String::as_str) == Some(consumer)
}

/// RRS:185-193 with CSR:133-156 `CheckCSRForResourceSlice`: the slice's CSR
/// asks for CN `<slice>-<hash>` and O `<consumer>` and, unless the Tenant
/// tolerates no handshake, with the key of the Tenant's `publicKey`.
pub fn check_csr(slice: &DynamicObject, tenant: &DynamicObject) -> Result<(), Invalid> {
    let check_public_key = tenant.data["spec"]["authzPolicy"] != "TolerateNoHandshake";
    let public_der = if check_public_key {
        // CSR:136-141: ParseTenantPublicKey; a Tenant without a usable key
        // fails the check.
        let key = csr_bytes(&tenant.data["spec"]["publicKey"]).unwrap_or_default();
        Some(
            crate::cluster_keys::parse_tenant_public_key(&key)
                .map_err(|e| Invalid::Parse(e.to_string()))?,
        )
    } else {
        None
    };
    let consumer = slice::consumer_cluster_id(slice).unwrap_or_default();
    let name = slice.metadata.name.clone().unwrap_or_default();
    let csr = csr_bytes(&slice.data["spec"]["csr"]).ok_or(Invalid::Pem)?;
    check_request(
        &csr,
        &slice::common_name(&name, consumer),
        consumer,
        public_der.as_deref(),
    )
}

/// CSR:158-195 `checkCSR`: one PEM block and nothing after it, a parsable
/// request, its CN, its first O, and (when given) its public key, PKIX.
pub fn check_request(
    csr: &[u8],
    common_name: &str,
    organization: &str,
    public_der: Option<&[u8]>,
) -> Result<(), Invalid> {
    use x509_parser::certification_request::X509CertificationRequest;
    use x509_parser::prelude::FromDer;
    let (rest, pem) = x509_parser::pem::parse_x509_pem(csr).map_err(|_| Invalid::Pem)?;
    if !rest.is_empty() {
        return Err(Invalid::Pem);
    }
    let (_, request) = X509CertificationRequest::from_der(&pem.contents)
        .map_err(|e| Invalid::Parse(e.to_string()))?;
    let info = &request.certification_request_info;
    // CSR:145-149.
    let cn = info.subject.iter_common_name().next();
    if cn.and_then(|a| a.as_str().ok()) != Some(common_name) {
        return Err(Invalid::CommonName);
    }
    // CSR:150-155: the first organization only.
    let o = info.subject.iter_organization().next();
    if o.and_then(|a| a.as_str().ok()) != Some(organization) {
        return Err(Invalid::Organization);
    }
    // CSR:177-191.
    if let Some(public_der) = public_der {
        if public_der.is_empty() || info.subject_pki.raw != public_der {
            return Err(Invalid::PublicKey);
        }
    }
    Ok(())
}

/// A Go `[]byte` field: base64 in JSON.
fn csr_bytes(value: &Value) -> Option<Vec<u8>> {
    value
        .as_str()
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
}

fn accept_authentication(slice: &mut DynamicObject) {
    // RRS:235-236, 364-380.
    slice::ensure_condition(
        slice,
        AUTHENTICATION,
        ACCEPTED,
        "ResourceSliceAuthenticationAccepted",
        "ResourceSlice authentication accepted",
    );
}

fn deny_authentication(slice: &mut DynamicObject) {
    // RRS:382-398.
    slice::ensure_condition(
        slice,
        AUTHENTICATION,
        DENIED,
        "ResourceSliceAuthenticationDenied",
        "ResourceSlice authentication denied",
    );
}

fn deny_resources(slice: &mut DynamicObject) {
    // RRS:421-440.
    slice::ensure_condition(
        slice,
        RESOURCES,
        DENIED,
        "ResourceSliceResourcesDenied",
        "ResourceSlice resources denied",
    );
}

/// RRS:245-302.
fn grant(slice: &mut DynamicObject, tenant: &DynamicObject, options: &Options) {
    match tenant.data["spec"]["tenantCondition"]
        .as_str()
        .unwrap_or("")
    {
        "Active" => {
            // RRS:251-257: other classes are left to their class controller.
            if !RECONCILED_CLASSES.contains(&slice::class(slice)) {
                return;
            }
            // RRS:259-277: every requested key as requested, uncapped, and
            // the defaults for the default keys not requested.
            let requested = slice.data["spec"]["resources"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let status = slice::object_at(&mut slice.data, "status");
            let resources = slice::object_at(status, "resources");
            for (key, default) in &options.default_resources {
                resources[key] = requested
                    .get(key)
                    .cloned()
                    .unwrap_or_else(|| json!(default));
            }
            for (key, value) in requested {
                resources[key] = value;
            }
            // RRS:279-288 (`slicestatus.go`): storage classes come from the
            // cluster's StorageClasses when storage is on (not modelled: none).
            status["storageClasses"] = json!([]);
            status["ingressClasses"] = classes(&options.ingress_classes, "ingressClassName");
            status["loadBalancerClasses"] =
                classes(&options.load_balancer_classes, "loadBalancerClassName");
            status["nodeLabels"] = json!(options.node_labels);
            // RRS:290, 400-419.
            slice::ensure_condition(
                slice,
                RESOURCES,
                ACCEPTED,
                "ResourceSliceResourcesAccepted",
                "ResourceSlice resources accepted",
            );
        }
        // RRS:291-296: a cordoned Tenant denies only slices not yet judged.
        "Cordoned" if slice::condition(slice, RESOURCES).is_none_or(str::is_empty) => {
            deny_resources(slice)
        }
        // RRS:297-298: a drained Tenant denies every slice, whatever its class.
        "Drained" => deny_resources(slice),
        _ => {}
    }
}

fn classes(classes: &[(String, bool)], name_key: &str) -> Value {
    Value::Array(
        classes
            .iter()
            .map(|(name, default)| json!({name_key: name, "default": default}))
            .collect(),
    )
}

/// Go's `pem.Decode` finding exactly one block with nothing after it
/// (`pkg/liqo-controller-manager/authentication/csr.go:158-162`); `spec.csr`
/// is a Go `[]byte`, so base64 in JSON. The whole check is [`check_csr`].
pub fn csr_is_one_pem_block(csr: &Value) -> bool {
    let Some(text) = csr
        .as_str()
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
    else {
        return false;
    };
    let Some(begin) = text.find("-----BEGIN ") else {
        return false;
    };
    let after_begin = &text[begin..];
    let Some(end) = after_begin.find("-----END ") else {
        return false;
    };
    let trailer = &after_begin[end + "-----END ".len()..];
    let Some(close) = trailer.find("-----") else {
        return false;
    };
    // pem.Decode takes the rest of the END line (blanks only) and its
    // newline; anything after that is `rst`, which must be empty.
    let rest = trailer[close + "-----".len()..].trim_start_matches([' ', '\t', '\r']);
    let rest = rest.strip_prefix('\n').unwrap_or(rest);
    rest.is_empty() && after_begin.matches("-----BEGIN ").count() == 1
}
