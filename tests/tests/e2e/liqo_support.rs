//! Liqo v1.2 between a consumer and a provider test API server, as the
//! end-to-end tests run it: the peering `liqoctl peer` leaves behind
//! ([`peer`]), then the model of Liqo's controllers (`liqo-model`) on both
//! clusters and the crdReplicator between them ([`Liqo::start`]), each a
//! task on watches under its own identity. The tests only write and read
//! objects; what `liqoctl peer` leaves behind is written here, named as
//! such.

use anyhow::{Context, Result};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

/// Who the provider's peering-user controller is to its API server.
pub const PEERING_USER_CONTROLLER: &str = "system:serviceaccount:liqo:peering-user-controller";
pub const NAMESPACES: (&str, &str) = ("", "namespaces");
pub const SECRETS: (&str, &str) = ("", "secrets");
pub const SLICES: (&str, &str) = ("authentication.liqo.io", "resourceslices");
pub const TENANTS: (&str, &str) = ("authentication.liqo.io", "tenants");
pub const IDENTITIES: (&str, &str) = ("authentication.liqo.io", "identities");
pub const FOREIGN_CLUSTERS: (&str, &str) = ("core.liqo.io", "foreignclusters");
pub const QUOTAS: (&str, &str) = ("offloading.liqo.io", "quotas");
pub const SHADOW_PODS: (&str, &str) = ("offloading.liqo.io", "shadowpods");
pub const NODES: (&str, &str) = ("", "nodes");

/// `liqo-tenant-<peer>`: where a cluster keeps what concerns that peer.
pub fn tenant_namespace(peer: &str) -> String {
    format!("liqo-tenant-{peer}")
}

/// Create a namespace with `labels` (a fixture, as an operator would).
pub fn namespace(kube: &KubeApiServer, name: &str, labels: Value) {
    kube.apply(
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}),
    );
}

/// What `liqoctl peer` (authentication, networking disabled) leaves on
/// both clusters once done (`pkg/liqoctl/peer/handler.go`,
/// `pkg/liqoctl/authenticate`): the tenant namespaces, the provider's
/// `Active` Tenant for the consumer, and the consumer's control-plane
/// Identity for the provider with the kubeconfig Secret Liqo made from it.
/// Liqo's ForeignCluster controller makes the ForeignCluster from these.
pub fn peer(
    consumer: &KubeApiServer,
    consumer_id: &str,
    provider: &KubeApiServer,
    provider_id: &str,
) {
    tenant(consumer, consumer_id, provider, provider_id, "KeysExchange");
    // `liqoctl peer` sends the consumer's public key in the Tenant
    // (`pkg/liqoctl/authenticate`, `authentication/utils/tenant.go:29-51`),
    // which the provider checks each slice's CSR against
    // (`authentication/csr.go:133-156`).
    let keys = consumer_keys(consumer);
    provider
        .merge_patch(
            TENANTS,
            Some(&tenant_namespace(consumer_id)),
            consumer_id,
            json!({"spec": {"publicKey": keys["data"]["publicKey"]}}),
            false,
        )
        .expect("the Tenant's public key");
    identity(
        consumer,
        provider_id,
        "control-plane",
        "ControlPlane",
        json!({}),
    );
}

/// The consumer's `authentication-keys` in `liqo`, made as Liqo's
/// controller manager makes them at install (`authentication/keys.go:135-180`)
/// when not there yet; the Secret.
fn consumer_keys(consumer: &KubeApiServer) -> Value {
    use base64::Engine;
    if let Some(keys) = consumer.get(SECRETS, Some("liqo"), "authentication-keys") {
        return keys;
    }
    if consumer.get(NAMESPACES, None, "liqo").is_none() {
        namespace(consumer, "liqo", json!({}));
    }
    let keys = liqo_model::cluster_keys::generate().expect("the cluster's keys");
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    consumer.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "authentication-keys", "namespace": "liqo"},
               "data": {"privateKey": b64(&keys.private_pem), "publicKey": b64(&keys.public_pem)}}),
    );
    consumer
        .get(SECRETS, Some("liqo"), "authentication-keys")
        .expect("the keys just made")
}

