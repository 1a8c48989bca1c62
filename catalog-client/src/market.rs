//! Browsing and buying as a person at a terminal does it (the `brokerctl`
//! command line): the public offer list with the filters of `GET /offers`
//! ([`OfferFilter`]), one offer, a reservation with an optional lifetime,
//! a purchase answered with the contract, and the caller's contracts with
//! the filters of `GET /contracts`.
//!
//! Each read comes back as `T` — the wire types for a table, or
//! `serde_json::Value` to hand the catalog's JSON on unchanged to a
//! script, fields newer than this client included. Filters are sent to
//! the catalog as they are, so the catalog alone decides what a valid
//! filter is and a refused one comes back with its message.

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use crate::contracts::MAX_LISTING_BYTES;
use crate::error::Error;
use crate::http::{Http, MAX_ANSWER_BYTES};
use crate::routes;
use crate::session::Session;
use crate::wire::{PurchaseRequest, ReserveRequest};

/// The filters of `GET /offers` (docs/api.md): every one that is set must
/// hold, `max_cost` and every `min` for the same plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OfferFilter {
    /// `type=`: the offer's type.
    pub offer_type: Option<String>,
    /// `provider=`: the provider's cluster ID.
    pub provider: Option<String>,
    /// `maxCost=`: a decimal, compared exactly.
    pub max_cost: Option<String>,
    /// `min.<resource>=<quantity>`, compared as Kubernetes compares.
    pub min: Vec<(String, String)>,
    /// `liqo=v0|v1`.
    pub liqo: Option<String>,
    /// `enforcement=off|none|soft|hard|unknown`.
    pub enforcement: Option<String>,
    /// `isolation=enforced|unverified|failed|off`.
    pub isolation: Option<String>,
    /// `label.<key>=<value>`: exactly that value.
    pub labels: Vec<(String, String)>,
    /// Any other `key=value`, sent as it is: a filter newer than this
    /// client still reaches the catalog, which judges it.
    pub extra: Vec<(String, String)>,
}

impl OfferFilter {
    /// The query pairs, in the order the catalog's docs list them.
    pub fn query(&self) -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        let mut one = |key: &str, value: &Option<String>| {
            if let Some(value) = value {
                pairs.push((key.to_string(), value.clone()));
            }
        };
        one("type", &self.offer_type);
        one("provider", &self.provider);
        one("maxCost", &self.max_cost);
        one("liqo", &self.liqo);
        one("enforcement", &self.enforcement);
        one("isolation", &self.isolation);
        pairs.extend(
            self.min
                .iter()
                .map(|(r, q)| (format!("min.{r}"), q.clone())),
        );
        pairs.extend(
            self.labels
                .iter()
                .map(|(k, v)| (format!("label.{k}"), v.clone())),
        );
        pairs.extend(self.extra.iter().cloned());
        pairs
    }
}

/// The filters of `GET /contracts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContractFilter {
    /// `active=true|false`.
    pub active: Option<bool>,
    /// `state=pending|peered|granted|ready|failed`.
    pub state: Option<String>,
}

impl Http {
    /// `GET /offers` with `filter` (public: no token). A filter the
    /// catalog refuses is [`Error::Rejected`] with its message.
    pub async fn offers_as<T: DeserializeOwned>(
        &self,
        filter: &OfferFilter,
    ) -> Result<Vec<T>, Error> {
        let what = "GET /offers";
        let request = self.request(Method::GET, &with_query(routes::OFFERS, &filter.query()))?;
        let answer = self.send(request, MAX_LISTING_BYTES).await?;
        match answer.status {
            StatusCode::OK => answer.json(what),
            status if status.is_client_error() => Err(answer.rejected("the offer filter")),
            _ => Err(answer.unexpected(what)),
        }
    }

    /// `GET /offer/{id}` (public: no token).
    pub async fn offer_as<T: DeserializeOwned>(&self, id: &str) -> Result<T, Error> {
        let what = format!("GET /offer/{id}");
        let request = self.request(Method::GET, &routes::offer(id))?;
        let answer = self.send(request, MAX_ANSWER_BYTES).await?;
        match answer.status {
            StatusCode::OK => answer.json(&what),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("offer {id}"))),
            status if status.is_client_error() => Err(answer.rejected("the offer id")),
            _ => Err(answer.unexpected(&what)),
        }
    }
}

impl Session {
    /// `POST /reservations`: hold one unit of `plan` of `offer`, for
    /// `ttl_seconds` (the catalog's default without); the reservation.
    pub async fn reserve_as<T: DeserializeOwned>(
        &mut self,
        offer: &str,
        plan: &str,
        ttl_seconds: Option<u64>,
    ) -> Result<T, Error> {
        self.reserve_with(ReserveRequest {
            offer_id: offer.to_string(),
            plan_id: plan.to_string(),
            ttl_seconds,
            bought_by: None,
        })
        .await
    }

