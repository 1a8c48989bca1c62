//! Two Purchases from one provider (issue 40, item 8): each contract is a
//! ResourceSlice and so a virtual node of its own, but Liqo v1.2.0
//! offloads a namespace per cluster
//! (`namespaceoffloading-controller/clusterselector.go:37-75`), so the
//! controller's NamespaceOffloadings select the provider
//! (`liqo.io/remote-cluster-id`) and reach both nodes, and Liqo's pod
//! webhook gives the namespace's pods that selector
//! (`pkg/webhooks/pod/mutations.go:54-97`). Two Purchases serving one
//! namespace is the intended case: both nodes selected, `NodesShared`
//! says so, no warning. Purchases serving different namespaces share each
//! other's grants: both carry `NodesShared` (`SharesProviderNodes`,
//! naming the other) and a Warning Event; when one ends, the other's
//! condition clears.
//!
//! The world is [`Peered`]: the consumer peered with the provider as
//! `liqoctl peer` leaves them (no networking), the model of Liqo on both
//! with its offloading, the real class controller granting contracts.

use serde_json::{json, Value};

use crate::purchase_controller_support::*;

const EVENTS: (&str, &str) = ("events.k8s.io", "events");
const NODES: (&str, &str) = ("", "nodes");
const PODS: (&str, &str) = ("", "pods");

/// Buy plan `small` from the provider for this cluster and follow the
/// contract in Purchase `name` for `namespaces`, pods offloaded only (so
/// the pod webhook's affinity is the cluster selector alone).
fn buy(world: &Peered, name: &str, namespaces: &[&str]) {
    let contract = world.market.buy(
        &world.alice,
        "small",
        json!({"consumerClusterID": CONSUMER_ID}),
    );
    world.consumer.purchase(
        name,
        &world.market.url(),
        json!({"contractID": contract["id"], "namespaces": namespaces,
               "podOffloadingStrategy": "Remote"}),
    );
}

/// The provider's virtual nodes, once there are `n` and all are Ready.
fn ready_virtual_nodes(world: &Peered, n: usize) -> Vec<Value> {
    let nodes = || {
        world
            .consumer
            .kube
            .objects(NODES)
            .into_iter()
            .filter(|node| {
                let labels = &node["metadata"]["labels"];
                labels["liqo.io/type"] == "virtual-node"
                    && labels["liqo.io/remote-cluster-id"] == PROVIDER_ID
            })
            .collect::<Vec<_>>()
    };
    let ready = |node: &Value| {
        node["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    };
    wait_until(&format!("{n} Ready virtual nodes of the provider"), || {
        let nodes = nodes();
        nodes.len() == n && nodes.iter().all(ready)
    });
    nodes()
}

/// A pod created in `namespace` by a user (through the admission chain,
/// so Liqo's pod webhook mutates it): its required node affinity.
fn pod_affinity(world: &Peered, namespace: &str) -> Value {
    use liqo_model::identity::{self, Rule, ALL};
    let kube = &world.consumer.kube;
    identity::grant(
        kube,
        "developer",
        "developer",
        &[Rule::new(&[""], &["pods"], ALL)],
    );
    let pod: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}))
    .unwrap();
    world.rt.block_on(async {
        let client = identity::client_as(kube, "developer").await.unwrap();
        let pods: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(client, namespace, &liqo_model::offloading_consts::pods());
        pods.create(&Default::default(), &pod).await.unwrap();
    });
    let pod = kube.get(PODS, Some(namespace), "web").unwrap();
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        .clone()
}

/// Wait until Liqo has labelled `namespace` for its pod webhook.
fn scheduling_enabled(world: &Peered, namespace: &str) {
    wait_until(
        &format!("{namespace} labelled for Liqo's pod webhook"),
        || {
            world
                .consumer
                .kube
                .get(("", "namespaces"), None, namespace)
                .is_some_and(|ns| ns["metadata"]["labels"]["liqo.io/scheduling-enabled"] == "true")
        },
    );
}

