//! `GET /offers` filters and their reference semantics.
//!
//! Plan-level conditions (`maxCost`, `min.<resource>`) must all hold for the
//! *same* plan: `maxCost=2&min.memory=4Gi` finds offers with a plan of at
//! least 4Gi memory costing at most 2. Quantities compare as Kubernetes
//! quantities (`4Gi` > `4G`); a plan without the resource does not qualify.
//! `label.<key>=<value>` conditions are on the offer: it carries every one of
//! those provider labels with exactly that value. `kind=` is on the offer
//! (`capacity` or `service`); `hosting=` is a plan-level condition (some
//! service plan with that hosting policy, meeting the other plan conditions).

use std::collections::BTreeMap;

use quantity::Quantity;

use super::{Cost, HostingPolicy, Offer, OfferKind, Plan};
use crate::http::FieldError;

/// Longest filter value accepted (type, provider).
const MAX_VALUE_LEN: usize = 256;

/// A parsed `GET /offers` query. The default matches every offer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OfferFilter {
    /// `type=`: exact offer type.
    pub offer_type: Option<String>,
    /// `provider=`: the owner's cluster ID or cluster name, exactly.
    pub provider: Option<String>,
    /// `maxCost=`: some plan costs at most this.
    pub max_cost: Option<Cost>,
    /// `min.<resource>=`: some plan provides at least this much of each.
    pub min_resources: BTreeMap<String, Quantity>,
    /// `liqo=`: the owner peers with this Liqo generation.
    pub liqo: Option<crate::providers::LiqoGeneration>,
    /// `enforcement=`: the owner last reported this enforcement level.
    pub enforcement: Option<crate::providers::EnforcementLevel>,
    /// `isolation=`: the owner last reported this isolation level.
    pub isolation: Option<crate::providers::IsolationLevel>,
    /// `label.<key>=`: the offer carries each of these labels with exactly
    /// this value.
    pub labels: super::Labels,
    /// `kind=`: what the offer sells.
    pub kind: Option<OfferKind>,
    /// `hosting=`: some plan has this hosting policy.
    pub hosting: Option<HostingPolicy>,
}

