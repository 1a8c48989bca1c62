//! The refinement on a thesis-style scenario (§5.3): a shop whose
//! frontend and backend run on this consumer (c1) and on two providers
//! (p1, p2), the namespace offloaded as `shop-c1`.

use std::collections::BTreeMap;

use catalog_client::wire::tenant_policy::{
    AppliedTenantPolicy, ContractNetworkPolicy, RefusedTenantPolicy, TenantPolicyReport,
};
use serde_json::{json, Value};

use super::*;
use crate::network_policy::model::MultiClusterNetworkPolicySpec;
use crate::network_policy::snapshot::{Networks, PodInfo};
use crate::network_policy::status::{self, Delivery, Told};

fn pod(name: &str, app: &str, node: &str, ip: &str) -> PodInfo {
    PodInfo {
        namespace: "shop".into(),
        name: name.into(),
        labels: [("app".to_string(), app.to_string())].into(),
        node: Some(node.into()),
        ip: Some(ip.into()),
    }
}

fn selector(app: &str) -> Option<BTreeMap<String, String>> {
    Some([("app".to_string(), app.to_string())].into())
}

fn world() -> Snapshot {
    Snapshot {
        consumer: "c1".into(),
        domain: "d".into(),
        providers: ["p1".to_string(), "p2".to_string()].into(),
        full_masquerade: BTreeSet::new(),
        dns: None,
        pods: vec![
            pod("frontend-a", "frontend", "n1", "10.0.1.5"),
            pod("backend-a", "backend", "n1", "10.0.1.6"),
            // On p1, as Liqo reflects it here: p1's address in this
            // consumer's view (p1's pod CIDR remapped to 10.71.0.0/16).
            pod("backend-b", "backend", "liqo-p1", "10.71.0.9"),
            pod("backend-c", "backend", "liqo-p2", "10.81.0.4"),
            pod("worker-a", "worker", "liqo-p2", "10.81.0.7"),
        ],
        services: [
            (
                ("shop".to_string(), "frontend".to_string()),
                selector("frontend"),
            ),
            (
                ("shop".to_string(), "backend".to_string()),
                selector("backend"),
            ),
            (
                ("shop".to_string(), "worker".to_string()),
                selector("worker"),
            ),
            (("shop".to_string(), "external-db".to_string()), None),
        ]
        .into(),
        virtual_nodes: [
            ("liqo-p1".to_string(), "p1".to_string()),
            ("liqo-p2".to_string(), "p2".to_string()),
        ]
        .into(),
        remote_namespaces: [("shop".to_string(), "shop-c1".to_string())].into(),
        networks: [
            (
                "p1".to_string(),
                Networks {
                    consumer_pod: vec!["10.0.0.0/16".into()],
                    consumer_external: vec!["10.70.0.0/16".into()],
                    provider_pod: vec!["10.71.0.0/16".into()],
                    provider_external: vec!["10.72.0.0/16".into()],
                },
            ),
            (
                "p2".to_string(),
                Networks {
                    consumer_pod: vec!["10.0.0.0/16".into()],
                    consumer_external: vec!["10.70.0.0/16".into()],
                    provider_pod: vec!["10.81.0.0/16".into()],
                    provider_external: vec!["10.82.0.0/16".into()],
                },
            ),
        ]
        .into(),
    }
}

fn policy(name: &str, spec: Value) -> MultiClusterNetworkPolicy {
    let spec: MultiClusterNetworkPolicySpec = serde_json::from_value(spec).unwrap();
    let mut p = MultiClusterNetworkPolicy::new(name, spec);
    p.metadata.namespace = Some("shop".into());
    p.metadata.uid = Some("uid-1".into());
    p.metadata.generation = Some(3);
    p
}

/// The thesis' frontend: egress to the backend service only.
fn frontend() -> MultiClusterNetworkPolicy {
    policy(
        "frontend",
        json!({
            "endpointSelector": {"matchLabels": {"app": "frontend"}},
            "egress": [{"to": [{"service": "backend"}], "ports": [{"port": 8080}]}]
        }),
    )
}

/// The thesis' backend: ingress from the frontend service only.
fn backend() -> MultiClusterNetworkPolicy {
    policy(
        "backend",
        json!({
            "endpointSelector": {"matchLabels": {"app": "backend"}},
            "ingress": [{"from": [{"service": "frontend"}], "ports": [{"protocol": "TCP", "port": "http"}]}]
        }),
    )
}

fn as_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

