//! Exact plan costs: non-negative decimals kept as integer nano-units, so
//! `maxCost` compares exactly (no float rounding) in memory and in MongoDB.
//! The catalog server uses this very module (`catalog::offers::Cost`).

use std::fmt;
use std::str::FromStr;

use super::pricing::{CostPeriod, MONTH_SECONDS};

/// Fraction digits a cost may carry (nano-units).
pub const COST_SCALE: u32 = 9;
const NANOS_PER_UNIT: i64 = 1_000_000_000;

/// A non-negative decimal cost, exact to 9 fraction digits.
///
/// Parsed from a decimal string (`"1.0"`, `"0.25"`) or a JSON number; printed
/// canonically with at least one fraction digit and no trailing zeros
/// (`"1.0"`, `"0.25"`), and always serialised as a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cost {
    nanos: i64,
}

/// Why a value is not a cost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    #[error("must be a decimal number such as \"1.0\" or 2.5")]
    Format,
    #[error("must not be negative")]
    Negative,
    #[error("at most {COST_SCALE} fraction digits are allowed")]
    TooPrecise,
    #[error("is too large")]
    TooLarge,
}

impl Cost {
    pub const ZERO: Cost = Cost { nanos: 0 };
    /// The largest cost there is (about 9.2 billion units): where the
    /// saturating operations below stop.
    pub const MAX: Cost = Cost { nanos: i64::MAX };

    /// `self + other`, None past [`Cost::MAX`].
    pub fn checked_add(self, other: Cost) -> Option<Cost> {
        self.nanos
            .checked_add(other.nanos)
            .map(|nanos| Cost { nanos })
    }

    /// `self + other`, [`Cost::MAX`] past it. A sum that saturates is
    /// above every budget, so a budget check never passes by overflow.
    pub fn saturating_add(self, other: Cost) -> Cost {
        Cost {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }

    /// `self - other`, None when that would be negative.
    pub fn checked_sub(self, other: Cost) -> Option<Cost> {
        self.nanos
            .checked_sub(other.nanos)
            .filter(|n| *n >= 0)
            .map(|nanos| Cost { nanos })
    }

    /// `self - other`, zero when that would be negative (what is left of
    /// a budget).
    pub fn saturating_sub(self, other: Cost) -> Cost {
        self.checked_sub(other).unwrap_or(Cost::ZERO)
    }

    /// `self × count` (a plan bought `count` times), None past [`Cost::MAX`].
    pub fn checked_mul(self, count: u64) -> Option<Cost> {
        let nanos = i128::from(self.nanos) * i128::from(count);
        i64::try_from(nanos).ok().map(|nanos| Cost { nanos })
    }

    /// `self × count`, [`Cost::MAX`] past it.
    pub fn saturating_mul(self, count: u64) -> Cost {
        self.checked_mul(count).unwrap_or(Cost::MAX)
    }

    /// What a cost of `self` per `period` accrues over `seconds` of use:
    /// `self × seconds / period`, rounded **up** to the nano-unit (a buyer
    /// adding up spend never counts less than it owes), [`Cost::MAX`] past
    /// it. Exact: integer arithmetic on 128 bits, no float anywhere.
    pub fn accrued(self, period: CostPeriod, seconds: u64) -> Cost {
        self.scaled(seconds, period.seconds())
    }

    /// The same price per hour (rounded up).
    pub fn per_hour(self, period: CostPeriod) -> Cost {
        self.accrued(period, CostPeriod::Hour.seconds())
    }

    /// The same price per month of 30 days (rounded up).
    pub fn per_month(self, period: CostPeriod) -> Cost {
        self.accrued(period, MONTH_SECONDS)
    }

    /// `self × num / den` rounded up, saturating at [`Cost::MAX`].
    fn scaled(self, num: u64, den: u64) -> Cost {
        // Both factors are below 2^64 and nanos below 2^63: the product
        // fits in 127 bits.
        let product = i128::from(self.nanos) * i128::from(num);
        let den = i128::from(den.max(1));
        let quotient = product / den + i128::from(product % den != 0);
        Cost {
            nanos: i64::try_from(quotient).unwrap_or(i64::MAX),
        }
    }

    /// The cost in nano-units (the form stores compare and index).
    pub fn nanos(self) -> i64 {
        self.nanos
    }

    pub fn from_nanos(nanos: i64) -> Result<Self, CostError> {
        if nanos < 0 {
            return Err(CostError::Negative);
        }
        Ok(Self { nanos })
    }

    /// A JSON number token exactly as written in the request
    /// (`123456789.123456789`, `25e-1`): read digit for digit, never through
    /// a float, so it means what the client wrote.
    pub fn from_json_number_text(text: &str) -> Result<Self, CostError> {
        let (mantissa, exp) = match text.find(['e', 'E']) {
            Some(i) => (&text[..i], &text[i + 1..]),
            None => (text, ""),
        };
        if exp.is_empty() {
            return if text.contains(['e', 'E']) {
                Err(CostError::Format)
            } else {
                mantissa.parse()
            };
        }
        let exp_digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        if exp_digits.is_empty() || !exp_digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(CostError::Format);
        }
        let negative = mantissa.starts_with('-');
        let unsigned = mantissa.strip_prefix('-').unwrap_or(mantissa);
        let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
        if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return Err(CostError::Format);
        }
        let digits = format!("{int}{frac}");
        let significant = digits.trim_start_matches('0').trim_end_matches('0');
        if significant.is_empty() {
            return Ok(Cost::ZERO);
        }
        if negative {
            return Err(CostError::Negative);
        }
        // Where the decimal point falls in `digits`; a nonzero value this
        // far off either way is too large or too precise for any cost.
        let shift: i64 = exp_digits
            .trim_start_matches('0')
            .parse::<i64>()
            .ok()
            .filter(|e| *e <= 1_000)
            .map(|e| if exp.starts_with('-') { -e } else { e })
            .unwrap_or(if exp.starts_with('-') { -1_001 } else { 1_001 });
        let point = int.len() as i64 + shift;
        if point > 1_000 {
            return Err(CostError::TooLarge);
        }
        if point < -1_000 {
            return Err(CostError::TooPrecise);
        }
        let plain = if point <= 0 {
            format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}", "0".repeat(point as usize - digits.len()))
        } else {
            let (i, f) = digits.split_at(point as usize);
            format!("{i}.{f}")
        };
        plain.parse()
    }

    /// A JSON number as a cost. Integers are exact; fractional numbers are
    /// taken at their shortest round-trip decimal form (`0.1` is `"0.1"`),
    /// which may not be the digits the client wrote: request bodies use
    /// [`Cost::from_json_number_text`] on the raw token instead.
    pub fn from_json_number(n: &serde_json::Number) -> Result<Self, CostError> {
        if let Some(u) = n.as_u64() {
            return u.to_string().parse();
        }
        if let Some(i) = n.as_i64() {
            return i.to_string().parse();
        }
        match n.as_f64() {
            Some(f) if f.is_finite() => format!("{f}").parse(),
            _ => Err(CostError::Format),
        }
    }
}

