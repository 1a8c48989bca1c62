//! Support for the catalog's end-to-end tests: start the real `catalog`
//! binary on either store, talk HTTP to it, and make test data.
//!
//! Every test is written once as `fn name(backend: Backend)` and expanded for
//! both stores by [`catalog_tests!`](crate::catalog_tests).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::mongo::MongoServer;
use crate::process::{bin_path, exit_within, follow_stdout, wait_announced};

/// Which store a catalog runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Embedded,
    Mongo,
}

/// Generate, for each named `fn(Backend)` in scope, a test per store:
/// `embedded::name` and `mongo::name`.
#[macro_export]
macro_rules! catalog_tests {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $( #[test] fn $name() { super::$name($crate::catalog::Backend::Embedded) } )*
        }
        mod mongo {
            $( #[test] fn $name() { super::$name($crate::catalog::Backend::Mongo) } )*
        }
    };
}

/// The catalog's default `--mongodb-timeout` (`catalog/src/config.rs`), as
/// the binary itself documents it (`catalog --help`, `[default: …]`): what
/// every MongoDB-backed catalog an [`Env`] starts runs with (see
/// [`Env::store_args`]), so the unit of a bound on what such a catalog does
/// against the database. Read from the binary, so such a bound follows the
/// product's setting rather than a copy of it.
pub fn default_mongodb_timeout() -> Duration {
    static DEFAULT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| {
        let out = std::process::Command::new(bin_path("catalog"))
            .arg("--help")
            .output()
            .expect("catalog --help");
        let help = String::from_utf8_lossy(&out.stdout);
        // The flag's own entry: its line and those below, up to the next
        // flag's.
        let mut lines = help
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("--mongodb-timeout "));
        let head = lines
            .next()
            .expect("catalog --help documents --mongodb-timeout");
        let entry: Vec<&str> = std::iter::once(head)
            .chain(lines.take_while(|l| !l.trim_start().starts_with('-')))
            .collect();
        let default = entry
            .iter()
            .find_map(|l| l.trim().strip_prefix("[default: "))
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or_else(|| {
                panic!(
                    "no default in catalog --help's entry:\n{}",
                    entry.join("\n")
                )
            });
        edge::duration::parse(default)
            .unwrap_or_else(|e| panic!("catalog --help's default --mongodb-timeout {default}: {e}"))
    })
}

/// Where a test's catalogs keep their data: a temp data directory, plus (for
/// [`Backend::Mongo`]) a private SecantusDB server and database. Catalogs
/// started from one `Env` share the data, so restarts see it.
pub struct Env {
    pub backend: Backend,
    pub data_dir: tempfile::TempDir,
    pub mongo: Option<MongoServer>,
}

impl Env {
    pub fn new(backend: Backend) -> Self {
        let data_dir = tempfile::tempdir().expect("temp data dir");
        let mongo = match backend {
            Backend::Embedded => None,
            Backend::Mongo => Some(MongoServer::start().expect("start SecantusDB")),
        };
        Env {
            backend,
            data_dir,
            mongo,
        }
    }

    /// The flags selecting this env's store.
    ///
    /// No `--mongodb-timeout`: the catalog runs on its default
    /// ([`default_mongodb_timeout`]), the bound it ships with. A shorter
    /// one made ordinary requests (a login's write, say) fail with 503
    /// whenever SecantusDB, a Python server, took longer on a loaded
    /// machine — a test of the machine's speed, not of the catalog. Tests
    /// whose subject is the timeout pass their own with `extra`
    /// (`catalog_mongo_faults`, `catalog_mongo_request_deadline`) and derive
    /// their bounds from it.
    pub fn store_args(&self) -> Vec<String> {
        let mut args = vec![
            "--data-dir".to_string(),
            self.data_dir.path().display().to_string(),
        ];
        if let Some(m) = &self.mongo {
            args.extend([
                "--mongodb-uri".into(),
                m.uri(),
                "--mongodb-database".into(),
                "catalog_e2e".into(),
            ]);
        }
        args
    }

    /// Start a catalog on a fresh port.
    pub fn start(&self) -> Catalog {
        self.start_with(&[])
    }

    /// Start a catalog with extra flags.
    pub fn start_with(&self, extra: &[&str]) -> Catalog {
        self.try_start(extra).expect("start catalog")
    }

    pub fn try_start(&self, extra: &[&str]) -> Result<Catalog> {
        self.try_start_logged(extra, None)
    }

    /// Start a catalog whose stdout goes to `stdout` (a file), if given.
    pub fn try_start_logged(
        &self,
        extra: &[&str],
        stdout: Option<&std::path::Path>,
    ) -> Result<Catalog> {
        self.try_start_io(extra, stdout, None)
    }

