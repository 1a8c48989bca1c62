//! The one duration grammar of the catalog's flags (`500ms`, `5s`, `2m`,
//! `1h`, `7d`), shared by every feature's config struct. It sits at the
//! bottom of the crate so that feature configs need not import the
//! top-level config module.

use std::time::Duration;

/// `500ms`, `5s`, `2m`, `1h`, `7d`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration such as 5s or 500ms"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => {
            return Err(format!(
                "`{s}`: unknown unit `{unit}` (use ms, s, m, h or d)"
            ))
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("fast").is_err());
    }
}
