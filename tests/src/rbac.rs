//! The RBAC `deploy/kubernetes` ships, loaded into a test API server so a
//! controller under test runs with exactly the permissions it is deployed
//! with: a call they do not allow is refused with the API server's 403
//! where it is made. Rendered once per test process from the manifests by
//! the real `kubectl kustomize` through `deploy-check` (the rendering
//! `deploy-check` holds the audit against, and `kubectl apply -k`
//! applies), so the tests and the check read one source. The kubectl is
//! the one `scripts/install-test-deps.sh` installs into `build/bin/`, or
//! `$KUBECTL`.
//! The ValidatingAdmissionPolicies shipped beside the RBAC load the same way
//! ([`load_shipped_admission`]).

use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Result};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

/// Every object of `deploy/kubernetes/*`, as rendered (namespaces set by
/// each kustomization), once per test process.
fn rendered() -> Result<&'static [Value]> {
    static RENDERED: OnceLock<Result<Vec<Value>, String>> = OnceLock::new();
    RENDERED
        .get_or_init(|| {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
            let deploy = root.join("deploy/kubernetes");
            let kubectl = deploy_check::kubectl::Kubectl::installed_under(&root);
            // Every test is a process of its own: kubectl runs once per
            // change of deploy/ or of kubectl, not once per test.
            let cache = root.join("build/deploy-rendered");
            let rendered = deploy_check::cache::render_all_cached(&kubectl, &deploy, &cache)
                .map_err(|e| format!("rendering {}: {e}", deploy.display()))?;
            Ok(rendered.into_iter().flat_map(|r| r.objects).collect())
        })
        .as_deref()
        .map_err(|e| anyhow!("{e}"))
}

/// The rendered objects of these kinds.
fn of_kinds(kinds: &[&str]) -> Result<Vec<Value>> {
    Ok(rendered()?
        .iter()
        .filter(|o| o["kind"].as_str().is_some_and(|k| kinds.contains(&k)))
        .cloned()
        .collect())
}

/// Every Role, ClusterRole and binding of `deploy/kubernetes/*`, as
/// rendered (namespaces set by each kustomization).
pub fn shipped() -> Result<Vec<Value>> {
    of_kinds(&["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"])
}

/// The ValidatingAdmissionPolicies `deploy/kubernetes/*` ships, and their
/// bindings, as rendered.
pub fn shipped_admission() -> Result<Vec<Value>> {
    of_kinds(&[POLICY_KIND, BINDING_KIND])
}

const POLICY_KIND: &str = "ValidatingAdmissionPolicy";
const BINDING_KIND: &str = "ValidatingAdmissionPolicyBinding";

/// Load the shipped ValidatingAdmissionPolicies and bindings into `kube`,
/// which then evaluates them on every create and update (as an API server
/// with the policies applied does). Fails if `deploy/` ships none.
pub fn load_shipped_admission(kube: &KubeApiServer) -> Result<()> {
    load_admission(kube, shipped_admission()?)
}

/// Load these ValidatingAdmissionPolicies and bindings (other kinds are
/// left out) into `kube`. Fails if there is no policy among them.
pub fn load_admission(kube: &KubeApiServer, objects: Vec<Value>) -> Result<()> {
    let objects: Vec<Value> = objects
        .into_iter()
        .filter(|o| o["kind"] == POLICY_KIND || o["kind"] == BINDING_KIND)
        .collect();
    if !objects.iter().any(|o| o["kind"] == POLICY_KIND) {
        bail!("no ValidatingAdmissionPolicy to load");
    }
    for object in objects {
        let resource = if object["kind"] == POLICY_KIND {
            "validatingadmissionpolicies"
        } else {
            "validatingadmissionpolicybindings"
        };
        kube.apply(("admissionregistration.k8s.io", resource), object);
    }
    Ok(())
}

/// Load the shipped RBAC into `kube`.
pub fn load_shipped(kube: &KubeApiServer) -> Result<()> {
    load(kube, shipped()?)
}

fn load(kube: &KubeApiServer, objects: Vec<Value>) -> Result<()> {
    if kube.load_rbac(&objects) == 0 {
        bail!("deploy/kubernetes ships no RBAC");
    }
    Ok(())
}

/// Load the shipped RBAC with one permission taken away: `verb` on
/// `resource` (`resource/subresource`) in `api_group`, from the rules of
/// the (Cluster)Role `role`. Fails if no rule of that role grants it.
pub fn load_shipped_without(
    kube: &KubeApiServer,
    role: &str,
    api_group: &str,
    resource: &str,
    verb: &str,
) -> Result<()> {
    let mut objects = shipped()?;
    let mut removed = false;
    for object in objects.iter_mut().filter(|o| {
        matches!(o["kind"].as_str(), Some("Role" | "ClusterRole")) && o["metadata"]["name"] == role
    }) {
        let Some(rules) = object["rules"].as_array_mut() else {
            continue;
        };
        let mut split = Vec::new();
        for rule in rules.iter_mut() {
            let has = |field: &str, want: &str| {
                rule[field]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|v| v == want))
            };
            if !(has("apiGroups", api_group) && has("resources", resource) && has("verbs", verb)) {
                continue;
            }
            // The other resources of the rule keep the verb.
            let others: Vec<Value> = rule["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| *r != resource)
                .cloned()
                .collect();
            if !others.is_empty() {
                let mut rest = rule.clone();
                rest["resources"] = json!(others);
                split.push(rest);
                rule["resources"] = json!([resource]);
            }
            if let Some(verbs) = rule["verbs"].as_array_mut() {
                verbs.retain(|v| v != verb);
            }
            removed = true;
        }
        rules.extend(split);
    }
    if !removed {
        bail!("no rule of {role} grants {verb} on {api_group}/{resource}");
    }
    load(kube, objects)
}

/// Bind `user` (a client certificate's CN, say) to the shipped ClusterRole
/// `cluster_role` cluster-wide, as an operator would with a User subject,
/// and load the shipped RBAC.
pub fn load_shipped_for_user(kube: &KubeApiServer, cluster_role: &str, user: &str) -> Result<()> {
    let mut objects = shipped()?;
    if !objects
        .iter()
        .any(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == cluster_role)
    {
        bail!("deploy/kubernetes ships no ClusterRole {cluster_role}");
    }
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{cluster_role}-{user}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }));
    load(kube, objects)
}
