//! Promises of the peering-user controller no other test held it to
//! (issue 40; review `test-audit-2026-12-01.md`, finding 3 and "promises
//! with no test"), in the world of [`crate::peering_users`]: the real
//! catalog (consumers c1 and c2 bought from a provider selling a peering
//! user per contract), the real `peering-user-controller` as its
//! ServiceAccount under the shipped RBAC, and the TLS test API server that
//! signs approved `kube-apiserver-client` CSRs.
//!
//! - **A lookalike CSR is never approved.** The controller's CSRs are
//!   `liqo-peer-user-<consumer>` with its labels; anyone who may create
//!   CSRs can make one with that name and those labels. The controller
//!   approves only a request made with the key it stored for that consumer
//!   (`peering-users/src/identity.rs` `check_csr`, called before any
//!   approval in `peering-users/src/cluster.rs`); deleting that call made
//!   no other test fail. Once both consumers' peering users are issued,
//!   the controller stops; c1's CSR is replaced by a copy of it whose
//!   request is made with another key (same name, labels, signer, usages
//!   and lifetime, a subject like Liqo's: `liqo-peer-user-c1-<hex>`,
//!   `O=liqo.io`); the controller starts again. It never approves that
//!   request, and replaces the CSR with its own (issue 41, P-17: before,
//!   it warned on every pass for ever): the lookalike is deleted, a CSR
//!   with the controller's own request takes its place and is approved —
//!   the one approval it makes.
//! - **Nothing is removed while the catalog cannot be read**
//!   (`peering-users/README.md`): with both peering users issued, the
//!   catalog is killed; pass after pass fails to read it (`catalog`
//!   failures on `/metrics`) and every object the controller made — CSRs,
//!   keys, RoleBindings — stays, the same objects (uids).
//! - **A certificate is renewed once 80 % of its life has passed, not
//!   before** (`peering-users/README.md`, `--certificate-lifetime`): run
//!   with the shortest lifetime the API server takes (10m), the controller
//!   asks for it (`expirationSeconds`); the signer's clock lags by
//!   [`SIGNER_LAG`], so the certificate it issues is dated as a lagging
//!   kube-controller-manager dates it, its 80 % point seconds away instead
//!   of minutes. The next CSR for the consumer is made at that point or
//!   later (its `creationTimestamp`), never before; the consumer's
//!   released kubeconfig then carries the new certificate.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use base64::Engine;
use e2e::catalog::{provider, Catalog, Env};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::liqo_support;
use crate::peering_users_support::{
    blocking, released, settle, two_buyers, write_private, CONTROLLER_USER, LIQO,
};

const NAMESPACES: (&str, &str) = ("", "namespaces");
const CSRS: (&str, &str) = ("certificates.k8s.io", "certificatesigningrequests");
const SECRETS: (&str, &str) = ("", "secrets");
const ROLE_BINDINGS: (&str, &str) = ("rbac.authorization.k8s.io", "rolebindings");
/// The CSR the controller makes for consumer c1 (Liqo's
/// `GetUserNameFromClusterID`).
const C1_CSR: &str = "liqo-peer-user-c1";
/// Failures to see before looking: the controller passes over every
/// consumer each `--poll-interval` (its resync), counting a catalog failure
/// while the catalog does not answer, so several failures are several
/// passes that each left everything alone.
const REFUSALS: f64 = 3.0;
/// The shortest `--certificate-lifetime` the controller takes (the API
/// server's minimum `expirationSeconds`).
const LIFETIME: Duration = Duration::from_secs(600);
/// How far the signer's clock lags: with the real signer's dating (5
/// minutes back, `policies.go`) the first certificate's 80 % point comes
/// (600 + 300) × 0.8 − 300 − 405 = 15 s after it is issued.
const SIGNER_LAG: Duration = Duration::from_secs(405);
/// `peering-users/README.md`: renewed after 80 % of the certificate's life.
const RENEW_SHARE: f64 = 0.8;

