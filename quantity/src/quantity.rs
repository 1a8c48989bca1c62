//! One Kubernetes quantity: exact value plus the format it prints in.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

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

/// A Kubernetes quantity. Equality, ordering and hashing compare values, not
/// formats or spellings: `"1Gi" == "1073741824"`, `"+2Gi" == "2Gi"`.
///
/// The value is held exactly as a whole number of nano units (Kubernetes never
/// keeps anything finer than `1n`: parsing rounds finer values away from zero).
///
/// # Printing
///
/// `Display` (and so `to_string()`) and `Serialize` print what Kubernetes'
/// `String()` and `MarshalJSON` print:
///
/// - a quantity parsed from a string Kubernetes keeps prints that string
///   unchanged (`"9264.126m"`, `"+2Gi"`, `"1."`, `"1E3"`, `"007"`; the rule is
///   Kubernetes' and is spelt out in [`Quantity::kept_spelling`]);
/// - every other quantity, and every result of arithmetic ([`add`](Self::add),
///   [`sub`](Self::sub), [`neg`](Self::neg), [`scale_percent`](Self::scale_percent),
///   …) or of a constructor, prints its canonical form
///   ([`Quantity::canonical`]: `"1.5"` → `"1500m"`, `"1024Mi"` → `"1Gi"`).
///
/// [`Quantity::canonical`] always gives the canonical form, for callers that
/// need one spelling per value.
#[derive(Clone)]
pub struct Quantity {
    nanos: BigInt,
    format: Format,
    /// The input string, when Kubernetes' `ParseQuantity` would keep it
    /// (its `q.s`). `None` for computed values, which print canonically.
    spelling: Option<Spelling>,
}

/// A kept input string. Short ones (every real quantity) are held inline, so
/// that parsing does not allocate for them.
#[derive(Clone)]
enum Spelling {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

const INLINE: usize = 22;

impl Spelling {
    fn new(s: &str) -> Self {
        if s.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Spelling::Inline {
                len: s.len() as u8,
                bytes,
            }
        } else {
            Spelling::Heap(s.into())
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Copied whole from a str (quantity spellings are ASCII anyway).
            Spelling::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Spelling::Heap(s) => s,
        }
    }
}

impl Quantity {
    pub(crate) fn from_parts(nanos: BigInt, format: Format) -> Self {
        Self {
            nanos,
            format,
            spelling: None,
        }
    }

    /// The same value, printing as `spelling` (which must be a string that
    /// parses to this value and that Kubernetes keeps).
    pub(crate) fn with_spelling(mut self, spelling: &str) -> Self {
        self.spelling = Some(Spelling::new(spelling));
        self
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

    /// Same value, printed canonically in `format` from now on (any kept
    /// spelling is dropped, even when `format` is the current one).
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = format;
        self.spelling = None;
        self
    }

    /// The same value and format, printing canonically from now on.
    pub fn into_canonical(mut self) -> Quantity {
        self.spelling = None;
        self
    }

    /// The string this quantity was parsed from, when Kubernetes keeps it
    /// (and so prints it back unchanged); `None` when it prints
    /// [`canonical`](Self::canonical).
    ///
    /// Kubernetes' `ParseQuantity` keeps the input (its `q.s = str`) when the
    /// value takes its int64 fast path and is "already canonical":
    ///
    /// - **decimal suffix or exponent** (`n u m "" k M G T P E`, `e<int>`,
    ///   `E<int>`): at most 18 digits in all (integer digits without their
    ///   leading zeros, plus fraction digits), `exponent − fraction digits` a
    ///   multiple of 3 and at least −9, those digits not ending in `000`, and
    ///   a non-zero integer part. So `"9264.126m"`, `"1."`, `"1.G"`,
    ///   `"1.500k"`, `"+1"`, `"-007"`, `"1E3"`, `"1e-9"`, `"1.25e5"` are kept;
    ///   `"1.5"`, `"0.5"`, `".5"`, `"1000"`, `"1e4"`, `"1.5n"`, `"-0"` are not.
    /// - **binary suffix** (`Ki … Ei`): no fraction digits (a bare trailing
    ///   `.` is fine), few enough integer digits (11 for `Ki`, 8 for `Mi`, 5
    ///   for `Gi`, 2 for `Ti`, none for `Pi`, `Ei`), and a number that is not
    ///   a multiple of 8. So `"+2Gi"`, `"12Ki"`, `"1.Gi"`, `"007Ki"` are kept;
    ///   `"8Gi"`, `"1024Mi"`, `"1.5Gi"`, `"1Pi"` are not.
    /// - `"0"` itself (which is also its canonical form); no other zero.
    ///
    /// Arithmetic, negation, [`with_format`](Self::with_format) and the
    /// constructors give quantities with no kept spelling, as Kubernetes'
    /// `Add`, `Sub`, `Neg`, `Mul`, `Set*` clear it; `clone` keeps it, as
    /// `DeepCopy` does.
    pub fn kept_spelling(&self) -> Option<&str> {
        self.spelling.as_ref().map(Spelling::as_str)
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

impl fmt::Debug for Quantity {
    /// `Quantity("<Display>", <format>)`.
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
    /// The `Display` string, as Kubernetes' `MarshalJSON` writes `q.s` when
    /// set and the canonical string otherwise.
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
