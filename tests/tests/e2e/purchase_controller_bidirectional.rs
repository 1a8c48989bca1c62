//! A capacity contract and a service contract between the same two
//! clusters, ended in each order (issue 40). Customer C orders a service
//! seller P sells (P's `service-controller` makes a Purchase on P: P peers
//! with C as a Liqo consumer, to run the service's pods there), then buys
//! capacity from P (a Purchase on C: C peers with P as a Liqo consumer).
//! Liqo peers them both ways over one tunnel: the second peering finds the
//! gateways the first made the other way round and uses them
//! (`pkg/liqoctl/network/handler.go:158-170`), and each ForeignCluster's
//! role is `ConsumerAndProvider` (`pkg/utils/foreigncluster/roles.go:20-31`).
//!
//! Ending one contract must leave the other direction running: its virtual
//! node Ready, its gateways and Connections there, watched without a gap
//! from before the contract ends until its teardown is complete (as
//! `liqoctl unpeer` keeps the network of a bidirectional peering,
//! `pkg/liqoctl/unpeer/handler.go:82-111`). Ending the other then takes
//! everything down, the tunnel included, whichever way it runs (`network
//! reset` deletes both gateway kinds on both clusters, `handler.go:293-310`).
//!
//! The world: the real catalog (the seller's capacity offer `compute` and
//! service offer `db`, consumer `alice`, an OSB platform), two HTTPS test
//! API servers each running the model of Liqo v1.2 as provider and
//! consumer with authentication and networking, the crdReplicator both
//! ways, Liqo's offloading from P to C (the service's namespace); on P the
//! real class controller, `peering-user-controller` and `service-controller`;
//! the real `purchase-controller --auto-peer` with networking on both.

use std::path::Path;
use std::sync::{Arc, Mutex};

use e2e::buying::get;
use e2e::osb_client::{plan_of, service_of, Auth, Outcome, Platform};
use e2e::{Child, Spawn};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::liqo_support::{self, FOREIGN_CLUSTERS, IDENTITIES, NODES, TENANTS};
use crate::purchase_controller_support::*;

const OSB_USER: &str = "platform";
const OSB_PASSWORD: &str = "platform-password-0123";
const SERVICE_CATALOGS: (&str, &str) = ("broker.liqo-broker.io", "servicecatalogs");
/// The ServiceAccounts of `deploy/kubernetes/`.
const SERVICE_USER: &str = "system:serviceaccount:liqo:service-controller";
const VIRTUAL_NODES: (&str, &str) = ("offloading.liqo.io", "virtualnodes");
const CSRS: (&str, &str) = ("certificates.k8s.io", "certificatesigningrequests");
const CONFIGURATIONS: (&str, &str) = ("networking.liqo.io", "configurations");
const GATEWAY_SERVERS: (&str, &str) = ("networking.liqo.io", "gatewayservers");
const GATEWAY_CLIENTS: (&str, &str) = ("networking.liqo.io", "gatewayclients");
const PUBLIC_KEYS: (&str, &str) = ("networking.liqo.io", "publickeies");
const CONNECTIONS: (&str, &str) = ("networking.liqo.io", "connections");
/// The platform's service instance.
const INSTANCE: &str = "inst-1";

/// ServiceCatalog `team/shop`: service `db`, plan `remote` (its pods in
/// the customer's cluster), one ConfigMap.
fn service_catalog() -> Value {
    json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "ServiceCatalog",
           "metadata": {"name": "shop", "namespace": TEAM},
           "spec": {"services": [{
               "id": "db", "name": "Database", "type": "database",
               "plans": [{"id": "remote", "name": "remote", "cost": "3", "hosting": "Remote",
                          "resources": {"cpu": "1", "memory": "1Gi"}}],
               "templates": [{"name": "settings", "template":
                   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  instance: {{ instance_id | tojson }}\n"}],
               "bindingCredentials": {"uri": "db://{{ namespace }}"}}]}})
}

/// `purchase-controller --auto-peer` with networking (`liqoctl peer`'s
/// default) on the cluster `kubeconfig` reaches, as cluster `cluster_id`.
fn purchase_controller(kubeconfig: &Path, cluster_id: &str) -> Child {
    controller_as(kubeconfig, "v1", cluster_id)
        .args(["--auto-peer", "true", "--networking", "true"])
        .start_announced(1)
        .expect("purchase-controller")
        .0
}

