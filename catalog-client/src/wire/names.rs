//! The name rules catalog fields obey: the identifier rule of cluster IDs,
//! offer and plan ids ([`is_id`]), and the Kubernetes name rule where a
//! field becomes an object name on a cluster (a provider's ResourceSlice
//! class; a cluster name a consumer's controller uses as an object name).
//! Written once so the catalog that accepts a name and the clients that use
//! it agree.

/// Whether `name` is a DNS-1123 subdomain: at most 253 characters of
/// `a-z 0-9 - .`, each dot-separated label non-empty and starting and
/// ending with a letter or digit.
pub fn is_dns_subdomain(name: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    !name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)
}

/// Whether `name` is a DNS-1123 label: 1 to 63 characters of `a-z 0-9 -`,
/// starting and ending with a letter or digit — a Kubernetes namespace,
/// and a Liqo v1 cluster ID (`liqoctl` refuses any other:
/// pkg/utils/args/cluster-identity.go `Read`, and the ForeignCluster CRD's
/// `ClusterID` pattern, apis/core/v1beta1/foreigncluster_types.go, v1.2.0).
pub fn is_dns_label(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Most characters in an identifier the catalog takes (see [`is_id`]).
pub const MAX_ID_LEN: usize = 128;

/// [`is_id`]'s rule in words, for error messages.
pub const ID_RULE: &str = "1 to 128 characters from A-Z a-z 0-9 . _ ~ -, not `.` or `..`";

/// Whether `id` is an identifier the catalog accepts — a provider's cluster
/// ID, an offer's or a plan's id: URL-unreserved characters only (so it is
/// one path segment as written), and not `.` or `..` (which URLs drop as a
/// path segment). The rule of the catalog's `validate_id`
/// (catalog/src/http/input.rs), stated here so clients check the same.
pub fn is_id(id: &str) -> bool {
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-');
    (1..=MAX_ID_LEN).contains(&id.len()) && id.bytes().all(unreserved) && id != "." && id != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for ok in ["p1", "Cluster_1.eu~a-b", "...", &"a".repeat(MAX_ID_LEN)] {
            assert!(is_id(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a b",
            " a",
            "a/b",
            "é",
            &"a".repeat(MAX_ID_LEN + 1),
        ] {
            assert!(!is_id(bad), "{bad}");
        }
    }

    #[test]
    fn labels() {
        for ok in ["a", "consumer-1", "b0c1a5e2-provider", &"a".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in [
            "",
            "A",
            "-a",
            "a-",
            "a.b",
            "a_b",
            "Consumer",
            &"a".repeat(64),
        ] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn subdomains() {
        for ok in ["a", "liqo-broker", "a.b-c.d9", &"a".repeat(253)] {
            assert!(is_dns_subdomain(ok), "{ok}");
        }
        for bad in ["", "A", "-a", "a-", "a..b", ".a", "a_b", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }
}
