//! Offers and plans: the JSON the thesis writes, its validation, and the
//! stored/returned form with the fields the server adds.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quantity::{Quantity, ResourceList};
use serde::Deserialize;

use super::labels::{self, Labels};
use super::stamps::Writer;
use super::unique_keys;
use super::Cost;
use crate::http::{validate_id, FieldError};
use crate::providers::OwnerStamp;

/// Most plans one offer may carry.
pub const MAX_PLANS: usize = 64;
/// Most resource entries one plan may carry.
pub const MAX_RESOURCES: usize = 64;
const MAX_NAME_LEN: usize = 256;
const MAX_DESCRIPTION_LEN: usize = 8 * 1024;
const MAX_RESOURCE_NAME_LEN: usize = 253;

// `Offer` and `Plan` are the wire types the clients read, declared once in
// `catalog-client` (with their schema), so a renamed field fails both builds.
pub use catalog_client::wire::offer::{HostingPolicy, Offer, OfferKind, Plan, PlanSchemas};

/// The owning provider of an offer, from the caller's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRef {
    pub cluster_id: String,
    pub cluster_name: String,
    /// What its offers carry of it: the generations it peers with, its
    /// reported enforcement and isolation levels.
    pub stamp: OwnerStamp,
}

/// A validated create/replace request, before the store adds its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferDraft {
    pub id: String,
    pub owner: ProviderRef,
    pub name: String,
    pub offer_type: String,
    pub kind: OfferKind,
    pub description: String,
    pub plans: BTreeMap<String, Plan>,
    pub labels: Labels,
    /// Who sends this write (stamped on the plans it changes).
    pub writer: Writer,
}

impl OfferDraft {
    /// The same draft, sent by `writer`.
    pub fn written_by(self, writer: Writer) -> Self {
        Self { writer, ..self }
    }

    /// The stored offer this draft becomes at `version`.
    pub fn into_offer(
        self,
        created_at: DateTime<Utc>,
        updated_at: DateTime<Utc>,
        version: u64,
    ) -> Offer {
        Offer {
            id: self.id,
            name: self.name,
            offer_type: self.offer_type,
            kind: self.kind,
            description: self.description,
            plans: self.plans,
            labels: self.labels,
            cluster_id: self.owner.cluster_id,
            cluster_name: self.owner.cluster_name,
            liqo: self.owner.stamp.liqo,
            enforcement: self.owner.stamp.enforcement,
            isolation: self.owner.stamp.isolation,
            // Never stored: the unit is the catalog's, stamped when served.
            pricing: None,
            created_at,
            updated_at,
            version,
        }
    }
}

