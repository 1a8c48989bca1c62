//! `purchase-controller` end to end: the real catalog, the real consumer
//! controller, the real provider class controller (`--grant-policy
//! contracts`), two Kubernetes API test servers validating every object
//! against Liqo's CRDs, and Liqo v1.2's controllers as the model runs them
//! (v0.10's peering and NamespaceOffloading status by the stand-in).

use base64::Engine;
use serde_json::{json, Value};

use crate::liqo_stand_in::{self, FOREIGN_CLUSTERS_V0};
use crate::liqo_support::{self, FOREIGN_CLUSTERS};
use crate::purchase_controller_support::*;

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn slice_name(contract: &str) -> String {
    format!("contract-{}", contract.to_ascii_lowercase())
}

/// The consumer's ResourceSlice of `contract`, in the provider's tenant
/// namespace.
fn consumer_slice(consumer: &Consumer, contract: &str) -> Option<Value> {
    consumer.kube.get(
        SLICES,
        Some(&liqo_support::tenant_namespace(PROVIDER_ID)),
        &slice_name(contract),
    )
}

/// The Liqo v1 path: buy from an offer, be told the `liqoctl peer`
/// command, peer, get exactly the contract's resources, offload, report
/// `ready`; a second contract adds to the grant; deleting the Purchases
/// removes what they made and leaves what someone else made.
#[test]
fn v1_purchase_peers_grants_offloads_reports_and_cleans_up() {
    let rt = runtime();
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let consumer = Consumer::start(&rt, "v1", &alice).unwrap();
    offloadable_namespace(&consumer.kube, "apps");
    let provider = Provider::start(&rt, &market.url()).unwrap();
    let (mut controller, _) = consumer.controller("v1").unwrap();

    consumer.purchase(
        "gpu-burst",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small", "namespaces": ["apps"],
               "podOffloadingStrategy": "LocalAndRemote", "boughtBy": "market-autoscaler/team/burst"}),
    );
    // Not peered: the exact command, the kubeconfig in a Secret (not in
    // the status), the contract `pending` for this consumer cluster.
    let waiting = consumer
        .wait_purchase("gpu-burst", |p| p["status"]["peeringCommand"].is_string())
        .unwrap();
    let id = waiting["status"]["contractID"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(waiting["status"]["phase"], "Peering");
    assert_eq!(
        condition(&waiting, "Peered")["reason"],
        "PeeringCommandRequired"
    );
    assert_eq!(
        waiting["status"]["kubeconfigSecret"],
        "gpu-burst-peering-kubeconfig"
    );
    assert_eq!(
        waiting["status"]["peeringCommand"],
        "kubectl -n team get secret gpu-burst-peering-kubeconfig -o jsonpath='{.data.kubeconfig}' | base64 -d > provider.kubeconfig && \
         liqoctl peer --remote-kubeconfig provider.kubeconfig --create-resource-slice=false"
    );
    assert!(!waiting.to_string().contains("client-key-data"));
    let secret = consumer
        .kube
        .get(SECRETS, Some(TEAM), "gpu-burst-peering-kubeconfig")
        .unwrap();
    assert_eq!(secret["data"]["kubeconfig"], b64(&peering_kubeconfig()));
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], "Purchase");
    assert_eq!(
        secret["metadata"]["ownerReferences"][0]["name"],
        "gpu-burst"
    );
    // `spec.boughtBy` reached the catalog with the reservation and purchase.
    wait_until("the catalog shows the contract pending", || {
        let (status, c) = market.contract(&alice, &id);
        status == 200
            && c["state"] == "pending"
            && c["consumerClusterID"] == CONSUMER_ID
            && c["boughtBy"] == "market-autoscaler/team/burst"
    });
    // A restarted controller follows the recorded contract: it never buys
    // twice. (Its reconcile of a changed spec is the marker that it ran.)
    controller.kill();
    let (_controller, port) = consumer.controller("v1").unwrap();
    let changed = consumer
        .kube
        .merge_patch(
            PURCHASES,
            Some(TEAM),
            "gpu-burst",
            json!({"spec": {"podOffloadingStrategy": "Remote"}}),
            false,
        )
        .unwrap();
    let generation = changed["metadata"]["generation"].clone();
    let again = consumer
        .wait_purchase("gpu-burst", |p| {
            p["status"]["observedGeneration"] == generation
        })
        .unwrap();
    assert_eq!(again["status"]["contractID"], id.as_str());
    for list in ["/contracts", "/reservations"] {
        let r = e2e::buying::get(&market.catalog, list, Some(&alice));
        assert_eq!(r.status, 200, "{}", r.text);
        let ids: Vec<&str> = r
            .json
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["id"].as_str())
            .collect();
        assert_eq!(ids, [id.as_str()], "{list}: one, bought once");
    }

    // The operator peers (Liqo does its part from here).
    let _liqo = run_liqo(&rt, &consumer, &provider);
    let ready = consumer.wait_phase("gpu-burst", "Ready").unwrap();
    // Each transition is an Event on the Purchase.
    wait_until("an Event records the Purchase ready", || {
        consumer
            .kube
            .objects(("events.k8s.io", "events"))
            .iter()
            .any(|e| {
                e["regarding"]["name"] == "gpu-burst"
                    && e["regarding"]["kind"] == "Purchase"
                    && e["reason"] == "Ready"
                    && e["type"] == "Normal"
            })
    });
    assert!(ready["status"]["peeringCommand"].is_null());
    // The contract's resources, and the class's default pods (plan
    // `small` sells none: a virtual node without pods schedules nothing).
    assert_eq!(
        ready["status"]["granted"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    );
    assert_eq!(
        ready["status"]["observedGeneration"],
        ready["metadata"]["generation"]
    );
    for kind in [
        "ContractValid",
        "CatalogReachable",
        "Peered",
        "ResourcesGranted",
        "NamespacesOffloaded",
        "Ready",
    ] {
        assert_eq!(
            condition(&ready, kind)["status"],
            "True",
            "{kind}: {ready:#}"
        );
    }

    // The ResourceSlice, field by field.
    let tenant = liqo_support::tenant_namespace(PROVIDER_ID);
    let slice = consumer
        .kube
        .get(SLICES, Some(&tenant), &slice_name(&id))
        .unwrap();
    assert_eq!(
        slice["metadata"]["labels"],
        json!({"app.kubernetes.io/managed-by": "purchase-controller",
               "liqo.io/replication": "true", "liqo.io/remoteID": PROVIDER_ID,
               "liqo.io/remote-cluster-id": PROVIDER_ID})
    );
    assert_eq!(
        slice["metadata"]["annotations"],
        json!({"broker.liqo-broker.io/purchase": "team/gpu-burst", "liqo.io/create-virtual-node": "true"})
    );
    // consumerClusterID is Liqo's to fill: the purchase controller created
    // the slice without it and Liqo's local slice controller added it, with
    // the CSR, in one spec change (generation 2).
    let csr = liqo_support::slice_csr(&consumer.kube, &slice_name(&id), CONSUMER_ID);
    assert_eq!(
        slice["spec"],
        json!({"class": CLASS, "consumerClusterID": CONSUMER_ID, "providerClusterID": PROVIDER_ID,
               "csr": csr, "resources": {"cpu": "2", "memory": "4Gi"}})
    );
    assert_eq!(slice["metadata"]["generation"], 2, "{slice}");
    // The provider's controller granted the contract's resources, and
    // the class's default pods.
    let replica = provider.replica(&slice_name(&id)).unwrap();
    assert_eq!(
        replica["status"]["resources"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    );

    // The NamespaceOffloading, field by field.
    let offloading = consumer
        .kube
        .get(OFFLOADINGS, Some("apps"), "offloading")
        .unwrap();
    assert_eq!(offloading["apiVersion"], "offloading.liqo.io/v1beta1");
    assert_eq!(
        offloading["spec"],
        json!({"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "Remote",
               "clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                   {"key": "liqo.io/remote-cluster-id", "operator": "In", "values": [PROVIDER_ID]}]}]}})
    );

    // Both sides see the contract ready.
    wait_until("consumer and provider see the contract ready", || {
        let (_, mine) = market.contract(&alice, &id);
        let (_, sold) = market.contract(&market.provider_token, &id);
        mine["state"] == "ready" && sold["state"] == "ready" && sold.get("credentials").is_none()
    });

    // A second contract adds to the grant; a namespace with a
    // NamespaceOffloading someone else made is left alone.
    offloadable_namespace(&consumer.kube, "theirs");
    let theirs = json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading", "namespace": "theirs"},
        "spec": {"namespaceMappingStrategy": "EnforceSameName", "podOffloadingStrategy": "Local"}});
    consumer.kube.create(OFFLOADINGS, theirs).unwrap();
    let second = market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID}));
    let second_id = second["id"].as_str().unwrap().to_string();
    consumer.purchase(
        "more",
        &market.url(),
        json!({"contractID": second_id, "namespaces": ["apps"], "podOffloadingStrategy": "Remote"}),
    );
    consumer.wait_phase("more", "Ready").unwrap();
    let replica = provider.replica(&slice_name(&second_id)).unwrap();
    assert_eq!(
        replica["status"]["resources"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    );
    let first = provider.replica(&slice_name(&id)).unwrap();
    assert_eq!(
        first["status"]["resources"],
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    );
    let shared = consumer
        .kube
        .get(OFFLOADINGS, Some("apps"), "offloading")
        .unwrap();
    assert_eq!(
        shared["metadata"]["annotations"]["broker.liqo-broker.io/purchases"],
        format!("team/gpu-burst={PROVIDER_ID},team/more={PROVIDER_ID}")
    );
    // Listing "theirs" is a clear condition, and their object stays as is.
    let mut more = consumer.get_purchase("more").unwrap();
    more["spec"]["namespaces"] = json!(["apps", "theirs"]);
    consumer.kube.replace(PURCHASES, more, false).unwrap();
    let refused = consumer.wait_phase("more", "Failed").unwrap();
    assert_eq!(
        condition(&refused, "NamespacesOffloaded")["reason"],
        "OffloadingNotOurs"
    );
    let untouched = consumer
        .kube
        .get(OFFLOADINGS, Some("theirs"), "offloading")
        .unwrap();
    assert_eq!(untouched["spec"]["podOffloadingStrategy"], "Local");
    assert!(untouched["metadata"]["annotations"].is_null());
    // Back to "apps" alone: ready again, the same Event counted twice.
    let mut more = consumer.get_purchase("more").unwrap();
    more["spec"]["namespaces"] = json!(["apps"]);
    consumer.kube.replace(PURCHASES, more, false).unwrap();
    consumer.wait_phase("more", "Ready").unwrap();
    wait_until("the repeated Ready Event of \"more\" is counted", || {
        consumer
            .kube
            .objects(("events.k8s.io", "events"))
            .iter()
            .any(|e| {
                e["regarding"]["name"] == "more"
                    && e["reason"] == "Ready"
                    && e["series"]["count"].as_u64().is_some_and(|n| n >= 2)
            })
    });

    // /metrics and the probes: both Purchases ready (once each has seen
    // Liqo report the shared NamespaceOffloading again).
    let metrics = || {
        rt.block_on(crate::slice_controller_support::http_get(port, "/metrics"))
            .map(|(_, body)| body)
            .unwrap_or_default()
    };
    wait_until("/metrics counts two Purchases ready", || {
        let text = metrics();
        text.contains("purchase_controller_purchases{phase=\"Ready\"} 2")
            && text.contains("purchase_controller_purchases{phase=\"Failed\"} 0")
    });
    let (status, _) = rt
        .block_on(crate::slice_controller_support::http_get(port, "/readyz"))
        .unwrap();
    assert_eq!(status, 200);

    // Deleting the first Purchase removes its slice (and so its replica)
    // and its kubeconfig Secret; the shared NamespaceOffloading keeps the
    // second's provider. Deleting the second removes the rest.
    consumer.delete_purchase("gpu-burst");
    // Gone once Liqo's replicator has deleted its replica and released it.
    wait_until("the first slice is gone", || {
        consumer
            .kube
            .get(SLICES, Some(&tenant), &slice_name(&id))
            .is_none()
    });
    assert!(consumer
        .kube
        .get(SECRETS, Some(TEAM), "gpu-burst-peering-kubeconfig")
        .is_none());
    assert!(consumer
        .kube
        .get(SLICES, Some(&tenant), &slice_name(&second_id))
        .is_some());
    let kept = consumer
        .kube
        .get(OFFLOADINGS, Some("apps"), "offloading")
        .unwrap();
    assert_eq!(
        kept["metadata"]["annotations"]["broker.liqo-broker.io/purchases"],
        format!("team/more={PROVIDER_ID}")
    );
    wait_until("the first replica is gone", || {
        provider.replica(&slice_name(&id)).is_none()
    });

    consumer.delete_purchase("more");
    wait_until("the NamespaceOffloading is gone", || {
        consumer
            .kube
            .get(OFFLOADINGS, Some("apps"), "offloading")
            .is_none()
    });
    wait_until("the second slice is gone", || {
        consumer
            .kube
            .get(SLICES, Some(&tenant), &slice_name(&second_id))
            .is_none()
    });
    assert!(consumer
        .kube
        .get(OFFLOADINGS, Some("theirs"), "offloading")
        .is_some());
    // Liqo's own objects are not the controller's to delete.
    assert!(consumer
        .kube
        .get(FOREIGN_CLUSTERS, None, PROVIDER_ID)
        .is_some());
}

