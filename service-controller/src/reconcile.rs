//! The kube-rs controller over ServiceCatalogs, in the shape of
//! `controller-rs`: a [`Controller`], a [`Context`], a short [`reconcile`]
//! over kube's [`finalizer`] helper and an [`error_policy`].
//!
//! A round checks every template of every plan ([`crate::template::validate`]):
//! a ServiceCatalog that fails is marked `Valid=False` with the message
//! naming the service, plan and template, and nothing is published or
//! applied for it. A valid one has each service published as an offer of
//! kind `service` (and offers it no longer lists withdrawn), `Valid` and
//! `Published` conditions, and the offer ids in its status. Deleting it
//! withdraws its offers first (the finalizer).
//!
//! An offer id belongs to one ServiceCatalog ([`offer::holders`]): another
//! declaring it is `Published=False` naming the holder, publishes nothing
//! under that id, and withdraws no offer another ServiceCatalog declares.
//! A change of who holds what wakes every ServiceCatalog, so the next in
//! line takes over an id its holder dropped.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use catalog_client::Session;
use controller_core::clock::now_rfc3339;
use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::Client;
use serde_json::json;
use tokio::sync::{Mutex, Notify};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::metrics::Metrics;
use crate::model::{Condition, ServiceCatalog, ServiceCatalogStatus, FINALIZER};
use crate::offer;

/// Why a round failed (retried after `retry`).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("catalog: {0}")]
    Catalog(#[from] catalog_client::Error),
    #[error(transparent)]
    Finalizer(Box<finalizer::Error<ReconcileError>>),
}

/// What every round shares.
pub struct Context {
    pub client: Client,
    pub session: Arc<Mutex<Session>>,
    pub metrics: Metrics,
    pub retry: Duration,
    /// Renders the templates off the runtime, each verdict kept.
    pub renderer: crate::render::Renderer,
    /// The controller's cache of every ServiceCatalog (set by [`run`]):
    /// who holds an offer id is decided over all of them.
    pub catalogs: OnceLock<Store<ServiceCatalog>>,
    /// Reconciles every ServiceCatalog again: who holds an offer id
    /// changed.
    pub wake_all: Arc<Notify>,
    /// Told at each reconcile: the contracts' pass runs again, so a
    /// ServiceCatalog made or changed serves its contracts at once, not at
    /// the next resync.
    pub catalogs_changed: Arc<Notify>,
}

impl Context {
    pub fn new(
        client: Client,
        session: Arc<Mutex<Session>>,
        metrics: Metrics,
        retry: Duration,
    ) -> Self {
        Self {
            client,
            session,
            metrics,
            retry,
            renderer: crate::render::Renderer::new(Default::default()),
            catalogs: OnceLock::new(),
            wake_all: Arc::new(Notify::new()),
            catalogs_changed: Arc::new(Notify::new()),
        }
    }

    /// Every ServiceCatalog, once the cache holds the first full list (a
    /// partial one could make a later ServiceCatalog look first).
    async fn all_catalogs(&self) -> Option<Vec<Arc<ServiceCatalog>>> {
        let store = self.catalogs.get()?;
        store.wait_until_ready().await.ok()?;
        Some(store.state())
    }
}

