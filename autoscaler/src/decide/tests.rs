use std::collections::BTreeMap;
use std::time::Duration;

use catalog_client::wire::cost::Cost;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration,
};
use proptest::prelude::*;
use quantity::{Quantity, ResourceList};

use super::choose::{self, Headroom, Objective, PlanType, PodItem, Problem};
use super::*;
use crate::model::{LabelSelector, Limits, OfferFilter, Strategy as Choice};
use crate::spend::{Money, Period, Pricing, Spend};

fn q(s: &str) -> Quantity {
    s.parse().unwrap()
}
fn money(s: &str) -> Money {
    Money::from(s.parse::<Cost>().unwrap())
}
fn rl(pairs: &[(&str, &str)]) -> ResourceList {
    pairs.iter().map(|(k, v)| (k.to_string(), q(v))).collect()
}
fn now() -> Timestamp {
    "2026-03-10T12:00:00Z".parse().unwrap()
}

fn pod(key: &str, cpu: &str) -> WaitingPod {
    WaitingPod {
        key: key.into(),
        requests: rl(&[("cpu", cpu), ("memory", "100Mi"), ("pods", "1")]),
        ..WaitingPod::default()
    }
}

fn cand(offer: &str, provider: &str, cpu: &str, cost: &str) -> Candidate {
    Candidate {
        offer_id: offer.into(),
        plan_id: "p".into(),
        provider_id: provider.into(),
        provider_name: format!("{provider}-name"),
        labels: BTreeMap::from([("region".to_string(), "eu".to_string())]),
        service: false,
        resources: rl(&[("cpu", cpu), ("memory", "64Gi")]),
        cost: cost.parse().unwrap(),
        pricing: Some(Pricing {
            currency: "EUR".into(),
            per: Period::Hour,
        }),
    }
}

fn limits(per_hour: &str) -> Limits {
    Limits {
        currency: "EUR".into(),
        max_spend_per_hour: Some(money(per_hour)),
        ..Limits::default()
    }
}

/// The round's inputs, defaults everywhere but pods, offers and limits.
struct World {
    pods: Vec<WaitingPod>,
    candidates: Vec<Candidate>,
    rooms: Vec<Room>,
    committed: Committed,
    limits: Limits,
    offers: OfferFilter,
    term: Option<Duration>,
    backoff: BTreeMap<(String, String), Timestamp>,
    strategy: Choice,
    priority: Vec<String>,
}

impl World {
    fn new(pods: Vec<WaitingPod>, candidates: Vec<Candidate>) -> Self {
        World {
            pods,
            candidates,
            rooms: Vec::new(),
            committed: Committed::default(),
            limits: limits("1000"),
            offers: OfferFilter::default(),
            term: None,
            backoff: BTreeMap::new(),
            strategy: Choice::Cheapest,
            priority: Vec::new(),
        }
    }
    fn decide(&self) -> ScaleUp {
        scale_up(&Input {
            pods: &self.pods,
            candidates: &self.candidates,
            rooms: &self.rooms,
            committed: &self.committed,
            limits: &self.limits,
            offers: &self.offers,
            term: self.term,
            backoff: &self.backoff,
            strategy: self.strategy,
            priority: &self.priority,
            now: now(),
        })
    }
}

fn bought(up: &ScaleUp) -> Vec<String> {
    let mut v: Vec<String> = up.buy.iter().map(|b| b.offer_id.clone()).collect();
    v.sort();
    v
}

fn rejected<'a>(up: &'a ScaleUp, offer: &str) -> Option<&'a Reason> {
    up.rejected
        .iter()
        .find(|r| r.offer_id == offer)
        .map(|r| &r.reason)
}

fn pods_named(n: usize, cpu: &str) -> Vec<WaitingPod> {
    (0..n).map(|i| pod(&format!("apps/p{i}"), cpu)).collect()
}

