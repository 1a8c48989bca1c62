//! The refinement, pure: one `MultiClusterNetworkPolicy` and a
//! [`Snapshot`] become the consumer's NetworkPolicy and, for each
//! provider, the [`TenantNetworkPolicy`] it is asked to render — or a
//! [`Refusal`], and then nothing at all.
//!
//! Peers, by where the selected pods are (the policy's pods run here and
//! on every provider the namespace is offloaded to):
//!
//! | peer | on this consumer | on provider P |
//! |---|---|---|
//! | Service pods here | `podSelector` (the Service's selector) | `/32` of the real `podIP` |
//! | Service pods on P | `/32` of the reflected `podIP` (this consumer's view) | `podSelector` in the remote namespace |
//! | Service pods on P2 | `/32` | not rendered (no provider-to-provider path), noted |
//! | `cluster:` this consumer | `namespaceSelector: {}` | the consumer's real pod CIDR |
//! | `cluster: P` | P's pod CIDR as remapped here | `podSelector: {}` (the buyer's namespaces there) |
//! | `cluster: P2` | P2's remapped pod CIDR | not rendered, noted |
//! | `cidr` | as given | as given (the provider translates) |
//!
//! Liqo delivers cross-cluster packets with the sender's pod address
//! prefix-mapped into the receiver's view (spec §2); a cluster in
//! `--full-masquerade-clusters` SNATs all traffic leaving it to the first
//! address of its external CIDR, so there only cluster scope can be told
//! apart, and its external CIDR is admitted beside its pod CIDR.
//!
//! A rule whose peers all drop out for a cluster is left out there
//! (an empty peer list would admit everyone).

use std::collections::{BTreeMap, BTreeSet};

use catalog_client::wire::tenant_policy::{
    parse_cidr, PortRef, Requirement as TenantRequirement, Selector, TenantIpBlock,
    TenantNetworkPolicy, TenantPeer, TenantPolicy, TenantPort, TenantRule,
};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector as KubeSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;

use super::model::{LabelSelector, MultiClusterNetworkPolicy, Peer, Port};
use super::snapshot::{Place, Snapshot};

/// The label on every NetworkPolicy this refinement makes; only those are
/// changed or deleted.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "liqo-broker-network-policy";
/// The label naming the policy a NetworkPolicy was refined from.
pub const POLICY_LABEL: &str = "broker.liqo-broker.io/multicluster-network-policy";
/// The consumer's NetworkPolicy is `mcnp-<name>`.
pub const NAME_PREFIX: &str = "mcnp-";
/// The label Kubernetes gives every namespace, its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// `"*"`: every service, or every cluster.
pub const ANY: &str = "*";

/// Why a policy is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The spec breaks a rule its schema cannot say.
    InvalidSpec,
    /// A peer is both forms or neither, or its CIDR is not one.
    InvalidPeer,
    UnknownDomain,
    UnknownCluster,
    /// No such Service in the namespace, or it selects no pods.
    UnknownService,
    /// The endpoint selector matches no pod of the namespace.
    SelectsNothing,
    /// A pod-granular peer whose pods run in a cluster that masquerades
    /// all its traffic.
    FullMasquerade,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidSpec => "InvalidSpec",
            Reason::InvalidPeer => "InvalidPeer",
            Reason::UnknownDomain => "UnknownDomain",
            Reason::UnknownCluster => "UnknownCluster",
            Reason::UnknownService => "UnknownService",
            Reason::SelectsNothing => "SelectsNothing",
            Reason::FullMasquerade => "FullMasquerade",
        }
    }
}

/// A refused policy: nothing of it is applied anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    pub message: String,
}

fn refuse<T>(reason: Reason, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal {
        reason,
        message: message.into(),
    })
}

/// A policy refined.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The NetworkPolicy on this consumer.
    pub local: NetworkPolicy,
    /// What of the policy is not rendered here, and why.
    pub local_notes: Vec<String>,
    /// Every provider with an active contract.
    pub providers: BTreeMap<String, ForProvider>,
}

