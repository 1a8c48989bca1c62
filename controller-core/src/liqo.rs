//! Liqo's vocabulary, each name declared once: the API groups, versions and
//! kinds the broker's controllers read or write, and every label,
//! annotation, condition and phase name they match on.
//!
//! Liqo is Go and publishes no schema this crate could import, so a name
//! that drifted here would fail only against a real Liqo: each constant
//! names the Liqo source it was read from (v1.2.0 unless it says v0.10.3),
//! so that checking it against a new release is a matter of opening that
//! file. The end-to-end tests' API server (`tests/kube-apiserver`) keeps
//! its own copy on purpose: it models Liqo independently of this crate.

use kube::core::{ApiResource, GroupVersionKind};

/// `apis/authentication/v1beta1/groupversion_info.go`: ResourceSlice,
/// Tenant.
pub const AUTHENTICATION_GROUP: &str = "authentication.liqo.io";
/// `apis/offloading/v1beta1/groupversion_info.go` (v0.10.3:
/// `apis/offloading/v1alpha1`): NamespaceOffloading.
pub const OFFLOADING_GROUP: &str = "offloading.liqo.io";
/// `apis/core/v1beta1/groupversion_info.go`: v1's ForeignCluster.
pub const CORE_GROUP: &str = "core.liqo.io";
/// v0.10.3 `apis/discovery/v1alpha1/groupversion_info.go`: v0's
/// ForeignCluster.
pub const DISCOVERY_GROUP: &str = "discovery.liqo.io";
/// Liqo v1.0 … v1.2's version of every group above.
pub const V1BETA1: &str = "v1beta1";
/// Liqo v0.x's version of `discovery` and `offloading`.
pub const V1ALPHA1: &str = "v1alpha1";

/// A Liqo kind: where it is served and what it is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiqoKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

impl LiqoKind {
    /// `group/version`, as an object's `apiVersion` says it.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// The kind for kube-rs's dynamic API.
    pub fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }
}

/// `apis/authentication/v1beta1/resourceslice_types.go`: what a consumer
/// asks of a provider.
pub const RESOURCE_SLICE: LiqoKind = LiqoKind {
    group: AUTHENTICATION_GROUP,
    version: V1BETA1,
    kind: "ResourceSlice",
    plural: "resourceslices",
};

/// `apis/authentication/v1beta1/tenant_types.go`: one consumer peered with
/// this provider.
pub const TENANT: LiqoKind = LiqoKind {
    group: AUTHENTICATION_GROUP,
    version: V1BETA1,
    kind: "Tenant",
    plural: "tenants",
};

/// `apis/networking/v1beta1/groupversion_info.go`: the gateways, their
/// keys and connections, and the network configurations.
pub const NETWORKING_GROUP: &str = "networking.liqo.io";
/// `apis/ipam/v1alpha1/groupversion_info.go`: a cluster's Networks.
pub const IPAM_GROUP: &str = "ipam.liqo.io";

/// `apis/networking/v1beta1/configuration_types.go`: the other cluster's
/// CIDRs, as this one configures them.
pub const CONFIGURATION: LiqoKind = LiqoKind {
    group: NETWORKING_GROUP,
    version: V1BETA1,
    kind: "Configuration",
    plural: "configurations",
};

/// `apis/networking/v1beta1/gatewayserver_types.go`: the tunnel's server
/// side (on the provider, as `liqoctl peer` sets it up).
pub const GATEWAY_SERVER: LiqoKind = LiqoKind {
    group: NETWORKING_GROUP,
    version: V1BETA1,
    kind: "GatewayServer",
    plural: "gatewayservers",
};

/// `apis/networking/v1beta1/gatewayclient_types.go`: the tunnel's client
/// side.
pub const GATEWAY_CLIENT: LiqoKind = LiqoKind {
    group: NETWORKING_GROUP,
    version: V1BETA1,
    kind: "GatewayClient",
    plural: "gatewayclients",
};

