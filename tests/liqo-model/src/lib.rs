//! A model of Liqo v1.2.0's controllers for the tests: each runs as its own
//! tokio task on watches against a Kubernetes API test server
//! ([`kube_test_server::KubeApiServer`], which loads Liqo v1.2.0's CRDs),
//! as its own user under its own RBAC ([`identity`]), so authorization and
//! schema validation apply to what it writes as they would to Liqo. A test
//! starts them ([`Provider::start`], [`Consumer::start`],
//! [`Replicator::start`]) and then only
//! writes and reads objects: it never calls a controller.
//!
//! Paths are in `liqotech/liqo` at tag v1.2.0; each behaviour cites its
//! file and lines beside the code that does it.
//!
//! # Modelled
//! Provider side, as `system:serviceaccount:liqo:liqo-controller-manager`:
//! - [`remote_resource_slice`] (`pkg/liqo-controller-manager/authentication/remoteresourceslice-controller/remoteresourceslice_controller.go`):
//!   watches replicated slices carrying a CSR on spec changes only
//!   (:313-318, 354-362) and Tenant events (:319-352); skips slices without
//!   `consumerClusterID` (:116-121) or outside the consumer's tenant
//!   namespace (:123-132); denies authentication when the namespace is not
//!   the consumer's tenant namespace (:156-167, 451-469) or the CSR is not
//!   one PEM block (:185-193, `authentication/csr.go:158-162`), else
//!   accepts it (:235-236), and in both cases goes on to the resources
//!   (:169-178); with an Active Tenant grants classes `""` and
//!   `default` every requested key plus `defaultNodeResources` for the
//!   default keys not requested (:72-75, 253-277), with ingress and
//!   load-balancer classes and node labels from its options (:279-288), and
//!   leaves other classes' resources to their class controller
//!   (:251-257); a Cordoned Tenant denies only slices not yet judged
//!   (:291-296), a Drained one every slice (:297-298); the status is
//!   written back on every reconcile (:142-154).
//! - [`quota_creator`] (`pkg/liqo-controller-manager/quotacreator-controller/quotacreator_controller.go`):
//!   on any change of a replica (status included, :142-144) whose
//!   resources are `Accepted` (:81-86) — so `Denied` after `Accepted`
//!   leaves the Quota — creates or updates the Quota named as the slice's
//!   certificate user (`authentication/csr.go:46-63`) with
//!   `spec.resources = status.resources` (:99), the configured
//!   `limitsEnforcement` (:98), `cordoned` from either cordon annotation
//!   (:101-132), owned by the slice (:107).
//! - [`shadowpod_webhook`] (`pkg/webhooks/shadowpod/webhook.go:87-146`,
//!   `peeringinfo.go`, `spdescription.go`): the ShadowPod creation check —
//!   origin label and namespace, creator label, the creator's Quota,
//!   cordon ("user is cordoned"), requests per enforcement level and room
//!   left — as a pure function ([`shadowpod_webhook::validate_create`])
//!   and as a validating hook on the test server's admission chain for
//!   ShadowPod creation ([`shadowpod_webhook::Hook`], registered by
//!   [`Provider::start`]), reading Quotas and Namespaces from watch caches
//!   and counting the pods it admitted.
//! - [`tenant_webhook`] (`pkg/webhooks/tenant/`) and
//!   [`resourceslice_webhook`] (`pkg/webhooks/resourceslice/validate.go`),
//!   on every cluster ([`Provider::start`], [`Consumer::start`]): the
//!   Tenant's label defaulted and its namespace, cluster ID and name
//!   checked; a local slice's name unique, and the cordon annotation and
//!   cluster-ID label out of reach of a peer's control plane.
//!
//! Consumer side:
//! - [`virtual_node_creator`] (`pkg/liqo-controller-manager/virtualnodecreator-controller/virtualnodecreator_controller.go`),
//!   as the consumer's controller manager: for each local slice asking for
//!   a virtual node whose two conditions are `Accepted` (:83-93, 155,
//!   161-180) and whose Identity names its kubeconfig Secret (:103-118),
//!   creates or updates the VirtualNode with `resourceQuota.hard =
//!   status.resources` and the storage, ingress and load-balancer classes,
//!   node labels and node selector of the grant
//!   (`offloading/forge/virtualnode.go:59-137`).
//! - [`node_provider`] (`pkg/virtualKubelet/liqoNodeProvider/`), as the
//!   virtual kubelet: the Node of each VirtualNode, created with Liqo's
//!   virtual-node labels (`liqo.io/type=virtual-node`, …) and taint
//!   (`setup.go:96-141`), the VirtualNode's labels and taints added
//!   (`utils.go:39-65`), capacity and allocatable copied
//!   key by key and never removed (`utils.go:84-97`), Ready only with cpu
//!   and memory above zero (`reconciler.go:134-148`) and, when the network
//!   check is on and the networking module not off, the ForeignCluster's
//!   network `Established` (`utils.go:99-133`), with pressure and
//!   NetworkUnavailable conditions (`conditions.go`); none for a
//!   VirtualNode being deleted, whose virtual kubelet Liqo stops first.
//! - [`virtual_node_controller`] (`pkg/liqo-controller-manager/offloading/virtualnode-controller/`),
//!   as the controller manager: its finalizer on each VirtualNode and, when
//!   one is deleted (its slice gone) or asks for no node, the deletion
//!   routine — the Node cordoned, its offloaded pods evicted through
//!   `pods/eviction` (PodDisruptionBudgets respected; a refusal retried at
//!   the work queue's backoff, for ever, the node kept cordoned), or
//!   deleted at once when the peer is dead, then the Node deleted and the
//!   finalizer removed (`deletion-routine.go`, `drain.go`).
//!
//! Between the two ([`Replicator::start`]):
//! - [`crd_replicator`] (`internal/crdReplicator/reflection/handler.go`),
//!   as the crdReplicator on the consumer and the consumer's control-plane
//!   user (group `liqo.io`) on the provider, bound in its tenant namespace
//!   only: replicas of the local slices labelled for the provider
//!   (:87-93), with Liqo's labels (:332-351), annotations copied at
//!   creation only (:167-192), the spec kept equal (:194-221), the
//!   replica's status copied back (:223-263), the local finalizer and the
//!   replica deleted with the local object (:65-120, 265-293), a 403 from
//!   the provider taken as "permission removed" (:127-141).
//!
//! Consumer side, knowing its cluster ID ([`Consumer::start_as`], which
//! installs it as the chart does, [`install_cluster_id`]), as the
//! controller manager:
//! - [`local_resource_slice`] (`pkg/liqo-controller-manager/authentication/localresourceslice-controller/localresourceslice_controller.go`):
//!   each local slice labelled for replication gets this cluster's ID as
//!   `spec.consumerClusterID` when unset (:83-86), its provider's ID from
//!   its label or its tenant namespace when unset (:88-110), and a CSR when
//!   it has none (:120-130): one PEM block naming Liqo's CN and O
//!   (`authentication/csr.go:39-68`).
//! - [`foreign_cluster`] (`pkg/liqo-controller-manager/core/foreigncluster-controller/`):
//!   the ForeignCluster of each peer, made when a Tenant, Identity,
//!   VirtualNode or virtual Node names it (`foreigncluster_controller.go:187-233`),
//!   its status rebuilt on each reconcile (:119-153, `status.go`): the
//!   networking module off with no networking objects (:222-253), the
//!   authentication module from the Tenant (consumer) and the control-plane
//!   Identity (provider, `AuthIdentityControlPlaneStatus`, :255-348), the
//!   offloading module from the VirtualNodes and their Nodes' readiness
//!   (:350-443), the role (`pkg/utils/foreigncluster/roles.go`), the tenant
//!   namespaces and `observedGeneration`.
//!
//! Authentication, opt-in ([`Provider::with_authentication`],
//! [`Consumer::with_authentication`]; [`authentication`]), as the
//! controller manager, with real crypto (Ed25519 by `ring`, PKCS#10 and
//! X.509 by `rcgen` and `x509-parser`, certificates from the test
//! server's CSR signer):
//! - [`cluster_keys`] (`pkg/liqo-controller-manager/authentication/keys.go`):
//!   [`Consumer::start`] makes the cluster's Ed25519 pair in the Secret
//!   `authentication-keys` of `liqo` when missing (:135-180, called from
//!   `cmd/liqo-controller-manager/modules/authentication.go:90`); nonces
//!   are signed and verified with it (:85-133), a Tenant's key read as
//!   PKIX PEM or raw Ed25519 (`authentication/csr.go:238-264`).
//! - [`control_plane_csr`] (`authentication/csr.go`): the control-plane
//!   request (CN the cluster ID, O `liqo.io`, :70-103, 197-236) and
//!   `CheckCSRForControlPlane` (one PEM block, CN, first O, public key;
//!   :115-130, 158-195).
//! - [`nonce_creator`] (provider, `noncecreator-controller/noncecreator_controller.go`):
//!   a Secret labelled `liqo.io/nonce` in the peer's tenant namespace gets
//!   64 random bytes, base64, once (:76-137); wrong namespace or labels are
//!   Events (:81-105).
//! - [`nonce_signer`] (consumer, `noncesigner-controller/noncesigner_controller.go`):
//!   a Secret labelled `liqo.io/signed-nonce` in the peer's tenant
//!   namespace gets `signedNonce`, this cluster's signature of its `nonce`
//!   (:81-139).
//! - [`tenant`] (provider, `tenant-controller/tenant_controller.go`): the
//!   finalizer first (:125-138); unless `TolerateNoHandshake`, the nonce
//!   of the peer's one nonce Secret (:264-276), the signature verified
//!   (`SignatureVerificationFailed`, :284-295) and the CSR checked
//!   (`InvalidCSR`, :297-303) — a refusal is an Event and no status; the
//!   tenant namespace (:172-181); the CSR signed through the CSR API
//!   (`pkg/identityManager/certificateIdentityProvider.go:104-159`:
//!   created, approved with `IdentityManagerApproval`, the signer's
//!   certificate waited for and kept in `liqo-remote-certificate`,
//!   :196-225); `status.authParams` (CA, signed certificate, API server,
//!   proxy; :179-184) and `liqo-binding-liqo-remote-controlplane` binding
//!   user `<consumer>` to the chart's `liqo-remote-controlplane`
//!   (`pkg/tenantNamespace/bindings.go:34-130`). A `Drained` Tenant
//!   (:140-148, 415-463) loses that binding and every ResourceSlice and
//!   NamespaceMap replicated from its consumer, and gets nothing else
//!   done until it is `Active` again. [`tenant::forge`] is the
//!   Tenant `liqoctl` applies (`authentication/utils/tenant.go:29-51`).
//!   Nonces are not consumed: as in Liqo, the Tenant is checked against
//!   the nonce the provider's Secret holds now, on every reconcile, so a
//!   signature of a nonce no longer handed out is refused.
//! - [`identity_controller`] (consumer, `identity-controller/identity_controller.go`):
//!   each Identity's `kubeconfig-<identity>` Secret (certificate from
//!   `authParams`, key from `authentication-keys`), labelled
//!   `liqo.io/remote-cluster-id`, `liqo.io/identity-type`, annotated
//!   `liqo.io/remote-tenant-namespace` for a control plane
//!   (`forge/kubeconfig.go:27-86`), named in `status.kubeconfigSecretRef`
//!   (:64-138). [`identity_controller::forge`] is the Identity `liqoctl`
//!   applies (`authentication/utils/identity.go:35-57`).
//! - [`foreign_cluster`]: without a control-plane Identity, a control-plane
//!   kubeconfig Secret (the declarative form) makes the peer a provider
//!   with authentication enabled, its server the API server URL, and no
//!   `AuthIdentityControlPlaneStatus` (`status.go:293-318`).
//!
//! Networking, opt-in ([`Provider::with_networking`],
//! [`Consumer::with_networking`]; [`networking`], which serves the
//! `networking.liqo.io` CRDs), as the controller manager:
//! - [`networking::configuration`] (`external-network/configuration/configuration_controller.go`):
//!   `spec.local` from the cluster's CIDRs, `status.remote` the peer's
//!   CIDRs remapped when they clash ([`networking::remap`], one fixed
//!   pool), the `NetworkCIDRsConfigured` condition.
//! - [`networking::gateway`] (the server and client operators and the
//!   gateway pod, `pkg/gateway/tunnel/wireguard/`): the key Secret
//!   `gw-<gateway>`, `status.endpoint` and `status.secretRef`, and on a
//!   PublicKey for the peer the Connection `gw-<gateway>`, `Connecting`
//!   then `Connected` when the client dials the server's endpoint and each
//!   holds the other's key ([`networking::underlay`] stands in for
//!   WireGuard).
//! - [`foreign_cluster`]: the networking module and its conditions from
//!   those objects (`status.go:65-253`), so the virtual kubelet's network
//!   check waits for the Connection.
//! - [`networking::mapping`] (`pkg/utils/ipam/mapping/ips.go:134-259`):
//!   how a cluster sees a peer's address — the same host in the network
//!   its Configuration remaps the peer's pod (or external) CIDR to
//!   ([`networking::mapping::translate`], public for the tests, as the
//!   gateway's 1:1 prefix NAT maps it on the wire,
//!   `pkg/firewall/utils/natrule.go:138-171`).
//!
//! Offloading ([`offloading::Cluster::start`], [`offloading::Peering::start`]):
//! - [`namespace_offloading`] (`namespaceoffloading-controller/`): a
//!   NamespaceOffloading `offloading` maps its namespace on the peers whose
//!   virtual node matches its cluster selector (NamespaceMaps'
//!   `desiredMapping`) and labels it `liqo.io/scheduling-enabled=true`,
//!   reports its phase and per-peer conditions from the maps' status
//!   ([`offloading_status`], `status.go`) and, under its finalizer, undoes
//!   all of it on deletion (`lifecycle.go`);
//!   [`nsoff_webhook`] (`pkg/webhooks/namespaceoffloading/nsoff.go`): the
//!   name `offloading`, an immutable mapping strategy;
//! - [`namespace_map`] (`namespacemap-controller/enforcement.go`): the
//!   remote namespaces on the peer, labelled and annotated as Liqo does,
//!   deleted when their mapping is removed (:134-193);
//! - [`pod_webhook`] (`pkg/webhooks/pod/`): at pod creation only, in
//!   labelled namespaces only, the virtual-node toleration and the cluster
//!   selector per the pod offloading strategy;
//! - [`scheduler`] and [`kubelet`] (Kubernetes', not Liqo's: [`scheduling`]
//!   holds the predicates) bind pods honouring taints, affinity, selectors,
//!   allocatable and readiness, and run the pods of ordinary nodes, each
//!   pod with its node's `InternalIP` as host IP and an address of its
//!   node's podCIDR as the CNI `host-local` IPAM plugin gives them
//!   (round robin from `.2`, the gateway `.1`, the network and broadcast
//!   addresses skipped; host-network pods at the node's address);
//! - [`node_ipam`] (Kubernetes' `pkg/controller/nodeipam`, the range
//!   allocator), with a pod CIDR ([`offloading::ClusterOptions`], for
//!   [`offloading::Cluster::start_with`]): each node's `spec.podCIDR`, the
//!   next free `/24` of the cluster CIDR;
//! - [`reflection`] (`pkg/virtualKubelet/reflection/workload/podns.go`): a
//!   pod on a virtual node becomes a ShadowPod on the peer, its remote
//!   pod's status copied back, its address translated as the virtual
//!   kubelet does (:410-423, 734-753): into the local cluster's view of
//!   the peer's pod CIDR with the peer's Configuration when the
//!   ForeignCluster's networking module is enabled, copied as it is when
//!   it is off (no Configuration), hidden with `reflectIPs` off
//!   (`forge/pods.go:344-350`); [`reflection_objects`]
//!   (`reflection/configuration/secret.go`, `configmap.go`,
//!   `reflection/exposition/service.go`, with [`reflection_forge`] from
//!   `forge/`): Secrets, ConfigMaps and Services of an offloaded namespace
//!   copied to its remote namespace, labelled and filtered as Liqo forges
//!   them, kept in step and deleted with them; [`reflection_endpointslices`]
//!   (`reflection/exposition/endpointslice.go`, with
//!   [`reflection_endpointslice_forge`] from `forge/endpointslices.go`):
//!   the EndpointSlices of an offloaded namespace (the test server's
//!   EndpointSlice controller keeps them) as ShadowEndpointSlices in its
//!   remote namespace, endpoints on the peer dropped, local pod addresses
//!   as they are; [`shadowendpointslice_controller`]
//!   (`shadowendpointslice-controller/`): on the peer, each
//!   ShadowEndpointSlice's EndpointSlice, its addresses remapped with the
//!   Configuration for the origin when the ForeignCluster's networking
//!   module is enabled; [`shadowpod_controller`]
//!   (`shadowpod-controller/`): a ShadowPod's pod, made again when deleted.
//!
//! # Not modelled yet
//! - The local slice controller's events. (The slice's Identity is the
//!   model's: [`identity_creator`], from the `authParams` the provider's
//!   [`remote_resource_slice`] forges through the CSR API, its CSR a PKCS#10
//!   request from the cluster's keys; opt-in with
//!   [`Consumer::with_identity_creator`].)
//! - In authentication: RSA keys (TLS compatibility mode), the Tenant
//!   certificate's renewal (`tenant_controller.go:204-215`) and the
//!   renewers, the cluster-wide bindings of
//!   `virtual-kubelet-remote-clusterwide` (:248-256, 416-421), the
//!   Tenant's cordon handling (:149-159, 360-413), the Events'
//!   aggregation.
//! - In the ForeignCluster controller: the gateways' Deployments (a
//!   gateway is ready once it has its keys), the virtual kubelet
//!   pods' readiness, the API server checker
//!   (`foreigncluster_controller.go:144-151`) and the periodic resync.
//! - In the remote slice controller: certificate renewal (RRS:195-209),
//!   storage classes read from StorageClasses, events.
//! - The Tenant controller's cordon (tests set the Tenant's condition),
//!   peering and unpeering; its drain only with the authentication
//!   module ([`Provider::with_authentication`]), whose Tenant controller
//!   does it.
//! - In the ShadowPod webhook: its mutating half (the creator label, from
//!   the request's user, which hooks are not given), updates, and the
//!   cache's initialisation and refresh (deletions come from a watch). The test
//!   server serves Liqo's ShadowPod CRD, so a ShadowPod created there is
//!   judged by the registered hook; tests set the creator label.
//! - The node's addresses, node info and leases.
//!
//! Like controller-runtime's default (one worker per controller), each
//! controller reconciles one key at a time, in the order its watches
//! report them; tests use that order as a sync point ("marker" slices).

