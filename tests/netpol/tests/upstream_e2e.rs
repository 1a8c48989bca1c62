//! Kubernetes' NetworkPolicy conformance cases, ported as table tests over
//! upstream's topology: `kubernetes/kubernetes`
//! `test/e2e/network/netpol/network_policy.go` (read at commit 008b3652).
//!
//! Each `#[test]` is one upstream `f.It`, named after its text in
//! snake_case, in a module named after its `ginkgo.Context`. The world
//! holds the namespaces x, y and z (labelled `kubernetes.io/metadata.name`
//! and `ns`, as `model.go` and the API server label them) and the pods the
//! case lists in `initializeResources` (labelled `pod: <name>`, serving
//! 80/81 on TCP, UDP and SCTP with container ports named
//! `serve-<port>-<proto>`). Policies are written as the API server returns
//! the ones upstream's generators build (`SetSpecIngressRules` and
//! `SetSpecEgressRules` set `policyTypes`; the API server defaults a port's
//! `protocol` to TCP and omits empty lists and maps).
//!
//! The expected matrices are written by hand from the case's `Reachability`
//! overrides (`NewReachability(all, true)` then `Expect`, `ExpectPeer`,
//! `ExpectAllIngress`, `ExpectAllEgress`), never computed by the
//! evaluator. Multi-step cases are sequences of (mutation, expected
//! matrix), as upstream's `ValidateOrFail` calls are.
#![allow(clippy::unwrap_used)]

use std::net::Ipv4Addr;

use netpol_eval::{Matrix, Peer, World};
use serde_json::{json, Value};

const TCP: &str = "TCP";
const UDP: &str = "UDP";
const SCTP: &str = "SCTP";
const NAMESPACE_LABEL: &str = "kubernetes.io/metadata.name";

fn namespace(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {NAMESPACE_LABEL: name, "ns": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

/// Synthetic pod IPs `10.0.<namespace>.<pod>`: x/a is 10.0.1.1, y/b
/// 10.0.2.2. All lie in one /4, as a real pod CIDR does for upstream's
/// `makeLargeCIDRForIP`.
fn pod_ip(namespace: &str, name: &str) -> String {
    let index = |s: &str| {
        s.bytes()
            .next()
            .map_or(0, |b| b.saturating_sub(b'a') % 23 + 1)
    };
    let ns = match namespace {
        "x" => 1,
        "y" => 2,
        "z" => 3,
        other => index(other),
    };
    format!("10.0.{ns}.{}", index(name))
}

fn pod(namespace: &str, name: &str) -> Value {
    let mut containers = Vec::new();
    for port in [80, 81] {
        for protocol in [TCP, UDP, SCTP] {
            let lower = protocol.to_lowercase();
            containers.push(json!({
                "name": format!("cont-{port}-{lower}"),
                "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "ports": [{
                    "containerPort": port,
                    "name": format!("serve-{port}-{lower}"),
                    "protocol": protocol,
                }],
            }));
        }
    }
    let ip = pod_ip(namespace, name);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"pod": name}},
        "spec": {"containers": containers},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]},
    })
}

/// Namespaces x, y, z and the pods `ns/name` upstream's case creates.
fn world(pods: &[&str]) -> World {
    World {
        namespaces: ["x", "y", "z"].into_iter().map(namespace).collect(),
        pods: pods
            .iter()
            .map(|p| {
                let (ns, name) = p.split_once('/').unwrap();
                pod(ns, name)
            })
            .collect(),
        policies: Vec::new(),
    }
}

