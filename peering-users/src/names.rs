//! What Liqo calls each object of a peering user, from the consumer's
//! cluster ID (v1.2.0 `pkg/liqoctl/rest/peering-user/userfactory/cert.go`,
//! `roles.go`, and `pkg/liqo-controller-manager/authentication/csr.go`'s
//! `commonNamePeerUser`), so that `liqoctl delete peering-user` finds what
//! this controller made and the other way round.

use controller_core::liqo;

/// On a peering user's key Secret: the buyer (catalog identity) it was
/// made for. A peering user serves exactly one buyer (issue 41 F2): when
/// that buyer's contracts end it goes, even if another buyer's contracts
/// name the same cluster ID, and the other gets a user of its own.
pub const OWNER_ANNOTATION: &str = "liqo-broker.io/consumer";

/// A consumer cluster ID that can name Kubernetes objects: a DNS-1123
/// label, as the catalog checks it at purchase. Every name below is built
/// only from one of these.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConsumerId(String);

/// The longest cluster ID whose objects can exist (P-18): each carries
/// the label value `liqo-peer-user-<id>` (Liqo v1.2.0
/// pkg/liqoctl/rest/peering-user/userfactory/cert.go:166), at most 63
/// characters (apimachinery pkg/util/validation/validation.go
/// `LabelValueMaxLength`); the catalog refuses longer ones at purchase.
pub const MAX_LEN: usize = 63 - liqo::PEERING_USER_PREFIX.len();

/// A cluster ID that cannot name a peering user's objects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("consumer cluster ID {0:?} cannot name a peering user: it must be a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit) of 1 to 48 characters, so that the label value liqo-peer-user-<id> and the namespace liqo-tenant-<id> can exist")]
pub struct BadConsumerId(pub String);

impl ConsumerId {
    pub fn parse(id: &str) -> Result<Self, BadConsumerId> {
        let ok = !id.is_empty()
            && id.len() <= MAX_LEN
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !id.starts_with('-')
            && !id.ends_with('-');
        if ok {
            Ok(Self(id.to_string()))
        } else {
            Err(BadConsumerId(id.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `liqo-tenant-X`: the tenant namespace Liqo keeps for the consumer.
    pub fn tenant_namespace(&self) -> String {
        format!("{}{}", liqo::TENANT_NAMESPACE_PREFIX, self.0)
    }

    /// `liqo-peer-user-X` (`GetUserNameFromClusterID`): the CSR's name and
    /// the value of [`liqo::PEERING_USER_NAME_LABEL`] on every object.
    pub fn user_name(&self) -> String {
        format!("{}{}", liqo::PEERING_USER_PREFIX, self.0)
    }

    /// The consumer a peering user's name belongs to (None: not one).
    pub fn from_user_name(name: &str) -> Option<Self> {
        Self::parse(name.strip_prefix(liqo::PEERING_USER_PREFIX)?).ok()
    }

    /// The RoleBinding in Liqo's namespace.
    pub fn liqo_ns_binding(&self) -> String {
        format!("{}-liqo-ns-reader", self.user_name())
    }

    /// The RoleBinding in the tenant namespace.
    pub fn tenant_ns_binding(&self) -> String {
        format!("{}-tenant-ns-writer", self.user_name())
    }

    /// The kubeconfig's user (`<X>-user`) and cluster name (`X`).
    pub fn kubeconfig_user(&self) -> String {
        format!("{}-user", self.0)
    }

    /// A fresh certificate CN, `liqo-peer-user-X-<32 hex>`: the random
    /// suffix keeps a new user from inheriting what a deleted one was
    /// granted (`commonNamePeerUser`).
    pub fn common_name(&self, suffix: [u8; 16]) -> String {
        let hex: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}-{hex}", self.user_name())
    }

    /// Whether `cn` is one [`ConsumerId::common_name`] could have made.
    pub fn owns_common_name(&self, cn: &str) -> bool {
        cn.strip_prefix(&self.user_name())
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|hex| {
                hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            })
    }
}

impl std::fmt::Display for ConsumerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_liqos() {
        let x = ConsumerId::parse("cool-consumer").unwrap();
        assert_eq!(x.tenant_namespace(), "liqo-tenant-cool-consumer");
        assert_eq!(x.user_name(), "liqo-peer-user-cool-consumer");
        assert_eq!(
            x.liqo_ns_binding(),
            "liqo-peer-user-cool-consumer-liqo-ns-reader"
        );
        assert_eq!(
            x.tenant_ns_binding(),
            "liqo-peer-user-cool-consumer-tenant-ns-writer"
        );
        assert_eq!(x.kubeconfig_user(), "cool-consumer-user");
        let cn = x.common_name([0xab; 16]);
        assert_eq!(
            cn,
            "liqo-peer-user-cool-consumer-abababababababababababababababab"
        );
        assert!(x.owns_common_name(&cn));
        assert_eq!(
            ConsumerId::from_user_name("liqo-peer-user-cool-consumer"),
            Some(x.clone())
        );
    }

    #[test]
    fn foreign_names_are_not_ours() {
        let x = ConsumerId::parse("c1").unwrap();
        for cn in [
            "liqo-peer-user-c1",
            "liqo-peer-user-c1-",
            "liqo-peer-user-c2-abababababababababababababababab",
            "liqo-peer-user-c1-ABABABABABABABABABABABABABABABAB",
            "liqo-peer-user-c1-abababababababababababababababab0",
            "system:masters",
        ] {
            assert!(!x.owns_common_name(cn), "{cn}");
        }
        assert_eq!(ConsumerId::from_user_name("other-c1"), None);
    }

    #[test]
    fn only_dns_labels_name_objects() {
        for bad in [
            "",
            "Alice",
            "a_b",
            "-a",
            "a-",
            "a.b",
            &"a".repeat(64),
            &"a".repeat(49),
        ] {
            let e = ConsumerId::parse(bad).unwrap_err();
            assert!(e.to_string().contains("DNS-1123 label"), "{e}");
        }
        assert_eq!(MAX_LEN, 48);
        let longest = ConsumerId::parse(&"a".repeat(MAX_LEN)).unwrap();
        assert_eq!(longest.user_name().len(), 63);
        assert!(ConsumerId::parse("a").is_ok());
    }
}
