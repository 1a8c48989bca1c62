//! The data path of `Local` hosting (issue 45), end to end on
//! [`ServiceWorld`]: a service provider sells `pg`, whose `local` plan
//! renders a Deployment and a Service `db`; provisioned through OSB, the
//! instance's pod runs on the service provider's own node (the namespace is
//! offloaded with strategy `Local`), the test API server's EndpointSlice
//! controller lists it, Liqo's virtual kubelet reflects the slice to the
//! customer's cluster as a ShadowEndpointSlice and the customer's Liqo
//! controller manager makes it an EndpointSlice there — the customer-side
//! EndpointSlice of the reflected Service `db` lists the provider's pod
//! address.
//!
//! What Liqo v1.2.0 does with the address, in this world: `ServiceWorld`
//! peers with Liqo's networking disabled (`purchase-controller
//! --networking false`, `liqoctl peer --networking-disabled`'s way), so the
//! customer's ForeignCluster for the provider has the networking module
//! off and the ShadowEndpointSlice controller copies the address as it is
//! (`shadowendpointslice_controller.go:126-137`: it remaps through the
//! Configuration only with networking enabled), the endpoint ready
//! (`IsNetworkingEstablishedOrDisabled`). With networking on, the same
//! address is remapped into the customer's view of the provider's pod
//! CIDR: the model's conformance test
//! `tests/liqo-model/tests/conformance/endpointslices.rs` shows it on two
//! clusters whose pod CIDRs clash. (Such a world for this test needs
//! `DirectWorld` to peer with networking: see docs/services.md.)
//!
//! Beside the world: the service provider's cluster gets an ordinary node
//! with its kubelet and kube-controller-manager's node IPAM (the world has
//! none: its other tests run no pod there), Liqo's EndpointSlice reflection
//! from it to the customer, and on the customer Liqo's ForeignCluster and
//! ShadowEndpointSlice controllers; the provider grants service-controller
//! what its templates make (Services, Deployments), as docs/services.md
//! ("Limits") says a provider does.

use e2e::buying::get;
use e2e::osb_client::{plan_of, service_of, Outcome};
use serde_json::{json, Value};

use crate::purchase_controller_support::*;
use crate::service_controller::{contract_id, ServiceWorld, NAMESPACES, SERVICE_CATALOGS};

const SLICES: (&str, &str) = ("discovery.k8s.io", "endpointslices");
const SHADOWS: (&str, &str) = ("offloading.liqo.io", "shadowendpointslices");
const NODES: (&str, &str) = ("", "nodes");
const PODS: (&str, &str) = ("", "pods");
/// The service provider's pod CIDR (kind's), its node's /24 the first.
const POD_CIDR: &str = "10.244.0.0/16";
const NODE: &str = "provider-node";

/// The `local` plan's objects: the database and its Service.
const DATABASE: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: db}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
        - name: db
          image: postgres:16
          ports: [{name: sql, containerPort: 5432}]
          resources: {requests: {cpu: 100m, memory: 64Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  selector: {app: db}
  ports: [{name: sql, port: 5432, targetPort: sql}]
";

/// ServiceCatalog `team/data` selling `pg`, plan `local` hosted `Local`.
fn catalog() -> Value {
    json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "ServiceCatalog",
           "metadata": {"name": "data", "namespace": TEAM},
           "spec": {"services": [{
               "id": "pg", "name": "Postgres", "type": "database",
               "plans": [{"id": "local", "name": "local", "cost": "3", "hosting": "Local",
                          "resources": {"cpu": "1", "memory": "1Gi"},
                          "schemas": {"service_instance": {"create": {"parameters": {
                              "$schema": "http://json-schema.org/draft-04/schema#",
                              "type": "object"}}}}}],
               "templates": [{"name": "database", "template": DATABASE}]}]}})
}

/// What a provider whose templates make Services and Deployments grants
/// service-controller beside the shipped RBAC (docs/services.md, "Limits").
fn grant_templates_kinds(kube: &kube_test_server::KubeApiServer) {
    kube.apply(
        ("rbac.authorization.k8s.io", "clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "service-controller-pg"},
               "rules": [{"apiGroups": [""], "resources": ["services"],
                          "verbs": ["get", "patch", "delete"]},
                         {"apiGroups": ["apps"], "resources": ["deployments"],
                          "verbs": ["get", "patch", "delete"]}]}),
    );
    kube.apply(
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "service-controller-pg"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "service-controller-pg"},
               "subjects": [{"kind": "ServiceAccount", "name": "service-controller",
                             "namespace": "liqo"}]}),
    );
}

