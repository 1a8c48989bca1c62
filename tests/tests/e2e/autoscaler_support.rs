//! The world of the market autoscaler's end-to-end tests (issue 42): the
//! world a consumer with no peering buys in (`purchase_controller_ha`'s
//! [`AutoPeerWorld`]: the real catalog, the real `purchase-controller
//! --auto-peer` on the consumer, the real `peering-user-controller` and
//! class controller on the provider, two HTTPS test API servers with the
//! model of Liqo v1.2 and its authentication), made to run pods:
//!
//! - the consumer runs Liqo's offloading (the NamespaceOffloading
//!   controller, the create-time pod webhook, the scheduler:
//!   [`crate::liqo_support::Offloading`]) and the test API server's
//!   Deployment and ReplicaSet controllers, so a Deployment's pods wait
//!   `Unschedulable` until a virtual node can hold them;
//! - the provider runs Liqo's offloading too, with one ordinary node and
//!   its kubelet, so a ShadowPod's pod runs there;
//! - each virtual node the consumer gets from a bought contract has its
//!   virtual kubelet's pod reflection ([`VirtualKubelets`]), as Liqo's
//!   VirtualNode controller starts a virtual-kubelet Deployment per
//!   VirtualNode (`pkg/liqo-controller-manager/offloading/virtualnode-controller/deployment.go`);
//! - the market: the provider's own offers A and B (labelled
//!   `region: eu`) and a second provider's offer C (`region: us`, the
//!   cheapest), priced so that a greedy first fit and the cheapest set
//!   differ ([`OFFERS`]);
//! - the real `market-autoscaler` as the ServiceAccount `deploy/` ships
//!   it for, under its shipped RBAC, with short configured timeouts
//!   ([`World::autoscaler`]); every deadline a test waits on is one of
//!   those flags or the MarketAutoscaler's own durations, never this
//!   machine's speed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;

use e2e::{Child, Spawn};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::liqo_support::NODES;
use crate::purchase_controller_ha::AutoPeerWorld;
use crate::purchase_controller_support::{wait_until, CONSUMER_ID, PROVIDER_ID, PURCHASES};

pub const AUTOSCALERS: (&str, &str) = ("broker.liqo-broker.io", "marketautoscalers");
pub const DEPLOYMENTS: (&str, &str) = ("apps", "deployments");
pub const PODS: (&str, &str) = ("", "pods");
pub const EVENTS: (&str, &str) = ("events.k8s.io", "events");
pub const PDBS: (&str, &str) = ("policy", "poddisruptionbudgets");
pub const LEASES: (&str, &str) = ("coordination.k8s.io", "leases");

/// Who the autoscaler is: the ServiceAccount of `deploy/kubernetes/market-autoscaler`.
pub const AUTOSCALER_USER: &str = "system:serviceaccount:liqo:market-autoscaler";
/// An operator who may read everything on the consumer and write
/// nothing: who runs `market-autoscaler explain`.
pub const EXPLAINER: &str = "operator-reading";
/// The label the autoscaler puts on its Purchases (design: idempotency).
pub const OWNER_LABEL: &str = "broker.liqo-broker.io/market-autoscaler";
/// The namespace the autoscaler serves, offloadable by [`HOME`]'s
/// Purchases (the MarketAutoscaler and its Purchases live in [`HOME`]).
pub const APPS: &str = "apps";
/// The namespace of the MarketAutoscaler and its Purchases: `liqo`, where
/// `deploy/` grants the autoscaler its catalog token (the chart grants it
/// in each namespace of `marketAutoscaler.namespaces`, `[liqo]` by default).
pub const HOME: &str = "liqo";

/// The MarketAutoscaler's name.
pub const NAME: &str = "mas";
/// The second provider (offer C), which has no cluster here: it is never
/// bought from.
pub const OTHER_PROVIDER: u32 = 3;
/// The provider whose peering never completes (scenario 5): it sells a
/// peering user per contract and never attaches one.
pub const UNREADY_PROVIDER: u32 = 2;