/// The Liqo v0.x path: exactly what `liqoctl peer out-of-band` creates,
/// waiting for the peering, a missing namespace as a clear condition, and
/// the v1alpha1 NamespaceOffloading.
#[test]
fn v0_purchase_peers_out_of_band() {
    let rt = runtime();
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let contract = market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID}));
    let id = contract["id"].as_str().unwrap().to_string();
    let consumer = Consumer::start(&rt, "v0", &alice).unwrap();
    let (_controller, _) = consumer.controller("v0").unwrap();
    consumer.purchase(
        "old",
        &market.url(),
        json!({"contractID": id, "namespaces": ["apps"], "namespaceMappingStrategy": "EnforceSameName"}),
    );
    let peering = consumer.wait_phase("old", "Peering").unwrap();
    assert_eq!(condition(&peering, "Peered")["reason"], "WaitingForPeering");

    let token = consumer
        .kube
        .get(
            SECRETS,
            Some("liqo"),
            &format!("remote-token-{PROVIDER_ID}"),
        )
        .unwrap();
    assert_eq!(
        token["metadata"]["labels"]["discovery.liqo.io/cluster-id"],
        PROVIDER_ID
    );
    assert_eq!(
        token["metadata"]["labels"]["discovery.liqo.io/auth-token"],
        ""
    );
    assert_eq!(token["data"], json!({"token": b64(PROVIDER_TOKEN)}));
    let fc = consumer
        .kube
        .get(FOREIGN_CLUSTERS_V0, None, PROVIDER_NAME)
        .unwrap();
    assert_eq!(
        fc["metadata"]["labels"]["discovery.liqo.io/cluster-id"],
        PROVIDER_ID
    );
    assert_eq!(
        fc["spec"],
        json!({"peeringType": "OutOfBand",
               "clusterIdentity": {"clusterID": PROVIDER_ID, "clusterName": PROVIDER_NAME},
               "foreignAuthUrl": PROVIDER_AUTH_URL, "foreignProxyUrl": "",
               "outgoingPeeringEnabled": "Yes", "incomingPeeringEnabled": "Auto",
               "insecureSkipTLSVerify": true})
    );
    wait_until("the contract is pending", || {
        market.contract(&alice, &id).1["state"] == "pending"
    });

    // Liqo peers; the namespace does not exist yet.
    liqo_stand_in::establish_v0(&consumer.kube, PROVIDER_NAME);
    let failed = consumer.wait_phase("old", "Failed").unwrap();
    let missing = condition(&failed, "NamespacesOffloaded");
    assert_eq!(missing["reason"], "NamespaceNotFound");
    assert!(
        missing["message"].as_str().unwrap().contains("apps"),
        "{missing}"
    );
    wait_until("the catalog hears why", || {
        let c = market.contract(&alice, &id).1;
        c["state"] == "failed" && c["reason"].as_str().is_some_and(|r| r.contains("apps"))
    });

    // The namespace appears: offloading is asked for, and until Liqo
    // reports it done the contract is `granted`, not `ready`.
    offloadable_namespace(&consumer.kube, "apps");
    let offloading = consumer.wait_phase("old", "Offloading").unwrap();
    assert_eq!(
        condition(&offloading, "NamespacesOffloaded")["reason"],
        "WaitingForLiqo"
    );
    wait_until("the contract is granted", || {
        market.contract(&alice, &id).1["state"] == "granted"
    });
    let _liqo = liqo_stand_in::offload(rt.handle(), consumer.kube.clone(), CONSUMER_ID);
    consumer.wait_phase("old", "Ready").unwrap();
    let offloading = consumer
        .kube
        .get(OFFLOADINGS, Some("apps"), "offloading")
        .unwrap();
    assert_eq!(offloading["apiVersion"], "offloading.liqo.io/v1alpha1");
    assert_eq!(
        offloading["spec"],
        json!({"namespaceMappingStrategy": "EnforceSameName", "podOffloadingStrategy": "LocalAndRemote",
               "clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                   {"key": "liqo.io/remote-cluster-id", "operator": "In", "values": [PROVIDER_ID]}]}]}})
    );
    wait_until("the contract is ready", || {
        market.contract(&alice, &id).1["state"] == "ready"
    });

    // Deleted, the last Purchase of the provider unpeers (Liqo v0.10
    // ending the outgoing peering once told) before its finalizer goes.
    let _unpeer = liqo_stand_in::unpeer_v0(rt.handle(), consumer.kube.clone());
    consumer.delete_purchase("old");
    assert!(consumer
        .kube
        .get(FOREIGN_CLUSTERS_V0, None, PROVIDER_NAME)
        .is_none());
    assert!(consumer
        .kube
        .get(
            SECRETS,
            Some("liqo"),
            &format!("remote-token-{PROVIDER_ID}")
        )
        .is_none());
    assert!(consumer
        .kube
        .get(OFFLOADINGS, Some("apps"), "offloading")
        .is_none());
}

/// Liqo v0.x peerings are shared: one Purchase's end leaves the peering
/// another Purchase of the provider uses (even the one that made it), and
/// the last one takes it down in `liqoctl unpeer out-of-band`'s order —
/// outgoing peering disabled, its end awaited, the ForeignCluster kept
/// while the provider still peers with this cluster, then deleted with its
/// token Secret.
#[test]
fn v0_peerings_are_reference_counted_and_unpeered_in_liqos_order() {
    let rt = runtime();
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let id = |c: Value| c["id"].as_str().unwrap().to_string();
    let first = id(market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID})));
    let second = id(market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID})));
    let consumer = Consumer::start(&rt, "v0", &alice).unwrap();
    let (_controller, _) = consumer.controller("v0").unwrap();
    let fc = || consumer.kube.get(FOREIGN_CLUSTERS_V0, None, PROVIDER_NAME);
    let token = || {
        consumer.kube.get(
            SECRETS,
            Some("liqo"),
            &format!("remote-token-{PROVIDER_ID}"),
        )
    };
    consumer.purchase("first", &market.url(), json!({"contractID": first}));
    wait_until("the first Purchase made the ForeignCluster", || {
        fc().is_some_and(|fc| {
            fc["metadata"]["annotations"]["broker.liqo-broker.io/purchase"] == "team/first"
        })
    });
    consumer.purchase("second", &market.url(), json!({"contractID": second}));
    liqo_stand_in::establish_v0(&consumer.kube, PROVIDER_NAME);
    consumer.wait_phase("first", "Ready").unwrap();
    consumer.wait_phase("second", "Ready").unwrap();
    let _liqo = liqo_stand_in::unpeer_v0(rt.handle(), consumer.kube.clone());

    // The Purchase that made the peering goes; the other still uses it.
    consumer.delete_purchase("first");
    let kept = fc().expect("the peering the second Purchase uses stays");
    assert_eq!(kept["spec"]["outgoingPeeringEnabled"], "Yes", "{kept:#}");
    assert!(token().is_some(), "its token Secret stays");

    // The provider peers with this cluster in its turn; then the second
    // contract is cancelled: the outgoing peering is disabled and ends,
    // but the ForeignCluster stays while the incoming peering is up.
    liqo_stand_in::establish_v0_incoming(&consumer.kube, PROVIDER_NAME, true);
    market.cancel(&alice, &second);
    let ended = consumer.wait_phase("second", "Ended").unwrap();
    assert_eq!(
        condition(&ended, "Peered")["reason"],
        "Unpeering",
        "{ended:#}"
    );
    let outgoing = |fc: &Value| {
        fc["status"]["peeringConditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "OutgoingPeering"))
            .map(|c| c["status"].clone())
    };
    wait_until("Liqo ended the disabled outgoing peering", || {
        fc().is_some_and(|fc| {
            fc["spec"]["outgoingPeeringEnabled"] == "No" && outgoing(&fc) == Some(json!("None"))
        })
    });
    consumer
        .wait_purchase("second", |p| condition(p, "Peered").is_null())
        .unwrap();
    assert!(
        fc().is_some(),
        "an incoming peering remains: the ForeignCluster stays"
    );
    assert!(token().is_some());

    // The provider ends its peering too: now the ForeignCluster goes, and
    // the token Secret with it.
    liqo_stand_in::establish_v0_incoming(&consumer.kube, PROVIDER_NAME, false);
    wait_until("the ForeignCluster is deleted", || fc().is_none());
    wait_until("the token Secret is deleted", || token().is_none());

    // A peering a person made is used, and left as it is when the last
    // Purchase of the provider ends.
    let third = id(market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID})));
    consumer.kube.apply(
        FOREIGN_CLUSTERS_V0,
        json!({"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
               "metadata": {"name": PROVIDER_NAME,
                            "labels": {"discovery.liqo.io/cluster-id": PROVIDER_ID}},
               "spec": {"peeringType": "OutOfBand",
                        "clusterIdentity": {"clusterID": PROVIDER_ID, "clusterName": PROVIDER_NAME},
                        "foreignAuthUrl": PROVIDER_AUTH_URL, "foreignProxyUrl": "",
                        "outgoingPeeringEnabled": "Yes", "incomingPeeringEnabled": "Auto",
                        "insecureSkipTLSVerify": true}}),
    );
    liqo_stand_in::establish_v0(&consumer.kube, PROVIDER_NAME);
    consumer.purchase("third", &market.url(), json!({"contractID": third}));
    consumer.wait_phase("third", "Ready").unwrap();
    market.cancel(&alice, &third);
    let ended = consumer.wait_phase("third", "Ended").unwrap();
    assert!(condition(&ended, "Peered").is_null(), "{ended:#}");
    let by_hand = fc().expect("a peering made by a person stays");
    assert_eq!(
        by_hand["spec"]["outgoingPeeringEnabled"], "Yes",
        "{by_hand:#}"
    );
}

