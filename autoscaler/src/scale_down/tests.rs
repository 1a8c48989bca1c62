use super::*;
use crate::model::{DisruptionBudget, LabelSelector};

fn q(s: &str) -> Quantity {
    s.parse().unwrap()
}
fn rl(pairs: &[(&str, &str)]) -> ResourceList {
    pairs.iter().map(|(k, v)| (k.to_string(), q(v))).collect()
}
fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}
fn now() -> Timestamp {
    t("2026-03-10T12:00:00Z")
}
fn minutes(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

fn pod_on(key: &str, cpu: &str) -> NodePod {
    NodePod {
        pod: WaitingPod {
            key: key.into(),
            requests: rl(&[("cpu", cpu), ("memory", "100Mi"), ("pods", "1")]),
            ..WaitingPod::default()
        },
        namespace: key.split('/').next().unwrap().into(),
        labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
        has_controller: true,
        ..NodePod::default()
    }
}

fn node(name: &str, pods: Vec<NodePod>) -> BoughtNode {
    BoughtNode {
        name: name.into(),
        purchase: format!("mas-{name}"),
        allocatable: rl(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]),
        ready: true,
        pods,
        // Unneeded for 20 minutes already.
        unneeded_since: Some(now() - minutes(20)),
        ..BoughtNode::default()
    }
}

fn room(cpu: &str) -> Room {
    Room {
        name: "local-1".into(),
        free: rl(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "100")]),
        ..Room::default()
    }
}

struct Case {
    nodes: Vec<BoughtNode>,
    elsewhere: Vec<Room>,
    pdbs: Vec<Pdb>,
    waiting: Vec<WaitingPod>,
    policy: ScaleDown,
    last_purchase: Option<Timestamp>,
}

impl Case {
    fn new(nodes: Vec<BoughtNode>) -> Self {
        Case {
            nodes,
            elsewhere: vec![room("8")],
            pdbs: Vec::new(),
            waiting: Vec::new(),
            policy: ScaleDown {
                disruption_budget: DisruptionBudget::Count(10),
                ..ScaleDown::default()
            },
            last_purchase: Some(now() - minutes(60)),
        }
    }
    fn run(&self) -> Vec<Verdict> {
        candidates(&DownInput {
            nodes: &self.nodes,
            elsewhere: &self.elsewhere,
            pdbs: &self.pdbs,
            waiting: &self.waiting,
            policy: &self.policy,
            last_purchase: self.last_purchase,
            now: now(),
        })
    }
    fn action(&self) -> Action {
        self.run()[0].action.clone()
    }
}

#[test]
fn an_empty_node_is_given_back_daemon_sets_aside() {
    let mut ds = pod_on("kube-system/agent", "100m");
    ds.daemon_set = true;
    let case = Case::new(vec![node("n1", vec![ds])]);
    let v = case.run();
    assert_eq!(v[0].action, Action::GiveBack(GiveBackWhy::Empty));
    assert!(v[0].unneeded);
    assert_eq!(v[0].purchase, "mas-n1");
}

#[test]
fn an_underutilized_node_goes_when_its_pods_fit_elsewhere() {
    let mut case = Case::new(vec![node("n1", vec![pod_on("apps/a", "1")])]);
    // 1 of 4 cpu: 25 % < 50 %.
    assert_eq!(
        case.action(),
        Action::GiveBack(GiveBackWhy::Underutilized {
            utilization_ppm: 250_000
        })
    );
    // Nowhere to go: kept.
    case.elsewhere = vec![room("500m")];
    assert_eq!(
        case.action(),
        Action::Keep(KeepReason::NoRoomElsewhere {
            pod: "apps/a".into()
        })
    );
    // WhenEmpty keeps it whatever the room.
    case.elsewhere = vec![room("8")];
    case.policy.policy = ScaleDownPolicy::WhenEmpty;
    assert!(matches!(
        case.action(),
        Action::Keep(KeepReason::InUse { .. })
    ));
    case.policy.policy = ScaleDownPolicy::Never;
    assert_eq!(case.action(), Action::Keep(KeepReason::PolicyNever));
}

#[test]
fn a_busy_node_is_in_use() {
    let case = Case::new(vec![node("n1", vec![pod_on("apps/a", "3")])]);
    assert_eq!(
        case.action(),
        Action::Keep(KeepReason::InUse {
            utilization_ppm: 750_000
        })
    );
    assert!(!case.run()[0].unneeded);
}

