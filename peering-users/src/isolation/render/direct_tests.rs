//! Direct provider-to-provider connections ([`super::direct`]), judged by
//! the test world's evaluator: alice's pods here reach her pod on provider
//! `q` by the address this provider sees it at, and nothing else there.

use netpol_eval::{allowed, Endpoint, World};

use super::tests::{conf, ip, market, ns, pod, settings, tenant_ns, world};
use super::*;

/// Provider `q`'s pods are in 10.50.0.0/16 at home; this provider sees
/// that network as 10.91.0.0/16 (its Configuration for q, in
/// `liqo-tenant-q`, as Liqo's networking writes it). Bob's pods are in
/// 10.60.0.0/16 at home, seen here as 10.81.0.0/16.
fn with_q(slices: &[(&str, &str)]) -> Observed {
    let mut observed = market();
    observed.namespaces.push(tenant_ns("q"));
    observed.configurations.push(Configuration {
        real_pod: vec!["10.50.0.0/16".into()],
        real_external: vec!["10.51.0.0/16".into()],
        ..conf("q", "10.91.0.0/16", "10.92.0.0/16")
    });
    for c in observed.configurations.iter_mut() {
        if c.name == "bob" {
            c.real_pod = vec!["10.60.0.0/16".into()];
        }
    }
    observed.shadow_endpoint_slices = slices
        .iter()
        .enumerate()
        .map(|(i, (namespace, data))| direct::ShadowEndpointSlice {
            namespace: namespace.to_string(),
            name: format!("web-{i}"),
            data: data.to_string(),
        })
        .collect();
    observed
}

fn judged(observed: &Observed, s: &Settings) -> (Plan, World) {
    let plan = plan(observed, s);
    let w = world(observed, &plan);
    (plan, w)
}

fn ok(w: &World, from: &Endpoint, to: &Endpoint) -> bool {
    allowed(w, from, to, 8080, "TCP")
}

fn skipped_why(plan: &Plan) -> Vec<String> {
    plan.skipped
        .iter()
        .map(|s| format!("{}: {}", s.what, s.why))
        .collect()
}

/// The `/32`s in alice's tenant isolation.
fn direct_blocks(plan: &Plan) -> Vec<String> {
    plan.policies
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some("alice-app"))
        .flat_map(|p| p.spec.iter())
        .flat_map(|s| s.ingress.iter().flatten())
        .flat_map(|r| r.from.iter().flatten())
        .filter_map(|peer| peer.ip_block.as_ref())
        .map(|b| b.cidr.clone())
        .filter(|c| c.ends_with("/32"))
        .collect()
}

