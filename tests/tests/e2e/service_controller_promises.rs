//! What docs/services.md promises about failures and about the customer's
//! parameters, on the world of `service_controller` ([`ServiceWorld`]: the
//! real catalog, `service-controller` and `purchase-controller` on both
//! clusters, two test API servers with the model of Liqo v1.2), issue 40:
//!
//! - a template whose kind the provider's API server serves cluster-scoped
//!   (a CRD's, which no list written in advance can know) is reported
//!   `failed` naming the kind, and none of the instance's objects is
//!   applied; a Purchase that fails (the customer's kubeconfig refused by
//!   its cluster) is reported `failed` with the Purchase's reason; each
//!   report is sent once, not at every pass (the controller's
//!   `reports_total` holds still over many passes);
//! - hostile parameters: refused by the catalog where the plan's schema
//!   says so; otherwise rendered as data (`| tojson`), every value found
//!   literally in the object, nothing outside the instance namespace; a
//!   template that writes them raw cannot lead an object out of the
//!   instance namespace either (checked after rendering: `failed`, nothing
//!   applied).

use std::time::Instant;

use e2e::buying::get;
use e2e::osb_client::{plan_of, service_of, Outcome};
use serde_json::{json, Value};

use crate::purchase_controller_support::*;
use crate::service_controller::{
    contract_id, controller_metric, ServiceWorld, CONFIGMAPS, NAMESPACES, SERVICE_CATALOGS,
};

/// The OSB ids of `offer` and of its plan `plan`.
fn osb_ids(sw: &ServiceWorld, offer: &str, plan: &str) -> (String, String) {
    let services = sw.platform.catalog();
    let service = service_of(&services, offer);
    let id = |v: &Value| v["id"].as_str().unwrap().to_string();
    (id(service), id(plan_of(service, plan)))
}

/// Provision `instance` of OSB service `sid`, plan `pid`, as a platform
/// does, with the customer's peering kubeconfig `kubeconfig`.
fn provision(
    sw: &ServiceWorld,
    instance: &str,
    (sid, pid): &(String, String),
    parameters: Value,
    kubeconfig: &str,
) -> e2e::catalog::Resp {
    let body = json!({"service_id": sid, "plan_id": pid, "organization_guid": "org",
        "space_guid": "space", "parameters": parameters,
        "context": {"platform": "kubernetes", "peering": {"kubeconfig": kubeconfig}}});
    sw.platform.send(
        reqwest::Method::PUT,
        &format!("/v2/service_instances/{instance}?accepts_incomplete=true"),
        Some(&body),
        Some("2.17"),
    )
}

/// Wait for the provisioning `answer` (a 202) of `instance` to end.
fn settle(
    sw: &ServiceWorld,
    instance: &str,
    (sid, pid): &(String, String),
    answer: &e2e::catalog::Resp,
) -> Outcome {
    assert_eq!(answer.status, 202, "{}", answer.text);
    let op = answer.json["operation"].as_str().map(str::to_string);
    sw.platform.wait(instance, sid, pid, op.as_deref())
}

#[track_caller]
fn failed(outcome: Outcome) -> String {
    match outcome {
        Outcome::Failed(Some(description)) => description,
        other => panic!("expected a failed provisioning with its reason: {other:?}"),
    }
}

/// A ServiceCatalog `name` in the team namespace selling `services`.
fn service_catalog(name: &str, services: Value) -> Value {
    json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "ServiceCatalog",
           "metadata": {"name": name, "namespace": TEAM},
           "spec": {"services": services}})
}

/// A service `id` whose one plan `p` (hosting `Remote`) takes parameters
/// under `schema`, made of `templates` (name, text).
fn service(id: &str, schema: Value, templates: &[(&str, &str)]) -> Value {
    let templates: Vec<Value> = templates
        .iter()
        .map(|(name, template)| json!({"name": name, "template": template}))
        .collect();
    json!({"id": id, "name": id, "type": "database",
           "plans": [{"id": "p", "name": "p", "cost": "1", "hosting": "Remote",
                      "resources": {"cpu": "1", "memory": "1Gi"},
                      "schemas": {"service_instance": {"create": {"parameters": schema}}}}],
           "secrets": ["password"],
           "templates": templates,
           "bindingCredentials": {"password": "{{ secrets.password }}"}})
}

