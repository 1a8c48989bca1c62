//! A broker cluster for the orchestrator's end-to-end tests: the test API
//! server with Liqo v1.2.0's CRDs, namespaces offloaded to it as Liqo's
//! NamespaceMap controller creates them, the real catalog with providers
//! publishing labelled offers, and the real `orchestrator` binary running
//! as the ServiceAccount of `deploy/kubernetes/orchestrator`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use e2e::catalog::{provider, Backend, Catalog, Env};
use e2e::{Child, Spawn, EVENTUALLY};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

pub const NAMESPACES: (&str, &str) = ("", "namespaces");
pub const OFFLOADINGS: (&str, &str) = ("offloading.liqo.io", "namespaceoffloadings");
pub const QUOTAS: (&str, &str) = ("", "resourcequotas");
pub const PODS: (&str, &str) = ("", "pods");
pub const EVENTS: (&str, &str) = ("events.k8s.io", "events");

/// Who the orchestrator is: the ServiceAccount of the shipped manifests.
pub const ORCHESTRATOR_USER: &str = "system:serviceaccount:liqo:orchestrator";

pub struct Broker {
    pub kube: KubeApiServer,
    _env: Env,
    pub catalog: Catalog,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    // Last: the API server's tasks run on it.
    _runtime: tokio::runtime::Runtime,
}

/// The catalog's administrator secret in these tests.
pub const ADMIN_SECRET: &str = "admin-secret-of-the-orchestrator-tests";

impl Broker {
    pub fn start() -> Result<Broker> {
        Broker::start_on(true)
    }

    /// [`Broker::start`] over plain HTTP, as the model of Liqo's
    /// controllers (`liqo_model::identity`) reaches its API servers.
    pub fn start_plain() -> Result<Broker> {
        Broker::start_on(false)
    }

