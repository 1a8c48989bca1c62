//! Liqo's names for the objects, labels and annotations the modelled
//! controllers read and write, each with the v1.2.0 file that defines it.

use kube::api::ApiResource;
use kube::core::GroupVersionKind;

/// `pkg/consts/namespace_mapping.go:19`.
pub const REMOTE_CLUSTER_ID: &str = "liqo.io/remote-cluster-id";
/// `pkg/consts/namespace_mapping.go:22`: the kind of a Liqo node ...
pub const TYPE: &str = "liqo.io/type";
/// `pkg/consts/namespace_mapping.go:25`: ... a virtual node.
pub const TYPE_NODE: &str = "virtual-node";
/// `pkg/consts/core.go:19`.
pub const TENANT_NAMESPACE: &str = "liqo.io/tenant-namespace";
/// `pkg/consts/replication.go:30`: the consumer asks for its slice to be replicated.
pub const REPLICATION_REQUESTED: &str = "liqo.io/replication";
/// `pkg/consts/replication.go:34`.
pub const REPLICATION_ORIGIN: &str = "liqo.io/originID";
/// `pkg/consts/replication.go:36`.
pub const REPLICATION_DESTINATION: &str = "liqo.io/remoteID";
/// `pkg/consts/replication.go:38`: the object is a replica made by the crdReplicator.
pub const REPLICATED: &str = "liqo.io/replicated";
/// `pkg/consts/authentication.go:41`.
pub const RESOURCE_SLICE_NAME: &str = "liqo.io/resourceslice-name";
/// `pkg/consts/authentication.go:44`: set on each ShadowPod by the ShadowPod mutating webhook.
pub const CREATOR_USER: &str = "liqo.io/creator-user";
/// `pkg/consts/authentication.go:47`.
pub const CREATE_VIRTUAL_NODE: &str = "liqo.io/create-virtual-node";
/// `pkg/consts/authentication.go:50`.
pub const CORDON_RESOURCE: &str = "liqo.io/cordon";
/// `pkg/consts/authentication.go:53`.
pub const CORDON_TENANT: &str = "liqo.io/cordon-tenant";
/// `pkg/consts/storage.go:22`.
pub const STORAGE_AVAILABLE: &str = "storage.liqo.io/available";
/// `pkg/consts/webhook.go:20`: the taint every virtual node carries.
pub const VIRTUAL_NODE_TOLERATION_KEY: &str = "virtual-node.liqo.io/not-allowed";

/// `pkg/consts/authentication.go:24`: a Secret the provider fills with a nonce.
pub const NONCE_SECRET: &str = "liqo.io/nonce";
/// `pkg/consts/authentication.go:22`: a Secret the consumer signs the nonce in.
pub const SIGNED_NONCE_SECRET: &str = "liqo.io/signed-nonce";
/// `pkg/consts/authentication.go:27`.
pub const NONCE_FIELD: &str = "nonce";
/// `pkg/consts/authentication.go:29`.
pub const SIGNED_NONCE_FIELD: &str = "signedNonce";
/// `pkg/consts/authentication.go:32`.
pub const KUBECONFIG_FIELD: &str = "kubeconfig";
/// `pkg/consts/authentication.go:35`.
pub const IDENTITY_TYPE: &str = "liqo.io/identity-type";
/// `pkg/consts/authentication.go:38`.
pub const REMOTE_TENANT_NAMESPACE: &str = "liqo.io/remote-tenant-namespace";
/// `apis/authentication/v1beta1/identity_types.go:45`: the Identity of a
/// peer's control plane.
pub const CONTROL_PLANE: &str = "ControlPlane";

/// Label selector of the replicas the crdReplicator made
/// (`internal/crdReplicator/reflection/reflector.go:295-309`).
pub const REPLICATED_SELECTOR: &str = "liqo.io/originID,liqo.io/replicated=true";
/// Label selector of the local slices to replicate
/// (`internal/crdReplicator/reflection/manager.go:164-178`).
pub const LOCAL_SELECTOR: &str = "liqo.io/replication=true,liqo.io/remoteID";

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    let version = if group.is_empty() { "v1" } else { "v1beta1" };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// One function a resource: `name => group, kind, plural`.
macro_rules! resources {
    ($($name:ident => $group:literal, $kind:literal, $plural:literal;)*) => {
        $(pub fn $name() -> ApiResource {
            resource($group, $kind, $plural)
        })*
    };
}

resources! {
    resource_slices => "authentication.liqo.io", "ResourceSlice", "resourceslices";
    tenants => "authentication.liqo.io", "Tenant", "tenants";
    identities => "authentication.liqo.io", "Identity", "identities";
    quotas => "offloading.liqo.io", "Quota", "quotas";
    virtual_nodes => "offloading.liqo.io", "VirtualNode", "virtualnodes";
    foreign_clusters => "core.liqo.io", "ForeignCluster", "foreignclusters";
    namespaces => "", "Namespace", "namespaces";
    nodes => "", "Node", "nodes";
    secrets => "", "Secret", "secrets";
}
