//! One MarketAutoscaler's round (see the `controller` module for the
//! order); every effect is in [`crate::act`], every status rule in
//! [`crate::status`].

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use controller_core::pods::stale;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use purchase_controller::model::Purchase;

use crate::act;
use crate::context::{elapsed, next_round, requeue_after, Context, ReconcileError};
use crate::decide::{self, Buy, ScaleUp};
use crate::events::{self, core_ref};
use crate::failpoint::{self, Step};
use crate::give_back;
use crate::metrics::Gauges;
use crate::model::{
    HeldStatus, InFlightStatus, Intent, Limits, MarketAutoscaler, MarketAutoscalerStatus,
};
use crate::observe::{self, key_of, InFlight, Inputs, World};
use crate::spend::{self, Money, Spend};
use crate::status::{self, WriteError, READY};

/// Spend after buying `buy` on top of `spend` breaks no money limit.
pub fn budget_allows(
    limits: &Limits,
    spend: &Spend,
    buy: &Buy,
    term: Option<Duration>,
    now: Timestamp,
) -> Result<(), String> {
    if let Some(max) = limits.max_spend_per_hour {
        let would_be = spend.per_hour.plus(buy.cost_per_hour);
        if would_be > max {
            return Err(format!(
                "maxSpendPerHour {max} {}: spend would be {would_be} per hour",
                limits.currency
            ));
        }
    }
    if let Some(max) = limits.max_spend_per_month {
        let added = spend::rest_of_month(Money::from(buy.cost), buy.per, term, now);
        let would_be = spend.month_to_date.plus(spend.rest_of_month).plus(added);
        if would_be > max {
            return Err(format!(
                "maxSpendPerMonth {max} {}: this month would come to {would_be}",
                limits.currency
            ));
        }
    }
    Ok(())
}

/// A one-line summary of a decision (DECIDE's, with the first pod left
/// out named).
pub fn summary(up: &ScaleUp, waiting: usize, currency: &str) -> String {
    if waiting == 0 {
        return "no pod waits".to_string();
    }
    let mut s = up.summary(currency);
    if let Some(u) = up.unplaceable.first() {
        let _ = write!(s, " (first: {}: {})", u.pod, u.reason);
    }
    s
}

/// The round's outcome so far, for the status write at the end.
struct Round<'a> {
    ctx: &'a Context,
    ma_api: Api<MarketAutoscaler>,
    purchases: Api<Purchase>,
    /// The object as last written (its resourceVersion).
    current: MarketAutoscaler,
    key: String,
    generation: i64,
    now: Timestamp,
}

impl Round<'_> {
    fn status(&self) -> MarketAutoscalerStatus {
        self.current.status.clone().unwrap_or_default()
    }

    /// Write `after` if it changes anything.
    async fn write(&mut self, after: MarketAutoscalerStatus) -> Result<(), WriteError> {
        if !status::changed(&self.status(), &after) {
            return Ok(());
        }
        self.current = status::write(&self.ma_api, &self.current, after).await?;
        Ok(())
    }

    /// `Ready=False` with `reason`: nothing bought or given back, the
    /// rest of the status kept.
    async fn not_ready(&mut self, reason: &str, message: &str) -> Result<Action, ReconcileError> {
        let mut st = self.status();
        st.observed_generation = self.generation;
        status::set_condition(
            &mut st,
            READY,
            false,
            reason,
            message,
            self.generation,
            self.now,
        );
        tracing::warn!(reason, message, "not buying");
        self.write(st).await?;
        Ok(Action::requeue(self.ctx.settings.scan_interval))
    }
}