/// The request body of `POST /offer/{id}`, exactly as clients write it.
///
/// Unknown fields are refused here and in plans; only resource names are
/// free-form. The read-only fields a client may echo back from a `GET` are
/// accepted: `id` and `clusterID` must then match, `version` makes the
/// write conditional (409 if the offer has moved on), the rest are ignored.
/// A service offer adds `kind: "service"` and, on each plan, `hosting`
/// (`Local`, `Remote`, `LocalAndRemote`) and OSB v2.17 `schemas` (see
/// docs/api.md, "Service offers"; the offer reads back with them).
/// (The echoed fields are left out of the schema: `id` and `clusterID` must
/// equal the path's id and the caller's cluster ID, which a schema cannot
/// say.)
// A key given twice is refused in every object of the body: serde refuses
// it among named fields, `unique_keys` in `plans`, `resources` and
// `labels` (said here, not in the doc comment, which is the schema's text).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(example = json!({
    "name": "Storage-optimized offer", "type": "storage", "description": "For all your storage needs.",
    "plans": {
        "basic": {"name": "plan-basic", "cost": "1.0", "resources": {"cpu": "1000m", "memory": "2G", "storage": "100G"}},
        "medium": {"planName": "plan-medium", "planID": "medium", "cost": "2.0", "resources": {"cpu": "2000m", "memory": "4G", "storage": "300G"}},
    },
}))]
pub struct OfferInput {
    #[schema(required = true, value_type = crate::http::schemas::Name)]
    pub name: Option<String>,
    #[serde(rename = "type")]
    #[schema(required = true, value_type = crate::http::schemas::Name)]
    pub offer_type: Option<String>,
    /// `capacity` (the default) or `service`: a service offer's plans each
    /// carry a `hosting` policy and may carry `schemas`.
    // Left out of the schema, as `hosting` and `schemas` below: which plan
    // may carry them depends on `kind`, which the derived schema cannot
    // say (docs/api.md "Service offers" documents them).
    #[serde(default)]
    #[schema(ignore)]
    pub kind: Option<OfferKind>,
    /// At most 8192 bytes; no control characters but line feeds and tabs,
    /// no bidirectional formatting characters (see `unsafe_in_description`).
    #[serde(default)]
    #[schema(
        max_length = 8192,
        pattern = "^[^\\u0000-\\u0008\\u000B-\\u001F\\u007F-\\u009F\\u061C\\u200E\\u200F\\u202A-\\u202E\\u2066-\\u2069]*$"
    )]
    pub description: Option<String>,
    /// Plan key (1-128 of `A-Z a-z 0-9 . _ ~ -`) → plan; 1 to 64 plans.
    #[serde(default, deserialize_with = "unique_keys::optional_map")]
    #[schema(required = true, value_type = BTreeMap<crate::http::schemas::Id, PlanInput>)]
    pub plans: Option<BTreeMap<String, PlanInput>>,
    /// Provider labels: Kubernetes label keys (optional DNS subdomain
    /// prefix and `/`, then 1-63 of `A-Z a-z 0-9 - _ .`) and values (0-63 of
    /// the same); at most 64. Filter with `label.<key>=<value>`.
    #[serde(default, deserialize_with = "unique_keys::optional_map")]
    #[schema(value_type = Option<crate::http::schemas::LabelsInput>)]
    pub labels: Option<Labels>,
    #[serde(default)]
    #[schema(ignore)]
    pub id: Option<String>,
    #[serde(default, rename = "clusterID")]
    #[schema(ignore)]
    pub cluster_id: Option<String>,
    #[serde(default)]
    #[schema(ignore)]
    pub cluster_name: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    #[schema(ignore)]
    pub created_at: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    #[schema(ignore)]
    pub updated_at: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    #[schema(ignore)]
    pub liqo: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    #[schema(ignore)]
    pub enforcement: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    #[schema(ignore)]
    pub isolation: Option<serde::de::IgnoredAny>,
    // The catalog's, not the provider's: an echoed `pricing` is ignored
    // like the other server-set fields.
    #[serde(default)]
    #[schema(ignore)]
    pub pricing: Option<serde::de::IgnoredAny>,
    /// If present, the write only succeeds while the stored offer still has
    /// this version.
    #[serde(default, deserialize_with = "crate::http::optional_whole")]
    pub version: Option<u64>,
}

