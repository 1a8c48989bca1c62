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

/// Where a Secret naming a peer stands, as the nonce controllers judge it
/// before touching it (`noncecreator_controller.go:81-105`,
/// `noncesigner_controller.go:81-102`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// No `liqo.io/remote-cluster-id` label.
    NoPeer,
    /// The peer has no tenant namespace (yet): retried.
    NoTenantNamespace(String),
    /// Not in the peer's tenant namespace.
    Elsewhere,
    /// In the tenant namespace of this peer.
    InPlace(String),
}

/// The [`Placement`] of `secret`.
pub async fn placement(
    client: &Client,
    secret: &k8s_openapi::api::core::v1::Secret,
) -> Result<Placement, Error> {
    let Some(cluster) = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REMOTE_CLUSTER_ID))
        .filter(|c| !c.is_empty())
    else {
        return Ok(Placement::NoPeer);
    };
    Ok(match get(client, cluster).await? {
        None => Placement::NoTenantNamespace(cluster.clone()),
        Some(ns) if secret.metadata.namespace.as_ref() == Some(&ns) => {
            Placement::InPlace(cluster.clone())
        }
        Some(_) => Placement::Elsewhere,
    })
}

/// Whether the nonce controller `component` goes on with `secret`: only
/// when it is in its peer's tenant namespace. Otherwise an Event says why
/// (`no_peer` is the reason and message of a Secret naming no peer), and a
/// peer without a tenant namespace is an error, so the Secret is retried.
pub async fn placed(
    client: &Client,
    secret: &k8s_openapi::api::core::v1::Secret,
    component: &str,
    no_peer: (&str, &str),
) -> Result<bool, Error> {
    let placement = placement(client, secret).await?;
    let (reason, message) = match &placement {
        Placement::InPlace(_) => return Ok(true),
        Placement::NoPeer => no_peer,
        Placement::NoTenantNamespace(_) => {
            ("TenantNamespaceNotFound", "Unable to get tenant namespace")
        }
        Placement::Elsewhere => ("WrongNamespace", "Secret not in tenant namespace"),
    };
    let involved = crate::events::reference_to(secret);
    crate::events::record(
        client,
        involved,
        component,
        crate::events::WARNING,
        reason,
        message,
    )
    .await;
    match placement {
        Placement::NoTenantNamespace(cluster) => {
            Err(Error::Waiting(format!("the tenant namespace of {cluster}")))
        }
        _ => Ok(false),
    }
}

/// Reconcile, as `name`, every Secret labelled `label` (the nonce
/// controllers' `For(&corev1.Secret{}, WithPredicates(<label exists>))`)
/// until the task is dropped.
pub async fn run_on_secrets<F, Fut>(client: &Client, name: &'static str, label: &str, reconcile: F)
where
    F: Fn(crate::runner::Key) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>>,
{
    use crate::runner;
    let secrets: Api<kube::api::DynamicObject> =
        Api::all_with(client.clone(), &crate::consts::secrets());
    let own = runner::keys(runner::touched(secrets, label), |s| {
        Some(runner::Key::of(&s))
    });
    runner::run(name, vec![own], reconcile).await;
}

/// The RBAC of a controller of Secrets in tenant namespaces: the Secrets
/// (`+kubebuilder:rbac:groups=core,resources=secrets`), the namespaces it
/// looks up and the Events it records.
pub const SECRET_CONTROLLER_RULES: &[crate::identity::Rule] = &[
    crate::identity::Rule::new(&[""], &["secrets"], crate::identity::ALL),
    crate::identity::Rule::new(&[""], &["namespaces"], crate::identity::READ),
    crate::identity::Rule::new(&[""], &["events"], &["create", "patch"]),
];