pub mod authentication;
pub mod cluster_keys;
pub mod consts;
pub mod control_plane_csr;
pub mod crd_replicator;
pub mod events;
pub mod foreign_cluster;
pub mod identity;
pub mod identity_controller;
pub mod identity_creator;
pub mod kubelet;
pub mod local_resource_slice;
pub mod namespace_map;
pub mod namespace_offloading;
pub mod networking;
pub mod node_ipam;
pub mod node_provider;
pub mod nonce_creator;
pub mod nonce_signer;
pub mod nsoff_webhook;
pub mod offloading;
pub mod offloading_consts;
pub mod offloading_status;
pub mod pod_webhook;
pub mod quota_creator;
pub mod reflection;
pub mod reflection_endpointslice_forge;
pub mod reflection_endpointslices;
pub mod reflection_forge;
pub mod reflection_objects;
pub mod remote_resource_slice;
pub mod resourceslice_webhook;
pub mod runner;
pub mod scheduler;
pub mod scheduling;
pub mod shadowendpointslice_controller;
pub mod shadowpod_controller;
pub mod shadowpod_webhook;
pub mod slice;
pub mod tenant;
pub mod tenant_namespace;
pub mod tenant_webhook;
pub mod virtual_node_controller;
pub mod virtual_node_creator;
pub mod watch_cache;

