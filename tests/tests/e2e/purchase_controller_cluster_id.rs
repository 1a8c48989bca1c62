//! Both clusters' IDs read from Liqo's `clusterid-configmap` before the
//! controller authenticates, as `liqoctl` reads them (v1.2.0
//! `pkg/liqoctl/authenticate/handler.go:46-56`), with networking off
//! (issue 40, audit finding 6): a wrong `--cluster-id` (and the contract
//! bought with it) or a provider whose Liqo is another cluster than the
//! contract's is refused — the `Authenticated` condition's reason
//! `ClusterIDMismatch` and a Warning Event, both naming the two values —
//! and nothing naming the wrong ID (nonce, Tenant and its CSR) reaches
//! the provider. Once the flag is right, the same Purchase reaches Ready.
//!
//! Both clusters are HTTPS test API servers running the model of Liqo's
//! authentication controllers (the consumer's Liqo installed as cluster
//! [`CONSUMER_ID`]); the provider sells with a peering user per contract
//! made by its real controller.

use e2e::{Child, Spawn};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::liqo_support::{self, TENANTS};
use crate::purchase_controller_support::*;

const EVENTS: (&str, &str) = ("events.k8s.io", "events");
/// The ID the controller is wrongly told this cluster has.
const WRONG_ID: &str = "not-this-cluster";

/// The world: the catalog with consumer alice, her cluster (Liqo running
/// as [`CONSUMER_ID`]) and the provider's, whose Liqo calls itself
/// `provider_says` in its `clusterid-configmap`; the provider sells with a
/// peering user per contract. The tasks stop when dropped.
struct World {
    market: Market,
    alice: String,
    consumer: Consumer,
    provider: Provider,
    _peering_users: Child,
    _liqo: (
        liqo_model::Provider,
        liqo_model::Consumer,
        liqo_model::Replicator,
    ),
    /// Last: the servers' tasks run on it until everything else is gone.
    _rt: tokio::runtime::Runtime,
}

