//! Quantity arithmetic: Kubernetes' format rules for Add/Sub, clamped
//! subtraction, percentage scaling with nano rounding, and the int64 readers.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use quantity::{Format, Quantity};

use Format::{BinarySI as B, DecimalExponent as X, DecimalSI as D};

fn q(s: &str) -> Quantity {
    s.parse()
        .unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
}

/// (a, b, a + b printed, format of a + b)
const ADD: &[(&str, &str, &str, Format)] = &[
    ("2G", "1Gi", "3073741824", D),
    ("1Gi", "2G", "3001701Ki", B),
    ("1Gi", "1Gi", "2Gi", B),
    ("1Gi", "512Mi", "1536Mi", B),
    ("512Mi", "512Mi", "1Gi", B),
    ("100m", "900m", "1", D),
    ("500m", "1Ki", "1024500m", D),
    ("1Ki", "500m", "1024500m", B),
    ("1e3", "1", "1001", X),
    ("1e3", "1e3", "2e3", X),
    ("1", "1e3", "1001", D),
    ("0", "1Gi", "1Gi", B),
    ("0Ki", "1k", "1k", D),
    ("0e3", "1k", "1k", D),
    ("1Gi", "0", "1Gi", B),
    ("1Gi", "-1Gi", "0", B),
    ("-1", "-1", "-2", D),
    ("1n", "999999999n", "1", D),
    ("7Ei", "7Ei", "14Ei", B),
    ("999E", "1E", "1e21", D),
    ("1.5", "1.5", "3", D),
    ("250m", "-1", "-750m", D),
];

/// (a, b, a - b printed, format of a - b)
const SUB: &[(&str, &str, &str, Format)] = &[
    ("1Gi", "1Mi", "1023Mi", B),
    ("1", "1500m", "-500m", D),
    ("2G", "1Gi", "926258176", D),
    ("0", "1Gi", "-1Gi", B),
    ("0", "100m", "-100m", D),
    ("1Gi", "0", "1Gi", B),
    ("1Gi", "1Gi", "0", B),
    ("4Gi", "1.5Gi", "2560Mi", B),
    ("1e3", "1", "999", X),
    ("1", "1n", "999999999n", D),
    ("-1", "1", "-2", D),
];

/// (a, b, max(a - b, 0) printed)
const SATURATING_SUB: &[(&str, &str, &str)] = &[
    ("1", "2", "0"),
    ("2", "1", "1"),
    ("1Gi", "1Gi", "0"),
    ("1Gi", "512Mi", "512Mi"),
    ("100m", "1", "0"),
    ("0", "1n", "0"),
    ("1n", "0", "1n"),
    ("-1", "0", "0"),
    ("-1", "-2", "1"),
    ("4", "-1", "5"),
];

/// (q, percent, q * percent / 100 printed)
const SCALE_PERCENT: &[(&str, u32, &str)] = &[
    ("1Gi", 50, "512Mi"),
    ("1Gi", 0, "0"),
    ("1Gi", 100, "1Gi"),
    ("1Gi", 200, "2Gi"),
    ("1Gi", 75, "768Mi"),
    ("1", 33, "330m"),
    ("7", 33, "2310m"),
    ("4", 150, "6"),
    ("10", 1, "100m"),
    ("1Ki", 10, "102400m"),
    ("10Gi", 90, "9Gi"),
    ("8Gi", 90, "7730941132800m"),
    ("4", 90, "3600m"),
    // Below 1n the result rounds away from zero.
    ("1n", 50, "1n"),
    ("3n", 50, "2n"),
    ("-3n", 50, "-2n"),
    ("1n", 1, "1n"),
    ("0", 50, "0"),
    ("1", u32::MAX, "42949672950m"),
    ("1e3", 50, "500"),
    ("2e3", 50, "1e3"),
    ("9223372036854775807", 200, "18446744073709551614"),
];

/// (q, value(), milli_value())
const READERS: &[(&str, i64, i64)] = &[
    ("0", 0, 0),
    ("1", 1, 1000),
    ("1.5", 2, 1500),
    ("-1.5", -2, -1500),
    ("1n", 1, 1),
    ("-1n", -1, -1),
    ("1500m", 2, 1500),
    ("1001u", 1, 2),
    ("-1001u", -1, -2),
    ("1Ki", 1024, 1024000),
    ("1Gi", 1073741824, 1073741824000),
    ("9223372036854775807", i64::MAX, i64::MAX),
    ("-9223372036854775808", i64::MIN, i64::MIN),
    // Beyond int64 the readers saturate.
    ("9223372036854775808", i64::MAX, i64::MAX),
    ("-9223372036854775809", i64::MIN, i64::MIN),
    ("1e30", i64::MAX, i64::MAX),
    ("9223372036854775807m", 9223372036854776, i64::MAX),
    ("9223372036854775808m", 9223372036854776, i64::MAX),
    ("-9223372036854775808m", -9223372036854776, i64::MIN),
    ("9223372036854775.807", 9223372036854776, i64::MAX),
];