use std::sync::Arc;

use kube_test_server::KubeApiServer;
use tokio::task::JoinHandle;

pub use quota_creator::LimitsEnforcement;
pub use remote_resource_slice::Options as SliceOptions;

/// What goes wrong starting or running a modelled controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("making the client of an identity: {0}")]
    Identity(String),
    /// Another object is not there yet; the key is tried again.
    #[error("waiting: {0}")]
    Waiting(String),
    /// Keys, nonces, signatures and CSRs ([`cluster_keys`], [`tenant`]).
    #[error("authentication: {0}")]
    Authentication(String),
    /// A start given options that do not read.
    #[error("configuration: {0}")]
    Config(String),
}

/// The user Liqo's controller manager runs as (the chart's ServiceAccount).
pub const CONTROLLER_MANAGER: &str = "system:serviceaccount:liqo:liqo-controller-manager";
/// The user Liqo's crdReplicator runs as on its own cluster.
pub const CRD_REPLICATOR: &str = "system:serviceaccount:liqo:liqo-crd-replicator";
/// The user the model's virtual kubelet runs as.
pub const VIRTUAL_KUBELET: &str = "system:serviceaccount:liqo:virtual-kubelet";

/// The user Liqo's webhook runs as (the chart's ServiceAccount).
pub const WEBHOOK: &str = "system:serviceaccount:liqo:liqo-webhook";