fn policy(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

/// Upstream's `ValidateOrFail`: the evaluator's matrix on `port`/`protocol`
/// equals `expected`, loopback aside.
#[track_caller]
fn check(world: &World, port: u16, protocol: &str, expected: &Matrix) {
    let observed = Matrix::observe(world, &expected.pods(), port, protocol);
    let wrong = expected.mismatches(&observed);
    assert!(
        wrong.is_empty(),
        "{protocol}/{port}: {} wrong pair(s) {wrong:?}\n\nexpected:\n{expected}\n\nobserved:\n{observed}\n\ncomparison:\n{}\n",
        wrong.len(),
        expected.compare(&observed),
    );
}

/// Upstream's `makeLargeCIDRForIP`: the /4 holding `ip`.
fn large_cidr_for(ip: &str) -> String {
    let ip: Ipv4Addr = ip.parse().unwrap();
    format!("{}/4", Ipv4Addr::from(u32::from(ip) & 0xf000_0000))
}

fn add_pod_labels(world: &mut World, namespace: &str, name: &str, labels: Value) {
    let pod = world.pod_mut(namespace, name).unwrap();
    let existing = pod.pointer_mut("/metadata/labels").unwrap();
    for (k, v) in labels.as_object().unwrap() {
        existing[k] = v.clone();
    }
}

/// `ginkgo.Context("NetworkPolicy between server and client")`.
mod server_and_client {
    use super::*;

    /// Upstream: "should support a 'default-deny-ingress' policy".
    #[test]
    fn should_support_a_default_deny_ingress_policy() {
        let pods = ["x/a", "x/b", "y/a", "y/b"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "deny-ingress",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::any(), Peer::namespace("x"), false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should support a 'default-deny-all' policy".
    #[test]
    fn should_support_a_default_deny_all_policy() {
        let pods = ["x/a", "x/b", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "deny-all",
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::any(), Peer::namespace("x"), false);
        r.expect_peer(Peer::namespace("x"), Peer::any(), false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy to allow traffic from pods within
    /// server namespace based on PodSelector".
    #[test]
    fn should_enforce_policy_to_allow_traffic_from_pods_within_server_namespace_based_on_pod_selector(
    ) {
        let pods = ["x/a", "x/b", "x/c", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "x-a-allows-x-b",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        r.expect("x/b", "x/a", true);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy to allow ingress traffic for a
    /// target".
    #[test]
    fn should_enforce_policy_to_allow_ingress_traffic_for_a_target() {
        let pods = ["x/a", "x/b", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "deny-all",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        ));
        w.apply_policy(policy(
            "x",
            "allow-all-to-a",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {}, "namespaceSelector": {}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", true);
        r.expect_all_ingress("x/b", false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy to allow ingress traffic from pods
    /// in all namespaces".
    #[test]
    fn should_enforce_policy_to_allow_ingress_traffic_from_pods_in_all_namespaces() {
        let pods = ["x/a", "x/b", "y/a", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-from-another-ns",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"namespaceSelector": {}}]}],
            }),
        ));
        let r = Matrix::new(&pods, true);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy to allow traffic only from a
    /// different namespace, based on NamespaceSelector".
    #[test]
    fn should_enforce_policy_to_allow_traffic_only_from_a_different_namespace_based_on_namespace_selector(
    ) {
        let pods = ["x/a", "x/b", "y/a", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-client-a-via-ns-selector",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "y"}}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("x"), Peer::pod("x", "a"), false);
        r.expect_peer(Peer::namespace("z"), Peer::pod("x", "a"), false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy based on PodSelector with
    /// MatchExpressions".
    #[test]
    fn should_enforce_policy_based_on_pod_selector_with_match_expressions() {
        let pods = ["x/a", "x/b", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "x-a-allows-x-b",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {"matchExpressions": [
                    {"key": "pod", "operator": "In", "values": ["b"]},
                ]}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        r.expect("x/b", "x/a", true);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy based on NamespaceSelector with
    /// MatchExpressions".
    #[test]
    fn should_enforce_policy_based_on_namespace_selector_with_match_expressions() {
        let pods = ["x/a", "x/b", "y/a", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-ns-y-match-selector",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"namespaceSelector": {"matchExpressions": [
                    {"key": NAMESPACE_LABEL, "operator": "In", "values": ["y"]},
                ]}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("x"), Peer::pod("x", "a"), false);
        r.expect_peer(Peer::namespace("z"), Peer::pod("x", "a"), false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy based on PodSelector or
    /// NamespaceSelector".
    #[test]
    fn should_enforce_policy_based_on_pod_selector_or_namespace_selector() {
        let pods = ["x/a", "x/b", "x/c", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-ns-y-match-selector",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [
                    {"namespaceSelector": {"matchExpressions": [
                        {"key": NAMESPACE_LABEL, "operator": "NotIn", "values": ["x"]},
                    ]}},
                    {"podSelector": {"matchLabels": {"pod": "b"}}},
                ]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect("x/a", "x/a", false);
        r.expect("x/c", "x/a", false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy based on PodSelector and
    /// NamespaceSelector".
    #[test]
    fn should_enforce_policy_based_on_pod_selector_and_namespace_selector() {
        let pods = ["x/a", "x/b", "y/a", "y/b", "z/b"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-ns-y-podselector-and-nsselector",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{
                    "namespaceSelector": {"matchExpressions": [
                        {"key": NAMESPACE_LABEL, "operator": "NotIn", "values": ["x"]},
                    ]},
                    "podSelector": {"matchLabels": {"pod": "b"}},
                }]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        r.expect("y/b", "x/a", true);
        r.expect("z/b", "x/a", true);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy based on Multiple PodSelectors and
    /// NamespaceSelectors".
    #[test]
    fn should_enforce_policy_based_on_multiple_pod_selectors_and_namespace_selectors() {
        let pods = ["x/a", "x/b", "y/a", "y/b", "y/c"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-ns-y-z-pod-b-c",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{
                    "namespaceSelector": {"matchExpressions": [
                        {"key": NAMESPACE_LABEL, "operator": "NotIn", "values": ["x"]},
                    ]},
                    "podSelector": {"matchExpressions": [
                        {"key": "pod", "operator": "In", "values": ["b", "c"]},
                    ]},
                }]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("x"), Peer::pod("x", "a"), false);
        r.expect("y/a", "x/a", false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy based on any PodSelectors".
    #[test]
    fn should_enforce_policy_based_on_any_pod_selectors() {
        let pods = ["x/a", "x/b", "x/c"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-ns-x-pod-b-c",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [
                    {"podSelector": {"matchLabels": {"pod": "b"}}},
                    {"podSelector": {"matchLabels": {"pod": "c"}}},
                ]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        r.expect("x/b", "x/a", true);
        r.expect("x/c", "x/a", true);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy to allow traffic only from a pod in
    /// a different namespace based on PodSelector and NamespaceSelector".
    #[test]
    fn should_enforce_policy_to_allow_traffic_only_from_a_pod_in_a_different_namespace_based_on_pod_selector_and_namespace_selector(
    ) {
        let pods = ["x/a", "x/b", "y/a", "y/b", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-ns-y-pod-a-via-namespace-pod-selector",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{
                    "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "y"}},
                    "podSelector": {"matchLabels": {"pod": "a"}},
                }]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        r.expect("y/a", "x/a", true);
        check(&w, 80, TCP, &r);
    }

    /// `allowPort81Policy` of "should enforce policy based on Ports" and
    /// the stacked-policies case.
    fn allow_port_from_y(name: &str, port: u16, protocol: &str) -> Value {
        policy(
            "x",
            name,
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{
                    "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "y"}}}],
                    "ports": [{"port": port, "protocol": protocol}],
                }],
            }),
        )
    }

    /// Upstream: "should enforce policy based on Ports".
    #[test]
    fn should_enforce_policy_based_on_ports() {
        let pods = ["x/a", "x/b", "y/a", "y/b", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(allow_port_from_y("allow-client-a-via-ns-selector", 81, TCP));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("x"), Peer::pod("x", "a"), false);
        r.expect_peer(Peer::namespace("y"), Peer::pod("x", "a"), true);
        r.expect_peer(Peer::namespace("z"), Peer::pod("x", "a"), false);
        check(&w, 81, TCP, &r);
    }

    /// Upstream: "should enforce multiple, stacked policies with
    /// overlapping podSelectors".
    #[test]
    fn should_enforce_multiple_stacked_policies_with_overlapping_pod_selectors() {
        let pods = ["x/a", "x/b", "y/a", "y/b", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(allow_port_from_y("allow-client-a-via-ns-selector", 81, TCP));
        let mut allow = Matrix::new(&pods, true);
        allow.expect_peer(Peer::namespace("x"), Peer::pod("x", "a"), false);
        allow.expect_peer(Peer::namespace("y"), Peer::pod("x", "a"), true);
        allow.expect_peer(Peer::namespace("z"), Peer::pod("x", "a"), false);
        check(&w, 81, TCP, &allow);

        let mut deny = Matrix::new(&pods, true);
        deny.expect_all_ingress("x/a", false);
        check(&w, 80, TCP, &deny);

        w.apply_policy(allow_port_from_y(
            "allow-client-a-via-ns-selector-80",
            80,
            TCP,
        ));
        check(&w, 80, TCP, &allow);
    }

    /// Upstream: "should support allow-all policy".
    #[test]
    fn should_support_allow_all_policy() {
        let pods = ["x/a", "x/b", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-all",
            json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}),
        ));
        let r = Matrix::new(&pods, true);
        check(&w, 80, TCP, &r);
        check(&w, 81, TCP, &r);
    }

    /// Upstream: "should allow ingress access on one named port".
    #[test]
    fn should_allow_ingress_access_on_one_named_port() {
        let pods = ["x/a", "x/b", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-all",
            json!({
                "podSelector": {},
                "policyTypes": ["Ingress"],
                // `protocol` defaulted by the API server.
                "ingress": [{"ports": [{"port": "serve-81-tcp", "protocol": "TCP"}]}],
            }),
        ));
        check(&w, 81, TCP, &Matrix::new(&pods, true));
        let mut port80 = Matrix::new(&pods, true);
        port80.expect_peer(Peer::any(), Peer::namespace("x"), false);
        check(&w, 80, TCP, &port80);
    }

    /// Upstream: "should allow ingress access from namespace on one named
    /// port".
    #[test]
    fn should_allow_ingress_access_from_namespace_on_one_named_port() {
        let pods = ["x/a", "x/b", "y/a", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-client-a-via-ns-selector-80",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{
                    "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "y"}}}],
                    "ports": [{"port": "serve-80-tcp", "protocol": "TCP"}],
                }],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("x"), Peer::pod("x", "a"), false);
        r.expect_peer(Peer::namespace("z"), Peer::pod("x", "a"), false);
        check(&w, 80, TCP, &r);

        let mut fail = Matrix::new(&pods, true);
        fail.expect_all_ingress("x/a", false);
        check(&w, 81, TCP, &fail);
    }

    /// Upstream: "should allow egress access on one named port".
    #[test]
    fn should_allow_egress_access_on_one_named_port() {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-egress",
            json!({
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [{"ports": [{"port": "serve-80-tcp", "protocol": "TCP"}]}],
            }),
        ));
        check(&w, 80, TCP, &Matrix::new(&pods, true));
        let mut port81 = Matrix::new(&pods, true);
        port81.expect_peer(Peer::namespace("x"), Peer::any(), false);
        check(&w, 81, TCP, &port81);
    }

    /// Upstream: "should enforce updated policy".
    #[test]
    fn should_enforce_updated_policy() {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        // 1) allow all.
        w.apply_policy(policy(
            "x",
            "allow-all-mutate-to-deny-all",
            json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}),
        ));
        check(&w, 81, TCP, &Matrix::new(&pods, true));
        // 2) update it to deny all (`Spec.Ingress = []`, omitted on return).
        w.apply_policy(policy(
            "x",
            "allow-all-mutate-to-deny-all",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        ));
        let mut deny = Matrix::new(&pods, true);
        deny.expect_peer(Peer::any(), Peer::namespace("x"), false);
        check(&w, 81, TCP, &deny);
    }

    /// Upstream: "should allow ingress access from updated namespace".
    #[test]
    fn should_allow_ingress_access_from_updated_namespace() {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-client-a-via-ns-selector",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns2": "updated"}}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        check(&w, 80, TCP, &r);

        w.namespace_mut("y").unwrap()["metadata"]["labels"]["ns2"] = json!("updated");
        let mut with_label = Matrix::new(&pods, true);
        with_label.expect_all_ingress("x/a", false);
        with_label.expect_peer(Peer::namespace("y"), Peer::any(), true);
        check(&w, 80, TCP, &with_label);
    }

    /// Upstream: "should allow ingress access from updated pod".
    #[test]
    fn should_allow_ingress_access_from_updated_pod() {
        let pods = ["x/a", "x/b"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-client-a-via-pod-selector",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b", "pod2": "updated"}}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        check(&w, 80, TCP, &r);

        add_pod_labels(&mut w, "x", "b", json!({"pod": "b", "pod2": "updated"}));
        let mut with_label = Matrix::new(&pods, true);
        with_label.expect_all_ingress("x/a", false);
        with_label.expect("x/b", "x/a", true);
        check(&w, 80, TCP, &with_label);
    }

    /// Upstream: "should deny ingress from pods on other namespaces".
    #[test]
    fn should_deny_ingress_from_pods_on_other_namespaces() {
        let pods = ["x/a", "x/b", "y/a", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "deny-empty-policy",
            json!({
                "podSelector": {},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("y"), Peer::namespace("x"), false);
        r.expect_peer(Peer::namespace("z"), Peer::namespace("x"), false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should deny ingress access to updated pod".
    #[test]
    fn should_deny_ingress_access_to_updated_pod() {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "deny-ingress-via-label-selector",
            json!({
                "podSelector": {"matchLabels": {"target": "isolated"}},
                "policyTypes": ["Ingress"],
            }),
        ));
        check(&w, 80, TCP, &Matrix::new(&pods, true));

        add_pod_labels(&mut w, "x", "a", json!({"target": "isolated"}));
        let mut isolated = Matrix::new(&pods, true);
        isolated.expect_all_ingress("x/a", false);
        check(&w, 80, TCP, &isolated);
    }

    /// Upstream: "should deny egress from pods based on PodSelector".
    #[test]
    fn should_deny_egress_from_pods_based_on_pod_selector() {
        let pods = ["x/a", "x/b", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "deny-egress-pod-a",
            json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Egress"]}),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_egress("x/a", false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should deny egress from all pods in a namespace".
    #[test]
    fn should_deny_egress_from_all_pods_in_a_namespace() {
        let pods = ["x/a", "x/b", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "deny-egress-ns-x",
            json!({"podSelector": {}, "policyTypes": ["Egress"]}),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("x"), Peer::any(), false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should work with Ingress, Egress specified together".
    #[test]
    fn should_work_with_ingress_egress_specified_together() {
        let pods = ["x/a", "x/b", "x/c", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-client-a-via-pod-selector",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Egress", "Ingress"],
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}],
                "egress": [{"ports": [{"port": 80, "protocol": "TCP"}]}],
            }),
        ));
        let mut port80 = Matrix::new(&pods, true);
        port80.expect_all_ingress("x/a", false);
        port80.expect("x/b", "x/a", true);
        check(&w, 80, TCP, &port80);

        let mut port81 = Matrix::new(&pods, true);
        port81.expect_all_ingress("x/a", false);
        port81.expect_all_egress("x/a", false);
        port81.expect("x/b", "x/a", true);
        check(&w, 81, TCP, &port81);
    }

    /// Upstream: "should support denying of egress traffic on the client
    /// side (even if the server explicitly allows this traffic)".
    #[test]
    fn should_support_denying_of_egress_traffic_on_the_client_side_even_if_the_server_explicitly_allows_this_traffic(
    ) {
        let pods = ["x/a", "y/a", "y/b"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-to-ns-y-pod-a",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{
                    "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "y"}},
                    "podSelector": {"matchLabels": {"pod": "a"}},
                }]}],
            }),
        ));
        let from_x_a = json!([{
            "from": [{
                "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "x"}},
                "podSelector": {"matchLabels": {"pod": "a"}},
            }],
        }]);
        for (name, target) in [
            ("allow-from-xa-on-ya-match-selector", "a"),
            ("allow-from-xa-on-yb-match-selector", "b"),
        ] {
            w.apply_policy(policy(
                "y",
                name,
                json!({
                    "podSelector": {"matchLabels": {"pod": target}},
                    "policyTypes": ["Ingress"],
                    "ingress": from_x_a,
                }),
            ));
        }
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::pod("x", "a"), Peer::any(), false);
        r.expect_peer(Peer::any(), Peer::pod("y", "a"), false);
        r.expect_peer(Peer::pod("x", "a"), Peer::pod("y", "a"), true);
        r.expect_peer(Peer::any(), Peer::pod("y", "b"), false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce egress policy allowing traffic to a server
    /// in a different namespace based on PodSelector and NamespaceSelector".
    #[test]
    fn should_enforce_egress_policy_allowing_traffic_to_a_server_in_a_different_namespace_based_on_pod_selector_and_namespace_selector(
    ) {
        let pods = ["x/a", "y/a", "y/b"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-to-ns-y-pod-a",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{
                    "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "y"}},
                    "podSelector": {"matchLabels": {"pod": "a"}},
                }]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_egress("x/a", false);
        r.expect("x/a", "y/a", true);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce ingress policy allowing any port traffic
    /// to a server on a specific protocol".
    #[test]
    fn should_enforce_ingress_policy_allowing_any_port_traffic_to_a_server_on_a_specific_protocol()
    {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-ingress-by-proto",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"protocol": "TCP"}]}],
            }),
        ));
        check(&w, 80, TCP, &Matrix::new(&pods, true));
        let mut udp = Matrix::new(&pods, true);
        udp.expect_peer(Peer::any(), Peer::pod("x", "a"), false);
        check(&w, 80, UDP, &udp);
    }

    /// Upstream: "should enforce multiple ingress policies with ingress
    /// allow-all policy taking precedence".
    #[test]
    fn should_enforce_multiple_ingress_policies_with_ingress_allow_all_policy_taking_precedence() {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-ingress-port-80",
            json!({
                "podSelector": {},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"port": 80, "protocol": "TCP"}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::any(), Peer::namespace("x"), false);
        check(&w, 81, TCP, &r);

        w.apply_policy(policy(
            "x",
            "allow-ingress",
            json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}),
        ));
        check(&w, 81, TCP, &Matrix::new(&pods, true));
    }

    /// Upstream: "should enforce multiple egress policies with egress
    /// allow-all policy taking precedence".
    #[test]
    fn should_enforce_multiple_egress_policies_with_egress_allow_all_policy_taking_precedence() {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-egress-port-80",
            json!({
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [{"ports": [{"port": 80, "protocol": "TCP"}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("x"), Peer::any(), false);
        check(&w, 81, TCP, &r);

        w.apply_policy(policy(
            "x",
            "allow-egress",
            json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]}),
        ));
        check(&w, 81, TCP, &Matrix::new(&pods, true));
    }

    /// Upstream: "should stop enforcing policies after they are deleted".
    #[test]
    fn should_stop_enforcing_policies_after_they_are_deleted() {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "deny-all",
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("x"), Peer::any(), false);
        r.expect_peer(Peer::any(), Peer::namespace("x"), false);
        check(&w, 80, TCP, &r);

        // `cleanNetworkPolicies`: every policy of every namespace.
        assert!(w.delete_policy("x", "deny-all"));
        assert!(w.policies.is_empty());
        check(&w, 80, TCP, &Matrix::new(&pods, true));
    }

    /// Upstream: "should allow egress access to server in CIDR block".
    #[test]
    fn should_allow_egress_access_to_server_in_cidr_block() {
        let pods = ["x/a", "y/a", "y/b"];
        let mut w = world(&pods);
        let server = pod_ip("y", "b");
        w.apply_policy(policy(
            "x",
            "allow-client-a-via-cidr-egress-rule",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{"ipBlock": {"cidr": format!("{server}/32")}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_egress("x/a", false);
        r.expect("x/a", "y/b", true);
        check(&w, 80, TCP, &r);
    }

    /// The policy of the two except-clause cases: egress from x/a to the
    /// /4 around x/b, except x/b.
    fn allow_large_cidr_except_x_b() -> Value {
        let server = pod_ip("x", "b");
        policy(
            "x",
            "allow-client-a-via-cidr-egress-rule",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{"ipBlock": {
                    "cidr": large_cidr_for(&server),
                    "except": [format!("{server}/32")],
                }}]}],
            }),
        )
    }

    /// Upstream: "should enforce except clause while egress access to
    /// server in CIDR block".
    #[test]
    fn should_enforce_except_clause_while_egress_access_to_server_in_cidr_block() {
        let pods = ["x/a", "x/b", "x/c"];
        let mut w = world(&pods);
        w.apply_policy(allow_large_cidr_except_x_b());
        let mut r = Matrix::new(&pods, true);
        r.expect("x/a", "x/b", false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should ensure an IP overlapping both IPBlock.CIDR and
    /// IPBlock.Except is allowed".
    #[test]
    fn should_ensure_an_ip_overlapping_both_ip_block_cidr_and_ip_block_except_is_allowed() {
        let pods = ["x/a", "x/b", "x/c"];
        let mut w = world(&pods);
        w.apply_policy(allow_large_cidr_except_x_b());
        let mut r = Matrix::new(&pods, true);
        r.expect("x/a", "x/b", false);
        check(&w, 80, TCP, &r);

        // Upstream `UpdatePolicy`s the same name: it replaces the first.
        let server = pod_ip("x", "b");
        w.apply_policy(policy(
            "x",
            "allow-client-a-via-cidr-egress-rule",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{"ipBlock": {"cidr": format!("{server}/32")}}]}],
            }),
        ));
        assert_eq!(w.policies.len(), 1);
        let mut allow = Matrix::new(&pods, true);
        allow.expect_all_egress("x/a", false);
        allow.expect("x/a", "x/b", true);
        check(&w, 80, TCP, &allow);
    }

    /// Upstream: "should enforce policies to check ingress and egress
    /// policies can be controlled independently based on PodSelector".
    #[test]
    fn should_enforce_policies_to_check_ingress_and_egress_policies_can_be_controlled_independently_based_on_pod_selector(
    ) {
        let pods = ["x/a", "x/b", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-egress-for-target",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Egress"],
                "egress": [{}],
            }),
        ));
        check(&w, 80, TCP, &Matrix::new(&pods, true));

        w.apply_policy(policy(
            "x",
            "deny-ingress-via-label-selector",
            json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Ingress"]}),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should not mistakenly treat 'protocol: SCTP' as
    /// 'protocol: TCP', even if the plugin doesn't support SCTP".
    #[test]
    fn should_not_mistakenly_treat_protocol_sctp_as_protocol_tcp_even_if_the_plugin_doesnt_support_sctp(
    ) {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "deny-ingress",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        ));
        w.apply_policy(policy(
            "x",
            "allow-only-sctp-ingress-on-port-81",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"port": 81, "protocol": "SCTP"}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::any(), Peer::namespace("x"), false);
        check(&w, 81, TCP, &r);
    }

    /// Upstream: "should properly isolate pods that are selected by a
    /// policy allowing SCTP, even if the plugin doesn't support SCTP".
    #[test]
    fn should_properly_isolate_pods_that_are_selected_by_a_policy_allowing_sctp_even_if_the_plugin_doesnt_support_sctp(
    ) {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-only-sctp-ingress-on-port-80",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"port": 80, "protocol": "SCTP"}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        check(&w, 81, TCP, &r);
    }

    /// Upstream: "should not allow access by TCP when a policy specifies
    /// only UDP".
    #[test]
    fn should_not_allow_access_by_tcp_when_a_policy_specifies_only_udp() {
        let pods = ["x/a", "y/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-only-udp-ingress-on-port-81",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"port": 81, "protocol": "UDP"}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_all_ingress("x/a", false);
        check(&w, 81, TCP, &r);
    }

    /// Upstream: "should enforce policy to allow traffic based on
    /// NamespaceSelector with MatchLabels using default ns label".
    #[test]
    fn should_enforce_policy_to_allow_traffic_based_on_namespace_selector_with_match_labels_using_default_ns_label(
    ) {
        let pods = ["x/a", "x/b", "y/a", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-client-a-via-ns-selector-for-immutable-ns-label",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "y"}}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::namespace("x"), Peer::pod("x", "a"), false);
        r.expect_peer(Peer::namespace("z"), Peer::pod("x", "a"), false);
        check(&w, 80, TCP, &r);
    }

    /// Upstream: "should enforce policy based on NamespaceSelector with
    /// MatchExpressions using default ns label".
    #[test]
    fn should_enforce_policy_based_on_namespace_selector_with_match_expressions_using_default_ns_label(
    ) {
        let pods = ["x/a", "x/b", "y/a", "z/a"];
        let mut w = world(&pods);
        w.apply_policy(policy(
            "x",
            "allow-ns-y-match-selector-for-immutable-ns-label",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{"namespaceSelector": {"matchExpressions": [
                    {"key": NAMESPACE_LABEL, "operator": "NotIn", "values": ["y"]},
                ]}}]}],
            }),
        ));
        let mut r = Matrix::new(&pods, true);
        r.expect_peer(Peer::pod("x", "a"), Peer::namespace("y"), false);
        check(&w, 80, TCP, &r);
    }
}

