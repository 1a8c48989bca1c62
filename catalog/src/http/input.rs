//! Request input every feature checks the same way: the field-naming
//! validation error every 400 carries, strict JSON parsing that names the
//! field at fault, and the one grammar of identifiers (offer ids, plan keys,
//! cluster IDs) that travel in URL paths.

use catalog_client::wire::names;

/// Longest identifier (offer id, plan key, cluster ID) accepted; the rule
/// itself is catalog-client's, which clients check too.
pub use names::MAX_ID_LEN;

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

/// Offer ids and plan keys: 1 to 128 URL-safe characters
/// (`A-Z a-z 0-9 . _ ~ -`), so they travel in paths unescaped; but not `.`
/// or `..`, path segments that URLs normalise away (`/offer/..` is `/`),
/// so such an offer could never be read or deleted.
pub fn validate_id(field: &str, id: &str) -> Result<(), FieldError> {
    if id == "." || id == ".." {
        return Err(FieldError::new(
            field,
            format!(
                "must not be `{id}`, which URLs drop as a path segment; use 1 to {MAX_ID_LEN} \
                 characters from A-Z a-z 0-9 . _ ~ - with at least one that is not a dot"
            ),
        ));
    }
    if !names::is_id(id) {
        return Err(FieldError::new(
            field,
            format!("must be 1 to {MAX_ID_LEN} characters from A-Z a-z 0-9 . _ ~ -"),
        ));
    }
    Ok(())
}

/// Parse a JSON body the lenient way of the buying and administration
/// endpoints (trailing data is not checked); a bad one names the field, and
/// a missing field is named rather than reported as the whole body.
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, FieldError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        if path == "." || path.is_empty() {
            // serde names a missing field only in its message: name it.
            if let Some(name) = message
                .strip_prefix("missing field `")
                .and_then(|rest| rest.split('`').next())
            {
                return FieldError::new(name, "is required");
            }
            return FieldError::new("body", message);
        }
        FieldError::new(path, message)
    })
}

/// [`parse_body`] for bodies that must be a JSON object: serde would also
/// fill a struct from an array (`[null, null]`), which no schema allows.
pub fn parse_object<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, FieldError> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => parse_body(body),
        _ => Err(FieldError::new("body", "must be a JSON object")),
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
