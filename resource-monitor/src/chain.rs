//! Assembling a chain at run time from a [`ChainConfig`]: the source, then
//! the quota stage, then the filter stage.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{ChainConfig, SourceConfig};
use crate::source::{
    HostError, HostOptions, HostSource, KubernetesError, KubernetesOptions, KubernetesSource,
    StaticFile, StaticFileError,
};
use crate::stage::{FilterLayer, QuotaLayer};
use resource_reader::client::{ClientError, UpstreamClient, UpstreamOptions};
use resource_reader::{ReaderExt, ResourceReader};

/// Why a chain could not be started.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("no source configured: pass --source or add a [source.<kind>] table")]
    NoSource,
    #[error("static source: {0}")]
    Static(#[from] StaticFileError),
    #[error("host source: {0}")]
    Host(#[from] HostError),
    #[error("kubernetes source: {0}")]
    Kubernetes(#[from] KubernetesError),
    #[error("grpc source: {0}")]
    Grpc(#[from] ClientError),
}

/// Start the source described by `source`.
pub async fn build_source(source: &SourceConfig) -> Result<Arc<dyn ResourceReader>, BuildError> {
    Ok(match source {
        SourceConfig::Static { path } => StaticFile::open(path).await?.boxed(),
        SourceConfig::Host {
            disk_path,
            refresh_seconds,
        } => HostSource::start(HostOptions {
            disk_path: disk_path.clone(),
            refresh: Duration::from_secs(refresh_seconds.get()),
        })
        .await?
        .boxed(),
        SourceConfig::Kubernetes {
            kubeconfig,
            context,
            origin_labels,
        } => {
            let mut options = KubernetesOptions {
                kubeconfig: kubeconfig.clone(),
                context: context.clone(),
                ..KubernetesOptions::default()
            };
            if let Some(labels) = origin_labels {
                options.origin_labels = labels.clone();
            }
            KubernetesSource::connect(options).await?.boxed()
        }
        SourceConfig::Grpc { address, liqo_api } => {
            let options = UpstreamOptions {
                api: *liqo_api,
                ..UpstreamOptions::default()
            };
            UpstreamClient::connect(address, options)?.boxed()
        }
    })
}

/// Start the whole chain: source → quota (if configured) → filter (if
/// configured).
pub async fn build(config: &ChainConfig) -> Result<Arc<dyn ResourceReader>, BuildError> {
    let source = config.source.as_ref().ok_or(BuildError::NoSource)?;
    let directory = Arc::new(config.directory());
    let mut reader = build_source(source).await?;
    if let Some(quota) = &config.quota {
        reader = reader
            .layer(QuotaLayer::new(quota.clone(), directory.clone()))
            .boxed();
    }
    if let Some(filter) = &config.filter {
        reader = reader
            .layer(FilterLayer::new(filter.clone(), directory))
            .boxed();
    }
    Ok(reader)
}
