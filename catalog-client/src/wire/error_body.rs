//! The body of every error answer. The catalog server answers with this
//! very type (`catalog/src/http/error.rs` re-exports it).

use serde::{Deserialize, Serialize};

// `{"error", "message", "field"?}`.
/// The JSON body of every error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// Stable machine-readable code (`bad_request`, `unauthorized`, ...).
    pub error: String,
    /// Human-readable explanation; for 400 it starts with the field path.
    pub message: String,
    /// The offending field or query parameter, for 400 answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}
