use serde_json::json;

use super::*;

/// A contract as the catalog writes it, purchased at `minute` past 10:00.
fn contract(id: &str, minute: u32, active: bool) -> Value {
    let full = Contract {
        id: id.into(),
        active,
        purchased_at: format!("2026-01-01T10:{minute:02}:00Z").parse().unwrap(),
        ..Contract::default()
    };
    serde_json::to_value(full).unwrap()
}

fn ids(set: &ContractSet) -> Vec<String> {
    let (contracts, raw) = set.contracts().expect("answered");
    let ids: Vec<String> = contracts.iter().map(|c| c.id.clone()).collect();
    let raw_ids: Vec<String> = raw
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, raw_ids, "the two readings keep one order");
    ids
}

#[test]
fn nothing_is_known_before_a_snapshot_or_a_poll() {
    let mut set = ContractSet::new();
    assert!(!set.known() && set.contracts().is_none() && set.since().is_none());
    // A change before any snapshot does not pretend to be the whole set.
    assert!(!set.change(1, contract("a", 1, true)));
    assert!(set.contracts().is_none());
    assert_eq!(set.since(), Some(1));
    // An empty snapshot is an answer: no contracts, known.
    assert!(set.snapshot(2, vec![]));
    assert_eq!(ids(&set), Vec::<String>::new());
}

#[test]
fn a_snapshot_replaces_newest_first() {
    let mut set = ContractSet::new();
    assert!(set.snapshot(
        10,
        vec![
            contract("b", 1, true),
            contract("c", 5, true),
            contract("a", 1, true),
            contract("ended", 9, false),
        ]
    ));
    // Newest first, then by id; an inactive one in a snapshot is not held.
    assert_eq!(ids(&set), ["c", "a", "b"]);
    assert_eq!((set.seq(), set.since()), (10, Some(10)));
    // The same contracts again: not a change.
    assert!(!set.snapshot(
        11,
        vec![
            contract("a", 1, true),
            contract("b", 1, true),
            contract("c", 5, true)
        ]
    ));
    assert!(set.snapshot(12, vec![contract("d", 2, true)]));
    assert_eq!(ids(&set), ["d"]);
}

#[test]
fn changes_upsert_and_an_ended_contract_goes() {
    let mut set = ContractSet::new();
    set.snapshot(5, vec![contract("a", 1, true)]);
    assert!(set.change(6, contract("b", 2, true)));
    assert_eq!(ids(&set), ["b", "a"]);
    // The same contract as held: no change.
    assert!(!set.change(7, contract("b", 2, true)));
    let mut updated = contract("a", 1, true);
    updated["state"] = json!("Ready");
    assert!(set.change(8, updated.clone()));
    assert_eq!(set.contracts().unwrap().1[1], updated);
    assert!(set.change(9, contract("a", 1, false)));
    assert_eq!(ids(&set), ["b"]);
    // An end of a contract never held changes nothing.
    assert!(!set.change(10, contract("zz", 1, false)));
    assert_eq!(set.seq(), 10);
}

#[test]
fn an_older_line_never_undoes_a_newer_one() {
    let mut set = ContractSet::new();
    set.snapshot(5, vec![]);
    let mut newer = contract("a", 1, true);
    newer["state"] = json!("Ready");
    assert!(set.change(8, newer.clone()));
    // An older version of a held contract is ignored …
    assert!(!set.change(7, contract("a", 1, true)));
    assert_eq!(set.contracts().unwrap().1[0], newer);
    // … so is an older line of an ended one (it stays ended) …
    assert!(set.change(9, contract("a", 1, false)));
    assert!(!set.change(8, newer));
    assert_eq!(ids(&set), Vec::<String>::new());
    // … and anything older than the snapshot, which already holds it.
    set.snapshot(20, vec![]);
    assert!(!set.change(19, contract("b", 1, true)));
    assert!(set.change(21, contract("b", 1, true)));
    // The position never goes back.
    assert_eq!(set.seq(), 21);
    set.position(3);
    assert_eq!(set.seq(), 21);
}

#[test]
fn a_resume_keeps_the_set_and_a_snapshot_after_it_replaces_it() {
    let mut set = ContractSet::new();
    set.snapshot(5, vec![contract("a", 1, true), contract("b", 2, true)]);
    // `resumed` and heartbeats move the position only.
    set.position(6);
    set.position(9);
    assert_eq!(ids(&set), ["b", "a"]);
    assert_eq!(set.since(), Some(9));
    // A resume refused: snapshot next time, the set held meanwhile.
    set.forget_position();
    assert_eq!(set.since(), None);
    assert_eq!(ids(&set), ["b", "a"]);
    assert!(set.snapshot(12, vec![contract("c", 3, true)]));
    assert_eq!(ids(&set), ["c"]);
}

#[test]
fn a_poll_replaces_the_set_and_later_changes_still_apply() {
    let mut set = ContractSet::new();
    assert!(set.polled(vec![contract("a", 1, true)]));
    assert_eq!(set.since(), None, "a poll is no stream position");
    assert!(!set.polled(vec![contract("a", 1, true)]));
    set.snapshot(5, vec![contract("a", 1, true)]);
    assert!(set.polled(vec![contract("b", 2, true)]));
    assert_eq!(ids(&set), ["b"]);
    // Resumed from 5 after the poll: the changes after 5 apply.
    assert!(set.change(6, contract("b", 2, false)));
    assert_eq!(ids(&set), Vec::<String>::new());
}

#[test]
fn contracts_of_another_shape_are_kept_raw_or_left_out() {
    let mut set = ContractSet::new();
    let odd = json!({"id": "odd", "active": true, "purchasedAt": "2026-01-01T11:00:00Z", "cost": "not a cost"});
    set.snapshot(
        1,
        vec![odd.clone(), json!({"active": true}), contract("a", 1, true)],
    );
    let (contracts, raw) = set.contracts().unwrap();
    // Not a Contract, but still there for callers reading JSON, in order.
    assert_eq!(contracts.len(), 1);
    assert_eq!(raw, [odd, contract("a", 1, true)]);
    assert_eq!(set.take_unreadable(), [Unreadable("an id")]);
    assert!(set.take_unreadable().is_empty());
}

#[test]
fn ended_markers_stay_bounded() {
    let mut set = ContractSet::new();
    set.snapshot(0, vec![]);
    let total = MAX_ENDED as u64 + 1;
    for seq in 1..=total {
        set.change(seq, contract(&format!("c{seq}"), 1, false));
    }
    assert!(set.ended.len() <= MAX_ENDED);
    // A forgotten end is still covered by the floor.
    assert!(!set.change(1, contract("c1", 1, true)));
}
