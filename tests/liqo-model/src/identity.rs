//! Each modelled component talks to the API server as its own user, with
//! only the RBAC its Liqo counterpart has, so the server's authorization
//! and admission apply to it as they would to Liqo.
//!
//! The rules are written per controller from the `+kubebuilder:rbac`
//! markers beside each Liqo reconciler (cited in each module), which is
//! what `deployments/liqo/files/liqo-controller-manager-ClusterRole.yaml`
//! is generated from.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::Error;

/// One RBAC policy rule: API groups, resources, verbs.
pub struct Rule {
    pub groups: &'static [&'static str],
    pub resources: &'static [&'static str],
    pub verbs: &'static [&'static str],
}

impl Rule {
    /// A rule on `resources` of `groups`, so that a controller's RBAC
    /// reads as a table, a rule a line.
    pub const fn new(
        groups: &'static [&'static str],
        resources: &'static [&'static str],
        verbs: &'static [&'static str],
    ) -> Self {
        Rule {
            groups,
            resources,
            verbs,
        }
    }
}

/// Everything on the objects a controller owns.
pub const ALL: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];
/// Read and watch.
pub const READ: &[&str] = &["get", "list", "watch"];

/// Store a ClusterRole named `role` with `rules`, bound to `user`, in `kube`.
pub fn grant(kube: &KubeApiServer, user: &str, role: &str, rules: &[Rule]) {
    let binding = json!({"kind": "ClusterRoleBinding", "metadata": {"name": role}});
    store(kube, user, role, rules, binding);
}

/// Bind `user` to the ClusterRole `role` (stored with `rules`) in
/// `namespace` only, as Liqo binds a peer's identities in its tenant
/// namespace.
pub fn grant_in(kube: &KubeApiServer, user: &str, role: &str, namespace: &str, rules: &[Rule]) {
    let name = format!("{role}-{user}");
    let binding =
        json!({"kind": "RoleBinding", "metadata": {"name": name, "namespace": namespace}});
    store(kube, user, role, rules, binding);
}

fn store(kube: &KubeApiServer, user: &str, role: &str, rules: &[Rule], mut binding: Value) {
    let rules: Vec<Value> = rules
        .iter()
        .map(|r| json!({"apiGroups": r.groups, "resources": r.resources, "verbs": r.verbs}))
        .collect();
    binding["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    binding["roleRef"] =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role});
    binding["subjects"] =
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]);
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": role}, "rules": rules});
    kube.load_rbac(&[role, binding]);
}

/// A client that `kube` authenticates as `user`.
pub async fn client_as(kube: &KubeApiServer, user: &str) -> Result<Client, Error> {
    client_in_groups(kube, user, &[]).await
}

/// A client that `kube` authenticates as `user`, member of `groups` (and
/// `system:authenticated`), as a client certificate with `O=<group>` is.
pub async fn client_in_groups(
    kube: &KubeApiServer,
    user: &str,
    groups: &[&str],
) -> Result<Client, Error> {
    client_with(kube, user, groups, true).await
}

/// [`client_as`] without kube's default retry of 429, 503 and 504 (up to
/// 15 times, `RetryPolicy::server_retry`): as client-go's REST client,
/// which retries only an answer carrying `Retry-After`
/// (`staging/src/k8s.io/client-go/rest/request.go`, `checkWait`) — a
/// PodDisruptionBudget's refused eviction carries none, so Liqo sees the
/// 429 at once.
pub async fn client_as_without_retry(kube: &KubeApiServer, user: &str) -> Result<Client, Error> {
    client_with(kube, user, &[], false).await
}

async fn client_with(
    kube: &KubeApiServer,
    user: &str,
    groups: &[&str],
    retry: bool,
) -> Result<Client, Error> {
    let token = kube.token_for_groups(user, groups);
    // Over HTTPS, the server's own CA is trusted (as a kubeconfig from the
    // cluster carries it).
    let mut cluster = json!({"server": kube.url()});
    if let Some(ca) = kube.ca_pem() {
        use base64::Engine;
        cluster["certificate-authority-data"] =
            json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
        "current-context": "test",
    });
    let kubeconfig = Kubeconfig::from_yaml(&kubeconfig.to_string())
        .map_err(|e| Error::Identity(e.to_string()))?;
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Identity(e.to_string()))?;
    config.default_retry = retry;
    Client::try_from(config).map_err(Error::Kube)
}
