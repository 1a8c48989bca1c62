//! What the broker's own CustomResourceDefinitions share (the Purchase of
//! purchase-controller, the ServiceCatalog of service-controller, the
//! MarketAutoscaler of market-autoscaler): schema adjustments kube-derive
//! and schemars cannot say with attributes, the `metav1.Condition` their
//! statuses carry, and [`compare`], which tells whether the CRD shipped in
//! the chart is the one generated from its Rust type.
//!
//! Each CRD is generated from its Rust type and compared with the one
//! shipped in the chart: what changes here changes every shipped CRD, and
//! those tests say so. [`compare`] exists so that each controller's test
//! compares the same way, by meaning (fields, types, defaults,
//! validations, printer columns, names, versions) and not by the way the
//! YAML is written; it was once copied into each test, and the copies
//! drifted apart (one saw `minimum: 1` and `minimum: 1.0` as different
//! bounds, and the chart said `1.0` to please it).

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

/// Whether `deployed_yaml`, a CRD shipped in the chart (as rendered into
/// `deploy/`), means `generated`, the CRD generated from its Rust type.
/// `Err` lists the differences, one a line, each as
/// `JSON path: shipped != generated` (`absent` for a missing key), or says
/// why the two could not be compared.
///
/// Compared as parsed structures: fields, types, defaults, validations,
/// required lists, printer columns, subresources, scope, names and
/// versions. Left out, as the API server fills them in or ignores them:
/// the shipped CRD's labels and annotations (the chart's installation,
/// not the kind's meaning), descriptions, the implicit `apiVersion`,
/// `kind` and `metadata` properties of the root schema, the order of keys
/// and of `required` and `enum` lists, `listKind` and `singular` when they
/// are the defaults, and whether a whole number is written `1` or `1.0`.
pub fn compare(deployed_yaml: &str, generated: &CustomResourceDefinition) -> Result<(), String> {
    let deployed: Value = serde_yaml_ng::from_str(deployed_yaml)
        .map_err(|e| format!("the shipped CRD is not YAML: {e}"))?;
    let generated = serde_json::to_value(generated)
        .map_err(|e| format!("the generated CRD does not serialise: {e}"))?;
    let mut found = Vec::new();
    differences(
        &normalised(without_installation(deployed)),
        &normalised(generated),
        "",
        &mut found,
    );
    if found.is_empty() {
        Ok(())
    } else {
        Err(found.join("\n"))
    }
}

/// The shipped CRD without what the Helm chart adds for the installation
/// (its `part-of` label, `helm.sh/resource-policy: keep`): not the kind's
/// meaning, and not the type's to say.
fn without_installation(mut crd: Value) -> Value {
    if let Some(metadata) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("labels");
        metadata.remove("annotations");
    }
    crd
}

/// `crd` with what does not change its meaning taken out.
fn normalised(mut crd: Value) -> Value {
    strip(&mut crd);
    if let Some(names) = crd
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let defaults = [
            ("listKind", format!("{kind}List")),
            ("singular", kind.to_lowercase()),
        ];
        for (field, default) in defaults {
            if names.get(field).and_then(Value::as_str) == Some(default.as_str()) {
                names.remove(field);
            }
        }
    }
    if let Some(versions) = crd
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            if let Some(root) = version
                .pointer_mut("/schema/openAPIV3Schema/properties")
                .and_then(Value::as_object_mut)
            {
                for implicit in ["apiVersion", "kind", "metadata"] {
                    root.remove(implicit);
                }
            }
        }
    }
    crd
}

/// Descriptions out, `required` and `enum` lists sorted, whole numbers as
/// integers, everywhere in `value`.
fn strip(value: &mut Value) {
    match value {
        Value::Object(map) => {
            // A description is a string; a property named `description`
            // is a schema (an object), and compared.
            if map.get("description").is_some_and(Value::is_string) {
                map.remove("description");
            }
            for (key, inner) in map.iter_mut() {
                if key == "required" || key == "enum" {
                    if let Value::Array(items) = inner {
                        items.sort_by_key(|v| v.to_string());
                    }
                }
                strip(inner);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip),
        // A schema's number is a float64 to the API server (JSONSchemaProps'
        // `maximum`, `minimum`): `10000` and `10000.0` are one bound. The
        // generated CRD says `10000.0` (an `f64` in k8s-openapi); the shipped
        // file says `10000`, as the API server serves it back.
        Value::Number(n) => {
            if let Some(whole) = n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
            {
                *value = Value::from(whole);
            }
        }
        _ => {}
    }
}

/// The paths at which `a` and `b` differ, with both values.
fn differences(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let here = format!("{path}/{key}");
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => differences(p, q, &here, out),
                    (p, q) => out.push(format!("{here}: {} != {}", shown(p), shown(q))),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(p, q, &format!("{path}/{i}"), out);
            }
        }
        (p, q) if p != q => out.push(format!("{path}: {p} != {q}")),
        _ => {}
    }
}

