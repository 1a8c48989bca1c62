//! Liqo v1.2.0's authentication between two clusters of the test world,
//! each a TLS Kubernetes API test server running the model's controllers:
//! the test plays what `liqoctl peer`'s authentication step does
//! (`pkg/liqoctl/authenticate/handler.go:42-117`, `cluster.go`) as an
//! administrator of both clusters, and checks what Liqo's controllers make
//! of it — a kubeconfig that authenticates to the provider by certificate
//! as the consumer's control plane with `liqo-remote-controlplane`'s
//! permissions only — and what they refuse: a signature that is not the
//! consumer key's signature of the current nonce, and a CSR naming
//! someone else. Also the declarative form (`TolerateNoHandshake`, a
//! kubeconfig Secret made by hand), which leaves the ForeignCluster with
//! no `AuthIdentityControlPlaneStatus`.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use base64::Engine;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use kube_test_server::{GroupResource, KubeApiServer};
use liqo_model::{
    cluster_keys, consts, control_plane_csr, identity, identity_controller, tenant,
    tenant_namespace, Consumer, Provider, ProviderConfig,
};
use serde_json::{json, Value};

const CONSUMER: &str = "consumer-1";
const PROVIDER: &str = "provider-1";
const TENANTS: (&str, &str) = ("authentication.liqo.io", "tenants");
const IDENTITIES: (&str, &str) = ("authentication.liqo.io", "identities");
const SECRETS: (&str, &str) = ("", "secrets");
const EVENTS: (&str, &str) = ("", "events");
const CSRS: (&str, &str) = ("certificates.k8s.io", "certificatesigningrequests");
const FOREIGN_CLUSTERS: (&str, &str) = ("core.liqo.io", "foreignclusters");

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text.as_str().unwrap_or_default())
        .unwrap_or_default()
}

/// Poll until `found` yields, or fail after 10 s naming `what`.
async fn eventually<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(t) = found() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn get(
    kube: &KubeApiServer,
    resource: (&str, &str),
    ns: Option<&str>,
    name: &str,
) -> Option<Value> {
    kube.get(GroupResource::new(resource.0, resource.1), ns, name)
}

/// The provider and the consumer, each with Liqo's authentication module,
/// the consumer knowing its cluster ID (so its ForeignCluster controller
/// runs), and an administrator's client on each (what `liqoctl` uses).
struct World {
    provider: KubeApiServer,
    consumer: KubeApiServer,
    provider_admin: Client,
    consumer_admin: Client,
    _liqo: (Provider, Consumer),
}

async fn world() -> World {
    let provider = KubeApiServer::start_tls().await.unwrap();
    let consumer = KubeApiServer::start_tls().await.unwrap();
    let provider_liqo = Provider::start(&provider, ProviderConfig::default())
        .await
        .unwrap()
        .with_authentication(&provider)
        .await
        .unwrap();
    let consumer_liqo = Consumer::start_as(&consumer, CONSUMER)
        .await
        .unwrap()
        .with_authentication(&consumer)
        .await
        .unwrap();
    let admin = |kube| identity::client_in_groups(kube, "liqoctl-user", &["system:masters"]);
    World {
        provider_admin: admin(&provider).await.unwrap(),
        consumer_admin: admin(&consumer).await.unwrap(),
        provider,
        consumer,
        _liqo: (provider_liqo, consumer_liqo),
    }
}

/// `cluster.go:75-91` on both sides: the tenant namespaces, consumer's
/// then provider's.
async fn tenant_namespaces(w: &World) -> (String, String) {
    let consumer_ns = tenant_namespace::create(&w.consumer_admin, PROVIDER)
        .await
        .unwrap();
    let provider_ns = tenant_namespace::create(&w.provider_admin, CONSUMER)
        .await
        .unwrap();
    (consumer_ns, provider_ns)
}

