//! The kustomize bases `deploy/kubernetes/<name>/` are generated from the
//! Helm chart `charts/liqo-broker`: never two hand-kept copies of one
//! manifest. `deploy/kubernetes/bases.yaml` names each base, its namespace
//! and the chart values it is rendered with; `helm template` renders it,
//! each template file becoming one file of the base (its comments kept)
//! beside a generated `kustomization.yaml` listing them.
//!
//! [`render`] computes every base's files, [`differences`] compares them
//! with the repository (deploy-check fails on any), [`write`] replaces
//! them (`deploy-check render-bases`, `scripts/render-manifests.sh`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml_ng::{Mapping, Value};

use crate::helm::{Helm, HelmError};

/// The file naming the bases, in the deploy directory.
pub const BASES_FILE: &str = "bases.yaml";

/// The release name the bases are rendered as (names in the chart are
/// fixed, so it appears nowhere in the output).
pub const RELEASE: &str = "liqo-broker";

/// Why the bases could not be rendered or compared.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {error}")]
    Yaml {
        path: PathBuf,
        error: serde_yaml_ng::Error,
    },
    #[error("base {base}: {error}")]
    Helm { base: String, error: HelmError },
    #[error("base {base}: helm printed a document without a `# Source:` line: {document}")]
    NoSource { base: String, document: String },
    #[error(
        "base {base}: the template {source_path} is not the component's \
         (templates/{base}/…) nor the chart's own (templates/<file>)"
    )]
    ForeignTemplate { base: String, source_path: String },
    #[error("base {base}: templates {first} and {second} would both be {file}")]
    SameFile {
        base: String,
        file: String,
        first: String,
        second: String,
    },
    #[error("base {base}: the chart renders nothing")]
    Empty { base: String },
}

/// One base, as `bases.yaml` describes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Base {
    /// Its directory under the deploy directory.
    pub name: String,
    /// The namespace it renders into: its kustomization's `namespace`.
    pub namespace: String,
    /// What its kustomization.yaml says about it, as comments.
    pub about: String,
    /// Chart values beside the defaults (every component but these off).
    #[serde(default)]
    pub values: Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BasesFile {
    /// Chart values every base renders with, under its own (the
    /// placeholder `images.registry` the chart requires).
    #[serde(default)]
    values: Value,
    bases: Vec<Base>,
}

/// A base's files: name → content.
pub type Files = BTreeMap<String, String>;

/// One rendered base.
#[derive(Debug, Clone)]
pub struct RenderedBase {
    pub name: String,
    pub files: Files,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BaseError + '_ {
    move |error| BaseError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// `deploy/bases.yaml`.
fn read_file(deploy: &Path) -> Result<BasesFile, BaseError> {
    let path = deploy.join(BASES_FILE);
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    serde_yaml_ng::from_str(&text).map_err(|error| BaseError::Yaml { path, error })
}

/// The bases `deploy/bases.yaml` names, each with the file's common
/// `values` under its own.
pub fn read_bases(deploy: &Path) -> Result<Vec<Base>, BaseError> {
    let file = read_file(deploy)?;
    Ok(file
        .bases
        .into_iter()
        .map(|mut base| {
            let mut values = file.values.clone();
            merge(&mut values, &base.values);
            base.values = values;
            base
        })
        .collect())
}

/// `over` merged into `base`: mappings key by key, anything else replaced
/// (as helm merges several `--values`).
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Mapping(base), Value::Mapping(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (slot, value) => *slot = value.clone(),
    }
}

/// The values a base renders with: every component of the chart's
/// `values.yaml` (a top-level mapping with `enabled`) off, then the base's
/// own values.
pub fn values_for(chart_values: &Value, base: &Base) -> Value {
    let mut values = Value::Mapping(Mapping::new());
    if let Value::Mapping(defaults) = chart_values {
        for (key, value) in defaults {
            if value.get("enabled").is_some() {
                let mut off = Mapping::new();
                off.insert(Value::from("enabled"), Value::from(false));
                merge(
                    &mut values,
                    &Value::Mapping(Mapping::from_iter([(key.clone(), Value::Mapping(off))])),
                );
            }
        }
    }
    merge(&mut values, &base.values);
    values
}