/// The Warning Events `SharesProviderNodes` on Purchase `name`.
fn sharing_warnings(world: &Peered, name: &str) -> Vec<Value> {
    world
        .consumer
        .kube
        .objects(EVENTS)
        .into_iter()
        .filter(|e| {
            e["regarding"]["kind"] == "Purchase"
                && e["regarding"]["name"] == name
                && e["reason"] == "SharesProviderNodes"
                && e["type"] == "Warning"
        })
        .collect()
}

fn nodes_shared(world: &Peered, name: &str, reason: &str) -> Value {
    let purchase = world
        .consumer
        .wait_purchase(name, |p| condition(p, "NodesShared")["reason"] == reason)
        .unwrap();
    condition(&purchase, "NodesShared")
}

#[test]
fn two_purchases_serving_one_namespace_select_both_virtual_nodes() {
    let world = Peered::start();
    buy(&world, "a", &[TEAM]);
    buy(&world, "b", &[TEAM]);
    world.consumer.wait_phase("a", "Ready").unwrap();
    world.consumer.wait_phase("b", "Ready").unwrap();
    let nodes = ready_virtual_nodes(&world, 2);

    // One NamespaceOffloading, both Purchases its owners; its selector
    // matches both nodes' labels, as Liqo matches them (the real Node's).
    let offloading = world
        .consumer
        .kube
        .get(OFFLOADINGS, Some(TEAM), "offloading")
        .unwrap();
    assert_eq!(
        offloading["metadata"]["annotations"]["broker.liqo-broker.io/purchases"],
        format!("team/a={PROVIDER_ID},team/b={PROVIDER_ID}")
    );
    let selector = &offloading["spec"]["clusterSelector"];
    for node in &nodes {
        assert!(
            liqo_model::scheduling::matches_terms(node, selector),
            "{selector} does not select {node:#}"
        );
    }
    // A pod created in the namespace may run on either node.
    scheduling_enabled(&world, TEAM);
    let affinity = pod_affinity(&world, TEAM);
    for node in &nodes {
        assert!(
            liqo_model::scheduling::matches_terms(node, &affinity),
            "the pod's affinity {affinity} does not admit {}",
            node["metadata"]["name"]
        );
    }

    // Said, not warned.
    for (me, other) in [("a", "team/b"), ("b", "team/a")] {
        let shared = nodes_shared(&world, me, "SharesNamespaces");
        assert_eq!(shared["status"], "True", "{shared}");
        let message = shared["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{other} (namespaces: {TEAM})")),
            "{message}"
        );
        assert!(sharing_warnings(&world, me).is_empty());
    }
}

#[test]
fn purchases_serving_different_namespaces_are_warned_until_one_ends() {
    let world = Peered::start();
    for ns in ["team-a", "team-b"] {
        offloadable_namespace(&world.consumer.kube, ns);
    }
    buy(&world, "a", &["team-a"]);
    buy(&world, "b", &["team-b"]);
    world.consumer.wait_phase("a", "Ready").unwrap();
    world.consumer.wait_phase("b", "Ready").unwrap();
    let nodes = ready_virtual_nodes(&world, 2);

    for (me, other, theirs) in [("a", "team/b", "team-b"), ("b", "team/a", "team-a")] {
        let shared = nodes_shared(&world, me, "SharesProviderNodes");
        assert_eq!(shared["status"], "True", "{shared}");
        let message = shared["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{other} (namespaces: {theirs})"))
                && message.contains("count against its grant"),
            "{message}"
        );
        wait_until(&format!("a Warning Event on {me}"), || {
            !sharing_warnings(&world, me).is_empty()
        });
        let warnings = sharing_warnings(&world, me);
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        assert_eq!(warnings[0]["note"], shared["message"]);
    }
    // What the warning says: a pod of b's namespace may run on either
    // node, a's included.
    scheduling_enabled(&world, "team-b");
    let affinity = pod_affinity(&world, "team-b");
    for node in &nodes {
        assert!(
            liqo_model::scheduling::matches_terms(node, &affinity),
            "the pod's affinity {affinity} does not admit {}",
            node["metadata"]["name"]
        );
    }

    // b ends: a's condition clears.
    world.consumer.delete_purchase("b");
    let alone = nodes_shared(&world, "a", "NotShared");
    assert_eq!(alone["status"], "False", "{alone}");
}
