//! How a cluster names a peer's addresses, as Liqo v1.2.0 translates them
//! in `pkg/utils/ipam/mapping/ips.go` (IPS below): an address of one of the
//! peer's real networks (a Configuration's `spec.remote.cidr`) becomes the
//! same host of the network this cluster sees it as (`status.remote.cidr`,
//! which [`super::configuration`] fills from the IPAM, [`super::remap`]):
//! the network bits replaced, the host bits kept.
//!
//! On the wire the gateway does the same, 1:1: for each remapped network
//! the remapping controller
//! (`pkg/liqo-controller-manager/networking/external-network/remapping/cidr.go:152-215`)
//! writes a DNAT rule from the remapped network to the real one and an SNAT
//! rule the other way, each an nftables prefix NAT over a whole network
//! (`pkg/firewall/utils/natrule.go:138-171` `applyNatSubnet`: `NAT{Prefix:
//! true}` from the network's first to its last address), which maps each
//! address to the one with the same host bits. So the address a pod of the
//! consumer reaches a provider's pod at is the one [`translate`] gives, and
//! the one a provider's pod is seen from there.
//!
//! IPv4 only, as the model's IPAM ([`super::remap`]).

use std::net::{IpAddr, Ipv4Addr};

use serde_json::Value;

use super::remap::Cidr;

/// IPS:214-259 `RemapMask` (and the gateway's netmap): `ip`, an address of
/// `from`, as the same host of `to`. `None` when `ip` is not in `from` or
/// the two networks differ in size. (Liqo's IPAM only ever remaps a
/// network to one of its own size, as [`super::remap::remap`] does; Liqo's
/// `RemapMask` would keep the host bits under `to`'s mask whatever `from`
/// is, a case that never arises from a Configuration.)
pub fn translate(ip: Ipv4Addr, from: &Cidr, to: &Cidr) -> Option<Ipv4Addr> {
    if !from.contains(ip) || from.prefix != to.prefix {
        return None;
    }
    Some(Ipv4Addr::from(to.base | (u32::from(ip) & !to.netmask())))
}

