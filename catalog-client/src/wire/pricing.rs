//! What a plan's `cost` is counted in: the catalog's currency and the
//! period a cost pays for (`--currency`, `--cost-period`). The catalog
//! stamps it on every offer and contract it serves (`pricing`), so a buyer
//! that adds costs up (the market autoscaler's budget) never has to guess
//! the unit; a catalog too old to say it is a catalog whose prices cannot
//! be compared with a budget.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Seconds in an hour.
pub const HOUR_SECONDS: u64 = 3_600;
/// Seconds in a pricing month: 30 days. (Budgets "per calendar month" are
/// the UTC calendar month; a price per month is always 30 days of use.)
pub const MONTH_SECONDS: u64 = 30 * 24 * HOUR_SECONDS;

/// The period a plan's `cost` pays for. A contract accrues its cost pro
/// rata, by the second, while it is active.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum CostPeriod {
    /// The cost pays for one hour (3,600 s).
    #[default]
    Hour,
    /// The cost pays for one month of 30 days (2,592,000 s).
    Month,
}

impl CostPeriod {
    pub const ALL: [CostPeriod; 2] = [CostPeriod::Hour, CostPeriod::Month];

    /// The period's length in seconds (a month is 30 days).
    pub fn seconds(self) -> u64 {
        match self {
            CostPeriod::Hour => HOUR_SECONDS,
            CostPeriod::Month => MONTH_SECONDS,
        }
    }

    /// The wire spelling (`hour`, `month`).
    pub fn as_str(self) -> &'static str {
        match self {
            CostPeriod::Hour => "hour",
            CostPeriod::Month => "month",
        }
    }
}

impl fmt::Display for CostPeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a value is not a pricing setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PricingError {
    #[error("{0:?} is not a cost period: use hour or month")]
    Period(String),
    #[error(
        "{0:?} is not an ISO 4217 currency code: use three upper-case letters A-Z, such as EUR or USD"
    )]
    Currency(String),
}

impl FromStr for CostPeriod {
    type Err = PricingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CostPeriod::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| PricingError::Period(s.to_string()))
    }
}

/// The unit of every cost a catalog serves: `{"currency": "EUR", "per":
/// "hour"}` means a plan's `cost` is euros per hour of use.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    /// An ISO 4217 code: three upper-case letters (`EUR`, `USD`).
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = "^[A-Z]{3}$",
            min_length = 3,
            max_length = 3,
            example = "EUR"
        )
    )]
    pub currency: String,
    /// The period one `cost` pays for.
    pub per: CostPeriod,
}

impl Pricing {
    /// Pricing in `currency` (checked, see [`check_currency`]) per `per`.
    pub fn new(currency: &str, per: CostPeriod) -> Result<Self, PricingError> {
        check_currency(currency)?;
        Ok(Pricing {
            currency: currency.to_string(),
            per,
        })
    }
}

impl fmt::Display for Pricing {
    /// `EUR/hour`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.currency, self.per)
    }
}

/// The shape of an ISO 4217 alphabetic code: exactly three ASCII
/// upper-case letters. (Whether the code is assigned is not checked: the
/// list changes, and a private code such as `XTS` is a fair test value.)
pub fn check_currency(code: &str) -> Result<(), PricingError> {
    if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err(PricingError::Currency(code.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_read_and_print_in_lower_case() {
        assert_eq!(
            serde_json::to_value(CostPeriod::Month).unwrap(),
            serde_json::json!("month")
        );
        assert_eq!(
            serde_json::from_str::<CostPeriod>("\"hour\"").unwrap(),
            CostPeriod::Hour
        );
        assert!(serde_json::from_str::<CostPeriod>("\"Hour\"").is_err());
        assert_eq!("month".parse::<CostPeriod>(), Ok(CostPeriod::Month));
        assert!("day".parse::<CostPeriod>().is_err());
        assert_eq!(CostPeriod::Hour.seconds(), 3_600);
        assert_eq!(CostPeriod::Month.seconds(), 2_592_000);
    }

    #[test]
    fn currencies_are_three_upper_case_letters() {
        for good in ["EUR", "USD", "XTS"] {
            assert_eq!(check_currency(good), Ok(()), "{good}");
        }
        for bad in ["eur", "EU", "EURO", "", "E1R", "ÉUR", "EU ", "€"] {
            assert!(check_currency(bad).is_err(), "{bad:?}");
        }
        let p = Pricing::new("EUR", CostPeriod::Hour).unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"currency": "EUR", "per": "hour"})
        );
        assert_eq!(p.to_string(), "EUR/hour");
    }
}
