//! Parsing and canonical printing beyond the Kubernetes tables: every suffix,
//! binary/decimal fallbacks, nano rounding, the exponent form, limits, and
//! the exact error for each kind of bad input.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use quantity::{Format, ParseError, Quantity, MAX_INTEGER_DIGITS};

use Format::{BinarySI as B, DecimalExponent as X, DecimalSI as D};

fn q(s: &str) -> Quantity {
    s.parse()
        .unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
}

/// input → (canonical string, format after parsing). `Display` prints the
/// canonical string, or the input itself for the inputs in [`CASES_KEPT`].
const CASES: &[(&str, &str, Format)] = &[
    // Binary suffixes fold up to the largest whole power of 1024.
    ("1024Mi", "1Gi", B),
    ("1048576Ki", "1Gi", B),
    ("2048Ki", "2Mi", B),
    ("1536Mi", "1536Mi", B),
    ("1.5Gi", "1536Mi", B),
    ("1.25Gi", "1280Mi", B),
    ("0.5Mi", "512Ki", B),
    ("0.5Gi", "512Mi", B),
    ("1024Ei", "9223372036854775807", B),
    ("1Ei", "1Ei", B),
    ("7Ei", "7Ei", B),
    ("7.5Ei", "7680Pi", B),
    ("1024Pi", "1Ei", B),
    ("4096Ki", "4Mi", B),
    ("1023Ki", "1023Ki", B),
    ("1025Ki", "1025Ki", B),
    ("1024", "1024", D),
    ("1024Ki", "1Mi", B),
    // Binary values that are not whole, or below 1024, print as DecimalSI.
    ("0.5Ki", "512", B),
    ("1.5Ki", "1536", B),
    ("1.1Ki", "1126400m", B),
    ("0.1Ki", "102400m", B),
    ("0.001Ki", "1024m", B),
    ("1Ki", "1Ki", B),
    ("1.000976Ki", "1024999424u", B),
    // A non-zero binary value below 1 is DecimalSI from the start.
    ("0.0001Ki", "102400u", D),
    ("0.0000001Ki", "102400n", D),
    ("0.0000000001Ki", "103n", D),
    // The binary cap at 2^63-1 (Kubernetes' maxAllowed).
    ("8Ei", "9223372036854775807", B),
    ("8192Pi", "9223372036854775807", B),
    ("9223372036854775807Ki", "9223372036854775807", B),
    ("99999999999999999999999Ki", "9223372036854775807", B),
    ("7.99999999999999999999Ei", "9223372036854775807", B),
    // Decimal suffixes.
    ("1n", "1n", D),
    ("1000n", "1u", D),
    ("1000000n", "1m", D),
    ("1500n", "1500n", D),
    ("1u", "1u", D),
    ("1000u", "1m", D),
    ("1m", "1m", D),
    ("100m", "100m", D),
    ("1000m", "1", D),
    ("1100m", "1100m", D),
    ("1500m", "1500m", D),
    ("10000m", "10", D),
    ("250m", "250m", D),
    ("1k", "1k", D),
    ("1000k", "1M", D),
    ("1500k", "1500k", D),
    ("0.5k", "500", D),
    ("1M", "1M", D),
    ("1000M", "1G", D),
    ("1G", "1G", D),
    ("1000G", "1T", D),
    ("2T", "2T", D),
    ("1P", "1P", D),
    ("1000P", "1E", D),
    ("1E", "1E", D),
    ("999E", "999E", D),
    // DecimalSI past E falls back to the exponent form.
    ("1000E", "1e21", D),
    ("1500E", "1500E", D),
    ("1000000P", "1e21", D),
    ("10000E", "10e21", D),
    ("1000000000000000000000", "1e21", D),
    ("1000000000000000000000000000000", "1e30", D),
    (
        "999999999999999999999999999999",
        "999999999999999999999999999999",
        D,
    ),
    // Plain numbers: exponent adjusted down to a multiple of 3.
    ("123456789", "123456789", D),
    ("1234567890", "1234567890", D),
    ("12000", "12k", D),
    ("120000", "120k", D),
    ("1200000", "1200k", D),
    ("3073741824", "3073741824", D),
    ("0.1", "100m", D),
    ("0.12", "120m", D),
    ("0.123", "123m", D),
    ("0.1234", "123400u", D),
    ("1.5", "1500m", D),
    // Signs, leading zeros, bare points.
    ("+1", "1", D),
    ("+007", "7", D),
    ("007Ki", "7Ki", B),
    ("-007.50m", "-7500u", D),
    (".5", "500m", D),
    ("5.", "5", D),
    ("-5.", "-5", D),
    ("00.5", "500m", D),
    ("000", "0", D),
    ("0.000", "0", D),
    ("-0", "0", D),
    ("-0.0", "0", D),
    ("+0", "0", D),
    ("0e5", "0", X),
    ("0E-5", "0", X),
    // Rounding up to the nano unit, away from zero.
    ("1.000000001", "1000000001n", D),
    ("1.0000000001", "1000000001n", D),
    ("1.00000000001", "1000000001n", D),
    ("-1.0000000001", "-1000000001n", D),
    ("1.0000000000", "1", D),
    ("0.00000000000000000000000001", "1n", D),
    ("-0.00000000000000000000000001", "-1n", D),
    ("0.0000000015", "2n", D),
    ("0.1n", "1n", D),
    ("1.5n", "2n", D),
    ("-1.5n", "-2n", D),
    ("0.001u", "1n", D),
    ("0.0015u", "2n", D),
    ("1.0001u", "1001n", D),
    // The exponent form.
    ("1e0", "1", X),
    ("1E0", "1", X),
    ("1e1", "10", X),
    ("1e2", "100", X),
    ("12e1", "120", X),
    ("123e2", "12300", X),
    ("1e+3", "1e3", X),
    ("1e03", "1e3", X),
    ("1e-03", "1e-3", X),
    ("1e-1", "100e-3", X),
    ("1e-2", "10e-3", X),
    ("1e-9", "1e-9", X),
    ("1e-10", "1e-9", X),
    ("-1e-10", "-1e-9", X),
    ("1.5e-9", "2e-9", X),
    ("15e-10", "2e-9", X),
    ("1e19", "10e18", X),
    ("1e21", "1e21", X),
    ("1.5e21", "1500e18", X),
    ("-2.5e6", "-2500e3", X),
    ("1e999", "1e999", X),
    ("9.99e999", "9990e996", X),
    ("0.0001e1000", "1e996", X),
    ("1e-2147483647", "1e-9", X),
    ("1.5e-2147483646", "1e-9", X),
];

