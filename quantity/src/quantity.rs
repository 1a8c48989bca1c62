//! One Kubernetes quantity: exact value plus the format it prints in.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// How a quantity prints, as in Kubernetes (`resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `Ki Mi Gi Ti Pi Ei`
    BinarySI,
    /// `n u m "" k M G T P E`
    DecimalSI,
    /// `1e3`, `1E-3`
    DecimalExponent,
}

/// Why a string is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Format,
    #[error("unable to parse quantity's suffix")]
    Suffix,
    #[error("quantity is empty")]
    Empty,
}

/// A Kubernetes quantity. Equality and ordering compare values, not formats:
/// `"1Gi" == "1073741824"`.
#[derive(Debug, Clone)]
pub struct Quantity {
    // Implementation detail: owned by the quantity module.
    _private: (),
}

impl Quantity {
    /// Zero, printed `"0"`.
    pub fn zero() -> Self {
        todo!()
    }
    pub fn is_zero(&self) -> bool {
        todo!()
    }
    pub fn is_negative(&self) -> bool {
        todo!()
    }
    pub fn format(&self) -> Format {
        todo!()
    }
    /// `self + other`; the result keeps the format of the first non-zero operand.
    pub fn add(&self, other: &Quantity) -> Quantity {
        todo!()
    }
    /// `self - other` (may be negative), format as `add`.
    pub fn sub(&self, other: &Quantity) -> Quantity {
        todo!()
    }
    /// `max(self - other, 0)`.
    pub fn saturating_sub(&self, other: &Quantity) -> Quantity {
        todo!()
    }
    /// `self * percent / 100`, exact, rounded up to the nano unit as Kubernetes
    /// rounds; keeps the format. `percent` above 100 scales up.
    pub fn scale_percent(&self, percent: u32) -> Quantity {
        todo!()
    }
    /// Value in milli-units, rounded up (Kubernetes `MilliValue`).
    pub fn milli_value(&self) -> i64 {
        todo!()
    }
    /// Value in whole units, rounded up (Kubernetes `Value`).
    pub fn value(&self) -> i64 {
        todo!()
    }
}

impl FromStr for Quantity {
    type Err = ParseError;
    fn from_str(_s: &str) -> Result<Self, Self::Err> {
        todo!()
    }
}

impl fmt::Display for Quantity {
    /// The canonical string Kubernetes prints.
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        todo!()
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Quantity {}
impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, _other: &Self) -> Ordering {
        todo!()
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
