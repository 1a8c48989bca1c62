//! `purchase-controller --auto-peer` as the catalog sees it (issue 31):
//! each step of the automatic peering reaches the contract's `state` and
//! `reason` (`Code: words`, what the contract page follows), from the
//! handshake waiting for the consumer's Liqo to `Ready`.
//!
//! The world ([`AutoPeerWorld`]) is the one a consumer with no peering
//! buys in: the real catalog, two HTTPS test API servers (consumer and
//! provider) running the model of Liqo v1.2 with its authentication and
//! networking modules, the provider's real class controller and
//! `peering-user-controller`, and the real `purchase-controller` on the
//! consumer, networking on as it ships (`--networking true`). The benchmark
//! `tests/benches/purchase_ready.rs` times the same world.
//!
//! Two replicas of it on the one consumer cluster elect a leader on a
//! Lease: only the leader writes, and the standby takes over when the
//! leader is killed. The standby runs as a ServiceAccount of its own,
//! bound to everything the shipped one is, so the test API server's
//! request log tells its calls apart: while it stands by, not one is a
//! write (no create, update, patch or delete, status included, Events
//! or not); once it leads, it writes.

use std::collections::BTreeSet;
use std::time::Instant;

use e2e::{Child, Spawn};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::liqo_support::{self, Offloading, NODES};
use crate::purchase_controller_support::*;

/// The Lease the replicas elect their leader on (`--lease-name`'s default,
/// in `--liqo-namespace`, as no `POD_NAMESPACE` is set).
const LEASES: (&str, &str) = ("coordination.k8s.io", "leases");
const EVENTS: (&str, &str) = ("events.k8s.io", "events");

/// The ServiceAccount `deploy/kubernetes/peering-user-controller` runs as.
/// The standby replica's own ServiceAccount, in Liqo's namespace beside
/// the shipped one ([`PURCHASE_USER`]).
const STANDBY_SA: (&str, &str) = ("liqo", "purchase-controller-standby");
/// The verbs that change something (`request.IsMutating` of the apiserver's
/// `endpoints/request` package, in RBAC terms).
const WRITES: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The consumer's Liqo once started: its controllers with authentication
/// and networking, the crdReplicator, the offloading, and the slice Identities the model
/// does not make yet (written by the stand-in).
pub struct ConsumerLiqo {
    _controllers: liqo_model::Consumer,
    _replicator: liqo_model::Replicator,
    _offloading: Offloading,
}

/// A consumer with no peering and a provider selling a peering user per
/// consumer cluster, both on HTTPS test API servers with the model of
/// Liqo (installed with its IPAM's CIDRs, networking module running);
/// the consumer's Liqo starts on [`AutoPeerWorld::start_consumer_liqo`].
pub struct AutoPeerWorld {
    pub market: Market,
    /// Consumer `alice`'s catalog token, in `team/catalog-token` too.
    pub alice: String,
    pub consumer: Consumer,
    pub provider: Provider,
    _peering_users: Option<Child>,
    _provider_liqo: liqo_model::Provider,
    _consumer_liqo: Option<ConsumerLiqo>,
    /// Last: the servers' tasks run on it until everything else is gone.
    pub rt: tokio::runtime::Runtime,
}

impl AutoPeerWorld {
    pub fn open() -> Self {
        Self::open_with(&[])
    }

