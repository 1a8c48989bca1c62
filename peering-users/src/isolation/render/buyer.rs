//! A buyer's own network policy for its pods on this provider (pure):
//! the [`TenantPolicy`] the catalog carries on its contracts
//! (`catalog_client::wire::tenant_policy`), rendered as NetworkPolicies in
//! that consumer's namespaces, never wider than the default isolation.
//!
//! Per policy of consumer X, all or nothing: it is refused as a whole
//! (reason reported) when its namespace is not one of X's here (as
//! [`super::consumer_of`] decides, protected ones excluded), a pod peer
//! names a namespace that is not X's, an address block is neither inside
//! X's real ranges (then translated into this provider's view of them) nor,
//! for egress with `--isolation-internet-egress`, an internet address, or
//! it is otherwise unrenderable. Otherwise it becomes one NetworkPolicy,
//! `liqo-broker-buyer-<name>-<hash>`, in its namespace:
//!
//! - pod peers → X's namespaces ([`super::consumer_namespaces`]), narrowed
//!   to the one named, with the pod selector;
//! - address blocks in X's own view → the same hosts of the remapped
//!   network this provider sees X's network as: Liqo's gateway NATs a
//!   remapped network to the real one 1:1, keeping host bits
//!   (spec §2, `external-network/remapping/cidr.go:153-227`,
//!   `pkg/utils/ipam/mapping/ips.go:135-160`), pairing a Configuration's
//!   `spec.remote.cidr` list with its `status.remote.cidr` list by index;
//! - a rule without peers → what the default isolation admits of X: its
//!   namespaces and remapped ranges (never DNS, the internet or the
//!   provider's opt-ins unless listed);
//! - egress always also admits the cluster DNS, as the tenant isolation
//!   does (offloaded pods resolve through this provider's DNS, spec §5).
//!
//! The namespaces' tenant isolation is then narrowed around the pods the
//! applied policies select ([`super::complement`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use catalog_client::wire::tenant_policy::{
    self, AppliedTenantPolicy, PortRef, RefusedTenantPolicy, Selector, TenantIpBlock,
    TenantNetworkPolicy, TenantPeer, TenantPolicy, TenantPolicyReport, TenantPort, TenantRule,
};
use catalog_client::wire::Contract;
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

use super::complement::{self, Term, MAX_TERMS};
use super::{Observed, Settings, Tenant};

/// The role label's value on a buyer's policy.
pub const ROLE: &str = "buyer";
/// The start of a buyer's policy's name.
pub const NAME_PREFIX: &str = "liqo-broker-buyer-";
/// Annotations naming where a rendered policy came from.
pub const CONTRACT_ANNOTATION: &str = "broker.liqo-broker.io/contract";
pub const POLICY_ANNOTATION: &str = "broker.liqo-broker.io/buyer-policy";

/// The label every namespace carries with its own name (Kubernetes sets
/// it, `NamespaceDefaultLabelName`).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A consumer's policy as the catalog carries it, on one of its contracts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuyerPolicy {
    pub contract: String,
    pub revision: u64,
    pub policy: TenantPolicy,
    /// The report the contract carries now (sent by this provider
    /// earlier), if any.
    pub reported: Option<TenantPolicyReport>,
}

/// By consumer cluster ID.
pub type BuyerPolicies = BTreeMap<String, BuyerPolicy>;

/// Per consumer cluster ID, the policy of its active contract updated
/// last (the contract id breaks a tie). `contracts` are those the
/// peering users serve: a contract of another buyer naming the same
/// cluster ID is not among them.
pub fn from_contracts<'a>(contracts: impl IntoIterator<Item = &'a Contract>) -> BuyerPolicies {
    let mut latest: BTreeMap<String, &Contract> = BTreeMap::new();
    for c in contracts {
        let (Some(id), Some(policy)) = (&c.consumer_cluster_id, &c.network_policy) else {
            continue;
        };
        if !c.active {
            continue;
        }
        let newer = latest.get(id).is_none_or(|before| {
            let before_at = before.network_policy.as_ref().map(|p| p.updated_at);
            (Some(policy.updated_at), &c.id) > (before_at, &before.id)
        });
        if newer {
            latest.insert(id.clone(), c);
        }
    }
    latest
        .into_iter()
        .filter_map(|(id, c)| {
            let p = c.network_policy.as_ref()?;
            Some((
                id,
                BuyerPolicy {
                    contract: c.id.clone(),
                    revision: p.revision,
                    policy: p.policy.clone(),
                    reported: p.report.clone(),
                },
            ))
        })
        .collect()
}

/// Per namespace, the pods the tenant isolation still selects for each
/// direction: `None`, every pod (no buyer policy selects any for it);
/// `Some(terms)`, those the terms select (none at all when empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Narrowed {
    pub ingress: Option<Vec<Term>>,
    pub egress: Option<Vec<Term>>,
}