#[test]
fn the_cheapest_set_is_bought_where_greedy_differs() {
    // Three 1-cpu pods. Y (2 cpu for 0.5) is cheaper per cpu than X
    // (3 cpu for 0.9): greedy buys Y twice (1.0), the cheapest set is X (0.9).
    let w = World::new(
        pods_named(3, "1"),
        vec![cand("X", "px", "3", "0.9"), cand("Y", "py", "2", "0.5")],
    );
    let up = w.decide();
    assert_eq!(bought(&up), ["X"]);
    assert_eq!(up.added_per_hour, money("0.9"));
    assert_eq!(up.search, Search::Exact);
    assert_eq!(up.buy[0].pods.len(), 3);

    // The heuristic alone does worse here: the test means something.
    let problem = Problem {
        types: [("3", "0.9"), ("2", "0.5")]
            .iter()
            .map(|(cpu, cost)| PlanType {
                cap: vec![q(cpu).milli_value().into()],
                sell: vec![0],
                hour: money(cost).nanos(),
                month: 0,
                tier: 0,
            })
            .collect(),
        pods: (0..3)
            .map(|_| PodItem {
                need: vec![1000],
                admitted: vec![true, true],
                priority: 0,
            })
            .collect(),
        headroom: Headroom {
            res: vec![None],
            ..Headroom::default()
        },
        objective: Objective::Cost,
        waste_dims: vec![0],
    };
    let greedy = choose::greedy(&problem);
    assert_eq!(greedy.hour, money("1.0").nanos());
    assert_eq!(choose::solve(&problem).hour, money("0.9").nanos());
}

#[test]
fn ten_pods_six_cpu_label_excluded_cheapest_not_bought() {
    // The e2e scenario: ten 600m pods (6 cpu). A: 4 cpu for 1.0 (6 pods),
    // B: 2 cpu for 0.45 (3 pods). First fit over the offers in order buys
    // A + B + B (1.9); the cheapest set is four B (1.8). C is cheapest of
    // all but in the wrong region.
    let mut c = cand("C", "pc", "8", "0.1");
    c.labels.insert("region".into(), "us".into());
    let mut w = World::new(
        pods_named(10, "600m"),
        vec![cand("A", "pa", "4", "1.0"), cand("B", "pb", "2", "0.45"), c],
    );
    w.offers.selector = Some(LabelSelector {
        match_labels: BTreeMap::from([("region".into(), "eu".into())]),
        ..LabelSelector::default()
    });
    let up = w.decide();
    assert_eq!(up.added_per_hour, money("1.8"));
    assert_eq!(bought(&up), ["B", "B", "B", "B"]);
    assert_eq!(rejected(&up, "C"), Some(&Reason::Selector));
    assert!(up.unplaceable.is_empty());
    let served: usize = up.buy.iter().map(|b| b.pods.len()).sum();
    assert_eq!(served, 10);
}

#[test]
fn a_budget_below_the_cheapest_plan_buys_nothing_and_says_so() {
    let mut w = World::new(pods_named(1, "1"), vec![cand("A", "pa", "2", "0.5")]);
    w.limits = limits("0.25");
    let up = w.decide();
    assert!(up.buy.is_empty());
    let reason = &up.unplaceable[0].reason;
    assert!(matches!(
        reason,
        PodReason::Blocked(Reason::Budget {
            period: BudgetPeriod::Hour,
            ..
        })
    ));
    assert_eq!(
        reason.to_string(),
        "a plan fits, but over budget: spend would be 0.5 per hour, above maxSpendPerHour 0.25"
    );
    assert!(matches!(rejected(&up, "A"), Some(Reason::Budget { .. })));
}

#[test]
fn the_month_budget_counts_month_to_date_held_and_the_new_plan_to_month_end() {
    // 2026-03-10 12:00 → April 1st: 21.5 days = 516 h. A plan at 0.1/h adds 51.6.
    let mut w = World::new(pods_named(1, "1"), vec![cand("A", "pa", "2", "0.1")]);
    w.limits = Limits {
        currency: "EUR".into(),
        max_spend_per_month: Some(money("100")),
        ..Limits::default()
    };
    w.committed.spend = Spend {
        per_hour: money("0.05"),
        month_to_date: money("20"),
        rest_of_month: money("25.8"),
    };
    // 20 + 25.8 + 51.6 = 97.4: fits.
    assert_eq!(bought(&w.decide()), ["A"]);
    w.committed.spend.month_to_date = money("23");
    let up = w.decide();
    assert!(up.buy.is_empty());
    assert_eq!(
        up.unplaceable[0].reason,
        PodReason::Blocked(Reason::Budget {
            period: BudgetPeriod::Month,
            limit: money("100"),
            would_be: money("100.4"),
        })
    );
    // With a 10-hour term it accrues 1.0 this month only.
    w.term = Some(Duration::from_secs(36_000));
    assert_eq!(bought(&w.decide()), ["A"]);
}

