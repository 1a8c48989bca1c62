//! Stable OSB identifiers: a service's id is derived from its offer id, a
//! plan's from its offer id and plan key, so they never change across
//! catalog queries (or catalog processes) while the offer exists.
//!
//! The derivation is SHA-256 of a namespaced name, cut to 128 bits and
//! marked as an RFC 9562 version-8 (name-based, custom hash) UUID.

use sha2::{Digest, Sha256};

fn uuid_of(name: &str) -> String {
    let hash = Sha256::digest(format!("liqo-broker-catalog/osb/{name}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&hash[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The service id of offer `offer_id`.
pub fn service_id(offer_id: &str) -> String {
    uuid_of(&format!("service/{offer_id}"))
}

/// The plan id of plan `plan_key` of offer `offer_id`. Offer ids and plan
/// keys never contain `/`, so the name is unambiguous.
pub fn plan_id(offer_id: &str, plan_key: &str) -> String {
    uuid_of(&format!("plan/{offer_id}/{plan_key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_distinct_uuids() {
        let a = service_id("demo");
        assert_eq!(a, service_id("demo"));
        assert_ne!(a, service_id("demo2"));
        assert_ne!(plan_id("a", "b"), plan_id("a", "c"));
        assert_ne!(plan_id("a", "b"), service_id("a"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "8", "version 8: {a}");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "variant: {a}");
    }
}
