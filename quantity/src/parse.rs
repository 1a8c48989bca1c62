//! Parsing a quantity string the way Kubernetes' `resource.ParseQuantity` does.
//!
//! The scanner follows the Go scanner (`parseQuantityString`) character for
//! character, then the value is computed exactly in nano units: anything finer
//! than `1n` rounds away from zero, and binary-suffixed values are capped at
//! 2^63-1 like Kubernetes caps them.

use num_bigint::{BigInt, BigUint};
use num_traits::{One, Zero};

use std::str::FromStr;

use crate::quantity::{Format, Quantity};

/// Quantities at or above `10^MAX_INTEGER_DIGITS` in magnitude are refused
/// ([`ParseError::OutOfRange`]); everything below is accepted and exact.
///
/// Kubernetes has no such bound, but a value holds (and adding a value with a
/// huge exponent to a small one builds) a number with that many digits, in
/// Kubernetes as in any exact implementation. The bound caps that at about
/// 41 KiB per value and a few milliseconds per parse or print, whatever the
/// input (`"1e999999999"` is refused before anything is allocated). It is
/// absurdly far beyond any real amount (the observable universe holds about
/// 10^80 atoms), and far beyond `1e1000`, which Kubernetes accepts and prints
/// as `10e999`. Values below `1n` round to `1n` as in Kubernetes, so there is
/// no bound on how small a non-zero input may be.
pub const MAX_INTEGER_DIGITS: i64 = 100_000;

/// Why a string is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Format,
    #[error("unable to parse quantity's suffix")]
    Suffix,
    #[error("quantity is empty")]
    Empty,
    /// The magnitude is at least `10^100000` (see [`MAX_INTEGER_DIGITS`]).
    #[error("quantity is too large: its magnitude must be below 10^100000")]
    OutOfRange,
}

/// The pieces of a quantity string, as the Go scanner splits them.
struct Scanned<'a> {
    negative: bool,
    /// Integer digits with leading zeros removed (may be empty).
    integer: &'a [u8],
    /// Digits after the `.` (may be empty).
    fraction: &'a [u8],
    suffix: &'a str,
}

/// How the suffix scales the number.
enum Multiplier {
    /// `10^exponent`
    Decimal(i64),
    /// `2^exponent`
    Binary(u32),
}

const SUFFIX_LETTERS: &[u8] = b"eEinumkKMGTP";

/// Split `s` like Kubernetes' `parseQuantityString`.
///
/// One deliberate difference: Go accepts a number part with no digit at all
/// (`"."`, `"-"`, `"Mi"`, `"e3"` all parse as zero there); the documented
/// grammar and the regular expression in its own error message require a
/// digit, and a bare suffix silently meaning zero is a trap, so it is refused.
fn scan(s: &str) -> Result<Scanned<'_>, ParseError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut negative = false;
    match b.first() {
        Some(b'-') => {
            negative = true;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }

    let digits_start = pos;
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    let int_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let integer = &b[int_start..pos];
    let mut saw_digit = pos > digits_start;

    let mut fraction: &[u8] = &[];
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let frac_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        fraction = &b[frac_start..pos];
        saw_digit |= !fraction.is_empty();
    }

    let suffix_start = pos;
    while pos < end && SUFFIX_LETTERS.contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos != end || !saw_digit {
        return Err(ParseError::Format);
    }
    Ok(Scanned {
        negative,
        integer,
        fraction,
        // Everything from suffix_start on is ASCII, so this slice is on a char boundary.
        suffix: &s[suffix_start..],
    })
}

/// Kubernetes' suffix table (`suffix.go`), plus the `e<int>` / `E<int>` exponent form.
fn interpret_suffix(suffix: &str) -> Result<(Multiplier, Format), ParseError> {
    let decimal = |e| Ok((Multiplier::Decimal(e), Format::DecimalSI));
    let binary = |e| Ok((Multiplier::Binary(e), Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .filter(|r| !r.is_empty())
                .ok_or(ParseError::Suffix)?;
            // Go reads the exponent with strconv.ParseInt(.., 10, 64) and then
            // narrows it to int32, silently wrapping; an exponent outside int32
            // is refused here instead of wrapping to an unrelated value.
            let exponent = parse_go_int(rest).ok_or(ParseError::Suffix)?;
            let exponent = i32::try_from(exponent).map_err(|_| ParseError::Suffix)?;
            Ok((
                Multiplier::Decimal(i64::from(exponent)),
                Format::DecimalExponent,
            ))
        }
    }
}

/// `strconv.ParseInt(s, 10, 64)`: optional sign, then at least one ASCII digit.
fn parse_go_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn pow10(exp: u64) -> BigUint {
    // The callers bound exp by MAX_INTEGER_DIGITS plus the input length.
    BigUint::from(10u32).pow(u32::try_from(exp).unwrap_or(u32::MAX))
}

