//! What the aggregator is told: command-line flags (each with an environment
//! fallback) and an optional TOML file, merged into [`Settings`]. Flags win
//! over the file; upstreams given as flags come first, then the file's.
//!
//! ```toml
//! listen = "0.0.0.0:6000"
//! liqo_api = "v0.6"               # downstream shape: v0.5 (A) | v0.6 … v0.8 (B) | v0.9 … v0.10 (C)
//! metrics_listen = "127.0.0.1:9090"
//! upstream_timeout = "1s"
//! coalesce = "100ms"
//!
//! [policy]
//! mode = "last-known"             # or "omit"
//! max_age = "30s"
//!
//! [[upstream]]
//! cluster_id = "cluster-a"
//! address = "10.0.0.1:6001"       # host:port or http://host:port, shape A
//! ```
//!
//! The file is re-read on SIGHUP and when it changes (the `reload` module);
//! a file that fails to parse or validate changes nothing. Errors name the
//! key and its line. Durations, in flags and file alike, are written in the
//! grammar of [`edge::duration`]: `500ms`, `30s`, `5m`, `1h 30m`, `7d`, or a
//! bare number of seconds.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use edge::log::LogFormat;
use resource_reader::LiqoApi;
use serde::Deserialize;
use toml::Spanned;

use crate::policy::{Policy, PolicyKind};

/// Defaults, stated once so `--help`, the README and the code agree.
pub mod defaults {
    use std::time::Duration;

    /// Per-upstream limit for one read.
    pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(1);
    /// Quiet time that merges a burst of upstream changes into one
    /// downstream notification.
    pub const COALESCE: Duration = Duration::from_millis(100);
    /// How long a last-known answer may stand in for an unreachable upstream.
    pub const MAX_AGE: Duration = crate::policy::DEFAULT_MAX_AGE;
    /// Downstream gRPC connections open at once.
    pub const MAX_CONNECTIONS: usize = 256;
    /// Downstream connections open at once from one IP address (each port).
    pub const MAX_CONNECTIONS_PER_PEER: usize = 32;
    /// How long a new downstream connection has to send its first bytes.
    pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
    /// Shape A: how long a read waits for a first answer when no upstream
    /// can answer yet.
    pub const FIRST_SYNC_TIMEOUT: Duration = Duration::from_secs(10);
}

/// Pools N upstream Liqo ResourceReaders into one offer.
///
/// A read for cluster X is fanned out to every upstream except the one whose
/// cluster ID is X, each read *for X* (so each upstream's own quota and filter
/// decide what X sees), and answered with the per-resource sum, folded in the
/// configured order. Upstream notifications are merged into one stream, bursts
/// coalesced. Served in the wire shape of a Liqo release, with gRPC health and
/// reflection.
///
/// Quick start:  aggregator --listen 0.0.0.0:6000 --upstream c1=10.0.0.1:6001 --upstream c2=10.0.0.2:6001
/// From a file:  aggregator --config aggregator.toml   (reloaded on SIGHUP and when it changes)
///
/// Config file (TOML; every key optional, flags override it, unknown keys are errors):
///
///   listen = "0.0.0.0:6000"   liqo_api = "v0.6"   metrics_listen = "127.0.0.1:9090"
///   upstream_timeout = "1s"   coalesce = "100ms"  pool_name = ""  pool_prefix = ""  max_connections = 256
///   max_connections_per_peer = 32   handshake_timeout = "5s"   first_sync_timeout = "10s"
///   [policy]      mode = "last-known" | "omit",  max_age = "30s"
///   [[upstream]]  cluster_id = "c1",  address = "10.0.0.1:6001",  liqo_api = "v0.5"   (repeat; summed in order)
///
/// Reload applies upstreams, policy and upstream_timeout; other keys need a restart.
///
/// Durations (flags, environment, file): 500ms, 30s, 5m, 1h 30m, 7d, or a
/// bare number of seconds.
#[derive(Debug, Clone, Default, clap::Parser)]
#[command(name = "aggregator", version, verbatim_doc_comment)]
pub struct Cli {
    /// TOML config file; re-read on SIGHUP and when it changes (upstreams,
    /// policy and timeout take effect without a restart).
    #[arg(long, short = 'c', env = "AGGREGATOR_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address to serve the pooled ResourceReader on (gRPC). Required, here or
    /// as `listen` in the config file.
    #[arg(long, env = "AGGREGATOR_LISTEN", value_name = "ADDR")]
    pub listen: Option<SocketAddr>,

