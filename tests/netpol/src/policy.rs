//! The world of objects and the verdict: which policies isolate a pod in a
//! direction, and whether one of their rules admits a connection. The
//! rules cited here are numbered as in the crate documentation.

use std::net::IpAddr;

use serde_json::{Map, Value};

use crate::cidr;
use crate::selector::{self, labels_of};

/// The objects the verdict depends on, each as an API server returns it:
/// `v1` Namespaces, `v1` Pods and `networking.k8s.io/v1` NetworkPolicies.
#[derive(Debug, Clone, Default)]
pub struct World {
    pub namespaces: Vec<Value>,
    pub pods: Vec<Value>,
    pub policies: Vec<Value>,
}

fn name_of(object: &Value) -> Option<&str> {
    object.pointer("/metadata/name").and_then(Value::as_str)
}

fn namespace_of(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
}

impl World {
    /// The Namespace called `name`.
    pub fn namespace(&self, name: &str) -> Option<&Value> {
        self.namespaces.iter().find(|ns| name_of(ns) == Some(name))
    }

    /// The Namespace called `name`, to change (e.g. its labels).
    pub fn namespace_mut(&mut self, name: &str) -> Option<&mut Value> {
        self.namespaces
            .iter_mut()
            .find(|ns| name_of(ns) == Some(name))
    }

    /// The Pod `namespace/name`.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.pods
            .iter()
            .find(|p| namespace_of(p) == Some(namespace) && name_of(p) == Some(name))
    }

    /// The Pod `namespace/name`, to change (e.g. its labels).
    pub fn pod_mut(&mut self, namespace: &str, name: &str) -> Option<&mut Value> {
        self.pods
            .iter_mut()
            .find(|p| namespace_of(p) == Some(namespace) && name_of(p) == Some(name))
    }

    /// Creates `policy`, or replaces the one of the same namespace and name
    /// (a create or an update through the API).
    pub fn apply_policy(&mut self, policy: Value) {
        let key = (
            namespace_of(&policy).map(str::to_owned),
            name_of(&policy).map(str::to_owned),
        );
        match self
            .policies
            .iter_mut()
            .find(|p| namespace_of(p) == key.0.as_deref() && name_of(p) == key.1.as_deref())
        {
            Some(existing) => *existing = policy,
            None => self.policies.push(policy),
        }
    }

    /// Deletes the policy `namespace/name`; whether it existed.
    pub fn delete_policy(&mut self, namespace: &str, name: &str) -> bool {
        let before = self.policies.len();
        self.policies
            .retain(|p| !(namespace_of(p) == Some(namespace) && name_of(p) == Some(name)));
        self.policies.len() != before
    }
}

/// One end of a connection: a pod of the world, or an IP outside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Pod { namespace: String, name: String },
    External(IpAddr),
}

impl Endpoint {
    pub fn pod(namespace: &str, name: &str) -> Self {
        Endpoint::Pod {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    pub fn external(ip: IpAddr) -> Self {
        Endpoint::External(ip)
    }
}

/// An endpoint looked up in the world.
struct Resolved<'w> {
    /// The Pod object; `None` for an external IP.
    pod: Option<&'w Value>,
    namespace: Option<&'w str>,
    namespace_labels: Option<&'w Map<String, Value>>,
    ips: Vec<IpAddr>,
}

fn resolve<'w>(world: &'w World, endpoint: &Endpoint) -> Option<Resolved<'w>> {
    match endpoint {
        Endpoint::External(ip) => Some(Resolved {
            pod: None,
            namespace: None,
            namespace_labels: None,
            ips: vec![*ip],
        }),
        Endpoint::Pod { namespace, name } => {
            let pod = world.pod(namespace, name)?;
            let mut ips: Vec<IpAddr> = pod
                .pointer("/status/podIPs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|entry| entry.get("ip").and_then(Value::as_str))
                .chain(pod.pointer("/status/podIP").and_then(Value::as_str))
                .filter_map(|ip| ip.parse().ok())
                .collect();
            ips.dedup();
            Some(Resolved {
                pod: Some(pod),
                namespace: namespace_of(pod),
                namespace_labels: world.namespace(namespace).and_then(labels_of),
                ips,
            })
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    fn policy_type(self) -> &'static str {
        match self {
            Direction::Ingress => "Ingress",
            Direction::Egress => "Egress",
        }
    }

    /// The spec's rule list and, in a rule, its peer list.
    fn fields(self) -> (&'static str, &'static str) {
        match self {
            Direction::Ingress => ("ingress", "from"),
            Direction::Egress => ("egress", "to"),
        }
    }
}

/// Rule 1: the policy types, explicit or defaulted.
fn affects(spec: &Value, direction: Direction) -> bool {
    match spec.get("policyTypes").and_then(Value::as_array) {
        Some(types) if !types.is_empty() => types
            .iter()
            .any(|t| t.as_str() == Some(direction.policy_type())),
        _ => match direction {
            Direction::Ingress => true,
            Direction::Egress => non_empty(spec.get("egress")),
        },
    }
}

fn non_empty(list: Option<&Value>) -> bool {
    list.and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty())
}