/// The tenant namespaces on both clusters and the provider's `Active`
/// Tenant for the consumer with `authz_policy`.
fn tenant(
    consumer: &KubeApiServer,
    consumer_id: &str,
    provider: &KubeApiServer,
    provider_id: &str,
    authz_policy: &str,
) {
    let on_provider = tenant_namespace(consumer_id);
    let tenant_labels =
        |peer: &str| json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": peer});
    namespace(
        consumer,
        &tenant_namespace(provider_id),
        tenant_labels(provider_id),
    );
    namespace(provider, &on_provider, tenant_labels(consumer_id));
    provider.apply(
        TENANTS,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
               "metadata": {"name": consumer_id, "namespace": on_provider,
                            "labels": {"liqo.io/remote-cluster-id": consumer_id}},
               "spec": {"clusterID": consumer_id, "authzPolicy": authz_policy, "tenantCondition": "Active"}}),
    );
}

/// What Liqo's declarative peering leaves
/// (`docs/advanced/peering/peering-via-cr.md`, "Declarative configuration
/// of clusters authentication"): the tenant namespaces, the provider's
/// `Active` Tenant for the consumer with `authzPolicy:
/// TolerateNoHandshake` (no nonce, no keys), and on the consumer no
/// Identity but a kubeconfig Secret labelled `liqo.io/identity-type:
/// ControlPlane` and `liqo.io/remote-cluster-id`, annotated
/// `liqo.io/remote-tenant-namespace`. (The RoleBinding to
/// `liqo-remote-controlplane` the page adds is for the consumer's user;
/// the model's replicator runs under its own grant.) The ForeignCluster
/// Liqo makes when the declared networking objects appear
/// (`foreigncluster_controller.go:175-178, 203-225`; the model runs no
/// networking) is written here, after the Secret.
pub fn peer_declaratively(
    consumer: &KubeApiServer,
    consumer_id: &str,
    provider: &KubeApiServer,
    provider_id: &str,
) {
    use base64::Engine;
    tenant(
        consumer,
        consumer_id,
        provider,
        provider_id,
        "TolerateNoHandshake",
    );
    let (on_consumer, on_provider) = (tenant_namespace(provider_id), tenant_namespace(consumer_id));
    let kubeconfig = e2e::contracts::kubeconfig("https://provider.example:6443");
    consumer.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "cplane-secret", "namespace": on_consumer,
                            "labels": {"liqo.io/identity-type": "ControlPlane",
                                       "liqo.io/remote-cluster-id": provider_id},
                            "annotations": {"liqo.io/remote-tenant-namespace": on_provider}},
               "data": {"kubeconfig": base64::engine::general_purpose::STANDARD.encode(kubeconfig)}}),
    );
    consumer.apply(
        FOREIGN_CLUSTERS,
        json!({"apiVersion": "core.liqo.io/v1beta1", "kind": "ForeignCluster",
               "metadata": {"name": provider_id, "labels": {"liqo.io/remote-cluster-id": provider_id}},
               "spec": {"clusterID": provider_id}}),
    );
}

/// An Identity in the consumer's tenant namespace for `provider_id` with
/// its kubeconfig Secret, as Liqo's Identity controller leaves it
/// (`status.kubeconfigSecretRef`).
fn identity(kube: &KubeApiServer, provider_id: &str, name: &str, kind: &str, labels: Value) {
    let namespace = tenant_namespace(provider_id);
    let secret = format!("{name}-kubeconfig");
    kube.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": secret, "namespace": namespace}, "data": {"kubeconfig": "e30="}}),
    );
    let mut all_labels = json!({"liqo.io/remote-cluster-id": provider_id});
    for (k, v) in labels.as_object().into_iter().flatten() {
        all_labels[k] = v.clone();
    }
    kube.apply(
        IDENTITIES,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Identity",
               "metadata": {"name": name, "namespace": namespace, "labels": all_labels},
               "spec": {"clusterID": provider_id, "type": kind,
                        "authParams": {"apiServer": "https://provider.example:6443", "ca": "Y2E=", "signedCRT": "Y3J0"}},
               "status": {"kubeconfigSecretRef": {"name": secret}}}),
    );
}

