//! The autoscaler's Prometheus metrics and health state, rendered on
//! `/metrics` (served by the `http` module):
//!
//! | metric | what |
//! |---|---|
//! | `market_autoscaler_build_info{version,revision,rustc}` | 1: the build this replica runs |
//! | `market_autoscaler_leader` | 1 while this replica leads (and buys) |
//! | `market_autoscaler_unschedulable_pods` | waiting pods the autoscalers serve |
//! | `market_autoscaler_spend_per_hour{currency}` | spend rate of the contracts held and in flight (a report, not a bill: the status holds the exact decimal) |
//! | `market_autoscaler_spend_month_to_date{currency}` | spent this UTC calendar month |
//! | `market_autoscaler_decisions_total{outcome,reason}` | decisions: `bought`, `placed` (pods fit held or in-flight room), `unplaceable`, `waiting` (the batch still open: `batch`; a purchase in flight whose plan left the catalog: `unsettled`) and why |
//! | `market_autoscaler_purchases_total{result}` | `created`, `ready`, `deadline`, `failed`, `conflict` (another writer), `over-budget` (refused at the re-check), `offer-changed` (withdrawn or repriced since the decision: decided again) |
//! | `market_autoscaler_purchase_ready_seconds` | a Purchase's creation to Ready |
//! | `market_autoscaler_given_back_total{reason}` | Purchases deleted to give capacity back (`empty`, `underutilized`, `deadline`, `failed`) |
//! | `market_autoscaler_in_flight_purchases` | Purchases made and not yet Ready |
//! | `market_autoscaler_catalog_connected` | catalogs whose feed is connected |
//! | `market_autoscaler_reconcile_duration_seconds` | one autoscaler's round |
//! | `market_autoscaler_errors_total{kind}` | `kubernetes`, `catalog`, `conflict`, `spec` |

use std::collections::BTreeMap;
use std::sync::Mutex;