/// The controller, until `stop`; it hands its cache of ServiceCatalogs to
/// `with_store` (the contracts pass reads the services from it).
pub async fn run(
    ctx: Arc<Context>,
    stop: CancellationToken,
    with_store: impl FnOnce(Store<ServiceCatalog>),
) {
    let api: Api<ServiceCatalog> = Api::all(ctx.client.clone());
    let span = tracing::info_span!("service_catalogs");
    async move {
        let probe = api.clone();
        let metrics = ctx.metrics.clone();
        let readiness = tokio::spawn(
            async move {
                loop {
                    match probe.list(&ListParams::default().limit(1)).await {
                        Ok(_) => break metrics.reconcile().set_reached_api(),
                        Err(error) => {
                            tracing::debug!(%error, "the API server has not answered yet")
                        }
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            .in_current_span(),
        );
        let controller = Controller::new(api, watcher::Config::default());
        with_store(controller.store());
        let _ = ctx.catalogs.set(controller.store());
        // A permit is kept while no one waits, so a wake during a round
        // is not lost.
        let woken = futures::stream::unfold(ctx.wake_all.clone(), |wake| async move {
            wake.notified().await;
            Some(((), wake))
        });
        controller
            .reconcile_all_on(woken)
            .graceful_shutdown_on(stop.cancelled_owned())
            .run(reconcile, error_policy, ctx)
            .for_each(|result| async move {
                match result {
                    Ok((catalog, _)) => tracing::debug!(%catalog, "reconciled"),
                    Err(error) => tracing::debug!(%error, "reconcile round failed"),
                }
            })
            .await;
        readiness.abort();
    }
    .instrument(span)
    .await
}

/// A failed round: counted, retried after `retry`.
pub fn error_policy(
    catalog: Arc<ServiceCatalog>,
    error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
    let kind = match error {
        ReconcileError::Catalog(_) => "catalog",
        _ => "kubernetes",
    };
    ctx.metrics.reconcile().count_failure(kind);
    tracing::warn!(catalog = %catalog.key(), %error, "reconcile failed; retrying");
    Action::requeue(ctx.retry)
}

/// One round over kube's finalizer helper.
pub async fn reconcile(
    catalog: Arc<ServiceCatalog>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let span = tracing::info_span!("reconcile", catalog = %catalog.key());
    // A permit is kept while the pass runs: it runs again after.
    ctx.catalogs_changed.notify_one();
    async move {
        let started = std::time::Instant::now();
        let namespace = catalog.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ServiceCatalog> = Api::namespaced(ctx.client.clone(), &namespace);
        let result = finalizer(&api, FINALIZER, catalog, |event| async {
            match event {
                finalizer::Event::Apply(c) => apply(&api, &c, &ctx).await,
                finalizer::Event::Cleanup(c) => cleanup(&c, &ctx).await,
            }
        })
        .await
        .map_err(|e| ReconcileError::Finalizer(Box::new(e)));
        ctx.metrics.observe_reconcile(started.elapsed());
        result
    }
    .instrument(span)
    .await
}

/// `conditions` with `condition` set (its transition time kept when its
/// status did not change).
pub fn set_condition(conditions: &[Condition], mut condition: Condition) -> Vec<Condition> {
    let mut out: Vec<Condition> = conditions
        .iter()
        .filter(|c| c.type_ != condition.type_)
        .cloned()
        .collect();
    if let Some(old) = conditions.iter().find(|c| c.type_ == condition.type_) {
        if old.status == condition.status {
            condition.last_transition_time = old.last_transition_time.clone();
        }
    }
    out.push(condition);
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

fn condition(type_: &str, ok: bool, reason: &str, message: String, generation: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: now_rfc3339(),
        observed_generation: generation,
    }
}

async fn apply(
    api: &Api<ServiceCatalog>,
    catalog: &ServiceCatalog,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let before = catalog.status();
    let mut status = before.clone();
    let generation = catalog.metadata.generation.unwrap_or_default();
    status.observed_generation = generation;
    match ctx.renderer.validate(&catalog.spec).await {
        Err(error) => {
            ctx.metrics.reconcile().count_failure("template");
            tracing::warn!(%error, "template refused; nothing published");
            status.conditions = set_condition(
                &status.conditions,
                condition(
                    "Valid",
                    false,
                    "TemplateRefused",
                    error.to_string(),
                    generation,
                ),
            );
            status.conditions = set_condition(
                &status.conditions,
                condition(
                    "Published",
                    false,
                    "Invalid",
                    "not published: a template is refused".into(),
                    generation,
                ),
            );
        }
        Ok(()) => {
            let Some(all) = ctx.all_catalogs().await else {
                // Stopping: the cache is gone.
                return Ok(Action::await_change());
            };
            let holders = offer::holders(all.iter().map(|c| c.as_ref()));
            let key = catalog.key();
            let (ids, taken): (Vec<String>, Vec<String>) = catalog
                .spec
                .services
                .iter()
                .map(|s| s.id.clone())
                .partition(|id| holders.get(id) == Some(&key));
            let declared_elsewhere = declared_by_others(&all, catalog);
            status.conditions = set_condition(
                &status.conditions,
                condition(
                    "Valid",
                    true,
                    "TemplatesRender",
                    "every template of every plan renders inside the instance namespace".into(),
                    generation,
                ),
            );
            let published = publish(catalog, &ids, &before.offers, &declared_elsewhere, ctx).await;
            let (ok, reason, message) = match &published {
                Ok(()) if taken.is_empty() => (
                    true,
                    "Published",
                    format!("published as offers {}", ids.join(", ")),
                ),
                Ok(()) => (false, "OfferIdTaken", taken_message(&taken, &holders, &ids)),
                Err(error) => (false, "CatalogRefused", error.to_string()),
            };
            status.conditions = set_condition(
                &status.conditions,
                condition("Published", ok, reason, message, generation),
            );
            if published.is_ok() {
                status.offers = ids;
            }
            write_status(api, catalog, &before, &status).await?;
            if status.offers != before.offers {
                ctx.wake_all.notify_one();
            }
            published?;
            return Ok(Action::await_change());
        }
    }
    write_status(api, catalog, &before, &status).await?;
    Ok(Action::await_change())
}

async fn write_status(
    api: &Api<ServiceCatalog>,
    catalog: &ServiceCatalog,
    before: &ServiceCatalogStatus,
    status: &ServiceCatalogStatus,
) -> Result<(), ReconcileError> {
    if status != before {
        let name = catalog.metadata.name.clone().unwrap_or_default();
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
    }
    Ok(())
}

/// The offer ids the other ServiceCatalogs not being deleted declare:
/// never withdrawn by this one (their holder publishes them).
fn declared_by_others(all: &[Arc<ServiceCatalog>], catalog: &ServiceCatalog) -> Vec<String> {
    let key = catalog.key();
    all.iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none() && c.key() != key)
        .flat_map(|c| c.spec.services.iter().map(|s| s.id.clone()))
        .collect()
}

/// `Published=False`'s message: which ids another ServiceCatalog holds.
fn taken_message(
    taken: &[String],
    holders: &std::collections::BTreeMap<String, String>,
    published: &[String],
) -> String {
    let named: Vec<String> = taken
        .iter()
        .map(|id| {
            let holder = holders.get(id).map(String::as_str).unwrap_or_default();
            format!("offer id {id} is held by ServiceCatalog {holder} (created first)")
        })
        .collect();
    let mut message = format!(
        "not published: {}; an offer id belongs to one ServiceCatalog",
        named.join("; ")
    );
    if !published.is_empty() {
        message.push_str(&format!("; published as offers {}", published.join(", ")));
    }
    message
}

/// Put the offer of every service this ServiceCatalog holds (`held`);
/// withdraw the ones `previous` lists that it no longer holds, unless
/// another ServiceCatalog declares them.
async fn publish(
    catalog: &ServiceCatalog,
    held: &[String],
    previous: &[String],
    declared_elsewhere: &[String],
    ctx: &Context,
) -> Result<(), ReconcileError> {
    let mut session = ctx.session.lock().await;
    for service in catalog
        .spec
        .services
        .iter()
        .filter(|s| held.contains(&s.id))
    {
        session
            .put_offer(&service.id, &offer::offer(service))
            .await?;
        tracing::info!(offer = %service.id, "service offer published");
    }
    for gone in previous
        .iter()
        .filter(|id| !held.contains(id) && !declared_elsewhere.contains(id))
    {
        session.delete_offer(gone).await?;
        tracing::info!(offer = %gone, "service offer withdrawn");
    }
    Ok(())
}

/// Deletion: withdraw the offers, except those another ServiceCatalog
/// declares (it takes them over: every ServiceCatalog is woken); the
/// helper then removes the finalizer.
async fn cleanup(catalog: &ServiceCatalog, ctx: &Context) -> Result<Action, ReconcileError> {
    let Some(all) = ctx.all_catalogs().await else {
        return Ok(Action::await_change());
    };
    let elsewhere = declared_by_others(&all, catalog);
    let mut session = ctx.session.lock().await;
    let status = catalog.status();
    for id in status.offers.iter() {
        if elsewhere.contains(id) {
            tracing::info!(offer = %id, "service offer left to the next ServiceCatalog declaring it");
            continue;
        }
        session.delete_offer(id).await?;
        tracing::info!(offer = %id, "service offer withdrawn");
    }
    drop(session);
    if catalog
        .spec
        .services
        .iter()
        .any(|s| elsewhere.contains(&s.id))
    {
        ctx.wake_all.notify_one();
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let first = set_condition(&[], condition("Valid", true, "A", "a".into(), 1));
        let mut again = condition("Valid", true, "A", "b".into(), 2);
        again.last_transition_time = "later".into();
        let kept = set_condition(&first, again);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].last_transition_time, first[0].last_transition_time);
        assert_eq!(kept[0].message, "b");
        let mut flipped = condition("Valid", false, "B", "c".into(), 3);
        flipped.last_transition_time = "later".into();
        assert_eq!(
            set_condition(&kept, flipped)[0].last_transition_time,
            "later"
        );
    }
}
