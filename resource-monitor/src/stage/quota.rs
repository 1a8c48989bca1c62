//! The quota stage: offer only a share of what upstream offers (like Liqo's
//! sharing percentage), never more than absolute caps, globally and per
//! originator.

use std::collections::BTreeMap;
use std::sync::Arc;

use quantity::{Quantity, ResourceList};

use crate::directory::{ClusterDirectory, Selector};
use crate::stage::{Percent, PercentError};
use resource_reader::{Layer, NotificationStream, ReadError, ResourceReader};

/// What the quota stage keeps.
///
/// For an originator, the first entry of `originators` whose selector
/// matches applies: its `percent` replaces the global one, and its `max`
/// caps apply on top of the global `max` (the lower cap wins). Names that
/// upstream does not offer are never added by a cap.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// Share of every upstream quantity to keep (default 100).
    #[serde(default)]
    pub percent: Percent,
    /// Absolute caps, resource name → quantity (never negative).
    #[serde(default, deserialize_with = "non_negative")]
    pub max: ResourceList,
    /// Per-originator overrides, first match wins.
    #[serde(default)]
    pub originators: Vec<OriginatorQuota>,
}

impl QuotaConfig {
    /// Keep `percent` of everything, no caps.
    pub fn percent(percent: u32) -> Result<Self, PercentError> {
        Ok(Self {
            percent: Percent::new(percent)?,
            ..Self::default()
        })
    }
}

/// A quota override for the originators a selector matches.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(from = "OriginatorQuotaFile")]
pub struct OriginatorQuota {
    pub selector: Selector,
    /// Replaces the global percentage for these originators.
    pub percent: Option<Percent>,
    /// Further caps for these originators.
    pub max: ResourceList,
}

/// The file form: selector fields sit next to the quota fields, so the
/// table reads `clusters = [..]`, `labels = {..}`, `percent = ..`, `max = {..}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OriginatorQuotaFile {
    #[serde(default)]
    clusters: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    percent: Option<Percent>,
    #[serde(default, deserialize_with = "non_negative")]
    max: ResourceList,
}

/// A resource list of caps: a negative cap would offer less than nothing,
/// so it is refused, naming the resource.
fn non_negative<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ResourceList, D::Error> {
    let list = <ResourceList as serde::Deserialize>::deserialize(d)?;
    if let Some((name, quantity)) = list.0.iter().find(|(_, q)| q.is_negative()) {
        return Err(serde::de::Error::custom(format!(
            "{name}: negative cap {quantity} (caps cannot be below zero)"
        )));
    }
    Ok(list)
}

impl From<OriginatorQuotaFile> for OriginatorQuota {
    fn from(f: OriginatorQuotaFile) -> Self {
        Self {
            selector: Selector {
                clusters: f.clusters,
                labels: f.labels,
            },
            percent: f.percent,
            max: f.max,
        }
    }
}

/// Builds [`Quota`] stages.
#[derive(Debug, Clone)]
pub struct QuotaLayer {
    config: Arc<QuotaConfig>,
    directory: Arc<ClusterDirectory>,
}

impl QuotaLayer {
    pub fn new(config: QuotaConfig, directory: Arc<ClusterDirectory>) -> Self {
        Self {
            config: Arc::new(config),
            directory,
        }
    }
}

impl<R: ResourceReader> Layer<R> for QuotaLayer {
    type Reader = Quota<R>;
    fn layer(&self, inner: R) -> Quota<R> {
        Quota {
            inner,
            config: self.config.clone(),
            directory: self.directory.clone(),
        }
    }
}

/// The quota stage in front of `R`.
#[derive(Debug)]
pub struct Quota<R> {
    inner: R,
    config: Arc<QuotaConfig>,
    directory: Arc<ClusterDirectory>,
}

impl<R> Quota<R> {
    /// Apply the quota to an upstream answer for `originator`.
    pub fn apply(&self, originator: &str, upstream: ResourceList) -> ResourceList {
        let special = self
            .config
            .originators
            .iter()
            .find(|o| o.selector.matches(originator, &self.directory));
        let percent = special
            .and_then(|o| o.percent)
            .unwrap_or(self.config.percent)
            .get();
        let caps = [Some(&self.config.max), special.map(|o| &o.max)];
        let kept = upstream
            .0
            .into_iter()
            .map(|(name, offered)| {
                let mut kept = if percent == 100 {
                    offered
                } else {
                    offered.scale_percent(percent)
                };
                for cap in caps.iter().flatten().filter_map(|caps| caps.0.get(&name)) {
                    if kept > *cap {
                        kept = cap.clone();
                    }
                }
                if kept.is_negative() {
                    kept = Quantity::zero();
                }
                (name, kept)
            })
            .collect();
        ResourceList(kept)
    }
}

#[async_trait::async_trait]
impl<R: ResourceReader> ResourceReader for Quota<R> {
    async fn read(&self, originator: &str) -> Result<ResourceList, ReadError> {
        let upstream = self.inner.read(originator).await?;
        Ok(self.apply(originator, upstream))
    }

    fn subscribe(&self) -> NotificationStream {
        // The quota is fixed for the life of the stage: only upstream changes
        // change the answer.
        self.inner.subscribe()
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        tracing::debug!(cluster, "quota stage: forwarding remove_cluster");
        self.inner.remove_cluster(cluster).await
    }
}
