//! Offloading as Liqo v1.2.0 does it, started per cluster ([`Cluster`]) and
//! per peering ([`Peering`]), each piece as its own task and identity:
//! a namespace with a NamespaceOffloading is mapped on the selected peers
//! ([`namespace_offloading`](crate::namespace_offloading),
//! [`namespace_map`](crate::namespace_map)), its new pods get Liqo's
//! toleration and selector ([`pod_webhook`](crate::pod_webhook)), are bound
//! to a virtual node ([`scheduler`](crate::scheduler)) and reflected to the
//! peer as ShadowPods ([`reflection`](crate::reflection)), whose pods
//! ([`shadowpod_controller`](crate::shadowpod_controller)) run on the
//! peer's nodes ([`kubelet`](crate::kubelet)) and report back. With a pod
//! CIDR ([`ClusterOptions`]) the nodes get podCIDRs
//! ([`node_ipam`](crate::node_ipam)) and the pods addresses from them,
//! which the reflection shows the origin as it sees them.

use std::sync::Arc;

use kube_test_server::KubeApiServer;
use serde_json::json;

use crate::identity::{self, client_as, client_in_groups};
use crate::networking::remap::Cidr;
use crate::{
    grant_each, kubelet, namespace_map, namespace_offloading, node_ipam, nsoff_webhook,
    pod_webhook, reflection, scheduler, shadowpod_controller, Error, Tasks, CONTROLLER_MANAGER,
    CRD_REPLICATOR, VIRTUAL_KUBELET, WEBHOOK,
};

/// Liqo's offloading on one cluster, with the cluster's scheduler and the
/// kubelets of its ordinary nodes.
pub struct Cluster {
    _tasks: Tasks,
}

/// How the cluster itself (not Liqo) is set up.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// The cluster's pod CIDR: kube-controller-manager's `--cluster-cidr`
    /// with `--allocate-node-cidrs=true` (kind's default is
    /// `10.244.0.0/16`, as [`crate::networking::Options`]'s `pod_cidr`).
    /// With one, each node gets a `/24` of it as its `spec.podCIDR`
    /// ([`crate::node_ipam`]), and the kubelets give their pods addresses
    /// from it ([`crate::kubelet`]); without one (the default), nodes get
    /// no podCIDR and pods no IP.
    pub pod_cidr: Option<String>,
}

impl Cluster {
    /// On `kube`, the cluster `cluster_id`: the NamespaceOffloading
    /// controller, the ShadowPod controller, the pod and NamespaceOffloading
    /// webhooks on its admission chain, the scheduler, and a kubelet for
    /// each of `nodes` (ordinary nodes the test creates); no pod CIDR
    /// ([`Cluster::start_with`]).
    pub async fn start(
        kube: &KubeApiServer,
        cluster_id: &str,
        nodes: &[&str],
    ) -> Result<Cluster, Error> {
        Cluster::start_with(kube, cluster_id, nodes, ClusterOptions::default()).await
    }

    /// [`Cluster::start`] with `options`: with a pod CIDR, also
    /// kube-controller-manager's node IPAM controller ([`crate::node_ipam`],
    /// as `system:serviceaccount:kube-system:node-controller`), and
    /// kubelets that start a pod only once their node has its podCIDR.
    pub async fn start_with(
        kube: &KubeApiServer,
        cluster_id: &str,
        nodes: &[&str],
        options: ClusterOptions,
    ) -> Result<Cluster, Error> {
        let cluster_cidr = match &options.pod_cidr {
            Some(text) => Some(Cidr::parse(text).ok_or_else(|| {
                Error::Config(format!("--cluster-cidr {text:?} is not an IPv4 CIDR"))
            })?),
            None => None,
        };
        grant_each(
            kube,
            &[
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-namespaceoffloading",
                    namespace_offloading::RULES,
                ),
                (
                    CONTROLLER_MANAGER,
                    "liqo-model-shadowpod",
                    shadowpod_controller::RULES,
                ),
                (WEBHOOK, "liqo-model-pod-webhook", pod_webhook::RULES),
                (scheduler::USER, "liqo-model-scheduler", scheduler::RULES),
            ],
        );
        let manager = client_as(kube, CONTROLLER_MANAGER).await?;
        let (hook, mut tasks) = pod_webhook::Hook::start(client_as(kube, WEBHOOK).await?).await;
        kube.add_mutating_hook(Arc::new(hook));
        kube.add_validating_hook(Arc::new(nsoff_webhook::Hook));
        tasks.push(tokio::spawn(namespace_offloading::run(
            manager.clone(),
            cluster_id.to_string(),
        )));
        tasks.push(tokio::spawn(shadowpod_controller::run(manager)));
        tasks.push(tokio::spawn(scheduler::run(
            client_as(kube, scheduler::USER).await?,
        )));
        if let Some(cidr) = cluster_cidr {
            identity::grant(
                kube,
                node_ipam::USER,
                "liqo-model-node-ipam",
                node_ipam::RULES,
            );
            let client = client_as(kube, node_ipam::USER).await?;
            tasks.push(tokio::spawn(node_ipam::run(client, cidr)));
        }
        for node in nodes {
            let user = kubelet::user(node);
            identity::grant(
                kube,
                &user,
                &format!("liqo-model-kubelet-{node}"),
                kubelet::RULES,
            );
            let client = client_as(kube, &user).await?;
            tasks.push(tokio::spawn(kubelet::run_with(
                client,
                node.to_string(),
                cluster_cidr.is_some(),
            )));
        }
        Ok(Cluster {
            _tasks: Tasks(tasks),
        })
    }
}

