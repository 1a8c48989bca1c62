//! The filter stage: per originator, allow or deny resource names with
//! wildcards — e.g. only allow-listed clusters see `nvidia.com/gpu`.

use std::collections::BTreeMap;

use quantity::ResourceList;

use super::per_originator::{OriginatorRule, PerOriginator, PerOriginatorLayer};
use crate::directory::{ClusterDirectory, Selector};
use crate::pattern::Pattern;

/// Ordered filter rules.
///
/// For each resource name, the rules are tried in order; the first rule
/// that matches the originator **and** names the resource (in `deny` or
/// `allow`) decides: `deny` hides it, `allow` lets it through (if a rule
/// names a resource in both, `deny` wins). A resource no rule names passes
/// unchanged. So "only gold clusters see GPUs" is an `allow` rule for the
/// gold clusters followed by a `deny` rule for everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterConfig {
    #[serde(default)]
    pub rules: Vec<FilterRule>,
}

/// One filter rule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "FilterRuleFile")]
pub struct FilterRule {
    pub selector: Selector,
    pub allow: Vec<Pattern>,
    pub deny: Vec<Pattern>,
}

impl FilterRule {
    /// What this rule says about `name` for a matching originator.
    fn verdict(&self, name: &str) -> Option<bool> {
        if self.deny.iter().any(|p| p.matches(name)) {
            Some(false)
        } else if self.allow.iter().any(|p| p.matches(name)) {
            Some(true)
        } else {
            None
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterRuleFile {
    #[serde(default)]
    clusters: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    allow: Vec<Pattern>,
    #[serde(default)]
    deny: Vec<Pattern>,
}

impl TryFrom<FilterRuleFile> for FilterRule {
    type Error = &'static str;
    fn try_from(f: FilterRuleFile) -> Result<Self, Self::Error> {
        if f.allow.is_empty() && f.deny.is_empty() {
            return Err("a filter rule needs `allow` or `deny` (a list of resource-name patterns)");
        }
        Ok(Self {
            selector: Selector {
                clusters: f.clusters,
                labels: f.labels,
            },
            allow: f.allow,
            deny: f.deny,
        })
    }
}

/// Builds [`Filter`] stages.
pub type FilterLayer = PerOriginatorLayer<FilterConfig>;

/// The filter stage in front of `R`.
pub type Filter<R> = PerOriginator<FilterConfig, R>;

impl FilterConfig {
    /// Whether `originator` may see the resource `name`.
    pub fn allows(&self, originator: &str, name: &str, directory: &ClusterDirectory) -> bool {
        self.rules
            .iter()
            .filter(|rule| rule.selector.matches(originator, directory))
            .find_map(|rule| rule.verdict(name))
            .unwrap_or(true)
    }
}

impl OriginatorRule for FilterConfig {
    const STAGE: &'static str = "filter";

    fn apply(
        &self,
        originator: &str,
        directory: &ClusterDirectory,
        mut upstream: ResourceList,
    ) -> ResourceList {
        if !self.rules.is_empty() {
            upstream
                .0
                .retain(|name, _| self.allows(originator, name, directory));
        }
        upstream
    }
}

impl<R> Filter<R> {
    /// Whether `originator` may see the resource `name`.
    pub fn allows(&self, originator: &str, name: &str) -> bool {
        self.config.allows(originator, name, &self.directory)
    }
}
