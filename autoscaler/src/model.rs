//! The `MarketAutoscaler` kind (`broker.liqo-broker.io/v1alpha1`,
//! namespaced, status subresource): the intent — which pods it serves,
//! which offers it may buy, its limits in resources and in money, the terms
//! it buys on, when it gives capacity back — and what the controller
//! reports. The CRD is generated from these types ([`crd`]).
//!
//! The spec keeps durations and money as strings (the project's duration
//! grammar, exact decimals); [`MarketAutoscalerSpec::parse`] turns them into
//! the typed [`Intent`] the decision reads, with errors naming the field.

use std::collections::BTreeMap;
use std::time::Duration;

use catalog_client::wire::cost::Cost;
use controller_core::crd as schema;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use quantity::{Quantity, ResourceList};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::spend::Money;

pub const GROUP: &str = "broker.liqo-broker.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "MarketAutoscaler";
pub const PLURAL: &str = "marketautoscalers";

/// The label every Purchase the autoscaler makes carries (value: its name).
pub const PURCHASE_LABEL: &str = "broker.liqo-broker.io/market-autoscaler";

/// Entries of each list in `status.lastDecision` (the counts stand beside).
pub const STATUS_LIST_CAP: usize = 20;

/// Duration strings in the project's grammar (`edge::duration::parse`):
/// `500ms`, `5s`, `10m`, `1h 30m`, `7d`, or bare seconds.
const DURATION_PATTERN: &str =
    r"^([0-9]+|[0-9]+(\.[0-9]+)?\s*[a-zA-Z]+(\s*[0-9]+(\.[0-9]+)?\s*[a-zA-Z]+)*)$";
/// Money: a non-negative decimal, at most 9 fraction digits (as `Cost`).
const DECIMAL_PATTERN: &str = r"^[0-9]{1,12}(\.[0-9]{1,9})?$";
/// A fraction between 0 and 1 inclusive.
const FRACTION_PATTERN: &str = r"^(0(\.[0-9]{1,9})?|1(\.0{1,9})?|\.[0-9]{1,9})$";
/// A DNS-1123 label (namespace names).
const NAMESPACE_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// A reference to one key of a Secret in the MarketAutoscaler's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[schemars(transform = schema::plain)]
pub struct SecretKeyRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// `metav1.LabelSelector`, bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[schemars(
    extend("x-kubernetes-validations" = [{
        "rule": "self.operator in ['In', 'NotIn'] ? size(self.values) > 0 : size(self.values) == 0",
        "message": "In and NotIn need values; Exists and DoesNotExist take none"
    }]),
    transform = schema::plain
)]
pub struct LabelSelectorRequirement {
    #[schemars(length(min = 1, max = 317))]
    pub key: String,
    #[schemars(extend("enum" = ["In", "NotIn", "Exists", "DoesNotExist"]))]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector (as `metav1.LabelSelector`:
    /// every matchLabels pair and every expression).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let value = labels.get(&e.key);
                match e.operator.as_str() {
                    "In" => value.is_some_and(|v| e.values.contains(v)),
                    "NotIn" => value.is_none_or(|v| !e.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    // The schema admits no other operator; an unknown one
                    // selects nothing, as Kubernetes refuses it.
                    _ => false,
                }
            })
    }
}

/// Which pods the autoscaler serves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct PodsSpec {
    #[schemars(
        length(min = 1, max = 64),
        inner(regex(pattern = NAMESPACE_PATTERN), length(max = 63)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub namespaces: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// Provider cluster IDs allowed and denied (an empty allow list allows all).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct ProvidersSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 256)))]
    pub allow: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 256)))]
    pub deny: Vec<String>,
}

/// Which offers may be bought.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct OffersSpec {
    #[serde(default)]
    pub providers: ProvidersSpec,
    /// On the offer's labels (e.g. region).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Resource kinds a plan may sell; a plan selling any other is not bought. Empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 32),
        inner(length(min = 1, max = 253)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub resources: Vec<String>,
}

/// Limits in resources and in money.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    extend("x-kubernetes-validations" = [{
        "rule": "has(self.maxSpendPerHour) || has(self.maxSpendPerMonth)",
        "message": "set maxSpendPerHour, maxSpendPerMonth or both: the autoscaler never buys without a budget in money"
    }]),
    transform = schema::plain
)]
pub struct LimitsSpec {
    /// Total over the contracts it holds and those in flight (a Kubernetes ResourceList).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "schema::resource_list", extend("maxProperties" = 32))]
    pub resources: BTreeMap<String, IntOrString>,
    /// Contracts held and in flight, at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10000))]
    pub contracts: Option<u32>,
    /// ISO 4217 code; must be the catalog's pricing currency.
    #[schemars(regex(pattern = r"^[A-Z]{3}$"))]
    pub currency: String,
    /// Spend rate of held and in-flight contracts, per hour (a decimal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DECIMAL_PATTERN))]
    pub max_spend_per_hour: Option<String>,
    /// Per UTC calendar month: month to date plus what held and new contracts accrue until the month ends (a decimal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DECIMAL_PATTERN))]
    pub max_spend_per_month: Option<String>,
}

