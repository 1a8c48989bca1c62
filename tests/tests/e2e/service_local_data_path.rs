//! The data path of `Local` hosting (issue 45), end to end on
//! [`ServiceWorld`] with Liqo's networking: a service provider sells `pg`,
//! whose `local` plan renders a Deployment and a Service `db`; provisioned
//! through OSB, the instance's pod runs on the service provider's own node
//! (the namespace is offloaded with strategy `Local`), the test API
//! server's EndpointSlice controller lists it, Liqo's virtual kubelet
//! reflects the slice to the customer's cluster as a ShadowEndpointSlice
//! and the customer's Liqo controller manager makes it an EndpointSlice
//! there — the customer-side EndpointSlice of the reflected Service `db`
//! lists the provider's pod address **remapped** into the customer's view
//! of the provider's pod CIDR, ready once the clusters' network Connection
//! is up.
//!
//! The peering has Liqo's networking (`ServiceWorld::open_with(true)`: the
//! consumer's purchase-controller peers with `--networking true`, both
//! clusters run the networking module, on Liqo's default pod CIDR
//! `10.244.0.0/16` both, so they clash and the customer's Configuration for
//! the provider maps the provider's pods to another network, as
//! `mapping.go:33-65` does); the ShadowEndpointSlice controller remaps
//! through it (`shadowendpointslice_controller.go:126-137`) and marks the
//! endpoint ready when networking is established (`:156-167`).
//!
//! service-controller runs under the RBAC `deploy/` ships: the chart's
//! `serviceController.templateKinds` (ConfigMaps, Services, Deployments by
//! default) is what lets it apply, read and delete the template's Service
//! and Deployment, and the deprovisioning at the end uses those rights.
//!
//! Beside the world: the service provider's cluster gets an ordinary node
//! with its kubelet and kube-controller-manager's node IPAM (the world has
//! none: its other tests run no pod there), Liqo's EndpointSlice reflection
//! from it to the customer, and on the customer Liqo's ForeignCluster
//! controller (woken by the networking objects, as Liqo's is) and its
//! ShadowEndpointSlice controller.

use e2e::buying::get;
use e2e::osb_client::{plan_of, service_of, Outcome};
use serde_json::{json, Value};

use crate::purchase_controller_support::*;
use crate::service_controller::{contract_id, ServiceWorld, NAMESPACES, SERVICE_CATALOGS};

