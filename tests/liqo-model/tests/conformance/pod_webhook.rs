//! The cases of Liqo v1.2.0's `pkg/webhooks/pod/pod_test.go` (PT below),
//! with its fixtures from `pkg/webhooks/pod/testutils/utils.go`, on the
//! model's pure mutation; and the webhook registered on a test API server:
//! pods created in a labelled namespace are mutated, others and updates
//! are not.

use kube::api::{Api, DynamicObject, PostParams};
use kube_test_server::KubeApiServer;
use liqo_model::pod_webhook::{
    fill_pod, imposed_selector, merge_selectors, mutate_pod, toleration_for,
    virtual_node_toleration,
};
use serde_json::{json, Value};

use crate::namespace;

fn expr(key: &str, op: &str, values: &[&str]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

fn virtual_node(op: &str) -> Value {
    expr("liqo.io/type", op, &["virtual-node"])
}

/// `GetImposedNodeSelector("")`: the NamespaceOffloading's cluster selector.
fn cluster_selector() -> Value {
    json!({"nodeSelectorTerms": [
        {"matchExpressions": [expr("region", "In", &["A,B"]), expr("provider", "Exists", &[])]},
        {"matchExpressions": [expr("region", "In", &["C,D"]), expr("NotProvider", "Exists", &[])]}]})
}

/// `GetImposedNodeSelector(strategy)`.
fn imposed(strategy: &str) -> Value {
    let mut s = cluster_selector();
    match strategy {
        "Remote" => {
            for t in s["nodeSelectorTerms"].as_array_mut().unwrap() {
                t["matchExpressions"]
                    .as_array_mut()
                    .unwrap()
                    .push(virtual_node("In"));
            }
        }
        "LocalAndRemote" => s["nodeSelectorTerms"]
            .as_array_mut()
            .unwrap()
            .push(json!({"matchExpressions": [virtual_node("NotIn")]})),
        _ => {}
    }
    s
}

/// `GetPodNodeSelector()`.
fn pod_selector() -> Value {
    json!({"nodeSelectorTerms": [
        {"matchExpressions": [expr("storage", "Exists", &[])]},
        {"matchExpressions": [expr("provider", "In", &["AWS"])]}]})
}

/// `GetMergedNodeSelector(strategy)`: every pod term ANDed with every imposed one.
fn merged(strategy: &str) -> Value {
    let mut terms = Vec::new();
    for p in pod_selector()["nodeSelectorTerms"].as_array().unwrap() {
        for i in imposed(strategy)["nodeSelectorTerms"].as_array().unwrap() {
            let mut e = p["matchExpressions"].as_array().unwrap().clone();
            e.extend(i["matchExpressions"].as_array().unwrap().iter().cloned());
            terms.push(json!({"matchExpressions": e}));
        }
    }
    json!({"nodeSelectorTerms": terms})
}

/// `GetNamespaceOffloading(strategy)`.
fn nsoff(strategy: &str) -> Value {
    json!({"metadata": {"name": "offloading", "namespace": "test"},
           "spec": {"namespaceMappingStrategy": "EnforceSameName",
                    "podOffloadingStrategy": strategy, "clusterSelector": cluster_selector()}})
}

fn required(pod: &Value) -> &Value {
    &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
}

/// PT:53-71.
#[test]
fn the_toleration_of_each_strategy() {
    assert!(toleration_for("").is_err());
    assert_eq!(toleration_for("Local").unwrap(), None);
    for strategy in ["Remote", "LocalAndRemote"] {
        assert_eq!(
            toleration_for(strategy).unwrap(),
            Some(virtual_node_toleration())
        );
    }
}

/// PT:73-99.
#[test]
fn the_node_selector_of_each_strategy() {
    assert_eq!(imposed_selector(&nsoff("Local")).unwrap(), None);
    for strategy in ["Remote", "LocalAndRemote"] {
        assert_eq!(
            imposed_selector(&nsoff(strategy)).unwrap(),
            Some(imposed(strategy))
        );
    }
}

/// PT:101-109.
#[test]
fn the_pod_selector_merged_with_the_imposed_one() {
    assert_eq!(merge_selectors(&pod_selector(), &imposed("")), merged(""));
}

/// PT:111-235: six pods with different affinities.
#[test]
fn the_selector_put_in_six_pods() {
    let pod_affinity =
        json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "fake-value"}]});
    let pods = [
        json!({"spec": {}}),
        json!({"spec": {"affinity": {}}}),
        json!({"spec": {"affinity": {"podAffinity": pod_affinity}}}),
        json!({"spec": {"affinity": {"nodeAffinity": {}}}}),
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": []}}}}}),
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            pod_selector()}}}}),
    ];
    let expected = [
        imposed(""),
        imposed(""),
        imposed(""),
        imposed(""),
        imposed(""),
        merged(""),
    ];
    for (i, (pod, want)) in pods.iter().zip(expected).enumerate() {
        let mut pod = pod.clone();
        let selector = imposed("");
        fill_pod(Some(&selector), &mut pod);
        assert_eq!(
            selector,
            imposed(""),
            "case {i}: the imposed selector is unchanged"
        );
        assert_eq!(*required(&pod), want, "case {i}");
        if i == 2 {
            // PT:229-235.
            assert_eq!(pod["spec"]["affinity"]["podAffinity"], pod_affinity);
        }
    }
}

