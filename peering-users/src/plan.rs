//! What a pass has to do, decided from the catalog's answer and what the
//! cluster holds (pure functions): which consumers need a peering user,
//! which of their contracts need its kubeconfig (again), and whose peering
//! user is no longer wanted.

use std::collections::{BTreeMap, BTreeSet};

use catalog_client::wire::Contract;

use crate::names::ConsumerId;

/// The one buyer a consumer cluster ID's peering user serves, and the
/// contracts it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The buyer (the contracts' `consumer`, a catalog identity).
    pub owner: String,
    /// Its active Liqo v1 contracts naming the cluster ID.
    pub contracts: BTreeSet<String>,
    /// When the earliest of them was bought (Unix ms): the order in which new
    /// peering users are made when they are bounded ([`admit`]).
    pub since: i64,
}

/// Per consumer cluster with an active Liqo v1 contract of this provider,
/// the buyer it serves and those contracts' ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    pub consumers: BTreeMap<ConsumerId, Served>,
    /// Contracts whose consumer cluster ID cannot name a peering user
    /// (the catalog checks it at purchase; one stored before that check
    /// is reported, not acted on): (contract, why).
    pub skipped: Vec<(String, String)>,
    /// Contracts of another buyer naming a cluster ID whose peering user
    /// serves an earlier buyer (issue 41 F2, P-01): never given that
    /// user's kubeconfig, reported: (contract, cluster ID).
    pub conflicts: Vec<(String, ConsumerId)>,
}

