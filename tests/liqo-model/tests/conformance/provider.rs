//! The provider's remote ResourceSlice controller, quota creator and
//! ShadowPod webhook.

use kube_test_server::KubeApiServer;
use liqo_model::shadowpod_webhook::{validate_create, World};
use liqo_model::{slice, LimitsEnforcement, Provider, ProviderConfig};
use serde_json::{json, Value};

use super::*;

const CONSUMER: &str = "consumer-1";
const TENANT_NS: &str = "liqo-tenant-consumer-1";

/// A provider cluster peered with [`CONSUMER`] (tenant namespace and
/// Tenant, as `liqoctl peer` leaves them), Liqo's controllers running.
async fn provider(config: ProviderConfig) -> (KubeApiServer, Provider) {
    let kube = peered_with(CONSUMER, TENANT_NS).await;
    kube.create(TENANTS, json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
        "metadata": {"name": CONSUMER, "namespace": TENANT_NS, "labels": {"liqo.io/remote-cluster-id": CONSUMER}},
        "spec": {"clusterID": CONSUMER, "authzPolicy": "TolerateNoHandshake", "tenantCondition": "Active"}}))
        .unwrap();
    let running = Provider::start(&kube, config).await.unwrap();
    (kube, running)
}

/// The crdReplicator's replica of the consumer's slice `name`.
fn replica(kube: &KubeApiServer, name: &str, class: &str, resources: Value, csr: &str) {
    kube.create(
        SLICES,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": name, "namespace": TENANT_NS,
                     "labels": {"liqo.io/replicated": "true", "liqo.io/originID": CONSUMER,
                                "liqo.io/remote-cluster-id": CONSUMER}},
        "spec": {"class": class, "consumerClusterID": CONSUMER, "providerClusterID": "provider-1",
                 "csr": csr, "resources": resources}}),
    )
    .unwrap();
}

fn quota_name(slice_name: &str) -> String {
    slice::common_name(slice_name, CONSUMER)
}

async fn quota(
    kube: &KubeApiServer,
    slice_name: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(
        kube,
        QUOTAS,
        Some(TENANT_NS),
        &quota_name(slice_name),
        what,
        ready,
    )
    .await
}

/// A class-`gold` slice `name`, once Liqo has authenticated it.
async fn authenticated_gold(kube: &KubeApiServer, name: &str) -> Value {
    let request = json!({"cpu": "2", "memory": "4Gi"});
    replica(kube, name, "gold", request, &csr(name, CONSUMER));
    slice_condition(kube, TENANT_NS, name, "Authentication", "Accepted").await
}

/// A class-`gold` slice authenticated by Liqo, granted `resources` by its
/// class controller; its Quota once made.
async fn granted_quota(kube: &KubeApiServer, name: &str, resources: Value) -> Value {
    authenticated_gold(kube, name).await;
    write_status(kube, TENANT_NS, name, "Accepted", resources);
    quota(kube, name, "a Quota", |_| true).await
}

/// A slice `name` of `class` asking `request` with a good CSR, once its
/// Resources condition is `status`.
async fn judged(
    kube: &KubeApiServer,
    name: &str,
    class: &str,
    request: Value,
    status: &str,
) -> Value {
    replica(kube, name, class, request, &csr(name, CONSUMER));
    slice_condition(kube, TENANT_NS, name, "Resources", status).await
}

/// What the gold slices of most tests are granted.
fn gold_grant() -> Value {
    json!({"cpu": "1", "memory": "2Gi", "pods": "10"})
}

/// A default-class slice created now and granted: once it is, the
/// controllers' queues have passed every earlier slice event.
async fn marker(kube: &KubeApiServer) {
    judged(kube, "marker", "default", json!({}), "Accepted").await;
    quota(kube, "marker", "the marker's Quota", |_| true).await;
}

fn cordon(kube: &KubeApiServer, name: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {"liqo.io/cordon": value}}});
    kube.merge_patch(SLICES, Some(TENANT_NS), name, patch, false)
        .unwrap();
}

fn tenant_condition(kube: &KubeApiServer, condition: &str) {
    let patch = json!({"spec": {"tenantCondition": condition}});
    kube.merge_patch(TENANTS, Some(TENANT_NS), CONSUMER, patch, false)
        .unwrap();
}

#[tokio::test]
async fn a_default_class_slice_is_granted_its_request_plus_the_default_node_resources() {
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    let slice = judged(
        &kube,
        "plain",
        "default",
        json!({"cpu": "2", "memory": "4Gi"}),
        "Accepted",
    )
    .await;
    assert_eq!(
        condition(&slice, "Authentication").as_deref(),
        Some("Accepted")
    );
    let grant = json!({"cpu": "2", "memory": "4Gi", "pods": "110", "ephemeral-storage": "20Gi"});
    assert_eq!(slice["status"]["resources"], grant);
    // And the Quota follows the grant.
    assert_eq!(
        quota(&kube, "plain", "a Quota", |_| true).await["spec"]["resources"],
        grant
    );
}

