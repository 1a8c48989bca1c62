//! What one pass reads in bulk of the objects this controller made: every
//! CSR and key Secret of its own (one list each, which also says which
//! consumers have a peering user, [`Survey::present`]), its RoleBindings
//! (in Liqo's namespace and the tenant namespaces) and the tenant
//! namespaces. `Cluster::ensure`
//! takes a consumer's objects from here instead of reading them one by
//! one: before, a pass made about five requests per consumer, one after the
//! other (docs/benchmarks.md, the peering-user controller at scale). An
//! object the lists did not show (another's, or made since) is still read
//! on its own, so what `ensure` decides is what it decided before.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::RoleBinding;

use crate::names::{ConsumerId, OWNER_ANNOTATION};
use crate::plan::Present;
use controller_core::liqo;

/// The lists of one pass, by object name.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    csrs: HashMap<String, CertificateSigningRequest>,
    secrets: HashMap<String, Secret>,
    /// By namespace and the peering user they are for (Liqo's user-name
    /// label); None when they could not be listed (each consumer's are
    /// then listed on their own).
    bindings: Option<HashMap<(String, String), Vec<RoleBinding>>>,
    /// The names of the namespaces labelled as Liqo's tenant namespaces
    /// (one not among them is still looked for by name).
    tenant_namespaces: HashSet<String>,
}

impl Survey {
    /// `bindings`: this controller's RoleBindings in every namespace;
    /// `tenant_namespaces`: the names of the namespaces listed.
    pub fn new(
        csrs: Vec<CertificateSigningRequest>,
        secrets: Vec<Secret>,
        bindings: Option<Vec<RoleBinding>>,
        tenant_namespaces: impl IntoIterator<Item = String>,
    ) -> Survey {
        let by_name = |name: Option<&String>| name.cloned().unwrap_or_default();
        let bindings = bindings.map(|list| {
            let mut by_user: HashMap<(String, String), Vec<RoleBinding>> = HashMap::new();
            for b in list {
                let user = b
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(liqo::PEERING_USER_NAME_LABEL))
                    .cloned()
                    .unwrap_or_default();
                let namespace = by_name(b.metadata.namespace.as_ref());
                by_user.entry((namespace, user)).or_default().push(b);
            }
            by_user
        });
        Survey {
            csrs: csrs
                .into_iter()
                .map(|c| (by_name(c.metadata.name.as_ref()), c))
                .collect(),
            secrets: secrets
                .into_iter()
                .map(|s| (by_name(s.metadata.name.as_ref()), s))
                .collect(),
            bindings,
            tenant_namespaces: tenant_namespaces.into_iter().collect(),
        }
    }

    /// The consumers this controller has a peering user for (a CSR or a
    /// key Secret of its own), each with the buyer its key was made for.
    pub fn present(&self) -> Present {
        let mut out = Present::new();
        for name in self.csrs.keys() {
            if let Some(c) = ConsumerId::from_user_name(name) {
                out.insert(c, None);
            }
        }
        for (name, s) in &self.secrets {
            let Some(c) = ConsumerId::from_user_name(name) else {
                continue;
            };
            let owner = s
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(OWNER_ANNOTATION))
                .cloned();
            out.insert(c, owner);
        }
        out
    }

    /// The CSR `name` of this controller's, if listed.
    pub fn csr(&self, name: &str) -> Option<&CertificateSigningRequest> {
        self.csrs.get(name)
    }

    /// The key Secret `name` of this controller's, if listed.
    pub fn secret(&self, name: &str) -> Option<&Secret> {
        self.secrets.get(name)
    }

    /// This controller's RoleBindings in `namespace` for the peering user
    /// `user` (none: an empty list); None when they were not listed.
    pub fn bindings(&self, namespace: &str, user: &str) -> Option<Vec<RoleBinding>> {
        self.bindings.as_ref().map(|by_user| {
            by_user
                .get(&(namespace.to_string(), user.to_string()))
                .cloned()
                .unwrap_or_default()
        })
    }

    /// Whether the namespace `name` was listed (it exists).
    pub fn has_namespace(&self, name: &str) -> bool {
        self.tenant_namespaces.contains(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn present_and_lookups() {
        let c1 = ConsumerId::parse("c1").unwrap();
        let c2 = ConsumerId::parse("c2").unwrap();
        let csr: CertificateSigningRequest = object(json!({
            "metadata": {"name": c1.user_name()},
            "spec": {"request": "", "signerName": "s"}}));
        let secret: Secret = object(json!({"metadata": {"name": c2.user_name(),
            "annotations": {OWNER_ANNOTATION: "alice"}}}));
        let binding: RoleBinding = object(json!({
            "metadata": {"name": "b", "namespace": "liqo",
                         "labels": {liqo::PEERING_USER_NAME_LABEL: c1.user_name()}},
            "roleRef": {"kind": "Role", "name": "r", "apiGroup": "rbac.authorization.k8s.io"}}));
        let survey = Survey::new(
            vec![csr],
            vec![secret],
            Some(vec![binding]),
            [c1.tenant_namespace()],
        );
        assert_eq!(
            survey.present(),
            Present::from([(c1.clone(), None), (c2.clone(), Some("alice".into()))])
        );
        assert!(survey.csr(&c1.user_name()).is_some());
        assert!(survey.csr(&c2.user_name()).is_none());
        assert!(survey.secret(&c2.user_name()).is_some());
        assert_eq!(
            survey.bindings("liqo", &c1.user_name()).map(|b| b.len()),
            Some(1)
        );
        assert_eq!(
            survey
                .bindings(&c1.tenant_namespace(), &c1.user_name())
                .map(|b| b.len()),
            Some(0),
            "another namespace"
        );
        assert_eq!(
            survey.bindings("liqo", &c2.user_name()).map(|b| b.len()),
            Some(0),
            "listed, none there"
        );
        assert!(survey.has_namespace(&c1.tenant_namespace()));
        assert!(!survey.has_namespace(&c2.tenant_namespace()));
        let unlisted = Survey::new(vec![], vec![], None, []);
        assert_eq!(unlisted.bindings("liqo", &c1.user_name()), None);
    }
}
