//! networking.k8s.io/v1 NetworkPolicies through kube-rs, as a real server
//! serves them (`src/network_policy.rs`, from
//! `pkg/apis/networking/validation/validation.go` and
//! `pkg/apis/networking/v1/defaults.go`): in discovery with the real verbs;
//! created with the defaults applied and `generation` kept; listed,
//! watched, patched and deleted as a collection; each rule of
//! `ValidateNetworkPolicySpec` refusing with its real field path and
//! message, and nothing stored; and `create networkpolicies` needed.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::Client;
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

mod kube_rs;
use kube_rs::{admin, from_kubeconfig, status};

const NS: &str = "team";
const USER: &str = "system:serviceaccount:default:writer";

async fn world() -> (KubeApiServer, Client) {
    let kube = KubeApiServer::start().await.unwrap();
    let client = admin(&kube).await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    (kube, client)
}

fn policy(name: &str, spec: Value) -> NetworkPolicy {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}, "spec": spec}))
        .unwrap()
}

fn as_json(np: &NetworkPolicy) -> Value {
    serde_json::to_value(np).unwrap()
}

/// Served in discovery with the real server's verbs and short name.
#[tokio::test]
async fn discovery_lists_networkpolicies() {
    let (_kube, client) = world().await;
    let list = client
        .list_api_group_resources("networking.k8s.io/v1")
        .await
        .unwrap();
    let np = list
        .resources
        .iter()
        .find(|r| r.name == "networkpolicies")
        .unwrap();
    assert_eq!(np.kind, "NetworkPolicy");
    assert!(np.namespaced);
    let mut verbs = np.verbs.clone();
    verbs.sort();
    assert_eq!(
        verbs,
        [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]
    );
    assert_eq!(np.short_names.clone().unwrap_or_default(), ["netpol"]);
}

/// A policy comes back with `SetDefaults_NetworkPolicyPort` (`TCP`) and
/// `SetDefaults_NetworkPolicy` (`Ingress`, plus `Egress` with egress
/// rules) applied, an absent `podSelector` as `{}`, and `generation` 1,
/// one more on a spec change.
#[tokio::test]
async fn round_trip_applies_the_defaults() {
    let (_kube, client) = world().await;
    let api: Api<NetworkPolicy> = Api::namespaced(client, NS);
    let created = api
        .create(
            &PostParams::default(),
            &policy(
                "web",
                json!({
                    "podSelector": {"matchLabels": {"app": "web"}},
                    "ingress": [{
                        "from": [{"podSelector": {"matchLabels": {"role": "lb"}},
                                  "namespaceSelector": {"matchExpressions": [
                                      {"key": "env", "operator": "In", "values": ["prod"]}]}}],
                        "ports": [{"port": 80}, {"port": "https", "protocol": "TCP"},
                                  {"port": 8000, "endPort": 8080, "protocol": "UDP"}]
                    }],
                    "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
                                "ports": [{"port": 53, "protocol": "SCTP"}, {}]}]
                }),
            ),
        )
        .await
        .unwrap();
    let got = as_json(&api.get("web").await.unwrap());
    assert_eq!(got, as_json(&created));
    assert_eq!(
        got["spec"]["policyTypes"],
        json!(["Ingress", "Egress"]),
        "{got}"
    );
    assert_eq!(
        got["spec"]["ingress"][0]["ports"],
        json!([{"port": 80, "protocol": "TCP"}, {"port": "https", "protocol": "TCP"},
               {"port": 8000, "endPort": 8080, "protocol": "UDP"}])
    );
    assert_eq!(
        got["spec"]["egress"][0]["ports"],
        json!([{"port": 53, "protocol": "SCTP"}, {"protocol": "TCP"}])
    );
    assert_eq!(got["metadata"]["generation"], json!(1));

    let bare = api
        .create(&PostParams::default(), &policy("deny-all", json!({})))
        .await
        .unwrap();
    assert_eq!(
        as_json(&bare)["spec"],
        json!({"podSelector": {}, "policyTypes": ["Ingress"]})
    );
    let egress_only = api
        .create(
            &PostParams::default(),
            &policy(
                "egress-only",
                json!({"podSelector": {}, "policyTypes": ["Egress"]}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        as_json(&egress_only)["spec"]["policyTypes"],
        json!(["Egress"])
    );

    // `ValidateNetworkPolicySpec` has no rule against a repeated type (at
    // most two, each Ingress or Egress): a real server takes this one.
    let twice = api
        .create(
            &PostParams::default(),
            &policy(
                "twice",
                json!({"podSelector": {}, "policyTypes": ["Ingress", "Ingress"]}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        as_json(&twice)["spec"]["policyTypes"],
        json!(["Ingress", "Ingress"])
    );

    // A merge patch of the spec: defaulted again, generation 2.
    let patched = api
        .patch(
            "deny-all",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"egress": [{"ports": [{"port": 443}]}], "policyTypes": null}}),
            ),
        )
        .await
        .unwrap();
    let patched = as_json(&patched);
    assert_eq!(patched["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        patched["spec"]["egress"],
        json!([{"ports": [{"port": 443, "protocol": "TCP"}]}])
    );
    assert_eq!(patched["metadata"]["generation"], json!(2));
}

