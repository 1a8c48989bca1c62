//! `service-controller` end to end (issue 32): a service provider sells a
//! running service. The world is [`DirectWorld`] — the service provider's
//! cluster (Liqo consumer) and the customer's (Liqo provider), two HTTPS
//! test API servers with the model of Liqo v1.2, the real
//! `purchase-controller` on both — plus the real catalog and the real
//! `service-controller` on the provider's cluster, as its ServiceAccount
//! under the RBAC `deploy/` ships. The customer's peering user is minted
//! on its cluster as `liqoctl generate peering-user` does
//! ([`peering_user`], via `DirectWorld`).
//!
//! A platform drives it through the Open Service Broker API: a
//! ServiceCatalog becomes a service offer; a malformed template is refused
//! (the ServiceCatalog's `Valid` condition names it, nothing published); a
//! malformed parameter is refused by the catalog (400 naming it, nothing
//! made); a `Remote` plan is provisioned — the instance namespace is
//! offloaded to the customer only, the rendered objects exist at the
//! provider and reach the customer's cluster — and a `Local` one beside
//! it (offloaded with strategy `Local`, so its pods stay at the provider),
//! removed again; the `Remote` one is bound (the credentials
//! Secret lands in the customer's opted-in application namespace, the OSB
//! fetch answers the same credentials), unbound, and deprovisioned
//! (everything removed, then `last_operation` 410).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use base64::Engine;
use e2e::buying::{self, get};
use e2e::catalog::{Backend, Env};
use e2e::osb_client::{plan_of, service_of, Auth, Outcome, Platform};
use e2e::process::Spawn;
use serde_json::{json, Value};

use crate::purchase_controller_support::*;

const OSB_USER: &str = "platform";
const OSB_PASSWORD: &str = "platform-password-0123";
pub(crate) const SERVICE_CATALOGS: (&str, &str) = ("broker.liqo-broker.io", "servicecatalogs");
pub(crate) const CONFIGMAPS: (&str, &str) = ("", "configmaps");
pub(crate) const NAMESPACES: (&str, &str) = ("", "namespaces");
pub(crate) const SERVICES: (&str, &str) = ("", "services");
/// Who the controller is: the ServiceAccount of `deploy/kubernetes/`.
const SERVICE_USER: &str = "system:serviceaccount:liqo:service-controller";

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A ServiceCatalog selling `db` (plans `remote` and `local`, and
/// `remote-large`, dearer and bigger, which `remote` may be changed for)
/// whose objects are `template`.
fn service_catalog(name: &str, offer: &str, template: &str) -> Value {
    let plan = |id: &str, hosting: &str, cost: &str, cpu: &str| {
        let parameters = json!({
            "$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
            "properties": {"size": {"type": "integer", "minimum": 1}}});
        json!({"id": id, "name": id, "cost": cost, "hosting": hosting,
               "resources": {"cpu": cpu, "memory": "1Gi"},
               "schemas": {"service_instance": {"create": {"parameters": parameters},
                                                "update": {"parameters": parameters}}}})
    };
    json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "ServiceCatalog",
           "metadata": {"name": name, "namespace": TEAM},
           "spec": {"services": [{
               "id": offer, "name": "Database", "type": "database",
               "plans": [plan("remote", "Remote", "3", "1"), plan("local", "Local", "3", "1"),
                         plan("remote-large", "Remote", "5", "2")],
               "secrets": ["password"],
               "templates": [{"name": "settings", "template": template}],
               "bindingTemplates": [{"name": "endpoint", "template": BINDING_OBJECTS}],
               "bindingCredentials": {
                   "uri": "db://root:{{ secrets.password }}@db.{{ namespace }}:5432",
                   "host": "db.{{ remote_namespace }}",
                   "password": "{{ secrets.password }}"}}]}})
}

/// What each binding makes beside its Secret: a ConfigMap naming the
/// application's namespace and a Service of its own.
const BINDING_OBJECTS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ \"binding-\" ~ binding.id ~ \"-settings\" }}\ndata:\n  app: {{ binding.parameters.namespace }}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {{ \"db-\" ~ binding.id }}\nspec:\n  ports: [{port: 5432}]\n";

/// The instance's settings; with parameter `cache`, a second ConfigMap;
/// with `escape`, a ConfigMap in another namespace (refused at render).
const SETTINGS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n{% if parameters.escape %}  namespace: kube-system\n{% endif %}data:\n  instance: {{ instance_id | tojson }}\n  plan: {{ plan | tojson }}\n  size: {{ parameters.size | string | tojson }}\n{% if parameters.cache %}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cache\ndata:\n  size: {{ parameters.size | string }}\n{% endif %}";