#[test]
fn a_pod_larger_than_every_plan_is_named_with_the_shortfall() {
    let w = World::new(
        vec![pod("apps/big", "6")],
        vec![cand("A", "pa", "4", "1"), cand("B", "pb", "2", "0.5")],
    );
    let up = w.decide();
    assert!(up.buy.is_empty());
    assert_eq!(up.unplaceable[0].pod, "apps/big");
    assert_eq!(
        up.unplaceable[0].reason.to_string(),
        "needs 6 cpu, the largest allowed plan has 4"
    );
    assert_eq!(rejected(&up, "A"), Some(&Reason::Fit));
}

#[test]
fn backed_off_offers_wait_and_come_back() {
    let mut w = World::new(
        pods_named(1, "1"),
        vec![cand("A", "pa", "2", "0.5"), cand("B", "pb", "2", "0.6")],
    );
    let until = now() + jiff::SignedDuration::from_secs(300);
    w.backoff.insert(("A".into(), "p".into()), until);
    let up = w.decide();
    assert_eq!(bought(&up), ["B"]);
    assert_eq!(rejected(&up, "A"), Some(&Reason::Backoff { until }));
    // Past its time, A is back.
    w.backoff.insert(("A".into(), "p".into()), now());
    assert_eq!(bought(&w.decide()), ["A"]);
}

#[test]
fn hostile_offers_are_never_bought() {
    let free = cand("free", "p1", "2", "0");
    let mut huge = cand("huge", "p2", "2", "0.01");
    huge.resources.insert("cpu", q("1e12"));
    let mut negative = cand("negative", "p3", "2", "0.01");
    negative.resources.insert("memory", q("-1Gi"));
    let mut nothing = cand("nothing", "p4", "2", "0.01");
    nothing.resources = ResourceList::new();
    let mut overflow = cand("overflow", "p5", "2", "0.01");
    overflow
        .resources
        .insert("memory", q("999999999999999999999999Ei"));
    let w = World::new(
        pods_named(2, "1"),
        vec![
            free,
            huge,
            negative,
            nothing,
            overflow,
            cand("fair", "p6", "2", "1"),
        ],
    );
    let up = w.decide();
    assert_eq!(bought(&up), ["fair"]);
    for name in ["free", "huge", "negative", "nothing", "overflow"] {
        assert!(
            matches!(rejected(&up, name), Some(Reason::HostileOffer { .. })),
            "{name}: {:?}",
            rejected(&up, name)
        );
    }
}

#[test]
fn a_pod_with_requests_beyond_counting_is_left_out() {
    let mut p = pod("apps/absurd", "1");
    p.requests.insert("memory", q("999999999999999999999999Ei"));
    let w = World::new(
        vec![p, pod("apps/ok", "1")],
        vec![cand("A", "pa", "2", "1")],
    );
    let up = w.decide();
    assert_eq!(up.buy[0].pods, ["apps/ok"]);
    assert_eq!(
        up.unplaceable[0].reason,
        PodReason::Unreasonable {
            resource: "memory".into()
        }
    );
}

#[test]
fn screening_names_each_rule() {
    let mut service = cand("service", "p1", "2", "0.1");
    service.service = true;
    let mut unpriced = cand("unpriced", "p2", "2", "0.1");
    unpriced.pricing = None;
    let mut dollars = cand("dollars", "p3", "2", "0.1");
    dollars.pricing = Some(Pricing {
        currency: "USD".into(),
        per: Period::Hour,
    });
    let denied = cand("denied", "bad", "2", "0.1");
    let mut gpu = cand("gpu", "p4", "2", "0.1");
    gpu.resources.insert("nvidia.com/gpu", q("1"));
    let mut w = World::new(
        pods_named(1, "1"),
        vec![
            service,
            unpriced,
            dollars,
            denied,
            gpu,
            cand("ok", "p5", "2", "1"),
        ],
    );
    w.offers.deny = vec!["bad".into()];
    w.offers.resources = vec!["cpu".into(), "memory".into(), "pods".into()];
    let up = w.decide();
    assert_eq!(bought(&up), ["ok"]);
    assert_eq!(rejected(&up, "service"), Some(&Reason::ServiceOffer));
    assert_eq!(rejected(&up, "unpriced"), Some(&Reason::Pricing));
    assert!(matches!(
        rejected(&up, "dollars"),
        Some(Reason::Currency { .. })
    ));
    assert_eq!(
        rejected(&up, "denied"),
        Some(&Reason::Provider {
            provider: "bad".into(),
            denied: true
        })
    );
    assert!(
        matches!(rejected(&up, "gpu"), Some(Reason::ResourceKind { resource }) if resource == "nvidia.com/gpu")
    );

    // An allow list leaves out everyone else.
    w.offers = OfferFilter {
        allow: vec!["p9".into()],
        ..OfferFilter::default()
    };
    let up = w.decide();
    assert!(up.buy.is_empty());
    assert_eq!(up.unplaceable[0].reason, PodReason::NoAllowedOffer);
    assert!(rejected(&up, "ok")
        .unwrap()
        .to_string()
        .contains("not in the allow list"));
}

