//! A provider cluster for the ResourceSlice class controller's end-to-end
//! tests: the test API server with Liqo v1.2.0's CRDs, a tenant namespace
//! and Tenant per consumer, slices written the way Liqo writes them
//! (replicated labels, `Authentication` accepted, `authParams`), and the
//! real `resource-monitor --liqo-api v1` over a static source with quota and
//! filter stages.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use e2e::buying::{self, admin, consumer, delete, publish};
use e2e::catalog::{provider, Backend, Catalog, Env};
use e2e::contracts::buy;
use e2e::process::Bound;
use e2e::{Child, Spawn};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

pub const SLICES: (&str, &str) = ("authentication.liqo.io", "resourceslices");
pub const TENANTS: (&str, &str) = ("authentication.liqo.io", "tenants");
pub const NAMESPACES: (&str, &str) = ("", "namespaces");
pub const LEASES: (&str, &str) = ("coordination.k8s.io", "leases");

/// The namespace the controller runs in, as `deploy/kubernetes/slice-controller`
/// installs it: its Lease lives here (`POD_NAMESPACE`).
pub const CONTROLLER_NAMESPACE: &str = "liqo";
/// Who the controller is: the ServiceAccount of those manifests, so that
/// `deploy-check` holds every call against the RBAC shipped for it.
pub const CONTROLLER_USER: &str = "system:serviceaccount:liqo:slice-controller";

/// The class under test.
pub const CLASS: &str = "gold";
/// When Liqo accepted the authentication of every test slice.
pub const AUTH_TIME: &str = "2026-11-20T08:00:00Z";

/// Bounds a wait for what the controller does eventually (every use polls
/// until a condition holds); measures nothing: [`e2e::EVENTUALLY`].
pub const SETTLE: Duration = e2e::EVENTUALLY;

pub fn tenant_namespace(consumer: &str) -> String {
    format!("liqo-tenant-{consumer}")
}

/// The `Authentication` condition Liqo writes.
pub fn auth_condition() -> Value {
    json!({"type": "Authentication", "status": "Accepted",
           "reason": "ResourceSliceAuthenticationAccepted",
           "message": "ResourceSlice authentication accepted",
           "lastTransitionTime": AUTH_TIME})
}

/// The `authParams` Liqo writes (base64 of a CA, a signed certificate).
pub fn auth_params() -> Value {
    json!({"ca": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJBZ0lCQURBTkJna3Foa2lHOXcwQkFRc0ZBREFWTVJNd0VRWURWUVFERXdwcmRXSmwKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
           "signedCRT": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSURJVENDQWdtZ0F3SUJBZ0lRYlhEdTZ5RE1FZGlvTlc4Y3pzS0xaREFOQmdrcWhraUc5dzBCQVFzRkFEQVYKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
           "apiServer": "https://provider.example:6443"})
}

pub struct Provider {
    pub kube: KubeApiServer,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub resources: PathBuf,
    pub chain: PathBuf,
}

