//! Hostile inputs for the quantity parser: arbitrary bytes and unicode, long
//! digit runs, piles of signs, dots and exponents, exponents at the int32 and
//! magnitude bounds. The parser must never panic, must answer quickly, must
//! never accept what Kubernetes refuses, and what it accepts must print what
//! Kubernetes prints.
//!
//! Kubernetes is modelled here from its Go source (k8s.io/apimachinery
//! `pkg/api/resource/quantity.go`: `parseQuantityString`, `ParseQuantity`;
//! `suffix.go`: `interpret`), ported line by line and independently of the
//! crate's own scanner, plus the regular expression its error message names.

use std::time::{Duration, Instant};

use num_bigint::{BigInt, BigUint};
use num_traits::{One, Signed, Zero};
use proptest::prelude::*;
use quantity::{ParseError, Quantity, MAX_INTEGER_DIGITS};

/// What Go's `parseQuantityString` returns on success.
#[derive(Debug, Clone, Copy)]
struct GoScan<'a> {
    positive: bool,
    value: &'a str,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// `parseQuantityString`, line by line (byte offsets as in Go).
fn go_parse_quantity_string(s: &str) -> Option<GoScan<'_>> {
    let b = s.as_bytes();
    let end = b.len();
    let mut positive = true;
    let mut pos = 0;
    if pos < end {
        match b[0] {
            b'-' => {
                positive = false;
                pos += 1;
            }
            b'+' => pos += 1,
            _ => {}
        }
    }
    // strip leading zeros
    let mut i = pos;
    loop {
        if i >= end {
            return Some(GoScan {
                positive,
                value: "0",
                num: "0",
                denom: "",
                suffix: "",
            });
        }
        if b[i] == b'0' {
            pos += 1;
            i += 1;
        } else {
            break;
        }
    }
    // extract the numerator
    let mut num;
    let mut i = pos;
    loop {
        if i >= end {
            return Some(GoScan {
                positive,
                value: s,
                num: &s[pos..end],
                denom: "",
                suffix: "",
            });
        }
        if b[i].is_ascii_digit() {
            i += 1;
        } else {
            num = &s[pos..i];
            pos = i;
            break;
        }
    }
    if num.is_empty() {
        num = "0";
    }
    // handle a denominator
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let mut i = pos;
        loop {
            if i >= end {
                return Some(GoScan {
                    positive,
                    value: s,
                    num,
                    denom: &s[pos..end],
                    suffix: "",
                });
            }
            if b[i].is_ascii_digit() {
                i += 1;
            } else {
                denom = &s[pos..i];
                pos = i;
                break;
            }
        }
    }
    let value = &s[..pos];
    // grab the elements of the suffix
    let suffix_start = pos;
    let mut i = pos;
    loop {
        if i >= end {
            return Some(GoScan {
                positive,
                value,
                num,
                denom,
                suffix: &s[suffix_start..end],
            });
        }
        if !b"eEinumkKMGTP".contains(&b[i]) {
            pos = i;
            break;
        }
        i += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    let mut i = pos;
    loop {
        if i >= end {
            return Some(GoScan {
                positive,
                value,
                num,
                denom,
                suffix: &s[suffix_start..end],
            });
        }
        if b[i].is_ascii_digit() {
            i += 1;
        } else {
            break;
        }
    }
    // a non-decimal in the Suffix loop: ErrFormatWrong
    None
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum GoFormat {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

/// `suffixHandler.interpret`: (base, exponent as int32, format).
fn go_interpret(suffix: &str) -> Option<(u32, i32, GoFormat)> {
    let dec = [
        ("n", -9),
        ("u", -6),
        ("m", -3),
        ("", 0),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
        ("E", 18),
    ];
    let bin = [
        ("Ki", 10),
        ("Mi", 20),
        ("Gi", 30),
        ("Ti", 40),
        ("Pi", 50),
        ("Ei", 60),
    ];
    if let Some(&(_, e)) = dec.iter().find(|(s, _)| *s == suffix) {
        return Some((10, e, GoFormat::DecimalSI));
    }
    if let Some(&(_, e)) = bin.iter().find(|(s, _)| *s == suffix) {
        return Some((2, e, GoFormat::BinarySI));
    }
    if suffix.len() > 1 && (suffix.starts_with('e') || suffix.starts_with('E')) {
        // strconv.ParseInt(s, 10, 64): optional sign, digits, no overflow
        // (Rust's i64 parser takes the same strings). Then int32(parsed).
        let parsed: i64 = suffix[1..].parse().ok()?;
        return Some((10, parsed as i32, GoFormat::DecimalExponent));
    }
    None
}

/// The regular expression of Kubernetes' format error,
/// `^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`.
fn matches_kubernetes_regexp(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let start = i;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    if i == start {
        return false;
    }
    while i < b.len() && b"eEinumkKMGTP".contains(&b[i]) {
        i += 1;
    }
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i == b.len()
}

/// What Kubernetes does with `s`, as far as acceptance and `q.s` go.
#[derive(Debug)]
struct GoResult<'a> {
    scan: GoScan<'a>,
    exponent: i32,
    format: GoFormat,
    /// `ParseQuantity` set `q.s = str`.
    kept: bool,
}

/// `ParseQuantity`, for inputs whose number part has a digit (Kubernetes'
/// handling of digit-less numbers is a documented deviation: refused here).
fn go_parse_quantity(s: &str) -> Option<GoResult<'_>> {
    if s.is_empty() {
        return None;
    }
    let scan = go_parse_quantity_string(s)?;
    let (_base, exponent, format) = go_interpret(scan.suffix)?;
    if s == "0" {
        return Some(GoResult {
            scan,
            exponent,
            format,
            kept: true,
        });
    }
    let (num, denom) = (scan.num, scan.denom);
    let precision: i32;
    let mut scale: i32;
    let mut mantissa: i64 = 1;
    match format {
        GoFormat::DecimalExponent | GoFormat::DecimalSI => {
            scale = exponent;
            precision = 18 - (num.len() + denom.len()) as i32;
        }
        GoFormat::BinarySI => {
            scale = 0;
            if exponent >= 0 && denom.is_empty() {
                mantissa <<= exponent;
                precision = 15 - num.len() as i32 - (exponent as f32 * 3.0 / 10.0) as i32 - 1;
            } else {
                precision = -1;
            }
        }
    }
    let mut kept = false;
    let mut fast = false;
    if precision >= 0 {
        scale = scale.wrapping_sub(denom.len() as i32);
        if scale >= -9 {
            let shifted = format!("{num}{denom}");
            let value: i64 = shifted.parse().expect("at most 18 digits");
            if value.checked_mul(mantissa).is_some() {
                fast = true;
                kept = match format {
                    GoFormat::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                    _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
                };
            }
        }
    }
    if !fast && !scan.value.bytes().any(|c| c.is_ascii_digit()) {
        // inf.Dec's SetString refuses a number without a digit: ErrNumeric.
        return None;
    }
    Some(GoResult {
        scan,
        exponent,
        format,
        kept,
    })
}