/// `cluster.go:93-121`: the nonce Secret on the provider
/// (`authentication/utils/nonce.go:31-42`), waited for until Liqo fills it.
async fn nonce(w: &World, provider_ns: &str) -> Vec<u8> {
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(w.provider_admin.clone(), provider_ns, &consts::secrets());
    if secrets.get_opt("liqo-nonce").await.unwrap().is_none() {
        let secret: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "liqo-nonce", "namespace": provider_ns,
                         "labels": {"liqo.io/nonce": "true", "liqo.io/remote-cluster-id": CONSUMER}},
        }))
        .unwrap();
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
    eventually("the provider's nonce", || {
        let secret = get(&w.provider, SECRETS, Some(provider_ns), "liqo-nonce")?;
        Some(unb64(&secret["data"]["nonce"])).filter(|n| !n.is_empty())
    })
    .await
}

/// `cluster.go:123-152`: the nonce copied into the signed-nonce Secret on
/// the consumer (`authentication/utils/nonce.go:44-80`, `forge/signednonce.go`),
/// waited for until Liqo signs it.
async fn signature(w: &World, consumer_ns: &str, nonce: &[u8]) -> Vec<u8> {
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(w.consumer_admin.clone(), consumer_ns, &consts::secrets());
    let secret: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "liqo-signed-nonce", "namespace": consumer_ns,
                     "labels": {"liqo.io/signed-nonce": "true", "liqo.io/remote-cluster-id": PROVIDER}},
        "data": {"nonce": b64(nonce)},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    eventually("the consumer's signature", || {
        let secret = get(&w.consumer, SECRETS, Some(consumer_ns), "liqo-signed-nonce")?;
        Some(unb64(&secret["data"]["signedNonce"])).filter(|s| !s.is_empty())
    })
    .await
}

/// `cluster.go:154-196`: the Tenant the consumer's keys and `signature`
/// make (`authentication/utils/tenant.go:34-51`), applied on the provider.
async fn apply_tenant(w: &World, provider_ns: &str, tenant: Value) {
    let tenants: Api<DynamicObject> =
        Api::namespaced_with(w.provider_admin.clone(), provider_ns, &consts::tenants());
    let tenant: DynamicObject = serde_json::from_value(tenant).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match tenants.create(&PostParams::default(), &tenant).await {
            Ok(_) => return,
            // TV:138-142: Liqo's webhook reads the tenant namespace from its
            // informer's cache, which may not have seen a namespace made a
            // moment ago (tenant_namespaces): as any client, try again.
            Err(kube::Error::Api(e))
                if e.code == 500
                    && e.message.contains("failed getting the tenant namespace")
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("creating the Tenant: {e}"),
        }
    }
}

async fn consumer_keys(w: &World) -> cluster_keys::Keys {
    cluster_keys::get(w.consumer_admin.clone(), cluster_keys::LIQO_NAMESPACE)
        .await
        .unwrap()
}

/// The provider's Events on the Tenant with `reason`, once there is one.
async fn tenant_event(w: &World, provider_ns: &str, reason: &str) -> Value {
    eventually(&format!("a {reason} event"), || {
        w.provider
            .objects(GroupResource::new(EVENTS.0, EVENTS.1))
            .into_iter()
            .find(|e| {
                e["metadata"]["namespace"] == provider_ns
                    && e["involvedObject"]["kind"] == "Tenant"
                    && e["involvedObject"]["name"] == CONSUMER
                    && e["reason"] == reason
            })
    })
    .await
}

/// The Tenant refused: an Event with `reason`, no AuthParams, and nothing
/// sent to the signer. The Event.
async fn refused(w: &World, provider_ns: &str, reason: &str) -> Value {
    let event = tenant_event(w, provider_ns, reason).await;
    assert_eq!(event["type"], "Warning");
    let tenant = get(&w.provider, TENANTS, Some(provider_ns), CONSUMER).unwrap();
    assert!(tenant["status"]["authParams"].is_null(), "{tenant:#}");
    assert!(w
        .provider
        .objects(GroupResource::new(CSRS.0, CSRS.1))
        .is_empty());
    event
}