/// Listed (with a label selector), watched from a list's
/// `resourceVersion`, and deleted as a collection.
#[tokio::test]
async fn list_watch_and_deletecollection() {
    let (_kube, client) = world().await;
    let api: Api<NetworkPolicy> = Api::namespaced(client, NS);
    for (name, tier) in [("a", "front"), ("b", "back")] {
        let mut np = policy(name, json!({"podSelector": {}}));
        np.metadata.labels = Some([("tier".to_string(), tier.to_string())].into());
        api.create(&PostParams::default(), &np).await.unwrap();
    }
    let all = api.list(&ListParams::default()).await.unwrap();
    let names: Vec<_> = all
        .items
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    let front = api
        .list(&ListParams::default().labels("tier=front"))
        .await
        .unwrap();
    assert_eq!(front.items.len(), 1);
    assert_eq!(front.items[0].metadata.name.as_deref(), Some("a"));

    let rv = all.metadata.resource_version.unwrap();
    let mut events = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(
        &PostParams::default(),
        &policy("c", json!({"podSelector": {}})),
    )
    .await
    .unwrap();
    let event = tokio::time::timeout(std::time::Duration::from_secs(10), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match event {
        WatchEvent::Added(np) => {
            assert_eq!(np.metadata.name.as_deref(), Some("c"));
            assert_eq!(as_json(&np)["spec"]["policyTypes"], json!(["Ingress"]));
        }
        other => panic!("not ADDED: {other:?}"),
    }

    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    assert!(api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
}

/// One policy breaking one rule: its field path and message as the real
/// `field.Error` prints them.
struct Refusal {
    name: &'static str,
    spec: Value,
    field: &'static str,
    message: &'static str,
}

fn refusals() -> Vec<Refusal> {
    let from = |peer: Value| json!({"podSelector": {}, "ingress": [{"from": [peer]}]});
    let port = |port: Value| json!({"podSelector": {}, "ingress": [{"ports": [port]}]});
    let egress_to = |peer: Value| json!({"podSelector": {}, "egress": [{"to": [peer]}]});
    vec![
        // ValidateNetworkPolicyPeer
        Refusal {
            name: "no-peer",
            spec: from(json!({})),
            field: "spec.ingress[0].from[0]",
            message: "Required value: must specify a peer",
        },
        Refusal {
            name: "ipblock-and-pods",
            spec: egress_to(json!({"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}})),
            field: "spec.egress[0].to[0]",
            message: "Forbidden: may not specify both ipBlock and another peer",
        },
        Refusal {
            name: "ipblock-and-namespaces",
            spec: from(json!({"ipBlock": {"cidr": "10.0.0.0/8"}, "namespaceSelector": {}})),
            field: "spec.ingress[0].from[0]",
            message: "Forbidden: may not specify both ipBlock and another peer",
        },
        // ValidateLabelSelector
        Refusal {
            name: "bad-operator",
            spec: json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}}),
            field: "spec.podSelector.matchExpressions[0].operator",
            message: "Invalid value: \"Bogus\": not a valid selector operator",
        },
        Refusal {
            name: "in-without-values",
            spec: from(json!({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In"}]}})),
            field: "spec.ingress[0].from[0].namespaceSelector.matchExpressions[0].values",
            message: "Required value: must be specified when `operator` is 'In' or 'NotIn'",
        },
        Refusal {
            name: "exists-with-values",
            spec: json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}}),
            field: "spec.podSelector.matchExpressions[0].values",
            message: "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        },
        Refusal {
            name: "bad-label-value",
            spec: from(json!({"podSelector": {"matchLabels": {"app": "not valid"}}})),
            field: "spec.ingress[0].from[0].podSelector.matchLabels",
            message: "Invalid value: \"not valid\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        },
        // ValidateNetworkPolicyPort
        Refusal {
            name: "icmp",
            spec: port(json!({"protocol": "ICMP", "port": 1})),
            field: "spec.ingress[0].ports[0].protocol",
            message: "Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\"",
        },
        Refusal {
            name: "port-zero",
            spec: port(json!({"port": 0})),
            field: "spec.ingress[0].ports[0].port",
            message: "Invalid value: 0: must be between 1 and 65535, inclusive",
        },
        Refusal {
            name: "port-too-big",
            spec: port(json!({"port": 65536})),
            field: "spec.ingress[0].ports[0].port",
            message: "Invalid value: 65536: must be between 1 and 65535, inclusive",
        },
        Refusal {
            name: "port-name-too-long",
            spec: port(json!({"port": "a-very-long-name"})),
            field: "spec.ingress[0].ports[0].port",
            message: "Invalid value: \"a-very-long-name\": must be no more than 15 characters",
        },
        Refusal {
            name: "port-name-digits",
            spec: port(json!({"port": "8080"})),
            field: "spec.ingress[0].ports[0].port",
            message: "Invalid value: \"8080\": must contain at least one letter (a-z)",
        },
        Refusal {
            name: "port-name-upper",
            spec: port(json!({"port": "my_port"})),
            field: "spec.ingress[0].ports[0].port",
            message: "Invalid value: \"my_port\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
        },
        Refusal {
            name: "port-name-hyphens",
            spec: port(json!({"port": "my--port"})),
            field: "spec.ingress[0].ports[0].port",
            message: "Invalid value: \"my--port\": must not contain consecutive hyphens",
        },
        Refusal {
            name: "end-port-named",
            spec: port(json!({"port": "http", "endPort": 90})),
            field: "spec.ingress[0].ports[0].endPort",
            message: "Invalid value: 90: may not be specified when `port` is non-numeric",
        },
        Refusal {
            name: "end-port-alone",
            spec: port(json!({"endPort": 90})),
            field: "spec.ingress[0].ports[0].endPort",
            message: "Invalid value: 90: may not be specified when `port` is not specified",
        },
        Refusal {
            name: "end-port-below",
            spec: port(json!({"port": 100, "endPort": 90})),
            field: "spec.ingress[0].ports[0].endPort",
            message: "Invalid value: 90: must be greater than or equal to `port`",
        },
        Refusal {
            name: "end-port-too-big",
            spec: port(json!({"port": 100, "endPort": 70000})),
            field: "spec.ingress[0].ports[0].endPort",
            message: "Invalid value: 70000: must be between 1 and 65535, inclusive",
        },
        // ValidateIPBlock
        Refusal {
            name: "no-cidr",
            spec: egress_to(json!({"ipBlock": {"cidr": ""}})),
            field: "spec.egress[0].to[0].ipBlock.cidr",
            message: "Required value",
        },
        Refusal {
            name: "bad-cidr",
            spec: egress_to(json!({"ipBlock": {"cidr": "10.0.0.0"}})),
            field: "spec.egress[0].to[0].ipBlock.cidr",
            message: "Invalid value: \"10.0.0.0\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        },
        Refusal {
            name: "bad-except",
            spec: egress_to(json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.0.0/33"]}})),
            field: "spec.egress[0].to[0].ipBlock.except[0]",
            message: "Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        },
        Refusal {
            name: "except-outside",
            spec: egress_to(json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["192.168.0.0/16"]}})),
            field: "spec.egress[0].to[0].ipBlock.except[0]",
            message: "Invalid value: \"192.168.0.0/16\": must be a strict subset of `cidr`",
        },
        Refusal {
            name: "except-equal",
            spec: from(json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.0.0/16", "10.0.0.0/8"]}})),
            field: "spec.ingress[0].from[0].ipBlock.except[1]",
            message: "Invalid value: \"10.0.0.0/8\": must be a strict subset of `cidr`",
        },
        // ValidateNetworkPolicySpec: policyTypes
        Refusal {
            name: "unknown-policy-type",
            spec: json!({"podSelector": {}, "policyTypes": ["Ingress", "Sideways"]}),
            field: "spec.policyTypes[1]",
            message: "Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\"",
        },
        Refusal {
            name: "three-policy-types",
            spec: json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress", "Ingress"]}),
            field: "spec.policyTypes",
            message: "Invalid value: []networking.PolicyType{\"Ingress\", \"Egress\", \"Ingress\"}: may not specify more than two policyTypes",
        },
    ]
}

/// Each rule refuses with 422 Invalid, the real cause first (alone, but
/// for the one the Go code reports beside others), and nothing is stored.
#[tokio::test]
async fn each_rule_refuses_with_its_field_path() {
    let (_kube, client) = world().await;
    let api: Api<NetworkPolicy> = Api::namespaced(client, NS);
    for r in refusals() {
        let e = status(
            api.create(&PostParams::default(), &policy(r.name, r.spec.clone()))
                .await
                .expect_err(r.name),
        );
        assert_eq!(
            (e["code"].clone(), e["reason"].clone()),
            (json!(422), json!("Invalid")),
            "{}: {e}",
            r.name
        );
        let causes: Vec<(Value, Value)> = e["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["field"].clone(), c["message"].clone()))
            .collect();
        assert_eq!(
            causes,
            [(json!(r.field), json!(r.message))],
            "{}: {e}",
            r.name
        );
        assert_eq!(e["details"]["kind"], "NetworkPolicy", "{}", r.name);
        assert_eq!(e["details"]["group"], "networking.k8s.io", "{}", r.name);
        assert_eq!(
            e["message"],
            json!(format!(
                "NetworkPolicy.networking.k8s.io \"{}\" is invalid: {}: {}",
                r.name, r.field, r.message
            )),
            "{}",
            r.name
        );
        let gone = status(api.get(r.name).await.unwrap_err());
        assert_eq!(gone["code"], 404, "{}: stored", r.name);
    }
    // The same rules on update: a valid policy made invalid is refused and
    // stays as it was.
    let ok = api
        .create(
            &PostParams::default(),
            &policy("ok", json!({"podSelector": {}})),
        )
        .await
        .unwrap();
    let mut bad = ok.clone();
    bad.spec =
        serde_json::from_value(json!({"podSelector": {}, "ingress": [{"ports": [{"port": 0}]}]}))
            .unwrap();
    let e = status(
        api.replace("ok", &PostParams::default(), &bad)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e["details"]["causes"][0]["field"], "spec.ingress[0].ports[0].port",
        "{e}"
    );
    assert_eq!(as_json(&api.get("ok").await.unwrap()), as_json(&ok));
}

/// Name and namespace, as `ValidateObjectMeta` and the store check them: a
/// name that is not a DNS subdomain (`ValidateNetworkPolicyName`), a
/// namespace that does not exist.
#[tokio::test]
async fn name_and_namespace_rules() {
    let (_kube, client) = world().await;
    let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), NS);
    let e = status(
        api.create(&PostParams::default(), &policy("Not_A_Name", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e["code"], 422, "{e}");
    assert_eq!(e["details"]["causes"][0]["field"], "metadata.name", "{e}");
    assert!(
        e["details"]["causes"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid value: \"Not_A_Name\": a lowercase RFC 1123 subdomain"),
        "{e}"
    );
    let elsewhere: Api<NetworkPolicy> = Api::namespaced(client, "nowhere");
    let mut np = policy("p", json!({}));
    np.metadata.namespace = Some("nowhere".into());
    let e = status(
        elsewhere
            .create(&PostParams::default(), &np)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e["code"].clone(), e["reason"].clone()),
        (json!(404), json!("NotFound")),
        "{e}"
    );
}

/// RBAC: a user allowed to read NetworkPolicies but not to create them
/// gets the real 403; granted `create`, the same request succeeds.
#[tokio::test]
async fn create_needs_create_networkpolicies() {
    let (kube, _client) = world().await;
    let grant = |verbs: &[&str]| {
        kube.load_rbac(&[
            json!({"kind": "ClusterRole", "metadata": {"name": "netpol"},
                   "rules": [{"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": verbs}]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "netpol"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "netpol"},
                   "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": "default"}]}),
        ]);
    };
    grant(&["get", "list", "watch"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    kube.write_kubeconfig_as(&path, USER).unwrap();
    let api: Api<NetworkPolicy> = Api::namespaced(from_kubeconfig(&path).await.unwrap(), NS);
    assert!(api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    let e = status(
        api.create(&PostParams::default(), &policy("p", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e["code"].clone(), e["reason"].clone(), e["message"].clone()),
        (
            json!(403),
            json!("Forbidden"),
            json!(format!(
                "networkpolicies.networking.k8s.io is forbidden: User \"{USER}\" cannot create resource \"networkpolicies\" in API group \"networking.k8s.io\" in the namespace \"{NS}\""
            ))
        ),
        "{e}"
    );
    grant(&["get", "list", "watch", "create"]);
    api.create(&PostParams::default(), &policy("p", json!({})))
        .await
        .unwrap();
}
