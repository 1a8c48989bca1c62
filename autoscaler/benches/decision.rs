//! One scale-up decision round at scale: 1,000 waiting pods × 1,000
//! offers (goal: ≤ 100 ms in release). Plain `main` (harness = false) and
//! std's clock, so the bench adds no dependency to CI's build stage.
//!
//! `cargo bench -p market-autoscaler --bench decision`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use market_autoscaler::decide::{scale_up, Candidate, Committed, Input, WaitingPod};
use market_autoscaler::model::{Limits, OfferFilter, Strategy};
use market_autoscaler::spend::{Money, Period, Pricing};
use quantity::{Quantity, ResourceList};

/// A small deterministic generator (xorshift), so every run measures the
/// same world.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn q(s: &str) -> Quantity {
    s.parse().expect("a quantity")
}

/// 1,000 pods from 50 Deployments of 20 replicas; one in ten Deployments
/// asks for a provider by Liqo's `liqo.io/remote-cluster-id` label.
fn pods(rng: &mut Rng) -> Vec<WaitingPod> {
    let mut out = Vec::new();
    for d in 0..50 {
        let cpu = format!("{}m", 100 + rng.below(20) * 100);
        let memory = format!("{}Mi", 128 + rng.below(32) * 128);
        let affinity = (d % 10 == 0).then(|| NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "liqo.io/remote-cluster-id".into(),
                    operator: "In".into(),
                    values: Some(
                        (0..20)
                            .map(|p| format!("provider-{}", p * 7 % 200))
                            .collect(),
                    ),
                }]),
                match_fields: None,
            }],
        });
        for r in 0..20 {
            out.push(WaitingPod {
                key: format!("team-{}/web-{d}-{r}", d % 4),
                requests: [("cpu", q(&cpu)), ("memory", q(&memory)), ("pods", q("1"))]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                affinity: affinity.clone(),
                priority: d % 3,
                ..WaitingPod::default()
            });
        }
    }
    out
}

/// 1,000 offers of one plan each, from 200 providers; sizes from 2 to 64
/// cpu, prices roughly proportional with ±30 % noise, a few hostile ones.
fn offers(rng: &mut Rng) -> Vec<Candidate> {
    (0..1000)
        .map(|i| {
            let cpu = 2 << rng.below(6);
            let memory = cpu * (2 + rng.below(3) * 2);
            let nanos = (cpu as i64) * 40_000_000 * (70 + rng.below(61) as i64) / 100;
            // One in four is priced per (30-day) month, at the same rate.
            let monthly = i % 4 == 0;
            let cost = match (i % 97 == 0, monthly) {
                (true, _) => 0,
                (false, true) => nanos * 720,
                (false, false) => nanos,
            };
            let mut resources = ResourceList::new();
            resources.insert("cpu", q(&cpu.to_string()));
            resources.insert("memory", q(&format!("{memory}Gi")));
            resources.insert("pods", q("110"));
            Candidate {
                offer_id: format!("offer-{i}"),
                plan_id: "standard".into(),
                provider_id: format!("provider-{}", i % 200),
                provider_name: format!("cluster {}", i % 200),
                labels: BTreeMap::from([(
                    "region".to_string(),
                    ["eu", "us", "ap"][i % 3].to_string(),
                )]),
                service: i % 50 == 0,
                resources,
                cost: catalog_client::wire::cost::Cost::from_nanos(cost).expect("a cost"),
                pricing: Some(Pricing {
                    currency: "EUR".into(),
                    per: if i % 4 == 0 {
                        Period::Month
                    } else {
                        Period::Hour
                    },
                }),
            }
        })
        .collect()
}

fn main() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pods = pods(&mut rng);
    let candidates = offers(&mut rng);
    let now: Timestamp = "2026-03-10T12:00:00Z".parse().expect("a time");
    let committed = Committed::default();
    let offers = OfferFilter::default();
    let backoff = BTreeMap::new();
    let run = |limits: &Limits, strategy: Strategy| {
        let input = Input {
            pods: &pods,
            candidates: &candidates,
            rooms: &[],
            committed: &committed,
            limits,
            offers: &offers,
            term: Some(Duration::from_secs(720 * 3600)),
            backoff: &backoff,
            strategy,
            priority: &[],
            now,
        };
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..7 {
            let start = Instant::now();
            let up = scale_up(&input);
            times.push(start.elapsed());
            last = Some(up);
        }
        times.sort();
        (
            times[times.len() / 2],
            times[times.len() - 1],
            last.expect("ran"),
        )
    };
    let ample = Limits {
        currency: "EUR".into(),
        max_spend_per_hour: Some(Money::from_nanos(1_000_000_000_000)),
        ..Limits::default()
    };
    let tight = Limits {
        max_spend_per_hour: Some(Money::from_nanos(5_000_000_000)),
        contracts: Some(20),
        ..ample.clone()
    };
    println!(
        "market autoscaler, one decision round: {} waiting pods × {} offers",
        pods.len(),
        candidates.len()
    );
    for (name, limits, strategy) in [
        ("Cheapest, ample budget", &ample, Strategy::Cheapest),
        ("Cheapest, 5/h and 20 contracts", &tight, Strategy::Cheapest),
        ("LeastWaste, ample budget", &ample, Strategy::LeastWaste),
    ] {
        let (median, worst, up) = run(limits, strategy);
        println!(
            "  {name:<32} median {:>8.1} ms  worst {:>8.1} ms  — {} plans for {} pods, {} EUR/h, {} pods left, {} offers rejected ({})",
            median.as_secs_f64() * 1e3,
            worst.as_secs_f64() * 1e3,
            up.buy.len(),
            up.buy.iter().map(|b| b.pods.len()).sum::<usize>(),
            up.added_per_hour,
            up.unplaceable.len(),
            up.rejected.len(),
            up.search,
        );
    }
}
