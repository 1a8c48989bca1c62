//! Property tests for offer bodies (`POST /offer`, `PUT /offer/{id}`), the
//! one parser every offer write goes through ([`OfferSpec::from_json`]):
//! hostile input never panics and never passes what the API contract or
//! Kubernetes refuses; a well-formed body is accepted meaning exactly what
//! it says — costs to the last digit written, quantities as Kubernetes
//! reads them, whether sent as strings or as JSON numbers.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use catalog::offers::{Cost, OfferSpec};
use proptest::prelude::*;
use quantity::Quantity;
use serde_json::{json, Value};

/// Ids and plan keys the contract allows (1–128 of `A-Z a-z 0-9 . _ ~ -`,
/// not `.` or `..`).
fn good_id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._~-]{1,24}".prop_filter("dot segments", |s| s != "." && s != "..")
}

/// Ids the contract refuses, each for a different reason.
fn bad_id() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(".".to_string()),
        Just("..".to_string()),
        "[a-z]{0,4}[/ ?#%:@!$&'()*+,;=\"<>\\\\^`{|}é\u{0}][a-z]{0,4}",
        "[a-z]{129,140}",
    ]
}

/// A cost as a plain decimal: (text, nano-units).
fn cost_decimal() -> impl Strategy<Value = (String, i64)> {
    (0i64..9_000_000_000, 0i64..1_000_000_000, 0usize..=9).prop_map(|(whole, nanos, digits)| {
        // Keep `digits` fraction digits of `nanos`.
        let scale = 10i64.pow(9 - digits as u32);
        let nanos = nanos / scale * scale;
        let text = if digits == 0 {
            whole.to_string()
        } else {
            let frac = format!("{:09}", nanos);
            format!("{whole}.{}", &frac[..digits])
        };
        (text, whole * 1_000_000_000 + nanos)
    })
}

/// A quantity Kubernetes accepts, as text: a decimal number with any of
/// its suffixes (SI, binary, exponent).
fn good_quantity() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        "[0-9]{1,6}",
        "[0-9]{1,5}\\.[0-9]{1,4}",
        "\\.[0-9]{1,3}",
        "[0-9]{1,3}\\.",
        "\\+[0-9]{1,4}",
    ];
    let suffix = prop_oneof![
        Just(""),
        Just("m"),
        Just("k"),
        Just("M"),
        Just("G"),
        Just("T"),
        Just("P"),
        Just("E"),
        Just("Ki"),
        Just("Mi"),
        Just("Gi"),
        Just("Ti"),
        Just("Pi"),
        Just("Ei"),
        Just("n"),
        Just("u"),
        Just("e3"),
        Just("E-2"),
        Just("e+1"),
        Just("e0"),
    ];
    (number, suffix).prop_map(|(n, s)| format!("{n}{s}"))
}

/// Quantities Kubernetes refuses (or that are negative, which no plan may
/// hold).
fn bad_quantity() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("-1".to_string()),
        Just("-0.5Gi".to_string()),
        Just("1.5.5".to_string()),
        Just("1Kb".to_string()),
        Just("1 Gi".to_string()),
        Just("Gi".to_string()),
        Just("1e".to_string()),
        Just("0x10".to_string()),
        Just("1ki".to_string()),
        Just("١".to_string()),
        "[0-9]{1,3}[a-zA-Z]{3,5}",
    ]
}

/// A well-formed plan: its JSON, and what the parser must make of it.
#[derive(Debug, Clone)]
struct PlanCase {
    json: Value,
    cost_nanos: i64,
    resources: BTreeMap<String, String>,
}

fn resource_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("cpu".to_string()),
        Just("memory".to_string()),
        Just("pods".to_string()),
        Just("ephemeral-storage".to_string()),
        Just("nvidia.com/gpu".to_string()),
        "[a-z][a-z0-9.-]{0,20}(/[a-z0-9-]{1,10})?",
    ]
}

