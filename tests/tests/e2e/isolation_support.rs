//! The world of the isolation tests (issue 43): a provider's API server
//! with Liqo's Configuration controller, consumers that offload `app`
//! there through the Liqo model (pods with addresses from each cluster's
//! pod CIDR), a service the provider sells with `Local` hosting
//! ([`sell_locally`]), a consumer's ShadowEndpointSlice naming its pods on
//! other providers ([`direct_connections`]), and the NetworkPolicies read
//! back and judged by the test world's evaluator (`netpol-eval`, which
//! shares no code with the product).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kube::api::{Api, DynamicObject, PostParams};
use kube_test_server::KubeApiServer;
use liqo_model::networking::mapping::translate;
use liqo_model::networking::remap::Cidr;
use liqo_model::offloading::{Cluster, ClusterOptions, Peering};
use netpol_eval::{allowed, Endpoint, World};
use serde_json::{json, Value};

use crate::liqo_support;
use crate::peering_users_support::{CONTROLLER_USER, LIQO};

pub const NAMESPACES: (&str, &str) = ("", "namespaces");
pub const NODES: (&str, &str) = ("", "nodes");
pub const PODS: (&str, &str) = ("", "pods");
pub const CONFIGURATIONS: (&str, &str) = ("networking.liqo.io", "configurations");
pub const VIRTUAL_NODES: (&str, &str) = ("offloading.liqo.io", "virtualnodes");
pub const OFFLOADINGS: (&str, &str) = ("offloading.liqo.io", "namespaceoffloadings");
pub const POLICIES: (&str, &str) = ("networking.k8s.io", "networkpolicies");
pub const SHADOW_SLICES: (&str, &str) = ("offloading.liqo.io", "shadowendpointslices");

/// kind's pod CIDR, on every cluster here; Liqo's default external CIDR.
pub const POD_CIDR: &str = "10.244.0.0/16";
pub const EXTERNAL_CIDR: &str = "10.70.0.0/16";
/// The provider's cluster ID, in Liqo and in the catalog
/// (`e2e::catalog::provider(1)`).
pub const PROVIDER_ID: &str = "cluster-1";
pub const VIRTUAL_NODE: &str = "liqo-cluster-1";

fn with_pod_cidr() -> ClusterOptions {
    ClusterOptions {
        pod_cidr: Some(POD_CIDR.into()),
    }
}

pub fn node(name: &str) -> Value {
    kube_test_server::node(name, true, false, "8", "16Gi")
}

/// A pod of `namespace` bound to `node` as the scheduler leaves it.
pub fn bound_pod(kube: &KubeApiServer, namespace: &str, name: &str, node: &str, labels: Value) {
    let mut pod = kube_test_server::pod(name, node, "Pending", labels, "100m", "64Mi");
    pod["metadata"]["namespace"] = json!(namespace);
    pod["status"] = json!({});
    kube.apply(PODS, pod);
}

pub async fn wait_for(
    kube: &KubeApiServer,
    resource: (&str, &str),
    namespace: Option<&str>,
    name: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let deadline = Instant::now() + e2e::EVENTUALLY;
    loop {
        if let Some(v) = kube.get(resource, namespace, name) {
            if ready(&v) {
                return Ok(v);
            }
        }
        if Instant::now() >= deadline {
            bail!("{name}: {what}: not within {:?}", e2e::EVENTUALLY);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn ip_of(pod: &Value) -> Result<IpAddr> {
    pod["status"]["podIP"]
        .as_str()
        .context("a pod IP")?
        .parse()
        .context("an IP")
}

/// A consumer cluster offloading `app` to the provider, with a pod `web`
/// there and a pod `home` at home; it stops when dropped.
pub struct Consumer {
    pub kube: KubeApiServer,
    _cluster: Cluster,
    _liqo: liqo_model::Consumer,
    _peering: Peering,
    /// `home`'s address on its own cluster.
    pub home: IpAddr,
}

/// The pods a [`Consumer`] starts with: `remote` made in `app` through
/// the API (so Liqo's webhook sends them to the provider), `local`
/// bound to its own node, as `(namespace, name, labels)`.
pub struct Pods<'a> {
    pub remote: &'a [(&'a str, Value)],
    pub local: &'a [(&'a str, &'a str, Value)],
}