/// A peering made declaratively (Liqo's `peering-via-cr`: a
/// `TolerateNoHandshake` Tenant on the provider, a control-plane
/// kubeconfig Secret on the consumer, no Identity) is recognised as it is:
/// its ForeignCluster has no `AuthIdentityControlPlaneStatus` condition.
#[test]
fn a_declarative_v1_peering_is_recognised() {
    let rt = runtime();
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let consumer = Consumer::start(&rt, "v1", &alice).unwrap();
    let provider = Provider::start(&rt, &market.url()).unwrap();
    liqo_support::peer_declaratively(&consumer.kube, CONSUMER_ID, &provider.kube, PROVIDER_ID);
    let _liqo = rt
        .block_on(liqo_support::Liqo::start(
            &consumer.kube,
            CONSUMER_ID,
            &provider.kube,
            PROVIDER_ID,
        ))
        .unwrap();
    let (_controller, _) = consumer.controller("v1").unwrap();
    let contract = market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID}));
    let id = contract["id"].as_str().unwrap().to_string();
    consumer.purchase("declared", &market.url(), json!({"contractID": id}));
    let ready = consumer.wait_phase("declared", "Ready").unwrap();
    let peered = condition(&ready, "Peered");
    assert_eq!(peered["status"], "True");
    assert!(
        peered["message"]
            .as_str()
            .unwrap()
            .contains("declaratively"),
        "{peered}"
    );
    let fc = consumer
        .kube
        .get(FOREIGN_CLUSTERS, None, PROVIDER_ID)
        .unwrap();
    let conditions = &fc["status"]["modules"]["authentication"]["conditions"];
    assert!(
        !conditions
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "AuthIdentityControlPlaneStatus"),
        "{fc:#}"
    );
    assert!(ready["status"]["peeringCommand"].is_null());
    assert!(provider.replica(&slice_name(&id)).is_some());
}