/// `apis/networking/v1beta1/publickey_types.go`; the plural is the CRD's
/// own (`deployments/liqo/charts/liqo-crds/crds/networking.liqo.io_publickeies.yaml`).
pub const PUBLIC_KEY: LiqoKind = LiqoKind {
    group: NETWORKING_GROUP,
    version: V1BETA1,
    kind: "PublicKey",
    plural: "publickeies",
};

/// `apis/networking/v1beta1/connection_types.go`: a gateway's tunnel and
/// its state.
pub const CONNECTION: LiqoKind = LiqoKind {
    group: NETWORKING_GROUP,
    version: V1BETA1,
    kind: "Connection",
    plural: "connections",
};

/// `apis/ipam/v1alpha1/network_types.go`: a CIDR of a cluster (pod,
/// external), in Liqo's namespace.
pub const NETWORK: LiqoKind = LiqoKind {
    group: IPAM_GROUP,
    version: V1ALPHA1,
    kind: "Network",
    plural: "networks",
};

/// `apis/offloading/v1beta1/namespaceoffloading_types.go`: where a
/// namespace is offloaded to.
pub const NAMESPACE_OFFLOADING: LiqoKind = LiqoKind {
    group: OFFLOADING_GROUP,
    version: V1BETA1,
    kind: "NamespaceOffloading",
    plural: "namespaceoffloadings",
};

/// v0.10.3 `apis/offloading/v1alpha1/namespaceoffloading_types.go`.
pub const NAMESPACE_OFFLOADING_V0: LiqoKind = LiqoKind {
    version: V1ALPHA1,
    ..NAMESPACE_OFFLOADING
};

/// `apis/offloading/v1beta1/shadowendpointslice_types.go`: an
/// EndpointSlice a consumer's virtual kubelet reflects to this cluster
/// (`reflection/exposition/endpointslice.go:274-306`); the plural is the
/// CRD's own
/// (`deployments/liqo/charts/liqo-crds/crds/offloading.liqo.io_shadowendpointslices.yaml`).
pub const SHADOW_ENDPOINT_SLICE: LiqoKind = LiqoKind {
    group: OFFLOADING_GROUP,
    version: V1BETA1,
    kind: "ShadowEndpointSlice",
    plural: "shadowendpointslices",
};

/// `apis/core/v1beta1/foreigncluster_types.go`: a peer, as v1 sees it.
pub const FOREIGN_CLUSTER: LiqoKind = LiqoKind {
    group: CORE_GROUP,
    version: V1BETA1,
    kind: "ForeignCluster",
    plural: "foreignclusters",
};

/// v0.10.3 `apis/discovery/v1alpha1/foreigncluster_types.go`.
pub const FOREIGN_CLUSTER_V0: LiqoKind = LiqoKind {
    group: DISCOVERY_GROUP,
    version: V1ALPHA1,
    ..FOREIGN_CLUSTER
};

/// `pkg/webhooks/namespaceoffloading/nsoff.go` (line 60): the one name a
/// NamespaceOffloading may have.
pub const OFFLOADING_NAME: &str = "offloading";

// Labels.

