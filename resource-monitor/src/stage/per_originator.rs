//! What the quota and the filter stages share: a rule fixed for the life of
//! the stage, applied to each upstream answer according to the originator
//! (matched through the cluster directory). Notifications and
//! `remove_cluster` pass through: the rule never changes, so only upstream
//! changes change an answer.

use std::sync::Arc;

use quantity::ResourceList;

use crate::directory::ClusterDirectory;
use resource_reader::{Layer, NotificationStream, ReadError, ResourceReader};

/// The rule of a per-originator stage ([`QuotaConfig`](super::QuotaConfig),
/// [`FilterConfig`](super::FilterConfig)).
pub trait OriginatorRule: std::fmt::Debug + Send + Sync + 'static {
    /// The stage's name in logs.
    const STAGE: &'static str;

    /// What of `upstream` is offered to `originator`.
    fn apply(
        &self,
        originator: &str,
        directory: &ClusterDirectory,
        upstream: ResourceList,
    ) -> ResourceList;
}

/// Builds [`PerOriginator`] stages of the rule `C`.
#[derive(Debug, Clone)]
pub struct PerOriginatorLayer<C> {
    config: Arc<C>,
    directory: Arc<ClusterDirectory>,
}

impl<C> PerOriginatorLayer<C> {
    pub fn new(config: C, directory: Arc<ClusterDirectory>) -> Self {
        Self {
            config: Arc::new(config),
            directory,
        }
    }
}

impl<C: OriginatorRule, R: ResourceReader> Layer<R> for PerOriginatorLayer<C> {
    type Reader = PerOriginator<C, R>;
    fn layer(&self, inner: R) -> PerOriginator<C, R> {
        PerOriginator {
            inner,
            config: self.config.clone(),
            directory: self.directory.clone(),
        }
    }
}

/// The stage of the rule `C` in front of `R`.
#[derive(Debug)]
pub struct PerOriginator<C, R> {
    inner: R,
    pub(super) config: Arc<C>,
    pub(super) directory: Arc<ClusterDirectory>,
}

impl<C: OriginatorRule, R> PerOriginator<C, R> {
    /// Apply the rule to an upstream answer for `originator`.
    pub fn apply(&self, originator: &str, upstream: ResourceList) -> ResourceList {
        self.config.apply(originator, &self.directory, upstream)
    }
}

#[async_trait::async_trait]
impl<C: OriginatorRule, R: ResourceReader> ResourceReader for PerOriginator<C, R> {
    async fn read(&self, originator: &str) -> Result<ResourceList, ReadError> {
        let upstream = self.inner.read(originator).await?;
        Ok(self.apply(originator, upstream))
    }

    fn subscribe(&self) -> NotificationStream {
        self.inner.subscribe()
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        tracing::debug!(cluster, "{} stage: forwarding remove_cluster", C::STAGE);
        self.inner.remove_cluster(cluster).await
    }
}
