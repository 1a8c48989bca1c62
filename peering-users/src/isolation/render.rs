//! What isolation wants on this provider, decided from what was read (no
//! effects): one NetworkPolicy in each namespace a consumer offloaded
//! here, one in each protected namespace of the provider's, and one in
//! each instance namespace of a service sold here ([`service`]).
//!
//! A consumer's namespaces are those Liqo labels `liqo.io/remote-cluster-id=X`
//! (`namespacemap-controller/enforcement.go:56-66`, stamped from the
//! authenticated consumer by the CRD replicator, `handler.go:334-345`)
//! without `liqo.io/tenant-namespace`, which marks Liqo's own tenant
//! namespace of the same consumer (`namespaceManager.go:136-150`), where
//! its gateway runs. Namespace names and pod labels are the consumer's
//! choice, so nothing here keys on them.
//!
//! In each of X's namespaces, one policy selects every pod, both
//! directions, and admits only:
//! - X's namespaces on this provider (a `namespaceSelector`);
//! - X's pods and external addresses in its other clusters, as this
//!   provider sees them: the remapped CIDRs of X's `Configuration`
//!   (`status.remote.cidr.{pod,external}`, `configuration_types.go:59-65`);
//!   offloaded pods reach their own API server through an address of the
//!   external CIDR (`pkg/utils/ipam/mapping/ips.go:36-71`), so this covers
//!   it;
//! - egress to the cluster DNS;
//! - opt-ins of the provider: egress to the internet (every address but
//!   the internal ranges and the tenants' CIDRs), ingress from namespaces it
//!   names (its ingress controller, its monitoring);
//! - X's pods on other providers that Liqo lets X's pods here reach
//!   directly, each as a `/32` at the address this provider sees it at
//!   ([`direct`], `--isolation-direct-connections`);
//! - egress to the instance namespaces of the services X bought here
//!   ([`service`]).
//!
//! A buyer may ask for its own policy on its pods here ([`buyer`]): it is
//! rendered beside, never wider than, the above, and in a namespace where
//! such policies select pods for a direction, the tenant isolation for
//! that direction is split off and narrowed to the pods none of them
//! selects ([`complement`]), as policies add up.
//!
//! In each protected namespace, one ingress policy admits every namespace
//! that is not a consumer's, Liqo's tenant namespaces, and every address
//! but the consumers' CIDRs. NetworkPolicies add up (an allow never
//! narrows), so a protected namespace that already has ingress policies of
//! its own is left to them: adding this one would widen them.

use std::collections::{BTreeMap, BTreeSet};

use controller_core::liqo::{REMOTE_CLUSTER_ID_LABEL, TENANT_NAMESPACE_LABEL};
use ipnet::Ipv4Net;
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use catalog_client::wire::TenantPolicyReport;

pub mod buyer;
pub mod complement;
pub mod direct;
pub mod service;

pub use buyer::{BuyerPolicies, BuyerPolicy};

/// Marks the policies this controller owns (and only those are changed or
/// deleted by it).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "liqo-broker-isolation";
/// `tenant`, `protection`, `buyer` ([`buyer::ROLE`]) or `service`
/// ([`service::ROLE`]): which policy it is.
pub const ROLE_LABEL: &str = "broker.liqo-broker.io/isolation";
/// The selector that lists this controller's policies.
pub const OWNED_SELECTOR: &str = "app.kubernetes.io/managed-by=liqo-broker-isolation";

/// The policy in each of a consumer's namespaces; in a namespace where
/// a buyer's policies select pods, `<this>-ingress-<i>` and
/// `<this>-egress-<i>` instead.
pub const TENANT_POLICY: &str = "liqo-broker-tenant-isolation";
/// The policy in each protected namespace.
pub const PROTECTION_POLICY: &str = "liqo-broker-provider-protection";

/// Widest CIDR taken as a consumer's: Liqo's default IPAM pool is a /8
/// (`deployments/liqo/values.yaml` `ipam.pools`), and its IPAM hands out
/// prefixes of the size asked only when free (`pkg/ipam/networks.go:29-38`).
/// A wider one is not rendered: it would open a consumer's pods to most of
/// the address space, or hide the internet from every other.
pub const WIDEST_PREFIX: u8 = 8;