/// How the provider's Liqo is configured.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// What the default class gets besides its request.
    pub slices: SliceOptions,
    /// `controllerManager.config.defaultLimitsEnforcement`.
    pub limits_enforcement: LimitsEnforcement,
    /// `controllerManager.config.enableResourceEnforcement`.
    pub resource_enforcement: bool,
}

impl Default for ProviderConfig {
    /// The chart's defaults (`deployments/liqo/values.yaml:265-273, 431, 438`).
    fn default() -> Self {
        ProviderConfig {
            slices: SliceOptions::default(),
            limits_enforcement: LimitsEnforcement::None,
            resource_enforcement: true,
        }
    }
}

/// Grant each user its ClusterRole (by name) with its rules in `kube`.
fn grant_each(kube: &KubeApiServer, grants: &[(&str, &str, &[identity::Rule])]) {
    for (user, role, rules) in grants {
        identity::grant(kube, user, role, rules);
    }
}

/// How long a start waits for its controllers' initial lists.
const SYNC: std::time::Duration = std::time::Duration::from_secs(30);

/// Tasks that stop when dropped.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Liqo's provider-side controllers running against one API server.
pub struct Provider {
    _tasks: Tasks,
    webhook: Arc<shadowpod_webhook::Hook>,
}

impl Provider {
    /// Grant the controller manager and the webhook their RBAC in `kube`,
    /// start the remote ResourceSlice controller and the quota creator, and
    /// add the ShadowPod webhook to `kube`'s admission chain.
    pub async fn start(kube: &KubeApiServer, config: ProviderConfig) -> Result<Provider, Error> {
        grant_each(
            kube,
            &[
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-remote-resourceslice",
                    remote_resource_slice::RULES,
                ),
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-quota-creator",
                    quota_creator::RULES,
                ),
                (WEBHOOK, "liqo-model-webhook", shadowpod_webhook::RULES),
            ],
        );
        let client = identity::client_as(kube, CONTROLLER_MANAGER).await?;
        let webhook_client = identity::client_as(kube, WEBHOOK).await?;
        let (webhook, mut tasks) =
            shadowpod_webhook::Hook::start(webhook_client, config.resource_enforcement).await;
        let webhook = Arc::new(webhook);
        kube.add_validating_hook(webhook.clone());
        tasks.extend(tenant_webhook::register(kube).await?);
        tasks.extend(resourceslice_webhook::register(kube).await?);
        let (syncing, mut synced) = tokio::sync::mpsc::channel(1);
        let endpoint = tenant::Options {
            api_server: kube.url(),
            ca_pem: kube.ca_pem(),
        };
        tasks.push(tokio::spawn(remote_resource_slice::run(
            client.clone(),
            config.slices,
            endpoint,
            syncing,
        )));
        tasks.push(tokio::spawn(quota_creator::run(
            client,
            config.limits_enforcement,
        )));
        let running = Provider {
            _tasks: Tasks(tasks),
            webhook,
        };
        // Started as Liqo's manager starts it: the slice controller's
        // watches have listed what is already there before anything new
        // is made (see `runner::touched_syncing`).
        tokio::time::timeout(SYNC, synced.recv())
            .await
            .map_err(|_| Error::Waiting("the ResourceSlice controller's watches to sync".into()))?;
        Ok(running)
    }

    /// The ShadowPod webhook as registered, for tests that drive it
    /// directly.
    pub fn shadowpod_webhook(&self) -> &shadowpod_webhook::Hook {
        &self.webhook
    }
}

