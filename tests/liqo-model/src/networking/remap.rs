//! The IPAM's answer to "how does this cluster see a remote CIDR", as Liqo
//! v1.2.0's `pkg/liqo-controller-manager/networking/external-network/configuration/configuration_controller.go:140-168`
//! asks it through `Network` objects (`pkg/ipam`): a remote network that
//! clashes with one this cluster already uses is remapped to a free network
//! of the same size from the IPAM's pools, one that does not clash is kept.
//!
//! Simplified (the issue allows "IPAM from a fixed pool"): IPv4 only, the
//! pool is the chart's first one (`10.0.0.0/8`, `deployments/liqo/values.yaml`
//! `ipam.pools`), and a clash is any overlap with the CIDRs given as taken
//! (the local pod and external CIDRs and the other peers' remapped ones).

use std::net::Ipv4Addr;

/// An IPv4 network: its first address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub base: u32,
    pub prefix: u8,
}

impl Cidr {
    /// `a.b.c.d/n`, host bits cleared as the IPAM stores networks; `None`
    /// when it does not read.
    pub fn parse(text: &str) -> Option<Cidr> {
        let (addr, prefix) = text.split_once('/')?;
        let addr: Ipv4Addr = addr.parse().ok()?;
        let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32)?;
        Some(Cidr {
            base: u32::from(addr) & mask(prefix),
            prefix,
        })
    }

    fn last(&self) -> u32 {
        self.base | !mask(self.prefix)
    }

    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.base <= other.last() && other.base <= self.last()
    }

    /// Whether `ip` is in this network (Go's `net.IPNet.Contains`).
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.prefix) == self.base
    }

    /// The network's last (broadcast) address.
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.last())
    }

    /// The netmask as a number (`/24` is `0xffffff00`).
    pub fn netmask(&self) -> u32 {
        mask(self.prefix)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.prefix)
    }
}

fn mask(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

/// The pool remapped networks come from.
const POOL: Cidr = Cidr {
    base: 10 << 24,
    prefix: 8,
};

/// How this cluster sees `remote`: itself when it overlaps nothing in
/// `taken`, else the first network of its size in the pool that overlaps
/// nothing; `None` when the CIDR does not read or the pool is full.
pub fn remap(remote: &str, taken: &[Cidr]) -> Option<Cidr> {
    let wanted = Cidr::parse(remote)?;
    if !taken.iter().any(|t| t.overlaps(&wanted)) {
        return Some(wanted);
    }
    let prefix = wanted.prefix.max(POOL.prefix);
    let step = 1u64 << (32 - u32::from(prefix));
    let mut base = u64::from(POOL.base);
    while base <= u64::from(POOL.last()) {
        let candidate = Cidr {
            base: u32::try_from(base).ok()?,
            prefix,
        };
        if !taken.iter().any(|t| t.overlaps(&candidate)) {
            return Some(candidate);
        }
        base += step;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|c| Cidr::parse(c).unwrap()).collect()
    }

    #[test]
    fn a_free_network_is_kept() {
        let taken = cidrs(&["10.244.0.0/16", "10.70.0.0/16"]);
        assert_eq!(
            remap("10.245.0.0/16", &taken).unwrap().to_string(),
            "10.245.0.0/16"
        );
    }

    #[test]
    fn a_clashing_network_gets_the_first_free_one_of_its_size() {
        let taken = cidrs(&["10.244.0.0/16", "10.0.0.0/16"]);
        assert_eq!(
            remap("10.244.0.0/16", &taken).unwrap().to_string(),
            "10.1.0.0/16"
        );
        // A partial overlap clashes too.
        assert_eq!(
            remap("10.244.128.0/17", &taken).unwrap().to_string(),
            "10.1.0.0/17"
        );
    }

    #[test]
    fn host_bits_are_cleared_and_bad_text_is_refused() {
        assert_eq!(
            Cidr::parse("10.1.2.3/16").unwrap().to_string(),
            "10.1.0.0/16"
        );
        assert!(Cidr::parse("10.1.2.3").is_none());
        assert!(Cidr::parse("10.1.2.3/33").is_none());
        assert!(remap("nonsense", &[]).is_none());
    }
}