/// The pieces of Liqo and Kubernetes this test adds to the world; they
/// stop when dropped.
struct DataPath {
    _tasks: Vec<tokio::task::JoinHandle<()>>,
    _reflection: liqo_model::reflection_endpointslices::Reflection,
    _shadows: liqo_model::shadowendpointslice_controller::Controller,
}

fn data_path(rt: &tokio::runtime::Runtime, sw: &ServiceWorld) -> DataPath {
    use liqo_model::identity::{client_as, grant};
    use liqo_model::{foreign_cluster, kubelet, node_ipam, CONTROLLER_MANAGER};
    let provider = &sw.world.consumer.kube;
    let customer = &sw.world.remote;
    provider.apply(
        NODES,
        kube_test_server::node(NODE, true, false, "8", "16Gi"),
    );
    rt.block_on(async {
        grant(
            provider,
            node_ipam::USER,
            "liqo-model-node-ipam",
            node_ipam::RULES,
        );
        let kubelet_user = kubelet::user(NODE);
        grant(
            provider,
            &kubelet_user,
            "liqo-model-kubelet-provider-node",
            kubelet::RULES,
        );
        let cidr = liqo_model::networking::remap::Cidr::parse(POD_CIDR).expect("a CIDR");
        let tasks = vec![
            tokio::spawn(node_ipam::run(
                client_as(provider, node_ipam::USER).await?,
                cidr,
            )),
            tokio::spawn(kubelet::run_with(
                client_as(provider, &kubelet_user).await?,
                NODE.to_string(),
                true,
            )),
            // Liqo's ForeignCluster controller on the customer's cluster:
            // the provider's ForeignCluster, from the Tenant its peering
            // made there.
            {
                grant(
                    customer,
                    CONTROLLER_MANAGER,
                    "liqo-model-foreigncluster",
                    foreign_cluster::RULES,
                );
                tokio::spawn(foreign_cluster::run(
                    client_as(customer, CONTROLLER_MANAGER).await?,
                ))
            },
        ];
        let reflection = liqo_model::reflection_endpointslices::Reflection::start(
            provider,
            CONSUMER_ID,
            customer,
            PROVIDER_ID,
            liqo_model::reflection_endpointslices::Options {
                local_pod_cidrs: vec![POD_CIDR.into()],
                ..Default::default()
            },
        )
        .await?;
        let shadows =
            liqo_model::shadowendpointslice_controller::Controller::start(customer).await?;
        anyhow::Ok(DataPath {
            _tasks: tasks,
            _reflection: reflection,
            _shadows: shadows,
        })
    })
    .expect("the data path's controllers")
}

/// The slice in `namespace` of `kube` labelled for Service `db` and
/// managed by `manager` (its `endpointslice.kubernetes.io/managed-by`).
fn slice_of(
    kube: &kube_test_server::KubeApiServer,
    namespace: &str,
    manager: &str,
) -> Option<Value> {
    kube.objects(SLICES).into_iter().find(|s| {
        s["metadata"]["namespace"] == namespace
            && s["metadata"]["labels"]["kubernetes.io/service-name"] == "db"
            && s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == manager
    })
}

