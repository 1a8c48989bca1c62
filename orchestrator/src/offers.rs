//! The catalog's offers as the decision reads them: who offers, with which
//! provider labels, which plans at which cost — built from the catalog's
//! own offers (`catalog_client::wire::Offer`, as the feed of `GET
//! /subscribe` delivers them) by [`from_wire`]. Costs compare exactly, as
//! decimals (the catalog prints them as decimal strings with at most 9
//! fraction digits).

use std::collections::BTreeMap;
use std::fmt;

use catalog_client::wire;
use quantity::ResourceList;
use serde::Deserialize;

/// One offer of the catalog (the fields the decision reads).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
pub struct Offer {
    pub id: String,
    /// The provider's Liqo cluster ID.
    #[cfg_attr(test, serde(rename = "clusterID"))]
    pub cluster_id: String,
    #[cfg_attr(test, serde(default))]
    pub labels: BTreeMap<String, String>,
    pub plans: BTreeMap<String, Plan>,
}

/// One plan of an offer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
pub struct Plan {
    pub name: String,
    pub cost: Price,
    #[cfg_attr(test, serde(default))]
    pub resources: ResourceList,
}

/// The catalog's offers, by offer id.
pub type Offers = BTreeMap<String, Offer>;

impl From<&wire::Offer> for Offer {
    fn from(offer: &wire::Offer) -> Self {
        Offer {
            id: offer.id.clone(),
            cluster_id: offer.cluster_id.clone(),
            labels: offer.labels.clone(),
            plans: offer
                .plans
                .iter()
                .map(|(id, plan)| {
                    let plan = Plan {
                        name: plan.name.clone(),
                        cost: Price::from(plan.cost),
                        resources: plan.resources.clone(),
                    };
                    (id.clone(), plan)
                })
                .collect(),
        }
    }
}

/// The decision's view of the offers the feed holds.
pub fn from_wire(offers: &BTreeMap<String, wire::Offer>) -> Offers {
    offers
        .iter()
        .map(|(id, offer)| (id.clone(), Offer::from(offer)))
        .collect()
}

/// A non-negative decimal cost, held exactly in nano-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Price(u128);

const SCALE: u128 = 1_000_000_000;

impl Price {
    pub fn from_nanos(n: u128) -> Price {
        Price(n)
    }
    pub fn nanos(self) -> u128 {
        self.0
    }
    pub fn saturating_add(self, other: Price) -> Price {
        Price(self.0.saturating_add(other.0))
    }
}

impl std::str::FromStr for Price {
    type Err = String;
    fn from_str(s: &str) -> Result<Price, String> {
        let bad = || format!("{s:?} is not a non-negative decimal");
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        let frac = frac.trim_end_matches('0');
        if whole.is_empty()
            || whole.len() > 20
            || frac.len() > 9
            || !whole.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(bad());
        }
        let w: u128 = whole.parse().map_err(|_| bad())?;
        let f: u128 = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<9}").parse().map_err(|_| bad())?
        };
        Ok(Price(w * SCALE + f))
    }
}

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (w, n) = (self.0 / SCALE, self.0 % SCALE);
        if n == 0 {
            return write!(f, "{w}");
        }
        let frac = format!("{n:09}");
        write!(f, "{w}.{}", frac.trim_end_matches('0'))
    }
}

impl From<wire::Cost> for Price {
    /// Both count nano-units; a cost is never negative.
    fn from(cost: wire::Cost) -> Price {
        Price(u128::from(cost.nanos().unsigned_abs()))
    }
}

impl<'de> Deserialize<'de> for Price {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_are_exact_decimals() {
        let p = |s: &str| s.parse::<Price>().unwrap();
        assert_eq!(p("1.10"), p("1.1"));
        assert!(p("0.999999999") < p("1"));
        assert_eq!(p("2.5").to_string(), "2.5");
        assert_eq!(p("3.0").to_string(), "3");
        assert_eq!(p("0.35").saturating_add(p("0.65")), p("1"));
        for bad in ["", "-1", "1e3", "0.0000000001", "x", ".5"] {
            assert!(bad.parse::<Price>().is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_a_catalog_offer() {
        let wire: wire::Offer = serde_json::from_str(
            r#"{"id":"o","name":"n","type":"t","description":"","clusterID":"p1","clusterName":"one",
                "createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z","version":3,
                "labels":{"region":"eu"},
                "plans":{"a":{"name":"a","cost":"1.000000005","resources":{"cpu":"2","memory":"4Gi"}}}}"#,
        )
        .unwrap();
        let offers = from_wire(&[("o".to_string(), wire)].into());
        let o = &offers["o"];
        assert_eq!(o.cluster_id, "p1");
        assert_eq!(o.labels["region"], "eu");
        assert_eq!(o.plans["a"].name, "a");
        assert_eq!(o.plans["a"].cost, "1.000000005".parse().unwrap());
        assert_eq!(o.plans["a"].resources.to_strings()["memory"], "4Gi");
    }
}
