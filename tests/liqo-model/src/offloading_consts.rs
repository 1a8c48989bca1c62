//! Liqo's names for what offloading reads and writes (namespaces placed on
//! other clusters, pods reflected as ShadowPods), each with the v1.2.0 file
//! that defines it; the peering vocabulary is in [`crate::consts`].

use kube::api::ApiResource;
use kube::core::GroupVersionKind;

/// `pkg/consts/namespace_mapping.go:32`: the pod webhook's namespace selector.
pub const SCHEDULING_ENABLED: &str = "liqo.io/scheduling-enabled";
/// `pkg/consts/namespace_mapping.go:34`.
pub const SCHEDULING_ENABLED_VALUE: &str = "true";
/// `pkg/consts/namespace_mapping.go:30`.
pub const OFFLOADING_NAME: &str = "offloading";
/// `pkg/consts/namespace_mapping.go:37`.
pub const MANAGED_BY_NAMESPACE_MAP: &str = "liqo.io/managed-by-namespace-map";
/// `pkg/consts/namespace_mapping.go:39`.
pub const ORIGINAL_NAME: &str = "liqo.io/original-name";
/// `pkg/virtualKubelet/forge/meta.go:28`.
pub const ORIGIN: &str = "offloading.liqo.io/origin";
/// `pkg/virtualKubelet/forge/meta.go:30`.
pub const DESTINATION: &str = "offloading.liqo.io/destination";
/// `pkg/virtualKubelet/forge/meta.go:32`.
pub const ORIGIN_NODE_NAME: &str = "offloading.liqo.io/nodename";
/// `pkg/consts/replication.go:46-48`: set on
/// each ShadowPod by its controller (`shadowpod_controller.go:85-86`).
pub const MANAGED_BY: (&str, &str) = ("liqo.io/managed-by", "shadowpod");
/// `pkg/consts/replication.go:62`: an object marked so is not reflected.
pub const SKIP_REFLECTION: &str = "liqo.io/skip-reflection";
/// `pkg/consts/replication.go:65`: an object marked so is reflected (the
/// `AllowList` policy's mark).
pub const ALLOW_REFLECTION: &str = "liqo.io/allow-reflection";
/// `pkg/consts/replication.go:59`: a Service whose remote copy keeps its
/// node ports.
pub const FORCE_REMOTE_NODE_PORT: &str = "liqo.io/force-remote-node-port";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn namespace_offloadings() -> ApiResource {
    resource(
        "offloading.liqo.io",
        "v1beta1",
        "NamespaceOffloading",
        "namespaceoffloadings",
    )
}

pub fn namespace_maps() -> ApiResource {
    resource(
        "offloading.liqo.io",
        "v1beta1",
        "NamespaceMap",
        "namespacemaps",
    )
}

pub fn shadow_pods() -> ApiResource {
    resource("offloading.liqo.io", "v1beta1", "ShadowPod", "shadowpods")
}

pub fn pods() -> ApiResource {
    resource("", "v1", "Pod", "pods")
}

pub fn secrets() -> ApiResource {
    resource("", "v1", "Secret", "secrets")
}

pub fn config_maps() -> ApiResource {
    resource("", "v1", "ConfigMap", "configmaps")
}

pub fn services() -> ApiResource {
    resource("", "v1", "Service", "services")
}