/// The inputs of [`CASES`] that Kubernetes keeps as typed (see
/// `Quantity::kept_spelling`); every other input prints canonically.
const CASES_KEPT: &[&str] = &[
    "1023Ki",
    "1025Ki",
    "1024",
    "1Ki",
    "1n",
    "1500n",
    "1u",
    "1m",
    "100m",
    "1100m",
    "1500m",
    "250m",
    "1k",
    "1500k",
    "1M",
    "1G",
    "2T",
    "1P",
    "1E",
    "999E",
    "1500E",
    "123456789",
    "1234567890",
    "3073741824",
    "+1",
    "+007",
    "007Ki",
    "5.",
    "-5.",
    "1.000000001",
    "1e0",
    "1E0",
    "1e+3",
    "1e03",
    "1e-03",
    "1e-9",
    "1e21",
    "1e999",
];

/// Inputs Kubernetes rejects, and the error this crate names.
const REJECTED: &[(&str, ParseError)] = &[
    ("", ParseError::Empty),
    // The scanner stops on a character outside the grammar.
    ("5GB", ParseError::Format),
    ("1.1.1", ParseError::Format),
    ("1.5.5Gi", ParseError::Format),
    ("1KiB", ParseError::Format),
    ("1Mb", ParseError::Format),
    ("1 Mi", ParseError::Format),
    (" 1", ParseError::Format),
    ("1 ", ParseError::Format),
    ("1\n", ParseError::Format),
    ("\t1", ParseError::Format),
    ("1_000", ParseError::Format),
    ("1,5", ParseError::Format),
    ("0x10", ParseError::Format),
    ("1e1.5", ParseError::Format),
    ("1e3.5", ParseError::Format),
    ("1e3e3", ParseError::Format),
    ("1e-3m", ParseError::Format),
    ("--1", ParseError::Format),
    ("+-1", ParseError::Format),
    ("-+1", ParseError::Format),
    ("1-", ParseError::Suffix),
    ("1.1.M", ParseError::Format),
    ("1+1.0M", ParseError::Format),
    ("aoeu", ParseError::Format),
    ("١", ParseError::Format),
    ("½", ParseError::Format),
    ("1µ", ParseError::Format),
    ("NaN", ParseError::Format),
    ("inf", ParseError::Format),
    // A number part without a digit (Kubernetes' scanner reads these as zero;
    // see the crate's deviations).
    ("Mi", ParseError::Format),
    ("Ki", ParseError::Format),
    ("m", ParseError::Format),
    ("k", ParseError::Format),
    ("e3", ParseError::Format),
    ("E3", ParseError::Format),
    (".", ParseError::Format),
    ("-", ParseError::Format),
    ("+", ParseError::Format),
    ("-.", ParseError::Format),
    ("+.", ParseError::Format),
    ("-Mi", ParseError::Format),
    // A well-formed but unknown suffix.
    ("0.1mi", ParseError::Suffix),
    ("0.1am", ParseError::Format),
    ("1mi", ParseError::Suffix),
    ("1ki", ParseError::Suffix),
    ("1K", ParseError::Suffix),
    ("1EI", ParseError::Format),
    ("1ei", ParseError::Suffix),
    ("1i", ParseError::Suffix),
    (".5i", ParseError::Suffix),
    ("-3.01i", ParseError::Suffix),
    ("1mm", ParseError::Suffix),
    ("1kk", ParseError::Suffix),
    ("1PP", ParseError::Suffix),
    ("1Mi1", ParseError::Suffix),
    ("1Mi+", ParseError::Suffix),
    ("1n5", ParseError::Suffix),
    ("1e", ParseError::Suffix),
    ("1E+", ParseError::Suffix),
    ("1e-", ParseError::Suffix),
    ("-3.01e-", ParseError::Suffix),
    ("1ee3", ParseError::Suffix),
    ("1eE3", ParseError::Suffix),
    // Exponents beyond int64 (Kubernetes: ErrSuffix) and beyond int32
    // (Kubernetes wraps them; refused here).
    ("1e9223372036854775808", ParseError::Suffix),
    ("1e-9223372036854775809", ParseError::Suffix),
    ("1e-9223372036854775808", ParseError::Suffix),
    ("1e2147483648", ParseError::Suffix),
    ("1e-2147483649", ParseError::Suffix),
    // Exponents where Kubernetes' int32 scale (exponent - fraction digits)
    // wraps around.
    ("1e-2147483648", ParseError::Suffix),
    ("1.5e-2147483647", ParseError::Suffix),
    ("1.00E-2147483648", ParseError::Suffix),
    ("1.000e-2147483645", ParseError::Suffix),
    // Magnitudes of 10^100000 (MAX_INTEGER_DIGITS) and above.
    ("1e100000", ParseError::OutOfRange),
    ("10e99999", ParseError::OutOfRange),
    ("-1e100000", ParseError::OutOfRange),
    ("0.1e100001", ParseError::OutOfRange),
    ("9.9999e100000", ParseError::OutOfRange),
    ("1e100002", ParseError::OutOfRange),
    ("1e999999999", ParseError::OutOfRange),
    ("1e2147483647", ParseError::OutOfRange),
];

