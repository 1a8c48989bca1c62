//! Re-peering with a provider whose Liqo still holds this consumer's
//! Tenant (issue 40, audit finding 2): `purchase-controller --auto-peer`
//! re-applies the Tenant as `liqoctl peer` does (`CreateOrUpdate`,
//! v1.2.0 `pkg/liqoctl/authenticate/cluster.go:176-196`), and the
//! provider's `peering-user-controller` undoes a drain of its own when the
//! consumer buys again. Three cases, each reaching Ready:
//!
//! - the consumer buys again while its Tenant is drained: the provider's
//!   real peering-user controller drained it when the last contract ended
//!   (`--drain-tenant`, as deployed) and the model's Tenant controller
//!   unbound the consumer's control plane (`handleTenantDrained`); the new
//!   contract sets it `Active` again and the new Purchase is granted;
//! - a Tenant whose handshake failed (signed over a nonce no longer handed
//!   out, as an interrupted earlier `liqoctl peer` leaves it: refused by
//!   Liqo, no status) is applied again with a signature of the current
//!   nonce;
//! - a consumer whose cluster was rebuilt (Liqo installed anew: new keys,
//!   same cluster ID) while the provider kept its Tenant and the
//!   certificate issued for the old key: the Identity ends up with a
//!   certificate for the new key, and the kubeconfig Liqo makes from it
//!   authenticates to the provider.
//!
//! Both clusters are HTTPS test API servers running the model of Liqo's
//! authentication controllers; the provider sells with a peering user per
//! contract, made by its real controller; networking is off (the
//! Purchases' `spec.networking: false`).

use e2e::{Child, Spawn};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::liqo_support::{self, IDENTITIES, TENANTS};
use crate::purchase_controller_support::*;

const ROLE_BINDINGS: (&str, &str) = ("rbac.authorization.k8s.io", "rolebindings");
const EVENTS: (&str, &str) = ("", "events");
/// The ServiceAccount of `deploy/kubernetes/peering-user-controller`.
/// What Liqo's Tenant controller binds the consumer's control plane with
/// in its tenant namespace (`pkg/tenantNamespace/bindings.go:128-130`).
const CONTROL_PLANE_BINDING: &str = "liqo-binding-liqo-remote-controlplane";

/// The catalog with consumer "alice", her cluster and the provider's, both
/// HTTPS test API servers with Liqo's cluster-ID ConfigMap and networking
/// CRDs (unpeering looks for networking objects on both sides).
fn world(rt: &tokio::runtime::Runtime) -> (Market, String, Consumer, Provider) {
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let consumer = consumer_cluster(rt, &alice);
    let provider = Provider::start_on(tls(rt), &market.url()).unwrap();
    cluster_id_configmap(&provider.kube, PROVIDER_ID);
    provider.kube.register_liqo_networking_crds().unwrap();
    (market, alice, consumer, provider)
}

fn tls(rt: &tokio::runtime::Runtime) -> KubeApiServer {
    rt.block_on(KubeApiServer::start_tls()).unwrap()
}

/// A consumer cluster for `token`'s Purchases, as Liqo's install leaves it.
fn consumer_cluster(rt: &tokio::runtime::Runtime, token: &str) -> Consumer {
    let consumer = Consumer::start_on(tls(rt), token).unwrap();
    cluster_id_configmap(&consumer.kube, CONSUMER_ID);
    consumer.kube.register_liqo_networking_crds().unwrap();
    consumer
}