impl Consumer {
    /// With a pod `web` (`app=web`) offloaded and `home` (`app=home`) in
    /// `default` at home.
    pub async fn start(id: &str, provider: &KubeApiServer) -> Result<Consumer> {
        Self::start_with(
            id,
            provider,
            Pods {
                remote: &[("web", json!({"app": "web"}))],
                local: &[("default", "home", json!({"app": "home"}))],
            },
        )
        .await
    }

    /// With `pods`; `home` is the first local pod's address.
    pub async fn start_with(
        id: &str,
        provider: &KubeApiServer,
        pods: Pods<'_>,
    ) -> Result<Consumer> {
        let kube = KubeApiServer::start().await?;
        let own_node = format!("{id}-node");
        kube.apply(NODES, node(&own_node));
        let cluster = Cluster::start_with(&kube, id, &[&own_node], with_pod_cidr()).await?;
        let liqo = liqo_model::Consumer::start_as(&kube, id).await?;
        let tenant = format!("liqo-tenant-{PROVIDER_ID}");
        liqo_support::namespace(
            &kube,
            &tenant,
            json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": PROVIDER_ID}),
        );
        kube.apply(
            VIRTUAL_NODES,
            json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
                   "metadata": {"name": VIRTUAL_NODE, "namespace": tenant},
                   "spec": {"clusterID": PROVIDER_ID, "createNode": true, "disableNetworkCheck": true,
                            "resourceQuota": {"hard": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}}),
        );
        let peering = Peering::start(&kube, id, provider, PROVIDER_ID, VIRTUAL_NODE).await?;
        liqo_support::namespace(&kube, "app", json!({}));
        kube.apply(
            OFFLOADINGS,
            json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
                   "metadata": {"name": "offloading", "namespace": "app"},
                   "spec": {"podOffloadingStrategy": "Remote", "clusterSelector": {"nodeSelectorTerms": [
                       {"matchExpressions": [{"key": "liqo.io/remote-cluster-id",
                                              "operator": "In", "values": [PROVIDER_ID]}]}]}}}),
        );
        wait_for(&kube, NAMESPACES, None, "app", "offloaded", |ns| {
            ns["metadata"]["labels"]["liqo.io/scheduling-enabled"] == "true"
        })
        .await?;
        // Through the API, so the pod webhook mutates it (at creation
        // only, once its cache has the namespace's label).
        use liqo_model::identity::{self, Rule, ALL};
        const RULES: &[Rule] = &[Rule::new(&[""], &["pods"], ALL)];
        identity::grant(&kube, "owner", "owner", RULES);
        let owner = identity::client_as(&kube, "owner").await?;
        let pods_api: Api<DynamicObject> =
            Api::namespaced_with(owner, "app", &liqo_model::offloading_consts::pods());
        for (name, labels) in pods.remote {
            let pod: DynamicObject =
                serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "app", "labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx",
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}))?;
            let deadline = Instant::now() + e2e::EVENTUALLY;
            loop {
                let made = pods_api.create(&PostParams::default(), &pod).await?;
                let mutated = made.data["spec"]["tolerations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|t| t["key"] == "virtual-node.liqo.io/not-allowed");
                if mutated {
                    break;
                }
                if Instant::now() >= deadline {
                    bail!("{id}'s pod {name} was never mutated by Liqo's webhook");
                }
                pods_api.delete(name, &Default::default()).await?;
            }
        }
        let mut home = None;
        for (namespace, name, labels) in pods.local {
            bound_pod(&kube, namespace, name, &own_node, labels.clone());
            let pod = wait_for(&kube, PODS, Some(namespace), name, "an address", |p| {
                p["status"]["podIP"].is_string()
            })
            .await?;
            home.get_or_insert(ip_of(&pod)?);
        }
        Ok(Consumer {
            home: home.context("a local pod")?,
            kube,
            _cluster: cluster,
            _liqo: liqo,
            _peering: peering,
        })
    }
}

