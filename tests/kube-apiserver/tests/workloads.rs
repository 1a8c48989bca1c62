//! Deployments, ReplicaSets, PodDisruptionBudgets and evictions through
//! kube-rs, as a real cluster serves them (`src/deployment.rs`,
//! `src/replicaset.rs`, `src/disruption.rs`, `src/eviction.rs`, each
//! from its Kubernetes source): a Deployment's ReplicaSet and pods, made
//! through admission; scaling down preferring unscheduled pods; adoption
//! and release by selector; a budget's status; evictions allowed, refused
//! with 429, refused for two budgets, and dry-run; and `pods/eviction`
//! authorised as its own subresource.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use kube_test_server::admission::{Attributes, Denial, MutatingHook};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

mod kube_rs;
use kube_rs::{status, until};

/// A client as the tests' own user, without kube-rs's default retries:
/// kube-rs retries a 429 (up to 15 times, backing off to minutes), so an
/// eviction a budget refuses would only come back after all of them — a
/// controller evicting through kube-rs must turn them off likewise, or
/// wait that long to hear of the refusal.
fn admin(kube: &KubeApiServer) -> Client {
    let mut config = kube::Config::new(kube.url().parse().unwrap());
    config.auth_info.token = Some(kube.admin_token().to_string().into());
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

const NS: &str = "team";

/// A mutating hook standing for a pod webhook (Liqo's, in the e2e world):
/// it marks every pod created.
struct MarkPods;

impl MutatingHook for MarkPods {
    fn name(&self) -> &str {
        "mark-pods.test"
    }
    fn admit(&self, attributes: &Attributes<'_>, object: &mut Value) -> Result<(), Denial> {
        if attributes.def.plural == "pods" && attributes.operation == "CREATE" {
            object["metadata"]["annotations"]["test/admitted"] = json!("yes");
        }
        Ok(())
    }
}

async fn world() -> (KubeApiServer, Client) {
    let kube = KubeApiServer::start().await.unwrap();
    kube.add_mutating_hook(Arc::new(MarkPods));
    let client = admin(&kube);
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    (kube, client)
}

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]}}}
    }))
    .unwrap()
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pods of `app`, once there are `n` of them (not being deleted).
async fn pods_of(pods: &Api<Pod>, app: &str, n: usize) -> Vec<Pod> {
    until(&format!("{n} pods of {app}"), || async {
        let list = pods
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .unwrap();
        let live: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        (live.len() == n).then_some(live)
    })
    .await
}

/// Bind `name` to `node` (as a scheduler would) and make it Running and
/// Ready (as its kubelet would).
async fn run(pods: &Api<Pod>, name: &str, node: Option<&str>) {
    if let Some(node) = node {
        let binding = json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name}, "target": {"kind": "Node", "name": node}});
        let _: Value = pods
            .create_subresource("binding", name, &PostParams::default(), &binding)
            .await
            .unwrap();
    }
    let patch = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap()
}

#[tokio::test]
async fn a_deployment_makes_a_replica_set_whose_pods_go_through_admission() {
    let (_kube, client) = world().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let created = deployments
        .create(&PostParams::default(), &deployment("web", 3, "web:1"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    let rs = until("the ReplicaSet", || async {
        sets.list(&ListParams::default()).await.unwrap().items.pop()
    })
    .await;
    let hash = rs.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "web")
    );
    assert_eq!(owner.uid, created.metadata.uid.clone().unwrap());
    let selector = rs.spec.selector.match_labels.clone().unwrap();
    assert_eq!(selector["pod-template-hash"], hash);

    let made = pods_of(&pods, "web", 3).await;
    for pod in &made {
        assert!(
            name(pod).starts_with(&format!("web-{hash}-")),
            "{:?}",
            pod.metadata
        );
        assert_eq!(
            pod.metadata.generate_name.as_deref(),
            Some(format!("web-{hash}-").as_str())
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.kind, "ReplicaSet");
        assert_eq!(
            (owner.controller, owner.block_owner_deletion),
            (Some(true), Some(true))
        );
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()["pod-template-hash"],
            hash
        );
        // Through the create path: the mutating hook saw it.
        assert_eq!(
            pod.metadata.annotations.as_ref().unwrap()["test/admitted"],
            "yes"
        );
        assert_eq!(
            pod.status.as_ref().unwrap().phase.as_deref(),
            Some("Pending")
        );
    }
    for pod in &made {
        run(&pods, &name(pod), Some("n1")).await;
    }
    let status = until("the Deployment available", || async {
        let d = deployments.get("web").await.unwrap();
        let s = d.status.unwrap_or_default();
        (s.available_replicas == Some(3)).then_some(s)
    })
    .await;
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!((status.replicas, status.ready_replicas), (Some(3), Some(3)));
    let available = status.conditions.unwrap();
    assert!(available
        .iter()
        .any(|c| c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True")));
    let rs_status = sets
        .get(&format!("web-{hash}"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        (
            rs_status.ready_replicas,
            rs_status.available_replicas,
            rs_status.observed_generation
        ),
        (Some(3), Some(3), Some(1))
    );

    // A new template: a new ReplicaSet at full scale, the old one at 0.
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "web:2"}]}}}});
    let patched = deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    until("the old ReplicaSet at 0 and a new one", || async {
        let all = sets.list(&ListParams::default()).await.unwrap().items;
        let old = all
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(&format!("web-{hash}")))?;
        let new = all
            .iter()
            .find(|r| r.metadata.name.as_deref() != Some(&format!("web-{hash}")))?;
        (old.spec.replicas == Some(0) && new.spec.replicas == Some(3)).then_some(())
    })
    .await;
    let pods_now = pods_of(&pods, "web", 3).await;
    assert!(pods_now
        .iter()
        .all(|p| !p.metadata.name.as_ref().unwrap().contains(&hash)));
}

