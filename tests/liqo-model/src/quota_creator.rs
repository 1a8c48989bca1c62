//! The provider's quota creator, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/quotacreator-controller/quotacreator_controller.go`
//! (QC below): one `offloading.liqo.io/v1beta1` Quota per replicated slice
//! whose resources are `Accepted`, holding what the slice's status grants.

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::Client;
use serde_json::{json, Value};

use crate::consts::{self, CORDON_RESOURCE, CORDON_TENANT, REPLICATED_SELECTOR};
use crate::identity::{Rule, ALL, READ};
use crate::runner::{self, Key};
use crate::slice::{self, RESOURCES};
use crate::Error;

/// RBAC of this controller (QC:65-69).
pub const RULES: &[Rule] = &[
    Rule::new(&["authentication.liqo.io"], &["resourceslices"], READ),
    Rule::new(
        &["authentication.liqo.io"],
        &["resourceslices/finalizers"],
        &["update"],
    ),
    Rule::new(&["offloading.liqo.io"], &["quotas"], ALL),
    Rule::new(&["offloading.liqo.io"], &["quotas/finalizers"], &["update"]),
];

/// `controllerManager.config.defaultLimitsEnforcement`
/// (`deployments/liqo/values.yaml:438`, default `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LimitsEnforcement {
    #[default]
    None,
    Soft,
    Hard,
}

impl LimitsEnforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitsEnforcement::None => "None",
            LimitsEnforcement::Soft => "Soft",
            LimitsEnforcement::Hard => "Hard",
        }
    }
}

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client, enforcement: LimitsEnforcement) {
    let slices: Api<DynamicObject> = Api::all_with(client.clone(), &consts::resource_slices());
    let quotas: Api<DynamicObject> = Api::all_with(client.clone(), &consts::quotas());
    // Every change of a replica, status included (QC:142-143).
    let own = runner::keys(runner::touched(slices, REPLICATED_SELECTOR), |s| {
        Some(Key::of(&s))
    });
    // A changed Quota reconciles its owner slice (QC:144).
    let owned = runner::keys(runner::touched(quotas, ""), |q| {
        slice::controlling_slice(&q)
    });
    let client = &client;
    runner::run("quota-creator", vec![own, owned.boxed()], |key| {
        reconcile(client, enforcement, key)
    })
    .await;
}

/// QC:72-115.
async fn reconcile(client: &Client, enforcement: LimitsEnforcement, key: Key) -> Result<(), Error> {
    let slices: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::resource_slices());
    let Some(slice) = slices.get_opt(&key.name).await? else {
        return Ok(());
    };
    // QC:81-86: only `Accepted` resources make or change a Quota, so a
    // `Denied` after `Accepted` leaves the Quota as it was.
    if !slice::accepted(&slice, RESOURCES) {
        return Ok(());
    }
    let Some(consumer) = slice::consumer_cluster_id(&slice) else {
        // CommonNameResourceSliceCSR panics here (csr.go:52-56); Liqo's
        // controller would crash-loop, the model waits.
        return Err(Error::Waiting(format!(
            "{} has no consumerClusterID",
            key.name
        )));
    };
    let name = slice::common_name(&key.name, consumer);
    let quotas: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::quotas());
    // QC:96: CreateOrUpdate.
    let resource = consts::quotas();
    runner::create_or_update(&quotas, &resource, &key.namespace, &name, |quota| {
        mutate(quota, &slice, &name, enforcement)
    })
    .await?;
    Ok(())
}

/// The Quota's desired content from its slice (QC:97-107): the decision
/// alone, no I/O.
pub fn mutate(
    quota: &mut DynamicObject,
    slice: &DynamicObject,
    user: &str,
    enforcement: LimitsEnforcement,
) {
    let spec = slice::object_at(&mut quota.data, "spec");
    spec["user"] = json!(user);
    // QC:98: rewritten from the configuration on every reconcile.
    spec["limitsEnforcement"] = json!(enforcement.as_str());
    // QC:99: a copy of the grant; the CRD requires the field, so an empty
    // grant is an empty map.
    spec["resources"] = match &slice.data["status"]["resources"] {
        Value::Object(r) => Value::Object(r.clone()),
        _ => json!({}),
    };
    // QC:101-105.
    if has_to_be_cordoned(slice) {
        spec["cordoned"] = json!(true);
    } else if let Some(spec) = spec.as_object_mut() {
        spec.remove("cordoned");
    }
    // QC:107: owned by the slice as its controller.
    slice::set_controller(quota, slice);
}

/// QC:117-132: either cordon annotation, unless it reads false.
pub fn has_to_be_cordoned(slice: &DynamicObject) -> bool {
    let annotations = slice.metadata.annotations.clone().unwrap_or_default();
    let set = |key: &str| {
        annotations
            .get(key)
            .is_some_and(|v| !matches!(v.as_str(), "false" | "False" | "0"))
    };
    set(CORDON_RESOURCE) || set(CORDON_TENANT)
}
