//! What one MarketAutoscaler sees, gathered the same way by the controller
//! (from its watch caches) and by `explain` (from one read of each kind, or
//! a file of pods): the pods it serves and those of them waiting, its own
//! Purchases (by label) and the virtual nodes they made, the PDBs and the
//! namespaces — and, with the catalog's offers and contracts, the
//! [`crate::decide::Input`] the decision reads.
//!
//! A Purchase's virtual node is the Node Liqo v1.2 names after the
//! Purchase's ResourceSlice (the VirtualNode takes the slice's name,
//! `remoteresourceslice_controller.go:216`, and the virtual kubelet the
//! VirtualNode's), i.e. `purchase_controller::liqo::slice_name(contract)`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use catalog_client::feed::OfferSet;
use catalog_client::wire::{Contract, CostPeriod, OfferKind};
use controller_core::liqo::REMOTE_CLUSTER_ID_LABEL;
use controller_core::pods;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use purchase_controller::model::Purchase;
use quantity::{Quantity, ResourceList};

use crate::decide::{Candidate, Committed, Room, WaitingPod};
use crate::model::{Intent, MarketAutoscaler, PURCHASE_LABEL};
use crate::spend::{ContractTerms, Money, Period, Pricing, Spend};

/// The phase purchase-controller gives a Purchase whose capacity is usable.
pub const READY_PHASE: &str = "Ready";
/// Phases after which a Purchase will never become Ready.
pub const DEAD_PHASES: [&str; 2] = ["Failed", "Ended"];

/// `namespace/name` of an object.
pub fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// `market-autoscaler/<namespace>/<name>`: the contracts' `boughtBy`.
pub fn bought_by(ma: &MarketAutoscaler) -> String {
    format!("market-autoscaler/{}", key_of(&ma.metadata))
}

/// Whether `purchase` is one of `ma`'s (its label, its namespace).
pub fn is_mine(ma: &MarketAutoscaler, purchase: &Purchase) -> bool {
    purchase.metadata.namespace == ma.metadata.namespace
        && purchase
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PURCHASE_LABEL))
            .is_some_and(|v| Some(v) == ma.metadata.name.as_ref())
}

/// The Purchase's phase ("" before purchase-controller wrote one).
pub fn phase(purchase: &Purchase) -> &str {
    purchase
        .status
        .as_ref()
        .map(|s| s.phase.as_str())
        .unwrap_or_default()
}

/// The node a Ready Purchase made (by the slice's name), if it is there.
pub fn node_of<'a>(purchase: &Purchase, nodes: &'a [Arc<Node>]) -> Option<&'a Arc<Node>> {
    let contract = purchase.status.as_ref()?.contract_id.as_deref()?;
    let name = purchase_controller::liqo::slice_name(contract);
    nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name.as_str()))
}

/// Whether `node` is Ready.
pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether a node can take pods now: Ready, with its allocatable known
/// (a virtual node is Ready before its virtual kubelet reports it).
pub fn node_usable(node: &Node) -> bool {
    node_ready(node) && allocatable(node).get("cpu").is_some()
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// One autoscaler's view of the cluster.
#[derive(Debug, Clone, Default)]
pub struct World {
    /// The served pods (its namespaces, its selector), finished ones left out.
    pub served: Vec<Arc<Pod>>,
    /// Of those, the ones waiting for room.
    pub waiting: Vec<Arc<Pod>>,
    /// Its Purchases.
    pub purchases: Vec<Arc<Purchase>>,
    pub nodes: Vec<Arc<Node>>,
    /// Every pod bound to a node (any namespace: a node's room counts all).
    pub bound: Vec<Arc<Pod>>,
    pub pdbs: Vec<Arc<PodDisruptionBudget>>,
    /// The served namespaces that exist.
    pub namespaces: Vec<Arc<Namespace>>,
}

impl World {
    /// The view of `intent` (of `ma`) over every object of each kind.
    pub fn build(
        ma: &MarketAutoscaler,
        intent: &Intent,
        pods: &[Arc<Pod>],
        nodes: &[Arc<Node>],
        purchases: &[Arc<Purchase>],
        pdbs: &[Arc<PodDisruptionBudget>],
        namespaces: &[Arc<Namespace>],
    ) -> World {
        let served_ns =
            |ns: Option<&str>| ns.is_some_and(|ns| intent.namespaces.iter().any(|n| n == ns));
        let selected = |pod: &Pod| {
            intent
                .pod_selector
                .as_ref()
                .is_none_or(|s| s.matches(pod.metadata.labels.as_ref().unwrap_or(&BTreeMap::new())))
        };
        let served: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| served_ns(p.metadata.namespace.as_deref()))
            .filter(|p| !finished(p) && selected(p))
            .cloned()
            .collect();
        let waiting = served
            .iter()
            .filter(|p| pods::waiting(p))
            .cloned()
            .collect();
        let bound = pods
            .iter()
            .filter(|p| {
                !finished(p)
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some_and(|n| !n.is_empty())
            })
            .cloned()
            .collect();
        World {
            served,
            waiting,
            purchases: purchases
                .iter()
                .filter(|p| is_mine(ma, p))
                .cloned()
                .collect(),
            nodes: nodes.to_vec(),
            bound,
            pdbs: pdbs
                .iter()
                .filter(|p| served_ns(p.metadata.namespace.as_deref()))
                .cloned()
                .collect(),
            namespaces: namespaces
                .iter()
                .filter(|n| served_ns(n.metadata.name.as_deref()))
                .cloned()
                .collect(),
        }
    }

    /// The Ready Purchases and their nodes.
    pub fn bought_nodes(&self) -> Vec<(Arc<Purchase>, Arc<Node>)> {
        self.purchases
            .iter()
            .filter(|p| phase(p) == READY_PHASE && !p.is_deleting())
            .filter_map(|p| node_of(p, &self.nodes).map(|n| (p.clone(), n.clone())))
            .collect()
    }

    /// The served pods not bound to a node yet and not going: the waiting
    /// ones, and those the scheduler has not looked at yet (a pod just
    /// recreated through its owner).
    pub fn unbound(&self) -> Vec<Arc<Pod>> {
        self.served
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_none()
            })
            .cloned()
            .collect()
    }

    /// The pods bound to `node`.
    pub fn pods_on(&self, node: &str) -> Vec<Arc<Pod>> {
        self.bound
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .cloned()
            .collect()
    }
}