/// The policy for one provider.
#[derive(Debug, Clone, PartialEq)]
pub enum ForProvider {
    /// Sent in the provider's [`TenantPolicy`].
    Policy {
        policy: TenantNetworkPolicy,
        notes: Vec<String>,
    },
    /// Nothing for it: the namespace is not offloaded.
    NotOffloaded(String),
}

/// Which clusters a peer's scope covers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Clusters {
    All,
    One(String),
}

impl Clusters {
    fn has(&self, cluster: &str) -> bool {
        match self {
            Clusters::All => true,
            Clusters::One(c) => c == cluster,
        }
    }
}

/// A peer, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Scope {
    Cidr {
        cidr: String,
        except: Vec<String>,
    },
    /// Every pod of the buyer in these clusters.
    Clusters(Vec<String>),
    /// The pods a Service selects, in these clusters.
    Service {
        name: String,
        selector: BTreeMap<String, String>,
        clusters: Clusters,
    },
}

/// One direction's rule, whichever it is.
struct Rule<'a> {
    peers: &'a [Peer],
    ports: &'a [Port],
}

/// Refine `policy` against `snapshot`.
pub fn refine(
    policy: &MultiClusterNetworkPolicy,
    snapshot: &Snapshot,
) -> Result<Rendered, Refusal> {
    let namespace = policy.metadata.namespace.as_deref().unwrap_or_default();
    let name = policy.metadata.name.as_deref().unwrap_or_default();
    let spec = &policy.spec;
    check_spec(name, spec)?;
    let ingress: Option<Vec<Rule>> = spec.ingress.as_ref().map(|rules| {
        rules
            .iter()
            .map(|r| Rule {
                peers: &r.from,
                ports: &r.ports,
            })
            .collect()
    });
    let egress: Option<Vec<Rule>> = spec.egress.as_ref().map(|rules| {
        rules
            .iter()
            .map(|r| Rule {
                peers: &r.to,
                ports: &r.ports,
            })
            .collect()
    });
    // Every peer checked before anything is rendered.
    let mut scopes: BTreeMap<(&str, usize, usize), Scope> = BTreeMap::new();
    for (dir, rules) in [("ingress", &ingress), ("egress", &egress)] {
        for (i, rule) in rules.iter().flatten().enumerate() {
            for (j, peer) in rule.peers.iter().enumerate() {
                let at = format!("spec.{dir}[{i}].{}[{j}]", peer_list(dir));
                scopes.insert((dir, i, j), scope(peer, &at, namespace, snapshot)?);
            }
        }
    }
    if !snapshot
        .pods_in(namespace)
        .any(|p| selects(&spec.endpoint_selector, &p.labels))
    {
        return refuse(
            Reason::SelectsNothing,
            format!("spec.endpointSelector matches no pod of namespace {namespace}"),
        );
    }
    let remote = snapshot.remote_namespaces.get(namespace);
    let offloaded = remote.is_some() && !snapshot.providers.is_empty();
    for scope in scopes.values() {
        check_masquerade(scope, namespace, offloaded, snapshot)?;
    }

    // This consumer.
    let mut local_notes = Vec::new();
    let local_rules = |dir: &'static str, rules: &Option<Vec<Rule>>, notes: &mut Vec<String>| {
        rules.as_ref().map(|rules| {
            let mut kept = Vec::new();
            for (i, rule) in rules.iter().enumerate() {
                let mut peers = Vec::new();
                for j in 0..rule.peers.len() {
                    if let Some(scope) = scopes.get(&(dir, i, j)) {
                        local_peers(scope, namespace, snapshot, notes, &mut peers);
                    }
                }
                if !rule.peers.is_empty() && peers.is_empty() {
                    notes.push(format!(
                        "spec.{dir}[{i}] admits nothing on this cluster: left out"
                    ));
                    continue;
                }
                kept.push((
                    dedup(peers),
                    rule.ports.iter().map(kube_port).collect::<Vec<_>>(),
                ));
            }
            kept
        })
    };
    let local_ingress = local_rules("ingress", &ingress, &mut local_notes);
    let mut local_egress = local_rules("egress", &egress, &mut local_notes);
    // As the provider's isolation does for its copy of the pods, and the
    // thesis' refinement (§5.3.2): a pod whose egress is restricted still
    // resolves names.
    if let (Some(rules), Some(dns)) = (local_egress.as_mut(), &snapshot.dns) {
        rules.push((
            vec![NetworkPolicyPeer {
                namespace_selector: Some(KubeSelector {
                    match_labels: Some(
                        [(NAMESPACE_NAME_LABEL.to_string(), dns.namespace.clone())].into(),
                    ),
                    match_expressions: None,
                }),
                pod_selector: Some(KubeSelector {
                    match_labels: Some(dns.pod_labels.clone()),
                    match_expressions: None,
                }),
                ip_block: None,
            }],
            ["UDP", "TCP"]
                .into_iter()
                .map(|protocol| NetworkPolicyPort {
                    protocol: Some(protocol.to_string()),
                    port: Some(IntOrString::Int(53)),
                    end_port: None,
                })
                .collect(),
        ));
    }
    let mut types = Vec::new();
    if local_ingress.is_some() {
        types.push("Ingress".to_string());
    }
    if local_egress.is_some() {
        types.push("Egress".to_string());
    }
    let local = NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(format!("{NAME_PREFIX}{name}")),
            namespace: Some(namespace.to_string()),
            labels: Some(
                [
                    (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
                    (POLICY_LABEL.to_string(), name.to_string()),
                ]
                .into(),
            ),
            owner_references: policy.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(kube_selector(&spec.endpoint_selector)),
            policy_types: Some(types),
            ingress: local_ingress.map(|rules| {
                rules
                    .into_iter()
                    .map(|(peers, ports)| NetworkPolicyIngressRule {
                        from: Some(peers),
                        ports: (!ports.is_empty()).then_some(ports),
                    })
                    .collect()
            }),
            egress: local_egress.map(|rules| {
                rules
                    .into_iter()
                    .map(|(peers, ports)| NetworkPolicyEgressRule {
                        to: Some(peers),
                        ports: (!ports.is_empty()).then_some(ports),
                    })
                    .collect()
            }),
        }),
    };

    // Each provider.
    let mut providers = BTreeMap::new();
    for provider in &snapshot.providers {
        let Some(remote) = remote else {
            providers.insert(
                provider.clone(),
                ForProvider::NotOffloaded(format!(
                    "namespace {namespace} is not offloaded (no NamespaceOffloading with a remoteNamespaceName)"
                )),
            );
            continue;
        };
        let mut notes = Vec::new();
        let remote_rules =
            |dir: &'static str, rules: &Option<Vec<Rule>>, notes: &mut Vec<String>| {
                rules.as_ref().map(|rules| {
                    let mut kept = Vec::new();
                    for (i, rule) in rules.iter().enumerate() {
                        let mut peers = Vec::new();
                        for j in 0..rule.peers.len() {
                            if let Some(scope) = scopes.get(&(dir, i, j)) {
                                provider_peers(
                                    scope, namespace, remote, provider, snapshot, notes, &mut peers,
                                );
                            }
                        }
                        if !rule.peers.is_empty() && peers.is_empty() {
                            notes.push(format!(
                                "spec.{dir}[{i}] admits nothing on {provider}: left out"
                            ));
                            continue;
                        }
                        kept.push(TenantRule {
                            peers: dedup(peers),
                            ports: rule.ports.iter().map(tenant_port).collect(),
                        });
                    }
                    kept
                })
            };
        let policy = TenantNetworkPolicy {
            name: format!("{namespace}/{name}"),
            namespace: remote.clone(),
            pod_selector: tenant_selector(&spec.endpoint_selector),
            ingress: remote_rules("ingress", &ingress, &mut notes),
            egress: remote_rules("egress", &egress, &mut notes),
        };
        providers.insert(
            provider.clone(),
            ForProvider::Policy {
                policy,
                notes: dedup(notes),
            },
        );
    }
    Ok(Rendered {
        local,
        local_notes: dedup(local_notes),
        providers,
    })
}

