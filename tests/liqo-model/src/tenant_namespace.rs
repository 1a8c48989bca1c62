//! Tenant namespaces, as Liqo v1.2.0's namespace manager finds and makes
//! them (`pkg/tenantNamespace/namespaceManager.go`, NSM below): the one
//! namespace labelled `liqo.io/remote-cluster-id=<peer>` and
//! `liqo.io/tenant-namespace`, named `liqo-tenant-<peer>` when Liqo makes
//! it.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use kube::Client;

use crate::consts::{REMOTE_CLUSTER_ID, TENANT_NAMESPACE};
use crate::Error;

/// NSM:194-197 with `pkg/tenantNamespace/const.go:19` and
/// `pkg/utils/foreigncluster/uniqueName.go:20-22`.
pub fn default_name(cluster: &str) -> String {
    format!("liqo-tenant-{cluster}")
}

/// NSM:154-192 `GetNamespace`: the name of `cluster`'s tenant namespace,
/// `None` when there is none; more than one is an error.
pub async fn get(client: &Client, cluster: &str) -> Result<Option<String>, Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let selector = format!("{REMOTE_CLUSTER_ID}={cluster},{TENANT_NAMESPACE}");
    let found = namespaces
        .list(&ListParams::default().labels(&selector))
        .await?;
    match found.items.as_slice() {
        [] => Ok(None),
        [one] => Ok(one.metadata.name.clone()),
        _ => Err(Error::Waiting(format!(
            "multiple tenant namespaces found for clusterid {cluster}"
        ))),
    }
}

/// NSM:102-152 `CreateNamespace`: `cluster`'s tenant namespace, made with
/// Liqo's labels when missing.
pub async fn create(client: &Client, cluster: &str) -> Result<String, Error> {
    if let Some(name) = get(client, cluster).await? {
        return Ok(name);
    }
    let name = default_name(cluster);
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.clone());
    ns.metadata.labels = Some(
        [
            (REMOTE_CLUSTER_ID, cluster),
            (TENANT_NAMESPACE, "true"),
            ("pod-security.kubernetes.io/audit", "privileged"),
            ("pod-security.kubernetes.io/enforce", "privileged"),
            ("pod-security.kubernetes.io/warn", "privileged"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.create(&PostParams::default(), &ns).await?;
    Ok(name)
}