/// The provider's choices (flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `--isolation`: false renders nothing (and a pass removes what was
    /// rendered).
    pub enabled: bool,
    /// Namespaces of the provider's own that consumers' ranges may not
    /// reach.
    pub protected: BTreeSet<String>,
    /// Whether consumers' pods may reach the internet: every IPv4 address
    /// but `internal` and the consumers' CIDRs.
    pub internet_egress: bool,
    /// Ranges never counted as the internet (the private, shared and
    /// link-local ranges by default: the cluster's networks and the cloud's
    /// metadata address are in them).
    pub internal: Vec<Ipv4Net>,
    /// Namespaces (by labels) whose pods may reach consumers' pods: the
    /// provider's ingress controller, its monitoring.
    pub ingress_from: Vec<BTreeMap<String, String>>,
    /// Where the cluster DNS runs.
    pub dns_namespace: String,
    pub dns_pod_labels: BTreeMap<String, String>,
    /// Whether a consumer's pods may reach its pods on other providers
    /// directly, as Liqo routes them ([`direct`]).
    pub direct_connections: bool,
    /// This provider's cluster ID (its catalog credentials', the one Liqo
    /// knows it by; not a flag); empty when not known.
    pub cluster_id: String,
}

/// A namespace as read: its name and labels, and the contract it serves
/// if it is a service's instance namespace ([`service::is_instance`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Its [`service::CONTRACT_ANNOTATION`].
    pub contract: Option<String>,
}

/// A Liqo `Configuration` as read: where it is, whose it says it is, the
/// remapped CIDRs of its status and the consumer's real ones of its spec
/// (text, as written; `configuration_types.go:43-70`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Configuration {
    pub namespace: String,
    pub name: String,
    /// Its `liqo.io/remote-cluster-id` label.
    pub cluster_id: Option<String>,
    /// `status.remote.cidr.pod`: as this provider sees them.
    pub pod: Vec<String>,
    /// `status.remote.cidr.external`.
    pub external: Vec<String>,
    /// `spec.remote.cidr.pod`: the consumer's own (paired with `pod` by
    /// index).
    pub real_pod: Vec<String>,
    /// `spec.remote.cidr.external`.
    pub real_external: Vec<String>,
}

/// Everything a decision reads.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub namespaces: Vec<Namespace>,
    pub configurations: Vec<Configuration>,
    /// Per protected or service instance namespace, the names of the
    /// ingress policies others wrote there.
    pub foreign_ingress: BTreeMap<String, Vec<String>>,
    /// The ShadowEndpointSlices that carry Liqo's direct-connection
    /// annotation ([`direct`]; none read with `direct_connections` off).
    pub shadow_endpoint_slices: Vec<direct::ShadowEndpointSlice>,
    /// The NamespaceOffloadings, for the customers of services ([`service`]).
    pub offloadings: Vec<service::Offloading>,
    /// The buyers' own policies, by consumer cluster ID
    /// ([`buyer::from_contracts`]).
    pub buyer_policies: BuyerPolicies,
}

/// A consumer's CIDRs as this provider sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranges {
    pub pod: Vec<Ipv4Net>,
    pub external: Vec<Ipv4Net>,
}

impl Ranges {
    fn all(&self) -> impl Iterator<Item = &Ipv4Net> {
        self.pod.iter().chain(&self.external)
    }
}

/// What one consumer gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    pub namespaces: Vec<String>,
    /// `None`: no Configuration (Liqo networking off for this consumer):
    /// only its namespaces here, DNS and the opt-ins are admitted.
    pub ranges: Option<Ranges>,
    /// Its pods on other providers it may reach directly, `/32`s
    /// ([`direct`]).
    pub direct: Vec<Ipv4Net>,
    /// The instance namespaces of the services it bought here
    /// ([`service`]).
    pub services: Vec<String>,
}

/// Something read that was not rendered, and why (logged, counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub what: String,
    pub why: String,
}

/// The decision.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The policies wanted, in a stable order.
    pub policies: Vec<NetworkPolicy>,
    /// Consumers by cluster ID.
    pub tenants: BTreeMap<String, Tenant>,
    pub skipped: Vec<Skipped>,
    /// Per contract carrying a buyer's policy, what became of it.
    pub reports: BTreeMap<String, TenantPolicyReport>,
}

/// The consumer a namespace belongs to: its `liqo.io/remote-cluster-id`,
/// unless it is Liqo's tenant namespace.
pub fn consumer_of(labels: &BTreeMap<String, String>) -> Option<&str> {
    if labels.contains_key(TENANT_NAMESPACE_LABEL) {
        return None;
    }
    labels
        .get(REMOTE_CLUSTER_ID_LABEL)
        .map(String::as_str)
        .filter(|id| !id.is_empty())
}