    /// Start a catalog whose logs (stderr) go to `stderr` (a file).
    pub fn start_with_logs(&self, extra: &[&str], stderr: &std::path::Path) -> Catalog {
        self.try_start_io(extra, None, Some(stderr))
            .expect("start catalog")
    }

    /// Start a catalog logging at `filter` (as `RUST_LOG`, which wins over
    /// the test process's own) to `stderr` (a file).
    pub fn start_with_log_filter(
        &self,
        extra: &[&str],
        filter: &str,
        stderr: &std::path::Path,
    ) -> Catalog {
        self.try_start_full(&[], extra, None, Some(stderr), Some(filter))
            .expect("start catalog")
    }

    /// Start a catalog as the last argument of `wrapper` (e.g. `strace -f
    /// -o FILE`); the process handle is the wrapper's.
    pub fn start_wrapped(&self, wrapper: &[&std::ffi::OsStr], extra: &[&str]) -> Catalog {
        self.try_start_full(wrapper, extra, None, None, None)
            .expect("start catalog")
    }

    fn try_start_io(
        &self,
        extra: &[&str],
        stdout: Option<&std::path::Path>,
        stderr: Option<&std::path::Path>,
    ) -> Result<Catalog> {
        self.try_start_full(&[], extra, stdout, stderr, None)
    }

    fn try_start_full(
        &self,
        wrapper: &[&std::ffi::OsStr],
        extra: &[&str],
        stdout: Option<&std::path::Path>,
        stderr: Option<&std::path::Path>,
        filter: Option<&str>,
    ) -> Result<Catalog> {
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = std::process::Command::new(program);
                cmd.args(args).arg(bin_path("catalog"));
                cmd
            }
            None => std::process::Command::new(bin_path("catalog")),
        };
        // Port 0: the catalog binds a port the system chose and announces it
        // on stdout, so no other test can take it in between.
        if !extra.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        // Credentials are checked on a pool of low-priority threads
        // (`--auth-verify-nice`) whose callers give up after
        // `--auth-verify-wait` (5 s by default) with a 503: on a machine as
        // loaded as the suite's, that pool is the first thing starved. Tests
        // wait as long as anything eventually takes; a test about the pool
        // (catalog_auth_pool) sets its own.
        if !extra.contains(&"--auth-verify-wait") {
            cmd.args([
                "--auth-verify-wait",
                &format!("{}s", crate::EVENTUALLY.as_secs()),
            ]);
        }
        cmd.args(["--shutdown-timeout", "10s"])
            .args(self.store_args())
            .args(extra)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped());
        if let Some(f) = filter {
            cmd.env("RUST_LOG", f);
        } else if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let sink = match stdout {
            Some(path) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
            None => None,
        };
        if let Some(path) = stderr {
            cmd.stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            );
        }
        let mut spawned = cmd.spawn().context("starting catalog")?;
        let announced = follow_stdout(spawned.stdout.take().context("catalog stdout")?, sink);
        let mut child = CatalogProcess {
            child: Some(spawned),
        };
        let bound = wait_announced("catalog", announced, 1, || Ok(child.try_wait()))?;
        let c = Catalog::attach(child, bound.port(None));
        if self.mongo.is_some() {
            // As a load balancer would: a MongoDB-backed catalog takes
            // subscribers once it follows the database's change streams.
            c.wait_for_status("/readyz", 200, Duration::from_secs(30))?;
        }
        Ok(c)
    }
}

/// A running `catalog` process; SIGKILLed when dropped.
pub struct CatalogProcess {
    child: Option<std::process::Child>,
}

impl CatalogProcess {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Exited already? Its status if so.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGKILL: the crash case.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send SIGTERM without waiting.
    pub fn signal_term(&self) {
        if let Some(c) = &self.child {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
        }
    }

    /// SIGTERM, then wait up to `timeout` for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        self.signal_term();
        self.wait(timeout)
    }

    /// Wait up to `timeout` for the process to exit (SIGKILL after that).
    pub fn wait(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        let mut c = self.child.take().context("catalog already stopped")?;
        exit_within(&mut c, timeout)
            .with_context(|| format!("catalog did not exit within {timeout:?}"))
    }
}

impl Drop for CatalogProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A running catalog process and an HTTP client for it.
pub struct Catalog {
    pub child: CatalogProcess,
    pub port: u16,
    http: reqwest::blocking::Client,
}

/// An HTTP answer: status, headers and body (parsed as JSON when it is).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
    pub json: Value,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Assert this is the JSON error shape with `status`; returns the message.
    #[track_caller]
    pub fn expect_error(&self, status: u16) -> String {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.text
        );
        assert!(
            self.json["error"].is_string(),
            "error body lacks `error`: {}",
            self.text
        );
        let message = self.json["message"]
            .as_str()
            .unwrap_or_else(|| panic!("error body lacks `message`: {}", self.text));
        message.to_string()
    }
}

