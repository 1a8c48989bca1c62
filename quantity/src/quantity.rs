//! One Kubernetes quantity: exact value plus the format it prints in.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

pub use crate::parse::ParseError;

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

/// Nano units per unit: every quantity is a whole number of `1n`.
pub(crate) const NANOS_PER_UNIT: i64 = 1_000_000_000;

/// A Kubernetes quantity. Equality and ordering compare values, not formats:
/// `"1Gi" == "1073741824"`.
///
/// The value is held exactly as a whole number of nano units (Kubernetes never
/// keeps anything finer than `1n`: parsing rounds finer values away from zero).
#[derive(Clone)]
pub struct Quantity {
    nanos: BigInt,
    format: Format,
}

impl Quantity {
    pub(crate) fn from_parts(nanos: BigInt, format: Format) -> Self {
        Self { nanos, format }
    }

    pub(crate) fn nanos(&self) -> &BigInt {
        &self.nanos
    }

    /// Zero, printed `"0"`.
    pub fn zero() -> Self {
        Self::from_parts(BigInt::zero(), Format::DecimalSI)
    }

    /// `value` whole units in `format` (Kubernetes `NewQuantity`).
    pub fn new(value: i64, format: Format) -> Self {
        Self::from_parts(BigInt::from(value) * NANOS_PER_UNIT, format)
    }

    /// `milli` thousandths of a unit in `format` (Kubernetes `NewMilliQuantity`).
    pub fn from_milli(milli: i64, format: Format) -> Self {
        Self::from_parts(BigInt::from(milli) * 1_000_000, format)
    }

    pub fn is_zero(&self) -> bool {
        self.nanos.is_zero()
    }
    pub fn is_negative(&self) -> bool {
        self.nanos.is_negative()
    }
    pub fn format(&self) -> Format {
        self.format
    }

    /// Same value, printed in `format` from now on.
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// `-self`, same format.
    pub fn neg(&self) -> Quantity {
        Self::from_parts(-&self.nanos, self.format)
    }

    /// Kubernetes: when the receiver is zero, the result takes the other's format.
    fn result_format(&self, other: &Quantity) -> Format {
        if self.is_zero() {
            other.format
        } else {
            self.format
        }
    }

    /// `self + other`; the result keeps the format of the first non-zero operand.
    pub fn add(&self, other: &Quantity) -> Quantity {
        Self::from_parts(&self.nanos + &other.nanos, self.result_format(other))
    }
    /// `self - other` (may be negative), format as `add`.
    pub fn sub(&self, other: &Quantity) -> Quantity {
        Self::from_parts(&self.nanos - &other.nanos, self.result_format(other))
    }
    /// `max(self - other, 0)`.
    pub fn saturating_sub(&self, other: &Quantity) -> Quantity {
        let diff = self.sub(other);
        if diff.is_negative() {
            Self::from_parts(BigInt::zero(), diff.format)
        } else {
            diff
        }
    }
    /// `self * percent / 100`, exact, rounded up to the nano unit as Kubernetes
    /// rounds; keeps the format. `percent` above 100 scales up.
    pub fn scale_percent(&self, percent: u32) -> Quantity {
        let scaled = &self.nanos * percent;
        Self::from_parts(div_away_from_zero(&scaled, 100), self.format)
    }
    /// Value in milli-units, rounded up (Kubernetes `MilliValue`).
    ///
    /// Rounds away from zero like Kubernetes; where Kubernetes overflows
    /// silently this saturates at `i64::MIN` / `i64::MAX`.
    pub fn milli_value(&self) -> i64 {
        saturate(&div_away_from_zero(&self.nanos, 1_000_000))
    }
    /// Value in whole units, rounded up (Kubernetes `Value`).
    ///
    /// Rounds away from zero like Kubernetes; where Kubernetes overflows
    /// silently this saturates at `i64::MIN` / `i64::MAX`.
    pub fn value(&self) -> i64 {
        saturate(&div_away_from_zero(&self.nanos, NANOS_PER_UNIT))
    }
}

/// `n / d` rounded away from zero (Kubernetes' "round up" for quantities).
fn div_away_from_zero(n: &BigInt, d: i64) -> BigInt {
    let q = n / d;
    if (&q * d) == *n {
        q
    } else if n.is_negative() {
        q - 1
    } else {
        q + 1
    }
}

fn saturate(v: &BigInt) -> i64 {
    v.to_i64()
        .unwrap_or(if v.is_negative() { i64::MIN } else { i64::MAX })
}

impl Default for Quantity {
    fn default() -> Self {
        Self::zero()
    }
}

impl FromStr for Quantity {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::parse::parse(s)
    }
}

impl fmt::Display for Quantity {
    /// The canonical string Kubernetes prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::canonical::canonical(self))
    }
}

impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Quantity({:?}, {:?})", self.to_string(), self.format)
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
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}
impl Hash for Quantity {
    /// Hashes the value only, consistent with `Eq`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Quantity {
    /// A JSON string (surrounding whitespace trimmed, as Kubernetes'
    /// `UnmarshalJSON` does) or a JSON integer. JSON floats are refused:
    /// they would go through binary floating point.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl serde::de::Visitor<'_> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes quantity string such as \"1500m\" or \"4Gi\", or an integer")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
        v.trim()
            .parse()
            .map_err(|e| E::custom(format_args!("invalid quantity {v:?}: {e}")))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
        Ok(Quantity::new(v, Format::DecimalSI))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
        Ok(Quantity::from_parts(
            BigInt::from(v) * NANOS_PER_UNIT,
            Format::DecimalSI,
        ))
    }
}
