//! Rules of the evaluator that upstream's e2e cases do not reach: defaults
//! the API server would otherwise have filled in (`policyTypes`,
//! `protocol`), `endPort`, external IPs, named ports of the wrong
//! protocol. Each cites the API reference text it holds the evaluator to:
//! <https://kubernetes.io/docs/reference/kubernetes-api/networking-resources/network-policy-v1/>.
#![allow(clippy::unwrap_used)]

use std::net::IpAddr;

use netpol_eval::{allowed, Endpoint, World};
use serde_json::{json, Value};

fn world(policies: Vec<Value>) -> World {
    let namespace = |name: &str| json!({"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}});
    let pod = |ns: &str, name: &str, ip: &str| {
        json!({
            "metadata": {"name": name, "namespace": ns, "labels": {"pod": name}},
            "spec": {"containers": [{"name": "c", "ports": [
                // No protocol: TCP by default.
                {"name": "http", "containerPort": 8080},
                {"name": "dns", "containerPort": 53, "protocol": "UDP"},
            ]}]},
            "status": {"podIP": ip, "podIPs": [{"ip": ip}, {"ip": "fd00::1:1"}]},
        })
    };
    World {
        namespaces: vec![namespace("x"), namespace("y")],
        pods: vec![pod("x", "a", "10.0.1.1"), pod("y", "a", "10.0.2.1")],
        policies: policies
            .into_iter()
            .enumerate()
            .map(|(i, spec)| {
                json!({"metadata": {"name": format!("p{i}"), "namespace": "x"}, "spec": spec})
            })
            .collect(),
    }
}

fn xa() -> Endpoint {
    Endpoint::pod("x", "a")
}

fn ya() -> Endpoint {
    Endpoint::pod("y", "a")
}

fn ip(s: &str) -> Endpoint {
    Endpoint::external(s.parse::<IpAddr>().unwrap())
}

/// "If this field is not specified, it will default based on the existence
/// of ingress or egress rules; policies that contain an egress section are
/// assumed to affect egress, and all policies (whether or not they contain
/// an ingress section) are assumed to affect ingress."
#[test]
fn policy_types_default_from_the_rules() {
    // No policyTypes, no rules: ingress isolated, egress not.
    let w = world(vec![json!({"podSelector": {}})]);
    assert!(!allowed(&w, &ya(), &xa(), 80, "TCP"));
    assert!(allowed(&w, &xa(), &ya(), 80, "TCP"));
    // An empty egress list is no egress section.
    let w = world(vec![
        json!({"podSelector": {}, "ingress": [{}], "egress": []}),
    ]);
    assert!(allowed(&w, &xa(), &ya(), 80, "TCP"));
    // An egress rule makes it affect egress too.
    let w = world(vec![json!({
        "podSelector": {},
        "ingress": [{}],
        "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}],
    })]);
    assert!(!allowed(&w, &xa(), &ya(), 80, "TCP"));
    assert!(allowed(&w, &xa(), &ya(), 53, "UDP"));
    assert!(allowed(&w, &ya(), &xa(), 80, "TCP"));
    // Explicit Egress only: ingress is not isolated.
    let w = world(vec![json!({"podSelector": {}, "policyTypes": ["Egress"]})]);
    assert!(allowed(&w, &ya(), &xa(), 80, "TCP"));
    assert!(!allowed(&w, &xa(), &ya(), 80, "TCP"));
}

/// `NetworkPolicyPort.protocol`: "If not specified, this field defaults to
/// TCP"; `port` "If this field is not provided, this matches all port
/// names and numbers."
#[test]
fn protocol_defaults_to_tcp_and_a_missing_port_is_every_port() {
    let w = world(vec![
        json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}),
    ]);
    assert!(allowed(&w, &ya(), &xa(), 80, "TCP"));
    assert!(!allowed(&w, &ya(), &xa(), 80, "UDP"));
    assert!(!allowed(&w, &ya(), &xa(), 81, "TCP"));
    let w = world(vec![
        json!({"podSelector": {}, "ingress": [{"ports": [{}]}]}),
    ]);
    assert!(allowed(&w, &ya(), &xa(), 1234, "TCP"));
    assert!(!allowed(&w, &ya(), &xa(), 1234, "SCTP"));
}

