//! Purchases of one provider share its virtual nodes: the pure judgement.
//!
//! Liqo v1.2.0 offloads a namespace to clusters, not to nodes: its
//! NamespaceOffloading controller walks every VirtualNode and adds the
//! namespace to the node's *cluster's* NamespaceMap when the node matches
//! the selector, removes it when it does not
//! (`pkg/liqo-controller-manager/offloading/namespaceoffloading-controller/clusterselector.go:37-75`),
//! and its pod webhook gives each pod of the namespace the same selector
//! (`pkg/webhooks/pod/mutations.go:54-97, 135-175`). A selector naming
//! one contract's virtual node would make the mapping flap between two
//! nodes of one provider, so the controller selects the provider
//! (`liqo.io/remote-cluster-id`, see [`crate::liqo::plan_offloading`]),
//! and every namespace offloaded to a provider may use every virtual node
//! of it. Two Purchases serving the same namespaces is the intended case;
//! Purchases serving different namespaces share each other's grants, which
//! the `NodesShared` condition says and a Warning Event reports once.

use std::collections::BTreeSet;

use crate::decision::{Cond, Phase};
use crate::model::{Condition, Purchase};

/// The condition type.
pub const NODES_SHARED: &str = "NodesShared";
/// Other Purchases of the provider serve other namespaces (a warning).
pub const SHARES_PROVIDER_NODES: &str = "SharesProviderNodes";
/// Other Purchases of the provider serve exactly these namespaces.
pub const SHARES_NAMESPACES: &str = "SharesNamespaces";
/// No other Purchase in this cluster buys from the provider.
pub const NOT_SHARED: &str = "NotShared";

/// A Purchase as the sharing sees it: who, from whom, for which
/// namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served<'a> {
    pub key: String,
    pub provider: &'a str,
    pub namespaces: BTreeSet<&'a str>,
}

/// `purchase` while it holds (or is getting) virtual nodes of a provider:
/// its status names the provider, it is neither being deleted nor ended
/// (as [`crate::decision::peering_users`] counts the users of a peering).
/// The namespaces are the spec's: what it offloads once Liqo has granted
/// it, so a Purchase still waiting for its grant is not taken for one
/// serving none.
pub fn served(purchase: &Purchase) -> Option<Served<'_>> {
    let status = purchase.status.as_ref()?;
    if purchase.is_deleting() || status.phase == Phase::Ended.as_str() {
        return None;
    }
    Some(Served::of(purchase, status.provider_cluster_id.as_deref()?))
}

impl<'a> Served<'a> {
    /// `purchase` serving its spec's namespaces from `provider`.
    pub fn of(purchase: &'a Purchase, provider: &'a str) -> Served<'a> {
        Served {
            key: purchase.key(),
            provider,
            namespaces: purchase
                .spec
                .namespaces
                .iter()
                .map(String::as_str)
                .collect(),
        }
    }
}

fn list(namespaces: &BTreeSet<&str>) -> String {
    if namespaces.is_empty() {
        return "none".to_string();
    }
    namespaces.iter().copied().collect::<Vec<_>>().join(", ")
}

/// The `NodesShared` condition of `me` among `all` (which may hold `me`
/// too; it is skipped by key).
pub fn assess<'a>(me: &Served<'_>, all: impl IntoIterator<Item = &'a Purchase>) -> Cond {
    let mut others: Vec<Served<'a>> = all
        .into_iter()
        .filter_map(served)
        .filter(|o| o.key != me.key && o.provider == me.provider)
        .collect();
    // The message is compared with the one recorded: one order.
    others.sort_by(|a, b| a.key.cmp(&b.key));
    let provider = me.provider;
    let (same, different): (Vec<_>, Vec<_>) =
        others.iter().partition(|o| o.namespaces == me.namespaces);
    let names = |purchases: &[&Served<'_>]| {
        purchases
            .iter()
            .map(|o| format!("{} (namespaces: {})", o.key, list(&o.namespaces)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if !different.is_empty() {
        let mut message = format!(
            "other Purchases buy from provider {provider} for other namespaces than this one's ({}): {}; pods of those namespaces may run on this Purchase's virtual node and count against its grant, and pods of this Purchase's namespaces may run on theirs, because Liqo v1.2 offloads a namespace to every virtual node of a cluster (the NamespaceOffloading selects liqo.io/remote-cluster-id)",
            list(&me.namespaces),
            names(&different)
        );
        if !same.is_empty() {
            message.push_str(&format!("; serving the same namespaces: {}", names(&same)));
        }
        return Cond {
            type_: NODES_SHARED,
            status: true,
            reason: SHARES_PROVIDER_NODES.to_string(),
            message,
        };
    }
    if !same.is_empty() {
        return Cond {
            type_: NODES_SHARED,
            status: true,
            reason: SHARES_NAMESPACES.to_string(),
            message: format!(
                "{} also buy from provider {provider} for the same namespaces ({}): their NamespaceOffloadings select every virtual node of the provider, this Purchase's and theirs, and pods there may run on any of them",
                names(&same),
                list(&me.namespaces)
            ),
        };
    }
    Cond {
        type_: NODES_SHARED,
        status: false,
        reason: NOT_SHARED.to_string(),
        message: format!("no other Purchase in this cluster buys from provider {provider}"),
    }
}

/// The warning to publish as an Event: the `NodesShared` condition when
/// it says [`SHARES_PROVIDER_NODES`] and did not before with this message
/// (a Purchase joining or leaving the others names them anew). The
/// condition kept in the status remembers the warning across restarts.
pub fn warning<'a>(before: &[Condition], conditions: &'a [Cond]) -> Option<&'a Cond> {
    let now = conditions
        .iter()
        .find(|c| c.type_ == NODES_SHARED && c.reason == SHARES_PROVIDER_NODES)?;
    let warned = before
        .iter()
        .any(|b| b.type_ == NODES_SHARED && b.reason == now.reason && b.message == now.message);
    (!warned).then_some(now)
}