#[test]
fn room_held_or_in_flight_is_used_before_buying() {
    let mut w = World::new(pods_named(3, "1"), vec![cand("A", "pa", "4", "1")]);
    w.rooms = vec![Room::in_flight(
        "mas-1",
        "pa",
        rl(&[("cpu", "2"), ("memory", "1Gi")]),
    )];
    let up = w.decide();
    assert_eq!(up.placed.len(), 2);
    assert!(up.placed.iter().all(|p| p.room == "mas-1"));
    assert_eq!(up.buy.len(), 1);
    assert_eq!(up.buy[0].pods.len(), 1);
}

#[test]
fn a_room_tainted_beyond_liqo_needs_the_toleration() {
    let mut w = World::new(pods_named(1, "1"), vec![]);
    let mut room = Room::in_flight("node-a", "pa", rl(&[("cpu", "2"), ("memory", "1Gi")]));
    room.taints.push(Taint {
        key: "dedicated".into(),
        value: Some("gpu".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    });
    w.rooms = vec![room];
    assert!(w.decide().placed.is_empty());
    w.pods[0].tolerations = vec![Toleration {
        key: Some("dedicated".into()),
        operator: Some("Equal".into()),
        value: Some("gpu".into()),
        effect: Some("NoSchedule".into()),
        ..Toleration::default()
    }];
    assert_eq!(w.decide().placed.len(), 1);
}

fn affinity(key: &str, operator: &str, values: &[&str]) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
            match_fields: None,
        }],
    }
}

#[test]
fn selectors_and_affinity_read_the_virtual_node_liqo_makes() {
    let offers = vec![cand("A", "pa", "2", "0.5"), cand("B", "pb", "2", "0.9")];
    let with = |f: &dyn Fn(&mut WaitingPod)| {
        let mut p = pod("apps/p", "1");
        f(&mut p);
        World::new(vec![p], offers.clone()).decide()
    };
    // The provider by Liqo's label: B only, though dearer.
    let up = with(&|p| {
        p.node_selector
            .insert("liqo.io/remote-cluster-id".into(), "pb".into());
    });
    assert_eq!(bought(&up), ["B"]);
    // Liqo's type label and os/arch as Liqo sets them.
    let up = with(&|p| {
        p.node_selector
            .insert("liqo.io/type".into(), "virtual-node".into());
        p.node_selector
            .insert("kubernetes.io/arch".into(), "amd64".into());
    });
    assert_eq!(bought(&up), ["A"]);
    // NotIn the cheaper provider.
    let up = with(&|p| p.affinity = Some(affinity("liqo.io/remote-cluster-id", "NotIn", &["pa"])));
    assert_eq!(bought(&up), ["B"]);
    // DoesNotExist on a label every virtual node has: nothing admits it.
    let up = with(&|p| p.affinity = Some(affinity("liqo.io/type", "DoesNotExist", &[])));
    assert!(up.buy.is_empty());
    assert_eq!(up.unplaceable[0].reason, PodReason::NotAdmitted);
    // A hostname is Liqo's choice: not bought on a guess; Exists is fine.
    let up = with(&|p| p.affinity = Some(affinity("kubernetes.io/hostname", "In", &["n1"])));
    assert!(up.buy.is_empty());
    let up = with(&|p| p.affinity = Some(affinity("kubernetes.io/hostname", "Exists", &[])));
    assert_eq!(bought(&up), ["A"]);
    // Gt compares integers; a label that is not one never matches.
    let up = with(&|p| p.affinity = Some(affinity("liqo.io/remote-cluster-id", "Gt", &["1"])));
    assert!(up.buy.is_empty());
    // A GPU node selector no virtual node carries.
    let up = with(&|p| {
        p.node_selector.insert("gpu".into(), "true".into());
    });
    assert!(up.unplaceable[0]
        .to_owned()
        .reason
        .to_string()
        .contains("node selector"));
}