/// One plan as clients write it: `name` or `planName` (both thesis
/// spellings), optional `planID`, `cost` as a decimal string or number,
/// `resources` as name → quantity (string or number). Exactly one of `name`
/// and `planName` is given (both are accepted when they are equal).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanInput {
    #[serde(default)]
    #[schema(value_type = crate::http::schemas::Name)]
    pub name: Option<String>,
    #[serde(default, rename = "planName")]
    #[schema(value_type = crate::http::schemas::Name)]
    pub plan_name: Option<String>,
    #[serde(default, rename = "planID")]
    #[schema(value_type = Option<crate::http::schemas::Id>)]
    pub plan_id: Option<String>,
    /// Kept as the raw JSON token, so a number is read digit for digit
    /// (`123456789.123456789` stays exact) instead of through a float.
    #[schema(required = true, value_type = crate::http::schemas::CostInput)]
    pub cost: Option<Box<serde_json::value::RawValue>>,
    #[serde(default, deserialize_with = "unique_keys::map")]
    #[schema(value_type = crate::http::schemas::ResourcesInput)]
    /// Raw tokens: a quantity sent as a JSON number is read from its own
    /// digits, as Kubernetes' `Quantity.UnmarshalJSON` does, never through
    /// an f64 (`0.100000000000000001` stays what it says).
    pub resources: BTreeMap<String, Box<serde_json::value::RawValue>>,
    /// Service plans only, and required there: `Local`, `Remote` or
    /// `LocalAndRemote`.
    #[serde(default)]
    #[schema(ignore)]
    pub hosting: Option<HostingPolicy>,
    /// Service plans only: the JSON Schemas of the plan's parameters, as
    /// OSB v2.17 `schemas` (each with `$schema`, self-contained, at most
    /// 64 kB); a schema that does not compile is refused, named.
    #[serde(default)]
    #[schema(ignore)]
    pub schemas: Option<PlanSchemas>,
    /// Server-set stamps a client may echo back from a `GET`; ignored.
    #[serde(default, rename = "updatedAt")]
    #[schema(ignore)]
    pub updated_at: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "updatedBy")]
    #[schema(ignore)]
    pub updated_by: Option<serde::de::IgnoredAny>,
}

/// A validated request body (see [`OfferInput`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OfferSpec {
    pub name: String,
    pub offer_type: String,
    pub kind: OfferKind,
    pub description: String,
    pub plans: BTreeMap<String, Plan>,
    pub labels: Labels,
    pub id: Option<String>,
    pub cluster_id: Option<String>,
    pub version: Option<u64>,
}

impl OfferSpec {
    /// Parse and validate a request body; the error names the bad field.
    pub fn from_json(body: &[u8]) -> Result<Self, FieldError> {
        let input: OfferInput = crate::http::parse_json(body)?;
        input.validate()
    }

    /// The draft to store for offer `id` owned by `owner`.
    pub fn into_draft(self, id: String, owner: ProviderRef) -> OfferDraft {
        OfferDraft {
            id,
            owner,
            name: self.name,
            offer_type: self.offer_type,
            kind: self.kind,
            description: self.description,
            plans: self.plans,
            labels: self.labels,
            writer: Writer::Provider,
        }
    }
}

impl OfferInput {
    pub fn validate(self) -> Result<OfferSpec, FieldError> {
        let name = required_text("name", self.name, MAX_NAME_LEN)?;
        let offer_type = required_text("type", self.offer_type, MAX_NAME_LEN)?;
        let description = self.description.unwrap_or_default();
        if description.len() > MAX_DESCRIPTION_LEN {
            return Err(FieldError::new(
                "description",
                format!("must be at most {MAX_DESCRIPTION_LEN} bytes"),
            ));
        }
        if let Some(c) = description.chars().find(|c| unsafe_in_description(*c)) {
            return Err(FieldError::new(
                "description",
                format!(
                    "must not contain the control character U+{:04X} (line breaks and tabs are fine)",
                    u32::from(c)
                ),
            ));
        }
        let plans_in = self
            .plans
            .ok_or_else(|| FieldError::new("plans", "is required"))?;
        if plans_in.is_empty() {
            return Err(FieldError::new("plans", "must hold at least one plan"));
        }
        if plans_in.len() > MAX_PLANS {
            return Err(FieldError::new(
                "plans",
                format!("at most {MAX_PLANS} plans are allowed"),
            ));
        }
        let kind = self.kind.unwrap_or_default();
        let mut plans = BTreeMap::new();
        for (key, plan) in plans_in {
            let field = format!("plans.{key}");
            validate_id(&field, &key)?;
            let plan = plan.validate(&field)?;
            super::service::check_plan(kind, &field, &plan)?;
            plans.insert(key, plan);
        }
        if let Some(id) = &self.id {
            validate_id("id", id)?;
        }
        let labels = self.labels.unwrap_or_default();
        labels::validate(&labels)?;
        Ok(OfferSpec {
            name,
            offer_type,
            kind,
            description,
            plans,
            labels,
            id: self.id,
            cluster_id: self.cluster_id,
            version: self.version,
        })
    }
}

