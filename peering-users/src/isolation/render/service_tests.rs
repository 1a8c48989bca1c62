//! Services sold with `Local` hosting ([`super::service`]), judged by the
//! test world's evaluator: the instance namespace `svc-c-1` admits its
//! customer alice (her namespaces here and her ranges) and no other
//! consumer, and alice's tenant isolation lets her pods reach it.

use netpol_eval::{allowed, Endpoint, World};
use serde_json::json;

use super::tests::{conf, ip, market, ns, pod, settings, tenant_ns, world};
use super::*;

fn instance(name: &str) -> Namespace {
    let mut n = ns(name, &[(service::MANAGED_BY_LABEL, service::MANAGED_BY)]);
    n.contract = Some("c-1".into());
    n
}

/// `svc-c-1` offloaded to `customers` (as its NamespaceOffloading's status
/// says), with a second pod `q` beside `p`.
fn sold_to(customers: &[&str]) -> Observed {
    let mut observed = market();
    observed.namespaces.push(instance("svc-c-1"));
    observed.offloadings.push(service::Offloading {
        namespace: "svc-c-1".into(),
        name: "offloading".into(),
        clusters: customers.iter().map(|c| c.to_string()).collect(),
    });
    observed
}

fn judged(observed: &Observed, s: &Settings) -> (Plan, World) {
    let plan = plan(observed, s);
    let mut w = world(observed, &plan);
    w.pods.push(json!({
        "metadata": {"name": "q", "namespace": "svc-c-1", "labels": {}},
        "status": {"podIP": "10.244.99.10", "podIPs": [{"ip": "10.244.99.10"}]}
    }));
    (plan, w)
}

fn ok(w: &World, from: &Endpoint, to: &Endpoint) -> bool {
    allowed(w, from, to, 8080, "TCP")
}

fn service_policies(plan: &Plan) -> Vec<&NetworkPolicy> {
    plan.policies
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some("svc-c-1"))
        .collect()
}

#[test]
fn the_customer_reaches_its_service_and_no_other_consumer_does() {
    let observed = sold_to(&["alice"]);
    let (plan, w) = judged(&observed, &settings());
    assert!(plan.skipped.is_empty(), "{:?}", plan.skipped);
    let svc = pod("svc-c-1");
    // Alice's pods here (both directions of the path open: her egress,
    // the service's ingress), and hers elsewhere by her remapped ranges.
    assert!(ok(&w, &pod("alice-app"), &svc));
    assert!(ok(&w, &pod("alice-db"), &svc));
    assert!(ok(&w, &ip("10.71.3.4"), &svc));
    assert!(ok(&w, &ip("10.72.0.1"), &svc));
    // Bob, here or at home, does not.
    assert!(!ok(&w, &pod("bob-app"), &svc));
    assert!(!ok(&w, &ip("10.81.3.4"), &svc));
    assert!(!ok(&w, &ip("10.82.0.1"), &svc));
    // Its own pods, and Liqo's gateways, do; the provider's other
    // namespaces and the internet do not (no opt-in).
    assert!(ok(&w, &Endpoint::pod("svc-c-1", "q"), &svc));
    assert!(ok(&w, &pod("liqo-tenant-alice"), &svc));
    assert!(!ok(&w, &pod("web"), &svc));
    assert!(!ok(&w, &ip("203.0.113.9"), &svc));
    // Alice may reach no other provider namespace for that.
    assert!(!ok(&w, &pod("alice-app"), &pod("web")));
    let placed = service_policies(&plan);
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0].metadata.name.as_deref(), Some(service::POLICY));
    assert_eq!(
        placed[0].metadata.labels.as_ref().unwrap()[ROLE_LABEL],
        service::ROLE
    );
}

#[test]
fn a_customer_that_is_not_a_consumer_reaches_it_by_its_ranges() {
    let mut observed = sold_to(&["carol"]);
    observed.namespaces.push(tenant_ns("carol"));
    observed
        .configurations
        .push(conf("carol", "10.61.0.0/16", "10.62.0.0/16"));
    let (_, w) = judged(&observed, &settings());
    let svc = pod("svc-c-1");
    assert!(ok(&w, &ip("10.61.0.9"), &svc));
    assert!(!ok(&w, &ip("10.71.3.4"), &svc));
    assert!(!ok(&w, &pod("alice-app"), &svc));
}

#[test]
fn not_offloaded_yet_it_admits_no_consumer_but_the_opt_ins() {
    let observed = sold_to(&[]);
    let mut s = settings();
    s.ingress_from = vec![BTreeMap::from([(
        "kubernetes.io/metadata.name".into(),
        "web".into(),
    )])];
    let (plan, w) = judged(&observed, &s);
    assert_eq!(service_policies(&plan).len(), 1);
    let svc = pod("svc-c-1");
    assert!(!ok(&w, &pod("alice-app"), &svc));
    assert!(!ok(&w, &ip("10.71.3.4"), &svc));
    assert!(ok(&w, &pod("web"), &svc));
    assert!(ok(&w, &pod("liqo-tenant-bob"), &svc));
    assert!(ok(&w, &Endpoint::pod("svc-c-1", "q"), &svc));
}

#[test]
fn only_a_namespace_with_the_label_and_the_annotation_is_an_instance() {
    for n in [
        ns(
            "svc-c-1",
            &[(service::MANAGED_BY_LABEL, service::MANAGED_BY)],
        ),
        Namespace {
            contract: Some("c-1".into()),
            ..ns("svc-c-1", &[])
        },
    ] {
        let mut observed = market();
        observed.namespaces.push(n);
        let plan = plan(&observed, &settings());
        assert!(service_policies(&plan).is_empty());
    }
    // A consumer's namespace with both is the consumer's.
    let mut observed = market();
    let mut n = instance("svc-c-1");
    n.labels
        .insert(REMOTE_CLUSTER_ID_LABEL.into(), "bob".into());
    observed.namespaces.push(n);
    let plan = plan(&observed, &settings());
    let placed = service_policies(&plan);
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0].metadata.name.as_deref(), Some(TENANT_POLICY));
}

#[test]
fn an_instance_with_ingress_policies_of_its_own_is_left_to_them() {
    let mut observed = sold_to(&["alice"]);
    observed
        .foreign_ingress
        .insert("svc-c-1".into(), vec!["open".into()]);
    let (plan, mut w) = judged(&observed, &settings());
    assert!(service_policies(&plan).is_empty());
    assert!(
        plan.skipped
            .iter()
            .any(|s| s.what == "service instance namespace svc-c-1" && s.why.contains("open")),
        "{:?}",
        plan.skipped
    );
    // Theirs opens it to everyone: the customer's pods get there (its
    // tenant isolation lets them out), another consumer's do not (his
    // does not).
    w.policies.push(json!({
        "metadata": {"name": "open", "namespace": "svc-c-1"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}
    }));
    let svc = pod("svc-c-1");
    assert!(ok(&w, &pod("alice-app"), &svc));
    assert!(!ok(&w, &pod("bob-app"), &svc));
    assert!(ok(&w, &ip("10.81.3.4"), &svc));
}

#[test]
fn a_protected_instance_keeps_its_protection() {
    let observed = sold_to(&["alice"]);
    let mut s = settings();
    s.protected.insert("svc-c-1".into());
    let (plan, w) = judged(&observed, &s);
    let placed = service_policies(&plan);
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0].metadata.name.as_deref(), Some(PROTECTION_POLICY));
    assert!(!ok(&w, &pod("alice-app"), &pod("svc-c-1")));
    assert!(!ok(&w, &ip("10.71.3.4"), &pod("svc-c-1")));
}