/// The consumer's crdReplicator for ResourceSlices between two API servers.
pub struct Replicator {
    _tasks: Tasks,
}

impl Replicator {
    /// Replicate the slices in `consumer`'s tenant namespace for `provider_id`
    /// into `provider`'s tenant namespace for `consumer_id` (both
    /// `liqo-tenant-<peer>`, which must exist), as the crdReplicator with its
    /// own user on the consumer and as the consumer's control plane (user
    /// `<consumer_id>`, group `liqo.io`,
    /// `pkg/liqo-controller-manager/authentication/csr.go:95-103`) on the provider,
    /// bound there in the tenant namespace only.
    pub async fn start(
        consumer: &KubeApiServer,
        consumer_id: &str,
        provider: &KubeApiServer,
        provider_id: &str,
    ) -> Result<Replicator, Error> {
        let remote_namespace = format!("liqo-tenant-{consumer_id}");
        identity::grant(
            consumer,
            CRD_REPLICATOR,
            "liqo-model-crd-replicator",
            crd_replicator::LOCAL_RULES,
        );
        let role = "liqo-model-remote-controlplane";
        identity::grant_in(
            provider,
            consumer_id,
            role,
            &remote_namespace,
            crd_replicator::REMOTE_RULES,
        );
        let peering = crd_replicator::Peering {
            local: identity::client_as(consumer, CRD_REPLICATOR).await?,
            remote: identity::client_in_groups(provider, consumer_id, &["liqo.io"]).await?,
            local_cluster_id: consumer_id.to_string(),
            remote_cluster_id: provider_id.to_string(),
            local_namespace: format!("liqo-tenant-{provider_id}"),
            remote_namespace,
        };
        let tasks = vec![tokio::spawn(crd_replicator::run(peering))];
        Ok(Replicator {
            _tasks: Tasks(tasks),
        })
    }
}

