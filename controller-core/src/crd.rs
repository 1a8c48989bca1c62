//! What the broker's own CustomResourceDefinitions share (the Purchase of
//! purchase-controller, the ServiceCatalog of service-controller): schema
//! adjustments kube-derive and schemars cannot say with attributes, and
//! the `metav1.Condition` their statuses carry.
//!
//! Each CRD is generated from its Rust type and compared, byte for byte,
//! with the one shipped in the chart: what changes here changes every
//! shipped CRD, and those tests say so.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The derived CRD of a kind, tidied: kube-derive accepts no `schemars`
/// attribute for the struct it generates, so its root schema keeps the
/// `title` and a `nullable` status that [`plain`] removes elsewhere.
pub fn tidy(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let roots = crd
        .spec
        .versions
        .iter_mut()
        .filter_map(|v| v.schema.as_mut()?.open_api_v3_schema.as_mut());
    for root in roots {
        root.title = None;
        if let Some(status) = root.properties.as_mut().and_then(|p| p.get_mut("status")) {
            status.nullable = None;
        }
    }
    crd
}

/// The serde defaults of the broker's types make the controllers lenient
/// when they read; they are not defaults the API server should write, and
/// an absent optional field is absent, never `null`. So the properties of
/// the object `schema` get neither `default` nor `nullable`, except a
/// `default` an attribute set explicitly (kept in `x-default` until here).
/// Use as `#[schemars(transform = controller_core::crd::plain)]`.
pub fn plain(schema: &mut Schema) {
    let Some(properties) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) else {
        return;
    };
    for property in properties.values_mut() {
        if let Some(property) = property.as_object_mut() {
            not_null(property);
            property.remove("default");
            if let Some(default) = property.remove("x-default") {
                property.insert("default".to_string(), default);
            }
        }
    }
}

/// An `Option`'s schema without its `null`: `["string", "null"]` is
/// `"string"`, `anyOf: [X, {type: null}]` is `X`.
fn not_null(property: &mut Map<String, Value>) {
    property.remove("nullable");
    if let Some(Value::Array(types)) = property.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            property.insert("type".to_string(), only);
        }
    }
    let Some(Value::Array(any_of)) = property.get("anyOf") else {
        return;
    };
    let mut kept = any_of
        .iter()
        .filter(|s| s.get("type").and_then(Value::as_str) != Some("null"));
    if let (Some(Value::Object(only)), None) = (kept.next().cloned(), kept.next()) {
        property.remove("anyOf");
        property.extend(only);
    }
}

/// A Kubernetes ResourceList, as core kinds declare one: quantities given
/// as integers or strings (in the quantity grammar). Without the `anyOf` of
/// their types, which kube's structural rewrite empties. Use as
/// `#[schemars(schema_with = "controller_core::crd::resource_list")]`.
pub fn resource_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": true
        }
    })
}

/// Any JSON object, kept as written (whoever reads it checks it). Use as
/// `#[schemars(schema_with = "controller_core::crd::free_object")]`.
pub fn free_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// One condition, as `metav1.Condition`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    extend("required" = ["type", "status", "reason", "message", "lastTransitionTime"]),
    transform = plain
)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    // `True`, `False` or `Unknown`.
    #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
    pub status: String,
    pub reason: String,
    pub message: String,
    #[serde(default)]
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: String,
    #[serde(default)]
    pub observed_generation: i64,
}
