//! ResourceList operations and the JSON shapes of lists and quantities.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;

use quantity::{ParseError, Quantity, ResourceList};

fn list(entries: &[(&str, &str)]) -> ResourceList {
    ResourceList::from_strings(entries.iter().copied())
        .unwrap_or_else(|(name, e)| panic!("{name}: {e}"))
}

fn strings(l: &ResourceList) -> Vec<(String, String)> {
    l.to_strings().into_iter().collect()
}

fn pairs(entries: &[(&str, &str)]) -> Vec<(String, String)> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn add_counts_missing_names_as_zero() {
    let a = list(&[("cpu", "1500m"), ("memory", "1Gi")]);
    let b = list(&[("cpu", "500m"), ("nvidia.com/gpu", "1")]);
    assert_eq!(
        strings(&a.add(&b)),
        pairs(&[("cpu", "2"), ("memory", "1Gi"), ("nvidia.com/gpu", "1")])
    );
    assert_eq!(a.add(&b), b.add(&a));
    assert_eq!(a.add(&ResourceList::new()), a);
    assert_eq!(ResourceList::new().add(&a), a);
}

#[test]
fn add_keeps_kubernetes_formats() {
    let a = list(&[("memory", "2G")]);
    let b = list(&[("memory", "1Gi")]);
    assert_eq!(strings(&a.add(&b)), pairs(&[("memory", "3073741824")]));
    let zero = list(&[("memory", "0")]);
    assert_eq!(strings(&zero.add(&b)), pairs(&[("memory", "1Gi")]));
}

#[test]
fn saturating_sub_clamps_and_ignores_names_only_in_other() {
    let capacity = list(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]);
    let used = list(&[("cpu", "5"), ("memory", "3Gi"), ("nvidia.com/gpu", "2")]);
    assert_eq!(
        strings(&capacity.saturating_sub(&used)),
        pairs(&[("cpu", "0"), ("memory", "5Gi"), ("pods", "110")])
    );
    // A negative entry with nothing to subtract still clamps at zero.
    let negative = list(&[("cpu", "-1")]);
    assert_eq!(
        strings(&negative.saturating_sub(&ResourceList::new())),
        pairs(&[("cpu", "0")])
    );
}

#[test]
fn fits_within() {
    let capacity = list(&[("cpu", "4"), ("memory", "8Gi")]);
    assert!(list(&[("cpu", "4"), ("memory", "8Gi")]).fits_within(&capacity));
    assert!(list(&[("cpu", "3999m")]).fits_within(&capacity));
    assert!(list(&[("memory", "8589934592")]).fits_within(&capacity));
    assert!(ResourceList::new().fits_within(&capacity));
    assert!(!list(&[("cpu", "4001m")]).fits_within(&capacity));
    assert!(!list(&[("memory", "8589934593")]).fits_within(&capacity));
    // A name missing from capacity counts as zero.
    assert!(!list(&[("nvidia.com/gpu", "1")]).fits_within(&capacity));
    assert!(list(&[("nvidia.com/gpu", "0")]).fits_within(&capacity));
    assert!(!capacity.fits_within(&ResourceList::new()));
}

#[test]
fn scale_percent_scales_every_entry() {
    let l = list(&[("cpu", "3"), ("memory", "1Gi"), ("pods", "1n")]);
    assert_eq!(
        strings(&l.scale_percent(50)),
        pairs(&[("cpu", "1500m"), ("memory", "512Mi"), ("pods", "1n")])
    );
    assert_eq!(l.scale_percent(100), l);
    assert_eq!(
        strings(&l.scale_percent(0)),
        pairs(&[("cpu", "0"), ("memory", "0"), ("pods", "0")])
    );
}