/// Each provider's document: the policies rendered for it, by name. A
/// provider with none gets an empty one (its policy is to be removed).
pub fn documents<'a>(
    rendered: impl IntoIterator<Item = &'a Rendered>,
    providers: &BTreeSet<String>,
) -> BTreeMap<String, TenantPolicy> {
    let mut docs: BTreeMap<String, TenantPolicy> = providers
        .iter()
        .map(|p| (p.clone(), TenantPolicy::default()))
        .collect();
    for r in rendered {
        for (provider, what) in &r.providers {
            if let (ForProvider::Policy { policy, .. }, Some(doc)) = (what, docs.get_mut(provider))
            {
                doc.policies.push(policy.clone());
            }
        }
    }
    for doc in docs.values_mut() {
        doc.policies.sort_by(|a, b| a.name.cmp(&b.name));
    }
    docs
}

fn peer_list(dir: &str) -> &'static str {
    if dir == "ingress" {
        "from"
    } else {
        "to"
    }
}

fn dedup<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// What the schema cannot say.
fn check_spec(
    name: &str,
    spec: &super::model::MultiClusterNetworkPolicySpec,
) -> Result<(), Refusal> {
    if name.len() > 63 {
        return refuse(
            Reason::InvalidSpec,
            format!("the name {name:?} is longer than 63 characters (it becomes a label value)"),
        );
    }
    if spec.ingress.is_none() && spec.egress.is_none() {
        return refuse(
            Reason::InvalidSpec,
            "neither ingress nor egress: nothing to enforce",
        );
    }
    check_selector("spec.endpointSelector", &spec.endpoint_selector)?;
    let ports = spec
        .ingress
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| (format!("spec.ingress[{i}]"), &r.ports))
        .chain(
            spec.egress
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, r)| (format!("spec.egress[{i}]"), &r.ports)),
        );
    for (at, ports) in ports {
        for (k, port) in ports.iter().enumerate() {
            check_port(&format!("{at}.ports[{k}]"), port)?;
        }
    }
    Ok(())
}