/// Whether the number part of `s` (all but the suffix) has a digit. (Go's
/// `value` will not do: its early return for `"-"` or `"000"` sets it to `"0"`.)
fn has_digit_in_number(s: &str, go: &GoResult<'_>) -> bool {
    s[..s.len() - go.scan.suffix.len()]
        .bytes()
        .any(|c| c.is_ascii_digit())
}

/// The exact value Kubernetes gives `s`, in nano units: the decimal number
/// times its suffix, rounded up (away from zero) to 1n; binary values capped
/// at 2^63-1. Computed as a fraction, independently of the crate.
fn exact_nanos(go: &GoResult<'_>) -> BigInt {
    let digits = format!("{}{}", go.scan.num, go.scan.denom);
    let mut numerator: BigUint = digits.parse().unwrap();
    let mut denominator = BigUint::from(10u32).pow(go.scan.denom.len() as u32);
    numerator *= BigUint::from(1_000_000_000u32);
    match go.format {
        GoFormat::BinarySI => numerator <<= go.exponent as usize,
        _ if go.exponent >= 0 => numerator *= BigUint::from(10u32).pow(go.exponent as u32),
        _ => denominator *= BigUint::from(10u32).pow(go.exponent.unsigned_abs()),
    }
    let mut nanos = (&numerator + &denominator - BigUint::one()) / &denominator;
    if go.format == GoFormat::BinarySI {
        let cap = BigUint::from(i64::MAX as u64) * BigUint::from(1_000_000_000u32);
        nanos = nanos.min(cap);
    }
    let nanos = BigInt::from(nanos);
    if go.scan.positive {
        nanos
    } else {
        -nanos
    }
}

