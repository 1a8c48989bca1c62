//! Every component installed as an operator installs it: the real
//! `kubectl apply -k deploy/kubernetes/<component>` (kubectl 1.35, its
//! default client-side apply: discovery, the OpenAPI v3 documents, a GET,
//! then a create or a patch carrying the last-applied annotation, with
//! `--validate=strict` left to the server as `fieldValidation=Strict`)
//! against the test API server, then `kubectl get`/`wait`/`delete` on what
//! it made. Applying again changes nothing; an unknown field is refused
//! with the API server's own message, and nothing is written.
//!
//! A tiny chart written by the test is installed, upgraded and uninstalled
//! with the real Helm 4 (its default server-side apply as field manager
//! `helm`, the release kept in Secrets), a field another apply manager
//! took over meanwhile being a conflict helm reports.
//!
//! kubectl and helm are the ones `scripts/install-test-deps.sh` installs
//! into `build/bin/` (kubectl: or `$KUBECTL`). Without them the tests fail,
//! unless `E2E_ALLOW_NO_KUBECTL=1` says a run without them is meant.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use anyhow::{bail, ensure, Context, Result};
use deploy_check::kubectl::Kubectl;
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

/// Set to `1` to let the test pass, saying so, where kubectl is absent.
const ALLOW_NO_KUBECTL: &str = "E2E_ALLOW_NO_KUBECTL";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// kubectl (or helm) pointed at one test API server, with a cache of its
/// own (the OpenAPI and discovery documents kept under `$KUBECACHEDIR`).
struct Client {
    binary: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
    /// More variables for the child (helm's homes).
    env: Vec<(&'static str, PathBuf)>,
}

impl Client {
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> Result<Output> {
        use tokio::io::AsyncWriteExt;
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", &self.cache)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command
            .spawn()
            .with_context(|| format!("running {}", self.binary.display()))?;
        let mut input = child.stdin.take().context("kubectl's stdin")?;
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await?;
        }
        drop(input);
        Ok(child.wait_with_output().await?)
    }