    fn start_on(tls: bool) -> Result<Broker> {
        let runtime = tokio::runtime::Runtime::new()?;
        let kube = if tls {
            runtime.block_on(KubeApiServer::start_tls())?
        } else {
            runtime.block_on(KubeApiServer::start())?
        };
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        kube.write_kubeconfig_as(&kubeconfig, ORCHESTRATOR_USER)?;
        // Under exactly the permissions deploy/ ships for it.
        e2e::rbac::load_shipped(&kube)?;
        kube.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "liqo"}}),
        );
        let env = Env::new(Backend::Embedded);
        let catalog = env.start_with(&["--admin-secret", ADMIN_SECRET]);
        Ok(Broker {
            kube,
            _env: env,
            catalog,
            dir,
            kubeconfig,
            _runtime: runtime,
        })
    }

    /// The runtime the API server runs on, for what runs beside it (the
    /// model of Liqo's controllers).
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        &self._runtime
    }

    /// Provider `n` (cluster ID `cluster-<n>`) publishes offer `id`:
    /// `labels`, and plans of (key, cost, cpu, memory).
    pub fn offer(&self, n: u32, id: &str, labels: Value, plans: &[(&str, &str, &str, &str)]) {
        let token = self.catalog.login(&provider(n));
        let plans: serde_json::Map<String, Value> = plans
            .iter()
            .map(|(key, cost, cpu, memory)| {
                (
                    key.to_string(),
                    json!({"name": key, "cost": cost, "resources": {"cpu": cpu, "memory": memory}}),
                )
            })
            .collect();
        self.catalog.put_offer(
            id,
            &json!({"name": id, "type": "compute", "labels": labels, "plans": plans}),
            &token,
        );
    }

    /// A catalog administrator disables (or re-enables) provider `n`.
    pub fn disable(&self, n: u32, disabled: bool) {
        let r = self.catalog.post(
            "/authenticate/admin",
            &json!({"secret": ADMIN_SECRET}),
            None,
        );
        assert_eq!(r.status, 200, "{}", r.text);
        let token = r.json["token"].as_str().unwrap().to_string();
        let r = self
            .catalog
            .send(
                e2e::http::blocking_client(EVENTUALLY)
                    .put(self.catalog.url(&format!("/admin/providers/cluster-{n}")))
                    .bearer_auth(token)
                    .json(&json!({"disabled": disabled})),
            )
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.text);
    }

    /// Provider `n` withdraws offer `id`.
    pub fn withdraw(&self, n: u32, id: &str) {
        let token = self.catalog.login(&provider(n));
        let r = self.catalog.delete(&format!("/offer/{id}"), Some(&token));
        assert_eq!(r.status, 204, "{}", r.text);
    }

    /// Namespace `name` as Liqo's NamespaceMap controller creates it on the
    /// broker for `consumer`'s namespace `app`.
    pub fn offloaded_namespace(&self, name: &str, consumer: &str) {
        self.kube.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name,
                "labels": {"liqo.io/remote-cluster-id": consumer},
                "annotations": {
                    "liqo.io/managed-by-namespace-map": format!("liqo-tenant-{consumer}/{consumer}"),
                    "liqo.io/original-name": "app"}}}),
        );
    }

    pub fn quota(&self, namespace: &str, hard: Value) {
        self.kube.apply(
            QUOTAS,
            json!({"apiVersion": "v1", "kind": "ResourceQuota",
                   "metadata": {"name": "offloaded", "namespace": namespace},
                   "spec": {"hard": hard}}),
        );
    }

    pub fn pod(&self, namespace: &str, name: &str, cpu: &str, memory: &str) {
        self.kube.apply(
            PODS,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": namespace},
                   "spec": {"containers": [{"name": "app", "image": "nginx",
                       "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}),
        );
    }

    /// Write the policy file; returns its path.
    pub fn policy(&self, text: &str) -> PathBuf {
        let path = self.dir.path().join("policy.toml");
        std::fs::write(&path, text).expect("policy file");
        path
    }

    /// The orchestrator over this cluster and catalog with `policy`.
    pub fn orchestrator(&self, policy: &PathBuf) -> Result<(Child, u16)> {
        self.orchestrator_as(policy, "orchestrator-0")
    }

    /// A file holding the catalog's administrator secret.
    pub fn admin_secret_file(&self) -> PathBuf {
        let path = self.dir.path().join("admin-secret");
        std::fs::write(&path, format!("{ADMIN_SECRET}\n")).expect("secret file");
        path
    }

    /// [`Broker::orchestrator`] naming the replica `instance`.
    pub fn orchestrator_as(&self, policy: &PathBuf, instance: &str) -> Result<(Child, u16)> {
        let (child, bound) = Spawn::new("orchestrator")
            .args(["--catalog", &self.catalog.url("")])
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--policy")
            .arg(policy)
            .args(["--http-listen", "127.0.0.1:0"])
            .args(["--instance", instance])
            .args(["--error-retry", "200ms"])
            .args([
                "--lease-duration",
                "3s",
                "--lease-renew-deadline",
                "2s",
                "--lease-retry",
                "250ms",
            ])
            // As the Deployment sets it (the downward API): the Lease's namespace.
            .env("POD_NAMESPACE", "liqo")
            .env("RUST_LOG", "info,orchestrator=debug")
            .start_announced(1)?;
        Ok((child, bound.port(None)))
    }

    /// `orchestrator explain --namespace NS --output json`.
    pub fn explain(&self, policy: &PathBuf, namespace: &str) -> Result<Value> {
        let out = Spawn::new("orchestrator")
            .args(["--catalog", &self.catalog.url("")])
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--policy")
            .arg(policy)
            .args(["explain", "--namespace", namespace, "--output", "json"])
            .output()?;
        if !out.status.success() {
            bail!("explain failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    pub fn offloading(&self, namespace: &str) -> Option<Value> {
        self.kube.get(OFFLOADINGS, Some(namespace), "offloading")
    }

    /// Wait until the namespace's selection is `expected`; returns the object.
    pub fn wait_selected(&self, namespace: &str, expected: &[&str]) -> Result<Value> {
        let deadline = Instant::now() + EVENTUALLY;
        loop {
            let current = self.offloading(namespace);
            if let Some(o) = &current {
                if selected(o) == expected {
                    return Ok(o.clone());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "{namespace}: not selecting {expected:?} within {EVENTUALLY:?}; NamespaceOffloading is {}",
                    current.map(|o| o.to_string()).unwrap_or_else(|| "absent".into())
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Writes (create, update, patch) the orchestrator made to `namespace`'s
    /// NamespaceOffloading.
    pub fn offloading_writes(&self, namespace: &str) -> usize {
        self.kube
            .audit()
            .iter()
            .filter(|r| {
                r.code < 300
                    && r.resource.as_ref().is_some_and(|a| {
                        a.resource == "namespaceoffloadings"
                            && a.namespace.as_deref() == Some(namespace)
                            && matches!(a.verb.as_str(), "create" | "update" | "patch")
                    })
            })
            .count()
    }

    /// Events recorded about `namespace`'s NamespaceOffloading with `reason`.
    pub fn events(&self, namespace: &str, reason: &str) -> Vec<Value> {
        self.kube
            .objects(EVENTS)
            .into_iter()
            .filter(|e| e["metadata"]["namespace"] == namespace && e["reason"] == reason)
            .collect()
    }

    /// Wait until an Event with `reason` is recorded in `namespace`.
    pub fn wait_event(&self, namespace: &str, reason: &str) -> Result<Value> {
        let deadline = Instant::now() + EVENTUALLY;
        loop {
            if let Some(e) = self.events(namespace, reason).into_iter().next() {
                return Ok(e);
            }
            if Instant::now() > deadline {
                bail!("{namespace}: no {reason} Event within {EVENTUALLY:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The providers a NamespaceOffloading selects, as Liqo reads them.
pub fn selected(offloading: &Value) -> Vec<String> {
    let terms = offloading["spec"]["clusterSelector"]["nodeSelectorTerms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(terms.len(), 1, "one selector term: {offloading}");
    let exprs = terms[0]["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(exprs.len(), 1, "one requirement: {offloading}");
    assert_eq!(exprs[0]["key"], "liqo.io/remote-cluster-id");
    assert_eq!(exprs[0]["operator"], "In");
    exprs[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The decision the orchestrator recorded on a NamespaceOffloading.
pub fn recorded(offloading: &Value) -> Value {
    let text = offloading["metadata"]["annotations"]["orchestrator.liqo-broker.io/decision"]
        .as_str()
        .unwrap_or_else(|| panic!("no decision annotation: {offloading}"));
    serde_json::from_str(text).unwrap()
}

/// The holder of the orchestrator's Lease, if any.
pub fn lease_holder(kube: &KubeApiServer) -> Option<String> {
    let lease = kube.get(
        ("coordination.k8s.io", "leases"),
        Some("liqo"),
        "orchestrator",
    )?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_string)
}