impl World {
    fn open(provider_says: &str) -> Self {
        let rt = runtime();
        let tls = || rt.block_on(KubeApiServer::start_tls()).unwrap();
        let market = Market::open(&[]);
        let alice = market.consumer("alice");
        let consumer = Consumer::start_on(tls(), &alice).unwrap();
        let provider = Provider::start_on(tls(), &market.url()).unwrap();
        cluster_id_configmap(&provider.kube, provider_says);
        for kube in [&consumer.kube, &provider.kube] {
            kube.register_liqo_networking_crds().unwrap();
        }
        let r = e2e::contracts::register_v1(
            &market.catalog,
            &market.provider_token,
            Some(json!({})),
            Some(CLASS),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        let peering_users = liqo_support::start_peering_user_controller(
            &provider.kube,
            provider._dir.path(),
            &market.url(),
        )
        .unwrap();
        let liqo = rt
            .block_on(async {
                let (p, c) = (&provider.kube, &consumer.kube);
                let provider_liqo =
                    liqo_model::Provider::start(p, liqo_model::ProviderConfig::default())
                        .await?
                        .with_authentication(p)
                        .await?;
                let consumer_liqo = liqo_model::Consumer::start_as(c, CONSUMER_ID)
                    .await?
                    .with_authentication(c)
                    .await?;
                let replicator =
                    liqo_model::Replicator::start(c, CONSUMER_ID, p, PROVIDER_ID).await?;
                anyhow::Ok((provider_liqo, consumer_liqo, replicator))
            })
            .unwrap();
        World {
            market,
            alice,
            consumer,
            provider,
            _peering_users: peering_users,
            _liqo: liqo,
            _rt: rt,
        }
    }

    /// `purchase-controller --auto-peer` told this cluster is `cluster_id`.
    fn controller(&self, cluster_id: &str) -> Child {
        Spawn::new("purchase-controller")
            .args(["--liqo-api", "v1", "--cluster-id", cluster_id])
            .arg("--kubeconfig")
            .arg(&self.consumer.kubeconfig)
            .args(["--http-listen", "127.0.0.1:0"])
            // The contract's changes come on the catalog's stream: the shipped
            // --poll-interval (the fallback). A short --resync: the tests of a
            // contract's end by time (expiry, ending soon) see the periodic re-read.
            .args(["--resync", "500ms"])
            .args(["--retry", "200ms", "--retry-max", "1s"])
            .args(["--catalog-timeout", "2s", "--auto-peer", "true"])
            .args(["--networking", "false"])
            .args(["--lease-duration", "2s", "--lease-renew-deadline", "1500ms"])
            .args(["--lease-retry", "200ms"])
            .env("RUST_LOG", "info,purchase_controller=debug")
            .start_announced(1)
            .unwrap()
            .0
    }

    /// A Warning Event on Purchase `name` with `reason`, once there is one.
    fn warning(&self, name: &str, reason: &str) -> Value {
        let find = || {
            self.consumer.kube.objects(EVENTS).into_iter().find(|e| {
                e["regarding"]["kind"] == "Purchase"
                    && e["regarding"]["name"] == name
                    && e["reason"] == reason
                    && e["type"] == "Warning"
            })
        };
        wait_until(&format!("a Warning Event {reason}"), || find().is_some());
        find().unwrap()
    }

    /// What the provider holds for `cluster`: its nonce Secret, its Tenants
    /// (any namespace).
    fn named_on_provider(&self, cluster: &str) -> (bool, usize) {
        let kube = &self.provider.kube;
        let nonce = kube
            .get(
                SECRETS,
                Some(&liqo_support::tenant_namespace(cluster)),
                "liqo-nonce",
            )
            .is_some();
        let tenants = kube
            .objects(TENANTS)
            .iter()
            .filter(|t| t["spec"]["clusterID"] == cluster)
            .count();
        (nonce, tenants)
    }
}

/// The message of `purchase`'s `Authenticated` condition with `reason`.
fn refused(purchase: &Value, reason: &str) -> String {
    let authenticated = condition(purchase, "Authenticated");
    assert_eq!(authenticated["reason"], reason, "{purchase:#}");
    assert_eq!(authenticated["status"], "False", "{purchase:#}");
    authenticated["message"].as_str().unwrap().to_string()
}

#[test]
fn a_wrong_cluster_id_is_refused_before_anything_names_it() {
    let world = World::open(PROVIDER_ID);
    let mut wrong = world.controller(WRONG_ID);
    world.consumer.purchase(
        "gpu",
        &world.market.url(),
        json!({"offerID": OFFER, "planID": "small", "networking": false}),
    );
    // Bought for the ID it was told (the catalog takes it); the provider
    // made a peering user for it; authentication is refused.
    let stopped = world
        .consumer
        .wait_purchase("gpu", |p| {
            condition(p, "Authenticated")["reason"] == "ClusterIDMismatch"
        })
        .unwrap();
    let message = refused(&stopped, "ClusterIDMismatch");
    assert!(
        message.contains(CONSUMER_ID) && message.contains(WRONG_ID),
        "{message}"
    );
    assert_eq!(stopped["status"]["phase"], "Peering", "{stopped:#}");
    let event = world.warning("gpu", "ClusterIDMismatch");
    let note = event["note"].as_str().unwrap();
    assert!(
        note.contains(CONSUMER_ID) && note.contains(WRONG_ID),
        "{note}"
    );
    // Nothing on the provider names the wrong ID: no nonce, no Tenant (nor
    // its CSR); this cluster has no Identity.
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(world.named_on_provider(WRONG_ID), (false, 0));
    assert!(world
        .consumer
        .kube
        .objects(liqo_support::IDENTITIES)
        .is_empty());

    // With the right ID, a contract bought for this cluster reaches Ready.
    wrong.kill();
    let bought = world.market.buy(
        &world.alice,
        "small",
        json!({"consumerClusterID": CONSUMER_ID}),
    );
    let _right = world.controller(CONSUMER_ID);
    world.consumer.purchase(
        "gpu-2",
        &world.market.url(),
        json!({"contractID": bought["id"], "networking": false}),
    );
    let ready = world.consumer.wait_phase("gpu-2", "Ready").unwrap();
    assert_eq!(
        ready["status"]["granted"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    );
    assert_eq!(world.named_on_provider(CONSUMER_ID), (true, 1));
}

#[test]
fn a_provider_whose_liqo_is_another_cluster_is_refused() {
    let world = World::open("someone-else");
    let _controller = world.controller(CONSUMER_ID);
    world.consumer.purchase(
        "gpu",
        &world.market.url(),
        json!({"offerID": OFFER, "planID": "small", "networking": false}),
    );
    let stopped = world
        .consumer
        .wait_purchase("gpu", |p| {
            condition(p, "Authenticated")["reason"] == "ClusterIDMismatch"
        })
        .unwrap();
    let message = refused(&stopped, "ClusterIDMismatch");
    assert!(
        message.contains("someone-else") && message.contains(PROVIDER_ID),
        "{message}"
    );
    world.warning("gpu", "ClusterIDMismatch");
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(world.named_on_provider(CONSUMER_ID), (false, 0));
}
