//! The time as the Kubernetes API writes it, so conditions and reports
//! written by different controllers compare as text.

/// Now, as Kubernetes writes `metav1.Time`: RFC 3339 in UTC, whole
/// seconds (`2025-01-02T03:04:05Z`). `lastTransitionTime` compared across
/// writers must not differ only in sub-second digits.
pub fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// `at` as [`now_rfc3339`] writes it.
pub fn rfc3339(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_in_utc() {
        let at: jiff::Timestamp = "2025-01-02T03:04:05.678+02:00"
            .parse()
            .expect("a valid timestamp");
        assert_eq!(rfc3339(at), "2025-01-02T01:04:05Z");
        assert_eq!(now_rfc3339().len(), "2025-01-02T01:04:05Z".len());
    }
}
