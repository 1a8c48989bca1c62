//! Liqo v1.2.0's Tenant and ResourceSlice webhooks on the model's clusters
//! (`pkg/webhooks/tenant/`, `pkg/webhooks/resourceslice/validate.go`):
//! each rule refuses with Liqo's words and lets the neighbouring write
//! through, as the API server answers a webhook (`admission webhook
//! "<name>" denied the request: <message>`), for the users who really make
//! those writes — the consumer's control plane (group `liqo.io`) and Liqo's
//! controller manager. The webhooks read through watch caches, as Liqo's
//! do through the manager's; what a rule needs to find there (a Tenant, a
//! slice) is made before the webhooks start, whose start waits for the
//! caches' first lists, so no test depends on a cache catching up.
#![allow(clippy::unwrap_used)]

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::Client;
use kube_test_server::{GroupResource, KubeApiServer};
use liqo_model::identity::{self, Rule};
use liqo_model::resourceslice_webhook::{self, messages as slice_messages};
use liqo_model::tenant_webhook::{self, messages as tenant_messages};
use liqo_model::{consts, Consumer, Provider, ProviderConfig, CONTROLLER_MANAGER};
use serde_json::{json, Value};

const CONSUMER: &str = "consumer-1";
const PROVIDER: &str = "provider-1";
const TENANT_NS: &str = "liqo-tenant-consumer-1";
const TENANTS: (&str, &str) = ("authentication.liqo.io", "tenants");
const SLICES: (&str, &str) = ("authentication.liqo.io", "resourceslices");
const NAMESPACES: (&str, &str) = ("", "namespaces");

/// What the consumer's control plane and peering user may do in their
/// tenant namespace on the provider, for the tests' writes (Liqo grants
/// them less; the webhooks, not RBAC, are under test here).
const PEER_RULES: &[Rule] = &[Rule::new(
    &["authentication.liqo.io"],
    &["resourceslices", "tenants"],
    identity::ALL,
)];

fn namespace(kube: &KubeApiServer, name: &str, labels: Value) {
    kube.apply(
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": name, "labels": labels}}),
    );
}

/// A tenant namespace for `cluster`, labelled as `liqoctl peer` leaves it.
fn tenant_namespace(kube: &KubeApiServer, name: &str, cluster: &str) {
    namespace(
        kube,
        name,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": cluster}),
    );
}

fn tenant(name: &str, namespace: &str, cluster: &str, labels: Value) -> Value {
    json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
           "metadata": {"name": name, "namespace": namespace, "labels": labels},
           "spec": {"clusterID": cluster, "authzPolicy": "TolerateNoHandshake",
                    "tenantCondition": "Active"}})
}

fn slice(name: &str, namespace: &str, labels: Value) -> Value {
    json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
           "metadata": {"name": name, "namespace": namespace, "labels": labels},
           "spec": {"class": "default", "consumerClusterID": CONSUMER,
                    "providerClusterID": PROVIDER, "resources": {"cpu": "1"}}})
}

/// The crdReplicator's replica, on the provider, of the consumer's slice
/// `name` (`internal/crdReplicator/reflection/handler.go:332-351`).
fn replica(name: &str) -> Value {
    slice(
        name,
        TENANT_NS,
        json!({"liqo.io/replicated": "true", "liqo.io/originID": CONSUMER,
               "liqo.io/remote-cluster-id": CONSUMER}),
    )
}

fn api(client: &Client, namespace: &str, resource: (&str, &str)) -> Api<DynamicObject> {
    let ar = match resource {
        TENANTS => consts::tenants(),
        _ => consts::resource_slices(),
    };
    Api::namespaced_with(client.clone(), namespace, &ar)
}

