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
//! Liqo's authentication controllers (nonce, signature, Tenant, Identity).
//! The peering user is made on the provider as the provider's
//! peering-user controller makes it (tenant namespace, CN
//! `liqo-peer-user-<consumer>-<hex>` O `liqo.io`, a RoleBinding to the
//! chart's tenant-namespace ClusterRole) and its kubeconfig attached to
//! the provider's registration, which the catalog releases with the
//! contract (quicker than running `peering-user-controller`, which
//! `peering_users.rs` covers).

use serde_json::{json, Value};

use crate::liqo_support::{self, IDENTITIES, NODES, TENANTS};
use crate::purchase_controller_support::*;

const NAMESPACES: (&str, &str) = ("", "namespaces");
const CLUSTER_ROLES: (&str, &str) = ("rbac.authorization.k8s.io", "clusterroles");
const ROLE_BINDINGS: (&str, &str) = ("rbac.authorization.k8s.io", "rolebindings");

/// The chart's ClusterRole for peering users in their tenant namespace,
/// its Tenant and Secret rules as Liqo v1.2.0 ships them
/// (`deployments/liqo/files/liqo-peering-user-tenant-ns-ClusterRole.yaml`);
/// the networking rules are left out (no networking here).
fn peering_user_role() -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": "liqo-peering-user-tenant-ns",
                        "labels": {"app.kubernetes.io/component": "peering-user"}},
           "rules": [
               {"apiGroups": [""], "resources": ["namespaces", "services"], "verbs": ["get"]},
               {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete", "get", "list"]},
               {"apiGroups": ["authentication.liqo.io"], "resources": ["tenants"],
                "verbs": ["create", "delete", "get", "list", "update"]}]})
}

/// On the provider, what `liqoctl generate peering-user` (and the
/// provider's peering-user controller) leaves for consumer `CONSUMER_ID`:
/// its tenant namespace and a certificate user bound there; the
/// kubeconfig of that user.
fn peering_user(provider: &Provider) -> String {
    let kube = &provider.kube;
    let tenant = liqo_support::tenant_namespace(CONSUMER_ID);
    liqo_support::namespace(
        kube,
        &tenant,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": CONSUMER_ID}),
    );
    kube.apply(CLUSTER_ROLES, peering_user_role());
    let user = format!("liqo-peer-user-{CONSUMER_ID}-0123456789abcdef0123456789abcdef");
    kube.apply(
        ROLE_BINDINGS,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": format!("liqo-peer-user-{CONSUMER_ID}-tenant-ns-writer"),
                            "namespace": tenant},
               "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
               "roleRef": {"kind": "ClusterRole", "name": "liqo-peering-user-tenant-ns",
                           "apiGroup": "rbac.authorization.k8s.io"}}),
    );
    let cert = kube.client_cert(&user, &["liqo.io"]).expect("client cert");
    let path = provider._dir.path().join("peering-user.kubeconfig");
    kube.write_kubeconfig_with_certificate(&path, &user, &cert)
        .expect("kubeconfig");
    std::fs::read_to_string(path).expect("kubeconfig text")
}

#[test]
fn a_purchase_with_no_peering_reaches_ready_with_no_command_run() {
    let rt = runtime();
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let consumer = Consumer::start_on(
        rt.block_on(kube_test_server::KubeApiServer::start_tls())
            .unwrap(),
        &alice,
    )
    .unwrap();
    liqo_support::namespace(&consumer.kube, "apps", json!({}));
    let provider = Provider::start_on(
        rt.block_on(kube_test_server::KubeApiServer::start_tls())
            .unwrap(),
        &market.url(),
    )
    .unwrap();
    let kubeconfig = peering_user(&provider);
    let r = e2e::contracts::register_peering(
        &market.catalog,
        &market.provider_token,
        Some(&kubeconfig),
        Some(CLASS),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    // The provider's Liqo, with its authentication module; nothing peered.
    let _provider_liqo = rt
        .block_on(async {
            let p = &provider.kube;
            liqo_model::Provider::start(p, liqo_model::ProviderConfig::default())
                .await?
                .with_authentication(p)
                .await
        })
        .unwrap();
    let controller = || {
        consumer
            .controller_spawn("v1")
            .args(["--auto-peer", "true"])
            .start_announced(1)
            .unwrap()
            .0
    };
    let mut first = controller();
    consumer.purchase(
        "auto",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small", "namespaces": ["apps"]}),
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
    let _consumer_liqo = rt
        .block_on(async {
            let (p, c) = (&provider.kube, &consumer.kube);
            anyhow::Ok((
                liqo_model::Consumer::start_as(c, CONSUMER_ID)
                    .await?
                    .with_authentication(c)
                    .await?,
                liqo_model::Replicator::start(c, CONSUMER_ID, p, PROVIDER_ID).await?,
            ))
        })
        .unwrap();
    let _offload = crate::liqo_stand_in::offload(rt.handle(), consumer.kube.clone(), CONSUMER_ID);
    let _controller = controller();
    let ready = consumer.wait_phase("auto", "Ready").unwrap();
    assert!(ready["status"]["peeringCommand"].is_null(), "{ready:#}");
    assert_eq!(
        ready["status"]["granted"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    );

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
    // the slice's Identity, which the model does not make yet:
    // `liqo_support::slice_identity`).
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
    liqo_support::slice_identity(&consumer.kube, PROVIDER_ID, &slice);
    wait_until("a Ready virtual node", || {
        consumer.kube.get(NODES, None, &slice).is_some_and(|n| {
            n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    });

    // A second Purchase of the provider uses the peering as it is, and
    // keeps it when the first goes (reference-counted).
    consumer.purchase(
        "auto-2",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small"}),
    );
    consumer.wait_phase("auto-2", "Ready").unwrap();
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
}