/// A contract within the lead time is warned about on the Purchase (the
/// `EndingSoon` condition with the end, a Warning Event once per end);
/// extending it in the catalog clears the warning and touches nothing
/// else.
#[test]
fn a_contract_ending_soon_is_warned_about_once_and_extending_it_clears_that() {
    // The catalog's own lead time is short: the warning comes from the
    // controller's (--contract-ending-soon, 1d by default).
    let world = Peered::start_with(&["--contract-ending-soon", "1m"]);
    let (market, consumer) = (&world.market, &world.consumer);
    let alice = world.alice.clone();
    let contract = market.buy(
        &alice,
        "small",
        json!({"consumerClusterID": CONSUMER_ID, "durationSeconds": 3600}),
    );
    assert_eq!(contract["endingSoon"], false, "{contract}");
    let id = contract["id"].as_str().unwrap().to_string();
    consumer.purchase("short", &market.url(), json!({"contractID": id}));
    let ready = consumer
        .wait_purchase("short", |p| {
            p["status"]["phase"] == "Ready" && condition(p, "EndingSoon")["status"] == "True"
        })
        .unwrap();
    let warning = condition(&ready, "EndingSoon");
    assert_eq!(warning["reason"], "ContractEndingSoon");
    let end = ready["status"]["expiresAt"].as_str().unwrap().to_string();
    let end_seconds = end.split('.').next().unwrap().trim_end_matches('Z');
    assert!(
        warning["message"].as_str().unwrap().contains(end_seconds),
        "{warning} names {end}"
    );
    let warnings = || -> Vec<Value> {
        consumer
            .kube
            .objects(("events.k8s.io", "events"))
            .into_iter()
            .filter(|e| {
                e["regarding"]["name"] == "short"
                    && e["reason"] == "ContractEndingSoon"
                    && e["type"] == "Warning"
            })
            .collect()
    };
    wait_until("a Warning Event says the contract ends soon", || {
        !warnings().is_empty()
    });
    // Once: two more rounds later, not repeated.
    let rounds = || {
        world
            .rt
            .block_on(crate::slice_controller_support::http_get(
                world.port, "/metrics",
            ))
            .ok()
            .and_then(|(_, body)| {
                body.lines()
                    .find_map(|l| {
                        l.strip_prefix("purchase_controller_reconcile_duration_seconds_count ")
                    })
                    .and_then(|n| n.trim().parse::<u64>().ok())
            })
            .unwrap_or_default()
    };
    let seen = rounds();
    wait_until("two more rounds", || rounds() >= seen + 2);
    let events = warnings();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert!(events[0]["series"].is_null(), "repeated: {events:#?}");
    assert!(events[0]["note"].as_str().unwrap().contains(end_seconds));

    // Extended by five days: the warning clears, the slice stays.
    let r = e2e::buying::post(
        &market.catalog,
        &format!("/contracts/{id}/extend"),
        &json!({"durationSeconds": 5 * 24 * 3600}),
        Some(&alice),
    );
    assert_eq!(r.status, 200, "extend: {}", r.text);
    let extended = consumer
        .wait_purchase("short", |p| condition(p, "EndingSoon")["status"] == "False")
        .unwrap();
    assert_eq!(
        condition(&extended, "EndingSoon")["reason"],
        "ContractExtended"
    );
    assert_eq!(extended["status"]["phase"], "Ready");
    assert_ne!(extended["status"]["expiresAt"], end.as_str());
    assert_eq!(warnings().len(), 1);
    assert!(consumer_slice(consumer, &id).is_some());
}

