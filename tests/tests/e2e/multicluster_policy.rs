//! Multi-cluster network policy (issue 43, part 2) end to end: alice's
//! cluster `c1` runs a frontend at home and a backend offloaded to the
//! provider, and writes one `MultiClusterNetworkPolicy` per side of the
//! thesis' frontend → backend requirement. The real `purchase-controller`
//! (as its shipped ServiceAccount) refines them into NetworkPolicies on
//! `c1` and, through the real catalog, into alice's policy on her
//! contract; the real `peering-user-controller` on the provider renders it
//! inside alice's namespace there and reports back. Bob (`c2`) buys from
//! the same provider.
//!
//! Both clusters' policies are read back from their API servers and judged
//! by the test world's evaluator (`netpol-eval`, sharing no code with the
//! product); every expected verdict is written by hand. The provider's
//! pods use a pod CIDR of their own (no remap on the consumers, as Liqo's
//! IPAM leaves a free prefix as it is); both consumers use kind's, so the
//! provider sees them remapped.

use anyhow::{Context, Result};
use e2e::catalog::provider;
use kube_test_server::KubeApiServer;
use netpol_eval::Endpoint;
use serde_json::{json, Value};

use crate::isolation_support::{
    configure, expect, ip_of, seen_as, wait_for, Consumer, Pods, ProviderWorld, EXTERNAL_CIDR,
    PODS, POD_CIDR, POLICIES, PROVIDER_ID,
};
use crate::liqo_support;
use crate::peering_users_support::{blocking, two_buyers, write_private, LIQO};
use crate::purchase_controller_support::{controller_as, PURCHASE_USER, SECRETS, TEAM};

const POLICY_KIND: (&str, &str) = ("broker.liqo-broker.io", "multiclusternetworkpolicies");
const SERVICES: (&str, &str) = ("", "services");
/// The provider's own pod CIDR.
const PROVIDER_POD_CIDR: &str = "10.250.0.0/16";

fn mcnp(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "MultiClusterNetworkPolicy",
           "metadata": {"name": name, "namespace": "app"}, "spec": spec})
}

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": "app"},
           "spec": {"selector": {"app": name}, "ports": [{"port": 8080, "targetPort": 8080}]}})
}

