use super::*;

fn spec(yaml: &str) -> MarketAutoscalerSpec {
    serde_yaml_ng::from_str(yaml).unwrap()
}

const MINIMAL: &str = r#"
catalogURL: http://catalog:8080
credentialsSecretRef: {name: token, key: token}
pods: {namespaces: [team-a]}
limits: {currency: EUR, maxSpendPerHour: "2.50"}
"#;

#[test]
fn a_minimal_spec_takes_the_documented_defaults() {
    let intent = spec(MINIMAL).parse().unwrap();
    assert_eq!(intent.strategy, Strategy::Cheapest);
    assert_eq!(intent.terms.on_expiry, OnExpiry::Extend);
    assert_eq!(intent.terms.duration, None);
    assert_eq!(intent.scale_down, ScaleDown::default());
    assert_eq!(intent.scale_down.unneeded_time, Duration::from_secs(600));
    assert_eq!(intent.scale_down.utilization_threshold_ppm, 500_000);
    assert_eq!(
        intent.limits.max_spend_per_hour,
        Some(Money::from_nanos(2_500_000_000))
    );
    assert_eq!(intent.limits.max_spend_per_month, None);
}

#[test]
fn every_bad_field_is_named() {
    let cases = [
        (
            "limits: {currency: EUR}",
            "spec.limits: set maxSpendPerHour",
        ),
        (
            "limits: {currency: eur, maxSpendPerHour: \"1\"}",
            "spec.limits.currency",
        ),
        (
            "limits: {currency: EUR, maxSpendPerMonth: \"1.0000000001\"}",
            "spec.limits.maxSpendPerMonth",
        ),
        (
            "limits: {currency: EUR, maxSpendPerHour: \"1\", resources: {cpu: lots}}",
            "spec.limits.resources.cpu",
        ),
        ("terms: {duration: soon}", "spec.terms.duration"),
        ("terms: {duration: \"0s\"}", "spec.terms.duration"),
        (
            "scaleDown: {unneededTime: \"-5m\"}",
            "spec.scaleDown.unneededTime",
        ),
        (
            "scaleDown: {utilizationThreshold: \"1.5\"}",
            "spec.scaleDown.utilizationThreshold",
        ),
        (
            "scaleDown: {disruptionBudget: \"ten\"}",
            "spec.scaleDown.disruptionBudget",
        ),
        (
            "offers: {selector: {matchExpressions: [{key: a, operator: In}]}}",
            "spec.offers.selector.matchExpressions[0]",
        ),
        ("strategy: Priority", "spec.priority"),
    ];
    for (extra, field) in cases {
        // Later keys replace earlier ones in the YAML map.
        let text = format!("{MINIMAL}{extra}\n");
        let mut value: serde_yaml_ng::Value = serde_yaml_ng::from_str(MINIMAL).unwrap();
        let extra: serde_yaml_ng::Value = serde_yaml_ng::from_str(extra).unwrap();
        for (k, v) in extra.as_mapping().unwrap() {
            value.as_mapping_mut().unwrap().insert(k.clone(), v.clone());
        }
        let s: MarketAutoscalerSpec = serde_yaml_ng::from_value(value).unwrap();
        let err = s.parse().unwrap_err().to_string();
        assert!(err.starts_with(field), "{text}: {err}");
    }
}

#[test]
fn fractions_and_budgets_parse_exactly() {
    assert_eq!(fraction_ppm("0.5"), Some(500_000));
    assert_eq!(fraction_ppm("1"), Some(1_000_000));
    assert_eq!(fraction_ppm(".25"), Some(250_000));
    assert_eq!(fraction_ppm("0.1234560"), Some(123_456));
    assert_eq!(fraction_ppm("0.1234567"), None);
    assert_eq!(fraction_ppm("1.01"), None);
    assert_eq!(DisruptionBudget::Percent(10).allowed(3), 1);
    assert_eq!(DisruptionBudget::Percent(10).allowed(0), 0);
    assert_eq!(DisruptionBudget::Percent(50).allowed(5), 3);
    assert_eq!(DisruptionBudget::Count(2).allowed(100), 2);
    assert_eq!(parse_budget("25%"), Some(DisruptionBudget::Percent(25)));
    assert_eq!(parse_budget("%"), None);
}

#[test]
fn the_crd_is_namespaced_with_status_short_name_and_bounds() {
    let crd = crd();
    assert_eq!(crd.spec.group, GROUP);
    assert_eq!(crd.spec.names.kind, KIND);
    assert_eq!(crd.spec.names.plural, PLURAL);
    assert_eq!(crd.spec.names.short_names, Some(vec!["mas".to_string()]));
    assert_eq!(crd.spec.scope, "Namespaced");
    let v = &crd.spec.versions[0];
    assert!(v.subresources.as_ref().unwrap().status.is_some());
    let schema = serde_json::to_value(v.schema.as_ref().unwrap()).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    let required: Vec<&str> = spec["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for field in ["catalogURL", "credentialsSecretRef", "pods", "limits"] {
        assert!(required.contains(&field), "{field} required: {required:?}");
    }
    let limits = &spec["properties"]["limits"];
    assert_eq!(limits["properties"]["currency"]["pattern"], "^[A-Z]{3}$");
    assert!(limits["x-kubernetes-validations"][0]["rule"]
        .as_str()
        .unwrap()
        .contains("maxSpendPerHour"));
    assert_eq!(
        spec["properties"]["pods"]["properties"]["namespaces"]["maxItems"],
        64
    );
    assert_eq!(
        spec["properties"]["strategy"]["enum"],
        serde_json::json!(["Cheapest", "LeastWaste", "Priority"])
    );
    // Optional fields are never `null` in the schema.
    let text = schema.to_string();
    let at = text.find("nullable").unwrap_or(0);
    assert!(
        !text.contains("nullable"),
        "{}",
        &text[at.saturating_sub(300)..at + 20]
    );
}