/// The two clusters peered both ways, each contract running.
struct Both {
    market: Market,
    alice: String,
    /// C, cluster [`CONSUMER_ID`]: buys capacity, hosts the service.
    customer: Consumer,
    /// P, cluster [`PROVIDER_ID`]: sells capacity and the service.
    seller: Provider,
    platform: Platform,
    sid: String,
    plan: String,
    /// The capacity contract.
    capacity: String,
    /// The virtual node on C for P (capacity) and on P for C (service).
    capacity_node: String,
    service_node: String,
    _running: Vec<Child>,
    _liqo: Vec<Box<dyn std::any::Any>>,
    _dir: tempfile::TempDir,
    /// Last: the servers' tasks run on it until everything else is gone.
    rt: tokio::runtime::Runtime,
}

impl Both {
    fn open() -> Self {
        let rt = runtime();
        // The seller's account and capacity offer, its Liqo peering not
        // registered yet (see `register_peering` below).
        let env = e2e::catalog::Env::new(e2e::catalog::Backend::Embedded);
        let catalog = e2e::buying::start(
            &env,
            &["--osb-username", OSB_USER, "--osb-password", OSB_PASSWORD],
        );
        let provider_token = catalog.login(&provider_credentials());
        catalog.put_offer(OFFER, &e2e::buying::offer(), &provider_token);
        let admin = e2e::buying::admin(&catalog);
        let market = Market {
            _env: env,
            catalog,
            provider_token,
            admin,
        };
        let alice = market.consumer("alice");
        let tls = || rt.block_on(KubeApiServer::start_tls()).expect("API server");
        let customer = Consumer::start_on(tls(), &alice).expect("the customer's cluster");
        let seller = Provider::start_on(tls(), &market.url()).expect("the seller's cluster");
        let (c, p) = (&*customer.kube, &*seller.kube);
        liqo_install(c, CONSUMER_ID, "10.1.0.0/16", "10.71.0.0/16");
        liqo_install(p, PROVIDER_ID, "10.2.0.0/16", "10.72.0.0/16");
        // The seller runs purchase-controller and service-controller too.
        p.register_crd_file(&purchase_crd())
            .expect("the Purchase CRD");
        p.register_crd_file(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../deploy/kubernetes/service-controller/crd.yaml"),
        )
        .expect("the ServiceCatalog CRD");
        liqo_support::namespace(p, TEAM, json!({}));
        let dir = tempfile::tempdir().unwrap();
        let mut running = Vec::new();

        // Each cluster's Liqo, provider and consumer at once, with its
        // networking module (started once per cluster: it serves both).
        let here = |pod: &str, external: &str| liqo_model::networking::Options {
            pod_cidr: pod.into(),
            external_cidr: external.into(),
        };
        let liqo: Vec<Box<dyn std::any::Any>> = rt
            .block_on(async {
                let mut all: Vec<Box<dyn std::any::Any>> = Vec::new();
                for (kube, id, options) in [
                    (c, CONSUMER_ID, here("10.1.0.0/16", "10.71.0.0/16")),
                    (p, PROVIDER_ID, here("10.2.0.0/16", "10.72.0.0/16")),
                ] {
                    let provider =
                        liqo_model::Provider::start(kube, liqo_model::ProviderConfig::default())
                            .await?
                            .with_authentication(kube)
                            .await?;
                    let consumer = liqo_model::Consumer::start_as(kube, id)
                        .await?
                        .with_authentication(kube)
                        .await?
                        .with_identity_creator_only(kube)
                        .await?
                        .with_networking(kube, options)
                        .await?;
                    all.push(Box::new(provider));
                    all.push(Box::new(consumer));
                }
                all.push(Box::new(
                    liqo_model::Replicator::start(c, CONSUMER_ID, p, PROVIDER_ID).await?,
                ));
                all.push(Box::new(
                    liqo_model::Replicator::start(p, PROVIDER_ID, c, CONSUMER_ID).await?,
                ));
                // The service's namespace is offloaded from P to C.
                all.push(Box::new(
                    liqo_support::Offloading::start(p, PROVIDER_ID, c, CONSUMER_ID).await?,
                ));
                anyhow::Ok(all)
            })
            .expect("Liqo on both clusters");

        // On P: the peering users of its capacity customers.
        liqo_support::install_peering_user_roles(p, "liqo");
        let kubeconfig = dir.path().join("peering-user-controller.kubeconfig");
        p.write_kubeconfig_as(&kubeconfig, liqo_support::PEERING_USER_CONTROLLER)
            .unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, p.ca_pem().expect("a TLS server")).unwrap();
        running.push(
            liqo_support::peering_user_controller(
                p,
                &kubeconfig,
                &ca,
                &market.url(),
                &seller._dir.path().join("provider.json"),
                "liqo",
            )
            .start_announced(1)
            .expect("peering-user-controller")
            .0,
        );
        // On C: the peering user its platform hands over with the service
        // order (`liqoctl generate peering-user --consumer-cluster-id P`).
        liqo_support::install_peering_user_roles(c, "liqo");
        let service_peering = peering_user(c, PROVIDER_ID, dir.path());

