//! Liqo v1.2.0's Tenant webhooks (`pkg/webhooks/tenant/`: `mutate.go` MUT
//! and `validate.go` TV below) as hooks on the test API server's admission
//! chain, registered as the chart registers them: CREATE and UPDATE of
//! `authentication.liqo.io/v1beta1` `tenants`, the main resource only (a
//! write to `tenants/status` is not sent to them), skipping objects
//! labelled `liqo.io/webhook-skip=true`
//! (`deployments/liqo/templates/webhooks/liqo-mutating-webhook.yaml:114-135`,
//! `liqo-validating-webhook.yaml:111-132`).
//!
//! The mutator labels a Tenant with its `spec.clusterID` when it has no
//! `liqo.io/remote-cluster-id` label (MUT:51-76). The validator
//! (TV:60-159) checks, on a create and on an update, that the Tenant is in
//! a namespace labelled `liqo.io/tenant-namespace=true` whose
//! `liqo.io/remote-cluster-id` is the Tenant's cluster ID and that the
//! Tenant's own label says the same; on a create, that its namespace holds
//! no Tenant yet and no Tenant anywhere has its name; on an update, that no
//! other Tenant has its name. It does not look at who asks: nothing in it
//! keeps a consumer from changing its Tenant's `tenantCondition` (a
//! drained or cordoned Tenant) — Liqo leaves that to RBAC.
//!
//! Namespaces and Tenants are read from watch caches, as Liqo's webhook
//! reads them through the manager's cached client
//! (`cmd/webhook/main.go:205-206`, the name index :216-226).

use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use kube::Client;
use kube_test_server::admission::{Attributes, Denial, MutatingHook, ValidatingHook};
use serde_json::{json, Value};

use crate::consts::{namespaces, tenants, REMOTE_CLUSTER_ID, TENANT_NAMESPACE};
use crate::identity::{Rule, READ};
use crate::watch_cache;

/// The validating webhook's name in the chart
/// (`liqo-validating-webhook.yaml:111`).
pub const NAME: &str = "tenant.validate.liqo.io";
/// The mutating webhook's name: the chart gives it the validating one's
/// (`liqo-mutating-webhook.yaml:114`).
pub const MUTATING_NAME: &str = "tenant.validate.liqo.io";
/// The label the chart's `objectSelector` skips when `true`
/// (`liqo-validating-webhook.yaml:128-132`).
pub const WEBHOOK_SKIP: &str = "liqo.io/webhook-skip";

/// TV:36-37 (`+kubebuilder:rbac` of the validator), as the chart's
/// `liqo-webhook` ClusterRole grants them
/// (`deployments/liqo/files/liqo-webhook-ClusterRole.yaml:9-17, 57-65`):
/// read, list and watch — the cached client watches what it lists.
pub const RULES: &[Rule] = &[
    Rule::new(&[""], &["namespaces"], READ),
    Rule::new(&["authentication.liqo.io"], &["tenants"], READ),
];

/// Names the webhook's watch caches in the logs.
const CACHE: &str = "tenant-webhook-cache";

/// The validator's refusals, word for word, for the tests to compare.
pub mod messages {
    /// TV:145.
    pub const NOT_IN_TENANT_NAMESPACE: &str = "resources Tenant must be created in a tenant namespace, check the documentation for further info";
    /// TV:150.
    pub const LABEL_MISMATCH: &str =
        "the \"liqo.io/remote-cluster-id\" label must match the cluster ID in the specs";
    /// TV:155.
    pub const NAMESPACE_MISMATCH: &str =
        "the Tenant must have the same cluster ID of its tenant namespace";
    /// TV:91.
    pub const ONE_PER_NAMESPACE: &str = "a Tenant already exists in the tenant namespace";
    /// TV:103, 130.
    pub const NAME_TAKEN: &str = "tenant should have a unique name across the cluster: a Tenant with the same name already exists in the cluster";
}

/// What the webhook's cached client holds when it judges a Tenant.
pub struct View<'a> {
    /// The Tenant's namespace, if cached.
    pub namespace: Option<&'a Value>,
    /// Every cached Tenant.
    pub tenants: &'a [Value],
}