/// `endPort`: "indicates that the range of ports from port to endPort if
/// set, inclusive, should be allowed by the policy."
#[test]
fn end_port_is_an_inclusive_range() {
    let w = world(vec![json!({
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"port": 32000, "endPort": 32768, "protocol": "TCP"}]}],
    })]);
    assert!(!allowed(&w, &ya(), &xa(), 31999, "TCP"));
    assert!(allowed(&w, &ya(), &xa(), 32000, "TCP"));
    assert!(allowed(&w, &ya(), &xa(), 32500, "TCP"));
    assert!(allowed(&w, &ya(), &xa(), 32768, "TCP"));
    assert!(!allowed(&w, &ya(), &xa(), 32769, "TCP"));
    assert!(!allowed(&w, &ya(), &xa(), 32500, "UDP"));
}

/// Named ports resolve against the destination pod's container ports, with
/// their protocol (cyclonus' "open a named port that doesn't match its
/// protocol" and "open a named port that isn't served" are closed).
#[test]
fn named_ports_resolve_on_the_destination_with_their_protocol() {
    let named = |name: &str, protocol: &str| {
        world(vec![json!({
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"ports": [{"port": name, "protocol": protocol}]}],
            "egress": [{"ports": [{"port": name, "protocol": protocol}]}],
        })])
    };
    let w = named("http", "TCP");
    assert!(allowed(&w, &ya(), &xa(), 8080, "TCP"));
    assert!(!allowed(&w, &ya(), &xa(), 80, "TCP"));
    // Egress to a pod of another namespace: resolved on y/a.
    assert!(allowed(&w, &xa(), &ya(), 8080, "TCP"));
    // Egress to an external IP: nothing to resolve the name on.
    assert!(!allowed(&w, &xa(), &ip("192.0.2.1"), 8080, "TCP"));
    let w = named("dns", "TCP");
    assert!(!allowed(&w, &ya(), &xa(), 53, "TCP"));
    assert!(!allowed(&w, &ya(), &xa(), 53, "UDP"));
    let w = named("dns", "UDP");
    assert!(allowed(&w, &ya(), &xa(), 53, "UDP"));
    let w = named("absent", "TCP");
    assert!(!allowed(&w, &ya(), &xa(), 8080, "TCP"));
}

/// `ipBlock` applies to external IPs and pod IPs (either family of
/// `status.podIPs`); selectors never select an external IP; an external
/// endpoint has no policies of its own.
#[test]
fn external_ips_match_ip_blocks_only() {
    let w = world(vec![json!({
        "podSelector": {},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": [
            {"ipBlock": {"cidr": "192.0.2.0/24", "except": ["192.0.2.128/25"]}},
            {"namespaceSelector": {}},
        ]}],
        "egress": [{"to": [{"ipBlock": {"cidr": "fd00::/16"}}]}],
    })]);
    assert!(allowed(&w, &ip("192.0.2.1"), &xa(), 80, "TCP"));
    assert!(!allowed(&w, &ip("192.0.2.200"), &xa(), 80, "TCP"));
    assert!(!allowed(&w, &ip("198.51.100.1"), &xa(), 80, "TCP"));
    assert!(allowed(&w, &ya(), &xa(), 80, "TCP"));
    assert!(allowed(&w, &xa(), &ip("fd00::9"), 80, "TCP"));
    assert!(!allowed(&w, &xa(), &ip("192.0.2.1"), 80, "TCP"));
    // y/a's second IP is in fd00::/16.
    assert!(allowed(&w, &xa(), &ya(), 80, "TCP"));
    // Neither end has a policy.
    assert!(allowed(&w, &ip("198.51.100.1"), &ya(), 80, "TCP"));
    assert!(allowed(&w, &ya(), &ip("198.51.100.1"), 80, "TCP"));
}

/// A peer's `podSelector` alone selects in the policy's namespace only;
/// a pod is never isolated by a policy of another namespace; loopback is
/// allowed; a pod not in the world has no connectivity.
#[test]
fn namespaces_loopback_and_unknown_pods() {
    let w = world(vec![json!({
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "a"}}}]}],
    })]);
    assert!(!allowed(&w, &ya(), &xa(), 80, "TCP"));
    assert!(allowed(&w, &xa(), &ya(), 80, "TCP"));
    assert!(allowed(&w, &xa(), &xa(), 80, "TCP"));
    assert!(!allowed(&w, &Endpoint::pod("x", "zz"), &ya(), 80, "TCP"));
    // An empty `from` list admits every source.
    let w = world(vec![json!({
        "podSelector": {"matchLabels": {"pod": "a"}},
        "ingress": [{"from": [], "ports": [{"port": 80}]}],
    })]);
    assert!(allowed(&w, &ip("203.0.113.9"), &xa(), 80, "TCP"));
    assert!(!allowed(&w, &ip("203.0.113.9"), &xa(), 81, "TCP"));
}
