//! Liqo v1.2.0's ShadowEndpointSlice controller
//! (`pkg/liqo-controller-manager/offloading/shadowendpointslice-controller/shadowendpointslice_controller.go`,
//! SESC below), as the cluster's controller manager: each
//! ShadowEndpointSlice the peer's virtual kubelet wrote
//! (`reflection_endpointslices`) becomes an EndpointSlice of its
//! name, forged by
//! [`crate::reflection_endpointslice_forge::forge_endpoint_slice`]:
//!
//! - the origin is its `offloading.liqo.io/origin` label (none: an error,
//!   SESC:87-92), whose ForeignCluster (by `liqo.io/remote-cluster-id`,
//!   `pkg/utils/foreigncluster/getters.go:34-47`; none: an error tried
//!   again, SESC:93-101) says whether its networking module is enabled and
//!   established and its API server ready (SESC:103-107);
//! - with networking enabled the addresses are remapped with the
//!   Configuration for the origin (`pkg/utils/getters/k8sGetters.go:742-758`,
//!   in any namespace, exactly one) as `MapAddress` does (`mapping.go:33-65`,
//!   `pkg/utils/ipam/mapping/ips.go:123-160`);
//! - created with a controller reference to the ShadowEndpointSlice
//!   (SESC:174-188), else server-side applied, forced, as
//!   `shadow-endpointslice-controller` (SESC:194-208, `utils.go:24-94`).
//!
//! It is reconciled on the ShadowEndpointSlice's events, its EndpointSlice's
//! (SESC:284) and a change of a ForeignCluster's network or API-server
//! readiness, which queues every ShadowEndpointSlice of that origin
//! (SESC:212-270; the model queues them on any ForeignCluster event: a
//! reconcile that changes nothing writes the same).
//!
//! Not modelled: direct connections between providers (SESC:109-137 with an
//! index: no slice carries their annotation here), global labels and
//! annotations (`resource.AddGlobalLabels`: the chart's are empty), Events.

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::consts::{foreign_clusters, REMOTE_CLUSTER_ID};
use crate::identity::{self, client_as, Rule, ALL, READ};
use crate::offloading_consts::ORIGIN;
use crate::reflection_endpointslice_forge::{forge_endpoint_slice, Origin, SHADOW_FIELD_MANAGER};
use crate::reflection_endpointslices::{endpoint_slices, shadow_endpoint_slices};
use crate::runner::{self, Key};
use crate::{Error, Tasks, CONTROLLER_MANAGER};

/// SESC:66-70.
pub const RULES: &[Rule] = &[
    Rule::new(&["offloading.liqo.io"], &["shadowendpointslices"], ALL),
    // Setting `blockOwnerDeletion` on the EndpointSlices it owns needs it
    // where OwnerReferencesPermissionEnforcement runs (the test server's
    // admission always does; the chart's ClusterRole grants Liqo's
    // controller manager far more).
    Rule::new(
        &["offloading.liqo.io"],
        &["shadowendpointslices/finalizers"],
        &["get", "update", "patch"],
    ),
    Rule::new(&["discovery.k8s.io"], &["endpointslices"], ALL),
    Rule::new(
        &["core.liqo.io"],
        &["foreignclusters", "foreignclusters/status"],
        READ,
    ),
    Rule::new(&["networking.liqo.io"], &["configurations"], READ),
];

/// The ShadowEndpointSlice controlling `slice`, if one does.
fn owner(slice: &DynamicObject) -> Option<Key> {
    let owner = slice
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "ShadowEndpointSlice")?;
    Some(Key {
        namespace: slice.metadata.namespace.clone().unwrap_or_default(),
        name: owner.name.clone(),
    })
}

/// The controller on one cluster; stops when dropped.
pub struct Controller {
    _tasks: Tasks,
}

