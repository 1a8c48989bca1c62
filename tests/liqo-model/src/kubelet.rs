//! A kubelet for the test clusters' ordinary nodes (not a Liqo component:
//! it plays the kubelet of a provider's real node, so that the pods Liqo
//! makes there run): each pod bound to its node is reported `Running`, its
//! containers running and ready, with the `PodScheduled`, `Initialized`,
//! `ContainersReady` and `Ready` conditions `True`, as the kubelet's status
//! manager reports a started pod (`pkg/kubelet/status/status_manager.go`,
//! `pkg/kubelet/kubelet_pods.go` `generateAPIPodStatus`). Images are not
//! pulled and nothing runs: the phase is what the tests need.
//!
//! With the phase go the pod's addresses, as a node whose CNI plugin takes
//! its pods' IPs from the CNI `host-local` IPAM plugin on the node's
//! `spec.podCIDR` gives them (kind's kindnet and flannel configure it so;
//! the node's podCIDR is kube-controller-manager's, the model's `node_ipam`):
//! - `status.hostIP` and `status.hostIPs`: the node's first `InternalIP`
//!   address, else its first `ExternalIP` (`kubelet_pods.go`
//!   `generateAPIPodStatus` with `pkg/util/node` `GetNodeHostIPs`); none
//!   when the node has neither (the test fixtures' nodes have no
//!   addresses);
//! - `status.podIP` and `status.podIPs: [{ip}]`: for a `hostNetwork` pod
//!   the host IP (`generateAPIPodStatus`: host-network pods inherit the
//!   node's IPs); for any other, the address host-local reserves in the
//!   node's podCIDR ([`host_local_next`]), when the node has one. An IP
//!   once given is never changed: the model starts each pod once, in one
//!   sandbox, whose address the pod keeps; a pod that already has an
//!   address keeps it. IPv4 only, as the rest of the model's networking.
//!
//! A node without a podCIDR gives its pods no IP. On a cluster whose nodes
//! get podCIDRs ([`run_with`] with `wait_for_pod_cidr`), a pod other than
//! a host-network one does not start before its node has one: the CNI
//! plugin is not ready until then, and the kubelet starts no pod but
//! host-network ones while the runtime's network is not ready
//! (`pkg/kubelet/kubelet.go` `SyncPod`, `runtimeState.networkErrors`).

use std::net::Ipv4Addr;
use std::sync::Mutex;

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::consts;
use crate::identity::{Rule, READ};
use crate::networking::remap::Cidr;
use crate::offloading_consts::pods;
use crate::runner::{self, Key};
use crate::Error;

/// The part of `system:node`'s rights this model uses
/// (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`
/// `NodeRules`: pods read, their status written, nodes read).
pub const RULES: &[Rule] = &[
    Rule::new(&[""], &["pods"], READ),
    Rule::new(&[""], &["pods/status"], &["update", "patch"]),
    Rule::new(&[""], &["nodes"], READ),
];

/// The user the kubelet of node `name` runs as.
pub fn user(name: &str) -> String {
    format!("system:node:{name}")
}

/// Run the kubelet of node `node` on `client` until the task is dropped;
/// its pods start whether or not the node has a podCIDR.
pub async fn run(client: Client, node: String) {
    run_with(client, node, false).await;
}

/// [`run`]; with `wait_for_pod_cidr`, as on a cluster whose nodes are
/// given podCIDRs, a pod starts only once the node has one.
pub async fn run_with(client: Client, node: String, wait_for_pod_cidr: bool) {
    let name = node.clone();
    let own = runner::keys(
        runner::touched(Api::all_with(client.clone(), &pods()), ""),
        move |p| (p.data["spec"]["nodeName"] == name.as_str()).then(|| Key::of(&p)),
    );
    // host-local's `last_reserved_ip.0` (`backend/disk/backend.go`), kept
    // for the kubelet's life as on the node's disk.
    let last_reserved = Mutex::new(None);
    let kubelet = Kubelet {
        client: &client,
        node: node.as_str(),
        wait_for_pod_cidr,
        last_reserved: &last_reserved,
    };
    runner::run("kubelet", vec![own], |key| kubelet.reconcile(key)).await;
}

/// The status of a started pod with `spec` on `node`.
pub fn running_status(spec: &Value) -> Value {
    let condition = |kind: &str| json!({"type": kind, "status": "True"});
    let containers: Vec<Value> = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!({"name": c["name"], "image": c["image"], "ready": true, "started": true,
                   "restartCount": 0, "state": {"running": {}}})
        })
        .collect();
    let conditions = ["PodScheduled", "Initialized", "ContainersReady", "Ready"].map(condition);
    json!({
        "phase": "Running",
        "conditions": conditions,
        "containerStatuses": containers,
    })
}

