//! The request schemas every feature's OpenAPI annotations share: the
//! grammars the server enforces (ids, text, URLs, decimals, quantities) as
//! named JSON schemas. utoipa sees a placeholder type; the top-level
//! `openapi` module swaps in [`raw_schemas`]' JSON when it assembles the
//! document. Lengths are counted by the server in UTF-8 bytes; JSON Schema
//! counts characters, so `maxLength` is exact for ASCII only.

use std::borrow::Cow;

use serde_json::{json, Value};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

/// Offer ids, plan keys and cluster IDs (`validate_id`): URL-safe
/// characters, but not `.` or `..` (path segments URLs drop); the length
/// (1-128) is the schemas' `minLength`/`maxLength`.
pub const ID_PATTERN: &str = r"^(?:[A-Za-z0-9._~-]*[A-Za-z0-9_~-][A-Za-z0-9._~-]*|\.{3,})$";
/// Non-blank text without control characters (`char::is_control`, blank
/// as `str::trim` sees it).
pub const TEXT_PATTERN: &str = r"^[^\x00-\x1f\x7f-\x9f]*[^\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00-\x1f\x7f-\x9f]*$";
/// An `http://` or `https://` URL without control characters.
pub const URL_PATTERN: &str = r"^https?://[^\x00-\x1f\x7f-\x9f]*$";
/// A non-negative decimal below 9223372036 (`Cost` holds nano-units in an
/// i64) with at most 9 fraction digits (leading zeros and trailing fraction
/// zeros aside), as `Cost` parses it.
pub const DECIMAL_PATTERN: &str = r"^(\+?0*([0-9]{1,9}|[1-8][0-9]{9}|9[01][0-9]{8}|92[01][0-9]{7}|922[0-2][0-9]{6}|9223[0-2][0-9]{5}|92233[0-6][0-9]{4}|922337[01][0-9]{3}|92233720[0-2][0-9]|922337203[0-5])(\.[0-9]{1,9}0*)?|-0+(\.0+)?)$";
/// A Kubernetes quantity (`4Gi`, `500m`, `1e3`), the exponent kept to two
/// digits so that every value the pattern allows is in range.
pub const QUANTITY_PATTERN: &str =
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,2})?$";
/// A non-negative Kubernetes quantity.
pub const NON_NEGATIVE_QUANTITY_PATTERN: &str =
    r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,2})?$";
/// A Kubernetes label key: an optional DNS-1123 subdomain prefix of at most
/// 253 characters and `/`, then a 1-63 character name (`offers::labels`).
pub const LABEL_KEY_PATTERN: &str = r"^((?=[^/]{1,253}/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
/// A Kubernetes label value: empty or 1-63 characters.
pub const LABEL_VALUE_PATTERN: &str = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$";
/// OSB ids: 1-255 bytes without control characters.
pub const OSB_ID_PATTERN: &str = r"^[^\x00-\x1f\x7f-\x9f]+$";

