use std::net::{IpAddr, Ipv4Addr};

use netpol_eval::{allowed, Endpoint, World};
use serde_json::{json, Value};

use super::*;

pub(super) fn settings() -> Settings {
    Settings {
        enabled: true,
        protected: BTreeSet::from(["payments".to_string()]),
        internet_egress: true,
        internal: default_internal(),
        ingress_from: Vec::new(),
        dns_namespace: "kube-system".into(),
        dns_pod_labels: BTreeMap::from([("k8s-app".into(), "kube-dns".into())]),
        direct_connections: true,
        cluster_id: "provider".into(),
    }
}

pub(super) fn ns(name: &str, labels: &[(&str, &str)]) -> Namespace {
    Namespace {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        contract: None,
    }
}

pub(super) fn offloaded(name: &str, id: &str) -> Namespace {
    ns(name, &[(REMOTE_CLUSTER_ID_LABEL, id)])
}

pub(super) fn tenant_ns(id: &str) -> Namespace {
    ns(
        &format!("liqo-tenant-{id}"),
        &[
            (REMOTE_CLUSTER_ID_LABEL, id),
            (TENANT_NAMESPACE_LABEL, "true"),
        ],
    )
}

pub(super) fn conf(id: &str, pod: &str, external: &str) -> Configuration {
    Configuration {
        namespace: format!("liqo-tenant-{id}"),
        name: id.into(),
        cluster_id: Some(id.into()),
        pod: vec![pod.into()],
        external: vec![external.into()],
        ..Configuration::default()
    }
}

/// Two consumers (alice: 10.71/16 and 10.72/16 here; bob: 10.81/16 and
/// 10.82/16), each with a namespace, the provider's `payments` and
/// `web`, Liqo's and kube-system.
pub(super) fn market() -> Observed {
    Observed {
        namespaces: vec![
            offloaded("alice-app", "alice"),
            offloaded("alice-db", "alice"),
            offloaded("bob-app", "bob"),
            tenant_ns("alice"),
            tenant_ns("bob"),
            ns("payments", &[]),
            ns("web", &[]),
            ns("kube-system", &[]),
        ],
        configurations: vec![
            conf("alice", "10.71.0.0/16", "10.72.0.0/16"),
            conf("bob", "10.81.0.0/16", "10.82.0.0/16"),
        ],
        foreign_ingress: BTreeMap::new(),
        ..Observed::default()
    }
}

/// The world as an API server would return it: the namespaces (with
/// `kubernetes.io/metadata.name`), one pod `p` in each, and the policies.
pub(super) fn world(observed: &Observed, plan: &Plan) -> World {
    let mut w = World::default();
    for (i, n) in observed.namespaces.iter().enumerate() {
        let mut labels: serde_json::Map<String, Value> = n
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        labels.insert("kubernetes.io/metadata.name".into(), json!(n.name));
        w.namespaces
            .push(json!({"metadata": {"name": n.name, "labels": labels}}));
        let pod_labels = if n.name == "kube-system" {
            json!({"k8s-app": "kube-dns"})
        } else {
            json!({})
        };
        w.pods.push(json!({
            "metadata": {"name": "p", "namespace": n.name, "labels": pod_labels},
            "status": {"podIP": format!("10.244.{i}.10"), "podIPs": [{"ip": format!("10.244.{i}.10")}]}
        }));
    }
    for p in &plan.policies {
        w.policies.push(serde_json::to_value(p).unwrap());
    }
    w
}

pub(super) fn pod(ns: &str) -> Endpoint {
    Endpoint::pod(ns, "p")
}

pub(super) fn ip(text: &str) -> Endpoint {
    Endpoint::external(IpAddr::V4(text.parse::<Ipv4Addr>().unwrap()))
}

#[test]
fn consumers_reach_their_own_namespaces_and_ranges_and_nothing_else() {
    let observed = market();
    let plan = plan(&observed, &settings());
    assert!(plan.skipped.is_empty(), "{:?}", plan.skipped);
    let w = world(&observed, &plan);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    // Alice's two namespaces here reach each other.
    assert!(ok(&pod("alice-app"), &pod("alice-db")));
    assert!(ok(&pod("alice-db"), &pod("alice-app")));
    // Alice's pods elsewhere (her remapped pod and external CIDRs) reach
    // hers here, and hers reach them.
    assert!(ok(&ip("10.71.3.4"), &pod("alice-app")));
    assert!(ok(&ip("10.72.0.1"), &pod("alice-app")));
    assert!(ok(&pod("alice-app"), &ip("10.71.3.4")));
    // Bob, here or elsewhere, reaches none of hers, nor she his.
    assert!(!ok(&pod("bob-app"), &pod("alice-app")));
    assert!(!ok(&pod("alice-app"), &pod("bob-app")));
    assert!(!ok(&ip("10.81.3.4"), &pod("alice-app")));
    assert!(!ok(&pod("alice-app"), &ip("10.81.3.4")));
    // The provider's protected namespace: not from consumers' ranges or
    // namespaces, yes from its own namespaces and Liqo's.
    assert!(!ok(&ip("10.71.3.4"), &pod("payments")));
    assert!(!ok(&ip("10.82.0.1"), &pod("payments")));
    assert!(!ok(&pod("alice-app"), &pod("payments")));
    assert!(ok(&pod("web"), &pod("payments")));
    assert!(ok(&pod("liqo-tenant-alice"), &pod("payments")));
    assert!(ok(&ip("203.0.113.9"), &pod("payments")));
    // The provider's own pods do not reach consumers' (no opt-in).
    assert!(!ok(&pod("web"), &pod("alice-app")));
    // DNS yes (port 53 only), the internet yes, the cloud's metadata
    // address and other private ranges no.
    assert!(allowed(
        &w,
        &pod("alice-app"),
        &pod("kube-system"),
        53,
        "UDP"
    ));
    assert!(!allowed(
        &w,
        &pod("alice-app"),
        &pod("kube-system"),
        443,
        "TCP"
    ));
    assert!(ok(&pod("alice-app"), &ip("203.0.113.9")));
    assert!(!ok(&pod("alice-app"), &ip("169.254.169.254")));
    assert!(!ok(&pod("alice-app"), &ip("192.168.1.1")));
}

