//! The buyer's contracts as the catalog's change stream brings them: one
//! [`ContractFollower`] per catalog and credentials Secret the Purchases
//! (and the network policies) use, so a change of a contract — its
//! peering credentials attached, its end, an extension — reaches the
//! Purchase it belongs to at once instead of at the next poll.
//!
//! A follower is started by the first round that reads its Secret, and
//! started again (the old one stopped) when a round reads another token
//! from it: the Secret changed. It stops when no Purchase uses it any more.
//! Each follower's changes are sent, as the ids of the contracts that
//! changed, on the one channel [`Followers::new`] returns; the controller
//! turns them into rounds of the Purchases that name those contracts
//! ([`purchases_of`]).
//!
//! The contract as `GET /contracts/{id}` answers it (with its peering
//! credentials, which the stream never sends) is still read by the round:
//! the follower only says when to read it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use catalog_client::contract_follower::{ContractFollower, FollowerOptions};
use catalog_client::http::Http;
use catalog_client::wire::Contract;
use catalog_client::{Login, Session};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::model::Purchase;

/// Which follower: a catalog and the Secret (and key) its token is read
/// from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Credentials {
    pub catalog: reqwest::Url,
    /// `namespace/name` of the Secret.
    pub secret: String,
    pub key: String,
}

/// One follower held, with what it was started with and who uses it.
struct Held {
    token: String,
    follower: ContractFollower,
    stop: CancellationToken,
    users: BTreeSet<String>,
}

/// The followers of the controller (one term of leadership): all stop with
/// its `shutdown`.
pub struct Followers {
    http: reqwest::Client,
    options: FollowerOptions,
    shutdown: CancellationToken,
    changes: mpsc::UnboundedSender<BTreeSet<String>>,
    held: Mutex<HashMap<Credentials, Held>>,
}

/// The ids of the contracts that changed, as the followers send them.
pub type Changes = mpsc::UnboundedReceiver<BTreeSet<String>>;

impl Followers {
    /// No follower yet; the receiver gets every change of every follower
    /// started later.
    pub fn new(
        http: reqwest::Client,
        options: FollowerOptions,
        shutdown: CancellationToken,
    ) -> (Self, Changes) {
        let (changes, receiver) = mpsc::unbounded_channel();
        let followers = Followers {
            http,
            options,
            shutdown,
            changes,
            held: Mutex::new(HashMap::new()),
        };
        (followers, receiver)
    }

    /// The follower of `credentials` as `token`, used by `user` (a
    /// Purchase's key, or the network policies): started when there is
    /// none, started again when the token is not the one it was started
    /// with. `user` no longer uses any other follower.
    pub fn follow(&self, credentials: &Credentials, token: &str, user: &str) -> ContractFollower {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        release_from(&mut held, user, Some(credentials));
        if let Some(h) = held.get_mut(credentials) {
            if h.token == token {
                h.users.insert(user.to_string());
                return h.follower.clone();
            }
            tracing::info!(catalog = %credentials.catalog, secret = %credentials.secret, "the credentials Secret changed: its contract follower starts again");
            h.stop.cancel();
        }
        let stop = self.shutdown.child_token();
        let session = Session::new(
            Http::new(self.http.clone(), credentials.catalog.clone()),
            Login::Bearer {
                token: token.to_string(),
            },
        );
        let follower = ContractFollower::start(session, self.options.clone(), stop.clone());
        tokio::spawn(forward(
            follower.clone(),
            stop.clone(),
            self.changes.clone(),
        ));
        held.insert(
            credentials.clone(),
            Held {
                token: token.to_string(),
                follower: follower.clone(),
                stop,
                users: BTreeSet::from([user.to_string()]),
            },
        );
        follower
    }

    /// `user` uses no follower any more (a deleted Purchase, one whose
    /// credentials cannot be read); a follower nobody uses stops.
    pub fn release(&self, user: &str) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        release_from(&mut held, user, None);
    }

    /// How many followers run (for tests and logs).
    pub fn running(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Take `user` off every follower but `keep`'s; stop those left unused.
fn release_from(held: &mut HashMap<Credentials, Held>, user: &str, keep: Option<&Credentials>) {
    held.retain(|credentials, h| {
        if Some(credentials) != keep {
            h.users.remove(user);
        }
        let used = !h.users.is_empty() || Some(credentials) == keep;
        if !used {
            tracing::debug!(catalog = %credentials.catalog, secret = %credentials.secret, "contract follower unused: stopped");
            h.stop.cancel();
        }
        used
    });
}

/// Send the ids of the contracts that changed, at each change of
/// `follower`, until `stop`.
async fn forward(
    mut follower: ContractFollower,
    stop: CancellationToken,
    changes: mpsc::UnboundedSender<BTreeSet<String>>,
) {
    let mut known = HashMap::new();
    let mut generation = None;
    // The first answer is what the round that started the follower has
    // just read itself: it wakes nobody (a round woken meanwhile would run
    // on a cache that has not seen that round's status yet).
    let mut answered = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = follower.changed() => {}
        }
        let now = follower.current();
        if generation == Some(now.generation) {
            continue;
        }
        generation = Some(now.generation);
        let Some(contracts) = &now.contracts else {
            continue;
        };
        let changed = changed(&known, contracts);
        known = contracts
            .iter()
            .map(|c| (c.id.clone(), what_wakes(c)))
            .collect();
        if !std::mem::replace(&mut answered, true) {
            continue;
        }
        if !changed.is_empty() && changes.send(changed).is_err() {
            return;
        }
    }
}