/// Cancellation and expiry: the Purchase ends, its slice goes (and with
/// it the grant on the provider), the peering stays.
#[test]
fn ended_contracts_release_their_slices() {
    let world = Peered::start();
    let (market, consumer, provider) = (&world.market, &world.consumer, &world.provider);
    let alice = world.alice.clone();

    let cancelled = market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID}));
    let cancelled = cancelled["id"].as_str().unwrap().to_string();
    // Long enough to be Ready (slice replicated, grant made) before it
    // expires, so the expiry below takes away something that existed.
    let expiring = market.buy(
        &alice,
        "small",
        json!({"consumerClusterID": CONSUMER_ID, "durationSeconds": 10}),
    );
    let expiring = expiring["id"].as_str().unwrap().to_string();
    consumer.purchase("a", &market.url(), json!({"contractID": cancelled}));
    consumer.purchase("b", &market.url(), json!({"contractID": expiring}));
    consumer.wait_phase("a", "Ready").unwrap();
    assert!(provider.replica(&slice_name(&cancelled)).is_some());
    consumer
        .wait_phase("b", "Ready")
        .expect("the 10 s contract became Ready before it expired");
    assert!(provider.replica(&slice_name(&expiring)).is_some());

    market.cancel(&alice, &cancelled);
    let ended = consumer.wait_phase("a", "Ended").unwrap();
    assert_eq!(
        condition(&ended, "ContractValid")["reason"],
        "ContractCancelled"
    );
    let tenant = liqo_support::tenant_namespace(PROVIDER_ID);
    wait_until("the cancelled contract's slice is gone", || {
        consumer
            .kube
            .get(SLICES, Some(&tenant), &slice_name(&cancelled))
            .is_none()
    });
    wait_until("the cancelled contract's replica is gone", || {
        provider.replica(&slice_name(&cancelled)).is_none()
    });

    let ended = consumer.wait_phase("b", "Ended").unwrap();
    assert_eq!(
        condition(&ended, "ContractValid")["reason"],
        "ContractExpired"
    );
    wait_until("the expired contract's slice is gone", || {
        consumer
            .kube
            .get(SLICES, Some(&tenant), &slice_name(&expiring))
            .is_none()
    });
    wait_until("the expired contract's replica is gone", || {
        provider.replica(&slice_name(&expiring)).is_none()
    });
    assert!(consumer
        .kube
        .get(FOREIGN_CLUSTERS, None, PROVIDER_ID)
        .is_some());
}