/// One consumer's policy, rendered.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    pub policies: Vec<NetworkPolicy>,
    pub report: TenantPolicyReport,
    pub narrowed: BTreeMap<String, Narrowed>,
}

/// What rendering a consumer's policy reads.
pub struct Context<'a> {
    pub id: &'a str,
    /// None: the consumer has no namespace here.
    pub tenant: Option<&'a Tenant>,
    /// (real, as seen here) pairs of the consumer's networks.
    pub translations: Vec<(Ipv4Net, Ipv4Net)>,
    pub every_range: &'a BTreeSet<Ipv4Net>,
    pub settings: &'a Settings,
}

/// The consumer's networks, in its own view and as this provider sees
/// them, from the Configurations in its tenant namespace: `spec.remote.cidr`
/// and `status.remote.cidr` paired by index, as Liqo pairs them
/// (`pkg/utils/ipam/mapping/ips.go:162-187`); only pairs of one size whose
/// remapped network the default isolation admits (`admitted`).
pub fn translations(
    observed: &Observed,
    id: &str,
    admitted: Option<&super::Ranges>,
) -> Vec<(Ipv4Net, Ipv4Net)> {
    let Some(admitted) = admitted else {
        return Vec::new();
    };
    let tenant_ns: BTreeSet<&str> = observed
        .namespaces
        .iter()
        .filter(|n| {
            n.labels.contains_key(TENANT_NAMESPACE_LABEL)
                && n.labels.get(REMOTE_CLUSTER_ID_LABEL).map(String::as_str) == Some(id)
        })
        .map(|n| n.name.as_str())
        .collect();
    let mut out = Vec::new();
    for conf in &observed.configurations {
        if conf.cluster_id.as_deref() != Some(id) || !tenant_ns.contains(conf.namespace.as_str()) {
            continue;
        }
        for (real, seen, allowed) in [
            (&conf.real_pod, &conf.pod, &admitted.pod),
            (&conf.real_external, &conf.external, &admitted.external),
        ] {
            for (r, s) in real.iter().zip(seen) {
                let (Ok(r), Ok(s)) = (super::parse(r), super::parse(s)) else {
                    continue;
                };
                if r.prefix_len() == s.prefix_len()
                    && allowed.contains(&s)
                    && !out.contains(&(r, s))
                {
                    out.push((r, s));
                }
            }
        }
    }
    out
}

/// Render `buyer`, consumer `ctx.id`'s policy.
pub fn render(ctx: &Context, buyer: &BuyerPolicy) -> Rendered {
    let mut out = Rendered {
        report: TenantPolicyReport {
            revision: buyer.revision,
            ..TenantPolicyReport::default()
        },
        ..Rendered::default()
    };
    let mut names = BTreeSet::new();
    // Past the report's bound nothing is said (the catalog accepts at most
    // MAX_POLICIES anyway).
    let listed = buyer
        .policy
        .policies
        .iter()
        .take(tenant_policy::MAX_REPORT_ENTRIES);
    for (i, p) in listed.enumerate() {
        let refuse = |out: &mut Rendered, why: String| {
            out.report.refused.push(RefusedTenantPolicy {
                name: p.name.clone(),
                reason: bounded(why),
            })
        };
        if i >= tenant_policy::MAX_POLICIES {
            refuse(
                &mut out,
                format!("more than {} policies", tenant_policy::MAX_POLICIES),
            );
            continue;
        }
        if !names.insert(p.name.as_str()) {
            refuse(&mut out, "a policy of the same name comes earlier".into());
            continue;
        }
        let policy = match one(ctx, &buyer.contract, p) {
            Ok(policy) => policy,
            Err(why) => {
                refuse(&mut out, why);
                continue;
            }
        };
        let Some(policy) = policy else {
            // Neither direction: it restricts nothing, nothing to render.
            out.report.applied.push(AppliedTenantPolicy {
                name: p.name.clone(),
                network_policies: Vec::new(),
            });
            continue;
        };
        let mut next = out.narrowed.get(&p.namespace).cloned().unwrap_or_default();
        let mut too_many = Vec::new();
        for (direction, present, slot) in [
            ("ingress", p.ingress.is_some(), &mut next.ingress),
            ("egress", p.egress.is_some(), &mut next.egress),
        ] {
            if !present {
                continue;
            }
            let before = slot.take().unwrap_or_else(complement::everything);
            let terms = complement::without(&before, &p.pod_selector);
            if terms.len() > MAX_TERMS {
                too_many.push(direction);
            }
            *slot = Some(terms);
        }
        if !too_many.is_empty() {
            refuse(
                &mut out,
                format!(
                    "with the policies before it in {}, the pods no policy selects for {} would take more than {MAX_TERMS} NetworkPolicies",
                    p.namespace,
                    too_many.join(" and ")
                ),
            );
            continue;
        }
        out.narrowed.insert(p.namespace.clone(), next);
        out.report.applied.push(AppliedTenantPolicy {
            name: p.name.clone(),
            network_policies: vec![format!(
                "{}/{}",
                p.namespace,
                policy.metadata.name.as_deref().unwrap_or_default()
            )],
        });
        out.policies.push(policy);
    }
    out
}

