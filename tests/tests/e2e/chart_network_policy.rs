//! The chart's NetworkPolicies for the broker's own pods (issue 46),
//! rendered by the real Helm: off by default (nothing rendered); on, one
//! policy per enabled component, selecting its pods, admitting ingress
//! only on the ports its container serves (a metrics port from the
//! monitoring namespaces, a gRPC port from Liqo's, the catalog's HTTP from
//! anyone or the peers given) and egress only to DNS, the API server (a
//! configured CIDR, for the components that mount a token), the catalog
//! (its pods when the URL names this namespace's, else the peers given),
//! MongoDB when given, and what is named at run time. A value the policy
//! cannot do without is refused naming it. Every rendered policy is then
//! created in the test API server, which validates it as the real one
//! does (`pkg/apis/networking/validation`).

use std::collections::BTreeSet;

use anyhow::{anyhow, ensure, Context, Result};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::chart_support::*;

/// The values turning the policies on, with the API server's address and
/// the (outside) catalog's that `EVERY_COMPONENT`'s catalogURLs need.
const ON: &[&str] = &[
    "networkPolicy.enabled=true",
    "networkPolicy.apiServer.cidrs={192.0.2.10/32}",
    "networkPolicy.catalog.to[0].ipBlock.cidr=203.0.113.7/32",
];

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

/// A number field as i64 (helm prints ports as integers).
fn number(value: &Value) -> Option<i64> {
    value.as_i64()
}

/// The container ports of a Deployment's (one) container: (name, port).
fn container_ports(deployment: &Value) -> BTreeSet<(String, i64)> {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .filter_map(|p| Some((text(&p["name"]).to_string(), number(&p["containerPort"])?)))
        .collect()
}

/// The rules of one direction (`ingress` or `egress`).
fn rules<'a>(policy: &'a Value, direction: &str) -> &'a [Value] {
    policy["spec"][direction]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Ports as (port, protocol).
type Ports = BTreeSet<(i64, String)>;

/// An egress rule as its peers and ports.
type Egress = (Vec<Value>, Ports);

/// A rule's ports.
fn ports(rule: &Value) -> Ports {
    rule["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((number(&p["port"])?, text(&p["protocol"]).to_string())))
        .collect()
}

fn tcp(list: &[i64]) -> Ports {
    list.iter().map(|p| (*p, "TCP".to_string())).collect()
}

/// The peers of a rule (`from` or `to`).
fn peers<'a>(rule: &'a Value, side: &str) -> &'a [Value] {
    rule[side].as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The egress rules after the first (DNS).
fn beside_dns(policy: &Value) -> Vec<Egress> {
    rules(policy, "egress")
        .iter()
        .skip(1)
        .map(|r| (peers(r, "to").to_vec(), ports(r)))
        .collect()
}

fn namespace_peer(name: &str) -> Value {
    json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}})
}

fn ip_peer(cidr: &str) -> Value {
    json!({"ipBlock": {"cidr": cidr}})
}

fn catalog_pods() -> Value {
    json!({"podSelector": {"matchLabels": {"app.kubernetes.io/name": "catalog"}}})
}

/// Whether a Deployment's pods mount a ServiceAccount token (they call the
/// API server).
fn mounts_token(deployment: &Value) -> bool {
    deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] != false
}