        // purchase-controller on both, service-controller on P.
        running.push(purchase_controller(&customer.kubeconfig, CONSUMER_ID));
        let seller_kubeconfig = dir.path().join("seller-purchase-controller.kubeconfig");
        p.write_kubeconfig_as(&seller_kubeconfig, PURCHASE_USER)
            .unwrap();
        running.push(purchase_controller(&seller_kubeconfig, PROVIDER_ID));
        let service_kubeconfig = dir.path().join("service-controller.kubeconfig");
        p.write_kubeconfig_as(&service_kubeconfig, SERVICE_USER)
            .unwrap();
        running.push(
            Spawn::new("service-controller")
                .args(["--catalog-url", &market.url()])
                .arg("--catalog-credentials-file")
                .arg(seller._dir.path().join("provider.json"))
                .arg("--kubeconfig")
                .arg(&service_kubeconfig)
                .args(["--namespace", "liqo", "--lease-namespace", "liqo"])
                // The shipped defaults otherwise, as the ServiceWorld of
                // service_controller.rs runs it: the contracts on the
                // catalog's stream (`--poll-interval` only the fallback),
                // Kubernetes-side steps each `--retry` (5 s), one replica
                // taking the free Lease at once.
                .args(["--http-listen", "127.0.0.1:0"])
                .env("RUST_LOG", "info,service_controller=debug")
                .start_announced(1)
                .expect("service-controller")
                .0,
        );
        p.apply(SERVICE_CATALOGS, service_catalog());
        wait_until("the service offer published", || {
            get(&market.catalog, "/offer/db", None).status == 200
        });

        // C orders the service: P peers with C, networking first (the
        // gateway server on C, the service's Liqo provider).
        let platform = Platform::new(
            &market.url(),
            Auth::Basic(OSB_USER.into(), OSB_PASSWORD.into()),
        );
        let services = platform.catalog();
        let service = service_of(&services, "db").clone();
        let sid = service["id"].as_str().unwrap().to_string();
        let plan = plan_of(&service, "remote")["id"]
            .as_str()
            .unwrap()
            .to_string();
        let body = json!({"service_id": sid, "plan_id": plan, "organization_guid": "org",
            "space_guid": "space", "parameters": {},
            "context": {"platform": "kubernetes", "peering": {"kubeconfig": service_peering}}});
        let r = platform.send(
            reqwest::Method::PUT,
            &format!("/v2/service_instances/{INSTANCE}?accepts_incomplete=true"),
            Some(&body),
            Some("2.17"),
        );
        assert_eq!(r.status, 202, "{}", r.text);
        let op = r.json["operation"].as_str().map(str::to_string);
        match platform.wait(INSTANCE, &sid, &plan, op.as_deref()) {
            Outcome::Succeeded(_) => {}
            other => panic!("provisioning: {other:?}"),
        }