fn for_provider<'a>(r: &'a Rendered, p: &str) -> (&'a TenantNetworkPolicy, &'a [String]) {
    match &r.providers[p] {
        ForProvider::Policy { policy, notes } => (policy, notes),
        ForProvider::NotOffloaded(why) => panic!("not offloaded: {why}"),
    }
}

fn tenant(v: Value) -> Vec<TenantPeer> {
    serde_json::from_value(v).unwrap()
}

#[test]
fn the_frontend_reaches_the_backend_wherever_it_runs() {
    let r = refine(&frontend(), &world()).unwrap();
    // Here: the local backend by selector, p1's and p2's by address.
    let np = as_json(&r.local);
    assert_eq!(np["metadata"]["name"], "mcnp-frontend");
    assert_eq!(np["metadata"]["namespace"], "shop");
    assert_eq!(np["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
    assert_eq!(np["metadata"]["labels"][POLICY_LABEL], "frontend");
    assert_eq!(np["metadata"]["ownerReferences"][0]["uid"], "uid-1");
    assert_eq!(
        np["spec"]["podSelector"],
        json!({"matchLabels": {"app": "frontend"}})
    );
    assert_eq!(np["spec"]["policyTypes"], json!(["Egress"]));
    assert!(np["spec"].get("ingress").is_none());
    assert_eq!(
        np["spec"]["egress"],
        json!([{
            "to": [
                {"podSelector": {"matchLabels": {"app": "backend"}}},
                {"ipBlock": {"cidr": "10.71.0.9/32"}},
                {"ipBlock": {"cidr": "10.81.0.4/32"}}
            ],
            "ports": [{"port": 8080, "protocol": "TCP"}]
        }])
    );
    // On p1: its own backend by selector in the remote namespace, the
    // consumer's backend by its real address; p2's left out, and said.
    let (p1, notes) = for_provider(&r, "p1");
    assert_eq!(p1.name, "shop/frontend");
    assert_eq!(p1.namespace, "shop-c1");
    assert_eq!(p1.pod_selector.match_labels["app"], "frontend");
    assert!(p1.ingress.is_none());
    let egress = p1.egress.as_ref().unwrap();
    assert_eq!(
        egress[0].peers,
        tenant(json!([
            {"namespace": "shop-c1", "podSelector": {"matchLabels": {"app": "backend"}}},
            {"ipBlock": {"cidr": "10.0.1.6/32"}}
        ]))
    );
    assert_eq!(egress[0].ports[0].port, Some(PortRef::Number(8080)));
    assert!(
        notes
            .iter()
            .any(|n| n.contains("backend's pods on p2") && n.contains("not rendered on p1")),
        "{notes:?}"
    );
    // p2 likewise: p1's backend is the one left out there.
    let (p2, notes) = for_provider(&r, "p2");
    assert!(!as_json(&p2.egress).to_string().contains("10.71.0.9"));
    assert!(notes.iter().any(|n| n.contains("on p1")), "{notes:?}");
}

#[test]
fn the_backend_admits_the_frontend_by_its_real_address_on_the_provider() {
    let r = refine(&backend(), &world()).unwrap();
    let np = as_json(&r.local);
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(
        np["spec"]["ingress"][0]["from"],
        json!([{"podSelector": {"matchLabels": {"app": "frontend"}}}])
    );
    assert_eq!(
        np["spec"]["ingress"][0]["ports"],
        json!([{"port": "http", "protocol": "TCP"}])
    );
    let (p1, notes) = for_provider(&r, "p1");
    assert_eq!(
        p1.ingress.as_ref().unwrap()[0].peers,
        tenant(json!([
            {"namespace": "shop-c1", "podSelector": {"matchLabels": {"app": "frontend"}}},
            {"ipBlock": {"cidr": "10.0.1.5/32"}}
        ]))
    );
    assert_eq!(
        p1.ingress.as_ref().unwrap()[0].ports[0].port,
        Some(PortRef::Name("http".into()))
    );
    assert!(notes.is_empty(), "{notes:?}");
}

#[test]
fn a_service_restricted_to_one_cluster_keeps_to_it() {
    let p = policy(
        "frontend",
        json!({
            "endpointSelector": {"matchLabels": {"app": "frontend"}},
            "egress": [{"to": [{"service": "backend", "cluster": "p1"}]}]
        }),
    );
    let r = refine(&p, &world()).unwrap();
    assert_eq!(
        as_json(&r.local)["spec"]["egress"][0]["to"],
        json!([{"ipBlock": {"cidr": "10.71.0.9/32"}}])
    );
    let (p1, _) = for_provider(&r, "p1");
    assert_eq!(
        p1.egress.as_ref().unwrap()[0].peers,
        tenant(
            json!([{"namespace": "shop-c1", "podSelector": {"matchLabels": {"app": "backend"}}}])
        )
    );
}

#[test]
fn cluster_scope_is_every_namespace_here_and_every_remapped_pod_there() {
    let p = policy(
        "frontend",
        json!({
            "endpointSelector": {"matchLabels": {"app": "frontend"}},
            "ingress": [{"from": [
                {"service": "*", "cluster": "c1", "domain": "d"},
                {"service": "*", "cluster": "p1", "domain": "d"}
            ]}]
        }),
    );
    let r = refine(&p, &world()).unwrap();
    assert_eq!(
        as_json(&r.local)["spec"]["ingress"],
        json!([{"from": [{"namespaceSelector": {}}, {"ipBlock": {"cidr": "10.71.0.0/16"}}]}])
    );
    let (p1, notes) = for_provider(&r, "p1");
    assert_eq!(
        p1.ingress.as_ref().unwrap()[0].peers,
        tenant(json!([{"ipBlock": {"cidr": "10.0.0.0/16"}}, {"podSelector": {}}]))
    );
    assert!(notes.is_empty(), "{notes:?}");
    // p2 gets the consumer's CIDR; p1's pods are not routed to it.
    let (p2, notes) = for_provider(&r, "p2");
    assert_eq!(
        p2.ingress.as_ref().unwrap()[0].peers,
        tenant(json!([{"ipBlock": {"cidr": "10.0.0.0/16"}}]))
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("cluster p1") && n.contains("not rendered on p2")),
        "{notes:?}"
    );
}

#[test]
fn domain_scope_is_the_consumer_and_every_provider() {
    let p = policy(
        "frontend",
        json!({
            "endpointSelector": {"matchLabels": {"app": "frontend"}},
            "egress": [{"to": [{"service": "*", "cluster": "*", "domain": "d"}, {"cidr": "108.177.16.0/24"}]}]
        }),
    );
    let r = refine(&p, &world()).unwrap();
    assert_eq!(
        as_json(&r.local)["spec"]["egress"][0]["to"],
        json!([
            {"namespaceSelector": {}},
            {"ipBlock": {"cidr": "10.71.0.0/16"}},
            {"ipBlock": {"cidr": "10.81.0.0/16"}},
            {"ipBlock": {"cidr": "108.177.16.0/24"}}
        ])
    );
    let (p1, _) = for_provider(&r, "p1");
    assert_eq!(
        p1.egress.as_ref().unwrap()[0].peers,
        tenant(json!([
            {"ipBlock": {"cidr": "10.0.0.0/16"}},
            {"podSelector": {}},
            {"ipBlock": {"cidr": "108.177.16.0/24"}}
        ]))
    );
}

#[test]
fn a_rule_left_with_no_peer_is_left_out_not_opened() {
    // The workers run on p2 only: on p1 the rule admits nothing, and an
    // empty peer list would admit everyone.
    let p = policy(
        "backend",
        json!({
            "endpointSelector": {"matchLabels": {"app": "backend"}},
            "ingress": [{"from": [{"service": "worker"}]}]
        }),
    );
    let r = refine(&p, &world()).unwrap();
    let (p1, _) = for_provider(&r, "p1");
    // p1 still gets the worker's selector (it may run there later).
    assert_eq!(
        p1.ingress.as_ref().unwrap()[0].peers,
        tenant(
            json!([{"namespace": "shop-c1", "podSelector": {"matchLabels": {"app": "worker"}}}])
        )
    );
    let only_p2 = policy(
        "backend",
        json!({
            "endpointSelector": {"matchLabels": {"app": "backend"}},
            "ingress": [{"from": [{"service": "worker", "cluster": "p2"}]}]
        }),
    );
    let r = refine(&only_p2, &world()).unwrap();
    let (p1, notes_p1) = for_provider(&r, "p1");
    assert_eq!(p1.ingress, Some(vec![]));
    assert!(
        notes_p1.iter().any(|n| n.contains("left out")),
        "{notes_p1:?}"
    );
    // Here the workers on p2 are admitted by address.
    assert_eq!(
        as_json(&r.local)["spec"]["ingress"][0]["from"],
        json!([{"ipBlock": {"cidr": "10.81.0.7/32"}}])
    );
}

#[test]
fn a_namespace_not_offloaded_sends_nothing() {
    let mut w = world();
    w.remote_namespaces.clear();
    let r = refine(&frontend(), &w).unwrap();
    assert!(matches!(r.providers["p1"], ForProvider::NotOffloaded(_)));
    let docs = documents([&r], &w.providers);
    assert!(docs["p1"].policies.is_empty() && docs["p2"].policies.is_empty());
}

#[test]
fn full_masquerade_admits_cluster_scope_with_its_external_cidr() {
    let mut w = world();
    w.full_masquerade.insert("p1".into());
    let p = policy(
        "frontend",
        json!({
            "endpointSelector": {"matchLabels": {"app": "frontend"}},
            "ingress": [{"from": [{"service": "*", "cluster": "p1", "domain": "d"}]}]
        }),
    );
    let r = refine(&p, &w).unwrap();
    assert_eq!(
        as_json(&r.local)["spec"]["ingress"][0]["from"],
        json!([{"ipBlock": {"cidr": "10.71.0.0/16"}}, {"ipBlock": {"cidr": "10.72.0.0/16"}}])
    );
}

#[test]
fn every_refusal_is_named_and_nothing_is_produced() {
    type Case = (
        &'static str,
        Box<dyn Fn(&mut MultiClusterNetworkPolicy, &mut Snapshot)>,
        Reason,
        &'static str,
    );
    let peer = |p: &mut MultiClusterNetworkPolicy, v: Value| {
        p.spec.egress = Some(vec![serde_json::from_value(json!({"to": [v]})).unwrap()]);
    };
    let cases: Vec<Case> = vec![
        (
            "other domain",
            Box::new(move |p, _| {
                peer(
                    p,
                    json!({"service": "*", "cluster": "*", "domain": "elsewhere"}),
                )
            }),
            Reason::UnknownDomain,
            "elsewhere",
        ),
        (
            "unknown cluster",
            Box::new(move |p, _| peer(p, json!({"service": "backend", "cluster": "p9"}))),
            Reason::UnknownCluster,
            "p9",
        ),
        (
            "no such service",
            Box::new(move |p, _| peer(p, json!({"service": "cache"}))),
            Reason::UnknownService,
            "shop/cache",
        ),
        (
            "service without selector",
            Box::new(move |p, _| peer(p, json!({"service": "external-db"}))),
            Reason::UnknownService,
            "no selector",
        ),
        (
            "selects nothing",
            Box::new(|p, _| {
                p.spec
                    .endpoint_selector
                    .match_labels
                    .insert("app".into(), "nothing".into());
            }),
            Reason::SelectsNothing,
            "endpointSelector",
        ),
        (
            "both forms",
            Box::new(move |p, _| peer(p, json!({"service": "backend", "cidr": "10.0.0.0/8"}))),
            Reason::InvalidPeer,
            "both",
        ),
        (
            "neither form",
            Box::new(move |p, _| peer(p, json!({"cluster": "p1"}))),
            Reason::InvalidPeer,
            "neither",
        ),
        (
            "bad cidr",
            Box::new(move |p, _| peer(p, json!({"cidr": "10.0.0.300/8"}))),
            Reason::InvalidPeer,
            "10.0.0.300/8",
        ),
        (
            "except outside",
            Box::new(move |p, _| {
                peer(p, json!({"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24"]}))
            }),
            Reason::InvalidPeer,
            "10.1.0.0/24",
        ),
        (
            "service * without cluster",
            Box::new(move |p, _| peer(p, json!({"service": "*", "domain": "d"}))),
            Reason::InvalidPeer,
            "needs cluster and domain",
        ),
        (
            "cluster * without domain",
            Box::new(move |p, _| peer(p, json!({"service": "backend", "cluster": "*"}))),
            Reason::InvalidPeer,
            "needs domain",
        ),
        (
            "full masquerade on a provider",
            Box::new(move |p, w| {
                w.full_masquerade.insert("p1".into());
                peer(p, json!({"service": "backend"}));
            }),
            Reason::FullMasquerade,
            "p1",
        ),
        (
            "full masquerade here, offloaded",
            Box::new(move |p, w| {
                w.full_masquerade.insert("c1".into());
                peer(p, json!({"service": "backend", "cluster": "c1"}));
            }),
            Reason::FullMasquerade,
            "c1",
        ),
        (
            "no direction",
            Box::new(|p, _| p.spec.egress = None),
            Reason::InvalidSpec,
            "neither ingress nor egress",
        ),
        (
            "bad requirement",
            Box::new(|p, _| {
                p.spec
                    .endpoint_selector
                    .match_expressions
                    .push(serde_json::from_value(json!({"key": "app", "operator": "In"})).unwrap());
            }),
            Reason::InvalidSpec,
            "matchExpressions[0]",
        ),
        (
            "endPort on a name",
            Box::new(|p, _| {
                p.spec.egress = Some(vec![serde_json::from_value(
                    json!({"ports": [{"port": "http", "endPort": 90}]}),
                )
                .unwrap()]);
            }),
            Reason::InvalidSpec,
            "endPort",
        ),
    ];
    for (what, break_it, reason, named) in cases {
        let mut p = frontend();
        let mut w = world();
        break_it(&mut p, &mut w);
        let refused = refine(&p, &w).expect_err(what);
        assert_eq!(refused.reason, reason, "{what}: {refused:?}");
        assert!(
            refused.message.contains(named),
            "{what}: {}",
            refused.message
        );
        // The status says so and lists nothing applied.
        let outcome = Err(refused);
        let s = status::status(
            &p,
            "c1",
            &outcome,
            &Ok(()),
            &Told::Sent,
            &BTreeMap::new(),
            "T",
        );
        assert_eq!(s.conditions[0].status, "False");
        assert_eq!(s.conditions[0].reason, reason.as_str());
        assert!(s.conditions[0].message.contains("removed"));
        assert!(s
            .clusters
            .iter()
            .all(|c| c.network_policies.is_empty() && c.state == status::REFUSED));
    }
    // A cluster that masquerades, named as a whole, is fine; so is the
    // consumer's when the namespace stays here.
    let mut w = world();
    w.full_masquerade.insert("c1".into());
    w.remote_namespaces.clear();
    let p = policy(
        "frontend",
        json!({"endpointSelector": {}, "egress": [{"to": [{"service": "backend", "cluster": "c1"}]}]}),
    );
    assert!(refine(&p, &w).is_ok());
}

