//! Giving back and extending, as a round acts on them: the inputs of
//! [`scale_down::candidates`] and [`scale_down::expiry`] gathered from the
//! world, and their verdicts carried out — a node given back is cordoned
//! and has each of its pods evicted through `pods/eviction` (a refusal
//! uncordons and keeps the node: `ScaleDownFailed`), then its contract is
//! cancelled and its Purchase deleted (purchase-controller unpeers); a
//! node the autoscaler cordoned and now keeps (a leader stopped half-way,
//! or the node is needed again) is uncordoned; a contract about to expire
//! and still in use is extended through the catalog when the budget
//! allows.
//!
//! How long a node has been unneeded is remembered by the controller (in
//! memory, as the Cluster Autoscaler does): a new leader starts counting
//! again, which only delays a give-back.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use catalog_client::wire::Contract;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::{Resource, ResourceExt};
use purchase_controller::model::Purchase;
use quantity::ResourceList;

use crate::act::{self, Eviction};
use crate::context::{elapsed, Context};
use crate::decide::Room;
use crate::events::{self, core_ref};
use crate::failpoint::{self, Step};
use crate::model::{
    Intent, LabelSelector, LabelSelectorRequirement, MarketAutoscaler, MarketAutoscalerStatus,
    NodeStatus, STATUS_LIST_CAP,
};
use crate::observe::{self, World};
use crate::scale_down::{
    self, Action, BoughtNode, DownInput, Expiring, ExpiryAction, ExpiryInput, GiveBackWhy,
    KeepReason, NodePod, Pdb,
};
use crate::spend::{Money, Spend};
use crate::status;

/// The minimum lead before `expiresAt` at which a contract is extended
/// (with 3 × `--scan-interval`, the larger).
pub const MIN_EXPIRY_LEAD: Duration = Duration::from_secs(10 * 60);

fn node_pod(pod: &Pod) -> NodePod {
    let owners = pod.metadata.owner_references.clone().unwrap_or_default();
    let controller = owners.iter().find(|o| o.controller == Some(true));
    NodePod {
        pod: observe::waiting_pod(pod).unwrap_or_default(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        annotations: pod.metadata.annotations.clone().unwrap_or_default(),
        daemon_set: controller.is_some_and(|o| o.kind == "DaemonSet"),
        has_controller: controller.is_some(),
    }
}

fn allocatable(node: &Node) -> ResourceList {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| {
            ResourceList::from_strings(a.iter().map(|(k, v)| (k.as_str(), v.0.as_str()))).ok()
        })
        .unwrap_or_default()
}

