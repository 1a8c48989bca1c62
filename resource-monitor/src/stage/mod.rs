//! Stages: readers that wrap an upstream reader and transform its answer.
//! Each comes with a [`Layer`](crate::Layer) so chains compose like tower
//! services: `source.layer(QuotaLayer::new(..)).layer(FilterLayer::new(..))`.

mod filter;
mod per_originator;
mod percent;
mod quota;

pub use filter::{Filter, FilterConfig, FilterLayer, FilterRule};
pub use per_originator::{OriginatorRule, PerOriginator, PerOriginatorLayer};
pub use percent::{Percent, PercentError};
pub use quota::{OriginatorQuota, Quota, QuotaConfig, QuotaLayer};

#[cfg(test)]
mod tests;