/// The UDP and SCTP contexts run the same three cases with one protocol.
fn default_deny_ingress(protocol: &str) {
    let pods = ["x/a", "x/b", "y/a", "y/b"];
    let mut w = world(&pods);
    w.apply_policy(policy(
        "x",
        "deny-all",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    ));
    let mut r = Matrix::new(&pods, true);
    r.expect_peer(Peer::any(), Peer::namespace("x"), false);
    check(&w, 80, protocol, &r);
}

fn policy_based_on_ports(protocol: &str) {
    let pods = ["x/a", "x/b", "y/a", "z/a"];
    let mut w = world(&pods);
    w.apply_policy(policy(
        "x",
        "allow-ingress-on-port-81-ns-x",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "y"}}}],
                "ports": [{"port": 81, "protocol": protocol}],
            }],
        }),
    ));
    let mut r = Matrix::new(&pods, true);
    r.expect_peer(Peer::namespace("x"), Peer::pod("x", "a"), false);
    r.expect_peer(Peer::namespace("z"), Peer::pod("x", "a"), false);
    check(&w, 81, protocol, &r);
    // Not upstream: the same policy admits nothing of another protocol.
    let other = if protocol == TCP { UDP } else { TCP };
    let mut r = Matrix::new(&pods, true);
    r.expect_all_ingress("x/a", false);
    check(&w, 81, other, &r);
}

