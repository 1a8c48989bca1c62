//! Liqo v1.2.0's ShadowPod controller
//! (`pkg/liqo-controller-manager/offloading/shadowpod-controller/shadowpod_controller.go`,
//! SPC below), as the cluster's controller manager: each ShadowPod gets a
//! Pod of its name made from `spec.pod` with its labels (plus
//! `liqo.io/managed-by=shadowpod`) and annotations, controlled by it
//! (SPC:128-147); a Pod that exists gets the ShadowPod's labels and
//! annotations, and its phase is copied to the ShadowPod's status
//! (SPC:88-118); a ShadowPod in a terminal phase is left (SPC:80-83), one
//! without the origin label makes nothing (SPC:122-126). The ShadowPod is
//! reconciled on its own events and on its Pod's updates and deletions
//! (SPC:162-175), so a deleted Pod is made again.
//!
//! Not modelled: the host-alias remapping (SPC:177-205), Events.

use kube::api::{Api, DynamicObject, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::identity::{Rule, ALL};
use crate::offloading_consts::{pods, shadow_pods, MANAGED_BY, ORIGIN};
use crate::runner::{self, Key};
use crate::Error;

/// SPC:62-65.
pub const RULES: &[Rule] = &[
    Rule::new(
        &["offloading.liqo.io"],
        &["shadowpods"],
        &["get", "list", "watch", "update", "patch", "delete"],
    ),
    // SPC:63: setting `blockOwnerDeletion` on the pods it owns needs it.
    Rule::new(
        &["offloading.liqo.io"],
        &["shadowpods/finalizers"],
        &["get", "update", "patch"],
    ),
    Rule::new(
        &["offloading.liqo.io"],
        &["shadowpods/status"],
        &["get", "update", "patch"],
    ),
    Rule::new(&[""], &["pods"], ALL),
];

/// The ShadowPod controlling `pod`, if one does.
fn owner(pod: &DynamicObject) -> Option<Key> {
    let owners = pod.metadata.owner_references.as_ref()?;
    let owner = owners
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "ShadowPod")?;
    Some(Key {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: owner.name.clone(),
    })
}

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client) {
    let own = runner::keys(
        runner::touched(Api::all_with(client.clone(), &shadow_pods()), ""),
        |sp| Some(Key::of(&sp)),
    );
    // Owned pods (their creation does not trigger, SPC:164-169; a watch
    // cannot tell, and a reconcile of an unchanged pair writes nothing).
    let owned = runner::keys(
        runner::touched(Api::all_with(client.clone(), &pods()), ""),
        |pod| owner(&pod),
    );
    let client = &client;
    runner::run("shadowpod", vec![own, owned], |key| reconcile(client, key)).await;
}

fn labels_of(sp: &DynamicObject) -> Value {
    let mut labels = json!(sp.metadata.labels.clone().unwrap_or_default());
    labels[MANAGED_BY.0] = json!(MANAGED_BY.1);
    labels
}

async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let shadows: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &shadow_pods());
    let Some(mut sp) = shadows.get_opt(&key.name).await? else {
        return Ok(());
    };
    // SPC:80-83.
    if matches!(
        sp.data["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) {
        return Ok(());
    }
    let labels = labels_of(&sp);
    let annotations = json!(sp.metadata.annotations.clone().unwrap_or_default());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &key.namespace, &pods());
    if let Some(mut pod) = api.get_opt(&key.name).await? {
        // SPC:98-107: the ShadowPod's labels and annotations forced on the pod.
        let mut meta = json!({"labels": pod.metadata.labels.clone().unwrap_or_default(),
                              "annotations": pod.metadata.annotations.clone().unwrap_or_default()});
        for (field, wanted) in [("labels", &labels), ("annotations", &annotations)] {
            for (k, v) in wanted.as_object().into_iter().flatten() {
                meta[field][k] = v.clone();
            }
        }
        // An empty map is written as none, as Go's `omitempty` does.
        let map = |v: Value| {
            serde_json::from_value::<std::collections::BTreeMap<String, String>>(v)
                .ok()
                .filter(|m| !m.is_empty())
        };
        let (new_labels, new_annotations) =
            (map(meta["labels"].take()), map(meta["annotations"].take()));
        if new_labels != pod.metadata.labels || new_annotations != pod.metadata.annotations {
            pod.metadata.labels = new_labels;
            pod.metadata.annotations = new_annotations;
            api.replace(&key.name, &PostParams::default(), &pod).await?;
        }
        // SPC:110-115.
        let phase = pod.data["status"]["phase"].clone();
        if sp.data["status"]["phase"] != phase {
            sp.data["status"]["phase"] = phase;
            shadows
                .replace_status(&key.name, &PostParams::default(), &sp)
                .await?;
        }
        return Ok(());
    }
    // SPC:122-126.
    if sp
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ORIGIN))
        .is_none()
    {
        return Ok(());
    }
    // SPC:128-147.
    let mut pod = DynamicObject::new(&key.name, &pods()).within(&key.namespace);
    pod.metadata.labels = serde_json::from_value(labels).ok();
    pod.metadata.annotations = sp.metadata.annotations.clone();
    pod.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "offloading.liqo.io/v1beta1".into(),
            kind: "ShadowPod".into(),
            name: key.name.clone(),
            uid: sp.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    pod.data["spec"] = sp.data["spec"]["pod"].clone();
    api.create(&PostParams::default(), &pod).await?;
    Ok(())
}
