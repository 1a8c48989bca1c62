//! Money, exactly: spend rates and month-to-date from contracts' terms.
//!
//! A plan's `cost` is the price of its resources per period (an hour or a
//! 30-day month, the catalog's `pricing.per`), prorated by the second while
//! the contract is active; a cancelled contract stops accruing at
//! `endedAt`. Every figure here is a whole number of nano-units (as
//! [`Cost`]) in an `i128`, and every division rounds **up**: a spend the
//! autoscaler compares with a budget is never below what the catalog will
//! count, so rounding can never let it overspend.
//!
//! Budgets' "per month" is the UTC calendar month; a pricing month is
//! 30 days (2,592,000 s), as the catalog prices.

use std::fmt;

use catalog_client::wire::cost::Cost;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// Nano-units per unit, as [`Cost`].
const NANOS_PER_UNIT: i128 = 1_000_000_000;
pub const HOUR_SECONDS: i128 = 3_600;
/// The pricing month (30 days), as the catalog counts it.
pub const MONTH_SECONDS: i128 = 2_592_000;

/// An amount of money in nano-units, wide enough that sums of many plans
/// never overflow (they saturate far above any budget).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Money(i128);

impl Money {
    pub const ZERO: Money = Money(0);

    pub fn from_nanos(nanos: i128) -> Self {
        Money(nanos)
    }
    pub fn nanos(self) -> i128 {
        self.0
    }
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
    /// Saturating: a sum past `i128::MAX` nano-units is past every budget anyway.
    #[must_use]
    pub fn plus(self, other: Money) -> Money {
        Money(self.0.saturating_add(other.0))
    }
    #[must_use]
    pub fn minus(self, other: Money) -> Money {
        Money(self.0.saturating_sub(other.0))
    }
}

impl From<Cost> for Money {
    fn from(cost: Cost) -> Self {
        Money(i128::from(cost.nanos()))
    }
}

impl std::iter::Sum for Money {
    fn sum<I: Iterator<Item = Money>>(iter: I) -> Money {
        iter.fold(Money::ZERO, Money::plus)
    }
}

/// As [`Cost`] prints: at least one fraction digit, no trailing zeros
/// (`"2.5"`, `"0.000000001"`, `"3.0"`).
impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let whole = abs / NANOS_PER_UNIT as u128;
        let frac = abs % NANOS_PER_UNIT as u128;
        let mut digits = format!("{frac:09}");
        while digits.len() > 1 && digits.ends_with('0') {
            digits.pop();
        }
        write!(f, "{sign}{whole}.{digits}")
    }
}

/// The period a plan's cost is for (the catalog's `pricing.per`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Period {
    Hour,
    /// 30 days.
    Month,
}

impl Period {
    pub fn seconds(self) -> i128 {
        match self {
            Period::Hour => HOUR_SECONDS,
            Period::Month => MONTH_SECONDS,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Hour => "hour",
            Period::Month => "month",
        }
    }
}

/// A price: a cost per period, in a currency.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pricing {
    pub currency: String,
    pub per: Period,
}

/// `n / d` rounded up, for `n ≥ 0`, `d > 0`; saturating.
fn div_up(n: i128, d: i128) -> i128 {
    if n <= 0 {
        return n / d;
    }
    n / d + i128::from(n % d != 0)
}

/// What `cost` per `period` accrues in `seconds`, rounded up.
pub fn accrued(cost: Money, period: Period, seconds: i128) -> Money {
    Money(div_up(
        cost.0.saturating_mul(seconds.max(0)),
        period.seconds(),
    ))
}

/// `cost` per `period` as a rate per hour, rounded up.
pub fn per_hour(cost: Money, period: Period) -> Money {
    accrued(cost, period, HOUR_SECONDS)
}

/// `cost` per `period` as a rate per (30-day) month, rounded up.
pub fn per_month(cost: Money, period: Period) -> Money {
    accrued(cost, period, MONTH_SECONDS)
}

/// Whole seconds from `from` to `to` (a started second counts), 0 when
/// `to` is not after `from`.
pub fn seconds_between(from: Timestamp, to: Timestamp) -> i128 {
    let nanos = to.as_nanosecond() - from.as_nanosecond();
    if nanos <= 0 {
        0
    } else {
        div_up(nanos, 1_000_000_000)
    }
}

/// The UTC calendar month holding `now`: its first instant and the first
/// instant of the next month.
pub fn month_of(now: Timestamp) -> (Timestamp, Timestamp) {
    let date = now.to_zoned(TimeZone::UTC).date();
    let first = date.first_of_month();
    let start = first
        .to_zoned(TimeZone::UTC)
        .map(|z| z.timestamp())
        .unwrap_or(now);
    let end = first
        .checked_add(1.month())
        .ok()
        .and_then(|d| d.to_zoned(TimeZone::UTC).ok())
        .map(|z| z.timestamp())
        .unwrap_or(Timestamp::MAX);
    (start, end)
}

/// One contract's terms, as far as money goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractTerms {
    pub cost: Money,
    pub per: Period,
    pub purchased_at: Timestamp,
    /// `endedAt` when it ended (cancelled), else `expiresAt`.
    pub ends_at: Timestamp,
}

impl ContractTerms {
    /// What it accrues over `[from, to)` (clipped to its own life).
    pub fn accrued_between(&self, from: Timestamp, to: Timestamp) -> Money {
        let from = from.max(self.purchased_at);
        let to = to.min(self.ends_at);
        accrued(self.cost, self.per, seconds_between(from, to))
    }