/// Run one round for `ma` at `now`.
pub async fn run(
    ctx: &Context,
    ma: &MarketAutoscaler,
    now: Timestamp,
) -> Result<Action, ReconcileError> {
    let ns = ma.namespace().unwrap_or_default();
    let name = ma.name_any();
    let mut r = Round {
        ctx,
        ma_api: Api::namespaced(ctx.client.clone(), &ns),
        purchases: Api::namespaced(ctx.client.clone(), &ns),
        current: ma.clone(),
        key: key_of(&ma.metadata),
        generation: ma.metadata.generation.unwrap_or(0),
        now,
    };
    let settings = &ctx.settings;
    let scan = settings.scan_interval;

    // 1. What the round needs before it may act.
    let intent = match ma.spec.parse() {
        Ok(i) => i,
        Err(e) => {
            ctx.metrics.count_error("spec");
            return r.not_ready(status::INVALID_SPEC, &e.to_string()).await;
        }
    };
    let secret = &ma.spec.credentials_secret_ref;
    let token = match act::token(&ctx.client, &ns, &secret.name, &secret.key).await? {
        Ok(t) => t,
        Err(problem) => return r.not_ready(status::CREDENTIALS_MISSING, &problem).await,
    };
    let url = ma.spec.catalog_url.as_str();
    let offers = match ctx.catalogs.usable_offers(url) {
        Ok(o) => o,
        Err(e) => {
            let why = format!("{url}: {e}");
            ctx.metrics
                .set_catalog_unreachable(&r.key, Some(why.clone()));
            return r.not_ready(status::CATALOG_UNREACHABLE, &why).await;
        }
    };
    let contracts = match ctx.catalogs.contracts(&r.key, url, &token).await {
        Ok(c) => c,
        Err(e) if e.is_credentials() => {
            return r
                .not_ready(status::CREDENTIALS_MISSING, &e.to_string())
                .await
        }
        Err(e) => {
            let why = format!("{url}: {e}");
            ctx.metrics.count_error("catalog");
            ctx.metrics
                .set_catalog_unreachable(&r.key, Some(why.clone()));
            return r.not_ready(status::CATALOG_UNREACHABLE, &why).await;
        }
    };
    ctx.metrics.set_catalog_unreachable(&r.key, None);
    if !offers.offers.is_empty() && offers.offers.values().all(|o| o.pricing.is_none()) {
        return r
            .not_ready(
                status::PRICING_UNKNOWN,
                "the catalog does not say what its prices are (currency; per hour or per month): it predates pricing, so nothing is bought",
            )
            .await;
    }

    let world = ctx.stores.world(ma, &intent);
    let mut deadlines: Vec<Duration> = Vec::new();

    // 2. The purchases in flight.
    let settled = settle(&mut r, ma, &intent, &world, &token).await?;
    deadlines.extend(settled.deadlines);

    // 3. Pods Liqo's webhook never saw, once bought capacity is there.
    recreate_stale(&r, &world).await?;

    // 4. Decide and buy, once the batch of new waiting pods settled.
    let mine = observe::my_contracts(ma, &world, &contracts);
    let mut in_flight = observe::in_flight(&world, &r.status().in_flight, &offers.offers, &mine);
    let uids: Vec<String> = world
        .waiting
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    let wait = ctx
        .batches
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(r.key.clone())
        .or_default()
        .wait(
            &uids,
            Instant::now(),
            settings.batch_idle,
            settings.batch_max,
        );
    let mut st = r.status();
    // A purchase in flight whose plan left the feed before its contract
    // exists is of unknown size: deciding now could buy its pods' room a
    // second time, so the round waits for it to settle (it fails at the
    // reservation, or its contract says what it holds).
    let unsettled = observe::unsettled(&in_flight).map(|f| f.purchase.clone());
    if let Some(left) = wait {
        tracing::debug!(?left, "new pods wait; the batch is still open");
        ctx.metrics.count_decision("waiting", "batch");
        deadlines.push(left);
    } else if let Some(purchase) = unsettled {
        tracing::info!(%purchase, "a purchase in flight has left the catalog's offers; deciding once it settles");
        ctx.metrics.count_decision("waiting", "unsettled");
    } else {
        let inputs = Inputs::gather(
            &intent,
            &st,
            &world,
            &world.waiting,
            &offers.offers,
            &mine,
            &in_flight,
            now,
        );
        let up = decide::scale_up(&inputs.input(&intent, now));
        record_decision(&r, &up, &world);
        let bought = buy(&mut r, ma, &intent, &token, &up, &mut in_flight).await?;
        if let Some(action) = bought.restart {
            return Ok(action);
        }
        st = r.status();
        st.last_decision = Some(status::decision(
            &up,
            summary(&up, world.waiting.len(), &intent.limits.currency),
            now,
        ));
        if bought.count > 0 {
            st.last_scale_up = st.last_decision.clone();
            status::set_condition(
                &mut st,
                status::SCALED_UP,
                true,
                "Bought",
                &summary(&up, world.waiting.len(), &intent.limits.currency),
                r.generation,
                now,
            );
        } else if let Some(u) = up.unplaceable.first() {
            let note = bought
                .refused
                .clone()
                .unwrap_or_else(|| format!("{}: {}", u.pod, u.reason));
            status::set_condition(
                &mut st,
                status::SCALED_UP,
                false,
                events::NOT_TRIGGER_SCALE_UP,
                &note,
                r.generation,
                now,
            );
        } else if let Some(refused) = &bought.refused {
            status::set_condition(
                &mut st,
                status::SCALED_UP,
                false,
                events::NOT_TRIGGER_SCALE_UP,
                refused,
                r.generation,
                now,
            );
        }
    }

    // 5. Give back, extend.
    let fresh = ctx
        .catalogs
        .contracts(&r.key, url, &token)
        .await
        .unwrap_or(contracts);
    let world_now = ctx.stores.world(ma, &intent);
    give_back::scale_down(ctx, ma, &intent, &world_now, &mut st, &token, now).await?;
    let mine = observe::my_contracts(ma, &world_now, &fresh);
    let committed = observe::committed(&mine, &in_flight, intent.terms.duration, now);
    give_back::expiry(
        ctx,
        ma,
        &intent,
        &world_now,
        &mine,
        committed.spend,
        &token,
        now,
    )
    .await;

    // 6. The status: spend, held, ready.
    let held_spend = Spend::of(
        &mine
            .iter()
            .filter_map(|c| observe::terms(c))
            .collect::<Vec<_>>(),
        now,
    );
    st.observed_generation = r.generation;
    st.currency = Some(intent.limits.currency.clone());
    st.spend_per_hour = Some(held_spend.per_hour.to_string());
    st.spend_month_to_date = Some(held_spend.month_to_date.to_string());
    st.held = Some(held(&mine));
    status::set_condition(
        &mut st,
        READY,
        true,
        status::RUNNING,
        "buying from the catalog within the limits",
        r.generation,
        now,
    );
    r.write(st.clone()).await?;

    ctx.metrics.set_autoscaler(
        &r.key,
        Some(Gauges {
            unschedulable: world.waiting.len(),
            in_flight: st.in_flight.len(),
            currency: intent.limits.currency.clone(),
            spend_per_hour: money_f64(committed.spend.per_hour),
            spend_month_to_date: money_f64(held_spend.month_to_date),
        }),
    );
    let _ = name;
    Ok(requeue_after(next_round(scan, deadlines)))
}

