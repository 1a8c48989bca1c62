//! The `ServiceCatalog` kind (`broker.liqo-broker.io/v1alpha1`, namespaced,
//! status subresource): the services a provider sells — each one offer of
//! kind `service` — with their plans, the object templates rendered into
//! every instance's namespace and the binding credentials template. The
//! CRD is generated from these types ([`crd`]); `tests/crd.rs` fails when
//! `deploy/kubernetes/service-controller/crd.yaml` means something else.

use std::collections::BTreeMap;

use controller_core::crd as schema;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The finalizer that makes deletion wait until the offers are withdrawn.
pub const FINALIZER: &str = "broker.liqo-broker.io/service-catalog-cleanup";

/// The services this provider sells; the `ServiceCatalog` kind is
/// generated around it.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "broker.liqo-broker.io",
    version = "v1alpha1",
    kind = "ServiceCatalog",
    plural = "servicecatalogs",
    namespaced,
    status = "ServiceCatalogStatus",
    doc = "Services this (the provider's) cluster sells through the catalog, and how each instance is made.",
    printcolumn = r#"{"name": "Valid", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Valid\")].status"}"#,
    printcolumn = r#"{"name": "Published", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Published\")].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct ServiceCatalogSpec {
    /// Each service is published as one offer of kind `service`.
    #[schemars(length(min = 1, max = 64))]
    pub services: Vec<Service>,
}

/// One service: an offer, its plans, and what an instance of it is.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct Service {
    /// The offer's id in the catalog (unique among the provider's offers).
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"))]
    pub id: String,
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// The offer's `type` (e.g. `database`).
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 64))]
    pub service_type: String,
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub description: String,
    #[schemars(length(min = 1, max = 32))]
    pub plans: Vec<ServicePlan>,
    /// Names of secrets drawn at random once per instance and kept (in the
    /// instance namespace's Secret `service-secrets`): templates read them
    /// as `secrets.<name>`.
    #[serde(default)]
    #[schemars(
        length(max = 32),
        inner(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"))
    )]
    pub secrets: Vec<String>,
    /// Kubernetes objects (minijinja templates of YAML, one or more
    /// documents each) applied into the instance namespace.
    #[schemars(length(min = 1, max = 64))]
    pub templates: Vec<ObjectTemplate>,
    /// The binding's credentials: key → minijinja template of the value.
    #[serde(default)]
    pub binding_credentials: BTreeMap<String, String>,
    /// Kubernetes objects each binding makes beside its credentials Secret
    /// (a Service, a ConfigMap), applied into the instance namespace when
    /// the binding is made and removed when it is unbound: templates as
    /// `templates` are, rendered with `binding.id` and
    /// `binding.parameters` too. Name them after the binding (with
    /// `binding.id`): two bindings rendering one name make one object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub binding_templates: Vec<ObjectTemplate>,
    /// The RBAC this service's templates may make. A Role is made only
    /// when these rules cover each of its rules (as Kubernetes' escalation
    /// check compares them); a RoleBinding only to such a Role made by the
    /// same templates, or to a ClusterRole named here. Left out: no Role or
    /// RoleBinding may be made.
    #[serde(
        default,
        rename = "allowedRBAC",
        skip_serializing_if = "AllowedRbac::is_empty"
    )]
    pub allowed_rbac: AllowedRbac,
}

/// What RBAC a service's templates may make (`allowedRBAC`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct AllowedRbac {
    /// Rules a rendered Role may grant: each of its rules must be covered
    /// by these (`rbac.authorization.k8s.io/v1` PolicyRules; `*` covers
    /// every verb, group or resource, as in Kubernetes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub rules: Vec<PolicyRule>,
    /// ClusterRoles a rendered RoleBinding may bind (by name; their rules
    /// are the provider's to vouch for, they are not read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 253)))]
    pub cluster_roles: Vec<String>,
}

impl AllowedRbac {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.cluster_roles.is_empty()
    }
}

/// One RBAC rule, as `rbac.authorization.k8s.io/v1` PolicyRule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct PolicyRule {
    #[schemars(length(min = 1, max = 64))]
    pub verbs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub api_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub resource_names: Vec<String>,
    #[serde(
        default,
        rename = "nonResourceURLs",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(length(max = 64))]
    pub non_resource_urls: Vec<String>,
}

/// One plan of a service.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct ServicePlan {
    /// The plan's key in the offer.
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"))]
    pub id: String,
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// A decimal, as the catalog reads costs.
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?$"))]
    pub cost: String,
    /// Where the instance's pods run.
    #[schemars(extend("enum" = ["Local", "Remote", "LocalAndRemote"]))]
    pub hosting: String,
    /// What the instance asks of the customer's cluster (the ResourceSlice's
    /// resources; resource name → quantity).
    #[serde(default)]
    pub resources: BTreeMap<String, String>,
    /// OSB v2.17 `schemas` of the plan, as the catalog takes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_object")]
    pub schemas: Option<serde_json::Value>,
}

/// A named template of Kubernetes objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct ObjectTemplate {
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 63))]
    pub name: String,
    #[schemars(length(min = 1, max = 65536))]
    pub template: String,
    /// Where the pods of this template's objects run: `provider` (on the
    /// provider's own nodes) or `customer` (on the virtual node of the
    /// customer's cluster), written into each pod template as the node
    /// affinity (and toleration) Liqo honours. Within the plan's hosting:
    /// `Local` allows `provider` only, `Remote` `customer` only,
    /// `LocalAndRemote` either. Left out: where the plan's hosting puts
    /// them (for `LocalAndRemote`, Liqo's scheduler chooses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["provider", "customer"]))]
    pub runs_at: Option<String>,
}

/// One condition, as `metav1.Condition`.
pub use controller_core::crd::Condition;

/// What the controller reports: `Valid` (every template of every plan
/// renders to objects inside the instance namespace) and `Published`
/// (the offers are in the catalog).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct ServiceCatalogStatus {
    #[serde(default)]
    pub observed_generation: i64,
    /// The offer ids published from this ServiceCatalog.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offers: Vec<String>,
    #[serde(default)]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["type"]
    ))]
    pub conditions: Vec<Condition>,
}

impl ServiceCatalog {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }

    pub fn status(&self) -> ServiceCatalogStatus {
        self.status.clone().unwrap_or_default()
    }
}

impl ServiceCatalogSpec {
    /// The service `id` and its plan `plan`, if this catalog sells them.
    pub fn plan(&self, id: &str, plan: &str) -> Option<(&Service, &ServicePlan)> {
        let service = self.services.iter().find(|s| s.id == id)?;
        Some((service, service.plans.iter().find(|p| p.id == plan)?))
    }
}

/// The ServiceCatalog CRD, as `deploy/kubernetes/service-controller/crd.yaml`
/// holds it: kube's derived CRD, the kind's own schema given the
/// [`schema::plain`] treatment (no `title`; an absent status is absent).
pub fn crd() -> CustomResourceDefinition {
    schema::tidy(<ServiceCatalog as kube::CustomResourceExt>::crd())
}
