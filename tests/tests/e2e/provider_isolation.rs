//! Tenant isolation on a provider (issue 43) end to end: the real catalog
//! where alice buys for cluster c1 and bob for c2, the real
//! `peering-user-controller` running as its shipped ServiceAccount with
//! `payments` protected, and the Liqo model on three test API servers:
//! on each consumer its offloading (the NamespaceOffloading controller,
//! the pod webhook, the virtual kubelet's reflection) and an ordinary node
//! whose pods get addresses from the consumer's pod CIDR; on the provider
//! the ShadowPod controller, the scheduler, a node with a kubelet giving
//! pods addresses from the provider's pod CIDR, and Liqo's Configuration
//! controller, which remaps both consumers' networks (all three clusters
//! use kind's `10.244.0.0/16`, so each consumer is seen at a network of
//! its own).
//!
//! Both consumers offload a namespace called `app` with a pod in it. The
//! NetworkPolicies the controller renders are read back from the
//! provider's API server and judged by the test world's evaluator
//! (`netpol-eval`, which shares no code with the product), with each
//! consumer's home pod as the provider sees it (its address translated
//! into the consumer's remapped network, as Liqo's gateway rewrites it).
//! The expected matrix is written by hand. A service the provider sells
//! alice with `Local` hosting (its instance namespace offloaded to her
//! cluster by the provider's own Liqo) admits her and not bob; her pod on a
//! third provider, named by her virtual kubelet for a direct connection,
//! is reached at the address this provider sees it at, a stranger's there
//! is not, and bob naming alice's pod that way gets nothing. The isolation
//! probe runs too:
//! the test plays its clients' data plane with the same evaluator, so
//! buyers see `enforced`, then `failed` once a policy opens the probe's
//! namespace.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use e2e::catalog::provider;
use kube_test_server::KubeApiServer;
use netpol_eval::{allowed, Endpoint};
use serde_json::{json, Value};

use crate::isolation_support::{
    bound_pod, configure, direct_connections, expect, policy, seen_as, sell_locally, wait_for,
    world, Consumer, ProviderWorld, CONFIGURATIONS, EXTERNAL_CIDR, OFFLOADINGS, PODS, POD_CIDR,
    POLICIES,
};
use crate::liqo_support;
use crate::peering_users_support::{blocking, two_buyers, write_private, LIQO};

