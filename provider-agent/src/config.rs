//! What the agent is told: the provider's credentials file, where to read
//! resources from, which offer and plan to keep up to date, and the values
//! used when the agent has to create that offer or plan. Everything is
//! checked here, before the agent contacts anything, and every error names
//! the flag, file or field that is wrong.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::CatalogClient;
#[cfg(feature = "chain")]
use resource_monitor::config::{ChainConfig, SourceConfig};
use resource_reader::client::{ClientError, UpstreamClient, UpstreamOptions};
use resource_reader::{LiqoApi, ReaderExt, ResourceReader};

/// Why the agent cannot start with this configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Credentials(#[from] catalog_client::CredentialsError),
    #[error("invalid {flag}: {problem}")]
    Flag { flag: &'static str, problem: String },
    #[error("reader: {0}")]
    Upstream(#[from] ClientError),
    #[cfg(feature = "chain")]
    #[error("reader: {0}")]
    Chain(#[from] resource_monitor::config::ConfigError),
    #[cfg(feature = "chain")]
    #[error("reader: {0}")]
    Build(#[from] resource_monitor::chain::BuildError),
}

fn flag(flag: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Flag {
        flag,
        problem: problem.into(),
    }
}

/// The provider's Liqo peering credentials, as `POST /authenticate` takes
/// them. `Debug` never shows the token.
pub type Credentials = catalog_client::wire::PeeringCredentials;

/// Read the credentials file (JSON or TOML). One that other users may read
/// is used, with a warning to `chmod 600` it.
pub fn load_credentials(path: &Path) -> Result<Credentials, ConfigError> {
    Ok(catalog_client::credentials::load(
        path,
        catalog_client::Exposure::Warn,
    )?)
}

/// The catalog at `base`, authenticated as `credentials` (read again from
/// `credentials_file`, if given, when the catalog refuses them), each
/// request bounded by `timeout` (nothing is contacted yet). The catalog stamps the
/// plans this client writes as the provider agent's by its `User-Agent`.
pub fn catalog_session(
    base: reqwest::Url,
    credentials: Credentials,
    credentials_file: Option<PathBuf>,
    timeout: std::time::Duration,
) -> Result<CatalogClient, catalog_client::Error> {
    let http = catalog_client::Http::client(
        timeout,
        concat!("provider-agent/", env!("CARGO_PKG_VERSION")),
    )?;
    Ok(CatalogClient::new(
        catalog_client::Http::new(http, base),
        catalog_client::Login::Provider {
            credentials,
            file: credentials_file.map(|path| (path, catalog_client::Exposure::Warn)),
        },
    ))
}

/// Where the agent reads resources from.
///
/// A running `resource-monitor` over gRPC is always available. Running a
/// source or a whole chain in-process needs the `chain` cargo feature (on by
/// default), which links `resource-monitor` and its sources (Kubernetes
/// client, host probes); `--no-default-features` builds a smaller agent that
/// only follows a gRPC reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReaderSpec {
    /// `grpc:ADDRESS`: a running resource-monitor (or aggregator) serving
    /// the wire shape `api`.
    Grpc { address: String, api: LiqoApi },
    /// A single source run in-process, written like `resource-monitor
    /// --source`: `static:FILE`, `host` or `kubernetes`.
    #[cfg(feature = "chain")]
    Source(SourceConfig),
    /// A whole chain file (`resource-monitor --config`), run in-process; its
    /// `[server]` section is ignored.
    #[cfg(feature = "chain")]
    ChainFile(PathBuf),
}

impl ReaderSpec {
    /// Parse a `--reader` value. `api` is the wire shape of a `grpc:`
    /// upstream.
    pub fn source(spec: &str, api: LiqoApi) -> Result<Self, ConfigError> {
        if let Some(address) = spec.strip_prefix("grpc:") {
            if address.is_empty() {
                return Err(flag(
                    "--reader",
                    "grpc: needs an address, as in grpc:HOST:PORT",
                ));
            }
            return Ok(ReaderSpec::Grpc {
                address: address.to_string(),
                api,
            });
        }
        Self::in_process(spec)
    }

    #[cfg(feature = "chain")]
    fn in_process(spec: &str) -> Result<Self, ConfigError> {
        let source: SourceConfig =
            spec.parse()
                .map_err(|e: resource_monitor::config::BadSourceSpec| {
                    flag("--reader", e.to_string())
                })?;
        Ok(ReaderSpec::Source(source))
    }

    #[cfg(not(feature = "chain"))]
    fn in_process(spec: &str) -> Result<Self, ConfigError> {
        Err(flag(
            "--reader",
            format!("{spec:?}: this agent is built without the `chain` feature and follows only grpc:ADDRESS readers"),
        ))
    }

    /// A chain file run in-process (`--config`).
    #[cfg(feature = "chain")]
    pub fn chain_file(path: PathBuf) -> Result<Self, ConfigError> {
        Ok(ReaderSpec::ChainFile(path))
    }

    /// A chain file run in-process (`--config`): not in this build.
    #[cfg(not(feature = "chain"))]
    pub fn chain_file(path: PathBuf) -> Result<Self, ConfigError> {
        Err(flag(
            "--config",
            format!("{}: this agent is built without the `chain` feature and cannot run a chain file; use --reader grpc:ADDRESS", path.display()),
        ))
    }

    /// Build the reader (for a `grpc:` source this only starts connecting:
    /// an unreachable upstream is retried, not an error).
    pub async fn build(&self) -> Result<Arc<dyn ResourceReader>, ConfigError> {
        match self {
            ReaderSpec::Grpc { address, api } => Self::grpc(address, *api),
            #[cfg(feature = "chain")]
            ReaderSpec::Source(source) => {
                Self::chain(&ChainConfig {
                    source: Some(source.clone()),
                    ..ChainConfig::default()
                })
                .await
            }
            #[cfg(feature = "chain")]
            ReaderSpec::ChainFile(path) => Self::chain(&ChainConfig::load(path)?).await,
        }
    }

    #[cfg(feature = "chain")]
    async fn chain(config: &ChainConfig) -> Result<Arc<dyn ResourceReader>, ConfigError> {
        Ok(resource_monitor::chain::build(config).await?)
    }

    fn grpc(address: &str, api: LiqoApi) -> Result<Arc<dyn ResourceReader>, ConfigError> {
        let options = UpstreamOptions {
            api,
            ..UpstreamOptions::default()
        };
        Ok(UpstreamClient::connect(address, options)?.boxed())
    }
}

/// The offer and plan the agent keeps up to date, and what it reads them as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub offer_id: String,
    pub plan_id: String,
    /// The cluster ID the chain is asked for (`read(originator)`).
    pub originator: String,
    /// How to create the offer or the plan if missing; `None`: they must
    /// exist, and their absence stops the agent.
    pub create: Option<CreateDefaults>,
}

/// The fields of an offer or plan the agent creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateDefaults {
    pub offer_name: String,
    pub offer_type: String,
    pub offer_description: String,
    pub plan_name: String,
    /// A non-negative decimal, as the catalog takes it.
    pub plan_cost: String,
}