#[test]
fn documents_hold_only_what_was_rendered_for_each_provider() {
    let w = world();
    let front = refine(&frontend(), &w).unwrap();
    let back = refine(&backend(), &w).unwrap();
    let docs = documents([&front, &back], &w.providers);
    let names: Vec<&str> = docs["p1"]
        .policies
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["shop/backend", "shop/frontend"]);
    assert_eq!(docs["p1"].check(), Ok(()));
    // A refused policy is in no document.
    let mut broken = backend();
    broken
        .spec
        .endpoint_selector
        .match_labels
        .insert("app".into(), "nothing".into());
    let outcomes = [refine(&frontend(), &w), refine(&broken, &w)];
    let docs = documents(
        outcomes.iter().filter_map(|o| o.as_ref().ok()),
        &w.providers,
    );
    let names: Vec<&str> = docs["p2"]
        .policies
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["shop/frontend"]);
}

#[test]
fn selectors_match_as_kubernetes_does() {
    let sel: LabelSelector = serde_json::from_value(json!({
        "matchLabels": {"tier": "web"},
        "matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "canary", "operator": "DoesNotExist"}
        ]
    }))
    .unwrap();
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(selects(&sel, &labels(&[("tier", "web")])));
    assert!(selects(&sel, &labels(&[("tier", "web"), ("env", "dev")])));
    assert!(!selects(&sel, &labels(&[("tier", "web"), ("env", "prod")])));
    assert!(!selects(&sel, &labels(&[("tier", "web"), ("canary", "")])));
    assert!(!selects(&sel, &labels(&[("tier", "db")])));
}