    /// An upstream ResourceReader (shape A), repeatable; summed in the order
    /// given. In the environment: comma-separated.
    #[arg(
        long = "upstream",
        env = "AGGREGATOR_UPSTREAMS",
        value_name = "CLUSTER_ID=ADDR",
        value_delimiter = ','
    )]
    pub upstreams: Vec<UpstreamFlag>,

    /// Wire shape served downstream: v0.5 (shape A), v0.6 … v0.8 (B),
    /// v0.9 … v0.10 (C). [default: v0.5]
    #[arg(long, env = "AGGREGATOR_LIQO_API", value_name = "VERSION")]
    pub liqo_api: Option<LiqoApi>,

    /// Shape C only: the pool name of the answered resource list.
    #[arg(long, env = "AGGREGATOR_POOL_NAME")]
    pub pool_name: Option<String>,

    /// Shape C only: the pool prefix of the answered resource list.
    #[arg(long, env = "AGGREGATOR_POOL_PREFIX")]
    pub pool_prefix: Option<String>,

    /// Serve Prometheus metrics (/metrics), upstream status (/status, JSON)
    /// and /healthz over HTTP on this address. Off unless set.
    #[arg(long, env = "AGGREGATOR_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,

    /// What a read does with an upstream that is unreachable or slower than
    /// --upstream-timeout: `omit` leaves it out of the sum; `last-known`
    /// uses the answer it last gave for the same cluster, for at most
    /// --max-age after it stopped answering, then leaves it out.
    /// [default: last-known]
    #[arg(long, env = "AGGREGATOR_POLICY", value_enum)]
    pub policy: Option<PolicyKind>,

    /// With `--policy last-known`: how long a last-known answer may stand in
    /// for an upstream that stopped answering (e.g. 30s, 2m). [default: 30s]
    #[arg(long, env = "AGGREGATOR_MAX_AGE", value_parser = edge::duration::parse, value_name = "DURATION")]
    pub max_age: Option<Duration>,

    /// Limit for one upstream read; a slower upstream is handled by the
    /// policy (e.g. 500ms, 2s). [default: 1s]
    #[arg(long, env = "AGGREGATOR_UPSTREAM_TIMEOUT", value_parser = edge::duration::parse, value_name = "DURATION")]
    pub upstream_timeout: Option<Duration>,

    /// Upstream changes within this window are sent downstream as one
    /// notification (e.g. 100ms, 0s to disable). [default: 100ms]
    #[arg(long, env = "AGGREGATOR_COALESCE", value_parser = edge::duration::parse, value_name = "DURATION")]
    pub coalesce: Option<Duration>,

    /// Downstream gRPC connections open at once; more wait. [default: 256]
    #[arg(long, env = "AGGREGATOR_MAX_CONNECTIONS", value_name = "N")]
    pub max_connections: Option<usize>,

    /// Connections open at once from one IP address, on the gRPC port and on
    /// the metrics port each; more are closed at once. [default: 32; the
    /// metrics port never allows more than 8]
    #[arg(long, env = "AGGREGATOR_MAX_CONNECTIONS_PER_PEER", value_name = "N")]
    pub max_connections_per_peer: Option<usize>,

    /// A new connection (gRPC or metrics port) that has not sent its first
    /// bytes (the HTTP/2 preface, an HTTP request line) within this time is
    /// closed, so silent connections cannot hold the slots. [default: 5s]
    #[arg(long, env = "AGGREGATOR_HANDSHAKE_TIMEOUT", value_parser = edge::duration::parse, value_name = "DURATION")]
    pub handshake_timeout: Option<Duration>,

    /// Shape A downstream (Liqo v0.5 withdraws the offer on any error): how
    /// long a read waits for a first answer while no upstream can give one;
    /// once answered, a failing read is answered with the last known sum.
    /// [default: 10s]
    #[arg(long, env = "AGGREGATOR_FIRST_SYNC_TIMEOUT", value_parser = edge::duration::parse, value_name = "DURATION")]
    pub first_sync_timeout: Option<Duration>,

    /// Log format.
    #[arg(long, env = "AGGREGATOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[arg(long, env = "AGGREGATOR_LOG_LEVEL", value_name = "LEVEL", default_value = "info", help = edge::log::LOG_LEVEL_HELP)]
    pub log_level: edge::log::LogLevel,
}

