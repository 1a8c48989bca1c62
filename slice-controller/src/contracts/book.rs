//! The contracts as the decision sees them: per consumer cluster, the sum of
//! the resources of its active contracts with this provider.

use std::collections::{BTreeMap, BTreeSet};

use quantity::ResourceList;

/// One contract of `GET /contracts`, as the catalog writes it.
pub type ContractDoc = catalog_client::wire::Contract;

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

/// The contracts of a listing read one by one: one that cannot be read
/// (resources in a syntax this build does not know) is left out and
/// reported, and the others still count.
pub fn read(listing: Vec<serde_json::Value>) -> (Vec<ContractDoc>, Vec<Skipped>) {
    let mut docs = Vec::with_capacity(listing.len());
    let mut skipped = Vec::new();
    for value in listing {
        let id = value
            .get("id")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string();
        match serde_json::from_value::<ContractDoc>(value) {
            Ok(doc) => docs.push(doc),
            Err(error) => skipped.push(Skipped {
                id,
                why: error.to_string(),
            }),
        }
    }
    (docs, skipped)
}

impl ContractBook {
    /// The book of `provider`'s active contracts in `docs`. Contracts of
    /// other providers, ended ones and ones without a consumer cluster ID
    /// count for nobody.
    pub fn new(provider: &str, docs: &[ContractDoc]) -> Self {
        let mut book = ContractBook::default();
        for doc in docs {
            if !doc.active || doc.cluster_id != provider {
                continue;
            }
            let Some(consumer) = &doc.consumer_cluster_id else {
                continue;
            };
            let sum = book.by_consumer.entry(consumer.clone()).or_default();
            *sum = sum.add(&doc.resources);
            book.contracts += 1;
        }
        book
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
            resources: ResourceList::from_strings([("cpu", cpu)]).unwrap(),
            active,
            ..ContractDoc::default()
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
        ];
        let book = ContractBook::new("me", &docs);
        assert_eq!(book.contracted("c1").unwrap().to_strings()["cpu"], "2500m");
        assert_eq!(book.contracted("c2").unwrap().to_strings()["cpu"], "1");
        assert_eq!(book.contracted("c3"), None);
        assert_eq!(book.contracts, 3);
    }

    #[test]
    fn a_contract_that_cannot_be_read_is_left_out_and_the_others_count() {
        let good = serde_json::to_value(doc("a", Some("c1"), "me", "2", true)).unwrap();
        let mut bad = serde_json::to_value(doc("g", Some("c4"), "me", "1", true)).unwrap();
        bad["resources"] = serde_json::json!({"cpu": "lots"});
        let (docs, skipped) = read(vec![good, bad]);
        assert_eq!(docs.len(), 1);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(skipped[0].id, "g");
        let book = ContractBook::new("me", &docs);
        assert_eq!(book.contracted("c1").unwrap().to_strings()["cpu"], "2");
        assert_eq!(book.contracted("c4"), None);
    }

    #[test]
    fn names_the_consumers_that_changed() {
        let before = ContractBook::new(
            "me",
            &[
                doc("a", Some("c1"), "me", "2", true),
                doc("b", Some("c2"), "me", "1", true),
            ],
        );
        let after = ContractBook::new(
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
