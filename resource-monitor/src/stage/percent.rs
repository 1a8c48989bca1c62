//! A share between 0 and 100 percent, checked when it is read from a file or
//! a flag so a typo cannot offer more than a cluster has.

use std::fmt;
use std::str::FromStr;

/// A percentage in `0..=100`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Percent(u32);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PercentError {
    #[error("a percentage must be between 0 and 100, got {0}")]
    OutOfRange(i64),
    #[error("a percentage must be a whole number between 0 and 100, got {0:?}")]
    NotANumber(String),
}

impl Percent {
    pub const FULL: Percent = Percent(100);

    pub fn new(value: u32) -> Result<Self, PercentError> {
        if value > 100 {
            return Err(PercentError::OutOfRange(value.into()));
        }
        Ok(Percent(value))
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for Percent {
    fn default() -> Self {
        Percent::FULL
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

impl FromStr for Percent {
    type Err = PercentError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim().trim_end_matches('%');
        let value: i64 = trimmed
            .parse()
            .map_err(|_| PercentError::NotANumber(s.to_string()))?;
        u32::try_from(value)
            .map_err(|_| PercentError::OutOfRange(value))
            .and_then(Percent::new)
    }
}

impl<'de> serde::Deserialize<'de> for Percent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = i64::deserialize(d)?;
        u32::try_from(value)
            .map_err(|_| PercentError::OutOfRange(value))
            .and_then(Percent::new)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_is_checked() {
        assert_eq!(Percent::new(0).unwrap().get(), 0);
        assert_eq!(Percent::new(100).unwrap().get(), 100);
        assert!(Percent::new(101).is_err());
        assert_eq!("50".parse::<Percent>().unwrap().get(), 50);
        assert_eq!("50%".parse::<Percent>().unwrap().get(), 50);
        assert!("-1".parse::<Percent>().is_err());
        assert!("half".parse::<Percent>().is_err());
    }
}
