//! A buyer's own policy on the provider ([`super::buyer`],
//! [`super::complement`]), judged by the test world's evaluator.

use catalog_client::wire::tenant_policy::TenantPolicy;
use catalog_client::wire::{Contract, ContractNetworkPolicy};
use netpol_eval::{allowed, Endpoint, World};
use serde_json::{json, Value};

use super::tests::{ip, ns, tenant_ns};
use super::*;

fn settings() -> Settings {
    Settings {
        enabled: true,
        protected: BTreeSet::from(["payments".to_string()]),
        internet_egress: true,
        internal: default_internal(),
        ingress_from: vec![BTreeMap::from([(
            "kubernetes.io/metadata.name".into(),
            "web".into(),
        )])],
        dns_namespace: "kube-system".into(),
        dns_pod_labels: BTreeMap::from([("k8s-app".into(), "kube-dns".into())]),
        direct_connections: true,
        cluster_id: "provider".into(),
    }
}

/// Both consumers use 10.0.0.0/16 for pods and 10.1.0.0/16 as external
/// CIDR at home; this provider sees alice's as 10.71/16 and 10.72/16,
/// bob's as 10.81/16 and 10.82/16. The provider's pods are in 10.244/16.
fn conf(id: &str, pod: &str, external: &str) -> Configuration {
    Configuration {
        namespace: format!("liqo-tenant-{id}"),
        name: id.into(),
        cluster_id: Some(id.into()),
        pod: vec![pod.into()],
        external: vec![external.into()],
        real_pod: vec!["10.0.0.0/16".into()],
        real_external: vec!["10.1.0.0/16".into()],
    }
}

fn market(policy: Option<Value>) -> Observed {
    let mut observed = Observed {
        namespaces: vec![
            ns("alice-app", &[(REMOTE_CLUSTER_ID_LABEL, "alice")]),
            ns("alice-db", &[(REMOTE_CLUSTER_ID_LABEL, "alice")]),
            ns("bob-app", &[(REMOTE_CLUSTER_ID_LABEL, "bob")]),
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
        ..Observed::default()
    };
    if let Some(p) = policy {
        observed.buyer_policies.insert(
            "alice".into(),
            BuyerPolicy {
                contract: "c-alice".into(),
                revision: 3,
                policy: serde_json::from_value(p).expect("a TenantPolicy"),
                reported: None,
            },
        );
    }
    observed
}

/// Pods: in alice-app `frontend`, `backend` and `other` (labelled
/// `app=<name>`), `p` everywhere else (kube-system's the DNS).
fn world(observed: &Observed, plan: &Plan, extra: &[(&str, &str, Value)]) -> World {
    let mut w = World::default();
    let mut pods: Vec<(String, String, Value)> = Vec::new();
    for n in &observed.namespaces {
        let mut labels: serde_json::Map<String, Value> = n
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        labels.insert("kubernetes.io/metadata.name".into(), json!(n.name));
        w.namespaces
            .push(json!({"metadata": {"name": n.name, "labels": labels}}));
        if n.name == "alice-app" {
            for app in ["frontend", "backend", "other"] {
                pods.push((n.name.clone(), app.into(), json!({ "app": app })));
            }
        } else if n.name == "kube-system" {
            pods.push((n.name.clone(), "p".into(), json!({"k8s-app": "kube-dns"})));
        } else {
            pods.push((n.name.clone(), "p".into(), json!({})));
        }
    }
    for (ns, name, labels) in extra {
        pods.push((ns.to_string(), name.to_string(), labels.clone()));
    }
    for (i, (ns, name, labels)) in pods.iter().enumerate() {
        let ip = format!("10.244.{i}.10");
        w.pods.push(json!({
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "status": {"podIP": ip, "podIPs": [{"ip": ip}]}
        }));
    }
    for p in &plan.policies {
        w.policies
            .push(serde_json::to_value(p).expect("serialises"));
    }
    w
}

fn pod(ns: &str, name: &str) -> Endpoint {
    Endpoint::pod(ns, name)
}

/// The thesis' policy: the backend admits only the frontend (port 8080),
/// the frontend reaches only the backend.
fn thesis(backend_from: Value) -> Value {
    json!({"policies": [
        {
            "name": "shop/backend",
            "namespace": "alice-app",
            "podSelector": {"matchLabels": {"app": "backend"}},
            "ingress": [{"peers": backend_from, "ports": [{"port": 8080}]}]
        },
        {
            "name": "shop/frontend",
            "namespace": "alice-app",
            "podSelector": {"matchLabels": {"app": "frontend"}},
            "egress": [{"peers": [{"namespace": "alice-app", "podSelector": {"matchLabels": {"app": "backend"}}}]}]
        }
    ]})
}

fn buyer_policies(plan: &Plan) -> Vec<&NetworkPolicy> {
    plan.policies
        .iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(ROLE_LABEL))
                .map(String::as_str)
                == Some(buyer::ROLE)
        })
        .collect()
}

