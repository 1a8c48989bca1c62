//! The built-in resources controllers here need — core/v1 nodes, pods,
//! namespaces, secrets, configmaps, services, serviceaccounts,
//! resourcequotas and events, events.k8s.io/v1 events,
//! coordination.k8s.io/v1 leases, rbac.authorization.k8s.io/v1 roles,
//! clusterroles, rolebindings and clusterrolebindings, apps/v1
//! deployments and replicasets, policy/v1 poddisruptionbudgets (with the
//! `pods/eviction` subresource (`eviction`) serves),
//! apiextensions.k8s.io/v1 customresourcedefinitions, and
//! certificates.k8s.io/v1 certificatesigningrequests (whose `approval`
//! subresource the `csr` module serves), and networking.k8s.io/v1
//! networkpolicies (defaulted and validated by `network_policy`), and
//! discovery.k8s.io/v1 endpointslices (by `endpoint_slice`) — with their real scope, kinds, short
//! names, status subresources and field selectors; the namespaces a new
//! cluster has; and test fixtures for Nodes and Pods.
//!
//! Built-in objects are not schema-validated (the server holds no
//! OpenAPI for them): only their metadata is checked.

use serde_json::{json, Value};

use crate::crd::{GroupResource, ResourceDef};

/// The built-in resources by name, for the test helpers
/// (`kube.apply(Kind::Pod, …)`); any other resource is named by its
/// [`GroupResource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Node,
    Pod,
    Namespace,
    Secret,
    ConfigMap,
    ResourceQuota,
    Event,
    Lease,
    CertificateSigningRequest,
    Deployment,
    ReplicaSet,
    PodDisruptionBudget,
}

impl From<Kind> for GroupResource {
    fn from(kind: Kind) -> Self {
        let (group, resource) = match kind {
            Kind::Node => ("", "nodes"),
            Kind::Pod => ("", "pods"),
            Kind::Namespace => ("", "namespaces"),
            Kind::Secret => ("", "secrets"),
            Kind::ConfigMap => ("", "configmaps"),
            Kind::ResourceQuota => ("", "resourcequotas"),
            Kind::Event => ("", "events"),
            Kind::Lease => ("coordination.k8s.io", "leases"),
            Kind::CertificateSigningRequest => (CERTIFICATES, CSRS),
            Kind::Deployment => ("apps", "deployments"),
            Kind::ReplicaSet => ("apps", "replicasets"),
            Kind::PodDisruptionBudget => (POLICY, "poddisruptionbudgets"),
        };
        GroupResource::new(group, resource)
    }
}

#[allow(clippy::too_many_arguments)]
fn def(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    status: bool,
    short: &[&str],
    fields: &[&str],
) -> ResourceDef {
    ResourceDef {
        group: group.to_string(),
        versions: vec![version.to_string()],
        plural: plural.to_string(),
        singular: kind.to_lowercase(),
        kind: kind.to_string(),
        list_kind: format!("{kind}List"),
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        namespaced,
        status_subresource: status,
        custom: false,
        schemas: Default::default(),
        selectable_fields: fields.iter().map(|s| s.to_string()).collect(),
    }
}

