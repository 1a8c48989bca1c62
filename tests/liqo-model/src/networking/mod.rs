//! Liqo v1.2.0's networking module on a cluster of the test world
//! (`cmd/liqo-controller-manager/modules/networking.go` sets it up): the
//! Configuration controller ([`configuration`]) and the gateways
//! ([`gateway`]), opt-in per cluster ([`crate::Provider::with_networking`],
//! [`crate::Consumer::with_networking`]) as authentication is, because a peering
//! made with networking disabled (`liqoctl peer --networking-disabled`)
//! has none of it. Liqo runs the same controllers on both sides: a
//! cluster is server or client by the objects it is given, not by its role.
//!
//! What each side creates, as `liqoctl peer` does it
//! (`pkg/liqoctl/network/handler.go:107-268`, `cluster.go`,
//! `pkg/liqo-controller-manager/networking/forge/`), all in the tenant
//! namespace `liqo-tenant-<peer>` and labelled `liqo.io/remote-cluster-id:
//! <peer>`, each named `<peer>` by default:
//! - on both: a `Configuration` whose `spec.remote.cidr` holds the peer's
//!   pod and external CIDRs; this model fills `spec.local` and
//!   `status.remote`;
//! - on the provider: a `GatewayServer` (`spec.endpoint.port`, default
//!   51840; `mtu` 1340); this model fills `status.endpoint` and
//!   `status.secretRef`;
//! - on the consumer: a `GatewayClient` whose `spec.endpoint` is the
//!   provider's GatewayServer `status.endpoint`; this model fills
//!   `status.secretRef`;
//! - on each: a `PublicKey` (label also `networking.liqo.io/gateway-resource:
//!   "true"`) whose `spec.publicKey` is the `publicKey` of the *other*
//!   side's gateway Secret (named by that side's `status.secretRef`).
//!
//! Then each gateway makes the Connection `gw-<gateway>` in its namespace,
//! `Connecting`, and `Connected` once the tunnel is up. Deleting a gateway
//! takes its Secret and Connection with it (owner references).

pub mod configuration;
pub mod gateway;
pub mod gateway_pod;
pub mod mapping;
pub mod remap;
pub mod status;
pub mod underlay;

use kube::api::ApiResource;
use kube::core::GroupVersionKind;
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::identity;
use crate::{grant_each, Error, CONTROLLER_MANAGER};

/// `pkg/consts/externalnetwork.go:26`.
pub const GATEWAY_RESOURCE: &str = "networking.liqo.io/gateway-resource";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("networking.liqo.io", "v1beta1", kind),
        plural,
    )
}

pub fn configurations() -> ApiResource {
    resource("Configuration", "configurations")
}
pub fn gateway_servers() -> ApiResource {
    resource("GatewayServer", "gatewayservers")
}
pub fn gateway_clients() -> ApiResource {
    resource("GatewayClient", "gatewayclients")
}
/// Liqo's plural (`publickey_types.go`: `path=publickeies`).
pub fn public_keys() -> ApiResource {
    resource("PublicKey", "publickeies")
}
pub fn connections() -> ApiResource {
    resource("Connection", "connections")
}

/// A cluster's own networks (what `ipamutils.GetPodCIDRs` and
/// `GetExternalCIDR` read from its IPAM).
#[derive(Debug, Clone)]
pub struct Options {
    pub pod_cidr: String,
    pub external_cidr: String,
}

impl Default for Options {
    /// The chart's defaults for a kind cluster's pods and Liqo's external
    /// CIDR (`deployments/liqo/values.yaml` `ipam.externalCIDR`): two
    /// clusters left at the defaults clash, and the peer is remapped.
    fn default() -> Self {
        Options {
            pod_cidr: "10.244.0.0/16".into(),
            external_cidr: "10.70.0.0/16".into(),
        }
    }
}

/// `metav1.Condition` set as `meta.SetStatusCondition` does: the
/// transition time moves only when the status does.
pub(crate) fn set_condition(
    status: &mut Value,
    kind: &str,
    s: &str,
    reason: &str,
    message: &str,
    generation: i64,
) {
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let Some(list) = status["conditions"].as_array_mut() else {
        return;
    };
    let time = list
        .iter()
        .find(|c| c["type"] == kind && c["status"] == s)
        .map_or(json!(now), |c| c["lastTransitionTime"].clone());
    list.retain(|c| c["type"] != kind);
    list.push(
        json!({"type": kind, "status": s, "reason": reason, "message": message,
                     "lastTransitionTime": time, "observedGeneration": generation}),
    );
}

/// Serve the networking CRDs (the chart installs them), grant the
/// controller manager its RBAC and start the controllers on `kube`.
pub(crate) async fn start(
    kube: &KubeApiServer,
    options: Options,
) -> Result<Vec<JoinHandle<()>>, Error> {
    // Registering again what is served already replaces its definition
    // with the same one and keeps its objects.
    kube.register_liqo_networking_crds()
        .map_err(|e| Error::Waiting(format!("serving the networking CRDs: {e:#}")))?;
    grant_each(
        kube,
        &[
            (
                CONTROLLER_MANAGER,
                "liqo-model-configuration",
                configuration::RULES,
            ),
            (CONTROLLER_MANAGER, "liqo-model-gateway", gateway::RULES),
            (
                CONTROLLER_MANAGER,
                "liqo-model-gateway-pod",
                gateway_pod::RULES,
            ),
        ],
    );
    let manager = identity::client_as(kube, CONTROLLER_MANAGER).await?;
    let cluster = kube.url();
    Ok(vec![
        tokio::spawn(configuration::run(manager.clone(), options)),
        tokio::spawn(gateway::run(
            manager.clone(),
            gateway::Mode::Server,
            cluster.clone(),
        )),
        tokio::spawn(gateway::run(manager, gateway::Mode::Client, cluster)),
    ])
}