fn digits_to_big(digits: &[u8]) -> BigUint {
    if digits.is_empty() {
        return BigUint::zero();
    }
    BigUint::parse_bytes(digits, 10).unwrap_or_default()
}

/// Kubernetes' cap for binary-suffixed quantities: 2^63-1, in nano units.
fn binary_cap_nanos() -> BigUint {
    BigUint::from(i64::MAX as u64) * BigUint::from(1_000_000_000u32)
}

/// Whether Kubernetes' `ParseQuantity` keeps `s` as the quantity's string
/// (`q.s = str`), so that `String()` and `MarshalJSON` hand back the input
/// unchanged.
///
/// This is the int64 fast path of `ParseQuantity` (k8s.io/apimachinery
/// `pkg/api/resource/quantity.go`), which reuses the input "if the number is
/// in canonical form":
///
/// ```go
/// case DecimalExponent, DecimalSI:
///     scale = exponent
///     precision = maxInt64Factors - int32(len(num)+len(denom))   // maxInt64Factors = 18
/// case BinarySI:
///     scale = 0
///     switch {
///     case exponent >= 0 && len(denom) == 0:
///         mantissa = int64(int64(mantissa) << uint64(exponent))
///         precision = 15 - int32(len(num)) - int32(float32(exponent)*3/10) - 1
///     default:
///         precision = -1
///     }
/// ...
/// if precision >= 0 {
///     scale -= int32(len(denom))
///     if scale >= int32(Nano) {
///         shifted := num + denom
///         value, err := strconv.ParseInt(shifted, 10, 64)
///         if result, ok := int64Multiply(value, int64(mantissa)); ok {
///             switch format {
///             case BinarySI:
///                 if exponent%10 == 0 && (value&0x07 != 0) { /* s: str */ }
///             default:
///                 if scale%3 == 0 && !strings.HasSuffix(shifted, "000") && shifted[0] != '0' { /* s: str */ }
///             }
/// ```
///
/// where `num` is the integer digits without their leading zeros (`"0"` when
/// none are left) and `denom` the digits after the `.` (empty for `"1."`).
/// `ParseQuantity`'s first check, which keeps `"0"` itself, is made where
/// zeros are built.
///
/// The quantity's format is the suffix's format here: a binary value on this
/// path is a whole number of at least `1Ki`, never turned into DecimalSI.
fn kubernetes_keeps_spelling(scanned: &Scanned<'_>, multiplier: &Multiplier) -> bool {
    let num: &[u8] = if scanned.integer.is_empty() {
        b"0"
    } else {
        scanned.integer
    };
    let denom = scanned.fraction;
    match *multiplier {
        Multiplier::Decimal(exponent) => {
            // precision >= 0
            if num.len() + denom.len() > 18 {
                return false;
            }
            // Go computes this in int32; inputs where that wraps (exponent -
            // len(denom) <= i32::MIN) are refused before this, so the i64
            // here is the same number.
            let scale = exponent - denom.len() as i64;
            if scale < -9 || scale % 3 != 0 {
                return false;
            }
            // shifted = num + denom: not ending in "000", not starting with '0'.
            let len = num.len() + denom.len();
            let ends_in_000 = len >= 3
                && denom
                    .iter()
                    .rev()
                    .chain(num.iter().rev())
                    .take(3)
                    .all(|&c| c == b'0');
            !ends_in_000 && num[0] != b'0'
        }
        Multiplier::Binary(bits) => {
            if !denom.is_empty() {
                return false;
            }
            // precision = 15 - len(num) - exponent*3/10 - 1 >= 0; exponent is
            // 10..=60, so exponent*3/10 is exact.
            if num.len() as i64 > 15 - i64::from(bits) * 3 / 10 - 1 {
                return false;
            }
            // At most 14 digits, so it fits, and value << bits does too
            // (precision bounds it well below 2^63).
            let value: i64 = num.iter().fold(0, |acc, &d| acc * 10 + i64::from(d - b'0'));
            debug_assert!(value.checked_mul(1 << bits).is_some());
            bits % 10 == 0 && value & 0x07 != 0
        }
    }
}