/// A string newtype whose `FromStr` checks it: `as_str`, `Display`, and a
/// `Deserialize` that goes through the same `FromStr`, so a value in the
/// file is checked exactly as the same value given as a flag.
macro_rules! checked_string {
    ($name:ident) => {
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d)?
                    .parse()
                    .map_err(serde::de::Error::custom)
            }
        }
    };
}

/// A cluster ID: what Liqo sends as the originator of a read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterId(String);

checked_string!(ClusterId);

impl FromStr for ClusterId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("empty cluster ID".into());
        }
        if s.len() > 253 {
            return Err(format!(
                "cluster ID of {} characters (at most 253)",
                s.len()
            ));
        }
        // Liqo cluster IDs are UUIDs or DNS-like names.
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(*c)))
        {
            return Err(format!(
                "cluster ID {s:?} contains {c:?} (allowed: letters, digits, '-', '_', '.')"
            ));
        }
        Ok(ClusterId(s.to_string()))
    }
}

/// An upstream's address as given (`host:port` or `http://host:port`),
/// checked to be something the gRPC client can dial.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamAddress(String);

checked_string!(UpstreamAddress);

impl FromStr for UpstreamAddress {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("empty upstream address".into());
        }
        let uri = if s.contains("://") {
            s.to_string()
        } else {
            format!("http://{s}")
        };
        if !uri.starts_with("http://") {
            return Err(format!(
                "upstream address {s:?}: only plain http:// (h2c) upstreams are supported"
            ));
        }
        let endpoint = tonic::transport::Endpoint::from_shared(uri)
            .map_err(|e| format!("upstream address {s:?} is not a valid URI: {e}"))?;
        if endpoint.uri().host().is_none_or(str::is_empty) {
            return Err(format!("upstream address {s:?} has no host"));
        }
        Ok(UpstreamAddress(s.to_string()))
    }
}

/// One upstream: who it is (never offered its own resources) and where.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamSpec {
    pub cluster_id: ClusterId,
    pub address: UpstreamAddress,
    /// The wire shape the upstream serves; shape A unless the file says.
    pub api: LiqoApi,
}

/// `--upstream CLUSTER_ID=ADDR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamFlag(pub UpstreamSpec);

impl FromStr for UpstreamFlag {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (id, address) = s
            .split_once('=')
            .ok_or_else(|| format!("expected CLUSTER_ID=ADDR, got {s:?}"))?;
        Ok(UpstreamFlag(UpstreamSpec {
            cluster_id: id.trim().parse()?,
            address: address.trim().parse()?,
            api: LiqoApi::V05,
        }))
    }
}

/// A duration in the file: a string in the grammar of [`edge::duration`]
/// (`"30s"`, `"5m"`, `"1h 30m"`, or `"30"` for bare seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileDuration(Duration);

impl<'de> Deserialize<'de> for FileDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        edge::duration::parse(&s)
            .map(FileDuration)
            .map_err(serde::de::Error::custom)
    }
}

