//! Direct provider-to-provider connections (pure): which pods of a
//! consumer's on *other* providers its pods here may reach, and be reached
//! by, without going through the consumer's cluster.
//!
//! Liqo v1.2 allows them unless `networking.denyDirectConnections`
//! (`deployments/liqo/values.yaml:59-61`, default `false`). For a Service
//! annotated `liqo.io/use-direct-connections: "true"`, consumer X's virtual
//! kubelet writes on the ShadowEndpointSlice it reflects to this provider
//! the annotation `liqo.io/direct-connections-data`,
//! `{"clusterAddresses": {"<cluster Q>": ["<ip>", …]}}`: the endpoints
//! running on X's virtual nodes for other providers Q
//! (`pkg/virtualKubelet/reflection/exposition/endpointslice.go:215-283`,
//! `pkg/utils/directconnection/directconnection.go:28-30`,
//! `pkg/consts/replication.go:99-104`). This provider's shadowendpointslice
//! controller remaps each such address with its *own* Configuration for Q:
//! the address must lie in one of its `spec.remote.cidr.pod` networks and
//! is moved, host bits kept, into the `status.remote.cidr.pod` network of
//! the same index
//! (`shadowendpointslice_controller.go:110-137`, `mapping.go:33-65`,
//! `pkg/utils/ipam/mapping/ips.go:162-212` `remapWithin`,
//! `ForceMapAddressWithConfiguration`, and `RemapMask`, 235-259). X's pods
//! here then talk to that pod on Q at the remapped address, through this
//! provider's tunnel to Q.
//!
//! Each such address, remapped as Liqo remaps it, is admitted as a `/32`
//! in X's tenant isolation, ingress and egress. The annotation is X's own
//! writing (its virtual kubelet's identity may write ShadowEndpointSlices in
//! X's namespaces here), so it is judged, and refused with the reason
//! ([`super::Skipped`]) when:
//! - it is not Liqo's JSON;
//! - Q is X itself (its ranges are admitted already), or this provider;
//! - Q is a consumer of this provider (it has namespaces here) or the
//!   customer of a service sold here: Q's network then holds another
//!   buyer's pods, and one buyer never reaches another;
//! - this provider has no Configuration for Q in Q's tenant namespace
//!   (`liqo-tenant-<Q>`; one elsewhere may be a peering user's writing,
//!   as for consumers' ranges);
//! - the address is not IPv4, not in Q's `spec.remote.cidr.pod` (Liqo
//!   would not remap it either), or its remapped address falls outside
//!   Q's ranges admitted here (a range refused as too wide or overlapping);
//! - past [`MAX_ADDRESSES`] distinct addresses for one consumer, so a
//!   hostile annotation cannot blow up a policy.
//!
//! What the pod at such an address on Q admits is Q's own isolation's to
//! decide: this only opens this provider's side, and only to addresses
//! Liqo itself routes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use super::{Configuration, Ranges, Skipped};

/// `consts.DirectConnectionDataAnnotationKey` (`pkg/consts/replication.go:104`).
pub const ANNOTATION: &str = "liqo.io/direct-connections-data";

/// Most addresses admitted for one consumer (distinct, the lowest first).
pub const MAX_ADDRESSES: usize = 1024;

/// Most refusals said for one consumer in a pass; the rest are counted.
pub const MAX_SKIPPED: usize = 16;

/// Longest piece of an annotation (a cluster ID, an address) quoted in a
/// refusal: the annotation is the consumer's writing.
const QUOTED: usize = 64;

/// A ShadowEndpointSlice as read: where it is and its direct-connection
/// annotation (only those that carry one are kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowEndpointSlice {
    pub namespace: String,
    pub name: String,
    /// The annotation's text, as written.
    pub data: String,
}

/// `directconnection.ClusterAddresses`: the one field Liqo reads; others
/// are ignored, as Go's `json.Unmarshal` ignores them.
#[derive(Debug, serde::Deserialize)]
struct ClusterAddresses {
    #[serde(rename = "clusterAddresses", default)]
    clusters: Option<BTreeMap<String, Vec<String>>>,
}