/// Unknown, foreign, wrong-generation contracts and bad credentials are
/// clear conditions, and nothing is created for them.
#[test]
fn bad_input_gets_clear_conditions_and_creates_nothing() {
    let rt = runtime();
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let bob = market.consumer("bob");
    // Bob's own cluster (a v1 contract names its consumer cluster).
    let bobs = market.buy(&bob, "small", json!({"consumerClusterID": "bobs-cluster"}));
    // Provider 2 registered Liqo v0.x only.
    e2e::buying::publish(&market.catalog, 2, "old-only");
    let r = e2e::buying::reserve(&market.catalog, &alice, "old-only", "small", None);
    let reservation = r.json["id"].as_str().unwrap().to_string();
    let r = e2e::buying::post(
        &market.catalog,
        &format!("/reservations/{reservation}/purchase"),
        &json!({}),
        Some(&alice),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let v0_only = r.json["id"].as_str().unwrap().to_string();

    let consumer = Consumer::start(&rt, "v1", &alice).unwrap();
    consumer.token_secret("empty", "");
    let (_controller, _) = consumer.controller("v1").unwrap();
    consumer.purchase(
        "unknown",
        &market.url(),
        json!({"contractID": "no-such-contract"}),
    );
    consumer.purchase("foreign", &market.url(), json!({"contractID": bobs["id"]}));
    consumer.purchase("old", &market.url(), json!({"contractID": v0_only}));
    let mut no_secret = json!({"contractID": v0_only});
    no_secret["credentialsSecretRef"] = json!({"name": "missing", "key": "token"});
    consumer.purchase("no-secret", &market.url(), no_secret);
    let mut empty = json!({"contractID": v0_only});
    empty["credentialsSecretRef"] = json!({"name": "empty", "key": "token"});
    consumer.purchase("empty-token", &market.url(), empty);

    for (name, reason) in [
        ("unknown", "ContractNotFound"),
        ("foreign", "ContractNotFound"),
        ("old", "LiqoGenerationNotOffered"),
        ("no-secret", "CredentialsInvalid"),
        ("empty-token", "CredentialsInvalid"),
    ] {
        let p = consumer.wait_phase(name, "Failed").unwrap();
        let c = condition(&p, "ContractValid");
        assert_eq!(c["reason"], reason, "{name}: {p:#}");
        assert_eq!(c["status"], "False");
    }
    let old = consumer.get_purchase("old").unwrap();
    assert!(condition(&old, "ContractValid")["message"]
        .as_str()
        .unwrap()
        .contains("[v0]"));
    let c = condition(
        &consumer.get_purchase("no-secret").unwrap(),
        "ContractValid",
    );
    assert!(
        c["message"].as_str().unwrap().contains("team/missing"),
        "{c}"
    );
    // Bob's contract is untouched; the wrong-generation one says why.
    wait_until("the catalog hears the generation mismatch", || {
        market.contract(&alice, &v0_only).1["state"] == "failed"
    });
    assert_eq!(
        market.contract(&bob, bobs["id"].as_str().unwrap()).1["state"],
        "pending"
    );
    // Nothing was created.
    assert!(consumer.kube.objects(SLICES).is_empty());
    assert!(consumer.kube.objects(OFFLOADINGS).is_empty());
    let secrets: Vec<Value> = consumer.kube.objects(SECRETS);
    assert_eq!(
        secrets.len(),
        2,
        "only the test's token Secrets: {secrets:#?}"
    );
    // A spec asking for a contract and an offer at once is refused by the
    // API server (the CRD's oneOf), before the controller sees it.
    let both = consumer.kube.create(
        PURCHASES,
        json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
               "metadata": {"name": "both", "namespace": TEAM},
               "spec": {"catalogURL": market.url(), "contractID": "x", "offerID": "o", "planID": "p",
                        "credentialsSecretRef": {"name": "catalog-token", "key": "token"}}}),
    );
    let refused = both.expect_err("a Purchase with a contract and an offer was stored");
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (422, "Invalid"),
        "{refused}"
    );
    assert!(refused.message.contains("oneOf"), "{refused}");
}