/// The file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    liqo_api: Option<LiqoApi>,
    pool_name: Option<String>,
    pool_prefix: Option<String>,
    metrics_listen: Option<SocketAddr>,
    upstream_timeout: Option<FileDuration>,
    coalesce: Option<FileDuration>,
    max_connections: Option<usize>,
    max_connections_per_peer: Option<usize>,
    handshake_timeout: Option<FileDuration>,
    first_sync_timeout: Option<FileDuration>,
    #[serde(default)]
    policy: FilePolicy,
    #[serde(default)]
    upstream: Vec<FileUpstream>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePolicy {
    mode: Option<PolicyKind>,
    max_age: Option<FileDuration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileUpstream {
    cluster_id: Spanned<ClusterId>,
    address: UpstreamAddress,
    liqo_api: Option<LiqoApi>,
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Read(#[from] edge::config_file::ConfigFileError),
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{origin}: upstream cluster ID {cluster_id:?} is configured twice (cluster IDs must be unique)")]
    DuplicateUpstream { origin: String, cluster_id: String },
    #[error("no listen address: pass --listen ADDR or set `listen` in the config file")]
    NoListen,
    #[error("{key}: {message}")]
    Invalid { key: &'static str, message: String },
}

/// Everything the aggregator runs with, resolved from flags and file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub listen: SocketAddr,
    pub liqo_api: LiqoApi,
    pub pool_name: String,
    pub pool_prefix: String,
    pub metrics_listen: Option<SocketAddr>,
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    pub handshake_timeout: Duration,
    pub first_sync_timeout: Duration,
    pub coalesce: Duration,
    /// The part that a reload may change without a restart.
    pub dynamic: Dynamic,
}

/// The settings applied on reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dynamic {
    /// In the order they are summed.
    pub upstreams: Vec<UpstreamSpec>,
    pub policy: Policy,
    pub upstream_timeout: Duration,
}

/// The largest config file read: a list of upstreams and a policy is a few
/// kilobytes, and an unbounded read of `/dev/zero` once took gigabytes.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

impl Settings {
    /// Merge the flags with the file they name (if any), reading the file now.
    pub fn resolve(cli: &Cli) -> Result<Settings, ConfigError> {
        let (file, file_text) = match &cli.config {
            Some(path) => {
                let text = edge::config_file::read("--config", path, MAX_CONFIG_BYTES)?;
                (parse_file(path, &text)?, text)
            }
            None => (FileConfig::default(), String::new()),
        };
        Self::merge(cli, file, &file_text)
    }

    fn merge(cli: &Cli, file: FileConfig, file_text: &str) -> Result<Settings, ConfigError> {
        let file_name = cli.config.as_deref().map(Path::display);
        let mut upstreams: Vec<UpstreamSpec> = Vec::new();
        let mut push = |spec: UpstreamSpec, origin: String| {
            if upstreams.iter().any(|u| u.cluster_id == spec.cluster_id) {
                return Err(ConfigError::DuplicateUpstream {
                    origin,
                    cluster_id: spec.cluster_id.to_string(),
                });
            }
            upstreams.push(spec);
            Ok(())
        };
        for UpstreamFlag(spec) in &cli.upstreams {
            push(
                spec.clone(),
                format!("--upstream {}={}", spec.cluster_id, spec.address),
            )?;
        }
        for entry in file.upstream {
            let line = line_of(file_text, entry.cluster_id.span().start);
            let origin = match &file_name {
                Some(name) => format!("{name} line {line}, key `cluster_id`"),
                None => format!("line {line}, key `cluster_id`"),
            };
            let spec = UpstreamSpec {
                cluster_id: entry.cluster_id.into_inner(),
                address: entry.address,
                api: entry.liqo_api.unwrap_or(LiqoApi::V05),
            };
            push(spec, origin)?;
        }

        let kind = cli.policy.or(file.policy.mode).unwrap_or_default();
        let max_age = cli
            .max_age
            .or(file.policy.max_age.map(|d| d.0))
            .unwrap_or(defaults::MAX_AGE);
        let policy = Policy::new(kind, max_age);
        let upstream_timeout = cli
            .upstream_timeout
            .or(file.upstream_timeout.map(|d| d.0))
            .unwrap_or(defaults::UPSTREAM_TIMEOUT);
        let max_connections = cli
            .max_connections
            .or(file.max_connections)
            .unwrap_or(defaults::MAX_CONNECTIONS);
        let max_connections_per_peer = cli
            .max_connections_per_peer
            .or(file.max_connections_per_peer)
            .unwrap_or(defaults::MAX_CONNECTIONS_PER_PEER);
        let handshake_timeout = cli
            .handshake_timeout
            .or(file.handshake_timeout.map(|d| d.0))
            .unwrap_or(defaults::HANDSHAKE_TIMEOUT);
        // At zero, each of these would refuse every read or connection.
        const NOT_ZERO: &str = "must be longer than 0s";
        const AT_LEAST_ONE: &str = "must be at least 1";
        let zeros = [
            ("upstream_timeout", upstream_timeout.is_zero(), NOT_ZERO),
            ("max_connections", max_connections == 0, AT_LEAST_ONE),
            (
                "max_connections_per_peer",
                max_connections_per_peer == 0,
                AT_LEAST_ONE,
            ),
            ("handshake_timeout", handshake_timeout.is_zero(), NOT_ZERO),
        ];
        if let Some(&(key, _, why)) = zeros.iter().find(|(_, zero, _)| *zero) {
            return Err(ConfigError::Invalid {
                key,
                message: why.into(),
            });
        }
        Ok(Settings {
            listen: cli.listen.or(file.listen).ok_or(ConfigError::NoListen)?,
            liqo_api: cli.liqo_api.or(file.liqo_api).unwrap_or_default(),
            pool_name: cli.pool_name.clone().or(file.pool_name).unwrap_or_default(),
            pool_prefix: cli
                .pool_prefix
                .clone()
                .or(file.pool_prefix)
                .unwrap_or_default(),
            metrics_listen: cli.metrics_listen.or(file.metrics_listen),
            max_connections,
            max_connections_per_peer,
            handshake_timeout,
            first_sync_timeout: cli
                .first_sync_timeout
                .or(file.first_sync_timeout.map(|d| d.0))
                .unwrap_or(defaults::FIRST_SYNC_TIMEOUT),
            coalesce: cli
                .coalesce
                .or(file.coalesce.map(|d| d.0))
                .unwrap_or(defaults::COALESCE),
            dynamic: Dynamic {
                upstreams,
                policy,
                upstream_timeout,
            },
        })
    }

    /// The settings that differ from `self` in `new` but need a restart to
    /// take effect, by key.
    pub fn restart_needed(&self, new: &Settings) -> Vec<&'static str> {
        [
            ("listen", self.listen != new.listen),
            ("liqo_api", self.liqo_api != new.liqo_api),
            (
                "pool_name/pool_prefix",
                self.pool_name != new.pool_name || self.pool_prefix != new.pool_prefix,
            ),
            ("metrics_listen", self.metrics_listen != new.metrics_listen),
            (
                "max_connections",
                self.max_connections != new.max_connections,
            ),
            (
                "max_connections_per_peer",
                self.max_connections_per_peer != new.max_connections_per_peer,
            ),
            (
                "handshake_timeout",
                self.handshake_timeout != new.handshake_timeout,
            ),
            (
                "first_sync_timeout",
                self.first_sync_timeout != new.first_sync_timeout,
            ),
            ("coalesce", self.coalesce != new.coalesce),
        ]
        .into_iter()
        .filter_map(|(key, changed)| changed.then_some(key))
        .collect()
    }
}