#[test]
fn the_thesis_policy_narrows_alices_pods_and_nothing_else() {
    let observed = market(Some(thesis(
        json!([{"podSelector": {"matchLabels": {"app": "frontend"}}}]),
    )));
    let plan = plan(&observed, &settings());
    let report = &plan.reports["c-alice"];
    assert!(report.refused.is_empty(), "{report:?}");
    assert_eq!(buyer_policies(&plan).len(), 2);
    let w = world(&observed, &plan, &[]);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    let (frontend, backend, other) = (
        pod("alice-app", "frontend"),
        pod("alice-app", "backend"),
        pod("alice-app", "other"),
    );
    // The frontend reaches the backend, on 8080 only.
    assert!(ok(&frontend, &backend));
    assert!(!allowed(&w, &frontend, &backend, 9090, "TCP"));
    // Alice's other pods, here or in her other namespace, do not.
    assert!(!ok(&other, &backend));
    assert!(!ok(&pod("alice-db", "p"), &backend));
    // Nor her pods at home, by their address as seen here.
    assert!(!ok(&ip("10.71.0.5"), &backend));
    // The provider's opt-in (web) no longer reaches the backend, still
    // the pods no policy selects.
    assert!(!ok(&pod("web", "p"), &backend));
    assert!(ok(&pod("web", "p"), &other));
    // The backend's egress is the default isolation's.
    assert!(ok(&backend, &pod("alice-db", "p")));
    assert!(ok(&backend, &ip("10.71.3.4")));
    assert!(ok(&backend, &ip("203.0.113.9")));
    assert!(!ok(&backend, &ip("169.254.169.254")));
    assert!(!ok(&backend, &pod("bob-app", "p")));
    // The frontend reaches the backend and DNS only.
    assert!(!ok(&frontend, &other));
    assert!(!ok(&frontend, &pod("alice-db", "p")));
    assert!(!ok(&frontend, &ip("203.0.113.9")));
    assert!(allowed(&w, &frontend, &pod("kube-system", "p"), 53, "UDP"));
    assert!(!allowed(
        &w,
        &frontend,
        &pod("kube-system", "p"),
        443,
        "TCP"
    ));
    // Pods no policy selects keep the default isolation.
    assert!(ok(&other, &pod("alice-db", "p")));
    assert!(ok(&pod("alice-db", "p"), &other));
    assert!(ok(&other, &frontend));
    // Bob is kept out both ways.
    for alice in [&frontend, &backend, &other] {
        assert!(!ok(&pod("bob-app", "p"), alice));
        assert!(!ok(alice, &pod("bob-app", "p")));
        assert!(!ok(&ip("10.81.0.5"), alice));
    }
}

