//! The consumer's identity creator, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/authentication/identitycreator-controller/identitycreator_controller.go`
//! (ICC below): each local ResourceSlice whose authentication the provider
//! judged gets the Identity `resourceslice-<slice>` made from the
//! `status.authParams` the provider forged (a certificate its API server
//! signed, see [`crate::remote_resource_slice`]), or loses it once
//! authentication is `Denied`. The Identity controller
//! ([`crate::identity_controller`]) then makes its kubeconfig Secret, and
//! the virtual-node creator and the virtual kubelet use it.

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::{Client, ResourceExt};
use kube_test_server::KubeApiServer;
use serde_json::json;

use crate::consts::{self, LOCAL_SELECTOR, REMOTE_CLUSTER_ID, RESOURCE_SLICE_NAME};
use crate::identity::{self, Rule, ALL, READ};
use crate::runner::{self, Key};
use crate::slice::{self, AUTHENTICATION, DENIED};
use crate::{grant_each, identity_controller, Consumer, Error, CONTROLLER_MANAGER};

/// RBAC of this controller (ICC:66-69), plus the slices' finalizers its
/// Identities' `blockOwnerDeletion` needs (the chart's controller-manager
/// ClusterRole grants them).
pub const RULES: &[Rule] = &[
    Rule::new(
        &["authentication.liqo.io"],
        &["resourceslices", "resourceslices/status"],
        READ,
    ),
    Rule::new(&["authentication.liqo.io"], &["identities"], ALL),
    Rule::new(
        &["authentication.liqo.io"],
        &["resourceslices/finalizers"],
        &["update"],
    ),
];

/// `authentication/forge/identity.go:35-38` `ResourceSliceIdentityName`.
pub fn identity_name(slice: &str) -> String {
    format!("resourceslice-{slice}")
}

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client) {
    let slices: Api<DynamicObject> = Api::all_with(client.clone(), &consts::resource_slices());
    let identities: Api<DynamicObject> = Api::all_with(client.clone(), &consts::identities());
    // ICC:130-141, 143-153: local slices (the crdReplicator's local
    // selector) that carry an Authentication condition, and the Identities
    // they own.
    let own = runner::keys(runner::touched(slices, LOCAL_SELECTOR), |s| {
        slice::condition(&s, AUTHENTICATION).map(|_| Key::of(&s))
    });
    let owned = runner::keys(runner::touched(identities, ""), |i| {
        slice::controlling_slice(&i)
    });
    let client = &client;
    runner::run("identity-creator", vec![own, owned.boxed()], |key| {
        reconcile(client, key)
    })
    .await;
}

/// ICC:72-125.
async fn reconcile(client: &Client, key: Key) -> Result<(), Error> {
    let slices: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::resource_slices());
    let Some(slice) = slices.get_opt(&key.name).await? else {
        return Ok(());
    };
    let identities: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &consts::identities());
    let name = identity_name(&key.name);
    // ICC:84-95, 156-160: a Denied slice loses its Identity.
    if slice::condition(&slice, AUTHENTICATION) == Some(DENIED) {
        match identities.delete(&name, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(());
    }
    // ICC:97-101.
    let Some(provider) = slice.data["spec"]["providerClusterID"]
        .as_str()
        .filter(|p| !p.is_empty())
        .map(str::to_string)
    else {
        return Err(Error::Waiting(format!(
            "ResourceSlice {key:?} has no ProviderClusterID"
        )));
    };
    // ICC:103-107.
    let auth_params = slice.data["status"]["authParams"].clone();
    if !auth_params.is_object() {
        return Err(Error::Waiting(format!(
            "ResourceSlice {key:?} has no AuthParams"
        )));
    }
    // ICC:109-122 with `forge/identity.go:60-72` `MutateIdentity`: the
    // remote-cluster label, the spec (no default namespace), the slice's
    // name label, controlled by the slice.
    let resource = consts::identities();
    runner::create_or_update(&identities, &resource, &key.namespace, &name, |identity| {
        let labels = identity.labels_mut();
        labels.insert(REMOTE_CLUSTER_ID.to_string(), provider.clone());
        labels.insert(RESOURCE_SLICE_NAME.to_string(), key.name.clone());
        identity.data["spec"] = json!({"clusterID": provider, "type": "ResourceSlice",
                                       "authParams": auth_params});
        slice::set_controller(identity, &slice);
    })
    .await
}

impl Consumer {
    /// Also run the identity creator and the Identity controller on `kube`
    /// as the controller manager (both in Liqo's authentication module,
    /// `cmd/liqo-controller-manager/modules/authentication.go:140-165`), so
    /// each accepted local slice gets its Identity and kubeconfig Secret
    /// from the provider's signature. The cluster's keys come from
    /// [`Consumer::start`]. Not with [`Consumer::with_authentication`],
    /// which runs the Identity controller already: use
    /// [`Consumer::with_identity_creator_only`] there.
    pub async fn with_identity_creator(mut self, kube: &KubeApiServer) -> Result<Consumer, Error> {
        grant_each(
            kube,
            &[(
                CONTROLLER_MANAGER,
                "liqo-model-identity",
                identity_controller::RULES,
            )],
        );
        let manager = identity::client_as(kube, CONTROLLER_MANAGER).await?;
        self._tasks
            .0
            .push(tokio::spawn(identity_controller::run(manager)));
        self.with_identity_creator_only(kube).await
    }

    /// Also run the identity creator alone (with
    /// [`Consumer::with_authentication`], whose Identity controller makes
    /// the kubeconfig Secrets).
    pub async fn with_identity_creator_only(
        mut self,
        kube: &KubeApiServer,
    ) -> Result<Consumer, Error> {
        grant_each(
            kube,
            &[(CONTROLLER_MANAGER, "liqo-model-identity-creator", RULES)],
        );
        let manager = identity::client_as(kube, CONTROLLER_MANAGER).await?;
        self._tasks.0.push(tokio::spawn(run(manager)));
        Ok(self)
    }
}