#[test]
fn canonical_strings() {
    for &(input, canonical, format) in CASES {
        let got = q(input);
        assert_eq!(got.canonical(), canonical, "{input}");
        assert_eq!(got.format(), format, "{input}: format");
    }
}

#[test]
fn display_prints_the_kept_spelling_or_the_canonical_string() {
    for &(input, canonical, _) in CASES {
        let got = q(input);
        let kept = CASES_KEPT.contains(&input);
        assert_eq!(got.kept_spelling(), kept.then_some(input), "{input}");
        assert_eq!(
            got.to_string(),
            if kept { input } else { canonical },
            "{input}"
        );
    }
    for &input in CASES_KEPT {
        assert!(CASES.iter().any(|&(row, _, _)| row == input), "{input}");
    }
}

#[test]
fn canonical_strings_reparse_to_the_same_value_and_string() {
    for &(input, canonical, _) in CASES {
        let got = q(input);
        let back = q(canonical);
        assert_eq!(back, got, "{input} → {canonical}");
        assert_eq!(back.to_string(), canonical, "{canonical} is not stable");
        assert_eq!(back.canonical(), canonical, "{canonical} is not stable");
    }
}

#[test]
fn rejected_inputs_name_their_error() {
    for (input, expected) in REJECTED {
        assert_eq!(
            input.parse::<Quantity>().as_ref().err(),
            Some(expected),
            "{input:?}"
        );
    }
}

