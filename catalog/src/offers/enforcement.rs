//! The offers' `enforcement` field: the Liqo enforcement level the owning
//! provider last reported (`PUT /provider/enforcement`), stamped by the
//! server with its generations ([`super::liqo`]); and the
//! `enforcement=off|none|soft|hard|unknown` filter's rule ([`matches`]),
//! which the embedded store runs in memory and the MongoDB store as a
//! query on the same field.

use super::Offer;
use crate::http::FieldError;
use crate::providers::EnforcementLevel;

/// Parse the `enforcement` filter's value.
pub fn parse_filter(key: &str, value: &str) -> Result<EnforcementLevel, FieldError> {
    EnforcementLevel::parse(value)
        .ok_or_else(|| FieldError::new(key, "must be off, none, soft, hard or unknown"))
}

/// Whether `offer` passes `enforcement=` (`None`: no such filter). An
/// offer whose owner never reported a level matches no level.
pub fn matches(wanted: Option<EnforcementLevel>, offer: &Offer) -> bool {
    wanted.is_none_or(|level| offer.enforcement == Some(level))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offers::{OfferFilter, OfferSpec, ProviderRef};

    #[test]
    fn the_filter_wants_the_level_stamped() {
        assert_eq!(
            parse_filter("enforcement", "hard").unwrap(),
            EnforcementLevel::Hard
        );
        assert_eq!(
            parse_filter("enforcement", "on").unwrap_err().field,
            "enforcement"
        );
        let spec = OfferSpec::from_json(
            br#"{"name":"x","type":"t","plans":{"p":{"name":"p","cost":"1","resources":{}}}}"#,
        )
        .unwrap();
        let now = crate::store::now();
        let offer = |enforcement| {
            spec.clone()
                .into_draft(
                    "a".into(),
                    ProviderRef {
                        cluster_id: "c".into(),
                        cluster_name: "n".into(),
                        liqo: Vec::new(),
                        enforcement,
                    },
                )
                .into_offer(now, now, 1)
        };
        let hard = OfferFilter::from_pairs([("enforcement", "hard")]).unwrap();
        assert!(hard.matches(&offer(Some(EnforcementLevel::Hard))));
        assert!(!hard.matches(&offer(Some(EnforcementLevel::Soft))));
        assert!(!hard.matches(&offer(None)));
        assert!(OfferFilter::default().matches(&offer(None)));
        // Read back as it is stamped.
        let json = serde_json::to_value(offer(Some(EnforcementLevel::Off))).unwrap();
        assert_eq!(json["enforcement"], "off");
        let json = serde_json::to_value(offer(None)).unwrap();
        assert!(json.get("enforcement").is_none(), "{json}");
    }
}