#[test]
fn opt_ins_open_what_they_name_and_no_more() {
    let observed = market();
    let mut s = settings();
    s.internet_egress = false;
    s.ingress_from = vec![BTreeMap::from([(
        "kubernetes.io/metadata.name".into(),
        "web".into(),
    )])];
    let plan = plan(&observed, &s);
    let w = world(&observed, &plan);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    assert!(ok(&pod("web"), &pod("alice-app")));
    assert!(!ok(&pod("payments"), &pod("alice-app")));
    assert!(!ok(&pod("alice-app"), &ip("203.0.113.9")));
    assert!(ok(&pod("alice-app"), &ip("10.71.3.4")));
}

#[test]
fn a_consumer_without_networking_gets_its_namespaces_and_no_ranges() {
    let mut observed = market();
    observed.configurations.retain(|c| c.name != "alice");
    let plan = plan(&observed, &settings());
    assert_eq!(plan.tenants["alice"].ranges, None);
    let w = world(&observed, &plan);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    assert!(ok(&pod("alice-db"), &pod("alice-app")));
    assert!(!ok(&ip("10.71.3.4"), &pod("alice-app")));
    assert!(!ok(&pod("bob-app"), &pod("alice-app")));
}

#[test]
fn configurations_outside_their_tenant_namespace_or_too_wide_or_overlapping_are_left_out() {
    let mut observed = market();
    // Bob writes a Configuration in his tenant namespace claiming Alice,
    // and one claiming his own ID with a /4 and one overlapping Alice's.
    observed.configurations.push(Configuration {
        namespace: "liqo-tenant-bob".into(),
        name: "fake".into(),
        cluster_id: Some("alice".into()),
        pod: vec!["10.90.0.0/16".into()],
        external: vec![],
        ..Configuration::default()
    });
    observed.configurations.push(Configuration {
        namespace: "liqo-tenant-bob".into(),
        name: "wide".into(),
        cluster_id: Some("bob".into()),
        pod: vec![
            "0.0.0.0/4".into(),
            "10.71.128.0/17".into(),
            "fd00::/64".into(),
        ],
        external: vec![],
        ..Configuration::default()
    });
    let plan = plan(&observed, &settings());
    let whats: Vec<&str> = plan.skipped.iter().map(|s| s.what.as_str()).collect();
    assert!(
        whats.contains(&"Configuration liqo-tenant-bob/fake"),
        "{whats:?}"
    );
    assert!(
        whats.iter().any(|w| w.contains("\"0.0.0.0/4\"")),
        "{whats:?}"
    );
    assert!(
        whats.iter().any(|w| w.contains("\"fd00::/64\"")),
        "{whats:?}"
    );
    // The overlap is dropped on both sides: neither gets 10.71.0.0/16's
    // addresses from the other.
    assert!(
        whats.contains(&"consumer alice's range 10.71.0.0/16"),
        "{whats:?}"
    );
    assert!(
        whats.contains(&"consumer bob's range 10.71.128.0/17"),
        "{whats:?}"
    );
    let w = world(&observed, &plan);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    assert!(!ok(&ip("10.90.0.1"), &pod("alice-app")));
    assert!(!ok(&ip("10.71.200.1"), &pod("bob-app")));
    assert!(!ok(&ip("10.71.200.1"), &pod("alice-app")));
    assert!(!ok(&ip("1.2.3.4"), &pod("bob-app")));
}

#[test]
fn a_protected_namespace_with_its_own_ingress_policies_is_left_to_them() {
    let mut observed = market();
    observed
        .foreign_ingress
        .insert("payments".into(), vec!["only-web".into()]);
    let plan = plan(&observed, &settings());
    assert!(!plan
        .policies
        .iter()
        .any(|p| p.metadata.namespace.as_deref() == Some("payments")));
    assert_eq!(plan.skipped.len(), 1);
    assert!(plan.skipped[0].why.contains("only-web"));
}

#[test]
fn liqo_tenant_namespaces_and_unlabelled_ones_get_nothing() {
    let plan = plan(&market(), &settings());
    let placed: Vec<(String, String)> = plan
        .policies
        .iter()
        .map(|p| {
            (
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        [
            ("alice-app".into(), TENANT_POLICY.into()),
            ("alice-db".into(), TENANT_POLICY.into()),
            ("bob-app".into(), TENANT_POLICY.into()),
            ("payments".into(), PROTECTION_POLICY.into()),
        ]
    );
    for p in &plan.policies {
        assert_eq!(
            p.metadata.labels.as_ref().unwrap()[MANAGED_BY_LABEL],
            MANAGED_BY
        );
    }
}

#[test]
fn off_renders_nothing() {
    let mut s = settings();
    s.enabled = false;
    let plan = plan(&market(), &s);
    assert!(plan.policies.is_empty());
}

#[test]
fn excepted_ranges_are_within_everything_and_not_nested() {
    let nets: Vec<Ipv4Net> = ["10.0.0.0/8", "10.71.0.0/16", "203.0.113.0/24"]
        .iter()
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(excepted(&nets), ["10.0.0.0/8", "203.0.113.0/24"]);
}