/// The `spec.csr` Liqo's local slice controller writes for `slice` on
/// `consumer` (cluster `consumer_id`): a request signed with the cluster's
/// key, which Ed25519 makes the same every time
/// ([`liqo_model::local_resource_slice::csr`]).
pub fn slice_csr(consumer: &KubeApiServer, slice: &str, consumer_id: &str) -> String {
    use base64::Engine;
    let keys = consumer
        .get(SECRETS, Some("liqo"), "authentication-keys")
        .expect("the consumer's authentication-keys");
    let private = base64::engine::general_purpose::STANDARD
        .decode(keys["data"]["privateKey"].as_str().unwrap_or_default())
        .expect("privateKey is base64");
    let private = String::from_utf8(private).expect("a PEM key");
    liqo_model::local_resource_slice::csr(&private, slice, consumer_id).expect("the CSR")
}

/// Liqo's offloading from the consumer to the provider: the model's
/// NamespaceOffloading controller (and webhooks) on the consumer and the
/// NamespaceMap for the provider, enforced there, so a
/// NamespaceOffloading's status is Liqo's; stops when dropped. No virtual
/// kubelet: these tests run no pod.
pub struct Offloading {
    _cluster: liqo_model::offloading::Cluster,
    _peering: liqo_model::offloading::Peering,
}

impl Offloading {
    pub async fn start(
        consumer: &KubeApiServer,
        consumer_id: &str,
        provider: &KubeApiServer,
        provider_id: &str,
    ) -> Result<Offloading> {
        use liqo_model::offloading::{Cluster, Peering};
        Ok(Offloading {
            _cluster: Cluster::start(consumer, consumer_id, &[]).await?,
            _peering: Peering::start_namespaces(consumer, consumer_id, provider, provider_id)
                .await?,
        })
    }
}

/// Liqo's controllers running on both clusters and between them; they
/// stop when dropped.
pub struct Liqo {
    _provider: liqo_model::Provider,
    _consumer: liqo_model::Consumer,
    _replicator: liqo_model::Replicator,
}

impl Liqo {
    /// On `provider`, the remote slice controller, the quota creator and
    /// the ShadowPod webhook (the chart's defaults: enforcement on, limits
    /// `None`); on `consumer` (cluster `consumer_id`), the local slice
    /// controller, the ForeignCluster controller, the identity creator and
    /// Identity controller, the virtual-node creator and the virtual
    /// kubelet; between them, the crdReplicator. The provider must serve
    /// HTTPS ([`KubeApiServer::start_tls`]): its CSR signer signs the
    /// slices' certificates.
    pub async fn start(
        consumer: &KubeApiServer,
        consumer_id: &str,
        provider: &KubeApiServer,
        provider_id: &str,
    ) -> Result<Liqo> {
        Ok(Liqo {
            _provider: liqo_model::Provider::start(provider, liqo_model::ProviderConfig::default())
                .await?,
            // The identity creator and Identity controller make each
            // accepted slice's Identity from the provider's signature.
            _consumer: liqo_model::Consumer::start_as(consumer, consumer_id)
                .await?
                .with_identity_creator(consumer)
                .await?,
            _replicator: liqo_model::Replicator::start(
                consumer,
                consumer_id,
                provider,
                provider_id,
            )
            .await?,
        })
    }
}

/// The provider's real `peering-user-controller` at `kube`, under its own
/// ServiceAccount, with the peering-user roles Liqo's chart installs in
/// `liqo`: its kubeconfig and CA written under `dir`, where the provider's
/// catalog credentials are (`provider.json`), following the catalog at
/// `catalog` and telling consumers `api_server` ([`peering_user_controller`]'s
/// flags); not yet started (add flags, say).
pub fn provider_peering_user_controller(
    kube: &KubeApiServer,
    dir: &std::path::Path,
    catalog: &str,
    api_server: &str,
) -> Result<e2e::Spawn> {
    install_peering_user_roles(kube, "liqo");
    let kubeconfig = dir.join("peering-user-controller.kubeconfig");
    kube.write_kubeconfig_as(&kubeconfig, PEERING_USER_CONTROLLER)?;
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, kube.ca_pem().context("a TLS server")?)?;
    let credentials = dir.join("provider.json");
    Ok(peering_user_controller_at(
        api_server,
        &kubeconfig,
        &ca,
        catalog,
        &credentials,
        "liqo",
    ))
}

/// [`provider_peering_user_controller`] telling consumers `kube`'s own
/// address, started.
pub fn start_peering_user_controller(
    kube: &KubeApiServer,
    dir: &std::path::Path,
    catalog: &str,
) -> Result<e2e::Child> {
    let spawn = provider_peering_user_controller(kube, dir, catalog, &kube.url())?;
    Ok(spawn.start_announced(1)?.0)
}