impl PlanInput {
    fn validate(self, field: &str) -> Result<Plan, FieldError> {
        let name = match (self.name, self.plan_name) {
            (Some(a), Some(b)) if a != b => {
                return Err(FieldError::new(
                    format!("{field}.planName"),
                    "differs from name; give the plan's name once, as name or planName",
                ))
            }
            (Some(a), _) => required_text(&format!("{field}.name"), Some(a), MAX_NAME_LEN)?,
            (None, Some(b)) => required_text(&format!("{field}.planName"), Some(b), MAX_NAME_LEN)?,
            (None, None) => {
                return Err(FieldError::new(
                    format!("{field}.name"),
                    "is required (or planName)",
                ))
            }
        };
        if let Some(id) = &self.plan_id {
            validate_id(&format!("{field}.planID"), id)?;
        }
        let cost_field = format!("{field}.cost");
        let raw = self.cost.as_deref().map_or("null", |r| r.get());
        let cost = match scalar(&cost_field, raw)? {
            Scalar::Null => return Err(FieldError::new(cost_field, "is required")),
            Scalar::Text(text) => text.parse(),
            Scalar::Number(token) => Cost::from_json_number_text(token),
            Scalar::Other => {
                return Err(FieldError::new(
                    cost_field,
                    "must be a decimal string or a number",
                ))
            }
        }
        .map_err(|e| FieldError::new(cost_field.clone(), e.to_string()))?;
        if self.resources.len() > MAX_RESOURCES {
            return Err(FieldError::new(
                format!("{field}.resources"),
                format!("at most {MAX_RESOURCES} resources are allowed"),
            ));
        }
        let mut resources = ResourceList::new();
        for (rname, value) in self.resources {
            let rfield = format!("{field}.resources.{rname}");
            if rname.is_empty()
                || rname.len() > MAX_RESOURCE_NAME_LEN
                || rname.chars().any(char::is_control)
            {
                return Err(FieldError::new(
                    rfield,
                    format!(
                        "resource names must be 1 to {MAX_RESOURCE_NAME_LEN} printable characters"
                    ),
                ));
            }
            let text = match scalar(&rfield, value.get())? {
                Scalar::Text(text) => text,
                Scalar::Number(token) => token.to_string(),
                Scalar::Null | Scalar::Other => {
                    return Err(FieldError::new(
                        rfield,
                        "must be a quantity string such as \"4Gi\"",
                    ))
                }
            };
            let q: Quantity = text.parse().map_err(|e: quantity::ParseError| {
                FieldError::new(rfield.clone(), e.to_string())
            })?;
            if q.is_negative() {
                return Err(FieldError::new(rfield, "must not be negative"));
            }
            resources.0.insert(rname, q);
        }
        Ok(Plan {
            name,
            plan_id: self.plan_id,
            cost,
            resources,
            updated_at: None,
            updated_by: None,
            hosting: self.hosting,
            schemas: self.schemas,
        })
    }
}

/// A raw JSON value read as a string or a number token: the number's own
/// digits, never an f64 near them (costs and quantities mean what the
/// client wrote).
enum Scalar<'a> {
    Null,
    Text(String),
    Number(&'a str),
    Other,
}

fn scalar<'a>(field: &str, raw: &'a str) -> Result<Scalar<'a>, FieldError> {
    let raw = raw.trim();
    Ok(match raw.as_bytes().first() {
        Some(b'n') => Scalar::Null,
        Some(b'"') => Scalar::Text(
            serde_json::from_str(raw).map_err(|e| FieldError::new(field, e.to_string()))?,
        ),
        Some(b'-' | b'0'..=b'9') => Scalar::Number(raw),
        _ => Scalar::Other,
    })
}