#[test]
fn add_keeps_the_first_non_zero_format() {
    for &(a, b, sum, format) in ADD {
        let got = q(a).add(&q(b));
        assert_eq!(got.to_string(), sum, "{a} + {b}");
        assert_eq!(got.format(), format, "{a} + {b}: format");
    }
}

#[test]
fn sub_keeps_the_first_non_zero_format() {
    for &(a, b, diff, format) in SUB {
        let got = q(a).sub(&q(b));
        assert_eq!(got.to_string(), diff, "{a} - {b}");
        assert_eq!(got.format(), format, "{a} - {b}: format");
    }
}

#[test]
fn saturating_sub_clamps_at_zero() {
    for &(a, b, expected) in SATURATING_SUB {
        let got = q(a).saturating_sub(&q(b));
        assert_eq!(got.to_string(), expected, "{a} -| {b}");
        assert!(!got.is_negative(), "{a} -| {b}");
    }
}

#[test]
fn scale_percent_is_exact_then_rounds_up() {
    for &(input, percent, expected) in SCALE_PERCENT {
        let got = q(input).scale_percent(percent);
        assert_eq!(got.to_string(), expected, "{input} * {percent}%");
        assert_eq!(got.format(), q(input).format(), "{input}: format kept");
    }
}

#[test]
fn value_and_milli_value_round_away_from_zero_and_saturate() {
    for &(input, value, milli) in READERS {
        assert_eq!(q(input).value(), value, "{input}.value()");
        assert_eq!(q(input).milli_value(), milli, "{input}.milli_value()");
    }
}

/// Operands cannot change (every operation takes `&self`; the compiler
/// checks that). What can go wrong is a result carrying an operand's kept
/// spelling: Kubernetes' `Add`, `Sub`, `Neg`, `Mul` clear it, so a result
/// equal in value to an operand still prints canonically, and the operands
/// keep printing theirs.
#[test]
fn results_never_carry_an_operands_spelling() {
    let zero = Quantity::zero();
    for (input, canonical) in [("+2Gi", "2Gi"), ("1.500k", "1500"), ("007Ki", "7Ki")] {
        let a = q(input);
        assert_eq!(a.kept_spelling(), Some(input), "{input} is kept");
        let results = [
            ("add 0", a.add(&zero)),
            ("0 add", zero.add(&a)),
            ("sub 0", a.sub(&zero)),
            ("saturating_sub 0", a.saturating_sub(&zero)),
            ("scale 100%", a.scale_percent(100)),
            ("neg neg", a.neg().neg()),
        ];
        for (op, r) in results {
            assert_eq!(r, a, "{input} {op}: value");
            assert_eq!(
                r.kept_spelling(),
                None,
                "{input} {op}: spelling carried over"
            );
            assert_eq!(r.to_string(), canonical, "{input} {op}");
        }
        assert_eq!(
            a.to_string(),
            input,
            "{input}: operand still prints its spelling"
        );
    }
}

#[test]
fn constructors() {
    assert_eq!(Quantity::zero().to_string(), "0");
    assert_eq!(Quantity::default(), Quantity::zero());
    assert_eq!(Quantity::zero().format(), D);
    assert_eq!(Quantity::new(4, B).to_string(), "4");
    assert_eq!(Quantity::new(4096, B).to_string(), "4Ki");
    assert_eq!(Quantity::new(-4096, B).to_string(), "-4Ki");
    assert_eq!(Quantity::new(4000, D).to_string(), "4k");
    assert_eq!(Quantity::new(4000, X).to_string(), "4e3");
    assert_eq!(Quantity::from_milli(1500, D).to_string(), "1500m");
    assert_eq!(Quantity::from_milli(-1, D).to_string(), "-1m");
    assert_eq!(q("1Gi").with_format(D).to_string(), "1073741824");
    assert_eq!(q("1G").with_format(X).to_string(), "1e9");
    assert_eq!(q("1500m").with_format(B).to_string(), "1500m");
}