fn from_nanos(nanos: &BigInt) -> Quantity {
    format!("{nanos}n")
        .parse()
        .expect("a whole number of nanos parses")
}

/// Upper bound of the decimal digits before the point, for the inputs whose
/// acceptance depends on the magnitude bound.
fn small_enough(s: &str, go: &GoResult<'_>) -> bool {
    s.len() <= 40_000 && go.exponent.unsigned_abs() <= 50_000
}

const TIME_LIMIT: Duration = Duration::from_secs(10);

/// Every check that holds for any input.
fn check(s: &str) -> Result<(), TestCaseError> {
    let start = Instant::now();
    let ours = s.parse::<Quantity>();
    let elapsed = start.elapsed();
    prop_assert!(elapsed < TIME_LIMIT, "{} bytes took {:?}", s.len(), elapsed);

    let go = go_parse_quantity(s);
    match (&ours, &go) {
        (Ok(q), None) => {
            prop_assert!(false, "{:?} accepted as {:?}; Kubernetes refuses it", s, q)
        }
        (Ok(q), Some(go)) => {
            prop_assert!(matches_kubernetes_regexp(s), "{:?} outside the regexp", s);
            prop_assert!(has_digit_in_number(s, go), "{:?} has no digit", s);
            // Printing: Kubernetes' q.s when it keeps the input, else canonical.
            let canonical = q.canonical();
            let printed = q.to_string();
            if go.kept {
                prop_assert_eq!(&printed, s, "Kubernetes keeps {:?}", s);
                prop_assert_eq!(q.kept_spelling(), Some(s));
            } else {
                prop_assert_eq!(&printed, &canonical, "Kubernetes canonicalizes {:?}", s);
                prop_assert_eq!(q.kept_spelling(), None);
            }
            // The canonical string parses to the same value and prints as
            // itself; so does the printed string.
            let back: Quantity = canonical.parse().expect("canonical parses");
            prop_assert_eq!(&back, q);
            prop_assert_eq!(back.to_string(), canonical.clone());
            prop_assert_eq!(back.canonical(), canonical.clone());
            let again: Quantity = printed.parse().expect("printed parses");
            prop_assert_eq!(&again, q);
            prop_assert_eq!(again.to_string(), printed.clone());
            // JSON: MarshalJSON writes the printed string.
            let json = serde_json::to_string(q).unwrap();
            prop_assert_eq!(&json, &format!("\"{printed}\""));
            let decoded: Quantity = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&decoded, q);
            prop_assert_eq!(decoded.to_string(), printed);
            // The value, exactly, for inputs small enough to compute.
            if s.len() <= 300 && go.exponent.unsigned_abs() <= 300 {
                let nanos = exact_nanos(go);
                prop_assert_eq!(q, &from_nanos(&nanos), "value of {:?}", s);
            }
        }
        (Err(e), Some(go)) => {
            // Refused although Kubernetes accepts: only the documented cases.
            let exponent_out_of_int32 = go.format == GoFormat::DecimalExponent
                && go.scan.suffix[1..]
                    .parse::<i64>()
                    .map_or(true, |e| i32::try_from(e).is_err());
            // Kubernetes' int32 `scale -= len(denom)` wraps.
            let scale_wraps = go.format == GoFormat::DecimalExponent
                && i64::from(go.exponent) - go.scan.denom.len() as i64 <= i64::from(i32::MIN);
            let allowed = !has_digit_in_number(s, go)
                || exponent_out_of_int32
                || scale_wraps
                || (*e == ParseError::OutOfRange && !small_enough(s, go));
            prop_assert!(allowed, "{:?} refused ({:?}); Kubernetes accepts it", s, e);
        }
        (Err(_), None) => {}
    }
    Ok(())
}

/// Numbers over the quantity alphabet, with runs of signs, zeros, dots.
fn structured() -> impl Strategy<Value = String> {
    (
        "[-+]{0,3}",
        "0{0,25}",
        "[0-9]{0,25}",
        "(\\.{1,2}[0-9]{0,25})?",
        prop_oneof![
            Just(String::new()),
            "[numkMGTPE]",
            "[KMGTPE]i",
            "[eE][-+]{0,2}[0-9]{0,12}",
            "[eEinumkKMGTP]{0,4}[-+]?[0-9]{0,4}",
            "[ a-zA-Z_.,\\-+µ½٣]{0,3}",
        ],
    )
        .prop_map(|(signs, zeros, int, frac, suffix)| format!("{signs}{zeros}{int}{frac}{suffix}"))
}