    pub fn active_at(&self, now: Timestamp) -> bool {
        self.purchased_at <= now && now < self.ends_at
    }
}

/// What contracts cost: the rate now, the month so far, and what they
/// will still accrue this month if nothing changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spend {
    pub per_hour: Money,
    pub month_to_date: Money,
    /// From now to the month's end (or each contract's end, if sooner).
    pub rest_of_month: Money,
}

impl Spend {
    /// The spend of `contracts` (every contract of this autoscaler, ended
    /// ones included: they count in the month they accrued in).
    pub fn of(contracts: &[ContractTerms], now: Timestamp) -> Spend {
        let (start, end) = month_of(now);
        let mut spend = Spend::default();
        for c in contracts {
            if c.active_at(now) {
                spend.per_hour = spend.per_hour.plus(per_hour(c.cost, c.per));
            }
            spend.month_to_date = spend.month_to_date.plus(c.accrued_between(start, now));
            spend.rest_of_month = spend.rest_of_month.plus(c.accrued_between(now, end));
        }
        spend
    }

    /// Adds a purchase in flight: no contract yet, so it counts from now,
    /// for `term` (or to the month's end when the term is unknown).
    pub fn with_in_flight(
        mut self,
        cost: Money,
        per: Period,
        term: Option<std::time::Duration>,
        now: Timestamp,
    ) -> Spend {
        self.per_hour = self.per_hour.plus(per_hour(cost, per));
        self.rest_of_month = self.rest_of_month.plus(rest_of_month(cost, per, term, now));
        self
    }
}

/// What a contract bought `now` for `term` accrues until the UTC month's
/// end (or its own end, if sooner).
pub fn rest_of_month(
    cost: Money,
    per: Period,
    term: Option<std::time::Duration>,
    now: Timestamp,
) -> Money {
    let (_, end) = month_of(now);
    let mut seconds = seconds_between(now, end);
    if let Some(term) = term {
        seconds = seconds.min(i128::from(term.as_secs()) + i128::from(term.subsec_nanos() > 0));
    }
    accrued(cost, per, seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> Money {
        Money::from(s.parse::<Cost>().unwrap())
    }
    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn money_prints_as_cost_does() {
        assert_eq!(m("2.50").to_string(), "2.5");
        assert_eq!(m("3").to_string(), "3.0");
        assert_eq!(Money::from_nanos(1).to_string(), "0.000000001");
    }

    #[test]
    fn rates_round_up_to_the_nano_unit() {
        // 1 per month is 1/720 per hour: 0.001388888…, rounded up.
        assert_eq!(
            per_hour(m("1"), Period::Month),
            Money::from_nanos(1_388_889)
        );
        assert_eq!(per_month(m("0.5"), Period::Hour), m("360"));
        assert_eq!(per_hour(m("0.5"), Period::Hour), m("0.5"));
        // One second of 1 per hour: 1/3600 rounded up.
        assert_eq!(accrued(m("1"), Period::Hour, 1), Money::from_nanos(277_778));
    }

    #[test]
    fn the_month_is_the_utc_calendar_month() {
        let (start, end) = month_of(t("2026-02-14T23:59:59.5Z"));
        assert_eq!(start, t("2026-02-01T00:00:00Z"));
        assert_eq!(end, t("2026-03-01T00:00:00Z"));
        let (start, end) = month_of(t("2026-12-31T23:00:00Z"));
        assert_eq!(start, t("2026-12-01T00:00:00Z"));
        assert_eq!(end, t("2027-01-01T00:00:00Z"));
    }

    #[test]
    fn month_to_date_counts_only_this_month_and_stops_at_the_end() {
        let now = t("2026-03-02T00:00:00Z");
        let contracts = [
            // Bought last month, still running: counts from March 1st (24 h).
            ContractTerms {
                cost: m("1"),
                per: Period::Hour,
                purchased_at: t("2026-02-20T00:00:00Z"),
                ends_at: t("2026-03-20T00:00:00Z"),
            },
            // Cancelled after 90 minutes today-ish: 1.5 h at 2/h.
            ContractTerms {
                cost: m("2"),
                per: Period::Hour,
                purchased_at: t("2026-03-01T10:00:00Z"),
                ends_at: t("2026-03-01T11:30:00Z"),
            },
            // Ended last month: nothing this month.
            ContractTerms {
                cost: m("100"),
                per: Period::Hour,
                purchased_at: t("2026-02-01T00:00:00Z"),
                ends_at: t("2026-02-02T00:00:00Z"),
            },
        ];
        let spend = Spend::of(&contracts, now);
        assert_eq!(spend.month_to_date, m("27"));
        assert_eq!(spend.per_hour, m("1"));
        // The running one accrues until it ends on the 20th: 18 days.
        assert_eq!(spend.rest_of_month, m("432"));
    }

    #[test]
    fn in_flight_counts_until_its_term_or_the_month_end() {
        let now = t("2026-03-31T22:00:00Z");
        let s = Spend::default().with_in_flight(m("1"), Period::Hour, None, now);
        assert_eq!(s.rest_of_month, m("2"));
        assert_eq!(s.per_hour, m("1"));
        let s = Spend::default().with_in_flight(
            m("1"),
            Period::Hour,
            Some(std::time::Duration::from_secs(1800)),
            now,
        );
        assert_eq!(s.rest_of_month, m("0.5"));
    }
}