/// MUT:51-76: the `liqo.io/remote-cluster-id` label set to `spec.clusterID`
/// when absent (an existing label, even a wrong one, is kept: TV judges
/// it). Whether the object changed.
pub fn mutate(tenant: &mut Value) -> bool {
    if tenant["metadata"]["labels"]
        .get(REMOTE_CLUSTER_ID)
        .is_some()
    {
        return false;
    }
    let cluster_id = tenant["spec"]["clusterID"].clone();
    let cluster_id = if cluster_id.is_string() {
        cluster_id
    } else {
        // A Go string's zero value: `string(tenant.Spec.ClusterID)`.
        json!("")
    };
    if !tenant["metadata"]["labels"].is_object() {
        tenant["metadata"]["labels"] = json!({});
    }
    tenant["metadata"]["labels"][REMOTE_CLUSTER_ID] = cluster_id;
    true
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_str()
        .unwrap_or_default()
}

/// `admission.Errored(code, err)`: the code and the message, no reason
/// (controller-runtime `pkg/webhook/admission/response.go`, `Errored`).
fn errored(code: u16, message: impl Into<String>) -> Denial {
    Denial::new(code, "", message)
}

/// `admission.Denied(msg)`: 403 Forbidden with the message
/// (controller-runtime `response.go`, `ValidationResponse`).
fn denied(message: &str) -> Denial {
    Denial::new(403, "Forbidden", message)
}

/// TV:136-159.
fn consistency_checks(tenant: &Value, view: &View<'_>) -> Result<(), Denial> {
    let namespace = str_at(tenant, &["metadata", "namespace"]);
    // TV:138-142: a cached client's Get of a missing object is a NotFound,
    // which `output.PrettyErr` words as kubectl does
    // (`pkg/liqoctl/output/output.go:236-248`, kubectl's
    // `StandardErrorMessage`: "Error from server (<reason>): <error>").
    let Some(ns) = view.namespace else {
        return Err(errored(
            500,
            format!(
                "failed getting the tenant namespace: Error from server (NotFound): namespaces {namespace:?} not found"
            ),
        ));
    };
    let ns_labels = &ns["metadata"]["labels"];
    // TV:144-146.
    if ns_labels[TENANT_NAMESPACE].as_str() != Some("true") {
        return Err(errored(400, messages::NOT_IN_TENANT_NAMESPACE));
    }
    let cluster_id = str_at(tenant, &["spec", "clusterID"]);
    // TV:148-151: an absent label reads as "" in Go.
    if str_at(tenant, &["metadata", "labels", REMOTE_CLUSTER_ID]) != cluster_id {
        return Err(errored(400, messages::LABEL_MISMATCH));
    }
    // TV:153-156.
    if cluster_id != ns_labels[REMOTE_CLUSTER_ID].as_str().unwrap_or_default() {
        return Err(errored(403, messages::NAMESPACE_MISMATCH));
    }
    Ok(())
}

/// TV:60-134: why the webhook refuses `tenant` on `operation`
/// (`CREATE` or `UPDATE`; anything else is allowed, TV:66-67).
pub fn validate(operation: &str, tenant: &Value, view: &View<'_>) -> Result<(), Denial> {
    if operation != "CREATE" && operation != "UPDATE" {
        return Ok(());
    }
    consistency_checks(tenant, view)?;
    let namespace = str_at(tenant, &["metadata", "namespace"]);
    let name = str_at(tenant, &["metadata", "name"]);
    // TV:161-176: `getTenants` in a namespace, or cluster-wide by name (the
    // `metadata.name` index of main.go:216-226).
    let in_namespace = || {
        view.tenants
            .iter()
            .filter(|t| str_at(t, &["metadata", "namespace"]) == namespace)
    };
    let named: Vec<&Value> = view
        .tenants
        .iter()
        .filter(|t| str_at(t, &["metadata", "name"]) == name)
        .collect();
    if operation == "CREATE" {
        // TV:81-92.
        if in_namespace().next().is_some() {
            return Err(denied(messages::ONE_PER_NAMESPACE));
        }
        // TV:94-104.
        if !named.is_empty() {
            return Err(denied(messages::NAME_TAKEN));
        }
        return Ok(());
    }
    // TV:128-131: exactly one Tenant of that name, and not this one.
    if named.len() == 1
        && str_at(named[0], &["metadata", "uid"]) != str_at(tenant, &["metadata", "uid"])
    {
        return Err(denied(messages::NAME_TAKEN));
    }
    Ok(())
}

