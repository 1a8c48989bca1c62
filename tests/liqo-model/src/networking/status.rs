//! The ForeignCluster's networking module from the networking objects
//! naming the peer, as Liqo v1.2.0's
//! `pkg/liqo-controller-manager/core/foreigncluster-controller/status.go:65-253`
//! (STATUS) writes it; the decision alone, called by
//! the ForeignCluster controller. The gateways' readiness, which Liqo reads
//! from their Deployments (STATUS:130-154), is here whether the gateway
//! has made its keys (`status.secretRef`): the model runs no Deployments.

use serde_json::Value;

/// The peer's networking objects (label `liqo.io/remote-cluster-id`).
#[derive(Debug, Default, Clone)]
pub struct Objects {
    pub configuration: Option<Value>,
    pub server: Option<Value>,
    pub client: Option<Value>,
    pub connection: Option<Value>,
}

/// What to do to the module: set `enabled`, ensure or delete conditions
/// (type, status, reason, message).
#[derive(Debug, Default, PartialEq)]
pub struct Module {
    pub enabled: bool,
    pub ensure: Vec<(&'static str, &'static str, &'static str, &'static str)>,
    pub delete: Vec<&'static str>,
}

fn gateway_ready(gateway: &Value) -> (&'static str, &'static str, &'static str) {
    if gateway["status"]["secretRef"]["name"].is_string() {
        ("Ready", "GatewaysReady", "All gateway replicas are ready")
    } else {
        (
            "NotReady",
            "GatewaysNotReady",
            "All gateway replicas are not ready",
        )
    }
}

/// STATUS:197-253 `handleNetworkingModuleStatus` (module enabled).
pub fn module(objects: &Objects) -> Module {
    let mut m = Module::default();
    let mut exceptions = Vec::new();
    // STATUS:220-245.
    match &objects.configuration {
        None => {
            m.delete.push("NetworkConfigurationStatus");
            exceptions.push((
                "NetworkConfigurationStatus",
                "NotReady",
                "NetworkConfigurationMissing",
                "The network configuration for the connection with the foreign cluster is missing",
            ));
        }
        Some(_) => {
            m.enabled = true;
            m.ensure.push((
                "NetworkConfigurationStatus",
                "Ready",
                "NetworkConfigurationPresence",
                "The network configuration of the peer cluster is present",
            ));
        }
    }
    // STATUS:100-188.
    if objects.server.is_none() && objects.client.is_none() {
        exceptions.push((
            "NetworkGatewayPresence",
            "NotReady",
            "GatewayMissing",
            "The gateway resource connecting to the foreign cluster is missing",
        ));
    } else {
        exceptions.push((
            "NetworkGatewayPresence",
            "Ready",
            "GatewayPresence",
            "There is a gateway connecting to the foreign cluster",
        ));
    }
    for (gateway, kind) in [
        (&objects.server, "NetworkGatewayServerStatus"),
        (&objects.client, "NetworkGatewayClientStatus"),
    ] {
        match gateway {
            None => m.delete.push(kind),
            Some(g) => {
                m.enabled = true;
                let (s, reason, message) = gateway_ready(g);
                m.ensure.push((kind, s, reason, message));
            }
        }
    }
    // STATUS:65-98.
    match &objects.connection {
        None => {
            m.delete.push("NetworkConnectionStatus");
            exceptions.push((
                "NetworkConnectionStatus",
                "NotReady",
                "ConnectionMissing",
                "There is no network connection with the foreign cluster",
            ));
        }
        Some(c) => {
            m.enabled = true;
            let (s, reason, message) = match c["status"]["value"].as_str() {
                Some("Connected") => (
                    "Established",
                    "ConnectionEstablished",
                    "The network connection with the foreign cluster is established",
                ),
                Some("Connecting") => (
                    "Pending",
                    "ConnectionPending",
                    "The network connection with the foreign cluster is connecting",
                ),
                _ => (
                    "Error",
                    "ConnectionError",
                    "The network connection with the foreign cluster is in error",
                ),
            };
            m.ensure
                .push(("NetworkConnectionStatus", s, reason, message));
        }
    }
    // STATUS:244-250: the exceptions only when the module is enabled.
    if m.enabled {
        m.ensure.extend(exceptions);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_objects_leave_the_module_off_with_no_conditions() {
        let m = module(&Objects::default());
        assert!(!m.enabled && m.ensure.is_empty());
    }

    #[test]
    fn a_connected_connection_is_established_and_missing_pieces_are_exceptions() {
        let objects = Objects {
            connection: Some(json!({"status": {"value": "Connected"}})),
            ..Default::default()
        };
        let m = module(&objects);
        assert!(m.enabled);
        let found = |kind: &str| m.ensure.iter().find(|c| c.0 == kind).map(|c| c.1);
        assert_eq!(found("NetworkConnectionStatus"), Some("Established"));
        assert_eq!(found("NetworkConfigurationStatus"), Some("NotReady"));
        assert_eq!(found("NetworkGatewayPresence"), Some("NotReady"));
    }
}