/// Decide the policies.
pub fn plan(observed: &Observed, settings: &Settings) -> Plan {
    if !settings.enabled {
        let reports = observed
            .buyer_policies
            .values()
            .map(|b| {
                let why = "tenant isolation is off on this provider (--isolation=false)";
                (b.contract.clone(), buyer::refuse_all(b, why))
            })
            .collect();
        return Plan {
            reports,
            ..Plan::default()
        };
    }
    let mut skipped = Vec::new();
    let mut tenants: BTreeMap<String, Tenant> = BTreeMap::new();
    for ns in &observed.namespaces {
        if let Some(id) = consumer_of(&ns.labels) {
            tenants
                .entry(id.to_string())
                .or_insert_with(|| Tenant {
                    namespaces: Vec::new(),
                    ranges: None,
                    direct: Vec::new(),
                    services: Vec::new(),
                })
                .namespaces
                .push(ns.name.clone());
        }
    }
    // Every cluster's ranges, consumers' or not (a service's customer, a
    // provider reached directly).
    let ranges = ranges_by_consumer(observed, &mut skipped);
    for (id, r) in &ranges {
        if let Some(t) = tenants.get_mut(id) {
            t.ranges = Some(r.clone());
        }
    }
    let instances = service::instances(&observed.namespaces, &observed.offloadings);
    for (ns, customers) in &instances {
        if settings.protected.contains(*ns) {
            continue;
        }
        for c in customers {
            if let Some(t) = tenants.get_mut(c) {
                t.services.push(ns.to_string());
            }
        }
    }
    if settings.direct_connections {
        let consumer_of: BTreeMap<String, String> = tenants
            .iter()
            .flat_map(|(id, t)| t.namespaces.iter().map(|n| (n.clone(), id.clone())))
            .collect();
        let buyers: BTreeSet<String> = tenants
            .keys()
            .cloned()
            .chain(instances.values().flatten().cloned())
            .collect();
        let mut configurations: BTreeMap<String, Vec<&Configuration>> = BTreeMap::new();
        for (id, conf) in in_place(observed) {
            configurations.entry(id.to_string()).or_default().push(conf);
        }
        let ctx = direct::Context {
            consumer_of: &consumer_of,
            buyers: &buyers,
            own: &settings.cluster_id,
            configurations: &configurations,
            ranges: &ranges,
        };
        for (id, nets) in direct::admitted(&ctx, &observed.shadow_endpoint_slices, &mut skipped) {
            if let Some(t) = tenants.get_mut(&id) {
                t.direct = nets;
            }
        }
    }
    // Every consumer's ranges, the ones with no namespace here included:
    // they are kept out of the other consumers and of protected namespaces
    // all the same.
    let every_range: BTreeSet<Ipv4Net> = ranges_everywhere(observed, &mut Vec::new())
        .values()
        .flat_map(|r| r.all().copied().collect::<Vec<_>>())
        .collect();

    let mut policies = Vec::new();
    let mut reports = BTreeMap::new();
    let mut narrowed: BTreeMap<String, buyer::Narrowed> = BTreeMap::new();
    for (id, wanted) in &observed.buyer_policies {
        let tenant = tenants.get(id);
        let ctx = buyer::Context {
            id,
            tenant,
            translations: buyer::translations(observed, id, tenant.and_then(|t| t.ranges.as_ref())),
            every_range: &every_range,
            settings,
        };
        let rendered = buyer::render(&ctx, wanted);
        policies.extend(rendered.policies);
        narrowed.extend(rendered.narrowed);
        reports.insert(wanted.contract.clone(), rendered.report);
    }
    for (id, tenant) in &tenants {
        for ns in &tenant.namespaces {
            if settings.protected.contains(ns) {
                skipped.push(Skipped {
                    what: format!("namespace {ns}"),
                    why: format!("it is protected, yet labelled as consumer {id}'s"),
                });
                continue;
            }
            match narrowed.get(ns) {
                Some(n) if n.ingress.is_some() || n.egress.is_some() => policies.extend(
                    split_tenant_policies(ns, id, tenant, n, &every_range, settings),
                ),
                _ => policies.push(tenant_policy(ns, id, tenant, &every_range, settings)),
            }
        }
    }
    let present: BTreeSet<&str> = observed
        .namespaces
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    for ns in &settings.protected {
        if !present.contains(ns.as_str()) {
            continue;
        }
        if let Some(theirs) = observed.foreign_ingress.get(ns).filter(|p| !p.is_empty()) {
            skipped.push(Skipped {
                what: format!("namespace {ns}"),
                why: format!(
                    "it has ingress policies of its own ({}), which decide who reaches it, consumers included; a policy added beside them would widen them",
                    theirs.join(", ")
                ),
            });
            continue;
        }
        policies.push(protection_policy(ns, &every_range));
    }
    for (ns, customers) in &instances {
        if settings.protected.contains(*ns) {
            skipped.push(Skipped {
                what: format!("service instance namespace {ns}"),
                why: "it is protected: no consumer reaches it, its customers included".into(),
            });
            continue;
        }
        if let Some(theirs) = observed.foreign_ingress.get(*ns).filter(|p| !p.is_empty()) {
            skipped.push(Skipped {
                what: format!("service instance namespace {ns}"),
                why: format!(
                    "it has ingress policies of its own ({}), which decide who reaches it; a policy added beside them would widen them",
                    theirs.join(", ")
                ),
            });
            continue;
        }
        policies.push(service::policy(ns, customers, &ranges, settings));
    }
    policies.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    Plan {
        policies,
        tenants,
        skipped,
        reports,
    }
}