/// `pkg/util/node` `GetNodeHostIPs` (single stack): the node's first
/// `InternalIP`, else its first `ExternalIP`.
pub fn host_ip(node: &Value) -> Option<String> {
    let addresses = node["status"]["addresses"].as_array()?;
    ["InternalIP", "ExternalIP"].iter().find_map(|kind| {
        addresses
            .iter()
            .filter(|a| a["type"] == *kind)
            .find_map(|a| {
                a["address"]
                    .as_str()
                    .filter(|s| s.parse::<std::net::IpAddr>().is_ok())
            })
            .map(str::to_string)
    })
}

/// The address the CNI `host-local` IPAM plugin
/// (`containernetworking/plugins`, `plugins/ipam/host-local/backend/allocator/`)
/// reserves for a new pod in `subnet` with its defaults, `held` being the
/// addresses reserved for the node's running pods and `last_reserved` the
/// last one it gave:
/// - the range (`range.go` `Canonicalize`): the gateway defaults to the
///   network's first host address (`.1`), the range start to that same
///   address and the end to the last before the broadcast address; the
///   network address and broadcast are never given, nor the gateway (the
///   node's bridge), which the iterator skips (`allocator.go`
///   `RangeIter.Next`); a network smaller than a /30 has no range;
/// - the order (`allocator.go` `GetIter`): round robin, from the address
///   after the last one reserved (from the range start the first time),
///   wrapping to the start, each address tried once — so a pod's address
///   is not given again soon after it is released;
/// - `None` when every address is held (`no IP addresses available in
///   range set`).
pub fn host_local_next(
    subnet: &Cidr,
    last_reserved: Option<Ipv4Addr>,
    held: &[Ipv4Addr],
) -> Option<Ipv4Addr> {
    if subnet.prefix > 30 {
        return None;
    }
    let gateway = u64::from(subnet.base) + 1;
    let (start, end) = (gateway, u64::from(u32::from(subnet.broadcast())) - 1);
    let size = end - start + 1;
    let first = match last_reserved.map(|ip| u64::from(u32::from(ip))) {
        Some(last) if (start..=end).contains(&last) => (last - start + 1) % size,
        _ => 0,
    };
    (0..size)
        .map(|i| start + (first + i) % size)
        .filter(|ip| *ip != gateway)
        .filter_map(|ip| u32::try_from(ip).ok().map(Ipv4Addr::from))
        .find(|ip| !held.contains(ip))
}

/// One node's kubelet, as its reconcile sees it.
struct Kubelet<'a> {
    client: &'a Client,
    node: &'a str,
    wait_for_pod_cidr: bool,
    last_reserved: &'a Mutex<Option<Ipv4Addr>>,
}

