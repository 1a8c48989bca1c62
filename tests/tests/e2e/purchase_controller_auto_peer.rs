//! `purchase-controller --auto-peer` end to end (issue 31): a consumer with
//! no peering buys, and with no command run by hand the Purchase reaches
//! Ready — the controller did Liqo v1's authentication itself, as
//! `liqoctl peer --networking-disabled` does, through the peering-user
//! kubeconfig the catalog released for the contract. It stops where Liqo
//! has yet to act (the signature, this cluster's Liqo started late) with
//! the step as the `Authenticated` reason, and a restarted controller
//! resumes; a second Purchase of the provider keeps the peering, and the
//! last one's deletion removes the Identity here and the Tenant there.
//!
//! Both clusters are HTTPS test API servers (CSRs signed by their CA,
//! client certificates authenticated by CN and O) running the model of
//! Liqo's authentication controllers (nonce, signature, Tenant, Identity)
//! and, on the consumer, its NamespaceOffloading controller. The provider
//! sells with a peering user per contract: its real
//! `peering-user-controller` makes one per consumer cluster (under the
//! roles Liqo v1.2.0's chart installs) and the catalog releases each
//! kubeconfig to its own consumer's contracts. A second consumer cluster
//! buys from the same provider: it gets its own peering user, and stays
//! Ready and peered when the first consumer's contracts end and the first
//! consumer's peering user is removed.

use e2e::{Child, Spawn};
use serde_json::json;

use crate::liqo_support::{self, IDENTITIES, NODES, TENANTS};
use crate::purchase_controller_support::*;

const NAMESPACES: (&str, &str) = ("", "namespaces");
const CSRS: (&str, &str) = ("certificates.k8s.io", "certificatesigningrequests");
const ROLE_BINDINGS: (&str, &str) = ("rbac.authorization.k8s.io", "rolebindings");
/// The ServiceAccount of `deploy/kubernetes/peering-user-controller`.
const PEERING_USER_CONTROLLER: &str = "system:serviceaccount:liqo:peering-user-controller";
/// The second consumer cluster.
const OTHER_ID: &str = "consumer-2";

/// On the provider, the real `peering-user-controller` as its
/// ServiceAccount (the RBAC `deploy/` ships is already loaded there),
/// with Liqo's peering-user roles installed; it authenticates to the
/// catalog as the provider and hands each consumer's kubeconfig to that
/// consumer's contracts.
fn peering_user_controller(provider: &Provider, catalog: &str) -> Child {
    let kube = &provider.kube;
    liqo_support::install_peering_user_roles(kube, "liqo");
    let dir = provider._dir.path();
    let kubeconfig = dir.join("peering-user-controller.kubeconfig");
    kube.write_kubeconfig_as(&kubeconfig, PEERING_USER_CONTROLLER)
        .expect("kubeconfig");
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, kube.ca_pem().expect("a TLS server")).expect("CA file");
    liqo_support::peering_user_controller(
        kube,
        &kubeconfig,
        &ca,
        catalog,
        &dir.join("provider.json"),
        "liqo",
    )
    .start_announced(1)
    .expect("peering-user-controller")
    .0
}

