//! Every component installed as an operator installs it: the real
//! `kubectl apply -k deploy/kubernetes/<component>` (kubectl 1.35, its
//! default client-side apply: discovery, the OpenAPI v3 documents, a GET,
//! then a create or a patch carrying the last-applied annotation, with
//! `--validate=strict` left to the server as `fieldValidation=Strict`)
//! against the test API server, then `kubectl get`/`wait`/`delete` on what
//! it made. Applying again changes nothing; an unknown field is refused
//! with the API server's own message, and nothing is written.
//!
//! The project's chart, `charts/liqo-broker`, is installed with every
//! component on, upgraded and uninstalled with the real Helm 4 (its
//! default server-side apply as field manager `helm`, the release kept in
//! Secrets): every object `helm template` renders is made, an upgrade
//! that turns a component off removes it, a field another apply manager
//! took over meanwhile is a conflict helm reports, a required value left
//! unset is refused before anything is written, and uninstalling leaves
//! only the Purchase, ServiceCatalog and MarketAutoscaler CRDs (kept, with
//! every object of them, by their `helm.sh/resource-policy`).
//!
//! Both run as the cluster's operator does, with an administrator's
//! kubeconfig (`write_kubeconfig`: the tests' own user, in
//! `system:masters`), over HTTPS: client-go reads a kubeconfig's
//! credentials only for a TLS transport
//! (`staging/src/k8s.io/client-go/tools/clientcmd/client_config.go`, "only
//! try to read the auth information if we are secure"), so over plain HTTP
//! they would be `system:anonymous`, refused.
//!
//! kubectl and helm are the ones `scripts/install-test-deps.sh` installs
//! into `build/bin/` (kubectl: or `$KUBECTL`). Without them the tests fail:
//! a test that passes without running proves nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use anyhow::{bail, ensure, Context, Result};
use deploy_check::kubectl::{self, Kubectl};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

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

/// Each of `rendered` as the server stores it (listed with one `kubectl
/// get` of all their kinds), holding every rendered field: what the server
/// defaults beside (a Namespace's `spec.finalizers`) is the server's to
/// add. An object rendered without a namespace is looked for in
/// `namespace`; a cluster-scoped one keeps none, whatever was rendered.
async fn stored_as_rendered<'a>(
    client: &Client,
    rendered: &'a [Value],
    namespace: &str,
) -> Result<Vec<(&'a Value, Value)>> {
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
    let kinds = kinds.into_iter().collect::<Vec<_>>().join(",");
    let listed: Value = serde_json::from_str(
        &client
            .ok(&["get", &kinds, "-A", "-o", "json"], None)
            .await?,
    )?;
    let items = listed["items"].as_array().context("a List")?;
    let mut out = Vec::new();
    for want in rendered {
        let (kind, mut wanted_namespace, name) = identity(want);
        if wanted_namespace.is_empty() {
            wanted_namespace = namespace.to_string();
        }
        let got = items
            .iter()
            .find(|o| {
                let (k, n, m) = identity(o);
                k == kind && m == name && (n.is_empty() || n == wanted_namespace)
            })
            .with_context(|| {
                format!("{kind} {wanted_namespace}/{name} not listed by kubectl get")
            })?;
        for field in ["spec", "rules", "roleRef", "subjects", "data"] {
            ensure!(
                includes(&got[field], &want[field]),
                "{kind} {name}: {field} stored as {}, rendered as {}",
                got[field],
                want[field]
            );
        }
        out.push((want, got.clone()));
    }
    Ok(out)
}