/// Named schemas whose JSON is written out by hand (constrained strings and
/// open-ended objects that utoipa's model cannot hold). utoipa sees a
/// placeholder, which [`complete`] replaces with [`raw_schemas`]' JSON.
macro_rules! json_schemas {
    ($($(#[$doc:meta])* $name:ident => $json:expr;)*) => {
        $(
            $(#[$doc])*
            pub struct $name;

            impl PartialSchema for $name {
                fn schema() -> RefOr<Schema> {
                    RefOr::T(Schema::Object(Default::default()))
                }
            }

            impl ToSchema for $name {
                fn name() -> Cow<'static, str> {
                    Cow::Borrowed(stringify!($name))
                }
            }
        )*

        /// The JSON of the hand-written schemas, by name.
        pub fn raw_schemas() -> Vec<(&'static str, Value)> {
            vec![$((stringify!($name), $json)),*]
        }
    };
}

json_schemas! {
    /// An offer id, plan key or cluster ID.
    Id => json!({"type": "string", "minLength": 1, "maxLength": 128, "pattern": ID_PATTERN,
        "description": "1-128 characters from `A-Z a-z 0-9 . _ ~ -`"});
    /// A display name or subject.
    Name => json!({"type": "string", "minLength": 1, "maxLength": 256, "pattern": TEXT_PATTERN,
        "description": "1-256 bytes of text, not blank, without control characters"});
    /// A provider's peering secret.
    Secret => json!({"type": "string", "minLength": 1, "maxLength": 4096, "pattern": TEXT_PATTERN,
        "description": "1-4096 bytes of text, not blank, without control characters"});
    /// A provider's Liqo auth URL.
    HttpUrl => json!({"type": "string", "maxLength": 2048, "pattern": URL_PATTERN,
        "description": "An `http://` or `https://` URL of at most 2048 bytes, without control characters"});
    /// A provider's Liqo auth URL, or `""` for a provider running only Liqo v1.
    AuthUrl => json!({"type": "string", "maxLength": 2048, "pattern": r"^(https?://[^\x00-\x1f\x7f-\x9f]*)?$",
        "description": "An `http://` or `https://` URL of at most 2048 bytes without control characters, or `\"\"` (Liqo v1 only: no v0 peering)"});
    /// A non-negative decimal string.
    Decimal => json!({"type": "string", "pattern": DECIMAL_PATTERN, "maxLength": 256, "example": "1.5",
        "description": "A non-negative decimal below 9223372036 with at most 9 fraction digits"});
    /// A Kubernetes quantity.
    Quantity => json!({"type": "string", "pattern": QUANTITY_PATTERN, "maxLength": 256, "example": "4Gi",
        "description": "A Kubernetes quantity such as `4Gi`, `500m` or `2`"});
    /// The resources a plan provides, as clients write them.
    ResourcesInput => json!({"type": "object", "maxProperties": 64,
        "propertyNames": {"minLength": 1, "maxLength": 253, "pattern": r"^[^\x00-\x1f\x7f-\x9f]+$"},
        "additionalProperties": {"anyOf": [
            {"type": "string", "pattern": NON_NEGATIVE_QUANTITY_PATTERN},
            {"type": "integer", "minimum": 0, "maximum": 1_000_000_000_000_000_i64},
        ]},
        "example": {"cpu": "2", "memory": "4Gi"},
        "description": "Resource name (1-253 bytes, free-form: `cpu`, `memory`, `nvidia.com/gpu`) → non-negative Kubernetes quantity (a string, or a whole number); at most 64"});
    /// A plan's cost as clients write it.
    CostInput => json!({"anyOf": [
            {"type": "string", "pattern": DECIMAL_PATTERN},
            {"type": "integer", "minimum": 0, "maximum": 9_223_372_035_i64},
        ],
        "example": "1.0",
        "description": "A non-negative decimal string (below 9223372036, at most 9 fraction digits) or a whole number"});
    /// The `min.<resource>` filters.
    MinResources => json!({"type": "object",
        "propertyNames": {"pattern": r"^min\.[\s\S]+$"},
        "additionalProperties": {"type": "string", "pattern": QUANTITY_PATTERN, "maxLength": 256},
        "example": {"min.memory": "4Gi", "min.cpu": "2"},
        "description": "Query parameters `min.<resource>=<quantity>`: property names are the parameter names"});
    /// An offer's provider labels, as clients write them.
    LabelsInput => json!({"type": "object", "maxProperties": 64,
        "propertyNames": {"pattern": LABEL_KEY_PATTERN},
        "additionalProperties": {"type": "string", "pattern": LABEL_VALUE_PATTERN},
        "example": {"region": "eu-west-1", "compliance": "gdpr"},
        "description": "Kubernetes label key (optional DNS subdomain prefix and `/`, then 1-63 of `A-Z a-z 0-9 - _ .`, alphanumeric at both ends) → label value (empty, or 1-63 of the same); at most 64"});
    /// The `label.<key>` filters.
    LabelFilters => json!({"type": "object",
        "propertyNames": {"pattern": format!("^label\\.{}", &LABEL_KEY_PATTERN[1..])},
        "additionalProperties": {"type": "string", "pattern": LABEL_VALUE_PATTERN},
        "example": {"label.region": "eu-west-1"},
        "description": "Query parameters `label.<key>=<value>`: the offer carries label `<key>` with exactly this value; several must all hold. Property names are the parameter names"});
    /// Who buys (`boughtBy`): one line of plain text (`check_bought_by`).
    BoughtBy => json!({"type": "string", "minLength": 1, "maxLength": 128,
        "pattern": r"^[^\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+$",
        "example": "market-autoscaler/team-a/web",
        "description": "1-128 characters without control or bidirectional formatting characters, e.g. `market-autoscaler/<namespace>/<name>`"});
    /// An Open Service Broker id (instance, binding, service, plan).
    OsbId => json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": OSB_ID_PATTERN,
        "description": "1-255 bytes without control characters"});
    /// `PUT /contracts/{id}/state`: `reason` is required for `failed` (two
    /// shapes, since the rule joins two fields).
    StateReport => json!({
        "description": "Where the consumer side is with a contract. `reason` (required for `failed`) says why; `consumerClusterID` may be set once, if the purchase did not set it.",
        "example": {"state": "peered"},
        "anyOf": [
            {"type": "object", "additionalProperties": false, "required": ["state"],
             "properties": {
                "state": {"type": "string", "enum": ["pending", "peered", "granted", "ready"]},
                "reason": {"anyOf": [{"$ref": "#/components/schemas/Name"}, {"type": "null"}]},
                "consumerClusterID": {"anyOf": [{"$ref": "#/components/schemas/Id"}, {"type": "null"}]}}},
            {"type": "object", "additionalProperties": false, "required": ["state", "reason"],
             "properties": {
                "state": {"type": "string", "enum": ["failed"]},
                "reason": {"$ref": "#/components/schemas/Name"},
                "consumerClusterID": {"anyOf": [{"$ref": "#/components/schemas/Id"}, {"type": "null"}]}}},
        ]});
    /// `/subscribe` modes.
    FeedMode => json!({"type": "string", "enum": ["snapshot", "delta"]});
    /// `/healthz` and `/readyz`.
    Health => json!({"type": "object", "required": ["status"],
        "properties": {"status": {"type": "string"}, "store": {"type": "string"}}});
}