/// Whether `c` may not appear in an offer's `description` (B-07, issue
/// 41 F6): text that reaches terminals (brokerctl's tables) and platforms'
/// UIs must not carry instructions to them. Refused: every control
/// character (`char::is_control`: C0, DEL, C1 — ESC starts the screen
/// clears, title changes and OSC 52 clipboard writes, `\r` rewrites a row)
/// but the line feed and the tab a multi-line description needs, and
/// Unicode's bidirectional formatting characters, which reorder how the
/// text around them displays (the "Trojan Source" trick: text that reads
/// as one thing and is another).
pub fn unsafe_in_description(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
}

/// Unicode's bidirectional formatting characters (marks, embeddings,
/// overrides, isolates), as `providers::admin` refuses them in subjects.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `offer` as it may be served: a description stored before the catalog
/// refused control characters in it has each replaced by U+FFFD, so no
/// reader (brokerctl, a platform) is handed them. Offers written since
/// never hold one, and come back unchanged.
pub fn served(mut offer: Offer) -> Offer {
    if let std::borrow::Cow::Owned(clean) = clean_description(&offer.description) {
        offer.description = clean;
    }
    offer
}

/// `description` with every character [`unsafe_in_description`] refuses
/// replaced by U+FFFD (see [`served`]).
pub fn clean_description(description: &str) -> std::borrow::Cow<'_, str> {
    if description.chars().any(unsafe_in_description) {
        description
            .chars()
            .map(|c| {
                if unsafe_in_description(c) {
                    '\u{FFFD}'
                } else {
                    c
                }
            })
            .collect::<String>()
            .into()
    } else {
        description.into()
    }
}

