//! Peering users' keys in Liqo's TLS compatibility mode (issue 40, audit
//! finding 7): `liqoctl generate peering-user` (v1.2.0,
//! `pkg/liqoctl/rest/peering-user/generate.go:81-105`,
//! `userfactory/cert.go:69-85`) makes an RSA-2048 key when the provider's
//! Liqo controller-manager runs with `--tls-compatibility-mode=true`, an
//! Ed25519 one otherwise, deciding from the controller-manager's
//! arguments. The real `peering-user-controller`, as the ServiceAccount
//! `deploy/` ships (its RBAC loaded: it may read that one Deployment),
//! does the same: with the flag on, the kubeconfig released to the
//! contract holds an RSA key and authenticates to the provider's API
//! server; when the provider turns the flag off, a new peering user with
//! an Ed25519 key replaces it.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use e2e::buying::{self, admin, consumer, get, publish};
use e2e::catalog::{provider, Backend, Env};
use e2e::contracts::{buy, register_per_contract};
use kube_test_server::KubeApiServer;
use serde_json::json;

use crate::liqo_support;

const NAMESPACES: (&str, &str) = ("", "namespaces");
const DEPLOYMENTS: (&str, &str) = ("apps", "deployments");
const LIQO: &str = "liqo";
/// The ServiceAccount of `deploy/kubernetes/peering-user-controller`.
const CONTROLLER_USER: &str = "system:serviceaccount:liqo:peering-user-controller";
/// `rsaEncryption` (1.2.840.113549.1.1.1) and `id-Ed25519` (1.3.101.112)
/// as DER object identifiers: a PKCS#8 key names its algorithm with one.
const RSA_OID: &[u8] = &[
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
];
const ED25519_OID: &[u8] = &[0x06, 0x03, 0x2b, 0x65, 0x70];

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

async fn settle<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> Result<T> {
    let deadline = Instant::now() + e2e::EVENTUALLY;
    loop {
        if let Some(v) = probe() {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            bail!("{what}: not within {:?}", e2e::EVENTUALLY);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Liqo's controller-manager Deployment as its chart makes it
/// (`deployments/liqo/templates/liqo-controller-manager-deployment.yaml`:
/// the container `controller-manager`, `--tls-compatibility-mode=<value>`,
/// line 55), here with `mode`.
fn controller_manager(kube: &KubeApiServer, mode: &str) {
    kube.apply(
        DEPLOYMENTS,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "liqo-controller-manager", "namespace": LIQO,
                            "labels": {"app.kubernetes.io/name": "controller-manager",
                                       "app.kubernetes.io/component": "controller-manager"}},
               "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "controller-manager"}},
                        "template": {"metadata": {"labels": {"app.kubernetes.io/name": "controller-manager"}},
                                     "spec": {"containers": [{
                                         "name": "controller-manager",
                                         "image": "ghcr.io/liqotech/liqo-controller-manager:v1.2.0",
                                         "args": ["--cluster-id=provider-1",
                                                  format!("--tls-compatibility-mode={mode}"),
                                                  "--default-limits-enforcement=None"]}]}}}}),
    );
}

/// The private key's DER in a kubeconfig's `client-key-data` (PEM,
/// base64).
fn client_key_der(kubeconfig: &str) -> Result<Vec<u8>> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let data = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("client-key-data:"))
        .context("client-key-data")?
        .trim()
        .trim_matches('"');
    let pem = String::from_utf8(b64.decode(data)?)?;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    anyhow::ensure!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "not PKCS#8");
    Ok(b64.decode(body)?)
}

fn names(der: &[u8], oid: &[u8]) -> bool {
    der.windows(oid.len()).any(|w| w == oid)
}

/// The kubeconfig released with contract `id` to `token`, once it is
/// not `other`.
fn released(
    catalog: &e2e::catalog::Catalog,
    token: &str,
    id: &str,
    other: Option<&str>,
) -> Option<String> {
    let r = blocking(|| get(catalog, &format!("/contracts/{id}"), Some(token)));
    if r.json["peeringState"]["state"] != "credentialsReady" {
        return None;
    }
    let kubeconfig = r.json["credentials"]["v1"]["kubeconfig"].as_str()?;
    (Some(kubeconfig) != other).then(|| kubeconfig.to_string())
}

/// Whether `kubeconfig` authenticates: listing Secrets in its tenant
/// namespace answers 200.
async fn authenticates(kubeconfig: &str) -> Result<bool> {
    let file = kube::config::Kubeconfig::from_yaml(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
    let client = kube::Client::try_from(config)?;
    let request =
        axum::http::Request::get("/api/v1/namespaces/liqo-tenant-c1/secrets").body(Vec::new())?;
    Ok(client.request_text(request).await.is_ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn rsa_keys_in_tls_compatibility_mode_detected_from_liqo() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    kube.write_kubeconfig_as(&kubeconfig, CONTROLLER_USER)?;
    e2e::rbac::load_shipped(&kube)?;
    kube.apply(
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LIQO}}),
    );
    liqo_support::install_peering_user_roles(&kube, LIQO);
    // The provider's Liqo runs in TLS compatibility mode.
    controller_manager(&kube, "true");
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, kube.ca_pem().context("TLS server")?)?;

    let (_env, catalog, alice, contract) = blocking(|| {
        let env = Env::new(Backend::Embedded);
        let catalog = buying::start(&env, &[]);
        let seller = publish(&catalog, 1, "shop");
        let r = register_per_contract(&catalog, &seller);
        assert_eq!(r.status, 200, "{}", r.text);
        let admin = admin(&catalog);
        let alice = consumer(&catalog, &admin, "alice");
        let r = buy(
            &catalog,
            &alice,
            "shop",
            "small",
            &json!({"consumerClusterID": "c1"}),
        );
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.json["id"].as_str().unwrap().to_string();
        (env, catalog, alice, id)
    });
    let credentials = dir.path().join("catalog-credentials.json");
    std::fs::write(&credentials, provider(1).to_string())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600))?;
    }
    let (mut controller, _) = liqo_support::peering_user_controller(
        &kube,
        &kubeconfig,
        &ca,
        &catalog.url(""),
        &credentials,
        LIQO,
    )
    // Liqo's TLS compatibility mode is Kubernetes-side state read at each
    // pass, which no contract change announces: what this test follows is
    // the periodic resync itself (`--poll-interval`, the fallback poll and
    // resync; shipped 5 min), the only way such a change reaches the
    // controller, so it must run within the test.
    .args(["--poll-interval", "200ms"])
    .start_announced(1)?;

    // An RSA key, as liqoctl makes it in this mode, that authenticates.
    let rsa = settle("the kubeconfig released", || {
        released(&catalog, &alice, &contract, None)
    })
    .await?;
    let der = client_key_der(&rsa)?;
    assert!(names(&der, RSA_OID), "not an RSA key");
    assert!(!names(&der, ED25519_OID));
    assert!(
        authenticates(&rsa).await?,
        "the RSA peering user is refused"
    );

    // The provider leaves TLS compatibility mode: a peering user with an
    // Ed25519 key replaces it.
    controller_manager(&kube, "false");
    let ed = settle("a new kubeconfig released", || {
        released(&catalog, &alice, &contract, Some(&rsa))
    })
    .await?;
    let der = client_key_der(&ed)?;
    assert!(names(&der, ED25519_OID), "not an Ed25519 key");
    assert!(
        authenticates(&ed).await?,
        "the Ed25519 peering user is refused"
    );

    controller.terminate(Duration::from_secs(5))?;
    Ok(())
}