/// What `liqoctl peer`'s authentication does, to the end: the Identity on
/// the consumer with its kubeconfig Secret. The Identity as Liqo left it.
async fn authenticate(w: &World) -> Value {
    let (consumer_ns, provider_ns) = tenant_namespaces(w).await;
    let nonce = nonce(w, &provider_ns).await;
    let signature = signature(w, &consumer_ns, &nonce).await;
    let keys = consumer_keys(w).await;
    apply_tenant(
        w,
        &provider_ns,
        tenant::forge(CONSUMER, &keys, &signature, &provider_ns).unwrap(),
    )
    .await;
    // `waiter.ForTenantStatus`: the AuthParams are written.
    let tenant = eventually("the Tenant's AuthParams", || {
        get(&w.provider, TENANTS, Some(&provider_ns), CONSUMER)
            .filter(|t| !t["status"]["authParams"].is_null())
    })
    .await;
    // `cluster.go:198-233`.
    let identity = identity_controller::forge(&tenant, PROVIDER, &consumer_ns).unwrap();
    let identities: Api<DynamicObject> = Api::namespaced_with(
        w.consumer_admin.clone(),
        &consumer_ns,
        &consts::identities(),
    );
    identities
        .create(
            &PostParams::default(),
            &serde_json::from_value(identity).unwrap(),
        )
        .await
        .unwrap();
    let name = format!("controlplane-{PROVIDER}");
    eventually("the Identity's kubeconfig Secret", || {
        get(&w.consumer, IDENTITIES, Some(&consumer_ns), &name)
            .filter(|i| !i["status"]["kubeconfigSecretRef"]["name"].is_null())
    })
    .await
}

async fn client_of(kubeconfig: &[u8]) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(std::str::from_utf8(kubeconfig).unwrap()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn forbidden_as(result: Result<impl std::fmt::Debug, kube::Error>, user: &str) {
    match result {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{e:?}");
            assert!(
                e.message.contains(&format!("User \"{user}\"")),
                "{}",
                e.message
            );
        }
        other => panic!("expected a 403 for {user}, got {other:?}"),
    }
}

#[tokio::test]
async fn the_identity_kubeconfig_authenticates_as_the_consumer_control_plane_by_certificate() {
    let w = world().await;
    let identity = authenticate(&w).await;
    let consumer_ns = identity["metadata"]["namespace"].as_str().unwrap();
    let provider_ns = identity["spec"]["namespace"].as_str().unwrap();
    assert_eq!(provider_ns, format!("liqo-tenant-{CONSUMER}"));

    // The Secret Liqo's Identity controller made, labelled and annotated
    // as the declarative form has it made by hand.
    let secret_name = identity["status"]["kubeconfigSecretRef"]["name"]
        .as_str()
        .unwrap();
    assert_eq!(secret_name, format!("kubeconfig-controlplane-{PROVIDER}"));
    let secret = get(&w.consumer, SECRETS, Some(consumer_ns), secret_name).unwrap();
    let labels = &secret["metadata"]["labels"];
    assert_eq!(labels["liqo.io/identity-type"], "ControlPlane");
    assert_eq!(labels["liqo.io/remote-cluster-id"], PROVIDER);
    assert_eq!(
        secret["metadata"]["annotations"]["liqo.io/remote-tenant-namespace"],
        provider_ns
    );

    // The certificate the provider's signer issued names the consumer's
    // control plane: CN the cluster ID, O `liqo.io`.
    let tenant = get(&w.provider, TENANTS, Some(provider_ns), CONSUMER).unwrap();
    assert_eq!(tenant["status"]["tenantNamespace"], provider_ns);
    assert_eq!(
        tenant["status"]["authParams"]["apiServer"],
        w.provider.url()
    );
    let crt = unb64(&tenant["status"]["authParams"]["signedCRT"]);
    let (_, pem) = x509_parser::pem::parse_x509_pem(&crt).unwrap();
    let cert = pem.parse_x509().unwrap();
    let subject = cert.subject();
    assert_eq!(
        subject.iter_common_name().next().unwrap().as_str().unwrap(),
        CONSUMER
    );
    assert_eq!(
        subject
            .iter_organization()
            .next()
            .unwrap()
            .as_str()
            .unwrap(),
        control_plane_csr::ORGANIZATION
    );
    // Signed through the CSR API, approved by Liqo's controller manager.
    let csrs = w.provider.objects(GroupResource::new(CSRS.0, CSRS.1));
    assert_eq!(csrs.len(), 1, "{csrs:#?}");
    assert_eq!(csrs[0]["spec"]["username"], liqo_model::CONTROLLER_MANAGER);
    assert_eq!(
        csrs[0]["status"]["conditions"][0]["reason"],
        "IdentityManagerApproval"
    );

    // The kubeconfig reaches the provider over TLS with that certificate:
    // it may do what `liqo-remote-controlplane` allows in its tenant
    // namespace, and nothing else.
    let kubeconfig = unb64(&secret["data"]["kubeconfig"]);
    let client = client_of(&kubeconfig).await;
    let slices: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), provider_ns, &consts::resource_slices());
    slices.list(&ListParams::default()).await.unwrap();
    let elsewhere: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &consts::resource_slices());
    forbidden_as(elsewhere.list(&ListParams::default()).await, CONSUMER);
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), provider_ns, &consts::secrets());
    forbidden_as(secrets.list(&ListParams::default()).await, CONSUMER);
    let binding = get(
        &w.provider,
        ("rbac.authorization.k8s.io", "rolebindings"),
        Some(provider_ns),
        "liqo-binding-liqo-remote-controlplane",
    )
    .unwrap();
    assert_eq!(binding["subjects"][0]["name"], CONSUMER);
    assert_eq!(binding["roleRef"]["name"], tenant::CONTROL_PLANE_ROLE);

    // The consumer's ForeignCluster sees the handshake form: the
    // control-plane Identity's condition, Ready.
    let fc = eventually("the provider's ForeignCluster, authenticated", || {
        get(&w.consumer, FOREIGN_CLUSTERS, None, PROVIDER).filter(|fc| {
            fc["status"]["modules"]["authentication"]["conditions"]
                .as_array()
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c["type"] == "AuthIdentityControlPlaneStatus" && c["status"] == "Ready"
                    })
                })
        })
    })
    .await;
    assert_eq!(fc["status"]["role"], "Provider");
    assert_eq!(fc["status"]["apiServerUrl"], w.provider.url());
}