/// The controller's count of failed steps of `kind` (`csr`, `catalog`…).
fn failures(port: u16, kind: &str) -> f64 {
    let text = blocking(|| {
        e2e::http::blocking_client(Duration::from_secs(5))
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .and_then(|r| r.text())
            .unwrap_or_default()
    });
    text.lines()
        .filter(|l| l.starts_with("peering_user_controller_errors_total{"))
        .filter(|l| l.contains(&format!("=\"{kind}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A PKCS#10 request (PEM) for `cn` in group `liqo.io`, made with a key
/// the controller never saw.
fn foreign_request(cn: &str) -> Result<String> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "liqo.io");
    Ok(params.serialize_request(&key)?.pem()?)
}

/// `original` (the controller's CSR) as someone else would copy it: its
/// name, labels, signer, usages and lifetime, with `request`.
fn lookalike(original: &Value, request: &str) -> Value {
    let spec = &original["spec"];
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
           "metadata": {"name": C1_CSR, "labels": original["metadata"]["labels"].clone()},
           "spec": {"signerName": spec["signerName"].clone(), "usages": spec["usages"].clone(),
                    "expirationSeconds": spec["expirationSeconds"].clone(),
                    "request": base64::engine::general_purpose::STANDARD.encode(request)}})
}

/// The world: the test API server with Liqo's peering-user roles and the
/// shipped RBAC, the catalog where alice bought for c1 and bob for c2, and
/// what starts the controller as its ServiceAccount.
struct World {
    kube: KubeApiServer,
    dir: tempfile::TempDir,
    _env: Env,
    catalog: Catalog,
    alice: String,
    bob: String,
    alices: String,
    bobs: String,
}