/// Every policy of `buyer` refused for one reason (isolation off, say).
pub fn refuse_all(buyer: &BuyerPolicy, why: &str) -> TenantPolicyReport {
    TenantPolicyReport {
        revision: buyer.revision,
        applied: Vec::new(),
        refused: buyer
            .policy
            .policies
            .iter()
            .take(tenant_policy::MAX_REPORT_ENTRIES)
            .map(|p| RefusedTenantPolicy {
                name: p.name.clone(),
                reason: bounded(why.to_string()),
            })
            .collect(),
    }
}

fn bounded(mut why: String) -> String {
    if why.chars().count() > tenant_policy::MAX_REPORT_REASON {
        why = why
            .chars()
            .take(tenant_policy::MAX_REPORT_REASON - 1)
            .collect::<String>()
            + "…";
    }
    why
}

/// The name of the NetworkPolicy of the buyer's policy `name`: its
/// letters and digits (others as `-`), cut, and a hash of the whole name,
/// so different names never meet: `liqo-broker-buyer-shop-backend-1a2b3c4d`
/// (at most 63 characters).
pub fn network_policy_name(name: &str) -> String {
    let mut plain = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else {
            '-'
        };
        if c == '-' && (plain.is_empty() || plain.ends_with('-')) {
            continue;
        }
        plain.push(c);
    }
    let room = 63 - NAME_PREFIX.len() - 1 - 8;
    let mut plain: String = plain.chars().take(room).collect();
    while plain.ends_with('-') {
        plain.pop();
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, name.as_bytes());
    let hash: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if plain.is_empty() {
        format!("{NAME_PREFIX}{hash}")
    } else {
        format!("{NAME_PREFIX}{plain}-{hash}")
    }
}

/// One policy rendered; `None` when it has neither direction.
fn one(
    ctx: &Context,
    contract: &str,
    p: &TenantNetworkPolicy,
) -> Result<Option<NetworkPolicy>, String> {
    TenantPolicy {
        policies: vec![p.clone()],
    }
    .check()
    .map_err(|e| {
        let field = e.field.strip_prefix("policies[0].").unwrap_or(&e.field);
        format!("{field}: {}", e.message)
    })?;
    let Some(tenant) = ctx.tenant else {
        return Err(format!(
            "namespace {} is not one of consumer {}'s here (it has none)",
            p.namespace, ctx.id
        ));
    };
    if !tenant.namespaces.contains(&p.namespace) {
        return Err(format!(
            "namespace {} is not one of consumer {}'s here",
            p.namespace, ctx.id
        ));
    }
    if ctx.settings.protected.contains(&p.namespace) {
        return Err(format!(
            "namespace {} is one of the provider's protected namespaces",
            p.namespace
        ));
    }
    if p.ingress.is_none() && p.egress.is_none() {
        return Ok(None);
    }
    let mut types = Vec::new();
    let ingress = match &p.ingress {
        None => None,
        Some(rules) => {
            types.push("Ingress".to_string());
            let mut out = Vec::new();
            for r in rules {
                out.push(NetworkPolicyIngressRule {
                    from: Some(peers(ctx, tenant, r, false)?),
                    ports: ports(&r.ports),
                });
            }
            Some(out)
        }
    };
    let egress = match &p.egress {
        None => None,
        Some(rules) => {
            types.push("Egress".to_string());
            let mut out = Vec::new();
            for r in rules {
                out.push(NetworkPolicyEgressRule {
                    to: Some(peers(ctx, tenant, r, true)?),
                    ports: ports(&r.ports),
                });
            }
            out.push(super::dns_rule(ctx.settings));
            Some(out)
        }
    };
    let mut metadata: ObjectMeta = super::meta(&p.namespace, &network_policy_name(&p.name), ROLE);
    metadata.annotations = Some(BTreeMap::from([
        (CONTRACT_ANNOTATION.to_string(), contract.to_string()),
        (POLICY_ANNOTATION.to_string(), p.name.clone()),
    ]));
    Ok(Some(NetworkPolicy {
        metadata,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(&p.pod_selector)),
            policy_types: Some(types),
            ingress,
            egress,
        }),
    }))
}

