//! A consumer cluster ID belongs to one buyer (issue 41 F2; probes P-01,
//! P-02 and P-18 of the hostile review of 2026-12-01), end to end: the
//! real catalog (embedded store), the real `peering-user-controller` as
//! its ServiceAccount under the shipped RBAC, the TLS test API server.
//!
//! Bob bought for cluster c2 and holds its peering user. Alice naming c2
//! is refused (409, without saying who holds it) and gets no kubeconfig
//! (P-01); a cluster ID whose peering user's names could not exist is
//! refused (400, P-18). Then the cluster really changes hands: Bob's
//! contract ends, Alice buys for c2 and is served — by a new peering user,
//! not Bob's: Bob's certificate's CN is bound by no RoleBinding any more
//! and his kubeconfig is refused in `liqo-tenant-c2`, while Alice's works
//! there (P-02).

use anyhow::{Context, Result};
use e2e::buying::delete;
use e2e::catalog::provider;
use e2e::contracts::buy;
use kube_test_server::KubeApiServer;
use serde_json::json;

use crate::liqo_support;
use crate::peering_users_support::{
    blocking, released, settle, two_buyers, write_private, CONTROLLER_USER, LIQO,
};

const NAMESPACES: (&str, &str) = ("", "namespaces");
const ROLE_BINDINGS: (&str, &str) = ("rbac.authorization.k8s.io", "rolebindings");

/// The users c2's RoleBindings bind (the CN of its current certificate).
fn c2_subjects(kube: &KubeApiServer) -> Vec<String> {
    let mut users: Vec<String> = kube
        .objects(ROLE_BINDINGS)
        .iter()
        .filter(|b| b["metadata"]["labels"]["liqo.io/peering-user-name"] == "liqo-peer-user-c2")
        .flat_map(|b| {
            b["subjects"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|s| s["name"].as_str().map(str::to_string))
        })
        .collect();
    users.sort();
    users.dedup();
    users
}

/// Whether `kubeconfig` may list Secrets in `liqo-tenant-c2` (its
/// RoleBinding there grants it).
async fn reads_c2(kubeconfig: &str) -> Result<bool> {
    let file = kube::config::Kubeconfig::from_yaml(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
    let client = kube::Client::try_from(config)?;
    let request =
        axum::http::Request::get("/api/v1/namespaces/liqo-tenant-c2/secrets").body(Vec::new())?;
    match client.request_text(request).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 401 => Ok(false),
        Err(e) => Err(e).context("listing Secrets in liqo-tenant-c2"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_id_serves_one_buyer_and_changes_hands_once_its_contracts_end() -> Result<()> {
    let kube = KubeApiServer::start_tls().await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    kube.write_kubeconfig_as(&kubeconfig, CONTROLLER_USER)?;
    e2e::rbac::load_shipped(&kube)?;
    kube.register_liqo_networking_crds()?;
    kube.apply(
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LIQO}}),
    );
    liqo_support::install_peering_user_roles(&kube, LIQO);
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, kube.ca_pem().context("TLS server")?)?;
    let (_env, catalog, alice, bob, _alices, bobs) = blocking(two_buyers);
    let credentials = dir.path().join("catalog-credentials.json");
    write_private(&credentials, &provider(1).to_string())?;
    let (_controller, _) = liqo_support::peering_user_controller(
        &kube,
        &kubeconfig,
        &ca,
        &catalog.url(""),
        &credentials,
        LIQO,
    )
    .start_announced(1)?;

    let bobs_kubeconfig = settle("bob's kubeconfig released", || {
        released(&catalog, &bob, &bobs)
    })
    .await?;
    let bobs_cn = settle("c2's RoleBindings", || {
        let s = c2_subjects(&kube);
        (s.len() == 1).then(|| s[0].clone())
    })
    .await?;
    assert!(reads_c2(&bobs_kubeconfig).await?, "bob's kubeconfig works");

    // P-01: Alice naming Bob's cluster ID is refused; nothing is bought,
    // so there is no contract to release a kubeconfig with.
    let c2 = json!({"consumerClusterID": "c2"});
    let r = blocking(|| buy(&catalog, &alice, "shop", "small", &c2));
    assert_eq!(r.status, 409, "{}", r.text);
    let message = r.json["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("c2") && message.contains("held by another consumer"),
        "{message}"
    );
    assert!(
        !message.contains("bob"),
        "the refusal names the holder: {message}"
    );
    // P-18: `liqo-peer-user-<id>` would be 64 characters, too long a label value.
    let long = json!({"consumerClusterID": "x".repeat(49)});
    let r = blocking(|| buy(&catalog, &alice, "shop", "small", &long));
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.json["field"], "consumerClusterID", "{}", r.text);

    // The cluster changes hands: Bob's contract ends, Alice buys for c2.
    let r = blocking(|| delete(&catalog, &format!("/purchases/{bobs}"), Some(&bob)));
    assert_eq!(r.status, 200, "{}", r.text);
    let r = blocking(|| buy(&catalog, &alice, "shop", "small", &c2));
    assert_eq!(r.status, 201, "{}", r.text);
    let alices_c2 = r.json["id"].as_str().context("contract id")?.to_string();
    let alices_kubeconfig = settle("alice's kubeconfig for c2 released", || {
        released(&catalog, &alice, &alices_c2)
    })
    .await?;
    // P-02: a new peering user, Bob's certificate bound nowhere.
    assert_ne!(
        alices_kubeconfig, bobs_kubeconfig,
        "alice was given bob's kubeconfig"
    );
    let alices_cn = settle("c2's RoleBindings moved to alice's user", || {
        let s = c2_subjects(&kube);
        (s.len() == 1 && s[0] != bobs_cn).then(|| s[0].clone())
    })
    .await?;
    assert!(alices_cn.starts_with("liqo-peer-user-c2-"), "{alices_cn}");
    assert!(
        reads_c2(&alices_kubeconfig).await?,
        "alice's kubeconfig works"
    );
    assert!(
        !reads_c2(&bobs_kubeconfig).await?,
        "bob's kubeconfig still works in liqo-tenant-c2"
    );
    Ok(())
}
