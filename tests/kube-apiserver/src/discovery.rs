//! Discovery documents, as kube-rs `Discovery` and client-go's discovery
//! client read them: `/api` (APIVersions), `/apis` (APIGroupList),
//! `/apis/{group}` (APIGroup), `/api/v1` and `/apis/{group}/{version}`
//! (APIResourceList, with `…/status` entries for status subresources,
//! `pods/binding`, `pods/eviction` and
//! `certificatesigningrequests/approval`), and
//! `/version`.

use serde_json::{json, Value};

use crate::crd::Registry;

/// Every verb a resource serves, as discovery lists them.
pub const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub fn api_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": address }],
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{name}/{v}"), "version": v }))
        .collect();
    json!({ "name": name, "versions": versions, "preferredVersion": versions[0] })
}

pub fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(name, versions)| group_json(name, versions))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let groups = registry.groups();
    let versions = groups.get(name)?;
    let mut group = group_json(name, versions);
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    Some(group)
}

/// The resources of `group/version`; `None` if none is served there.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for def in registry
        .all()
        .filter(|d| d.group == group && d.versions.iter().any(|v| v == version))
    {
        resources.push(json!({
            "name": def.plural,
            "singularName": def.singular,
            "namespaced": def.namespaced,
            "kind": def.kind,
            "verbs": VERBS,
            "shortNames": def.short_names,
            "categories": def.categories,
        }));
        if def.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", def.plural),
                "singularName": "",
                "namespaced": def.namespaced,
                "kind": def.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if !def.custom && def.group.is_empty() && def.plural == "pods" {
            // Schedulers bind through it (pkg/registry/core/rest/storage_core.go).
            resources.push(json!({
                "name": "pods/binding",
                "singularName": "",
                "namespaced": true,
                "kind": "Binding",
                "verbs": ["create"],
            }));
            // Evictions, of group policy (pkg/registry/core/pod/storage/eviction.go,
            // `GroupVersionKind`: policy/v1 Eviction).
            resources.push(json!({
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": true,
                "group": crate::builtin::POLICY,
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }));
        }
        if crate::csr::is_csr(def) {
            // The subresource CSR approval is written through
            // (pkg/registry/certificates/rest/storage_certificates.go).
            resources.push(json!({
                "name": format!("{}/approval", def.plural),
                "singularName": "",
                "namespaced": false,
                "kind": def.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "gitVersion": "v1.34.0+kube-test-server",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}
