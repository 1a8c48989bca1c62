//! The contracts as the decision sees them: per consumer cluster, the sum of
//! the resources of its active contracts with this provider.

use std::collections::{BTreeMap, BTreeSet};

use quantity::ResourceList;
use serde::Deserialize;

/// One contract of `GET /contracts` (the fields this controller reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ContractDoc {
    pub id: String,
    #[serde(rename = "consumerClusterID", default)]
    pub consumer_cluster_id: Option<String>,
    /// The provider's cluster ID.
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(default)]
    pub resources: BTreeMap<String, String>,
    pub active: bool,
}

/// Per consumer cluster ID, the sum of its active contracts' resources.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContractBook {
    by_consumer: BTreeMap<String, ResourceList>,
    /// How many contracts were summed.
    pub contracts: usize,
}

/// A contract left out of the book, and why (logged by the follower).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub id: String,
    pub why: String,
}

impl ContractBook {
    /// The book of `provider`'s active contracts in `docs`. Contracts of
    /// other providers, ended ones and ones without a consumer cluster ID
    /// count for nobody; one whose resources cannot be read is skipped
    /// (and reported).
    pub fn new(provider: &str, docs: &[ContractDoc]) -> (Self, Vec<Skipped>) {
        let mut book = ContractBook::default();
        let mut skipped = Vec::new();
        for doc in docs {
            if !doc.active || doc.cluster_id != provider {
                continue;
            }
            let Some(consumer) = &doc.consumer_cluster_id else {
                continue;
            };
            let resources = match ResourceList::from_strings(
                doc.resources.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            ) {
                Ok(list) => list,
                Err((name, error)) => {
                    skipped.push(Skipped {
                        id: doc.id.clone(),
                        why: format!("resources.{name}: {error}"),
                    });
                    continue;
                }
            };
            let sum = book.by_consumer.entry(consumer.clone()).or_default();
            *sum = sum.add(&resources);
            book.contracts += 1;
        }
        (book, skipped)
    }

    /// The sum of `consumer`'s active contracts; None when it has none.
    pub fn contracted(&self, consumer: &str) -> Option<&ResourceList> {
        self.by_consumer.get(consumer)
    }

    /// The consumers whose sums differ between `self` and `next`.
    pub fn changed(&self, next: &ContractBook) -> BTreeSet<String> {
        self.by_consumer
            .keys()
            .chain(next.by_consumer.keys())
            .filter(|c| self.by_consumer.get(*c) != next.by_consumer.get(*c))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(
        id: &str,
        consumer: Option<&str>,
        provider: &str,
        cpu: &str,
        active: bool,
    ) -> ContractDoc {
        ContractDoc {
            id: id.into(),
            consumer_cluster_id: consumer.map(str::to_string),
            cluster_id: provider.into(),
            resources: [("cpu".to_string(), cpu.to_string())].into(),
            active,
        }
    }

    #[test]
    fn sums_per_consumer_only_active_own_contracts() {
        let docs = [
            doc("a", Some("c1"), "me", "2", true),
            doc("b", Some("c1"), "me", "500m", true),
            doc("c", Some("c2"), "me", "1", true),
            doc("d", Some("c2"), "me", "5", false),
            doc("e", Some("c3"), "other", "5", true),
            doc("f", None, "me", "5", true),
            doc("g", Some("c4"), "me", "lots", true),
        ];
        let (book, skipped) = ContractBook::new("me", &docs);
        assert_eq!(book.contracted("c1").unwrap().to_strings()["cpu"], "2500m");
        assert_eq!(book.contracted("c2").unwrap().to_strings()["cpu"], "1");
        assert_eq!(book.contracted("c3"), None);
        assert_eq!(book.contracted("c4"), None);
        assert_eq!(book.contracts, 3);
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].why.starts_with("resources.cpu"), "{skipped:?}");
    }

    #[test]
    fn names_the_consumers_that_changed() {
        let (before, _) = ContractBook::new(
            "me",
            &[
                doc("a", Some("c1"), "me", "2", true),
                doc("b", Some("c2"), "me", "1", true),
            ],
        );
        let (after, _) = ContractBook::new(
            "me",
            &[
                doc("a", Some("c1"), "me", "2", true),
                doc("c", Some("c3"), "me", "1", true),
            ],
        );
        assert_eq!(
            before.changed(&after).into_iter().collect::<Vec<_>>(),
            ["c2", "c3"]
        );
        assert!(after.changed(&after).is_empty());
    }
}