impl Target {
    /// Check the ids and the creation values the way the catalog will.
    pub fn check(&self) -> Result<(), ConfigError> {
        check_id("--offer", &self.offer_id)?;
        check_id("--plan", &self.plan_id)?;
        if let Some(c) = &self.create {
            check_text("--offer-name", &c.offer_name)?;
            check_text("--offer-type", &c.offer_type)?;
            if c.offer_description.len() > 8 * 1024
                || c.offer_description.chars().any(char::is_control)
            {
                return Err(flag(
                    "--offer-description",
                    "must be at most 8 KiB without control characters",
                ));
            }
            check_text("--plan-name", &c.plan_name)?;
            check_cost(&c.plan_cost)?;
        }
        Ok(())
    }
}

/// Offer ids and plan keys: 1 to 128 of `A-Z a-z 0-9 . _ ~ -`.
fn check_id(name: &'static str, id: &str) -> Result<(), ConfigError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(flag(
            name,
            format!("{id:?} must be 1 to 128 of A-Z a-z 0-9 . _ ~ -"),
        ))
    }
}

fn check_text(name: &'static str, value: &str) -> Result<(), ConfigError> {
    if value.trim().is_empty() {
        return Err(flag(name, "must not be empty"));
    }
    if value.len() > 256 || value.chars().any(char::is_control) {
        return Err(flag(
            name,
            "must be at most 256 bytes without control characters",
        ));
    }
    Ok(())
}

