//! What every `/v2` request carries, checked the same way by every
//! handler: the query parameters, path ids, the body within its size limit
//! and its fields, and the digest that tells two requests apart.

use std::collections::HashMap;

use actix_web::{web, HttpRequest};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::OsbError;
use super::Osb;
use crate::http::{read_json_body, ApiError};

/// Longest OSB id accepted (instance, binding, service, plan).
pub const MAX_OSB_ID: usize = 255;
/// Query parameters of every instance and binding route.
pub struct Query(pub HashMap<String, String>);

impl Query {
    pub fn parse(req: &HttpRequest) -> Result<Self, OsbError> {
        serde_urlencoded::from_str(req.query_string())
            .map(Query)
            .map_err(|e| OsbError::bad_request(format!("malformed query string: {e}")))
    }

    pub fn accepts_incomplete(&self) -> Result<bool, OsbError> {
        match self.0.get("accepts_incomplete").map(String::as_str) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => Err(OsbError::bad_request(format!(
                "accepts_incomplete: must be true or false, not `{other}`"
            ))),
        }
    }

    /// A required, non-empty parameter.
    pub fn required(&self, name: &str) -> Result<&str, OsbError> {
        match self.0.get(name).map(String::as_str) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(OsbError::bad_request(format!(
                "{name}: query parameter is required"
            ))),
        }
    }
}

/// Check a path id: non-empty, at most [`MAX_OSB_ID`] printable bytes.
pub fn check_id(what: &str, id: &str) -> Result<(), OsbError> {
    if id.is_empty() || id.len() > MAX_OSB_ID || id.chars().any(char::is_control) {
        return Err(OsbError::bad_request(format!(
            "{what}: must be 1 to {MAX_OSB_ID} printable characters"
        )));
    }
    Ok(())
}

/// The request body within the size limit; a declared non-JSON type is a
/// 400, as the spec asks.
pub async fn read_body(
    state: &Osb,
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<web::Bytes, OsbError> {
    read_json_body(req, payload, state.max_body_bytes)
        .await
        .map_err(|e| match e {
            ApiError::UnsupportedMediaType(m) => OsbError::bad_request(m),
            other => other.into(),
        })
}

/// Parse an OSB body (unknown fields ignored, as the spec requires).
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, OsbError> {
    if body.is_empty() {
        return Err(OsbError::bad_request("body: a JSON object is required"));
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "body".to_string()
        } else {
            path
        };
        OsbError::bad_request(format!("{field}: {}", e.into_inner()))
    })
}

/// A required, non-empty body field.
pub fn required_field(name: &str, v: Option<String>) -> Result<String, OsbError> {
    match v {
        Some(s) if !s.is_empty() => {
            check_id(name, &s)?;
            Ok(s)
        }
        Some(_) => Err(OsbError::bad_request(format!("{name}: must not be empty"))),
        None => Err(OsbError::bad_request(format!("{name}: is required"))),
    }
}

/// `parameters`/`context` must be objects when present.
pub fn object_field(name: &str, v: &Option<Value>) -> Result<(), OsbError> {
    match v {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(OsbError::bad_request(format!("{name}: must be an object"))),
    }
}

/// SHA-256 over the attributes that make two requests identical (JSON
/// objects serialise with sorted keys, so equal values digest equally).
pub fn request_digest(v: &Value) -> String {
    let bytes = serde_json::to_vec(v).unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
