//! Liqo v1.2.0's ResourceSlice validating webhook
//! (`pkg/webhooks/resourceslice/validate.go`, RSV below) as a hook on the
//! test API server's admission chain, registered as the chart registers
//! it: CREATE and UPDATE of `authentication.liqo.io/v1beta1`
//! `resourceslices`, the main resource only — a write to
//! `resourceslices/status` is not sent to it — and no `objectSelector`
//! (`deployments/liqo/templates/webhooks/liqo-validating-webhook.yaml:94-110`).
//!
//! On a create (RSV:81-98), a replica (`liqo.io/replicated=true`) is
//! always let in; any other slice is refused when a local slice
//! (`liqo.io/replication=true`) of the same name exists in any namespace.
//! On an update (RSV:100-144), only a control-plane user — a member of
//! group `liqo.io`, the O of the certificates Liqo issues to a peer's
//! control plane and to its peering user
//! (`pkg/liqo-controller-manager/authentication/csr.go:70-112`) — is
//! checked: it may not add, change or remove the `liqo.io/remote-cluster-id`
//! label nor the `liqo.io/cordon` annotation. That is Liqo's cordon
//! protection: on the provider, where the consumer's control plane writes
//! the replicas of its slices, a slice cordoned by the provider
//! (`liqoctl cordon resourceslice`, `pkg/liqoctl/cordon/handler.go:100`)
//! cannot be uncordoned by the consumer, while the provider's own users
//! (its controller manager, its administrators) are not checked.
//!
//! Slices are read from a watch cache, as Liqo's webhook reads them
//! through the manager's cached client (`cmd/webhook/main.go:201`).

use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use kube::Client;
use kube_test_server::admission::{Attributes, Denial, ValidatingHook};
use kube_test_server::rbac::UserInfo;
use serde_json::Value;

use crate::consts::{
    resource_slices, CORDON_RESOURCE, REMOTE_CLUSTER_ID, REPLICATED, REPLICATION_REQUESTED,
};
use crate::identity::{Rule, READ};
use crate::watch_cache;

/// The webhook's name in the chart (`liqo-validating-webhook.yaml:94`).
pub const NAME: &str = "resourceslice.validate.liqo.io";

/// `authentication.OrganizationControlPlaneCSR` (`csr.go:100-103`): the
/// group `IsControlPlaneUser` looks for (:105-113).
pub const CONTROL_PLANE_GROUP: &str = "liqo.io";

/// RSV:38-39 (`+kubebuilder:rbac`), as the chart's `liqo-webhook`
/// ClusterRole grants it (`deployments/liqo/files/liqo-webhook-ClusterRole.yaml:57-65`).
pub const RULES: &[Rule] = &[Rule::new(
    &["authentication.liqo.io"],
    &["resourceslices"],
    READ,
)];

/// Names the webhook's watch cache in the logs.
const CACHE: &str = "resourceslice-webhook-cache";

/// The webhook's refusals, word for word, for the tests to compare.
pub mod messages {
    /// RSV:94.
    pub const DUPLICATE: &str = "a resourceslice with the same name already exists in the cluster";
    /// RSV:123.
    pub const CHANGE_REMOTE_CLUSTER_ID: &str = "can't change the remoteClusterID label";
    /// RSV:125.
    pub const DELETE_REMOTE_CLUSTER_ID: &str = "can't delete the remoteClusterID label";
    /// RSV:127.
    pub const ADD_REMOTE_CLUSTER_ID: &str = "can't add the remoteClusterID label";
    /// RSV:136.
    pub const CHANGE_CORDON: &str =
        "control plane users can't change the liqo.io/cordon annotation";
    /// RSV:138.
    pub const DELETE_CORDON: &str =
        "control plane users can't delete the liqo.io/cordon annotation";
    /// RSV:140.
    pub const ADD_CORDON: &str = "control plane users can't add the liqo.io/cordon annotation";
}

/// `admission.Denied(msg)`: 403 Forbidden with the message
/// (controller-runtime `pkg/webhook/admission/response.go`, `ValidationResponse`).
fn denied(message: &str) -> Denial {
    Denial::new(403, "Forbidden", message)
}

/// `authentication.IsControlPlaneUser` (`csr.go:105-113`).
pub fn is_control_plane_user(groups: &[String]) -> bool {
    groups.iter().any(|g| g == CONTROL_PLANE_GROUP)
}

fn metadata_entry<'a>(object: &'a Value, field: &str, key: &str) -> Option<&'a Value> {
    object["metadata"][field].get(key)
}