/// What to do with a contract about to expire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum OnExpiry {
    /// Extend it while in use and within budget.
    #[default]
    Extend,
    /// Let it expire.
    Expire,
}

/// The terms contracts are bought on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct TermsSpec {
    /// Contract length (absent: the catalog's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 64))]
    pub duration: Option<String>,
    #[serde(default)]
    #[schemars(extend("x-default" = "Extend"))]
    pub on_expiry: OnExpiry,
}

/// When bought capacity is given back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum ScaleDownPolicy {
    /// Empty, or below the utilization threshold with every pod fitting elsewhere.
    #[default]
    WhenEmptyOrUnderutilized,
    /// Only when no served pod runs on it.
    WhenEmpty,
    /// Never (contracts run until they expire).
    Never,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct ScaleDownSpec {
    #[serde(default)]
    #[schemars(extend("x-default" = "WhenEmptyOrUnderutilized"))]
    pub policy: ScaleDownPolicy,
    /// How long a node must be unneeded before it is given back.
    #[serde(default = "default_ten_minutes")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 64), extend("x-default" = "10m"))]
    pub unneeded_time: String,
    /// Nothing is given back within this time of the autoscaler's last purchase.
    #[serde(default = "default_ten_minutes")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 64), extend("x-default" = "10m"))]
    pub delay_after_purchase: String,
    /// Requests / allocatable (cpu and memory) below which a node is underutilized.
    #[serde(default = "default_threshold")]
    #[schemars(regex(pattern = FRACTION_PATTERN), extend("x-default" = "0.5"))]
    pub utilization_threshold: String,
    /// Nodes being given back at once: a count or a percentage of the bought nodes.
    #[serde(default = "default_disruption_budget")]
    #[schemars(schema_with = "disruption_budget_schema")]
    pub disruption_budget: IntOrString,
}

impl Default for ScaleDownSpec {
    fn default() -> Self {
        Self {
            policy: ScaleDownPolicy::default(),
            unneeded_time: default_ten_minutes(),
            delay_after_purchase: default_ten_minutes(),
            utilization_threshold: default_threshold(),
            disruption_budget: default_disruption_budget(),
        }
    }
}

fn default_ten_minutes() -> String {
    "10m".into()
}
fn default_threshold() -> String {
    "0.5".into()
}
fn default_disruption_budget() -> IntOrString {
    IntOrString::String("10%".into())
}

fn disruption_budget_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-int-or-string": true,
        "pattern": r"^([0-9]{1,3}%|[0-9]{1,5})$",
        "x-default": "10%",
        "description": "Nodes being given back at once: a count or a percentage of the bought nodes (rounded up)."
    })
}

/// How the plans to buy are chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
pub enum Strategy {
    /// The cheapest set of plans that fits every pod that can fit.
    #[default]
    Cheapest,
    /// The plans the pods fill best (least idle cpu and memory); ties by cost.
    LeastWaste,
    /// The offers or providers listed in `priority`, earlier first; ties by cost.
    Priority,
}

/// The intent: what the autoscaler serves, buys, and within which limits.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "broker.liqo-broker.io",
    version = "v1alpha1",
    kind = "MarketAutoscaler",
    plural = "marketautoscalers",
    shortname = "mas",
    namespaced,
    status = "MarketAutoscalerStatus",
    doc = "Buys catalog capacity for waiting pods within a budget in money, and gives it back when it sits idle.",
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name": "Spend/h", "type": "string", "jsonPath": ".status.spendPerHour"}"#,
    printcolumn = r#"{"name": "Month", "type": "string", "jsonPath": ".status.spendMonthToDate"}"#,
    printcolumn = r#"{"name": "Currency", "type": "string", "jsonPath": ".status.currency"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(
    extend("x-kubernetes-validations" = [{
        "rule": "self.strategy != 'Priority' || size(self.priority) > 0",
        "message": "strategy Priority needs a priority list"
    }]),
    transform = schema::plain
)]
pub struct MarketAutoscalerSpec {
    /// The catalog's base URL.
    #[serde(rename = "catalogURL")]
    #[schemars(regex(pattern = r"^https?://[^\s]+$"), length(max = 2048))]
    pub catalog_url: String,
    /// The Secret (in this namespace) and key holding the catalog bearer token.
    pub credentials_secret_ref: SecretKeyRef,
    pub pods: PodsSpec,
    #[serde(default)]
    pub offers: OffersSpec,
    pub limits: LimitsSpec,
    #[serde(default)]
    pub terms: TermsSpec,
    #[serde(default)]
    pub scale_down: ScaleDownSpec,
    #[serde(default)]
    #[schemars(extend("x-default" = "Cheapest"))]
    pub strategy: Strategy,
    /// With strategy Priority: offer IDs or provider cluster IDs, earlier wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 256)))]
    pub priority: Vec<String>,
}

