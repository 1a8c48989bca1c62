//! The one duration grammar of every flag, environment variable and config
//! file value of the project's binaries: [humantime]'s, plus bare seconds.
//!
//! - a number and a unit: `500ms`, `30s`, `5m`, `2h`, `7d`, `1w`; units may be
//!   combined, with or without spaces: `1h 30m`, `1m30s`; long names work too
//!   (`30sec`, `5min`, `2hours`, `7days`);
//! - a bare whole number is seconds (`30` = `30s`), so flags and environment
//!   variables written before the grammar was unified keep their meaning;
//! - a fraction needs a unit (`1.5s`, `0.5h`; a bare `0.5` is refused), and
//!   nothing is negative.
//!
//! [`parse`] is usable directly as a clap `value_parser`; [`format`] prints a
//! duration back in the same grammar.

use std::time::Duration;

/// Parse a duration written in the grammar above.
///
/// The error names the value and shows the grammar, so a flag that is wrong
/// tells the user how to write it.
pub fn parse(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("empty duration: write e.g. 30s, 5m, 1h 30m, 7d".into());
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return trimmed
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("duration {trimmed:?} is too large"));
    }
    humantime::parse_duration(trimmed).map_err(|error| {
        let hint = if trimmed.contains('.') && trimmed.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            " (a fraction needs a unit: 1.5s, not 1.5)"
        } else if trimmed.starts_with('-') {
            " (durations are never negative)"
        } else {
            ""
        };
        format!(
            "invalid duration {trimmed:?}: {error}{hint}; write e.g. 500ms, 30s, 5m, 1h 30m, 7d, or bare seconds"
        )
    })
}

/// Print a duration in the same grammar (`1h 30m`, `500ms`); [`parse`] reads
/// it back to the same value.
pub fn format(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_combinations() {
        for (text, want) in [
            ("500ms", Duration::from_millis(500)),
            ("30s", Duration::from_secs(30)),
            ("5m", Duration::from_secs(300)),
            ("2h", Duration::from_secs(7200)),
            ("7d", Duration::from_secs(7 * 86_400)),
            ("1w", Duration::from_secs(7 * 86_400)),
            ("1h 30m", Duration::from_secs(5400)),
            ("1m30s", Duration::from_secs(90)),
            ("5min", Duration::from_secs(300)),
            ("2hours", Duration::from_secs(7200)),
            (" 10s ", Duration::from_secs(10)),
            ("0s", Duration::ZERO),
            ("250us", Duration::from_micros(250)),
            ("1.5s", Duration::from_millis(1500)),
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bare_numbers_are_seconds() {
        assert_eq!(parse("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("86400"), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn refusals_say_how_to_write_it() {
        for bad in [
            "",
            "  ",
            "5x",
            "ms",
            "-1s",
            "-5",
            "0.5",
            "1.2.3s",
            "s5",
            "1 h x",
            "30 seconds ago",
        ] {
            let error = parse(bad).expect_err(bad);
            assert!(error.contains("e.g."), "{bad}: {error}");
        }
        assert!(parse("0.5").unwrap_err().contains("needs a unit"));
        assert!(parse("-1s").unwrap_err().contains("negative"));
        assert!(parse("99999999999999999999999")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn format_reads_back() {
        for d in [
            Duration::ZERO,
            Duration::from_millis(1500),
            Duration::from_secs(5400),
            Duration::from_secs(7 * 86_400 + 3),
        ] {
            assert_eq!(parse(&format(d)), Ok(d), "{}", format(d));
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,40}") {
            let _ = parse(&text);
        }

        #[test]
        fn whole_seconds_round_trip(secs in 0u64..10_000_000_000) {
            proptest::prop_assert_eq!(parse(&secs.to_string()), Ok(Duration::from_secs(secs)));
            proptest::prop_assert_eq!(parse(&format!("{secs}s")), Ok(Duration::from_secs(secs)));
        }
    }
}