#[test]
fn error_messages_match_kubernetes() {
    assert_eq!(
        "5GB".parse::<Quantity>().unwrap_err().to_string(),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    assert_eq!(
        "1mi".parse::<Quantity>().unwrap_err().to_string(),
        "unable to parse quantity's suffix"
    );
}

#[test]
fn long_inputs_are_exact() {
    let many_nines = format!("0.{}", "9".repeat(500));
    // 0.999…9 rounds up to exactly 1.
    assert_eq!(q(&many_nines).to_string(), "1");
    let tiny_binary = format!("0.{}1Ki", "0".repeat(400));
    assert_eq!(q(&tiny_binary).to_string(), "1n");
    let long_integer = "9".repeat(MAX_INTEGER_DIGITS as usize);
    assert_eq!(q(&long_integer).to_string(), long_integer);
    let too_long = "9".repeat(MAX_INTEGER_DIGITS as usize + 1);
    assert_eq!(too_long.parse::<Quantity>(), Err(ParseError::OutOfRange));
    let power = format!("1{}", "0".repeat(MAX_INTEGER_DIGITS as usize));
    assert_eq!(power.parse::<Quantity>(), Err(ParseError::OutOfRange));
    // Leading zeros do not count towards the limit; Kubernetes keeps this
    // spelling (its num is "1"), so it prints back as typed.
    let padded = format!("{}1", "0".repeat(5000));
    assert_eq!(q(&padded).canonical(), "1");
    assert_eq!(q(&padded).to_string(), padded);
    // Nor do fraction digits below 1n.
    let long_fraction = format!("1.{}", "3".repeat(200_000));
    assert_eq!(q(&long_fraction).to_string(), "1333333334n");
}

#[test]
fn the_magnitude_bound_is_at_ten_to_the_hundred_thousand() {
    assert_eq!(MAX_INTEGER_DIGITS, 100_000);
    // Kubernetes accepts 1e1000 and prints 10e999; so does this crate.
    assert_eq!(q("1e1000").to_string(), "10e999");
    assert_eq!(q("-1e1000").to_string(), "-10e999");
    assert_eq!(q("1000E").to_string(), "1e21");
    // Just below the bound: accepted, exact, printed as Kubernetes would.
    let top = q("1e99999");
    assert_eq!(top.to_string(), "1e99999");
    assert_eq!(top.canonical(), "1e99999");
    assert_eq!(q("1E99999").to_string(), "1E99999");
    assert_eq!(q("1E99999").canonical(), "1e99999");
    assert_eq!(q("10e99998").to_string(), "1e99999");
    assert_eq!(q("9.99e99999").to_string(), "9990e99996");
    assert!(q("1e99999") > q("9e99998"));
    let just_below = format!("9.{}e99999", "9".repeat(50));
    assert_eq!(
        q(&just_below).canonical(),
        format!("{}0e99948", "9".repeat(51))
    );
    let just_above = format!("1{}e99949", "0".repeat(51));
    assert_eq!(just_above.parse::<Quantity>(), Err(ParseError::OutOfRange));
    // A tiny part added to a value near the bound is kept exactly.
    let sum = top.add(&q("1n"));
    assert_eq!(sum.to_string(), format!("1{}1e-9", "0".repeat(99_999 + 8)));
    assert_eq!(sum.sub(&q("1n")), top);
    // At and past the bound: refused before anything is built.
    for input in [
        "1e100000",
        "-1e100000",
        "10e99999",
        "1e100000000",
        "1e999999999",
        "1e2147483647",
    ] {
        assert_eq!(
            input.parse::<Quantity>(),
            Err(ParseError::OutOfRange),
            "{input}"
        );
    }
    assert_eq!(
        ParseError::OutOfRange.to_string(),
        "quantity is too large: its magnitude must be below 10^100000"
    );
    // Tiny values have no bound: they round up to 1n, as in Kubernetes.
    assert_eq!(q("1e-99999").to_string(), "1e-9");
    assert_eq!(q("1e-999999999").to_string(), "1e-9");
    assert_eq!(q("-1e-999999999").to_string(), "-1e-9");
}

#[test]
fn issue_examples_print_as_kubernetes_prints_them() {
    // The kept spelling (Kubernetes' q.s) and the canonical string.
    for (input, display, canonical) in [
        ("9264.126m", "9264.126m", "9264126u"),
        ("+2Gi", "+2Gi", "2Gi"),
        ("1.", "1.", "1"),
        ("1e1000", "10e999", "10e999"),
        ("1.500k", "1.500k", "1500"),
        ("1E3", "1E3", "1e3"),
        ("007", "007", "7"),
        ("-007", "-007", "-7"),
        ("1.G", "1.G", "1G"),
        ("1.Gi", "1.Gi", "1Gi"),
        ("12Ki", "12Ki", "12Ki"),
        ("1.25e5", "1.25e5", "125e3"),
        ("1.100", "1.100", "1100m"),
        ("0", "0", "0"),
        // Not kept: Kubernetes prints the canonical string.
        ("1.5", "1500m", "1500m"),
        ("0.5", "500m", "500m"),
        (".5", "500m", "500m"),
        ("1000", "1k", "1k"),
        ("1.000", "1", "1"),
        ("1e4", "10e3", "10e3"),
        ("1.5n", "2n", "2n"),
        ("+8Gi", "8Gi", "8Gi"),
        ("1024Ki", "1Mi", "1Mi"),
        ("1.5Gi", "1536Mi", "1536Mi"),
        ("+1Pi", "1Pi", "1Pi"),
        ("+100Ti", "100Ti", "100Ti"),
        ("+0", "0", "0"),
        ("-0", "0", "0"),
        ("00", "0", "0"),
        ("0Ki", "0", "0"),
        // 19 digits: past Kubernetes' int64 fast path.
        (
            "+1234567890123456789",
            "1234567890123456789",
            "1234567890123456789",
        ),
        (
            "+123456789012345678",
            "+123456789012345678",
            "123456789012345678",
        ),
        ("+99999999999Ki", "+99999999999Ki", "99999999999Ki"),
        ("+999999999999Ki", "999999999999Ki", "999999999999Ki"),
    ] {
        let got = q(input);
        assert_eq!(got.to_string(), display, "{input}");
        assert_eq!(got.canonical(), canonical, "{input}: canonical");
        assert_eq!(
            serde_json::to_string(&got).unwrap(),
            format!("\"{display}\""),
            "{input}: JSON"
        );
    }
}

#[test]
fn equality_ignores_the_spelling() {
    assert_eq!(q("+2Gi"), q("2Gi"));
    assert_eq!(q("9264.126m"), q("9264126u"));
    assert_eq!(q("1."), q("1"));
    assert_eq!(q("007"), q("7"));
    assert_eq!(q("1E3"), q("1k"));
    use std::collections::HashSet;
    let set: HashSet<Quantity> = ["+2Gi", "2Gi", "2048Mi", "2.Gi"]
        .iter()
        .map(|s| q(s))
        .collect();
    assert_eq!(set.len(), 1);
}

#[test]
fn computed_values_print_canonically() {
    let kept = q("9264.126m");
    assert_eq!(kept.clone().to_string(), "9264.126m", "clone keeps it");
    assert_eq!(kept.add(&Quantity::zero()).to_string(), "9264126u");
    assert_eq!(Quantity::zero().add(&kept).to_string(), "9264126u");
    assert_eq!(kept.sub(&Quantity::zero()).to_string(), "9264126u");
    assert_eq!(kept.neg().to_string(), "-9264126u");
    assert_eq!(kept.neg().neg().to_string(), "9264126u");
    assert_eq!(kept.scale_percent(100).to_string(), "9264126u");
    assert_eq!(
        kept.saturating_sub(&Quantity::zero()).to_string(),
        "9264126u"
    );
    assert_eq!(kept.clone().with_format(D).to_string(), "9264126u");
    assert_eq!(kept.clone().into_canonical().to_string(), "9264126u");
    assert_eq!(kept.clone().into_canonical().kept_spelling(), None);
    assert_eq!(q("+2Gi").with_format(X).to_string(), "2147483648");
    assert_eq!(Quantity::new(2, D).kept_spelling(), None);
}

#[test]
fn json_keeps_the_spelling_both_ways() {
    let got: Quantity = serde_json::from_str(r#"" +2Gi ""#).unwrap();
    assert_eq!(got.to_string(), "+2Gi");
    assert_eq!(serde_json::to_string(&got).unwrap(), r#""+2Gi""#);
    let got: Quantity = serde_json::from_str(r#""1.5""#).unwrap();
    assert_eq!(serde_json::to_string(&got).unwrap(), r#""1500m""#);
    let got: Quantity = serde_json::from_str("1000").unwrap();
    assert_eq!(serde_json::to_string(&got).unwrap(), r#""1k""#);
    let got: Quantity = serde_json::from_str(r#""1e1000""#).unwrap();
    assert_eq!(serde_json::to_string(&got).unwrap(), r#""10e999""#);
}

#[test]
fn values_compare_across_formats() {
    assert_eq!(q("1Gi"), q("1073741824"));
    assert_eq!(q("1Ki"), q("1024"));
    assert_eq!(q("1k"), q("1e3"));
    assert_eq!(q("500m"), q("0.5"));
    assert_eq!(q("1E"), q("1e18"));
    assert!(q("1Gi") > q("1G"));
    assert!(q("1Ki") > q("1k"));
    assert!(q("-1") < q("0"));
    assert!(q("1n") > q("0"));
    assert!(q("999m") < q("1"));
    assert!(q("-1Gi") < q("-1G"));
    assert!(q("1e21") > q("999E"));
    let mut sorted: Vec<Quantity> = ["1Gi", "1", "-5", "1500m", "1k", "1Ki", "0"]
        .iter()
        .map(|s| q(s))
        .collect();
    sorted.sort();
    let printed: Vec<String> = sorted.iter().map(ToString::to_string).collect();
    assert_eq!(printed, ["-5", "0", "1", "1500m", "1k", "1Ki", "1Gi"]);
}

#[test]
fn equal_values_hash_alike() {
    use std::collections::HashSet;
    let set: HashSet<Quantity> = ["1Gi", "1073741824", "1024Mi", "1.0Gi", "1G"]
        .iter()
        .map(|s| q(s))
        .collect();
    assert_eq!(set.len(), 2);
}

#[test]
fn debug_shows_the_printed_string() {
    assert_eq!(format!("{:?}", q("1024Mi")), r#"Quantity("1Gi", BinarySI)"#);
    assert_eq!(format!("{:?}", q("+2Gi")), r#"Quantity("+2Gi", BinarySI)"#);
}

/// A BinarySI value that is no multiple of 1024 prints as a plain number,
/// which Kubernetes reads back as DecimalSI: the same value, printed with a
/// decimal suffix from then on (found by `properties::print_then_parse_is_identity`).
#[test]
fn binary_values_off_1024_read_back_as_decimal() {
    for (value, plain, decimal) in [
        ("2000", "2000", "2k"),
        (
            "-1377963907582315000",
            "-1377963907582315000",
            "-1377963907582315k",
        ),
    ] {
        let binary = q(value).with_format(B);
        assert_eq!(binary.to_string(), plain);
        let back = q(plain);
        assert_eq!(back, binary);
        assert_eq!(back.format(), D);
        assert_eq!(back.to_string(), decimal);
    }
    // A multiple of 1024 keeps its binary suffix both ways.
    assert_eq!(q("2048").with_format(B).to_string(), "2Ki");
}