/// The MarketAutoscaler CRD, as `deploy/kubernetes/market-autoscaler/crd.yaml`
/// holds it (tidied as the Purchase CRD is).
pub fn crd() -> CustomResourceDefinition {
    let mut crd = schema::tidy(<MarketAutoscaler as kube::CustomResourceExt>::crd());
    // kube's structural rewrite marks an int-or-string without a `type`
    // nullable; the field is never null.
    for version in &mut crd.spec.versions {
        let budget = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut()?.get_mut("spec"))
            .and_then(|s| s.properties.as_mut()?.get_mut("scaleDown"))
            .and_then(|s| s.properties.as_mut()?.get_mut("disruptionBudget"));
        if let Some(budget) = budget {
            budget.nullable = None;
        }
    }
    crd
}

pub use controller_core::crd::Condition;

/// Resources and contracts held now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct HeldStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<String>,
    #[serde(default)]
    pub contracts: u32,
}

/// A Purchase made and not yet Ready.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct InFlightStatus {
    pub purchase: String,
    #[serde(rename = "offerID")]
    pub offer_id: String,
    #[serde(rename = "planID")]
    pub plan_id: String,
    #[schemars(extend("format" = "date-time"))]
    pub since: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct BoughtStatus {
    #[serde(rename = "offerID")]
    pub offer_id: String,
    #[serde(rename = "planID")]
    pub plan_id: String,
    pub provider: String,
    pub cost_per_hour: String,
    pub cost_per_month: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct UnplaceableStatus {
    pub pod: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct RejectedStatus {
    #[serde(rename = "offerID")]
    pub offer_id: String,
    #[serde(rename = "planID")]
    pub plan_id: String,
    pub reason: String,
}

/// The last scale-up decision, each list capped to [`STATUS_LIST_CAP`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct DecisionStatus {
    #[schemars(extend("format" = "date-time"))]
    pub at: String,
    pub summary: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bought: Vec<BoughtStatus>,
    #[serde(default)]
    pub bought_count: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unplaceable: Vec<UnplaceableStatus>,
    #[serde(default)]
    pub unplaceable_count: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedStatus>,
    #[serde(default)]
    pub rejected_count: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct BackoffStatus {
    #[serde(rename = "offerID")]
    pub offer_id: String,
    #[serde(rename = "planID")]
    pub plan_id: String,
    #[schemars(extend("format" = "date-time"))]
    pub until: String,
    pub failures: u32,
}

/// A bought node and what giving back makes of it now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct NodeStatus {
    pub node: String,
    pub purchase: String,
    /// `Kept`, `Unneeded` (counting towards `scaleDown.unneededTime`) or
    /// `GivingBack` (cordoned, its pods being evicted).
    pub state: String,
    /// Why, in words: what keeps it, or why it goes.
    pub reason: String,
}

/// What the controller reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::plain)]
pub struct MarketAutoscalerStatus {
    #[serde(default)]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["type"]
    ))]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub observed_generation: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend_per_hour: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend_month_to_date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<HeldStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<InFlightStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_decision: Option<DecisionStatus>,
    /// The last decision that bought something: `lastDecision` is the
    /// latest round's, which once the purchase is in flight buys nothing,
    /// so this is where an operator reads why the last purchase was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_up: Option<DecisionStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backoff: Vec<BackoffStatus>,
    /// The bought nodes (at most 20, by name) and why each is kept or goes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeStatus>,
    /// Purchases made so far: the next Purchase is named `<name>-<purchasesMade + 1>`.
    #[serde(default)]
    pub purchases_made: u64,
}

// ---------------------------------------------------------------------------
// Parsed views.

/// A spec field that does not mean what it must.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.{field}: {message}")]
pub struct SpecError {
    /// The JSON path below `spec` (`limits.maxSpendPerHour`).
    pub field: String,
    pub message: String,
}