/// Whether `allowed` lets a connection from `from` to `to` on
/// `port`/`protocol` (`"TCP"`, `"UDP"` or `"SCTP"`) through: the source's
/// egress AND the destination's ingress (rule 3). A pod endpoint that is
/// not in the world has no connectivity: `false`. A pod to itself is
/// always allowed (rule 9).
pub fn allowed(world: &World, from: &Endpoint, to: &Endpoint, port: u16, protocol: &str) -> bool {
    let (Some(source), Some(destination)) = (resolve(world, from), resolve(world, to)) else {
        return false;
    };
    if matches!(from, Endpoint::Pod { .. }) && from == to {
        return true;
    }
    let connection = Connection {
        world,
        source: &source,
        destination: &destination,
        port,
        protocol,
    };
    connection.allows(Direction::Egress) && connection.allows(Direction::Ingress)
}

struct Connection<'a, 'w> {
    world: &'w World,
    source: &'a Resolved<'w>,
    destination: &'a Resolved<'w>,
    port: u16,
    protocol: &'a str,
}

impl Connection<'_, '_> {
    /// Rules 2 and 4: the policy side of `direction` (the source for
    /// egress, the destination for ingress) allows the connection.
    fn allows(&self, direction: Direction) -> bool {
        let (subject, peer) = match direction {
            Direction::Egress => (self.source, self.destination),
            Direction::Ingress => (self.destination, self.source),
        };
        let Some(pod) = subject.pod else {
            // An external endpoint has no policies.
            return true;
        };
        let (rules_field, _) = direction.fields();
        let mut isolated = false;
        for policy in &self.world.policies {
            let Some(spec) = policy.get("spec") else {
                continue;
            };
            let selects = namespace_of(policy) == subject.namespace
                && spec
                    .get("podSelector")
                    .is_some_and(|s| selector::matches(s, labels_of(pod)));
            if !selects || !affects(spec, direction) {
                continue;
            }
            isolated = true;
            let admitted = spec
                .get(rules_field)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|rule| self.rule_matches(rule, direction, namespace_of(policy), peer));
            if admitted {
                return true;
            }
        }
        !isolated
    }

    /// Rule 5: peers AND ports, each missing or empty meaning "all".
    fn rule_matches(
        &self,
        rule: &Value,
        direction: Direction,
        policy_namespace: Option<&str>,
        peer: &Resolved,
    ) -> bool {
        let (_, peers_field) = direction.fields();
        let peers_match = match rule.get(peers_field).and_then(Value::as_array) {
            Some(peers) if !peers.is_empty() => peers
                .iter()
                .any(|p| peer_matches(p, policy_namespace, peer)),
            _ => true,
        };
        let ports_match = match rule.get("ports").and_then(Value::as_array) {
            Some(ports) if !ports.is_empty() => ports.iter().any(|p| self.port_matches(p)),
            _ => true,
        };
        peers_match && ports_match
    }

    /// Rule 8: protocol (default TCP), then no port, a numeric port (with
    /// `endPort`), or a named port of the destination pod.
    fn port_matches(&self, entry: &Value) -> bool {
        let protocol = entry
            .get("protocol")
            .and_then(Value::as_str)
            .unwrap_or("TCP");
        if protocol != self.protocol {
            return false;
        }
        match entry.get("port") {
            None | Some(Value::Null) => true,
            Some(Value::Number(start)) => {
                let Some(start) = start.as_u64() else {
                    return false;
                };
                let port = u64::from(self.port);
                match entry.get("endPort").and_then(Value::as_u64) {
                    Some(end) => start <= port && port <= end,
                    None => start == port,
                }
            }
            Some(Value::String(name)) => self.destination.pod.is_some_and(|pod| {
                named_ports(pod)
                    .any(|(n, p, number)| n == name && p == protocol && number == Some(self.port))
            }),
            Some(_) => false,
        }
    }
}

/// The destination pod's `spec.containers[].ports[]` as (name, protocol
/// defaulting to TCP, containerPort).
fn named_ports(pod: &Value) -> impl Iterator<Item = (&str, &str, Option<u16>)> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("ports").and_then(Value::as_array))
        .flatten()
        .filter_map(|p| {
            let name = p.get("name").and_then(Value::as_str)?;
            let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            let number = p
                .get("containerPort")
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok());
            Some((name, protocol, number))
        })
}

/// Rule 6: one `NetworkPolicyPeer` against the other endpoint.
fn peer_matches(peer_spec: &Value, policy_namespace: Option<&str>, peer: &Resolved) -> bool {
    if let Some(block) = peer_spec.get("ipBlock").filter(|b| !b.is_null()) {
        return peer.ips.iter().any(|ip| cidr::in_block(block, *ip));
    }
    let pod_selector = peer_spec.get("podSelector").filter(|s| !s.is_null());
    let namespace_selector = peer_spec.get("namespaceSelector").filter(|s| !s.is_null());
    let Some(pod) = peer.pod else {
        // Selectors select pods only, never external IPs.
        return false;
    };
    let namespace_ok = match namespace_selector {
        Some(selector) => selector::matches(selector, peer.namespace_labels),
        None => peer.namespace.is_some() && peer.namespace == policy_namespace,
    };
    let pod_ok = match pod_selector {
        Some(selector) => selector::matches(selector, labels_of(pod)),
        None => true,
    };
    (pod_selector.is_some() || namespace_selector.is_some()) && namespace_ok && pod_ok
}
