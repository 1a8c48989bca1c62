//! Shared by the `aggregator_*` end-to-end tests: real `resource-monitor`
//! upstreams on static files, the real `aggregator` binary, and its HTTP
//! port (`/metrics`, `/status`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use e2e::{Child, Spawn};

/// A `resource-monitor` process serving a static file in shape A.
pub struct Monitor {
    pub id: String,
    pub port: u16,
    pub file: PathBuf,
    config: Option<PathBuf>,
    child: Option<Child>,
}

impl Monitor {
    /// Serve `yaml` (resource name → quantity) as upstream cluster `id`.
    pub fn start(dir: &Path, id: &str, yaml: &str) -> Result<Self> {
        let file = dir.join(format!("{id}.yaml"));
        std::fs::write(&file, yaml)?;
        let mut m = Self {
            id: id.into(),
            port: 0,
            file,
            config: None,
            child: None,
        };
        m.restart()?;
        Ok(m)
    }

    /// As [`start`](Self::start), with a chain file whose extra TOML
    /// (quota, filter sections) follows the static source.
    pub fn start_with_chain(dir: &Path, id: &str, yaml: &str, extra_toml: &str) -> Result<Self> {
        let file = dir.join(format!("{id}.yaml"));
        std::fs::write(&file, yaml)?;
        let config = dir.join(format!("{id}.toml"));
        std::fs::write(
            &config,
            format!(
                "[source.static]\npath = {:?}\n\n{extra_toml}",
                file.display().to_string()
            ),
        )?;
        let mut m = Self {
            id: id.into(),
            port: 0,
            file,
            config: Some(config),
            child: None,
        };
        m.restart()?;
        Ok(m)
    }

    /// (Re)start the process: the first time on a port the system picks
    /// (port 0, announced), then on that same port, so the aggregator's
    /// `--upstream` address stays true.
    pub fn restart(&mut self) -> Result<()> {
        let mut spawn = Spawn::new("resource-monitor");
        spawn = match &self.config {
            Some(config) => spawn.arg("--config").arg(config),
            None => spawn
                .arg("--source")
                .arg(format!("static:{}", self.file.display())),
        };
        let (child, bound) = spawn
            .args([
                "--liqo-api",
                "v0.5",
                "--listen",
                &format!("127.0.0.1:{}", self.port),
            ])
            .start_announced(1)?;
        self.port = bound.port(None);
        self.child = Some(child);
        Ok(())
    }

    /// The process ID, 0 when stopped.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::pid)
    }

    /// SIGKILL: the upstream crashes.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill();
        }
    }

    /// Replace the resource file (write + rename, as editors do).
    pub fn set(&self, yaml: &str) -> Result<()> {
        let tmp = self.file.with_extension("tmp");
        std::fs::write(&tmp, yaml)?;
        std::fs::rename(&tmp, &self.file)?;
        Ok(())
    }

    /// `--upstream` value.
    pub fn flag(&self) -> String {
        format!("{}=127.0.0.1:{}", self.id, self.port)
    }

    /// A `[[upstream]]` table for the aggregator's config file.
    pub fn toml(&self) -> String {
        format!(
            "[[upstream]]\ncluster_id = \"{}\"\naddress = \"127.0.0.1:{}\"\n\n",
            self.id, self.port
        )
    }
}

/// A running `aggregator`.
pub struct Aggregator {
    pub port: u16,
    pub metrics_port: u16,
    pub child: Child,
}

impl Aggregator {
    /// Start with `args` plus `--listen` and `--metrics-listen` on port 0
    /// (the system picks; the aggregator announces both).
    pub fn start<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Result<Self> {
        let (child, bound) = Spawn::new("aggregator")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .start_announced(2)?;
        Ok(Self {
            port: bound.port(None),
            metrics_port: bound.port(Some("metrics")),
            child,
        })
    }

    pub async fn get(&self, path: &str) -> Result<String> {
        let url = format!("http://127.0.0.1:{}{path}", self.metrics_port);
        let client = e2e::http::async_client(Duration::from_secs(5));
        let response = client
            .get(&url)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?;
        if !response.status().is_success() {
            bail!("GET {url}: {}", response.status());
        }
        Ok(response.text().await?)
    }

    pub async fn metrics(&self) -> Result<String> {
        self.get("/metrics").await
    }

    pub async fn status(&self) -> Result<serde_json::Value> {
        Ok(serde_json::from_str(&self.get("/status").await?)?)
    }

    /// The `/status` entry of upstream `id`.
    pub async fn upstream_status(&self, id: &str) -> Result<serde_json::Value> {
        let status = self.status().await?;
        status["upstreams"]
            .as_array()
            .and_then(|ups| ups.iter().find(|u| u["cluster_id"] == id).cloned())
            .with_context(|| format!("no upstream {id} in /status: {status}"))
    }

    /// Poll `/status` until upstream `id` is up (`true`) or down.
    pub async fn wait_upstream(
        &self,
        id: &str,
        up: bool,
        timeout: Duration,
    ) -> Result<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let entry = self.upstream_status(id).await?;
            if entry["up"] == up {
                return Ok(entry);
            }
            if Instant::now() > deadline {
                bail!("upstream {id} not up={up} within {timeout:?}: {entry}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGHUP: reload the config.
    pub fn sighup(&self) -> Result<()> {
        let status = std::process::Command::new("kill")
            .args(["-HUP", &self.child.pid().to_string()])
            .status()?;
        if !status.success() {
            bail!("kill -HUP failed");
        }
        Ok(())
    }
}

/// The value of the sample `series` (name with labels, exactly as
/// rendered) in Prometheus text, if present.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}