/// `consts.RemoteClusterID` (`pkg/consts/labels.go`, beside `TypeLabel`): the peer a Liqo
/// object belongs to. Set on replicas
/// (`internal/crdReplicator/reflection/handler.go`), on namespaces
/// offloaded here (naming the origin), on virtual nodes (naming the
/// provider), and matched by a NamespaceOffloading's `clusterSelector`.
pub const REMOTE_CLUSTER_ID_LABEL: &str = "liqo.io/remote-cluster-id";
/// `consts.ReplicationStatusLabel` (`pkg/consts/replication.go`): `"true"`
/// on objects the CRD replicator replicated here.
pub const REPLICATED_LABEL: &str = "liqo.io/replicated";
/// `consts.ReplicationOriginLabel` (`pkg/consts/replication.go`): the
/// cluster a replicated object came from.
pub const ORIGIN_ID_LABEL: &str = "liqo.io/originID";
/// The label selector of objects Liqo replicated to this cluster
/// ([`REPLICATED_LABEL`]`=true` and [`ORIGIN_ID_LABEL`] present, as
/// `internal/crdReplicator/reflection/handler.go` labels them).
pub const REPLICATED_SELECTOR: &str = "liqo.io/replicated=true,liqo.io/originID";
/// `consts.ReplicationRequestedLabel` (`pkg/consts/replication.go`):
/// `"true"` asks the CRD replicator to replicate an object to its peer.
pub const REPLICATION_REQUESTED_LABEL: &str = "liqo.io/replication";
/// `consts.ReplicationDestinationLabel` (`pkg/consts/replication.go`): the
/// peer to replicate to.
pub const REPLICATION_DESTINATION_LABEL: &str = "liqo.io/remoteID";
/// `consts.TenantNamespaceLabel`
/// (`pkg/liqo-controller-manager/authentication/utils/tenant.go`): marks
/// a tenant namespace, which carries [`REMOTE_CLUSTER_ID_LABEL`] too.
pub const TENANT_NAMESPACE_LABEL: &str = "liqo.io/tenant-namespace";
/// The Pod Security Admission labels Liqo puts on every tenant namespace
/// it makes (`pkg/tenantNamespace/namespaceManager.go:143-149`
/// `ForgeNamespace`, keys and value from `pkg/consts/labels.go:59-67`):
/// the gateway pods Liqo runs there are privileged and add `NET_ADMIN`,
/// which a cluster whose default level is `baseline` or stricter refuses
/// without them.
pub const POD_SECURITY_AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";
pub const POD_SECURITY_ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const POD_SECURITY_WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
/// `consts.PodSecurityLevelPrivileged` (`pkg/consts/labels.go:67`).
pub const POD_SECURITY_PRIVILEGED: &str = "privileged";
/// [`TENANT_NAMESPACE_LABEL`]'s companions on a tenant namespace, as
/// `ForgeNamespace` sets them (`namespaceManager.go:146-148`).
pub const TENANT_NAMESPACE_POD_SECURITY: [(&str, &str); 3] = [
    (POD_SECURITY_AUDIT_LABEL, POD_SECURITY_PRIVILEGED),
    (POD_SECURITY_ENFORCE_LABEL, POD_SECURITY_PRIVILEGED),
    (POD_SECURITY_WARN_LABEL, POD_SECURITY_PRIVILEGED),
];
/// `consts.SchedulingLiqoLabel` (`pkg/consts/namespace_mapping.go:32`):
/// set on a namespace by Liqo's NamespaceOffloading controller; the pod
/// webhook's namespace selector, so it acts only on pods created after it.
pub const SCHEDULING_LABEL: &str = "liqo.io/scheduling-enabled";
/// `consts.SchedulingLiqoLabelValue` (`pkg/consts/namespace_mapping.go:34`).
pub const SCHEDULING_VALUE: &str = "true";
/// `consts.VirtualNodeTolerationKey` (`pkg/consts/webhook.go:20`): the
/// toleration the pod webhook adds (`Exists`, `NoExecute`,
/// `pkg/webhooks/pod/mutations.go:29-35`) so pods may run on virtual nodes.
pub const VIRTUAL_NODE_TOLERATION_KEY: &str = "virtual-node.liqo.io/not-allowed";
/// `consts.TypeLabel` (`pkg/consts/labels.go`): a node's type; Liqo's
/// virtual nodes are [`VIRTUAL_NODE_TYPE`]
/// (`pkg/liqo-controller-manager/offloading/forge/virtualnode.go`).
pub const NODE_TYPE_LABEL: &str = "liqo.io/type";
/// `consts.TypeNode` (`pkg/consts/labels.go`): [`NODE_TYPE_LABEL`]'s value
/// on a virtual node.
pub const VIRTUAL_NODE_TYPE: &str = "virtual-node";
/// `consts.LocalPodLabelKey` (`pkg/consts/offloading.go`; the shadow pod
/// webhook `pkg/webhooks/shadowpod/webhook.go`): `"true"` on a local pod
/// Liqo offloaded to a peer.
pub const SHADOW_POD_LABEL: &str = "liqo.io/shadowPod";
/// The peer that offloaded a pod here: v0.x's virtual kubelet
/// (`pkg/virtualKubelet/forge`) wrote the first, later releases the second
/// (see `shared/spec/resource-reader.md`, the local monitor).
pub const POD_ORIGIN_LABELS: [&str; 2] =
    ["virtualkubelet.liqo.io/origin", "offloading.liqo.io/origin"];