impl Catalog {
    pub fn attach(child: CatalogProcess, port: u16) -> Self {
        let http = crate::http::blocking_client(Duration::from_secs(30));
        Catalog { child, port, http }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn send(&self, req: reqwest::blocking::RequestBuilder) -> Result<Resp> {
        let r = req.send().context("HTTP request")?;
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().context("HTTP body")?;
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Resp {
            status,
            headers,
            text,
            json,
        })
    }

    pub fn get(&self, path: &str) -> Resp {
        self.send(self.http.get(self.url(path))).expect("GET")
    }

    pub fn post(&self, path: &str, body: &Value, token: Option<&str>) -> Resp {
        self.try_post(path, body, token).expect("POST")
    }

    pub fn try_post(&self, path: &str, body: &Value, token: Option<&str>) -> Result<Resp> {
        let mut req = self.http.post(self.url(path)).json(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        self.send(req)
    }

    /// POST raw bytes as JSON.
    pub fn post_raw(&self, path: &str, body: Vec<u8>, token: Option<&str>) -> Resp {
        let mut req = self
            .http
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        self.send(req).expect("POST")
    }

    pub fn delete(&self, path: &str, token: Option<&str>) -> Resp {
        let mut req = self.http.delete(self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        self.send(req).expect("DELETE")
    }

    /// Authenticate `creds`, asserting success; returns the JWT.
    #[track_caller]
    pub fn login(&self, creds: &Value) -> String {
        let r = self.post("/authenticate", creds, None);
        assert_eq!(r.status, 200, "authenticate failed: {}", r.text);
        r.json["token"]
            .as_str()
            .expect("token in answer")
            .to_string()
    }

    /// Create or replace `id`, asserting 200/201; returns the stored offer.
    #[track_caller]
    pub fn put_offer(&self, id: &str, offer: &Value, token: &str) -> Value {
        let r = self.post(&format!("/offer/{id}"), offer, Some(token));
        assert!(
            r.status == 200 || r.status == 201,
            "POST /offer/{id}: {} {}",
            r.status,
            r.text
        );
        r.json
    }

    /// `GET /offers` with a raw query string; asserts 200, returns the ids.
    #[track_caller]
    pub fn list_ids(&self, query: &str) -> Vec<String> {
        let r = self.get(&format!("/offers{query}"));
        assert_eq!(r.status, 200, "GET /offers{query}: {}", r.text);
        r.json
            .as_array()
            .expect("array of offers")
            .iter()
            .map(|o| o["id"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Every offer, for before/after comparisons.
    pub fn all_offers(&self) -> Value {
        let r = self.get("/offers");
        assert_eq!(r.status, 200, "GET /offers: {}", r.text);
        r.json
    }

    /// Wait until `GET path` answers `status` (e.g. readiness after an outage).
    pub fn wait_for_status(&self, path: &str, status: u16, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(r) = self.send(self.http.get(self.url(path))) {
                if r.status == status {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                anyhow::bail!("GET {path} did not answer {status} within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Peering credentials of test provider `n`.
pub fn provider(n: u32) -> Value {
    json!({
        "clusterID": format!("cluster-{n}"),
        "clusterName": format!("provider {n}"),
        "authURL": format!("https://provider-{n}.example:6443"),
        "token": format!("secret-token-of-provider-{n}"),
    })
}

/// The thesis's example offer, as it writes it (both plan spellings).
pub fn thesis_offer() -> Value {
    json!({ "name": "Storage-optimized offer", "type": "storage",
      "description": "For all your storage needs.",
      "plans": {
        "basic":  { "name": "plan-basic", "cost": "1.0",
                    "resources": { "cpu": "1000m", "memory": "2G", "storage": "100G" } },
        "medium": { "planName": "plan-medium", "planID": "medium", "cost": "2.0",
                    "resources": { "cpu": "2000m", "memory": "4G", "storage": "300G" } } } })
}

/// A one-plan offer.
/// Each offer's `(id, version)`, in the order of an array of offers (a
/// list answer or a feed snapshot).
pub fn id_versions(offers: &Value) -> Vec<(String, u64)> {
    offers
        .as_array()
        .expect("an array of offers")
        .iter()
        .map(|o| {
            (
                o["id"].as_str().expect("an offer id").to_string(),
                o["version"].as_u64().expect("an offer version"),
            )
        })
        .collect()
}

pub fn simple_offer(name: &str, offer_type: &str, cost: &str, resources: Value) -> Value {
    json!({ "name": name, "type": offer_type, "plans": { "only": { "name": name, "cost": cost, "resources": resources } } })
}