/// Every built-in resource served.
pub fn definitions() -> Vec<ResourceDef> {
    let core_events = def(
        "",
        "v1",
        "events",
        "Event",
        true,
        false,
        &["ev"],
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
    );
    let mut defs = vec![
        def(
            "",
            "v1",
            "nodes",
            "Node",
            false,
            true,
            &["no"],
            &["spec.unschedulable"],
        ),
        def(
            "",
            "v1",
            "pods",
            "Pod",
            true,
            true,
            &["po"],
            &[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
        ),
        def(
            "",
            "v1",
            "namespaces",
            "Namespace",
            false,
            true,
            &["ns"],
            &["status.phase"],
        ),
        def("", "v1", "secrets", "Secret", true, false, &[], &["type"]),
        def(
            "",
            "v1",
            "configmaps",
            "ConfigMap",
            true,
            false,
            &["cm"],
            &[],
        ),
        def("", "v1", "services", "Service", true, true, &["svc"], &[]),
        def(
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            true,
            false,
            &["sa"],
            &[],
        ),
        def(
            "",
            "v1",
            "resourcequotas",
            "ResourceQuota",
            true,
            true,
            &["quota"],
            &[],
        ),
        core_events.clone(),
        // events.k8s.io/v1 serves the same Events, with no field selectors
        // of its own.
        ResourceDef {
            group: "events.k8s.io".into(),
            selectable_fields: Vec::new(),
            ..core_events
        },
        def(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            false,
            &[],
            &[],
        ),
    ];
    // RBAC: what the authorizer (`crate::rbac`) evaluates; none has a
    // status, a short name or a field selector of its own.
    defs.extend(
        [
            ("roles", "Role", true),
            ("clusterroles", "ClusterRole", false),
            ("rolebindings", "RoleBinding", true),
            ("clusterrolebindings", "ClusterRoleBinding", false),
        ]
        .map(|(plural, kind, namespaced)| {
            def(RBAC, "v1", plural, kind, namespaced, false, &[], &[])
        }),
    );
    defs.extend([
        // Admission policies: what `crate::admission` evaluates.
        def(
            crate::admission::GROUP,
            "v1",
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
            false,
            true,
            &[],
            &[],
        ),
        def(
            crate::admission::GROUP,
            "v1",
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            false,
            false,
            &[],
            &[],
        ),
    ]);
    // What `kubectl apply` of the shipped manifests creates
    // (`deploy/kubernetes/`): apps/v1 Deployments, `deploy` for short and
    // in the `all` category (pkg/registry/apps/deployment/storage/storage.go
    // `ShortNames`, `Categories`), and apiextensions.k8s.io/v1
    // CustomResourceDefinitions, `crd`/`crds`, category `api-extensions`
    // (staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition/etcd.go),
    // which the CRD controller serves once stored.
    defs.push(ResourceDef {
        categories: vec!["all".to_string()],
        ..def(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            true,
            true,
            &["deploy"],
            &[],
        )
    });
    // What the workload controllers (`replicaset`,
    // `deployment`) and the disruption controller
    // (`disruption`) act on: apps/v1 ReplicaSets, `rs`, category
    // `all` (pkg/registry/apps/replicaset/storage/storage.go `ShortNames`,
    // `Categories`), and policy/v1 PodDisruptionBudgets, `pdb`
    // (pkg/registry/policy/poddisruptionbudget/storage/storage.go
    // `ShortNames`), each with its status subresource.
    defs.push(ResourceDef {
        categories: vec!["all".to_string()],
        ..def(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            true,
            true,
            &["rs"],
            &[],
        )
    });
    defs.push(def(
        POLICY,
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        true,
        &["pdb"],
        &[],
    ));
    // networking.k8s.io/v1 NetworkPolicies, `netpol` for short, no status
    // subresource (pkg/registry/networking/networkpolicy/storage/storage.go
    // `ShortNames`; pkg/registry/networking/rest/storage_settings.go serves
    // `networkpolicies` alone in v1).
    defs.push(def(
        crate::network_policy::NETWORKING,
        "v1",
        crate::network_policy::NETWORK_POLICIES,
        "NetworkPolicy",
        true,
        false,
        &["netpol"],
        &[],
    ));
    // discovery.k8s.io/v1 EndpointSlices: no short name, no status
    // subresource (pkg/registry/discovery/endpointslice/storage/storage.go;
    // pkg/registry/discovery/rest/storage_discovery.go serves
    // `endpointslices` alone in v1), what the EndpointSlice controller
    // (`endpointslice_controller`) writes.
    defs.push(def(
        crate::endpoint_slice::DISCOVERY,
        "v1",
        crate::endpoint_slice::ENDPOINT_SLICES,
        "EndpointSlice",
        true,
        false,
        &[],
        &[],
    ));
    defs.push(ResourceDef {
        categories: vec!["api-extensions".to_string()],
        ..def(
            APIEXTENSIONS,
            "v1",
            CRDS,
            "CustomResourceDefinition",
            false,
            true,
            &["crd", "crds"],
            &[],
        )
    });
    // Cluster-scoped, `csr` for short, selectable by `spec.signerName`
    // (pkg/apis/certificates/v1/conversion.go, AddFieldLabelConversionsForCertificateSigningRequest).
    defs.push(def(
        CERTIFICATES,
        "v1",
        CSRS,
        "CertificateSigningRequest",
        false,
        true,
        &["csr"],
        &["spec.signerName"],
    ));
    defs
}

const RBAC: &str = crate::rbac::RBAC_GROUP;

/// The API group of PodDisruptionBudgets and Evictions.
pub const POLICY: &str = "policy";

/// The API group of CustomResourceDefinitions.
pub const APIEXTENSIONS: &str = "apiextensions.k8s.io";
/// Their resource.
pub const CRDS: &str = "customresourcedefinitions";

/// The API group of CertificateSigningRequests.
pub const CERTIFICATES: &str = "certificates.k8s.io";
/// Their resource.
pub const CSRS: &str = "certificatesigningrequests";

/// The namespaces every cluster starts with.
pub const DEFAULT_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// A Node: `ready` sets the Ready condition; `virtual_node` labels it as a
/// Liqo virtual node.
pub fn node(name: &str, ready: bool, virtual_node: bool, cpu: &str, memory: &str) -> Value {
    let labels = if virtual_node {
        json!({ "liqo.io/type": "virtual-node", "kubernetes.io/hostname": name })
    } else {
        json!({ "kubernetes.io/hostname": name })
    };
    json!({
        "metadata": { "name": name, "labels": labels },
        "spec": {},
        "status": {
            "capacity": { "cpu": cpu, "memory": memory, "pods": "110" },
            "allocatable": { "cpu": cpu, "memory": memory, "pods": "110" },
            "conditions": [
                { "type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory" },
                { "type": "Ready", "status": if ready { "True" } else { "Unknown" },
                  "reason": if ready { "KubeletReady" } else { "NodeStatusUnknown" } }
            ]
        }
    })
}

/// A Pod in `default` with one container requesting `cpu` and `memory`,
/// with the tolerations DefaultTolerationSeconds gives every pod a real
/// server admits ([`crate::taints::default_tolerations`]).
pub fn pod(name: &str, node: &str, phase: &str, labels: Value, cpu: &str, memory: &str) -> Value {
    let mut pod = json!({
        "metadata": { "name": name, "namespace": "default", "labels": labels },
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "main",
                "image": "registry.k8s.io/pause:3.9",
                "resources": { "requests": { "cpu": cpu, "memory": memory } }
            }]
        },
        "status": { "phase": phase }
    });
    crate::taints::default_tolerations(&mut pod);
    pod
}

/// Whether a built-in kind's registry strategy keeps `metadata.generation`
/// — 1 on create, one more on every spec change — and drops a client's
/// `status` on create, as custom resources with a status subresource do:
/// Deployments and ReplicaSets (`pkg/registry/apps/deployment/strategy.go`,
/// `pkg/registry/apps/replicaset/strategy.go`, `PrepareForCreate`:
/// `Status = …Status{}`, `Generation = 1`; `PrepareForUpdate`: "Spec
/// updates bump the generation"), PodDisruptionBudgets
/// (`pkg/registry/policy/poddisruptionbudget/strategy.go`, the same two)
/// and NetworkPolicies (`pkg/registry/networking/networkpolicy/strategy.go`,
/// the same two; they have no status).
/// The controllers read `observedGeneration` against it, and eviction
/// refuses while a PodDisruptionBudget's status has not caught up.
pub fn strategy_keeps_generation(def: &ResourceDef) -> bool {
    !def.custom
        && matches!(
            (def.group.as_str(), def.plural.as_str()),
            ("apps", "deployments" | "replicasets")
                | ("policy", "poddisruptionbudgets")
                | (crate::network_policy::NETWORKING, "networkpolicies")
        )
}