fn start_controller(
    world: &DirectWorld,
    catalog: &str,
    dir: &Path,
) -> (e2e::process::Child, e2e::process::Bound) {
    let credentials = dir.join("credentials.json");
    std::fs::write(&credentials, provider_credentials().to_string()).unwrap();
    std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600)).unwrap();
    let kubeconfig = dir.join("service-controller.kubeconfig");
    world
        .consumer
        .kube
        .write_kubeconfig_as(&kubeconfig, SERVICE_USER)
        .unwrap();
    Spawn::new("service-controller")
        .args(["--catalog-url", catalog])
        .arg("--catalog-credentials-file")
        .arg(&credentials)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--namespace", "liqo", "--lease-namespace", "liqo"])
        // The shipped Lease timings: one replica, never failed over here,
        // takes the free Lease at its first try.
        // Purchases, ends, updates and binding requests come on the
        // catalog's contract change stream (a binding stamps its contract's
        // `bindingsChangedAt`): `--poll-interval`, the fallback poll and
        // resync, is the shipped default (5 min), and every wait below is
        // on what the controller makes or reports, never on its passes.
        // `--retry` too is the shipped default (5 s): it paces the passes
        // while an instance waits on Kubernetes' side (its Purchase
        // peering, Liqo naming the namespace), which no contract change
        // announces.
        .args(["--http-listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info,service_controller=debug")
        .start_announced(1)
        .expect("service-controller")
}