/// The two roles Liqo v1.2.0's chart installs for peering users, with
/// their rules as the chart ships them
/// (`deployments/liqo/files/liqo-peering-user-liqo-ns-Role.yaml`,
/// `deployments/liqo/files/liqo-peering-user-tenant-ns-ClusterRole.yaml`,
/// label `app.kubernetes.io/component=peering-user`; the Role in
/// `liqo_namespace`). The tenant-namespace role lets the peering user
/// create and update the consumer's Tenant, as `liqoctl peer` does with it.
pub fn install_peering_user_roles(kube: &KubeApiServer, liqo_namespace: &str) {
    let label = json!({"app.kubernetes.io/component": "peering-user"});
    kube.apply(
        ("rbac.authorization.k8s.io", "roles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "liqo-peering-user-liqo-ns", "namespace": liqo_namespace, "labels": label},
               "rules": [
                   {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["ipam.liqo.io"], "resources": ["ips"], "verbs": ["get"]},
                   {"apiGroups": ["ipam.liqo.io"], "resources": ["networks"], "verbs": ["get", "list"]},
                   {"apiGroups": ["networking.liqo.io"],
                    "resources": ["wggatewayclienttemplates", "wggatewayservertemplates"],
                    "verbs": ["get", "list"]}]}),
    );
    kube.apply(
        ("rbac.authorization.k8s.io", "clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "liqo-peering-user-tenant-ns", "labels": label},
               "rules": [
                   {"apiGroups": [""], "resources": ["namespaces", "services"], "verbs": ["get"]},
                   {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete", "get", "list"]},
                   {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},
                   {"apiGroups": ["authentication.liqo.io"], "resources": ["tenants"],
                    "verbs": ["create", "delete", "get", "list", "update"]},
                   {"apiGroups": ["ipam.liqo.io"], "resources": ["ips"], "verbs": ["create", "delete", "get", "update"]},
                   {"apiGroups": ["networking.liqo.io"],
                    "resources": ["configurations", "gatewayclients", "gatewayservers", "publickeies"],
                    "verbs": ["create", "delete", "get", "list", "update"]},
                   {"apiGroups": ["networking.liqo.io"], "resources": ["connections"], "verbs": ["get", "list"]},
                   {"apiGroups": ["networking.liqo.io"],
                    "resources": ["gatewayclients/status", "gatewayservers/status"], "verbs": ["get"]}]}),
    );
}

/// The provider's real `peering-user-controller` for `kube` (its API
/// server address and CA), as the user `kubeconfig` names, the catalog at
/// `catalog` with the provider's `credentials` file, leader election on,
/// in Liqo's namespace `liqo_namespace`; not yet started (add flags, say).
/// Contracts come on the catalog's change stream: `--poll-interval` (the
/// fallback poll and resync) is the shipped default, 5 minutes; so is
/// `--retry` (1 s): a certificate awaited comes on the CSRs' watch.
pub fn peering_user_controller(
    kube: &KubeApiServer,
    kubeconfig: &std::path::Path,
    ca: &std::path::Path,
    catalog: &str,
    credentials: &std::path::Path,
    liqo_namespace: &str,
) -> e2e::Spawn {
    peering_user_controller_at(
        &kube.url(),
        kubeconfig,
        ca,
        catalog,
        credentials,
        liqo_namespace,
    )
}

/// [`peering_user_controller`] telling consumers `api_server` (its
/// `--api-server-address`: clap takes the flag once).
pub fn peering_user_controller_at(
    api_server: &str,
    kubeconfig: &std::path::Path,
    ca: &std::path::Path,
    catalog: &str,
    credentials: &std::path::Path,
    liqo_namespace: &str,
) -> e2e::Spawn {
    e2e::Spawn::new("peering-user-controller")
        .args(["--catalog-url", catalog])
        .arg("--catalog-credentials-file")
        .arg(credentials)
        .args(["--api-server-address", api_server])
        .arg("--api-server-ca-file")
        .arg(ca)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--certificate-lifetime", "1h"])
        .args(["--http-listen", "127.0.0.1:0"])
        .args(["--lease-duration", "3s", "--lease-renew-deadline", "2s"])
        .args(["--lease-retry", "250ms"])
        .env("POD_NAMESPACE", liqo_namespace)
        .env("RUST_LOG", "info,peering_users=debug")
}