/// The annotation's addresses by cluster ID, or why it is not Liqo's JSON
/// (its position only: the text is the consumer's).
pub fn parse(data: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    serde_json::from_str::<ClusterAddresses>(data)
        .map(|c| c.clusters.unwrap_or_default())
        .map_err(|e| {
            format!(
                "its {ANNOTATION} annotation is not Liqo's JSON ({:?} error at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            )
        })
}

/// What deciding the direct connections reads.
pub struct Context<'a> {
    /// Each namespace's consumer (its [`super::consumer_of`]).
    pub consumer_of: &'a BTreeMap<String, String>,
    /// The clusters that are buyers here: consumers with namespaces, and
    /// customers of services sold here.
    pub buyers: &'a BTreeSet<String>,
    /// This provider's cluster ID (empty: not known).
    pub own: &'a str,
    /// Per cluster, its Configurations that sit in its tenant namespace.
    pub configurations: &'a BTreeMap<String, Vec<&'a Configuration>>,
    /// Per cluster, its ranges as admitted here (overlaps and too wide ones
    /// left out).
    pub ranges: &'a BTreeMap<String, Ranges>,
}

/// Per consumer, the remapped addresses its pods here may reach and be
/// reached by directly, as `/32`s, lowest first; refusals go to `skipped`.
pub fn admitted(
    ctx: &Context,
    slices: &[ShadowEndpointSlice],
    skipped: &mut Vec<Skipped>,
) -> BTreeMap<String, Vec<Ipv4Net>> {
    let mut ordered: Vec<&ShadowEndpointSlice> = slices.iter().collect();
    ordered.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut wanted: BTreeMap<&str, BTreeSet<Ipv4Addr>> = BTreeMap::new();
    let mut refused: BTreeMap<&str, Vec<Skipped>> = BTreeMap::new();
    for slice in ordered {
        let Some(x) = ctx.consumer_of.get(&slice.namespace) else {
            continue;
        };
        let what = format!("ShadowEndpointSlice {}/{}", slice.namespace, slice.name);
        let refusals = refused.entry(x.as_str()).or_default();
        let clusters = match parse(&slice.data) {
            Ok(c) => c,
            Err(why) => {
                refusals.push(Skipped { what, why });
                continue;
            }
        };
        let into = wanted.entry(x.as_str()).or_default();
        for (q, addresses) in &clusters {
            // Per reason, how many addresses and the first one.
            let mut by_reason: BTreeMap<String, (usize, &str)> = BTreeMap::new();
            for address in addresses {
                match remapped(ctx, x, q, address) {
                    Ok(ip) => {
                        into.insert(ip);
                    }
                    Err(why) => by_reason.entry(why).or_insert((0, address)).0 += 1,
                }
            }
            for (why, (count, first)) in by_reason {
                refusals.push(Skipped {
                    what: format!(
                        "{what}: {count} address(es) of cluster {} ({} first)",
                        quoted(q),
                        quoted(first)
                    ),
                    why,
                });
            }
        }
    }
    let mut out = BTreeMap::new();
    for (x, refusals) in refused {
        let more = refusals.len().saturating_sub(MAX_SKIPPED);
        skipped.extend(refusals.into_iter().take(MAX_SKIPPED));
        if more > 0 {
            skipped.push(Skipped {
                what: format!("consumer {x}'s direct connections"),
                why: format!("{more} more refusals, not listed"),
            });
        }
    }
    for (x, addresses) in wanted {
        if addresses.len() > MAX_ADDRESSES {
            skipped.push(Skipped {
                what: format!("consumer {x}'s direct connections"),
                why: format!(
                    "{} addresses beyond the first {MAX_ADDRESSES} are not admitted (a bound, so that no annotation blows up a policy)",
                    addresses.len() - MAX_ADDRESSES
                ),
            });
        }
        let nets: Vec<Ipv4Net> = addresses
            .into_iter()
            .take(MAX_ADDRESSES)
            .map(Ipv4Net::from)
            .collect();
        if !nets.is_empty() {
            out.insert(x.to_string(), nets);
        }
    }
    out
}