/// The chart's default values (its `values.yaml`).
fn chart_values(chart: &Path) -> Result<Value, BaseError> {
    let path = chart.join("values.yaml");
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    serde_yaml_ng::from_str(&text).map_err(|error| BaseError::Yaml { path, error })
}

/// [`values_for`] as the YAML helm reads on its standard input.
fn values_text(deploy: &Path, chart_values: &Value, base: &Base) -> Result<String, BaseError> {
    serde_yaml_ng::to_string(&values_for(chart_values, base)).map_err(|error| BaseError::Yaml {
        path: deploy.join(BASES_FILE),
        error,
    })
}

/// The first lines of every generated file.
pub fn generated_header(chart: &str) -> String {
    format!(
        "# Generated from {chart} with deploy/kubernetes/{BASES_FILE} by\n\
         # `bash scripts/render-manifests.sh`: edit the chart, not this file.\n"
    )
}

/// Split `helm template`'s output for `base` into the base's files: each
/// template one file named as the template (documents in helm's order),
/// and the kustomization listing them. `chart` is the chart's directory as
/// the header names it.
pub fn files_of(base: &Base, chart: &str, output: &str) -> Result<Files, BaseError> {
    // file name → (template, documents)
    let mut by_file: Vec<(String, String, Vec<String>)> = Vec::new();
    for document in output
        .split("\n---\n")
        .flat_map(|d| d.strip_prefix("---\n").or(Some(d)))
    {
        if document.trim().is_empty() {
            continue;
        }
        let (first, rest) = document.split_once('\n').unwrap_or((document, ""));
        let source = first
            .strip_prefix("# Source: ")
            .ok_or_else(|| BaseError::NoSource {
                base: base.name.clone(),
                document: document.chars().take(200).collect(),
            })?;
        let template = source.split_once('/').map_or(source, |(_, t)| t);
        let inside = template.strip_prefix("templates/");
        let file = match inside.map(|t| t.split('/').collect::<Vec<_>>()).as_deref() {
            Some([file]) => file.to_string(),
            Some([component, file]) if *component == base.name => file.to_string(),
            _ => {
                return Err(BaseError::ForeignTemplate {
                    base: base.name.clone(),
                    source_path: template.to_string(),
                })
            }
        };
        let text = format!("{}\n", rest.trim_end());
        match by_file.iter_mut().find(|(f, _, _)| *f == file) {
            Some((_, first, _)) if first != template => {
                return Err(BaseError::SameFile {
                    base: base.name.clone(),
                    file,
                    first: first.clone(),
                    second: template.to_string(),
                })
            }
            Some((_, _, documents)) => documents.push(text),
            None => by_file.push((file, template.to_string(), vec![text])),
        }
    }
    if by_file.is_empty() {
        return Err(BaseError::Empty {
            base: base.name.clone(),
        });
    }
    let header = generated_header(chart);
    let mut files = Files::new();
    let mut kustomization = header.clone();
    kustomization.push_str("#\n");
    for line in base.about.trim_end().lines() {
        kustomization.push_str(format!("# {line}").trim_end());
        kustomization.push('\n');
    }
    kustomization.push_str(&format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         namespace: {}\nresources:\n",
        base.namespace
    ));
    for (file, template, documents) in by_file {
        kustomization.push_str(&format!("  - {file}\n"));
        files.insert(
            file,
            format!(
                "{}# ({chart}/{template})\n{}",
                header,
                documents.join("---\n")
            ),
        );
    }
    files.insert("kustomization.yaml".to_string(), kustomization);
    Ok(files)
}

/// Every base of `deploy`'s `bases.yaml` rendered from `chart` (helm runs
/// side by side, one process a base).
pub fn render(helm: &Helm, chart: &Path, deploy: &Path) -> Result<Vec<RenderedBase>, BaseError> {
    let bases = read_bases(deploy)?;
    let chart_values = chart_values(chart)?;
    let mut running = Vec::new();
    for base in &bases {
        let values = values_text(deploy, &chart_values, base)?;
        let started = helm
            .template(chart, RELEASE, &base.namespace, &values)
            .map_err(|error| BaseError::Helm {
                base: base.name.clone(),
                error,
            })?;
        running.push(started);
    }
    let shown = chart_label(chart);
    bases
        .iter()
        .zip(running)
        .map(|(base, run)| {
            let output = run.output().map_err(|error| BaseError::Helm {
                base: base.name.clone(),
                error,
            })?;
            Ok(RenderedBase {
                name: base.name.clone(),
                files: files_of(base, &shown, &output)?,
            })
        })
        .collect()
}