/// The Purchases whose `NodesShared` condition, as their status holds it,
/// is not what `changed` (as it now is, or as it was deleted) makes it
/// among `all` (the controller's cache): they are looked at again, so the
/// change reaches them without waiting for their resync. A Purchase not
/// of `changed`'s provider, or without the condition's standing, is left.
pub fn affected<'a>(changed: &Purchase, all: &'a [std::sync::Arc<Purchase>]) -> Vec<&'a Purchase> {
    let Some(provider) = changed
        .status
        .as_ref()
        .and_then(|s| s.provider_cluster_id.as_deref())
    else {
        return Vec::new();
    };
    let changed_key = changed.key();
    // The cache may not have the change yet: `changed` stands in for its
    // own entry.
    let world: Vec<&Purchase> = all
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| p.key() != changed_key)
        .chain(std::iter::once(changed))
        .collect();
    all.iter()
        .map(AsRef::as_ref)
        .filter(|p| p.key() != changed_key)
        .filter(|p| {
            let Some(me) = served(p) else {
                return false;
            };
            if me.provider != provider {
                return false;
            }
            let now = assess(&me, world.iter().copied());
            let recorded = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == NODES_SHARED));
            recorded.is_none_or(|r| {
                r.reason != now.reason
                    || r.message != now.message
                    || (r.status == "True") != now.status
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{PurchaseSpec, PurchaseStatus};

    fn purchase(name: &str, provider: Option<&str>, namespaces: &[&str]) -> Purchase {
        let spec: PurchaseSpec = serde_json::from_value(serde_json::json!({
            "contractID": "c", "namespaces": namespaces
        }))
        .unwrap();
        let mut p = Purchase::new(name, spec);
        p.metadata.namespace = Some("team".into());
        p.status = Some(PurchaseStatus {
            phase: "Ready".into(),
            provider_cluster_id: provider.map(String::from),
            ..PurchaseStatus::default()
        });
        p
    }

    fn condition_of(p: &Purchase, all: &[Purchase]) -> Cond {
        assess(&served(p).unwrap(), all)
    }

    #[test]
    fn alone_with_its_provider_nothing_is_shared() {
        let a = purchase("a", Some("p"), &["team-a"]);
        let other_provider = purchase("b", Some("q"), &["team-b"]);
        let no_provider_yet = purchase("c", None, &["team-c"]);
        let all = [a.clone(), other_provider, no_provider_yet];
        let c = condition_of(&a, &all);
        assert!(!c.status);
        assert_eq!((c.type_, c.reason.as_str()), (NODES_SHARED, NOT_SHARED));
        assert!(c.message.contains("provider p"), "{}", c.message);
    }

    #[test]
    fn the_same_namespaces_share_the_nodes_as_intended() {
        let a = purchase("a", Some("p"), &["team"]);
        let b = purchase("b", Some("p"), &["team"]);
        let c = condition_of(&a, &[a.clone(), b]);
        assert!(c.status);
        assert_eq!(c.reason, SHARES_NAMESPACES);
        assert!(
            c.message.contains("team/b (namespaces: team)"),
            "{}",
            c.message
        );
        assert!(c.message.contains("every virtual node"), "{}", c.message);
    }

    #[test]
    fn other_namespaces_share_the_grant_both_ways() {
        let a = purchase("a", Some("p"), &["team-a"]);
        let b = purchase("b", Some("p"), &["team-b"]);
        let same = purchase("s", Some("p"), &["team-a"]);
        let all = [a.clone(), b.clone(), same];
        let ca = condition_of(&a, &all);
        assert!(ca.status);
        assert_eq!(ca.reason, SHARES_PROVIDER_NODES);
        assert!(
            ca.message.contains("team/b (namespaces: team-b)"),
            "{}",
            ca.message
        );
        assert!(
            ca.message.contains("count against its grant"),
            "{}",
            ca.message
        );
        assert!(
            ca.message.contains("same namespaces: team/s"),
            "{}",
            ca.message
        );
        let cb = condition_of(&b, &all);
        assert_eq!(cb.reason, SHARES_PROVIDER_NODES);
        assert!(
            cb.message.contains("team/a (namespaces: team-a)"),
            "{}",
            cb.message
        );
        assert!(
            cb.message.contains("team/s (namespaces: team-a)"),
            "{}",
            cb.message
        );
        // A superset is not the same namespaces: pods of the extra one may
        // use the other's node.
        let wider = purchase("w", Some("p"), &["team-a", "team-b"]);
        let c = condition_of(&a, &[a.clone(), wider]);
        assert_eq!(c.reason, SHARES_PROVIDER_NODES);
    }

    #[test]
    fn an_ended_or_deleted_purchase_shares_nothing() {
        let a = purchase("a", Some("p"), &["team-a"]);
        let mut ended = purchase("b", Some("p"), &["team-b"]);
        ended.status.as_mut().unwrap().phase = Phase::Ended.as_str().into();
        let mut deleting = purchase("d", Some("p"), &["team-d"]);
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
        );
        let c = condition_of(&a, &[a.clone(), ended.clone(), deleting.clone()]);
        assert_eq!(c.reason, NOT_SHARED);
        assert!(served(&ended).is_none() && served(&deleting).is_none());
    }

    fn recorded(c: &Cond) -> Condition {
        Condition {
            type_: c.type_.to_string(),
            status: if c.status { "True" } else { "False" }.to_string(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_transition_time: "2026-01-01T00:00:00Z".into(),
            observed_generation: 1,
        }
    }

    #[test]
    fn the_warning_is_given_once_per_set_of_sharers() {
        let a = purchase("a", Some("p"), &["team-a"]);
        let b = purchase("b", Some("p"), &["team-b"]);
        let now = vec![condition_of(&a, &[a.clone(), b.clone()])];
        assert_eq!(warning(&[], &now), Some(&now[0]));
        assert_eq!(warning(&[recorded(&now[0])], &now), None);
        // A third Purchase names the sharers anew: warned again.
        let c = purchase("c", Some("p"), &["team-c"]);
        let more = vec![condition_of(&a, &[a.clone(), b, c])];
        assert!(warning(&[recorded(&now[0])], &more).is_some());
        // The intended case never warns.
        let same = purchase("s", Some("p"), &["team-a"]);
        let intended = vec![condition_of(&a, &[a.clone(), same])];
        assert_eq!(warning(&[], &intended), None);
    }

    #[test]
    fn a_change_reaches_exactly_the_purchases_it_changes() {
        let mut a = purchase("a", Some("p"), &["team-a"]);
        let lone = condition_of(&a, &[a.clone()]);
        a.status.as_mut().unwrap().conditions = vec![recorded(&lone)];
        let mut elsewhere = purchase("x", Some("q"), &["team-a"]);
        let lone_x = condition_of(&elsewhere, &[elsewhere.clone()]);
        elsewhere.status.as_mut().unwrap().conditions = vec![recorded(&lone_x)];
        let b = purchase("b", Some("p"), &["team-b"]);
        // The cache has not seen b yet: a is affected, x is not.
        let cache = vec![Arc::new(a.clone()), Arc::new(elsewhere.clone())];
        let hit: Vec<String> = affected(&b, &cache).iter().map(|p| p.key()).collect();
        assert_eq!(hit, ["team/a"]);
        // Once a records the sharing, another change of b that alters
        // nothing for a leaves it.
        let shared = condition_of(&a, &[a.clone(), b.clone()]);
        a.status.as_mut().unwrap().conditions = vec![recorded(&shared)];
        let cache = vec![Arc::new(a.clone()), Arc::new(b.clone())];
        assert!(affected(&b, &cache).is_empty());
        // b deleted: a is looked at again.
        let mut gone = b.clone();
        gone.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
        );
        let hit: Vec<String> = affected(&gone, &cache).iter().map(|p| p.key()).collect();
        assert_eq!(hit, ["team/a"]);
        // A Purchase without a provider yet changes nobody's.
        assert!(affected(&purchase("n", None, &["team-b"]), &cache).is_empty());
    }
}