impl FromStr for Cost {
    type Err = CostError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unsigned = match s.strip_prefix('-') {
            Some(rest) => {
                // "-0" is still a well-formed non-negative value.
                let c: Cost = rest.parse()?;
                return if c.nanos == 0 {
                    Ok(c)
                } else {
                    Err(CostError::Negative)
                };
            }
            None => s.strip_prefix('+').unwrap_or(s),
        };
        let (int, frac) = match unsigned.split_once('.') {
            Some((i, f)) => (i, f),
            None => (unsigned, ""),
        };
        let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty()
            || !digits(int)
            || !digits(frac)
            || (unsigned.contains('.') && frac.is_empty())
        {
            return Err(CostError::Format);
        }
        let frac = frac.trim_end_matches('0');
        if frac.len() > COST_SCALE as usize {
            return Err(CostError::TooPrecise);
        }
        let int = int.trim_start_matches('0');
        if int.len() > 12 {
            return Err(CostError::TooLarge);
        }
        let whole: i64 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| CostError::TooLarge)?
        };
        let mut fraction: i64 = if frac.is_empty() {
            0
        } else {
            frac.parse().map_err(|_| CostError::Format)?
        };
        for _ in frac.len()..COST_SCALE as usize {
            fraction *= 10;
        }
        let nanos = whole
            .checked_mul(NANOS_PER_UNIT)
            .and_then(|n| n.checked_add(fraction))
            .ok_or(CostError::TooLarge)?;
        Ok(Self { nanos })
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.nanos / NANOS_PER_UNIT;
        let frac = self.nanos % NANOS_PER_UNIT;
        if frac == 0 {
            return write!(f, "{whole}.0");
        }
        let digits = format!("{frac:09}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

impl serde::Serialize for Cost {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Cost {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Str(String),
            Num(serde_json::Number),
        }
        let parsed = match Raw::deserialize(d)? {
            Raw::Str(s) => s.parse(),
            Raw::Num(n) => Cost::from_json_number(&n),
        };
        parsed.map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_canonically() {
        for (input, nanos, printed) in [
            ("1.0", 1_000_000_000, "1.0"),
            ("1", 1_000_000_000, "1.0"),
            ("0.25", 250_000_000, "0.25"),
            ("002.500", 2_500_000_000, "2.5"),
            ("0.000000001", 1, "0.000000001"),
            ("+3", 3_000_000_000, "3.0"),
            ("-0", 0, "0.0"),
        ] {
            let c: Cost = input.parse().unwrap();
            assert_eq!(c.nanos(), nanos, "{input}");
            assert_eq!(c.to_string(), printed, "{input}");
        }
    }

    #[test]
    fn rejects_bad_costs() {
        assert_eq!("-1".parse::<Cost>(), Err(CostError::Negative));
        assert_eq!("-0.5".parse::<Cost>(), Err(CostError::Negative));
        assert_eq!("0.0000000001".parse::<Cost>(), Err(CostError::TooPrecise));
        assert_eq!("9999999999999".parse::<Cost>(), Err(CostError::TooLarge));
        for bad in [
            "", ".", "1.", ".5", "1e3", "abc", "1,5", " 1", "1.2.3", "NaN",
        ] {
            assert_eq!(bad.parse::<Cost>(), Err(CostError::Format), "{bad:?}");
        }
    }

    #[test]
    fn json_numbers_are_exact() {
        let c: Cost = serde_json::from_str("0.1").unwrap();
        assert_eq!(c.nanos(), 100_000_000);
        let c: Cost = serde_json::from_str("2").unwrap();
        assert_eq!(c.to_string(), "2.0");
        assert!(serde_json::from_str::<Cost>("-2").is_err());
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"2.0\"");
    }

    #[test]
    fn json_number_text_is_read_exactly() {
        for (text, printed) in [
            ("123456789.123456789", "123456789.123456789"),
            ("0.1", "0.1"),
            ("2", "2.0"),
            ("25e-1", "2.5"),
            ("1.5E3", "1500.0"),
            ("1e+2", "100.0"),
            ("0.000000001", "0.000000001"),
            ("1000e-12", "0.000000001"),
            ("-0", "0.0"),
            ("-0.0e5", "0.0"),
            ("0e99999999999999999999", "0.0"),
        ] {
            assert_eq!(
                Cost::from_json_number_text(text).map(|c| c.to_string()),
                Ok(printed.to_string()),
                "{text}"
            );
        }
        for (text, err) in [
            ("-1", CostError::Negative),
            ("-1e-3", CostError::Negative),
            ("1e-10", CostError::TooPrecise),
            ("1e-99999999999999999999", CostError::TooPrecise),
            ("1e13", CostError::TooLarge),
            ("1e99999999999999999999", CostError::TooLarge),
            ("1e", CostError::Format),
            ("1ee2", CostError::Format),
            ("e2", CostError::Format),
        ] {
            assert_eq!(Cost::from_json_number_text(text), Err(err), "{text}");
        }
    }

    #[test]
    fn arithmetic_is_exact_and_rounds_up() {
        let c = |s: &str| s.parse::<Cost>().unwrap();
        // 1.0 per hour for one second: 1/3600 of a unit, rounded up to
        // the nano-unit (277777.7... nanos → 277778).
        assert_eq!(c("1").accrued(CostPeriod::Hour, 1).nanos(), 277_778);
        assert_eq!(c("1").accrued(CostPeriod::Hour, 3_600), c("1"));
        assert_eq!(c("0.5").per_month(CostPeriod::Hour), c("360"));
        assert_eq!(c("720").per_hour(CostPeriod::Month), c("1"));
        // 1 per month is 1/720 per hour: 1388888.8... nanos, rounded up.
        assert_eq!(c("1").per_hour(CostPeriod::Month).nanos(), 1_388_889);
        assert_eq!(c("2").per_hour(CostPeriod::Hour), c("2"));
        assert_eq!(Cost::ZERO.accrued(CostPeriod::Hour, u64::MAX), Cost::ZERO);
        assert_eq!(Cost::MAX.per_month(CostPeriod::Hour), Cost::MAX);
        assert_eq!(c("1.5").checked_add(c("2.25")), Some(c("3.75")));
        assert_eq!(Cost::MAX.checked_add(c("0.000000001")), None);
        assert_eq!(Cost::MAX.saturating_add(c("1")), Cost::MAX);
        assert_eq!(c("1").checked_sub(c("1.5")), None);
        assert_eq!(c("1").saturating_sub(c("1.5")), Cost::ZERO);
        assert_eq!(c("2.5").checked_sub(c("1")), Some(c("1.5")));
        assert_eq!(c("1.25").checked_mul(4), Some(c("5")));
        assert_eq!(Cost::MAX.checked_mul(2), None);
        assert_eq!(Cost::MAX.saturating_mul(2), Cost::MAX);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn cost() -> impl Strategy<Value = Cost> {
            prop_oneof![
                (0i64..=1_000_000_000_000).prop_map(|n| Cost::from_nanos(n).unwrap()),
                (0i64..=i64::MAX).prop_map(|n| Cost::from_nanos(n).unwrap()),
            ]
        }

        fn period() -> impl Strategy<Value = CostPeriod> {
            prop_oneof![Just(CostPeriod::Hour), Just(CostPeriod::Month)]
        }

        proptest! {
            /// `accrued` is the exact quotient rounded up: never below what
            /// is owed, and less than one nano-unit above it.
            #[test]
            fn accrued_is_the_ceiling(c in cost(), p in period(), s in 0u64..=400 * 24 * 3_600) {
                let owed = i128::from(c.nanos()) * i128::from(s);
                let per = i128::from(p.seconds());
                let got = i128::from(c.accrued(p, s).nanos());
                if got < i128::from(i64::MAX) {
                    prop_assert!(got * per >= owed, "{got} × {per} < {owed}");
                    prop_assert!((got - 1) * per < owed, "{got} is more than the ceiling");
                } else {
                    prop_assert!(owed.div_euclid(per) >= i128::from(i64::MAX) - 1);
                }
            }

            /// Accruing in pieces never counts less than accruing at once
            /// (each piece rounds up), and a whole period is the cost itself.
            #[test]
            fn pieces_never_undercount(c in cost(), p in period(), a in 0u64..=1_000_000, b in 0u64..=1_000_000) {
                let whole = c.accrued(p, a + b);
                let pieces = c.accrued(p, a).saturating_add(c.accrued(p, b));
                prop_assert!(pieces >= whole);
                prop_assert_eq!(c.accrued(p, p.seconds()), c);
            }

            /// Rates per hour and per month round up, so converting back
            /// never lands below the original price.
            #[test]
            fn rates_round_up(c in cost()) {
                prop_assert!(c.per_hour(CostPeriod::Month).saturating_mul(720) >= c);
                prop_assert_eq!(c.per_hour(CostPeriod::Hour), c);
                prop_assert_eq!(c.per_month(CostPeriod::Month), c);
                prop_assert_eq!(c.per_month(CostPeriod::Hour), c.saturating_mul(720));
            }

            /// Sums, differences and products match 128-bit integers, and
            /// refuse (checked) or stop at MAX/zero (saturating) outside.
            #[test]
            fn sums_match_integers(a in cost(), b in cost(), n in 0u64..=1_000_000) {
                let sum = i128::from(a.nanos()) + i128::from(b.nanos());
                match a.checked_add(b) {
                    Some(s) => prop_assert_eq!(i128::from(s.nanos()), sum),
                    None => prop_assert!(sum > i128::from(i64::MAX)),
                }
                prop_assert_eq!(a.checked_add(b), b.checked_add(a));
                if let Some(s) = a.checked_add(b) {
                    prop_assert_eq!(s.checked_sub(b), Some(a));
                }
                prop_assert_eq!(a.checked_sub(b).is_some(), a >= b);
                prop_assert_eq!(a.saturating_sub(b) == Cost::ZERO, a <= b);
                let product = i128::from(a.nanos()) * i128::from(n);
                match a.checked_mul(n) {
                    Some(m) => prop_assert_eq!(i128::from(m.nanos()), product),
                    None => prop_assert!(product > i128::from(i64::MAX)),
                }
            }
        }
    }

    #[test]
    fn orders_by_value() {
        let a: Cost = "1.10".parse().unwrap();
        let b: Cost = "1.1".parse().unwrap();
        let c: Cost = "1.09".parse().unwrap();
        assert_eq!(a, b);
        assert!(c < a);
    }
}