/// The provider sells with a peering user per contract (`v1: {}`, in its
/// class, made by its real controller), and runs Liqo with its
/// authentication module (and networking module, with `networking`);
/// nothing peered.
fn selling(
    rt: &tokio::runtime::Runtime,
    market: &Market,
    provider: &Provider,
    networking: Option<liqo_model::networking::Options>,
) -> (Child, liqo_model::Provider) {
    let r = e2e::contracts::register_v1(
        &market.catalog,
        &market.provider_token,
        Some(json!({})),
        Some(CLASS),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let peering_users = peering_user_controller(provider, &market.url());
    let liqo = rt
        .block_on(async {
            let p = &provider.kube;
            let liqo = liqo_model::Provider::start(p, liqo_model::ProviderConfig::default())
                .await?
                .with_authentication(p)
                .await?;
            match networking {
                Some(options) => liqo.with_networking(p, options).await,
                None => Ok(liqo),
            }
        })
        .unwrap();
    (peering_users, liqo)
}

/// `purchase-controller --auto-peer` on `consumer` as cluster
/// `cluster_id` (the shared spawn is cluster [`CONSUMER_ID`]'s), with
/// `--networking` as `networking` says.
fn auto_peer_controller(consumer: &Consumer, cluster_id: &str, networking: bool) -> Child {
    Spawn::new("purchase-controller")
        .args(["--liqo-api", "v1", "--cluster-id", cluster_id])
        .args(["--networking", &networking.to_string()])
        .arg("--kubeconfig")
        .arg(&consumer.kubeconfig)
        .args(["--http-listen", "127.0.0.1:0"])
        .args(["--poll-interval", "200ms", "--resync", "500ms"])
        .args(["--retry", "200ms", "--retry-max", "1s"])
        .args(["--catalog-timeout", "2s", "--auto-peer", "true"])
        // A restarted (killed) controller takes its predecessor's Lease
        // within 2 s, not the default 15 s (issue 31's leader election).
        .args(["--lease-duration", "2s", "--lease-renew-deadline", "1500ms"])
        .args(["--lease-retry", "200ms"])
        .env("RUST_LOG", "info,purchase_controller=debug")
        .start_announced(1)
        .expect("purchase-controller")
        .0
}

/// On `consumer` (cluster `cluster_id`), Liqo's controllers with their
/// authentication module (and networking module, with `networking`), and
/// the crdReplicator to the provider; they stop when dropped.
fn consumer_liqo(
    rt: &tokio::runtime::Runtime,
    consumer: &Consumer,
    cluster_id: &str,
    provider: &Provider,
    networking: Option<liqo_model::networking::Options>,
) -> (liqo_model::Consumer, liqo_model::Replicator) {
    rt.block_on(async {
        let (p, c) = (&provider.kube, &consumer.kube);
        let mut liqo = liqo_model::Consumer::start_as(c, cluster_id)
            .await?
            .with_authentication(c)
            .await?;
        if let Some(options) = networking {
            liqo = liqo.with_networking(c, options).await?;
        }
        anyhow::Ok((
            liqo,
            liqo_model::Replicator::start(c, cluster_id, p, PROVIDER_ID).await?,
        ))
    })
    .expect("the consumer's Liqo")
}

/// The provider's objects of consumer `cluster_id`'s peering user: its
/// CSR, its key Secret in Liqo's namespace and its RoleBindings (two,
/// when made as `liqoctl generate peering-user` makes them).
fn peering_user_objects(provider: &Provider, cluster_id: &str) -> usize {
    let kube = &provider.kube;
    let user = format!("liqo-peer-user-{cluster_id}");
    let bindings = kube
        .objects(ROLE_BINDINGS)
        .iter()
        .filter(|b| b["metadata"]["labels"]["liqo.io/peering-user-name"] == user.as_str())
        .count();
    usize::from(kube.get(CSRS, None, &user).is_some())
        + usize::from(kube.get(SECRETS, Some("liqo"), &user).is_some())
        + bindings
}

/// The catalog with consumer "alice", her cluster and the provider's, both
/// HTTPS test API servers.
fn world(rt: &tokio::runtime::Runtime) -> (Market, String, Consumer, Provider) {
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let tls = || {
        rt.block_on(kube_test_server::KubeApiServer::start_tls())
            .unwrap()
    };
    let consumer = Consumer::start_on(tls(), &alice).unwrap();
    // Liqo installed (its cluster ID), before its controllers run.
    cluster_id_configmap(&consumer.kube, CONSUMER_ID);
    let provider = Provider::start_on(tls(), &market.url()).unwrap();
    (market, alice, consumer, provider)
}

#[test]
fn a_purchase_with_no_peering_reaches_ready_with_no_command_run() {
    let rt = runtime();
    let (market, alice, consumer, provider) = world(&rt);
    liqo_support::namespace(&consumer.kube, "apps", json!({}));
    // Liqo's chart installs the networking CRDs with networking disabled
    // too: unpeering looks for networking objects to remove, on both sides.
    consumer.kube.register_liqo_networking_crds().unwrap();
    provider.kube.register_liqo_networking_crds().unwrap();
    // The provider's Liqo, with its authentication module; nothing peered.
    let (_peering_users, _provider_liqo) = selling(&rt, &market, &provider, None);
    // Networking on by the flag, off for these Purchases (spec.networking):
    // `liqoctl peer --networking-disabled`'s way.
    let controller = || auto_peer_controller(&consumer, CONSUMER_ID, true);
    let mut first = controller();
    consumer.purchase(
        "auto",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small", "namespaces": ["apps"], "networking": false}),
    );
    // This cluster's Liqo is not running yet: the nonce waits for its
    // signature, and the Purchase says so.
    let waiting = consumer
        .wait_purchase("auto", |p| {
            condition(p, "Authenticated")["reason"] == "WaitingForSignature"
        })
        .unwrap();
    assert_eq!(condition(&waiting, "Peered")["reason"], "Authenticating");
    assert!(waiting["status"]["peeringCommand"].is_null(), "{waiting:#}");
    // A new controller resumes with the handshake as it stands (the
    // provider's nonce is single-use), once this cluster's Liqo runs.
    first.kill();
    let _consumer_liqo = consumer_liqo(&rt, &consumer, CONSUMER_ID, &provider, None);
    let _offload = rt
        .block_on(liqo_support::Offloading::start(
            &consumer.kube,
            CONSUMER_ID,
            &provider.kube,
            PROVIDER_ID,
        ))
        .unwrap();
    // The slice's Identity, which the model does not make yet, so that
    // Liqo makes the virtual node the offloading selects.
    let _identities =
        crate::liqo_stand_in::slice_identities(rt.handle(), consumer.kube.clone(), PROVIDER_ID);
    let _controller = controller();
    let ready = consumer.wait_phase("auto", "Ready").unwrap();
    assert!(ready["status"]["peeringCommand"].is_null(), "{ready:#}");
    assert!(condition(&ready, "NetworkConnected").is_null(), "{ready:#}");
    assert_eq!(
        ready["status"]["granted"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    );
    assert_eq!(condition(&ready, "NamespacesOffloaded")["status"], "True");
    // The namespace offloaded as Liqo reports it (the model's
    // NamespaceOffloading status, not the test's).
    let offloading = consumer
        .kube
        .get(OFFLOADINGS, Some("apps"), "offloading")
        .unwrap();
    assert_eq!(
        offloading["status"]["offloadingPhase"], "Ready",
        "{offloading:#}"
    );
    // Through this consumer's own peering user, made by the provider's
    // controller.
    assert_eq!(peering_user_objects(&provider, CONSUMER_ID), 4);

    // The Tenant it applied, accepted by the provider's Liqo (a signed
    // certificate in authParams), and the Identity made from it, which
    // Liqo turned into a kubeconfig.
    let on_provider = liqo_support::tenant_namespace(CONSUMER_ID);
    let on_consumer = liqo_support::tenant_namespace(PROVIDER_ID);
    let tenant = provider
        .kube
        .get(TENANTS, Some(&on_provider), CONSUMER_ID)
        .unwrap();
    assert!(
        tenant["status"]["authParams"]["signedCRT"].is_string(),
        "{tenant:#}"
    );
    assert_eq!(
        tenant["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "purchase-controller"
    );
    let identity_name = format!("controlplane-{PROVIDER_ID}");
    let identity = consumer
        .kube
        .get(IDENTITIES, Some(&on_consumer), &identity_name)
        .unwrap();
    assert_eq!(identity["spec"]["type"], "ControlPlane");
    assert_eq!(identity["spec"]["namespace"], on_provider.as_str());
    assert!(identity["status"]["kubeconfigSecretRef"]["name"].is_string());
    // The slice accepted on the provider, a Ready virtual node here (from
    // the slice's Identity, the stand-in's).
    let slice = format!(
        "contract-{}",
        ready["status"]["contractID"]
            .as_str()
            .unwrap()
            .to_ascii_lowercase()
    );
    let replica = provider.replica(&slice).unwrap();
    assert_eq!(
        replica["status"]["resources"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    );
    wait_until("a Ready virtual node", || {
        consumer.kube.get(NODES, None, &slice).is_some_and(|n| {
            n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    });

    // A second consumer cluster buys from the same provider: its own
    // peering user, its own Tenant there, Ready.
    let bob = market.consumer("bob");
    let other = Consumer::start_on(
        rt.block_on(kube_test_server::KubeApiServer::start_tls())
            .unwrap(),
        &bob,
    )
    .unwrap();
    let _other_liqo = consumer_liqo(&rt, &other, OTHER_ID, &provider, None);
    // Networking off by the flag.
    let _other_controller = auto_peer_controller(&other, OTHER_ID, false);
    other.purchase(
        "bobs",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small"}),
    );
    other.wait_phase("bobs", "Ready").unwrap();
    // The first consumer's contract, and the credentials it carries, are
    // not the second's to read.
    let firsts = ready["status"]["contractID"].as_str().unwrap();
    assert_eq!(market.contract(&bob, firsts).0, 404);
    assert_eq!(peering_user_objects(&provider, OTHER_ID), 4);
    let others_tenant = liqo_support::tenant_namespace(OTHER_ID);
    assert!(provider
        .kube
        .get(TENANTS, Some(&others_tenant), OTHER_ID)
        .is_some());

    // A second Purchase of the provider uses the peering as it is, and
    // keeps it when the first goes (reference-counted).
    consumer.purchase(
        "auto-2",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small", "networking": false}),
    );
    let second = consumer.wait_phase("auto-2", "Ready").unwrap();
    consumer.delete_purchase("auto");
    assert!(consumer
        .kube
        .get(IDENTITIES, Some(&on_consumer), &identity_name)
        .is_some());
    assert!(provider
        .kube
        .get(TENANTS, Some(&on_provider), CONSUMER_ID)
        .is_some());

    // The last Purchase of the provider goes: its Identity here, its
    // Tenant there.
    consumer.delete_purchase("auto-2");
    assert!(consumer
        .kube
        .get(IDENTITIES, Some(&on_consumer), &identity_name)
        .is_none());
    wait_until("the Tenant gone from the provider", || {
        provider
            .kube
            .get(TENANTS, Some(&on_provider), CONSUMER_ID)
            .is_none()
    });
    assert!(consumer.kube.get(NAMESPACES, None, &on_consumer).is_some());
    // Its contracts end (cancelled in the catalog; a deleted Purchase
    // leaves its contract as it is): the provider's controller removes
    // this consumer's peering user. The other consumer keeps its own, its
    // Tenant and its Ready Purchase.
    assert_eq!(peering_user_objects(&provider, CONSUMER_ID), 4);
    for purchase in [&ready, &second] {
        let id = purchase["status"]["contractID"].as_str().unwrap();
        market.cancel(&alice, id);
    }
    wait_until("the first consumer's peering user removed", || {
        peering_user_objects(&provider, CONSUMER_ID) == 0
    });
    assert_eq!(peering_user_objects(&provider, OTHER_ID), 4);
    assert!(provider
        .kube
        .get(TENANTS, Some(&others_tenant), OTHER_ID)
        .is_some());
    assert_eq!(
        other.get_purchase("bobs").unwrap()["status"]["phase"],
        "Ready"
    );
}

const CONFIGURATIONS: (&str, &str) = ("networking.liqo.io", "configurations");
const GATEWAY_SERVERS: (&str, &str) = ("networking.liqo.io", "gatewayservers");
const GATEWAY_CLIENTS: (&str, &str) = ("networking.liqo.io", "gatewayclients");
const PUBLIC_KEYS: (&str, &str) = ("networking.liqo.io", "publickeies");
const CONNECTIONS: (&str, &str) = ("networking.liqo.io", "connections");

/// The networking objects about `peer` in `kube`'s tenant namespace for
/// it, by kind (each kind's count, in the order of the constants above).
fn network_objects(kube: &kube_test_server::KubeApiServer, peer: &str) -> Vec<usize> {
    let namespace = liqo_support::tenant_namespace(peer);
    [
        CONFIGURATIONS,
        GATEWAY_SERVERS,
        GATEWAY_CLIENTS,
        PUBLIC_KEYS,
    ]
    .into_iter()
    .map(|kind| {
        kube.objects(kind)
            .iter()
            .filter(|o| {
                o["metadata"]["namespace"] == namespace.as_str()
                    && o["metadata"]["labels"]["liqo.io/remote-cluster-id"] == peer
            })
            .count()
    })
    .collect()
}

/// The Connection about `peer` on `kube` is Connected.
fn connected(kube: &kube_test_server::KubeApiServer, peer: &str) -> bool {
    kube.objects(CONNECTIONS).iter().any(|c| {
        c["metadata"]["labels"]["liqo.io/remote-cluster-id"] == peer
            && c["status"]["value"] == "Connected"
    })
}

/// With networking (the default, as `liqoctl peer` has it), the controller
/// sets up Liqo's networking before authenticating: a Configuration on
/// each side naming the other's CIDRs, the GatewayServer on the provider
/// (through the peering user, under Liqo's chart roles), the GatewayClient
/// here, a PublicKey on each side, and the Purchase reaches Ready with
/// the Connection Connected on both. Ending the contract unpeers in Liqo's
/// order: the Identity, then the network objects on both sides.
#[test]
fn with_networking_the_clusters_connect_before_authenticating_and_disconnect_at_the_end() {
    let rt = runtime();
    let (market, alice, consumer, provider) = world(&rt);
    let here = liqo_model::networking::Options {
        pod_cidr: "10.1.0.0/16".into(),
        external_cidr: "10.71.0.0/16".into(),
    };
    let there = liqo_model::networking::Options {
        pod_cidr: "10.2.0.0/16".into(),
        external_cidr: "10.72.0.0/16".into(),
    };
    liqo_install(
        &consumer.kube,
        CONSUMER_ID,
        &here.pod_cidr,
        &here.external_cidr,
    );
    liqo_install(
        &provider.kube,
        PROVIDER_ID,
        &there.pod_cidr,
        &there.external_cidr,
    );
    let (_peering_users, _provider_liqo) = selling(&rt, &market, &provider, Some(there));
    let _consumer_liqo = consumer_liqo(&rt, &consumer, CONSUMER_ID, &provider, Some(here));
    let _controller = auto_peer_controller(&consumer, CONSUMER_ID, true);
    consumer.purchase(
        "net",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small"}),
    );
    let ready = consumer.wait_phase("net", "Ready").unwrap();
    let network = condition(&ready, "NetworkConnected");
    assert_eq!(
        (&network["status"], &network["reason"]),
        (&json!("True"), &json!("Connected")),
        "{ready:#}"
    );
    // Configuration, GatewayClient and PublicKey here; Configuration,
    // GatewayServer and PublicKey there; Connected on both.
    assert_eq!(network_objects(&consumer.kube, PROVIDER_ID), [1, 0, 1, 1]);
    assert_eq!(network_objects(&provider.kube, CONSUMER_ID), [1, 1, 0, 1]);
    assert!(connected(&consumer.kube, PROVIDER_ID));
    assert!(connected(&provider.kube, CONSUMER_ID));
    // Each Configuration names the other side's CIDRs.
    let on_consumer = liqo_support::tenant_namespace(PROVIDER_ID);
    let conf = consumer
        .kube
        .get(CONFIGURATIONS, Some(&on_consumer), PROVIDER_ID)
        .unwrap();
    assert_eq!(
        conf["spec"]["remote"]["cidr"],
        json!({"pod": ["10.2.0.0/16"], "external": ["10.72.0.0/16"]})
    );
    // Then authentication, as before.
    let identity = format!("controlplane-{PROVIDER_ID}");
    assert!(consumer
        .kube
        .get(IDENTITIES, Some(&on_consumer), &identity)
        .is_some());

    // The contract ends: the Identity goes, then the network objects on
    // both sides.
    let id = ready["status"]["contractID"].as_str().unwrap();
    market.cancel(&alice, id);
    consumer.wait_phase("net", "Ended").unwrap();
    wait_until("the network objects gone here", || {
        network_objects(&consumer.kube, PROVIDER_ID) == [0, 0, 0, 0]
    });
    assert!(consumer
        .kube
        .get(IDENTITIES, Some(&on_consumer), &identity)
        .is_none());
    wait_until("the network objects gone from the provider", || {
        network_objects(&provider.kube, CONSUMER_ID) == [0, 0, 0, 0]
    });
}

/// Networking asked for (the default) where this cluster's Liqo runs
/// without its networking module — no `networking.liqo.io` served — is
/// reported, not retried in silence: `NetworkConnected` False with reason
/// `NetworkingNotInstalled`, the Purchase not Ready, and nothing
/// authenticated meanwhile (networking comes first, as in `liqoctl peer`).
#[test]
fn networking_asked_for_where_liqo_has_none_is_reported() {
    let rt = runtime();
    let (market, _alice, consumer, provider) = world(&rt);
    // Liqo installed on both (IDs, IPAM), its networking module nowhere.
    liqo_install(&consumer.kube, CONSUMER_ID, "10.1.0.0/16", "10.71.0.0/16");
    liqo_install(&provider.kube, PROVIDER_ID, "10.2.0.0/16", "10.72.0.0/16");
    let (_peering_users, _provider_liqo) = selling(&rt, &market, &provider, None);
    let _consumer_liqo = consumer_liqo(&rt, &consumer, CONSUMER_ID, &provider, None);
    let _controller = auto_peer_controller(&consumer, CONSUMER_ID, true);
    consumer.purchase(
        "net",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small"}),
    );
    let waiting = consumer
        .wait_purchase("net", |p| {
            condition(p, "NetworkConnected")["reason"] == "NetworkingNotInstalled"
        })
        .unwrap();
    let network = condition(&waiting, "NetworkConnected");
    assert_eq!(network["status"], "False", "{waiting:#}");
    assert!(
        network["message"]
            .as_str()
            .is_some_and(|m| m.contains("--networking false")),
        "{waiting:#}"
    );
    assert_ne!(waiting["status"]["phase"], "Ready", "{waiting:#}");
    assert!(
        consumer.kube.objects(IDENTITIES).is_empty(),
        "authenticated before the networking"
    );
}