impl SpecError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// `spec.limits`, typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    pub resources: ResourceList,
    pub contracts: Option<u32>,
    pub currency: String,
    pub max_spend_per_hour: Option<Money>,
    pub max_spend_per_month: Option<Money>,
}

/// `spec.offers`, typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OfferFilter {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub selector: Option<LabelSelector>,
    /// Empty: any kind.
    pub resources: Vec<String>,
}

/// `spec.terms`, typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Terms {
    pub duration: Option<Duration>,
    pub on_expiry: OnExpiry,
}

/// `spec.scaleDown.disruptionBudget`, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisruptionBudget {
    Count(u32),
    /// Of the bought nodes, rounded up.
    Percent(u32),
}

impl DisruptionBudget {
    /// Nodes that may be being given back at once, out of `total`.
    pub fn allowed(self, total: u32) -> u32 {
        match self {
            DisruptionBudget::Count(n) => n,
            DisruptionBudget::Percent(p) => {
                let scaled = u64::from(total) * u64::from(p);
                u32::try_from(scaled.div_ceil(100)).unwrap_or(u32::MAX)
            }
        }
    }
}

/// `spec.scaleDown`, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleDown {
    pub policy: ScaleDownPolicy,
    pub unneeded_time: Duration,
    pub delay_after_purchase: Duration,
    /// The threshold in millionths (0.5 → 500,000).
    pub utilization_threshold_ppm: u32,
    pub disruption_budget: DisruptionBudget,
}

impl Default for ScaleDown {
    fn default() -> Self {
        Self {
            policy: ScaleDownPolicy::default(),
            unneeded_time: Duration::from_secs(600),
            delay_after_purchase: Duration::from_secs(600),
            utilization_threshold_ppm: 500_000,
            disruption_budget: DisruptionBudget::Percent(10),
        }
    }
}

/// The whole spec, typed: what the decisions read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    pub namespaces: Vec<String>,
    pub pod_selector: Option<LabelSelector>,
    pub offers: OfferFilter,
    pub limits: Limits,
    pub terms: Terms,
    pub scale_down: ScaleDown,
    pub strategy: Strategy,
    pub priority: Vec<String>,
}

impl MarketAutoscalerSpec {
    /// The spec, typed; the first field that does not parse is named.
    pub fn parse(&self) -> Result<Intent, SpecError> {
        if self.pods.namespaces.is_empty() {
            return Err(SpecError::new(
                "pods.namespaces",
                "name at least one namespace",
            ));
        }
        if self.strategy == Strategy::Priority && self.priority.is_empty() {
            return Err(SpecError::new(
                "priority",
                "strategy Priority needs a priority list",
            ));
        }
        Ok(Intent {
            namespaces: self.pods.namespaces.clone(),
            pod_selector: self.pods.selector.clone(),
            offers: self.offer_filter()?,
            limits: self.limits()?,
            terms: self.terms()?,
            scale_down: self.scale_down()?,
            strategy: self.strategy,
            priority: self.priority.clone(),
        })
    }

    pub fn offer_filter(&self) -> Result<OfferFilter, SpecError> {
        if let Some(selector) = &self.offers.selector {
            check_selector(selector, "offers.selector")?;
        }
        Ok(OfferFilter {
            allow: self.offers.providers.allow.clone(),
            deny: self.offers.providers.deny.clone(),
            selector: self.offers.selector.clone(),
            resources: self.offers.resources.clone(),
        })
    }

    pub fn limits(&self) -> Result<Limits, SpecError> {
        let l = &self.limits;
        let mut resources = ResourceList::new();
        for (name, value) in &l.resources {
            let text = match value {
                IntOrString::Int(i) => i.to_string(),
                IntOrString::String(s) => s.clone(),
            };
            let q: Quantity = text.parse().map_err(|e| {
                SpecError::new(format!("limits.resources.{name}"), format!("{text:?}: {e}"))
            })?;
            if q.is_negative() {
                return Err(SpecError::new(
                    format!("limits.resources.{name}"),
                    "must not be negative",
                ));
            }
            resources.insert(name.clone(), q);
        }
        if !(l.currency.len() == 3 && l.currency.bytes().all(|b| b.is_ascii_uppercase())) {
            return Err(SpecError::new(
                "limits.currency",
                format!(
                    "{:?} is not an ISO 4217 code (three capital letters)",
                    l.currency
                ),
            ));
        }
        let money = |field: &str, text: &Option<String>| -> Result<Option<Money>, SpecError> {
            text.as_deref()
                .map(|t| {
                    t.parse::<Cost>().map(Money::from).map_err(|e| {
                        SpecError::new(format!("limits.{field}"), format!("{t:?} {e}"))
                    })
                })
                .transpose()
        };
        let max_spend_per_hour = money("maxSpendPerHour", &l.max_spend_per_hour)?;
        let max_spend_per_month = money("maxSpendPerMonth", &l.max_spend_per_month)?;
        if max_spend_per_hour.is_none() && max_spend_per_month.is_none() {
            return Err(SpecError::new(
                "limits",
                "set maxSpendPerHour, maxSpendPerMonth or both: the autoscaler never buys without a budget in money",
            ));
        }
        Ok(Limits {
            resources,
            contracts: l.contracts,
            currency: l.currency.clone(),
            max_spend_per_hour,
            max_spend_per_month,
        })
    }

