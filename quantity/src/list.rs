//! A resource list: resource name → quantity, as in Kubernetes' `ResourceList`.

use std::collections::BTreeMap;

use crate::Quantity;

/// Resource name → quantity. Ordered by name so printing and hashing are stable.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ResourceList(pub BTreeMap<String, Quantity>);

impl ResourceList {
    pub fn new() -> Self {
        Self::default()
    }
    /// Per-name sum; names missing on one side count as zero.
    pub fn add(&self, _other: &ResourceList) -> ResourceList {
        todo!()
    }
    /// Per-name `self - other`, clamped at zero; names only in `other` are ignored.
    pub fn saturating_sub(&self, _other: &ResourceList) -> ResourceList {
        todo!()
    }
    /// True when every quantity in `self` is at most the same name in `capacity`
    /// (a name missing from `capacity` counts as zero).
    pub fn fits_within(&self, _capacity: &ResourceList) -> bool {
        todo!()
    }
    /// Every quantity scaled by `percent` (see [`Quantity::scale_percent`]).
    pub fn scale_percent(&self, _percent: u32) -> ResourceList {
        todo!()
    }
    /// Parse a map of name → quantity string, naming the first bad entry.
    pub fn from_strings<'a, I>(_entries: I) -> Result<ResourceList, (String, crate::ParseError)>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        todo!()
    }
    /// Name → canonical quantity string.
    pub fn to_strings(&self) -> BTreeMap<String, String> {
        self.0.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
    }
}