fn money_f64(m: Money) -> f64 {
    // For the metric only (the status holds the exact decimal).
    m.to_string().parse().unwrap_or(f64::MAX)
}

/// Resources and contracts held now (active contracts).
fn held(mine: &[&catalog_client::wire::Contract]) -> HeldStatus {
    let active: Vec<_> = mine.iter().filter(|c| c.active).collect();
    let sum = active
        .iter()
        .fold(quantity::ResourceList::new(), |s, c| s.add(&c.resources));
    let get = |k: &str| sum.get(k).map(|q| q.canonical());
    HeldStatus {
        cpu: get("cpu"),
        memory: get("memory"),
        pods: get("pods"),
        contracts: u32::try_from(active.len()).unwrap_or(u32::MAX),
    }
}

struct Settled {
    deadlines: Vec<Duration>,
}

fn timestamp_of(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Timestamp {
    t.0
}

/// A purchase given up (`result`: failed, or not Ready by the deadline):
/// its offer's plan backed off, counted, and told on the MarketAutoscaler.
/// The caller deletes it.
fn give_up(
    r: &Round<'_>,
    st: &mut MarketAutoscalerStatus,
    (offer, plan): (&str, &str),
    result: &'static str,
    note: &str,
) {
    let settings = &r.ctx.settings;
    status::record_failure(
        &mut st.backoff,
        offer,
        plan,
        r.now,
        settings.backoff_initial,
        settings.backoff_max,
    );
    r.ctx.metrics.count_purchase(result);
    r.ctx.metrics.count_given_back(result);
    r.ctx.events.publish(
        r.current.object_ref(&()),
        true,
        events::PURCHASE_FAILED,
        "Cancel",
        note,
    );
}

/// Settle the purchases in flight: Ready ones leave `status.inFlight`,
/// failed or late ones are deleted and their offer backed off, recorded
/// ones whose Purchase is missing are created. The status is written
/// before anything is deleted, so a round that stops half-way leaves a
/// record the next one repeats safely.
async fn settle(
    r: &mut Round<'_>,
    ma: &MarketAutoscaler,
    intent: &Intent,
    world: &World,
    token: &str,
) -> Result<Settled, ReconcileError> {
    let settings = &r.ctx.settings;
    let now = r.now;
    let before = r.status();
    let mut st = before.clone();
    status::prune_backoff(&mut st.backoff, now, settings.backoff_reset);
    let mut in_flight: Vec<InFlightStatus> = Vec::new();
    let mut deadlines = Vec::new();
    // (Purchase, its UID, the contract to cancel first).
    let mut deletions: Vec<(String, Option<String>, Option<String>)> = Vec::new();
    let mut ready = false;
    let recorded = |name: &str| before.in_flight.iter().find(|f| f.purchase == name);
    for p in &world.purchases {
        if p.is_deleting() {
            continue;
        }
        let name = p.name_any();
        let offer = p.spec.offer_id.clone().unwrap_or_default();
        let plan = p.spec.plan_id.clone().unwrap_or_default();
        let since = p
            .metadata
            .creation_timestamp
            .as_ref()
            .map(timestamp_of)
            .or_else(|| recorded(&name).and_then(|f| f.since.parse().ok()))
            .unwrap_or(now);
        match observe::phase(p) {
            observe::READY_PHASE => {
                if recorded(&name).is_some() {
                    ready = true;
                    r.ctx.metrics.count_purchase("ready");
                    r.ctx
                        .metrics
                        .observe_ready(elapsed(since, now).as_secs_f64());
                    tracing::info!(purchase = %name, "purchase Ready");
                }
            }
            "Failed" => {
                let why = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                    .map(|c| c.message.clone())
                    .unwrap_or_default();
                give_up(
                    r,
                    &mut st,
                    (&offer, &plan),
                    "failed",
                    &format!("Purchase {name} of offer {offer} plan {plan} failed ({why}); deleted, the offer backed off"),
                );
                deletions.push((name, p.metadata.uid.clone(), give_back::contract_of(p)));
            }
            "Ended" => {
                // The contract is over: nothing left to cancel.
                deletions.push((name, p.metadata.uid.clone(), None));
            }
            _ => {
                let age = elapsed(since, now);
                if age >= settings.purchase_deadline {
                    give_up(
                        r,
                        &mut st,
                        (&offer, &plan),
                        "deadline",
                        &format!(
                            "Purchase {name} of offer {offer} plan {plan} not Ready within {:?}; deleted (its contract cancelled), the offer backed off",
                            settings.purchase_deadline
                        ),
                    );
                    deletions.push((name, p.metadata.uid.clone(), give_back::contract_of(p)));
                } else {
                    deadlines.push(settings.purchase_deadline - age);
                    in_flight.push(InFlightStatus {
                        purchase: name,
                        offer_id: offer,
                        plan_id: plan,
                        since: status::rfc3339(since),
                    });
                }
            }
        }
    }
    // Recorded, not created: a leader stopped between the two writes.
    let mut creations = Vec::new();
    for f in &before.in_flight {
        if world
            .purchases
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(f.purchase.as_str()))
        {
            continue;
        }
        let since = f.since.parse::<Timestamp>().unwrap_or(now);
        if elapsed(since, now) >= settings.purchase_deadline {
            continue;
        }
        creations.push(f.clone());
        in_flight.push(f.clone());
    }
    st.in_flight = in_flight;
    r.write(st).await?;
    if ready {
        failpoint::reached(Step::AfterReady);
    }
    for (name, uid, contract) in deletions {
        if let Some(contract) = contract {
            if let Err(message) = give_back::cancel_contract(r.ctx, ma, token, &contract).await {
                tracing::warn!(purchase = %name, %message, "Purchase kept until its contract is cancelled");
                continue;
            }
        }
        act::delete(&r.purchases, &name, uid).await?;
        tracing::info!(purchase = %name, "Purchase deleted");
    }
    for f in creations {
        let p = act::purchase(
            &r.current,
            &f.purchase,
            (&f.offer_id, &f.plan_id),
            intent.terms.duration,
        );
        if act::create(&r.purchases, &p).await? {
            tracing::info!(purchase = %f.purchase, "recorded purchase created (a former leader stopped before)");
            r.ctx.metrics.count_purchase("created");
        }
    }
    Ok(Settled { deadlines })
}