/// Each consumer's ranges from the Configurations in its own tenant
/// namespace only: a consumer's peering user may write Configurations
/// there (`liqo-peering-user-tenant-ns-ClusterRole.yaml`), with any label,
/// but their status only Liqo's IPAM writes (the role has no
/// `configurations/status`). A range wider than [`WIDEST_PREFIX`], or one
/// that overlaps another consumer's, is left out (which admits less).
fn ranges_by_consumer(observed: &Observed, skipped: &mut Vec<Skipped>) -> BTreeMap<String, Ranges> {
    let mut by = ranges_everywhere(observed, skipped);
    let owners: Vec<(Ipv4Net, String)> = by
        .iter()
        .flat_map(|(id, r)| r.all().map(|n| (*n, id.clone())).collect::<Vec<_>>())
        .collect();
    for (id, r) in by.iter_mut() {
        let clashes = |net: &Ipv4Net| {
            owners
                .iter()
                .find(|(other, owner)| owner != id && overlap(net, other))
                .map(|(other, owner)| (*other, owner.clone()))
        };
        for list in [&mut r.pod, &mut r.external] {
            list.retain(|net| match clashes(net) {
                None => true,
                Some((other, owner)) => {
                    skipped.push(Skipped {
                        what: format!("consumer {id}'s range {net}"),
                        why: format!("it overlaps consumer {owner}'s {other}"),
                    });
                    false
                }
            });
        }
    }
    by
}

/// Liqo's tenant namespaces here: name → the cluster ID they are for.
fn tenant_namespaces(observed: &Observed) -> BTreeMap<&str, &str> {
    observed
        .namespaces
        .iter()
        .filter(|n| n.labels.contains_key(TENANT_NAMESPACE_LABEL))
        .filter_map(|n| {
            n.labels
                .get(REMOTE_CLUSTER_ID_LABEL)
                .map(|id| (n.name.as_str(), id.as_str()))
        })
        .collect()
}

/// The Configurations that sit in the tenant namespace of the cluster
/// they name, with that cluster's ID.
fn in_place(observed: &Observed) -> impl Iterator<Item = (&str, &Configuration)> {
    let tenant_ns = tenant_namespaces(observed);
    observed.configurations.iter().filter_map(move |conf| {
        let id = conf.cluster_id.as_deref()?;
        (tenant_ns.get(conf.namespace.as_str()) == Some(&id)).then_some((id, conf))
    })
}

/// The ranges of every Configuration that sits in its consumer's tenant
/// namespace, before the overlap check.
fn ranges_everywhere(observed: &Observed, skipped: &mut Vec<Skipped>) -> BTreeMap<String, Ranges> {
    let tenant_ns = tenant_namespaces(observed);
    let mut by: BTreeMap<String, Ranges> = BTreeMap::new();
    for conf in &observed.configurations {
        let Some(id) = conf.cluster_id.as_deref() else {
            continue;
        };
        if tenant_ns.get(conf.namespace.as_str()) != Some(&id) {
            skipped.push(Skipped {
                what: format!("Configuration {}/{}", conf.namespace, conf.name),
                why: format!("it names consumer {id} outside that consumer's tenant namespace"),
            });
            continue;
        }
        let entry = by.entry(id.to_string()).or_default();
        for (texts, into) in [
            (&conf.pod, &mut entry.pod),
            (&conf.external, &mut entry.external),
        ] {
            for text in texts {
                match parse(text) {
                    Ok(net) if !into.contains(&net) => into.push(net),
                    Ok(_) => {}
                    Err(why) => skipped.push(Skipped {
                        what: format!(
                            "Configuration {}/{} range {text:?}",
                            conf.namespace, conf.name
                        ),
                        why,
                    }),
                }
            }
        }
    }
    by
}