/// The consumer `id`'s Configuration on the provider, as `liqoctl peer`
/// makes it (its real pod and external networks), once Liqo remapped
/// them (and the pod CIDR seen is not `before`): the remapped pod CIDR.
pub async fn configure(
    provider: &KubeApiServer,
    id: &str,
    (pod_cidr, external_cidr): (&str, &str),
    before: Option<&str>,
) -> Result<String> {
    let tenant = format!("liqo-tenant-{id}");
    wait_for(provider, NAMESPACES, None, &tenant, "made", |_| true).await?;
    provider.apply(
        CONFIGURATIONS,
        json!({"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
               "metadata": {"name": id, "namespace": tenant,
                            "labels": {"liqo.io/remote-cluster-id": id}},
               "spec": {"remote": {"cidr": {"pod": [pod_cidr], "external": [external_cidr]}}}}),
    );
    let conf = wait_for(
        provider,
        CONFIGURATIONS,
        Some(&tenant),
        id,
        "remapped",
        |c| {
            let seen = c["status"]["remote"]["cidr"]["pod"][0].as_str();
            seen.is_some() && seen != before && c["spec"]["remote"]["cidr"]["pod"][0] == pod_cidr
        },
    )
    .await?;
    Ok(conf["status"]["remote"]["cidr"]["pod"][0]
        .as_str()
        .context("a remapped pod CIDR")?
        .to_string())
}

/// A service sold to `customer_id` with `Local` hosting, as the provider
/// holds it: the instance namespace `namespace` as the service-controller
/// makes it (its label and contract annotation), offloaded to the
/// customer's cluster by the provider's own Liqo — the provider peered
/// towards it: a VirtualNode for it (no Node: none of the provider's pods
/// goes there) and the NamespaceMap, enforced on the customer's API server
/// — once the NamespaceOffloading's status (Liqo's controller's) says
/// so. The peering stops when dropped.
pub async fn sell_locally(
    provider: &KubeApiServer,
    customer: &KubeApiServer,
    customer_id: &str,
    namespace: &str,
) -> Result<Peering> {
    let tenant = format!("liqo-tenant-{customer_id}");
    let peering = Peering::start_namespaces(provider, PROVIDER_ID, customer, customer_id).await?;
    provider.apply(
        VIRTUAL_NODES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
               "metadata": {"name": format!("liqo-{customer_id}"), "namespace": tenant},
               "spec": {"clusterID": customer_id, "createNode": false, "disableNetworkCheck": true,
                        "resourceQuota": {"hard": {"cpu": "1", "memory": "1Gi", "pods": "1"}}}}),
    );
    provider.apply(
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": namespace,
                            "labels": {"app.kubernetes.io/managed-by": "service-controller"},
                            "annotations": {"broker.liqo-broker.io/contract-id": "c-svc"}}}),
    );
    provider.apply(
        OFFLOADINGS,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
               "metadata": {"name": "offloading", "namespace": namespace},
               "spec": {"podOffloadingStrategy": "Local", "clusterSelector": {"nodeSelectorTerms": [
                   {"matchExpressions": [{"key": "liqo.io/remote-cluster-id",
                                          "operator": "In", "values": [customer_id]}]}]}}}),
    );
    wait_for(
        provider,
        OFFLOADINGS,
        Some(namespace),
        "offloading",
        "offloaded to the customer",
        |o| {
            o["status"]["remoteNamespacesConditions"][customer_id]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "OffloadingRequired" && c["status"] == "True")
        },
    )
    .await?;
    Ok(peering)
}