use controller_core::metrics::{MetricSet, ReconcileMetrics};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A purchase takes seconds (a peering in place) to the deadline (15 min).
const READY_BUCKETS: [f64; 10] = [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 900.0];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CurrencyLabels {
    currency: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DecisionLabels {
    outcome: &'static str,
    reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

controller_core::controller_metrics!(
    /// Shared handle to the metrics.
    pub struct Metrics(Handles);
);

/// What one autoscaler contributes to the gauges summed over all of them.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    pub unschedulable: usize,
    pub in_flight: usize,
    pub currency: String,
    pub spend_per_hour: f64,
    pub spend_month_to_date: f64,
}

/// Every metric, registered by [`MetricSet::register`] (reached through
/// [`Metrics`]).
pub struct Handles {
    unschedulable: Gauge,
    spend_per_hour: Family<CurrencyLabels, Gauge<f64, AtomicU64>>,
    spend_month: Family<CurrencyLabels, Gauge<f64, AtomicU64>>,
    decisions: Family<DecisionLabels, Counter>,
    purchases: Family<ResultLabels, Counter>,
    ready_seconds: Histogram,
    given_back: Family<ReasonLabels, Counter>,
    in_flight: Gauge,
    catalog_connected: Gauge,
    per_autoscaler: Mutex<BTreeMap<String, Gauges>>,
    catalogs: Mutex<BTreeMap<String, bool>>,
    /// Autoscalers whose catalog cannot be reached, and why (`/readyz`).
    unreachable: Mutex<BTreeMap<String, String>>,
}

impl MetricSet for Handles {
    const BUCKETS: &'static [f64] = &BUCKETS;
    const PREFIX: &'static str = "market_autoscaler";
    const FAILURE_KINDS: &'static [&'static str] = &["kubernetes", "catalog", "conflict", "spec"];

    fn register(registry: &mut Registry, reconcile: &ReconcileMetrics) -> Self {
        let h = Handles {
            unschedulable: Gauge::default(),
            spend_per_hour: Family::default(),
            spend_month: Family::default(),
            decisions: Family::default(),
            purchases: Family::default(),
            ready_seconds: Histogram::new(READY_BUCKETS),
            given_back: Family::default(),
            in_flight: Gauge::default(),
            catalog_connected: Gauge::default(),
            per_autoscaler: Mutex::new(BTreeMap::new()),
            catalogs: Mutex::new(BTreeMap::new()),
            unreachable: Mutex::new(BTreeMap::new()),
        };
        reconcile.register_leader(registry, "leader", "1 while this replica leads");
        registry.register(
            "unschedulable_pods",
            "Waiting pods the autoscalers serve",
            h.unschedulable.clone(),
        );
        registry.register(
            "spend_per_hour",
            "Spend rate of the contracts held and in flight, per hour",
            h.spend_per_hour.clone(),
        );
        registry.register(
            "spend_month_to_date",
            "Spent this UTC calendar month",
            h.spend_month.clone(),
        );
        registry.register(
            "decisions",
            "Decisions, by outcome and reason",
            h.decisions.clone(),
        );
        registry.register("purchases", "Purchases, by result", h.purchases.clone());
        registry.register(
            "purchase_ready_seconds",
            "From a Purchase's creation to Ready",
            h.ready_seconds.clone(),
        );
        registry.register(
            "given_back",
            "Purchases deleted to give capacity back, by reason",
            h.given_back.clone(),
        );
        registry.register(
            "in_flight_purchases",
            "Purchases made and not yet Ready",
            h.in_flight.clone(),
        );
        registry.register(
            "catalog_connected",
            "Catalogs whose feed is connected",
            h.catalog_connected.clone(),
        );
        reconcile.register_duration(
            registry,
            "reconcile_duration_seconds",
            "One autoscaler's round",
        );
        reconcile.register_errors(registry, "Failed reads and writes, by kind");
        h
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Metrics {
    pub fn count_error(&self, kind: &'static str) {
        self.reconcile().count_failure(kind);
    }

    pub fn count_decision(&self, outcome: &'static str, reason: &str) {
        self.decisions
            .get_or_create(&DecisionLabels {
                outcome,
                reason: reason.to_string(),
            })
            .inc();
    }

    pub fn count_purchase(&self, result: &'static str) {
        self.purchases.get_or_create(&ResultLabels { result }).inc();
    }

    pub fn observe_ready(&self, seconds: f64) {
        self.ready_seconds.observe(seconds);
    }

    pub fn count_given_back(&self, reason: &'static str) {
        self.given_back
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// One autoscaler's gauges now (`None`: it is gone); the exposed
    /// gauges are the sums over every autoscaler, spend per currency.
    pub fn set_autoscaler(&self, key: &str, gauges: Option<Gauges>) {
        let mut all = self
            .per_autoscaler
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match gauges {
            Some(g) => {
                all.insert(key.to_string(), g);
            }
            None => {
                all.remove(key);
            }
        }
        self.unschedulable
            .set(count(all.values().map(|g| g.unschedulable).sum()));
        self.in_flight
            .set(count(all.values().map(|g| g.in_flight).sum()));
        let mut hour: BTreeMap<&str, f64> = BTreeMap::new();
        let mut month: BTreeMap<&str, f64> = BTreeMap::new();
        for g in all.values().filter(|g| !g.currency.is_empty()) {
            *hour.entry(&g.currency).or_default() += g.spend_per_hour;
            *month.entry(&g.currency).or_default() += g.spend_month_to_date;
        }
        self.spend_per_hour.clear();
        self.spend_month.clear();
        for (currency, v) in hour {
            self.spend_per_hour
                .get_or_create(&CurrencyLabels {
                    currency: currency.to_string(),
                })
                .set(v);
        }
        for (currency, v) in month {
            self.spend_month
                .get_or_create(&CurrencyLabels {
                    currency: currency.to_string(),
                })
                .set(v);
        }
    }

    /// The catalog of autoscaler `key` cannot be reached (`Some(why)`) or
    /// can (`None`).
    pub fn set_catalog_unreachable(&self, key: &str, why: Option<String>) {
        let mut all = self.unreachable.lock().unwrap_or_else(|e| e.into_inner());
        match why {
            Some(why) => {
                all.insert(key.to_string(), why);
            }
            None => {
                all.remove(key);
            }
        }
    }

    /// The first autoscaler whose catalog cannot be reached, and why.
    pub fn catalog_unreachable(&self) -> Option<(String, String)> {
        let all = self.unreachable.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().next().map(|(k, v)| (k.clone(), v.clone()))
    }

    /// Whether the feed of the catalog at `url` is connected.
    pub fn set_catalog_connected(&self, url: &str, up: bool) {
        let mut all = self.catalogs.lock().unwrap_or_else(|e| e.into_inner());
        all.insert(url.to_string(), up);
        self.catalog_connected
            .set(count(all.values().filter(|up| **up).count()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_are_sums_over_autoscalers_and_spend_is_per_currency() {
        let metrics = Metrics::new();
        let g = |currency: &str, hour: f64, pods: usize| Gauges {
            unschedulable: pods,
            in_flight: 1,
            currency: currency.to_string(),
            spend_per_hour: hour,
            spend_month_to_date: hour * 10.0,
        };
        metrics.set_autoscaler("a/x", Some(g("EUR", 1.5, 2)));
        metrics.set_autoscaler("b/y", Some(g("EUR", 0.25, 3)));
        metrics.set_autoscaler("c/z", Some(g("USD", 2.0, 0)));
        let text = metrics.render();
        assert!(
            text.contains("market_autoscaler_unschedulable_pods 5"),
            "{text}"
        );
        assert!(
            text.contains("market_autoscaler_in_flight_purchases 3"),
            "{text}"
        );
        assert!(
            text.contains(r#"market_autoscaler_spend_per_hour{currency="EUR"} 1.75"#),
            "{text}"
        );
        assert!(
            text.contains(r#"market_autoscaler_spend_per_hour{currency="USD"} 2.0"#),
            "{text}"
        );
        metrics.set_autoscaler("c/z", None);
        let text = metrics.render();
        assert!(!text.contains("USD"), "{text}");
        metrics.count_purchase("created");
        metrics.count_decision("unplaceable", "budget");
        let text = metrics.render();
        assert!(
            text.contains(r#"market_autoscaler_purchases_total{result="created"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"market_autoscaler_decisions_total{outcome="unplaceable",reason="budget"} 1"#
            ),
            "{text}"
        );
    }
}
