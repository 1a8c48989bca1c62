//! The chart `charts/liqo-broker` rendered, linted and overlaid with the
//! real tools `scripts/install-test-deps.sh` installs into `build/bin/`
//! (Helm 4, kubectl with kustomize 5.7): what the `chart_*` tests hold it
//! to. Without them the tests fail: a test that passes without running
//! proves nothing.

use std::path::{Path, PathBuf};
use std::process::Output;

use anyhow::{ensure, Context, Result};
use serde_json::Value;

pub fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The chart's values turning every component on, with the URLs and IDs
/// the enabled components require.
pub const EVERY_COMPONENT: &[&str] = &[
    "catalog.enabled=true",
    "resourceMonitor.enabled=true",
    "sliceController.enabled=true",
    "sliceController.catalogURL=https://catalog.example",
    "peeringUserController.enabled=true",
    "peeringUserController.catalogURL=https://catalog.example",
    "peeringUserController.apiServerAddress=https://203.0.113.1:6443",
    "purchaseController.enabled=true",
    "purchaseController.clusterID=consumer-1",
    "marketAutoscaler.enabled=true",
    "serviceController.enabled=true",
    "serviceController.catalogURL=https://catalog.example",
    "orchestrator.enabled=true",
    "aggregator.enabled=true",
];

/// Run `build/bin/helm` with `args` from the repository's root, with
/// homes of its own (nothing read from or written to the user's).
pub fn helm(args: &[&str]) -> Result<Output> {
    let root = repository();
    let helm = root.join("build/bin/helm");
    ensure!(
        helm.exists(),
        "{} is missing: run scripts/install-test-deps.sh",
        helm.display()
    );
    let home = tempfile::tempdir()?;
    std::process::Command::new(&helm)
        .args(args)
        .current_dir(&root)
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .with_context(|| format!("running {}", helm.display()))
}

/// The registry every rendering names (the chart requires one): `sets`
/// may override it, `images.registry=` (empty) included.
pub const REGISTRY: &str = "images.registry=registry.example.com";

/// `helm <command> <release> charts/liqo-broker -n <namespace>` with
/// [`REGISTRY`], then each of `sets` as a `--set` (a number or a bool read
/// as helm reads it; a later `--set` of a key wins).
fn chart_command(command: &str, release: &str, namespace: &str, sets: &[&str]) -> Result<Output> {
    let mut args = vec![command];
    if !release.is_empty() {
        args.push(release);
    }
    args.extend(["charts/liqo-broker", "--namespace", namespace]);
    for set in std::iter::once(&REGISTRY).chain(sets) {
        args.extend(["--set", set]);
    }
    helm(&args)
}

/// `helm template` as release `liqo-broker`, which must succeed: the
/// objects rendered.
pub fn template(namespace: &str, sets: &[&str]) -> Result<Vec<Value>> {
    template_as("liqo-broker", namespace, sets)
}

/// [`template`] as release `release`.
pub fn template_as(release: &str, namespace: &str, sets: &[&str]) -> Result<Vec<Value>> {
    let out = chart_command("template", release, namespace, sets)?;
    ensure!(
        out.status.success(),
        "helm template {sets:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(deploy_check::kubectl::parse(
        Path::new("charts/liqo-broker"),
        &String::from_utf8_lossy(&out.stdout),
    )?)
}

/// `helm template` that must fail: what helm said on standard error.
pub fn template_refused(sets: &[&str]) -> Result<String> {
    let out = chart_command("template", "liqo-broker", "liqo", sets)?;
    ensure!(
        !out.status.success(),
        "helm template {sets:?} rendered: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `helm lint --strict` with `sets`: its output, and whether it passed.
pub fn lint(sets: &[&str]) -> Result<(bool, String)> {
    let mut with_strict = vec!["--strict", "--set", REGISTRY];
    with_strict.extend(sets.iter().flat_map(|s| ["--set", s]));
    let mut args = vec!["lint", "charts/liqo-broker", "--namespace", "liqo"];
    args.extend(with_strict);
    let out = helm(&args)?;
    Ok((
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

/// `kubectl kustomize <dir>` (dir relative to the repository's root) with
/// the kubectl of `build/bin/`.
pub fn kustomize(dir: &str) -> Result<Vec<Value>> {
    let root = repository();
    let kubectl = deploy_check::kubectl::Kubectl::installed_under(&root);
    ensure!(
        kubectl.path().exists(),
        "{} is missing: run scripts/install-test-deps.sh",
        kubectl.path().display()
    );
    Ok(kubectl.render(&root.join(dir))?)
}

/// The text of a string field, or "".
pub fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// `Kind namespace/name` of an object, for messages.
pub fn id(object: &Value) -> String {
    format!(
        "{} {}/{}",
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"])
    )
}

/// The objects of `kind`.
pub fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The one object of `kind` named `name`.
pub fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> Result<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .with_context(|| format!("no {kind} {name} rendered"))
}

/// Each rule of a Role or ClusterRole.
pub fn rules(role: &Value) -> impl Iterator<Item = &Value> {
    role["rules"].as_array().into_iter().flatten()
}

/// Whether a rule grants `verb` on `resource` (whatever its
/// resourceNames).
pub fn grants(rule: &Value, resource: &str, verb: &str) -> bool {
    let has = |field: &str, want: &str| {
        rule[field]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == want))
    };
    has("resources", resource) && has("verbs", verb)
}

/// Whether a rule is limited to the object `name` (its resourceNames).
pub fn names_object(rule: &Value, name: &str) -> bool {
    rule["resourceNames"]
        .as_array()
        .is_some_and(|a| a.iter().any(|v| v == name))
}

/// The pod template's annotation `key` of Deployment `name`.
pub fn pod_annotation<'a>(objects: &'a [Value], name: &str, key: &str) -> Result<&'a str> {
    let deployment = named(objects, "Deployment", name)?;
    deployment["spec"]["template"]["metadata"]["annotations"][key]
        .as_str()
        .with_context(|| format!("Deployment {name}: no pod annotation {key}: {deployment}"))
}