#[tokio::test]
async fn the_empty_class_is_the_default_class_and_a_request_above_the_defaults_is_granted_uncapped()
{
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    let slice = judged(
        &kube,
        "unnamed",
        "",
        json!({"cpu": "64", "pods": "500"}),
        "Accepted",
    )
    .await;
    let grant = json!({"cpu": "64", "memory": "8Gi", "pods": "500", "ephemeral-storage": "20Gi"});
    assert_eq!(slice["status"]["resources"], grant);
}

#[tokio::test]
async fn another_class_is_authenticated_but_its_resources_are_left_to_its_class_controller() {
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    let slice = authenticated_gold(&kube, "gold").await;
    assert_eq!(condition(&slice, "Resources"), None);
    assert_eq!(slice["status"]["resources"], Value::Null);
    // A later spec change is reconciled again, and still not granted.
    let patch = json!({"spec": {"resources": {"cpu": "3"}}});
    kube.merge_patch(SLICES, Some(TENANT_NS), "gold", patch, false)
        .unwrap();
    marker(&kube).await;
    let slice = get(&kube, SLICES, Some(TENANT_NS), "gold").unwrap();
    assert_eq!(condition(&slice, "Resources"), None);
}

#[tokio::test]
async fn a_bad_csr_denies_authentication_yet_the_default_class_is_still_granted() {
    use base64::Engine;
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    let garbage = base64::engine::general_purpose::STANDARD.encode("not a certificate request");
    replica(
        &kube,
        "forged",
        "default",
        json!({"cpu": "1", "memory": "1Gi"}),
        &garbage,
    );
    let slice = slice_condition(&kube, TENANT_NS, "forged", "Authentication", "Denied").await;
    // Liqo goes on to the resources after denying authentication (RRS:169-178).
    assert_eq!(condition(&slice, "Resources").as_deref(), Some("Accepted"));
}

#[tokio::test]
async fn a_drained_tenant_denies_every_class() {
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    authenticated_gold(&kube, "gold").await;
    tenant_condition(&kube, "Drained");
    slice_condition(&kube, TENANT_NS, "gold", "Resources", "Denied").await;
}

#[tokio::test]
async fn a_cordoned_tenant_denies_only_slices_not_yet_judged() {
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    judged(
        &kube,
        "early",
        "default",
        json!({"cpu": "1", "memory": "1Gi"}),
        "Accepted",
    )
    .await;
    tenant_condition(&kube, "Cordoned");
    judged(
        &kube,
        "late",
        "default",
        json!({"cpu": "1", "memory": "1Gi"}),
        "Denied",
    )
    .await;
    let early = get(&kube, SLICES, Some(TENANT_NS), "early").unwrap();
    assert_eq!(condition(&early, "Resources").as_deref(), Some("Accepted"));
}

#[tokio::test]
async fn a_quota_holds_what_an_accepted_slice_grants_at_the_configured_level() {
    let config = ProviderConfig {
        limits_enforcement: LimitsEnforcement::Hard,
        ..Default::default()
    };
    let (kube, _liqo) = provider(config).await;
    let grant = gold_grant();
    let quota_now = granted_quota(&kube, "gold", grant.clone()).await;
    assert_eq!(quota_now["spec"]["resources"], grant);
    assert_eq!(quota_now["spec"]["limitsEnforcement"], "Hard");
    assert_eq!(quota_now["spec"]["user"], json!(quota_name("gold")));
    assert_eq!(quota_now["metadata"]["ownerReferences"][0]["name"], "gold");
    // A shrink while Accepted is followed.
    write_status(
        &kube,
        TENANT_NS,
        "gold",
        "Accepted",
        json!({"cpu": "500m", "memory": "1Gi", "pods": "5"}),
    );
    quota(&kube, "gold", "the shrink", |q| {
        q["spec"]["resources"]["cpu"] == "500m"
    })
    .await;
}

#[tokio::test]
async fn denied_after_accepted_leaves_the_quota_as_it_was() {
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    let grant = gold_grant();
    granted_quota(&kube, "gold", grant.clone()).await;
    // The revocation as `--on-shrink follow` writes it.
    write_status(&kube, TENANT_NS, "gold", "Denied", Value::Null);
    marker(&kube).await;
    let now = get(&kube, QUOTAS, Some(TENANT_NS), &quota_name("gold")).unwrap();
    assert_eq!(now["spec"]["resources"], grant);
}