    /// `POST /reservations` with `body`; the reservation.
    pub async fn reserve_with<T: DeserializeOwned>(
        &mut self,
        body: ReserveRequest,
    ) -> Result<T, Error> {
        let what = "POST /reservations";
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                Ok(http
                    .request(Method::POST, routes::RESERVATIONS)?
                    .json(&body))
            })
            .await?;
        match answer.status {
            StatusCode::CREATED | StatusCode::OK => answer.json(what),
            _ => Err(answer.rejected("the reservation")),
        }
    }

    /// `POST /reservations/{id}/purchase`: buy the reservation; the
    /// contract, with its credentials. `consumer` is the buying cluster's
    /// ID (required by providers that peer with Liqo v1).
    pub async fn buy_as<T: DeserializeOwned>(
        &mut self,
        reservation: &str,
        consumer: Option<&str>,
        duration_seconds: Option<u64>,
    ) -> Result<T, Error> {
        let what = "POST /reservations/{id}/purchase";
        let body = PurchaseRequest {
            consumer_cluster_id: consumer.map(str::to_string),
            duration_seconds,
            bought_by: None,
        };
        let route = routes::purchase(reservation);
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                Ok(http.request(Method::POST, &route)?.json(&body))
            })
            .await?;
        match answer.status {
            StatusCode::CREATED | StatusCode::OK => answer.json(what),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("reservation {reservation}"))),
            _ => Err(answer.rejected("the purchase")),
        }
    }

    /// `GET /contracts` with `filter`: the caller's contracts (never with
    /// credentials).
    pub async fn contracts_as<T: DeserializeOwned>(
        &mut self,
        filter: &ContractFilter,
    ) -> Result<Vec<T>, Error> {
        let what = "GET /contracts";
        let mut query = Vec::new();
        if let Some(active) = filter.active {
            query.push(("active".to_string(), active.to_string()));
        }
        if let Some(state) = &filter.state {
            query.push(("state".to_string(), state.clone()));
        }
        let route = with_query(routes::CONTRACTS, &query);
        let answer = self
            .call(what, MAX_LISTING_BYTES, |http| {
                http.request(Method::GET, &route)
            })
            .await?;
        match answer.status {
            StatusCode::OK => answer.json(what),
            _ => Err(answer.rejected("the contract listing")),
        }
    }

    /// `GET /contracts/{id}`, read as `T`.
    pub async fn contract_as<T: DeserializeOwned>(&mut self, id: &str) -> Result<T, Error> {
        let what = "GET /contracts/{id}";
        let route = routes::contract(id);
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                http.request(Method::GET, &route)
            })
            .await?;
        match answer.status {
            StatusCode::OK => answer.json(what),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("contract {id}"))),
            _ => Err(answer.rejected("the contract read")),
        }
    }
}

/// `route` with `pairs` as its query, form-encoded as browsers encode
/// it (reqwest's own `query` is an optional feature the workspace does
/// not build).
fn with_query(route: &str, pairs: &[(String, String)]) -> String {
    if pairs.is_empty() {
        return route.to_string();
    }
    // Any absolute URL serves: only the query it encodes is kept.
    let Ok(mut url) = reqwest::Url::parse("http://query.invalid/") else {
        return route.to_string();
    };
    url.query_pairs_mut().extend_pairs(pairs);
    format!("{route}?{}", url.query().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_filter_becomes_the_catalogs_query_parameter() {
        let filter = OfferFilter {
            offer_type: Some("gpu".into()),
            provider: Some("cluster-1".into()),
            max_cost: Some("2.5".into()),
            min: vec![("memory".into(), "8Gi".into())],
            liqo: Some("v1".into()),
            enforcement: Some("hard".into()),
            isolation: Some("enforced".into()),
            labels: vec![("region".into(), "eu".into())],
            extra: vec![("kind".into(), "service".into())],
        };
        let pairs: Vec<String> = filter
            .query()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(
            pairs,
            [
                "type=gpu",
                "provider=cluster-1",
                "maxCost=2.5",
                "liqo=v1",
                "enforcement=hard",
                "isolation=enforced",
                "min.memory=8Gi",
                "label.region=eu",
                "kind=service"
            ]
        );
        assert!(OfferFilter::default().query().is_empty());
        assert_eq!(
            with_query("offers", &[("label.a/b".into(), "x y&z".into())]),
            "offers?label.a%2Fb=x+y%26z"
        );
        assert_eq!(with_query("contracts", &[]), "contracts");
    }
}
