//! The quota stage: offer only a share of what upstream offers (like Liqo's
//! sharing percentage), never more than absolute caps, globally and per
//! originator.

use std::collections::BTreeMap;

use quantity::{Quantity, ResourceList};

use super::per_originator::{OriginatorRule, PerOriginator, PerOriginatorLayer};
use crate::directory::{ClusterDirectory, Selector};
use crate::stage::{Percent, PercentError};

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
pub type QuotaLayer = PerOriginatorLayer<QuotaConfig>;

/// The quota stage in front of `R`.
pub type Quota<R> = PerOriginator<QuotaConfig, R>;

impl OriginatorRule for QuotaConfig {
    const STAGE: &'static str = "quota";

    fn apply(
        &self,
        originator: &str,
        directory: &ClusterDirectory,
        upstream: ResourceList,
    ) -> ResourceList {
        let special = self
            .originators
            .iter()
            .find(|o| o.selector.matches(originator, directory));
        let percent = special
            .and_then(|o| o.percent)
            .unwrap_or(self.percent)
            .get();
        let caps = [Some(&self.max), special.map(|o| &o.max)];
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