    pub fn terms(&self) -> Result<Terms, SpecError> {
        let duration = self
            .terms
            .duration
            .as_deref()
            .map(|d| duration("terms.duration", d))
            .transpose()?;
        if duration.is_some_and(|d| d.is_zero()) {
            return Err(SpecError::new("terms.duration", "must be longer than zero"));
        }
        Ok(Terms {
            duration,
            on_expiry: self.terms.on_expiry,
        })
    }

    pub fn scale_down(&self) -> Result<ScaleDown, SpecError> {
        let s = &self.scale_down;
        let utilization_threshold_ppm =
            fraction_ppm(&s.utilization_threshold).ok_or_else(|| {
                SpecError::new(
                    "scaleDown.utilizationThreshold",
                    format!(
                        "{:?} is not a decimal between 0 and 1",
                        s.utilization_threshold
                    ),
                )
            })?;
        let disruption_budget = match &s.disruption_budget {
            IntOrString::Int(n) => DisruptionBudget::Count(u32::try_from(*n).map_err(|_| {
                SpecError::new("scaleDown.disruptionBudget", "must not be negative")
            })?),
            IntOrString::String(text) => parse_budget(text).ok_or_else(|| {
                SpecError::new(
                    "scaleDown.disruptionBudget",
                    format!("{text:?} is neither a count nor a percentage such as 10%"),
                )
            })?,
        };
        Ok(ScaleDown {
            policy: s.policy,
            unneeded_time: duration("scaleDown.unneededTime", &s.unneeded_time)?,
            delay_after_purchase: duration(
                "scaleDown.delayAfterPurchase",
                &s.delay_after_purchase,
            )?,
            utilization_threshold_ppm,
            disruption_budget,
        })
    }
}

fn duration(field: &str, text: &str) -> Result<Duration, SpecError> {
    edge::duration::parse(text).map_err(|e| SpecError::new(field, e))
}

fn check_selector(selector: &LabelSelector, field: &str) -> Result<(), SpecError> {
    for (i, e) in selector.match_expressions.iter().enumerate() {
        let ok = match e.operator.as_str() {
            "In" | "NotIn" => !e.values.is_empty(),
            "Exists" | "DoesNotExist" => e.values.is_empty(),
            _ => false,
        };
        if !ok {
            return Err(SpecError::new(
                format!("{field}.matchExpressions[{i}]"),
                format!(
                    "operator {:?} with {} values: In and NotIn need values, Exists and DoesNotExist take none",
                    e.operator,
                    e.values.len()
                ),
            ));
        }
    }
    Ok(())
}

/// `"0.5"` → 500,000; `None` unless 0 ≤ value ≤ 1 with at most 6 digits
/// that matter (further digits must be zeros).
fn fraction_ppm(text: &str) -> Option<u32> {
    let (whole, frac) = match text.split_once('.') {
        Some((w, f)) => (w, f),
        None => (text, ""),
    };
    let whole: u32 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    if !frac.bytes().all(|b| b.is_ascii_digit())
        || (whole == 0 && frac.is_empty() && text.contains('.'))
    {
        return None;
    }
    let (kept, rest) = frac.split_at(frac.len().min(6));
    if !rest.bytes().all(|b| b == b'0') {
        return None;
    }
    let mut ppm: u32 = kept.parse().unwrap_or(0);
    for _ in kept.len()..6 {
        ppm *= 10;
    }
    let total = whole.checked_mul(1_000_000)?.checked_add(ppm)?;
    (total <= 1_000_000).then_some(total)
}

fn parse_budget(text: &str) -> Option<DisruptionBudget> {
    match text.strip_suffix('%') {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(DisruptionBudget::Percent(p.parse().ok()?))
        }
        Some(_) => None,
        None if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
            Some(DisruptionBudget::Count(text.parse().ok()?))
        }
        None => None,
    }
}

#[cfg(test)]
mod tests;