#[test]
fn from_strings_names_the_bad_entry() {
    let err =
        ResourceList::from_strings([("cpu", "1"), ("memory", "5GB"), ("pods", "x")]).unwrap_err();
    assert_eq!(err, ("memory".to_owned(), ParseError::Format));
    let err = ResourceList::from_strings([("cpu", "")]).unwrap_err();
    assert_eq!(err, ("cpu".to_owned(), ParseError::Empty));
    let err = ResourceList::from_strings([("memory", "1mi")]).unwrap_err();
    assert_eq!(err, ("memory".to_owned(), ParseError::Suffix));
}

#[test]
fn to_strings_prints_canonical_values() {
    let l = list(&[("memory", "1024Mi"), ("cpu", "0.5"), ("storage", "1000G")]);
    assert_eq!(
        strings(&l),
        pairs(&[("cpu", "500m"), ("memory", "1Gi"), ("storage", "1T")])
    );
}

#[test]
fn get_insert_and_collect() {
    let mut l = ResourceList::new();
    assert!(l.get("cpu").is_none());
    assert!(l.insert("cpu", "2".parse().unwrap()).is_none());
    let old = l.insert("cpu", "3".parse().unwrap());
    assert_eq!(old.map(|q| q.to_string()), Some("2".to_owned()));
    assert_eq!(l.get("cpu").map(ToString::to_string), Some("3".to_owned()));
    let collected: ResourceList = [(
        "cpu".to_owned(),
        Quantity::new(3, quantity::Format::DecimalSI),
    )]
    .into_iter()
    .collect();
    assert_eq!(collected, l);
    let from_map = ResourceList::from(BTreeMap::from([(
        "cpu".to_owned(),
        Quantity::new(3, quantity::Format::DecimalSI),
    )]));
    assert_eq!(from_map, l);
}

#[test]
fn resource_list_json_is_an_object_of_strings() {
    let l = list(&[("cpu", "1500m"), ("memory", "4Gi"), ("nvidia.com/gpu", "1")]);
    let json = serde_json::to_string(&l).unwrap();
    assert_eq!(
        json,
        r#"{"cpu":"1500m","memory":"4Gi","nvidia.com/gpu":"1"}"#
    );
    let back: ResourceList = serde_json::from_str(&json).unwrap();
    assert_eq!(back, l);
    // Non-canonical input is read by value and written canonically.
    let read: ResourceList = serde_json::from_str(r#"{"memory":"1024Mi","cpu":"0.5"}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&read).unwrap(),
        r#"{"cpu":"500m","memory":"1Gi"}"#
    );
}

#[test]
fn resource_list_json_rejects_bad_quantities() {
    let err = serde_json::from_str::<ResourceList>(r#"{"memory":"5GB"}"#).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("5GB"), "{message}");
    assert!(message.contains("regular expression"), "{message}");
    assert!(serde_json::from_str::<ResourceList>(r#"["1"]"#).is_err());
}

#[test]
fn quantity_json() {
    let q: Quantity = serde_json::from_str(r#""1024Mi""#).unwrap();
    assert_eq!(serde_json::to_string(&q).unwrap(), r#""1Gi""#);
    let q: Quantity = serde_json::from_str("1024").unwrap();
    assert_eq!(q.to_string(), "1024");
    let q: Quantity = serde_json::from_str("-3").unwrap();
    assert_eq!(q.to_string(), "-3");
    let q: Quantity = serde_json::from_str("18446744073709551615").unwrap();
    assert_eq!(q.to_string(), "18446744073709551615");
    let q: Quantity = serde_json::from_str(r#""\t1Gi\n""#).unwrap();
    assert_eq!(q.to_string(), "1Gi");
    // Floats would go through binary floating point: refused.
    assert!(serde_json::from_str::<Quantity>("0.5").is_err());
    assert!(serde_json::from_str::<Quantity>(r#""""#).is_err());
    assert!(serde_json::from_str::<Quantity>(r#""   ""#).is_err());
    assert!(serde_json::from_str::<Quantity>("null").is_err());
    assert!(serde_json::from_str::<Quantity>("true").is_err());
    let optional: Option<Quantity> = serde_json::from_str("null").unwrap();
    assert!(optional.is_none());
}
