//! `ipBlock` (`cidr` minus `except`) over IPv4 and IPv6 addresses, with the
//! standard library only.

use std::net::IpAddr;

use serde_json::Value;

/// Whether `ip` is inside the CIDR written as `a.b.c.d/n` or `x::y/n`. A
/// malformed CIDR or one of the other address family contains nothing.
fn contains(cidr: &str, ip: IpAddr) -> bool {
    let Some((base, len)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(base), Ok(len)) = (base.parse::<IpAddr>(), len.parse::<u32>()) else {
        return false;
    };
    match (base, ip) {
        (IpAddr::V4(base), IpAddr::V4(ip)) if len <= 32 => {
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            u32::from(base) & mask == u32::from(ip) & mask
        }
        (IpAddr::V6(base), IpAddr::V6(ip)) if len <= 128 => {
            let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            u128::from(base) & mask == u128::from(ip) & mask
        }
        _ => false,
    }
}

/// Whether `ip` is in the `ipBlock` (JSON `IPBlock`): inside `cidr` and
/// inside none of `except` (API reference, `IPBlock.except`: "Except is a
/// slice of CIDRs that should not be included within an IPBlock").
pub(crate) fn in_block(block: &Value, ip: IpAddr) -> bool {
    let Some(cidr) = block.get("cidr").and_then(Value::as_str) else {
        return false;
    };
    contains(cidr, ip)
        && !block
            .get("except")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|except| contains(except, ip))
}

#[cfg(test)]
mod tests {
    use super::{contains, in_block};
    use serde_json::json;

    #[test]
    fn cidrs() {
        let ip = |s: &str| s.parse().unwrap();
        assert!(contains("10.0.0.0/8", ip("10.200.1.1")));
        assert!(!contains("10.0.0.0/8", ip("11.0.0.1")));
        assert!(contains("0.0.0.0/0", ip("192.0.2.1")));
        assert!(contains("192.0.2.7/32", ip("192.0.2.7")));
        assert!(!contains("192.0.2.7/32", ip("192.0.2.8")));
        assert!(!contains("192.0.2.7/33", ip("192.0.2.7")));
        assert!(!contains("192.0.2.7", ip("192.0.2.7")));
        assert!(!contains("10.0.0.0/8", ip("::ffff:10.0.0.1")));
        assert!(contains("fd00::/8", ip("fd12::1")));
        assert!(!contains("fd00::/8", ip("fe80::1")));
        assert!(contains("::/0", ip("2001:db8::1")));
        let block = json!({"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24", "10.0.2.2/32"]});
        assert!(in_block(&block, ip("10.0.3.1")));
        assert!(!in_block(&block, ip("10.0.1.9")));
        assert!(!in_block(&block, ip("10.0.2.2")));
        assert!(in_block(&block, ip("10.0.2.3")));
        assert!(!in_block(&json!({}), ip("10.0.0.1")));
    }
}