/// PT:237-323: each strategy, with and without Liqo's runtime class.
#[test]
fn mutate_pod_per_strategy_and_runtime_class() {
    let runtime = "my-liqo-runtime";
    let base = json!({"metadata": {"name": "pod", "namespace": "test"},
        "spec": {"tolerations": [{"key": "test", "operator": ""}],
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": pod_selector()}}}});
    for strategy in ["Local", "LocalAndRemote", "Remote"] {
        for runtime_class in [false, true] {
            let mut pod = base.clone();
            if runtime_class {
                pod["spec"]["runtimeClassName"] = json!(runtime);
            }
            mutate_pod(&nsoff(strategy), &mut pod, runtime).unwrap();
            let case = format!("{strategy}, runtime class {runtime_class}");
            if strategy == "Local" || runtime_class {
                assert_eq!(
                    pod["spec"]["tolerations"], base["spec"]["tolerations"],
                    "{case}"
                );
                assert_eq!(*required(&pod), pod_selector(), "{case}");
            } else {
                let want = json!([base["spec"]["tolerations"][0], virtual_node_toleration()]);
                assert_eq!(pod["spec"]["tolerations"], want, "{case}");
                let mut got = required(&pod)["nodeSelectorTerms"]
                    .as_array()
                    .unwrap()
                    .clone();
                let mut want = merged(strategy)["nodeSelectorTerms"]
                    .as_array()
                    .unwrap()
                    .clone();
                let key = |v: &Value| v.to_string();
                got.sort_by_key(key);
                want.sort_by_key(key);
                assert_eq!(got, want, "{case}");
            }
        }
    }
}

/// PT:325-342: another runtime class than Liqo's is mutated.
#[test]
fn another_runtime_class_is_mutated() {
    let mut pod = json!({"spec": {"runtimeClassName": "my-custom-runtime",
        "tolerations": [{"key": "test", "operator": ""}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": pod_selector()}}}});
    mutate_pod(&nsoff("LocalAndRemote"), &mut pod, "liqo").unwrap();
    assert_eq!(pod["spec"]["tolerations"][1], virtual_node_toleration());
    assert_eq!(*required(&pod), merged("LocalAndRemote"));
}

/// The registration: CREATE only, labelled namespaces only.
#[tokio::test]
async fn only_new_pods_of_labelled_namespaces() {
    use liqo_model::identity::{self, Rule, ALL};
    // The webhook alone (no NamespaceOffloading controller to label namespaces).
    let kube = KubeApiServer::start().await.unwrap();
    identity::grant(
        &kube,
        liqo_model::WEBHOOK,
        "webhook",
        liqo_model::pod_webhook::RULES,
    );
    let client = identity::client_as(&kube, liqo_model::WEBHOOK)
        .await
        .unwrap();
    let (hook, _caches) = liqo_model::pod_webhook::Hook::start(client).await;
    kube.add_mutating_hook(std::sync::Arc::new(hook));
    namespace(&kube, "on", json!({"liqo.io/scheduling-enabled": "true"}));
    namespace(&kube, "off", json!({}));
    for ns in ["on", "off"] {
        kube.apply(
            ("offloading.liqo.io", "namespaceoffloadings"),
            json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
                   "metadata": {"name": "offloading", "namespace": ns},
                   "spec": {"podOffloadingStrategy": "Remote", "clusterSelector": {"nodeSelectorTerms": []}}}),
        );
    }
    identity::grant(&kube, "alice", "alice", &[Rule::new(&[""], &["pods"], ALL)]);
    let alice = identity::client_as(&kube, "alice").await.unwrap();
    let pod = |ns: &str| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap()
    };
    // The webhook reads through caches: wait until the labelled namespace
    // is seen (a pod created before is not mutated, as with Liqo).
    let on: Api<DynamicObject> =
        Api::namespaced_with(alice.clone(), "on", &liqo_model::offloading_consts::pods());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // Every pod carries the API server's DefaultTolerationSeconds
    // tolerations (not-ready, unreachable: 300 s); the webhook adds
    // Liqo's after them.
    let defaults = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ]);
    let created = loop {
        let created = on.create(&PostParams::default(), &pod("on")).await.unwrap();
        if created.data["spec"]["tolerations"] != defaults {
            break created;
        }
        on.delete("p", &Default::default()).await.unwrap();
        assert!(
            std::time::Instant::now() < deadline,
            "never mutated: {created:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let tolerations = created.data["spec"]["tolerations"].clone();
    assert_eq!(
        tolerations,
        json!([defaults[0], defaults[1], virtual_node_toleration()])
    );
    assert_eq!(
        created.data["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"],
        json!({"nodeSelectorTerms": [{"matchExpressions": [virtual_node("In")]}]})
    );
    // An update is not mutated again.
    let mut updated = created.clone();
    updated.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    let updated = on
        .replace("p", &PostParams::default(), &updated)
        .await
        .unwrap();
    assert_eq!(updated.data["spec"]["tolerations"], tolerations);
    let off: Api<DynamicObject> =
        Api::namespaced_with(alice, "off", &liqo_model::offloading_consts::pods());
    let plain = off
        .create(&PostParams::default(), &pod("off"))
        .await
        .unwrap();
    assert_eq!(plain.data["spec"]["tolerations"], defaults, "{plain:?}");
}