fn parse_file(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|e: toml::de::Error| ConfigError::Parse {
        path: path.to_path_buf(),
        // toml's message names the key and shows the offending line.
        message: e.to_string().trim_end().to_string(),
    })
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("aggregator").chain(args.iter().copied()))
            .expect("valid flags")
    }

    fn from_text(cli: &Cli, text: &str) -> Result<Settings, ConfigError> {
        let file = parse_file(Path::new("agg.toml"), text)?;
        Settings::merge(cli, file, text)
    }

    #[test]
    fn flags_alone() {
        let s = Settings::resolve(&cli(&[
            "--listen",
            "127.0.0.1:7000",
            "--upstream",
            "a=127.0.0.1:7001",
            "--upstream",
            "b=http://localhost:7002",
            "--liqo-api",
            "v0.9",
            "--policy",
            "omit",
        ]))
        .unwrap();
        assert_eq!(s.listen, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(s.liqo_api, LiqoApi::V09);
        let ids: Vec<_> = s
            .dynamic
            .upstreams
            .iter()
            .map(|u| u.cluster_id.as_str())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(
            s.dynamic.upstreams[1].address.as_str(),
            "http://localhost:7002"
        );
        assert_eq!(s.dynamic.policy, Policy::Omit);
        assert_eq!(s.dynamic.upstream_timeout, defaults::UPSTREAM_TIMEOUT);
    }

    #[test]
    fn defaults_are_last_known_30s() {
        let s = Settings::resolve(&cli(&["--listen", "127.0.0.1:1"])).unwrap();
        assert_eq!(
            s.dynamic.policy,
            Policy::LastKnown {
                max_age: Duration::from_secs(30)
            }
        );
        assert_eq!(s.liqo_api, LiqoApi::V05);
        assert_eq!(s.coalesce, Duration::from_millis(100));
    }

    #[test]
    fn file_then_flags_override() {
        let text = r#"
listen = "127.0.0.1:6000"
liqo_api = "v0.6"
upstream_timeout = "250ms"

[policy]
mode = "last-known"
max_age = "2m"

[[upstream]]
cluster_id = "c1"
address = "127.0.0.1:6001"

[[upstream]]
cluster_id = "c2"
address = "127.0.0.1:6002"
liqo_api = "v0.9"
"#;
        let s = from_text(
            &cli(&["--upstream", "c0=127.0.0.1:6003", "--max-age", "5s"]),
            text,
        )
        .unwrap();
        assert_eq!(s.listen, "127.0.0.1:6000".parse().unwrap());
        assert_eq!(s.liqo_api, LiqoApi::V06);
        assert_eq!(s.dynamic.upstream_timeout, Duration::from_millis(250));
        assert_eq!(
            s.dynamic.policy,
            Policy::LastKnown {
                max_age: Duration::from_secs(5)
            }
        );
        let ids: Vec<_> = s
            .dynamic
            .upstreams
            .iter()
            .map(|u| u.cluster_id.as_str())
            .collect();
        assert_eq!(
            ids,
            ["c0", "c1", "c2"],
            "flags first, then the file in order"
        );
        assert_eq!(s.dynamic.upstreams[2].api, LiqoApi::V09);
        assert_eq!(s.dynamic.upstreams[1].api, LiqoApi::V05);
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let text =
            "listen = \"127.0.0.1:6000\"\n\n[[upstream]]\ncluster_id = \"a\"\nadress = \"x:1\"\n";
        let err = from_text(&Cli::default(), text).unwrap_err().to_string();
        assert!(err.contains("line 5"), "{err}");
        assert!(err.contains("adress"), "{err}");
    }

    #[test]
    fn bad_values_name_key_and_line() {
        for (text, line, needle) in [
            ("listen = \"nowhere\"\n", 1, "listen"),
            (
                "listen = \"127.0.0.1:1\"\nupstream_timeout = \"5 parsecs\"\n",
                2,
                "invalid duration",
            ),
            (
                "listen = \"127.0.0.1:1\"\n[policy]\nmode = \"sometimes\"\n",
                3,
                "sometimes",
            ),
            (
                "[[upstream]]\ncluster_id = \"a b\"\naddress = \"h:1\"\n",
                2,
                "contains ' '",
            ),
            (
                "[[upstream]]\ncluster_id = \"a\"\naddress = \"https://h:1\"\n",
                3,
                "http://",
            ),
            ("liqo_api = \"v2\"\n", 1, "unknown Liqo API"),
        ] {
            let err = from_text(&Cli::default(), text).unwrap_err().to_string();
            assert!(err.contains(&format!("line {line}")), "{text}: {err}");
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn duplicate_cluster_ids_are_rejected_with_their_line() {
        let text = "listen = \"127.0.0.1:1\"\n[[upstream]]\ncluster_id = \"a\"\naddress = \"h:1\"\n[[upstream]]\ncluster_id = \"a\"\naddress = \"h:2\"\n";
        let err = from_text(&Cli::default(), text).unwrap_err().to_string();
        assert!(err.contains("line 6"), "{err}");
        assert!(err.contains("\"a\""), "{err}");
        let err = from_text(&cli(&["--upstream", "a=h:3"]), text)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 3"),
            "flag first, so the file's first `a` clashes: {err}"
        );
    }

    #[test]
    fn missing_listen_is_an_error() {
        assert!(matches!(
            Settings::resolve(&Cli::default()),
            Err(ConfigError::NoListen)
        ));
    }

    #[test]
    fn bad_upstream_flags() {
        for bad in ["nothing", "=h:1", "a=", "a b=h:1", "a=https://h:1"] {
            assert!(bad.parse::<UpstreamFlag>().is_err(), "{bad}");
        }
        let ok: UpstreamFlag = "cluster-1=127.0.0.1:6001".parse().unwrap();
        assert_eq!(ok.0.cluster_id.as_str(), "cluster-1");
        assert_eq!(ok.0.api, LiqoApi::V05);
    }

    #[test]
    fn durations_in_the_one_grammar() {
        let s = from_text(
            &Cli::default(),
            "listen = \"127.0.0.1:1\"\nupstream_timeout = \"2\"\ncoalesce = \"1s 500ms\"\nhandshake_timeout = \"3s\"\n[policy]\nmax_age = \"1d\"\n",
        )
        .unwrap();
        assert_eq!(s.dynamic.upstream_timeout, Duration::from_secs(2));
        assert_eq!(s.coalesce, Duration::from_millis(1500));
        assert_eq!(s.handshake_timeout, Duration::from_secs(3));
        assert_eq!(
            s.dynamic.policy,
            Policy::LastKnown {
                max_age: Duration::from_secs(86_400)
            }
        );
        let s = Settings::resolve(&cli(&["--listen", "127.0.0.1:1", "--max-age", "90"])).unwrap();
        assert_eq!(
            s.dynamic.policy,
            Policy::LastKnown {
                max_age: Duration::from_secs(90)
            }
        );
        for bad in [
            "upstream_timeout = -1\n",
            "coalesce = \"1.5\"\n",
            "coalesce = true\n",
        ] {
            let text = format!("listen = \"127.0.0.1:1\"\n{bad}");
            let err = from_text(&Cli::default(), &text).unwrap_err().to_string();
            assert!(err.contains("line 2"), "{bad}: {err}");
        }
    }

    #[test]
    fn zero_timeout_is_rejected() {
        let err = Settings::resolve(&cli(&[
            "--listen",
            "127.0.0.1:1",
            "--upstream-timeout",
            "0s",
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("upstream_timeout"), "{err}");
    }

    #[test]
    fn restart_needed_lists_static_keys() {
        let a = Settings::resolve(&cli(&["--listen", "127.0.0.1:1"])).unwrap();
        let mut b = a.clone();
        b.dynamic.upstream_timeout = Duration::from_secs(9);
        assert!(a.restart_needed(&b).is_empty());
        b.listen = "127.0.0.1:2".parse().unwrap();
        assert_eq!(a.restart_needed(&b), ["listen"]);
    }

    /// Hostile config files, assembled from pieces of real ones, broken
    /// values and raw noise: resolving never panics, and what is accepted
    /// holds what the aggregator relies on (unique, well-formed cluster IDs;
    /// positive timeouts; at least one connection per peer).
    mod hostile {
        use proptest::prelude::*;

        use super::*;

        fn value() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("\"127.0.0.1:6000\"".to_string()),
                Just("\"nowhere\"".to_string()),
                Just("\"a\"".to_string()),
                Just("\"b\"".to_string()),
                Just("\"a b\"".to_string()),
                Just("\"\"".to_string()),
                Just("\"https://h:1\"".to_string()),
                Just("\"h:1\"".to_string()),
                Just("\"0s\"".to_string()),
                Just("\"1s\"".to_string()),
                Just("\"-1s\"".to_string()),
                Just("\"1.5s\"".to_string()),
                Just("\"7d\"".to_string()),
                Just("\"30\"".to_string()),
                Just("\"omit\"".to_string()),
                Just("\"last-known\"".to_string()),
                Just("\"v0.6\"".to_string()),
                Just("0".to_string()),
                Just("-1".to_string()),
                Just("5".to_string()),
                Just("99999999999999999999".to_string()),
                Just("true".to_string()),
                "\"[^\"\\\\]{0,12}\"",
            ]
        }

        fn line() -> impl Strategy<Value = String> {
            let key = prop_oneof![
                Just("listen"),
                Just("liqo_api"),
                Just("metrics_listen"),
                Just("upstream_timeout"),
                Just("coalesce"),
                Just("max_connections"),
                Just("max_connections_per_peer"),
                Just("handshake_timeout"),
                Just("first_sync_timeout"),
                Just("mode"),
                Just("max_age"),
                Just("cluster_id"),
                Just("address"),
            ];
            prop_oneof![
                (key, value()).prop_map(|(k, v)| format!("{k} = {v}")),
                prop_oneof![Just("[policy]"), Just("[[upstream]]")].prop_map(str::to_string),
                "\\PC{0,20}",
            ]
        }

        fn check(text: &str) -> Result<(), TestCaseError> {
            let Ok(file) = parse_file(Path::new("agg.toml"), text) else {
                return Ok(());
            };
            let Ok(settings) = Settings::merge(&Cli::default(), file, text) else {
                return Ok(());
            };
            let ids: std::collections::BTreeSet<_> = settings
                .dynamic
                .upstreams
                .iter()
                .map(|u| &u.cluster_id)
                .collect();
            prop_assert_eq!(ids.len(), settings.dynamic.upstreams.len(), "{}", text);
            for upstream in &settings.dynamic.upstreams {
                prop_assert!(upstream.cluster_id.as_str().parse::<ClusterId>().is_ok());
                prop_assert!(upstream.address.as_str().parse::<UpstreamAddress>().is_ok());
            }
            prop_assert!(!settings.dynamic.upstream_timeout.is_zero());
            prop_assert!(!settings.handshake_timeout.is_zero());
            prop_assert!(settings.max_connections >= 1);
            prop_assert!(settings.max_connections_per_peer >= 1);
            Ok(())
        }

        proptest! {
            #[test]
            fn never_panics_and_never_accepts_what_is_refused(
                lines in proptest::collection::vec(line(), 0..14)
            ) {
                let mut text = String::from("listen = \"127.0.0.1:1\"\n");
                text.push_str(&lines.join("\n"));
                check(&text)?;
            }

            #[test]
            fn raw_noise_never_panics(text in "\\PC{0,200}") {
                check(&text)?;
            }
        }
    }
}
