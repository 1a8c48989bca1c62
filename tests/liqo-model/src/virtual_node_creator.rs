//! The consumer's virtual-node creator, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/virtualnodecreator-controller/virtualnodecreator_controller.go`
//! (VNC below), with the VirtualNode forged by
//! `pkg/liqo-controller-manager/offloading/forge/virtualnode.go` (FORGE):
//! one VirtualNode per local slice both of whose conditions are `Accepted`.

use kube::api::{Api, DynamicObject, ListParams};
use kube::Client;
use serde_json::{json, Value};

use crate::consts::{
    self, CREATE_VIRTUAL_NODE, LOCAL_SELECTOR, REMOTE_CLUSTER_ID, RESOURCE_SLICE_NAME,
};
use crate::identity::{Rule, ALL, READ};
use crate::runner::{self, Key};
use crate::slice::{self, AUTHENTICATION, RESOURCES};
use crate::Error;

/// RBAC of this controller (VNC:60-64).
pub const RULES: &[Rule] = &[
    Rule::new(&["offloading.liqo.io"], &["virtualnodes"], ALL),
    Rule::new(&["authentication.liqo.io"], &["resourceslices"], READ),
    Rule::new(&["authentication.liqo.io"], &["identities"], READ),
    Rule::new(&[""], &["secrets"], ALL),
    // Owner references with blockOwnerDeletion on slices (controller-runtime's
    // SetControllerReference, VNC:135) need this, as the chart's role grants.
    Rule::new(
        &["authentication.liqo.io"],
        &["resourceslices/finalizers"],
        &["update"],
    ),
];

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client) {
    let slices: Api<DynamicObject> = Api::all_with(client.clone(), &consts::resource_slices());
    let virtual_nodes: Api<DynamicObject> = Api::all_with(client.clone(), &consts::virtual_nodes());
    let identities: Api<DynamicObject> = Api::all_with(client.clone(), &consts::identities());
    // Local slices, only while both conditions are Accepted (VNC:148-155, 161-170).
    let own = runner::keys(runner::touched(slices, LOCAL_SELECTOR), |s| {
        all_conditions_accepted(&s).then(|| Key::of(&s))
    });
    // Owned VirtualNodes and Identities reconcile their slice (VNC:156-157).
    let nodes = runner::keys(runner::touched(virtual_nodes, ""), |o| {
        slice::controlling_slice(&o)
    });
    let ids = runner::keys(runner::touched(identities, ""), |o| {
        slice::controlling_slice(&o)
    });
    let client = &client;
    runner::run("virtual-node-creator", vec![own, nodes, ids], |key| {
        reconcile(client, key)
    })
    .await;
}

/// VNC:172-180.
pub fn all_conditions_accepted(slice: &DynamicObject) -> bool {
    slice::accepted(slice, AUTHENTICATION) && slice::accepted(slice, RESOURCES)
}

/// VNC:67-144.
async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let slices: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::resource_slices());
    let Some(slice) = slices.get_opt(&key.name).await? else {
        return Ok(());
    };
    // VNC:78-93: not while deleting, only when asked for, only when accepted.
    let annotations = slice.metadata.annotations.clone().unwrap_or_default();
    let wanted = annotations
        .get(CREATE_VIRTUAL_NODE)
        .is_some_and(|v| !v.is_empty() && !v.eq_ignore_ascii_case("false"));
    if slice.metadata.deletion_timestamp.is_some() || !wanted || !all_conditions_accepted(&slice) {
        return Ok(());
    }
    // VNC:95-101.
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    let Some(remote) = labels.get(REMOTE_CLUSTER_ID).filter(|v| !v.is_empty()) else {
        return Err(Error::Waiting(format!(
            "{} has no {REMOTE_CLUSTER_ID} label",
            key.name
        )));
    };
    // VNC:103-112 (`pkg/utils/getters/k8sGetters.go:349-385`): the slice's
    // Identity, which must already name its kubeconfig Secret.
    let identities: Api<DynamicObject> = Api::all_with(client.clone(), &consts::identities());
    let listed = identities
        .list(&ListParams::default().labels(&format!("{REMOTE_CLUSTER_ID}={remote}")))
        .await?;
    let identity = listed
        .items
        .into_iter()
        .filter(|i| i.data["spec"]["type"] == "ResourceSlice")
        .find(|i| {
            i.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(RESOURCE_SLICE_NAME))
                == Some(&key.name)
        })
        .ok_or_else(|| Error::Waiting(format!("no Identity for ResourceSlice {}", key.name)))?;
    let Some(secret_name) = identity.data["status"]["kubeconfigSecretRef"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
    else {
        return Ok(());
    };
    // VNC:114-118.
    let identity_ns = identity.metadata.namespace.clone().unwrap_or_default();
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &identity_ns, &consts::secrets());
    secrets.get(secret_name).await?;
    let cluster_id = identity.data["spec"]["clusterID"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // VNC:120-139: CreateOrUpdate.
    let virtual_nodes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::virtual_nodes());
    let resource = consts::virtual_nodes();
    runner::create_or_update(
        &virtual_nodes,
        &resource,
        &key.namespace,
        &key.name,
        |node| mutate(node, &slice, &cluster_id, secret_name),
    )
    .await?;
    Ok(())
}

/// The VirtualNode's desired content from its slice (FORGE:59-137, VNC:124-135):
/// the decision alone, no I/O.
pub fn mutate(node: &mut DynamicObject, slice: &DynamicObject, cluster_id: &str, secret: &str) {
    let status = &slice.data["status"];
    // FORGE:63-66, VNC:131-134.
    let labels = node.metadata.labels.get_or_insert_with(Default::default);
    labels.insert(REMOTE_CLUSTER_ID.into(), cluster_id.into());
    labels.insert(
        RESOURCE_SLICE_NAME.into(),
        slice.metadata.name.clone().unwrap_or_default(),
    );
    let spec = slice::object_at(&mut node.data, "spec");
    // FORGE:70-75: the node labels, merged over what is there.
    let node_labels = slice::object_at(spec, "labels");
    node_labels[REMOTE_CLUSTER_ID] = json!(cluster_id);
    if let Some(extra) = status["nodeLabels"].as_object() {
        for (k, v) in extra {
            node_labels[k] = v.clone();
        }
    }
    spec["clusterID"] = json!(cluster_id);
    spec["kubeconfigSecretRef"] = json!({"name": secret});
    // FORGE:85-87, 131: the quota is the grant, key for key.
    spec["resourceQuota"] =
        json!({"hard": status["resources"].as_object().cloned().unwrap_or_default()});
    // FORGE:88-90, 132-134.
    for key in ["storageClasses", "ingressClasses", "loadBalancerClasses"] {
        match &status[key] {
            Value::Array(a) if !a.is_empty() => spec[key] = Value::Array(a.clone()),
            _ => {
                if let Some(s) = spec.as_object_mut() {
                    s.remove(key);
                }
            }
        }
    }
    // FORGE:99-105.
    if let Some(selector) = status["nodeSelector"].as_object().filter(|s| !s.is_empty()) {
        slice::object_at(spec, "offloadingPatch")["nodeSelector"] = Value::Object(selector.clone());
    }
    // VNC:135: owned by the slice as its controller.
    slice::set_controller(node, slice);
}
