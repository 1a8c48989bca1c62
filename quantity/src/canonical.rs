//! The canonical string of a quantity, as Kubernetes' `CanonicalizeBytes`
//! computes it: no fractional digits, no lost precision, the largest suffix
//! (or exponent) that keeps the number whole; and `Display`, which prints it
//! unless the quantity keeps its spelling. (Printing lives here, beside the
//! type rather than in it, so the type's module depends on neither the
//! parser nor the printer.)

use num_bigint::{BigUint, Sign};
use num_traits::Zero;

use std::fmt;

use crate::quantity::{Format, Quantity, NANOS_PER_UNIT};

impl Quantity {
    /// The canonical string of the value, as Kubernetes' `CanonicalizeBytes`
    /// builds it: no fractional digits, no lost precision, the largest suffix
    /// (or exponent) of the format that keeps the number whole (`"1.5"` →
    /// `"1500m"`, `"1.5Gi"` → `"1536Mi"`, `"1e4"` → `"10e3"`, `"+2Gi"` →
    /// `"2Gi"`). Equal values of the same format have the same canonical
    /// string, whatever they were parsed from.
    ///
    /// `Display` prints this too unless the quantity keeps its spelling
    /// (see [`Quantity::kept_spelling`]).
    pub fn canonical(&self) -> String {
        canonical(self)
    }
}

impl fmt::Display for Quantity {
    /// What Kubernetes' `String()` prints: the kept spelling if any (see
    /// [`Quantity::kept_spelling`]), else the canonical string.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kept_spelling() {
            Some(spelling) => f.write_str(spelling),
            None => f.write_str(&canonical(self)),
        }
    }
}

const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

pub(crate) fn canonical(q: &Quantity) -> String {
    let nanos = q.nanos();
    if nanos.is_zero() {
        return "0".to_owned();
    }
    let sign = if nanos.sign() == Sign::Minus { "-" } else { "" };
    let magnitude = nanos.magnitude();

    if q.format() == Format::BinarySI {
        // Kubernetes prints binary values in (-1024, 1024), and values that
        // are not whole numbers, as DecimalSI rather than round them.
        if let Some(s) = binary(sign, magnitude) {
            return s;
        }
        return decimal(sign, magnitude, Format::DecimalSI);
    }
    decimal(sign, magnitude, q.format())
}

fn binary(sign: &str, magnitude: &BigUint) -> Option<String> {
    let per_unit = BigUint::from(NANOS_PER_UNIT as u64);
    if *magnitude < BigUint::from(1024u32) * &per_unit {
        return None;
    }
    let whole = magnitude / &per_unit;
    if &whole * &per_unit != *magnitude {
        return None;
    }
    // Factors of 1024, up to Ei. Kubernetes has no suffix past Ei and would
    // drop the magnitude (2^70 would print "1"); stay at Ei instead.
    let powers = (whole.trailing_zeros().unwrap_or(0) / 10).min(6);
    let mantissa = whole >> (powers * 10);
    Some(format!(
        "{sign}{mantissa}{}",
        BINARY_SUFFIXES[powers as usize]
    ))
}

fn decimal(sign: &str, magnitude: &BigUint, format: Format) -> String {
    let digits = magnitude.to_string();
    let trimmed = digits.trim_end_matches('0');
    let mut exponent = -9 + (digits.len() - trimmed.len()) as i64;
    // Move down to a multiple of 3, adding zeros to the mantissa.
    let pad = exponent.rem_euclid(3);
    exponent -= pad;
    let zeros = "0".repeat(pad as usize);
    let suffix = match (format, exponent) {
        (Format::DecimalSI, -9) => "n".to_owned(),
        (Format::DecimalSI, -6) => "u".to_owned(),
        (Format::DecimalSI, -3) => "m".to_owned(),
        (_, 0) => String::new(),
        (Format::DecimalSI, 3) => "k".to_owned(),
        (Format::DecimalSI, 6) => "M".to_owned(),
        (Format::DecimalSI, 9) => "G".to_owned(),
        (Format::DecimalSI, 12) => "T".to_owned(),
        (Format::DecimalSI, 15) => "P".to_owned(),
        (Format::DecimalSI, 18) => "E".to_owned(),
        // DecimalExponent, and DecimalSI past E (Kubernetes falls back to the
        // exponent form there rather than drop the magnitude).
        (_, e) => format!("e{e}"),
    };
    format!("{sign}{trimmed}{zeros}{suffix}")
}