fn selector(
    s: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> LabelSelector {
    let Some(s) = s else {
        return LabelSelector::default();
    };
    LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .map(|e| LabelSelectorRequirement {
                key: e.key.clone(),
                operator: e.operator.clone(),
                values: e.values.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

/// A person's reading of why a node is kept.
pub fn keep_text(r: &KeepReason) -> String {
    match r {
        KeepReason::PolicyNever => "scaleDown.policy is Never".into(),
        KeepReason::NotReady => "the node is not Ready".into(),
        KeepReason::BeingGivenBack => "being given back".into(),
        KeepReason::InUse { utilization_ppm } => format!(
            "in use ({}% of cpu or memory requested)",
            utilization_ppm / 10_000
        ),
        KeepReason::NoRoomElsewhere { pod } => format!("pod {pod} fits on no other node"),
        KeepReason::WaitingPodFits { pod } => {
            format!("pod {pod}, not scheduled yet, fits on it")
        }
        KeepReason::SafeToEvict { pod } => {
            format!("pod {pod} is annotated {}=false", scale_down::SAFE_TO_EVICT)
        }
        KeepReason::DoNotDisrupt { pod } => {
            format!("pod {pod} is annotated {}=true", scale_down::DO_NOT_DISRUPT)
        }
        KeepReason::BarePod { pod } => format!("pod {pod} has no controller to recreate it"),
        KeepReason::Pdb { pod, pdb } => {
            format!("PodDisruptionBudget {pdb} allows no disruption of pod {pod}")
        }
        KeepReason::RecentPurchase { until } => {
            format!("a purchase was made recently (delayAfterPurchase until {until})")
        }
        KeepReason::NotUnneededLongEnough { since, until } => {
            format!("unneeded since {since}, given back at {until} (unneededTime)")
        }
        KeepReason::DisruptionBudget { allowed } => {
            format!("the disruption budget allows {allowed} at once")
        }
    }
}

/// The scale-down input's nodes and room, from `world`.
pub fn down_nodes(
    world: &World,
    unneeded: &HashMap<String, Timestamp>,
    key: &str,
) -> (Vec<BoughtNode>, Vec<Room>) {
    let mut bought = Vec::new();
    let mut names = Vec::new();
    for p in world
        .purchases
        .iter()
        .filter(|p| observe::phase(p) == observe::READY_PHASE)
    {
        let Some(node) = observe::node_of(p, &world.nodes) else {
            continue;
        };
        let name = node.name_any();
        names.push(name.clone());
        bought.push(BoughtNode {
            purchase: p.name_any(),
            allocatable: allocatable(node),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
            ready: observe::node_ready(node),
            pods: world.pods_on(&name).iter().map(|p| node_pod(p)).collect(),
            unneeded_since: unneeded.get(&name).copied(),
            being_given_back: p.is_deleting() || drain_began(node, key).is_some(),
            name,
        });
    }
    let elsewhere = world
        .nodes
        .iter()
        .filter(|n| !names.contains(&n.name_any()))
        .filter(|n| observe::node_ready(n))
        .filter(|n| {
            !n.spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false)
        })
        .map(|n| {
            let name = n.name_any();
            let used = observe::requested(&world.pods_on(&name));
            let mut labels = n.metadata.labels.clone().unwrap_or_default();
            labels
                .entry("kubernetes.io/hostname".into())
                .or_insert(name.clone());
            Room {
                free: allocatable(n).saturating_sub(&used),
                labels,
                taints: n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default(),
                name,
            }
        })
        .collect();
    (bought, elsewhere)
}

/// The PDBs of the served namespaces.
pub fn pdbs(world: &World) -> Vec<Pdb> {
    world
        .pdbs
        .iter()
        .map(|b| Pdb {
            namespace: b.metadata.namespace.clone().unwrap_or_default(),
            name: b.name_any(),
            selector: selector(b.spec.as_ref().and_then(|s| s.selector.as_ref())),
            disruptions_allowed: b
                .status
                .as_ref()
                .map_or(0, |s| s.disruptions_allowed.unwrap_or(0)),
        })
        .collect()
}

/// When the autoscaler last bought: its newest Purchase's creation, or
/// the last time one became Ready, whichever is later — a node is empty
/// until the pods it was bought for are recreated and scheduled there,
/// which starts only once it is Ready (Cluster Autoscaler's
/// scale-down-delay-after-add counts from the scale-up, whose node
/// registers within seconds; a purchase may take minutes).
pub fn last_purchase(world: &World) -> Option<Timestamp> {
    world
        .purchases
        .iter()
        .flat_map(|p| {
            let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let ready = p.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "Ready" && c.status == "True")
                    .and_then(|c| c.last_transition_time.parse::<Timestamp>().ok())
            });
            [created, ready]
        })
        .flatten()
        .max()
}

/// The contract of a Purchase the autoscaler bought, ended in the catalog
/// before the Purchase goes. purchase-controller unpeers when a Purchase
/// is deleted but leaves the contract to its buyer (a Purchase may follow
/// a contract bought elsewhere), and once the Purchase is gone nothing
/// here would find the contract again: so the Purchase is deleted only
/// after its contract is cancelled (or was never bought).
pub async fn cancel_contract(
    ctx: &Context,
    ma: &MarketAutoscaler,
    token: &str,
    contract: &str,
) -> Result<(), String> {
    write_contract(ctx, ma, token, contract, ContractWrite::Cancel)
        .await
        .map(|_| tracing::info!(contract, "contract cancelled"))
}

/// A change to one of the autoscaler's contracts in the catalog.
#[derive(Debug, Clone, Copy)]
enum ContractWrite {
    Cancel,
    /// By these seconds (`None`: the catalog's contract duration from now).
    Extend(Option<u64>),
}

/// `write` to `contract` as `ma`'s consumer, within `--catalog-timeout`;
/// the contract as extended (`None` for a cancellation), or why not. The
/// cached contract listing is dropped after a change, so the next round
/// reads it again.
async fn write_contract(
    ctx: &Context,
    ma: &MarketAutoscaler,
    token: &str,
    contract: &str,
    write: ContractWrite,
) -> Result<Option<Contract>, String> {
    let key = observe::key_of(&ma.metadata);
    let session = ctx
        .catalogs
        .session(&key, &ma.spec.catalog_url, token)
        .map_err(|e| format!("no catalog session: {e}"))?;
    let what = match write {
        ContractWrite::Cancel => "cancellation",
        ContractWrite::Extend(_) => "extension",
    };
    let written = tokio::time::timeout(ctx.settings.catalog_timeout, async {
        let mut session = session.lock().await;
        match write {
            ContractWrite::Cancel => session.cancel(contract).await.map(|()| None),
            ContractWrite::Extend(seconds) => session.extend(contract, seconds).await.map(Some),
        }
    })
    .await;
    match written {
        Ok(Ok(c)) => {
            ctx.catalogs.invalidate(&key);
            Ok(c)
        }
        Ok(Err(e)) => Err(format!(
            "the catalog refused the {what} of contract {contract}: {e}"
        )),
        Err(_) => Err(format!(
            "the catalog did not answer the {what} of contract {contract} within {:?}",
            ctx.settings.catalog_timeout
        )),
    }
}