#[test]
fn a_home_pod_listed_by_its_own_address_is_translated_and_admitted() {
    // 10.0.0.5 is one of alice's pods at home; here it is 10.71.0.5.
    let observed = market(Some(thesis(json!([
        {"podSelector": {"matchLabels": {"app": "frontend"}}},
        {"ipBlock": {"cidr": "10.0.0.5/32"}}
    ]))));
    let plan = plan(&observed, &settings());
    assert!(
        plan.reports["c-alice"].refused.is_empty(),
        "{:?}",
        plan.reports
    );
    let w = world(&observed, &plan, &[]);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    let backend = pod("alice-app", "backend");
    assert!(ok(&ip("10.71.0.5"), &backend));
    assert!(!ok(&ip("10.71.0.6"), &backend));
    assert!(!ok(&ip("10.0.0.5"), &backend));
    // Bob's pod with the same address at home is seen as 10.81.0.5.
    assert!(!ok(&ip("10.81.0.5"), &backend));
}

#[test]
fn except_entries_are_translated_too() {
    let policy = json!({"policies": [{
        "name": "db",
        "namespace": "alice-db",
        "podSelector": {},
        "ingress": [{"peers": [{"ipBlock": {"cidr": "10.0.0.0/24", "except": ["10.0.0.128/25"]}}]}]
    }]});
    let observed = market(Some(policy));
    let plan = plan(&observed, &settings());
    let w = world(&observed, &plan, &[]);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    assert!(ok(&ip("10.71.0.5"), &pod("alice-db", "p")));
    assert!(!ok(&ip("10.71.0.200"), &pod("alice-db", "p")));
    assert!(!ok(&ip("10.71.1.5"), &pod("alice-db", "p")));
}

#[test]
fn a_policy_reaching_outside_the_buyer_is_refused_whole_and_the_default_stays() {
    let baseline = plan(&market(None), &settings());
    let backend = |peer: Value, direction: &str| {
        json!({"policies": [{
            "name": "shop/backend",
            "namespace": "alice-app",
            "podSelector": {"matchLabels": {"app": "backend"}},
            direction: [{"peers": [{"podSelector": {"matchLabels": {"app": "frontend"}}}, peer]}]
        }]})
    };
    let cases = [
        (
            // In bob's namespace.
            json!({"policies": [{
                "name": "shop/backend",
                "namespace": "bob-app",
                "podSelector": {},
                "ingress": []
            }]}),
            "namespace bob-app is not one of consumer alice's",
        ),
        (
            backend(
                json!({"namespace": "bob-app", "podSelector": {}}),
                "ingress",
            ),
            "names namespace bob-app",
        ),
        (
            backend(json!({"ipBlock": {"cidr": "10.81.0.0/16"}}), "ingress"),
            "ipBlock 10.81.0.0/16 reaches outside consumer alice's pods",
        ),
        (
            backend(json!({"ipBlock": {"cidr": "10.81.0.0/16"}}), "egress"),
            "ipBlock 10.81.0.0/16 reaches outside consumer alice's pods",
        ),
        (
            backend(json!({"ipBlock": {"cidr": "10.244.0.0/16"}}), "egress"),
            "ipBlock 10.244.0.0/16 reaches outside consumer alice's pods",
        ),
        (
            // The internet, but only for egress.
            backend(json!({"ipBlock": {"cidr": "203.0.113.0/24"}}), "ingress"),
            "ipBlock 203.0.113.0/24 reaches outside",
        ),
    ];
    for (policy, why) in cases {
        let observed = market(Some(policy.clone()));
        let plan = plan(&observed, &settings());
        let report = &plan.reports["c-alice"];
        assert!(report.applied.is_empty(), "{policy}: {report:?}");
        assert_eq!(report.refused.len(), 1, "{policy}");
        assert!(
            report.refused[0].reason.contains(why),
            "{policy}: {:?}",
            report.refused[0].reason
        );
        // Nothing of it, and the default isolation exactly as without it.
        assert_eq!(plan.policies, baseline.policies, "{policy}");
        let w = world(&observed, &plan, &[]);
        assert!(!allowed(
            &w,
            &pod("bob-app", "p"),
            &pod("alice-app", "backend"),
            8080,
            "TCP"
        ));
    }
    // The internet, for egress, is kept as it is.
    let observed = market(Some(backend(
        json!({"ipBlock": {"cidr": "203.0.113.0/24"}}),
        "egress",
    )));
    let plan = plan(&observed, &settings());
    assert!(plan.reports["c-alice"].refused.is_empty());
    let w = world(&observed, &plan, &[]);
    let backend_pod = pod("alice-app", "backend");
    assert!(allowed(&w, &backend_pod, &ip("203.0.113.9"), 443, "TCP"));
    assert!(!allowed(&w, &backend_pod, &ip("198.51.100.1"), 443, "TCP"));
    // Not without the provider's internet opt-in.
    let mut s = settings();
    s.internet_egress = false;
    let plan = super::plan(&observed, &s);
    assert_eq!(plan.reports["c-alice"].refused.len(), 1);
}