/// Wait until the provider's offer says `level` for isolation.
/// The probe's clients are run meanwhile ([`data_plane_step`]).
async fn offer_says(
    kube: &KubeApiServer,
    catalog: &e2e::catalog::Catalog,
    level: &str,
) -> Result<()> {
    let deadline = Instant::now() + e2e::EVENTUALLY;
    loop {
        data_plane_step(kube);
        let offer = blocking(|| e2e::buying::get(catalog, "/offer/shop", None));
        if offer.json["isolation"] == level {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("the offer never said isolation {level}: {}", offer.text);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The data plane the test world lacks, for the probe's clients only: a
/// client pod the kubelet started ends as its `wget` would, `Succeeded`
/// when the policies read back from the API server let it reach the
/// server it names (the evaluator's verdict), `Failed` otherwise, as the
/// kubelet reports an exited container.
fn data_plane_step(kube: &KubeApiServer) {
    let w = world(kube);
    for pod in &w.pods {
        let labels = &pod["metadata"]["labels"];
        if labels["broker.liqo-broker.io/isolation-probe"] != "client"
            || pod["status"]["phase"] != "Running"
        {
            continue;
        }
        let url = pod["spec"]["containers"][0]["command"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(Value::as_str)
            .unwrap_or_default();
        let target = url
            .trim_start_matches("http://")
            .split(':')
            .next()
            .unwrap_or_default();
        let server = w.pods.iter().find(|p| p["status"]["podIP"] == target);
        let (ns, name) = (
            pod["metadata"]["namespace"].as_str().unwrap_or_default(),
            pod["metadata"]["name"].as_str().unwrap_or_default(),
        );
        let connected = server.is_some_and(|s| {
            let to = Endpoint::pod(
                s["metadata"]["namespace"].as_str().unwrap_or_default(),
                s["metadata"]["name"].as_str().unwrap_or_default(),
            );
            allowed(&w, &Endpoint::pod(ns, name), &to, 8080, "TCP")
        });
        let (phase, code) = if connected {
            ("Succeeded", 0)
        } else {
            ("Failed", 1)
        };
        // Gone or changed since the read: the next step sees it again.
        let _ = kube.merge_patch(
            PODS,
            Some(ns),
            name,
            json!({"status": {"phase": phase, "containerStatuses": [{
                "name": "probe", "image": "busybox:1.36", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"terminated": {"exitCode": code}}}]}}),
            true,
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn strangers_on_one_provider_cannot_reach_each_other_or_the_provider() -> Result<()> {
    // The provider, with namespaces and pods of its own.
    let provider_world = ProviderWorld::start(POD_CIDR).await?;
    let kube = &provider_world.kube;
    for ns in ["payments", "web"] {
        liqo_support::namespace(kube, ns, json!({}));
    }
    bound_pod(
        kube,
        "payments",
        "ledger",
        "p-node",
        json!({"app": "ledger"}),
    );
    bound_pod(kube, "web", "site", "p-node", json!({"app": "site"}));

    let (_env, catalog, _alice, bob_token, _alices, bobs) = blocking(two_buyers);
    let dir = tempfile::tempdir()?;
    let credentials = dir.path().join("catalog-credentials.json");
    write_private(&credentials, &provider(1).to_string())?;
    let (_controller, _) = liqo_support::peering_user_controller(
        kube,
        &provider_world.kubeconfig,
        &provider_world.ca,
        &catalog.url(""),
        &credentials,
        LIQO,
    )
    .args(["--isolation-protected-namespaces", "payments"])
    .args([
        "--isolation-probe-interval",
        "1s",
        "--isolation-probe-timeout",
        "30s",
    ])
    .start_announced(1)?;

    // Alice's c1 and bob's c2 each offload `app` here, and peer with
    // their real (clashing) networks.
    let alice = Consumer::start("c1", kube).await?;
    let bob = Consumer::start("c2", kube).await?;
    let alice_seen = configure(kube, "c1", (POD_CIDR, EXTERNAL_CIDR), None).await?;
    let bob_seen = configure(kube, "c2", (POD_CIDR, EXTERNAL_CIDR), None).await?;
    assert_ne!(alice_seen, bob_seen, "Liqo's IPAM keeps them apart");
    for (ns, who) in [("app-c1", "alice"), ("app-c2", "bob")] {
        wait_for(kube, PODS, Some(ns), "web", "an address", |p| {
            p["status"]["podIP"].is_string()
        })
        .await
        .with_context(|| format!("{who}'s offloaded pod"))?;
    }

    let alice_web = Endpoint::pod("app-c1", "web");
    let bob_web = Endpoint::pod("app-c2", "web");
    let ledger = Endpoint::pod("payments", "ledger");
    let site = Endpoint::pod("web", "site");
    let alice_home = seen_as(alice.home, POD_CIDR, &alice_seen)?;
    let bob_home = seen_as(bob.home, POD_CIDR, &bob_seen)?;
    let internet = Endpoint::external("203.0.113.9".parse()?);
    expect(
        kube,
        &[
            ("alice at home → alice here", &alice_home, &alice_web, true),
            ("alice here → alice at home", &alice_web, &alice_home, true),
            ("bob here → alice here", &bob_web, &alice_web, false),
            ("alice here → bob here", &alice_web, &bob_web, false),
            ("bob at home → alice here", &bob_home, &alice_web, false),
            ("alice here → bob at home", &alice_web, &bob_home, false),
            ("bob at home → bob here", &bob_home, &bob_web, true),
            ("alice here → payments", &alice_web, &ledger, false),
            ("alice at home → payments", &alice_home, &ledger, false),
            ("bob at home → payments", &bob_home, &ledger, false),
            ("the provider's web → payments", &site, &ledger, true),
            ("the provider's web → alice here", &site, &alice_web, false),
            ("alice here → the provider's web", &alice_web, &site, false),
            ("alice here → the internet", &alice_web, &internet, true),
        ],
    )
    .await?;
    // Buyers see it on the provider's offer, as the probe found it.
    offer_says(kube, &catalog, "enforced").await?;
    // DNS, and only DNS, in kube-system.
    let w = world(kube);
    let dns = Endpoint::pod("kube-system", "coredns");
    assert!(allowed(&w, &alice_web, &dns, 53, "UDP"));
    assert!(!allowed(&w, &alice_web, &dns, 8080, "TCP"));

    // The provider sells alice a service hosted here: its instance
    // namespace admits her, here and at home, and nobody else.
    let _towards_alice = sell_locally(kube, &alice.kube, "c1", "svc-c-svc").await?;
    bound_pod(kube, "svc-c-svc", "db", "p-node", json!({"app": "db"}));
    wait_for(kube, PODS, Some("svc-c-svc"), "db", "an address", |p| {
        p["status"]["podIP"].is_string()
    })
    .await?;
    let db = Endpoint::pod("svc-c-svc", "db");
    expect(
        kube,
        &[
            ("alice here → her service", &alice_web, &db, true),
            ("alice at home → her service", &alice_home, &db, true),
            ("bob here → alice's service", &bob_web, &db, false),
            ("bob at home → alice's service", &bob_home, &db, false),
            ("the provider's web → alice's service", &site, &db, false),
        ],
    )
    .await?;

    // Alice also runs a pod on provider q3, which this provider is peered
    // with (Liqo's networking: its Configuration here, remapped). Her
    // virtual kubelet names that pod for a direct connection; bob's names
    // alice's pod at home, as if it were his on another provider.
    liqo_support::namespace(
        kube,
        "liqo-tenant-q3",
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": "q3"}),
    );
    let q3_seen = configure(kube, "q3", (POD_CIDR, EXTERNAL_CIDR), None).await?;
    let (hers, strangers) = ("10.244.0.7".parse()?, "10.244.0.8".parse()?);
    direct_connections(kube, "app-c1", "web-direct", &[("q3", hers)]);
    direct_connections(kube, "app-c2", "web-direct", &[("c1", alice.home)]);
    let (hers, strangers) = (
        seen_as(hers, POD_CIDR, &q3_seen)?,
        seen_as(strangers, POD_CIDR, &q3_seen)?,
    );
    expect(
        kube,
        &[
            ("alice here → her pod on q3", &alice_web, &hers, true),
            ("her pod on q3 → alice here", &hers, &alice_web, true),
            (
                "alice here → a stranger on q3",
                &alice_web,
                &strangers,
                false,
            ),
            (
                "a stranger on q3 → alice here",
                &strangers,
                &alice_web,
                false,
            ),
            ("bob here → alice's pod on q3", &bob_web, &hers, false),
            (
                "bob here → alice at home, named",
                &bob_web,
                &alice_home,
                false,
            ),
            ("alice at home → bob here", &alice_home, &bob_web, false),
        ],
    )
    .await?;

    // Alice peers again with other networks, which clash with nothing:
    // the policies follow, her old views admit nothing any more.
    let moved = configure(
        kube,
        "c1",
        ("10.245.0.0/16", "10.246.0.0/16"),
        Some(&alice_seen),
    )
    .await?;
    let alice_moved = seen_as("10.245.0.2".parse()?, "10.245.0.0/16", &moved)?;
    expect(
        kube,
        &[
            ("alice, moved, → alice here", &alice_moved, &alice_web, true),
            (
                "alice's old view → alice here",
                &alice_home,
                &alice_web,
                false,
            ),
            ("alice, moved, → payments", &alice_moved, &ledger, false),
            ("bob at home → bob here", &bob_home, &bob_web, true),
        ],
    )
    .await?;

    // The provider writes its own ingress policy for payments: from then
    // on they decide, and the controller's is removed, not widened beside
    // them.
    kube.apply(
        POLICIES,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"name": "only-web", "namespace": "payments"},
               "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                        "ingress": [{"from": [{"namespaceSelector": {"matchLabels":
                            {"kubernetes.io/metadata.name": "web"}}}]}]}}),
    );
    let deadline = Instant::now() + e2e::EVENTUALLY;
    while policy(kube, "payments", "liqo-broker-provider-protection").is_some() {
        if Instant::now() >= deadline {
            bail!("the protection policy stayed beside the provider's own");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    expect(
        kube,
        &[
            ("alice at home → payments", &alice_moved, &ledger, false),
            ("the provider's web → payments", &site, &ledger, true),
        ],
    )
    .await?;

    // Someone opens the probe's namespaces (the server's to every
    // ingress, the stranger's to every egress): the next probe finds a
    // stranger getting through, and buyers see `failed`.
    for (ns, direction) in [
        ("liqo-broker-probe-a", "ingress"),
        ("liqo-broker-probe-b", "egress"),
    ] {
        let kind = if direction == "ingress" {
            "Ingress"
        } else {
            "Egress"
        };
        kube.apply(
            POLICIES,
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                   "metadata": {"name": "open", "namespace": ns},
                   "spec": {"podSelector": {}, "policyTypes": [kind], direction: [{}]}}),
        );
    }
    offer_says(kube, &catalog, "failed").await?;

    // Bob's last contract ends: the controller takes his networking down
    // (his Configuration, as `liqoctl unpeer` does) and Liqo removes his
    // namespace once he stops offloading it. Nothing rendered for him is
    // left; alice keeps hers.
    blocking(|| {
        let r = e2e::buying::delete(&catalog, &format!("/purchases/{bobs}"), Some(&bob_token));
        assert_eq!(r.status, 200, "{}", r.text);
    });
    bob.kube
        .delete_object(OFFLOADINGS, Some("app"), "offloading")
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let deadline = Instant::now() + e2e::EVENTUALLY;
    while kube
        .get(CONFIGURATIONS, Some("liqo-tenant-c2"), "c2")
        .is_some()
        || policy(kube, "app-c2", "liqo-broker-tenant-isolation").is_some()
    {
        if Instant::now() >= deadline {
            bail!("bob's Configuration or isolation policy stayed after his last contract ended");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    expect(
        kube,
        &[
            ("alice, moved, → alice here", &alice_moved, &alice_web, true),
            ("bob's old view → alice here", &bob_home, &alice_web, false),
        ],
    )
    .await?;
    Ok(())
}