#[test]
fn a_consumers_pod_on_another_provider_is_reached_directly_and_no_other_there() {
    let observed = with_q(&[("alice-app", r#"{"clusterAddresses": {"q": ["10.50.3.4"]}}"#)]);
    let (plan, w) = judged(&observed, &settings());
    assert!(plan.skipped.is_empty(), "{:?}", skipped_why(&plan));
    let hers = ip("10.91.3.4");
    // Both ways, at the address Liqo remapped it to.
    assert!(ok(&w, &pod("alice-app"), &hers));
    assert!(ok(&w, &hers, &pod("alice-app")));
    // Not as it is at home (that is q's own network, not routed here).
    assert!(!ok(&w, &pod("alice-app"), &ip("10.50.3.4")));
    // A stranger's pod on q, one address further: neither way.
    let stranger = ip("10.91.3.5");
    assert!(!ok(&w, &pod("alice-app"), &stranger));
    assert!(!ok(&w, &stranger, &pod("alice-app")));
    // Only alice's namespaces: bob's pods here neither reach her pod on
    // q nor are reached by it.
    assert!(!ok(&w, &pod("bob-app"), &hers));
    assert!(!ok(&w, &hers, &pod("bob-app")));
    // Her other namespace gets it too: isolation is per consumer.
    assert!(ok(&w, &pod("alice-db"), &hers));
    // The provider's protected namespace stays closed to it.
    assert!(!ok(&w, &hers, &pod("payments")));
}

#[test]
fn a_cluster_that_buys_here_is_not_reached_directly() {
    // Alice names bob's pod at his home (in his real network), and
    // carol's, who bought a service here.
    let mut observed = with_q(&[(
        "alice-app",
        r#"{"clusterAddresses": {"bob": ["10.60.0.9"], "carol": ["10.30.0.9"], "q": ["10.50.3.4"]}}"#,
    )]);
    observed.namespaces.push(tenant_ns("carol"));
    observed.configurations.push(Configuration {
        real_pod: vec!["10.30.0.0/16".into()],
        ..conf("carol", "10.61.0.0/16", "10.62.0.0/16")
    });
    let mut instance = ns(
        "svc-c-1",
        &[(service::MANAGED_BY_LABEL, service::MANAGED_BY)],
    );
    instance.contract = Some("c-1".into());
    observed.namespaces.push(instance);
    observed.offloadings.push(service::Offloading {
        namespace: "svc-c-1".into(),
        name: "offloading".into(),
        clusters: vec!["carol".into()],
    });
    let (plan, w) = judged(&observed, &settings());
    let why = skipped_why(&plan);
    for q in ["\"bob\"", "\"carol\""] {
        assert!(
            why.iter().any(|s| s.contains(&format!("of cluster {q}"))
                && s.contains("buys from this provider too")),
            "{why:?}"
        );
    }
    assert!(!ok(&w, &pod("alice-app"), &ip("10.81.0.9")));
    assert!(!ok(&w, &ip("10.81.0.9"), &pod("alice-app")));
    assert!(!ok(&w, &pod("alice-app"), &ip("10.61.0.9")));
    assert!(!ok(&w, &ip("10.61.0.9"), &pod("alice-app")));
    // What she may reach on q is still admitted.
    assert!(ok(&w, &pod("alice-app"), &ip("10.91.3.4")));
    assert_eq!(direct_blocks(&plan), ["10.91.3.4/32"]);
}

#[test]
fn addresses_liqo_would_not_remap_are_refused() {
    let observed = with_q(&[(
        "alice-app",
        // Already in this provider's view of q (so not in q's own network,
        // which Liqo remaps from), IPv6, a cluster this provider has no
        // Configuration for, alice herself and this provider.
        r#"{"clusterAddresses": {"q": ["10.91.7.7", "fd00::1"], "r": ["10.50.3.4"],
            "alice": ["10.0.0.5"], "provider": ["10.244.0.10"]}}"#,
    )]);
    let (plan, w) = judged(&observed, &settings());
    let why = skipped_why(&plan);
    for (what, reason) in [
        (
            "of cluster \"q\" (\"10.91.7.7\" first)",
            "not in cluster \"q\"'s pod CIDR",
        ),
        (
            "of cluster \"q\" (\"fd00::1\" first)",
            "not an IPv4 address",
        ),
        ("of cluster \"r\"", "no Configuration for cluster \"r\""),
        ("of cluster \"alice\"", "names consumer alice itself"),
        ("of cluster \"provider\"", "names this provider"),
    ] {
        assert!(
            why.iter().any(|s| s.contains(what) && s.contains(reason)),
            "{what} / {reason}: {why:?}"
        );
    }
    assert!(
        direct_blocks(&plan).is_empty(),
        "{:?}",
        direct_blocks(&plan)
    );
    assert!(!ok(&w, &pod("alice-app"), &ip("10.91.7.7")));
    assert!(!ok(&w, &ip("10.91.7.7"), &pod("alice-app")));
}

#[test]
fn a_remapped_address_outside_qs_admitted_ranges_is_refused() {
    // q's remapped network overlaps alice's (10.71/16): both lose it, so
    // a pod of q seen there would be one of alice's addresses for others.
    let mut observed = with_q(&[("bob-app", r#"{"clusterAddresses": {"q": ["10.50.3.4"]}}"#)]);
    for c in observed.configurations.iter_mut() {
        if c.name == "q" {
            c.pod = vec!["10.71.0.0/16".into()];
        }
    }
    let (plan, w) = judged(&observed, &settings());
    let why = skipped_why(&plan);
    assert!(
        why.iter().any(|s| s.contains("pod ranges admitted here")),
        "{why:?}"
    );
    assert!(!ok(&w, &pod("bob-app"), &ip("10.71.3.4")));
    assert!(!ok(&w, &ip("10.71.3.4"), &pod("bob-app")));
}

#[test]
fn malformed_json_is_refused() {
    let observed = with_q(&[
        ("alice-app", r#"{"clusterAddresses": {"q": "10.50.3.4"}}"#),
        ("alice-db", "clusterAddresses q 10.50.3.4"),
    ]);
    let (plan, w) = judged(&observed, &settings());
    let why = skipped_why(&plan);
    assert_eq!(
        why.iter()
            .filter(|s| s.contains("is not Liqo's JSON"))
            .count(),
        2,
        "{why:?}"
    );
    assert!(!ok(&w, &pod("alice-app"), &ip("10.91.3.4")));
    assert!(!ok(&w, &pod("alice-db"), &ip("10.91.3.4")));
}

#[test]
fn past_the_bound_addresses_are_refused() {
    let addresses: Vec<String> = (0..1100u32)
        .map(|i| format!("10.50.{}.{}", i / 256, i % 256))
        .collect();
    let data = serde_json::json!({"clusterAddresses": {"q": addresses}}).to_string();
    let observed = with_q(&[("alice-app", &data)]);
    let (plan, w) = judged(&observed, &settings());
    assert_eq!(direct_blocks(&plan).len(), direct::MAX_ADDRESSES);
    let why = skipped_why(&plan);
    assert!(
        why.iter()
            .any(|s| s.contains("76 addresses beyond the first 1024")),
        "{why:?}"
    );
    // The lowest are admitted, the rest are not.
    assert!(ok(&w, &pod("alice-app"), &ip("10.91.0.0")));
    assert!(ok(&w, &pod("alice-app"), &ip("10.91.3.255")));
    assert!(!ok(&w, &pod("alice-app"), &ip("10.91.4.0")));
}

#[test]
fn refusals_are_bounded_too() {
    let clusters: serde_json::Map<String, serde_json::Value> = (0..100)
        .map(|i| (format!("x{i}"), serde_json::json!(["10.50.0.1"])))
        .collect();
    let data = serde_json::json!({ "clusterAddresses": clusters }).to_string();
    let observed = with_q(&[("alice-app", &data)]);
    let plan = plan(&observed, &settings());
    assert_eq!(plan.skipped.len(), direct::MAX_SKIPPED + 1);
    assert!(plan.skipped[direct::MAX_SKIPPED]
        .why
        .contains("84 more refusals"));
}

#[test]
fn off_admits_none() {
    let observed = with_q(&[("alice-app", r#"{"clusterAddresses": {"q": ["10.50.3.4"]}}"#)]);
    let mut s = settings();
    s.direct_connections = false;
    let (plan, w) = judged(&observed, &s);
    assert!(direct_blocks(&plan).is_empty());
    assert!(!ok(&w, &pod("alice-app"), &ip("10.91.3.4")));
}
