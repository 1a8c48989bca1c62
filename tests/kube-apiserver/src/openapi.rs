//! The OpenAPI v3 documents, as far as a real client reads them: the
//! root `/openapi/v3`, which maps each group-version's path (`api/v1`,
//! `apis/apps/v1`) to its document's URL with a `hash` of the content
//! (`k8s.io/kube-openapi/pkg/handler3/handler.go`: `OpenAPIV3Discovery`,
//! `serverRelativeURL`; clients cache a document by that URL,
//! `staging/src/k8s.io/client-go/openapi/cached/groupversion.go`), and each
//! `/openapi/v3/{api/v1|apis/{group}/{version}}` document.
//!
//! What kubectl 1.35 takes from them (Kubernetes v1.35,
//! `staging/src/k8s.io/kubectl/pkg/cmd/apply/patcher.go`,
//! `staging/src/k8s.io/cli-runtime/pkg/resource/query_param_verifier_v3.go`,
//! `staging/src/k8s.io/kubectl/pkg/cmd/util/factory_client_access.go`
//! `Validator`):
//!
//! - whether the PATCH operation of a kind — the path item whose `patch`
//!   carries `x-kubernetes-group-version-kind` — lists the query parameter
//!   `fieldValidation`: if so, `--validate=strict` (the default) is left to
//!   the server (`fieldValidation=Strict`), else kubectl validates against
//!   `/openapi/v2` itself, which this server does not serve;
//! - whether that operation's `requestBody` accepts
//!   `application/strategic-merge-patch+json` (built-in kinds, as
//!   `staging/src/k8s.io/apiserver/pkg/endpoints/installer.go` lists
//!   for them; never custom resources): then the patch is computed from
//!   the `components.schemas` entry whose `x-kubernetes-group-version-kind`
//!   names the kind. This server publishes the schemas of custom
//!   resources (their CRD's `openAPIV3Schema`) but none of built-in kinds,
//!   so kubectl computes a built-in kind's strategic merge patch from its
//!   compiled-in Go types — the same patch (patcher.go falls back to
//!   `buildStrategicMergeFromBuiltins` when no schema names the kind).
//!
//! Paths and operations are those installer.go registers for each verb
//! served (`VERBS` in [`crate::discovery`]), with their `operationId`,
//! `x-kubernetes-action` and query parameters.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use serde_json::{json, Map, Value};

use crate::crd::{Registry, ResourceDef};

/// The path of a group-version in the root document: `api/v1`,
/// `apis/{group}/{version}` (client-go `openapi3.GroupVersionToAPIPath`).
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Every served group-version.
fn group_versions(registry: &Registry) -> Vec<(String, String)> {
    let mut gvs: Vec<(String, String)> = registry
        .all()
        .flat_map(|d| d.versions.iter().map(|v| (d.group.clone(), v.clone())))
        .collect();
    gvs.sort();
    gvs.dedup();
    gvs
}

/// A hash of a document, so that its URL changes with its content (the
/// real handler's is an upper-case hex SHA-512; any digest that changes
/// with the content serves clients' caches the same).
fn content_hash(document: &Value) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    document.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// `/openapi/v3`.
pub fn root(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(registry) {
        let Some(document) = group_version(registry, &group, &version) else {
            continue;
        };
        let path = gv_path(&group, &version);
        let url = format!("/openapi/v3/{path}?hash={}", content_hash(&document));
        paths.insert(path, json!({ "serverRelativeURL": url }));
    }
    json!({ "paths": paths })
}

/// The document of `/openapi/v3/{rest}` (`rest`: `api/v1`,
/// `apis/{group}/{version}`), if such a group-version is served.
pub fn document(registry: &Registry, rest: &[&str]) -> Option<Value> {
    match rest {
        ["api", version] => group_version(registry, "", version),
        ["apis", group, version] => group_version(registry, group, version),
        _ => None,
    }
}

/// A query parameter of an operation, as installer.go documents it.
fn query(name: &str, description: &str, kind: &str) -> Value {
    json!({
        "name": name, "in": "query", "description": description,
        "schema": { "type": kind, "uniqueItems": true },
    })
}

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name, "in": "path", "description": description, "required": true,
        "schema": { "type": "string", "uniqueItems": true },
    })
}

