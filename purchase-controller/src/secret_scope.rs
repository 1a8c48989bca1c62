//! `--secret-namespaces` (chart value `purchaseController.secretNamespaces`):
//! the namespaces whose Secrets this controller may use, so that an
//! installation can bind its Secret rules with a Role in each of them
//! instead of a ClusterRole that reads every Secret of the cluster (issue
//! 46). Empty: every namespace, as before.
//!
//! In the mode, every Secret call and watch of the controller names one of
//! the listed namespaces ([`SecretScope::apis`] in place of `Api::all`),
//! and a Purchase whose round would need a Secret elsewhere is refused
//! before any call is made ([`SecretScope::purchase`], [`SecretScope::tenant`]):
//! a Purchase's own namespace holds its catalog token or peering
//! credentials Secret and the `<purchase>-peering-kubeconfig` Secret the
//! controller writes there; with Liqo v1 and `--auto-peer`, Liqo's tenant
//! namespace of the provider (`liqo-tenant-<provider cluster ID>`) holds
//! the signed-nonce Secret and the gateway's key Secret. Binding copies
//! follow the same list (`binding_copier`): sources are watched in
//! the listed namespaces and a copy into another one is refused.
//!
//! Liqo's own namespace (`--liqo-namespace`) is outside the list: the one
//! Secret read there with Liqo v1 (`authentication-keys`) and the v0.x token
//! Secrets have Roles of their own in the chart, narrowed by name or to
//! that namespace.

use std::collections::BTreeSet;

use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource};

use crate::decision::{Assessment, Cond, Phase, READY};
use crate::liqo::Generation;

/// The flag and the chart value that set the list, named in refusals.
pub const FLAG: &str = "--secret-namespaces";
pub const ENV: &str = "PURCHASE_CONTROLLER_SECRET_NAMESPACES";
pub const VALUE: &str = "purchaseController.secretNamespaces";

/// The reason of a refused Purchase's `Ready` condition and Event.
pub const NOT_LISTED: &str = "SecretNamespaceNotListed";

/// Where the controller may use Secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SecretScope {
    /// Everywhere (no list: a ClusterRole grants the Secret rules).
    #[default]
    Cluster,
    /// In these namespaces only (a Role in each).
    Namespaces(BTreeSet<String>),
}

/// A step that needs Secrets in a namespace outside the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotListed {
    pub namespace: String,
    /// What needs them, in words ("the Purchase's catalog token and ...").
    pub needed_for: String,
}

impl NotListed {
    pub fn message(&self) -> String {
        let ns = &self.namespace;
        format!(
            "{} needs Secrets in namespace {ns}, outside the namespaces this controller may use Secrets in: add {ns} to {VALUE} ({FLAG}, {ENV}); nothing was done",
            self.needed_for
        )
    }

    /// The Purchase's assessment: `Failed`, `Ready` false with
    /// [`NOT_LISTED`] (the phase change is a Warning Event with the same
    /// words); nothing for the catalog to hear, the contract is fine.
    pub fn assessment(&self) -> Assessment {
        Assessment {
            phase: Phase::Failed,
            conditions: vec![Cond {
                type_: READY,
                status: false,
                reason: NOT_LISTED.to_string(),
                message: self.message(),
            }],
            report: None,
        }
    }
}

impl SecretScope {
    /// From the flag's list: blanks dropped, empty is [`SecretScope::Cluster`].
    pub fn from_list<S: AsRef<str>>(list: &[S]) -> Self {
        let namespaces: BTreeSet<String> = list
            .iter()
            .map(|n| n.as_ref().trim())
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        if namespaces.is_empty() {
            SecretScope::Cluster
        } else {
            SecretScope::Namespaces(namespaces)
        }
    }

    /// May Secrets of `namespace` be used?
    pub fn admits(&self, namespace: &str) -> bool {
        match self {
            SecretScope::Cluster => true,
            SecretScope::Namespaces(listed) => listed.contains(namespace),
        }
    }

    /// `Err` naming `namespace` when it is not admitted.
    pub fn check(&self, namespace: &str, needed_for: &str) -> Result<(), NotListed> {
        if self.admits(namespace) {
            Ok(())
        } else {
            Err(NotListed {
                namespace: namespace.to_string(),
                needed_for: needed_for.to_string(),
            })
        }
    }

