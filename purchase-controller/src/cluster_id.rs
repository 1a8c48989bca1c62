//! Each cluster's Liqo cluster ID, read as `liqoctl` reads it before it
//! authenticates, with networking or without (Liqo v1.2.0
//! `pkg/liqoctl/authenticate/handler.go:46-56`, `SetLocalClusterID`,
//! `cluster.go:62-73`, `pkg/utils/cluster_info.go:60-75`): the one
//! ConfigMap labelled `app.kubernetes.io/name=clusterid-configmap` in
//! Liqo's namespace ([`cluster_id_of`]). The same
//! reading serves networking (`networking.rs`) and direct Purchases
//! (`direct.rs`).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::Client;

use serde_json::Value;

use crate::caches::Caches;

/// `pkg/consts/clusterid.go:23-25` and `utils/labels/labelSelectors.go:32`:
/// the ConfigMap holding the cluster ID, found by label.
pub const CLUSTER_ID_SELECTOR: &str = "app.kubernetes.io/name=clusterid-configmap";
const CLUSTER_ID_KEY: &str = "CLUSTER_ID";

/// `utils/cluster_info.go:61-78`: the cluster ID from the one ConfigMap
/// labelled as Liqo's cluster-ID ConfigMap.
pub fn cluster_id_of(configmaps: &[Value]) -> Result<String, String> {
    match configmaps {
        [] => Err("no ConfigMap app.kubernetes.io/name=clusterid-configmap in Liqo's namespace: is Liqo installed?".to_string()),
        [one] => one["data"][CLUSTER_ID_KEY]
            .as_str()
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("the cluster-ID ConfigMap has no {CLUSTER_ID_KEY}")),
        _ => Err("more than one cluster-ID ConfigMap in Liqo's namespace".to_string()),
    }
}

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

/// Whose cluster ID a remembered one is ([`read_remembered`]).
#[derive(Debug, Clone, Copy)]
pub enum Whose<'a> {
    /// This cluster's.
    Consumer,
    /// The provider's with this contract cluster ID.
    Provider(&'a str),
}

/// Where the cluster ID of `whose`, read in `liqo_namespace`, is
/// remembered.
pub fn remembered_key(whose: Whose<'_>, liqo_namespace: &str) -> String {
    match whose {
        Whose::Consumer => format!("cluster-id/consumer/{liqo_namespace}"),
        Whose::Provider(provider) => {
            crate::caches::provider_key(provider, &format!("cluster-id/{liqo_namespace}"))
        }
    }
}

/// [`read`], unless the ID was read before and was `expected` (a Liqo
/// cluster ID does not change while Liqo runs; remembered for
/// `--liqo-resync`, [`Caches`]): only an ID that matched is remembered, so
/// a cluster that says it is another is asked again each round.
pub async fn read_remembered(
    client: &Client,
    liqo_namespace: &str,
    cache: &Caches,
    whose: Whose<'_>,
    expected: &str,
) -> Result<Result<String, String>, kube::Error> {
    let key = remembered_key(whose, liqo_namespace);
    if cache.recall::<String>(&key).as_deref() == Some(expected) {
        return Ok(Ok(expected.to_string()));
    }
    let found = read(client, liqo_namespace).await?;
    if found.as_deref() == Ok(expected) {
        cache.remember(key, expected.to_string());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_cluster_id_is_the_one_configmaps() {
        let cm = |id: &str| json!({"data": {CLUSTER_ID_KEY: id}});
        assert_eq!(cluster_id_of(&[cm("p1")]), Ok("p1".to_string()));
        assert!(cluster_id_of(&[])
            .unwrap_err()
            .contains("is Liqo installed"));
        assert!(cluster_id_of(&[cm("a"), cm("b")])
            .unwrap_err()
            .contains("more than one"));
        assert!(cluster_id_of(&[cm("")]).is_err());
    }
}