/// The provider sells with a peering user per contract, made by its real
/// controller as deployed (drains a Tenant before deleting it, with a
/// grace no test waits out), and runs Liqo with its authentication module.
fn selling(
    rt: &tokio::runtime::Runtime,
    market: &Market,
    provider: &Provider,
) -> (Child, liqo_model::Provider) {
    let r = e2e::contracts::register_v1(
        &market.catalog,
        &market.provider_token,
        Some(json!({})),
        Some(CLASS),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let kube = &provider.kube;
    let (peering_users, _) = liqo_support::provider_peering_user_controller(
        kube,
        provider._dir.path(),
        &market.url(),
        &kube.url(),
    )
    .unwrap()
    .args(["--drain-tenant", "true", "--drain-grace", "10m"])
    .start_announced(1)
    .unwrap();
    let liqo = rt
        .block_on(async {
            liqo_model::Provider::start(kube, liqo_model::ProviderConfig::default())
                .await?
                .with_authentication(kube)
                .await
        })
        .unwrap();
    (peering_users, liqo)
}

/// Liqo on the consumer cluster with its authentication module (its keys
/// made when missing), and the crdReplicator to the provider.
fn consumer_liqo(
    rt: &tokio::runtime::Runtime,
    consumer: &Consumer,
    provider: &Provider,
) -> (liqo_model::Consumer, liqo_model::Replicator) {
    rt.block_on(async {
        let (p, c) = (&provider.kube, &consumer.kube);
        let liqo = liqo_model::Consumer::start_as(c, CONSUMER_ID)
            .await?
            .with_authentication(c)
            .await?;
        anyhow::Ok((
            liqo,
            liqo_model::Replicator::start(c, CONSUMER_ID, p, PROVIDER_ID).await?,
        ))
    })
    .unwrap()
}

/// `purchase-controller --auto-peer` on `consumer`.
fn controller(consumer: &Consumer) -> Child {
    Spawn::new("purchase-controller")
        .args(["--liqo-api", "v1", "--cluster-id", CONSUMER_ID])
        .arg("--kubeconfig")
        .arg(&consumer.kubeconfig)
        .args(["--http-listen", "127.0.0.1:0"])
        // The contract's changes come on the catalog's stream: the shipped
        // --poll-interval (the fallback). A short --resync: the tests of a
        // contract's end by time (expiry, ending soon) see the periodic re-read.
        .args(["--resync", "500ms"])
        .args(["--retry", "200ms", "--retry-max", "1s"])
        .args(["--catalog-timeout", "2s", "--auto-peer", "true"])
        .args(["--lease-duration", "2s", "--lease-renew-deadline", "1500ms"])
        .args(["--lease-retry", "200ms"])
        .env("RUST_LOG", "info,purchase_controller=debug")
        .start_announced(1)
        .unwrap()
        .0
}

/// The consumer's Tenant on the provider.
fn tenant(provider: &Provider) -> Option<Value> {
    provider.kube.get(
        TENANTS,
        Some(&liqo_support::tenant_namespace(CONSUMER_ID)),
        CONSUMER_ID,
    )
}

fn bound(provider: &Provider) -> bool {
    provider
        .kube
        .get(
            ROLE_BINDINGS,
            Some(&liqo_support::tenant_namespace(CONSUMER_ID)),
            CONTROL_PLANE_BINDING,
        )
        .is_some()
}

/// The consumer cluster's Liqo keys, as `authentication-keys` holds them.
fn keys_of(consumer: &Consumer) -> liqo_model::cluster_keys::Keys {
    use base64::Engine;
    let secret = consumer
        .kube
        .get(SECRETS, Some("liqo"), "authentication-keys")
        .expect("authentication-keys");
    let field = |k: &str| {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(secret["data"][k].as_str().unwrap())
            .unwrap();
        String::from_utf8(bytes).unwrap()
    };
    liqo_model::cluster_keys::Keys {
        private_pem: field("privateKey"),
        public_pem: field("publicKey"),
    }
}

fn contract_id(purchase: &Value) -> String {
    purchase["status"]["contractID"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A Ready Purchase granted its plan (the class controller's grant).
fn assert_granted(ready: &Value) {
    assert_eq!(
        ready["status"]["granted"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"}),
        "{ready:#}"
    );
}

/// Put (`true`) or take away a finalizer of the test's on the slice
/// replica `name` in the consumer's tenant namespace.
fn hold_replica(provider: &Provider, name: &str, hold: bool) {
    const HOLD: &str = "e2e.liqo-broker.io/hold";
    let mut replica = provider.replica(name).expect("the slice's replica");
    let mut finalizers: Vec<Value> = replica["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != HOLD)
        .collect();
    if hold {
        finalizers.push(json!(HOLD));
    }
    if !hold && finalizers.is_empty() && replica["metadata"]["deletionTimestamp"].is_string() {
        // What the API server does once a deleted object's last finalizer
        // goes.
        let namespace = liqo_support::tenant_namespace(CONSUMER_ID);
        provider.kube.delete(SLICES, &format!("{namespace}/{name}"));
        return;
    }
    replica["metadata"]["finalizers"] = json!(finalizers);
    provider.kube.apply(SLICES, replica);
}

#[test]
fn buying_again_while_the_tenant_is_drained_reaches_ready() {
    let rt = runtime();
    let (market, alice, consumer, provider) = world(&rt);
    let (_peering_users, _provider_liqo) = selling(&rt, &market, &provider);
    let _consumer_liqo = consumer_liqo(&rt, &consumer, &provider);
    let mut first_controller = controller(&consumer);
    consumer.purchase(
        "first",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small", "networking": false}),
    );
    let first = consumer.wait_phase("first", "Ready").unwrap();
    assert!(bound(&provider));

    // The drain lasts until Liqo has removed the consumer's slices here
    // (or --drain-grace), and the model removes them at once: a finalizer
    // on the slice's replica, as a slow controller of the provider's would
    // hold it, keeps the Tenant drained until the consumer has bought
    // again, however quickly the peering-user controller looks.
    let held = format!("contract-{}", contract_id(&first).to_ascii_lowercase());
    hold_replica(&provider, &held, true);

    // The consumer's controller is down (an upgrade, say) while its only
    // contract ends: nothing here unpeers. The provider's peering-user
    // controller drains the Tenant, and Liqo's Tenant controller unbinds
    // the consumer's control plane (`handleTenantDrained`).
    first_controller.kill();
    market.cancel(&alice, &contract_id(&first));
    wait_until("the Tenant drained", || {
        tenant(&provider).is_some_and(|t| t["spec"]["tenantCondition"] == "Drained")
    });
    wait_until("the control plane unbound", || !bound(&provider));

    // The consumer buys again within --drain-grace: the drain is undone
    // (`liqoctl activate tenant`'s way), Liqo binds the control plane
    // again.
    let again = market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID}));
    let again_id = again["id"].as_str().unwrap();
    wait_until("the Tenant active again", || {
        tenant(&provider).is_some_and(|t| t["spec"]["tenantCondition"] == "Active")
    });
    wait_until("the control plane bound again", || bound(&provider));
    assert!(
        provider
            .replica(&held)
            .is_some_and(|r| r["metadata"]["deletionTimestamp"].is_string()),
        "the drained Tenant's slice was being removed meanwhile"
    );
    hold_replica(&provider, &held, false);

    // The new Purchase, with the controller back, is granted its plan.
    consumer.purchase(
        "again",
        &market.url(),
        json!({"contractID": again_id, "networking": false}),
    );
    let _controller = controller(&consumer);
    // The ended Purchase is wound up meanwhile (and may unpeer, if it is
    // first to look: the new one then authenticates again).
    consumer.wait_phase("first", "Ended").unwrap();
    let ready = consumer
        .wait_purchase("again", |p| {
            p["status"]["phase"] == "Ready"
                && tenant(&provider).is_some_and(|t| t["spec"]["tenantCondition"] == "Active")
        })
        .unwrap();
    assert_granted(&ready);
    let slice = format!("contract-{}", again_id.to_ascii_lowercase());
    let replica = provider.replica(&slice).unwrap();
    assert_eq!(
        replica["status"]["resources"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    );
}

#[test]
fn a_tenant_whose_handshake_failed_is_applied_again() {
    let rt = runtime();
    let (market, alice, consumer, provider) = world(&rt);
    let (_peering_users, _provider_liqo) = selling(&rt, &market, &provider);
    let _consumer_liqo = consumer_liqo(&rt, &consumer, &provider);
    let bought = market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID}));
    let id = bought["id"].as_str().unwrap();
    let on_provider = liqo_support::tenant_namespace(CONSUMER_ID);
    wait_until("the provider's tenant namespace", || {
        provider
            .kube
            .get(liqo_support::NAMESPACES, None, &on_provider)
            .is_some()
    });

    // An earlier `liqoctl peer`, interrupted, left the nonce Secret and a
    // Tenant signed over a nonce the provider no longer hands out: Liqo
    // refuses it and writes no status.
    provider.kube.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "liqo-nonce", "namespace": on_provider,
                            "labels": {"liqo.io/nonce": "true", "liqo.io/remote-cluster-id": CONSUMER_ID}}}),
    );
    let keys = keys_of(&consumer);
    let stale =
        liqo_model::cluster_keys::sign_nonce(&keys.private_pem, b"an earlier nonce").unwrap();
    // Liqo's Tenant webhook reads the namespace from its informer cache
    // (`pkg/webhooks/tenant/validate.go:136-159`, the model's `tenant_webhook.rs`), which
    // may not hold it yet just after the controller made it: it refuses
    // until it does, as Liqo's would.
    let forged = liqo_model::tenant::forge(CONSUMER_ID, &keys, &stale, &on_provider).unwrap();
    wait_until(
        "the Tenant admitted once the webhook's cache has its namespace",
        || match provider.kube.try_apply(TENANTS, forged.clone()) {
            Ok(_) => true,
            Err(e) if e.contains("failed getting the tenant namespace") => false,
            Err(e) => panic!("kube.apply: a real API server refuses this object: {e}"),
        },
    );
    wait_until("the Tenant refused", || {
        provider.kube.objects(EVENTS).iter().any(|e| {
            e["involvedObject"]["kind"] == "Tenant" && e["reason"] == "SignatureVerificationFailed"
        })
    });
    assert!(tenant(&provider).unwrap()["status"]["authParams"].is_null());

    let _controller = controller(&consumer);
    consumer.purchase(
        "after-failure",
        &market.url(),
        json!({"contractID": id, "networking": false}),
    );
    let ready = consumer.wait_phase("after-failure", "Ready").unwrap();
    assert_granted(&ready);
    let tenant = tenant(&provider).unwrap();
    assert!(
        tenant["status"]["authParams"]["signedCRT"].is_string(),
        "{tenant:#}"
    );
    // Applied as liqoctl applies it: this controller's labels now.
    assert_eq!(
        tenant["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "purchase-controller"
    );
}