#[test]
fn off_by_default_no_policy_is_rendered() -> Result<()> {
    for sets in [
        Vec::new(),
        EVERY_COMPONENT.to_vec(),
        with(EVERY_COMPONENT, &["networkPolicy.enabled=false"]),
    ] {
        let objects = template("liqo", &sets)?;
        let policies = of_kind(&objects, "NetworkPolicy");
        ensure!(policies.is_empty(), "{sets:?}: {policies:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn each_enabled_component_gets_one_policy_admitting_only_what_it_serves_and_calls(
) -> Result<()> {
    let objects = template("liqo", &with(EVERY_COMPONENT, ON))?;
    let deployments = of_kind(&objects, "Deployment");
    let policies = of_kind(&objects, "NetworkPolicy");
    ensure!(
        deployments.len() == 9 && policies.len() == deployments.len(),
        "{} Deployments, {} NetworkPolicies",
        deployments.len(),
        policies.len()
    );

    let dns = json!({
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    });
    for deployment in deployments {
        let name = text(&deployment["metadata"]["name"]);
        let policy = named(&objects, "NetworkPolicy", name)?;
        ensure!(policy["metadata"]["namespace"] == "liqo", "{}", id(policy));
        ensure!(
            policy["spec"]["podSelector"]["matchLabels"]
                == deployment["spec"]["selector"]["matchLabels"],
            "{name}: the policy selects other pods: {policy}"
        );
        ensure!(
            policy["spec"]["policyTypes"] == json!(["Ingress", "Egress"]),
            "{name}: both directions isolated: {policy}"
        );

        // Ingress: exactly the ports the container serves, each from whom
        // it serves.
        let served = container_ports(deployment);
        let ingress = rules(policy, "ingress");
        let admitted: BTreeSet<i64> = ingress
            .iter()
            .flat_map(|r| ports(r).into_iter().map(|(p, _)| p))
            .collect();
        let serves: BTreeSet<i64> = served.iter().map(|(_, p)| *p).collect();
        ensure!(
            admitted == serves,
            "{name}: ingress on {admitted:?}, the container serves {served:?}"
        );
        for (port_name, port) in &served {
            let rule = ingress
                .iter()
                .find(|r| ports(r).contains(&(*port, "TCP".to_string())))
                .with_context(|| format!("{name}: no ingress rule for {port}"))?;
            let from = peers(rule, "from");
            match port_name.as_str() {
                "metrics" => ensure!(
                    from == [namespace_peer("monitoring")],
                    "{name}: metrics port {port} from {from:?}"
                ),
                "grpc" => ensure!(
                    from == [namespace_peer("liqo")],
                    "{name}: gRPC port {port} from {from:?}"
                ),
                // The catalog's API and web UI: from anyone.
                "http" if name == "catalog" => {
                    ensure!(from.is_empty(), "catalog: HTTP from {from:?}")
                }
                other => return Err(anyhow!("{name}: an unexpected port {other} {port}")),
            }
        }

        // Egress: DNS first, then what the component calls, nothing else.
        let egress = rules(policy, "egress");
        ensure!(
            egress
                .first()
                .is_some_and(|r| peers(r, "to") == [dns.clone()]
                    && ports(r)
                        == BTreeSet::from([(53, "UDP".to_string()), (53, "TCP".to_string())])),
            "{name}: no DNS rule first: {egress:?}"
        );
        let mut wanted: Vec<Egress> = Vec::new();
        if mounts_token(deployment) {
            wanted.push((vec![ip_peer("192.0.2.10/32")], tcp(&[443, 6443])));
        }
        match name {
            "slice-controller" | "peering-user-controller" | "service-controller" => {
                wanted.push((vec![ip_peer("203.0.113.7/32")], tcp(&[443])))
            }
            // This release's catalog: its pods.
            "orchestrator" => wanted.push((vec![catalog_pods()], tcp(&[8080]))),
            // Named at run time: anywhere, any port, by default.
            "purchase-controller" | "market-autoscaler" | "aggregator" => {
                wanted.push((vec![ip_peer("0.0.0.0/0")], Ports::new()))
            }
            _ => {}
        }
        let got = beside_dns(policy);
        ensure!(
            got == wanted,
            "{name}: egress beside DNS {got:?}, wanted {wanted:?}"
        );
    }
    // The catalog and the aggregator never call the API server.
    for name in ["catalog", "aggregator"] {
        ensure!(!mounts_token(named(&objects, "Deployment", name)?));
    }

    // Each policy is one a real API server accepts.
    let kube = KubeApiServer::start_without_crds().await?;
    kube.create(
        ("", "namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "liqo"}}),
    )
    .map_err(|e| anyhow!("namespace liqo: {e:?}"))?;
    for policy in policies {
        kube.create(("networking.k8s.io", "networkpolicies"), policy.clone())
            .map_err(|e| anyhow!("{} refused: {e:?}", id(policy)))?;
    }
    Ok(())
}

#[test]
fn only_enabled_components_get_a_policy_and_what_one_needs_is_required() -> Result<()> {
    // The defaults (the catalog only): one policy, which needs no API
    // server address (the catalog never calls it).
    let objects = template("liqo", &["networkPolicy.enabled=true"])?;
    let policies = of_kind(&objects, "NetworkPolicy");
    ensure!(
        policies.len() == 1 && policies[0]["metadata"]["name"] == "catalog",
        "{policies:?}"
    );

    // A component calling the API server, without its address.
    let said = template_refused(&[
        "catalog.enabled=false",
        "purchaseController.enabled=true",
        "purchaseController.clusterID=consumer-1",
        "networkPolicy.enabled=true",
    ])?;
    ensure!(
        said.contains("networkPolicy.apiServer.cidrs") && said.contains("purchase-controller"),
        "{said}"
    );

    // A catalog outside this namespace, without its addresses.
    let slice = [
        "catalog.enabled=false",
        "sliceController.enabled=true",
        "networkPolicy.enabled=true",
        "networkPolicy.apiServer.cidrs={192.0.2.10/32}",
    ];
    let said = template_refused(&with(
        &slice,
        &["sliceController.catalogURL=https://catalog.example"],
    ))?;
    ensure!(
        said.contains("networkPolicy.catalog.to") && said.contains("sliceController.catalogURL"),
        "{said}"
    );
    // This namespace's catalog by its Service's name: its pods, on 8080.
    for url in [
        "http://catalog:8080",
        "http://catalog.liqo:8080",
        "http://catalog.liqo.svc.cluster.local:8080",
    ] {
        let set = format!("sliceController.catalogURL={url}");
        let objects = template("liqo", &with(&slice, &[set.as_str()]))?;
        let policy = named(&objects, "NetworkPolicy", "slice-controller")?;
        ensure!(
            rules(policy, "egress")
                .iter()
                .any(|r| peers(r, "to") == [catalog_pods()] && ports(r) == tcp(&[8080])),
            "{url}: {policy}"
        );
    }

    // MongoDB: required with catalog.mongodb.required, then reached.
    let said = template_refused(&[
        "networkPolicy.enabled=true",
        "catalog.mongodb.required=true",
    ])?;
    ensure!(said.contains("networkPolicy.mongodb.to"), "{said}");
    let objects = template(
        "liqo",
        &[
            "networkPolicy.enabled=true",
            "catalog.mongodb.required=true",
            "networkPolicy.mongodb.to[0].ipBlock.cidr=198.51.100.20/32",
            // And the catalog's own additions: an OIDC issuer.
            "networkPolicy.extraEgress.catalog[0].to[0].ipBlock.cidr=198.51.100.4/32",
            "networkPolicy.extraEgress.catalog[0].ports[0].port=443",
            // Its HTTP from one range only, then.
            "networkPolicy.catalog.from[0].ipBlock.cidr=192.0.2.0/24",
        ],
    )?;
    let policy = named(&objects, "NetworkPolicy", "catalog")?;
    let egress = beside_dns(policy);
    ensure!(
        egress
            == vec![
                (vec![ip_peer("198.51.100.20/32")], tcp(&[27017])),
                // As given: the API server defaults the protocol.
                (
                    vec![ip_peer("198.51.100.4/32")],
                    Ports::from([(443, String::new())])
                ),
            ],
        "catalog egress: {egress:?}"
    );
    let ingress = rules(policy, "ingress");
    let first = peers(&ingress[0], "from");
    ensure!(
        first.first() == Some(&ip_peer("192.0.2.0/24"))
            && first
                .get(1)
                .is_some_and(|p| p["podSelector"]["matchExpressions"][0]["values"]
                    .as_array()
                    .is_some_and(|v| v.contains(&json!("orchestrator")))),
        "the given range and the broker's controllers: {first:?}"
    );
    ensure!(
        ingress.len() == 2 && peers(&ingress[1], "from") == [namespace_peer("monitoring")],
        "and the monitoring namespaces: {ingress:?}"
    );

    // A key no policy has is refused by the schema.
    let said =
        template_refused(&["networkPolicy.extraEgress.catalgo[0].to[0].ipBlock.cidr=1.2.3.4/32"])?;
    ensure!(said.contains("catalgo"), "{said}");
    Ok(())
}
