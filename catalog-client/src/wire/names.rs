//! The Kubernetes name rule that catalog fields obey where they become
//! object names on a cluster (a provider's ResourceSlice class; a cluster
//! name a consumer's controller uses as an object name). Written once so the
//! catalog that accepts a name and the controller that uses it agree.

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

#[cfg(test)]
mod tests {
    use super::*;

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