/// v0.10.3 `discovery.ClusterIDLabel` (`pkg/discovery/const.go`): the peer
/// a v0 ForeignCluster or token Secret is for.
pub const V0_CLUSTER_ID_LABEL: &str = "discovery.liqo.io/cluster-id";
/// v0.10.3 `discovery.AuthTokenLabel` (`pkg/discovery/const.go`): marks a
/// v0 peer's token Secret.
pub const V0_AUTH_TOKEN_LABEL: &str = "discovery.liqo.io/auth-token";

// Annotations.

/// `consts.CreateVirtualNodeAnnotation` (`pkg/consts/virtualnode.go`;
/// `docs/advanced/peering/peering-via-cr.md`): `"true"` on a ResourceSlice
/// makes Liqo create a virtual node for it once accepted.
pub const CREATE_VIRTUAL_NODE_ANNOTATION: &str = "liqo.io/create-virtual-node";
/// `consts.CordonResourceAnnotation` (`pkg/consts/authentication.go` line
/// 50): on a provider's replicated ResourceSlice, any value but `false`,
/// `False` or `0` cordons its Quota, and the ShadowPod webhook then admits
/// no new pod (`pkg/liqo-controller-manager/quotacreator-controller/quotacreator_controller.go`
/// lines 101-132; `liqoctl cordon resourceslice` writes `"true"`,
/// `pkg/liqoctl/cordon/handler.go` line 100). The replicator copies
/// annotations only at creation, so one set on the replica stays.
pub const CORDON_ANNOTATION: &str = "liqo.io/cordon";
/// `quotacreator_controller.go` lines 121-123: the values of
/// [`CORDON_ANNOTATION`] that do not cordon.
pub const NOT_CORDONED_VALUES: [&str; 3] = ["false", "False", "0"];
/// `pkg/liqo-controller-manager/offloading/namespacemap-controller/enforcement.go`
/// (lines 55-66): on a namespace Liqo created for an offloaded one, the
/// NamespaceMap that made it (`<tenant namespace>/<name>`).
pub const MANAGED_BY_NAMESPACE_MAP_ANNOTATION: &str = "liqo.io/managed-by-namespace-map";
/// Same file as [`MANAGED_BY_NAMESPACE_MAP_ANNOTATION`]: the offloaded
/// namespace's name in its origin cluster.
pub const ORIGINAL_NAME_ANNOTATION: &str = "liqo.io/original-name";

// Conditions, their statuses and phases.

/// `apis/authentication/v1beta1/resourceslice_types.go`
/// (`ResourceSliceConditionTypeAuthentication`): Liqo's own verdict on a
/// slice.
pub const AUTHENTICATION_CONDITION: &str = "Authentication";
/// `apis/authentication/v1beta1/resourceslice_types.go`
/// (`ResourceSliceConditionTypeResources`): the grant, written by the
/// class's controller
/// (`pkg/liqo-controller-manager/authentication/remoteresourceslice-controller/remoteresourceslice_controller.go`).
pub const RESOURCES_CONDITION: &str = "Resources";
/// `apis/authentication/v1beta1/resourceslice_types.go`
/// (`ResourceSliceConditionAccepted`).
pub const ACCEPTED: &str = "Accepted";
/// `apis/authentication/v1beta1/resourceslice_types.go`
/// (`ResourceSliceConditionDenied`).
pub const DENIED: &str = "Denied";
/// `pkg/liqo-controller-manager/core/foreigncluster-controller/status.go`
/// (lines 297-324): a v1 ForeignCluster's authentication module reports
/// the peering's control-plane identity under this condition.
pub const AUTH_IDENTITY_CONTROL_PLANE_CONDITION: &str = "AuthIdentityControlPlaneStatus";
/// `apis/core/v1beta1/foreigncluster_types.go` (`ConditionStatusReady`)
/// and `apis/offloading/v1beta1/namespaceoffloading_types.go`
/// (`ReadyOffloadingPhaseType`): a ForeignCluster condition's and a
/// NamespaceOffloading's `offloadingPhase` when done.
pub const READY: &str = "Ready";
/// v0.10.3 `apis/discovery/v1alpha1/foreigncluster_types.go`
/// (`AuthenticationStatusCondition`): a v0 peer authenticated us.
pub const V0_AUTHENTICATION_STATUS_CONDITION: &str = "AuthenticationStatus";
/// v0.10.3 `apis/discovery/v1alpha1/foreigncluster_types.go`
/// (`OutgoingPeeringCondition`): our peering towards a v0 peer.
pub const V0_OUTGOING_PEERING_CONDITION: &str = "OutgoingPeering";
/// v0.10.3 `apis/discovery/v1alpha1/foreigncluster_types.go`
/// (`PeeringConditionStatusEstablished`).
pub const V0_ESTABLISHED: &str = "Established";
/// `apis/core/v1beta1/foreigncluster_types.go` (`ProviderRole`,
/// `ConsumerAndProviderRole`): the `status.role`s of a v1 ForeignCluster
/// that provides resources to this cluster.
pub const PROVIDER_ROLES: [&str; 2] = ["Provider", "ConsumerAndProvider"];