    /// [`AutoPeerWorld::open`] with these catalog flags.
    pub fn open_with(catalog_flags: &[&str]) -> Self {
        let rt = runtime();
        let tls = || rt.block_on(KubeApiServer::start_tls()).expect("API server");
        let market = Market::open(catalog_flags);
        let alice = market.consumer("alice");
        let consumer = Consumer::start_on(tls(), &alice).expect("consumer cluster");
        // Liqo installed (its cluster ID, its IPAM's Networks), before its
        // controllers run.
        let here = consumer_network();
        // Liqo's chart installs its networking CRDs with the rest, before
        // any of its controllers runs.
        consumer
            .kube
            .register_liqo_networking_crds()
            .expect("the networking CRDs");
        liqo_install(
            &consumer.kube,
            CONSUMER_ID,
            &here.pod_cidr,
            &here.external_cidr,
        );
        // The class controller at its shipped defaults: contracts on the
        // catalog's stream, the 5-minute fallback poll.
        let provider =
            Provider::start_on_with(tls(), &market.url(), &[]).expect("provider cluster");
        let there = provider_network();
        liqo_install(
            &provider.kube,
            PROVIDER_ID,
            &there.pod_cidr,
            &there.external_cidr,
        );
        // A kubeconfig per consumer cluster (`v1: {}`), in the provider's class.
        let r = e2e::contracts::register_v1(
            &market.catalog,
            &market.provider_token,
            Some(json!({})),
            Some(CLASS),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        let peering_users = start_peering_users(&provider, &market.url());
        let provider_liqo = rt
            .block_on(async {
                let p = &provider.kube;
                liqo_model::Provider::start(p, liqo_model::ProviderConfig::default())
                    .await?
                    .with_authentication(p)
                    .await?
                    .with_networking(p, there)
                    .await
            })
            .expect("the provider's Liqo");
        Self {
            market,
            alice,
            consumer,
            provider,
            _peering_users: Some(peering_users),
            _provider_liqo: provider_liqo,
            _consumer_liqo: None,
            rt,
        }
    }

    /// Start Liqo on the consumer (cluster [`CONSUMER_ID`]).
    pub fn start_consumer_liqo(&mut self) {
        let (c, p) = (&self.consumer.kube, &self.provider.kube);
        let liqo = self
            .rt
            .block_on(async {
                anyhow::Ok(ConsumerLiqo {
                    _controllers: liqo_model::Consumer::start_as(c, CONSUMER_ID)
                        .await?
                        .with_authentication(c)
                        .await?
                        .with_identity_creator_only(c)
                        .await?
                        .with_networking(c, consumer_network())
                        .await?,
                    _replicator: liqo_model::Replicator::start(c, CONSUMER_ID, p, PROVIDER_ID)
                        .await?,
                    _offloading: Offloading::start(c, CONSUMER_ID, p, PROVIDER_ID).await?,
                })
            })
            .expect("the consumer's Liqo");
        self._consumer_liqo = Some(liqo);
    }

    /// `purchase-controller --auto-peer` on the consumer, short waits,
    /// networking on (its shipped `--networking`, `liqoctl peer`'s way).
    pub fn controller(&self) -> Spawn {
        self.controller_as(&self.consumer.kubeconfig)
    }

    /// [`AutoPeerWorld::controller`] as the user `kubeconfig` names.
    pub fn controller_as(&self, kubeconfig: &std::path::Path) -> Spawn {
        self.controller_shipped()
            .arg("--kubeconfig")
            .arg(kubeconfig)
            // A short --resync: the tests of a contract's end by time
            // (expiry, ending soon) see the periodic re-read.
            .args(["--resync", "500ms"])
            .args(["--retry", "200ms", "--retry-max", "1s"])
            .args(["--catalog-timeout", "2s"])
    }

    /// `purchase-controller` on the consumer with every wait at its
    /// shipped default (what the benchmark times): contracts on the
    /// catalog's stream, Liqo's objects watched, `--auto-peer` and
    /// `--networking` as shipped; no `--kubeconfig` yet.
    pub fn controller_shipped(&self) -> Spawn {
        Spawn::new("purchase-controller")
            .args(["--liqo-api", "v1", "--cluster-id", CONSUMER_ID])
            .args(["--http-listen", "127.0.0.1:0"])
            .env("RUST_LOG", "info,purchase_controller=debug")
    }

    /// [`AutoPeerWorld::controller`] as replica `identity`, with a 2 s
    /// Lease so a killed leader is replaced within the test's patience.
    pub fn replica(&self, identity: &str) -> Spawn {
        self.replica_as(identity, &self.consumer.kubeconfig)
    }

    /// [`AutoPeerWorld::replica`] as the user `kubeconfig` names.
    pub fn replica_as(&self, identity: &str, kubeconfig: &std::path::Path) -> Spawn {
        self.controller_as(kubeconfig)
            .args(["--lease-identity", identity, "--lease-duration", "2s"])
            .args(["--lease-renew-deadline", "1500ms", "--lease-retry", "200ms"])
    }

    /// The Lease's holder, if any.
    pub fn leader(&self) -> Option<String> {
        let lease = self
            .consumer
            .kube
            .get(LEASES, Some("liqo"), "purchase-controller")?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_string)
    }