fn check_selector(at: &str, selector: &LabelSelector) -> Result<(), Refusal> {
    for (i, r) in selector.match_expressions.iter().enumerate() {
        let ok = match r.operator.as_str() {
            "In" | "NotIn" => !r.values.is_empty(),
            "Exists" | "DoesNotExist" => r.values.is_empty(),
            _ => false,
        };
        if !ok {
            return refuse(
                Reason::InvalidSpec,
                format!(
                    "{at}.matchExpressions[{i}]: {} takes {}",
                    r.operator,
                    if matches!(r.operator.as_str(), "In" | "NotIn") {
                        "one value or more"
                    } else {
                        "no values (In, NotIn, Exists, DoesNotExist)"
                    }
                ),
            );
        }
    }
    Ok(())
}

fn check_port(at: &str, port: &Port) -> Result<(), Refusal> {
    let bad = |why: String| refuse(Reason::InvalidSpec, format!("{at}: {why}"));
    match (&port.port, port.end_port) {
        (Some(IntOrString::Int(n)), _) if !(1..=65535).contains(n) => {
            bad(format!("port {n} is not 1 to 65535"))
        }
        (Some(IntOrString::Int(n)), Some(end)) if end < *n || end > 65535 => {
            bad(format!("endPort {end} is not between port {n} and 65535"))
        }
        (Some(IntOrString::String(s)), _)
            if s.is_empty()
                || s.len() > 15
                || !s
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                || !s.bytes().any(|b| b.is_ascii_lowercase()) =>
        {
            bad(format!("{s:?} is not a port name (IANA_SVC_NAME)"))
        }
        (Some(IntOrString::String(_)) | None, Some(_)) => {
            bad("endPort needs a numeric port".into())
        }
        _ => Ok(()),
    }
}

