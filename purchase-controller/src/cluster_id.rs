//! Each cluster's Liqo cluster ID, read as `liqoctl` reads it before it
//! authenticates, with networking or without (Liqo v1.2.0
//! `pkg/liqoctl/authenticate/handler.go:46-56`, `SetLocalClusterID`,
//! `cluster.go:62-73`, `pkg/utils/cluster_info.go:60-75`): the one
//! ConfigMap labelled `app.kubernetes.io/name=clusterid-configmap` in
//! Liqo's namespace ([`crate::networking::cluster_id_of`]). The same
//! reading serves networking (`networking.rs`) and direct Purchases
//! (`direct.rs`).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::Client;

pub use crate::networking::{cluster_id_of, CLUSTER_ID_SELECTOR};

/// The cluster ID `client`'s cluster says it has in `liqo_namespace`
/// (`Ok(Err(why))`: it cannot be read there — no ConfigMap, several, no
/// ID, or no permission to list them); a failed call is an error.
pub async fn read(
    client: &Client,
    liqo_namespace: &str,
) -> Result<Result<String, String>, kube::Error> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), liqo_namespace);
    let list = match configmaps
        .list(&ListParams::default().labels(CLUSTER_ID_SELECTOR))
        .await
    {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 403 => {
            return Ok(Err(format!(
                "no permission to list ConfigMaps in {liqo_namespace}"
            )))
        }
        Err(e) => return Err(e),
    };
    let values = list
        .into_iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .map_err(kube::Error::SerdeError)?;
    Ok(cluster_id_of(&values))
}
