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
    /// The quantity for `name`, if present.
    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.0.get(name)
    }
    /// Set `name` to `quantity`, returning the previous one.
    pub fn insert(&mut self, name: impl Into<String>, quantity: Quantity) -> Option<Quantity> {
        self.0.insert(name.into(), quantity)
    }
    /// Per-name sum; names missing on one side count as zero (and keep their
    /// quantity as it is, spelling included, as Kubernetes' quota helpers do).
    pub fn add(&self, other: &ResourceList) -> ResourceList {
        let mut sum = self.0.clone();
        for (name, q) in &other.0 {
            match sum.get_mut(name) {
                Some(mine) => *mine = mine.add(q),
                None => {
                    sum.insert(name.clone(), q.clone());
                }
            }
        }
        ResourceList(sum)
    }
    /// Per-name `self - other`, clamped at zero; names only in `other` are ignored.
    ///
    /// As in Kubernetes' quota helpers, a name missing from `other` keeps its
    /// quantity as it is (spelling included) unless it is negative.
    pub fn saturating_sub(&self, other: &ResourceList) -> ResourceList {
        self.0
            .iter()
            .map(|(name, q)| {
                let left = match other.0.get(name) {
                    Some(theirs) => q.saturating_sub(theirs),
                    None if q.is_negative() => q.saturating_sub(&Quantity::zero()),
                    None => q.clone(),
                };
                (name.clone(), left)
            })
            .collect()
    }
    /// True when every quantity in `self` is at most the same name in `capacity`
    /// (a name missing from `capacity` counts as zero).
    pub fn fits_within(&self, capacity: &ResourceList) -> bool {
        let zero = Quantity::zero();
        self.0
            .iter()
            .all(|(name, q)| q <= capacity.0.get(name).unwrap_or(&zero))
    }
    /// Every quantity scaled by `percent` (see [`Quantity::scale_percent`]).
    pub fn scale_percent(&self, percent: u32) -> ResourceList {
        self.0
            .iter()
            .map(|(name, q)| (name.clone(), q.scale_percent(percent)))
            .collect()
    }
    /// Parse a map of name → quantity string, naming the first bad entry.
    pub fn from_strings<'a, I>(entries: I) -> Result<ResourceList, (String, crate::ParseError)>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        entries
            .into_iter()
            .map(|(name, value)| match value.parse::<Quantity>() {
                Ok(q) => Ok((name.to_owned(), q)),
                Err(e) => Err((name.to_owned(), e)),
            })
            .collect()
    }
    /// Name → quantity string as Kubernetes prints it (`Display`).
    pub fn to_strings(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect()
    }
}

impl FromIterator<(String, Quantity)> for ResourceList {
    fn from_iter<T: IntoIterator<Item = (String, Quantity)>>(iter: T) -> Self {
        ResourceList(iter.into_iter().collect())
    }
}

impl From<BTreeMap<String, Quantity>> for ResourceList {
    fn from(map: BTreeMap<String, Quantity>) -> Self {
        ResourceList(map)
    }
}
