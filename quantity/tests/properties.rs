//! Property tests: the parser never panics, printing round-trips, and the
//! arithmetic is consistent with the ordering.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::cmp::Ordering;

use proptest::prelude::*;
use quantity::{Format, Quantity, ResourceList};

fn format_strategy() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::DecimalSI),
        Just(Format::BinarySI),
        Just(Format::DecimalExponent),
    ]
}

/// Quantities of `mantissa * 10^exponent` in any format, within the range
/// where parse(print(q)) is exact (binary values are capped at 2^63-1 when
/// parsed, exactly like Kubernetes).
fn quantity_strategy() -> impl Strategy<Value = Quantity> {
    (any::<i64>(), -12i32..40, format_strategy()).prop_map(|(m, e, f)| {
        let q: Quantity = format!("{m}e{e}")
            .parse()
            .expect("mantissa/exponent parses");
        if f == Format::BinarySI && q.value().unsigned_abs() >= i64::MAX as u64 {
            q
        } else {
            q.with_format(f)
        }
    })
}

/// Strings over the quantity alphabet, most of them well-formed.
fn quantity_like_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[-+]?[0-9]{0,25}(\\.[0-9]{0,25})?([numkMGTPE]|[KMGTPE]i|[eE][-+]?[0-9]{1,4})?",
        "[-+0-9.eEinumkKMGTP ]{0,30}",
    ]
}

/// `q` prints a string that parses to the same value, and printing is
/// stable. As in Kubernetes, one case needs a second round: a BinarySI value
/// that is no whole multiple of 1024 prints in DecimalSI's spelling (a
/// BinarySI 2000 prints "2000", 0.1 prints "100m"), which reads back as
/// DecimalSI ("2000" then prints as "2k"); the same value, stable from there
/// on.
fn round_trip(q: &Quantity) -> Result<(), TestCaseError> {
    let printed = q.to_string();
    let back: Quantity = printed.parse().expect("canonical string parses");
    prop_assert_eq!(&back, q, "printed {}", printed);
    let reprinted = back.to_string();
    if reprinted == printed {
        return Ok(());
    }
    prop_assert_eq!(
        q.format(),
        Format::BinarySI,
        "printed {}, then {}",
        printed,
        reprinted
    );
    prop_assert_eq!(
        back.format(),
        Format::DecimalSI,
        "printed {}, then {}",
        printed,
        reprinted
    );
    let again: Quantity = reprinted.parse().expect("canonical string parses");
    prop_assert_eq!(&again, q);
    prop_assert_eq!(again.to_string(), reprinted);
    Ok(())
}

proptest! {
    #[test]
    fn parser_never_panics_on_arbitrary_strings(s in any::<String>()) {
        let _ = s.parse::<Quantity>();
    }

    #[test]
    fn parser_never_panics_on_the_quantity_alphabet(s in quantity_like_string()) {
        if let Ok(q) = s.parse::<Quantity>() {
            // Whatever parses prints a string that parses to the same value,
            // and printing is stable.
            round_trip(&q)?;
        }
    }

    #[test]
    fn print_then_parse_is_identity(q in quantity_strategy()) {
        round_trip(&q)?;
    }

    #[test]
    fn json_round_trip(q in quantity_strategy()) {
        let json = serde_json::to_string(&q).unwrap();
        let back: Quantity = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(back, q);
    }

    #[test]
    fn add_then_sub_round_trips(a in quantity_strategy(), b in quantity_strategy()) {
        prop_assert_eq!(a.add(&b).sub(&b), a.clone());
        prop_assert_eq!(a.sub(&b).add(&b), a.clone());
        prop_assert_eq!(a.add(&b), b.add(&a));
        prop_assert!(a.sub(&a).is_zero());
    }

    #[test]
    fn add_is_associative(a in quantity_strategy(), b in quantity_strategy(), c in quantity_strategy()) {
        prop_assert_eq!(a.add(&b).add(&c), a.add(&b.add(&c)));
    }

    #[test]
    fn ordering_matches_the_sign_of_the_difference(a in quantity_strategy(), b in quantity_strategy()) {
        let diff = a.sub(&b);
        let by_sign = if diff.is_zero() {
            Ordering::Equal
        } else if diff.is_negative() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
        prop_assert_eq!(a.cmp(&b), by_sign);
        prop_assert_eq!(b.cmp(&a), by_sign.reverse());
        prop_assert_eq!(a == b, by_sign == Ordering::Equal);
    }

    #[test]
    fn saturating_sub_is_max_of_difference_and_zero(a in quantity_strategy(), b in quantity_strategy()) {
        let got = a.saturating_sub(&b);
        let diff = a.sub(&b);
        prop_assert_eq!(got, if diff.is_negative() { Quantity::zero() } else { diff });
    }

    #[test]
    fn scale_percent_rounds_up_by_less_than_one_nano(a in quantity_strategy(), percent in 0u32..1000) {
        // 100 * scaled and a * percent are both exact (scaling by 10000% and
        // by percent*100 % multiplies the nano count by a whole number).
        let scaled_times_100 = a.scale_percent(percent).scale_percent(10_000);
        let exact = a.scale_percent(percent * 100);
        let error = scaled_times_100.sub(&exact);
        let hundred_nanos: Quantity = "100n".parse().unwrap();
        if a.is_negative() {
            prop_assert!(error <= Quantity::zero());
            prop_assert!(error > hundred_nanos.neg());
        } else {
            prop_assert!(error >= Quantity::zero());
            prop_assert!(error < hundred_nanos);
        }
    }

    #[test]
    fn integer_readers_agree_with_integers(v in any::<i64>()) {
        let q = Quantity::new(v, Format::DecimalSI);
        prop_assert_eq!(q.value(), v);
        prop_assert_eq!(q.milli_value(), v.checked_mul(1000).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX }));
        let m = Quantity::from_milli(v, Format::DecimalSI);
        prop_assert_eq!(m.milli_value(), v);
    }

    #[test]
    fn resource_list_sub_undoes_add(
        a in proptest::collection::btree_map("[a-z]{1,3}", 0i64..1_000_000_000, 0..6),
        b in proptest::collection::btree_map("[a-z]{1,3}", 0i64..1_000_000_000, 0..6),
    ) {
        let to_list = |m: &std::collections::BTreeMap<String, i64>| -> ResourceList {
            m.iter().map(|(k, v)| (k.clone(), Quantity::from_milli(*v, Format::DecimalSI))).collect()
        };
        let (a, b) = (to_list(&a), to_list(&b));
        let sum = a.add(&b);
        prop_assert!(a.fits_within(&sum));
        prop_assert!(b.fits_within(&sum));
        let diff = sum.saturating_sub(&b);
        prop_assert_eq!(diff.0.len(), sum.0.len());
        for (name, left) in &diff.0 {
            match a.get(name) {
                Some(original) => prop_assert_eq!(left, original),
                None => prop_assert!(left.is_zero()),
            }
        }
    }
}