#[tokio::test]
async fn a_signature_by_another_key_is_refused_and_nothing_is_signed() {
    let w = world().await;
    let (consumer_ns, provider_ns) = tenant_namespaces(&w).await;
    let nonce = nonce(&w, &provider_ns).await;
    // The Tenant carries the consumer's public key and CSR, but a
    // signature of the nonce by some other key.
    let keys = consumer_keys(&w).await;
    let intruder = cluster_keys::generate().unwrap();
    let forged = cluster_keys::sign_nonce(&intruder.private_pem, &nonce).unwrap();
    apply_tenant(
        &w,
        &provider_ns,
        tenant::forge(CONSUMER, &keys, &forged, &provider_ns).unwrap(),
    )
    .await;
    refused(&w, &provider_ns, "SignatureVerificationFailed").await;
    // The consumer's own signature of the same nonce passes.
    let signed = signature(&w, &consumer_ns, &nonce).await;
    assert!(cluster_keys::verify_nonce(
        &cluster_keys::parse_tenant_public_key(keys.public_pem.as_bytes()).unwrap(),
        &nonce,
        &signed
    )
    .unwrap());
}

#[tokio::test]
async fn a_signature_of_a_nonce_no_longer_handed_out_is_refused() {
    let w = world().await;
    let (consumer_ns, provider_ns) = tenant_namespaces(&w).await;
    let first = nonce(&w, &provider_ns).await;
    let old_signature = signature(&w, &consumer_ns, &first).await;
    // The provider hands out a new nonce (its Secret made again, as after
    // an unpeering): the consumer's signature of the old one replayed in a
    // Tenant is not accepted.
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(w.provider_admin.clone(), &provider_ns, &consts::secrets());
    secrets
        .delete("liqo-nonce", &Default::default())
        .await
        .unwrap();
    eventually("the old nonce gone", || {
        get(&w.provider, SECRETS, Some(&provider_ns), "liqo-nonce")
            .is_none()
            .then_some(())
    })
    .await;
    let second = nonce(&w, &provider_ns).await;
    assert_ne!(first, second, "a new nonce is a new random value");
    let keys = consumer_keys(&w).await;
    apply_tenant(
        &w,
        &provider_ns,
        tenant::forge(CONSUMER, &keys, &old_signature, &provider_ns).unwrap(),
    )
    .await;
    refused(&w, &provider_ns, "SignatureVerificationFailed").await;
}

