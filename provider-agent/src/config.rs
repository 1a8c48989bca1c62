//! What the agent is told: the provider's credentials file, where to read
//! resources from, which offer and plan to keep up to date, and the values
//! used when the agent has to create that offer or plan. Everything is
//! checked here, before the agent contacts anything, and every error names
//! the flag, file or field that is wrong.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(feature = "chain")]
use resource_monitor::config::{ChainConfig, SourceConfig};
use resource_reader::client::{ClientError, UpstreamClient, UpstreamOptions};
use resource_reader::{LiqoApi, ReaderExt, ResourceReader};
use serde::{Deserialize, Serialize};

/// Why the agent cannot start with this configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the credentials file {path}: {source}")]
    CredentialsRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid credentials file {path}: {message}")]
    CredentialsParse { path: PathBuf, message: String },
    #[error("invalid credentials file {path}: {field} {problem}")]
    CredentialsField {
        path: PathBuf,
        field: &'static str,
        problem: String,
    },
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
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(rename = "clusterName")]
    pub cluster_name: String,
    #[serde(rename = "authURL")]
    pub auth_url: String,
    pub token: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("cluster_id", &self.cluster_id)
            .field("cluster_name", &self.cluster_name)
            .field("auth_url", &self.auth_url)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl Credentials {
    /// Read a credentials file: JSON when it ends in `.json`, TOML when it
    /// ends in `.toml`, otherwise whichever of the two parses.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::CredentialsRead {
                path: path.to_path_buf(),
                source,
            })?;
        warn_if_readable_by_others(path);
        let creds = Self::parse(&text, path)?;
        creds.check(path)?;
        Ok(creds)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let bad = |message: String| ConfigError::CredentialsParse {
            path: path.to_path_buf(),
            message,
        };
        let extension = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        // The parsers' messages quote the offending line; for the token's
        // line that would print the secret, so only their position is kept.
        match extension.as_deref() {
            Some("json") => serde_json::from_str(text).map_err(|e| bad(json_message(&e))),
            Some("toml") => toml::from_str(text).map_err(|e| bad(toml_message(&e, text))),
            _ => serde_json::from_str(text).or_else(|json| {
                toml::from_str(text).map_err(|toml| {
                    bad(format!(
                        "neither JSON ({}) nor TOML ({})",
                        json_message(&json),
                        toml_message(&toml, text)
                    ))
                })
            }),
        }
    }

    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let field = |field: &'static str, problem: &str| ConfigError::CredentialsField {
            path: path.to_path_buf(),
            field,
            problem: problem.to_string(),
        };
        for (name, value) in [
            ("clusterID", &self.cluster_id),
            ("clusterName", &self.cluster_name),
            ("authURL", &self.auth_url),
            ("token", &self.token),
        ] {
            if value.trim().is_empty() {
                return Err(field(name, "must not be empty"));
            }
        }
        if !(self.auth_url.starts_with("https://") || self.auth_url.starts_with("http://")) {
            return Err(field("authURL", "must be an http:// or https:// URL"));
        }
        Ok(())
    }
}

fn json_message(e: &serde_json::Error) -> String {
    redact_values(&e.to_string())
}

fn toml_message(e: &toml::de::Error, text: &str) -> String {
    let line = e.span().map(|span| {
        let before = &text.as_bytes()[..span.start.min(text.len())];
        before.iter().filter(|b| **b == b'\n').count() + 1
    });
    let message = redact_values(e.message());
    match line {
        Some(line) => format!("{message} (line {line})"),
        None => message,
    }
}

/// serde's "invalid type: integer `123`, expected a string" quotes the
/// value, which may be the secret: keep only its kind.
fn redact_values(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        let Some(start) = message.find(prefix) else {
            continue;
        };
        let rest = &message[start + prefix.len()..];
        let Some(end) = rest.find(", expected") else {
            continue;
        };
        let kind = rest[..end].split_whitespace().next().unwrap_or("value");
        return format!("{}{prefix}{kind}{}", &message[..start], &rest[end..]);
    }
    message.to_string()
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "the credentials file is readable by other users; chmod 600 it");
        }
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

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

    fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    const JSON: &str = r#"{"clusterID":"c1","clusterName":"one","authURL":"https://one:443","token":"s3cret-value"}"#;
    const TOML: &str = "clusterID = \"c1\"\nclusterName = \"one\"\nauthURL = \"https://one:443\"\ntoken = \"s3cret-value\"\n";

    #[test]
    fn credentials_load_from_json_and_toml_alike() {
        let dir = tempfile::tempdir().unwrap();
        let from_json = Credentials::load(&write(&dir, "c.json", JSON)).unwrap();
        let from_toml = Credentials::load(&write(&dir, "c.toml", TOML)).unwrap();
        let sniffed_json = Credentials::load(&write(&dir, "creds", JSON)).unwrap();
        let sniffed_toml = Credentials::load(&write(&dir, "creds2", TOML)).unwrap();
        assert_eq!(from_json.cluster_id, "c1");
        assert_eq!(from_json.token, "s3cret-value");
        assert_eq!(from_json, from_toml);
        assert_eq!(from_json, sniffed_json);
        assert_eq!(from_json, sniffed_toml);
    }

    #[test]
    fn credentials_debug_hides_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let creds = Credentials::load(&write(&dir, "c.json", JSON)).unwrap();
        let shown = format!("{creds:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("c1"));
    }

    #[test]
    fn bad_credentials_files_name_the_problem_without_the_secret() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Credentials::load(&dir.path().join("nope.json")).unwrap_err();
        assert!(missing.to_string().contains("nope.json"), "{missing}");

        let no_token = write(
            &dir,
            "a.json",
            r#"{"clusterID":"c1","clusterName":"one","authURL":"https://x"}"#,
        );
        let e = Credentials::load(&no_token).unwrap_err().to_string();
        assert!(e.contains("token"), "{e}");

        let empty = write(
            &dir,
            "b.toml",
            "clusterID = \"\"\nclusterName = \"one\"\nauthURL = \"https://x\"\ntoken = \"t\"\n",
        );
        let e = Credentials::load(&empty).unwrap_err().to_string();
        assert!(e.contains("clusterID") && e.contains("empty"), "{e}");

        let bad_url = write(
            &dir,
            "c.json",
            r#"{"clusterID":"c1","clusterName":"one","authURL":"ftp://x","token":"t"}"#,
        );
        let e = Credentials::load(&bad_url).unwrap_err().to_string();
        assert!(e.contains("authURL"), "{e}");

        // A syntax error on the token's line must not echo the token.
        let broken = write(
            &dir,
            "d.toml",
            "clusterID = \"c1\"\ntoken = \"s3cret-value\" oops\n",
        );
        let e = Credentials::load(&broken).unwrap_err().to_string();
        assert!(!e.contains("s3cret"), "{e}");
        assert!(e.contains("line 2"), "{e}");

        let numeric = write(
            &dir,
            "f.json",
            r#"{"clusterID":"c1","clusterName":"one","authURL":"https://x","token":987654321}"#,
        );
        let e = Credentials::load(&numeric).unwrap_err().to_string();
        assert!(
            !e.contains("987654321") && e.contains("expected a string"),
            "{e}"
        );

        let unknown = write(
            &dir,
            "e.json",
            r#"{"clusterID":"c1","clusterName":"one","authURL":"https://x","token":"t","extra":1}"#,
        );
        let e = Credentials::load(&unknown).unwrap_err().to_string();
        assert!(e.contains("extra"), "{e}");
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
