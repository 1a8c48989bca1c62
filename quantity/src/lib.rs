//! Kubernetes resource quantities (`"1500m"`, `"4Gi"`, `"1e3"`) and resource
//! lists (resource name → quantity), with the same parsing, canonical printing
//! and arithmetic as Kubernetes' `resource.Quantity`.
//!
//! Every part of the broker that compares, sums or scales resources goes
//! through this crate, so a value means the same thing in the catalog's
//! filters, the ResourceReader stages and the aggregator.

mod canonical;
mod list;
mod parse;
mod quantity;

pub use list::ResourceList;
pub use parse::MAX_INTEGER_DIGITS;
pub use quantity::{Format, ParseError, Quantity};