impl Controller {
    /// Grant the controller manager its rules on `kube` and run the
    /// controller there.
    pub async fn start(kube: &KubeApiServer) -> Result<Controller, Error> {
        identity::grant(
            kube,
            CONTROLLER_MANAGER,
            "liqo-model-shadowendpointslice",
            RULES,
        );
        let client = client_as(kube, CONTROLLER_MANAGER).await?;
        Ok(Controller {
            _tasks: Tasks(vec![tokio::spawn(run(client))]),
        })
    }
}

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client) {
    let shadows: Api<DynamicObject> = Api::all_with(client.clone(), &shadow_endpoint_slices());
    let own = runner::keys(runner::touched(shadows.clone(), ""), |s| Some(Key::of(&s)));
    let owned = runner::keys(
        runner::touched(Api::all_with(client.clone(), &endpoint_slices()), ""),
        |s| owner(&s),
    );
    let by_origin = runner::keys_via(
        runner::touched(Api::all_with(client.clone(), &foreign_clusters()), ""),
        shadows,
        |shadows, fc: DynamicObject| async move {
            let id = fc.data["spec"]["clusterID"].as_str()?.to_string();
            let selector = format!("{ORIGIN}={id}");
            let list = shadows
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            Some(list.items.iter().map(Key::of).collect())
        },
    );
    let client = &client;
    runner::run("shadowendpointslice", vec![own, owned, by_origin], |key| {
        reconcile(client, key)
    })
    .await;
}

/// The one object of `resource` labelled for cluster `id`, in any
/// namespace; an error for none or several.
async fn one_for(
    client: &Client,
    resource: kube::api::ApiResource,
    id: &str,
    what: &str,
) -> Result<Value, Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let selector = format!("{REMOTE_CLUSTER_ID}={id}");
    let list = api.list(&ListParams::default().labels(&selector)).await?;
    match list.items.as_slice() {
        [one] => serde_json::to_value(one).map_err(|e| Error::Waiting(e.to_string())),
        [] => Err(Error::Waiting(format!("{what} (id: {id:?}) not found"))),
        _ => Err(Error::Waiting(format!("multiple {what}s found for {id}"))),
    }
}

async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let shadows: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &shadow_endpoint_slices());
    let Some(shadow) = shadows.get_opt(&key.name).await? else {
        return Ok(());
    };
    let uid = shadow.metadata.uid.clone().unwrap_or_default();
    let shadow = serde_json::to_value(shadow).map_err(|e| Error::Waiting(e.to_string()))?;
    // SESC:87-92.
    let Some(origin) = shadow["metadata"]["labels"][ORIGIN].as_str() else {
        return Err(Error::Waiting(format!(
            "shadowendpointslice {}/{} has no label {ORIGIN:?}",
            key.namespace, key.name
        )));
    };
    // SESC:93-107.
    let fc = one_for(client, foreign_clusters(), origin, "foreigncluster").await?;
    let origin_state = Origin::of(&fc);
    let configuration = if origin_state.networking_enabled {
        Some(
            one_for(
                client,
                crate::networking::configurations(),
                origin,
                "Configuration",
            )
            .await?,
        )
    } else {
        None
    };
    let slice =
        forge_endpoint_slice(&shadow, origin_state, configuration.as_ref()).map_err(|e| {
            Error::Waiting(format!(
                "shadowendpointslice {}/{}: {e}",
                key.namespace, key.name
            ))
        })?;
    let slices: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &endpoint_slices());
    if slices.get_opt(&key.name).await?.is_none() {
        // SESC:174-188.
        let mut created = slice;
        created["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowEndpointSlice",
            "name": key.name, "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
        let created: DynamicObject =
            serde_json::from_value(created).map_err(|e| Error::Waiting(e.to_string()))?;
        let params = PostParams {
            field_manager: Some(SHADOW_FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match slices.create(&params, &created).await {
            Ok(_) => return Ok(()),
            // Made meanwhile: applied at the next pass.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                return Err(Error::Waiting(format!("endpointslice {} exists", key.name)))
            }
            Err(e) => return Err(e.into()),
        }
    }
    // SESC:194-208: applied, forced.
    slices
        .patch(
            &key.name,
            &PatchParams::apply(SHADOW_FIELD_MANAGER).force(),
            &Patch::Apply(&slice),
        )
        .await?;
    Ok(())
}
