//! Liqo's networking objects of one consumer on this provider, and the
//! order they go in when its last contract ends, as `liqoctl unpeer` runs
//! `liqoctl network reset` (v1.2.0 `pkg/liqoctl/network/handler.go`
//! `RunReset` → `RunDisconnect`: the GatewayServer, then the
//! Configuration; `cluster.go` `DeleteGatewayServer`/`DeleteConfiguration`
//! find each by the label `liqo.io/remote-cluster-id` in the tenant
//! namespace, as liqoctl puts them there when no namespace is given).
//!
//! The PublicKey liqoctl makes (`cluster.go` `EnsurePublicKey`) and the
//! Connection the gateway makes (`pkg/gateway/tunnel/wireguard/k8s.go`)
//! carry the same label and are owned by the gateway, so a real garbage
//! collector removes them with the GatewayServer; they are deleted here
//! too, by the label, for a peering whose objects were made without that
//! owner (declaratively, say). Everything is selected by the consumer's
//! tenant namespace and its cluster ID: another consumer's objects are
//! never in the selection.

use controller_core::liqo::LiqoKind;
pub use controller_core::liqo::{CONFIGURATION, CONNECTION, GATEWAY_SERVER, PUBLIC_KEY};

/// The kinds removed, in the order removed: the gateway and what hangs
/// off it, then the Configuration (`RunReset`).
pub const REMOVAL_ORDER: [LiqoKind; 4] = [GATEWAY_SERVER, PUBLIC_KEY, CONNECTION, CONFIGURATION];

/// `apis/core/v1beta1/foreigncluster_types.go` `RoleType`: the roles in
/// which the consumer is also a provider of this cluster.
const PROVIDER_ROLES: [&str; 2] = ["Provider", "ConsumerAndProvider"];

/// Whether the network to the consumer is still this cluster's own: its
/// ForeignCluster (`roles` of those labelled with its ID) says it provides
/// to this cluster too. `liqoctl unpeer` then leaves the networking alone
/// (`pkg/liqoctl/unpeer/handler.go`, `isBidirectionalPeering`): the
/// outgoing peering runs over the same gateway and Configuration.
pub fn still_used(roles: &[String]) -> bool {
    roles.iter().any(|r| PROVIDER_ROLES.contains(&r.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_goes_before_the_configuration() {
        let order: Vec<&str> = REMOVAL_ORDER.iter().map(|k| k.kind).collect();
        assert_eq!(
            order,
            ["GatewayServer", "PublicKey", "Connection", "Configuration"]
        );
        assert_eq!(PUBLIC_KEY.plural, "publickeies");
    }

    #[test]
    fn kept_while_the_consumer_provides_to_this_cluster() {
        let roles = |r: &[&str]| r.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(!still_used(&[]));
        assert!(!still_used(&roles(&["Consumer"])));
        assert!(!still_used(&roles(&["Unknown"])));
        assert!(still_used(&roles(&["Provider"])));
        assert!(still_used(&roles(&["ConsumerAndProvider"])));
    }
}