/// The catalog unreachable for a while: what exists stays, the Purchase
/// says so, and the controller carries on when it is back.
#[test]
fn the_catalog_unreachable_for_a_while() {
    let world = Peered::start();
    let (market, consumer) = (&world.market, &world.consumer);
    let alice = world.alice.clone();
    let gate = world.rt.block_on(Gate::open(market.catalog.port));
    let contract = market.buy(&alice, "small", json!({"consumerClusterID": CONSUMER_ID}));
    let id = contract["id"].as_str().unwrap().to_string();
    consumer.purchase("p", &gate.url(), json!({"contractID": id}));
    consumer.wait_phase("p", "Ready").unwrap();

    gate.close();
    let cut = consumer
        .wait_purchase("p", |p| {
            condition(p, "CatalogReachable")["status"] == "False"
        })
        .unwrap();
    // What exists is kept, not once but while the controller keeps trying:
    // three more attempts refused at the gate, and still Ready with its slice.
    let tries = gate.refused();
    wait_until("the controller tries the catalog three more times", || {
        gate.refused() >= tries + 3
    });
    let still = consumer.get_purchase("p").unwrap();
    assert_eq!(
        still["status"]["phase"], "Ready",
        "what exists is kept: {still:#} (first seen cut: {cut:#})"
    );
    assert!(consumer_slice(consumer, &id).is_some());

    // While the controller cannot see it, the contract is cancelled; once
    // the catalog is back the controller carries on and acts on that (a
    // fact that was not true before the outage).
    market.cancel(&alice, &id);
    gate.reopen();
    let ended = consumer.wait_phase("p", "Ended").unwrap();
    assert_eq!(
        condition(&ended, "ContractValid")["reason"],
        "ContractCancelled"
    );
    assert_eq!(
        condition(&ended, "CatalogReachable")["status"],
        "True",
        "{ended:#}"
    );
    wait_until("the cancelled contract's slice is gone", || {
        consumer_slice(consumer, &id).is_none()
    });
}

/// A TCP relay to the catalog that can cut every connection and refuse
/// new ones for a while.
struct Gate {
    port: u16,
    open: tokio::sync::watch::Sender<bool>,
    refused: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Gate {
    async fn open(target: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, watch) = tokio::sync::watch::channel(true);
        let refused = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = refused.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if !*watch.borrow() {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    continue;
                }
                let mut watch = watch.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = watch.wait_for(|open| !open) => {}
                    }
                });
            }
        });
        Self {
            port,
            open,
            refused,
            task,
        }
    }

    /// Connections refused while closed.
    fn refused(&self) -> usize {
        self.refused.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn close(&self) {
        self.open.send_replace(false);
    }

    fn reopen(&self) {
        self.open.send_replace(true);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}