/// Whether a request reaches the webhooks: CREATE or UPDATE (the hooks'
/// default operations) of the main `tenants` resource
/// (`liqo-validating-webhook.yaml:121-125`; a rule's resource without `/`
/// names no subresource, `rules.go` `Matcher.resource`), passing the
/// `objectSelector` `liqo.io/webhook-skip NotIn [true]` (:128-132) — which
/// the API server matches against the object or the old object, either
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object/matcher.go:37-61`;
/// a missing label is `NotIn`).
fn judged(a: &Attributes<'_>) -> bool {
    let not_skipped =
        |o: &Value| o.is_object() && o["metadata"]["labels"][WEBHOOK_SKIP].as_str() != Some("true");
    a.def.group == "authentication.liqo.io"
        && a.def.plural == "tenants"
        && a.subresource.is_empty()
        && (not_skipped(a.object) || a.old_object.is_some_and(not_skipped))
}

/// Both Tenant webhooks, on the test API server's admission chain
/// ([`crate::Provider::start`] and [`crate::Consumer::start`] register
/// them: Liqo's webhook runs on every cluster).
pub struct Hook {
    namespaces: Store<DynamicObject>,
    tenants: Store<DynamicObject>,
}

impl Hook {
    /// The hook and the watch tasks filling its caches, filled once the
    /// returned future is ready (the manager starts the webhook server
    /// after its caches sync).
    pub async fn start(client: Client) -> (Hook, Vec<tokio::task::JoinHandle<()>>) {
        let (namespaces, ns_task) = watch_cache::start(client.clone(), namespaces(), CACHE);
        let (tenants, tenant_task) = watch_cache::start(client, tenants(), CACHE);
        let _ = namespaces.wait_until_ready().await;
        let _ = tenants.wait_until_ready().await;
        (
            Hook {
                namespaces,
                tenants,
            },
            vec![ns_task, tenant_task],
        )
    }
}

impl MutatingHook for Hook {
    fn name(&self) -> &str {
        MUTATING_NAME
    }

    fn admit(&self, a: &Attributes<'_>, object: &mut Value) -> Result<(), Denial> {
        if judged(a) {
            mutate(object);
        }
        Ok(())
    }
}

impl ValidatingHook for Hook {
    fn name(&self) -> &str {
        NAME
    }

    fn validate(&self, a: &Attributes<'_>) -> Result<(), Denial> {
        if !judged(a) {
            return Ok(());
        }
        let namespace = watch_cache::get(&self.namespaces, "", a.namespace)
            .and_then(|n| serde_json::to_value(n).ok());
        let tenants: Vec<Value> = self
            .tenants
            .state()
            .iter()
            .filter_map(|t| serde_json::to_value(t.as_ref()).ok())
            .collect();
        let view = View {
            namespace: namespace.as_ref(),
            tenants: &tenants,
        };
        validate(a.operation, a.object, &view)
    }
}

/// Grant the webhook's user its reads in `kube` and put both Tenant
/// webhooks on `kube`'s admission chain; the tasks filling their caches.
pub async fn register(
    kube: &kube_test_server::KubeApiServer,
) -> Result<Vec<tokio::task::JoinHandle<()>>, crate::Error> {
    crate::identity::grant(kube, crate::WEBHOOK, "liqo-model-tenant-webhook", RULES);
    let client = crate::identity::client_as(kube, crate::WEBHOOK).await?;
    let (hook, tasks) = Hook::start(client).await;
    let hook = std::sync::Arc::new(hook);
    kube.add_mutating_hook(hook.clone());
    kube.add_validating_hook(hook);
    Ok(tasks)
}