/// An offer's one plan: (offer id, plan id, cpu, memory, cost per hour,
/// region label).
pub type Offer = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// A: 4 cpu for 2.00 — the cheapest per cpu, so a greedy first fit of 6
/// cpu takes it first, then again (4.00 in all). B: 6 cpu for 3.50 — the
/// cheapest set for 6 cpu. C: 8 cpu for 1.00, cheaper than both, but in
/// `region: us`, which the MarketAutoscaler's offer selector excludes.
pub const A: Offer = ("offer-a", "a4", "4", "8Gi", "2.00", "eu");
pub const B: Offer = ("offer-b", "b6", "6", "8Gi", "3.50", "eu");
pub const C: Offer = ("offer-c", "c8", "8", "16Gi", "1.00", "us");
/// The offer of [`UNREADY_PROVIDER`]: 6 cpu for 3.00, cheaper than B.
pub const E: Offer = ("offer-e", "e6", "6", "8Gi", "3.00", "eu");
/// The provider's offers (A, B) and the other provider's (C).
pub const OFFERS: [Offer; 3] = [A, B, C];

/// The provider's one ordinary node, on which offloaded pods run.
const PROVIDER_NODE: &str = "provider-node";

/// The offer body of `offer`.
pub fn offer_body(offer: Offer) -> Value {
    let (id, plan, cpu, memory, cost, region) = offer;
    json!({"name": id, "type": "compute", "labels": {"region": region},
           "plans": {plan: {"name": plan, "cost": cost,
                            "resources": {"cpu": cpu, "memory": memory}}}})
}

/// The world; everything stops when it is dropped.
pub struct World {
    pub base: AutoPeerWorld,
    _provider_offloading: liqo_model::offloading::Cluster,
    _kubelets: VirtualKubelets,
    /// The consumer's `purchase-controller`.
    pub purchase_controller: Option<Child>,
    /// The autoscaler's kubeconfig (its ServiceAccount).
    pub kubeconfig: PathBuf,
    /// The kubeconfig of [`EXPLAINER`].
    pub explainer: PathBuf,
    _dir: tempfile::TempDir,
}

impl World {
    /// The world with offers [`OFFERS`], the purchase-controller running,
    /// no workload and no autoscaler yet; the catalog prices in EUR per
    /// hour.
    pub fn open() -> Self {
        Self::open_with(&[])
    }