const SLICES: (&str, &str) = ("discovery.k8s.io", "endpointslices");
const SHADOWS: (&str, &str) = ("offloading.liqo.io", "shadowendpointslices");
const CONFIGURATIONS: (&str, &str) = ("networking.liqo.io", "configurations");
const SERVICES: (&str, &str) = ("", "services");
const DEPLOYMENTS: (&str, &str) = ("apps", "deployments");
const NODES: (&str, &str) = ("", "nodes");
const PODS: (&str, &str) = ("", "pods");
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
    let pod_cidr = liqo_model::networking::Options::default().pod_cidr;
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
        grant(
            customer,
            CONTROLLER_MANAGER,
            "liqo-model-foreigncluster",
            foreign_cluster::RULES,
        );
        let cidr = liqo_model::networking::remap::Cidr::parse(&pod_cidr).expect("a CIDR");
        let manager = client_as(customer, CONTROLLER_MANAGER).await?;
        // Liqo's ForeignCluster controller on the customer's cluster, woken
        // by the networking objects too (FCC:175-182): the provider's
        // ForeignCluster, its networking module enabled once peered.
        let (more, keys) = tokio::sync::mpsc::unbounded_channel();
        let keys =
            futures::StreamExt::boxed(tokio_stream::wrappers::UnboundedReceiverStream::new(keys));
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
            tokio::spawn(foreign_cluster::run_with(manager.clone(), keys)),
            tokio::spawn(foreign_cluster::wake_on_networking(manager, more)),
        ];
        let reflection = liqo_model::reflection_endpointslices::Reflection::start(
            provider,
            CONSUMER_ID,
            customer,
            PROVIDER_ID,
            liqo_model::reflection_endpointslices::Options {
                local_pod_cidrs: vec![pod_cidr.clone()],
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

/// `address` (in the provider's pod CIDR) as the customer's cluster sees
/// it: through its Configuration for the provider (`status.remote.cidr.pod`,
/// the network Liqo mapped the provider's clashing pod CIDR to).
fn remapped(customer: &kube_test_server::KubeApiServer, address: &str) -> String {
    use liqo_model::networking::remap::Cidr;
    let tenant = crate::liqo_support::tenant_namespace(CONSUMER_ID);
    let configuration = customer
        .get(CONFIGURATIONS, Some(&tenant), CONSUMER_ID)
        .expect("the customer's Configuration for the provider");
    let seen_as = configuration["status"]["remote"]["cidr"]["pod"][0]
        .as_str()
        .unwrap_or_else(|| panic!("not remapped yet: {configuration:#}"));
    let own = liqo_model::networking::Options::default().pod_cidr;
    // The clash this test is about: the customer sees the provider's pods
    // at another network than the provider's own.
    assert_ne!(seen_as, own, "{configuration:#}");
    let (from, to) = (Cidr::parse(&own).unwrap(), Cidr::parse(seen_as).unwrap());
    liqo_model::networking::mapping::translate(address.parse().unwrap(), &from, &to)
        .expect("an address of the provider's pod CIDR")
        .to_string()
}

/// Provision `instance` of `offer`'s `plan` over OSB once the offer is
/// published, wait for its last operation to succeed, and return the
/// instance's namespace at the provider (`svc-<contract>`) with the service
/// and plan IDs.
fn provision(
    sw: &ServiceWorld,
    offer: &str,
    plan: &str,
    instance: &str,
) -> (String, String, String) {
    wait_until(&format!("the service offer {offer} published"), || {
        get(&sw.catalog, &format!("/offer/{offer}"), None).status == 200
    });
    let services = sw.platform.catalog();
    let service = service_of(&services, offer);
    let sid = service["id"].as_str().unwrap().to_string();
    let pid = plan_of(service, plan)["id"].as_str().unwrap().to_string();
    let body = json!({"service_id": sid, "plan_id": pid, "organization_guid": "org",
        "space_guid": "space", "parameters": {},
        "context": {"platform": "kubernetes", "peering": {"kubeconfig": sw.kubeconfig}}});
    let r = sw.platform.send(
        reqwest::Method::PUT,
        &format!("/v2/service_instances/{instance}?accepts_incomplete=true"),
        Some(&body),
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().map(str::to_string);
    match sw.platform.wait(instance, &sid, &pid, op.as_deref()) {
        Outcome::Succeeded(_) => {}
        other => panic!("provisioning {instance} on plan {plan}: {other:?}"),
    }
    let contract = contract_id(&sw.catalog, &sw.provider_token, "offerID", offer);
    (format!("svc-{}", contract.to_lowercase()), sid, pid)
}

#[test]
fn a_local_instances_pod_addresses_reach_the_customers_endpointslice_remapped() {
    let sw = ServiceWorld::open_with(true);
    let rt = runtime();
    let _data_path = data_path(&rt, &sw);
    let provider = &sw.world.consumer.kube;
    let customer = &sw.world.remote;
    provider.apply(SERVICE_CATALOGS, catalog());
    let (namespace, sid, pid) = provision(&sw, "pg", "local", "pg-1");
    let offloading = provider
        .get(OFFLOADINGS, Some(&namespace), "offloading")
        .expect("the instance's NamespaceOffloading");
    assert_eq!(offloading["spec"]["podOffloadingStrategy"], "Local");
    // Named the same at the customer's (EnforceSameName).
    assert!(customer.get(NAMESPACES, None, &namespace).is_some());
    // The template's objects, applied under the shipped RBAC.
    assert!(provider.get(DEPLOYMENTS, Some(&namespace), "db").is_some());
    assert!(provider.get(SERVICES, Some(&namespace), "db").is_some());

    // At the provider: the pod on its own node, an address of its pod
    // CIDR, listed ready in the Service's slice.
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
    // virtual kubelet wrote (the address as it is: the customer remaps),
    // and the EndpointSlice Liqo made of it — the provider's pod address
    // remapped, ready once the network Connection is up.
    wait_until("the Service reflected to the customer", || {
        customer.get(SERVICES, Some(&namespace), "db").is_some()
    });
    let remote_slice = || {
        slice_of(customer, &namespace, "endpointslice.reflection.liqo.io")
            .filter(|s| s["endpoints"][0]["conditions"]["ready"] == true)
    };
    wait_until(
        "the customer's EndpointSlice listing the provider's pod, ready",
        || remote_slice().is_some(),
    );
    let remote = remote_slice().unwrap();
    let seen = remapped(customer, &address);
    assert_ne!(seen, address);
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
        json!([{"addresses": [seen], "conditions": {"ready": true},
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
    // Networking on for this peering: the customer's ForeignCluster for
    // the provider says so, which is why the address is remapped.
    let fc = customer
        .objects(("core.liqo.io", "foreignclusters"))
        .into_iter()
        .find(|fc| fc["metadata"]["labels"]["liqo.io/remote-cluster-id"] == CONSUMER_ID)
        .expect("the provider's ForeignCluster on the customer's cluster");
    assert_eq!(
        fc["status"]["modules"]["networking"]["enabled"], true,
        "{fc:#}"
    );

    // Deprovisioned: the Deployment and the Service go (deleted, then read
    // until gone, under the shipped RBAC), and the namespace with them.
    let r = sw.platform.send(
        reqwest::Method::DELETE,
        &format!(
            "/v2/service_instances/pg-1?service_id={sid}&plan_id={pid}&accepts_incomplete=true"
        ),
        None,
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().map(str::to_string);
    match sw.platform.wait("pg-1", &sid, &pid, op.as_deref()) {
        Outcome::Gone => {}
        other => panic!("deprovisioning Local: {other:?}"),
    }
    let left = provider.get(DEPLOYMENTS, Some(&namespace), "db");
    assert!(left.is_none(), "{left:#?}");
    assert!(provider.get(SERVICES, Some(&namespace), "db").is_none());
}

/// Service `web`, plan `hybrid` (`LocalAndRemote`): its API stays at the
/// provider (`runsAt: provider`), its front end goes to the customer
/// (`runsAt: customer`).
const API: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: api:1, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
";
const FRONTEND: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend}
spec:
  replicas: 1
  selector: {matchLabels: {app: frontend}}
  template:
    metadata: {labels: {app: frontend}}
    spec:
      containers: [{name: web, image: web:1, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
";

/// ServiceCatalog `name` selling `id` with one plan hosted `hosting`, its
/// API at the provider and its front end at the customer.
fn hybrid_catalog(name: &str, id: &str, hosting: &str) -> Value {
    json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "ServiceCatalog",
           "metadata": {"name": name, "namespace": TEAM},
           "spec": {"services": [{
               "id": id, "name": "Web shop", "type": "web",
               "plans": [{"id": "hybrid", "name": "hybrid", "cost": "2", "hosting": hosting,
                          "resources": {"cpu": "1", "memory": "1Gi"},
                          "schemas": {"service_instance": {"create": {"parameters": {
                              "$schema": "http://json-schema.org/draft-04/schema#",
                              "type": "object"}}}}}],
               "templates": [{"name": "api", "template": API, "runsAt": "provider"},
                             {"name": "frontend", "template": FRONTEND, "runsAt": "customer"}]}]}})
}

/// The pod of Deployment `app` in `namespace`, once scheduled.
fn scheduled_pod(kube: &kube_test_server::KubeApiServer, namespace: &str, app: &str) -> Value {
    let pod = || {
        kube.objects(PODS).into_iter().find(|p| {
            p["metadata"]["namespace"] == namespace
                && p["metadata"]["labels"]["app"] == app
                && p["spec"]["nodeName"].is_string()
        })
    };
    wait_until(&format!("the {app} pod scheduled"), || pod().is_some());
    pod().unwrap()
}

/// Hosting chosen per object by the provider (issue 45): within a
/// `LocalAndRemote` plan, a template's `runsAt` places its pods — the API
/// on the provider's own node, the front end on the virtual node of the
/// customer's cluster — through the node affinity (and toleration) Liqo's
/// webhook merges with the namespace's; a template that contradicts its
/// plan's hosting (`customer` in a `Local` plan) is refused, named,
/// nothing published.
#[test]
fn a_templates_objects_run_where_the_template_says() {
    let sw = ServiceWorld::open();
    let rt = runtime();
    let _data_path = data_path(&rt, &sw);
    let provider = &sw.world.consumer.kube;

    provider.apply(
        SERVICE_CATALOGS,
        hybrid_catalog("bad-web", "bad-web", "Local"),
    );
    wait_until("the contradicting ServiceCatalog marked invalid", || {
        crate::service_controller::valid(&sw.world, "bad-web")
            .is_some_and(|c| c["status"] == "False")
    });
    assert_eq!(
        crate::service_controller::valid(&sw.world, "bad-web").unwrap()["message"],
        "service bad-web, plan hybrid, template frontend: runs at the customer, but plan hybrid hosts Local: Liqo keeps every pod of the instance namespace at the provider's cluster"
    );
    assert_eq!(get(&sw.catalog, "/offer/bad-web", None).status, 404);

    provider.apply(
        SERVICE_CATALOGS,
        hybrid_catalog("web", "web", "LocalAndRemote"),
    );
    let (namespace, _, _) = provision(&sw, "web", "hybrid", "web-1");
    let offloading = provider
        .get(OFFLOADINGS, Some(&namespace), "offloading")
        .expect("the instance's NamespaceOffloading");
    assert_eq!(
        offloading["spec"]["podOffloadingStrategy"],
        "LocalAndRemote"
    );

    // The API at the provider: on its own node.
    let api = scheduled_pod(provider, &namespace, "api");
    assert_eq!(api["spec"]["nodeName"], NODE, "{api:#}");
    // The front end at the customer: on the customer's virtual node.
    let frontend = scheduled_pod(provider, &namespace, "frontend");
    let node = frontend["spec"]["nodeName"].as_str().unwrap();
    let node = provider
        .get(NODES, None, node)
        .expect("the front end's node");
    assert_eq!(
        node["metadata"]["labels"]["liqo.io/type"], "virtual-node",
        "{node:#}"
    );
    assert_eq!(
        node["metadata"]["labels"]["liqo.io/remote-cluster-id"], PROVIDER_ID,
        "{node:#}"
    );
}