fn plan_case() -> impl Strategy<Value = PlanCase> {
    (
        "[A-Za-z][A-Za-z0-9 ]{0,30}",
        cost_decimal(),
        any::<bool>(),
        prop::collection::btree_map(resource_name(), good_quantity(), 0..6),
        any::<bool>(),
    )
        .prop_map(
            |(name, (cost_text, cost_nanos), cost_as_number, resources, name_field)| {
                let mut plan = serde_json::Map::new();
                plan.insert(
                    if name_field { "name" } else { "planName" }.to_string(),
                    Value::String(name),
                );
                // A JSON number token, spelt exactly as the decimal: the
                // parser must read these digits, not a float near them.
                let cost = if cost_as_number {
                    Value::String(format!("{RAW}{cost_text}"))
                } else {
                    Value::String(cost_text.clone())
                };
                plan.insert("cost".to_string(), cost);
                plan.insert(
                    "resources".to_string(),
                    Value::Object(
                        resources
                            .iter()
                            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                            .collect(),
                    ),
                );
                PlanCase {
                    json: Value::Object(plan),
                    cost_nanos,
                    resources,
                }
            },
        )
}

fn offer_case() -> impl Strategy<Value = (Value, BTreeMap<String, PlanCase>)> {
    (
        "[A-Za-z][A-Za-z0-9 ]{0,30}",
        "[a-z]{1,10}",
        prop::collection::btree_map(good_id(), plan_case(), 1..5),
    )
        .prop_map(|(name, kind, plans)| {
            let body = json!({
                "name": name,
                "type": kind,
                "plans": plans.iter().map(|(k, p)| (k.clone(), p.json.clone())).collect::<serde_json::Map<_, _>>(),
            });
            (body, plans)
        })
}

/// Marks a string that [`body_text`] writes as a bare JSON number token.
const RAW: &str = "\u{1}RAW";