/// The chart as the generated files name it: `charts/<its directory>`.
fn chart_label(chart: &Path) -> String {
    let name = chart
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("charts/{name}")
}

/// The files of `dir` (not its subdirectories), name → content; none when
/// it does not exist.
fn existing(dir: &Path) -> Result<Files, BaseError> {
    let mut files = Files::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(error) => return Err(io(dir)(error)),
    };
    for entry in entries {
        let path = entry.map_err(io(dir))?.path();
        if path.is_file() {
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.insert(name, text);
        }
    }
    Ok(files)
}

/// Each way the bases in `deploy` differ from `rendered`, as a sentence
/// naming the file (empty: they are the chart's rendering exactly).
pub fn differences(deploy: &Path, rendered: &[RenderedBase]) -> Result<Vec<String>, BaseError> {
    let fix = "edit charts/ and run `bash scripts/render-manifests.sh`";
    let mut out = Vec::new();
    for base in rendered {
        let dir = deploy.join(&base.name);
        let have = existing(&dir)?;
        for (name, text) in &base.files {
            match have.get(name) {
                None => out.push(format!(
                    "{}: missing; the chart renders it ({fix})",
                    dir.join(name).display()
                )),
                Some(kept) if kept != text => out.push(format!(
                    "{}: not the chart's rendering ({fix}); first difference at line {}",
                    dir.join(name).display(),
                    first_difference(kept, text)
                )),
                Some(_) => {}
            }
        }
        for name in have.keys().filter(|n| !base.files.contains_key(*n)) {
            out.push(format!(
                "{}: the chart renders no such file ({fix})",
                dir.join(name).display()
            ));
        }
    }
    Ok(out)
}

/// The 1-based line at which `a` and `b` first differ.
fn first_difference(a: &str, b: &str) -> usize {
    let mut a_lines = a.lines();
    let mut b_lines = b.lines();
    let mut line = 1;
    while let (Some(x), Some(y)) = (a_lines.next(), b_lines.next()) {
        if x != y {
            return line;
        }
        line += 1;
    }
    line
}

