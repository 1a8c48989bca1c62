//! The ShadowPod webhook's creation check, with the cases of
//! `pkg/webhooks/shadowpod/webhook_test.go` (:74-152) and its quota
//! arithmetic (`spdescription.go`).

use std::collections::BTreeMap;

use liqo_model::shadowpod_webhook::{validate_create, Denied, World};
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

fn check(
    pod: &Value,
    quotas: &[Value],
    admitted: &[Value],
    enforcement: bool,
) -> Result<(), String> {
    let labels = labels();
    let world = World {
        resource_enforcement: enforcement,
        namespace_labels: Some(&labels),
        quotas,
        admitted,
    };
    validate_create(pod, &world).map_err(|Denied(m)| m)
}

#[test]
fn without_resource_validation_an_invalid_cluster_id_label_is_forbidden() {
    let pod = shadow_pod("p", "someone-else", USER, "1", "1Gi");
    assert_eq!(
        check(&pod, &[], &[], false),
        Err("shadowpod Cluster ID label mismatch".into())
    );
}

#[test]
fn without_resource_validation_a_valid_cluster_id_label_is_admitted() {
    let pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    assert_eq!(check(&pod, &[], &[], false), Ok(()));
}

#[test]
fn a_shadowpod_in_a_missing_namespace_is_refused() {
    let pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    let world = World {
        resource_enforcement: false,
        namespace_labels: None,
        quotas: &[],
        admitted: &[],
    };
    assert!(validate_create(&pod, &world).is_err());
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

#[test]
fn without_a_quota_the_shadowpod_is_denied() {
    let pod = shadow_pod("p", ORIGIN, USER, "1", "1Gi");
    assert_eq!(
        check(&pod, &[], &[], true),
        Err("failed getting quota".into())
    );
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