#[tokio::test]
async fn a_cordoned_quota_refuses_a_new_pod() {
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    let quota_now = granted_quota(&kube, "gold", gold_grant()).await;
    let labels = std::collections::BTreeMap::from([(
        "liqo.io/remote-cluster-id".to_string(),
        CONSUMER.to_string(),
    )]);
    let pod = shadowpod::shadow_pod("web", CONSUMER, &quota_name("gold"), "100m", "128Mi");
    let check = |quota: &Value| {
        let quotas = [quota.clone()];
        let world = World {
            resource_enforcement: true,
            namespace_labels: Some(&labels),
            quotas: &quotas,
            admitted: &[],
        };
        validate_create(&pod, &world).map_err(|d| d.message)
    };
    assert_eq!(
        check(&quota_now),
        Ok(()),
        "the pod fits the Quota before the cordon"
    );
    // The class controller cordons the replica (`liqo.io/cordon`).
    cordon(&kube, "gold", "true");
    let cordoned = quota(&kube, "gold", "cordoned", |q| q["spec"]["cordoned"] == true).await;
    assert_eq!(check(&cordoned), Err("user is cordoned".to_string()));
    // Lifting the cordon lifts it on the Quota.
    cordon(&kube, "gold", "false");
    quota(&kube, "gold", "uncordoned", |q| {
        q["spec"].get("cordoned").is_none()
    })
    .await;
}

/// ShadowPods as the test server would describe them to its hooks.
fn shadowpods_def() -> kube_test_server::ResourceDef {
    kube_test_server::ResourceDef {
        group: "offloading.liqo.io".into(),
        versions: vec!["v1beta1".into()],
        plural: "shadowpods".into(),
        singular: "shadowpod".into(),
        kind: "ShadowPod".into(),
        list_kind: "ShadowPodList".into(),
        short_names: vec![],
        categories: vec![],
        namespaced: true,
        status_subresource: true,
        custom: true,
        schemas: Default::default(),
        selectable_fields: vec![],
    }
}