/// Numbers made mostly of zeros (trailing `000`, leading `0`, `0.`, scales
/// that are and are not multiples of 3): where Kubernetes' keep-or-canonicalize
/// decision turns.
fn zero_heavy() -> impl Strategy<Value = String> {
    let digits = "(0|1|5|8|9|0{2,4}){0,7}";
    (
        "[-+]?",
        digits,
        prop_oneof![
            Just(String::new()),
            Just(".".to_owned()),
            digits.prop_map(|d| format!(".{d}"))
        ],
        prop_oneof![
            Just(String::new()),
            "[numkMGTPE]",
            "[KMGTPE]i",
            "[eE][-+]?(0|1|2|3|6|9|10|12|18|21|999|1000)",
        ],
    )
        .prop_map(|(sign, int, frac, suffix)| format!("{sign}{int}{frac}{suffix}"))
}

/// Long runs of one digit, around a point, with a suffix.
fn long_runs() -> impl Strategy<Value = String> {
    (
        "[-+]?",
        prop_oneof![Just('0'), Just('1'), Just('9'), Just('5')],
        0usize..5000,
        "[0-9]?",
        prop_oneof![Just(""), Just("0."), Just("."), Just("1.")],
        prop_oneof![
            Just(""),
            Just("n"),
            Just("Ki"),
            Just("Ei"),
            Just("E"),
            Just("e-5000"),
            Just("e99990"),
            Just("e-99990"),
        ],
    )
        .prop_map(|(sign, digit, count, last, head, suffix)| {
            format!(
                "{sign}{head}{}{last}{suffix}",
                digit.to_string().repeat(count)
            )
        })
}

