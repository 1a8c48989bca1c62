//! What a subscriber asks for in the `/subscribe` query string: the mode and
//! the same filters `GET /offers` takes.

use crate::http::FieldError;
use crate::offers::OfferFilter;

/// How a subscriber follows changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The thesis behaviour (`mode=snapshot`): the full (filtered) list on
    /// connect and, after every change that touches it, the latest list (a
    /// list not yet sent is replaced by the newer one, never by an older).
    Snapshot,
    /// The default: one list on connect, then `upsert` / `delete` events.
    Delta,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Snapshot => "snapshot",
            Mode::Delta => "delta",
        }
    }
}

/// A parsed subscription request.
#[derive(Debug, Clone)]
pub struct SubscribeParams {
    pub mode: Mode,
    pub filter: OfferFilter,
    /// The filter in one canonical spelling: subscribers whose filters mean
    /// the same share one filtered list.
    pub filter_key: String,
    /// Messages go out compressed (`permessage-deflate` negotiated; set by
    /// the handler from the headers, not the query).
    pub deflate: bool,
}

impl SubscribeParams {
    /// Parse a raw query string: `mode=snapshot|delta` plus `GET /offers`
    /// filters. A bad or unknown parameter is refused, naming it.
    pub fn parse(query: &str) -> Result<Self, FieldError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
            .map_err(|e| FieldError::new("query", format!("malformed query string: {e}")))?;
        let mut mode = None;
        let mut filters = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            if k != "mode" {
                filters.push((k, v));
                continue;
            }
            if mode.is_some() {
                return Err(FieldError::new("mode", "given more than once"));
            }
            mode = Some(match v.as_str() {
                "snapshot" => Mode::Snapshot,
                "delta" => Mode::Delta,
                _ => return Err(FieldError::new("mode", "must be `snapshot` or `delta`")),
            });
        }
        let filter = OfferFilter::from_pairs(filters)?;
        Ok(SubscribeParams {
            // Delta by default: a snapshot on connect, then one event per
            // change. The thesis's full list on every change costs every
            // subscriber the whole list per write; it stays as
            // `mode=snapshot` for clients that want it.
            mode: mode.unwrap_or(Mode::Delta),
            filter_key: canonical_key(&filter),
            filter,
            deflate: false,
        })
    }
}

/// The filter as a query string in a fixed order with canonical values
/// (`maxCost=1.50` and `maxCost=1.5` give the same key).
pub fn canonical_key(f: &OfferFilter) -> String {
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Some(t) = &f.offer_type {
        pairs.push(("type".into(), t.clone()));
    }
    if let Some(p) = &f.provider {
        pairs.push(("provider".into(), p.clone()));
    }
    if let Some(c) = &f.max_cost {
        pairs.push(("maxCost".into(), c.to_string()));
    }
    for (name, q) in &f.min_resources {
        pairs.push((format!("min.{name}"), q.to_string()));
    }
    if let Some(g) = f.liqo {
        pairs.push(("liqo".into(), g.as_str().into()));
    }
    for (key, value) in &f.labels {
        pairs.push((format!("label.{key}"), value.clone()));
    }
    // Encoding plain string pairs cannot fail.
    serde_urlencoded::to_string(&pairs).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_defaults_to_delta() {
        let p = SubscribeParams::parse("").unwrap();
        assert_eq!(p.mode, Mode::Delta);
        assert_eq!(p.filter, OfferFilter::default());
        assert_eq!(p.filter_key, "");
        assert_eq!(
            SubscribeParams::parse("mode=snapshot").unwrap().mode,
            Mode::Snapshot
        );
    }

    #[test]
    fn filters_are_the_offers_filters() {
        let p = SubscribeParams::parse("type=gpu&mode=delta&min.memory=4Gi&maxCost=2.50").unwrap();
        assert_eq!(p.mode, Mode::Delta);
        assert_eq!(p.filter.offer_type.as_deref(), Some("gpu"));
        assert_eq!(p.filter.min_resources.len(), 1);
    }

    #[test]
    fn equivalent_filters_share_a_key() {
        let a = SubscribeParams::parse("maxCost=1.50&type=x&min.cpu=1000m").unwrap();
        let b = SubscribeParams::parse("min.cpu=1&type=x&maxCost=1.5").unwrap();
        assert_eq!(a.filter_key, b.filter_key);
        let c = SubscribeParams::parse("type=y").unwrap();
        assert_ne!(a.filter_key, c.filter_key);
    }

    #[test]
    fn bad_parameters_are_named() {
        for (q, field) in [
            ("mode=fast", "mode"),
            ("mode=delta&mode=delta", "mode"),
            ("colour=red", "colour"),
            ("min.memory=lots", "min.memory"),
            ("maxCost=-1", "maxCost"),
        ] {
            assert_eq!(SubscribeParams::parse(q).unwrap_err().field, field, "{q}");
        }
    }
}