/// The consumer's control plane on the provider: user `<consumer>`, group
/// `liqo.io` (`pkg/liqo-controller-manager/authentication/csr.go:70-103`;
/// the peering user's certificate carries the same O, :75-90), bound in
/// its tenant namespace.
async fn consumer_client(kube: &KubeApiServer) -> Client {
    identity::grant_in(kube, CONSUMER, "test-peer", TENANT_NS, PEER_RULES);
    identity::client_in_groups(kube, CONSUMER, &["liqo.io"])
        .await
        .unwrap()
}

/// Liqo's controller manager (no `liqo.io` group), with the tests' rights.
async fn manager_client(kube: &KubeApiServer) -> Client {
    identity::grant(kube, CONTROLLER_MANAGER, "test-manager", PEER_RULES);
    identity::client_as(kube, CONTROLLER_MANAGER).await.unwrap()
}

/// The API server's answer to a refused write: code and message.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn denied_by(webhook: &str, message: &str) -> String {
    format!("admission webhook {webhook:?} denied the request: {message}")
}

async fn create(api: &Api<DynamicObject>, object: Value) -> Result<DynamicObject, kube::Error> {
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
}

async fn merge(
    api: &Api<DynamicObject>,
    name: &str,
    patch: Value,
) -> Result<DynamicObject, kube::Error> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// A provider with the consumer's tenant namespace, Liqo's controllers
/// and webhooks running, after `before` made what must be in the
/// webhooks' caches.
async fn provider_with(before: impl FnOnce(&KubeApiServer)) -> (KubeApiServer, Provider) {
    let kube = KubeApiServer::start().await.unwrap();
    tenant_namespace(&kube, TENANT_NS, CONSUMER);
    before(&kube);
    let running = Provider::start(&kube, ProviderConfig::default())
        .await
        .unwrap();
    (kube, running)
}

// ---- Tenant (pkg/webhooks/tenant/mutate.go, validate.go) ----

/// `mutate.go:51-76`: a Tenant applied without `liqo.io/remote-cluster-id`
/// (the label `liqoctl` does set) gets its `spec.clusterID`, so the
/// validator's label check (`validate.go:148-151`) passes; a Tenant
/// labelled `liqo.io/webhook-skip=true` is passed by neither webhook (the
/// chart's `objectSelector`), so it keeps having no label.
#[tokio::test]
async fn the_tenant_mutator_labels_a_tenant_with_its_cluster_id() {
    let (kube, _provider) = provider_with(|_| {}).await;
    let consumer = consumer_client(&kube).await;
    let tenants = api(&consumer, TENANT_NS, TENANTS);
    let made = create(&tenants, tenant(CONSUMER, TENANT_NS, CONSUMER, json!({})))
        .await
        .unwrap();
    assert_eq!(
        made.metadata
            .labels
            .unwrap_or_default()
            .get(consts::REMOTE_CLUSTER_ID),
        Some(&CONSUMER.to_string())
    );

    namespace(&kube, "not-a-tenant-namespace", json!({}));
    let skipped = tenant(
        "skipped",
        "not-a-tenant-namespace",
        CONSUMER,
        json!({tenant_webhook::WEBHOOK_SKIP: "true"}),
    );
    let made = kube.create(TENANTS, skipped).unwrap();
    assert!(made["metadata"]["labels"]
        .get(consts::REMOTE_CLUSTER_ID)
        .is_none());
}