#[test]
fn do_not_disrupt_safe_to_evict_bare_pods_and_pdbs_keep_a_node() {
    let blocked = |f: &dyn Fn(&mut NodePod, &mut Vec<Pdb>)| {
        let mut p = pod_on("apps/a", "1");
        let mut pdbs = Vec::new();
        f(&mut p, &mut pdbs);
        let mut case = Case::new(vec![node("n1", vec![p])]);
        case.pdbs = pdbs;
        let v = case.run();
        // A blocked node is not unneeded: its clock starts again.
        assert_eq!(v[0].unneeded, matches!(v[0].action, Action::GiveBack(_)));
        v[0].action.clone()
    };
    assert_eq!(
        blocked(&|p, _| {
            p.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
        }),
        Action::Keep(KeepReason::DoNotDisrupt {
            pod: "apps/a".into()
        })
    );
    assert_eq!(
        blocked(&|p, _| {
            p.annotations.insert(SAFE_TO_EVICT.into(), "false".into());
        }),
        Action::Keep(KeepReason::SafeToEvict {
            pod: "apps/a".into()
        })
    );
    assert_eq!(
        blocked(&|p, _| p.has_controller = false),
        Action::Keep(KeepReason::BarePod {
            pod: "apps/a".into()
        })
    );
    let pdb = |allowed: i32, ns: &str| Pdb {
        namespace: ns.into(),
        name: "web".into(),
        selector: LabelSelector {
            match_labels: BTreeMap::from([("app".into(), "web".into())]),
            ..LabelSelector::default()
        },
        disruptions_allowed: allowed,
    };
    assert_eq!(
        blocked(&|_, pdbs| pdbs.push(pdb(0, "apps"))),
        Action::Keep(KeepReason::Pdb {
            pod: "apps/a".into(),
            pdb: "apps/web".into()
        })
    );
    // A PDB that allows a disruption, or of another namespace, does not block.
    assert!(matches!(
        blocked(&|_, pdbs| {
            pdbs.push(pdb(1, "apps"));
            pdbs.push(pdb(0, "other"));
        }),
        Action::GiveBack(_)
    ));
}

#[test]
fn nothing_goes_within_delay_after_purchase_or_before_unneeded_time() {
    let mut case = Case::new(vec![node("n1", vec![])]);
    case.last_purchase = Some(now() - minutes(5));
    let v = case.run();
    assert_eq!(
        v[0].action,
        Action::Keep(KeepReason::RecentPurchase {
            until: now() + minutes(5)
        })
    );
    // The clock keeps running meanwhile.
    assert!(v[0].unneeded);

    case.last_purchase = None;
    case.nodes[0].unneeded_since = None;
    assert_eq!(
        case.action(),
        Action::Keep(KeepReason::NotUnneededLongEnough {
            since: now(),
            until: now() + minutes(10)
        })
    );
    case.nodes[0].unneeded_since = Some(now() - minutes(10));
    assert_eq!(case.action(), Action::GiveBack(GiveBackWhy::Empty));
}

#[test]
fn the_disruption_budget_caps_what_goes_at_once() {
    let nodes: Vec<BoughtNode> = (0..5).map(|i| node(&format!("n{i}"), vec![])).collect();
    let mut case = Case::new(nodes);
    case.policy.disruption_budget = DisruptionBudget::Percent(40);
    let given = |case: &Case| {
        case.run()
            .iter()
            .filter(|v| matches!(v.action, Action::GiveBack(_)))
            .count()
    };
    // ceil(5 × 40 %) = 2.
    assert_eq!(given(&case), 2);
    let kept = case.run();
    assert!(kept
        .iter()
        .any(|v| v.action == Action::Keep(KeepReason::DisruptionBudget { allowed: 2 })));
    // One being given back already counts.
    case.nodes[4].being_given_back = true;
    assert_eq!(given(&case), 1);
}

#[test]
fn two_nodes_go_when_the_room_elsewhere_holds_both_their_pods() {
    let mut case = Case::new(vec![
        node("n1", vec![pod_on("apps/a", "1")]),
        node("n2", vec![pod_on("apps/b", "1")]),
    ]);
    case.elsewhere = vec![room("2")];
    let v = case.run();
    assert!(
        v.iter().all(|v| matches!(v.action, Action::GiveBack(_))),
        "{v:?}"
    );
}

#[test]
fn only_one_of_two_goes_when_the_room_holds_one_pod() {
    let mut case = Case::new(vec![
        node("n1", vec![pod_on("apps/a", "1")]),
        node("n2", vec![pod_on("apps/b", "1")]),
    ]);
    case.elsewhere = vec![room("1500m")];
    // n1's pod takes the room elsewhere; n2's pod then has none, as the
    // room n1 had is going with it.
    for n in &mut case.nodes {
        n.allocatable = rl(&[("cpu", "2100m"), ("memory", "8Gi"), ("pods", "110")]);
    }
    let mut v = case.run();
    v.sort_by(|a, b| a.node.cmp(&b.node));
    assert!(matches!(v[0].action, Action::GiveBack(_)), "{v:?}");
    assert_eq!(
        v[1].action,
        Action::Keep(KeepReason::NoRoomElsewhere {
            pod: "apps/b".into()
        })
    );
}