    /// GET `path` of the replica serving on `port`: (status, body).
    pub fn http_get(&self, port: u16, path: &str) -> (u16, String) {
        let client = e2e::http::async_client(std::time::Duration::from_secs(5));
        self.rt
            .block_on(async {
                let response = client
                    .get(format!("http://127.0.0.1:{port}{path}"))
                    .send()
                    .await?;
                let status = response.status().as_u16();
                anyhow::Ok((status, response.text().await?))
            })
            .expect("the replica's HTTP port")
    }

    /// `/readyz` of the replica serving on `port`: (status, body).
    pub fn readyz(&self, port: u16) -> (u16, String) {
        self.http_get(port, "/readyz")
    }

    /// Buy plan `small` for this consumer cluster in the catalog and wait
    /// for the provider's `peering-user-controller` to attach the
    /// contract's own kubeconfig; the contract's id.
    ///
    /// Bought ahead of the Purchase so that what follows times the
    /// peering, not the sale (a Purchase that buys by `offerID`/`planID`
    /// reads its contract before that kubeconfig is attached, and waits
    /// for it: `a_purchase_by_offer_and_plan_waits_for_its_peering_credentials`).
    pub fn contract(&self) -> String {
        let contract = self.market.buy(
            &self.alice,
            "small",
            json!({"consumerClusterID": CONSUMER_ID}),
        );
        let id = contract["id"].as_str().expect("contract id").to_string();
        contract_when(self, &id, |c| !c["credentials"]["v1"].is_null());
        id
    }

    /// Create Purchase `name` of contract `id`.
    pub fn purchase(&self, name: &str, id: &str) {
        self.consumer
            .purchase(name, &self.market.url(), json!({"contractID": id}));
    }