/// `validate.go:136-159`, each check once, on a create by the consumer's
/// peering user (as `liqoctl peer` applies it): outside a tenant
/// namespace 400; a label that is not the spec's cluster ID 400; a cluster
/// ID not the namespace's 403 — and the same Tenant done right is created.
#[tokio::test]
async fn a_tenant_must_sit_in_its_clusters_tenant_namespace_and_say_so() {
    let (kube, _provider) = provider_with(|kube| {
        namespace(kube, "plain", json!({}));
        tenant_namespace(kube, "liqo-tenant-other", "other-cluster");
    })
    .await;
    let admin = identity::client_in_groups(&kube, "test-admin", &["system:masters"])
        .await
        .unwrap();
    let labelled = json!({"liqo.io/remote-cluster-id": CONSUMER});

    let in_plain = create(
        &api(&admin, "plain", TENANTS),
        tenant(CONSUMER, "plain", CONSUMER, labelled.clone()),
    )
    .await;
    assert_eq!(
        refusal(in_plain),
        (
            400,
            denied_by(
                tenant_webhook::NAME,
                tenant_messages::NOT_IN_TENANT_NAMESPACE
            )
        )
    );

    let mislabelled = create(
        &api(&admin, TENANT_NS, TENANTS),
        tenant(
            CONSUMER,
            TENANT_NS,
            CONSUMER,
            json!({"liqo.io/remote-cluster-id": "someone-else"}),
        ),
    )
    .await;
    assert_eq!(
        refusal(mislabelled),
        (
            400,
            denied_by(tenant_webhook::NAME, tenant_messages::LABEL_MISMATCH)
        )
    );

    let elsewhere = create(
        &api(&admin, "liqo-tenant-other", TENANTS),
        tenant(CONSUMER, "liqo-tenant-other", CONSUMER, labelled.clone()),
    )
    .await;
    assert_eq!(
        refusal(elsewhere),
        (
            403,
            denied_by(tenant_webhook::NAME, tenant_messages::NAMESPACE_MISMATCH)
        )
    );

    create(
        &api(&admin, TENANT_NS, TENANTS),
        tenant(CONSUMER, TENANT_NS, CONSUMER, labelled),
    )
    .await
    .unwrap();
}

/// `validate.go:81-104`: one Tenant per tenant namespace, one Tenant of a
/// name in the cluster — a second Tenant in the consumer's namespace and
/// a Tenant of the consumer's name in another consumer's namespace are
/// refused (403), a Tenant of another name in another namespace is made.
#[tokio::test]
async fn a_tenant_is_alone_in_its_namespace_and_its_name_unique_in_the_cluster() {
    let (kube, _provider) = provider_with(|kube| {
        // Both consumers' namespaces name the same cluster, so only the
        // uniqueness rules can refuse.
        tenant_namespace(kube, "liqo-tenant-second", CONSUMER);
        kube.create(
            TENANTS,
            tenant(
                CONSUMER,
                TENANT_NS,
                CONSUMER,
                json!({"liqo.io/remote-cluster-id": CONSUMER}),
            ),
        )
        .unwrap();
    })
    .await;
    let admin = identity::client_in_groups(&kube, "test-admin", &["system:masters"])
        .await
        .unwrap();
    let labelled = json!({"liqo.io/remote-cluster-id": CONSUMER});

    let second_here = create(
        &api(&admin, TENANT_NS, TENANTS),
        tenant("another-name", TENANT_NS, CONSUMER, labelled.clone()),
    )
    .await;
    assert_eq!(
        refusal(second_here),
        (
            403,
            denied_by(tenant_webhook::NAME, tenant_messages::ONE_PER_NAMESPACE)
        )
    );

    let same_name_there = create(
        &api(&admin, "liqo-tenant-second", TENANTS),
        tenant(CONSUMER, "liqo-tenant-second", CONSUMER, labelled.clone()),
    )
    .await;
    assert_eq!(
        refusal(same_name_there),
        (
            403,
            denied_by(tenant_webhook::NAME, tenant_messages::NAME_TAKEN)
        )
    );

    create(
        &api(&admin, "liqo-tenant-second", TENANTS),
        tenant("another-name", "liqo-tenant-second", CONSUMER, labelled),
    )
    .await
    .unwrap();
}

