//! A renderer for the subset of kustomize that `deploy/kubernetes` uses,
//! because neither `kustomize` nor `kubectl` can be installed where the
//! checks run. It implements `resources` (files of one or more YAML
//! documents, and directories holding their own `kustomization.yaml`),
//! `namespace`, `labels` (`pairs`, `includeSelectors`, `includeTemplates`)
//! and `images` (`name`, `newName`, `newTag`, `digest`), as kustomize v5
//! does. Every other field of a kustomization is refused with an error, so
//! a manifest cannot lean on something this renderer would silently leave
//! out — the checks would then judge objects that `kubectl apply -k` never
//! makes.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

/// The fields of a kustomization this renderer carries out.
pub const SUPPORTED_FIELDS: [&str; 6] = [
    "apiVersion",
    "kind",
    "resources",
    "namespace",
    "labels",
    "images",
];

/// Kinds that live outside namespaces: the `namespace` field leaves them
/// alone, as kustomize does.
const CLUSTER_SCOPED: [&str; 14] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "IngressClass",
    "RuntimeClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "APIService",
];

/// Kinds whose `spec.template` is a Pod template.
const WORKLOADS: [&str; 6] = [
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "ReplicationController",
];

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not YAML: {source}")]
    Yaml {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error(
        "{path}: kustomization field `{field}` is not implemented by deploy-check's renderer \
         (it implements {}); render it or leave it out",
        SUPPORTED_FIELDS.join(", ")
    )]
    Unsupported { path: PathBuf, field: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

fn invalid(path: &Path, message: impl Into<String>) -> RenderError {
    RenderError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Labels {
    #[serde(default)]
    pairs: Map<String, Value>,
    #[serde(default)]
    include_selectors: bool,
    #[serde(default)]
    include_templates: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Image {
    name: String,
    new_name: Option<String>,
    new_tag: Option<String>,
    digest: Option<String>,
}

/// Render the kustomization in `dir` (its `kustomization.yaml`): every
/// object, in the order kustomize emits them for these fields (the
/// resources' order).
pub fn render(dir: &Path) -> Result<Vec<Value>, RenderError> {
    let path = dir.join("kustomization.yaml");
    if !path.is_file() {
        for other in ["kustomization.yml", "Kustomization"] {
            if dir.join(other).exists() {
                return Err(invalid(
                    &dir.join(other),
                    "only kustomization.yaml is read; rename it",
                ));
            }
        }
    }
    let text = read(&path)?;
    let doc: Value = serde_yaml::from_str(&text).map_err(|source| RenderError::Yaml {
        path: path.clone(),
        source,
    })?;
    let Value::Object(fields) = doc else {
        return Err(invalid(&path, "a kustomization is a mapping"));
    };
    if let Some(field) = fields
        .keys()
        .find(|k| !SUPPORTED_FIELDS.contains(&k.as_str()))
    {
        return Err(RenderError::Unsupported {
            path,
            field: field.clone(),
        });
    }
    let expect = |key: &str, want: &str| match fields.get(key) {
        None => Ok(()),
        Some(v) if v == want => Ok(()),
        Some(v) => Err(invalid(&path, format!("{key} must be {want}, not {v}"))),
    };
    expect("apiVersion", "kustomize.config.k8s.io/v1beta1")?;
    expect("kind", "Kustomization")?;

    let mut objects = Vec::new();
    for entry in list_of_strings(&path, &fields, "resources")? {
        if entry.contains("://") || entry.starts_with("github.com/") {
            return Err(invalid(
                &path,
                format!("remote resource {entry}: not fetched"),
            ));
        }
        let target = dir.join(&entry);
        if target.is_dir() {
            objects.extend(render(&target)?);
        } else {
            objects.extend(read_documents(&target)?);
        }
    }

    if let Some(namespace) = fields.get("namespace") {
        let namespace = namespace
            .as_str()
            .ok_or_else(|| invalid(&path, "namespace must be a string"))?;
        for object in &mut objects {
            set_namespace(object, namespace);
        }
    }
    if let Some(labels) = fields.get("labels") {
        let labels: Vec<Labels> = serde_json::from_value(labels.clone())
            .map_err(|e| invalid(&path, format!("labels: {e}")))?;
        for set in &labels {
            for object in &mut objects {
                add_labels(object, set);
            }
        }
    }
    if let Some(images) = fields.get("images") {
        let images: Vec<Image> = serde_json::from_value(images.clone())
            .map_err(|e| invalid(&path, format!("images: {e}")))?;
        for object in &mut objects {
            for image in &images {
                set_image(object, image);
            }
        }
    }
    Ok(objects)
}

fn read(path: &Path) -> Result<String, RenderError> {
    std::fs::read_to_string(path).map_err(|source| RenderError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn list_of_strings(
    path: &Path,
    fields: &Map<String, Value>,
    key: &str,
) -> Result<Vec<String>, RenderError> {
    match fields.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid(path, format!("{key}: {i} is not a string")))
            })
            .collect(),
        Some(other) => Err(invalid(path, format!("{key} must be a list, not {other}"))),
    }
}

/// Every non-empty YAML document of a manifest file.
pub fn read_documents(path: &Path) -> Result<Vec<Value>, RenderError> {
    let text = read(path)?;
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = Value::deserialize(document).map_err(|source| RenderError::Yaml {
            path: path.to_path_buf(),
            source,
        })?;
        match value {
            Value::Null => {}
            Value::Object(_) if value["kind"].is_string() && value["apiVersion"].is_string() => {
                out.push(value)
            }
            other => {
                return Err(invalid(
                    path,
                    format!("a document without apiVersion and kind: {other}"),
                ))
            }
        }
    }
    Ok(out)
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

/// kustomize's namespace transformer: `metadata.namespace` of namespaced
/// objects, and of binding subjects named `default` (its default
/// `DefaultSubjectsOnly` mode; other subjects keep what they say).
fn set_namespace(object: &mut Value, namespace: &str) {
    let kind = kind(object).to_string();
    if !CLUSTER_SCOPED.contains(&kind.as_str()) {
        object["metadata"]["namespace"] = Value::from(namespace);
    }
    if kind == "RoleBinding" || kind == "ClusterRoleBinding" {
        if let Some(subjects) = object["subjects"].as_array_mut() {
            for subject in subjects {
                if subject["name"] == "default" {
                    subject["namespace"] = Value::from(namespace);
                }
            }
        }
    }
}

fn merge_labels(target: &mut Value, pairs: &Map<String, Value>) {
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Some(map) = target.as_object_mut() {
        for (k, v) in pairs {
            map.insert(k.clone(), v.clone());
        }
    }
}

fn add_labels(object: &mut Value, set: &Labels) {
    let kind = kind(object).to_string();
    merge_labels(&mut object["metadata"]["labels"], &set.pairs);
    let workload = WORKLOADS.contains(&kind.as_str());
    if workload && (set.include_selectors || set.include_templates) {
        merge_labels(
            &mut object["spec"]["template"]["metadata"]["labels"],
            &set.pairs,
        );
    }
    if set.include_selectors {
        if workload && kind != "ReplicationController" {
            merge_labels(&mut object["spec"]["selector"]["matchLabels"], &set.pairs);
        }
        if kind == "Service" || kind == "ReplicationController" {
            merge_labels(&mut object["spec"]["selector"], &set.pairs);
        }
    }
}

/// The name part of an image reference (no tag, no digest).
pub fn image_name(reference: &str) -> &str {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    // A tag follows the last ':' after the last '/' (a registry port
    // comes before a '/').
    let slash = without_digest.rfind('/').map_or(0, |i| i + 1);
    match without_digest[slash..].rfind(':') {
        Some(colon) => &without_digest[..slash + colon],
        None => without_digest,
    }
}

fn set_image(object: &mut Value, image: &Image) {
    if !WORKLOADS.contains(&kind(object)) {
        return;
    }
    let spec = &mut object["spec"]["template"]["spec"];
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec[list].as_array_mut() else {
            continue;
        };
        for container in containers {
            let Some(current) = container["image"].as_str() else {
                continue;
            };
            if image_name(current) != image.name {
                continue;
            }
            let name = image.new_name.as_deref().unwrap_or(&image.name);
            let rest = &current[image_name(current).len()..];
            let updated = match (&image.digest, &image.new_tag) {
                (Some(digest), _) => format!("{name}@{digest}"),
                (None, Some(tag)) => format!("{name}:{tag}"),
                (None, None) => format!("{name}{rest}"),
            };
            container["image"] = Value::from(updated);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: example/web:dev\n";

    #[test]
    fn renders_namespace_labels_images_and_nested_kustomizations() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base");
        std::fs::create_dir(&base).unwrap();
        write(&base, "kustomization.yaml", "resources: [web.yaml]\n");
        write(&base, "web.yaml", DEPLOYMENT);
        write(
            dir.path(),
            "rbac.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\nrules: []\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}\n\
             subjects:\n- {kind: ServiceAccount, name: default}\n- {kind: ServiceAccount, name: web, namespace: elsewhere}\n",
        );
        write(
            dir.path(),
            "kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: shop\n\
             resources: [base, rbac.yaml]\n\
             labels:\n- pairs: {team: a}\n- pairs: {tier: front}\n  includeSelectors: true\n\
             images:\n- name: example/web\n  newName: registry.example:5000/web\n  newTag: v1\n",
        );
        let objects = render(dir.path()).unwrap();
        assert_eq!(objects.len(), 3);
        let web = &objects[0];
        assert_eq!(web["metadata"]["namespace"], "shop");
        assert_eq!(web["metadata"]["labels"]["team"], "a");
        assert_eq!(web["spec"]["selector"]["matchLabels"].get("team"), None);
        assert_eq!(web["spec"]["selector"]["matchLabels"]["tier"], "front");
        assert_eq!(
            web["spec"]["template"]["metadata"]["labels"]["tier"],
            "front"
        );
        assert_eq!(
            web["spec"]["template"]["spec"]["containers"][0]["image"],
            "registry.example:5000/web:v1"
        );
        // Cluster-scoped objects keep no namespace.
        assert_eq!(objects[1]["metadata"].get("namespace"), None);
        let subjects = &objects[2]["subjects"];
        assert_eq!(subjects[0]["namespace"], "shop");
        assert_eq!(subjects[1]["namespace"], "elsewhere");
    }

    #[test]
    fn refuses_a_field_it_does_not_implement() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "web.yaml", DEPLOYMENT);
        for field in [
            "patches: []",
            "configMapGenerator: []",
            "commonLabels: {a: b}",
            "replicas: []",
        ] {
            write(
                dir.path(),
                "kustomization.yaml",
                &format!("resources: [web.yaml]\n{field}\n"),
            );
            let error = render(dir.path()).unwrap_err();
            let name = field.split(':').next().unwrap();
            assert!(
                matches!(&error, RenderError::Unsupported { field, .. } if field == name),
                "{error}"
            );
            assert!(error.to_string().contains("not implemented"), "{error}");
        }
        // Unknown keys inside an implemented field are refused too.
        write(
            dir.path(),
            "kustomization.yaml",
            "resources: [web.yaml]\nlabels:\n- pairs: {a: b}\n  fields: []\n",
        );
        assert!(render(dir.path()).is_err());
    }

    #[test]
    fn image_names_drop_tags_and_digests_but_keep_registry_ports() {
        assert_eq!(image_name("a/b:1"), "a/b");
        assert_eq!(image_name("host:5000/a/b"), "host:5000/a/b");
        assert_eq!(image_name("host:5000/a/b:v2@sha256:ff"), "host:5000/a/b");
        assert_eq!(image_name("b"), "b");
    }
}