impl OfferFilter {
    /// Parse query pairs (already percent-decoded). Unknown and repeated
    /// parameters are refused, naming them.
    pub fn from_pairs<I, K, V>(pairs: I) -> Result<Self, FieldError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut f = OfferFilter::default();
        let mut seen = std::collections::BTreeSet::new();
        for (k, v) in pairs {
            let (k, v) = (k.as_ref(), v.as_ref());
            if !seen.insert(k.to_string()) {
                return Err(FieldError::new(k, "given more than once"));
            }
            if v.len() > MAX_VALUE_LEN {
                return Err(FieldError::new(
                    k,
                    format!("must be at most {MAX_VALUE_LEN} bytes"),
                ));
            }
            match k {
                "type" => f.offer_type = Some(v.to_string()),
                "kind" => {
                    f.kind = Some(OfferKind::parse(v).ok_or_else(|| {
                        FieldError::new(k, format!("`{v}`: use capacity or service"))
                    })?)
                }
                "hosting" => {
                    f.hosting = Some(HostingPolicy::parse(v).ok_or_else(|| {
                        FieldError::new(k, format!("`{v}`: use Local, Remote or LocalAndRemote"))
                    })?)
                }
                "provider" => f.provider = Some(v.to_string()),
                "liqo" => f.liqo = Some(super::liqo::parse_filter(k, v)?),
                "enforcement" => f.enforcement = Some(super::self_check::parse_filter(k, v)?),
                "isolation" => f.isolation = Some(super::self_check::parse_filter(k, v)?),
                "maxCost" => {
                    f.max_cost = Some(
                        v.parse()
                            .map_err(|e: super::CostError| FieldError::new(k, e.to_string()))?,
                    )
                }
                _ if k.starts_with("label.") => {
                    let key = &k["label.".len()..];
                    super::labels::check_key(key)
                        .and_then(|()| super::labels::check_value(v))
                        .map_err(|m| FieldError::new(k, m))?;
                    f.labels.insert(key.to_string(), v.to_string());
                }
                _ => match k.strip_prefix("min.") {
                    Some(resource) if !resource.is_empty() => {
                        let q: Quantity = v
                            .parse()
                            .map_err(|e: quantity::ParseError| FieldError::new(k, e.to_string()))?;
                        f.min_resources.insert(resource.to_string(), q);
                    }
                    _ => {
                        return Err(FieldError::new(
                            k,
                            "unknown filter; use type, kind, provider, maxCost, min.<resource>, hosting, liqo, enforcement, isolation or label.<key>",
                        ))
                    }
                },
            }
        }
        Ok(f)
    }

    /// Whether the filter constrains plans at all.
    pub fn has_plan_conditions(&self) -> bool {
        self.max_cost.is_some() || !self.min_resources.is_empty() || self.hosting.is_some()
    }

    /// The reference semantics every store must reproduce.
    pub fn matches(&self, offer: &Offer) -> bool {
        if !super::liqo::matches(self.liqo, offer) {
            return false;
        }
        if !super::self_check::matches(self.enforcement, offer.enforcement)
            || !super::self_check::matches(self.isolation, offer.isolation)
        {
            return false;
        }
        if self.kind.is_some_and(|k| k != offer.kind) {
            return false;
        }
        if self
            .offer_type
            .as_ref()
            .is_some_and(|t| *t != offer.offer_type)
        {
            return false;
        }
        if self
            .provider
            .as_ref()
            .is_some_and(|p| *p != offer.cluster_id && *p != offer.cluster_name)
        {
            return false;
        }
        if !self
            .labels
            .iter()
            .all(|(k, v)| offer.labels.get(k) == Some(v))
        {
            return false;
        }
        !self.has_plan_conditions() || offer.plans.values().any(|p| self.plan_matches(p))
    }

    pub fn plan_matches(&self, plan: &Plan) -> bool {
        if self.max_cost.is_some_and(|max| plan.cost > max) {
            return false;
        }
        if self.hosting.is_some() && plan.hosting != self.hosting {
            return false;
        }
        self.min_resources
            .iter()
            .all(|(name, min)| plan.resources.0.get(name).is_some_and(|have| have >= min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offer `o` of cluster `c`, as `body` publishes it.
    fn offer_of(body: &str) -> Offer {
        let owner = super::super::ProviderRef {
            cluster_id: "c".into(),
            cluster_name: "c".into(),
            stamp: crate::providers::OwnerStamp::default(),
        };
        let now = crate::store::now();
        super::super::OfferSpec::from_json(body.as_bytes())
            .unwrap()
            .into_draft("o".into(), owner)
            .into_offer(now, now, 1)
    }

    #[test]
    fn parses_every_filter() {
        let f = OfferFilter::from_pairs([
            ("type", "storage"),
            ("provider", "c1"),
            ("maxCost", "2.5"),
            ("min.memory", "4Gi"),
            ("min.nvidia.com/gpu", "1"),
        ])
        .unwrap();
        assert_eq!(f.offer_type.as_deref(), Some("storage"));
        assert_eq!(f.max_cost.unwrap().to_string(), "2.5");
        assert_eq!(f.min_resources.len(), 2);
        assert!(f.min_resources.contains_key("nvidia.com/gpu"));
    }

    #[test]
    fn label_conditions_must_all_hold() {
        let f = OfferFilter::from_pairs([
            ("label.region", "eu-west"),
            ("label.topology.kubernetes.io/zone", ""),
        ])
        .unwrap();
        assert_eq!(f.labels.len(), 2);
        let body = r#"{"name":"x","type":"t","labels":{"region":"eu-west","topology.kubernetes.io/zone":"","x":"y"},
            "plans":{"a":{"name":"a","cost":1}}}"#;
        let offer = offer_of(body);
        assert!(f.matches(&offer));
        let other =
            OfferFilter::from_pairs([("label.region", "eu-west"), ("label.x", "z")]).unwrap();
        assert!(!other.matches(&offer));
        let missing = OfferFilter::from_pairs([("label.gpu", "")]).unwrap();
        assert!(!missing.matches(&offer));
        assert_eq!(
            OfferFilter::from_pairs([("label.bad key", "x")])
                .unwrap_err()
                .field,
            "label.bad key"
        );
        assert_eq!(
            OfferFilter::from_pairs([("label.region", "-x")])
                .unwrap_err()
                .field,
            "label.region"
        );
    }

    #[test]
    fn kind_is_on_the_offer_and_hosting_on_the_same_plan() {
        let body = r#"{"name":"x","type":"db","kind":"service","plans":{
            "cheap":{"name":"c","cost":1,"hosting":"Local"},
            "dear":{"name":"d","cost":5,"hosting":"Remote"}}}"#;
        let offer = offer_of(body);
        let f = |pairs: &[(&str, &str)]| OfferFilter::from_pairs(pairs.iter().copied()).unwrap();
        assert!(f(&[("kind", "service")]).matches(&offer));
        assert!(!f(&[("kind", "capacity")]).matches(&offer));
        assert!(f(&[("hosting", "Remote")]).matches(&offer));
        assert!(!f(&[("hosting", "LocalAndRemote")]).matches(&offer));
        assert!(f(&[("hosting", "Local"), ("maxCost", "2")]).matches(&offer));
        // Remote only on the plan costing 5.
        assert!(!f(&[("hosting", "Remote"), ("maxCost", "2")]).matches(&offer));
        for (k, v) in [("kind", "services"), ("hosting", "remote")] {
            assert_eq!(OfferFilter::from_pairs([(k, v)]).unwrap_err().field, k);
        }
    }

    #[test]
    fn names_the_bad_parameter() {
        assert_eq!(
            OfferFilter::from_pairs([("maxCost", "-1")])
                .unwrap_err()
                .field,
            "maxCost"
        );
        assert_eq!(
            OfferFilter::from_pairs([("min.memory", "lots")])
                .unwrap_err()
                .field,
            "min.memory"
        );
        assert_eq!(
            OfferFilter::from_pairs([("colour", "red")])
                .unwrap_err()
                .field,
            "colour"
        );
        assert_eq!(
            OfferFilter::from_pairs([("min.", "1")]).unwrap_err().field,
            "min."
        );
        assert_eq!(
            OfferFilter::from_pairs([("type", "a"), ("type", "b")])
                .unwrap_err()
                .field,
            "type"
        );
    }
}
