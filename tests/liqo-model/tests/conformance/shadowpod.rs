//! The ShadowPod webhook's creation and deletion checks, with the cases of
//! `pkg/webhooks/shadowpod/webhook_test.go` (:74-204, names and sizes from
//! `shadowpod_suite_test.go:40-82`) and its quota arithmetic
//! (`spdescription.go`).

use std::collections::BTreeMap;

use liqo_model::shadowpod_webhook::{release, validate_create, Denied, World};
use serde_json::{json, Value};

const ORIGIN: &str = "consumer-1";
const USER: &str = "gold-0123456789ab";

/// A ShadowPod offloaded from `origin`, created by `creator`, one
/// container requesting (and limited to) `cpu` and `memory`.
pub fn shadow_pod(name: &str, origin: &str, creator: &str, cpu: &str, memory: &str) -> Value {
    json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowPod",
           "metadata": {"name": name, "namespace": "offloaded",
                        "labels": {"offloading.liqo.io/origin": origin, "liqo.io/creator-user": creator}},
           "spec": {"pod": {"containers": [{"name": "main", "resources": {
               "requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}}]}}})
}

fn quota(resources: Value, cordoned: bool, enforcement: &str) -> Value {
    let mut spec = json!({"user": USER, "resources": resources, "limitsEnforcement": enforcement});
    if cordoned {
        spec["cordoned"] = json!(true);
    }
    json!({"metadata": {"name": USER, "namespace": "liqo-tenant-consumer-1"}, "spec": spec})
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("liqo.io/remote-cluster-id".to_string(), ORIGIN.to_string())])
}

fn answer(
    pod: &Value,
    quotas: &[Value],
    admitted: &[Value],
    enforcement: bool,
) -> Result<(), Denied> {
    let labels = labels();
    let world = World {
        resource_enforcement: enforcement,
        namespace_labels: Some(&labels),
        quotas,
        admitted,
    };
    validate_create(pod, &world)
}

fn check(
    pod: &Value,
    quotas: &[Value],
    admitted: &[Value],
    enforcement: bool,
) -> Result<(), String> {
    answer(pod, quotas, admitted, enforcement).map_err(|d| d.message)
}

/// webhook_test.go:79-88: forbidden (403).
#[test]
fn without_resource_validation_an_invalid_cluster_id_label_is_forbidden() {
    let pod = shadow_pod("p", "someone-else", USER, "1", "1Gi");
    let denied = answer(&pod, &[], &[], false).unwrap_err();
    assert_eq!(denied.code, 403);
    assert_eq!(denied.message, "shadowpod Cluster ID label mismatch");
}

/// webhook_test.go:89-97.
#[test]
fn without_resource_validation_a_valid_cluster_id_label_is_admitted() {
    let pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    assert_eq!(check(&pod, &[], &[], false), Ok(()));
}

/// webhook_test.go:98-107: a bad request (400).
#[test]
fn a_shadowpod_in_a_missing_namespace_is_a_bad_request() {
    let pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    let world = World {
        resource_enforcement: false,
        namespace_labels: None,
        quotas: &[],
        admitted: &[],
    };
    let denied = validate_create(&pod, &world).unwrap_err();
    assert_eq!(denied.code, 400);
    assert_eq!(denied.message, "namespaces \"offloaded\" not found");
}

/// `shadowpod_suite_test.go:63-64, 224-244`: the suite's Quota, 1000000
/// cpu and 1000000 bytes of memory, no enforcement level.
fn suite_quota() -> Value {
    json!({"metadata": {"name": USER, "namespace": "tenant-namespace"},
           "spec": {"user": USER, "resources": {"cpu": "1000000", "memory": "1000000"}}})
}

/// `shadowpod_suite_test.go:175-212`: one container requesting `cpu` and
/// `memory`, no limits.
fn suite_pod(cpu: &str, memory: &str) -> Value {
    let mut pod = shadow_pod("test-shadowpod", ORIGIN, USER, cpu, memory);
    pod["metadata"]["uid"] = json!("test-shadowpod-uid");
    pod["spec"]["pod"]["containers"][0]["resources"]
        .as_object_mut()
        .unwrap()
        .remove("limits");
    pod
}

/// webhook_test.go:115-125: the pod asks exactly the Quota.
#[test]
fn the_quota_exists_and_the_requests_are_available_so_the_pod_is_allowed() {
    let pod = suite_pod("1000000", "1000000");
    assert_eq!(check(&pod, &[suite_quota()], &[], true), Ok(()));
}

/// webhook_test.go:126-137: twice the Quota's cpu, denied 403.
#[test]
fn the_quota_exists_but_the_requests_are_not_available_so_the_pod_is_denied() {
    let pod = suite_pod("2000000", "1000000");
    let denied = answer(&pod, &[suite_quota()], &[], true).unwrap_err();
    assert_eq!(denied.code, 403);
    assert!(
        denied
            .message
            .starts_with("peering cpu quota usage exceeded"),
        "{denied}"
    );
}

/// webhook_test.go:159-177: deleting a counted pod is allowed silently and
/// its share is free again — the same pod fits once more.
#[test]
fn deleting_a_counted_shadowpod_restores_its_resources() {
    let pod = suite_pod("1000000", "1000000");
    let mut cache = BTreeMap::from([(USER.to_string(), vec![pod.clone()])]);
    assert!(check(&pod, &[suite_quota()], &cache[USER], true).is_err());
    assert_eq!(release(&pod, &mut cache), Ok(None));
    assert_eq!(check(&pod, &[suite_quota()], &cache[USER], true), Ok(()));
}

/// webhook_test.go:178-191: the creator is known but not the pod — allowed,
/// saying so.
#[test]
fn deleting_a_shadowpod_the_cache_does_not_hold_is_allowed_with_a_note() {
    let pod = suite_pod("1000000", "1000000");
    let mut cache = BTreeMap::from([(USER.to_string(), vec![])]);
    assert_eq!(
        release(&pod, &mut cache),
        Ok(Some(
            "ShadowPod test-shadowpod not found (Maybe Cache problem)".into()
        ))
    );
}

/// webhook_test.go:192-203: the creator is not known — allowed, saying so.
#[test]
fn deleting_a_shadowpod_of_an_unknown_creator_is_allowed_with_a_note() {
    let pod = suite_pod("1000000", "1000000");
    let mut cache = BTreeMap::new();
    assert_eq!(
        release(&pod, &mut cache),
        Ok(Some(format!(
            "Peering not found in cache for user {USER:?}"
        )))
    );
}

/// SPD:58-62: a pod still counted is not admitted again under its name.
#[test]
fn a_shadowpod_still_counted_is_not_admitted_twice() {
    let q = quota(json!({"cpu": "4", "memory": "4Gi"}), false, "None");
    let running = shadow_pod("a", ORIGIN, USER, "1", "1Gi");
    assert_eq!(
        check(&running, &[q], std::slice::from_ref(&running), true),
        Err("ShadowPod a is already running".into())
    );
}

/// SPD:140: a Quota without a level is not `None`: requests are required.
#[test]
fn a_quota_without_a_level_requires_cpu_and_memory_requests() {
    let mut pod = suite_pod("1", "1");
    pod["spec"]["pod"]["containers"][0]["resources"] = json!({"requests": {"cpu": "1"}});
    assert_eq!(
        check(&pod, &[suite_quota()], &[], true),
        Err("CPU and/or memory requests not set for container main".into())
    );
}

#[test]
fn a_shadowpod_without_an_origin_label_is_refused() {
    let mut pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    pod["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("offloading.liqo.io/origin");
    assert_eq!(
        check(&pod, &[], &[], false),
        Err("missing origin Cluster ID label".into())
    );
}

#[test]
fn with_the_quota_and_room_left_the_shadowpod_is_admitted() {
    let q = quota(json!({"cpu": "2", "memory": "4Gi"}), false, "None");
    let running = shadow_pod("a", ORIGIN, USER, "1", "2Gi");
    let pod = shadow_pod("b", ORIGIN, USER, "1", "2Gi");
    assert_eq!(check(&pod, &[q], &[running], true), Ok(()));
}

#[test]
fn with_the_quota_but_no_room_left_the_shadowpod_is_denied() {
    let q = quota(json!({"cpu": "2", "memory": "4Gi"}), false, "None");
    let running = shadow_pod("a", ORIGIN, USER, "1500m", "2Gi");
    let pod = shadow_pod("b", ORIGIN, USER, "1", "2Gi");
    let denied = check(&pod, &[q], &[running], true).unwrap_err();
    assert!(
        denied.starts_with("peering cpu quota usage exceeded"),
        "{denied}"
    );
}

/// webhook_test.go:138-151: denied 403.
#[test]
fn without_a_quota_the_shadowpod_is_denied() {
    let pod = suite_pod("2000000", "1000000");
    let denied = answer(&pod, &[], &[], true).unwrap_err();
    assert_eq!(denied.code, 403);
    assert_eq!(denied.message, "failed getting quota");
}

#[test]
fn a_cordoned_quota_refuses_even_a_pod_that_fits() {
    let q = quota(json!({"cpu": "2", "memory": "4Gi"}), true, "None");
    let pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    assert_eq!(check(&pod, &[q], &[], true), Err("user is cordoned".into()));
}

#[test]
fn zeros_refuse_every_pod_with_requests() {
    let q = quota(
        json!({"cpu": "0", "memory": "0", "pods": "0"}),
        false,
        "None",
    );
    let pod = shadow_pod("p", ORIGIN, USER, "1m", "1");
    assert!(check(&pod, &[q], &[], true).is_err());
}

#[test]
fn a_requested_key_missing_from_the_quota_is_refused() {
    let q = quota(json!({"cpu": "2"}), false, "None");
    let pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    assert_eq!(
        check(&pod, &[q], &[], true),
        Err("memory quota limit not found for this peering".into())
    );
}

#[test]
fn at_level_none_a_pod_without_requests_is_admitted_and_at_soft_refused() {
    let mut pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    pod["spec"]["pod"]["containers"][0]["resources"] = json!({});
    let none = quota(json!({"cpu": "2", "memory": "4Gi"}), false, "None");
    assert_eq!(check(&pod, &[none], &[], true), Ok(()));
    let soft = quota(json!({"cpu": "2", "memory": "4Gi"}), false, "Soft");
    assert_eq!(
        check(&pod, &[soft], &[], true),
        Err("CPU and/or memory requests not set for container main".into())
    );
}

#[test]
fn at_level_hard_limits_must_equal_requests() {
    let mut pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    pod["spec"]["pod"]["containers"][0]["resources"]["limits"]["cpu"] = json!("2");
    let hard = quota(json!({"cpu": "4", "memory": "4Gi"}), false, "Hard");
    assert_eq!(
        check(&pod, &[hard], &[], true),
        Err("cpu limits and requests are not equal for container main".into())
    );
}

#[test]
fn an_init_container_counts_when_larger_than_the_containers() {
    let mut pod = shadow_pod("p", ORIGIN, USER, "500m", "1Gi");
    pod["spec"]["pod"]["initContainers"] =
        json!([{"name": "init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]);
    let q = quota(json!({"cpu": "2", "memory": "4Gi"}), false, "None");
    assert!(check(&pod, &[q], &[], true)
        .unwrap_err()
        .starts_with("peering cpu quota usage exceeded"));
}

/// SPD:82-83: a pod of the same name but another UID is not released.
#[test]
fn deleting_a_shadowpod_of_another_uid_releases_nothing() {
    let counted = suite_pod("1000000", "1000000");
    let mut other = counted.clone();
    other["metadata"]["uid"] = json!("test-shadowpod-uid-2");
    let mut cache = BTreeMap::from([(USER.to_string(), vec![counted])]);
    assert_eq!(
        release(&other, &mut cache),
        Ok(Some("ShadowPod test-shadowpod: UID mismatch".into()))
    );
    assert_eq!(cache[USER].len(), 1);
}

/// SPD:130-136: at level `Hard` a missing limit reads as zero, so only a
/// zero request goes without one.
#[test]
fn at_level_hard_a_missing_limit_is_zero() {
    let mut pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    let resources = &mut pod["spec"]["pod"]["containers"][0]["resources"];
    resources["requests"]["nvidia.com/gpu"] = json!("0");
    let hard = quota(
        json!({"cpu": "4", "memory": "4Gi", "nvidia.com/gpu": "1"}),
        false,
        "Hard",
    );
    assert_eq!(check(&pod, std::slice::from_ref(&hard), &[], true), Ok(()));
    pod["spec"]["pod"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = json!("1");
    assert_eq!(
        check(&pod, &[hard], &[], true),
        Err("nvidia.com/gpu limits and requests are not equal for container main".into())
    );
}

/// spdescription_test.go:177-203: an init container without cpu or memory
/// requests (at a level that requires them), and a pod without containers,
/// are errors.
#[test]
fn an_init_container_without_requests_or_a_pod_without_containers_is_refused() {
    use liqo_model::shadowpod_webhook::pod_quota;
    let mut pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    pod["spec"]["pod"]["initContainers"] =
        json!([{"name": "init", "resources": {"requests": {"cpu": "1"}}}]);
    assert_eq!(
        pod_quota(&pod, "Soft").map_err(|d| d.message),
        Err("CPU and/or memory requests not set for initContainer init".into())
    );
    assert!(pod_quota(&pod, "None").is_ok());
    pod["spec"]["pod"] = json!({});
    assert_eq!(
        pod_quota(&pod, "None").map_err(|d| d.message),
        Err("ShadowPod p has no containers defined".into())
    );
}

/// spdescription_test.go:205-223: the sum of the containers' requests, or
/// per key the largest init container's when that is larger.
#[test]
fn a_pods_quota_is_the_max_of_its_containers_sum_and_its_largest_init_container() {
    use liqo_model::shadowpod_webhook::pod_quota;
    let mut pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    let container = |name: &str, cpu: &str, memory: &str| json!({"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}});
    pod["spec"]["pod"]["containers"] =
        json!([container("a", "1", "1Gi"), container("b", "2", "1Gi")]);
    pod["spec"]["pod"]["initContainers"] =
        json!([container("i1", "1", "4Gi"), container("i2", "2", "3Gi")]);
    let quota = pod_quota(&pod, "Soft").unwrap();
    let text: BTreeMap<String, String> = quota
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    assert_eq!(
        text,
        BTreeMap::from([("cpu".into(), "3".into()), ("memory".into(), "4Gi".into())])
    );
}