/// A CIDR as Liqo writes it (`10.70.0.0/16`), host bits cleared.
fn parse(text: &str) -> Result<Ipv4Net, String> {
    let net: Ipv4Net = text
        .trim()
        .parse()
        .map_err(|_| "not an IPv4 CIDR (only IPv4 is rendered)".to_string())?;
    if net.prefix_len() < WIDEST_PREFIX {
        return Err(format!("wider than a /{WIDEST_PREFIX}"));
    }
    Ok(net.trunc())
}

fn overlap(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(b) || b.contains(a)
}

fn labels(role: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
        (ROLE_LABEL.to_string(), role.to_string()),
    ])
}

fn meta(namespace: &str, name: &str, role: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        labels: Some(labels(role)),
        ..ObjectMeta::default()
    }
}

fn requirement(key: &str, operator: &str) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: None,
    }
}

/// Consumer `id`'s namespaces: its label, and not Liqo's tenant namespace.
fn consumer_namespaces(id: &str) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                REMOTE_CLUSTER_ID_LABEL.to_string(),
                id.to_string(),
            )])),
            match_expressions: Some(vec![requirement(TENANT_NAMESPACE_LABEL, "DoesNotExist")]),
        }),
        ..NetworkPolicyPeer::default()
    }
}

fn block(cidr: &Ipv4Net, except: Vec<String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.to_string(),
            except: (!except.is_empty()).then_some(except),
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// The namespace `name`, by the label Kubernetes gives every namespace
/// (`kubernetes.io/metadata.name`).
fn namespace_named(name: &str) -> NetworkPolicyPeer {
    namespaces_labelled(&BTreeMap::from([(
        "kubernetes.io/metadata.name".to_string(),
        name.to_string(),
    )]))
}

fn namespaces_labelled(labels: &BTreeMap<String, String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(labels.clone()),
            match_expressions: None,
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// Every IPv4 address.
fn everything() -> Ipv4Net {
    Ipv4Net::default()
}

/// `cidrs` as `except` entries of `0.0.0.0/0`, those inside another
/// entry dropped.
fn excepted<'a>(cidrs: impl IntoIterator<Item = &'a Ipv4Net>) -> Vec<String> {
    let all: BTreeSet<Ipv4Net> = cidrs.into_iter().copied().collect();
    all.iter()
        .filter(|n| !all.iter().any(|m| m != *n && m.contains(*n)))
        .map(Ipv4Net::to_string)
        .collect()
}

/// What the default isolation admits of consumer `id` itself: its
/// namespaces here and its ranges as this provider sees them.
fn own_peers(id: &str, tenant: &Tenant) -> Vec<NetworkPolicyPeer> {
    let mut same: Vec<NetworkPolicyPeer> = vec![consumer_namespaces(id)];
    if let Some(ranges) = &tenant.ranges {
        same.extend(ranges.all().map(|net| block(net, Vec::new())));
    }
    same
}

/// Egress to the cluster DNS, port 53 UDP and TCP.
fn dns_rule(settings: &Settings) -> NetworkPolicyEgressRule {
    let dns_port = |protocol: &str| NetworkPolicyPort {
        port: Some(IntOrString::Int(53)),
        protocol: Some(protocol.to_string()),
        end_port: None,
    };
    NetworkPolicyEgressRule {
        to: Some(vec![NetworkPolicyPeer {
            namespace_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "kubernetes.io/metadata.name".to_string(),
                    settings.dns_namespace.clone(),
                )])),
                match_expressions: None,
            }),
            pod_selector: Some(LabelSelector {
                match_labels: Some(settings.dns_pod_labels.clone()),
                match_expressions: None,
            }),
            ip_block: None,
        }]),
        ports: Some(vec![dns_port("UDP"), dns_port("TCP")]),
    }
}