        // The seller registers its Liqo v1 peering (a peering user per
        // consumer cluster, made by its controller and released with each
        // contract) only now: with one registered, the catalog refuses to
        // sell a service over OSB ("consumerClusterID: is required",
        // `catalog/src/buying/contracts/service.rs` `terms`, which the OSB
        // provisioning shares with capacity contracts but cannot fill).
        let r = e2e::contracts::register_v1(
            &market.catalog,
            &market.provider_token,
            Some(json!({})),
            Some(CLASS),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        // C buys capacity: C peers with P over the tunnel the service's
        // peering made, used as it is (the gateways the other way round).
        customer.purchase(
            "capacity",
            &market.url(),
            json!({"offerID": OFFER, "planID": "small"}),
        );
        let ready = customer.wait_phase("capacity", "Ready").unwrap();
        let capacity = ready["status"]["contractID"].as_str().unwrap().to_string();
        assert_eq!(
            condition(&ready, "NetworkConnected")["reason"],
            "Connected",
            "{ready:#}"
        );

        let service_node = wait_virtual_node(&seller.kube, CONSUMER_ID);
        let both = Both {
            capacity_node: slice_node(&capacity),
            service_node,
            market,
            alice,
            customer,
            seller,
            platform,
            sid,
            plan,
            capacity,
            _running: running,
            _liqo: liqo,
            _dir: dir,
            rt,
        };
        both.check_both_running();
        both
    }

    /// Both directions up over one tunnel.
    fn check_both_running(&self) {
        let (c, p) = (&*self.customer.kube, &*self.seller.kube);
        wait_until("C's virtual node for P Ready", || {
            node_ready(c, &self.capacity_node)
        });
        wait_until("P's virtual node for C Ready", || {
            node_ready(p, &self.service_node)
        });
        assert_eq!(wait_virtual_node(c, PROVIDER_ID), self.capacity_node);
        // One tunnel: the server on C (made for the service), the client
        // on P; the capacity peering used it as it was.
        assert_eq!(network_objects(c, PROVIDER_ID), [1, 1, 0, 1]);
        assert_eq!(network_objects(p, CONSUMER_ID), [1, 0, 1, 1]);
        assert!(connected(c, PROVIDER_ID) && connected(p, CONSUMER_ID));
        let service = self.service_purchase().expect("the service's Purchase");
        assert_eq!(service["status"]["phase"], "Ready", "{service:#}");
        assert_eq!(
            condition(&service, "NetworkConnected")["status"],
            "True",
            "{service:#}"
        );
        wait_until("both ForeignClusters ConsumerAndProvider", || {
            role(c, PROVIDER_ID) == "ConsumerAndProvider"
                && role(p, CONSUMER_ID) == "ConsumerAndProvider"
        });
    }

    /// The Purchase service-controller made on P.
    fn service_purchase(&self) -> Option<Value> {
        let all = self.seller.kube.objects(PURCHASES);
        assert!(all.len() <= 1, "{all:#?}");
        all.into_iter().next()
    }

    /// The capacity contract ends: C's Purchase goes (C's peering with P
    /// unpeers), then the contract is cancelled in the catalog (P's
    /// peering-user controller removes C's peering user). Returns once
    /// that direction is gone on both clusters.
    fn end_capacity(&self) {
        let (c, p) = (&*self.customer.kube, &*self.seller.kube);
        self.customer.delete_purchase("capacity");
        self.market.cancel(&self.alice, &self.capacity);
        wait_until("C's VirtualNode for P removed", || {
            !has_virtual_node(c, &self.capacity_node)
        });
        wait_until("C's Identity for P removed", || {
            control_plane_identity(c, PROVIDER_ID).is_none()
        });
        wait_until("P's Tenant for C removed", || {
            p.get(
                TENANTS,
                Some(&liqo_support::tenant_namespace(CONSUMER_ID)),
                CONSUMER_ID,
            )
            .is_none()
        });
        wait_until("C's peering user on P removed", || {
            p.get(CSRS, None, &format!("liqo-peer-user-{CONSUMER_ID}"))
                .is_none()
        });
    }