#[test]
fn a_rule_without_peers_admits_the_buyer_and_never_more() {
    let policy = json!({"policies": [
        {
            "name": "backend",
            "namespace": "alice-app",
            "podSelector": {"matchLabels": {"app": "backend"}},
            "ingress": [{}]
        },
        {
            "name": "frontend",
            "namespace": "alice-app",
            "podSelector": {"matchLabels": {"app": "frontend"}},
            "egress": [{}]
        }
    ]});
    let observed = market(Some(policy));
    let plan = plan(&observed, &settings());
    assert!(plan.reports["c-alice"].refused.is_empty());
    let w = world(&observed, &plan, &[]);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    let (frontend, backend) = (pod("alice-app", "frontend"), pod("alice-app", "backend"));
    assert!(ok(&pod("alice-db", "p"), &backend));
    assert!(ok(&ip("10.71.3.4"), &backend));
    assert!(ok(&ip("10.72.0.1"), &backend));
    assert!(!ok(&pod("bob-app", "p"), &backend));
    assert!(!ok(&ip("10.81.3.4"), &backend));
    assert!(!ok(&pod("web", "p"), &backend));
    assert!(ok(&frontend, &pod("alice-db", "p")));
    assert!(ok(&frontend, &ip("10.71.3.4")));
    assert!(!ok(&frontend, &pod("bob-app", "p")));
    assert!(!ok(&frontend, &ip("10.81.3.4")));
    assert!(!ok(&frontend, &ip("203.0.113.9")));
    assert!(!ok(&frontend, &pod("payments", "p")));
}

#[test]
fn the_tenant_isolation_takes_the_complement_of_match_expressions() {
    let policy = json!({"policies": [{
        "name": "api",
        "namespace": "alice-app",
        "podSelector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["backend", "api"]},
            {"key": "tier", "operator": "Exists"}
        ]},
        "ingress": []
    }]});
    let observed = market(Some(policy));
    let plan = plan(&observed, &settings());
    let names: Vec<&str> = plan
        .policies
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some("alice-app"))
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.contains(&"liqo-broker-tenant-isolation-ingress-0"));
    assert!(names.contains(&"liqo-broker-tenant-isolation-ingress-1"));
    assert!(names.contains(&"liqo-broker-tenant-isolation-egress-0"));
    // The untouched namespace keeps the one policy.
    assert!(plan.policies.iter().any(|p| {
        p.metadata.namespace.as_deref() == Some("alice-db")
            && p.metadata.name.as_deref() == Some(TENANT_POLICY)
    }));
    let extra = [
        ("alice-app", "api-tier", json!({"app": "api", "tier": "x"})),
        (
            "alice-app",
            "backend-tier",
            json!({"app": "backend", "tier": "y"}),
        ),
        ("alice-app", "api-no-tier", json!({"app": "api"})),
        ("alice-app", "web-tier", json!({"app": "web", "tier": "x"})),
        ("alice-app", "bare", json!({})),
    ];
    let w = world(&observed, &plan, &extra);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    // Selected by the buyer's policy (which admits nothing): no one in.
    for selected in ["api-tier", "backend-tier"] {
        assert!(
            !ok(&pod("alice-db", "p"), &pod("alice-app", selected)),
            "{selected}"
        );
        assert!(
            !ok(&pod("bob-app", "p"), &pod("alice-app", selected)),
            "{selected}"
        );
        // Its egress stays the default's.
        assert!(
            ok(&pod("alice-app", selected), &pod("alice-db", "p")),
            "{selected}"
        );
    }
    // Not selected: the default isolation, covering every such pod.
    for free in ["api-no-tier", "web-tier", "bare", "backend", "other"] {
        assert!(ok(&pod("alice-db", "p"), &pod("alice-app", free)), "{free}");
        assert!(!ok(&pod("bob-app", "p"), &pod("alice-app", free)), "{free}");
        assert!(!ok(&ip("10.81.0.1"), &pod("alice-app", free)), "{free}");
    }
}