/// Replace each rendered base's directory content with its files (files
/// the chart no longer renders are removed).
pub fn write(deploy: &Path, rendered: &[RenderedBase]) -> Result<(), BaseError> {
    for base in rendered {
        let dir = deploy.join(&base.name);
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        for name in existing(&dir)?
            .keys()
            .filter(|n| !base.files.contains_key(*n))
        {
            let path = dir.join(name);
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
        for (name, text) in &base.files {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(io(&path))?;
        }
    }
    Ok(())
}

/// Each problem `helm lint --strict` finds in `chart`, with its default
/// values and with each base's (run side by side).
pub fn lint(helm: &Helm, chart: &Path, deploy: &Path) -> Result<Vec<String>, BaseError> {
    let bases = read_bases(deploy)?;
    let chart_values = chart_values(chart)?;
    // The chart's defaults but what every install must set (a registry).
    let common = &read_file(deploy)?.values;
    let common = if common.is_null() {
        String::new()
    } else {
        serde_yaml_ng::to_string(common).map_err(|error| BaseError::Yaml {
            path: deploy.join(BASES_FILE),
            error,
        })?
    };
    let mut runs = vec![(
        "the default values and bases.yaml's `values`".to_string(),
        helm.lint(chart, &common),
    )];
    for base in &bases {
        let values = values_text(deploy, &chart_values, base)?;
        runs.push((
            format!("base {}'s values", base.name),
            helm.lint(chart, &values),
        ));
    }
    let mut out = Vec::new();
    for (what, run) in runs {
        let result = run.and_then(|r| r.output());
        match result {
            Ok(_) => {}
            Err(HelmError::Refused { output, .. }) => out.push(format!(
                "helm lint --strict {} with {what}: {output}",
                chart.display()
            )),
            Err(error) => return Err(BaseError::Helm { base: what, error }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(name: &str, values: &str) -> Base {
        Base {
            name: name.to_string(),
            namespace: "liqo".to_string(),
            about: "What it is.\n".to_string(),
            values: serde_yaml_ng::from_str(values).unwrap(),
        }
    }

    #[test]
    fn every_component_is_off_but_the_bases_own() {
        let defaults: Value = serde_yaml_ng::from_str(
            "images: {tag: ''}\ncatalog: {enabled: true, replicas: 1}\norchestrator: {enabled: false}\n",
        )
        .unwrap();
        let values = values_for(
            &defaults,
            &base(
                "orchestrator",
                "orchestrator: {enabled: true, catalogURL: http://c}",
            ),
        );
        let expected: Value = serde_yaml_ng::from_str(
            "catalog: {enabled: false}\norchestrator: {enabled: true, catalogURL: http://c}\n",
        )
        .unwrap();
        assert_eq!(values, expected);
    }

    const OUTPUT: &str = "---\n# Source: liqo-broker/templates/x/rbac.yaml\n# Why.\nkind: Role\n\
        ---\n# Source: liqo-broker/templates/x/deployment.yaml\nkind: Deployment\n\
        ---\n# Source: liqo-broker/templates/x/rbac.yaml\nkind: RoleBinding\n";

    #[test]
    fn each_template_is_one_file_listed_by_the_kustomization() {
        let files = files_of(&base("x", "{}"), "charts/c", OUTPUT).unwrap();
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["deployment.yaml", "kustomization.yaml", "rbac.yaml"]
        );
        assert_eq!(
            files["rbac.yaml"],
            format!(
                "{}# (charts/c/templates/x/rbac.yaml)\n# Why.\nkind: Role\n---\nkind: RoleBinding\n",
                generated_header("charts/c")
            )
        );
        let kustomization = &files["kustomization.yaml"];
        assert!(
            kustomization.ends_with(
                "# What it is.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 namespace: liqo\nresources:\n  - rbac.yaml\n  - deployment.yaml\n"
            ),
            "{kustomization}"
        );
    }

    #[test]
    fn another_components_template_or_two_of_one_name_are_refused() {
        let error = files_of(&base("y", "{}"), "charts/c", OUTPUT).unwrap_err();
        assert!(
            matches!(error, BaseError::ForeignTemplate { .. }),
            "{error}"
        );
        let twice = "---\n# Source: c/templates/a.yaml\nkind: A\n---\n# Source: c/templates/x/a.yaml\nkind: B\n";
        let error = files_of(&base("x", "{}"), "charts/c", twice).unwrap_err();
        assert!(matches!(error, BaseError::SameFile { .. }), "{error}");
        let error = files_of(&base("x", "{}"), "charts/c", "").unwrap_err();
        assert!(matches!(error, BaseError::Empty { .. }), "{error}");
    }

    #[test]
    fn an_edited_missing_or_extra_file_is_a_difference_until_written() {
        let dir = tempfile::tempdir().unwrap();
        let rendered = [RenderedBase {
            name: "x".to_string(),
            files: files_of(&base("x", "{}"), "charts/c", OUTPUT).unwrap(),
        }];
        let missing = differences(dir.path(), &rendered).unwrap();
        assert_eq!(missing.len(), 3, "{missing:?}");
        write(dir.path(), &rendered).unwrap();
        assert_eq!(
            differences(dir.path(), &rendered).unwrap(),
            Vec::<String>::new()
        );

        let rbac = dir.path().join("x/rbac.yaml");
        let edited = std::fs::read_to_string(&rbac)
            .unwrap()
            .replace("Role\n", "Role2\n");
        std::fs::write(&rbac, edited).unwrap();
        std::fs::write(dir.path().join("x/extra.yaml"), "kind: X\n").unwrap();
        let found = differences(dir.path(), &rendered).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].contains("rbac.yaml: not the chart's rendering"),
            "{found:?}"
        );
        assert!(found[0].contains("line 5"), "{found:?}");
        assert!(
            found[1].contains("extra.yaml: the chart renders no such file"),
            "{found:?}"
        );

        write(dir.path(), &rendered).unwrap();
        assert_eq!(
            differences(dir.path(), &rendered).unwrap(),
            Vec::<String>::new()
        );
    }
}