fn peers(
    ctx: &Context,
    tenant: &Tenant,
    rule: &TenantRule,
    egress: bool,
) -> Result<Vec<NetworkPolicyPeer>, String> {
    if rule.peers.is_empty() {
        // What the default isolation admits of this consumer, no more.
        return Ok(super::own_peers(ctx.id, tenant));
    }
    rule.peers
        .iter()
        .map(|peer| match peer {
            TenantPeer {
                ip_block: Some(b), ..
            } => address_peer(ctx, b, egress),
            TenantPeer {
                pod_selector: Some(s),
                namespace,
                ..
            } => pod_peer(ctx, tenant, namespace.as_deref(), s),
            _ => Err("a peer with neither podSelector nor ipBlock".into()),
        })
        .collect()
}

fn pod_peer(
    ctx: &Context,
    tenant: &Tenant,
    namespace: Option<&str>,
    pods: &Selector,
) -> Result<NetworkPolicyPeer, String> {
    let mut peer = super::consumer_namespaces(ctx.id);
    if let Some(ns) = namespace {
        if !tenant.namespaces.iter().any(|n| n == ns) {
            return Err(format!(
                "a pod peer names namespace {ns}, not one of consumer {}'s here",
                ctx.id
            ));
        }
        if let Some(s) = peer.namespace_selector.as_mut() {
            s.match_labels
                .get_or_insert_with(BTreeMap::new)
                .insert(NAMESPACE_NAME_LABEL.to_string(), ns.to_string());
        }
    }
    peer.pod_selector = Some(selector(pods));
    Ok(peer)
}

fn cidr(text: &str) -> Result<Ipv4Net, String> {
    tenant_policy::parse_cidr(text)
        .and_then(|(addr, len)| Ipv4Net::new(addr, len).ok())
        .map(|n| n.trunc())
        .ok_or_else(|| format!("{text:?} is not an IPv4 CIDR"))
}

/// `net`, inside `real`, as the same hosts of `seen` (of `real`'s size).
fn translate(net: &Ipv4Net, real: &Ipv4Net, seen: &Ipv4Net) -> Ipv4Net {
    let host = u32::from(net.network()) & u32::from(real.hostmask());
    let addr = Ipv4Addr::from(u32::from(seen.network()) | host);
    Ipv4Net::new(addr, net.prefix_len()).map_or(*seen, |n| n.trunc())
}

fn address_peer(
    ctx: &Context,
    b: &TenantIpBlock,
    egress: bool,
) -> Result<NetworkPolicyPeer, String> {
    let net = cidr(&b.cidr)?;
    let mut except = Vec::new();
    for e in &b.except {
        let e = cidr(e)?;
        if !(net.contains(&e) && e.prefix_len() > net.prefix_len()) {
            return Err(format!(
                "ipBlock {}: except {e} is not strictly inside it",
                b.cidr
            ));
        }
        except.push(e);
    }
    let block = |cidr: Ipv4Net, except: Vec<Ipv4Net>| NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.to_string(),
            except: (!except.is_empty()).then(|| except.iter().map(Ipv4Net::to_string).collect()),
        }),
        ..NetworkPolicyPeer::default()
    };
    if let Some((real, seen)) = ctx
        .translations
        .iter()
        .find(|(real, _)| real.contains(&net))
    {
        let moved = |n: &Ipv4Net| translate(n, real, seen);
        return Ok(block(moved(&net), except.iter().map(moved).collect()));
    }
    let internet = egress
        && ctx.settings.internet_egress
        && !ctx
            .settings
            .internal
            .iter()
            .chain(ctx.every_range)
            .any(|r| super::overlap(r, &net));
    if internet {
        return Ok(block(net, except));
    }
    Err(format!(
        "ipBlock {} reaches outside consumer {}'s pods",
        b.cidr, ctx.id
    ))
}

fn selector(s: &Selector) -> LabelSelector {
    LabelSelector {
        match_labels: (!s.match_labels.is_empty()).then(|| s.match_labels.clone()),
        match_expressions: (!s.match_expressions.is_empty()).then(|| {
            s.match_expressions
                .iter()
                .map(|r| LabelSelectorRequirement {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    values: matches!(r.operator.as_str(), "In" | "NotIn").then(|| r.values.clone()),
                })
                .collect()
        }),
    }
}

fn ports(ports: &[TenantPort]) -> Option<Vec<NetworkPolicyPort>> {
    (!ports.is_empty()).then(|| {
        ports
            .iter()
            .map(|p| NetworkPolicyPort {
                protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                port: p.port.as_ref().map(|port| match port {
                    PortRef::Number(n) => IntOrString::Int(i32::from(*n)),
                    PortRef::Name(n) => IntOrString::String(n.clone()),
                }),
                end_port: p.end_port.map(i32::from),
            })
            .collect()
    })
}