/// `validate.go:109-134` has no rule on who changes what: the Tenant
/// itself passes its update (its own name is no clash, :128-131), and the
/// consumer's peering user may set a `Drained` Tenant `Active` again —
/// Liqo v1.2.0 leaves a drain's protection to RBAC — while a label that
/// no longer says the cluster ID is refused on an update too (:116-118).
#[tokio::test]
async fn a_tenant_update_is_judged_on_consistency_not_on_who_makes_it() {
    let (kube, _provider) = provider_with(|kube| {
        let mut drained = tenant(
            CONSUMER,
            TENANT_NS,
            CONSUMER,
            json!({"liqo.io/remote-cluster-id": CONSUMER}),
        );
        drained["spec"]["tenantCondition"] = json!("Drained");
        kube.create(TENANTS, drained).unwrap();
    })
    .await;
    let consumer = consumer_client(&kube).await;
    let tenants = api(&consumer, TENANT_NS, TENANTS);

    let active = merge(
        &tenants,
        CONSUMER,
        json!({"spec": {"tenantCondition": "Active"}}),
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::to_value(active).unwrap()["spec"]["tenantCondition"],
        "Active"
    );

    let relabelled = merge(
        &tenants,
        CONSUMER,
        json!({"metadata": {"labels": {"liqo.io/remote-cluster-id": "someone-else"}}}),
    )
    .await;
    assert_eq!(
        refusal(relabelled),
        (
            400,
            denied_by(tenant_webhook::NAME, tenant_messages::LABEL_MISMATCH)
        )
    );
}

// ---- ResourceSlice (pkg/webhooks/resourceslice/validate.go) ----

/// `validate.go:81-98, 146-158` on the consumer (`Consumer::start`
/// registers the webhook): a local slice's name (`liqo.io/replication=true`)
/// is taken in every namespace, so a slice of that name elsewhere is
/// refused (403); a replica of that name (`liqo.io/replicated=true`) is
/// always let in, and a name only a non-local slice has is free.
#[tokio::test]
async fn a_local_slice_name_is_unique_in_the_cluster_except_for_replicas() {
    let kube = KubeApiServer::start().await.unwrap();
    tenant_namespace(&kube, "liqo-tenant-provider-1", PROVIDER);
    tenant_namespace(&kube, "liqo-tenant-provider-2", "provider-2");
    kube.create(
        SLICES,
        slice(
            "bought",
            "liqo-tenant-provider-1",
            json!({"liqo.io/replication": "true", "liqo.io/remoteID": PROVIDER}),
        ),
    )
    .unwrap();
    kube.create(
        SLICES,
        slice("not-replicated", "liqo-tenant-provider-1", json!({})),
    )
    .unwrap();
    let _consumer = Consumer::start(&kube).await.unwrap();
    let manager = manager_client(&kube).await;
    let elsewhere = api(&manager, "liqo-tenant-provider-2", SLICES);

    let duplicate = create(
        &elsewhere,
        slice(
            "bought",
            "liqo-tenant-provider-2",
            json!({"liqo.io/replication": "true", "liqo.io/remoteID": "provider-2"}),
        ),
    )
    .await;
    assert_eq!(
        refusal(duplicate),
        (
            403,
            denied_by(resourceslice_webhook::NAME, slice_messages::DUPLICATE)
        )
    );

    create(
        &elsewhere,
        slice(
            "bought",
            "liqo-tenant-provider-2",
            json!({"liqo.io/replicated": "true", "liqo.io/originID": "provider-2"}),
        ),
    )
    .await
    .unwrap();
    create(
        &elsewhere,
        slice("not-replicated", "liqo-tenant-provider-2", json!({})),
    )
    .await
    .unwrap();
}