/// The consumers `provider`'s active Liqo v1 contracts (those with a
/// `peeringState`) were bought for. A peering user serves the contracts of
/// exactly one buyer: contracts are grouped by (buyer, cluster ID), and
/// when two buyers name one cluster ID (a catalog from before it bound
/// IDs to buyers, or a hostile one) the buyer whose contract naming it was
/// bought first is served and the others' contracts are reported.
pub fn wanted(provider: &str, contracts: &[Contract]) -> Wanted {
    let mut out = Wanted::default();
    let mut by_buyer: BTreeMap<ConsumerId, BTreeMap<&str, Served>> = BTreeMap::new();
    for c in contracts {
        if !c.active || c.cluster_id != provider || c.peering_state.is_none() {
            continue;
        }
        let Some(id) = &c.consumer_cluster_id else {
            continue;
        };
        match ConsumerId::parse(id) {
            Ok(consumer) => {
                let served = by_buyer
                    .entry(consumer)
                    .or_default()
                    .entry(c.consumer.as_str())
                    .or_insert_with(|| Served {
                        owner: c.consumer.clone(),
                        contracts: BTreeSet::new(),
                        since: c.purchased_at.timestamp_millis(),
                    });
                served.contracts.insert(c.id.clone());
                served.since = served.since.min(c.purchased_at.timestamp_millis());
            }
            Err(e) => out.skipped.push((c.id.clone(), e.to_string())),
        }
    }
    for (consumer, buyers) in by_buyer {
        let mut buyers: Vec<Served> = buyers.into_values().collect();
        // Earliest first; the buyer's name breaks a tie, so every pass
        // (and every replica) picks the same one.
        buyers.sort_by(|a, b| (a.since, &a.owner).cmp(&(b.since, &b.owner)));
        let mut buyers = buyers.into_iter();
        let Some(first) = buyers.next() else {
            continue;
        };
        for other in buyers {
            for id in other.contracts {
                out.conflicts.push((id, consumer.clone()));
            }
        }
        out.consumers.insert(consumer, first);
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

/// The buyer a peering user found in the cluster was made for (its key
/// Secret's owner annotation, written by the cluster module); None for one made
/// before peering users recorded it.
pub type Present = BTreeMap<ConsumerId, Option<String>>;

/// The peering users found in the cluster (`present`) whose consumer has
/// no active contract any more, or whose buyer's contracts all ended while
/// another buyer's name the same cluster ID (P-02: its certificate and
/// RoleBindings go; the new buyer gets a user of its own after). One made
/// before owners were recorded is renewed for the buyer it serves instead
/// (the cluster module's `Cluster::ensure`).
pub fn to_remove(present: &Present, wanted: &Wanted) -> Vec<ConsumerId> {
    present
        .iter()
        .filter(|(c, owner)| match wanted.consumers.get(*c) {
            None => true,
            Some(served) => owner.as_ref().is_some_and(|o| *o != served.owner),
        })
        .map(|(c, _)| c.clone())
        .collect()
}

/// Bounds on peering users (issue 41 F9, P-15): at most `total` at once,
/// at most `new_per_pass` new ones started in one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub total: usize,
    pub new_per_pass: usize,
    /// Most peering users one buyer holds: a buyer naming many cluster IDs
    /// cannot take the whole of `total` from the others.
    pub per_buyer: usize,
}

/// Which wanted consumers a pass serves, within `bounds`: those with a
/// peering user of their buyer already (`present`) always, then new ones,
/// earliest bought first, while there is room; the rest wait (returned
/// second) and are served as room frees up (a contract ending, a pass
/// later).
pub fn admit(
    wanted: &Wanted,
    present: &Present,
    bounds: Bounds,
) -> (Vec<ConsumerId>, Vec<ConsumerId>) {
    let has_own = |c: &ConsumerId, s: &Served| match present.get(c) {
        Some(Some(owner)) => *owner == s.owner,
        // Made before owners were recorded: renewed for this buyer.
        Some(None) => true,
        None => false,
    };
    let mut admitted: Vec<ConsumerId> = Vec::new();
    let mut new: Vec<(&ConsumerId, &Served)> = Vec::new();
    for (c, s) in &wanted.consumers {
        if has_own(c, s) {
            admitted.push(c.clone());
        } else {
            new.push((c, s));
        }
    }
    new.sort_by(|a, b| (a.1.since, a.0).cmp(&(b.1.since, b.0)));
    // Every peering user in the cluster takes room, wanted or not: one
    // being taken down frees it once it is gone.
    let mut held = present.len().max(admitted.len());
    // A buyer's room counts the peering users it holds now, wanted or not
    // (one being taken down frees its room once it is gone).
    let mut per_buyer: BTreeMap<&str, usize> = BTreeMap::new();
    for owner in present.values().flatten() {
        *per_buyer.entry(owner.as_str()).or_default() += 1;
    }
    let mut started = 0;
    let mut waiting = Vec::new();
    for (c, s) in new {
        let buyer = per_buyer.entry(s.owner.as_str()).or_default();
        if held < bounds.total
            && started < bounds.new_per_pass
            && *buyer < bounds.per_buyer
            && !present.contains_key(c)
        {
            admitted.push(c.clone());
            held += 1;
            started += 1;
            *buyer += 1;
        } else {
            waiting.push(c.clone());
        }
    }
    (admitted, waiting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bought_by(buyer: &str, id: &str, consumer: Option<&str>, purchased: &str) -> Contract {
        let mut c = json!({
            "id": id, "consumer": buyer, "clusterID": "p1", "clusterName": "p",
            "offerID": "o", "planID": "small", "resources": {"cpu": "1"}, "cost": "1.0",
            "resourceSliceClass": "liqo-broker", "liqo": ["v1"],
            "purchasedAt": purchased, "expiresAt": "2026-11-21T08:00:00Z",
            "active": true, "state": "pending", "stateChangedAt": "2026-11-20T08:00:00Z",
            "peeringState": {"state": "awaitingCredentials", "reason": "r"},
        });
        if let Some(consumer) = consumer {
            c["consumerClusterID"] = json!(consumer);
        }
        serde_json::from_value(c).unwrap()
    }

    fn contract(
        id: &str,
        provider: &str,
        consumer: Option<&str>,
        active: bool,
        v1: bool,
    ) -> Contract {
        let mut c = bought_by("alice", id, consumer, "2026-11-20T08:00:00Z");
        c.cluster_id = provider.to_string();
        c.active = active;
        if !v1 {
            c.peering_state = None;
        }
        c
    }

    fn c(s: &str) -> ConsumerId {
        ConsumerId::parse(s).unwrap()
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
                // P-18: a DNS label whose peering user's names cannot exist.
                contract(
                    "long",
                    "p1",
                    Some(&format!("l{}z", "x".repeat(61))),
                    true,
                    true,
                ),
            ],
        );
        let ids = |s: &str| w.consumers[&c(s)].contracts.clone();
        assert_eq!(w.consumers.len(), 2);
        assert_eq!(
            ids("c1"),
            BTreeSet::from(["a".to_string(), "b".to_string()])
        );
        assert_eq!(ids("c2"), BTreeSet::from(["c".to_string()]));
        assert_eq!(w.consumers[&c("c1")].owner, "alice");
        let skipped: Vec<&str> = w.skipped.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(skipped, vec!["bad", "long"]);
        assert!(w.conflicts.is_empty());
    }

    /// P-01: Alice's contract naming Bob's cluster ID (bought after his)
    /// is not served by Bob's peering user, whichever order the catalog
    /// lists them in; it is reported.
    #[test]
    fn one_buyer_per_peering_user_the_earliest() {
        let bob = bought_by("bob", "b1", Some("cluster-b"), "2026-11-20T08:00:00Z");
        let bob2 = bought_by("bob", "b2", Some("cluster-b"), "2026-11-20T10:00:00Z");
        let alice = bought_by("alice", "a1", Some("cluster-b"), "2026-11-20T09:00:00Z");
        for list in [
            vec![bob.clone(), alice.clone(), bob2.clone()],
            vec![alice.clone(), bob2.clone(), bob.clone()],
        ] {
            let w = wanted("p1", &list);
            let served = &w.consumers[&c("cluster-b")];
            assert_eq!(served.owner, "bob");
            assert_eq!(
                served.contracts,
                BTreeSet::from(["b1".to_string(), "b2".to_string()])
            );
            assert_eq!(w.conflicts, vec![("a1".to_string(), c("cluster-b"))]);
        }
        // Bob's contracts ended: Alice is served.
        let w = wanted("p1", &[alice]);
        assert_eq!(w.consumers[&c("cluster-b")].owner, "alice");
        assert!(w.conflicts.is_empty());
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
        let w = wanted("p1", &[contract("a", "p1", Some("c1"), true, true)]);
        let present = Present::from([(c("c1"), Some("alice".into())), (c("c2"), None)]);
        assert_eq!(to_remove(&present, &w), vec![c("c2")]);
        // One made before owners were recorded is kept (renewed instead).
        let present = Present::from([(c("c1"), None)]);
        assert!(to_remove(&present, &w).is_empty());
    }

    /// P-02: Bob's peering user goes once his contracts ended, though
    /// Alice's contract names the same cluster ID.
    #[test]
    fn remove_the_user_of_a_buyer_whose_contracts_ended() {
        let w = wanted(
            "p1",
            &[bought_by(
                "alice",
                "a1",
                Some("cluster-b"),
                "2026-11-20T09:00:00Z",
            )],
        );
        let present = Present::from([(c("cluster-b"), Some("bob".into()))]);
        assert_eq!(to_remove(&present, &w), vec![c("cluster-b")]);
        // Not made for Alice until Bob's is gone.
        let (admitted, waiting) = admit(
            &w,
            &present,
            Bounds {
                total: 10,
                new_per_pass: 10,
                per_buyer: 10,
            },
        );
        assert!(admitted.is_empty());
        assert_eq!(waiting, vec![c("cluster-b")]);
    }

    /// P-15: one buyer naming many cluster IDs holds at most `per_buyer`
    /// peering users; another buyer still gets room.
    #[test]
    fn one_buyer_holds_at_most_its_share() {
        let mut list: Vec<Contract> = (0..5)
            .map(|i| {
                bought_by(
                    "mallory",
                    &format!("m{i}"),
                    Some(&format!("m{i}")),
                    &format!("2026-11-20T0{i}:00:00Z"),
                )
            })
            .collect();
        list.push(bought_by("bob", "b", Some("b"), "2026-11-20T09:00:00Z"));
        let w = wanted("p1", &list);
        let bounds = Bounds {
            total: 100,
            new_per_pass: 100,
            per_buyer: 2,
        };
        let (admitted, waiting) = admit(&w, &Present::new(), bounds);
        assert_eq!(admitted, vec![c("m0"), c("m1"), c("b")]);
        assert_eq!(waiting, vec![c("m2"), c("m3"), c("m4")]);
        // Held ones count, wanted or not: m0 being taken down keeps its room.
        let present: Present = [("m0", "mallory"), ("m1", "mallory"), ("b", "bob")]
            .iter()
            .map(|(x, o)| (c(x), Some(o.to_string())))
            .collect();
        let w = wanted("p1", &list[1..]);
        let (admitted, waiting) = admit(&w, &present, bounds);
        assert_eq!(admitted, vec![c("b"), c("m1")]);
        assert_eq!(waiting, vec![c("m2"), c("m3"), c("m4")]);
    }

    /// P-15: at most `total` peering users, at most `new_per_pass` started
    /// a pass, earliest bought first; existing ones always served.
    #[test]
    fn new_users_are_bounded() {
        let list: Vec<Contract> = (0..6)
            .map(|i| {
                bought_by(
                    "alice",
                    &format!("k{i}"),
                    Some(&format!("c{i}")),
                    &format!("2026-11-20T0{}:00:00Z", 6 - i),
                )
            })
            .collect();
        let w = wanted("p1", &list);
        let bounds = Bounds {
            total: 4,
            new_per_pass: 2,
            per_buyer: 10,
        };
        let (admitted, waiting) = admit(&w, &Present::new(), bounds);
        // c5 and c4 were bought first.
        assert_eq!(admitted, vec![c("c5"), c("c4")]);
        assert_eq!(waiting.len(), 4);
        let present: Present = admitted
            .iter()
            .map(|x| (x.clone(), Some("alice".into())))
            .collect();
        let (admitted, waiting) = admit(&w, &present, bounds);
        assert_eq!(admitted, vec![c("c4"), c("c5"), c("c3"), c("c2")]);
        assert_eq!(waiting, vec![c("c1"), c("c0")]);
        // Full: nothing new, even with room in the pass.
        let present: Present = admitted
            .iter()
            .map(|x| (x.clone(), Some("alice".into())))
            .collect();
        let (admitted, waiting) = admit(&w, &present, bounds);
        assert_eq!(admitted.len(), 4);
        assert_eq!(waiting.len(), 2);
        // A user not wanted any more still takes room until it is gone.
        let mut present: Present = [
            ("c5", "alice"),
            ("c4", "alice"),
            ("c3", "alice"),
            ("gone", "x"),
        ]
        .iter()
        .map(|(x, o)| (c(x), Some(o.to_string())))
        .collect();
        let (admitted, _) = admit(&w, &present, bounds);
        assert_eq!(admitted.len(), 3);
        present.remove(&c("gone"));
        let (admitted, _) = admit(&w, &present, bounds);
        assert_eq!(admitted.len(), 4);
    }
}
