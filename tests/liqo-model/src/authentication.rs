//! Liqo's authentication module on a cluster of the test world, as
//! `cmd/liqo-controller-manager/modules/authentication.go:77-180` sets it
//! up: the provider's nonce creator and Tenant controller
//! ([`Provider::with_authentication`]), the consumer's nonce signer and
//! Identity controller ([`Consumer::with_authentication`]), each as the
//! controller manager. They are opt-in because the tests written before
//! them write Tenants, Identities and kubeconfig Secrets by hand, which
//! these controllers would rewrite.

use kube_test_server::KubeApiServer;
use serde_json::json;

use crate::cluster_keys::{self, LIQO_NAMESPACE};
use crate::identity::{self, Rule};
use crate::{
    grant_each, identity_controller, nonce_creator, nonce_signer, tenant, Consumer, Error,
    Provider, CONTROLLER_MANAGER,
};

/// The controller manager's access to its own keys (KEYS:138-141,
/// 184-188, `deployments/liqo/files/liqo-controller-manager-ClusterRole.yaml`
/// grants Secrets cluster-wide).
pub const KEYS_RULES: &[Rule] = &[Rule::new(&[""], &["secrets"], &["get", "create"])];

/// Liqo's namespace, as the chart's installation leaves it, and the
/// cluster's `authentication-keys` in it, made as the controller manager
/// makes them when it starts (`modules/authentication.go:90`).
pub(crate) async fn init_keys(kube: &KubeApiServer) -> Result<(), Error> {
    let namespaces = kube_test_server::GroupResource::new("", "namespaces");
    if kube.get(namespaces.clone(), None, LIQO_NAMESPACE).is_none() {
        kube.apply(
            namespaces,
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": LIQO_NAMESPACE}}),
        );
    }
    identity::grant(
        kube,
        CONTROLLER_MANAGER,
        "liqo-model-authentication-keys",
        KEYS_RULES,
    );
    let manager = identity::client_as(kube, CONTROLLER_MANAGER).await?;
    cluster_keys::init(manager, LIQO_NAMESPACE).await
}

impl Provider {
    /// Also run the nonce creator and the Tenant controller on `kube`,
    /// with the chart's `liqo-remote-controlplane` ClusterRole installed;
    /// the AuthParams name `kube`'s address and CA.
    pub async fn with_authentication(mut self, kube: &KubeApiServer) -> Result<Provider, Error> {
        kube.load_rbac(&tenant::chart_objects(CONTROLLER_MANAGER));
        grant_each(
            kube,
            &[
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-nonce-creator",
                    nonce_creator::RULES,
                ),
                (CONTROLLER_MANAGER, "liqo-model-tenant", tenant::RULES),
            ],
        );
        let manager = identity::client_as(kube, CONTROLLER_MANAGER).await?;
        let options = tenant::Options {
            api_server: kube.url(),
            ca_pem: kube.ca_pem(),
        };
        self._tasks
            .0
            .push(tokio::spawn(nonce_creator::run(manager.clone())));
        self._tasks
            .0
            .push(tokio::spawn(tenant::run(manager, options)));
        Ok(self)
    }
}

impl Consumer {
    /// Also run the nonce signer and the Identity controller on `kube`
    /// (its keys are made by [`Consumer::start`]).
    pub async fn with_authentication(mut self, kube: &KubeApiServer) -> Result<Consumer, Error> {
        grant_each(
            kube,
            &[
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-nonce-signer",
                    nonce_signer::RULES,
                ),
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-identity",
                    identity_controller::RULES,
                ),
            ],
        );
        let manager = identity::client_as(kube, CONTROLLER_MANAGER).await?;
        self._tasks
            .0
            .push(tokio::spawn(nonce_signer::run(manager.clone())));
        self._tasks
            .0
            .push(tokio::spawn(identity_controller::run(manager)));
        Ok(self)
    }
}