#[test]
fn selectors_that_together_select_every_pod_leave_no_tenant_policy_for_that_direction() {
    let policy = json!({"policies": [
        {"name": "a", "namespace": "alice-app", "podSelector": {"matchLabels": {"app": "backend"}}, "ingress": [{}]},
        {"name": "b", "namespace": "alice-app", "podSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["backend"]}]}, "ingress": [{}]},
        {"name": "c", "namespace": "alice-db", "podSelector": {}, "egress": [{}]}
    ]});
    let observed = market(Some(policy));
    let plan = plan(&observed, &settings());
    assert!(plan.reports["c-alice"].refused.is_empty());
    let in_ns = |ns: &str, prefix: &str| {
        plan.policies
            .iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(ns)
                    && p.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with(prefix))
            })
            .count()
    };
    assert_eq!(
        in_ns("alice-app", "liqo-broker-tenant-isolation-ingress"),
        0
    );
    assert_eq!(in_ns("alice-app", "liqo-broker-tenant-isolation-egress"), 1);
    assert_eq!(in_ns("alice-db", "liqo-broker-tenant-isolation-egress"), 0);
    assert_eq!(in_ns("alice-db", "liqo-broker-tenant-isolation-ingress"), 1);
    let w = world(&observed, &plan, &[]);
    let ok = |from: &Endpoint, to: &Endpoint| allowed(&w, from, to, 8080, "TCP");
    assert!(!ok(&pod("bob-app", "p"), &pod("alice-app", "other")));
    assert!(ok(&pod("alice-db", "p"), &pod("alice-app", "other")));
    assert!(!ok(&pod("alice-db", "p"), &ip("203.0.113.9")));
}

#[test]
fn a_complement_past_the_bound_refuses_the_policy_that_makes_it() {
    let labels = |prefix: &str| -> Value {
        (0..5)
            .map(|i| (format!("{prefix}{i}"), json!("x")))
            .collect::<serde_json::Map<String, Value>>()
            .into()
    };
    let policy = json!({"policies": [
        {"name": "a", "namespace": "alice-app", "podSelector": {"matchLabels": labels("a")}, "ingress": [{}]},
        {"name": "b", "namespace": "alice-app", "podSelector": {"matchLabels": labels("b")}, "ingress": [{}]},
        {"name": "c", "namespace": "alice-app", "podSelector": {"matchLabels": labels("c")}, "ingress": [{}]}
    ]});
    let plan = plan(&market(Some(policy)), &settings());
    let report = &plan.reports["c-alice"];
    let applied: Vec<&str> = report.applied.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(applied, ["a", "b"]);
    assert_eq!(report.refused.len(), 1);
    assert_eq!(report.refused[0].name, "c");
    assert!(
        report.refused[0].reason.contains("more than 64"),
        "{report:?}"
    );
    let ingress_terms = plan
        .policies
        .iter()
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("liqo-broker-tenant-isolation-ingress-"))
        })
        .count();
    assert_eq!(ingress_terms, 25);
}

