//! The resources the server knows: one [`ResourceDef`] per group and
//! resource, built in (the `builtin` module) or read from a
//! `CustomResourceDefinition` manifest (`apiextensions.k8s.io/v1`, YAML,
//! one or more documents), with its versions, scope, names, status
//! subresource and `openAPIV3Schema` per version.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// A group and resource (`authentication.liqo.io`, `resourceslices`; the
/// core group is `""`): what objects are stored under, whatever version a
/// client asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

impl From<(&str, &str)> for GroupResource {
    fn from((group, resource): (&str, &str)) -> Self {
        Self::new(group, resource)
    }
}

impl From<&GroupResource> for GroupResource {
    fn from(gr: &GroupResource) -> Self {
        gr.clone()
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// Everything the server needs to serve one resource.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// `""` for the core group.
    pub group: String,
    /// Served versions; the first is the storage (and preferred) one.
    pub versions: Vec<String>,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// Writes to the resource ignore `.status`; `/status` writes change
    /// only `.status`.
    pub status_subresource: bool,
    /// From a CRD: `resourceVersion` is required on update, `generation`
    /// is kept, strategic merge patch is refused.
    pub custom: bool,
    /// `openAPIV3Schema` per version (custom resources only).
    pub schemas: BTreeMap<String, Value>,
    /// `fieldSelector` fields beyond `metadata.name`/`metadata.namespace`.
    pub selectable_fields: Vec<String>,
}

impl ResourceDef {
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }

    pub fn storage_version(&self) -> &str {
        &self.versions[0]
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The fields a `fieldSelector` may name.
    pub fn field_selectable(&self, field: &str) -> bool {
        field == "metadata.name"
            || (field == "metadata.namespace" && self.namespaced)
            || self.selectable_fields.iter().any(|f| f == field)
    }
}

/// The registry: every resource served, by group and resource.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    defs: BTreeMap<GroupResource, Arc<ResourceDef>>,
}

impl Registry {
    pub fn register(&mut self, def: ResourceDef) {
        self.defs.insert(def.group_resource(), Arc::new(def));
    }

    /// Stop serving a resource (its CRD deleted).
    pub fn unregister(&mut self, gr: &GroupResource) {
        self.defs.remove(gr);
    }

    pub fn get(&self, gr: &GroupResource) -> Option<Arc<ResourceDef>> {
        self.defs.get(gr).cloned()
    }

    /// The resource served at `group/version/plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.defs
            .get(&GroupResource::new(group, plural))
            .filter(|d| d.versions.iter().any(|v| v == version))
            .cloned()
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.defs.values()
    }

    /// Every served group (core excluded) with its versions, preferred
    /// first.
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for def in self.defs.values().filter(|d| !d.group.is_empty()) {
            let versions = groups.entry(def.group.clone()).or_default();
            for v in &def.versions {
                if !versions.contains(v) {
                    versions.push(v.clone());
                }
            }
        }
        groups
    }
}

/// Read every CRD in a YAML file (documents separated by `---`).
pub fn read_crd_file(path: &Path) -> Result<Vec<ResourceDef>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path:?}"))?;
    parse_crds(&text).with_context(|| format!("loading CRDs from {path:?}"))
}

