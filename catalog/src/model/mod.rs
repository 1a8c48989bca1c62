//! The catalog's data model: offers and their plans, exact costs, provider
//! accounts, and the field-naming validation error every 400 carries.

mod cost;
mod offer;
mod provider;

pub use cost::{Cost, CostError, COST_SCALE};
pub use offer::{
    validate_id, Offer, OfferDraft, OfferInput, OfferSpec, Plan, PlanInput, ProviderRef,
    MAX_ID_LEN, MAX_PLANS, MAX_RESOURCES,
};
pub use provider::{ProviderAccount, ProviderInfo};

/// A bad request value, naming the field (`plans.basic.resources.memory`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An optional whole JSON number that fits `T`, written `2` or `2.0`: JSON
/// has one number type, and JSON Schema's `integer` admits both spellings
/// (generated clients may send either). For `#[serde(deserialize_with)]`.
pub fn optional_whole<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    use serde::de::Error;
    use serde::Deserialize;
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let whole = n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 18_446_744_073_709_551_616.0)
            .map(|f| f as u64)
    });
    whole
        .and_then(|w| T::try_from(w).ok())
        .map(Some)
        .ok_or_else(|| {
            D::Error::custom(format!(
                "invalid value: {n}, expected a whole number in range"
            ))
        })
}

/// The current time at the millisecond precision every store keeps, so an
/// offer reads back exactly as its write returned it.
pub fn now() -> chrono::DateTime<chrono::Utc> {
    let t = chrono::Utc::now();
    chrono::DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}

/// Deserialize a JSON request body; the error names the field at fault
/// (`plans.basic.cost`), or `body` when the JSON itself is malformed.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, FieldError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let path = e.path().to_string();
        let field = match path.as_str() {
            "" | "." | "?" => "body".to_string(),
            _ => path,
        };
        FieldError::new(field, e.into_inner().to_string())
    })?;
    de.end()
        .map_err(|e| FieldError::new("body", e.to_string()))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize, Debug)]
    struct Holder {
        #[serde(default, deserialize_with = "super::optional_whole")]
        n: Option<u32>,
    }

    fn parse(json: &str) -> Result<Option<u32>, serde_json::Error> {
        serde_json::from_str::<Holder>(json).map(|h| h.n)
    }

    #[test]
    fn whole_numbers_in_either_spelling() {
        assert_eq!(parse(r#"{"n": 5}"#).unwrap(), Some(5));
        assert_eq!(parse(r#"{"n": 5.0}"#).unwrap(), Some(5));
        assert_eq!(parse(r#"{"n": null}"#).unwrap(), None);
        assert_eq!(parse("{}").unwrap(), None);
        for bad in [
            r#"{"n": 5.5}"#,
            r#"{"n": -1}"#,
            r#"{"n": -1.0}"#,
            r#"{"n": 4294967296}"#,
            r#"{"n": 1e300}"#,
            r#"{"n": "5"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