#[test]
fn limits_on_resources_and_contracts_hold_jointly() {
    // Each 3-cpu pod needs its own 4-cpu plan.
    let mut w = World::new(pods_named(3, "3"), vec![cand("A", "pa", "4", "1")]);
    w.limits.contracts = Some(3);
    w.committed.contracts = 1;
    let up = w.decide();
    assert_eq!(up.buy.len(), 2);
    assert_eq!(up.unplaceable.len(), 1);
    assert_eq!(
        up.unplaceable[0].reason,
        PodReason::Blocked(Reason::Contracts { limit: 3 })
    );

    w.limits.contracts = None;
    w.limits.resources = rl(&[("cpu", "10")]);
    w.committed.resources = rl(&[("cpu", "4")]);
    let up = w.decide();
    assert_eq!(up.buy.len(), 1);
    assert_eq!(
        up.unplaceable[0].reason,
        PodReason::Blocked(Reason::Limit {
            resource: "cpu".into(),
            limit: q("10"),
            would_be: q("12"),
        })
    );
    // A plan over the limit alone is rejected with it.
    w.committed.resources = rl(&[("cpu", "7")]);
    let up = w.decide();
    assert!(up.buy.is_empty());
    assert!(matches!(rejected(&up, "A"), Some(Reason::Limit { .. })));
}

#[test]
fn higher_priority_pods_go_first_when_the_budget_is_short() {
    let mut low = pod("apps/low", "3");
    low.priority = 0;
    let mut high = pod("apps/high", "3");
    high.priority = 1000;
    let mut w = World::new(vec![low, high], vec![cand("A", "pa", "4", "1")]);
    w.limits = limits("1");
    let up = w.decide();
    assert_eq!(up.buy.len(), 1);
    assert_eq!(up.buy[0].pods, ["apps/high"]);
    assert_eq!(up.unplaceable[0].pod, "apps/low");
}

#[test]
fn priority_takes_the_listed_offers_first_then_the_cheapest() {
    let mut w = World::new(
        pods_named(2, "1"),
        vec![
            cand("A", "pa", "2", "0.5"),
            cand("B", "pb", "2", "0.9"),
            cand("C", "pc", "1", "0.1"),
        ],
    );
    w.strategy = Choice::Priority;
    w.priority = vec!["pb".into()];
    assert_eq!(bought(&w.decide()), ["B"]);
    // A listed offer that cannot take the pod passes it on.
    w.pods = vec![pod("apps/big", "3")];
    w.candidates.push(cand("D", "pd", "4", "2"));
    assert_eq!(bought(&w.decide()), ["D"]);
}

#[test]
fn least_waste_fills_plans_best() {
    // One 2-cpu pod: A (8 cpu, 0.5) is cheapest; B (2 cpu, 0.6) wastes least.
    let mut w = World::new(
        pods_named(1, "2"),
        vec![cand("A", "pa", "8", "0.5"), cand("B", "pb", "2", "0.6")],
    );
    w.candidates[1].resources.insert("memory", q("100Mi"));
    assert_eq!(bought(&w.decide()), ["A"]);
    w.strategy = Choice::LeastWaste;
    assert_eq!(bought(&w.decide()), ["B"]);
}

#[test]
fn plans_priced_per_month_compare_per_hour() {
    let mut monthly = cand("M", "pm", "2", "300");
    monthly.pricing = Some(Pricing {
        currency: "EUR".into(),
        per: Period::Month,
    });
    // 300 a month is 0.416666667 an hour: cheaper than 0.5.
    let w = World::new(
        pods_named(1, "1"),
        vec![cand("H", "ph", "2", "0.5"), monthly],
    );
    let up = w.decide();
    assert_eq!(bought(&up), ["M"]);
    assert_eq!(up.buy[0].cost_per_hour, Money::from_nanos(416_666_667));
    assert_eq!(up.buy[0].cost_per_month, money("300"));
    let report = up.report("EUR");
    assert!(
        report.contains("0.416666667 EUR/h (300.0 EUR/month)"),
        "{report}"
    );
}

#[test]
fn the_report_names_everything_considered() {
    let mut w = World::new(
        vec![pod("apps/a", "1"), pod("apps/big", "6")],
        vec![cand("A", "pa", "4", "0.5"), cand("free", "px", "4", "0")],
    );
    w.limits = limits("2");
    let report = w.decide().report("EUR");
    assert!(
        report.contains("buy A/p from pa-name (pa): 0.5 EUR/h (360.0 EUR/month) — for apps/a"),
        "{report}"
    );
    assert!(
        report.contains("apps/big gets nothing: needs 6 cpu, the largest allowed plan has 4"),
        "{report}"
    );
    assert!(
        report.contains("offer free/p not bought: refused: its cost is zero"),
        "{report}"
    );
}