/// What of a contract wakes its Purchase: all but what the consumer side
/// writes itself (its `state` and `reason`: the round that wrote them has
/// acted already) and the network policy (the network policies' own
/// business).
fn what_wakes(contract: &Contract) -> Contract {
    Contract {
        state: Default::default(),
        reason: None,
        state_changed_at: Default::default(),
        network_policy: None,
        ..contract.clone()
    }
}

/// The ids of the contracts that came, went, or changed in what wakes a
/// Purchase, from `before` (by id, as [`what_wakes`] keeps them) to `after`.
pub fn changed(before: &HashMap<String, Contract>, after: &[Contract]) -> BTreeSet<String> {
    let mut ids: BTreeSet<String> = after
        .iter()
        .filter(|c| before.get(&c.id) != Some(&what_wakes(c)))
        .map(|c| c.id.clone())
        .collect();
    let present: BTreeSet<&str> = after.iter().map(|c| c.id.as_str()).collect();
    ids.extend(
        before
            .keys()
            .filter(|id| !present.contains(id.as_str()))
            .cloned(),
    );
    ids
}

/// The Purchases among `all` whose contract (given in the spec, or
/// recorded in the status) is one of `ids`.
pub fn purchases_of<'a>(
    ids: &'a BTreeSet<String>,
    all: &'a [std::sync::Arc<Purchase>],
) -> impl Iterator<Item = &'a std::sync::Arc<Purchase>> + 'a {
    all.iter().filter(|p| {
        let status_id = p.status.as_ref().and_then(|s| s.contract_id.as_ref());
        [p.spec.contract_id.as_ref(), status_id]
            .into_iter()
            .flatten()
            .any(|id| ids.contains(id))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use catalog_client::wire::ContractState;

    fn contract(id: &str) -> Contract {
        Contract {
            id: id.to_string(),
            active: true,
            ..Contract::default()
        }
    }

    fn known(contracts: &[Contract]) -> HashMap<String, Contract> {
        contracts
            .iter()
            .map(|c| (c.id.clone(), what_wakes(c)))
            .collect()
    }

    #[test]
    fn new_gone_and_changed_contracts_wake_their_purchases() {
        let before = known(&[contract("a"), contract("b")]);
        let mut b = contract("b");
        b.ending_soon = true;
        let after = [b, contract("c")];
        let ids = changed(&before, &after);
        assert_eq!(
            ids.into_iter().collect::<Vec<_>>(),
            ["a", "b", "c"].map(String::from)
        );
        assert!(changed(&known(&after), &after).is_empty());
    }

    #[test]
    fn the_consumers_own_reports_wake_nobody() {
        let before = known(&[contract("a")]);
        let mut reported = contract("a");
        reported.state = ContractState::Ready;
        reported.reason = Some("Ready: peered".into());
        assert!(changed(&before, &[reported]).is_empty());
    }

    #[test]
    fn a_change_reaches_the_purchases_naming_its_contract() {
        use crate::model::{PurchaseSpec, PurchaseStatus};
        let by_spec = Purchase::new(
            "by-spec",
            PurchaseSpec {
                contract_id: Some("a".into()),
                ..PurchaseSpec::default()
            },
        );
        let mut by_status = Purchase::new("by-status", PurchaseSpec::default());
        by_status.status = Some(PurchaseStatus {
            contract_id: Some("b".into()),
            ..PurchaseStatus::default()
        });
        let other = Purchase::new("other", PurchaseSpec::default());
        let all = [by_spec, by_status, other].map(std::sync::Arc::new);
        let names = |ids: &[&str]| {
            let ids = ids.iter().map(|s| s.to_string()).collect();
            purchases_of(&ids, &all)
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&["a"]), ["by-spec"]);
        assert_eq!(names(&["b", "z"]), ["by-status"]);
        assert!(names(&["z"]).is_empty());
    }
}