fn shown(value: Option<&Value>) -> String {
    value.map_or_else(|| "absent".to_string(), Value::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A shipped CRD that means [`generated`] in other words: keys in
    /// another order, other descriptions, the chart's label and annotation,
    /// `required` and `enum` in another order, the default `listKind` and
    /// `singular`, the implicit root properties, and `minimum: 1` where the
    /// generated one says `1.0`.
    const DEPLOYED: &str = r#"
# Rendered from a chart.
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  labels:
    app.kubernetes.io/part-of: liqo-broker
  annotations:
    helm.sh/resource-policy: keep
  name: widgets.example.io
spec:
  scope: Namespaced
  group: example.io
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
    shortNames: [wd]
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
      additionalPrinterColumns:
        - jsonPath: .status.phase
          name: Phase
          type: string
      schema:
        openAPIV3Schema:
          description: A widget, as the chart explains it.
          type: object
          required: [spec]
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              required: [url, size]
              properties:
                url:
                  type: string
                  pattern: "^https?://"
                size:
                  description: How big, in the chart's words.
                  minimum: 1
                  format: uint64
                  type: integer
                policy:
                  type: string
                  enum: [Drop, Keep]
                  default: Keep
                description:
                  type: string
            status:
              type: object
              properties:
                phase: {type: string}
"#;

    fn generated() -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.io"},
            "spec": {
                "group": "example.io",
                "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1",
                    "served": true,
                    "storage": true,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}
                    ],
                    "schema": {"openAPIV3Schema": {
                        "description": "A widget.",
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size", "url"],
                                "properties": {
                                    "size": {
                                        "description": "How big.",
                                        "type": "integer",
                                        "format": "uint64",
                                        "minimum": 1.0
                                    },
                                    "url": {"type": "string", "pattern": "^https?://"},
                                    "policy": {
                                        "type": "string",
                                        "enum": ["Keep", "Drop"],
                                        "default": "Keep"
                                    },
                                    "description": {"type": "string"}
                                }
                            },
                            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
                        }
                    }}
                }]
            }
        }))
        .unwrap()
    }

    const SPEC: &str = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties";

    fn deployed() -> Value {
        serde_yaml_ng::from_str(DEPLOYED).unwrap()
    }

    /// The differences [`compare`] finds between `deployed`, shipped as
    /// YAML, and [`generated`].
    fn found(deployed: &Value) -> Vec<String> {
        match compare(&serde_yaml_ng::to_string(deployed).unwrap(), &generated()) {
            Ok(()) => Vec::new(),
            Err(found) => found.lines().map(str::to_string).collect(),
        }
    }

    #[test]
    fn the_same_crd_in_other_words_is_the_same() {
        assert_eq!(compare(DEPLOYED, &generated()), Ok(()));
    }

    #[test]
    fn a_whole_number_is_one_value_written_either_way() {
        // The premise: the generated bound is a float, the shipped one not.
        let generated = serde_json::to_value(generated()).unwrap();
        let minimum = format!("{SPEC}/size/minimum");
        assert_eq!(generated.pointer(&minimum).unwrap().to_string(), "1.0");
        assert_eq!(deployed().pointer(&minimum).unwrap().to_string(), "1");
        assert_eq!(found(&deployed()), Vec::<String>::new());

        // Another number is still another bound.
        for other in [json!(2), json!(1.5)] {
            let mut bound = deployed();
            *bound.pointer_mut(&minimum).unwrap() = other.clone();
            assert_eq!(found(&bound), [format!("{minimum}: {other} != 1")]);
        }
    }

    #[test]
    fn key_order_is_not_a_difference() {
        // The premise: the fixture writes keys in another order than the
        // generated CRD serialises them (`group` before `scope`).
        let written = serde_yaml_ng::to_string(&generated()).unwrap();
        assert!(written.find("group:") < written.find("scope:"));
        assert!(DEPLOYED.find("group:") > DEPLOYED.find("scope:"));
        assert_eq!(compare(DEPLOYED, &generated()), Ok(()));
        assert_eq!(compare(&written, &generated()), Ok(()));
    }

    #[test]
    fn a_changed_type_is_reported_at_its_path() {
        let mut typed = deployed();
        *typed.pointer_mut(&format!("{SPEC}/size/type")).unwrap() = "string".into();
        assert_eq!(
            found(&typed),
            [format!(r#"{SPEC}/size/type: "string" != "integer""#)]
        );
    }

    #[test]
    fn a_missing_or_extra_field_is_reported_at_its_path() {
        let mut missing = deployed();
        let properties = missing
            .pointer_mut(SPEC)
            .and_then(Value::as_object_mut)
            .unwrap();
        properties.remove("policy");
        assert_eq!(
            found(&missing),
            [format!(
                r#"{SPEC}/policy: absent != {{"default":"Keep","enum":["Drop","Keep"],"type":"string"}}"#
            )]
        );

        let mut extra = deployed();
        let size = format!("{SPEC}/size");
        let size = extra
            .pointer_mut(&size)
            .and_then(Value::as_object_mut)
            .unwrap();
        size.insert("maximum".to_string(), json!(10));
        assert_eq!(
            found(&extra),
            [format!("{SPEC}/size/maximum: 10 != absent")]
        );
    }

    #[test]
    fn a_changed_validation_default_or_column_is_reported() {
        let mut pattern = deployed();
        *pattern.pointer_mut(&format!("{SPEC}/url/pattern")).unwrap() = "^https://".into();
        assert_eq!(found(&pattern).len(), 1);

        let mut column = deployed();
        column["spec"]["versions"][0]["additionalPrinterColumns"][0]["jsonPath"] =
            ".status.other".into();
        assert_eq!(found(&column).len(), 1);

        let mut default = deployed();
        default
            .pointer_mut(&format!("{SPEC}/policy"))
            .and_then(Value::as_object_mut)
            .unwrap()
            .remove("default");
        assert_eq!(found(&default).len(), 1);

        let mut scope = deployed();
        scope["spec"]["scope"] = "Cluster".into();
        assert_eq!(found(&scope), [r#"/spec/scope: "Cluster" != "Namespaced""#]);
    }

    #[test]
    fn descriptions_are_not_compared_but_a_property_named_description_is() {
        let mut described = deployed();
        *described
            .pointer_mut(&format!("{SPEC}/size/description"))
            .unwrap() = "another".into();
        assert_eq!(found(&described), Vec::<String>::new());

        let mut property = deployed();
        *property
            .pointer_mut(&format!("{SPEC}/description/type"))
            .unwrap() = "integer".into();
        assert_eq!(
            found(&property),
            [format!(r#"{SPEC}/description/type: "integer" != "string""#)]
        );
    }

    #[test]
    fn the_order_of_required_and_enum_is_not_compared_but_their_members_are() {
        let spec = "/spec/versions/0/schema/openAPIV3Schema/properties/spec";
        let mut required = deployed();
        *required.pointer_mut(&format!("{spec}/required")).unwrap() = json!(["url"]);
        assert_eq!(
            found(&required),
            [format!(r#"{spec}/required: ["url"] != ["size","url"]"#)]
        );

        let mut members = deployed();
        *members.pointer_mut(&format!("{SPEC}/policy/enum")).unwrap() =
            json!(["Lose", "Keep", "Drop"]);
        assert_eq!(
            found(&members),
            [format!(
                r#"{SPEC}/policy/enum: ["Drop","Keep","Lose"] != ["Drop","Keep"]"#
            )]
        );
    }

    #[test]
    fn only_default_names_are_left_out() {
        let mut singular = deployed();
        singular["spec"]["names"]["singular"] = "gadget".into();
        assert_eq!(
            found(&singular),
            [r#"/spec/names/singular: "gadget" != absent"#]
        );
    }

    #[test]
    fn what_is_not_yaml_is_an_error() {
        let error = compare("spec: [", &generated()).unwrap_err();
        assert!(error.starts_with("the shipped CRD is not YAML"), "{error}");
    }
}