/// The id of the provider's contract whose `field` is `value`.
pub(crate) fn contract_id(
    catalog: &e2e::catalog::Catalog,
    token: &str,
    field: &str,
    value: &str,
) -> String {
    let contracts = get(catalog, "/contracts", Some(token)).json;
    contracts
        .as_array()
        .and_then(|all| all.iter().find(|c| c[field] == value))
        .unwrap_or_else(|| panic!("no contract with {field} {value}: {contracts}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

pub(crate) fn valid(world: &DirectWorld, name: &str) -> Option<Value> {
    let catalog = world
        .consumer
        .kube
        .get(SERVICE_CATALOGS, Some(TEAM), name)?;
    catalog["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Valid")
        .cloned()
}

/// The world of this file (and of `benches/service_ready.rs`):
/// [`DirectWorld`], the real catalog with the service provider's account
/// only (a service provider registers no peering of its own: it peers
/// towards its customers), `service-controller` as its ServiceAccount, and
/// ServiceCatalog `team/shop` published as service offer `db`.
pub struct ServiceWorld {
    pub world: DirectWorld,
    pub catalog: e2e::catalog::Catalog,
    pub provider_token: String,
    pub platform: Platform,
    /// The OSB service id and the OSB ids of plans `remote`, `local` and
    /// `remote-large`.
    pub sid: String,
    pub remote: String,
    pub local: String,
    pub large: String,
    /// The customer's peering user, as the platform sends it.
    pub kubeconfig: String,
    /// service-controller's operator port (`/metrics`).
    pub metrics: std::net::SocketAddr,
    _controller: e2e::process::Child,
    _dir: tempfile::TempDir,
    _env: Env,
}

impl ServiceWorld {
    pub fn open() -> Self {
        Self::open_with(false)
    }

    /// [`ServiceWorld::open`] on [`DirectWorld::open_with`]`(networking)`:
    /// with Liqo's networking, the instances' Purchases peer with it.
    pub fn open_with(networking: bool) -> Self {
        let world = DirectWorld::open_with(networking);
        let provider = &world.consumer.kube;
        provider
            .register_crd_file(
                &Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../deploy/kubernetes/service-controller/crd.yaml"),
            )
            .expect("the ServiceCatalog CRD");
        // And the admission policies deploy/ ships beside its RBAC: the
        // controller's writes held to its namespaces (issue 41).
        e2e::rbac::load_shipped_admission(provider).expect("the shipped admission policies");
        let env = Env::new(Backend::Embedded);
        let catalog = buying::start(
            &env,
            &["--osb-username", OSB_USER, "--osb-password", OSB_PASSWORD],
        );
        let provider_token = catalog.login(&provider_credentials());
        let dir = tempfile::tempdir().unwrap();
        let (controller, bound) = start_controller(&world, &catalog.url(""), dir.path());
        provider.apply(SERVICE_CATALOGS, service_catalog("shop", "db", SETTINGS));
        wait_until("the service offer published", || {
            get(&catalog, "/offer/db", None).status == 200
        });
        let platform = Platform::new(
            &catalog.url(""),
            Auth::Basic(OSB_USER.into(), OSB_PASSWORD.into()),
        );
        let services = platform.catalog();
        let service = service_of(&services, "db").clone();
        let plan_id = |key: &str| plan_of(&service, key)["id"].as_str().unwrap().to_string();
        let peering = provider
            .get(SECRETS, Some(TEAM), "peer")
            .expect("the customer's peering user");
        let kubeconfig = String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(peering["data"]["kubeconfig"].as_str().unwrap())
                .unwrap(),
        )
        .unwrap();
        Self {
            sid: service["id"].as_str().unwrap().to_string(),
            remote: plan_id("remote"),
            local: plan_id("local"),
            large: plan_id("remote-large"),
            world,
            catalog,
            provider_token,
            platform,
            kubeconfig,
            metrics: bound.addr(None),
            _controller: controller,
            _dir: dir,
            _env: env,
        }
    }

    /// Provision `instance` of OSB plan `plan` as a platform does.
    pub fn provision(&self, instance: &str, plan: &str, parameters: Value) -> e2e::catalog::Resp {
        let body = json!({"service_id": self.sid, "plan_id": plan, "organization_guid": "org",
            "space_guid": "space", "parameters": parameters,
            "context": {"platform": "kubernetes", "peering": {"kubeconfig": self.kubeconfig}}});
        self.platform.send(
            reqwest::Method::PUT,
            &format!("/v2/service_instances/{instance}?accepts_incomplete=true"),
            Some(&body),
            Some("2.17"),
        )
    }

    /// Wait for the operation `answer` (a 202) started on `instance`.
    pub fn settle(&self, instance: &str, plan: &str, answer: &e2e::catalog::Resp) -> Outcome {
        assert_eq!(answer.status, 202, "{}", answer.text);
        let op = answer.json["operation"].as_str().map(str::to_string);
        self.platform.wait(instance, &self.sid, plan, op.as_deref())
    }

    /// Update `instance` as a platform does (`accepts_incomplete` as given).
    pub fn update(&self, instance: &str, body: Value, accepts: bool) -> e2e::catalog::Resp {
        let mut body = body;
        body["service_id"] = json!(self.sid);
        self.platform.send(
            reqwest::Method::PATCH,
            &format!("/v2/service_instances/{instance}?accepts_incomplete={accepts}"),
            Some(&body),
            Some("2.17"),
        )
    }

    /// Deprovision `instance` as a platform does: the 202 answer.
    pub fn deprovision(&self, instance: &str, plan: &str) -> e2e::catalog::Resp {
        self.platform.send(
            reqwest::Method::DELETE,
            &format!(
                "/v2/service_instances/{instance}?service_id={}&plan_id={plan}&accepts_incomplete=true",
                self.sid
            ),
            None,
            Some("2.17"),
        )
    }
}

#[test]
fn a_service_is_sold_provisioned_offloaded_bound_and_removed() {
    let sw = ServiceWorld::open();
    let world = &sw.world;
    let provider = &world.consumer.kube;
    let customer = &world.remote;
    let (catalog, provider_token, p) = (&sw.catalog, &sw.provider_token, &sw.platform);
    let (sid, pid) = (sw.sid.clone(), sw.remote.clone());
    let offer = get(catalog, "/offer/db", None).json;
    assert_eq!(offer["kind"], "service");
    assert_eq!(offer["plans"]["remote"]["hosting"], "Remote");

    // A template that leaves the instance namespace: refused, named,
    // nothing published.
    let escaping = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: kube-system}\n";
    provider.apply(SERVICE_CATALOGS, service_catalog("bad", "bad-db", escaping));
    wait_until("the bad ServiceCatalog marked invalid", || {
        valid(world, "bad").is_some_and(|c| c["status"] == "False")
    });
    let message = valid(world, "bad").unwrap()["message"].clone();
    assert_eq!(
        message.as_str().unwrap(),
        "service bad-db, plan remote, template settings: ConfigMap x names namespace kube-system; only the instance namespace svc-validation may be used"
    );
    assert_eq!(get(catalog, "/offer/bad-db", None).status, 404);
    let provision_as =
        |instance: &str, plan: &str, parameters: Value| sw.provision(instance, plan, parameters);
    let provision = |parameters: Value| provision_as("inst-1", &pid, parameters);

    // A malformed parameter: refused naming it, nothing made.
    let r = provision(json!({"size": "big"}));
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(
        r.json["description"]
            .as_str()
            .unwrap_or_default()
            .starts_with("parameters.size:"),
        "{}",
        r.text
    );
    // What a provisioning makes, counted again once a valid one has gone
    // through the same catalog and controller (a check right after the
    // 400 could not fail: a provisioning is asynchronous).
    let instances = || {
        provider
            .objects(NAMESPACES)
            .into_iter()
            .filter(|n| n["metadata"]["name"].as_str().unwrap().starts_with("svc-"))
            .count()
    };
    let db_contracts = || {
        get(catalog, "/contracts", Some(provider_token))
            .json
            .as_array()
            .map_or(0, |all| all.iter().filter(|c| c["offerID"] == "db").count())
    };

    // Remote: provisioned; the namespace offloaded to the customer only.
    let r = provision(json!({"size": 2}));
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().map(str::to_string);
    match p.wait("inst-1", &sid, &pid, op.as_deref()) {
        Outcome::Succeeded(_) => {}
        other => panic!("provisioning: {other:?}"),
    }
    let contract = contract_id(catalog, provider_token, "offerID", "db");
    let namespace = format!("svc-{}", contract.to_lowercase());
    // The refused provisioning made nothing: one contract, one namespace.
    assert_eq!((db_contracts(), instances()), (1, 1));
    let settings = provider
        .get(CONFIGMAPS, Some(&namespace), "settings")
        .unwrap_or_else(|| panic!("the rendered ConfigMap in {namespace}"));
    assert_eq!(
        settings["data"],
        // The customer's parameters reach the templates.
        json!({"instance": contract, "plan": "remote", "size": "2"})
    );
    let offloading = provider
        .get(OFFLOADINGS, Some(&namespace), "offloading")
        .expect("the NamespaceOffloading");
    assert_eq!(offloading["spec"]["podOffloadingStrategy"], "Remote");
    assert_eq!(
        offloading["spec"]["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]
            ["values"],
        json!([PROVIDER_ID])
    );
    // The objects reach the customer's cluster (Liqo's reflection), in the
    // namespace Liqo offloaded the instance namespace to, as rendered.
    wait_until(
        "the instance namespace offloaded (its remote name known)",
        || {
            provider
                .get(OFFLOADINGS, Some(&namespace), "offloading")
                .is_some_and(|o| o["status"]["remoteNamespaceName"].is_string())
        },
    );
    let remote_namespace = provider
        .get(OFFLOADINGS, Some(&namespace), "offloading")
        .and_then(|o| {
            o["status"]["remoteNamespaceName"]
                .as_str()
                .map(str::to_string)
        })
        .expect("the remote namespace's name");
    // Named the same there (issue 45: `svc-<contract>-<cluster ID>` could
    // pass 63 characters), and made so by Liqo.
    assert_eq!(
        offloading["spec"]["namespaceMappingStrategy"],
        "EnforceSameName"
    );
    assert_eq!(remote_namespace, namespace);
    let remote_settings = || customer.get(CONFIGMAPS, Some(&remote_namespace), "settings");
    wait_until("the rendered ConfigMap reflected to the customer", || {
        remote_settings().is_some()
    });
    assert_eq!(remote_settings().unwrap()["data"], settings["data"]);
    assert!(customer.get(NAMESPACES, None, &remote_namespace).is_some());

    // Bind: the credentials Secret lands in the customer's opted-in
    // application namespace (which accepts the service provider's
    // bindings only, issue 41); OSB answers the same credentials.
    customer.apply(
        NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app",
               "labels": {"broker.liqo-broker.io/accept-bindings": "true"},
               "annotations": {"broker.liqo-broker.io/accept-bindings-from": CONSUMER_ID}}}),
    );
    let bind = json!({"service_id": sid, "plan_id": pid,
        "parameters": {"namespace": "app", "secretName": "db-creds"}});
    let r = p.send(
        reqwest::Method::PUT,
        "/v2/service_instances/inst-1/service_bindings/b1?accepts_incomplete=true",
        Some(&bind),
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    wait_until("the binding succeeded", || {
        p.binding_last_operation("inst-1", "b1").json["state"] == "succeeded"
    });
    let credentials = p.fetch_binding("inst-1", "b1").json["credentials"].clone();
    let password = credentials["password"].as_str().unwrap().to_string();
    assert_eq!(password.len(), 32);
    assert_eq!(
        credentials["uri"],
        format!("db://root:{password}@db.{namespace}:5432")
    );
    // The name the customer's pods use, as Liqo reported it.
    assert_eq!(credentials["host"], format!("db.{remote_namespace}"));
    wait_until("the credentials copied into app", || {
        customer
            .get(SECRETS, Some("app"), "db-creds")
            .is_some_and(|s| s["data"]["password"] == b64(&password))
    });
    // The binding's objects (issue 45), made beside its Secret, labelled
    // with it; Liqo reflects the Service to the customer.
    let binding_settings = || provider.get(CONFIGMAPS, Some(&namespace), "binding-b1-settings");
    let made = binding_settings().expect("the binding's ConfigMap");
    assert_eq!(made["data"], json!({"app": "app"}));
    assert_eq!(
        made["metadata"]["labels"]["broker.liqo-broker.io/binding"],
        "b1"
    );
    let binding_service = || provider.get(SERVICES, Some(&namespace), "db-b1");
    assert!(binding_service().is_some(), "the binding's Service");
    wait_until("the binding's Service reflected to the customer", || {
        customer
            .get(SERVICES, Some(&remote_namespace), "db-b1")
            .is_some()
    });

    // Unbind: the copy goes.
    let r = p.send(
        reqwest::Method::DELETE,
        &format!("/v2/service_instances/inst-1/service_bindings/b1?service_id={sid}&plan_id={pid}&accepts_incomplete=true"),
        None,
        Some("2.17"),
    );
    assert!(r.status == 202 || r.status == 200, "{}", r.text);
    wait_until("the copy removed", || {
        customer.get(SECRETS, Some("app"), "db-creds").is_none()
    });
    // And the binding's objects with it, before it is reported gone.
    wait_until("the unbind reported", || {
        p.binding_last_operation("inst-1", "b1").status == 410
    });
    assert!(
        binding_settings().is_none(),
        "the binding's ConfigMap stays"
    );
    assert!(binding_service().is_none(), "the binding's Service stays");

    // Local, a second instance over the same peering: its pods stay at
    // the provider (the namespace is offloaded with strategy Local); the
    // customer chose its namespace's prefix (issue 45).
    let local = sw.local.clone();
    let r = provision_as("inst-2", &local, json!({"namespacePrefix": "shop"}));
    match sw.settle("inst-2", &local, &r) {
        Outcome::Succeeded(_) => {}
        other => panic!("provisioning Local: {other:?}"),
    }
    let second = contract_id(catalog, provider_token, "planID", "local").to_lowercase();
    let local_namespace = format!("svc-shop-{second}");
    let offloading = provider
        .get(OFFLOADINGS, Some(&local_namespace), "offloading")
        .expect("the Local instance's NamespaceOffloading");
    assert_eq!(offloading["spec"]["podOffloadingStrategy"], "Local");
    assert_eq!(
        provider
            .get(CONFIGMAPS, Some(&local_namespace), "settings")
            .expect("the Local instance's ConfigMap")["data"]["plan"],
        "local"
    );
    let r = sw.deprovision("inst-2", &local);
    assert!(matches!(sw.settle("inst-2", &local, &r), Outcome::Gone));

    // Deprovision: everything it made removed, then 410.
    let r = p.send(
        reqwest::Method::DELETE,
        &format!(
            "/v2/service_instances/inst-1?service_id={sid}&plan_id={pid}&accepts_incomplete=true"
        ),
        None,
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().map(str::to_string);
    assert!(matches!(
        p.wait("inst-1", &sid, &pid, op.as_deref()),
        Outcome::Gone
    ));
    let purchases = provider.objects(PURCHASES);
    assert!(purchases.is_empty(), "{purchases:#?}");
    assert!(provider
        .get(
            SECRETS,
            Some("liqo"),
            &format!("service-{}-peering", contract.to_lowercase())
        )
        .is_none());
    wait_until("the instance namespace removed", || {
        provider.get(NAMESPACES, None, &namespace).is_none()
    });
    wait_until("nothing left at the customer", || {
        remote_settings().is_none()
    });

    // Deleting the ServiceCatalog withdraws its offer; its finalizer held
    // it until then (docs/services.md).
    provider
        .delete_object(SERVICE_CATALOGS, Some(TEAM), "shop")
        .expect("deleting the ServiceCatalog");
    wait_until("the ServiceCatalog gone, its finalizer released", || {
        provider.get(SERVICE_CATALOGS, Some(TEAM), "shop").is_none()
    });
    assert_eq!(get(catalog, "/offer/db", None).status, 404);
}

/// The `type` condition of ServiceCatalog `namespace/name`.
fn condition(world: &DirectWorld, namespace: &str, name: &str, type_: &str) -> Option<Value> {
    let catalog = world
        .consumer
        .kube
        .get(SERVICE_CATALOGS, Some(namespace), name)?;
    catalog["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// A cluster-scoped kind served from a CRD, as cert-manager installs it
/// (`deploy/crds/crd-clusterissuers.yaml`: `scope: Cluster`): a template
/// making one passes the check before publishing and is refused at apply
/// (the instance reported `failed`).
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

/// Issue 41, F5 (C-03, C-04, C-05) and F10 (U-08).
///
/// - C-03: a ServiceCatalog in another namespace (`team2/shop`, which
///   sorts after `team/shop`, so a tie within `creationTimestamp`'s
///   second gives the same holder) declaring
///   the offer id `db` that `team/shop` already publishes is refused
///   (`Published=False`, reason `OfferIdTaken`, naming `team/shop`) and
///   does not overwrite the offer;
/// - C-04: an instance of `db` renders `team/shop`'s templates, never
///   team2's (the contract's holder is resolved explicitly);
/// - U-08: an instance reported `failed` is not tried again at every pass
///   (it waits `FAILED_RETRY`, a minute): while another instance is
///   provisioned — passes at each of its contract's changes and its
///   `--retry`s, every one over all contracts — not one apply of the failed
///   instance's namespace (made at every pass a provisioning is tried,
///   right after the customer-peering read);
/// - C-05: deleting `team2/shop` leaves `db` published.
#[test]
fn an_offer_id_has_one_service_catalog_and_a_failed_instance_waits() {
    let sw = ServiceWorld::open();
    let world = &sw.world;
    let provider = &world.consumer.kube;
    let catalog = &sw.catalog;
    crate::liqo_support::namespace(provider, "team2", json!({}));
    let team_c = |template: &str| {
        let mut c = service_catalog("shop", "db", template);
        c["metadata"]["namespace"] = json!("team2");
        c["spec"]["services"][0]["name"] = json!("EVIL db");
        c
    };
    let evil = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {team: c}\n";
    provider.apply(SERVICE_CATALOGS, team_c(evil));
    wait_until("team2's ServiceCatalog refused", || {
        condition(world, "team2", "shop", "Published").is_some_and(|c| c["status"] == "False")
    });
    let refused = condition(world, "team2", "shop", "Published").unwrap();
    assert_eq!(refused["reason"], "OfferIdTaken", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("offer id db is held by ServiceCatalog team/shop (created first)"),
        "{refused}"
    );
    // Published (or not) before the condition was written: C-03.
    assert_eq!(get(catalog, "/offer/db", None).json["name"], "Database");
    let team = condition(world, TEAM, "shop", "Published").unwrap();
    assert_eq!(team["status"], "True", "{team}");
    let status = provider
        .get(SERVICE_CATALOGS, Some("team2"), "shop")
        .unwrap()["status"]
        .clone();
    assert!(status.get("offers").is_none(), "{status}");

    // C-04: the instance is team's.
    let r = sw.provision("inst-1", &sw.remote, json!({"size": 2}));
    match sw.settle("inst-1", &sw.remote, &r) {
        Outcome::Succeeded(_) => {}
        other => panic!("provisioning: {other:?}"),
    }
    let contract = contract_id(catalog, &sw.provider_token, "offerID", "db");
    let namespace = format!("svc-{}", contract.to_lowercase());
    let settings = provider
        .get(CONFIGMAPS, Some(&namespace), "settings")
        .expect("the rendered ConfigMap");
    assert_eq!(settings["data"]["plan"], "remote", "{settings}");
    assert!(settings["data"].get("team").is_none(), "{settings}");

    // U-08: an instance reported failed waits.
    provider
        .register_crd_yaml(CLUSTER_ISSUER_CRD)
        .expect("the ClusterIssuer CRD");
    let mut issuing = service_catalog(
        "issuing",
        "ca-db",
        "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata: {name: db-ca}\nspec: {selfSigned: {}}\n",
    );
    issuing["spec"]["services"][0]["plans"] = json!([issuing["spec"]["services"][0]["plans"][0]]);
    provider.apply(SERVICE_CATALOGS, issuing);
    wait_until("service offer ca-db published", || {
        get(catalog, "/offer/ca-db", None).status == 200
    });
    let services = sw.platform.catalog();
    let service = service_of(&services, "ca-db");
    let ids = (
        service["id"].as_str().unwrap().to_string(),
        plan_of(service, "remote")["id"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    let body = json!({"service_id": ids.0, "plan_id": ids.1, "organization_guid": "org",
        "space_guid": "space", "parameters": {},
        "context": {"platform": "kubernetes", "peering": {"kubeconfig": sw.kubeconfig}}});
    // Before the request: the failure, and the minute it waits, come after.
    let asked = std::time::Instant::now();
    let r = sw.platform.send(
        reqwest::Method::PUT,
        "/v2/service_instances/broken?accepts_incomplete=true",
        Some(&body),
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    let op = r.json["operation"].as_str().map(str::to_string);
    match sw.platform.wait("broken", &ids.0, &ids.1, op.as_deref()) {
        Outcome::Failed(Some(why)) => assert!(why.contains("cluster-scoped"), "{why}"),
        other => panic!("expected a failed provisioning: {other:?}"),
    }
    let broken = format!(
        "svc-{}",
        contract_id(catalog, &sw.provider_token, "offerID", "ca-db").to_lowercase()
    );
    let applies = || {
        provider
            .audit()
            .into_iter()
            .filter(|r| {
                r.resource.as_ref().is_some_and(|a| {
                    a.verb == "patch"
                        && a.resource == "namespaces"
                        && a.name.as_deref() == Some(broken.as_str())
                })
            })
            .count()
    };
    let passes = "service_controller_reconcile_duration_seconds_count";
    let (before, from) = (applies(), controller_metric(sw.metrics, passes));
    // Passes the product makes anyway: another instance provisioned to
    // the end (its purchase and reports on the contract stream, its steps
    // on Kubernetes' side each `--retry` later).
    let r = sw.provision("inst-2", &sw.remote, json!({"size": 1}));
    match sw.settle("inst-2", &sw.remote, &r) {
        Outcome::Succeeded(_) => {}
        other => panic!("provisioning inst-2 beside the failed one: {other:?}"),
    }
    let (after, to) = (applies(), controller_metric(sw.metrics, passes));
    // The failed instance is tried again after FAILED_RETRY (a minute,
    // service-controller/src/contracts.rs): an apply seen later would be
    // that promised retry, not a pass's.
    let failed_retry = std::time::Duration::from_secs(60);
    assert!(
        asked.elapsed() < failed_retry,
        "inst-2 took until {:?} after the failed request, past the failed instance's \
         wait ({failed_retry:?}): nothing proved",
        asked.elapsed()
    );
    assert!(
        to > from,
        "no pass while inst-2 was provisioned ({from} → {to})"
    );
    assert_eq!(
        after,
        before,
        "the failed instance's namespace applied again over {} passes",
        to - from
    );

    // C-05: deleting team2's ServiceCatalog leaves team's offer.
    provider
        .delete_object(SERVICE_CATALOGS, Some("team2"), "shop")
        .expect("deleting team2's ServiceCatalog");
    wait_until("team2's ServiceCatalog gone", || {
        provider
            .get(SERVICE_CATALOGS, Some("team2"), "shop")
            .is_none()
    });
    let offer = get(catalog, "/offer/db", None);
    assert_eq!(offer.status, 200, "{}", offer.text);
    assert_eq!(offer.json["name"], "Database");
}

/// A series of service-controller's `/metrics`.
pub fn controller_metric(at: std::net::SocketAddr, series: &str) -> f64 {
    let text = e2e::http::blocking_client(std::time::Duration::from_secs(10))
        .get(format!("http://{at}/metrics"))
        .send()
        .and_then(|r| r.text())
        .expect("service-controller's /metrics");
    // Not aggregator_support's parser: the benches include this file alone.
    text.lines()
        .find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

/// The `data` of ConfigMap `name` in `namespace` on `kube`, if it exists.
fn config_data(
    kube: &kube_test_server::KubeApiServer,
    namespace: &str,
    name: &str,
) -> Option<Value> {
    kube.get(CONFIGMAPS, Some(namespace), name)
        .map(|c| c["data"].clone())
}

/// Issue 45: an update (OSB `PATCH`) re-renders the instance's objects in
/// the provider's cluster, asynchronously. New parameters, checked
/// against the plan's update schema (refused: 400, nothing stored),
/// change the objects (one made, then one removed when a parameter drops
/// it); an update the provider refuses (its template leaves the instance
/// namespace) is reported `failed` and changes neither the stored
/// parameters nor the objects. A plan change is a new contract replacing
/// the old (cancelled once the provider succeeded): the same namespace and
/// objects, rendered with the new plan, the Purchase asking the new plan's
/// resources; to a plan of another hosting it is refused (422). The moved
/// instance is bound and deprovisioned as any other.
#[test]
fn an_update_renders_the_instance_again_and_a_plan_change_moves_it_to_a_new_contract() {
    let sw = ServiceWorld::open();
    let provider = &sw.world.consumer.kube;
    let (catalog, token, p) = (&sw.catalog, &sw.provider_token, &sw.platform);
    let (remote, large) = (sw.remote.clone(), sw.large.clone());

    // Which plans may change: those with a sibling of the same hosting.
    let services = p.catalog();
    let service = service_of(&services, "db");
    assert_eq!(service["plan_updateable"], true, "{service}");
    for (key, updateable) in [("remote", true), ("remote-large", true), ("local", false)] {
        assert_eq!(
            plan_of(service, key)["plan_updateable"],
            updateable,
            "{key}"
        );
    }

    let r = sw.provision("inst-u", &remote, json!({"size": 2}));
    assert!(matches!(
        sw.settle("inst-u", &remote, &r),
        Outcome::Succeeded(_)
    ));
    let first = contract_id(catalog, token, "offerID", "db");
    let namespace = format!("svc-{}", first.to_lowercase());
    let settings = || config_data(provider, &namespace, "settings").expect("settings");
    assert_eq!(settings()["size"], "2");
    let stored = || p.fetch_instance("inst-u").json;

    // Refused by the update schema: 400 naming it, nothing stored.
    let r = sw.update("inst-u", json!({"parameters": {"size": 0}}), true);
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(
        r.json["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("parameters.size:")),
        "{}",
        r.text
    );
    // A change is asynchronous only.
    let r = sw.update("inst-u", json!({"parameters": {"size": 3}}), false);
    assert_eq!((r.status, &r.json["error"]), (422, &json!("AsyncRequired")));
    assert_eq!(stored()["parameters"], json!({"size": 2}));
    // The current values: nothing to do.
    let r = sw.update("inst-u", json!({"parameters": {"size": 2}}), false);
    assert_eq!((r.status, &r.json), (200, &json!({})), "{}", r.text);

    // New parameters: the objects rendered again, one more made.
    let r = sw.update(
        "inst-u",
        json!({"parameters": {"size": 3, "cache": true}}),
        true,
    );
    match sw.settle("inst-u", &remote, &r) {
        Outcome::Succeeded(_) => {}
        other => panic!("update: {other:?}"),
    }
    assert_eq!(settings()["size"], "3");
    assert_eq!(
        config_data(provider, &namespace, "cache"),
        Some(json!({"size": "3"}))
    );
    assert_eq!(stored()["parameters"], json!({"size": 3, "cache": true}));
    // A parameter removed (null): the object it made goes.
    let r = sw.update("inst-u", json!({"parameters": {"cache": null}}), true);
    assert!(matches!(
        sw.settle("inst-u", &remote, &r),
        Outcome::Succeeded(_)
    ));
    assert_eq!(config_data(provider, &namespace, "cache"), None);
    assert_eq!(stored()["parameters"], json!({"size": 3}));

    // Refused by the provider: failed, naming why; parameters and objects
    // as they were.
    let r = sw.update(
        "inst-u",
        json!({"parameters": {"size": 5, "escape": true}}),
        true,
    );
    match sw.settle("inst-u", &remote, &r) {
        Outcome::Failed(Some(why)) => assert!(why.contains("kube-system"), "{why}"),
        other => panic!("expected a failed update: {other:?}"),
    }
    assert_eq!(stored()["parameters"], json!({"size": 3}));
    assert_eq!(settings()["size"], "3");
    assert!(provider
        .get(CONFIGMAPS, Some("kube-system"), "settings")
        .is_none());

    // Another hosting: refused, nothing bought.
    let r = sw.update("inst-u", json!({"plan_id": sw.local}), true);
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.text.contains("keeps the hosting"), "{}", r.text);

    // A plan change: a new contract, the old one cancelled; the same
    // namespace and objects, rendered with the new plan.
    let r = sw.update("inst-u", json!({"plan_id": large}), true);
    match sw.settle("inst-u", &large, &r) {
        Outcome::Succeeded(_) => {}
        other => panic!("plan change: {other:?}"),
    }
    let contracts = get(catalog, "/contracts", Some(token)).json;
    let of = |id: &str| {
        contracts
            .as_array()
            .and_then(|all| all.iter().find(|c| c["id"] == id).cloned())
            .unwrap_or_else(|| panic!("no contract {id}: {contracts}"))
    };
    let second = contract_id(catalog, token, "planID", "remote-large");
    assert_ne!(second, first);
    let (old, new) = (of(&first), of(&second));
    assert_eq!(old["active"], false, "{old}");
    assert_eq!(old["ended"], "cancelled", "{old}");
    // At the new plan's price, as bought; the old one kept its own.
    let offer = get(catalog, "/offer/db", None).json;
    assert_eq!(new["active"], true, "{new}");
    assert_eq!(new["cost"], offer["plans"]["remote-large"]["cost"], "{new}");
    assert_eq!(old["cost"], offer["plans"]["remote"]["cost"], "{old}");
    assert_eq!(
        settings(),
        json!({"instance": first, "plan": "remote-large", "size": "3"})
    );
    let ns = provider.get(NAMESPACES, None, &namespace).unwrap();
    assert_eq!(
        ns["metadata"]["annotations"]["broker.liqo-broker.io/current-contract-id"],
        json!(second)
    );
    let purchase = provider
        .get(
            PURCHASES,
            Some("liqo"),
            &format!("service-{}", first.to_lowercase()),
        )
        .expect("the instance's Purchase");
    assert_eq!(purchase["spec"]["resources"]["cpu"], "2", "{purchase}");
    assert_eq!(stored()["plan_id"], json!(large));

    // Bound and deprovisioned under the new contract.
    let bind = json!({"service_id": sw.sid, "plan_id": large,
        "parameters": {"namespace": "app", "secretName": "db-creds"}});
    let r = p.send(
        reqwest::Method::PUT,
        "/v2/service_instances/inst-u/service_bindings/b1?accepts_incomplete=true",
        Some(&bind),
        Some("2.17"),
    );
    assert_eq!(r.status, 202, "{}", r.text);
    wait_until("the binding succeeded", || {
        p.binding_last_operation("inst-u", "b1").json["state"] == "succeeded"
    });
    assert!(provider
        .get(SECRETS, Some(&namespace), "binding-b1")
        .is_some());
    let unbind = format!(
        "/v2/service_instances/inst-u/service_bindings/b1?service_id={}&plan_id={large}&accepts_incomplete=true",
        sw.sid
    );
    assert_eq!(
        p.send(reqwest::Method::DELETE, &unbind, None, Some("2.17"))
            .status,
        202
    );
    wait_until("the binding removed", || {
        p.binding_last_operation("inst-u", "b1").status == 410
    });
    let r = sw.deprovision("inst-u", &large);
    assert!(matches!(sw.settle("inst-u", &large, &r), Outcome::Gone));
    wait_until("the instance namespace removed", || {
        provider.get(NAMESPACES, None, &namespace).is_none()
    });
    assert!(provider.objects(PURCHASES).is_empty());
}
