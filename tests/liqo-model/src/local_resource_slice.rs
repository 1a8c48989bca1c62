//! The consumer's local ResourceSlice controller, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/authentication/localresourceslice-controller/localresourceslice_controller.go`
//! (LRS below): a slice the consumer made for a provider gets this
//! cluster's identity as `spec.consumerClusterID`, its provider's ID, and
//! a CSR, so that the provider's remote slice controller can judge it.

use base64::Engine;
use kube::api::{Api, DynamicObject, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::cluster_keys::{self, LIQO_NAMESPACE};
use crate::consts::{self, LOCAL_SELECTOR, REMOTE_CLUSTER_ID};
use crate::identity::{Rule, ALL, READ};
use crate::runner::{self, Key};
use crate::slice;
use crate::Error;

/// RBAC of this controller (LRS:65-69).
pub const RULES: &[Rule] = &[
    Rule::new(
        &["authentication.liqo.io"],
        &["resourceslices", "resourceslices/status"],
        ALL,
    ),
    Rule::new(&["authentication.liqo.io"], &["identities"], READ),
    Rule::new(&[""], &["secrets"], ALL),
    Rule::new(&[""], &["namespaces"], READ),
];

/// Run the controller on `client` for the cluster `cluster_id` until the
/// task is dropped.
pub async fn run(client: Client, cluster_id: String) {
    let slices: Api<DynamicObject> = Api::all_with(client.clone(), &consts::resource_slices());
    // Every event of a local slice (LRS:145-155: the crdReplicator's local
    // selector, no other predicate).
    let own = runner::keys(runner::touched(slices, LOCAL_SELECTOR), |s| {
        Some(Key::of(&s))
    });
    let (client, cluster_id) = (&client, cluster_id.as_str());
    runner::run("local-resourceslice", vec![own], |key| {
        reconcile(client, cluster_id, key)
    })
    .await;
}

/// LRS:72-142.
async fn reconcile(client: &Client, cluster_id: &str, key: Key) -> Result<(), Error> {
    let slices: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::resource_slices());
    let Some(mut obj) = slices.get_opt(&key.name).await? else {
        return Ok(());
    };
    let before = obj.data["spec"].clone();
    // LRS:88-110: without a label, the provider is the one the tenant
    // namespace is for (`pkg/tenantNamespace`, GetClusterIDFromTenantNamespace).
    let namespace_cluster = if provider_from_label(&obj).is_none() {
        let namespaces: Api<DynamicObject> = Api::all_with(client.clone(), &consts::namespaces());
        let ns = namespaces.get(&key.namespace).await?;
        let id = ns
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REMOTE_CLUSTER_ID))
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or_else(|| {
                Error::Waiting(format!("namespace {} names no cluster", key.namespace))
            })?;
        Some(id)
    } else {
        None
    };
    // LRS:120-130 with `authentication/keys.go:220-240`: the CSR is signed
    // with this cluster's key.
    let keys = cluster_keys::get(client.clone(), LIQO_NAMESPACE).await?;
    complete(
        &mut obj,
        cluster_id,
        namespace_cluster.as_deref(),
        &keys.private_pem,
    )?;
    // LRS:132: Liqo updates on every reconcile; an API server stores a
    // write that changes nothing as nothing, so only a change is sent here.
    if obj.data["spec"] != before {
        slices
            .replace(&key.name, &PostParams::default(), &obj)
            .await?;
    }
    Ok(())
}

fn provider_from_label(obj: &DynamicObject) -> Option<String> {
    obj.metadata
        .labels
        .as_ref()?
        .get(REMOTE_CLUSTER_ID)
        .filter(|v| !v.is_empty())
        .cloned()
}

/// The slice's spec completed (LRS:83-130): the decision alone, no I/O.
/// `namespace_cluster` is the cluster its tenant namespace is for, read
/// only when the slice has no `liqo.io/remote-cluster-id` label;
/// `private_pem` is this cluster's key.
pub fn complete(
    obj: &mut DynamicObject,
    cluster_id: &str,
    namespace_cluster: Option<&str>,
    private_pem: &str,
) -> Result<(), Error> {
    let provider = provider_from_label(obj).or(namespace_cluster.map(str::to_string));
    let name = obj.metadata.name.clone().unwrap_or_default();
    let spec = slice::object_at(&mut obj.data, "spec");
    // LRS:83-86: only when unset.
    if spec["consumerClusterID"].is_null() {
        spec["consumerClusterID"] = json!(cluster_id);
    }
    // LRS:88-110.
    if spec["providerClusterID"].is_null() {
        if let Some(provider) = provider {
            spec["providerClusterID"] = json!(provider);
        }
    }
    // LRS:120-130: a CSR only when there is none.
    let has_csr = spec["csr"].as_str().is_some_and(|c| !c.is_empty());
    if !has_csr {
        let consumer = spec["consumerClusterID"].as_str().unwrap_or(cluster_id);
        spec["csr"] = Value::String(csr(private_pem, &name, consumer)?);
    }
    Ok(())
}

/// `spec.csr` for a slice (`authentication/csr.go:39-68, 197-236`
/// `GenerateCSRForResourceSlice`): a PKCS#10 request signed with
/// `private_pem` (the cluster's Ed25519 key, `authentication-keys`) for CN
/// `<slice>-<hash>` and O `<consumer>`, PEM, base64 in JSON (a Go `[]byte`).
pub fn csr(private_pem: &str, slice_name: &str, consumer_id: &str) -> Result<String, Error> {
    let pem = crate::control_plane_csr::generate_for(
        private_pem,
        &slice::common_name(slice_name, consumer_id),
        consumer_id,
    )?;
    Ok(base64::engine::general_purpose::STANDARD.encode(pem))
}