impl Provider {
    /// The API server, and a chain file: static `inventory` → quota 50% →
    /// filter denying `nvidia.com/*`.
    pub async fn start(inventory: &[(&str, &str)]) -> Result<Self> {
        let kube = KubeApiServer::start_tls().await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        kube.write_kubeconfig_as(&kubeconfig, CONTROLLER_USER)?;
        // Under exactly the permissions deploy/ ships for it.
        e2e::rbac::load_shipped(&kube)?;
        kube.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": CONTROLLER_NAMESPACE}}),
        );
        let resources = dir.path().join("resources.yaml");
        let chain = dir.path().join("chain.toml");
        std::fs::write(
            &chain,
            "[source.static]\npath = \"resources.yaml\"\n\n[quota]\npercent = 50\n\n[[filter.rules]]\ndeny = [\"nvidia.com/*\"]\n",
        )?;
        let provider = Self {
            kube,
            dir,
            kubeconfig,
            resources,
            chain,
        };
        provider.write_inventory(inventory)?;
        Ok(provider)
    }

    /// Replace the static source's file (renamed into place, as editors do).
    pub fn write_inventory(&self, inventory: &[(&str, &str)]) -> Result<()> {
        let text: String = inventory
            .iter()
            .map(|(name, value)| format!("{name}: \"{value}\"\n"))
            .collect();
        let temp = self.dir.path().join(".resources.yaml.tmp");
        std::fs::write(&temp, text)?;
        std::fs::rename(&temp, &self.resources)?;
        Ok(())
    }

    /// A consumer's tenant namespace and Tenant (`Active`, `Cordoned`,
    /// `Drained`).
    /// Returns the Tenant as stored.
    pub fn tenant(&self, consumer: &str, condition: &str) -> Value {
        let namespace = tenant_namespace(consumer);
        self.kube.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": namespace,
                                "labels": {"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": consumer}}}),
        );
        self.kube.apply(
            TENANTS,
            json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
                   "metadata": {"name": consumer, "namespace": namespace,
                                "labels": {"liqo.io/remote-cluster-id": consumer}},
                   "spec": {"clusterID": consumer, "authzPolicy": "KeysExchange", "tenantCondition": condition}}),
        )
    }

    /// A slice as Liqo leaves it on the provider: replicated labels, and,
    /// if `authenticated`, the `Authentication` condition and `authParams`.
    pub fn slice(
        &self,
        consumer: &str,
        name: &str,
        class: &str,
        asked: &[(&str, &str)],
        authenticated: bool,
    ) -> Value {
        let resources: serde_json::Map<String, Value> = asked
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        let mut object = json!({
            "apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
            "metadata": {"name": name, "namespace": tenant_namespace(consumer),
                "labels": {"liqo.io/replicated": "true", "liqo.io/originID": consumer,
                           "liqo.io/remote-cluster-id": consumer, "liqo.io/replication": "false"}},
            "spec": {"class": class, "consumerClusterID": consumer, "providerClusterID": "provider-1",
                     "resources": resources, "csr": "Y3NyLWJ5dGVz"},
        });
        if authenticated {
            object["status"] =
                json!({"conditions": [auth_condition()], "authParams": auth_params()});
        }
        self.kube.apply(SLICES, object)
    }

    pub fn get_slice(&self, consumer: &str, name: &str) -> Result<Value> {
        self.kube
            .get(SLICES, Some(&tenant_namespace(consumer)), name)
            .with_context(|| format!("slice {name} of {consumer} is gone"))
    }

    /// The slice's `Resources` condition, if any.
    pub fn resources_condition(&self, consumer: &str, name: &str) -> Option<Value> {
        let slice = self.get_slice(consumer, name).ok()?;
        slice["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Resources")
            .cloned()
    }

    /// Wait until the slice's `Resources` condition satisfies `check`.
    pub async fn wait_condition(
        &self,
        consumer: &str,
        name: &str,
        within: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> Result<Value> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(condition) = self.resources_condition(consumer, name) {
                if check(&condition) {
                    return Ok(condition);
                }
            }
            if Instant::now() >= deadline {
                bail!(
                    "slice {name}: no matching Resources condition within {within:?}; slice is {}",
                    self.get_slice(consumer, name)
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Status writes (PUT `/status`) made to slices so far.
    pub fn status_writes(&self) -> usize {
        self.kube
            .audit()
            .iter()
            .filter(|r| {
                r.resource.as_ref().is_some_and(|a| {
                    a.resource == "resourceslices"
                        && a.subresource.as_deref() == Some("status")
                        && a.verb == "update"
                })
            })
            .count()
    }

    /// `resource-monitor --liqo-api v1 --class gold` over the chain file,
    /// as the ServiceAccount of the shipped manifests, with short Lease
    /// timings; `extra` adds flags.
    pub fn controller(&self, extra: &[&str]) -> Result<(Child, u16)> {
        self.controller_renewing_every("250ms", extra)
    }

    /// [`Provider::controller`] with `--lease-retry` set to `retry`.
    pub fn controller_renewing_every(&self, retry: &str, extra: &[&str]) -> Result<(Child, u16)> {
        let (child, bound) = self.controller_announced(retry, extra)?;
        Ok((child, bound.port(Some("controller"))))
    }

    /// [`Provider::controller_renewing_every`], with every port it
    /// announced (the controller's, role `controller`; the gRPC server's,
    /// if `extra` has `--listen`).
    pub fn controller_announced(&self, retry: &str, extra: &[&str]) -> Result<(Child, Bound)> {
        let ports = if extra.contains(&"--listen") { 2 } else { 1 };
        self.controller_spawn(retry, extra).start_announced(ports)
    }

    /// [`Provider::controller`] holding the Lease with `lease`'s timings.
    pub fn controller_leased(&self, lease: LeaseTimes, extra: &[&str]) -> Result<(Child, u16)> {
        let (child, bound) = self
            .controller_spawn_leased(lease, extra)
            .start_announced(1)?;
        Ok((child, bound.port(Some("controller"))))
    }

    /// The controller [`Provider::controller_announced`] starts, not yet
    /// started (to send its log to a file, say).
    pub fn controller_spawn(&self, retry: &str, extra: &[&str]) -> Spawn {
        let retry = edge::duration::parse(retry).expect("a --lease-retry duration");
        self.controller_spawn_leased(LeaseTimes::SHORT.retrying_every(retry), extra)
    }

    /// [`Provider::controller_spawn`] with `lease`'s timings.
    pub fn controller_spawn_leased(&self, lease: LeaseTimes, extra: &[&str]) -> Spawn {
        // `--liqo-api v1` unless the test names another API.
        let api = if extra.contains(&"--liqo-api") {
            &[][..]
        } else {
            &["--liqo-api", "v1"][..]
        };
        Spawn::new("resource-monitor")
            .args(api)
            .args(["--class", CLASS, "--config"])
            .arg(&self.chain)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--http-listen", "127.0.0.1:0"])
            .arg("--lease-duration")
            .arg(edge::duration::format(lease.duration))
            .arg("--lease-renew-deadline")
            .arg(edge::duration::format(lease.renew_deadline))
            .arg("--lease-retry")
            .arg(edge::duration::format(lease.retry))
            .args(extra)
            // As the Deployment sets it (the downward API): the Lease's
            // namespace.
            .env("POD_NAMESPACE", CONTROLLER_NAMESPACE)
            .env("RUST_LOG", "info,slice_controller=debug")
    }
}

/// The Lease timings a controller is started with: `--lease-duration`,
/// `--lease-renew-deadline`, `--lease-retry` (controller-core's
/// `LeaseTimesArgs`; the election's rules in its `lease` module).
#[derive(Debug, Clone, Copy)]
pub struct LeaseTimes {
    pub duration: Duration,
    pub renew_deadline: Duration,
    pub retry: Duration,
}

impl LeaseTimes {
    /// What [`Provider::controller`] starts with: short, so a released or
    /// expired Lease changes hands quickly.
    pub const SHORT: LeaseTimes = LeaseTimes {
        duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry: Duration::from_millis(250),
    };

    /// The same with `--lease-retry` set to `retry`.
    pub fn retrying_every(self, retry: Duration) -> Self {
        LeaseTimes { retry, ..self }
    }
}

/// GET a path of the controller's HTTP port: (status, body).
pub async fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    let client = e2e::http::async_client(Duration::from_secs(5));
    let response = client
        .get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

/// The Lease's holder, if any.
pub fn lease_holder(kube: &KubeApiServer) -> Option<String> {
    let lease = kube.get(
        LEASES,
        Some(CONTROLLER_NAMESPACE),
        &format!("slice-controller-{CLASS}"),
    )?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_string)
}

/// The Lease's `renewTime`, if any.
pub fn lease_renewed(kube: &KubeApiServer) -> Option<std::time::SystemTime> {
    let lease = kube.get(
        LEASES,
        Some(CONTROLLER_NAMESPACE),
        &format!("slice-controller-{CLASS}"),
    )?;
    let stamp = chrono::DateTime::parse_from_rfc3339(lease["spec"]["renewTime"].as_str()?).ok()?;
    Some(std::time::SystemTime::from(stamp))
}

/// Catalog calls are blocking (reqwest's blocking client): off the async
/// workers.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

pub struct Shop {
    _env: Env,
    pub catalog: Catalog,
    pub alice: String,
    pub credentials: PathBuf,
}

/// A catalog where provider 1 (`cluster-1`) sells offer `shop` (plan
/// `small`: cpu 2, memory 4Gi), consumer `alice` may buy, and the
/// provider's credentials file (0600) lies in `dir`.
pub fn shop(dir: &Path) -> Shop {
    blocking(|| {
        let env = Env::new(Backend::Embedded);
        let catalog = buying::start(&env, &[]);
        publish(&catalog, 1, "shop");
        let admin = admin(&catalog);
        let alice = consumer(&catalog, &admin, "alice");
        let credentials = dir.join("catalog-credentials.json");
        std::fs::write(&credentials, provider(1).to_string()).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        Shop {
            _env: env,
            catalog,
            alice,
            credentials,
        }
    })
}

impl Shop {
    /// Alice buys plan `small` for consumer cluster `cluster`; the
    /// contract's id.
    pub fn buy(&self, cluster: &str, extra: Value) -> String {
        self.buy_plan("shop", "small", cluster, extra)
    }

    /// Alice buys `plan` of `offer` for consumer cluster `cluster`.
    pub fn buy_plan(&self, offer: &str, plan: &str, cluster: &str, extra: Value) -> String {
        blocking(|| {
            let mut body = json!({ "consumerClusterID": cluster });
            if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
                b.extend(e.clone());
            }
            let r = buy(&self.catalog, &self.alice, offer, plan, &body);
            assert_eq!(r.status, 201, "{}", r.text);
            r.json["id"].as_str().unwrap().to_string()
        })
    }

    pub fn cancel(&self, id: &str) {
        blocking(|| {
            let r = delete(
                &self.catalog,
                &format!("/purchases/{id}"),
                Some(&self.alice),
            );
            assert_eq!(r.status, 200, "{}", r.text);
        })
    }

    /// The controller's flags for this catalog: contracts come on the
    /// catalog's change stream, `--contracts-poll-interval` (the fallback
    /// poll and resync) is the shipped default.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--grant-policy".into(),
            "contracts".into(),
            "--on-shrink".into(),
            "follow".into(),
            "--catalog-url".into(),
            self.catalog.url(""),
            "--catalog-credentials-file".into(),
            self.credentials.display().to_string(),
        ]
    }
}
