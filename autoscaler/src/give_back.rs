//! Giving back and extending, as a round acts on them: the inputs of
//! [`scale_down::candidates`] and [`scale_down::expiry`] gathered from the
//! world, and their verdicts carried out — a node given back has each of
//! its pods evicted through `pods/eviction` (a refusal keeps the node:
//! `ScaleDownFailed`), then its Purchase deleted (purchase-controller
//! cancels the contract and unpeers); a contract about to expire and still
//! in use is extended through the catalog when the budget allows.
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
use crate::context::Context;
use crate::decide::Room;
use crate::events::{self, core_ref};
use crate::failpoint::{self, Step};
use crate::model::{
    Intent, LabelSelector, LabelSelectorRequirement, MarketAutoscaler, MarketAutoscalerStatus,
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
            being_given_back: p.is_deleting(),
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

/// When the autoscaler last bought (its newest Purchase's creation).
pub fn last_purchase(world: &World) -> Option<Timestamp> {
    world
        .purchases
        .iter()
        .filter_map(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
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
    let key = observe::key_of(&ma.metadata);
    let session = ctx
        .catalogs
        .session(&key, &ma.spec.catalog_url, token)
        .map_err(|e| format!("no catalog session: {e}"))?;
    let cancelled = tokio::time::timeout(ctx.settings.catalog_timeout, async {
        session.lock().await.cancel(contract).await
    })
    .await;
    match cancelled {
        Ok(Ok(())) => {
            ctx.catalogs.invalidate(&key);
            tracing::info!(contract, "contract cancelled");
            Ok(())
        }
        Ok(Err(e)) => Err(format!(
            "the catalog refused to cancel contract {contract}: {e}"
        )),
        Err(_) => Err(format!(
            "the catalog did not answer the cancellation of contract {contract} within {:?}",
            ctx.settings.catalog_timeout
        )),
    }
}

/// The contract a Purchase follows, as its status records it.
pub fn contract_of(purchase: &Purchase) -> Option<String> {
    purchase.status.as_ref().and_then(|s| s.contract_id.clone())
}

/// Decide and give back; the `ScaleDown` condition set on `st`.
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
    let (nodes, elsewhere) = down_nodes(world, &remembered);
    let pdbs = pdbs(world);
    let verdicts = scale_down::candidates(&DownInput {
        nodes: &nodes,
        elsewhere: &elsewhere,
        pdbs: &pdbs,
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
    let purchases: Api<Purchase> =
        Api::namespaced(ctx.client.clone(), &ma.namespace().unwrap_or_default());
    for v in verdicts {
        let why = match v.action {
            Action::Keep(reason) => {
                tracing::debug!(node = %v.node, reason = %keep_text(&reason), "bought node kept");
                continue;
            }
            Action::GiveBack(why) => why,
        };
        let (label, text) = match why {
            GiveBackWhy::Empty => ("empty", "empty".to_string()),
            GiveBackWhy::Underutilized { utilization_ppm } => (
                "underutilized",
                format!(
                    "underutilized ({}% of cpu or memory requested)",
                    utilization_ppm / 10_000
                ),
            ),
        };
        let node_ref = core_ref("Node", None, &v.node);
        let on_node: Vec<Arc<Pod>> = world.pods_on(&v.node);
        let mut refused = None;
        for pod in on_node.iter().filter(|p| !node_pod(p).daemon_set) {
            let api: Api<Pod> =
                Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
            if let Eviction::Refused(message) = act::evict(&api, &pod.name_any()).await? {
                refused = Some(format!(
                    "eviction of pod {} refused: {message}",
                    observe::key_of(&pod.metadata)
                ));
                break;
            }
        }
        if let Some(message) = refused {
            tracing::warn!(node = %v.node, %message, "giving back stopped; the node is kept");
            ctx.events.publish(
                node_ref,
                true,
                events::SCALE_DOWN_FAILED,
                "ScaleDown",
                &format!("node kept: {message}"),
            );
            status::set_condition(
                st,
                status::SCALE_DOWN,
                false,
                events::SCALE_DOWN_FAILED,
                &format!("node {}: {message}", v.node),
                ma.metadata.generation.unwrap_or(0),
                now,
            );
            continue;
        }
        failpoint::reached(Step::BeforeCancel);
        let purchase = world.purchases.iter().find(|p| p.name_any() == v.purchase);
        if let Some(contract) = purchase.and_then(|p| contract_of(p)) {
            if let Err(message) = cancel_contract(ctx, ma, token, &contract).await {
                // The node is empty of served pods now; the next round
                // finds it so and tries again.
                tracing::warn!(node = %v.node, %message, "giving back stopped; the Purchase is kept");
                ctx.events.publish(
                    node_ref,
                    true,
                    events::SCALE_DOWN_FAILED,
                    "ScaleDown",
                    &format!("node kept: {message}"),
                );
                continue;
            }
        }
        let uid = purchase.and_then(|p| p.metadata.uid.clone());
        act::delete(&purchases, &v.purchase, uid).await?;
        ctx.metrics.count_given_back(label);
        let note = format!(
            "node {} {text}: its pods evicted, Purchase {} deleted (its contract cancelled)",
            v.node, v.purchase
        );
        tracing::info!(node = %v.node, purchase = %v.purchase, reason = label, "bought node given back");
        ctx.events
            .publish(node_ref, false, events::SCALE_DOWN, "ScaleDown", &note);
        status::set_condition(
            st,
            status::SCALE_DOWN,
            true,
            "GaveBack",
            &note,
            ma.metadata.generation.unwrap_or(0),
            now,
        );
    }
    Ok(())
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
    let key = observe::key_of(&ma.metadata);
    for v in verdicts {
        match v.action {
            ExpiryAction::NotYet => {}
            ExpiryAction::Extend { .. } => {
                let session = match ctx.catalogs.session(&key, &ma.spec.catalog_url, token) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot extend: no catalog session");
                        return;
                    }
                };
                let seconds = intent.terms.duration.map(|d| d.as_secs());
                let extended = tokio::time::timeout(ctx.settings.catalog_timeout, async {
                    session.lock().await.extend(&v.contract_id, seconds).await
                })
                .await;
                match extended {
                    Ok(Ok(c)) => {
                        ctx.catalogs.invalidate(&key);
                        ctx.events.publish(
                            ma.object_ref(&()),
                            false,
                            events::CONTRACT_EXTENDED,
                            "Extend",
                            &format!(
                                "contract {} of Purchase {} extended: now ends {}",
                                v.contract_id,
                                v.purchase,
                                c.expires_at.to_rfc3339()
                            ),
                        );
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(contract = %v.contract_id, error = %e, "the catalog refused the extension")
                    }
                    Err(_) => {
                        tracing::warn!(contract = %v.contract_id, "the catalog did not answer the extension in time")
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