/// RSV:118-128 and 130-141: the same three cases for a label or an
/// annotation — changed, removed, added.
fn unchanged(
    old: Option<&Value>,
    new: Option<&Value>,
    change: &str,
    delete: &str,
    add: &str,
) -> Result<(), Denial> {
    match (old, new) {
        (Some(o), Some(n)) if o != n => Err(denied(change)),
        (Some(_), None) => Err(denied(delete)),
        (None, Some(_)) => Err(denied(add)),
        _ => Ok(()),
    }
}

/// RSV:81-98: why a slice is refused at creation; `slices` is every
/// cached slice.
pub fn validate_create(slice: &Value, slices: &[Value]) -> Result<(), Denial> {
    let label = |o: &Value, key: &str| {
        metadata_entry(o, "labels", key)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    // RSV:88-91, `reflection.IsReplicated` (`internal/crdReplicator/reflection/reflector.go:311-318`).
    if label(slice, REPLICATED).as_deref() == Some("true") {
        return Ok(());
    }
    // RSV:146-158: the local slices (`liqolabels.LocalLabelSelector`,
    // `pkg/utils/labels/labelSelectors.go:86-92`) of every namespace.
    let name = slice["metadata"]["name"].as_str().unwrap_or_default();
    let duplicate = slices.iter().any(|s| {
        label(s, REPLICATION_REQUESTED).as_deref() == Some("true")
            && s["metadata"]["name"].as_str() == Some(name)
    });
    if duplicate {
        return Err(denied(messages::DUPLICATE));
    }
    Ok(())
}

/// RSV:100-144: why `groups`' update of `old` into `new` is refused.
pub fn validate_update(groups: &[String], new: &Value, old: &Value) -> Result<(), Denial> {
    if !is_control_plane_user(groups) {
        return Ok(());
    }
    unchanged(
        metadata_entry(old, "labels", REMOTE_CLUSTER_ID),
        metadata_entry(new, "labels", REMOTE_CLUSTER_ID),
        messages::CHANGE_REMOTE_CLUSTER_ID,
        messages::DELETE_REMOTE_CLUSTER_ID,
        messages::ADD_REMOTE_CLUSTER_ID,
    )?;
    unchanged(
        metadata_entry(old, "annotations", CORDON_RESOURCE),
        metadata_entry(new, "annotations", CORDON_RESOURCE),
        messages::CHANGE_CORDON,
        messages::DELETE_CORDON,
        messages::ADD_CORDON,
    )
}

/// The webhook on the test API server's admission chain
/// ([`crate::Provider::start`] and [`crate::Consumer::start`] register it:
/// Liqo's webhook runs on every cluster).
pub struct Hook {
    slices: Store<DynamicObject>,
}

impl Hook {
    /// The hook and the watch task filling its cache, filled once the
    /// returned future is ready (the manager starts the webhook server
    /// after its caches sync).
    pub async fn start(client: Client) -> (Hook, Vec<tokio::task::JoinHandle<()>>) {
        let (slices, task) = watch_cache::start(client, resource_slices(), CACHE);
        let _ = slices.wait_until_ready().await;
        (Hook { slices }, vec![task])
    }
}

impl ValidatingHook for Hook {
    fn name(&self) -> &str {
        NAME
    }

    fn validate(&self, a: &Attributes<'_>) -> Result<(), Denial> {
        self.validate_as(a, None)
    }

    fn validate_as(&self, a: &Attributes<'_>, user: Option<&UserInfo>) -> Result<(), Denial> {
        // The chart's rule (:104-108): the main resource, CREATE and UPDATE.
        if a.def.group != "authentication.liqo.io"
            || a.def.plural != "resourceslices"
            || !a.subresource.is_empty()
        {
            return Ok(());
        }
        match (a.operation, a.old_object) {
            ("CREATE", _) => {
                let slices: Vec<Value> = self
                    .slices
                    .state()
                    .iter()
                    .filter_map(|s| serde_json::to_value(s.as_ref()).ok())
                    .collect();
                validate_create(a.object, &slices)
            }
            ("UPDATE", Some(old)) => {
                let groups = user.map(|u| u.groups.as_slice()).unwrap_or_default();
                validate_update(groups, a.object, old)
            }
            // RSV:76-77.
            _ => Ok(()),
        }
    }
}

/// Grant the webhook's user its reads in `kube` and put the webhook on
/// `kube`'s admission chain; the task filling its cache.
pub async fn register(
    kube: &kube_test_server::KubeApiServer,
) -> Result<Vec<tokio::task::JoinHandle<()>>, crate::Error> {
    crate::identity::grant(
        kube,
        crate::WEBHOOK,
        "liqo-model-resourceslice-webhook",
        RULES,
    );
    let client = crate::identity::client_as(kube, crate::WEBHOOK).await?;
    let (hook, tasks) = Hook::start(client).await;
    kube.add_validating_hook(std::sync::Arc::new(hook));
    Ok(tasks)
}
