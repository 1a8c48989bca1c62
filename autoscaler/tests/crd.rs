//! The MarketAutoscaler CRD in `deploy/` is the one generated from the Rust type
//! (`model::crd()`, kube's `MarketAutoscaler::crd()`), compared as parsed structures: fields, types,
//! defaults, validations, required lists, printer columns, subresources,
//! scope, names and versions. What the API server fills in or ignores is
//! left out of the comparison: descriptions, the implicit `apiVersion`,
//! `kind` and `metadata` properties, the order of `required` and `enum`
//! lists, and `listKind`/`singular` when they are the defaults.

use market_autoscaler::model;
use serde_json::Value;

const DEPLOYED: &str = include_str!("../../deploy/kubernetes/market-autoscaler/crd.yaml");

/// The shipped CRD without what the Helm chart adds for the installation
/// (its `part-of` label, `helm.sh/resource-policy: keep`): not the kind's
/// meaning, and not the type's to say.
fn deployed() -> Value {
    let mut crd: Value = serde_yaml::from_str(DEPLOYED).expect("crd.yaml is YAML");
    if let Some(metadata) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("labels");
        metadata.remove("annotations");
    }
    crd
}

fn generated() -> Value {
    serde_json::to_value(model::crd()).expect("the CRD serialises")
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

fn strip(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("description");
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
        // shipped file says `10000`, as the API server serves it back.
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
                    (p, q) => out.push(format!("{here}: {p:?} != {q:?}")),
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

fn compare(deployed: Value, generated: Value) -> Vec<String> {
    let mut out = Vec::new();
    differences(&normalised(deployed), &normalised(generated), "", &mut out);
    out
}

#[test]
fn the_deployed_crd_is_the_generated_one() {
    let found = compare(deployed(), generated());
    assert!(
        found.is_empty(),
        "deploy/kubernetes/market-autoscaler/crd.yaml (left) differs from model::crd() (right):\n{}\n\ngenerated:\n{}",
        found.join("\n"),
        serde_yaml::to_string(&model::crd()).unwrap_or_default()
    );
}

#[test]
fn the_comparison_sees_meaning_and_only_meaning() {
    let mut pattern = deployed();
    let catalog_url =
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/catalogURL";
    *pattern
        .pointer_mut(&format!("{catalog_url}/pattern"))
        .unwrap() = "^https://".into();
    assert_eq!(compare(pattern, generated()).len(), 1);

    let mut column = deployed();
    column["spec"]["versions"][0]["additionalPrinterColumns"][0]["jsonPath"] =
        ".status.phase".into();
    assert_eq!(compare(column, generated()).len(), 1);

    let mut default = deployed();
    let strategy = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/scaleDown/properties/policy";
    default
        .pointer_mut(strategy)
        .and_then(Value::as_object_mut)
        .unwrap()
        .remove("default");
    assert_eq!(compare(default, generated()).len(), 1);

    let mut described = deployed();
    *described
        .pointer_mut(&format!("{catalog_url}/description"))
        .unwrap() = "another".into();
    assert!(compare(described, generated()).is_empty());
}
