//! Who is asking: label sets attached to cluster IDs in the configuration,
//! and the selectors stages use to pick originators by ID or by label.

use std::collections::{BTreeMap, HashMap};

/// Labels attached to cluster IDs (`[clusters."<id>".labels]` in the chain
/// file), so rules can name a class of peers instead of listing IDs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterDirectory {
    labels: HashMap<String, BTreeMap<String, String>>,
}

impl ClusterDirectory {
    pub fn new() -> Self {
        Self::default()
    }

    /// Attach `labels` to `cluster`, replacing what it had.
    pub fn insert(&mut self, cluster: impl Into<String>, labels: BTreeMap<String, String>) {
        self.labels.insert(cluster.into(), labels);
    }

    /// The labels of `cluster` (none if it is not listed).
    pub fn labels_of(&self, cluster: &str) -> Option<&BTreeMap<String, String>> {
        self.labels.get(cluster)
    }
}

/// Which originators a rule applies to.
///
/// An empty selector matches every originator. Otherwise an originator
/// matches when its ID is listed in `clusters`, **or** when `labels` is not
/// empty and the originator carries every one of those labels (like a
/// Kubernetes `matchLabels`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    #[serde(default)]
    pub clusters: Vec<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl Selector {
    /// A selector that matches every originator.
    pub fn everyone() -> Self {
        Self::default()
    }

    pub fn clusters<I: IntoIterator<Item = S>, S: Into<String>>(ids: I) -> Self {
        Self {
            clusters: ids.into_iter().map(Into::into).collect(),
            labels: BTreeMap::new(),
        }
    }

    pub fn labels<I: IntoIterator<Item = (K, V)>, K: Into<String>, V: Into<String>>(
        labels: I,
    ) -> Self {
        Self {
            clusters: Vec::new(),
            labels: labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    pub fn is_everyone(&self) -> bool {
        self.clusters.is_empty() && self.labels.is_empty()
    }

    pub fn matches(&self, originator: &str, directory: &ClusterDirectory) -> bool {
        if self.is_everyone() || self.clusters.iter().any(|c| c == originator) {
            return true;
        }
        if self.labels.is_empty() {
            return false;
        }
        let Some(have) = directory.labels_of(originator) else {
            return false;
        };
        self.labels.iter().all(|(k, v)| have.get(k) == Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory() -> ClusterDirectory {
        let mut d = ClusterDirectory::new();
        d.insert(
            "gold-1",
            [
                ("tier".to_string(), "gold".to_string()),
                ("gpu".into(), "yes".into()),
            ]
            .into(),
        );
        d.insert(
            "bronze-1",
            [("tier".to_string(), "bronze".to_string())].into(),
        );
        d
    }

    #[test]
    fn empty_selector_matches_everyone() {
        assert!(Selector::everyone().matches("anyone", &directory()));
        assert!(Selector::everyone().matches("", &directory()));
    }

    #[test]
    fn cluster_ids_match_exactly() {
        let s = Selector::clusters(["bronze-1"]);
        assert!(s.matches("bronze-1", &directory()));
        assert!(!s.matches("gold-1", &directory()));
        assert!(!s.matches("bronze", &directory()));
    }

    #[test]
    fn labels_must_all_match() {
        let d = directory();
        assert!(Selector::labels([("tier", "gold")]).matches("gold-1", &d));
        assert!(Selector::labels([("tier", "gold"), ("gpu", "yes")]).matches("gold-1", &d));
        assert!(!Selector::labels([("tier", "gold"), ("gpu", "no")]).matches("gold-1", &d));
        assert!(!Selector::labels([("tier", "gold")]).matches("bronze-1", &d));
        assert!(!Selector::labels([("tier", "gold")]).matches("unknown", &d));
    }

    #[test]
    fn ids_or_labels() {
        let s = Selector {
            clusters: vec!["bronze-1".into()],
            labels: [("tier".to_string(), "gold".to_string())].into(),
        };
        let d = directory();
        assert!(s.matches("bronze-1", &d));
        assert!(s.matches("gold-1", &d));
        assert!(!s.matches("other", &d));
    }
}