/// The contract a Purchase follows, as its status records it.
pub fn contract_of(purchase: &Purchase) -> Option<String> {
    purchase.status.as_ref().and_then(|s| s.contract_id.clone())
}

/// Decide and give back; the `ScaleDown` condition and `status.nodes`
/// set on `st`.
pub async fn scale_down(
    ctx: &Context,
    ma: &MarketAutoscaler,
    intent: &Intent,
    world: &World,
    st: &mut MarketAutoscalerStatus,
    token: &str,
    now: Timestamp,
) -> Result<(), kube::Error> {
    let key = observe::key_of(&ma.metadata);
    let remembered = {
        let all = ctx.unneeded.lock().unwrap_or_else(|e| e.into_inner());
        all.get(&key).cloned().unwrap_or_default()
    };
    let (nodes, elsewhere) = down_nodes(world, &remembered, &key);
    let pdbs = pdbs(world);
    let verdicts = scale_down::candidates(&DownInput {
        nodes: &nodes,
        elsewhere: &elsewhere,
        pdbs: &pdbs,
        waiting: &world
            .unbound()
            .iter()
            .filter_map(|p| observe::waiting_pod(p))
            .collect::<Vec<_>>(),
        policy: &intent.scale_down,
        last_purchase: last_purchase(world),
        now,
    });
    {
        let mut all = ctx.unneeded.lock().unwrap_or_else(|e| e.into_inner());
        let mine = all.entry(key.clone()).or_default();
        let mut kept = HashMap::new();
        for v in &verdicts {
            if v.unneeded {
                kept.insert(v.node.clone(), mine.get(&v.node).copied().unwrap_or(now));
            }
        }
        *mine = kept;
    }
    st.nodes = node_statuses(&verdicts);
    let generation = ma.metadata.generation.unwrap_or(0);
    let giver = Giver {
        ctx,
        ma,
        world,
        token,
        purchases: Api::namespaced(ctx.client.clone(), &ma.namespace().unwrap_or_default()),
        nodes: Api::all(ctx.client.clone()),
        now,
    };
    for v in verdicts {
        let node = world.nodes.iter().find(|n| n.name_any() == v.node);
        let draining = node.and_then(|n| drain_began(n, &key));
        let (label, text) = match v.action {
            Action::GiveBack(GiveBackWhy::Empty) => ("empty", "empty".to_string()),
            Action::GiveBack(GiveBackWhy::Underutilized { utilization_ppm }) => (
                "underutilized",
                format!(
                    "underutilized ({}% of cpu or memory requested)",
                    utilization_ppm / 10_000
                ),
            ),
            // A node this autoscaler cordoned: its drain goes on.
            Action::Keep(KeepReason::BeingGivenBack) if draining.is_some() => {
                ("drained", "drained".to_string())
            }
            Action::Keep(reason) => {
                tracing::debug!(node = %v.node, reason = %keep_text(&reason), "bought node kept");
                continue;
            }
        };
        let began = match draining {
            Some(began) => began,
            None => {
                act::cordon(&giver.nodes, &v.node, &key, now).await?;
                tracing::info!(node = %v.node, reason = label, "cordoned to be given back");
                now
            }
        };
        match giver.drain(&v.node, began).await? {
            Drain::Done => {}
            Drain::Refused(message) => {
                status::set_condition(
                    st,
                    status::SCALE_DOWN,
                    false,
                    events::SCALE_DOWN_FAILED,
                    &format!("node {}: {message}", v.node),
                    generation,
                    now,
                );
                continue;
            }
        }
        failpoint::reached(Step::BeforeCancel);
        match giver.end(&v.purchase).await? {
            Ok(true) => {}
            // A round run before the store saw an earlier round's
            // deletion (a contract change woke it): given back already.
            Ok(false) => {
                tracing::debug!(node = %v.node, purchase = %v.purchase, "given back already");
                continue;
            }
            Err(message) => {
                // Its served pods are gone now; the next round finds it
                // drained and tries again.
                tracing::warn!(node = %v.node, %message, "giving back stopped; the Purchase is kept");
                ctx.events.publish(
                    core_ref("Node", None, &v.node),
                    true,
                    events::SCALE_DOWN_FAILED,
                    "ScaleDown",
                    &format!("node kept: {message}"),
                );
                continue;
            }
        }
        ctx.metrics.count_given_back(label);
        let note = format!(
            "node {} {text}: its pods evicted, Purchase {} deleted (its contract cancelled)",
            v.node, v.purchase
        );
        tracing::info!(node = %v.node, purchase = %v.purchase, reason = label, "bought node given back");
        ctx.events.publish(
            core_ref("Node", None, &v.node),
            false,
            events::SCALE_DOWN,
            "ScaleDown",
            &note,
        );
        status::set_condition(
            st,
            status::SCALE_DOWN,
            true,
            "GaveBack",
            &note,
            generation,
            now,
        );
    }
    Ok(())
}

