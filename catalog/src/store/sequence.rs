//! The rules that keep a stream of versioned records monotonic, whatever
//! the records: the offer feed follows them today, and a stream of any
//! other versioned record (contracts) is meant to reuse them unchanged.
//!
//! A stream sends two kinds of message: a *change* (one record, or its
//! deletion) and a *list* (every record, as a snapshot). It promises:
//!
//! - **per record, never backwards**: a change is sent only if its version
//!   is newer than the one the stream holds for that key ([`newer`]). A
//!   record's intermediate versions may be skipped — a list or the writer's
//!   own copy can bring a newer one first, and the older copies that arrive
//!   later are dropped — but the last version is always sent, since nothing
//!   newer can have superseded it;
//! - **a list is never older than what was sent**: a list holding a record
//!   at a lower version than the stream holds, or lacking one the stream
//!   holds without the store confirming it is gone, is refused
//!   ([`check_list`]); the caller reads again (and only after giving the
//!   store time to catch up takes it anyway: the store is then the truth);
//! - **a sequence that never decreases** ([`Sequence`]): every change the
//!   stream takes, and every list that replaces its state, advances it by
//!   one; each message carries the sequence of the last change it reflects.
//!   It counts within one stream's life: after a restart it starts again, so
//!   a client that sees it go down (or reconnects) takes the next list as
//!   the whole truth.

use std::collections::{BTreeMap, HashSet};

/// A record a stream follows: a key and a version every write raises.
pub trait Versioned {
    fn key(&self) -> &str;
    fn version(&self) -> u64;
}

/// Whether a record at `incoming` replaces the one the stream holds at
/// `held` (`None`: it holds none).
pub fn newer(held: Option<u64>, incoming: u64) -> bool {
    held.is_none_or(|h| incoming > h)
}

/// The stream's count of the changes it took; never decreases.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sequence(u64);

impl Sequence {
    pub fn current(self) -> u64 {
        self.0
    }

    /// One more change; the new value. Saturates rather than wrapping: a
    /// sequence that went back to 0 would read as a restart.
    pub fn advance(&mut self) -> u64 {
        self.0 = self.0.saturating_add(1);
        self.0
    }
}

/// What a full list is, judged against what the stream holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListCheck {
    /// Exactly the records (keys and versions) held: nothing to send.
    Same,
    /// Not older than what is held anywhere: take it.
    Newer,
    /// Refused: it holds `key` at `listed`, older than the `held` one sent.
    Older { key: String, listed: u64, held: u64 },
    /// Refused: it lacks `key`, sent at version `held`, and the store did
    /// not confirm the record gone, so the list was read before that write
    /// (a vanish the stream would have to undo a moment later).
    Lacks { key: String, held: u64 },
}

/// Judge `list` against `held` (key → version sent). `gone` are the held
/// keys the store confirmed deleted after the list was read: a list may
/// lack those.
pub fn check_list<T: Versioned>(
    held: &BTreeMap<String, u64>,
    list: &[T],
    gone: &HashSet<String>,
) -> ListCheck {
    for r in list {
        if let Some(&h) = held.get(r.key()) {
            if r.version() < h {
                return ListCheck::Older {
                    key: r.key().to_string(),
                    listed: r.version(),
                    held: h,
                };
            }
        }
    }
    let listed: HashSet<&str> = list.iter().map(Versioned::key).collect();
    if let Some((key, &h)) = held
        .iter()
        .find(|(k, _)| !listed.contains(k.as_str()) && !gone.contains(k.as_str()))
    {
        return ListCheck::Lacks {
            key: key.clone(),
            held: h,
        };
    }
    let same =
        held.len() == list.len() && list.iter().all(|r| held.get(r.key()) == Some(&r.version()));
    if same {
        ListCheck::Same
    } else {
        ListCheck::Newer
    }
}

/// The held keys `list` lacks: those the caller must confirm gone (or
/// read again) before [`check_list`] takes the list.
pub fn lacking<T: Versioned>(held: &BTreeMap<String, u64>, list: &[T]) -> Vec<String> {
    let listed: HashSet<&str> = list.iter().map(Versioned::key).collect();
    held.keys()
        .filter(|k| !listed.contains(k.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct R(&'static str, u64);

    impl Versioned for R {
        fn key(&self) -> &str {
            self.0
        }
        fn version(&self) -> u64 {
            self.1
        }
    }

    fn held(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn only_a_newer_version_replaces_the_held_one() {
        assert!(newer(None, 1));
        assert!(newer(Some(3), 4));
        assert!(!newer(Some(4), 4));
        assert!(!newer(Some(4), 3));
    }

    #[test]
    fn the_sequence_only_moves_forward() {
        let mut s = Sequence::default();
        assert_eq!((s.advance(), s.advance(), s.current()), (1, 2, 2));
        let mut top = Sequence(u64::MAX);
        assert_eq!(top.advance(), u64::MAX);
    }

    /// A list lacking a record that was sent is refused unless the store
    /// confirmed it gone; one at an older version is refused always.
    #[test]
    fn a_list_is_judged_against_what_was_sent() {
        let h = held(&[("a", 2), ("b", 5)]);
        let none = HashSet::new();
        assert_eq!(
            check_list(&h, &[R("a", 2), R("b", 5)], &none),
            ListCheck::Same
        );
        assert_eq!(
            check_list(&h, &[R("a", 3), R("b", 5), R("c", 1)], &none),
            ListCheck::Newer
        );
        assert_eq!(
            check_list(&h, &[R("a", 1), R("b", 5)], &none),
            ListCheck::Older {
                key: "a".into(),
                listed: 1,
                held: 2
            }
        );
        assert_eq!(
            check_list(&h, &[R("a", 2)], &none),
            ListCheck::Lacks {
                key: "b".into(),
                held: 5
            }
        );
        assert_eq!(lacking(&h, &[R("a", 2)]), ["b"]);
        let gone = HashSet::from(["b".to_string()]);
        assert_eq!(check_list(&h, &[R("a", 2)], &gone), ListCheck::Newer);
    }
}