    /// The service is deprovisioned through OSB: service-controller removes
    /// its objects and its Purchase on P (P's peering with C unpeers).
    /// Returns once that direction is gone on both clusters.
    fn end_service(&self) {
        let (c, p) = (&*self.customer.kube, &*self.seller.kube);
        let r = self.platform.send(
            reqwest::Method::DELETE,
            &format!(
                "/v2/service_instances/{INSTANCE}?service_id={}&plan_id={}&accepts_incomplete=true",
                self.sid, self.plan
            ),
            None,
            Some("2.17"),
        );
        assert_eq!(r.status, 202, "{}", r.text);
        let op = r.json["operation"].as_str().map(str::to_string);
        assert!(matches!(
            self.platform
                .wait(INSTANCE, &self.sid, &self.plan, op.as_deref()),
            Outcome::Gone
        ));
        wait_until("the service's Purchase removed", || {
            self.service_purchase().is_none()
        });
        wait_until("P's VirtualNode for C removed", || {
            !has_virtual_node(p, &self.service_node)
        });
        wait_until("P's Identity for C removed", || {
            control_plane_identity(p, CONSUMER_ID).is_none()
        });
        wait_until("C's Tenant for P removed", || {
            c.get(
                TENANTS,
                Some(&liqo_support::tenant_namespace(PROVIDER_ID)),
                PROVIDER_ID,
            )
            .is_none()
        });
    }

    /// The network of one direction's end, watched on both clusters: the
    /// gateways and Connections, and `node` on `node_cluster`, Ready.
    fn guard(&self, node_cluster: &KubeApiServer, node: &str) -> Guard {
        let (c, p) = (&*self.customer.kube, &*self.seller.kube);
        let net = |kube, resource: ApiResource, peer: &str| {
            let kind = (resource.group.clone(), resource.plural.clone());
            let connection = resource.kind == "Connection";
            Watched {
                kube,
                resource,
                namespace: Some(liqo_support::tenant_namespace(peer)),
                name: name_about(kube, (&kind.0, &kind.1), peer),
                ok: if connection {
                    |o: &Value| o["status"]["value"] == "Connected"
                } else {
                    |_: &Value| true
                },
            }
        };
        let watched = vec![
            net(c, liqo_model::networking::gateway_servers(), PROVIDER_ID),
            net(c, liqo_model::networking::connections(), PROVIDER_ID),
            net(p, liqo_model::networking::gateway_clients(), CONSUMER_ID),
            net(p, liqo_model::networking::connections(), CONSUMER_ID),
            Watched {
                kube: node_cluster,
                resource: liqo_model::consts::nodes(),
                namespace: None,
                name: node.to_string(),
                ok: |n: &Value| ready(n),
            },
        ];
        Guard::start(&self.rt, watched)
    }
}

/// The virtual node of a contract's slice: named as the slice
/// (`contract-<id>`).
fn slice_node(contract: &str) -> String {
    format!("contract-{}", contract.to_ascii_lowercase())
}