/// `pkg/liqo-controller-manager/networking/utils/configuration.go:29-35`
/// `AreConfigurationNetworkCIDRsConfigured`: the Configuration's
/// `NetworkCIDRsConfigured` condition is `True` for its current
/// generation.
pub fn configured(configuration: &Value) -> bool {
    let generation = configuration["metadata"]["generation"]
        .as_i64()
        .unwrap_or(0);
    configuration["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "NetworkCIDRsConfigured")
        .is_some_and(|c| {
            c["status"] == "True" && c["observedGeneration"].as_i64().unwrap_or(0) == generation
        })
}

/// The CIDR strings of a list (`spec.remote.cidr.pod` and the like).
fn strings(list: &Value) -> Vec<&str> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// IPS:162-187 `remapWithin`: `Some` translation when a CIDR of `spec`
/// holds `ip` (the address itself when its `status` twin is the same
/// network, IPS:173-176), `None` when none does.
fn remap_within(
    ip: Ipv4Addr,
    address: &str,
    spec: &Value,
    status: &Value,
) -> Result<Option<String>, String> {
    let (spec, status) = (strings(spec), strings(status));
    for (i, text) in spec.iter().enumerate() {
        let from = Cidr::parse(text).ok_or_else(|| format!("parsing the spec CIDR {text:?}"))?;
        if !from.contains(ip) {
            continue;
        }
        // Liqo indexes the status list by the spec's index (IPS:174, 178);
        // a shorter status list, which Liqo would index out of range, is
        // an error here.
        let twin = status
            .get(i)
            .ok_or_else(|| format!("no status CIDR for the spec CIDR {text:?}"))?;
        if text == twin {
            return Ok(Some(address.to_string()));
        }
        let to = Cidr::parse(twin).ok_or_else(|| format!("parsing the status CIDR {twin:?}"))?;
        let mapped =
            translate(ip, &from, &to).ok_or_else(|| format!("{from} and {to} differ in size"))?;
        return Ok(Some(mapped.to_string()));
    }
    Ok(None)
}

/// IPS:134-160 `MapAddressWithConfiguration`: how this cluster sees
/// `address` of the peer whose Configuration is `configuration` — through
/// its pod networks first, then its external ones, unchanged when in
/// neither; an error when the Configuration is not remapped yet
/// ([`configured`]) or the address does not read. (An IPv6 address, which
/// no network of the model's IPv4 IPAM holds, is returned unchanged, as
/// Liqo returns an address no CIDR of its family holds.)
pub fn map_address_with_configuration(
    configuration: &Value,
    address: &str,
) -> Result<String, String> {
    if !configured(configuration) {
        return Err("configuration not remapped yet".into());
    }
    let ip = match address.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip,
        Ok(IpAddr::V6(_)) => return Ok(address.to_string()),
        Err(_) => return Err(format!("invalid IP {address:?}")),
    };
    let (spec, status) = (
        &configuration["spec"]["remote"]["cidr"],
        &configuration["status"]["remote"]["cidr"],
    );
    for kind in ["pod", "external"] {
        if let Some(mapped) = remap_within(ip, address, &spec[kind], &status[kind])
            .map_err(|e| format!("remapping the address within the {kind} CIDRs: {e}"))?
        {
            return Ok(mapped);
        }
    }
    Ok(address.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).unwrap()
    }

    fn ip(text: &str) -> Ipv4Addr {
        text.parse().unwrap()
    }

    #[test]
    fn the_host_bits_are_kept_and_the_network_bits_replaced() {
        let (from, to) = (cidr("10.244.0.0/16"), cidr("10.0.0.0/16"));
        assert_eq!(
            translate(ip("10.244.3.7"), &from, &to),
            Some(ip("10.0.3.7"))
        );
        assert_eq!(
            translate(ip("10.244.0.0"), &from, &to),
            Some(ip("10.0.0.0"))
        );
        assert_eq!(
            translate(ip("10.244.255.255"), &from, &to),
            Some(ip("10.0.255.255"))
        );
        // IPS:217-220's example, on networks of one size.
        assert_eq!(
            translate(ip("10.1.0.1"), &cidr("10.0.0.0/10"), &cidr("40.0.0.0/10")),
            Some(ip("40.1.0.1"))
        );
        // A network kept as it is maps each address to itself.
        assert_eq!(
            translate(ip("10.244.3.7"), &from, &from),
            Some(ip("10.244.3.7"))
        );
    }

    #[test]
    fn an_address_outside_the_network_or_networks_of_two_sizes_have_no_translation() {
        let (from, to) = (cidr("10.244.0.0/16"), cidr("10.0.0.0/16"));
        assert_eq!(translate(ip("10.245.0.1"), &from, &to), None);
        assert_eq!(
            translate(ip("10.244.0.1"), &from, &cidr("10.0.0.0/24")),
            None
        );
    }

    /// A Configuration as [`super::super::configuration`] leaves it for a
    /// peer on the chart's defaults seen from a cluster on them too.
    fn remapped(condition: &str, observed: i64) -> Value {
        json!({"metadata": {"generation": 2},
               "spec": {"remote": {"cidr": {"pod": ["10.244.0.0/16"], "external": ["10.70.0.0/16"]}}},
               "status": {"remote": {"cidr": {"pod": ["10.0.0.0/16"], "external": ["10.1.0.0/16"]}},
                          "conditions": [{"type": "NetworkCIDRsConfigured", "status": condition,
                                          "observedGeneration": observed}]}})
    }

    #[test]
    fn pod_then_external_networks_are_remapped_and_other_addresses_kept() {
        let cfg = remapped("True", 2);
        let map = |a: &str| map_address_with_configuration(&cfg, a);
        assert_eq!(map("10.244.0.2").unwrap(), "10.0.0.2");
        assert_eq!(map("10.70.1.9").unwrap(), "10.1.1.9");
        assert_eq!(map("192.168.1.1").unwrap(), "192.168.1.1");
        assert_eq!(map("fd00::1").unwrap(), "fd00::1");
        assert!(map("not-an-ip").unwrap_err().contains("invalid IP"));
    }

    #[test]
    fn a_network_that_did_not_clash_keeps_its_addresses() {
        let mut cfg = remapped("True", 2);
        cfg["status"]["remote"]["cidr"]["pod"] = json!(["10.244.0.0/16"]);
        assert_eq!(
            map_address_with_configuration(&cfg, "10.244.0.2").unwrap(),
            "10.244.0.2"
        );
    }

    #[test]
    fn a_configuration_not_remapped_for_its_generation_maps_nothing() {
        for cfg in [remapped("False", 2), remapped("True", 1), json!({})] {
            assert_eq!(
                map_address_with_configuration(&cfg, "10.244.0.2").unwrap_err(),
                "configuration not remapped yet"
            );
        }
    }
}