/// A peer checked against the snapshot.
fn scope(peer: &Peer, at: &str, namespace: &str, snapshot: &Snapshot) -> Result<Scope, Refusal> {
    let invalid = |why: &str| refuse(Reason::InvalidPeer, format!("{at}: {why}"));
    match (&peer.service, &peer.cidr) {
        (Some(_), Some(_)) => invalid("both service and cidr: a peer is one or the other"),
        (None, None) => invalid("neither service nor cidr"),
        (None, Some(cidr)) => {
            if peer.cluster.is_some() || peer.domain.is_some() {
                return invalid("cluster and domain go with service, not with cidr");
            }
            let Some((net, len)) = parse_cidr(cidr) else {
                return invalid(&format!("{cidr:?} is not an IPv4 CIDR"));
            };
            for e in &peer.except {
                match parse_cidr(e) {
                    Some((addr, l)) if l >= len && same_prefix(net, addr, len) => {}
                    _ => {
                        return invalid(&format!("except {e:?} is not an IPv4 CIDR inside {cidr}"))
                    }
                }
            }
            Ok(Scope::Cidr {
                cidr: cidr.clone(),
                except: peer.except.clone(),
            })
        }
        (Some(service), None) => {
            if !peer.except.is_empty() {
                return invalid("except goes with cidr");
            }
            let cluster = peer.cluster.as_deref();
            if service == ANY && (cluster.is_none() || peer.domain.is_none()) {
                return invalid("service \"*\" needs cluster and domain");
            }
            if cluster == Some(ANY) && peer.domain.is_none() {
                return invalid("cluster \"*\" needs domain");
            }
            if let Some(domain) = &peer.domain {
                if *domain != snapshot.domain {
                    return refuse(
                        Reason::UnknownDomain,
                        format!(
                            "{at}: domain {domain:?} is not this one ({:?}: this consumer and the providers it holds active contracts with)",
                            snapshot.domain
                        ),
                    );
                }
            }
            let clusters = match cluster {
                None | Some(ANY) => Clusters::All,
                Some(c) if c == snapshot.consumer || snapshot.providers.contains(c) => {
                    Clusters::One(c.to_string())
                }
                Some(c) => {
                    return refuse(
                        Reason::UnknownCluster,
                        format!(
                            "{at}: cluster {c:?} is neither this consumer ({}) nor a provider it holds an active contract with{}",
                            snapshot.consumer,
                            if snapshot.providers.is_empty() {
                                String::new()
                            } else {
                                format!(
                                    " ({})",
                                    snapshot.providers.iter().cloned().collect::<Vec<_>>().join(", ")
                                )
                            }
                        ),
                    )
                }
            };
            if service == ANY {
                let list = match clusters {
                    Clusters::All => std::iter::once(snapshot.consumer.clone())
                        .chain(snapshot.providers.iter().cloned())
                        .collect(),
                    Clusters::One(c) => vec![c],
                };
                return Ok(Scope::Clusters(list));
            }
            let key = (namespace.to_string(), service.clone());
            match snapshot.services.get(&key) {
                Some(Some(selector)) => Ok(Scope::Service {
                    name: service.clone(),
                    selector: selector.clone(),
                    clusters,
                }),
                Some(None) => refuse(
                    Reason::UnknownService,
                    format!("{at}: Service {namespace}/{service} has no selector (its pods cannot be known)"),
                ),
                None => refuse(
                    Reason::UnknownService,
                    format!("{at}: no Service {namespace}/{service}"),
                ),
            }
        }
    }
}

fn same_prefix(a: std::net::Ipv4Addr, b: std::net::Ipv4Addr, len: u8) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    u32::from(a) & mask == u32::from(b) & mask
}