/// Wait until the MultiClusterNetworkPolicy `name` satisfies `check`.
async fn wait_policy(
    kube: &KubeApiServer,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Result<Value> {
    wait_for(kube, POLICY_KIND, Some("app"), name, what, check).await
}

fn ready(policy: &Value) -> (String, String) {
    let c = policy["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap_or_default();
    (
        c["status"].as_str().unwrap_or_default().to_string(),
        c["reason"].as_str().unwrap_or_default().to_string(),
    )
}

fn cluster_state(policy: &Value, cluster: &str) -> String {
    policy["status"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["cluster"] == cluster)
        .and_then(|c| c["state"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frontend_to_backend_policy_holds_on_the_consumer_and_the_provider() -> Result<()> {
    // The provider, with a pod CIDR of its own.
    let provider_world = ProviderWorld::start(PROVIDER_POD_CIDR).await?;
    let kube = &provider_world.kube;
    let (_env, catalog, alice_token, _bob_token, _alices, _bobs) = blocking(two_buyers);
    let dir = tempfile::tempdir()?;
    let credentials = dir.path().join("catalog-credentials.json");
    write_private(&credentials, &provider(1).to_string())?;
    let (_provider_controller, _) = liqo_support::peering_user_controller(
        kube,
        &provider_world.kubeconfig,
        &provider_world.ca,
        &catalog.url(""),
        &credentials,
        LIQO,
    )
    .start_announced(1)?;

    // Alice: the backend and a stray pod offloaded, the frontend and
    // another pod at home, all in `app`. Bob: his usual pair.
    let alice = Consumer::start_with(
        "c1",
        kube,
        Pods {
            remote: &[
                ("backend", json!({"app": "backend"})),
                ("stray", json!({"app": "stray"})),
            ],
            local: &[
                ("app", "frontend", json!({"app": "frontend"})),
                ("app", "other", json!({"app": "other"})),
            ],
        },
    )
    .await?;
    let bob = Consumer::start("c2", kube).await?;
    let alice_seen = configure(kube, "c1", (POD_CIDR, EXTERNAL_CIDR), None).await?;
    let bob_seen = configure(kube, "c2", (POD_CIDR, EXTERNAL_CIDR), None).await?;
    for (ns, name) in [
        ("app-c1", "backend"),
        ("app-c1", "stray"),
        ("app-c2", "web"),
    ] {
        wait_for(kube, PODS, Some(ns), name, "an address", |p| {
            p["status"]["podIP"].is_string()
        })
        .await?;
    }
    // Where alice's pods are, as each cluster sees them.
    let frontend_ip = ip_of(
        &alice
            .kube
            .get(PODS, Some("app"), "frontend")
            .context("frontend")?,
    )?;
    let other_ip = ip_of(
        &alice
            .kube
            .get(PODS, Some("app"), "other")
            .context("other")?,
    )?;
    let backend_at_home = wait_for(
        &alice.kube,
        PODS,
        Some("app"),
        "backend",
        "reflected",
        |p| p["status"]["podIP"].is_string(),
    )
    .await?;
    let backend_seen_at_home = Endpoint::external(ip_of(&backend_at_home)?);
    let frontend_here = seen_as(frontend_ip, POD_CIDR, &alice_seen)?;
    let other_here = seen_as(other_ip, POD_CIDR, &alice_seen)?;
    let backend = Endpoint::pod("app-c1", "backend");
    let stray = Endpoint::pod("app-c1", "stray");
    let bob_web = Endpoint::pod("app-c2", "web");
    let bob_home = seen_as(bob.home, POD_CIDR, &bob_seen)?;
    let frontend = Endpoint::pod("app", "frontend");
    let other = Endpoint::pod("app", "other");

    // Before any policy: the default isolation, alice's pods reach each
    // other across clusters.
    expect(
        kube,
        &[
            ("alice's other → backend", &other_here, &backend, true),
            ("stray → backend", &stray, &backend, true),
        ],
    )
    .await?;

    // The consumer's controller, with alice's catalog credentials.
    let consumer_dir = tempfile::tempdir()?;
    let consumer_kubeconfig = consumer_dir.path().join("kubeconfig");
    let deployed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/kubernetes/purchase-controller");
    alice.kube.register_crd_file(&deployed.join("crd.yaml"))?;
    // Liqo's chart installs its networking CRDs on every cluster.
    alice.kube.register_liqo_networking_crds()?;
    alice
        .kube
        .register_crd_file(&deployed.join("mcnp-crd.yaml"))?;
    e2e::rbac::load_shipped(&alice.kube)?;
    liqo_support::namespace(&alice.kube, TEAM, json!({}));
    liqo_support::namespace(&alice.kube, LIQO, json!({}));
    {
        use base64::Engine;
        alice.kube.apply(
            SECRETS,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "catalog-token", "namespace": TEAM},
                   "data": {"token": base64::engine::general_purpose::STANDARD.encode(&alice_token)}}),
        );
    }
    alice
        .kube
        .write_kubeconfig_as(&consumer_kubeconfig, PURCHASE_USER)?;
    let (_consumer_controller, _) = controller_as(&consumer_kubeconfig, "v1", "c1")
        .args(["--network-policy-catalog", &catalog.url("")])
        .args([
            "--network-policy-credentials",
            &format!("{TEAM}/catalog-token"),
        ])
        .args(["--network-policy-interval", "500ms"])
        .start_announced(1)?;

    // The thesis' requirement, one policy per side: the backend admits
    // only the frontend; the frontend reaches only the backend.
    alice.kube.apply(SERVICES, service("frontend"));
    alice.kube.apply(SERVICES, service("backend"));
    alice.kube.apply(
        POLICY_KIND,
        mcnp(
            "backend",
            json!({"endpointSelector": {"matchLabels": {"app": "backend"}},
                   "ingress": [{"from": [{"service": "frontend"}], "ports": [{"port": 8080}]}]}),
        ),
    );
    alice.kube.apply(
        POLICY_KIND,
        mcnp(
            "frontend",
            json!({"endpointSelector": {"matchLabels": {"app": "frontend"}},
                   "egress": [{"to": [{"service": "backend"}], "ports": [{"port": 8080}]}]}),
        ),
    );
    for name in ["backend", "frontend"] {
        let applied = wait_policy(&alice.kube, name, "applied on both clusters", |p| {
            ready(p).0 == "True" && cluster_state(p, PROVIDER_ID) == "Applied"
        })
        .await
        .with_context(|| format!("policy {name}"))?;
        assert_eq!(cluster_state(&applied, "c1"), "Applied", "{applied:#}");
    }

    // On the provider: only the frontend reaches the backend; bob never
    // does; the backend's egress is the default isolation's.
    expect(
        kube,
        &[
            ("frontend (home) → backend", &frontend_here, &backend, true),
            (
                "alice's other (home) → backend",
                &other_here,
                &backend,
                false,
            ),
            ("stray → backend", &stray, &backend, false),
            ("bob here → backend", &bob_web, &backend, false),
            ("bob at home → backend", &bob_home, &backend, false),
            ("backend → stray", &backend, &stray, true),
            ("backend → frontend (home)", &backend, &frontend_here, true),
            ("bob at home → stray", &bob_home, &stray, false),
            ("alice's other (home) → stray", &other_here, &stray, true),
        ],
    )
    .await?;
    // On the consumer: the frontend reaches only the backend (where alice's
    // cluster sees it); what the frontend admits is not restricted.
    expect(
        &alice.kube,
        &[
            ("frontend → backend", &frontend, &backend_seen_at_home, true),
            ("frontend → other", &frontend, &other, false),
            ("other → frontend", &other, &frontend, true),
            ("other → backend", &other, &backend_seen_at_home, true),
        ],
    )
    .await?;

    // A buyer's policy cannot widen its isolation: an ingress from bob's
    // range as the provider sees it is refused there, and nothing of it
    // is rendered.
    alice.kube.apply(
        POLICY_KIND,
        mcnp(
            "wider",
            json!({"endpointSelector": {"matchLabels": {"app": "stray"}},
                   "ingress": [{"from": [{"cidr": bob_seen}]}]}),
        ),
    );
    let refused = wait_policy(&alice.kube, "wider", "refused by the provider", |p| {
        cluster_state(p, PROVIDER_ID) == "Refused"
    })
    .await?;
    let message = serde_json::to_string(&refused["status"]["clusters"])?;
    assert!(message.contains(&bob_seen), "{refused:#}");
    expect(
        kube,
        &[
            ("bob at home → stray", &bob_home, &stray, false),
            ("alice's other (home) → stray", &other_here, &stray, true),
        ],
    )
    .await?;

    // Bad input on the consumer: an unknown cluster is refused with the
    // reason, nothing applied anywhere.
    alice.kube.apply(
        POLICY_KIND,
        mcnp(
            "unknown",
            json!({"endpointSelector": {"matchLabels": {"app": "other"}},
                   "ingress": [{"from": [{"service": "*", "cluster": "nowhere", "domain": "c1"}]}]}),
        ),
    );
    let unknown = wait_policy(&alice.kube, "unknown", "refused", |p| {
        ready(p) == ("False".to_string(), "UnknownCluster".to_string())
    })
    .await?;
    assert!(
        alice
            .kube
            .objects(POLICIES)
            .iter()
            .all(|p| !serde_json::to_string(p)
                .unwrap_or_default()
                .contains("unknown")),
        "{unknown:#}"
    );

    // A policy changes: the consumer's NetworkPolicy follows.
    alice.kube.apply(
        POLICY_KIND,
        mcnp(
            "backend",
            json!({"endpointSelector": {"matchLabels": {"app": "backend"}},
                   "ingress": [{"from": [{"service": "frontend"}],
                                "ports": [{"port": 8080}, {"port": 9090}]}]}),
        ),
    );
    wait_for(
        &alice.kube,
        POLICIES,
        Some("app"),
        "mcnp-backend",
        "two ports",
        |np| np["spec"]["ingress"][0]["ports"].as_array().map(Vec::len) == Some(2),
    )
    .await?;
    // A policy turns bad: refused, and what it had applied is removed.
    alice.kube.apply(
        POLICY_KIND,
        mcnp(
            "frontend",
            json!({"endpointSelector": {"matchLabels": {"app": "frontend"}},
                   "egress": [{"to": [{"service": "nothing-here"}]}]}),
        ),
    );
    wait_policy(&alice.kube, "frontend", "refused", |p| {
        ready(p) == ("False".to_string(), "UnknownService".to_string())
    })
    .await?;
    expect(
        &alice.kube,
        &[("frontend → other", &frontend, &other, true)],
    )
    .await?;

    // The policies go: both clusters are back to the default isolation.
    for name in ["backend", "frontend", "wider", "unknown"] {
        alice
            .kube
            .delete_object(POLICY_KIND, Some("app"), name)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    expect(
        kube,
        &[
            (
                "alice's other (home) → backend",
                &other_here,
                &backend,
                true,
            ),
            ("stray → backend", &stray, &backend, true),
            ("bob at home → backend", &bob_home, &backend, false),
        ],
    )
    .await?;
    expect(
        &alice.kube,
        &[("frontend → other", &frontend, &other, true)],
    )
    .await?;
    Ok(())
}