#[tokio::test]
async fn every_component_installs_with_the_real_kubectl_apply() -> Result<()> {
    let root = repository();
    let kubectl = Kubectl::installed_under(&root);
    if !kubectl.path().exists() {
        bail!(
            "no kubectl at {}: install it with `bash scripts/install-test-deps.sh`",
            kubectl.path().display()
        );
    }
    let kube = KubeApiServer::start_tls().await?;
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
    for (want, got) in stored_as_rendered(&client, &rendered, "").await? {
        let id = identity(want);
        let applied = got["metadata"]["annotations"]
            ["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .with_context(|| format!("{id:?} has no last-applied configuration"))?;
        let applied: Value = serde_json::from_str(applied)?;
        ensure!(applied["metadata"]["name"] == want["metadata"]["name"]);
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

/// The chart's values turning every component on, with the URLs and IDs
/// the enabled components require.
/// The chart requires a registry (no image is published).
const EVERY_COMPONENT: &str = "images.registry=registry.example.com,\
     catalog.enabled=true,resourceMonitor.enabled=true,\
     sliceController.enabled=true,sliceController.catalogURL=https://catalog.example,\
     peeringUserController.enabled=true,peeringUserController.catalogURL=https://catalog.example,\
     peeringUserController.apiServerAddress=https://203.0.113.1:6443,\
     purchaseController.enabled=true,purchaseController.clusterID=consumer-1,\
     marketAutoscaler.enabled=true,\
     serviceController.enabled=true,serviceController.catalogURL=https://catalog.example,\
     orchestrator.enabled=true,aggregator.enabled=true";

/// The orchestrator's policy.toml, as `kubectl get` reads it (without the
/// final newline of the chart's block scalar).
async fn policy(client: &Client) -> Result<String> {
    Ok(client
        .ok(
            &[
                "get",
                "configmap",
                "orchestrator-policy",
                "-n",
                "liqo",
                "-o",
                "jsonpath={.data.policy\\.toml}",
            ],
            None,
        )
        .await?
        .trim_end()
        .to_string())
}

/// The orchestrator's pod template annotation `checksum/config` (the
/// policy's), as `kubectl get` reads it.
async fn policy_checksum(client: &Client) -> Result<String> {
    client
        .ok(
            &[
                "get",
                "deployment",
                "orchestrator",
                "-n",
                "liqo",
                "-o",
                "jsonpath={.spec.template.metadata.annotations.checksum/config}",
            ],
            None,
        )
        .await
}

/// The names `kubectl get <kinds> -n liqo -o name` prints, sorted.
async fn names(client: &Client, kinds: &str) -> Result<BTreeSet<String>> {
    Ok(client
        .ok(&["get", kinds, "-n", "liqo", "-o", "name"], None)
        .await?
        .lines()
        .map(str::to_string)
        .collect())
}

#[tokio::test]
async fn the_chart_installs_upgrades_and_uninstalls_with_the_real_helm() -> Result<()> {
    let root = repository();
    let kubectl = Kubectl::installed_under(&root);
    let helm_path = root.join("build/bin/helm");
    if !helm_path.exists() || !kubectl.path().exists() {
        bail!(
            "no helm at {} or kubectl at {}: install them with `bash scripts/install-test-deps.sh`",
            helm_path.display(),
            kubectl.path().display()
        );
    }
    let kube = KubeApiServer::start_tls().await?;
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
    let chart = root
        .join("charts/liqo-broker")
        .to_string_lossy()
        .to_string();
    eprintln!("{}", helm.ok(&["version", "--short"], None).await?);

    // A required value left unset: refused before rendering (the chart's
    // values.schema.json, naming the value), nothing written.
    let before = kube.resource_version();
    let err = helm
        .refused(&[
            "install",
            "liqo-broker",
            &chart,
            "-n",
            "liqo",
            "--create-namespace",
            "--set",
            "sliceController.enabled=true",
        ])
        .await?;
    ensure!(
        err.contains("at '/sliceController/catalogURL': minLength: got 0, want 1"),
        "{err}"
    );
    ensure!(
        kube.resource_version() == before,
        "a refused install wrote something"
    );

    // Install: every component, server-side applied as `helm`; the notes
    // tell the operator what to run next.
    let common = ["-n", "liqo", "--set", EVERY_COMPONENT];
    let install = [
        ["install", "liqo-broker", &chart, "--create-namespace"].as_slice(),
        &common,
    ]
    .concat();
    let out = helm.ok(&install, None).await?;
    ensure!(out.contains("STATUS: deployed"), "{out}");
    ensure!(
        out.contains("kubectl -n liqo port-forward service/catalog 8080:8080")
            && out.contains("kubectl -n liqo create secret generic slice-controller-catalog \\"),
        "the notes name no next command:\n{out}"
    );
    let template = [["template", "liqo-broker", &chart].as_slice(), &common].concat();
    let rendered = kubectl::parse(Path::new(&chart), &helm.ok(&template, None).await?)?;
    let deployments: BTreeSet<String> = rendered
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .map(|o| {
            format!(
                "deployment.apps/{}",
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    ensure!(deployments.len() == 9, "{deployments:?}");
    ensure!(names(&client, "deployments").await? == deployments);
    stored_as_rendered(&client, &rendered, "liqo").await?;
    // This release's catalog, found by the orchestrator in its namespace.
    let orchestrator = rendered
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "orchestrator")
        .context("the orchestrator")?;
    ensure!(
        orchestrator["spec"]["template"]["spec"]["containers"][0]["args"][0]
            == "--catalog=http://catalog.liqo:8080",
        "{orchestrator}"
    );
    let applied_by_helm = kube.audit().iter().any(|r| {
        r.method == "PATCH"
            && r.field_manager.as_deref() == Some("helm")
            && r.path == "/api/v1/namespaces/liqo/configmaps/orchestrator-policy"
    });
    ensure!(applied_by_helm, "no apply of the policy ConfigMap by helm");
    let releases = client
        .ok(
            &[
                "get",
                "secrets",
                "-n",
                "liqo",
                "-l",
                "owner=helm,name=liqo-broker",
                "-o",
                "name",
            ],
            None,
        )
        .await?;
    ensure!(
        releases.trim() == "secret/sh.helm.release.v1.liqo-broker.v1",
        "{releases}"
    );

    // Upgrade: a component turned off is removed, a value changed applied;
    // the orchestrator reads its policy at start, so its pod template
    // changes with it (checksum/config) and the Deployment rolls.
    let checksum_before = policy_checksum(&client).await?;
    ensure!(checksum_before.len() == 64, "{checksum_before:?}");
    let upgrade = |set| {
        [
            "upgrade",
            "liqo-broker",
            chart.as_str(),
            "-n",
            "liqo",
            "--reuse-values",
            "--set",
            set,
        ]
    };
    let out = helm
        .ok(
            &upgrade("aggregator.enabled=false,orchestrator.policy=spread = 2"),
            None,
        )
        .await?;
    ensure!(out.contains("REVISION: 2"), "{out}");
    ensure!(
        policy(&client).await? == "spread = 2",
        "policy not upgraded"
    );
    let checksum_after = policy_checksum(&client).await?;
    ensure!(
        checksum_after.len() == 64 && checksum_after != checksum_before,
        "the policy changed and the orchestrator's pod template did not: {checksum_after:?}"
    );
    let left = names(&client, "deployments,configmaps,services").await?;
    ensure!(
        !left
            .iter()
            .any(|n| n.ends_with("/aggregator") || n.ends_with("/aggregator-config")),
        "the aggregator left after it was turned off: {left:?}"
    );
    ensure!(left.contains("deployment.apps/orchestrator"), "{left:?}");

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
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: orchestrator-policy\n  \
                 namespace: liqo\ndata:\n  policy.toml: spread = 3\n",
            ),
        )
        .await?;
    ensure!(taken.contains("serverside-applied"), "{taken}");
    let err = helm
        .refused(&upgrade("orchestrator.policy=spread = 4"))
        .await?;
    ensure!(
        err.contains("conflict with \"ops\"") && err.contains(".data.policy.toml"),
        "{err}"
    );
    ensure!(
        policy(&client).await? == "spread = 3",
        "a conflicting upgrade wrote"
    );

    // Objects of the chart's three CRDs, as a cluster has them when it is
    // uninstalled: what the CRDs' keep policy is there to keep.
    let created = client
        .ok(&["create", "-f", "-"], Some(CUSTOM_RESOURCES))
        .await?;
    ensure!(
        created.contains("purchase.broker.liqo-broker.io/kept created")
            && created.contains("servicecatalog.broker.liqo-broker.io/shop created")
            && created.contains("marketautoscaler.broker.liqo-broker.io/team-a created"),
        "{created}"
    );

    // Uninstall: every object and the release's Secrets gone, but the
    // CRDs, which the chart keeps.
    let out = helm
        .ok(&["uninstall", "liqo-broker", "-n", "liqo"], None)
        .await?;
    ensure!(out.contains("release \"liqo-broker\" uninstalled"), "{out}");
    let left = names(
        &client,
        "deployments,configmaps,services,serviceaccounts,roles,rolebindings,secrets",
    )
    .await?;
    // The namespace's own: its default account and the cluster's CA.
    let own: BTreeSet<String> = ["configmap/kube-root-ca.crt", "serviceaccount/default"]
        .map(str::to_string)
        .into();
    ensure!(left.is_subset(&own), "left after uninstall: {left:?}");
    let cluster_wide = client
        .ok(
            &[
                "get",
                "clusterroles,clusterrolebindings,validatingadmissionpolicies,\
                 validatingadmissionpolicybindings",
                "-l",
                "app.kubernetes.io/part-of=liqo-broker",
                "-o",
                "name",
            ],
            None,
        )
        .await?;
    ensure!(
        cluster_wide.trim().is_empty(),
        "left after uninstall: {cluster_wide}"
    );
    let kept = client
        .ok(
            &[
                "get",
                "crd",
                "-l",
                "app.kubernetes.io/part-of=liqo-broker",
                "-o",
                "name",
            ],
            None,
        )
        .await?;
    let kept: BTreeSet<&str> = kept.lines().collect();
    ensure!(
        kept == BTreeSet::from([
            "customresourcedefinition.apiextensions.k8s.io/marketautoscalers.broker.liqo-broker.io",
            "customresourcedefinition.apiextensions.k8s.io/multiclusternetworkpolicies.broker.liqo-broker.io",
            "customresourcedefinition.apiextensions.k8s.io/purchases.broker.liqo-broker.io",
            "customresourcedefinition.apiextensions.k8s.io/servicecatalogs.broker.liqo-broker.io",
        ]),
        "CRDs kept: {kept:?}"
    );
    // Kept, not being deleted: deleting a CRD marks it at once and then
    // deletes every object of it (the API server's
    // `customresourcecleanup` finalizer), so a CRD helm deleted would show
    // a deletionTimestamp here, and its objects would go.
    let crds: Value = serde_json::from_str(
        &client
            .ok(
                &[
                    "get",
                    "crd",
                    "-l",
                    "app.kubernetes.io/part-of=liqo-broker",
                    "-o",
                    "json",
                ],
                None,
            )
            .await?,
    )?;
    for crd in crds["items"].as_array().into_iter().flatten() {
        ensure!(
            crd["metadata"]["deletionTimestamp"].is_null(),
            "a kept CRD is being deleted: {crd}"
        );
    }
    let objects: Value = serde_json::from_str(
        &client
            .ok(
                &[
                    "get",
                    "purchases.broker.liqo-broker.io,servicecatalogs.broker.liqo-broker.io,\
                     marketautoscalers.broker.liqo-broker.io",
                    "-A",
                    "-o",
                    "json",
                ],
                None,
            )
            .await?,
    )?;
    let objects: BTreeSet<String> = objects["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    ensure!(
        objects
            == BTreeSet::from([
                "Purchase/kept".into(),
                "ServiceCatalog/shop".into(),
                "MarketAutoscaler/team-a".into()
            ]),
        "custom resources left after uninstall: {objects:?}"
    );
    Ok(())
}

/// A Purchase, a ServiceCatalog and a MarketAutoscaler, each valid against
/// the chart's CRD (`charts/liqo-broker/templates/{purchase-controller,
/// service-controller,market-autoscaler}/crd.yaml`).
const CUSTOM_RESOURCES: &str = "\
apiVersion: broker.liqo-broker.io/v1alpha1
kind: Purchase
metadata: {name: kept, namespace: default}
spec:
  contractID: contract-1
  catalogURL: https://catalog.example
  credentialsSecretRef: {name: catalog-token, key: token}
---
apiVersion: broker.liqo-broker.io/v1alpha1
kind: ServiceCatalog
metadata: {name: shop, namespace: default}
spec:
  services:
    - id: db
      name: Database
      type: database
      plans: [{id: remote, name: remote, cost: \"3\", hosting: Remote}]
      templates:
        - name: settings
          template: |
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: settings}
---
apiVersion: broker.liqo-broker.io/v1alpha1
kind: MarketAutoscaler
metadata: {name: team-a, namespace: default}
spec:
  catalogURL: https://catalog.example
  credentialsSecretRef: {name: catalog-token, key: token}
  pods: {namespaces: [team-a]}
  limits: {currency: EUR, maxSpendPerHour: \"2.50\"}
";