/// Ask `ask` until `expected(answer)` holds (the webhook's caches follow
/// the server a moment later), or fail after 10 s naming `what`.
async fn answered<T: std::fmt::Debug>(
    what: &str,
    ask: impl Fn() -> T,
    expected: impl Fn(&T) -> bool,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let answer = ask();
        if expected(&answer) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never {what}; last {answer:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Ask the registered webhook about creating `pod` until `expected(answer)`.
async fn webhook_answers(
    liqo: &Provider,
    pod: &Value,
    what: &str,
    expected: impl Fn(&Result<(), String>) -> bool,
) {
    use kube_test_server::admission::{Attributes, ValidatingHook};
    let def = shadowpods_def();
    let ask = || {
        let attributes = Attributes {
            operation: "CREATE",
            def: &def,
            subresource: "",
            namespace: "offloaded",
            name: pod["metadata"]["name"].as_str().unwrap(),
            object: pod,
            old_object: None,
        };
        liqo.shadowpod_webhook()
            .validate(&attributes)
            .map_err(|d| d.message)
    };
    answered(what, ask, expected).await;
}

/// A provider with namespace `offloaded` for [`CONSUMER`]'s pods and the
/// Quota of a granted `gold` slice; its user.
async fn offloading_with_gold_quota() -> (KubeApiServer, Provider, String) {
    let (kube, liqo) = provider(ProviderConfig::default()).await;
    namespace(
        &kube,
        "offloaded",
        json!({"liqo.io/remote-cluster-id": CONSUMER}),
    );
    granted_quota(&kube, "gold", gold_grant()).await;
    (kube, liqo, quota_name("gold"))
}

#[tokio::test]
async fn the_webhook_on_the_admission_chain_admits_within_the_quota_and_refuses_beyond_it_or_once_cordoned(
) {
    let (kube, liqo, user) = offloading_with_gold_quota().await;
    let first = shadowpod::shadow_pod("first", CONSUMER, &user, "600m", "512Mi");
    webhook_answers(&liqo, &first, "admitted", |a| a.is_ok()).await;
    // The first pod is counted: a second of the same size no longer fits.
    let second = shadowpod::shadow_pod("second", CONSUMER, &user, "600m", "512Mi");
    let no_room = |a: &Result<(), String>| {
        a.as_ref()
            .is_err_and(|m| m.starts_with("peering cpu quota usage exceeded"))
    };
    webhook_answers(&liqo, &second, "refused for room", no_room).await;
    let small = shadowpod::shadow_pod("small", CONSUMER, &user, "100m", "128Mi");
    cordon(&kube, "gold", "true");
    let cordoned =
        |a: &Result<(), String>| a.as_ref().err().map(String::as_str) == Some("user is cordoned");
    webhook_answers(&liqo, &small, "refused as cordoned", cordoned).await;
}

#[tokio::test]
async fn a_status_only_edit_of_a_default_class_slice_is_not_reverted() {
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    judged(
        &kube,
        "plain",
        "default",
        json!({"cpu": "2", "memory": "4Gi"}),
        "Accepted",
    )
    .await;
    // Someone else writes the status (the consumer may, see the replicator
    // tests): the controller reacts to spec changes only (RRS:313-318).
    let patch = json!({"status": {"resources": {"cpu": "1000", "memory": "4Gi"}}});
    kube.merge_patch(SLICES, Some(TENANT_NS), "plain", patch, true)
        .unwrap();
    marker(&kube).await;
    let now = get(&kube, SLICES, Some(TENANT_NS), "plain").unwrap();
    assert_eq!(now["status"]["resources"]["cpu"], "1000");
    // And the quota creator, which reacts to status, follows it (QC:142-143).
    quota(&kube, "plain", "the edited grant", |q| {
        q["spec"]["resources"]["cpu"] == "1000"
    })
    .await;
}

#[tokio::test]
async fn a_deleted_quota_is_made_again() {
    let (kube, _liqo) = provider(ProviderConfig::default()).await;
    let grant = gold_grant();
    let first = granted_quota(&kube, "gold", grant.clone()).await;
    kube.delete_object(
        GroupResource::new(QUOTAS.0, QUOTAS.1),
        Some(TENANT_NS),
        &quota_name("gold"),
    )
    .unwrap();
    let again = quota(&kube, "gold", "a new Quota", |q| {
        q["metadata"]["uid"] != first["metadata"]["uid"]
    })
    .await;
    assert_eq!(again["spec"]["resources"], grant);
}

const SHADOWPODS: (&str, &str) = ("offloading.liqo.io", "shadowpods");

/// Create `pod` on the server until `expected(answer)`.
async fn created_until(
    kube: &KubeApiServer,
    pod: &Value,
    what: &str,
    expected: impl Fn(&Result<Value, String>) -> bool,
) {
    let ask = || {
        kube.create(SHADOWPODS, pod.clone())
            .map_err(|e| e.to_string())
    };
    answered(what, ask, expected).await;
}

/// webhook_test.go:159-177 through the API server: a ShadowPod created
/// there is counted, a second that does not fit is refused, and deleting
/// the first frees its share (`webhook.go:186-223`) so the second is then
/// admitted; a cordon refuses a new pod that fits.
#[tokio::test]
async fn deleting_a_shadowpod_on_the_server_frees_its_share_and_a_cordon_refuses_a_new_one() {
    let (kube, _liqo, user) = offloading_with_gold_quota().await;
    let first = shadowpod::shadow_pod("first", CONSUMER, &user, "600m", "512Mi");
    created_until(&kube, &first, "admitted", Result::is_ok).await;
    let second = shadowpod::shadow_pod("second", CONSUMER, &user, "600m", "512Mi");
    let refused = kube.create(SHADOWPODS, second.clone()).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("peering cpu quota usage exceeded"),
        "{refused}"
    );
    kube.delete_object(SHADOWPODS, Some("offloaded"), "first")
        .unwrap();
    created_until(
        &kube,
        &second,
        "admitted once the first is gone",
        Result::is_ok,
    )
    .await;
    cordon(&kube, "gold", "true");
    let small = shadowpod::shadow_pod("small", CONSUMER, &user, "100m", "128Mi");
    created_until(&kube, &small, "refused as cordoned", |a| {
        a.as_ref().is_err_and(|e| e.contains("user is cordoned"))
    })
    .await;
}

/// `cache.go:49-74` (`cache_test.go:61-81`): a webhook started beside
/// ShadowPods already there counts them against their creator's Quota.
#[tokio::test]
async fn the_webhook_counts_the_shadowpods_already_there_when_it_starts() {
    let kube = peered_with(CONSUMER, TENANT_NS).await;
    namespace(
        &kube,
        "offloaded",
        json!({"liqo.io/remote-cluster-id": CONSUMER}),
    );
    let user = "earlier-user";
    kube.create(
        QUOTAS,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "Quota",
               "metadata": {"name": user, "namespace": TENANT_NS},
               "spec": {"user": user, "limitsEnforcement": "None",
                        "resources": {"cpu": "1", "memory": "1Gi"}}}),
    )
    .unwrap();
    let before = shadowpod::shadow_pod("before", CONSUMER, user, "600m", "512Mi");
    kube.create(SHADOWPODS, before).unwrap();
    let _liqo = Provider::start(&kube, ProviderConfig::default())
        .await
        .unwrap();
    let after = shadowpod::shadow_pod("after", CONSUMER, user, "600m", "512Mi");
    let refused = kube.create(SHADOWPODS, after).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("peering cpu quota usage exceeded"),
        "{refused}"
    );
}