/// Each bought node and what giving back makes of it now, by name.
fn node_statuses(verdicts: &[scale_down::Verdict]) -> Vec<NodeStatus> {
    let mut out: Vec<NodeStatus> = verdicts
        .iter()
        .map(|v| {
            let (state, reason) = match &v.action {
                Action::GiveBack(GiveBackWhy::Empty) => ("GivingBack", "empty".to_string()),
                Action::GiveBack(GiveBackWhy::Underutilized { utilization_ppm }) => (
                    "GivingBack",
                    format!(
                        "underutilized ({}% of cpu or memory requested)",
                        utilization_ppm / 10_000
                    ),
                ),
                Action::Keep(KeepReason::BeingGivenBack) => {
                    ("GivingBack", keep_text(&KeepReason::BeingGivenBack))
                }
                Action::Keep(r) if v.unneeded => ("Unneeded", keep_text(r)),
                Action::Keep(r) => ("Kept", keep_text(r)),
            };
            NodeStatus {
                node: v.node.clone(),
                purchase: v.purchase.clone(),
                state: state.to_string(),
                reason,
            }
        })
        .collect();
    out.sort_by(|a, b| a.node.cmp(&b.node));
    out.truncate(STATUS_LIST_CAP);
    out
}

/// When this autoscaler (`key`) cordoned `node` to give it back, if it did.
fn drain_began(node: &Node, key: &str) -> Option<Timestamp> {
    let annotations = node.annotations();
    if annotations.get(act::CORDONED_BY).map(String::as_str) != Some(key) {
        return None;
    }
    Some(
        annotations
            .get(act::DRAIN_BEGAN)
            .and_then(|t| t.parse().ok())
            .unwrap_or(Timestamp::UNIX_EPOCH),
    )
}

/// What a drain came to.
enum Drain {
    /// Every served pod evicted (or gone).
    Done,
    /// An eviction was refused; the node stays cordoned until the next
    /// round tries again, or was uncordoned past `--max-drain-time`.
    Refused(String),
}

/// The effects of giving a node back, for one round.
struct Giver<'a> {
    ctx: &'a Context,
    ma: &'a MarketAutoscaler,
    world: &'a World,
    token: &'a str,
    purchases: Api<Purchase>,
    nodes: Api<Node>,
    now: Timestamp,
}