#[test]
fn a_local_instances_pod_addresses_reach_the_customers_endpointslice() {
    let sw = ServiceWorld::open();
    let rt = runtime();
    let _data_path = data_path(&rt, &sw);
    let provider = &sw.world.consumer.kube;
    let customer = &sw.world.remote;
    grant_templates_kinds(provider);
    provider.apply(SERVICE_CATALOGS, catalog());
    wait_until("the service offer pg published", || {
        get(&sw.catalog, "/offer/pg", None).status == 200
    });
    let services = sw.platform.catalog();
    let service = service_of(&services, "pg");
    let (sid, pid) = (
        service["id"].as_str().unwrap().to_string(),
        plan_of(service, "local")["id"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    let body = json!({"service_id": sid, "plan_id": pid, "organization_guid": "org",
        "space_guid": "space", "parameters": {},
        "context": {"platform": "kubernetes", "peering": {"kubeconfig": sw.kubeconfig}}});
    let r = sw.platform.send(
        reqwest::Method::PUT,
        "/v2/service_instances/pg-1?accepts_incomplete=true",
        Some(&body),
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().map(str::to_string);
    match sw.platform.wait("pg-1", &sid, &pid, op.as_deref()) {
        Outcome::Succeeded(_) => {}
        other => panic!("provisioning Local: {other:?}"),
    }
    let contract = contract_id(&sw.catalog, &sw.provider_token, "offerID", "pg");
    let namespace = format!("svc-{}", contract.to_lowercase());
    let offloading = provider
        .get(OFFLOADINGS, Some(&namespace), "offloading")
        .expect("the instance's NamespaceOffloading");
    assert_eq!(offloading["spec"]["podOffloadingStrategy"], "Local");
    // Named the same at the customer's (EnforceSameName).
    assert!(customer.get(NAMESPACES, None, &namespace).is_some());

    // At the provider: the pod on its own node, an address of its /24,
    // listed ready in the Service's slice.
    let local_slice = || {
        slice_of(provider, &namespace, "endpointslice-controller.k8s.io")
            .filter(|s| s["endpoints"][0]["conditions"]["ready"] == true)
    };
    wait_until("the provider's slice listing the ready pod", || {
        local_slice().is_some()
    });
    let local = local_slice().unwrap();
    let pod_name = local["endpoints"][0]["targetRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let pod = provider
        .get(PODS, Some(&namespace), &pod_name)
        .expect("the database pod");
    assert_eq!(pod["spec"]["nodeName"], NODE, "{pod:#}");
    let address = pod["status"]["podIP"].as_str().unwrap().to_string();
    assert!(address.starts_with("10.244."), "{address}");
    assert_eq!(local["endpoints"][0]["addresses"], json!([address]));
    assert_eq!(
        local["ports"],
        json!([{"name": "sql", "port": 5432, "protocol": "TCP"}])
    );
    let name = local["metadata"]["name"].as_str().unwrap().to_string();

    // At the customer's: the Service reflected, the ShadowEndpointSlice the
    // virtual kubelet wrote, and the EndpointSlice Liqo made of it — the
    // provider's pod address, as it is with networking off, ready.
    wait_until("the Service reflected to the customer", || {
        customer
            .get(("", "services"), Some(&namespace), "db")
            .is_some()
    });
    let remote_slice = || {
        slice_of(customer, &namespace, "endpointslice.reflection.liqo.io")
            .filter(|s| s["endpoints"].as_array().is_some_and(|e| !e.is_empty()))
    };
    wait_until(
        "the customer's EndpointSlice listing the provider's pod",
        || remote_slice().is_some(),
    );
    let remote = remote_slice().unwrap();
    assert_eq!(remote["metadata"]["name"], name.as_str());
    assert_eq!(
        remote["metadata"]["labels"]["liqo.io/managed-by"],
        "shadowendpointslice"
    );
    assert_eq!(
        remote["metadata"]["labels"]["offloading.liqo.io/origin"],
        CONSUMER_ID
    );
    assert_eq!(remote["addressType"], "IPv4");
    assert_eq!(remote["ports"], local["ports"]);
    assert_eq!(
        remote["endpoints"],
        json!([{"addresses": [address], "conditions": {"ready": true},
                "nodeName": CONSUMER_ID,
                "targetRef": {"kind": "RemotePod", "namespace": namespace, "name": pod_name,
                              "uid": pod["metadata"]["uid"]}}])
    );
    let shadow = customer
        .get(SHADOWS, Some(&namespace), &name)
        .expect("the ShadowEndpointSlice");
    assert_eq!(
        shadow["spec"]["template"]["endpoints"][0]["addresses"],
        json!([address])
    );
    // Networking off for this peering: the customer's ForeignCluster for
    // the provider says so, which is why the address is not remapped.
    let fc = customer
        .objects(("core.liqo.io", "foreignclusters"))
        .into_iter()
        .find(|fc| fc["metadata"]["labels"]["liqo.io/remote-cluster-id"] == CONSUMER_ID)
        .expect("the provider's ForeignCluster on the customer's cluster");
    assert_ne!(
        fc["status"]["modules"]["networking"]["enabled"], true,
        "{fc:#}"
    );
}