/// What Liqo's chart installs in its namespace, unless there already:
/// the cluster's ID in the ConfigMap `liqo-clusterid-configmap`, labelled
/// `app.kubernetes.io/name=clusterid-configmap`
/// (`deployments/liqo/templates/liqo-clusterid-configmap.yaml`,
/// `_helpers.tpl:224`), where `liqoctl` and the controllers find it by
/// label (`pkg/utils/cluster_info.go:60-75`).
pub fn install_cluster_id(kube: &KubeApiServer, cluster_id: &str) {
    use kube_test_server::GroupResource;
    let namespaces = GroupResource::new("", "namespaces");
    if kube
        .get(namespaces.clone(), None, cluster_keys::LIQO_NAMESPACE)
        .is_none()
    {
        kube.apply(
            namespaces,
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": cluster_keys::LIQO_NAMESPACE}}),
        );
    }
    let configmaps = GroupResource::new("", "configmaps");
    let name = "liqo-clusterid-configmap";
    if kube
        .get(configmaps.clone(), Some(cluster_keys::LIQO_NAMESPACE), name)
        .is_none()
    {
        kube.apply(
            configmaps,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": cluster_keys::LIQO_NAMESPACE,
                                "labels": {"app.kubernetes.io/name": "clusterid-configmap"}},
                   "data": {"CLUSTER_ID": cluster_id}}),
        );
    }
}