    /// Run kubectl, which must succeed; its standard output.
    async fn ok(&self, args: &[&str], stdin: Option<&str>) -> Result<String> {
        let out = self.run(args, stdin).await?;
        ensure!(
            out.status.success(),
            "{} {} failed ({}): {}{}",
            self.binary.display(),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    }

    /// Run kubectl, which must fail; its standard error.
    async fn refused(&self, args: &[&str]) -> Result<String> {
        let out = self.run(args, None).await?;
        ensure!(
            !out.status.success(),
            "{} {} succeeded: {}",
            self.binary.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        Ok(String::from_utf8(out.stderr)?)
    }
}

/// The component directories of `deploy/kubernetes/`, sorted.
fn components(root: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("deploy/kubernetes"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("kustomization.yaml").is_file())
        .collect();
    dirs.sort();
    ensure!(!dirs.is_empty(), "no component under deploy/kubernetes");
    Ok(dirs)
}

/// `kind/name` as kubectl prints an object it applied
/// (`deployment.apps/catalog`, `serviceaccount/catalog`).
fn printed_name(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
    let group = object["apiVersion"]
        .as_str()
        .and_then(|av| av.rsplit_once('/'))
        .map(|(group, _)| group)
        .unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if group.is_empty() {
        format!("{kind}/{name}")
    } else {
        format!("{kind}.{group}/{name}")
    }
}

/// Whether `stored` holds all of `sent`: every key of an object, with a
/// value that holds the sent one; anything else equal.
fn includes(stored: &Value, sent: &Value) -> bool {
    match (stored, sent) {
        (_, Value::Null) => true,
        (Value::Object(stored), Value::Object(sent)) => sent
            .iter()
            .all(|(k, v)| stored.get(k).is_some_and(|s| includes(s, v))),
        _ => stored == sent,
    }
}

/// `(kind, namespace, name)` of an object.
fn identity(object: &Value) -> (String, String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

#[tokio::test]
async fn every_component_installs_with_the_real_kubectl_apply() -> Result<()> {
    let root = repository();
    let kubectl = Kubectl::installed_under(&root);
    if !kubectl.path().exists() {
        if std::env::var(ALLOW_NO_KUBECTL).is_ok_and(|v| v == "1") {
            eprintln!(
                "SKIPPED: no kubectl at {} and {ALLOW_NO_KUBECTL}=1",
                kubectl.path().display()
            );
            return Ok(());
        }
        bail!(
            "no kubectl at {}: install it with `bash scripts/install-test-deps.sh` \
             (or set {ALLOW_NO_KUBECTL}=1 to run without it)",
            kubectl.path().display()
        );
    }
    let kube = KubeApiServer::start().await?;
    let dir = tempfile::tempdir()?;
    let client = Client {
        binary: kubectl.path().to_path_buf(),
        kubeconfig: dir.path().join("kubeconfig"),
        cache: dir.path().join("cache"),
        env: Vec::new(),
    };
    kube.write_kubeconfig(&client.kubeconfig)?;
    eprintln!("{}", client.ok(&["version", "--client"], None).await?);

    // The `liqo` namespace is Liqo's own, there before these components.
    let out = client
        .ok(
            &["apply", "-f", "-"],
            Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: liqo\n"),
        )
        .await?;
    ensure!(out.trim() == "namespace/liqo created", "{out}");

    // Each component: every rendered object created, as kubectl reports it.
    let mut rendered = Vec::new();
    for component in components(&root)? {
        let objects = kubectl.render(&component)?;
        let path = component.to_string_lossy().to_string();
        let out = client.ok(&["apply", "-k", &path], None).await?;
        let printed: BTreeSet<&str> = out.lines().collect();
        let expected: BTreeSet<String> = objects
            .iter()
            .map(|o| format!("{} created", printed_name(o)))
            .collect();
        ensure!(
            printed
                == expected
                    .iter()
                    .map(String::as_str)
                    .collect::<BTreeSet<&str>>(),
            "kubectl apply -k {path} printed\n{out}\nexpected {expected:#?}"
        );
        rendered.extend(objects);
    }

    // The CRDs are served: established, and their resources discoverable.
    client
        .ok(
            &[
                "wait",
                "--for=condition=Established",
                "crd",
                "--all",
                "--timeout=10s",
            ],
            None,
        )
        .await?;
    let crds: Vec<&Value> = rendered
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .collect();
    ensure!(!crds.is_empty(), "no CRD shipped");
    let resources = client.ok(&["api-resources", "-o", "name"], None).await?;
    for crd in &crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        ensure!(
            resources.lines().any(|l| l == name),
            "{name} not in kubectl api-resources:\n{resources}"
        );
    }

    // Everything made is there as rendered, with the last-applied
    // configuration kubectl keeps on it.
    let kinds: BTreeSet<String> = rendered
        .iter()
        .map(|o| {
            let kind = o["kind"].as_str().unwrap_or_default().to_lowercase();
            match o["apiVersion"].as_str().and_then(|av| av.rsplit_once('/')) {
                Some((group, _)) => format!("{kind}.{group}"),
                None => kind,
            }
        })
        .collect();
    let listed: Value = serde_json::from_str(
        &client
            .ok(
                &[
                    "get",
                    &kinds.into_iter().collect::<Vec<_>>().join(","),
                    "-A",
                    "-o",
                    "json",
                ],
                None,
            )
            .await?,
    )?;
    let items = listed["items"].as_array().context("a List")?;
    for want in &rendered {
        let id = identity(want);
        let got = items
            .iter()
            .find(|o| {
                // A cluster-scoped object keeps no namespace, whatever
                // kustomize set on it.
                let (kind, namespace, name) = identity(o);
                kind == id.0 && name == id.2 && (namespace.is_empty() || namespace == id.1)
            })
            .with_context(|| format!("{id:?} not listed by kubectl get"))?;
        let applied = got["metadata"]["annotations"]
            ["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .with_context(|| format!("{id:?} has no last-applied configuration"))?;
        let applied: Value = serde_json::from_str(applied)?;
        ensure!(applied["metadata"]["name"] == want["metadata"]["name"]);
        for field in ["spec", "rules", "roleRef", "subjects", "data"] {
            // What the server defaults beside (a Namespace's
            // `spec.finalizers`) is the server's to add.
            ensure!(
                includes(&got[field], &want[field]),
                "{id:?}: {field} stored as {}, rendered as {}",
                got[field],
                want[field]
            );
        }
        if want["kind"] == "CustomResourceDefinition" {
            let established = got["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True");
            ensure!(established, "{id:?} not established: {}", got["status"]);
        }
    }
    let deployments = rendered
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .count();
    ensure!(deployments >= 7, "{deployments} Deployments rendered");

    // Applying again is a no-op: nothing written, every object unchanged.
    let before = kube.resource_version();
    for component in components(&root)? {
        let path = component.to_string_lossy().to_string();
        let out = client.ok(&["apply", "-k", &path], None).await?;
        ensure!(
            out.lines().all(|l| l.ends_with(" unchanged")),
            "a second apply -k {path} changed something:\n{out}"
        );
    }
    ensure!(
        kube.resource_version() == before,
        "a second apply wrote: resourceVersion {before} -> {}",
        kube.resource_version()
    );

    // `--validate=strict`: an unknown field is refused by the server with
    // its own message — on a create (the decoder's 400) and on the patch
    // of an existing object (the patcher's 422) — and nothing is written.
    let bogus_config_map = dir.path().join("config-map.json");
    std::fs::write(
        &bogus_config_map,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "bogus", "namespace": "liqo"},
               "data": {"a": "b"}, "bogus": 1})
        .to_string(),
    )?;
    let file = bogus_config_map.to_string_lossy().to_string();
    let err = client
        .refused(&["apply", "--validate=strict", "-f", &file])
        .await?;
    let expected = format!(
        "Error from server (BadRequest): error when creating \"{file}\": ConfigMap in version \
         \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
    );
    ensure!(err.trim() == expected, "{err}");
    let mut catalog = rendered
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "catalog")
        .context("the catalog's Deployment")?
        .clone();
    catalog["spec"]["bogusField"] = json!(2);
    let bogus_deployment = dir.path().join("deployment.json");
    std::fs::write(&bogus_deployment, catalog.to_string())?;
    let file = bogus_deployment.to_string_lossy().to_string();
    let err = client
        .refused(&["apply", "--validate=strict", "-f", &file])
        .await?;
    ensure!(
        err.starts_with("The request is invalid: patch: Invalid value: ")
            && err
                .trim_end()
                .ends_with("strict decoding error: unknown field \"spec.bogusField\""),
        "{err}"
    );
    ensure!(
        kube.resource_version() == before,
        "a refused apply wrote something"
    );

    // `kubectl delete -k` takes a component away again.
    let aggregator = root.join("deploy/kubernetes/aggregator");
    let path = aggregator.to_string_lossy().to_string();
    let out = client
        .ok(&["delete", "-k", &path, "--wait=false"], None)
        .await?;
    ensure!(
        out.contains("deployment.apps \"aggregator\" deleted"),
        "{out}"
    );
    let err = client
        .refused(&["get", "deployment", "aggregator", "-n", "liqo"])
        .await?;
    ensure!(
        err.trim() == "Error from server (NotFound): deployments.apps \"aggregator\" not found",
        "{err}"
    );
    Ok(())
}