pub(crate) fn parse(s: &str) -> Result<Quantity, ParseError> {
    if s.is_empty() {
        return Err(ParseError::Empty);
    }
    let scanned = scan(s)?;
    let (multiplier, mut format) = interpret_suffix(scanned.suffix)?;
    if let Multiplier::Decimal(exponent) = multiplier {
        // Kubernetes subtracts the fraction digits from the exponent in int32
        // (`scale -= int32(len(denom))`, and `amount.Scale() +
        // Scale(exponent).infScale()` on its slow path); at or below int32's
        // minimum that wraps to a huge positive scale (and "1.00E-2147483648"
        // would print as typed while meaning 10^2147483648). Refused.
        if exponent - scanned.fraction.len() as i64 <= i64::from(i32::MIN) {
            return Err(ParseError::Suffix);
        }
    }

    // All significant digits of integer and fraction, as one integer D with
    // value = D * 10^exp10 * multiplier.
    let mut digits: Vec<u8> = Vec::with_capacity(scanned.integer.len() + scanned.fraction.len());
    digits.extend_from_slice(scanned.integer);
    digits.extend_from_slice(scanned.fraction);
    let mut exp10 = -(scanned.fraction.len() as i64);
    let leading = digits.iter().take_while(|&&c| c == b'0').count();
    let trailing = digits[leading..]
        .iter()
        .rev()
        .take_while(|&&c| c == b'0')
        .count();
    let significant = &digits[leading..digits.len() - trailing];
    exp10 += trailing as i64;

    if significant.is_empty() {
        // Kubernetes keeps no zero's spelling but "0" itself (the first
        // check in ParseQuantity), which is also its canonical form.
        let zero = Quantity::from_parts(BigInt::zero(), format);
        return Ok(if s == "0" {
            zero.with_spelling(s)
        } else {
            zero
        });
    }
    let n = significant.len() as i64;

    let magnitude = match multiplier {
        Multiplier::Decimal(e) => {
            let exp10 = exp10 + e;
            // value < 10^(n + exp10)
            if n + exp10 > MAX_INTEGER_DIGITS {
                return Err(ParseError::OutOfRange);
            }
            nanos_from_decimal(significant, exp10)
        }
        Multiplier::Binary(bits) => {
            // value >= 10^(n - 1 + exp10); at 10^19 it is already past the cap.
            let nanos = if n - 1 + exp10 >= 19 {
                binary_cap_nanos()
            } else {
                binary_nanos(significant, exp10, bits).min(binary_cap_nanos())
            };
            if nanos < BigUint::from(1_000_000_000u32) {
                // Kubernetes: a non-zero binary value below 1 becomes DecimalSI.
                format = Format::DecimalSI;
            }
            nanos
        }
    };
    let magnitude = BigInt::from(magnitude);
    let value = Quantity::from_parts(
        if scanned.negative {
            -magnitude
        } else {
            magnitude
        },
        format,
    );
    Ok(if kubernetes_keeps_spelling(&scanned, &multiplier) {
        value.with_spelling(s)
    } else {
        value
    })
}

/// `ceil(D * 10^exp10 * 10^9)` for the significant digits D (no trailing zeros).
fn nanos_from_decimal(significant: &[u8], exp10: i64) -> BigUint {
    let k = exp10 + 9;
    if k >= 0 {
        return digits_to_big(significant) * pow10(k as u64);
    }
    let keep = significant.len() as i64 + k;
    if keep <= 0 {
        // Non-zero but below 1n: Kubernetes rounds it up to 1n.
        return BigUint::one();
    }
    // The dropped digits end in a non-zero digit (trailing zeros were
    // stripped), so the value is never exact here: round away from zero.
    digits_to_big(&significant[..keep as usize]) + BigUint::one()
}

/// `ceil(D * 10^exp10 * 2^bits * 10^9)` for the significant digits D (no
/// trailing zeros), without converting more than `bits + 10` fraction digits
/// of D, however long the input.
///
/// Every multiple of `1n / 2^bits` is `k / (2^bits * 10^9) = k * 5^bits /
/// 10^(bits + 9)`: it has at most `bits + 9` fraction digits. Cut D after
/// `s = bits + 10` fraction digits into `H / 10^s` plus a non-zero rest
/// (the last digit of D is not zero) below `1 / 10^s`: the value lies strictly
/// between two neighbours `H / 10^s` and `(H + 1) / 10^s` of a grid that
/// holds every point where the result steps, so any value strictly between
/// them rounds up to the same count of nano units. Replacing the rest by one
/// digit `1` at position `s + 1` keeps the value strictly between them.
fn binary_nanos(significant: &[u8], exp10: i64, bits: u32) -> BigUint {
    let s = i64::from(bits) + 10;
    if exp10 >= -s {
        return scale_nanos_ceil(digits_to_big(significant) << bits, exp10);
    }
    // Digits at or above 10^-s: n + exp10 + s of them.
    let keep = significant.len() as i64 + exp10 + s;
    if keep <= 0 {
        // 0 < value < 10^-s, so value * 2^bits * 10^9 < 1: one nano.
        return BigUint::one();
    }
    let mut digits = significant[..keep as usize].to_vec();
    digits.push(b'1');
    scale_nanos_ceil(digits_to_big(&digits) << bits, -s - 1)
}

/// `ceil(d * 10^exp10 * 10^9)` for an arbitrary integer d.
fn scale_nanos_ceil(d: BigUint, exp10: i64) -> BigUint {
    let k = exp10 + 9;
    if k >= 0 {
        return d * pow10(k as u64);
    }
    let divisor = pow10(k.unsigned_abs());
    let q = &d / &divisor;
    if (&q * &divisor) == d {
        q
    } else {
        q + BigUint::one()
    }
}

impl FromStr for Quantity {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}