#[tokio::test]
async fn scaling_down_deletes_unscheduled_pods_first() {
    let (_kube, client) = world().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    deployments
        .create(&PostParams::default(), &deployment("api", 3, "api:1"))
        .await
        .unwrap();
    let made = pods_of(&pods, "api", 3).await;
    // Two scheduled and Ready; one left waiting, as an unschedulable pod.
    run(&pods, &name(&made[0]), Some("n1")).await;
    run(&pods, &name(&made[1]), Some("n2")).await;
    let waiting = name(&made[2]);
    let patch = json!({"spec": {"replicas": 2}});
    deployments
        .patch("api", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let left = pods_of(&pods, "api", 2).await;
    let mut left: Vec<String> = left.iter().map(name).collect();
    left.sort();
    let mut kept = vec![name(&made[0]), name(&made[1])];
    kept.sort();
    assert_eq!(left, kept, "the waiting pod {waiting} goes first");
}

#[tokio::test]
async fn a_replica_set_adopts_orphans_and_releases_pods_it_no_longer_selects() {
    let (_kube, client) = world().await;
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "namespace": NS, "labels": {"app": "db"}},
        "spec": {"containers": [{"name": "main", "image": "db:1"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &orphan).await.unwrap();
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": NS},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "main", "image": "db:1"}]}}}
    }))
    .unwrap();
    let rs = sets.create(&PostParams::default(), &rs).await.unwrap();
    let rs_uid = rs.metadata.uid.clone().unwrap();
    let two = pods_of(&pods, "db", 2).await;
    let adopted = two
        .iter()
        .find(|p| name(p) == "orphan")
        .expect("the orphan kept");
    let owner = &adopted.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        (rs_uid.as_str(), Some(true))
    );

    // Relabelled out of the selector: released, and replaced.
    let patch = json!({"metadata": {"labels": {"app": "elsewhere"}}});
    pods.patch("orphan", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let replaced = pods_of(&pods, "db", 2).await;
    assert!(replaced.iter().all(|p| name(p) != "orphan"));
    let released = until("the pod released", || async {
        let p = pods.get("orphan").await.unwrap();
        p.metadata
            .owner_references
            .as_ref()
            .is_none_or(|r| r.is_empty())
            .then_some(p)
    })
    .await;
    assert_eq!(released.metadata.labels.unwrap()["app"], "elsewhere");
}

fn pdb(name: &str, spec: Value) -> PodDisruptionBudget {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}, "spec": spec}))
        .unwrap()
}

/// A budget's status once the controller has seen generation 1 and
/// `allowed` disruptions.
async fn budget(pdbs: &Api<PodDisruptionBudget>, name: &str, allowed: i32) -> Value {
    until(&format!("{name} allows {allowed}"), || async {
        let p = pdbs.get(name).await.unwrap();
        let s = p.status?;
        (s.observed_generation == Some(1) && s.disruptions_allowed == Some(allowed))
            .then(|| serde_json::to_value(s).unwrap())
    })
    .await
}

/// A Deployment `app` of `n` pods, all bound and Ready; their names.
async fn running(client: &Client, app: &str, n: i32) -> Vec<String> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    deployments
        .create(&PostParams::default(), &deployment(app, n, "img"))
        .await
        .unwrap();
    let made = pods_of(&pods, app, n as usize).await;
    for pod in &made {
        run(&pods, &name(pod), Some("n1")).await;
    }
    until("all Ready", || async {
        let list = pods
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .unwrap();
        list.items.iter().all(ready).then_some(())
    })
    .await;
    made.iter().map(name).collect()
}