/// The one virtual node on `kube` for `peer`, once there.
fn wait_virtual_node(kube: &KubeApiServer, peer: &str) -> String {
    let found = || -> Vec<String> {
        kube.objects(NODES)
            .into_iter()
            .filter(|n| {
                n["metadata"]["labels"]["liqo.io/type"] == "virtual-node"
                    && n["metadata"]["labels"]["liqo.io/remote-cluster-id"] == peer
            })
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    wait_until(&format!("a virtual node for {peer}"), || {
        !found().is_empty()
    });
    let nodes = found();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    nodes[0].clone()
}

fn ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// `kube` holds the VirtualNode `name` (Liqo names a virtual node's Node
/// after it).
fn has_virtual_node(kube: &KubeApiServer, name: &str) -> bool {
    kube.objects(VIRTUAL_NODES)
        .iter()
        .any(|vn| vn["metadata"]["name"] == name)
}

fn node_ready(kube: &KubeApiServer, name: &str) -> bool {
    kube.get(NODES, None, name).is_some_and(|n| ready(&n))
}

/// The role of `kube`'s ForeignCluster for `peer` (`status.role`).
fn role(kube: &KubeApiServer, peer: &str) -> String {
    kube.get(FOREIGN_CLUSTERS, None, peer)
        .and_then(|fc| fc["status"]["role"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn control_plane_identity(kube: &KubeApiServer, peer: &str) -> Option<Value> {
    kube.get(
        IDENTITIES,
        Some(&liqo_support::tenant_namespace(peer)),
        &format!("controlplane-{peer}"),
    )
}

fn about(kube: &KubeApiServer, kind: (&str, &str), peer: &str) -> Vec<Value> {
    let namespace = liqo_support::tenant_namespace(peer);
    kube.objects(kind)
        .into_iter()
        .filter(|o| {
            o["metadata"]["namespace"] == namespace.as_str()
                && o["metadata"]["labels"]["liqo.io/remote-cluster-id"] == peer
        })
        .collect()
}

/// The networking objects on `kube` about `peer`: Configurations,
/// GatewayServers, GatewayClients, PublicKeys.
fn network_objects(kube: &KubeApiServer, peer: &str) -> Vec<usize> {
    [
        CONFIGURATIONS,
        GATEWAY_SERVERS,
        GATEWAY_CLIENTS,
        PUBLIC_KEYS,
    ]
    .into_iter()
    .map(|kind| about(kube, kind, peer).len())
    .collect()
}

fn connected(kube: &KubeApiServer, peer: &str) -> bool {
    about(kube, CONNECTIONS, peer)
        .iter()
        .any(|c| c["status"]["value"] == "Connected")
}

/// The name of the one object of `kind` on `kube` about `peer`.
fn name_about(kube: &KubeApiServer, kind: (&str, &str), peer: &str) -> String {
    let found = about(kube, kind, peer);
    assert_eq!(found.len(), 1, "{} about {peer}: {found:#?}", kind.1);
    found[0]["metadata"]["name"].as_str().unwrap().to_string()
}

/// One object a [`Guard`] watches, and what it must stay.
struct Watched<'a> {
    kube: &'a KubeApiServer,
    resource: ApiResource,
    namespace: Option<String>,
    name: String,
    ok: fn(&Value) -> bool,
}

/// Watches of objects that must stay as they are: every change a watch
/// reports (the first listing included, and any listing again after a
/// broken watch) is checked, so a deletion, or a state that does not hold
/// even for a moment, is recorded.
struct Guard {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    state: Arc<Mutex<GuardState>>,
    count: usize,
}

#[derive(Default)]
struct GuardState {
    /// The watches that listed their object as it must be.
    armed: std::collections::BTreeSet<String>,
    broken: Vec<String>,
}

impl Guard {
    fn start(rt: &tokio::runtime::Runtime, watched: Vec<Watched<'_>>) -> Guard {
        let state = Arc::new(Mutex::new(GuardState::default()));
        let count = watched.len();
        let mut tasks = Vec::new();
        for w in watched {
            let client = rt
                .block_on(liqo_model::identity::client_in_groups(
                    w.kube,
                    "kube-test-admin",
                    &["system:masters"],
                ))
                .expect("a client");
            let state = state.clone();
            let url = w.kube.url();
            let (resource, namespace, name, ok) = (w.resource, w.namespace, w.name, w.ok);
            tasks.push(rt.spawn(async move {
                let api: Api<DynamicObject> = match &namespace {
                    Some(ns) => Api::namespaced_with(client, ns, &resource),
                    None => Api::all_with(client, &resource),
                };
                let what = format!("{} {name} ({url})", resource.kind);
                let mut listed = false;
                let mut events = watcher(api, watcher::Config::default()).boxed();
                while let Some(event) = events.next().await {
                    let mut state = state.lock().unwrap();
                    let object = |o: &DynamicObject| {
                        (o.metadata.name.as_deref() == Some(name.as_str()))
                            .then(|| serde_json::to_value(o).unwrap())
                    };
                    match event {
                        Ok(watcher::Event::Init) => listed = false,
                        Ok(watcher::Event::InitApply(o)) | Ok(watcher::Event::Apply(o)) => {
                            if let Some(o) = object(&o) {
                                listed = true;
                                if !ok(&o) {
                                    state.broken.push(format!("{what} became {o}"));
                                }
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            if listed {
                                state.armed.insert(what.clone());
                            } else {
                                state.broken.push(format!("{what} not listed"));
                            }
                        }
                        Ok(watcher::Event::Delete(o)) => {
                            if object(&o).is_some() {
                                state.broken.push(format!("{what} deleted"));
                            }
                        }
                        // The watcher lists again after an error, and that
                        // listing is checked as the first.
                        Err(_) => {}
                    }
                }
            }));
        }
        let guard = Guard {
            tasks,
            state,
            count,
        };
        wait_until("the guard's watches listed their objects", || {
            let state = guard.state.lock().unwrap();
            assert!(state.broken.is_empty(), "{:#?}", state.broken);
            state.armed.len() == guard.count
        });
        guard
    }

    /// Stop watching; what went wrong meanwhile.
    fn stop(self) -> Vec<String> {
        for task in &self.tasks {
            task.abort();
        }
        let state = self.state.lock().unwrap();
        state.broken.clone()
    }
}

/// Everything of the peering gone on both clusters: virtual nodes,
/// authentication, the tunnel.
fn all_torn_down(c: &KubeApiServer, p: &KubeApiServer) {
    wait_until("the network gone from C", || {
        network_objects(c, PROVIDER_ID) == [0, 0, 0, 0]
            && about(c, CONNECTIONS, PROVIDER_ID).is_empty()
    });
    wait_until("the network gone from P", || {
        network_objects(p, CONSUMER_ID) == [0, 0, 0, 0]
            && about(p, CONNECTIONS, CONSUMER_ID).is_empty()
    });
    for (kube, peer) in [(c, PROVIDER_ID), (p, CONSUMER_ID)] {
        assert!(control_plane_identity(kube, peer).is_none());
        assert!(kube
            .get(TENANTS, Some(&liqo_support::tenant_namespace(peer)), peer)
            .is_none());
        // The VirtualNodes: the model leaves their Nodes (Node deletion
        // is not modelled, `liqo-model/src/lib.rs`).
        let virtual_nodes = kube.objects(VIRTUAL_NODES);
        assert!(virtual_nodes.is_empty(), "{virtual_nodes:#?}");
    }
    wait_until("neither ForeignCluster consumer nor provider", || {
        role(c, PROVIDER_ID) == "Unknown" && role(p, CONSUMER_ID) == "Unknown"
    });
}

/// Capacity ends first: the service's direction (P's virtual node for C)
/// keeps its node Ready and the tunnel untouched throughout; then the
/// service ends and P's purchase-controller takes the tunnel down, though
/// it runs the other way round for it (its server on P).
#[test]
fn capacity_ends_first_the_service_keeps_its_tunnel_then_both_go() {
    let both = Both::open();
    let (c, p) = (&*both.customer.kube, &*both.seller.kube);
    let guard = both.guard(p, &both.service_node);
    both.end_capacity();
    // The ended direction's teardown is complete once both ForeignClusters
    // say one role (Liqo's reading, which the next unpeering relies on).
    wait_until("C is P's provider only, P C's consumer only", || {
        role(c, PROVIDER_ID) == "Consumer" && role(p, CONSUMER_ID) == "Provider"
    });
    let broken = guard.stop();
    assert!(broken.is_empty(), "the service's direction: {broken:#?}");
    assert!(node_ready(p, &both.service_node));
    assert!(connected(c, PROVIDER_ID) && connected(p, CONSUMER_ID));
    let service = both.service_purchase().unwrap();
    assert_eq!(service["status"]["phase"], "Ready", "{service:#}");

    both.end_service();
    all_torn_down(c, p);
}

/// The service ends first: the capacity direction (C's virtual node for
/// P) keeps its node Ready and the tunnel untouched throughout; then the
/// capacity contract ends and everything goes.
#[test]
fn the_service_ends_first_capacity_keeps_its_tunnel_then_both_go() {
    let both = Both::open();
    let (c, p) = (&*both.customer.kube, &*both.seller.kube);
    let guard = both.guard(c, &both.capacity_node);
    both.end_service();
    wait_until("C is P's consumer only, P C's provider only", || {
        role(c, PROVIDER_ID) == "Provider" && role(p, CONSUMER_ID) == "Consumer"
    });
    let broken = guard.stop();
    assert!(broken.is_empty(), "the capacity direction: {broken:#?}");
    assert!(node_ready(c, &both.capacity_node));
    assert!(connected(c, PROVIDER_ID) && connected(p, CONSUMER_ID));
    let capacity = both.customer.get_purchase("capacity").unwrap();
    assert_eq!(capacity["status"]["phase"], "Ready", "{capacity:#}");

    both.end_capacity();
    all_torn_down(c, p);
}