/// The query parameters of a write (`CreateOptions`, `UpdateOptions`,
/// `PatchOptions`: `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go`).
fn write_params(patch: bool) -> Vec<Value> {
    let mut params = vec![
        query(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
            "string",
        ),
        query(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
            "string",
        ),
        query(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request \
             containing unknown or duplicate fields. Valid values are: Ignore, Warn (the \
             default), Strict.",
            "string",
        ),
    ];
    if patch {
        params.push(query(
            "force",
            "Force is going to \"force\" Apply requests.",
            "boolean",
        ));
    }
    params
}

/// The kind's operation id stem: `Namespaced` + `ConfigMap`, with the
/// group's and version's names as installer.go joins them
/// (`patchCoreV1NamespacedConfigMap`, `patchAppsV1NamespacedDeployment`).
fn op_id(verb: &str, def: &ResourceDef, version: &str, suffix: &str) -> String {
    let title = |s: &str| {
        s.split(['.', '-'])
            .next()
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    };
    let group = if def.group.is_empty() {
        "Core".to_string()
    } else {
        title(&def.group)
    };
    let scope = if def.namespaced { "Namespaced" } else { "" };
    format!("{verb}{group}{}{scope}{}{suffix}", title(version), def.kind)
}

/// One operation on `def`'s objects.
fn operation(
    def: &ResourceDef,
    version: &str,
    verb: &str,
    action: &str,
    suffix: &str,
    params: Vec<Value>,
    body: Option<Vec<&str>>,
) -> Value {
    let mut op = json!({
        "operationId": op_id(verb, def, version, suffix),
        "tags": [format!("{}_{version}", if def.group.is_empty() { "core" } else { def.group.as_str() })],
        "parameters": params,
        "responses": { "200": { "description": "OK" }, "401": { "description": "Unauthorized" } },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": { "group": def.group, "version": version, "kind": def.kind },
    });
    if let Some(types) = body {
        let content: Map<String, Value> = types
            .into_iter()
            .map(|t| (t.to_string(), json!({ "schema": { "type": "object" } })))
            .collect();
        op["requestBody"] = json!({ "content": content, "required": true });
    }
    op
}

/// The content types a PATCH accepts (installer.go: strategic merge for
/// built-in kinds only, `supportsStrategicMerge`; apply for all).
fn patch_types(def: &ResourceDef) -> Vec<&'static str> {
    let mut types = vec![
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if !def.custom {
        types.push("application/strategic-merge-patch+json");
    }
    types
}

/// The paths of one resource: collection and object, and `/status`.
fn resource_paths(def: &ResourceDef, version: &str, paths: &mut BTreeMap<String, Value>) {
    let prefix = if def.group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{}/{version}", def.group)
    };
    let (collection, mut scope_params) = if def.namespaced {
        (
            format!("{prefix}/namespaces/{{namespace}}/{}", def.plural),
            vec![path_param(
                "namespace",
                "object name and auth scope, such as for teams and projects",
            )],
        )
    } else {
        (format!("{prefix}/{}", def.plural), Vec::new())
    };
    let object = format!("{collection}/{{name}}");
    let body = Some(vec!["*/*"]);
    let mut list_params = scope_params.clone();
    for (name, kind) in [
        ("labelSelector", "string"),
        ("fieldSelector", "string"),
        ("limit", "integer"),
        ("continue", "string"),
        ("resourceVersion", "string"),
        ("resourceVersionMatch", "string"),
        ("watch", "boolean"),
    ] {
        list_params.push(query(name, name, kind));
    }
    let mut create_params = scope_params.clone();
    create_params.extend(write_params(false));
    paths.insert(
        collection,
        json!({
            "get": operation(def, version, "list", "list", "", list_params, None),
            "post": operation(def, version, "create", "post", "", create_params, body.clone()),
            "delete": operation(def, version, "deleteCollection", "deletecollection", "", scope_params.clone(), body.clone()),
        }),
    );
    scope_params.insert(0, path_param("name", &format!("name of the {}", def.kind)));
    let mut update_params = scope_params.clone();
    update_params.extend(write_params(false));
    let mut patch_params = scope_params.clone();
    patch_params.extend(write_params(true));
    let item = |suffix: &str| {
        json!({
            "get": operation(def, version, "read", "get", suffix, scope_params.clone(), None),
            "put": operation(def, version, "replace", "put", suffix, update_params.clone(), body.clone()),
            "patch": operation(def, version, "patch", "patch", suffix, patch_params.clone(), Some(patch_types(def))),
        })
    };
    let mut main = item("");
    main["delete"] = operation(
        def,
        version,
        "delete",
        "delete",
        "",
        scope_params.clone(),
        body.clone(),
    );
    paths.insert(object.clone(), main);
    if def.status_subresource {
        paths.insert(format!("{object}/status"), item("Status"));
    }
}