impl Giver<'_> {
    /// Evict every served pod of `node`, cordoned since `began`. A refusal
    /// (a PodDisruptionBudget) leaves the node cordoned for the next round
    /// to try again — as Cluster Autoscaler retries an eviction until
    /// `--max-pod-eviction-time` — and past `--max-drain-time` uncordons
    /// it: the node is kept.
    async fn drain(&self, node: &str, began: Timestamp) -> Result<Drain, kube::Error> {
        let on_node: Vec<Arc<Pod>> = self.world.pods_on(node);
        for pod in on_node
            .iter()
            .filter(|p| !node_pod(p).daemon_set && p.metadata.deletion_timestamp.is_none())
        {
            let api: Api<Pod> = Api::namespaced(
                self.ctx.evictions.clone(),
                &pod.namespace().unwrap_or_default(),
            );
            let Eviction::Refused(message) = act::evict(&api, &pod.name_any()).await? else {
                continue;
            };
            let max = self.ctx.settings.max_drain_time;
            let pod = observe::key_of(&pod.metadata);
            let (message, gave_up) = if elapsed(began, self.now) >= max {
                act::uncordon(&self.nodes, node).await?;
                (
                    format!("eviction of pod {pod} refused ({message}) for {max:?} (--max-drain-time): the node is uncordoned and kept"),
                    true,
                )
            } else {
                (
                    format!("eviction of pod {pod} refused ({message}); the node stays cordoned and its drain is retried"),
                    false,
                )
            };
            tracing::warn!(node, %message, gave_up, "giving back held up");
            self.ctx.events.publish(
                core_ref("Node", None, node),
                true,
                events::SCALE_DOWN_FAILED,
                "ScaleDown",
                &message,
            );
            return Ok(Drain::Refused(message));
        }
        Ok(Drain::Done)
    }

    /// Cancel the contract of Purchase `name`, then delete it: `Ok(Err)`
    /// when the catalog did not cancel (the Purchase is kept), `Ok(Ok(false))`
    /// when it was gone already (an earlier round gave it back).
    async fn end(&self, name: &str) -> Result<Result<bool, String>, kube::Error> {
        let purchase = self.world.purchases.iter().find(|p| p.name_any() == name);
        if let Some(contract) = purchase.and_then(|p| contract_of(p)) {
            if let Err(message) = cancel_contract(self.ctx, self.ma, self.token, &contract).await {
                return Ok(Err(message));
            }
        }
        let uid = purchase.and_then(|p| p.metadata.uid.clone());
        Ok(Ok(act::delete(&self.purchases, name, uid).await?))
    }
}

/// Extend the contracts about to expire that are still in use (with
/// `onExpiry: Extend`, within the budget); tell of the others.
#[allow(clippy::too_many_arguments)]
pub async fn expiry(
    ctx: &Context,
    ma: &MarketAutoscaler,
    intent: &Intent,
    world: &World,
    mine: &[&Contract],
    spend: Spend,
    token: &str,
    now: Timestamp,
) {
    let purchase_of: BTreeMap<&str, &Arc<Purchase>> = world
        .purchases
        .iter()
        .filter_map(|p| Some((p.status.as_ref()?.contract_id.as_deref()?, p)))
        .collect();
    let expiring: Vec<Expiring> = mine
        .iter()
        .filter(|c| c.active)
        .filter_map(|c| {
            let purchase = purchase_of.get(c.id.as_str())?;
            let terms = observe::terms(c)?;
            let in_use = observe::node_of(purchase, &world.nodes).is_some_and(|n| {
                world
                    .pods_on(&n.name_any())
                    .iter()
                    .any(|p| !node_pod(p).daemon_set)
            });
            Some(Expiring {
                contract_id: c.id.clone(),
                purchase: purchase.name_any(),
                expires_at: terms.ends_at,
                term_began: c
                    .extended_at
                    .and_then(|t| {
                        Timestamp::from_nanosecond(i128::from(t.timestamp_nanos_opt()?)).ok()
                    })
                    .unwrap_or(terms.purchased_at),
                in_use,
                cost: Money::from(c.cost),
                per: terms.per,
            })
        })
        .collect();
    if expiring.is_empty() {
        return;
    }
    let lead = (ctx.settings.scan_interval * 3).max(MIN_EXPIRY_LEAD);
    let verdicts = scale_down::expiry(&ExpiryInput {
        contracts: &expiring,
        on_expiry: intent.terms.on_expiry,
        lead,
        extension: intent.terms.duration,
        limits: &intent.limits,
        spend,
        now,
    });
    for v in verdicts {
        match v.action {
            ExpiryAction::NotYet => {}
            ExpiryAction::Extend { .. } => {
                let seconds = intent.terms.duration.map(act::whole_seconds);
                match write_contract(
                    ctx,
                    ma,
                    token,
                    &v.contract_id,
                    ContractWrite::Extend(seconds),
                )
                .await
                {
                    Ok(c) => {
                        let ends = c.map(|c| c.expires_at.to_rfc3339()).unwrap_or_default();
                        ctx.events.publish(
                            ma.object_ref(&()),
                            false,
                            events::CONTRACT_EXTENDED,
                            "Extend",
                            &format!(
                                "contract {} of Purchase {} extended: now ends {ends}",
                                v.contract_id, v.purchase
                            ),
                        );
                    }
                    Err(message) => {
                        tracing::warn!(contract = %v.contract_id, %message, "not extended")
                    }
                }
            }
            ExpiryAction::LetExpire(reason) => {
                ctx.events.publish(
                    ma.object_ref(&()),
                    false,
                    events::CONTRACT_LEFT_TO_EXPIRE,
                    "Expire",
                    &format!(
                        "contract {} of Purchase {} is left to expire: {reason:?}",
                        v.contract_id, v.purchase
                    ),
                );
            }
        }
    }
}