fn required_text(field: &str, value: Option<String>, max: usize) -> Result<String, FieldError> {
    let value = value.ok_or_else(|| FieldError::new(field, "is required"))?;
    if value.trim().is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(FieldError::new(
            field,
            format!("must be at most {max} bytes"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(FieldError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const THESIS: &str = r#"{ "name": "Storage-optimized offer", "type": "storage",
      "description": "For all your storage needs.",
      "plans": {
        "basic":  { "name": "plan-basic", "cost": "1.0",
                    "resources": { "cpu": "1000m", "memory": "2G", "storage": "100G" } },
        "medium": { "planName": "plan-medium", "planID": "medium", "cost": "2.0",
                    "resources": { "cpu": "2000m", "memory": "4G", "storage": "300G" } } } }"#;

    #[test]
    fn accepts_the_thesis_offer_with_both_plan_spellings() {
        let spec = OfferSpec::from_json(THESIS.as_bytes()).unwrap();
        assert_eq!(spec.name, "Storage-optimized offer");
        assert_eq!(spec.plans["basic"].name, "plan-basic");
        assert_eq!(spec.plans["medium"].name, "plan-medium");
        assert_eq!(spec.plans["medium"].plan_id.as_deref(), Some("medium"));
        assert_eq!(spec.plans["medium"].cost.to_string(), "2.0");
        assert_eq!(
            spec.plans["basic"].resources.0["cpu"],
            "1".parse::<Quantity>().unwrap()
        );
    }

    fn err(body: &str) -> FieldError {
        OfferSpec::from_json(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn errors_name_the_field() {
        let e = err(&THESIS.replace("\"2G\"", "\"2 G\""));
        assert_eq!(e.field, "plans.basic.resources.memory");
        assert!(e.message.contains("quantities must match"), "{}", e.message);

        assert_eq!(
            err(&THESIS.replace("\"1.0\"", "\"-1\"")).field,
            "plans.basic.cost"
        );
        assert_eq!(err(&THESIS.replace("\"type\"", "\"kind\"")).field, "kind");
        assert_eq!(
            err(&THESIS.replace("\"planID\"", "\"planId\"")).field,
            "plans.medium.planId"
        );
        assert_eq!(err(r#"{"name":"x","type":"t","plans":{}}"#).field, "plans");
        assert_eq!(
            err(r#"{"type":"t","plans":{"a":{"name":"a","cost":1}}}"#).field,
            "name"
        );
        assert_eq!(
            err(r#"{"name":"x","type":"t","plans":{"a":{"cost":1}}}"#).field,
            "plans.a.name"
        );
        assert_eq!(
            err(r#"{"name":"x","type":"t","plans":{"a":{"name":"a"}}}"#).field,
            "plans.a.cost"
        );
        assert_eq!(
            err(r#"{"name":"x","type":"t","plans":{"a b":{"name":"a","cost":1}}}"#).field,
            "plans.a b"
        );
        assert_eq!(err("{not json").field, "body");
        assert_eq!(err(&format!("{THESIS} {{}}")).field, "body");
        assert_eq!(err(r#"{"name":5}"#).field, "name");
    }

    #[test]
    fn resource_names_are_free_form() {
        let body = r#"{"name":"x","type":"gpu","plans":{"a":{"name":"a","cost":0.5,
            "resources":{"nvidia.com/gpu":"2","brokering.liqo.io/redis":1}}}}"#;
        let spec = OfferSpec::from_json(body.as_bytes()).unwrap();
        let res = &spec.plans["a"].resources.0;
        assert_eq!(res["nvidia.com/gpu"], "2".parse::<Quantity>().unwrap());
        assert_eq!(
            res["brokering.liqo.io/redis"],
            "1".parse::<Quantity>().unwrap()
        );
        assert_eq!(spec.plans["a"].cost.to_string(), "0.5");
    }

    #[test]
    fn number_costs_are_exact() {
        let body = |cost: &str| {
            format!(r#"{{"name":"x","type":"t","plans":{{"a":{{"name":"a","cost":{cost}}}}}}}"#)
        };
        for (cost, printed) in [
            ("123456789.123456789", "123456789.123456789"),
            ("\"123456789.123456789\"", "123456789.123456789"),
            ("0.1", "0.1"),
            ("7", "7.0"),
            ("25e-1", "2.5"),
        ] {
            let spec = OfferSpec::from_json(body(cost).as_bytes()).unwrap();
            assert_eq!(spec.plans["a"].cost.to_string(), printed, "{cost}");
        }
        assert_eq!(err(&body("null")).message, "is required");
        assert_eq!(err(&body("true")).field, "plans.a.cost");
        assert_eq!(err(&body("[1]")).field, "plans.a.cost");
        assert_eq!(err(&body("1.0000000001")).field, "plans.a.cost");
    }

    #[test]
    fn dot_segments_are_not_ids() {
        for bad in [".", ".."] {
            let e = validate_id("id", bad).unwrap_err();
            assert!(e.message.contains("A-Z a-z 0-9"), "{}", e.message);
        }
        for good in ["...", ".a", "a.", "v1.2"] {
            validate_id("id", good).unwrap();
        }
        let body = THESIS.replace("\"basic\":", "\"..\":");
        assert_eq!(err(&body).field, "plans...");
    }

    #[test]
    fn labels_are_kept_and_bad_keys_named() {
        let body = r#"{"name":"x","type":"t","labels":{"region":"eu-west","topology.kubernetes.io/zone":""},
            "plans":{"a":{"name":"a","cost":1}}}"#;
        let spec = OfferSpec::from_json(body.as_bytes()).unwrap();
        assert_eq!(spec.labels["region"], "eu-west");
        assert_eq!(spec.labels["topology.kubernetes.io/zone"], "");
        let bad = body.replace("\"region\"", "\"Bad/region\"");
        assert_eq!(err(&bad).field, "labels.Bad/region");
        assert_eq!(
            err(&body.replace("eu-west", "eu west")).field,
            "labels.region"
        );
        assert_eq!(
            err(&body.replace("\"eu-west\"", "1")).field,
            "labels.region"
        );
        let none = OfferSpec::from_json(THESIS.as_bytes()).unwrap();
        assert!(none.labels.is_empty());
    }

    #[test]
    fn keys_given_twice_are_refused_in_every_object() {
        let body = r#"{"name":"x","type":"t","labels":{"region":"eu"},
            "plans":{"a":{"name":"a","cost":1,"resources":{"cpu":"1"}}}}"#;
        OfferSpec::from_json(body.as_bytes()).unwrap();
        for (twice, field, key) in [
            (
                body.replace(r#""cpu":"1""#, r#""cpu":"1","cpu":"64""#),
                "plans.a.resources",
                "cpu",
            ),
            (
                body.replace(r#""region":"eu""#, r#""region":"eu","region":"us""#),
                "labels",
                "region",
            ),
            (
                body.replace(r#""plans":{"#, r#""plans":{"a":{"name":"b","cost":2},"#),
                "plans",
                "a",
            ),
            (
                body.replace(r#""name":"a","#, r#""name":"a","name":"b","#),
                "plans.a",
                "name",
            ),
            (
                body.replace(r#""type":"t","#, r#""type":"t","type":"u","#),
                "body",
                "type",
            ),
        ] {
            let e = err(&twice);
            assert_eq!(e.field, field, "{twice}");
            assert!(e.message.contains(&format!("`{key}`")), "{}", e.message);
        }
    }

    #[test]
    fn conflicting_plan_names_are_refused() {
        let body = r#"{"name":"x","type":"t","plans":{"a":{"name":"a","planName":"b","cost":1}}}"#;
        assert_eq!(err(body).field, "plans.a.planName");
        let same = r#"{"name":"x","type":"t","plans":{"a":{"name":"a","planName":"a","cost":1}}}"#;
        assert!(OfferSpec::from_json(same.as_bytes()).is_ok());
    }

    /// B-07 (issue 41, F6): a provider's description carrying terminal
    /// control sequences (screen clear, title change, OSC 52, `\r`), C1
    /// controls, DEL or bidi overrides is refused with a 400 naming
    /// `description`; line breaks and tabs stay allowed.
    #[test]
    fn descriptions_with_control_characters_are_refused_naming_the_field() {
        let with = |d: &str| {
            let body = serde_json::json!({
                "name": "ok", "type": "compute", "description": d,
                "plans": {"s": {"name": "s", "cost": "1", "resources": {"cpu": "1"}}},
            });
            OfferSpec::from_json(body.to_string().as_bytes())
        };
        for hostile in [
            "d\u{1b}[2J\u{1b}]0;pwned\u{7}",
            "d\u{1b}]52;c;cHduZWQ=\u{7}",
            "row\rrewritten",
            "c1 \u{9b}2J",
            "del \u{7f}",
            "nul \u{0}",
            "evil \u{202e}txt.exe",
            "isolate \u{2066}x\u{2069}",
        ] {
            let error = with(hostile).unwrap_err();
            assert_eq!(error.field, "description", "{hostile:?}");
            assert!(
                error.message.contains("control character U+"),
                "{hostile:?}: {}",
                error.message
            );
        }
        let spec = with("two lines\n\tindented").unwrap();
        assert_eq!(spec.description, "two lines\n\tindented");
    }

    /// B-07: an offer stored before the refusal is served with each such
    /// character replaced by U+FFFD; clean text is served unchanged.
    #[test]
    fn stored_descriptions_are_cleaned_when_served() {
        assert_eq!(
            clean_description("d\u{1b}[2J\r\u{202e}x\nok\t"),
            "d\u{fffd}[2J\u{fffd}\u{fffd}x\nok\t"
        );
        assert!(matches!(
            clean_description("plain\ntext"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