/// Parse every CRD in YAML text (other documents are an error).
pub fn parse_crds(text: &str) -> Result<Vec<ResourceDef>> {
    let mut defs = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(document)?;
        if value.is_null() {
            continue;
        }
        defs.push(crd_definition(&value)?);
    }
    Ok(defs)
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// One `CustomResourceDefinition` as a [`ResourceDef`].
pub fn crd_definition(crd: &Value) -> Result<ResourceDef> {
    if crd["apiVersion"] != "apiextensions.k8s.io/v1" || crd["kind"] != "CustomResourceDefinition" {
        bail!(
            "not an apiextensions.k8s.io/v1 CustomResourceDefinition: {} {}",
            crd["apiVersion"],
            crd["kind"]
        );
    }
    let spec = &crd["spec"];
    let text = |v: &Value, what: &str| -> Result<String> {
        v.as_str()
            .map(str::to_string)
            .with_context(|| format!("CRD without {what}"))
    };
    let group = text(&spec["group"], "spec.group")?;
    let names = &spec["names"];
    let plural = text(&names["plural"], "spec.names.plural")?;
    let kind = text(&names["kind"], "spec.names.kind")?;
    let expected = format!("{plural}.{group}");
    if crd["metadata"]["name"].as_str() != Some(expected.as_str()) {
        bail!(
            "metadata.name {} must be {expected}",
            crd["metadata"]["name"]
        );
    }
    let namespaced = match spec["scope"].as_str() {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        other => bail!("spec.scope must be Namespaced or Cluster, not {other:?}"),
    };
    let mut versions = Vec::new();
    let mut schemas = BTreeMap::new();
    let mut status_subresource = false;
    let mut selectable_fields = Vec::new();
    let listed = spec["versions"]
        .as_array()
        .context("CRD without versions")?;
    for v in listed {
        if v["served"] != true {
            continue;
        }
        let name = text(&v["name"], "a version name")?;
        if v["subresources"]["status"].is_object() {
            status_subresource = true;
        }
        for f in v["selectableFields"].as_array().into_iter().flatten() {
            if let Some(path) = f["jsonPath"].as_str() {
                let field = path.trim_start_matches('.').to_string();
                if !selectable_fields.contains(&field) {
                    selectable_fields.push(field);
                }
            }
        }
        let schema = v["schema"]["openAPIV3Schema"].clone();
        // A rule or pattern this server cannot enforce fails the load, so
        // nothing a test relies on goes silently unchecked.
        crate::rule_check::check_schema(&schema)
            .with_context(|| format!("CRD {expected} version {name}: openAPIV3Schema"))?;
        if schema.is_object() {
            schemas.insert(name.clone(), schema);
        }
        if v["storage"] == true {
            versions.insert(0, name);
        } else {
            versions.push(name);
        }
    }
    if versions.is_empty() {
        bail!("CRD {expected} serves no version");
    }
    Ok(ResourceDef {
        group,
        versions,
        singular: names["singular"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_lowercase()),
        list_kind: names["listKind"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{kind}List")),
        short_names: strings(&names["shortNames"]),
        categories: strings(&names["categories"]),
        plural,
        kind,
        namespaced,
        status_subresource,
        custom: true,
        schemas,
        selectable_fields,
    })
}

/// The folder of vendored Liqo CRDs of a tag (`crds/liqo-v1.2.0`).
pub fn liqo_crd_dir(tag: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crds")
        .join(format!("liqo-{tag}"))
}

/// Every `*.yaml` of a folder, in name order.
pub fn read_crd_dir(dir: &Path) -> Result<Vec<ResourceDef>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {dir:?}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut defs = Vec::new();
    for file in files {
        defs.extend(read_crd_file(&file)?);
    }
    Ok(defs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liqo_v1_2_0_crds_load_with_their_names_scope_and_status() {
        let defs = read_crd_dir(&liqo_crd_dir("v1.2.0")).unwrap();
        let by = |plural: &str| defs.iter().find(|d| d.plural == plural).unwrap();
        let slices = by("resourceslices");
        assert_eq!(slices.group, "authentication.liqo.io");
        assert_eq!(slices.versions, ["v1beta1"]);
        assert_eq!(slices.kind, "ResourceSlice");
        assert_eq!(slices.short_names, ["rslice"]);
        assert!(slices.namespaced && slices.status_subresource && slices.custom);
        assert!(slices.schemas["v1beta1"]["properties"]["spec"].is_object());
        let fc = by("foreignclusters");
        assert_eq!(fc.group, "core.liqo.io");
        assert!(!fc.namespaced);
        let quotas = by("quotas");
        assert!(!quotas.status_subresource, "quotas declare no status");
        for plural in ["tenants", "namespaceoffloadings", "virtualnodes"] {
            assert!(by(plural).status_subresource, "{plural}");
        }
        let shadow_slices = by("shadowendpointslices");
        assert_eq!(shadow_slices.group, "offloading.liqo.io");
        assert!(shadow_slices.namespaced && !shadow_slices.status_subresource);
        let old = read_crd_dir(&liqo_crd_dir("v0.10.3")).unwrap();
        assert_eq!(old[0].group, "discovery.liqo.io");
        assert_eq!(old[0].versions, ["v1alpha1"]);
    }

    /// Every CRD the product ships (`deploy/**/crd*.yaml`) loads, so each
    /// of its rules and patterns is one this server enforces.
    #[test]
    fn the_shipped_crds_load_with_every_rule_enforceable() {
        fn walk(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if path.is_dir() {
                    walk(&path, found);
                } else if name.starts_with("crd") && name.ends_with(".yaml") {
                    found.push(path);
                }
            }
        }
        let mut found = Vec::new();
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy"),
            &mut found,
        );
        assert!(!found.is_empty(), "no CRD under deploy/");
        for path in found {
            let defs = read_crd_file(&path).unwrap_or_else(|e| panic!("{path:?}: {e:#}"));
            assert!(!defs.is_empty(), "{path:?}");
        }
    }

    #[test]
    fn not_a_crd_is_refused() {
        assert!(parse_crds("apiVersion: v1\nkind: Pod\n").is_err());
        let wrong_name = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
            metadata: {name: x.example.com}\nspec: {group: example.com, scope: Namespaced,\n\
            names: {plural: widgets, kind: Widget}, versions: [{name: v1, served: true, storage: true}]}\n";
        assert!(parse_crds(wrong_name).is_err());
        let ok = wrong_name.replace("x.example.com", "widgets.example.com");
        let defs = parse_crds(&ok).unwrap();
        assert_eq!(defs[0].list_kind, "WidgetList");
        assert_eq!(defs[0].singular, "widget");
    }
}