impl World {
    async fn open() -> Result<Self> {
        let kube = KubeApiServer::start_tls().await?;
        let dir = tempfile::tempdir()?;
        kube.write_kubeconfig_as(&dir.path().join("kubeconfig"), CONTROLLER_USER)?;
        e2e::rbac::load_shipped(&kube)?;
        kube.register_liqo_networking_crds()?;
        kube.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LIQO}}),
        );
        liqo_support::install_peering_user_roles(&kube, LIQO);
        std::fs::write(
            dir.path().join("ca.crt"),
            kube.ca_pem().context("TLS server")?,
        )?;
        let (env, catalog, alice, bob, alices, bobs) = blocking(two_buyers);
        let credentials = dir.path().join("catalog-credentials.json");
        write_private(&credentials, &provider(1).to_string())?;
        Ok(World {
            kube,
            dir,
            _env: env,
            catalog,
            alice,
            bob,
            alices,
            bobs,
        })
    }

    /// The controller as deployed, and its metrics port.
    fn controller(&self) -> Result<(e2e::Child, u16)> {
        self.controller_with(&[])
    }

    /// [`World::controller`] with `extra` flags.
    fn controller_with(&self, extra: &[&str]) -> Result<(e2e::Child, u16)> {
        let d = self.dir.path();
        let (child, bound) = liqo_support::peering_user_controller(
            &self.kube,
            &d.join("kubeconfig"),
            &d.join("ca.crt"),
            &self.catalog.url(""),
            &d.join("catalog-credentials.json"),
            LIQO,
        )
        .args(extra)
        .start_announced(1)?;
        Ok((child, bound.port(None)))
    }

    /// [`World::controller`] asking `lifetime` for each certificate.
    fn controller_lasting(&self, lifetime: Duration) -> Result<(e2e::Child, u16)> {
        let d = self.dir.path();
        // liqo_support's spawn with another lifetime (clap takes a flag
        // once).
        let (child, bound) = e2e::Spawn::new("peering-user-controller")
            .args(["--catalog-url", &self.catalog.url("")])
            .arg("--catalog-credentials-file")
            .arg(d.join("catalog-credentials.json"))
            .args(["--api-server-address", &self.kube.url()])
            .arg("--api-server-ca-file")
            .arg(d.join("ca.crt"))
            .arg("--kubeconfig")
            .arg(d.join("kubeconfig"))
            .arg("--certificate-lifetime")
            .arg(format!("{}s", lifetime.as_secs()))
            // The renewal at 80 % of a certificate's life is Kubernetes-side
            // time no contract change announces: the periodic resync must
            // see it within the test.
            .args(["--poll-interval", "200ms", "--retry", "100ms"])
            .args(["--http-listen", "127.0.0.1:0"])
            .args(["--lease-duration", "3s", "--lease-renew-deadline", "2s"])
            .args(["--lease-retry", "250ms"])
            .env("POD_NAMESPACE", LIQO)
            .env("RUST_LOG", "info,peering_users=debug")
            .start_announced(1)?;
        Ok((child, bound.port(None)))
    }

    /// Both consumers' kubeconfigs released: their peering users issued.
    async fn both_released(&self) -> Result<()> {
        settle("both kubeconfigs released", || {
            (released(&self.catalog, &self.alice, &self.alices).is_some()
                && released(&self.catalog, &self.bob, &self.bobs).is_some())
            .then_some(())
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lookalike_csr_made_with_another_key_is_never_approved() -> Result<()> {
    let world = World::open().await?;
    let kube = &world.kube;
    // Both peering users issued by the controller, from its own requests.
    let (mut first, _) = world.controller()?;
    world.both_released().await?;
    first.kill();
    let original = kube
        .get(CSRS, None, C1_CSR)
        .context("the controller's CSR for c1")?;

    // Someone replaces it with a lookalike made with another key.
    let request = foreign_request("liqo-peer-user-c1-0123456789abcdef0123456789abcdef")?;
    let wanted = lookalike(&original, &request);
    kube.delete(CSRS, C1_CSR);
    let made = kube
        .create(CSRS, wanted)
        .map_err(|e| anyhow::anyhow!("creating the lookalike CSR: {e:?}"))?;
    let uid = made["metadata"]["uid"].clone();

    // The controller, back, never approves it and puts its own request
    // in its place (P-17).
    let since = kube.audit().len();
    let (_second, _port) = world.controller()?;
    let approved = |csr: &Value| {
        csr["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Approved"))
    };
    // Signed too: the signer acts after the approval, on its own watch.
    let signed = |csr: &Value| {
        csr["status"]["certificate"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    };
    let now = settle("the lookalike replaced by an approved, signed CSR", || {
        let now = kube.get(CSRS, None, C1_CSR)?;
        (now["metadata"]["uid"] != uid && approved(&now) && signed(&now)).then_some(now)
    })
    .await?;
    assert_ne!(
        now["spec"]["request"], made["spec"]["request"],
        "the lookalike's request came back: {now:#}"
    );
    assert!(
        now["status"]["certificate"]
            .as_str()
            .is_some_and(|c| !c.is_empty()),
        "the controller's own request was not signed: {now:#}"
    );
    let approvals = kube.audit()[since..]
        .iter()
        .filter(|r| r.code < 300)
        .filter_map(|r| r.resource.as_ref())
        .filter(|a| {
            a.subresource.as_deref() == Some("approval") && a.name.as_deref() == Some(C1_CSR)
        })
        .count();
    assert_eq!(
        approvals, 1,
        "the lookalike was approved before it was replaced"
    );
    Ok(())
}

/// Every object the controller made (its label), by resource and key, with
/// its uid.
fn made(kube: &KubeApiServer) -> Vec<(String, String)> {
    let ours = |o: &Value| {
        o["metadata"]["labels"]["app.kubernetes.io/managed-by"]
            == "liqo-broker-peering-user-controller"
    };
    let mut all = Vec::new();
    for (resource, kind) in [
        (CSRS, "csr"),
        (SECRETS, "secret"),
        (ROLE_BINDINGS, "rolebinding"),
    ] {
        for o in kube.objects(resource).into_iter().filter(ours) {
            let key = format!(
                "{kind} {}/{}",
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            );
            all.push((
                key,
                o["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ));
        }
    }
    all.sort();
    all
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_removed_while_the_catalog_cannot_be_read() -> Result<()> {
    let mut world = World::open().await?;
    // Passes while nothing changes are the periodic resync: short here, so
    // that several run during the outage.
    let (_controller, port) = world.controller_with(&["--poll-interval", "200ms"])?;
    world.both_released().await?;
    let before = made(&world.kube);
    for consumer in ["c1", "c2"] {
        ensure!(
            before
                .iter()
                .any(|(k, _)| k == &format!("csr /liqo-peer-user-{consumer}")),
            "{consumer}'s peering user not made: {before:#?}"
        );
    }
    ensure!(
        before.iter().any(|(k, _)| k.starts_with("rolebinding ")),
        "no RoleBinding made: {before:#?}"
    );

    world.catalog.child.kill();
    let failed_before = failures(port, "catalog");
    settle("passes failing to read the catalog", || {
        (failures(port, "catalog") >= failed_before + REFUSALS).then_some(())
    })
    .await?;
    assert_eq!(
        made(&world.kube),
        before,
        "removed while the catalog could not be read"
    );
    Ok(())
}

/// A CSR's issued certificate (PEM), if any.
fn issued(csr: &Value) -> Option<Vec<u8>> {
    csr["status"]["certificate"]
        .as_str()
        .filter(|c| !c.is_empty())
        .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
}

/// Whether the kubeconfig text carries the certificate `pem` (as
/// `client-certificate-data`, base64).
fn carries(kubeconfig: &str, pem: &[u8]) -> bool {
    kubeconfig.contains(&base64::engine::general_purpose::STANDARD.encode(pem))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_is_renewed_at_80_percent_of_its_life_and_not_before() -> Result<()> {
    let world = World::open().await?;
    let kube = &world.kube;
    kube.set_signer_clock_behind(SIGNER_LAG);
    let (_controller, _) = world.controller_lasting(LIFETIME)?;
    let first = settle("c1's first certificate", || {
        let csr = kube.get(CSRS, None, C1_CSR)?;
        issued(&csr).map(|pem| (csr, pem))
    })
    .await?;
    // Only the first certificate comes from the lagging clock: the
    // renewed one lives its 10 minutes, so nothing renews it again here.
    kube.set_signer_clock_behind(Duration::ZERO);
    let (csr, pem) = first;
    assert_eq!(
        csr["spec"]["expirationSeconds"],
        json!(LIFETIME.as_secs()),
        "not the configured lifetime: {csr:#}"
    );
    let (not_before, not_after) = kube_test_server::csr_signer::validity(&pem)
        .map_err(|e| anyhow::anyhow!("the issued certificate: {e}"))?;
    let due = not_before + ((not_after - not_before) as f64 * RENEW_SHARE) as i64;
    // The consumer holds the first certificate meanwhile.
    settle("alice's kubeconfig with the first certificate", || {
        released(&world.catalog, &world.alice, &world.alices).filter(|k| carries(k, &pem))
    })
    .await?;

    let uid = csr["metadata"]["uid"].clone();
    let renewed = settle("c1's certificate renewed (a new CSR)", || {
        kube.get(CSRS, None, C1_CSR)
            .filter(|now| now["metadata"]["uid"] != uid)
    })
    .await?;
    let created = renewed["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp())
        .with_context(|| format!("no creationTimestamp: {renewed:#}"))?;
    assert!(
        created >= due,
        "renewed at {created}, {} s before 80 % of the certificate's life ({not_before}..{not_after}, due {due})",
        due - created
    );
    assert_eq!(
        renewed["spec"]["expirationSeconds"],
        json!(LIFETIME.as_secs()),
        "{renewed:#}"
    );
    // The consumer gets the new certificate.
    let pem = settle("c1's renewed certificate issued", || {
        kube.get(CSRS, None, C1_CSR).as_ref().and_then(issued)
    })
    .await?;
    settle("alice's kubeconfig with the renewed certificate", || {
        released(&world.catalog, &world.alice, &world.alices).filter(|k| carries(k, &pem))
    })
    .await?;
    Ok(())
}
