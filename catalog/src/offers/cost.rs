//! Exact plan costs: non-negative decimals kept as integer nano-units, so
//! `maxCost` compares exactly (no float rounding) in memory and in MongoDB.

use std::fmt;
use std::str::FromStr;

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

    /// A JSON number as a cost. Integers are exact; fractional numbers are
    /// taken at their shortest round-trip decimal form (`0.1` is `"0.1"`).
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
    fn orders_by_value() {
        let a: Cost = "1.10".parse().unwrap();
        let b: Cost = "1.1".parse().unwrap();
        let c: Cost = "1.09".parse().unwrap();
        assert_eq!(a, b);
        assert!(c < a);
    }
}
