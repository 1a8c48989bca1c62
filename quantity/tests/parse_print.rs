//! Parsing and canonical printing beyond the Kubernetes tables: every suffix,
//! binary/decimal fallbacks, nano rounding, the exponent form, limits, and
//! the exact error for each kind of bad input.

use quantity::{Format, ParseError, Quantity};

use Format::{BinarySI as B, DecimalExponent as X, DecimalSI as D};

fn q(s: &str) -> Quantity {
    s.parse()
        .unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
}

/// input → (canonical string, format after parsing).
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
    ("1e-2147483648", "1e-9", X),
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
    // Magnitudes of 10^1000 and above.
    ("1e1000", ParseError::OutOfRange),
    ("10e999", ParseError::OutOfRange),
    ("1e2147483647", ParseError::OutOfRange),
    ("-1e1000", ParseError::OutOfRange),
];

#[test]
fn canonical_strings() {
    for &(input, canonical, format) in CASES {
        let got = q(input);
        assert_eq!(got.to_string(), canonical, "{input}");
        assert_eq!(got.format(), format, "{input}: format");
    }
}

#[test]
fn canonical_strings_reparse_to_the_same_value_and_string() {
    for &(input, canonical, _) in CASES {
        let got = q(input);
        let back = q(canonical);
        assert_eq!(back, got, "{input} → {canonical}");
        assert_eq!(back.to_string(), canonical, "{canonical} is not stable");
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
    let long_integer = "9".repeat(1000);
    assert_eq!(q(&long_integer).to_string(), long_integer);
    let too_long = "9".repeat(1001);
    assert_eq!(too_long.parse::<Quantity>(), Err(ParseError::OutOfRange));
    // Leading zeros do not count towards the limit.
    let padded = format!("{}1", "0".repeat(5000));
    assert_eq!(q(&padded).to_string(), "1");
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
fn debug_shows_the_canonical_string() {
    assert_eq!(format!("{:?}", q("1024Mi")), r#"Quantity("1Gi", BinarySI)"#);
}