fn open_schema() -> Value {
    json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"})
}

/// Publish `catalog` and wait for each of `offers` in the catalog.
fn publish(sw: &ServiceWorld, catalog: Value, offers: &[&str]) {
    sw.world.consumer.kube.apply(SERVICE_CATALOGS, catalog);
    for offer in offers {
        wait_until(&format!("service offer {offer} published"), || {
            get(&sw.catalog, &format!("/offer/{offer}"), None).status == 200
        });
    }
}

/// The instance namespace of the contract of offer `offer`.
fn instance_namespace(sw: &ServiceWorld, offer: &str) -> String {
    let contract = contract_id(&sw.catalog, &sw.provider_token, "offerID", offer);
    format!("svc-{}", contract.to_lowercase())
}

/// A cluster-scoped kind the provider's cluster serves from a CRD, as
/// cert-manager installs it (`deploy/crds/crd-clusterissuers.yaml`:
/// `scope: Cluster`): known to the API server's discovery only.
const CLUSTER_ISSUER_CRD: &str = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterissuers.cert-manager.io}
spec:
  group: cert-manager.io
  scope: Cluster
  names: {plural: clusterissuers, singular: clusterissuer, kind: ClusterIssuer, listKind: ClusterIssuerList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

const SETTINGS: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {plan: {{ plan | tojson }}}\n";
const ISSUER: &str = "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata: {name: db-ca}\nspec: {selfSigned: {}}\n";

#[test]
fn failed_provisionings_are_reported_with_their_reason_once() {
    let sw = ServiceWorld::open();
    let provider = &sw.world.consumer.kube;
    provider
        .register_crd_yaml(CLUSTER_ISSUER_CRD)
        .expect("the ClusterIssuer CRD");
    // Its templates pass the check before publishing (ClusterIssuer is no
    // kind the controller knows in advance): the cluster says at apply.
    let issuing = service_catalog(
        "issuing",
        json!([service(
            "ca-db",
            open_schema(),
            &[("settings", SETTINGS), ("issuer", ISSUER)]
        )]),
    );
    publish(&sw, issuing, &["ca-db"]);
    let ca_db = osb_ids(&sw, "ca-db", "p");
    let db = (sw.sid.clone(), sw.remote.clone());

    // The customer's cluster refuses the kubeconfig's user (a token it
    // never issued): the Purchase fails, so does the provisioning.
    let start = sw
        .kubeconfig
        .find("{client-certificate-data:")
        .expect("the peering user's certificate");
    let end = start + sw.kubeconfig[start..].find('}').unwrap() + 1;
    let refused = format!(
        "{}{{token: not-a-token-this-cluster-issued}}{}",
        &sw.kubeconfig[..start],
        &sw.kubeconfig[end..]
    );
    let cluster_scoped = provision(&sw, "cluster-scoped", &ca_db, json!({}), &sw.kubeconfig);
    let bad_peering = provision(&sw, "bad-peering", &db, json!({"size": 1}), &refused);

    let why = failed(settle(&sw, "cluster-scoped", &ca_db, &cluster_scoped));
    assert_eq!(
        why,
        "service ca-db, plan p: ClusterIssuer (cert-manager.io/v1) is cluster-scoped; only objects in the instance namespace may be made"
    );
    // None of the instance's objects was applied, not even the ones
    // before the refused kind.
    let namespace = instance_namespace(&sw, "ca-db");
    assert!(provider.get(NAMESPACES, None, &namespace).is_some());
    assert!(provider
        .get(CONFIGMAPS, Some(&namespace), "settings")
        .is_none());
    let issuers = provider.objects(("cert-manager.io", "clusterissuers"));
    assert!(issuers.is_empty(), "{issuers:#?}");

    let why = failed(settle(&sw, "bad-peering", &db, &bad_peering));
    assert!(
        why.starts_with("peering with the customer's cluster failed: ") && why.contains("HTTP 401"),
        "{why}"
    );
    let purchase = provider
        .objects(PURCHASES)
        .into_iter()
        .find(|p| p["status"]["phase"] == "Failed")
        .expect("the failed Purchase");
    // The reason is the Purchase's own.
    let conditions = purchase["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c["status"] == "False" && why.ends_with(c["message"].as_str().unwrap())),
        "{why} not among {conditions:#?}"
    );

    // Each report sent once: over ten more passes over the contracts
    // (each observed in reconcile_duration_seconds), not one more report.
    // At the shipped defaults nothing else would bring a pass for a minute
    // (a failed instance waits FAILED_RETRY; the resync is 5 min): each
    // change of the ServiceCatalog brings one (its reconcile wakes the pass,
    // `reconcile::reconcile`), so the test changes an annotation ten times.
    let passes = "service_controller_reconcile_duration_seconds_count";
    let reports = controller_metric(sw.metrics, "service_controller_reports_total");
    for poke in 0..10 {
        let from = controller_metric(sw.metrics, passes);
        // As stored (finalizer and status kept), one annotation changed.
        let mut poked = provider
            .get(SERVICE_CATALOGS, Some(TEAM), "issuing")
            .expect("the ServiceCatalog");
        poked["metadata"]["annotations"] = json!({"e2e.liqo-broker.io/poke": poke.to_string()});
        sw.world.consumer.kube.apply(SERVICE_CATALOGS, poked);
        let deadline = Instant::now() + e2e::EVENTUALLY;
        while controller_metric(sw.metrics, passes) <= from {
            assert!(Instant::now() < deadline, "pass {poke} within EVENTUALLY");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    assert_eq!(
        controller_metric(sw.metrics, "service_controller_reports_total"),
        reports
    );
    // And the platform still reads what was reported.
    for (instance, ids) in [("cluster-scoped", &ca_db), ("bad-peering", &db)] {
        let r = sw.platform.last_operation(instance, &ids.0, &ids.1, None);
        assert_eq!(r.json["state"], "failed", "{}", r.text);
    }

    // A failed instance is deprovisioned as any other: its namespace,
    // Purchase and kubeconfig Secret removed, then 410.
    for (instance, ids) in [("cluster-scoped", &ca_db), ("bad-peering", &db)] {
        let r = sw.platform.send(
            reqwest::Method::DELETE,
            &format!(
                "/v2/service_instances/{instance}?service_id={}&plan_id={}&accepts_incomplete=true",
                ids.0, ids.1
            ),
            None,
            Some("2.17"),
        );
        assert!(
            matches!(settle(&sw, instance, ids, &r), Outcome::Gone),
            "deprovisioning {instance}"
        );
    }
    wait_until("both instance namespaces removed", || {
        provider
            .objects(NAMESPACES)
            .iter()
            .all(|n| !n["metadata"]["name"].as_str().unwrap().starts_with("svc-"))
    });
    let purchases = provider.objects(PURCHASES);
    assert!(purchases.is_empty(), "{purchases:#?}");
}

/// A template writing each parameter with `| tojson`, as docs/services.md
/// says to.
const AS_DATA: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
  labels: {app: notes}
data:
  structure: {{ parameters.structure | default('') | tojson }}
  template: {{ parameters.template | default('') | tojson }}
  long: {{ parameters.long | default('') | tojson }}
  breaks: {{ parameters.breaks | default('') | tojson }}
";

/// A template writing a parameter as it comes, which docs/services.md
/// advises against: still checked after rendering.
const RAW: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: raw
  annotations:
    note: {{ parameters.note }}
";

#[test]
fn hostile_parameters_are_refused_or_rendered_as_data() {
    let sw = ServiceWorld::open();
    let provider = &sw.world.consumer.kube;
    let text = json!({"type": "string", "maxLength": 40000});
    let strict = json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
        "properties": {"structure": text, "template": text, "long": text, "breaks": text},
        "additionalProperties": false});
    publish(
        &sw,
        service_catalog(
            "hostile",
            json!([
                service("notes", strict, &[("notes", AS_DATA)]),
                service("raw-notes", open_schema(), &[("raw", RAW)]),
            ]),
        ),
        &["notes", "raw-notes"],
    );
    let notes = osb_ids(&sw, "notes", "p");
    let raw = osb_ids(&sw, "raw-notes", "p");
    let contracts = || {
        get(&sw.catalog, "/contracts", Some(&sw.provider_token))
            .json
            .as_array()
            .map_or(0, Vec::len)
    };

    // The plan's schema refuses what it does not list and what is too
    // long, naming it; no contract is made.
    let r = provision(
        &sw,
        "extra",
        &notes,
        json!({"metadata": {"namespace": "kube-system"}}),
        &sw.kubeconfig,
    );
    assert_eq!(r.status, 400, "{}", r.text);
    let description = r.json["description"].as_str().unwrap_or_default();
    assert!(description.contains("metadata"), "{}", r.text);
    let r = provision(
        &sw,
        "too-long",
        &notes,
        json!({"long": "x".repeat(40001)}),
        &sw.kubeconfig,
    );
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(
        r.json["description"]
            .as_str()
            .unwrap_or_default()
            .starts_with("parameters.long:"),
        "{}",
        r.text
    );

    // What the schema lets through is data: YAML and JSON structure,
    // template syntax, a long value, YAML's own line breaks and characters
    // it does not print.
    let hostile = json!({
        "structure": "x\"\n  namespace: kube-system\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: pwn}\n'",
        "template": "{{ secrets.password }}{% raw %}{{ namespace }}{% endraw %}{# #}",
        "long": "y".repeat(32 * 1024),
        "breaks": "a \u{2028}  b\u{2029}c\u{85}d\u{7f}e\u{feff}f\t\r\n<&>",
    });
    let as_data = provision(&sw, "as-data", &notes, hostile.clone(), &sw.kubeconfig);
    // Raw (no `| tojson`), the same kind of value once led the ConfigMap
    // into another namespace or added a cluster-scoped object.
    let elsewhere = provision(
        &sw,
        "elsewhere",
        &raw,
        json!({"note": "x\n  namespace: kube-system"}),
        &sw.kubeconfig,
    );
    let cluster_wide = provision(
        &sw,
        "cluster-wide",
        &raw,
        json!({"note": "x\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: pwn}"}),
        &sw.kubeconfig,
    );

    match settle(&sw, "as-data", &notes, &as_data) {
        Outcome::Succeeded(_) => {}
        other => panic!("the hostile values as data: {other:?}"),
    }
    let namespace = instance_namespace(&sw, "notes");
    let object = provider
        .get(CONFIGMAPS, Some(&namespace), "notes")
        .expect("the rendered ConfigMap");
    assert_eq!(object["data"], hostile, "every value as it was given");
    assert_eq!(
        object["metadata"]["labels"],
        json!({"app": "notes", "app.kubernetes.io/managed-by": "service-controller"})
    );

    // Written without `| tojson`, values are data all the same (issue 41
    // F11, T-09): what would have led the ConfigMap into kube-system, or
    // added a ClusterRole, is the annotation's text.
    for (instance, request) in [("elsewhere", &elsewhere), ("cluster-wide", &cluster_wide)] {
        match settle(&sw, instance, &raw, request) {
            Outcome::Succeeded(_) => {}
            other => panic!("{instance}: a raw value as data: {other:?}"),
        }
    }
    let mut raw_notes: Vec<String> = provider
        .objects(CONFIGMAPS)
        .into_iter()
        .filter(|c| c["metadata"]["name"] == "raw")
        .map(|c| {
            c["metadata"]["annotations"]["note"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    raw_notes.sort();
    assert_eq!(
        raw_notes,
        [
            "x\n  namespace: kube-system",
            "x\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: pwn}"
        ]
    );

    // Nothing anywhere but in the instance namespaces: the controller's
    // ConfigMaps are the three rendered, no ClusterRole `pwn`, nothing in
    // kube-system.
    let ours: Vec<String> = provider
        .objects(CONFIGMAPS)
        .into_iter()
        .filter(|c| c["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "service-controller")
        .map(|c| {
            format!(
                "{}/{}",
                c["metadata"]["namespace"].as_str().unwrap(),
                c["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert!(ours.contains(&format!("{namespace}/notes")), "{ours:?}");
    assert_eq!(ours.len(), 3, "notes and the two raw ConfigMaps: {ours:?}");
    assert!(ours.iter().all(|o| o.starts_with("svc-")), "{ours:?}");
    assert!(provider
        .get(("rbac.authorization.k8s.io", "clusterroles"), None, "pwn")
        .is_none());
    let in_kube_system: Vec<Value> = provider
        .objects(CONFIGMAPS)
        .into_iter()
        .filter(|c| c["metadata"]["namespace"] == "kube-system")
        .collect();
    assert!(in_kube_system.is_empty(), "{in_kube_system:#?}");
    // The refused provisionings made no contract; the three others did.
    assert_eq!(contracts(), 3);
}