/// One cluster offloading to a peer through one virtual node.
pub struct Peering {
    _tasks: Tasks,
}

impl Peering {
    /// `local` (cluster `local_id`) offloads to `remote` (`remote_id`)
    /// through its virtual node `node`: the NamespaceMap for the peer in
    /// `liqo-tenant-<remote_id>` (made with the namespace if missing, as
    /// `liqoctl peer` and the VirtualNode controller leave them), enforced on
    /// the peer, and the virtual kubelet's pod reflection.
    ///
    /// On the peer, the local cluster's identity (user `local_id`, group
    /// `liqo.io`) may handle ShadowPods and read pods cluster-wide, where
    /// Liqo binds it in each remote namespace
    /// (`namespacemap-controller/enforcement.go:82-104`).
    pub async fn start(
        local: &KubeApiServer,
        local_id: &str,
        remote: &KubeApiServer,
        remote_id: &str,
        node: &str,
    ) -> Result<Peering, Error> {
        let mut peering = Peering::start_namespaces(local, local_id, remote, remote_id).await?;
        grant_each(
            local,
            &[(
                VIRTUAL_KUBELET,
                "liqo-model-virtual-kubelet-pods",
                reflection::LOCAL_RULES,
            )],
        );
        identity::grant(
            remote,
            local_id,
            &format!("liqo-model-virtual-kubelet-remote-{local_id}"),
            reflection::REMOTE_RULES,
        );
        let reflector = reflection::Reflector {
            local: client_as(local, VIRTUAL_KUBELET).await?,
            remote: client_in_groups(remote, local_id, &["liqo.io"]).await?,
            remote_user: local_id.to_string(),
            node_name: node.to_string(),
            local_cluster_id: local_id.to_string(),
            remote_cluster_id: remote_id.to_string(),
            reflect_ips: true,
        };
        peering
            ._tasks
            .0
            .push(tokio::spawn(reflection::run(reflector)));
        Ok(peering)
    }

    /// The namespace half of [`Peering::start`], without the virtual
    /// kubelet: the NamespaceMap for the peer, enforced on the peer, so a
    /// NamespaceOffloading selecting it is mapped there and turns `Ready`.
    /// For tests that run no pod, where the virtual node's name (the
    /// reflection's) is not known in advance.
    pub async fn start_namespaces(
        local: &KubeApiServer,
        local_id: &str,
        remote: &KubeApiServer,
        remote_id: &str,
    ) -> Result<Peering, Error> {
        let tenant = format!("liqo-tenant-{remote_id}");
        if local.get(("", "namespaces"), None, &tenant).is_none() {
            // With all the labels Liqo's namespace manager gives it, Pod
            // Security `privileged` included
            // (`pkg/tenantNamespace/namespaceManager.go:128-150`): the
            // gateway pods run there.
            local.apply(
                ("", "namespaces"),
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant,
                    "labels": {"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": remote_id,
                               "pod-security.kubernetes.io/audit": "privileged",
                               "pod-security.kubernetes.io/enforce": "privileged",
                               "pod-security.kubernetes.io/warn": "privileged"}}}),
            );
        }
        grant_each(
            local,
            &[(
                CRD_REPLICATOR,
                "liqo-model-namespacemap-replicator",
                namespace_map::LOCAL_RULES,
            )],
        );
        identity::grant(
            remote,
            CONTROLLER_MANAGER,
            "liqo-model-namespacemap",
            namespace_map::REMOTE_RULES,
        );
        let replicator = client_as(local, CRD_REPLICATOR).await?;
        namespace_map::ensure_map(&replicator, remote_id).await?;
        let ends = namespace_map::Ends {
            local: replicator,
            remote: client_as(remote, CONTROLLER_MANAGER).await?,
            local_cluster_id: local_id.to_string(),
            remote_cluster_id: remote_id.to_string(),
        };
        Ok(Peering {
            _tasks: Tasks(vec![tokio::spawn(namespace_map::run(ends))]),
        })
    }
}