/// Where the pods of a Service scope run, with their addresses.
fn service_pods<'a>(
    namespace: &'a str,
    selector: &'a BTreeMap<String, String>,
    clusters: &'a Clusters,
    snapshot: &'a Snapshot,
) -> impl Iterator<Item = (Place, Option<&'a str>)> + 'a {
    snapshot
        .pods_in(namespace)
        .filter(|p| selector.iter().all(|(k, v)| p.labels.get(k) == Some(v)))
        .filter_map(|p| Some((snapshot.place(p)?, p.ip.as_deref())))
        .filter(|(place, _)| clusters.has(&snapshot.cluster_of(place)))
}

/// Pod-granular peers cannot be told apart where all traffic is
/// masqueraded: refused when a Service's pods run in such a cluster and
/// are rendered as addresses somewhere else (always for a provider's
/// pods; for this consumer's, when the namespace is offloaded).
fn check_masquerade(
    scope: &Scope,
    namespace: &str,
    offloaded: bool,
    snapshot: &Snapshot,
) -> Result<(), Refusal> {
    let Scope::Service {
        name,
        selector,
        clusters,
    } = scope
    else {
        return Ok(());
    };
    for (place, _) in service_pods(namespace, selector, clusters, snapshot) {
        let cluster = snapshot.cluster_of(&place);
        let seen_elsewhere = match place {
            Place::Provider(_) => true,
            Place::Local => offloaded,
        };
        if seen_elsewhere && snapshot.full_masquerade.contains(&cluster) {
            return refuse(
                Reason::FullMasquerade,
                format!(
                    "service {name}: pods run in cluster {cluster}, where Liqo masquerades all traffic leaving it (fullMasquerade): they cannot be told apart there, only the whole cluster (service \"*\", cluster {cluster})"
                ),
            );
        }
    }
    Ok(())
}

fn ip_block(cidr: &str, except: &[String]) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.to_string(),
            except: (!except.is_empty()).then(|| except.to_vec()),
        }),
        ..NetworkPolicyPeer::default()
    }
}

fn tenant_block(cidr: &str, except: &[String]) -> TenantPeer {
    TenantPeer {
        ip_block: Some(TenantIpBlock {
            cidr: cidr.to_string(),
            except: except.to_vec(),
        }),
        ..TenantPeer::default()
    }
}

/// `ip/32`, for an IPv4 address.
fn host(ip: &str) -> Option<String> {
    ip.parse::<std::net::Ipv4Addr>()
        .ok()
        .map(|a| format!("{a}/32"))
}

/// A scope's peers on this consumer.
fn local_peers(
    scope: &Scope,
    namespace: &str,
    snapshot: &Snapshot,
    notes: &mut Vec<String>,
    out: &mut Vec<NetworkPolicyPeer>,
) {
    match scope {
        Scope::Cidr { cidr, except } => out.push(ip_block(cidr, except)),
        Scope::Clusters(list) => {
            for cluster in list {
                if *cluster == snapshot.consumer {
                    out.push(NetworkPolicyPeer {
                        namespace_selector: Some(KubeSelector::default()),
                        ..NetworkPolicyPeer::default()
                    });
                    continue;
                }
                let networks = snapshot.networks.get(cluster);
                let mut cidrs: Vec<&String> = networks
                    .map(|n| n.provider_pod.iter().collect())
                    .unwrap_or_default();
                if snapshot.full_masquerade.contains(cluster) {
                    cidrs.extend(
                        networks
                            .into_iter()
                            .flat_map(|n| n.provider_external.iter()),
                    );
                }
                if cidrs.is_empty() {
                    notes.push(format!(
                        "cluster {cluster}: no remapped pod CIDR (no Liqo Configuration in liqo-tenant-{cluster}): nothing of it admitted"
                    ));
                }
                out.extend(cidrs.into_iter().map(|c| ip_block(c, &[])));
            }
        }
        Scope::Service {
            name,
            selector,
            clusters,
        } => {
            if clusters.has(&snapshot.consumer) {
                out.push(NetworkPolicyPeer {
                    pod_selector: Some(KubeSelector {
                        match_labels: Some(selector.clone()),
                        match_expressions: None,
                    }),
                    ..NetworkPolicyPeer::default()
                });
            }
            for (place, ip) in service_pods(namespace, selector, clusters, snapshot) {
                if place == Place::Local {
                    continue;
                }
                match ip.and_then(host) {
                    Some(block) => out.push(ip_block(&block, &[])),
                    None => notes.push(format!(
                        "service {name}: a pod on {} has no IPv4 address yet",
                        snapshot.cluster_of(&place)
                    )),
                }
            }
        }
    }
}