/// A chart of one ConfigMap and one Deployment, its values `greeting` and
/// `replicas`, written under `dir`.
fn tiny_chart(dir: &Path) -> Result<PathBuf> {
    let chart = dir.join("tiny");
    std::fs::create_dir_all(chart.join("templates"))?;
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: tiny\nversion: 0.1.0\n",
    )?;
    std::fs::write(chart.join("values.yaml"), "greeting: hello\nreplicas: 1\n")?;
    std::fs::write(
        chart.join("templates/objects.yaml"),
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  greeting: {{ .Values.greeting | quote }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
      - name: main
        image: registry.k8s.io/pause:3.9
"#,
    )?;
    Ok(chart)
}

/// The chart's ConfigMap's greeting, as `kubectl get` reads it.
async fn greeting(client: &Client) -> Result<String> {
    client
        .ok(
            &[
                "get",
                "configmap",
                "demo-config",
                "-o",
                "jsonpath={.data.greeting}",
            ],
            None,
        )
        .await
}

#[tokio::test]
async fn a_chart_installs_upgrades_and_uninstalls_with_the_real_helm() -> Result<()> {
    let root = repository();
    let kubectl = Kubectl::installed_under(&root);
    let helm_path = root.join("build/bin/helm");
    if !helm_path.exists() || !kubectl.path().exists() {
        if std::env::var(ALLOW_NO_KUBECTL).is_ok_and(|v| v == "1") {
            eprintln!("SKIPPED: no helm or kubectl under build/bin and {ALLOW_NO_KUBECTL}=1");
            return Ok(());
        }
        bail!(
            "no helm at {} or kubectl at {}: install them with `bash scripts/install-test-deps.sh`",
            helm_path.display(),
            kubectl.path().display()
        );
    }
    let kube = KubeApiServer::start().await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    kube.write_kubeconfig(&kubeconfig)?;
    let client = Client {
        binary: kubectl.path().to_path_buf(),
        kubeconfig: kubeconfig.clone(),
        cache: dir.path().join("cache"),
        env: Vec::new(),
    };
    // helm as kubectl: the same kubeconfig, and homes of its own.
    let helm = Client {
        binary: helm_path,
        kubeconfig,
        cache: dir.path().join("cache"),
        env: vec![
            ("HELM_CACHE_HOME", dir.path().join("helm-cache")),
            ("HELM_CONFIG_HOME", dir.path().join("helm-config")),
            ("HELM_DATA_HOME", dir.path().join("helm-data")),
        ],
    };
    let chart = tiny_chart(dir.path())?;
    let chart = chart.to_string_lossy().to_string();
    eprintln!("{}", helm.ok(&["version", "--short"], None).await?);

    // Install: server-side apply as `helm`, the release recorded in a Secret.
    let out = helm
        .ok(&["install", "demo", &chart, "--namespace", "default"], None)
        .await?;
    ensure!(out.contains("STATUS: deployed"), "{out}");
    let config_map: Value = serde_json::from_str(
        &client
            .ok(&["get", "configmap", "demo-config", "-o", "json"], None)
            .await?,
    )?;
    ensure!(config_map["data"]["greeting"] == "hello", "{config_map}");
    // Written by server-side apply as `helm`: a client-side install would
    // have created it (POST); a PATCH of an object not there yet is apply.
    let applied_by_helm = kube.audit().iter().any(|r| {
        r.method == "PATCH"
            && r.field_manager.as_deref() == Some("helm")
            && r.path == "/api/v1/namespaces/default/configmaps/demo-config"
    });
    ensure!(applied_by_helm, "no apply of the ConfigMap by helm");
    let deployment: Value = serde_json::from_str(
        &client
            .ok(&["get", "deployment", "demo", "-o", "json"], None)
            .await?,
    )?;
    ensure!(deployment["spec"]["replicas"] == 1, "{deployment}");
    let releases = client
        .ok(
            &["get", "secrets", "-l", "owner=helm,name=demo", "-o", "name"],
            None,
        )
        .await?;
    ensure!(
        releases.trim() == "secret/sh.helm.release.v1.demo.v1",
        "{releases}"
    );

    // Upgrade: the new values applied.
    let out = helm
        .ok(
            &[
                "upgrade",
                "demo",
                &chart,
                "--set",
                "greeting=bonjour,replicas=2",
            ],
            None,
        )
        .await?;
    ensure!(out.contains("REVISION: 2"), "{out}");
    let upgraded = greeting(&client).await?;
    ensure!(upgraded == "bonjour", "{upgraded}");

    // A field another apply manager took over since is a conflict, which
    // helm reports rather than overwrite (no --force-conflicts).
    let taken = client
        .ok(
            &[
                "apply",
                "--server-side",
                "--field-manager=ops",
                "--force-conflicts",
                "-f",
                "-",
            ],
            Some(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo-config\n  \
                 namespace: default\ndata:\n  greeting: hallo\n",
            ),
        )
        .await?;
    ensure!(taken.contains("serverside-applied"), "{taken}");
    let err = helm
        .refused(&["upgrade", "demo", &chart, "--set", "greeting=hola"])
        .await?;
    ensure!(
        err.contains("conflict with \"ops\"") && err.contains(".data.greeting"),
        "{err}"
    );
    let kept = greeting(&client).await?;
    ensure!(kept == "hallo", "a conflicting upgrade wrote: {kept}");

    // Uninstall: the objects and the release's Secrets gone.
    let out = helm.ok(&["uninstall", "demo"], None).await?;
    ensure!(out.contains("release \"demo\" uninstalled"), "{out}");
    let left = client
        .ok(
            &[
                "get",
                "configmaps,deployments,secrets",
                "-l",
                "owner=helm",
                "-o",
                "name",
            ],
            None,
        )
        .await?;
    ensure!(left.trim().is_empty(), "left after uninstall: {left}");
    let err = client.refused(&["get", "configmap", "demo-config"]).await?;
    ensure!(err.contains("NotFound"), "{err}");
    Ok(())
}