/// The ShadowEndpointSlice `name` a consumer's virtual kubelet reflects
/// into its namespace `namespace` here for a Service annotated
/// `liqo.io/use-direct-connections: "true"`: its endpoints on its virtual
/// nodes for other providers, by cluster ID, in the annotation
/// `liqo.io/direct-connections-data`
/// (`reflection/exposition/endpointslice.go:215-283`), the same addresses
/// as endpoints.
pub fn direct_connections(
    provider: &KubeApiServer,
    namespace: &str,
    name: &str,
    addresses: &[(&str, IpAddr)],
) {
    let mut by_cluster = serde_json::Map::new();
    for (cluster, ip) in addresses {
        if let Some(list) = by_cluster
            .entry(cluster.to_string())
            .or_insert_with(|| json!([]))
            .as_array_mut()
        {
            list.push(json!(ip.to_string()));
        }
    }
    let data = json!({ "clusterAddresses": by_cluster }).to_string();
    let endpoints: Vec<Value> = addresses
        .iter()
        .map(|(_, ip)| json!({"addresses": [ip.to_string()]}))
        .collect();
    provider.apply(
        SHADOW_SLICES,
        json!({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowEndpointSlice",
               "metadata": {"name": name, "namespace": namespace,
                            "annotations": {"liqo.io/direct-connections-data": data}},
               "spec": {"template": {"addressType": "IPv4", "endpoints": endpoints,
                                     "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}}}),
    );
}

/// `ip` of a consumer's network `real` as the provider sees it (`seen`).
pub fn seen_as(ip: IpAddr, real: &str, seen: &str) -> Result<Endpoint> {
    let IpAddr::V4(v4) = ip else {
        bail!("{ip} is not IPv4")
    };
    let from = Cidr::parse(real).context("a CIDR")?;
    let to = Cidr::parse(seen).context("a CIDR")?;
    let mapped = translate(v4, &from, &to).with_context(|| format!("{ip} in {real}"))?;
    Ok(Endpoint::external(IpAddr::V4(mapped)))
}

/// The provider's namespaces, pods and policies, as its API server
/// returns them.
pub fn world(kube: &KubeApiServer) -> World {
    World {
        namespaces: kube.objects(NAMESPACES),
        pods: kube.objects(PODS),
        policies: kube.objects(POLICIES),
    }
}

pub fn policy(kube: &KubeApiServer, namespace: &str, name: &str) -> Option<Value> {
    kube.get(POLICIES, Some(namespace), name)
}

/// Wait until the evaluator's verdicts over `cases` are the expected
/// ones; the last mismatches otherwise.
pub async fn expect(
    kube: &KubeApiServer,
    cases: &[(&str, &Endpoint, &Endpoint, bool)],
) -> Result<()> {
    let deadline = Instant::now() + e2e::EVENTUALLY;
    loop {
        let w = world(kube);
        let wrong: Vec<String> = cases
            .iter()
            .filter(|(_, from, to, want)| allowed(&w, from, to, 8080, "TCP") != *want)
            .map(|(what, _, _, want)| {
                format!(
                    "{what}: expected {}",
                    if *want { "allowed" } else { "denied" }
                )
            })
            .collect();
        if wrong.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "not within {:?}: {wrong:#?}\npolicies: {:#}",
                e2e::EVENTUALLY,
                json!(w.policies)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A provider as both isolation tests start it: its API server (TLS, the
/// shipped RBAC, Liqo's peering-user roles), its node `p-node` whose pods
/// get addresses from `pod_cidr`, Liqo's Configuration controller (Liqo's
/// controller manager runs it on every cluster) and its DNS pod; the
/// peering-user controller's kubeconfig and the server's CA written beside.
pub struct ProviderWorld {
    pub kube: KubeApiServer,
    /// The peering-user controller's kubeconfig.
    pub kubeconfig: PathBuf,
    pub ca: PathBuf,
    _dir: tempfile::TempDir,
    _cluster: Cluster,
    _liqo: liqo_model::Consumer,
}

impl ProviderWorld {
    pub async fn start(pod_cidr: &str) -> Result<ProviderWorld> {
        let kube = KubeApiServer::start_tls().await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        kube.write_kubeconfig_as(&kubeconfig, CONTROLLER_USER)?;
        e2e::rbac::load_shipped(&kube)?;
        liqo_support::namespace(&kube, LIQO, json!({}));
        liqo_support::install_peering_user_roles(&kube, LIQO);
        kube.apply(NODES, node("p-node"));
        let cluster = Cluster::start_with(
            &kube,
            PROVIDER_ID,
            &["p-node"],
            ClusterOptions {
                pod_cidr: Some(pod_cidr.into()),
            },
        )
        .await?;
        let liqo = liqo_model::Consumer::start(&kube)
            .await?
            .with_networking(&kube, liqo_model::networking::Options::default())
            .await?;
        liqo_support::namespace(&kube, "kube-system", json!({}));
        bound_pod(
            &kube,
            "kube-system",
            "coredns",
            "p-node",
            json!({"k8s-app": "kube-dns"}),
        );
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, kube.ca_pem().context("TLS server")?)?;
        Ok(ProviderWorld {
            kube,
            kubeconfig,
            ca,
            _dir: dir,
            _cluster: cluster,
            _liqo: liqo,
        })
    }
}