/// A scope's peers on `provider`, whose copy of the namespace is `remote`.
fn provider_peers(
    scope: &Scope,
    namespace: &str,
    remote: &str,
    provider: &str,
    snapshot: &Snapshot,
    notes: &mut Vec<String>,
    out: &mut Vec<TenantPeer>,
) {
    let not_routed = |other: &str| {
        format!(
            "{other}: not rendered on {provider} (Liqo routes provider-to-provider traffic only over direct connections, which the broker does not set up)"
        )
    };
    match scope {
        Scope::Cidr { cidr, except } => out.push(tenant_block(cidr, except)),
        Scope::Clusters(list) => {
            for cluster in list {
                if *cluster == snapshot.consumer {
                    let networks = snapshot.networks.get(provider);
                    let mut cidrs: Vec<&String> = networks
                        .map(|n| n.consumer_pod.iter().collect())
                        .unwrap_or_default();
                    if snapshot.full_masquerade.contains(cluster) {
                        cidrs.extend(
                            networks
                                .into_iter()
                                .flat_map(|n| n.consumer_external.iter()),
                        );
                    }
                    if cidrs.is_empty() {
                        notes.push(format!(
                            "cluster {cluster}: this consumer's pod CIDR is unknown (no Liqo Configuration in liqo-tenant-{provider}): nothing of it admitted on {provider}"
                        ));
                    }
                    out.extend(cidrs.into_iter().map(|c| tenant_block(c, &[])));
                } else if cluster == provider {
                    out.push(TenantPeer {
                        pod_selector: Some(Selector::default()),
                        ..TenantPeer::default()
                    });
                } else {
                    notes.push(not_routed(&format!("cluster {cluster}")));
                }
            }
        }
        Scope::Service {
            name,
            selector,
            clusters,
        } => {
            if clusters.has(provider) {
                out.push(TenantPeer {
                    namespace: Some(remote.to_string()),
                    pod_selector: Some(Selector {
                        match_labels: selector.clone(),
                        match_expressions: Vec::new(),
                    }),
                    ip_block: None,
                });
            }
            for (place, ip) in service_pods(namespace, selector, clusters, snapshot) {
                match &place {
                    Place::Local => match ip.and_then(host) {
                        Some(block) => out.push(tenant_block(&block, &[])),
                        None => notes.push(format!(
                            "service {name}: a pod here has no IPv4 address yet"
                        )),
                    },
                    Place::Provider(p) if p == provider => {}
                    Place::Provider(p) => {
                        notes.push(not_routed(&format!("service {name}'s pods on {p}")))
                    }
                }
            }
        }
    }
}

/// Whether `selector` matches `labels`, as Kubernetes decides.
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector
        .match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector.match_expressions.iter().all(|r| {
            let value = labels.get(&r.key);
            match r.operator.as_str() {
                "In" => value.is_some_and(|v| r.values.contains(v)),
                "NotIn" => value.is_none_or(|v| !r.values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

fn kube_selector(selector: &LabelSelector) -> KubeSelector {
    KubeSelector {
        match_labels: (!selector.match_labels.is_empty()).then(|| selector.match_labels.clone()),
        match_expressions: (!selector.match_expressions.is_empty()).then(|| {
            selector
                .match_expressions
                .iter()
                .map(|r| LabelSelectorRequirement {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    values: (!r.values.is_empty()).then(|| r.values.clone()),
                })
                .collect()
        }),
    }
}

fn tenant_selector(selector: &LabelSelector) -> Selector {
    Selector {
        match_labels: selector.match_labels.clone(),
        match_expressions: selector
            .match_expressions
            .iter()
            .map(|r| TenantRequirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone(),
            })
            .collect(),
    }
}

/// As the API server stores it (`protocol` defaults to TCP), so that a
/// stored policy compares equal to a rendered one.
fn kube_port(port: &Port) -> NetworkPolicyPort {
    NetworkPolicyPort {
        protocol: Some(port.protocol.clone().unwrap_or_else(|| "TCP".to_string())),
        port: port.port.clone(),
        end_port: port.end_port,
    }
}

fn tenant_port(port: &Port) -> TenantPort {
    TenantPort {
        protocol: port.protocol.clone(),
        port: port.port.as_ref().map(|p| match p {
            IntOrString::Int(n) => PortRef::Number(u16::try_from(*n).unwrap_or(0)),
            IntOrString::String(s) => PortRef::Name(s.clone()),
        }),
        end_port: port.end_port.and_then(|e| u16::try_from(e).ok()),
    }
}

#[cfg(test)]
mod tests;