/// Liqo's cordon protection (`validate.go:100-144`) on the provider: a
/// slice the provider cordoned (`liqoctl cordon resourceslice` adds
/// `liqo.io/cordon: "true"`, `pkg/liqoctl/cordon/handler.go:100`) cannot
/// be uncordoned by the consumer's control plane — neither the annotation
/// removed nor changed — nor can the consumer cordon one, or touch the
/// `liqo.io/remote-cluster-id` label; the consumer's other edits pass,
/// and Liqo's controller manager (not a control-plane user) may lift the
/// cordon.
#[tokio::test]
async fn the_consumer_cannot_undo_the_providers_cordon_of_a_slice_but_liqo_may() {
    let (kube, _provider) = provider_with(|kube| {
        kube.create(SLICES, replica("cordoned")).unwrap();
        kube.create(SLICES, replica("open")).unwrap();
    })
    .await;
    // The provider's administrator cordons, in-process: no control-plane
    // group, so not checked.
    kube.merge_patch(
        SLICES,
        Some(TENANT_NS),
        "cordoned",
        json!({"metadata": {"annotations": {consts::CORDON_RESOURCE: "true"}}}),
        false,
    )
    .unwrap();
    let consumer = consumer_client(&kube).await;
    let slices = api(&consumer, TENANT_NS, SLICES);
    let cordon =
        |value: Value| json!({"metadata": {"annotations": {consts::CORDON_RESOURCE: value}}});
    let denied = |message: &str| (403, denied_by(resourceslice_webhook::NAME, message));

    assert_eq!(
        refusal(merge(&slices, "cordoned", cordon(Value::Null)).await),
        denied(slice_messages::DELETE_CORDON)
    );
    assert_eq!(
        refusal(merge(&slices, "cordoned", cordon(json!("false"))).await),
        denied(slice_messages::CHANGE_CORDON)
    );
    assert_eq!(
        refusal(merge(&slices, "open", cordon(json!("true"))).await),
        denied(slice_messages::ADD_CORDON)
    );
    let label = |value: Value| json!({"metadata": {"labels": {consts::REMOTE_CLUSTER_ID: value}}});
    assert_eq!(
        refusal(merge(&slices, "open", label(json!("someone-else"))).await),
        denied(slice_messages::CHANGE_REMOTE_CLUSTER_ID)
    );
    assert_eq!(
        refusal(merge(&slices, "open", label(Value::Null)).await),
        denied(slice_messages::DELETE_REMOTE_CLUSTER_ID)
    );
    let cordoned = kube
        .get(
            GroupResource::new(SLICES.0, SLICES.1),
            Some(TENANT_NS),
            "cordoned",
        )
        .unwrap();
    assert_eq!(
        cordoned["metadata"]["annotations"][consts::CORDON_RESOURCE],
        "true"
    );

    // What the crdReplicator does to a replica (its spec,
    // `handler.go:194-221`), and an annotation of its own, pass.
    merge(
        &slices,
        "cordoned",
        json!({"metadata": {"annotations": {"example.com/note": "x"}},
               "spec": {"resources": {"cpu": "2"}}}),
    )
    .await
    .unwrap();

    let manager = manager_client(&kube).await;
    let lifted = merge(
        &api(&manager, TENANT_NS, SLICES),
        "cordoned",
        cordon(Value::Null),
    )
    .await
    .unwrap();
    assert!(!lifted
        .metadata
        .annotations
        .unwrap_or_default()
        .contains_key(consts::CORDON_RESOURCE));
}

/// `validate.go:101-103`: a slice without a control-plane requester is
/// not judged at all on an update — the cordon the provider's own
/// controllers write (a class controller cordoning a revoked slice) and a
/// new `liqo.io/remote-cluster-id` label pass.
#[tokio::test]
async fn liqos_own_users_may_cordon_and_relabel_a_slice() {
    let (kube, _provider) = provider_with(|kube| {
        kube.create(SLICES, slice("unlabelled", TENANT_NS, json!({})))
            .unwrap();
    })
    .await;
    let manager = manager_client(&kube).await;
    let slices = api(&manager, TENANT_NS, SLICES);
    let updated = merge(
        &slices,
        "unlabelled",
        json!({"metadata": {"labels": {consts::REMOTE_CLUSTER_ID: CONSUMER},
                            "annotations": {consts::CORDON_RESOURCE: "true"}}}),
    )
    .await
    .unwrap();
    assert_eq!(
        updated.metadata.annotations.unwrap_or_default()[consts::CORDON_RESOURCE],
        "true"
    );
}