    /// The APIs to list and watch a namespaced kind (Secrets) through:
    /// one over the whole cluster, or one per listed namespace.
    pub fn apis<K>(&self, client: &Client) -> Vec<Api<K>>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        match self {
            SecretScope::Cluster => vec![Api::all(client.clone())],
            SecretScope::Namespaces(listed) => listed
                .iter()
                .map(|ns| Api::namespaced(client.clone(), ns))
                .collect(),
        }
    }

    /// Every round of a Purchase reads Secrets in its own namespace (its
    /// catalog token, or its peering credentials) and may write the
    /// `<purchase>-peering-kubeconfig` Secret there.
    pub fn purchase(&self, purchase_namespace: &str) -> Result<(), NotListed> {
        self.check(
            purchase_namespace,
            "the Purchase's own namespace (its credentials Secret, the peering kubeconfig Secret kept beside it)",
        )
    }

    /// With Liqo v1 and `--auto-peer`, the peering with `provider`
    /// writes the signed-nonce Secret and reads the gateway's key Secret
    /// in Liqo's tenant namespace `liqo-tenant-<provider>` here; v0.x and a
    /// peering left to a person (`--auto-peer=false`) need none there.
    pub fn tenant(
        &self,
        generation: Generation,
        auto_peer: bool,
        provider: &str,
    ) -> Result<(), NotListed> {
        if generation != Generation::V1 || !auto_peer {
            return Ok(());
        }
        self.check(
            &crate::authentication::tenant_namespace(provider),
            &format!("peering with provider {provider} (--auto-peer: Liqo's signed nonce and gateway key)"),
        )
    }

    /// A binding copy into `namespace`.
    pub fn copy_target(&self, namespace: &str) -> Result<(), String> {
        self.check(namespace, "a binding copy into it")
            .map_err(|e| e.message())
    }

    /// The namespace of `--network-policy-credentials` (`namespace/name`).
    pub fn configured_secret(&self, flag: &str, namespace: &str) -> Result<(), String> {
        self.check(namespace, flag).map_err(|e| e.message())
    }

    /// For the log: `*` or the list.
    pub fn describe(&self) -> String {
        match self {
            SecretScope::Cluster => "*".to_string(),
            SecretScope::Namespaces(listed) => listed.iter().cloned().collect::<Vec<_>>().join(","),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Secret;

    #[test]
    fn no_list_is_every_namespace_and_blanks_are_no_list() {
        for list in [&[][..], &[""], &[" ", ""]] {
            let scope = SecretScope::from_list(list);
            assert_eq!(scope, SecretScope::Cluster);
            assert!(scope.admits("anything"));
            assert!(scope.purchase("team").is_ok());
            assert!(scope.tenant(Generation::V1, true, "p").is_ok());
            assert!(scope.copy_target("apps").is_ok());
        }
    }

    #[test]
    fn a_list_admits_its_namespaces_only() {
        let scope = SecretScope::from_list(&[" team ", "liqo-tenant-p1", "team"]);
        assert_eq!(scope.describe(), "liqo-tenant-p1,team");
        assert!(scope.admits("team") && scope.admits("liqo-tenant-p1"));
        // Not a prefix, not Liqo's namespace by default.
        assert!(!scope.admits("tea") && !scope.admits("team-2") && !scope.admits("liqo"));
        assert!(scope.purchase("team").is_ok());
        let refused = scope.purchase("other").unwrap_err();
        assert_eq!(refused.namespace, "other");
        let message = refused.message();
        assert!(message.contains("namespace other"), "{message}");
        assert!(
            message.contains(VALUE) && message.contains(FLAG),
            "{message}"
        );
        let assessment = refused.assessment();
        assert_eq!(assessment.phase, Phase::Failed);
        assert!(assessment.report.is_none(), "the catalog hears nothing");
        let ready = &assessment.conditions[0];
        assert_eq!((ready.type_, ready.status), (READY, false));
        assert_eq!(ready.reason, NOT_LISTED);
    }

    #[test]
    fn the_tenant_namespace_is_needed_by_v1_auto_peering_only() {
        let scope = SecretScope::from_list(&["team", "liqo-tenant-p1"]);
        assert!(scope.tenant(Generation::V1, true, "p1").is_ok());
        let refused = scope.tenant(Generation::V1, true, "p2").unwrap_err();
        assert_eq!(refused.namespace, "liqo-tenant-p2");
        assert!(refused.message().contains("provider p2"));
        // A person peers (the peering command), or Liqo v0.x: no tenant
        // Secret is touched.
        assert!(scope.tenant(Generation::V1, false, "p2").is_ok());
        assert!(scope.tenant(Generation::V0, true, "p2").is_ok());
    }

    #[test]
    fn copies_and_configured_secrets_name_the_namespace_and_the_value() {
        let scope = SecretScope::from_list(&["apps"]);
        assert!(scope.copy_target("apps").is_ok());
        let refused = scope.copy_target("db").unwrap_err();
        assert!(
            refused.contains("namespace db") && refused.contains(VALUE),
            "{refused}"
        );
        let refused = scope
            .configured_secret("--network-policy-credentials", "liqo")
            .unwrap_err();
        assert!(refused.contains("--network-policy-credentials needs Secrets in namespace liqo"));
    }

    #[tokio::test]
    async fn one_api_per_listed_namespace_or_one_for_all() {
        // A client that is never called: the APIs' URLs are what matters.
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = Client::try_from(config).unwrap();
        let urls = |scope: &SecretScope| {
            scope
                .apis::<Secret>(&client)
                .iter()
                .map(|api| api.resource_url().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(urls(&SecretScope::Cluster), ["/api/v1/secrets"]);
        assert_eq!(
            urls(&SecretScope::from_list(&["b", "a"])),
            [
                "/api/v1/namespaces/a/secrets",
                "/api/v1/namespaces/b/secrets"
            ]
        );
    }
}
