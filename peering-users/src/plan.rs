//! What a pass has to do, decided from the catalog's answer and what the
//! cluster holds (pure functions): which consumers need a peering user,
//! which of their contracts need its kubeconfig (again), and whose peering
//! user is no longer wanted.

use std::collections::{BTreeMap, BTreeSet};

use catalog_client::wire::Contract;

use crate::names::ConsumerId;

/// Per consumer cluster with an active Liqo v1 contract of this provider,
/// those contracts' ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    pub consumers: BTreeMap<ConsumerId, BTreeSet<String>>,
    /// Contracts whose consumer cluster ID cannot name a peering user
    /// (the catalog checks it at purchase; one stored before that check
    /// is reported, not acted on): (contract, why).
    pub skipped: Vec<(String, String)>,
}

/// The consumers `provider`'s active Liqo v1 contracts (those with a
/// `peeringState`) were bought for.
pub fn wanted(provider: &str, contracts: &[Contract]) -> Wanted {
    let mut out = Wanted::default();
    for c in contracts {
        if !c.active || c.cluster_id != provider || c.peering_state.is_none() {
            continue;
        }
        let Some(id) = &c.consumer_cluster_id else {
            continue;
        };
        match ConsumerId::parse(id) {
            Ok(consumer) => {
                out.consumers
                    .entry(consumer)
                    .or_default()
                    .insert(c.id.clone());
            }
            Err(e) => out.skipped.push((c.id.clone(), e.to_string())),
        }
    }
    out
}

/// The contracts of `contracts` still to be given the kubeconfig of the
/// certificate `serial`: those not given it since this process started
/// (`attached` maps a contract to the certificate it was last given; a
/// restart attaches once more — the catalog takes the same kubeconfig
/// again as a no-op — and a renewed certificate is attached anew).
pub fn to_attach<'a>(
    contracts: &'a BTreeSet<String>,
    attached: &BTreeMap<String, String>,
    serial: &str,
) -> Vec<&'a str> {
    contracts
        .iter()
        .filter(|id| attached.get(*id).map(String::as_str) != Some(serial))
        .map(String::as_str)
        .collect()
}

/// The peering users found in the cluster (`present`) whose consumer has
/// no active contract any more.
pub fn to_remove(present: &BTreeSet<ConsumerId>, wanted: &Wanted) -> Vec<ConsumerId> {
    present
        .iter()
        .filter(|c| !wanted.consumers.contains_key(*c))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn contract(
        id: &str,
        provider: &str,
        consumer: Option<&str>,
        active: bool,
        v1: bool,
    ) -> Contract {
        let mut c = json!({
            "id": id, "consumer": "alice", "clusterID": provider, "clusterName": "p",
            "offerID": "o", "planID": "small", "resources": {"cpu": "1"}, "cost": "1.0",
            "resourceSliceClass": "liqo-broker", "liqo": ["v1"],
            "purchasedAt": "2026-11-20T08:00:00Z", "expiresAt": "2026-11-21T08:00:00Z",
            "active": active, "state": "pending", "stateChangedAt": "2026-11-20T08:00:00Z",
        });
        if let Some(consumer) = consumer {
            c["consumerClusterID"] = json!(consumer);
        }
        if v1 {
            c["peeringState"] = json!({"state": "awaitingCredentials", "reason": "r"});
        }
        serde_json::from_value(c).unwrap()
    }

    #[test]
    fn consumers_of_active_v1_contracts_of_this_provider() {
        let w = wanted(
            "p1",
            &[
                contract("a", "p1", Some("c1"), true, true),
                contract("b", "p1", Some("c1"), true, true),
                contract("c", "p1", Some("c2"), true, true),
                contract("ended", "p1", Some("c3"), false, true),
                contract("other-provider", "p2", Some("c4"), true, true),
                contract("v0-only", "p1", Some("c5"), true, false),
                contract("no-cluster", "p1", None, true, true),
                contract("bad", "p1", Some("C_6"), true, true),
            ],
        );
        let ids = |c: &str| w.consumers[&ConsumerId::parse(c).unwrap()].clone();
        assert_eq!(w.consumers.len(), 2);
        assert_eq!(
            ids("c1"),
            BTreeSet::from(["a".to_string(), "b".to_string()])
        );
        assert_eq!(ids("c2"), BTreeSet::from(["c".to_string()]));
        assert_eq!(w.skipped.len(), 1);
        assert_eq!(w.skipped[0].0, "bad");
    }

    #[test]
    fn attach_what_has_not_this_certificate() {
        let contracts = BTreeSet::from(["a".to_string(), "b".to_string(), "c".to_string()]);
        let attached = BTreeMap::from([
            ("a".to_string(), "s1".to_string()),
            ("b".to_string(), "s0".to_string()),
        ]);
        assert_eq!(to_attach(&contracts, &attached, "s1"), vec!["b", "c"]);
        assert!(to_attach(&contracts, &BTreeMap::new(), "s1").len() == 3);
    }

    #[test]
    fn remove_users_whose_consumer_has_no_contract() {
        let c = |s: &str| ConsumerId::parse(s).unwrap();
        let w = wanted("p1", &[contract("a", "p1", Some("c1"), true, true)]);
        let present = BTreeSet::from([c("c1"), c("c2")]);
        assert_eq!(to_remove(&present, &w), vec![c("c2")]);
    }
}
