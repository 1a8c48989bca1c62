//! The decision's rules, one by one, and the hysteresis over time.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use quantity::ResourceList;
use serde_json::json;

use super::*;
use crate::decision::Prepared;
use crate::offers::{Offer, Offers};
use crate::policy::{Hysteresis, Rules};

fn offer(
    id: &str,
    provider: &str,
    labels: &[(&str, &str)],
    plans: &[(&str, &str, &str, &str)],
) -> Offer {
    let plans: serde_json::Map<String, serde_json::Value> = plans
        .iter()
        .map(|(key, cost, cpu, mem)| {
            (
                key.to_string(),
                json!({"name": key, "cost": cost, "resources": {"cpu": cpu, "memory": mem}}),
            )
        })
        .collect();
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    serde_json::from_value(
        json!({"id": id, "clusterID": provider, "labels": labels, "plans": plans}),
    )
    .unwrap()
}

fn offers(list: Vec<Offer>) -> Offers {
    list.into_iter().map(|o| (o.id.clone(), o)).collect()
}

fn demand(cpu: &str, mem: &str) -> ResourceList {
    ResourceList::from_strings([("cpu", cpu), ("memory", mem)]).unwrap()
}

fn rules(spread: usize) -> Rules {
    Rules {
        spread,
        ..Rules::default()
    }
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

struct Case {
    consumer: String,
    demand: ResourceList,
    rules: Rules,
    hysteresis: Hysteresis,
    offers: Offers,
    disabled: BTreeSet<String>,
}

impl Case {
    fn new(offers: Offers) -> Self {
        Case {
            consumer: "consumer".into(),
            demand: demand("1", "1Gi"),
            rules: rules(1),
            hysteresis: Hysteresis {
                min_saving_percent: 10,
                hold: Duration::from_secs(60),
            },
            offers,
            disabled: BTreeSet::new(),
        }
    }

    fn decide(&self, current: &[&str], pending: Option<&Pending>, now: Timestamp) -> Decision {
        let current: Vec<String> = current.iter().map(|s| s.to_string()).collect();
        let input = Input {
            consumer: &self.consumer,
            demand: &self.demand,
            rules: &self.rules,
            hysteresis: self.hysteresis,
            offers: &self.offers,
            disabled: &self.disabled,
            current: &current,
            pending,
            now,
        };
        let direct = decide(&input);
        // Every case also checks the controller's way: the same decision
        // worked out, then remembered.
        let prepared = Prepared::new(&self.offers, &self.disabled);
        assert_eq!(prepared.decide(&input), direct, "worked out");
        assert_eq!(prepared.decide(&input), direct, "remembered");
        direct
    }
}

fn market() -> Offers {
    offers(vec![
        offer(
            "a",
            "p1",
            &[("region", "eu")],
            &[("small", "2", "2", "4Gi"), ("big", "5", "8", "32Gi")],
        ),
        offer(
            "b",
            "p2",
            &[("region", "us")],
            &[("small", "1", "2", "4Gi")],
        ),
        offer(
            "c",
            "p3",
            &[("region", "eu")],
            &[("tiny", "0.5", "500m", "1Gi"), ("small", "3", "4", "8Gi")],
        ),
        offer(
            "d",
            "consumer",
            &[("region", "eu")],
            &[("free", "0", "64", "256Gi")],
        ),
    ])
}

#[test]
fn the_cheapest_fitting_plan_wins_and_the_consumer_is_never_chosen() {
    let case = Case::new(market());
    let d = case.decide(&[], None, at(0));
    assert_eq!(d.chosen, ["p2"]);
    assert_eq!(d.rule, Rule::Cheapest);
    assert_eq!(d.excluded["consumer"], Exclusion::OwnCluster);
    // p3's tiny plan is cheaper but does not fit 1 cpu / 1Gi.
    let p3 = d.candidates.iter().find(|c| c.provider == "p3").unwrap();
    assert_eq!(
        (p3.plan.as_str(), p3.cost.to_string()),
        ("small", "3".into())
    );

    let mut small = Case::new(market());
    small.demand = demand("500m", "1Gi");
    assert_eq!(small.decide(&[], None, at(0)).chosen, ["p3"]);

    let mut huge = Case::new(market());
    huge.demand = demand("16", "1Gi");
    let d = huge.decide(&[], None, at(0));
    assert!(d.chosen.is_empty());
    assert_eq!(d.rule, Rule::NoneQualifies);
    assert_eq!(d.excluded["p1"], Exclusion::NoPlanFits);
    // A selection naming the consumer (written by someone else) loses it.
    let d = huge.decide(&["consumer", "p1"], None, at(0));
    assert_eq!(d.chosen, ["p1"]);
}

#[test]
fn allow_deny_and_labels_compose() {
    let mut case = Case::new(market());
    case.rules.allow = vec![["p1", "p3", "consumer"]
        .iter()
        .map(|s| s.to_string())
        .collect()];
    let d = case.decide(&[], None, at(0));
    assert_eq!(d.chosen, ["p1"]);
    assert_eq!(d.excluded["p2"], Exclusion::NotAllowed);
    assert_eq!(
        d.excluded["consumer"],
        Exclusion::OwnCluster,
        "even when allowed"
    );

    case.rules.deny = BTreeSet::from(["p1".to_string()]);
    let d = case.decide(&[], None, at(0));
    assert_eq!(d.chosen, ["p3"]);
    assert_eq!(d.excluded["p1"], Exclusion::Denied);

    // A provider disabled in the catalog stops qualifying: replaced.
    let mut off = Case::new(market());
    off.disabled = BTreeSet::from(["p2".to_string()]);
    let d = off.decide(&["p2"], None, at(0));
    assert_eq!(
        (d.chosen.clone(), d.rule),
        (vec!["p1".to_string()], Rule::Replaced)
    );
    assert_eq!(d.excluded["p2"], Exclusion::Disabled);

    let mut labelled = Case::new(market());
    labelled.rules.required_labels = BTreeMap::from([("region".to_string(), "eu".to_string())]);
    let d = labelled.decide(&[], None, at(0));
    assert_eq!(d.chosen, ["p1"]);
    assert_eq!(
        d.excluded["p2"],
        Exclusion::MissingLabels(vec!["region=eu".into()])
    );
    assert!(
        d.explain().contains("p2: no offer carries region=eu"),
        "{}",
        d.explain()
    );
}

#[test]
fn spread_takes_the_cheapest_n() {
    let mut case = Case::new(market());
    case.rules = rules(2);
    assert_eq!(case.decide(&[], None, at(0)).chosen, ["p1", "p2"]);
    case.rules = rules(5);
    let d = case.decide(&[], None, at(0));
    assert_eq!(d.chosen, ["p1", "p2", "p3"], "as many as qualify");
    // Spread grows: the kept ones stay, the gap is filled.
    case.rules = rules(2);
    let d = case.decide(&["p3"], None, at(0));
    assert_eq!(d.chosen, ["p2", "p3"]);
}

#[test]
fn a_provider_that_stops_qualifying_is_replaced_once() {
    let case = Case::new(market());
    // On p1 (not the cheapest, but it qualifies): kept, p2 is 50% cheaper → pending.
    let d = case.decide(&["p1"], None, at(0));
    assert_eq!(d.chosen, ["p1"]);
    assert_eq!(d.rule, Rule::Kept);
    // p1 withdraws its offer: the next cheapest, p2.
    let mut gone = market();
    gone.remove("a");
    let case = Case::new(gone);
    let d = case.decide(&["p1"], None, at(0));
    assert_eq!(
        (d.chosen.clone(), d.rule),
        (vec!["p2".to_string()], Rule::Replaced)
    );
    assert_eq!(d.excluded["p1"], Exclusion::NoOffer);
    // …and then stays there.
    let again = case.decide(
        &d.chosen.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
        at(1),
    );
    assert_eq!(
        (again.chosen.clone(), again.rule),
        (vec!["p2".to_string()], Rule::Kept)
    );
    assert!(!again.moves(&d.chosen));
}

#[test]
fn cheaper_providers_must_beat_the_margin_for_the_hold_time() {
    let case = Case::new(market());
    let d0 = case.decide(&["p1"], None, at(0));
    let pending = d0.pending.clone().expect("p2 is pending");
    assert_eq!(pending.providers, ["p2"]);
    assert_eq!(d0.recheck, Some(Duration::from_millis(60_001)));
    // Still within the hold: stays, the clock keeps its start.
    let d1 = case.decide(&["p1"], Some(&pending), at(60));
    assert_eq!(
        (d1.chosen.clone(), d1.rule),
        (vec!["p1".to_string()], Rule::Kept)
    );
    assert_eq!(d1.pending.as_ref().unwrap().since, at(0));
    // Longer than the hold: moves.
    let d2 = case.decide(&["p1"], Some(&pending), at(61));
    assert_eq!(
        (d2.chosen, d2.rule),
        (vec!["p2".to_string()], Rule::Cheaper)
    );

    // A pending set that is not the cheapest any more restarts the clock.
    let other = Pending {
        providers: vec!["p9".into()],
        since: at(0),
    };
    let d = case.decide(&["p1"], Some(&other), at(100));
    assert_eq!(d.pending.unwrap().since, at(100));

    // Within the margin: no pending at all. p1 at 2 vs p4 at 1.9 (5%).
    let mut close = market();
    close.remove("b");
    close.insert(
        "e".into(),
        offer("e", "p4", &[], &[("s", "1.9", "2", "4Gi")]),
    );
    let case = Case::new(close);
    let d = case.decide(&["p1"], None, at(0));
    assert_eq!(
        (d.chosen, d.rule, d.pending),
        (vec!["p1".to_string()], Rule::Kept, None)
    );

    // Margin 0 and no hold: moves at once to anything cheaper.
    let mut eager = Case::new(market());
    eager.hysteresis = Hysteresis {
        min_saving_percent: 0,
        hold: Duration::ZERO,
    };
    assert_eq!(eager.decide(&["p1"], None, at(0)).chosen, ["p2"]);
}

#[test]
fn nothing_qualifying_keeps_the_selection() {
    let case = Case::new(offers(vec![offer(
        "d",
        "consumer",
        &[],
        &[("free", "0", "64", "256Gi")],
    )]));
    let d = case.decide(&["p1"], None, at(0));
    assert_eq!(
        (d.chosen, d.rule),
        (vec!["p1".to_string()], Rule::NoneQualifies)
    );
    assert_eq!(d.excluded["p1"], Exclusion::NoOffer);
}

#[test]
fn prepared_offers_remember_verdicts_per_consumer_rules_and_demand() {
    let offers = market();
    let disabled = BTreeSet::new();
    let prepared = Prepared::new(&offers, &disabled);
    let (one, eu) = (rules(1), {
        let mut r = rules(1);
        r.required_labels.insert("region".into(), "eu".into());
        r
    });
    let (small, big) = (demand("500m", "1Gi"), demand("8", "32Gi"));
    let decide = |consumer: &str, rules: &Rules, demand: &ResourceList| {
        prepared
            .decide(&Input {
                consumer,
                demand,
                rules,
                hysteresis: Hysteresis::default(),
                offers: &offers,
                disabled: &disabled,
                current: &[],
                pending: None,
                now: at(0),
            })
            .chosen
    };
    assert_eq!(decide("consumer", &one, &small), ["p3"]);
    assert_eq!(decide("consumer", &one, &big), ["p1"], "another demand");
    assert_eq!(decide("consumer", &one, &small), ["p3"]);
    assert_eq!(decide("p3", &one, &small), ["consumer"], "another consumer");
    let mut no_p3 = one.clone();
    no_p3.deny.insert("p3".into());
    assert_eq!(decide("consumer", &no_p3, &small), ["p2"], "other rules");
    assert_eq!(decide("consumer", &eu, &small), ["p3"]);
    assert_eq!(prepared.remembered(), 5);
}