#[tokio::test]
async fn a_budget_counts_ready_pods_against_min_available_or_the_scale() {
    let (_kube, client) = world().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NS);
    running(&client, "web", 4).await;
    pdbs.create(
        &PostParams::default(),
        &pdb(
            "min",
            json!({"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}}),
        ),
    )
    .await
    .unwrap();
    let s = budget(&pdbs, "min", 1).await;
    assert_eq!(
        (
            &s["currentHealthy"],
            &s["desiredHealthy"],
            &s["expectedPods"]
        ),
        (&json!(4), &json!(3), &json!(4))
    );
    assert_eq!(s["conditions"][0]["type"], "DisruptionAllowed");
    assert_eq!(s["conditions"][0]["reason"], "SufficientPods");
    // A percentage is of the Deployment's scale: 4 × 75% = 3 unavailable
    // allowed, rounded up; 4 − 3 = 1 desired.
    pdbs.create(
        &PostParams::default(),
        &pdb(
            "pct",
            json!({"maxUnavailable": "75%", "selector": {"matchLabels": {"app": "web"}}}),
        ),
    )
    .await
    .unwrap();
    let s = budget(&pdbs, "pct", 3).await;
    assert_eq!(
        (&s["desiredHealthy"], &s["expectedPods"]),
        (&json!(1), &json!(4))
    );
}

#[tokio::test]
async fn evictions_respect_the_budget_and_refuse_with_429() {
    let (_kube, client) = world().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let names = running(&client, "web", 2).await;
    pdbs.create(
        &PostParams::default(),
        &pdb(
            "web",
            json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}),
        ),
    )
    .await
    .unwrap();
    budget(&pdbs, "web", 1).await;

    // Dry run: nothing deleted, nothing decremented.
    let dry = EvictParams {
        post_options: PostParams {
            dry_run: true,
            ..PostParams::default()
        },
        ..EvictParams::default()
    };
    let answer = pods.evict(&names[0], &dry).await.unwrap();
    assert_eq!(
        answer.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    assert!(pods.get_opt(&names[0]).await.unwrap().is_some());
    assert_eq!(budget(&pdbs, "web", 1).await["disruptedPods"], Value::Null);

    pods.evict(&names[0], &EvictParams::default())
        .await
        .unwrap();
    let gone = pods.get_opt(&names[0]).await.unwrap();
    assert!(gone.is_none(), "evicted: {gone:?}");
    // Decremented by the eviction itself (its `disruptedPods` entry is
    // dropped by the controller as soon as the pod is gone, as the real
    // one drops it for a pod being deleted).
    let after = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(after.disruptions_allowed, Some(0));

    let refused = status(
        pods.evict(&names[1], &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(refused["code"], 429);
    assert_eq!(refused["reason"], "TooManyRequests");
    assert_eq!(
        refused["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(
        refused["details"]["causes"][0]["reason"],
        "DisruptionBudget"
    );
    assert!(pods.get_opt(&names[1]).await.unwrap().is_some());

    // A missing pod: the pod's 404.
    let missing = status(
        pods.evict("nope", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (&missing["code"], &missing["message"]),
        (&json!(404), &json!("pods \"nope\" not found"))
    );
}

#[tokio::test]
async fn a_pending_pod_is_evicted_whatever_the_budget_and_two_budgets_are_a_500() {
    let (_kube, client) = world().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let names = running(&client, "web", 2).await;
    // "a" wants more than are Ready: a not-Ready pod would not get past it.
    for (name, min) in [("a", 3), ("b", 2)] {
        pdbs.create(
            &PostParams::default(),
            &pdb(
                name,
                json!({"minAvailable": min, "selector": {"matchLabels": {"app": "web"}}}),
            ),
        )
        .await
        .unwrap();
        budget(&pdbs, name, 0).await;
    }
    let refused = status(
        pods.evict(&names[0], &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(refused["code"], 500);
    assert_eq!(
        refused["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    pdbs.delete("b", &DeleteParams::default()).await.unwrap();
    let refused = status(
        pods.evict(&names[0], &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(refused["code"], 429);

    // A pending pod (never started) goes without the budget.
    let waiting: Pod = serde_json::from_value(json!({
        "metadata": {"name": "waiting", "namespace": NS, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "img"}]},
        "status": {"phase": "Pending"}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &waiting).await.unwrap();
    pods.evict("waiting", &EvictParams::default())
        .await
        .unwrap();
    assert!(pods.get_opt("waiting").await.unwrap().is_none());
}

#[tokio::test]
async fn evicting_needs_create_on_pods_eviction_not_delete_on_pods() {
    let (kube, client) = world().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let names = running(&client, "web", 2).await;
    kube.load_rbac(&[
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "evictor", "namespace": NS},
               "rules": [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "deleter", "namespace": NS},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "evictor", "namespace": NS},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "evictor"},
               "subjects": [{"kind": "User", "name": "eve"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "deleter", "namespace": NS},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deleter"},
               "subjects": [{"kind": "User", "name": "dan"}]}),
    ]);
    let as_user = |user: &str| {
        let mut config = kube::Config::new(kube.url().parse().unwrap());
        config.auth_info.token = Some(kube.token_for(user).into());
        config.default_retry = false;
        Api::<Pod>::namespaced(Client::try_from(config).unwrap(), NS)
    };
    let refused = status(
        as_user("dan")
            .evict(&names[0], &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(refused["code"], 403);
    assert_eq!(
        refused["message"],
        format!(
            "pods \"{}\" is forbidden: User \"dan\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"{NS}\"",
            names[0]
        )
    );
    as_user("eve")
        .evict(&names[0], &EvictParams::default())
        .await
        .unwrap();
    assert!(pods.get_opt(&names[0]).await.unwrap().is_none());
    let seen = kube.rbac_requests();
    assert!(seen.iter().any(|a| a.verb == "create"
        && a.resource == "pods"
        && a.subresource.as_deref() == Some("eviction")));
}