fn pod_in_a_different_namespace(protocol: &str) {
    let pods = ["x/a", "x/b", "y/a"];
    let mut w = world(&pods);
    w.apply_policy(policy(
        "x",
        "allow-ns-y-pod-a-via-namespace-pod-selector",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{
                "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "y"}},
                "podSelector": {"matchLabels": {"pod": "a"}},
            }]}],
        }),
    ));
    let mut r = Matrix::new(&pods, true);
    r.expect_all_ingress("x/a", false);
    r.expect("y/a", "x/a", true);
    check(&w, 80, protocol, &r);
}

/// `ginkgo.Context("NetworkPolicy between server and client using UDP")`.
mod using_udp {
    use super::*;

    /// Upstream (UDP): "should support a 'default-deny-ingress' policy".
    #[test]
    fn should_support_a_default_deny_ingress_policy() {
        default_deny_ingress(UDP);
    }

    /// Upstream (UDP): "should enforce policy based on Ports".
    #[test]
    fn should_enforce_policy_based_on_ports() {
        policy_based_on_ports(UDP);
    }

    /// Upstream (UDP): "should enforce policy to allow traffic only from a
    /// pod in a different namespace based on PodSelector and
    /// NamespaceSelector".
    #[test]
    fn should_enforce_policy_to_allow_traffic_only_from_a_pod_in_a_different_namespace_based_on_pod_selector_and_namespace_selector(
    ) {
        pod_in_a_different_namespace(UDP);
    }
}

/// `ginkgo.Context("NetworkPolicy between server and client using SCTP")`.
mod using_sctp {
    use super::*;

    /// Upstream (SCTP): "should support a 'default-deny-ingress' policy".
    #[test]
    fn should_support_a_default_deny_ingress_policy() {
        default_deny_ingress(SCTP);
    }

    /// Upstream (SCTP): "should enforce policy based on Ports".
    #[test]
    fn should_enforce_policy_based_on_ports() {
        policy_based_on_ports(SCTP);
    }

    /// Upstream (SCTP): "should enforce policy to allow traffic only from a
    /// pod in a different namespace based on PodSelector and
    /// NamespaceSelector".
    #[test]
    fn should_enforce_policy_to_allow_traffic_only_from_a_pod_in_a_different_namespace_based_on_pod_selector_and_namespace_selector(
    ) {
        pod_in_a_different_namespace(SCTP);
    }
}