#[test]
fn provider_states_follow_their_reports() {
    let w = world();
    let p = frontend();
    let rendered = refine(&p, &w).unwrap();
    let (sent, _) = for_provider(&rendered, "p1");
    let held = |revision: u64, report: Option<TenantPolicyReport>| -> ContractNetworkPolicy {
        serde_json::from_value(json!({
            "revision": revision,
            "updatedAt": "2026-01-01T00:00:00Z",
            "policy": TenantPolicy { policies: vec![sent.clone()] },
            "report": report,
        }))
        .unwrap()
    };
    let applied = TenantPolicyReport {
        revision: 2,
        applied: vec![AppliedTenantPolicy {
            name: "shop/frontend".into(),
            network_policies: vec!["shop-c1/tenant-frontend".into()],
        }],
        refused: vec![],
    };
    let refused = TenantPolicyReport {
        revision: 2,
        applied: vec![],
        refused: vec![RefusedTenantPolicy {
            name: "shop/frontend".into(),
            reason: "outside the isolation".into(),
        }],
    };
    let judge = |d: Delivery| {
        let deliveries: BTreeMap<String, Delivery> = [
            ("p1".to_string(), d),
            (
                "p2".to_string(),
                Delivery::NotTold("not told: no credentials".into()),
            ),
        ]
        .into();
        let outcome = Ok(rendered.clone());
        let s = status::status(&p, "c1", &outcome, &Ok(()), &Told::Sent, &deliveries, "T");
        assert_eq!(s.observed_generation, 3);
        assert_eq!(s.clusters[0].cluster, "c1");
        assert_eq!(s.clusters[0].state, status::APPLIED);
        assert_eq!(s.clusters[0].network_policies, ["shop/mcnp-frontend"]);
        assert_eq!(s.clusters[2].state, status::NOT_RENDERED);
        assert_eq!(s.conditions[0].status, "True");
        s.clusters[1].clone()
    };
    let applied_again = applied.clone();
    let now = judge(Delivery::Stored(vec![Some(held(2, Some(applied.clone())))]));
    assert_eq!(now.state, status::APPLIED);
    assert_eq!(now.network_policies, ["shop-c1/tenant-frontend"]);
    // Notes ride along (p2's backend is not rendered on p1).
    assert!(
        now.message.contains("not rendered on p1"),
        "{}",
        now.message
    );
    // A report of an earlier revision says nothing of this one.
    assert_eq!(
        judge(Delivery::Stored(vec![Some(held(3, Some(applied)))])).state,
        status::PENDING
    );
    assert_eq!(
        judge(Delivery::Stored(vec![Some(held(2, None))])).state,
        status::PENDING
    );
    let no = judge(Delivery::Stored(vec![Some(held(2, Some(refused)))]));
    assert_eq!(no.state, status::REFUSED);
    assert!(no.message.contains("outside the isolation"));
    // Two contracts with p1: the provider reports on the one updated last.
    let mut older = held(1, None);
    older.updated_at = "2025-12-01T00:00:00Z".parse().unwrap();
    let both = judge(Delivery::Stored(vec![
        Some(older),
        Some(held(2, Some(applied_again))),
    ]));
    assert_eq!(both.state, status::APPLIED, "{}", both.message);
    // Something else stored (an older document): pending.
    let mut other = held(2, None);
    other.policy.policies.clear();
    assert_eq!(
        judge(Delivery::Stored(vec![Some(other)])).state,
        status::PENDING
    );
}