/// A non-negative decimal such as `0`, `1.5` or `12.00`.
fn check_cost(cost: &str) -> Result<(), ConfigError> {
    let (whole, fraction) = cost.split_once('.').unwrap_or((cost, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let ok = !whole.is_empty()
        && digits(whole)
        && digits(fraction)
        && !(cost.contains('.') && fraction.is_empty())
        && cost.len() <= 32;
    if ok {
        Ok(())
    } else {
        Err(flag(
            "--plan-cost",
            format!("{cost:?} is not a non-negative decimal such as 1.5"),
        ))
    }
}

/// The catalog's base URL: `http://` or `https://`, no query or fragment.
pub fn parse_catalog_url(url: &str) -> Result<reqwest::Url, ConfigError> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| flag("--catalog", format!("{url:?}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(flag(
            "--catalog",
            format!("{url:?} must be an http:// or https:// URL"),
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() || parsed.cannot_be_a_base() {
        return Err(flag(
            "--catalog",
            format!("{url:?} must be a base URL such as http://catalog:8080"),
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "chain")]
    fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn reader_specs() {
        let spec = ReaderSpec::source("grpc:127.0.0.1:6001", LiqoApi::V06).unwrap();
        assert_eq!(
            spec,
            ReaderSpec::Grpc {
                address: "127.0.0.1:6001".into(),
                api: LiqoApi::V06
            }
        );
        let e = ReaderSpec::source("magic", LiqoApi::V05)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--reader") && e.contains("grpc:ADDRESS"), "{e}");
        let e = ReaderSpec::source("grpc:", LiqoApi::V05)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--reader"), "{e}");
    }

    #[cfg(feature = "chain")]
    #[tokio::test]
    async fn a_chain_file_runs_in_process() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir, "resources.yaml", "cpu: 4\nmemory: 8Gi\n");
        let chain = write(
            &dir,
            "chain.toml",
            "[server]\nlisten = \"127.0.0.1:1\"\n[source.static]\npath = \"resources.yaml\"\n[quota]\npercent = 50\n",
        );
        let reader = ReaderSpec::ChainFile(chain).build().await.unwrap();
        let offered = reader.read("").await.unwrap();
        assert_eq!(offered.to_strings()["cpu"], "2");
        assert_eq!(offered.to_strings()["memory"], "4Gi");

        let bad = write(
            &dir,
            "bad.toml",
            "[source.static]\npath = \"missing.yaml\"\n",
        );
        let e = ReaderSpec::ChainFile(bad)
            .build()
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("missing.yaml"), "{e}");
    }

    fn target() -> Target {
        Target {
            offer_id: "offer-1".into(),
            plan_id: "small".into(),
            originator: String::new(),
            create: Some(CreateDefaults {
                offer_name: "Offer".into(),
                offer_type: "compute".into(),
                offer_description: String::new(),
                plan_name: "Small".into(),
                plan_cost: "1.5".into(),
            }),
        }
    }

    #[test]
    fn targets_are_checked_like_the_catalog_does() {
        assert!(target().check().is_ok());
        let mut t = target();
        t.offer_id = "has space".into();
        assert!(t.check().unwrap_err().to_string().contains("--offer"));
        let mut t = target();
        t.plan_id = String::new();
        assert!(t.check().unwrap_err().to_string().contains("--plan"));
        for cost in ["-1", "1.", ".5", "abc", "1e3", ""] {
            let mut t = target();
            if let Some(c) = t.create.as_mut() {
                c.plan_cost = cost.into();
            }
            assert!(
                t.check().unwrap_err().to_string().contains("--plan-cost"),
                "{cost}"
            );
        }
        for cost in ["0", "1.5", "12.00"] {
            let mut t = target();
            if let Some(c) = t.create.as_mut() {
                c.plan_cost = cost.into();
            }
            assert!(t.check().is_ok(), "{cost}");
        }
        let mut t = target();
        if let Some(c) = t.create.as_mut() {
            c.offer_type = " ".into();
        }
        assert!(t.check().unwrap_err().to_string().contains("--offer-type"));
    }

    #[test]
    fn catalog_urls() {
        assert!(parse_catalog_url("http://127.0.0.1:8080").is_ok());
        assert!(parse_catalog_url("https://catalog.example/broker/").is_ok());
        assert!(parse_catalog_url("ftp://x").is_err());
        assert!(parse_catalog_url("not a url").is_err());
        assert!(parse_catalog_url("http://x/?a=b").is_err());
    }
}