/// A waiting pod as the decision reads it (`None`: its requests cannot be
/// read; it is left out and logged).
pub fn waiting_pod(pod: &Pod) -> Option<WaitingPod> {
    let mut requests = match pods::requests(pod) {
        Ok(r) => r,
        Err(error) => {
            tracing::warn!(pod = %key_of(&pod.metadata), %error, "cannot read the pod's requests; not buying for it");
            return None;
        }
    };
    requests.insert("pods", Quantity::new(1, quantity::Format::DecimalSI));
    let spec = pod.spec.as_ref();
    Some(WaitingPod {
        key: key_of(&pod.metadata),
        requests,
        node_selector: spec
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default(),
        affinity: spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .clone()
            }),
        tolerations: spec.and_then(|s| s.tolerations.clone()).unwrap_or_default(),
        priority: spec.and_then(|s| s.priority).unwrap_or(0),
    })
}

/// The catalog's pricing, as the decision's.
pub fn pricing(p: &catalog_client::wire::Pricing) -> Pricing {
    Pricing {
        currency: p.currency.clone(),
        per: match p.per {
            CostPeriod::Hour => Period::Hour,
            CostPeriod::Month => Period::Month,
        },
    }
}

/// One candidate per plan of every offer.
pub fn candidates(offers: &OfferSet) -> Vec<Candidate> {
    offers
        .values()
        .flat_map(|offer| {
            offer.plans.iter().map(move |(plan_id, plan)| Candidate {
                offer_id: offer.id.clone(),
                plan_id: plan_id.clone(),
                provider_id: offer.cluster_id.clone(),
                provider_name: offer.cluster_name.clone(),
                labels: offer.labels.clone(),
                service: offer.kind != OfferKind::Capacity,
                resources: plan.resources.clone(),
                cost: plan.cost,
                pricing: offer.pricing.as_ref().map(pricing),
            })
        })
        .collect()
}

/// A node's allocatable resources.
fn allocatable(node: &Node) -> ResourceList {
    let list = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .map(|a| ResourceList::from_strings(a.iter().map(|(k, v)| (k.as_str(), v.0.as_str()))))
        .and_then(Result::ok)
        .unwrap_or_default();
    list
}

/// What the pods bound to a node request, `pods: 1` each.
pub fn requested(pods_on: &[Arc<Pod>]) -> ResourceList {
    let one = ResourceList::from_iter([(
        "pods".to_string(),
        Quantity::new(1, quantity::Format::DecimalSI),
    )]);
    pods_on.iter().fold(ResourceList::new(), |sum, p| {
        let r = pods::requests(p).unwrap_or_default();
        sum.add(&r).add(&one)
    })
}