impl Kubelet<'_> {
    async fn reconcile(&self, key: Key) -> Result<(), Error> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &pods());
        let Some(mut pod) = api.get_opt(&key.name).await? else {
            return Ok(());
        };
        // Started once; and a pod that ended (its containers exited) never
        // runs again: the kubelet keeps a terminal phase
        // (`pkg/kubelet/kubelet_pods.go` `generateAPIPodStatus`: a pod
        // whose old phase is terminal keeps it).
        let phase = &pod.data["status"]["phase"];
        if pod.data["spec"]["nodeName"] != self.node
            || phase == "Running"
            || phase == "Succeeded"
            || phase == "Failed"
        {
            return Ok(());
        }
        let nodes: Api<DynamicObject> = Api::all_with(self.client.clone(), &consts::nodes());
        let node = nodes
            .get_opt(self.node)
            .await?
            .map(|n| n.data)
            .unwrap_or(Value::Null);
        let old = pod.data["status"].clone();
        let mut status = running_status(&pod.data["spec"]);
        let host = host_ip(&node);
        if let Some(host) = &host {
            status["hostIP"] = json!(host);
            status["hostIPs"] = json!([{ "ip": host }]);
        }
        let pod_cidr = node["spec"]["podCIDR"].as_str();
        let mut reserved = None;
        if let Some(kept) = old["podIP"].as_str().filter(|ip| !ip.is_empty()) {
            // Given once, kept.
            status["podIP"] = json!(kept);
            status["podIPs"] = if old["podIPs"].is_array() {
                old["podIPs"].clone()
            } else {
                json!([{ "ip": kept }])
            };
        } else if pod.data["spec"]["hostNetwork"] == true {
            if let Some(host) = &host {
                status["podIP"] = json!(host);
                status["podIPs"] = json!([{ "ip": host }]);
            }
        } else if let Some(subnet) = pod_cidr.and_then(Cidr::parse) {
            let held = self.held(&key).await?;
            let last = *self.last_reserved.lock().unwrap_or_else(|e| e.into_inner());
            let ip = host_local_next(&subnet, last, &held).ok_or_else(|| {
                Error::Waiting(format!("no IP addresses available in range set: {subnet}"))
            })?;
            status["podIP"] = json!(ip.to_string());
            status["podIPs"] = json!([{ "ip": ip.to_string() }]);
            reserved = Some(ip);
        } else if pod_cidr.is_none() && self.wait_for_pod_cidr {
            return Err(Error::Waiting(format!(
                "network not ready: node {} has no podCIDR yet",
                self.node
            )));
        }
        pod.data["status"] = status;
        api.replace_status(&key.name, &PostParams::default(), &pod)
            .await?;
        if reserved.is_some() {
            *self.last_reserved.lock().unwrap_or_else(|e| e.into_inner()) = reserved;
        }
        Ok(())
    }

    /// The addresses host-local holds for the node's other pods: those of
    /// pods not terminated (a terminated pod's sandbox is torn down and
    /// its address released, CNI `DEL`), host-network pods aside.
    async fn held(&self, key: &Key) -> Result<Vec<Ipv4Addr>, Error> {
        let all: Api<DynamicObject> = Api::all_with(self.client.clone(), &pods());
        let selector = format!("spec.nodeName={}", self.node);
        let listed = all.list(&ListParams::default().fields(&selector)).await?;
        Ok(listed
            .items
            .iter()
            .filter(|p| Key::of(p) != *key)
            .filter(|p| p.data["spec"]["nodeName"] == self.node)
            .filter(|p| p.data["spec"]["hostNetwork"] != true)
            .filter(|p| {
                !matches!(
                    p.data["status"]["phase"].as_str(),
                    Some("Succeeded" | "Failed")
                )
            })
            .filter_map(|p| p.data["status"]["podIP"].as_str()?.parse().ok())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Ipv4Addr {
        text.parse().unwrap()
    }

    #[test]
    fn the_first_address_skips_the_network_and_the_gateway() {
        let subnet = Cidr::parse("10.244.1.0/24").unwrap();
        assert_eq!(host_local_next(&subnet, None, &[]), Some(ip("10.244.1.2")));
    }

    #[test]
    fn addresses_follow_the_last_one_given_and_skip_those_held() {
        let subnet = Cidr::parse("10.244.1.0/24").unwrap();
        let last = Some(ip("10.244.1.2"));
        assert_eq!(host_local_next(&subnet, last, &[]), Some(ip("10.244.1.3")));
        // Round robin: .2 released is not given again before the range
        // has been run through.
        let held = [ip("10.244.1.3")];
        assert_eq!(
            host_local_next(&subnet, Some(ip("10.244.1.2")), &held),
            Some(ip("10.244.1.4"))
        );
    }

    #[test]
    fn the_range_ends_before_the_broadcast_and_wraps_past_the_gateway() {
        let subnet = Cidr::parse("10.244.1.0/24").unwrap();
        assert_eq!(
            host_local_next(&subnet, Some(ip("10.244.1.253")), &[]),
            Some(ip("10.244.1.254"))
        );
        assert_eq!(
            host_local_next(&subnet, Some(ip("10.244.1.254")), &[]),
            Some(ip("10.244.1.2"))
        );
        // A last address outside the range starts from its start.
        assert_eq!(
            host_local_next(&subnet, Some(ip("10.9.9.9")), &[]),
            Some(ip("10.244.1.2"))
        );
    }

    #[test]
    fn a_full_range_or_a_tiny_network_gives_none() {
        let subnet = Cidr::parse("10.244.1.0/30").unwrap();
        assert_eq!(host_local_next(&subnet, None, &[]), Some(ip("10.244.1.2")));
        assert_eq!(host_local_next(&subnet, None, &[ip("10.244.1.2")]), None);
        let tiny = Cidr::parse("10.244.1.0/31").unwrap();
        assert_eq!(host_local_next(&tiny, None, &[]), None);
    }

    #[test]
    fn the_host_ip_is_the_first_internal_address_else_an_external_one() {
        let node = |addresses: Value| json!({"status": {"addresses": addresses}});
        let both = node(json!([{"type": "Hostname", "address": "n1"},
                               {"type": "ExternalIP", "address": "203.0.113.7"},
                               {"type": "InternalIP", "address": "172.18.0.2"}]));
        assert_eq!(host_ip(&both).as_deref(), Some("172.18.0.2"));
        let external = node(json!([{"type": "ExternalIP", "address": "203.0.113.7"}]));
        assert_eq!(host_ip(&external).as_deref(), Some("203.0.113.7"));
        assert_eq!(
            host_ip(&node(json!([{"type": "Hostname", "address": "n1"}]))),
            None
        );
        assert_eq!(host_ip(&json!({})), None);
    }
}
