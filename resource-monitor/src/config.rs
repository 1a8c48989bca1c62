//! The chain file (`resource-monitor --config chain.toml`): which source,
//! which stages, how to serve. Unknown keys and bad values are errors that
//! name the key and its line, reported before anything is started.
//!
//! ```toml
//! [server]
//! listen = "0.0.0.0:6001"
//! liqo_api = "v0.6"            # v0.5 (shape A) | v0.6 … v0.8 (B) | v0.9 … v0.10 (C)
//! handshake_timeout = "5s"     # durations: 500ms, 30s, 5m, 1h 30m, or bare seconds
//!
//! [source.static]              # or [source.host], [source.kubernetes], [source.grpc]
//! path = "resources.yaml"      # relative to this file
//!
//! [clusters."cluster-a".labels]
//! tier = "gold"
//!
//! [quota]
//! percent = 50
//! max = { cpu = "8", memory = "32Gi" }
//!
//! [[quota.originators]]
//! labels = { tier = "gold" }
//! percent = 80
//!
//! [[filter.rules]]
//! labels = { tier = "gold" }
//! allow = ["nvidia.com/*"]
//!
//! [[filter.rules]]
//! deny = ["nvidia.com/*"]
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::directory::ClusterDirectory;
use crate::stage::{FilterConfig, QuotaConfig};
use resource_reader::LiqoApi;

/// The whole chain file.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    #[serde(default)]
    pub server: ServerSection,
    /// Optional here so `--source` can provide it.
    pub source: Option<SourceConfig>,
    /// Label sets attached to cluster IDs, for quota and filter selectors.
    #[serde(default)]
    pub clusters: BTreeMap<String, ClusterEntry>,
    pub quota: Option<QuotaConfig>,
    pub filter: Option<FilterConfig>,
}

/// `[server]`: every key optional; command-line flags win.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub listen: Option<SocketAddr>,
    pub liqo_api: Option<LiqoApi>,
    pub pool_name: Option<String>,
    pub pool_prefix: Option<String>,
    pub max_connections: Option<NonZeroU64>,
    pub max_connections_per_peer: Option<NonZeroU64>,
    pub handshake_timeout: Option<ConfigDuration>,
    pub first_sync_timeout: Option<ConfigDuration>,
}

/// A duration in the chain file, in the grammar of every flag
/// ([`edge::duration`]): `"500ms"`, `"30s"`, `"5m"`, `"1h 30m"`, or `"30"`
/// for bare seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigDuration(pub std::time::Duration);

impl<'de> serde::Deserialize<'de> for ConfigDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        edge::duration::parse(&s)
            .map(ConfigDuration)
            .map_err(serde::de::Error::custom)
    }
}

/// `[clusters."<id>"]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterEntry {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// `[source.<kind>]`: exactly one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum SourceConfig {
    /// A YAML/JSON file of resources, re-read when it changes.
    Static { path: PathBuf },
    /// This machine's CPUs, memory and disk.
    Host {
        #[serde(default = "default_disk_path")]
        disk_path: PathBuf,
        #[serde(default = "default_refresh")]
        refresh_seconds: NonZeroU64,
    },
    /// The cluster's Nodes and Pods (Liqo's local monitor).
    Kubernetes {
        kubeconfig: Option<PathBuf>,
        context: Option<String>,
        origin_labels: Option<Vec<String>>,
    },
    /// An upstream ResourceReader in another process.
    Grpc {
        address: String,
        #[serde(default)]
        liqo_api: LiqoApi,
    },
}

fn default_disk_path() -> PathBuf {
    PathBuf::from("/")
}

fn default_refresh() -> NonZeroU64 {
    NonZeroU64::new(30).unwrap_or(NonZeroU64::MIN)
}

/// Not a `--source` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid source {0:?}: use static:FILE, host, kubernetes or grpc:ADDRESS")]
pub struct BadSourceSpec(pub String);

impl FromStr for SourceConfig {
    type Err = BadSourceSpec;
    /// The `--source` forms: `static:FILE`, `host`, `kubernetes`, `grpc:ADDRESS`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadSourceSpec(s.to_string());
        let (kind, arg) = match s.split_once(':') {
            Some((kind, arg)) => (kind, Some(arg)),
            None => (s, None),
        };
        match (kind, arg) {
            ("static", Some(path)) if !path.is_empty() => Ok(SourceConfig::Static {
                path: PathBuf::from(path),
            }),
            ("host", None) => Ok(SourceConfig::Host {
                disk_path: default_disk_path(),
                refresh_seconds: default_refresh(),
            }),
            ("kubernetes", None) => Ok(SourceConfig::Kubernetes {
                kubeconfig: None,
                context: None,
                origin_labels: None,
            }),
            ("grpc", Some(address)) if !address.is_empty() => Ok(SourceConfig::Grpc {
                address: address.to_string(),
                liqo_api: LiqoApi::V05,
            }),
            _ => Err(bad()),
        }
    }
}

/// Why a chain file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Read(#[from] edge::config_file::ConfigFileError),
    #[error("invalid configuration in {path}: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
}

/// The largest chain file read: a few stages are a few hundred bytes, and an
/// unbounded read of `/dev/zero` once took gigabytes.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

impl ChainConfig {
    /// Read and check a chain file. Relative paths in it are resolved
    /// against the file's directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = edge::config_file::read("--config", path, MAX_CONFIG_BYTES)?;
        let mut config = Self::parse(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
        if let Some(dir) = path.parent() {
            config.resolve_paths(dir);
        }
        Ok(config)
    }

    /// Parse chain-file text (paths are left as written).
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// The label sets of `[clusters]`.
    pub fn directory(&self) -> ClusterDirectory {
        let mut directory = ClusterDirectory::new();
        for (id, entry) in &self.clusters {
            directory.insert(id.clone(), entry.labels.clone());
        }
        directory
    }

    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        match &mut self.source {
            Some(SourceConfig::Static { path }) => resolve(path),
            Some(SourceConfig::Host { disk_path, .. }) => resolve(disk_path),
            Some(SourceConfig::Kubernetes {
                kubeconfig: Some(path),
                ..
            }) => resolve(path),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