/// Serialise a body, writing marked strings as number tokens exactly as
/// generated (through `Value`, a cost would be printed via an f64).
fn body_text(body: &Value) -> Vec<u8> {
    let text = serde_json::to_string(body).unwrap();
    let marker = "\"\\u0001RAW";
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(marker) {
        out.push_str(&rest[..at]);
        let after = &rest[at + marker.len()..];
        let end = after.find('"').unwrap();
        out.push_str(&after[..end]);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out.into_bytes()
}

/// Arbitrary JSON, weighted towards the shapes of an offer so the fuzzing
/// reaches past the first check.
fn hostile_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("name".to_string()),
        Just("type".to_string()),
        Just("plans".to_string()),
        Just("cost".to_string()),
        Just("resources".to_string()),
        Just("planName".to_string()),
        Just("planID".to_string()),
        Just("id".to_string()),
        Just("clusterID".to_string()),
        Just("version".to_string()),
        Just("description".to_string()),
        "[a-z.]{1,6}",
        ".{0,4}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[0-9.eE+-]{0,12}".prop_map(Value::String),
        ".{0,12}".prop_map(Value::String),
        good_quantity().prop_map(Value::String),
        bad_quantity().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// What must hold of anything the parser accepts.
fn check_accepted(spec: &OfferSpec) -> Result<(), TestCaseError> {
    prop_assert!(!spec.name.trim().is_empty() && spec.name.len() <= 256);
    prop_assert!(!spec.offer_type.trim().is_empty());
    prop_assert!(!spec.plans.is_empty() && spec.plans.len() <= 64);
    for (key, plan) in &spec.plans {
        prop_assert!(
            catalog::http::validate_id("plan", key).is_ok(),
            "plan key {key:?}"
        );
        prop_assert!(plan.cost.nanos() >= 0);
        prop_assert!(plan.resources.0.len() <= 64);
        for (name, q) in &plan.resources.0 {
            prop_assert!(!q.is_negative(), "{name} = {q}");
            // What is printed back is a quantity Kubernetes reads as the same.
            let again: Quantity = q.to_string().parse().unwrap();
            prop_assert_eq!(&again, q);
        }
    }
    if let Some(id) = &spec.id {
        prop_assert!(catalog::http::validate_id("id", id).is_ok());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any bytes at all: an answer, never a panic.
    #[test]
    fn any_bytes_are_answered(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(spec) = OfferSpec::from_json(&bytes) {
            check_accepted(&spec)?;
        }
    }

    /// Any JSON shaped like an offer: refused with a named field, or
    /// accepted only when every rule holds.
    #[test]
    fn hostile_json_is_refused_or_valid(body in hostile_json()) {
        match OfferSpec::from_json(&body_text(&body)) {
            Ok(spec) => check_accepted(&spec)?,
            Err(e) => prop_assert!(!e.field.is_empty() && !e.message.is_empty()),
        }
    }

    /// A well-formed offer is accepted exactly: every cost to the digit (as
    /// a string or as a JSON number), every quantity as Kubernetes parses it.
    #[test]
    fn well_formed_offers_mean_what_they_say((body, plans) in offer_case()) {
        let spec = OfferSpec::from_json(&body_text(&body))
            .map_err(|e| TestCaseError::fail(format!("refused {body}: {e}")))?;
        check_accepted(&spec)?;
        prop_assert_eq!(spec.plans.len(), plans.len());
        for (key, case) in &plans {
            let plan = &spec.plans[key];
            prop_assert_eq!(plan.cost.nanos(), case.cost_nanos, "cost of {}", key);
            prop_assert_eq!(plan.resources.0.len(), case.resources.len());
            for (name, text) in &case.resources {
                let want: Quantity = text.parse().unwrap();
                prop_assert_eq!(&plan.resources.0[name], &want, "{} = {}", name, text);
                prop_assert_eq!(plan.resources.0[name].to_string(), want.to_string());
            }
        }
    }

    /// Resource quantities sent as JSON numbers are read from the number's
    /// own digits, as Kubernetes' `Quantity.UnmarshalJSON` does, never
    /// through a float.
    #[test]
    fn numeric_quantities_keep_their_digits(
        int in 0u64..1_000_000_000_000u64,
        frac in "[0-9]{1,12}",
        exp in prop::option::of(-6i32..6),
    ) {
        let token = match exp {
            Some(e) => format!("{int}.{frac}e{e}"),
            None => format!("{int}.{frac}"),
        };
        let body = format!(
            r#"{{"name":"n","type":"t","plans":{{"p":{{"name":"p","cost":"1","resources":{{"cpu":{token}}}}}}}}}"#
        );
        let spec = OfferSpec::from_json(body.as_bytes())
            .map_err(|e| TestCaseError::fail(format!("refused {body}: {e}")))?;
        let want: Quantity = token.parse().unwrap();
        prop_assert_eq!(&spec.plans["p"].resources.0["cpu"], &want, "{}", token);
    }

    /// One bad field in an otherwise good offer: refused, naming that field.
    #[test]
    fn one_bad_field_is_named(
        (body, plans) in offer_case(),
        which in 0usize..6,
        bad_key in bad_id(),
        bad_q in bad_quantity(),
        bad_cost in prop_oneof![Just("-1"), Just("1.0000000001"), Just("abc"), Just(""), Just("1e"), Just("9999999999999")],
    ) {
        let mut body = body;
        let first = plans.keys().next().unwrap().clone();
        let expected_field = match which {
            0 => {
                let plan = body["plans"].as_object_mut().unwrap().remove(&first).unwrap();
                body["plans"].as_object_mut().unwrap().insert(bad_key.clone(), plan);
                format!("plans.{bad_key}")
            }
            1 => {
                body["plans"][&first]["resources"]["memory"] = Value::String(bad_q.clone());
                format!("plans.{first}.resources.memory")
            }
            2 => {
                body["plans"][&first]["cost"] = Value::String(bad_cost.to_string());
                format!("plans.{first}.cost")
            }
            3 => {
                body["id"] = Value::String(bad_key.clone());
                "id".to_string()
            }
            4 => {
                body["name"] = Value::String(" \t".to_string());
                "name".to_string()
            }
            _ => {
                body["plans"][&first]["planID"] = Value::String(bad_key.clone());
                format!("plans.{first}.planID")
            }
        };
        match OfferSpec::from_json(&body_text(&body)) {
            Ok(spec) => prop_assert!(false, "accepted {body}: {spec:?}"),
            Err(e) => prop_assert_eq!(e.field, expected_field, "{}", e.message),
        }
    }
}

/// The generator's cost spelling and `Cost`'s own parser agree (so the
/// property above checks the body parser, not the generator).
#[test]
fn generated_costs_parse_as_decimals() {
    for (text, nanos) in [
        ("0", 0),
        ("1.5", 1_500_000_000),
        ("123456789.123456789", 123_456_789_123_456_789),
    ] {
        assert_eq!(text.parse::<Cost>().unwrap().nanos(), nanos);
    }
}
