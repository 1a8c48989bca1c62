//! What a read does with an upstream that cannot answer right now
//! (unreachable, or slower than the per-upstream timeout).
//!
//! - `omit`: leave it out of the sum at once. The offer shrinks as soon as
//!   an upstream stops answering, and never includes anything unconfirmed.
//! - `last-known` (the default, max age 30 s): use the answer it last gave
//!   for the same originator, for at most `max_age` counted from when it
//!   stopped answering; after that, or if it never answered that
//!   originator, leave it out. A restart or a network blip then does not
//!   make every peer's offer shrink and grow back.
//!
//! The clock starts when the upstream stops answering, not when the answer
//! was fetched: while subscribed, an upstream notifies every change, so its
//! last answer stays current until it goes away. When a last-known answer
//! expires, downstream subscribers are notified so they re-read.
//!
//! If no upstream can contribute at all, the read fails with `UNAVAILABLE`
//! rather than answer an empty offer: "nobody answered" is not "nothing is
//! free".

use std::fmt;
use std::time::Duration;

/// How long a last-known answer may stand in for an unreachable upstream,
/// unless configured otherwise.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30);

/// The policy's name, as written in flags and files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// Leave the upstream out of the sum.
    Omit,
    /// Use its last answer for the same cluster, for at most the max age.
    #[default]
    LastKnown,
}

/// The unreachable/slow-upstream policy in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Omit,
    LastKnown { max_age: Duration },
}

impl Default for Policy {
    fn default() -> Self {
        Policy::LastKnown {
            max_age: DEFAULT_MAX_AGE,
        }
    }
}

impl Policy {
    pub fn new(kind: PolicyKind, max_age: Duration) -> Self {
        match kind {
            PolicyKind::Omit => Policy::Omit,
            PolicyKind::LastKnown => Policy::LastKnown { max_age },
        }
    }

    /// Whether an answer held since an upstream stopped answering
    /// `unreachable_for` ago may still be used.
    pub fn allows_last_known(&self, unreachable_for: Duration) -> bool {
        match self {
            Policy::Omit => false,
            Policy::LastKnown { max_age } => unreachable_for <= *max_age,
        }
    }

    /// How long last-known answers stay usable after an upstream stops
    /// answering; `None` when they are not used at all.
    pub fn max_age(&self) -> Option<Duration> {
        match self {
            Policy::Omit => None,
            Policy::LastKnown { max_age } => Some(*max_age),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Omit => f.write_str("omit"),
            Policy::LastKnown { max_age } => write!(f, "last-known (max age {max_age:?})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omit_never_uses_last_known() {
        assert!(!Policy::Omit.allows_last_known(Duration::ZERO));
        assert_eq!(Policy::Omit.max_age(), None);
    }

    #[test]
    fn last_known_is_bounded() {
        let p = Policy::new(PolicyKind::LastKnown, Duration::from_secs(10));
        assert!(p.allows_last_known(Duration::ZERO));
        assert!(p.allows_last_known(Duration::from_secs(10)));
        assert!(!p.allows_last_known(Duration::from_millis(10_001)));
        assert_eq!(p.max_age(), Some(Duration::from_secs(10)));
    }

    #[test]
    fn default_is_stated() {
        assert_eq!(Policy::default().to_string(), "last-known (max age 30s)");
        assert_eq!(PolicyKind::default(), PolicyKind::LastKnown);
    }
}
