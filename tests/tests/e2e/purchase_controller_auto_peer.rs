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
/// The second consumer cluster.
const OTHER_ID: &str = "consumer-2";

/// On the provider, the real `peering-user-controller` as its
/// ServiceAccount (the RBAC `deploy/` ships is already loaded there),
/// with Liqo's peering-user roles installed; it authenticates to the
/// catalog as the provider and hands each consumer's kubeconfig to that
/// consumer's contracts.
fn peering_user_controller(provider: &Provider, catalog: &str) -> Child {
    peering_user_controller_at(provider, catalog, None)
}

/// [`peering_user_controller`], telling consumers `address` (its
/// `--api-server-address`) instead of the provider's API server.
fn peering_user_controller_at(provider: &Provider, catalog: &str, address: Option<&str>) -> Child {
    let kube = &provider.kube;
    let own = kube.url();
    liqo_support::provider_peering_user_controller(
        kube,
        provider._dir.path(),
        catalog,
        address.unwrap_or(&own),
    )
    .and_then(|spawn| Ok(spawn.start_announced(1)?.0))
    .expect("peering-user-controller")
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
    selling_at(rt, market, provider, networking, None)
}

/// [`selling`], the kubeconfigs naming `address` as the provider's API
/// server (its peering-user controller's `--api-server-address`).
fn selling_at(
    rt: &tokio::runtime::Runtime,
    market: &Market,
    provider: &Provider,
    networking: Option<liqo_model::networking::Options>,
    address: Option<&str>,
) -> (Child, liqo_model::Provider) {
    let r = e2e::contracts::register_v1(
        &market.catalog,
        &market.provider_token,
        Some(json!({})),
        Some(CLASS),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let peering_users = peering_user_controller_at(provider, &market.url(), address);
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
        // The contract's changes come on the catalog's stream: the shipped
        // --poll-interval (the fallback). A short --resync: the tests of a
        // contract's end by time (expiry, ending soon) see the periodic re-read.
        .args(["--resync", "500ms"])
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
            .await?
            .with_identity_creator_only(c)
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
    offloadable_namespace(&consumer.kube, "apps");
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

/// The `Authenticated` condition's reason.
fn authenticated(purchase: &serde_json::Value) -> serde_json::Value {
    condition(purchase, "Authenticated")["reason"].clone()
}

/// The `Authenticated` condition is False with `reason`, a message
/// containing `names`, and the Purchase is not Ready.
#[track_caller]
fn reported(purchase: &serde_json::Value, reason: &str, names: &str) {
    let authenticated = condition(purchase, "Authenticated");
    assert_eq!(
        (&authenticated["status"], &authenticated["reason"]),
        (&json!("False"), &json!(reason)),
        "{purchase:#}"
    );
    assert!(
        authenticated["message"]
            .as_str()
            .is_some_and(|m| m.contains(names)),
        "the message does not name {names:?}: {purchase:#}"
    );
    assert_ne!(purchase["status"]["phase"], "Ready", "{purchase:#}");
}

/// A Purchase (networking off) of the provider's plan, as "auto".
fn buy_auto(consumer: &Consumer, market: &Market) {
    consumer.purchase(
        "auto",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small", "networking": false}),
    );
}

/// Forward every connection to `listener` to `to`: the provider's API
/// server answering at the address its kubeconfigs name.
async fn forward(listener: tokio::net::TcpListener, to: String) {
    while let Ok((mut inbound, _)) = listener.accept().await {
        let to = to.clone();
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(&to).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

/// The kubeconfig released for the contract names an address where
/// nothing answers (`purchase-controller/src/authentication.rs`
/// `provider_failure`: a failed connection): `Authenticated` False with
/// reason `ProviderUnreachable`, saying the provider cannot be reached,
/// and nothing written there; once the address answers (the provider's
/// API server behind it) the handshake goes on by itself, to the nonce
/// Liqo here has yet to sign.
#[test]
fn a_provider_that_cannot_be_reached_is_reported_until_it_can() {
    let rt = runtime();
    let (market, _alice, consumer, provider) = world(&rt);
    // Told to consumers before anything listens there: taken below.
    let port = e2e::free_port();
    let address = format!("https://127.0.0.1:{port}");
    let (_peering_users, _provider_liqo) =
        selling_at(&rt, &market, &provider, None, Some(&address));
    let _controller = auto_peer_controller(&consumer, CONSUMER_ID, false);
    buy_auto(&consumer, &market);
    let waiting = consumer
        .wait_purchase("auto", |p| authenticated(p) == "ProviderUnreachable")
        .unwrap();
    reported(&waiting, "ProviderUnreachable", "cannot be reached");
    let on_provider = liqo_support::tenant_namespace(CONSUMER_ID);
    assert!(
        provider
            .kube
            .get(SECRETS, Some(&on_provider), "liqo-nonce")
            .is_none(),
        "a nonce Secret made on an unreachable provider"
    );

    // The address answers now: the provider's API server behind it.
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
        .unwrap();
    let target = provider
        .kube
        .url()
        .trim_start_matches("https://")
        .to_string();
    let _forwarding = rt.spawn(forward(listener, target));
    consumer
        .wait_purchase("auto", |p| authenticated(p) == "WaitingForSignature")
        .unwrap();
    assert!(provider
        .kube
        .get(SECRETS, Some(&on_provider), "liqo-nonce")
        .is_some());
}

/// The provider's nonce changes mid-handshake — its nonce Secret removed,
/// so a new one is made and its Liqo fills it with a new nonce — while
/// the signed-nonce Secret here holds the old one: `Authenticated` False
/// with reason `NonceMismatch` naming that Secret, as Liqo's
/// `utils/nonce.go:70-77` refuses it, and no Tenant applied with it.
/// Deleting that Secret, as the message says, starts the handshake again
/// with the provider's current nonce.
#[test]
fn a_signed_nonce_of_another_nonce_is_reported_until_deleted() {
    let rt = runtime();
    let (market, _alice, consumer, provider) = world(&rt);
    let (_peering_users, _provider_liqo) = selling(&rt, &market, &provider, None);
    let _controller = auto_peer_controller(&consumer, CONSUMER_ID, false);
    buy_auto(&consumer, &market);
    // This cluster's Liqo is not running: the nonce stays unsigned.
    consumer
        .wait_purchase("auto", |p| authenticated(p) == "WaitingForSignature")
        .unwrap();
    let on_provider = liqo_support::tenant_namespace(CONSUMER_ID);
    let on_consumer = liqo_support::tenant_namespace(PROVIDER_ID);
    let nonce = |kube: &kube_test_server::KubeApiServer, namespace: &str, name: &str| {
        kube.get(SECRETS, Some(namespace), name)
            .map(|s| s["data"]["nonce"].clone())
            .filter(|n| n.as_str().is_some_and(|n| !n.is_empty()))
    };
    let first = nonce(&provider.kube, &on_provider, "liqo-nonce").expect("the provider's nonce");
    assert_eq!(
        nonce(&consumer.kube, &on_consumer, "liqo-signed-nonce"),
        Some(first.clone())
    );

    provider
        .kube
        .delete(SECRETS, &format!("{on_provider}/liqo-nonce"));
    let waiting = consumer
        .wait_purchase("auto", |p| authenticated(p) == "NonceMismatch")
        .unwrap();
    reported(
        &waiting,
        "NonceMismatch",
        &format!("{on_consumer}/liqo-signed-nonce"),
    );
    let second = nonce(&provider.kube, &on_provider, "liqo-nonce").expect("a new nonce");
    assert_ne!(second, first, "the provider's nonce did not change");
    assert!(
        provider.kube.objects(TENANTS).is_empty(),
        "a Tenant applied with a signed nonce of another nonce"
    );

    consumer
        .kube
        .delete(SECRETS, &format!("{on_consumer}/liqo-signed-nonce"));
    consumer
        .wait_purchase("auto", |p| authenticated(p) == "WaitingForSignature")
        .unwrap();
    assert_eq!(
        nonce(&consumer.kube, &on_consumer, "liqo-signed-nonce"),
        Some(second)
    );
}

/// The provider's tenant namespace for this consumer removed (its
/// peering-user controller stopped, so nothing makes it again) where
/// peering users may read namespaces cluster-wide: `Authenticated` False
/// with reason `ProviderTenantNamespaceMissing` naming it. (With only the
/// RoleBinding `liqoctl generate peering-user` makes in that namespace,
/// the binding goes with it and the provider answers 403 instead, a
/// `ProviderUnreachable`.) The provider's controller back, the namespace
/// is made again — with a new nonce, which the signed nonce here no
/// longer matches (`NonceMismatch`) until it is deleted.
#[test]
fn a_missing_provider_tenant_namespace_is_reported_until_made_again() {
    let rt = runtime();
    let (market, _alice, consumer, provider) = world(&rt);
    // The provider lets peering users (group liqo.io, the peering-user
    // controller's O) read namespaces anywhere.
    provider.kube.apply(
        ("rbac.authorization.k8s.io", "clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "peering-users-read-namespaces"},
               "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]}),
    );
    provider.kube.apply(
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "peering-users-read-namespaces"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "peering-users-read-namespaces"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "liqo.io"}]}),
    );
    let (mut peering_users, _provider_liqo) = selling(&rt, &market, &provider, None);
    let _controller = auto_peer_controller(&consumer, CONSUMER_ID, false);
    buy_auto(&consumer, &market);
    consumer
        .wait_purchase("auto", |p| authenticated(p) == "WaitingForSignature")
        .unwrap();

    peering_users.kill();
    let on_provider = liqo_support::tenant_namespace(CONSUMER_ID);
    provider
        .kube
        .delete_object(NAMESPACES, None, &on_provider)
        .expect("the tenant namespace deleted");
    let waiting = consumer
        .wait_purchase("auto", |p| {
            authenticated(p) == "ProviderTenantNamespaceMissing"
        })
        .unwrap();
    reported(&waiting, "ProviderTenantNamespaceMissing", &on_provider);
    assert!(provider.kube.get(NAMESPACES, None, &on_provider).is_none());

    let _peering_users = peering_user_controller(&provider, &market.url());
    consumer
        .wait_purchase("auto", |p| authenticated(p) == "NonceMismatch")
        .unwrap();
    assert!(provider.kube.get(NAMESPACES, None, &on_provider).is_some());
    let on_consumer = liqo_support::tenant_namespace(PROVIDER_ID);
    consumer
        .kube
        .delete(SECRETS, &format!("{on_consumer}/liqo-signed-nonce"));
    consumer
        .wait_purchase("auto", |p| authenticated(p) == "WaitingForSignature")
        .unwrap();
}