    /// [`World::open`] with these catalog flags too.
    pub fn open_with(catalog_flags: &[&str]) -> Self {
        let mut flags = vec!["--currency", "EUR", "--cost-period", "hour"];
        flags.extend_from_slice(catalog_flags);
        let mut base = AutoPeerWorld::open_with(&flags);
        base.start_consumer_liqo();
        let market = &base.market;
        // Only this world's offers: the base's own is withdrawn.
        let r = market
            .catalog
            .delete("/offer/compute", Some(&market.provider_token));
        assert_eq!(r.status, 204, "{}", r.text);
        for offer in OFFERS {
            publish(&base, offer);
        }
        let (consumer, provider) = (&base.consumer, &base.provider);
        let provider_offloading = base
            .rt
            .block_on(async {
                let p = &provider.kube;
                p.apply(
                    NODES,
                    kube_test_server::node(PROVIDER_NODE, true, false, "64", "256Gi"),
                );
                liqo_model::offloading::Cluster::start(p, PROVIDER_ID, &[PROVIDER_NODE]).await
            })
            .expect("the provider's offloading");
        let kubelets = VirtualKubelets::start(&base.rt, &consumer.kube, &provider.kube);
        let kube = &consumer.kube;
        kube.register_crd_file(&autoscaler_crd())
            .expect("the MarketAutoscaler CRD");
        // Offloadable by the Purchases of HOME (issue 41's annotation).
        kube.apply(
            crate::liqo_support::NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPS,
                   "annotations": {"broker.liqo-broker.io/offloadable-by": HOME}}}),
        );
        // The consumer's catalog token, where the autoscaler reads it.
        kube.apply(
            crate::purchase_controller_support::SECRETS,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "catalog-token", "namespace": HOME},
                   "data": {"token": base64::engine::general_purpose::STANDARD.encode(&base.alice)}}),
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("market-autoscaler.kubeconfig");
        kube.write_kubeconfig_as(&kubeconfig, AUTOSCALER_USER)
            .expect("kubeconfig");
        grant_credentials(kube, HOME);
        let explainer = dir.path().join("explainer.kubeconfig");
        read_only(kube, EXPLAINER);
        kube.write_kubeconfig_as(&explainer, EXPLAINER)
            .expect("kubeconfig");
        let purchase_controller = Some(start_purchase_controller(&base));
        Self {
            base,
            _provider_offloading: provider_offloading,
            _kubelets: kubelets,
            purchase_controller,
            kubeconfig,
            explainer,
            _dir: dir,
        }
    }

    pub fn kube(&self) -> &KubeApiServer {
        &self.base.consumer.kube
    }

    /// `market-autoscaler` as its ServiceAccount, with short configured
    /// timeouts, electing itself leader on the shipped Lease as the chart's
    /// replicas do (one identity: a restart holds the Lease at once); not
    /// yet started (add flags, say).
    pub fn autoscaler(&self) -> Spawn {
        self.replica("solo")
    }

    /// [`World::autoscaler`] giving a Purchase up when it is not Ready
    /// within `deadline` (`--purchase-deadline`).
    pub fn autoscaler_with_deadline(&self, deadline: &str) -> Spawn {
        self.replica_with_deadline("solo", deadline)
    }

    /// `market-autoscaler` as replica `identity` of several, on a 1 s
    /// Lease so a killed leader is replaced within the test's patience.
    pub fn replica(&self, identity: &str) -> Spawn {
        // A purchase here (reserve, buy, peer, grant, node Ready) takes
        // seconds on a loaded machine; the deadline is the scenario's
        // business where it is tested, never a race elsewhere.
        self.replica_with_deadline(identity, "2m")
    }

    fn replica_with_deadline(&self, identity: &str, deadline: &str) -> Spawn {
        self.autoscaler_flags()
            .args(["--purchase-deadline", deadline])
            .args(["--instance", identity, "--lease-duration", "1s"])
            .args(["--lease-renew-deadline", "700ms", "--lease-retry", "100ms"])
    }

    /// The holder of the autoscalers' Lease (`market-autoscaler` in
    /// `liqo`), if any.
    pub fn leader(&self) -> Option<String> {
        let lease = self.kube().get(LEASES, Some("liqo"), "market-autoscaler")?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_string)
    }

    fn autoscaler_flags(&self) -> Spawn {
        Spawn::new("market-autoscaler")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--http-listen", "127.0.0.1:0"])
            .args(["--scan-interval", "1s", "--batch-idle", "100ms"])
            .args(["--batch-max", "1s"])
            .args(["--backoff-initial", "1m", "--backoff-max", "5m"])
            .args(["--error-retry", "200ms", "--catalog-timeout", "1s"])
            // The Lease's namespace, as the Deployment sets it.
            .env("POD_NAMESPACE", "liqo")
            .env("RUST_LOG", "info,market_autoscaler=debug")
    }

    /// Start [`World::autoscaler`]; its HTTP port.
    pub fn start_autoscaler(&self) -> (Child, u16) {
        let (child, bound) = self
            .autoscaler()
            .start_announced(1)
            .expect("market-autoscaler");
        (child, bound.port(None))
    }

    /// The MarketAutoscaler [`NAME`] in [`HOME`]: serving [`APPS`],
    /// buying only `region: eu` offers in EUR, giving back empty nodes
    /// after 2 s (not within 5 s of a purchase or of one becoming Ready, so a node is not given
    /// back before its pods reach it), with `spec` merged over that.
    pub fn create_autoscaler(&self, spec: Value) -> Value {
        let mut full = json!({
            "catalogURL": self.base.market.url(),
            "credentialsSecretRef": {"name": "catalog-token", "key": "token"},
            "pods": {"namespaces": [APPS]},
            "offers": {"selector": {"matchLabels": {"region": "eu"}}},
            "limits": {"currency": "EUR", "maxSpendPerHour": "10", "maxSpendPerMonth": "10000",
                       "contracts": 5},
            "scaleDown": {"policy": "WhenEmpty", "unneededTime": "2s", "delayAfterPurchase": "5s"},
            "strategy": "Cheapest",
        });
        merge(&mut full, spec);
        self.kube()
            .create(
                AUTOSCALERS,
                json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "MarketAutoscaler",
                       "metadata": {"name": NAME, "namespace": HOME}, "spec": full}),
            )
            .expect("MarketAutoscaler created")
    }

    /// Merge `spec` into the MarketAutoscaler's spec.
    pub fn patch_autoscaler(&self, spec: Value) {
        self.kube()
            .merge_patch(
                AUTOSCALERS,
                Some(HOME),
                NAME,
                json!({ "spec": spec }),
                false,
            )
            .expect("MarketAutoscaler patched");
    }

    /// Wait until the MarketAutoscaler satisfies `check`; it.
    #[track_caller]
    pub fn wait_autoscaler(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        e2e::contracts::wait_for(what, || {
            let mas = self.kube().get(AUTOSCALERS, Some(HOME), NAME)?;
            check(&mas).then_some(mas)
        })
    }

    /// Deployment `name` in [`APPS`]: `replicas` pods each requesting
    /// `cpu` and 256Mi, with `annotations` on its pods.
    pub fn deployment(&self, name: &str, replicas: u32, cpu: &str, annotations: Value) {
        self.kube().apply(
            DEPLOYMENTS,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": name, "namespace": APPS},
                   "spec": {"replicas": replicas,
                            "selector": {"matchLabels": {"app": name}},
                            "template": {
                                "metadata": {"labels": {"app": name}, "annotations": annotations},
                                "spec": {"containers": [{"name": "app", "image": "nginx",
                                    "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}}}}),
        );
    }

    /// Scale Deployment `name` to `replicas`.
    pub fn scale(&self, name: &str, replicas: u32) {
        self.kube()
            .merge_patch(
                DEPLOYMENTS,
                Some(APPS),
                name,
                json!({"spec": {"replicas": replicas}}),
                false,
            )
            .expect("Deployment scaled");
    }

    /// Contract `id` as the catalog tells its consumer.
    pub fn contract(&self, id: &str) -> Value {
        let (status, contract) = self.base.market.contract(&self.base.alice, id);
        assert_eq!(status, 200, "{contract}");
        contract
    }

    /// Wait until a contract satisfies `check`; it.
    #[track_caller]
    pub fn wait_contract(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        e2e::contracts::wait_for(what, || self.contracts().into_iter().find(|c| check(c)))
    }

    /// Delete Deployment `name` (its ReplicaSet and pods go with it, by
    /// the garbage collector).
    pub fn delete_deployment(&self, name: &str) {
        self.kube()
            .delete_object(DEPLOYMENTS, Some(APPS), name)
            .expect("Deployment deleted");
    }

    /// The pods of Deployment `app` (label `app`).
    pub fn pods(&self, app: &str) -> Vec<Value> {
        self.kube()
            .objects(PODS)
            .into_iter()
            .filter(|p| p["metadata"]["namespace"] == APPS && p["metadata"]["labels"]["app"] == app)
            .collect()
    }

    /// Wait until `n` pods of `app` are Running, each on a node `on`
    /// accepts; their nodes, by pod.
    #[track_caller]
    pub fn wait_running(
        &self,
        app: &str,
        n: usize,
        on: impl Fn(&str) -> bool,
    ) -> BTreeMap<String, String> {
        let deadline = std::time::Instant::now() + e2e::EVENTUALLY;
        loop {
            let pods = self.pods(app);
            if let Some(running) = running_on(&pods, n, &on) {
                return running;
            }
            if std::time::Instant::now() >= deadline {
                // What each pod waits on, for the one who reads the failure.
                let seen: Vec<String> = pods.iter().map(pod_state).collect();
                panic!("timed out waiting for {n} pods of {app} Running; the pods: {seen:#?}");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// The pods of `pods` Running on a node `on` accepts (name → node), when
/// they are `n` and all of the app's pods.
fn running_on(
    pods: &[Value],
    n: usize,
    on: &impl Fn(&str) -> bool,
) -> Option<BTreeMap<String, String>> {
    let running: BTreeMap<String, String> = pods
        .iter()
        .filter(|p| {
            p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
        })
        .filter_map(|p| {
            let node = p["spec"]["nodeName"].as_str()?;
            on(node).then(|| {
                (
                    p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    node.to_string(),
                )
            })
        })
        .collect();
    (running.len() == n && pods.len() == n).then_some(running)
}

/// One pod as a failure message shows it: name, phase, node, whether it
/// tolerates Liqo's virtual nodes, and its PodScheduled condition.
fn pod_state(p: &Value) -> String {
    let tolerates = p["spec"]["tolerations"].as_array().is_some_and(|ts| {
        ts.iter()
            .any(|t| t["key"] == "virtual-node.liqo.io/not-allowed")
    });
    let scheduled = p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
        .map(|c| format!("{} {} {}", c["status"], c["reason"], c["message"]))
        .unwrap_or_default();
    format!(
        "{} phase={} node={} deleting={} tolerates-virtual-nodes={tolerates} scheduled=[{scheduled}]",
        p["metadata"]["name"],
        p["status"]["phase"],
        p["spec"]["nodeName"],
        !p["metadata"]["deletionTimestamp"].is_null(),
    )
}

impl World {
    /// Wait until `n` pods of `app` wait `Unschedulable` (the scheduler's
    /// verdict, the autoscaler's trigger).
    #[track_caller]
    pub fn wait_unschedulable(&self, app: &str, n: usize) {
        wait_until(&format!("{n} pods of {app} Unschedulable"), || {
            let pods = self.pods(app);
            pods.len() == n && pods.iter().all(unschedulable)
        });
    }

    /// The autoscaler's Purchases (by its label), by name.
    pub fn purchases(&self) -> BTreeMap<String, Value> {
        self.kube()
            .objects(PURCHASES)
            .into_iter()
            .filter(|p| {
                p["metadata"]["namespace"] == HOME && p["metadata"]["labels"][OWNER_LABEL] == NAME
            })
            .map(|p| {
                (
                    p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    p,
                )
            })
            .collect()
    }

    /// Every contract the consumer holds or held in the catalog
    /// (`GET /contracts` as alice), in purchase order.
    pub fn contracts(&self) -> Vec<Value> {
        let r = e2e::buying::get(
            &self.base.market.catalog,
            "/contracts",
            Some(&self.base.alice),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        let mut contracts = r.json.as_array().cloned().unwrap_or_default();
        contracts.sort_by(|a, b| a["purchasedAt"].as_str().cmp(&b["purchasedAt"].as_str()));
        contracts
    }

    /// (offer, plan, active) of every contract.
    pub fn bought(&self) -> Vec<(String, String, bool)> {
        self.contracts()
            .iter()
            .map(|c| {
                (
                    c["offerID"].as_str().unwrap_or_default().to_string(),
                    c["planID"].as_str().unwrap_or_default().to_string(),
                    c["active"] == true,
                )
            })
            .collect()
    }

    /// The virtual nodes on the consumer (Liqo's label), by name.
    pub fn virtual_nodes(&self) -> Vec<String> {
        virtual_nodes(self.kube())
    }

    /// Provider `offer`'s provider withdraws it.
    pub fn withdraw(&self, offer: Offer) {
        let market = &self.base.market;
        let r = market
            .catalog
            .delete(&format!("/offer/{}", offer.0), Some(&market.provider_token));
        assert_eq!(r.status, 204, "{}", r.text);
    }

    /// Events with `reason` (events.k8s.io/v1) the autoscaler reported.
    pub fn events(&self, reason: &str) -> Vec<Value> {
        self.kube()
            .objects(EVENTS)
            .into_iter()
            .filter(|e| e["reason"] == reason && e["reportingController"] == "market-autoscaler")
            .collect()
    }

    /// `market-autoscaler explain --autoscaler team/mas --output json` as
    /// an operator who may read everything and write nothing (RBAC
    /// refuses any write): the decision it prints, checked to have asked
    /// for no write either.
    pub fn explain(&self) -> Value {
        let user = EXPLAINER;
        let before = self.kube().audit().len();
        let out = Spawn::new("market-autoscaler")
            .arg("explain")
            .arg("--kubeconfig")
            .arg(&self.explainer)
            .args([
                "--autoscaler",
                &format!("{HOME}/{NAME}"),
                "--output",
                "json",
            ])
            .output()
            .expect("market-autoscaler explain");
        assert!(
            out.status.success(),
            "explain failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let writes = crate::purchase_controller_ha::writes_by(&self.kube().audit()[before..], user);
        assert_eq!(writes, Vec::<String>::new(), "explain wrote");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "explain's output is not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// GET `path` of the autoscaler serving on `port`: (status, body).
    pub fn http_get(&self, port: u16, path: &str) -> (u16, String) {
        self.base.http_get(port, path)
    }
}

/// The scheduler's verdict on `pod`: `PodScheduled=False` reason
/// `Unschedulable` (the autoscaler's trigger).
pub fn unschedulable(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == "Unschedulable"
        })
}

/// The consumer's `purchase-controller --auto-peer`, as the base world
/// runs it.
pub fn start_purchase_controller(base: &AutoPeerWorld) -> Child {
    base.controller()
        .start_announced(1)
        .expect("purchase-controller")
        .0
}

/// Publish `offer` as its provider: A, B and E's own, C as provider
/// [`OTHER_PROVIDER`].
pub fn publish(base: &AutoPeerWorld, offer: Offer) {
    let market = &base.market;
    let token = if offer == C {
        market
            .catalog
            .login(&e2e::catalog::provider(OTHER_PROVIDER))
    } else if offer == E {
        market
            .catalog
            .login(&e2e::catalog::provider(UNREADY_PROVIDER))
    } else {
        market.provider_token.clone()
    };
    market
        .catalog
        .put_offer(offer.0, &offer_body(offer), &token);
}

/// Provider [`UNREADY_PROVIDER`] sells [`E`] with a peering user per
/// contract (`v1: {}`), and no controller of its ever attaches one: a
/// Purchase of it waits for peering credentials forever.
pub fn publish_unready(world: &World) {
    let market = &world.base.market;
    let token = market
        .catalog
        .login(&e2e::catalog::provider(UNREADY_PROVIDER));
    let r = e2e::contracts::register_v1(&market.catalog, &token, Some(json!({})), None);
    assert_eq!(r.status, 200, "{}", r.text);
    publish(&world.base, E);
}

/// Merge `patch` into `into` (objects key by key, anything else replaced).
pub fn merge(into: &mut Value, patch: Value) {
    match (into, patch) {
        (Value::Object(into), Value::Object(patch)) => {
            for (k, v) in patch {
                merge(into.entry(k).or_insert(Value::Null), v);
            }
        }
        (into, patch) => *into = patch,
    }
}

/// The CRD `deploy/` ships for MarketAutoscalers.
pub fn autoscaler_crd() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/kubernetes/market-autoscaler/crd.yaml")
}

/// Let the autoscaler read the catalog token Secret of `namespace`: the
/// shipped Role `market-autoscaler-catalog-token` and its RoleBinding
/// (which `deploy/` ships in `liqo`), made in `namespace` as the chart
/// makes them for each namespace of `marketAutoscaler.namespaces`.
pub fn grant_credentials(kube: &KubeApiServer, namespace: &str) {
    const NAME: &str = "market-autoscaler-catalog-token";
    let shipped = e2e::rbac::shipped().expect("the shipped RBAC");
    let mut found = 0;
    for (kind, resource) in [("Role", "roles"), ("RoleBinding", "rolebindings")] {
        for mut object in shipped
            .iter()
            .filter(|o| o["kind"] == kind && o["metadata"]["name"] == NAME)
            .cloned()
        {
            object["metadata"]["namespace"] = json!(namespace);
            kube.apply(("rbac.authorization.k8s.io", resource), object);
            found += 1;
        }
    }
    assert_eq!(found, 2, "deploy/ ships no {NAME} Role and RoleBinding");
}

/// `user` may get, list and watch everything, and do nothing else.
pub fn read_only(kube: &KubeApiServer, user: &str) {
    let rbac = |r: &'static str| ("rbac.authorization.k8s.io", r);
    kube.apply(
        rbac("clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "read-everything"},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]}),
    );
    kube.apply(
        rbac("clusterrolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": format!("read-everything-{user}")},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "read-everything"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    );
}

/// The condition `kind` of a MarketAutoscaler (Null when absent).
pub fn condition(mas: &Value, kind: &str) -> Value {
    crate::purchase_controller_support::condition(mas, kind)
}

/// The Liqo virtual nodes of `kube`, by name.
pub fn virtual_nodes(kube: &KubeApiServer) -> Vec<String> {
    kube.objects(NODES)
        .into_iter()
        .filter(|n| n["metadata"]["labels"]["liqo.io/type"] == "virtual-node")
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Wait (at most [`e2e::EVENTUALLY`]) until `child` exits; its status.
#[track_caller]
pub fn exit_of(child: &mut Child) -> std::process::ExitStatus {
    e2e::contracts::wait_for("the process to exit", || {
        child.try_wait().expect("the process's status")
    })
}

/// Seconds since the epoch of an RFC 3339 timestamp.
pub fn seconds(timestamp: &Value) -> f64 {
    let text = timestamp.as_str().unwrap_or_default();
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text:?}: {e}"))
        .timestamp_micros() as f64
        / 1e6
}

/// A contract's virtual node: Liqo names it after the ResourceSlice the
/// purchase-controller makes, `contract-<id>` lower-cased.
pub fn node_of(contract: &Value) -> String {
    format!(
        "contract-{}",
        contract["id"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase()
    )
}

/// The virtual kubelets of the consumer's virtual nodes, one pod
/// reflection per node ([`liqo_model::reflection::SliceReflection`],
/// writing to the provider as the slice's Identity), started when a
/// virtual node of the provider appears and stopped when it goes — the
/// lifetime Liqo gives each virtual node's virtual-kubelet Deployment.
/// Found by looking at the consumer's Nodes in process every 50 ms (not
/// an API call).
pub struct VirtualKubelets {
    task: tokio::task::JoinHandle<()>,
}

impl VirtualKubelets {
    pub fn start(
        rt: &tokio::runtime::Runtime,
        consumer: &Arc<KubeApiServer>,
        provider: &Arc<KubeApiServer>,
    ) -> Self {
        let (consumer, provider) = (consumer.clone(), provider.clone());
        let task = rt.spawn(async move {
            let mut running = BTreeMap::<String, liqo_model::reflection::SliceReflection>::new();
            loop {
                let nodes: Vec<String> = consumer
                    .objects(NODES)
                    .into_iter()
                    .filter(|n| {
                        n["metadata"]["labels"]["liqo.io/type"] == "virtual-node"
                            && n["metadata"]["labels"]["liqo.io/remote-cluster-id"] == PROVIDER_ID
                    })
                    .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
                    .collect();
                running.retain(|node, _| nodes.contains(node));
                for node in &nodes {
                    if running.contains_key(node) {
                        continue;
                    }
                    match liqo_model::reflection::SliceReflection::start(
                        &consumer,
                        CONSUMER_ID,
                        &provider,
                        PROVIDER_ID,
                        node,
                        Duration::from_secs(30),
                    )
                    .await
                    {
                        Ok(kubelet) => {
                            running.insert(node.clone(), kubelet);
                        }
                        Err(e) => eprintln!("virtual kubelet of {node}: {e}"),
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Self { task }
    }
}

impl Drop for VirtualKubelets {
    fn drop(&mut self) {
        self.task.abort();
    }
}