fn money(s: &str) -> Money {
    Money::from(s.parse::<catalog_client::wire::cost::Cost>().unwrap())
}

#[test]
fn expiring_contracts_in_use_are_extended_within_budget() {
    let limits = Limits {
        currency: "EUR".into(),
        max_spend_per_month: Some(money("100")),
        ..Limits::default()
    };
    let contract = |id: &str, in_mins: i64, in_use: bool| Expiring {
        contract_id: id.into(),
        purchase: format!("mas-{id}"),
        expires_at: now() + minutes(in_mins),
        term_began: now() - minutes(60 * 24),
        in_use,
        cost: money("0.1"),
        per: Period::Hour,
    };
    let contracts = vec![
        contract("soon", 5, true),
        contract("idle", 5, false),
        contract("later", 60 * 24, true),
    ];
    let mut input = ExpiryInput {
        contracts: &contracts,
        on_expiry: OnExpiry::Extend,
        lead: Duration::from_secs(600),
        extension: Some(Duration::from_secs(10 * 3600)),
        limits: &limits,
        spend: Spend {
            per_hour: money("0.2"),
            month_to_date: money("50"),
            rest_of_month: money("10"),
        },
        now: now(),
    };
    let v = expiry(&input);
    let by = |id: &str| {
        v.iter()
            .find(|x| x.contract_id == id)
            .unwrap()
            .action
            .clone()
    };
    // 10 more hours at 0.1: 1.0 this month.
    assert_eq!(
        by("soon"),
        ExpiryAction::Extend {
            adds_this_month: money("1")
        }
    );
    assert_eq!(by("idle"), ExpiryAction::LetExpire(ExpiryReason::NotInUse));
    assert_eq!(by("later"), ExpiryAction::NotYet);

    input.spend.month_to_date = money("89.5");
    let v = expiry(&input);
    let soon = v.iter().find(|x| x.contract_id == "soon").unwrap();
    assert!(
        matches!(
            &soon.action,
            ExpiryAction::LetExpire(ExpiryReason::Budget(Reason::Budget {
                period: BudgetPeriod::Month,
                ..
            }))
        ),
        "{v:?}"
    );

    input.on_expiry = OnExpiry::Expire;
    assert!(expiry(&input)
        .iter()
        .filter(|x| x.contract_id != "later")
        .all(|x| x.action == ExpiryAction::LetExpire(ExpiryReason::Policy)));
}

#[test]
fn a_term_shorter_than_the_lead_is_extended_in_its_second_half_only() {
    let limits = Limits {
        currency: "EUR".into(),
        ..Limits::default()
    };
    // A 30 s term begun 10 s ago, then 16 s ago; the lead is 10 minutes.
    let at = |began_secs_ago: i64| Expiring {
        contract_id: "short".into(),
        purchase: "mas-1".into(),
        expires_at: now() + jiff::SignedDuration::from_secs(30 - began_secs_ago),
        term_began: now() - jiff::SignedDuration::from_secs(began_secs_ago),
        in_use: true,
        cost: money("0.1"),
        per: Period::Hour,
    };
    let verdict = |c: Expiring| {
        expiry(&ExpiryInput {
            contracts: &[c],
            on_expiry: OnExpiry::Extend,
            lead: Duration::from_secs(600),
            extension: None,
            limits: &limits,
            spend: Spend::default(),
            now: now(),
        })[0]
            .action
            .clone()
    };
    assert_eq!(verdict(at(10)), ExpiryAction::NotYet);
    assert!(
        matches!(verdict(at(16)), ExpiryAction::Extend { .. }),
        "{:?}",
        verdict(at(16))
    );
}

#[test]
fn an_empty_node_a_waiting_pod_fits_on_is_kept() {
    let mut case = Case::new(vec![node("n1", vec![])]);
    assert!(matches!(
        case.action(),
        Action::GiveBack(GiveBackWhy::Empty)
    ));
    let waiting = |cpu: &str| WaitingPod {
        key: "apps/w".into(),
        requests: rl(&[("cpu", cpu), ("memory", "1Gi"), ("pods", "1")]),
        ..WaitingPod::default()
    };
    // Too big for it: the node is still empty and goes.
    case.waiting = vec![waiting("5")];
    assert!(matches!(
        case.action(),
        Action::GiveBack(GiveBackWhy::Empty)
    ));
    case.waiting = vec![waiting("1")];
    assert_eq!(
        case.action(),
        Action::Keep(KeepReason::WaitingPodFits {
            pod: "apps/w".into()
        })
    );
}