/// Liqo's consumer-side controllers running against one API server.
pub struct Consumer {
    _tasks: Tasks,
    /// More keys for the ForeignCluster controller ([`Consumer::start_as`]
    /// runs it), from the networking objects once networking runs.
    foreign_clusters: Option<tokio::sync::mpsc::UnboundedSender<runner::Key>>,
}

impl Consumer {
    /// Grant the controller manager and the virtual kubelet their RBAC in
    /// `kube` and start the virtual-node creator, the VirtualNode
    /// controller (a virtual node's cordon, drain and removal) and the node
    /// provider.
    pub async fn start(kube: &KubeApiServer) -> Result<Consumer, Error> {
        grant_each(
            kube,
            &[
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-virtual-node-creator",
                    virtual_node_creator::RULES,
                ),
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-virtual-node",
                    virtual_node_controller::RULES,
                ),
                (
                    VIRTUAL_KUBELET,
                    "liqo-model-virtual-kubelet",
                    node_provider::RULES,
                ),
            ],
        );
        authentication::init_keys(kube).await?;
        let manager = identity::client_as(kube, CONTROLLER_MANAGER).await?;
        let kubelet = identity::client_as(kube, VIRTUAL_KUBELET).await?;
        let mut tasks = vec![
            tokio::spawn(virtual_node_creator::run(manager)),
            tokio::spawn(virtual_node_controller::run(
                identity::client_as_without_retry(kube, CONTROLLER_MANAGER).await?,
            )),
            tokio::spawn(node_provider::run(kubelet)),
        ];
        tasks.extend(tenant_webhook::register(kube).await?);
        tasks.extend(resourceslice_webhook::register(kube).await?);
        Ok(Consumer {
            _tasks: Tasks(tasks),
            foreign_clusters: None,
        })
    }

    /// [`Consumer::start`] for the cluster `cluster_id` (what Liqo reads
    /// from its `liqo-clusterid-configmap`), with the controllers that need
    /// to know who they are or that run on every cluster: the local
    /// ResourceSlice controller and the ForeignCluster controller, as the
    /// controller manager.
    pub async fn start_as(kube: &KubeApiServer, cluster_id: &str) -> Result<Consumer, Error> {
        install_cluster_id(kube, cluster_id);
        let mut consumer = Consumer::start(kube).await?;
        grant_each(
            kube,
            &[
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-local-resourceslice",
                    local_resource_slice::RULES,
                ),
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-foreigncluster",
                    foreign_cluster::RULES,
                ),
            ],
        );
        let manager = identity::client_as(kube, CONTROLLER_MANAGER).await?;
        consumer
            ._tasks
            .0
            .push(tokio::spawn(local_resource_slice::run(
                manager.clone(),
                cluster_id.to_string(),
            )));
        let (more, keys) = tokio::sync::mpsc::unbounded_channel();
        consumer.foreign_clusters = Some(more);
        let keys =
            futures::StreamExt::boxed(tokio_stream::wrappers::UnboundedReceiverStream::new(keys));
        consumer
            ._tasks
            .0
            .push(tokio::spawn(foreign_cluster::run_with(manager, keys)));
        Ok(consumer)
    }
}

impl Provider {
    /// Also run Liqo's networking module on `kube` (serving its CRDs):
    /// [`networking`].
    pub async fn with_networking(
        mut self,
        kube: &KubeApiServer,
        options: networking::Options,
    ) -> Result<Provider, Error> {
        self._tasks
            .0
            .extend(networking::start(kube, options).await?);
        Ok(self)
    }
}

impl Consumer {
    /// Also run Liqo's networking module on `kube` (serving its CRDs):
    /// [`networking`]; the ForeignCluster controller of
    /// [`Consumer::start_as`], if running, then watches the networking
    /// objects too.
    pub async fn with_networking(
        mut self,
        kube: &KubeApiServer,
        options: networking::Options,
    ) -> Result<Consumer, Error> {
        self._tasks
            .0
            .extend(networking::start(kube, options).await?);
        if let Some(more) = self.foreign_clusters.clone() {
            let manager = identity::client_as(kube, CONTROLLER_MANAGER).await?;
            self._tasks
                .0
                .push(tokio::spawn(foreign_cluster::wake_on_networking(
                    manager, more,
                )));
        }
        Ok(self)
    }
}