#[test]
fn a_rebuilt_consumer_gets_a_certificate_for_its_new_keys() {
    let rt = runtime();
    let (market, alice, consumer, provider) = world(&rt);
    let (_peering_users, _provider_liqo) = selling(&rt, &market, &provider);
    let first_liqo = consumer_liqo(&rt, &consumer, &provider);
    let mut first_controller = controller(&consumer);
    consumer.purchase(
        "gpu",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small", "networking": false}),
    );
    let id = contract_id(&consumer.wait_phase("gpu", "Ready").unwrap());
    let old_keys = keys_of(&consumer);

    // The consumer's cluster is rebuilt: a new API server with Liqo
    // installed anew (new keys, the same cluster ID) and the Purchase
    // restored from its manifest, naming the contract, still active. The
    // provider keeps the Tenant, its status, and the certificate it issued
    // for the old key.
    first_controller.kill();
    drop(first_liqo);
    drop(consumer);
    let consumer = consumer_cluster(&rt, &alice);
    let _consumer_liqo = consumer_liqo(&rt, &consumer, &provider);
    let new_keys = keys_of(&consumer);
    assert_ne!(new_keys.public_pem, old_keys.public_pem);
    let _controller = controller(&consumer);
    consumer.purchase(
        "gpu",
        &market.url(),
        json!({"contractID": id, "networking": false}),
    );
    let ready = consumer.wait_phase("gpu", "Ready").unwrap();
    assert_granted(&ready);

    // The kubeconfig Liqo made from the Identity (its certificate, this
    // cluster's new key) authenticates to the provider as this cluster's
    // control plane, which may read the slices in its tenant namespace.
    let on_consumer = liqo_support::tenant_namespace(PROVIDER_ID);
    let identity = consumer
        .kube
        .get(
            IDENTITIES,
            Some(&on_consumer),
            &format!("controlplane-{PROVIDER_ID}"),
        )
        .unwrap();
    let secret = identity["status"]["kubeconfigSecretRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    wait_until("the Identity's kubeconfig", || {
        consumer
            .kube
            .get(SECRETS, Some(&on_consumer), &secret)
            .is_some()
    });
    let kubeconfig = {
        use base64::Engine;
        let secret = consumer
            .kube
            .get(SECRETS, Some(&on_consumer), &secret)
            .unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(secret["data"]["kubeconfig"].as_str().unwrap())
            .unwrap();
        String::from_utf8(bytes).unwrap()
    };
    let listed = rt.block_on(async {
        let file = kube::config::Kubeconfig::from_yaml(&kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
        let client = kube::Client::try_from(config)?;
        let slices: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            client,
            &liqo_support::tenant_namespace(CONSUMER_ID),
            &liqo_model::consts::resource_slices(),
        );
        anyhow::Ok(slices.list(&Default::default()).await?.items.len())
    });
    assert!(
        listed.is_ok(),
        "the control-plane kubeconfig does not authenticate: {listed:?}"
    );
}