#[test]
fn without_credentials_providers_are_not_rendered_and_the_condition_says_why() {
    let w = world();
    let p = frontend();
    let outcome = refine(&p, &w);
    let why = "no --network-policy-catalog and --network-policy-credentials".to_string();
    let deliveries: BTreeMap<String, Delivery> = w
        .providers
        .iter()
        .map(|p| (p.clone(), Delivery::NotTold(format!("not told: {why}"))))
        .collect();
    let s = status::status(
        &p,
        "c1",
        &outcome,
        &Ok(()),
        &Told::NoCatalogCredentials(why),
        &deliveries,
        "T",
    );
    assert_eq!(s.conditions[0].reason, status::APPLIED);
    let told = s
        .conditions
        .iter()
        .find(|c| c.type_ == status::PROVIDERS_TOLD)
        .unwrap();
    assert_eq!(
        (told.status.as_str(), told.reason.as_str()),
        ("False", status::NO_CATALOG_CREDENTIALS)
    );
    assert!(s.clusters[1..]
        .iter()
        .all(|c| c.state == status::NOT_RENDERED));
}

#[test]
fn restricted_egress_here_still_reaches_the_cluster_dns() {
    let mut w = world();
    w.dns = Some(crate::network_policy::snapshot::Dns {
        namespace: "kube-system".into(),
        pod_labels: [("k8s-app".to_string(), "kube-dns".to_string())].into(),
    });
    let r = refine(&frontend(), &w).unwrap();
    let egress = &as_json(&r.local)["spec"]["egress"];
    assert_eq!(
        egress[1],
        json!({
            "to": [{
                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}
            }],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
        })
    );
    // Ingress-only policies get none; the providers add their own DNS.
    let r = refine(&backend(), &w).unwrap();
    assert!(as_json(&r.local)["spec"].get("egress").is_none());
    assert_eq!(for_provider(&r, "p1").0.egress, None);
}