/// The tenant isolation's rules, each direction.
fn tenant_rules(
    id: &str,
    tenant: &Tenant,
    every_range: &BTreeSet<Ipv4Net>,
    settings: &Settings,
) -> (Vec<NetworkPolicyIngressRule>, Vec<NetworkPolicyEgressRule>) {
    let mut same = own_peers(id, tenant);
    same.extend(tenant.direct.iter().map(|net| block(net, Vec::new())));
    let mut ingress = vec![NetworkPolicyIngressRule {
        from: Some(same.clone()),
        ports: None,
    }];
    for labels in &settings.ingress_from {
        ingress.push(NetworkPolicyIngressRule {
            from: Some(vec![namespaces_labelled(labels)]),
            ports: None,
        });
    }
    let mut egress = vec![
        NetworkPolicyEgressRule {
            to: Some(same),
            ports: None,
        },
        dns_rule(settings),
    ];
    if !tenant.services.is_empty() {
        egress.push(NetworkPolicyEgressRule {
            to: Some(
                tenant
                    .services
                    .iter()
                    .map(|ns| namespace_named(ns))
                    .collect(),
            ),
            ports: None,
        });
    }
    if settings.internet_egress {
        egress.push(NetworkPolicyEgressRule {
            to: Some(vec![block(
                &everything(),
                excepted(settings.internal.iter().chain(every_range)),
            )]),
            ports: None,
        });
    }
    (ingress, egress)
}

fn tenant_policy(
    namespace: &str,
    id: &str,
    tenant: &Tenant,
    every_range: &BTreeSet<Ipv4Net>,
    settings: &Settings,
) -> NetworkPolicy {
    let (ingress, egress) = tenant_rules(id, tenant, every_range, settings);
    NetworkPolicy {
        metadata: meta(namespace, TENANT_POLICY, "tenant"),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector::default()),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(ingress),
            egress: Some(egress),
        }),
    }
}

/// The tenant isolation of a namespace where a buyer's policies select
/// pods: per direction, one policy per term of the pods none of them
/// selects for it (`<TENANT_POLICY>-ingress-<i>`, `-egress-<i>`; a
/// direction no buyer policy has: one term, every pod).
fn split_tenant_policies(
    namespace: &str,
    id: &str,
    tenant: &Tenant,
    narrowed: &buyer::Narrowed,
    every_range: &BTreeSet<Ipv4Net>,
    settings: &Settings,
) -> Vec<NetworkPolicy> {
    let (ingress, egress) = tenant_rules(id, tenant, every_range, settings);
    let mut out = Vec::new();
    for (direction, kind, terms) in [
        ("ingress", "Ingress", &narrowed.ingress),
        ("egress", "Egress", &narrowed.egress),
    ] {
        let terms = terms.clone().unwrap_or_else(complement::everything);
        for (i, term) in terms.iter().enumerate() {
            let is_ingress = direction == "ingress";
            out.push(NetworkPolicy {
                metadata: meta(
                    namespace,
                    &format!("{TENANT_POLICY}-{direction}-{i}"),
                    "tenant",
                ),
                spec: Some(NetworkPolicySpec {
                    pod_selector: Some(term.selector()),
                    policy_types: Some(vec![kind.into()]),
                    ingress: is_ingress.then(|| ingress.clone()),
                    egress: (!is_ingress).then(|| egress.clone()),
                }),
            });
        }
    }
    out
}

fn protection_policy(namespace: &str, every_range: &BTreeSet<Ipv4Net>) -> NetworkPolicy {
    let not_a_consumer = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![requirement(REMOTE_CLUSTER_ID_LABEL, "DoesNotExist")]),
        }),
        ..NetworkPolicyPeer::default()
    };
    let liqo_tenant_namespaces = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![requirement(TENANT_NAMESPACE_LABEL, "Exists")]),
        }),
        ..NetworkPolicyPeer::default()
    };
    NetworkPolicy {
        metadata: meta(namespace, PROTECTION_POLICY, "protection"),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector::default()),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![
                    not_a_consumer,
                    liqo_tenant_namespaces,
                    block(&everything(), excepted(every_range)),
                ]),
                ports: None,
            }]),
            egress: None,
        }),
    }
}

/// The ranges never counted as the internet by default: RFC 1918's,
/// RFC 6598's shared space, link-local (the clouds' metadata address) and
/// loopback.
pub fn default_internal() -> Vec<Ipv4Net> {
    [
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "169.254.0.0/16",
        "127.0.0.0/8",
    ]
    .iter()
    .filter_map(|t| t.parse().ok())
    .collect()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod buyer_tests;

#[cfg(test)]
mod direct_tests;

#[cfg(test)]
mod service_tests;