/// The room where waiting pods may go without buying: each Ready bought
/// node's free room once it is usable (not one cordoned: it is being
/// given back), and each purchase in flight's plan (a Ready one whose
/// node is not usable yet among them).
pub fn rooms(world: &World, in_flight: &[InFlight]) -> Vec<Room> {
    let mut rooms: Vec<Room> = world
        .bought_nodes()
        .into_iter()
        .filter(|(_, node)| {
            node_usable(node)
                && !node
                    .spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
        })
        .map(|(_, node)| {
            let name = node.metadata.name.clone().unwrap_or_default();
            let used = requested(&world.pods_on(&name));
            let mut labels = node.metadata.labels.clone().unwrap_or_default();
            labels
                .entry("kubernetes.io/hostname".into())
                .or_insert(name.clone());
            Room {
                free: allocatable(&node).saturating_sub(&used),
                labels,
                taints: node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default(),
                name,
            }
        })
        .collect();
    rooms.extend(
        in_flight
            .iter()
            .map(|f| Room::in_flight(&f.purchase, &f.provider, f.resources.clone())),
    );
    rooms
}

/// A purchase in flight of unknown size: its plan left the catalog's
/// offers and it has no contract yet to say what it holds.
pub fn unsettled(in_flight: &[InFlight]) -> Option<&InFlight> {
    in_flight
        .iter()
        .find(|f| f.resources.0.is_empty() && !f.has_contract)
}

/// A purchase not Ready yet, as the decision counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlight {
    pub purchase: String,
    pub offer_id: String,
    pub plan_id: String,
    pub provider: String,
    pub resources: ResourceList,
    /// Its cost, when the offer is still in the feed.
    pub cost: Option<(Money, Period)>,
    /// Its contract exists already (counted with the contracts).
    pub has_contract: bool,
}

/// The contracts that are `ma`'s: bought by it, or followed by one of its
/// Purchases.
pub fn my_contracts<'a>(
    ma: &MarketAutoscaler,
    world: &World,
    contracts: &'a [Contract],
) -> Vec<&'a Contract> {
    let by = bought_by(ma);
    let ids: BTreeSet<&str> = world
        .purchases
        .iter()
        .filter_map(|p| p.status.as_ref()?.contract_id.as_deref())
        .collect();
    contracts
        .iter()
        .filter(|c| c.bought_by.as_deref() == Some(by.as_str()) || ids.contains(c.id.as_str()))
        .collect()
}

/// A contract's money terms (`None`: no pricing, from an older catalog).
pub fn terms(contract: &Contract) -> Option<ContractTerms> {
    let pricing = contract.pricing.as_ref()?;
    let ts = |t: chrono::DateTime<chrono::Utc>| {
        Timestamp::from_nanosecond(i128::from(t.timestamp_nanos_opt().unwrap_or(i64::MAX))).ok()
    };
    let ends = contract.ended_at.unwrap_or(contract.expires_at);
    Some(ContractTerms {
        cost: Money::from(contract.cost),
        per: self::pricing(pricing).per,
        purchased_at: ts(contract.purchased_at)?,
        ends_at: ts(ends)?,
    })
}

/// What is held (active contracts) and in flight, counted against the
/// limits.
pub fn committed(
    contracts: &[&Contract],
    in_flight: &[InFlight],
    term: Option<std::time::Duration>,
    now: Timestamp,
) -> Committed {
    let all_terms: Vec<ContractTerms> = contracts.iter().filter_map(|c| terms(c)).collect();
    let mut spend = Spend::of(&all_terms, now);
    let mut resources = ResourceList::new();
    let mut count = 0u32;
    for c in contracts.iter().filter(|c| c.active) {
        resources = resources.add(&c.resources);
        count = count.saturating_add(1);
    }
    for f in in_flight.iter().filter(|f| !f.has_contract) {
        resources = resources.add(&f.resources);
        count = count.saturating_add(1);
        if let Some((cost, per)) = f.cost {
            spend = spend.with_in_flight(cost, per, term, now);
        }
    }
    Committed {
        resources,
        contracts: count,
        spend,
    }
}

/// The provider of a virtual node (Liqo's `liqo.io/remote-cluster-id`).
pub fn provider_of(node: &Node) -> Option<&str> {
    node.metadata
        .labels
        .as_ref()?
        .get(REMOTE_CLUSTER_ID_LABEL)
        .map(String::as_str)
}