/// Exponents around int32's ends and the magnitude bound.
fn edge_exponents() -> impl Strategy<Value = String> {
    let bound = MAX_INTEGER_DIGITS;
    (
        "[-+]?[0-9]{1,3}(\\.[0-9]{0,3})?",
        "[eE]",
        prop_oneof![
            (i64::from(i32::MIN) - 3..i64::from(i32::MIN) + 40),
            (i64::from(i32::MAX) - 40..i64::from(i32::MAX) + 3),
            (bound - 8..bound + 8),
            (-bound - 8..-bound + 8),
            any::<i64>(),
            (-30i64..30),
        ],
        prop_oneof![Just(""), Just("+"), Just("0")],
    )
        .prop_map(|(number, e, exponent, pad)| {
            if exponent >= 0 {
                format!("{number}{e}{pad}{exponent}")
            } else {
                format!("{number}{e}{exponent}")
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_unicode(s in any::<String>()) {
        check(&s)?;
    }

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn the_quantity_alphabet(s in "[-+0-9.eEinumkKMGTP]{0,40}") {
        check(&s)?;
    }

    #[test]
    fn structured_numbers(s in structured()) {
        check(&s)?;
    }

    #[test]
    fn zero_heavy_numbers(s in zero_heavy()) {
        check(&s)?;
    }

    #[test]
    fn edge_exponent_values(s in edge_exponents()) {
        check(&s)?;
    }

    #[test]
    fn signs_agree(s in "[0-9]{1,20}(\\.[0-9]{0,20})?([numkMGTPE]|[KMGTPE]i|[eE]-?[0-9]{1,3})?") {
        let plain = s.parse::<Quantity>();
        let plus = format!("+{s}").parse::<Quantity>();
        let minus = format!("-{s}").parse::<Quantity>();
        prop_assert_eq!(plain.is_ok(), plus.is_ok());
        prop_assert_eq!(plain.is_ok(), minus.is_ok());
        if let (Ok(plain), Ok(plus), Ok(minus)) = (plain, plus, minus) {
            prop_assert_eq!(&plus, &plain);
            prop_assert_eq!(&minus, &plain.neg());
            // The sign does not change whether Kubernetes keeps the spelling
            // (of a non-zero value: of zeros it keeps only "0").
            if !plain.is_zero() {
                prop_assert_eq!(plain.kept_spelling().is_some(), plus.kept_spelling().is_some());
                prop_assert_eq!(plain.kept_spelling().is_some(), minus.kept_spelling().is_some());
            }
            prop_assert_eq!(minus.canonical(), plain.neg().canonical());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn long_digit_runs(s in long_runs()) {
        check(&s)?;
    }
}

/// The worst inputs found so far, each parsed (and printed) well within the
/// time limit and without building anything near the input's exponent.
#[test]
fn worst_cases_are_cheap() {
    let bound = MAX_INTEGER_DIGITS as usize;
    let inputs = [
        "1e99999".to_owned(),
        "-9.999e99999".to_owned(),
        "9".repeat(bound),
        "9".repeat(bound + 1),
        format!("1{}", "0".repeat(1_000_000)),
        format!("0.{}Ki", "9".repeat(1_000_000)),
        format!("0.{}1Ki", "0".repeat(1_000_000)),
        format!("0.{}1", "0".repeat(1_000_000)),
        format!("1.{}e99990", "1".repeat(1_000_000)),
        format!("{}1", "0".repeat(1_000_000)),
        "+".repeat(1_000_000),
        ".".repeat(1_000_000),
        "e".repeat(1_000_000),
        format!("1{}", "e".repeat(1_000_000)),
        format!("1e{}", "9".repeat(1_000_000)),
        "1e999999999".to_owned(),
        "1e-999999999".to_owned(),
        "1e2147483647".to_owned(),
        "1e-2147483648".to_owned(),
        "1e-2147483647".to_owned(),
        "1.5e-2147483648".to_owned(),
        "1.00E-2147483648".to_owned(),
        "1e9223372036854775807".to_owned(),
        "7.99999999999999999999999999999999999999999999999999Ei".to_owned(),
    ];
    for input in &inputs {
        let start = Instant::now();
        let parsed = input.parse::<Quantity>();
        if let Ok(q) = &parsed {
            let _ = q.to_string();
            let _ = q.canonical();
        }
        let elapsed = start.elapsed();
        assert!(
            elapsed < TIME_LIMIT,
            "{}… ({} bytes) took {elapsed:?}",
            &input[..input.len().min(20)],
            input.len()
        );
        check(input).unwrap();
    }
}

/// Binary values read only the fraction digits that can change the result
/// (see the crate's parser); compare with the exact fraction on inputs long
/// enough to be cut.
#[test]
fn long_binary_fractions_round_exactly() {
    let cases = [
        // 1/1024 exactly, then a tail: just above 1 (in units of 1Ki).
        format!("0.0009765625{}1Ki", "0".repeat(200)),
        format!("0.0009765624{}Ki", "9".repeat(200)),
        format!("1.{}1Ki", "0".repeat(300)),
        format!("0.{}1Ei", "0".repeat(40)),
        format!("0.{}1Ei", "0".repeat(100)),
        format!("5.{}Ei", "9".repeat(300)),
        format!("3.{}Mi", "3".repeat(300)),
        format!("-2.{}7Gi", "0".repeat(60)),
        // Exactly on the 1n grid, with a zero tail (stripped) and without.
        format!("0.000000000931322574615478515625{}Gi", "0".repeat(100)),
        format!("0.000000000931322574615478515625{}1Gi", "0".repeat(100)),
        format!("0.000000000931322574615478515624{}Gi", "9".repeat(100)),
    ];
    for input in &cases {
        let q: Quantity = input.parse().unwrap();
        let go = go_parse_quantity(input).unwrap();
        assert_eq!(q, from_nanos(&exact_nanos(&go)), "{input}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn binary_fractions_round_exactly(
        int in "[0-9]{0,3}",
        frac in "[0-9]{0,120}",
        suffix in "[KMGTPE]i",
        negative in any::<bool>(),
    ) {
        let input = format!("{}{int}.{frac}{suffix}", if negative { "-" } else { "" });
        let go = go_parse_quantity(&input);
        match input.parse::<Quantity>() {
            Ok(q) => {
                let go = go.expect("Kubernetes accepts what has a digit");
                let exact = exact_nanos(&go);
                prop_assert_eq!(&q, &from_nanos(&exact), "{}", input);
                // A non-zero binary value below 1 becomes DecimalSI.
                let below_one = exact.abs() < BigInt::from(1_000_000_000u32);
                let expected = if below_one && !exact.is_zero() {
                    quantity::Format::DecimalSI
                } else {
                    quantity::Format::BinarySI
                };
                prop_assert_eq!(q.format(), expected, "{}", input);
            }
            Err(e) => {
                // Only "." with no digits at all.
                prop_assert!(int.is_empty() && frac.is_empty(), "{} refused: {:?}", input, e);
            }
        }
    }
}