/// The name of a schema in `components.schemas`: the group reversed, the
/// version, the kind (`io.liqo.offloading.v1beta1.NamespaceOffloading`,
/// as the CRD OpenAPI builder names it:
/// `apiextensions-apiserver/pkg/controller/openapi/builder/builder.go`).
fn schema_name(def: &ResourceDef, version: &str) -> String {
    let mut parts: Vec<&str> = def.group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{}", parts.join("."), def.kind)
}

/// `/openapi/v3/apis/{group}/{version}` (or `api/v1`), if served.
pub fn group_version(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = BTreeMap::new();
    let mut schemas = Map::new();
    for def in registry
        .all()
        .filter(|d| d.group == group && d.versions.iter().any(|v| v == version))
    {
        resource_paths(def, version, &mut paths);
        if let Some(schema) = def.schemas.get(version) {
            let mut schema = schema.clone();
            schema["x-kubernetes-group-version-kind"] =
                json!([{ "group": def.group, "version": version, "kind": def.kind }]);
            schemas.insert(schema_name(def, version), schema);
        }
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": crate::discovery::version()["gitVersion"] },
        "paths": paths,
        "components": { "schemas": schemas },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;

    fn registry() -> Registry {
        let mut registry = Registry::default();
        for def in builtin::definitions() {
            registry.register(def);
        }
        registry
    }

    /// The PATCH operation of `kind` in a document, as kubectl finds it
    /// (query_param_verifier_v3.go `supportsQueryParamV3`).
    fn patch_of<'a>(doc: &'a Value, kind: &str) -> &'a Value {
        doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .find(|p| p["patch"]["x-kubernetes-group-version-kind"]["kind"] == kind)
            .map(|p| &p["patch"])
            .unwrap()
    }

    #[test]
    fn the_root_names_each_group_version_with_a_content_hash() {
        let registry = registry();
        let root = root(&registry);
        let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        assert!(root["paths"]["api/v1"].is_object());
        let mut more = registry.clone();
        more.register(ResourceDef {
            kind: "Other".into(),
            plural: "others".into(),
            ..(*more.find("apps", "v1", "deployments").unwrap()).clone()
        });
        let changed = super::root(&more);
        assert_ne!(
            changed["paths"]["apis/apps/v1"]["serverRelativeURL"],
            root["paths"]["apis/apps/v1"]["serverRelativeURL"],
            "a changed document gets a new URL"
        );
    }

    #[test]
    fn patch_operations_take_field_validation_and_strategic_merge_for_built_ins() {
        let doc = group_version(&registry(), "apps", "v1").unwrap();
        let patch = patch_of(&doc, "Deployment");
        assert_eq!(patch["operationId"], "patchAppsV1NamespacedDeployment");
        let params: Vec<&str> = patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert!(params.contains(&"fieldValidation"), "{params:?}");
        assert!(
            patch["requestBody"]["content"]["application/strategic-merge-patch+json"].is_object()
        );
        assert!(
            doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"]
                .is_object()
        );
        let core = group_version(&registry(), "", "v1").unwrap();
        assert_eq!(
            patch_of(&core, "Namespace")["operationId"],
            "patchCoreV1Namespace"
        );
        assert!(group_version(&registry(), "nope.io", "v1").is_none());
    }

    #[test]
    fn custom_resources_publish_their_schema_and_no_strategic_merge() {
        let mut registry = registry();
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.io"},
            "spec": {"group": "example.io", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "properties": {"spec": {"type": "object"}}}}}]},
        });
        registry.register(crate::crd::crd_definition(&crd).unwrap());
        let doc = document(&registry, &["apis", "example.io", "v1"]).unwrap();
        let patch = patch_of(&doc, "Widget");
        assert!(patch["requestBody"]["content"]["application/merge-patch+json"].is_object());
        assert!(
            patch["requestBody"]["content"]["application/strategic-merge-patch+json"].is_null()
        );
        let schema = &doc["components"]["schemas"]["io.example.v1.Widget"];
        assert_eq!(
            schema["x-kubernetes-group-version-kind"][0]["kind"],
            "Widget"
        );
        assert_eq!(schema["properties"]["spec"]["type"], "object");
    }
}