/// The purchases in flight: `ma`'s Purchases not Ready (nor failed,
/// ended or being deleted), and the ones `status.inFlight` records whose
/// Purchase is not there yet (a leader stopped before creating it), each
/// sized and priced from the offer it buys (else from the Purchase's
/// status).
pub fn in_flight(
    world: &World,
    recorded: &[crate::model::InFlightStatus],
    offers: &OfferSet,
    contracts: &[&Contract],
) -> Vec<InFlight> {
    let active: BTreeSet<&str> = contracts
        .iter()
        .filter(|c| c.active)
        .map(|c| c.id.as_str())
        .collect();
    let priced = |offer_id: &str, plan_id: &str| {
        let offer = offers.get(offer_id)?;
        let plan = offer.plans.get(plan_id)?;
        Some((
            offer.cluster_id.clone(),
            plan.resources.clone(),
            offer
                .pricing
                .as_ref()
                .map(|p| (Money::from(plan.cost), pricing(p).per)),
        ))
    };
    let mut all: Vec<InFlight> = world
        .purchases
        .iter()
        .filter(|p| !p.is_deleting())
        // Ready but its node not usable yet: still room to come, or the
        // pods it was bought for would be bought for again.
        .filter(|p| {
            (phase(p) != READY_PHASE || !node_of(p, &world.nodes).is_some_and(|n| node_usable(n)))
                && !DEAD_PHASES.contains(&phase(p))
        })
        .map(|p| {
            let offer_id = p.spec.offer_id.clone().unwrap_or_default();
            let plan_id = p.spec.plan_id.clone().unwrap_or_default();
            let status = p.status.clone().unwrap_or_default();
            let (provider, resources, cost) = priced(&offer_id, &plan_id).unwrap_or_else(|| {
                (
                    status.provider_cluster_id.clone().unwrap_or_default(),
                    ResourceList::from_strings(
                        status
                            .resources
                            .iter()
                            .map(|(k, v)| (k.as_str(), v.as_str())),
                    )
                    .unwrap_or_default(),
                    None,
                )
            });
            InFlight {
                purchase: p.metadata.name.clone().unwrap_or_default(),
                has_contract: status
                    .contract_id
                    .as_deref()
                    .is_some_and(|id| active.contains(id)),
                offer_id,
                plan_id,
                provider,
                resources,
                cost,
            }
        })
        .collect();
    for r in recorded {
        if world
            .purchases
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(r.purchase.as_str()))
        {
            continue;
        }
        let (provider, resources, cost) = priced(&r.offer_id, &r.plan_id).unwrap_or_default();
        all.push(InFlight {
            purchase: r.purchase.clone(),
            offer_id: r.offer_id.clone(),
            plan_id: r.plan_id.clone(),
            provider,
            resources,
            cost,
            has_contract: false,
        });
    }
    all
}

/// Everything the scale-up decision reads, owned (the controller and
/// `explain` build it the same way).
#[derive(Debug, Clone)]
pub struct Inputs {
    pub pods: Vec<WaitingPod>,
    pub candidates: Vec<Candidate>,
    pub rooms: Vec<Room>,
    pub committed: Committed,
    pub backoff: BTreeMap<(String, String), Timestamp>,
}

impl Inputs {
    /// The inputs of `ma` (`intent`) over `world`, the offers, its
    /// contracts and the purchases in flight; `waiting` are the pods to
    /// decide for (the world's waiting pods, or a file's for `explain`).
    #[allow(clippy::too_many_arguments)]
    pub fn gather(
        intent: &Intent,
        status: &crate::model::MarketAutoscalerStatus,
        world: &World,
        waiting: &[Arc<Pod>],
        offers: &OfferSet,
        contracts: &[&Contract],
        in_flight: &[InFlight],
        now: Timestamp,
    ) -> Inputs {
        let backoff = status
            .backoff
            .iter()
            .filter_map(|b| {
                let until = b.until.parse::<Timestamp>().ok()?;
                (until > now).then(|| ((b.offer_id.clone(), b.plan_id.clone()), until))
            })
            .collect();
        Inputs {
            pods: waiting.iter().filter_map(|p| waiting_pod(p)).collect(),
            candidates: candidates(offers),
            rooms: rooms(world, in_flight),
            committed: committed(contracts, in_flight, intent.terms.duration, now),
            backoff,
        }
    }

    /// The decision's input over these.
    pub fn input<'a>(&'a self, intent: &'a Intent, now: Timestamp) -> crate::decide::Input<'a> {
        crate::decide::Input {
            pods: &self.pods,
            candidates: &self.candidates,
            rooms: &self.rooms,
            committed: &self.committed,
            limits: &intent.limits,
            offers: &intent.offers,
            term: intent.terms.duration,
            backoff: &self.backoff,
            strategy: intent.strategy,
            priority: &intent.priority,
            now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_flight(name: &str, cpu: Option<&str>, has_contract: bool) -> InFlight {
        InFlight {
            purchase: name.into(),
            offer_id: "o".into(),
            plan_id: "p".into(),
            provider: String::new(),
            resources: cpu
                .map(|c| ResourceList::from_strings([("cpu", c)]).expect("resources"))
                .unwrap_or_default(),
            cost: None,
            has_contract,
        }
    }

    #[test]
    fn a_purchase_of_unknown_size_is_unsettled_until_its_contract_exists() {
        assert!(unsettled(&[in_flight("a", Some("4"), false)]).is_none());
        assert!(unsettled(&[in_flight("a", None, true)]).is_none());
        let both = [
            in_flight("a", Some("4"), false),
            in_flight("b", None, false),
        ];
        assert_eq!(unsettled(&both).map(|f| f.purchase.as_str()), Some("b"));
    }
}