/// Pods `(milli-cpu, GiB, priority)`, plans `(cpu, GiB, cost in 1/10000)`,
/// the hourly budget in thousandths, a contract limit.
type Drawn = (Vec<(u32, u32, i32)>, Vec<(u32, u32, u32)>, u32, Option<u32>);

fn arb_world() -> impl proptest::strategy::Strategy<Value = Drawn> {
    (
        prop::collection::vec((1u32..4000, 1u32..8, -1i32..2), 0..14),
        prop::collection::vec((1u32..8, 1u32..16, 1u32..2000), 1..6),
        1u32..3000,
        prop::option::of(1u32..5),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Whatever waits and is offered: the spend after buying is within
    /// every budget, every bought plan serves at least one pod, every pod
    /// it is bought for fits in it, and no pod is counted twice.
    #[test]
    fn never_over_budget_and_every_plan_serves_a_pod((pods, plans, budget_milli, contracts) in arb_world()) {
        let pods: Vec<WaitingPod> = pods.iter().enumerate().map(|(i, (cpu, mem, prio))| WaitingPod {
            key: format!("ns/p{i}"),
            requests: rl(&[("cpu", &format!("{cpu}m")), ("memory", &format!("{mem}Gi")), ("pods", "1")]),
            priority: *prio,
            ..WaitingPod::default()
        }).collect();
        let candidates: Vec<Candidate> = plans.iter().enumerate().map(|(i, (cpu, mem, cost))| {
            let mut c = cand(&format!("o{i}"), &format!("pr{i}"), &cpu.to_string(), &format!("0.{cost:04}"));
            c.resources.insert("memory", q(&format!("{mem}Gi")));
            c
        }).collect();
        let mut w = World::new(pods.clone(), candidates.clone());
        w.limits = limits(&format!("{}.{:03}", budget_milli / 1000, budget_milli % 1000));
        w.limits.contracts = contracts;
        w.committed.spend.per_hour = money("0.1");
        let up = w.decide();
        let max = w.limits.max_spend_per_hour.unwrap();
        prop_assert!(up.spend_per_hour_after <= max || up.buy.is_empty());
        let total: Money = up.buy.iter().map(|b| b.cost_per_hour).sum();
        prop_assert!(money("0.1").plus(total) <= max || up.buy.is_empty());
        if let Some(c) = contracts {
            prop_assert!(up.buy.len() <= c as usize);
        }
        let mut seen = std::collections::BTreeSet::new();
        for b in &up.buy {
            prop_assert!(!b.pods.is_empty());
            let mut sum = ResourceList::new();
            for key in &b.pods {
                prop_assert!(seen.insert(key.clone()), "{key} twice");
                let p = pods.iter().find(|p| &p.key == key).unwrap();
                sum = sum.add(&p.requests);
            }
            sum.0.remove("pods");
            prop_assert!(sum.fits_within(&b.resources), "{:?} in {:?}", sum, b.resources);
        }
        // Every pod is accounted for exactly once.
        prop_assert_eq!(seen.len() + up.unplaceable.len() + up.placed.len(), pods.len());
    }

    /// The exact search is never beaten by the greedy heuristic.
    #[test]
    fn the_exact_answer_is_no_dearer_than_greedy((pods, plans, _, _) in arb_world()) {
        let problem = Problem {
            types: plans.iter().map(|(cpu, mem, cost)| PlanType {
                cap: vec![i128::from(*cpu) * 1000, i128::from(*mem) * 1000],
                sell: vec![0, 0],
                hour: i128::from(*cost),
                month: 0,
                tier: 0,
            }).collect(),
            pods: pods.iter().map(|(cpu, mem, _)| PodItem {
                need: vec![i128::from(*cpu), i128::from(*mem) * 1000],
                admitted: vec![true; plans.len()],
                priority: 0,
            }).collect(),
            headroom: Headroom { res: vec![None, None], ..Headroom::default() },
            objective: Objective::Cost,
            waste_dims: vec![0, 1],
        };
        let greedy = choose::greedy(&problem);
        let best = choose::solve(&problem);
        prop_assert!(best.covered() >= greedy.covered());
        if best.covered() == greedy.covered() {
            prop_assert!(best.hour <= greedy.hour);
        }
    }
}
