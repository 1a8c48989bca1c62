//! The offers' `enforcement` and `isolation` fields: the levels the owning
//! provider's self-checks last reported (`PUT /provider/enforcement`, `PUT
//! /provider/isolation`), stamped by the server with its generations
//! ([`super::liqo`]); and the rule of their filters
//! (`enforcement=off|none|soft|hard|unknown`,
//! `isolation=enforced|unverified|failed|off`): [`parse_filter`] and
//! [`matches`], which the embedded store runs in memory and the MongoDB
//! store as a query on the same field.

use crate::http::FieldError;
use crate::providers::ReportedLevel;

/// Parse the value of filter `key`, one of `L`'s levels.
pub fn parse_filter<L: ReportedLevel>(key: &str, value: &str) -> Result<L, FieldError> {
    L::named(value).ok_or_else(|| FieldError::new(key, format!("must be {}", L::choices())))
}

/// Whether an offer stamped with `stamped` passes a filter wanting
/// `wanted` (`None`: no such filter). An offer whose owner never reported
/// a level matches no level.
pub fn matches<L: ReportedLevel>(wanted: Option<L>, stamped: Option<L>) -> bool {
    wanted.is_none_or(|level| stamped == Some(level))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offers::{OfferFilter, OfferSpec, ProviderRef};
    use crate::providers::{EnforcementLevel, IsolationLevel, OwnerStamp};

    #[test]
    fn the_filters_want_the_level_stamped() {
        assert_eq!(
            parse_filter::<EnforcementLevel>("enforcement", "hard").unwrap(),
            EnforcementLevel::Hard
        );
        let e = parse_filter::<EnforcementLevel>("enforcement", "on").unwrap_err();
        assert_eq!(e.field, "enforcement");
        assert_eq!(e.message, "must be off, none, soft, hard or unknown");
        assert_eq!(
            parse_filter::<IsolationLevel>("isolation", "unverified").unwrap(),
            IsolationLevel::Unverified
        );
        let e = parse_filter::<IsolationLevel>("isolation", "hard").unwrap_err();
        assert_eq!(e.field, "isolation");
        assert_eq!(e.message, "must be enforced, unverified, failed or off");

        let spec = OfferSpec::from_json(
            br#"{"name":"x","type":"t","plans":{"p":{"name":"p","cost":"1","resources":{}}}}"#,
        )
        .unwrap();
        let now = crate::store::now();
        let offer = |enforcement, isolation| {
            spec.clone()
                .into_draft(
                    "a".into(),
                    ProviderRef {
                        cluster_id: "c".into(),
                        cluster_name: "n".into(),
                        stamp: OwnerStamp {
                            liqo: Vec::new(),
                            enforcement,
                            isolation,
                        },
                    },
                )
                .into_offer(now, now, 1)
        };
        let hard = OfferFilter::from_pairs([("enforcement", "hard")]).unwrap();
        assert!(hard.matches(&offer(Some(EnforcementLevel::Hard), None)));
        assert!(!hard.matches(&offer(Some(EnforcementLevel::Soft), None)));
        assert!(!hard.matches(&offer(None, Some(IsolationLevel::Enforced))));
        let enforced = OfferFilter::from_pairs([("isolation", "enforced")]).unwrap();
        assert!(enforced.matches(&offer(None, Some(IsolationLevel::Enforced))));
        assert!(!enforced.matches(&offer(None, Some(IsolationLevel::Failed))));
        assert!(!enforced.matches(&offer(Some(EnforcementLevel::Hard), None)));
        let both =
            OfferFilter::from_pairs([("enforcement", "hard"), ("isolation", "enforced")]).unwrap();
        assert!(both.matches(&offer(
            Some(EnforcementLevel::Hard),
            Some(IsolationLevel::Enforced)
        )));
        assert!(!both.matches(&offer(
            Some(EnforcementLevel::Hard),
            Some(IsolationLevel::Unverified)
        )));
        assert!(OfferFilter::default().matches(&offer(None, None)));
        // Read back as they are stamped.
        let json = serde_json::to_value(offer(
            Some(EnforcementLevel::Off),
            Some(IsolationLevel::Failed),
        ))
        .unwrap();
        assert_eq!(json["enforcement"], "off");
        assert_eq!(json["isolation"], "failed");
        let json = serde_json::to_value(offer(None, None)).unwrap();
        assert!(json.get("enforcement").is_none(), "{json}");
        assert!(json.get("isolation").is_none(), "{json}");
    }
}
