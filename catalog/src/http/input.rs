//! Request input every feature checks the same way: the field-naming
//! validation error every 400 carries, strict JSON parsing that names the
//! field at fault, and the one grammar of identifiers (offer ids, plan keys,
//! cluster IDs) that travel in URL paths.

/// Longest identifier (offer id, plan key, cluster ID) accepted.
pub const MAX_ID_LEN: usize = 128;

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
/// (`A-Z a-z 0-9 . _ ~ -`), so they travel in paths unescaped.
pub fn validate_id(field: &str, id: &str) -> Result<(), FieldError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("must be 1 to {MAX_ID_LEN} characters from A-Z a-z 0-9 . _ ~ -"),
        ))
    }
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