/// Waiting pods Liqo's webhook never saw, in namespaces where it now acts
/// and a bought node is Ready: controlled ones deleted (their owner
/// recreates them through the webhook), bare ones told.
async fn recreate_stale(r: &Round<'_>, world: &World) -> Result<(), ReconcileError> {
    let ready: Vec<String> = world
        .bought_nodes()
        .iter()
        .filter(|(_, n)| observe::node_ready(n))
        .filter_map(|(p, _)| p.status.as_ref()?.provider_cluster_id.clone())
        .collect();
    if ready.is_empty() {
        return Ok(());
    }
    for ns in &world.namespaces {
        let ns_name = ns.name_any();
        let waiting: Vec<&Pod> = world
            .waiting
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns_name.as_str()))
            .map(|p| &**p)
            .collect();
        let api: Api<Pod> = Api::namespaced(r.ctx.client.clone(), &ns_name);
        for action in stale::plan(ns, &waiting, &ready) {
            match action {
                stale::Action::Recreate { name, uid } => {
                    if act::recreate_pod(&api, &name, uid).await? {
                        tracing::info!(pod = %name, namespace = %ns_name, "deleted a waiting pod created before Liqo's webhook acted; its owner recreates it");
                    }
                }
                stale::Action::Announce { name, .. } => {
                    r.ctx.events.publish(
                        core_ref("Pod", Some(&ns_name), &name),
                        true,
                        events::NOT_TRIGGER_SCALE_UP,
                        "Recreate",
                        "capacity was bought, but this pod was created before Liqo's pod webhook acted in its namespace and no controller owns it: delete and create it again to run it there",
                    );
                }
            }
        }
    }
    Ok(())
}