// Peering users (`liqoctl generate peering-user`).

/// `pkg/tenantNamespace/const.go` (`NamePrefix`, then `-`): a consumer's
/// tenant namespace is this prefix and its cluster ID.
pub const TENANT_NAMESPACE_PREFIX: &str = "liqo-tenant-";
/// `pkg/liqoctl/rest/peering-user/userfactory/cert.go`
/// (`GetUserNameFromClusterID`): a peering user's name (and CSR's) is this
/// prefix and the consumer's cluster ID.
pub const PEERING_USER_PREFIX: &str = "liqo-peer-user-";
/// `consts.PeeringUserNameLabelKey` (`pkg/consts/authentication.go`): on a
/// peering user's CSR and RoleBindings, its name.
pub const PEERING_USER_NAME_LABEL: &str = "liqo.io/peering-user-name";
/// `authentication.OrganizationControlPlaneCSR`
/// (`pkg/liqo-controller-manager/authentication/csr.go`): the O of a peering
/// user's certificate.
pub const CONTROL_PLANE_ORGANIZATION: &str = "liqo.io";
/// The Role Liqo's chart installs in its namespace for peering users
/// (`deployments/liqo/files/liqo-peering-user-liqo-ns-Role.yaml`, label
/// `app.kubernetes.io/component=peering-user`).
pub const PEERING_USER_LIQO_NS_ROLE: &str = "liqo-peering-user-liqo-ns";
/// The ClusterRole Liqo's chart installs for peering users, bound in their
/// tenant namespace
/// (`deployments/liqo/files/liqo-peering-user-tenant-ns-ClusterRole.yaml`).
pub const PEERING_USER_TENANT_NS_CLUSTER_ROLE: &str = "liqo-peering-user-tenant-ns";
/// `apis/authentication/v1beta1/tenant_types.go` (`TenantConditionDrained`):
/// the `spec.tenantCondition` that evicts a consumer's offloaded workloads.
pub const TENANT_DRAINED: &str = "Drained";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_say_their_api_version() {
        assert_eq!(
            RESOURCE_SLICE.api_version(),
            "authentication.liqo.io/v1beta1"
        );
        assert_eq!(
            NAMESPACE_OFFLOADING_V0.api_version(),
            "offloading.liqo.io/v1alpha1"
        );
        assert_eq!(
            FOREIGN_CLUSTER_V0.api_version(),
            "discovery.liqo.io/v1alpha1"
        );
        let api = FOREIGN_CLUSTER.api_resource();
        assert_eq!(
            (api.api_version.as_str(), api.plural.as_str()),
            ("core.liqo.io/v1beta1", "foreignclusters")
        );
    }

    #[test]
    fn the_replicated_selector_names_both_labels() {
        assert_eq!(
            REPLICATED_SELECTOR,
            format!("{REPLICATED_LABEL}=true,{ORIGIN_ID_LABEL}")
        );
    }
}
