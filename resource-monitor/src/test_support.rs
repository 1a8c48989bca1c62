//! Helpers the unit tests of several modules share (test builds only), kept
//! at the crate root so `source` and `stage` tests need not import each other.

/// Expected resources as the sorted string pairs a list prints.
pub(crate) fn pairs(entries: &[(&str, &str)]) -> Vec<(String, String)> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