/// `address` of cluster `q`, named by consumer `x`, as this provider
/// reaches it, or why not.
fn remapped(ctx: &Context, x: &str, q: &str, address: &str) -> Result<Ipv4Addr, String> {
    if q == x {
        return Err(format!(
            "it names consumer {x} itself, whose ranges are admitted already"
        ));
    }
    if !ctx.own.is_empty() && q == ctx.own {
        return Err("it names this provider".into());
    }
    if ctx.buyers.contains(q) {
        return Err(format!(
            "cluster {} buys from this provider too: its network holds another buyer's pods, and one buyer never reaches another",
            quoted(q)
        ));
    }
    let Some(configurations) = ctx.configurations.get(q).filter(|c| !c.is_empty()) else {
        return Err(format!(
            "this provider has no Configuration for cluster {} in its tenant namespace, so Liqo routes nothing to it",
            quoted(q)
        ));
    };
    let ip: Ipv4Addr = address
        .trim()
        .parse()
        .map_err(|_| "not an IPv4 address (only IPv4 is rendered)".to_string())?;
    let seen = configurations
        .iter()
        .find_map(|c| remap_within(ip, &c.real_pod, &c.pod))
        .ok_or_else(|| {
            format!(
                "not in cluster {}'s pod CIDR (spec.remote.cidr.pod of its Configuration here), so Liqo does not remap it",
                quoted(q)
            )
        })?;
    let inside = ctx
        .ranges
        .get(q)
        .is_some_and(|r| r.pod.iter().any(|n| n.contains(&seen)));
    if !inside {
        return Err(format!(
            "its remapped address is not in cluster {}'s pod ranges admitted here (one refused above)",
            quoted(q)
        ));
    }
    Ok(seen)
}

/// `remapWithin` (`pkg/utils/ipam/mapping/ips.go:162-187`): the first
/// network of `spec` holding `ip` decides; its pair in `status` (same
/// index) takes the network bits, `ip` keeps the host bits (`RemapMask`,
/// 235-259). `None` when no network of `spec` holds it, or its pair is
/// missing or unreadable.
fn remap_within(ip: Ipv4Addr, spec: &[String], status: &[String]) -> Option<Ipv4Addr> {
    let i = spec
        .iter()
        .position(|s| s.trim().parse::<Ipv4Net>().is_ok_and(|n| n.contains(&ip)))?;
    let to: Ipv4Net = status.get(i)?.trim().parse().ok()?;
    let host = u32::from(ip) & u32::from(to.hostmask());
    Some(Ipv4Addr::from(u32::from(to.network()) | host))
}

/// A piece of the annotation as a refusal quotes it: escaped, and cut.
fn quoted(text: &str) -> String {
    if text.chars().count() <= QUOTED {
        return format!("{text:?}");
    }
    let cut: String = text.chars().take(QUOTED).collect();
    format!("{cut:?}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liqos_json_and_only_it_is_read() {
        let c = parse(r#"{"clusterAddresses": {"q": ["10.0.0.5"]}, "other": 1}"#).unwrap();
        assert_eq!(c["q"], ["10.0.0.5"]);
        assert!(parse("{}").unwrap().is_empty());
        let e = parse(r#"{"clusterAddresses": {"q": "10.0.0.5"}}"#).unwrap_err();
        assert!(e.contains("not Liqo's JSON"), "{e}");
        assert!(!e.contains("10.0.0.5"), "the text is not quoted: {e}");
    }

    #[test]
    fn remapping_keeps_the_host_bits_of_the_paired_network() {
        let ip = |t: &str| t.parse::<Ipv4Addr>().unwrap();
        let spec = vec!["10.0.0.0/16".to_string(), "10.9.0.0/16".to_string()];
        let status = vec!["10.91.0.0/16".to_string(), "10.99.0.0/16".to_string()];
        assert_eq!(
            remap_within(ip("10.9.3.4"), &spec, &status),
            Some(ip("10.99.3.4"))
        );
        assert_eq!(remap_within(ip("10.8.3.4"), &spec, &status), None);
        assert_eq!(remap_within(ip("10.9.3.4"), &spec, &status[..1]), None);
    }

    #[test]
    fn quotes_are_escaped_and_cut() {
        assert_eq!(quoted("a\nb"), "\"a\\nb\"");
        assert!(quoted(&"x".repeat(500)).len() < 80);
    }
}