#[test]
fn the_report_lists_what_was_applied_and_what_refused() {
    let mut policy = thesis(json!([{"podSelector": {"matchLabels": {"app": "frontend"}}}]));
    policy["policies"]
        .as_array_mut()
        .expect("a list")
        .push(json!({"name": "elsewhere", "namespace": "web", "podSelector": {}, "ingress": []}));
    let plan = plan(&market(Some(policy)), &settings());
    let report = &plan.reports["c-alice"];
    assert_eq!(report.revision, 3);
    let applied: Vec<(&str, &[String])> = report
        .applied
        .iter()
        .map(|a| (a.name.as_str(), a.network_policies.as_slice()))
        .collect();
    let backend = buyer::network_policy_name("shop/backend");
    let frontend = buyer::network_policy_name("shop/frontend");
    assert!(
        backend.starts_with("liqo-broker-buyer-shop-backend-"),
        "{backend}"
    );
    assert!(backend.len() <= 63);
    assert_eq!(
        applied,
        [
            ("shop/backend", &[format!("alice-app/{backend}")][..]),
            ("shop/frontend", &[format!("alice-app/{frontend}")][..]),
        ]
    );
    assert_eq!(report.refused.len(), 1);
    assert_eq!(report.refused[0].name, "elsewhere");
    assert!(report.refused[0]
        .reason
        .contains("namespace web is not one of consumer alice's"));
    assert_eq!(report.check(), Ok(()));
    for p in buyer_policies(&plan) {
        assert_eq!(
            p.metadata.labels.as_ref().expect("labels")[MANAGED_BY_LABEL],
            MANAGED_BY
        );
    }
    // Off: every policy refused, nothing rendered.
    let mut s = settings();
    s.enabled = false;
    let observed = market(Some(thesis(json!([]))));
    let off = super::plan(&observed, &s);
    assert!(off.policies.is_empty());
    assert_eq!(off.reports["c-alice"].refused.len(), 2);
    assert!(off.reports["c-alice"].applied.is_empty());
}

#[test]
fn names_are_valid_and_distinct() {
    let long = "a".repeat(200);
    for name in ["shop/backend", "Shop/Back_End", "//", &long] {
        let n = buyer::network_policy_name(name);
        assert!(n.len() <= 63, "{n}");
        assert!(n
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
        assert!(!n.ends_with('-'), "{n}");
    }
    assert_ne!(
        buyer::network_policy_name("shop/backend"),
        buyer::network_policy_name("shop-backend")
    );
}

#[test]
fn the_policy_of_the_active_contract_updated_last_is_taken() {
    let contract = |id: &str, cluster: &str, at: &str, active: bool, revision: u64| Contract {
        id: id.into(),
        consumer_cluster_id: Some(cluster.into()),
        active,
        network_policy: Some(ContractNetworkPolicy {
            revision,
            updated_at: at.parse().expect("a time"),
            policy: TenantPolicy::default(),
            report: None,
        }),
        ..Contract::default()
    };
    let contracts = [
        contract("old", "alice", "2026-11-01T00:00:00Z", true, 1),
        contract("new", "alice", "2026-11-02T00:00:00Z", true, 7),
        contract("ended", "alice", "2026-11-03T00:00:00Z", false, 9),
        contract("bobs", "bob", "2026-11-01T00:00:00Z", true, 2),
        Contract {
            id: "none".into(),
            consumer_cluster_id: Some("carol".into()),
            active: true,
            ..Contract::default()
        },
    ];
    let by = buyer::from_contracts(&contracts);
    assert_eq!(by.len(), 2);
    assert_eq!(
        (by["alice"].contract.as_str(), by["alice"].revision),
        ("new", 7)
    );
    assert_eq!(by["bob"].contract, "bobs");
}
