//! A controller's API requests as the benches report them: how many of
//! each kind (`verb resource`, most first) and one line summing them up.
//! The benches pick their controller's records out of the test API
//! server's audit log; this crate stays free of the server (see
//! Cargo.toml), so it counts kinds already named.

use std::collections::BTreeMap;

/// How many of each kind among `kinds`, most first (equal counts in name
/// order, so that two runs print the same line).
pub fn by_kind<I, S>(kinds: I) -> Vec<(String, usize)>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for kind in kinds {
        *counts.entry(kind.into()).or_default() += 1;
    }
    let mut all: Vec<(String, usize)> = counts.into_iter().collect();
    // Stable: the BTreeMap's name order stays among equal counts.
    all.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    all
}

/// `total (n kind, n kind, …)`, as the benches print a round's requests.
pub fn summary(requests: &[(String, usize)]) -> String {
    let total: usize = requests.iter().map(|(_, n)| n).sum();
    let kinds: Vec<String> = requests.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!("{total} ({})", kinds.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_most_first_then_by_name() {
        let counted = by_kind(["get pods", "patch slices", "get pods", "list pods"]);
        assert_eq!(
            counted,
            vec![
                ("get pods".to_string(), 2),
                ("list pods".to_string(), 1),
                ("patch slices".to_string(), 1),
            ]
        );
        assert_eq!(
            summary(&counted),
            "4 (2 get pods, 1 list pods, 1 patch slices)"
        );
    }

    #[test]
    fn nothing_is_zero() {
        assert_eq!(summary(&by_kind(Vec::<String>::new())), "0 ()");
    }
}