#[tokio::test]
async fn a_csr_for_another_common_name_is_refused() {
    let w = world().await;
    let (consumer_ns, provider_ns) = tenant_namespaces(&w).await;
    let nonce = nonce(&w, &provider_ns).await;
    let signature = signature(&w, &consumer_ns, &nonce).await;
    let keys = consumer_keys(&w).await;
    // The consumer's key, its valid signature, but a request for another
    // cluster's control plane.
    let mut tenant = tenant::forge(CONSUMER, &keys, &signature, &provider_ns).unwrap();
    let csr = control_plane_csr::generate(&keys.private_pem, "someone-else").unwrap();
    tenant["spec"]["csr"] = json!(b64(csr.as_bytes()));
    apply_tenant(&w, &provider_ns, tenant).await;
    let event = refused(&w, &provider_ns, "InvalidCSR").await;
    assert_eq!(event["message"], "invalid common name");
}

#[tokio::test]
async fn the_declarative_form_skips_the_nonce_and_leaves_no_identity_condition() {
    let w = world().await;
    let (consumer_ns, provider_ns) = tenant_namespaces(&w).await;
    // On the provider: a Tenant tolerating no handshake — no nonce, no
    // key, no CSR — gets its tenant namespace and no certificate.
    apply_tenant(
        &w,
        &provider_ns,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
               "metadata": {"name": CONSUMER, "namespace": provider_ns,
                            "labels": {"liqo.io/remote-cluster-id": CONSUMER}},
               "spec": {"clusterID": CONSUMER, "authzPolicy": "TolerateNoHandshake"}}),
    )
    .await;
    let tenant = eventually("the tolerated Tenant's namespace", || {
        get(&w.provider, TENANTS, Some(&provider_ns), CONSUMER)
            .filter(|t| t["status"]["tenantNamespace"] == provider_ns.as_str())
    })
    .await;
    assert!(tenant["status"]["authParams"].is_null(), "{tenant:#}");
    assert!(get(&w.provider, SECRETS, Some(&provider_ns), "liqo-nonce").is_none());
    assert!(get(
        &w.provider,
        ("rbac.authorization.k8s.io", "rolebindings"),
        Some(&provider_ns),
        "liqo-binding-liqo-remote-controlplane"
    )
    .is_none());

    // On the consumer: a kubeconfig Secret made by hand, then the
    // ForeignCluster: authentication on, the peer a provider, and no
    // control-plane Identity condition.
    let kubeconfig = identity_controller::kubeconfig(
        "admin",
        &json!({"clusterID": PROVIDER, "authParams": {"apiServer": w.provider.url()}}),
        "",
        Some(&provider_ns),
    );
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(w.consumer_admin.clone(), &consumer_ns, &consts::secrets());
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "provider-kubeconfig", "namespace": consumer_ns,
                     "labels": {"liqo.io/identity-type": "ControlPlane",
                                "liqo.io/remote-cluster-id": PROVIDER},
                     "annotations": {"liqo.io/remote-tenant-namespace": provider_ns}},
        "data": {"kubeconfig": b64(kubeconfig.as_bytes())}});
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(secret).unwrap(),
        )
        .await
        .unwrap();
    let fcs: Api<DynamicObject> =
        Api::all_with(w.consumer_admin.clone(), &consts::foreign_clusters());
    let fc = json!({"apiVersion": "core.liqo.io/v1beta1", "kind": "ForeignCluster",
        "metadata": {"name": PROVIDER, "labels": {"liqo.io/remote-cluster-id": PROVIDER}},
        "spec": {"clusterID": PROVIDER}});
    fcs.create(&PostParams::default(), &serde_json::from_value(fc).unwrap())
        .await
        .unwrap();
    let fc = eventually("the ForeignCluster's status", || {
        get(&w.consumer, FOREIGN_CLUSTERS, None, PROVIDER).filter(|fc| !fc["status"].is_null())
    })
    .await;
    let authentication = &fc["status"]["modules"]["authentication"];
    assert_eq!(authentication["enabled"], true, "{fc:#}");
    assert!(authentication["conditions"].is_null(), "{fc:#}");
    assert_eq!(fc["status"]["role"], "Provider");
    assert_eq!(fc["status"]["apiServerUrl"], w.provider.url());
}