    /// Whether the virtual node of contract `id` is there and Ready.
    pub fn virtual_node_ready(&self, id: &str) -> bool {
        let node = format!("contract-{}", id.to_ascii_lowercase());
        self.consumer.kube.get(NODES, None, &node).is_some_and(|n| {
            n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    }

    /// Wait (bounded) until contract `id`'s virtual node is Ready; when.
    pub fn wait_virtual_node(&self, id: &str) -> Instant {
        wait_until("a Ready virtual node", || self.virtual_node_ready(id));
        Instant::now()
    }
}

/// The consumer's pod and external CIDRs (its Liqo's IPAM).
pub fn consumer_network() -> liqo_model::networking::Options {
    liqo_model::networking::Options {
        pod_cidr: "10.1.0.0/16".into(),
        external_cidr: "10.71.0.0/16".into(),
    }
}

/// The provider's pod and external CIDRs (its Liqo's IPAM).
pub fn provider_network() -> liqo_model::networking::Options {
    liqo_model::networking::Options {
        pod_cidr: "10.2.0.0/16".into(),
        external_cidr: "10.72.0.0/16".into(),
    }
}

/// The provider's real `peering-user-controller` under its own
/// ServiceAccount, with the peering-user roles Liqo's chart installs.
fn start_peering_users(provider: &Provider, catalog: &str) -> Child {
    liqo_support::start_peering_user_controller(&provider.kube, provider._dir.path(), catalog)
        .expect("peering-user-controller")
}

/// What the catalog answers for contract `id` once `check` holds.
fn contract_when(world: &AutoPeerWorld, id: &str, check: impl Fn(&Value) -> bool) -> Value {
    e2e::contracts::wait_for(&format!("contract {id} as expected"), || {
        let (status, contract) = world.market.contract(&world.alice, id);
        (status == 200 && check(&contract)).then_some(contract)
    })
}

/// `reason: message` of a Purchase's condition: what the catalog hears.
fn step(purchase: &Value, kind: &str) -> String {
    let c = condition(purchase, kind);
    format!(
        "{}: {}",
        c["reason"].as_str().unwrap_or_default(),
        c["message"].as_str().unwrap_or_default()
    )
}

#[test]
fn the_catalog_hears_each_step_of_the_automatic_peering() {
    let mut world = AutoPeerWorld::open();
    let _controller = world.controller().start_announced(1).unwrap();
    let id = world.contract();
    world.purchase("steps", &id);
    // The consumer's Liqo is not running: networking (first, as in
    // `liqoctl peer`) waits for its Liqo to configure the Configuration
    // here (the consumer's is looked at first, so it stays there), and
    // the contract says so, in the Purchase's words.
    let waiting = world
        .consumer
        .wait_purchase("steps", |p| {
            condition(p, "NetworkConnected")["reason"] == "WaitingForConfiguration"
        })
        .unwrap();
    let connecting = step(&waiting, "NetworkConnected");
    let contract = contract_when(&world, &id, |c| {
        c["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("WaitingForConfiguration: "))
    });
    assert_eq!(contract["state"], "pending", "{contract:#}");
    assert_eq!(contract["reason"], connecting.as_str(), "{contract:#}");

    // Liqo starts: peered, granted, a Ready virtual node; the contract is
    // `ready` with the Purchase's Ready step.
    world.start_consumer_liqo();
    let ready = world.consumer.wait_phase("steps", "Ready").unwrap();
    world.wait_virtual_node(&id);
    let contract = contract_when(&world, &id, |c| c["state"] == "ready");
    assert_eq!(
        contract["reason"],
        step(&ready, "Ready").as_str(),
        "{contract:#}"
    );
    assert!(
        contract["reason"].as_str().unwrap().starts_with("Ready: "),
        "{contract:#}"
    );
}

/// A Purchase that buys by offer and plan reads its contract before the
/// provider's peering-user-controller has attached the consumer's
/// kubeconfig: it waits (Pending, `NoPeeringCredentials`, the catalog told
/// `pending`), never Failed, and goes on to Ready once the kubeconfig is
/// there. The provider's controller is held back here so the wait is
/// certain, not a race.
#[test]
fn a_purchase_by_offer_and_plan_waits_for_its_peering_credentials() {
    let mut world = AutoPeerWorld::open();
    world._peering_users = None; // killed: no kubeconfig is attached
    world.start_consumer_liqo();
    let _controller = world.controller().start_announced(1).unwrap();
    world.consumer.purchase(
        "by-plan",
        &world.market.url(),
        json!({"offerID": OFFER, "planID": "small"}),
    );
    let waiting = world
        .consumer
        .wait_purchase("by-plan", |p| {
            condition(p, "Ready")["reason"] == "NoPeeringCredentials"
        })
        .unwrap();
    assert_eq!(waiting["status"]["phase"], "Pending", "{waiting:#}");
    let id = waiting["status"]["contractID"]
        .as_str()
        .expect("the bought contract's id")
        .to_string();
    let contract = contract_when(&world, &id, |c| {
        c["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("NoPeeringCredentials: "))
    });
    assert_eq!(contract["state"], "pending", "{contract:#}");

    world._peering_users = Some(start_peering_users(&world.provider, &world.market.url()));
    world.consumer.wait_phase("by-plan", "Ready").unwrap();
    world.wait_virtual_node(&id);
}

/// The `reportingInstance` of every Event about Purchase `name`.
fn reporters(world: &AutoPeerWorld, name: &str) -> BTreeSet<String> {
    world
        .consumer
        .kube
        .objects(EVENTS)
        .iter()
        .filter(|e| e["regarding"]["name"] == name)
        .filter_map(|e| e["reportingInstance"].as_str().map(str::to_string))
        .collect()
}

/// Bind the ServiceAccount `standby` (namespace, name) to every role the
/// user `shipped` (a ServiceAccount of `deploy/`) is bound to on `kube` —
/// its subject added to each of those bindings — and write its kubeconfig
/// to `path`: the same permissions, another name in the request log.
/// Its user name.
pub fn bound_as(
    kube: &KubeApiServer,
    shipped: &str,
    standby: (&str, &str),
    path: &std::path::Path,
) -> String {
    let (namespace, name) = standby;
    let is_shipped = |s: &Value| {
        s["kind"] == "ServiceAccount"
            && format!(
                "system:serviceaccount:{}:{}",
                s["namespace"].as_str().unwrap_or_default(),
                s["name"].as_str().unwrap_or_default()
            ) == shipped
    };
    let mut bound = 0;
    for kind in ["rolebindings", "clusterrolebindings"] {
        let resource = ("rbac.authorization.k8s.io", kind);
        for mut binding in kube.objects(resource) {
            let Some(subjects) = binding["subjects"].as_array_mut() else {
                continue;
            };
            if !subjects.iter().any(is_shipped) {
                continue;
            }
            subjects.push(json!({"kind": "ServiceAccount", "name": name, "namespace": namespace}));
            kube.apply(resource, binding);
            bound += 1;
        }
    }
    assert!(bound > 0, "no binding of {shipped} shipped");
    let user = format!("system:serviceaccount:{namespace}:{name}");
    kube.write_kubeconfig_as(path, &user)
        .expect("the standby's kubeconfig");
    user
}

/// The requests `user` made that change something, as `verb path (code)`.
pub fn writes_by(records: &[kube_test_server::AuditRecord], user: &str) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.user.as_deref() == Some(user))
        .filter(|r| WRITES.contains(&r.verb.as_str()))
        .map(|r| format!("{} {} ({})", r.verb, r.path, r.code))
        .collect()
}

#[test]
fn two_replicas_only_the_leader_writes_and_the_standby_takes_over() {
    let mut world = AutoPeerWorld::open();
    world.start_consumer_liqo();
    let standby_kubeconfig = world.consumer._dir.path().join("standby.kubeconfig");
    let standby_user = bound_as(
        &world.consumer.kube,
        PURCHASE_USER,
        STANDBY_SA,
        &standby_kubeconfig,
    );
    let (mut a, a_bound) = world.replica("replica-a").start_announced(1).unwrap();
    let a_port = a_bound.port(None);
    wait_until("replica-a leads", || {
        world.readyz(a_port) == (200, "ok: leader\n".to_string())
    });
    let (_b, b_bound) = world
        .replica_as("replica-b", &standby_kubeconfig)
        .start_announced(1)
        .unwrap();
    let b_port = b_bound.port(None);
    wait_until("replica-b stands by, ready", || {
        world.readyz(b_port) == (200, "ok: standby\n".to_string())
    });
    assert_eq!(world.leader().as_deref(), Some("replica-a"));

    // The first Purchase: reconciled by the leader alone.
    let first = world.contract();
    world.purchase("first", &first);
    world.consumer.wait_phase("first", "Ready").unwrap();
    world.wait_virtual_node(&first);
    assert_eq!(
        reporters(&world, "first"),
        BTreeSet::from(["replica-a".to_string()])
    );
    let metrics = world.http_get(b_port, "/metrics").1;
    for line in [
        "purchase_controller_leader 0",
        "purchase_controller_reconcile_duration_seconds_count 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}: {metrics}");
    }
    // Everything the standby asked the API server so far, while the first
    // Purchase went to Ready: reads only (it watches the Lease), not one
    // write.
    let standing_by = world.consumer.kube.audit();
    assert!(
        standing_by
            .iter()
            .any(|r| r.user.as_deref() == Some(standby_user.as_str())),
        "the standby made no request as {standby_user}"
    );
    assert_eq!(
        writes_by(&standing_by, &standby_user),
        Vec::<String>::new(),
        "the standby wrote"
    );
    assert!(
        !writes_by(&standing_by, PURCHASE_USER).is_empty(),
        "the leader wrote nothing"
    );

    // The leader dies without releasing the Lease: the standby takes it
    // once it expires, and reconciles the second Purchase of the provider.
    a.kill();
    wait_until("replica-b leads", || {
        world.leader().as_deref() == Some("replica-b")
            && world.readyz(b_port) == (200, "ok: leader\n".to_string())
    });
    let second = world.contract();
    world.purchase("second", &second);
    world.consumer.wait_phase("second", "Ready").unwrap();
    world.wait_virtual_node(&second);
    assert_eq!(
        reporters(&world, "second"),
        BTreeSet::from(["replica-b".to_string()])
    );
    // Now the leader, it writes: the second Purchase's status among others.
    let leading = writes_by(&world.consumer.kube.audit(), &standby_user);
    assert!(
        leading
            .iter()
            .any(|w| w.contains("/purchases/second/status")),
        "{leading:#?}"
    );
    // One peering with the provider, shared by both Purchases.
    let peered: Vec<Value> = world
        .consumer
        .kube
        .objects(liqo_support::FOREIGN_CLUSTERS)
        .into_iter()
        .filter(|f| f["spec"]["clusterID"] == PROVIDER_ID)
        .collect();
    assert_eq!(peered.len(), 1, "{peered:#?}");
    let slices = world.consumer.kube.objects(SLICES);
    assert_eq!(slices.len(), 2, "{slices:#?}");
}
