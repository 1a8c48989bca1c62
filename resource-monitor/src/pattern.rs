//! Resource-name patterns with `*` wildcards (`nvidia.com/*`, `*gpu*`), as
//! used by the filter stage.

use std::fmt;

/// A resource-name pattern: `*` matches any run of characters (including
/// none, `/` and `.`); everything else matches itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
}

/// Why a string is not a pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("a resource-name pattern cannot be empty")]
    Empty,
    #[error("resource-name pattern {0:?} contains whitespace or control characters")]
    BadCharacter(String),
}

impl Pattern {
    pub fn new(text: &str) -> Result<Self, PatternError> {
        if text.is_empty() {
            return Err(PatternError::Empty);
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(PatternError::BadCharacter(text.to_string()));
        }
        Ok(Self {
            text: text.to_string(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        let mut parts = self.text.split('*');
        // `split` always yields at least one part.
        let first = parts.next().unwrap_or_default();
        let Some(mut rest) = name.strip_prefix(first) else {
            return false;
        };
        let mut parts: Vec<&str> = parts.collect();
        let Some(last) = parts.pop() else {
            // No `*` at all: the prefix must have been the whole name.
            return rest.is_empty();
        };
        for part in parts {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        rest.len() >= last.len() && rest.ends_with(last)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Pattern::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, n: &str) -> bool {
        Pattern::new(p).unwrap().matches(n)
    }

    #[test]
    fn literal_patterns_match_only_themselves() {
        assert!(m("cpu", "cpu"));
        assert!(!m("cpu", "cpus"));
        assert!(!m("cpu", "xcpu"));
    }

    #[test]
    fn wildcards_match_any_run() {
        assert!(m("*", "nvidia.com/gpu"));
        assert!(m("nvidia.com/*", "nvidia.com/gpu"));
        assert!(m("nvidia.com/*", "nvidia.com/"));
        assert!(!m("nvidia.com/*", "amd.com/gpu"));
        assert!(m("*gpu", "nvidia.com/gpu"));
        assert!(!m("*gpu", "nvidia.com/gpus"));
        assert!(m("*/gpu*", "amd.com/gpu-mi300"));
        assert!(m("a*b*c", "abc"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXcYYb"));
        // The last literal part must not overlap the middle ones.
        assert!(!m("ab*b", "ab"));
        assert!(m("ab*b", "abb"));
    }

    #[test]
    fn bad_patterns_are_rejected() {
        assert_eq!(Pattern::new(""), Err(PatternError::Empty));
        assert!(Pattern::new("a b").is_err());
    }
}