/// Events and metrics of a decision.
fn record_decision(r: &Round<'_>, up: &ScaleUp, world: &World) {
    let metrics = &r.ctx.metrics;
    if world.waiting.is_empty() {
        return;
    }
    for u in &up.unplaceable {
        metrics.count_decision("unplaceable", u.reason.code());
        if let Some((ns, pod)) = u.pod.split_once('/') {
            r.ctx.events.publish(
                core_ref("Pod", Some(ns), pod),
                false,
                events::NOT_TRIGGER_SCALE_UP,
                "ScaleUp",
                &format!("pod didn't trigger a purchase: {}", u.reason),
            );
        }
    }
    for _ in &up.placed {
        metrics.count_decision("placed", "room");
    }
    for _ in &up.buy {
        metrics.count_decision("bought", "fit");
    }
}

struct Bought {
    count: usize,
    /// Why the re-check refused a purchase.
    refused: Option<String>,
    /// Start the round over (another writer changed the object).
    restart: Option<Action>,
}

/// Buy each plan of `up`: the budget re-checked against fresh contracts,
/// the purchase recorded in the status, then the Purchase created.
async fn buy(
    r: &mut Round<'_>,
    ma: &MarketAutoscaler,
    intent: &Intent,
    token: &str,
    up: &ScaleUp,
    in_flight: &mut Vec<InFlight>,
) -> Result<Bought, ReconcileError> {
    let mut out = Bought {
        count: 0,
        refused: None,
        restart: None,
    };
    let url = ma.spec.catalog_url.as_str();
    for plan in &up.buy {
        let offered = r
            .ctx
            .catalogs
            .usable_offers(url)
            .map_err(|e| e.to_string())
            .and_then(|now| {
                decide::recheck::still_offered(plan, &observe::candidates(&now.offers))
            });
        if let Err(why) = offered {
            r.ctx.metrics.count_purchase("offer-changed");
            tracing::info!(offer = %plan.offer_id, plan = %plan.plan_id, %why, "the offer changed since the decision; deciding again");
            out.refused = Some(format!("{why}; deciding again"));
            out.restart = (out.count == 0).then(|| Action::requeue(Duration::from_millis(100)));
            break;
        }
        let contracts = match r.ctx.catalogs.contracts(&r.key, url, token).await {
            Ok(c) => c,
            Err(e) => {
                out.refused = Some(format!(
                    "the catalog's contracts could not be read again before buying: {e}"
                ));
                break;
            }
        };
        let world = r.ctx.stores.world(ma, intent);
        let mine = observe::my_contracts(ma, &world, &contracts);
        let committed = observe::committed(&mine, in_flight, intent.terms.duration, r.now);
        if let Err(why) = budget_allows(
            &intent.limits,
            &committed.spend,
            plan,
            intent.terms.duration,
            r.now,
        ) {
            r.ctx.metrics.count_purchase("over-budget");
            tracing::warn!(offer = %plan.offer_id, plan = %plan.plan_id, %why, "the budget re-check refused the purchase");
            out.refused = Some(format!(
                "offer {} plan {}: {why}",
                plan.offer_id, plan.plan_id
            ));
            break;
        }
        let mut st = r.status();
        let n = st.purchases_made.saturating_add(1);
        let name = act::purchase_name(&ma.name_any(), n);
        st.purchases_made = n;
        st.in_flight.push(InFlightStatus {
            purchase: name.clone(),
            offer_id: plan.offer_id.clone(),
            plan_id: plan.plan_id.clone(),
            since: status::rfc3339(r.now),
        });
        match r.write(st).await {
            Ok(()) => {}
            Err(WriteError::Conflict) => {
                r.ctx.metrics.count_purchase("conflict");
                tracing::info!("the MarketAutoscaler changed under the round; deciding again");
                out.restart = Some(Action::requeue(Duration::from_millis(100)));
                return Ok(out);
            }
            Err(e) => return Err(e.into()),
        }
        failpoint::reached(Step::AfterStatusWrite);
        let purchase = act::purchase(
            &r.current,
            &name,
            (&plan.offer_id, &plan.plan_id),
            intent.terms.duration,
        );
        act::create(&r.purchases, &purchase).await?;
        r.ctx.metrics.count_purchase("created");
        failpoint::reached(Step::AfterPurchaseCreate);
        out.count += 1;
        tracing::info!(purchase = %name, offer = %plan.offer_id, plan = %plan.plan_id, per_hour = %plan.cost_per_hour, pods = plan.pods.len(), "bought");
        r.ctx.events.publish(
            r.current.object_ref(&()),
            false,
            events::PURCHASE_CREATED,
            "ScaleUp",
            &format!(
                "Purchase {name}: offer {} plan {} from {} for {} per hour ({} per month), for {} pod(s)",
                plan.offer_id, plan.plan_id, plan.provider_name, plan.cost_per_hour, plan.cost_per_month, plan.pods.len()
            ),
        );
        for pod in &plan.pods {
            if let Some((ns, p)) = pod.split_once('/') {
                r.ctx.events.publish(
                    core_ref("Pod", Some(ns), p),
                    false,
                    events::TRIGGERED_SCALE_UP,
                    "ScaleUp",
                    &format!(
                        "pod triggered a purchase: offer {} plan {} from {} ({} per hour)",
                        plan.offer_id, plan.plan_id, plan.provider_name, plan.cost_per_hour
                    ),
                );
            }
        }
        in_flight.push(InFlight {
            purchase: name,
            offer_id: plan.offer_id.clone(),
            plan_id: plan.plan_id.clone(),
            provider: plan.provider_id.clone(),
            resources: plan.resources.clone(),
            cost: Some((Money::from(plan.cost), plan.per)),
            has_contract: false,
        });
    }
    Ok(out)
}
