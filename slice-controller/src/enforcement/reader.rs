//! The task that reads Liqo's enforcement settings: a `get` of each of the
//! two named Deployments (`liqo-webhook`, `liqo-controller-manager` in
//! `liqo`, by default) every `--liqo-settings-interval`, their containers'
//! command lines read by [`super::resource_enforcement`] and
//! [`super::limits_level`]. A `get` of two named objects is the least a
//! provider can be granted for it (a Role with `resourceNames`); the
//! Deployments are what Helm renders the values into, so they say what the
//! running webhook and controller-manager were started with.
//!
//! What is read is published (a `watch` the reconciles read, a
//! notification that re-decides every consumer when the level changes),
//! logged at start and on every change (INFO, WARN when grants are held
//! back), and shown by the `slice_controller_liqo_enforcement{level}`
//! gauge and a `/readyz` note. A refused or missing Deployment reads as
//! unknown, with why; any other failure (a timeout, a 5xx) keeps the last
//! reading, and reads as unknown only if nothing was ever read.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::Client;
use resource_reader::{Notification, NotificationStream, Notifier};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{hold, Hold, Observed, SoldAsEnforced, UnknownPolicy};
use crate::metrics::Metrics;

/// How long the first reading may take before the controller starts
/// without it (as unknown).
const FIRST_READ: Duration = Duration::from_secs(10);

/// Where Liqo runs and how often to look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderSettings {
    pub namespace: String,
    /// The ShadowPod webhook's Deployment.
    pub webhook: String,
    /// The controller-manager's Deployment (the quota creator).
    pub controller_manager: String,
    pub interval: Duration,
    pub sold: SoldAsEnforced,
    pub unknown: UnknownPolicy,
}

/// Liqo's settings as last read, shared with the controller; cheap to
/// clone.
#[derive(Clone)]
pub struct Enforcement {
    state: watch::Receiver<(Observed, Option<Hold>)>,
    notifier: Arc<Notifier>,
}

impl std::fmt::Debug for Enforcement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enforcement")
            .field("observed", &self.state.borrow().0)
            .finish_non_exhaustive()
    }
}

impl Enforcement {
    /// What holds new grants back now, if anything.
    pub fn hold(&self) -> Option<Hold> {
        self.state.borrow().1.clone()
    }

    /// The settings as last read.
    pub fn observed(&self) -> Observed {
        self.state.borrow().0.clone()
    }

    /// Every new reading (and hold) as it is published, for the tasks
    /// that report it elsewhere (the catalog).
    pub fn readings(&self) -> watch::Receiver<(Observed, Option<Hold>)> {
        self.state.clone()
    }

    /// `All` whenever what holds grants back changes.
    pub fn subscribe(&self) -> NotificationStream {
        self.notifier.subscribe()
    }

    /// Read the settings once now (so the first decisions see them), then
    /// every `settings.interval` until `shutdown`.
    pub async fn follow(
        client: Client,
        settings: ReaderSettings,
        metrics: Metrics,
        shutdown: CancellationToken,
    ) -> Self {
        let deployments: Api<Deployment> = Api::namespaced(client, &settings.namespace);
        // Bounded, and given up on shutdown: an API server that does not
        // answer must not keep the process from starting or stopping.
        let first = tokio::select! {
            () = shutdown.cancelled() => None,
            first = tokio::time::timeout(FIRST_READ, read(&deployments, &settings, None)) => first.ok(),
        };
        let first = first.unwrap_or_else(|| Observed {
            resource_enforcement: Err("Liqo's Deployments did not answer in time".to_string()),
            ..Observed::unread()
        });
        let first_hold = hold(&first, settings.sold, settings.unknown);
        report(&first, first_hold.as_ref(), &metrics, true);
        let (tx, state) = watch::channel((first, first_hold));
        let notifier = Arc::new(Notifier::new());
        let span = tracing::info_span!("liqo_enforcement", namespace = %settings.namespace);
        tokio::spawn(
            poll(
                deployments,
                settings,
                metrics,
                tx,
                notifier.clone(),
                shutdown,
            )
            .instrument(span),
        );
        Enforcement { state, notifier }
    }
}

async fn poll(
    deployments: Api<Deployment>,
    settings: ReaderSettings,
    metrics: Metrics,
    tx: watch::Sender<(Observed, Option<Hold>)>,
    notifier: Arc<Notifier>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(settings.interval) => {}
        }
        let last = tx.borrow().0.clone();
        let observed = read(&deployments, &settings, Some(&last)).await;
        if observed == last {
            continue;
        }
        let next_hold = hold(&observed, settings.sold, settings.unknown);
        report(&observed, next_hold.as_ref(), &metrics, false);
        let held_changed = tx.borrow().1 != next_hold;
        tx.send_replace((observed, next_hold));
        if held_changed {
            notifier.notify(Notification::All);
        }
    }
}

/// Log, gauge and `/readyz` note for a new reading.
fn report(observed: &Observed, held: Option<&Hold>, metrics: &Metrics, first: bool) {
    let level = observed.level();
    metrics.set_liqo_enforcement(level.label(), held.map(|h| h.message.as_str()));
    let what = if first {
        "Liqo's enforcement settings read"
    } else {
        "Liqo's enforcement settings changed"
    };
    match held {
        Some(hold) => tracing::warn!(
            level = level.label(),
            settings = %observed.describe(),
            reason = hold.reason.as_str(),
            "{what}: no new grants while they stand"
        ),
        None => tracing::info!(level = level.label(), settings = %observed.describe(), "{what}"),
    }
}

/// Read both settings; on a failure other than refused or missing, keep
/// the `last` value of that setting.
async fn read(
    deployments: &Api<Deployment>,
    settings: &ReaderSettings,
    last: Option<&Observed>,
) -> Observed {
    let webhook = command_line(deployments, &settings.namespace, &settings.webhook).await;
    let manager = command_line(
        deployments,
        &settings.namespace,
        &settings.controller_manager,
    )
    .await;
    Observed {
        resource_enforcement: settle(
            webhook.map(|args| super::resource_enforcement(&args)),
            last.map(|l| &l.resource_enforcement),
        ),
        limits: settle(
            manager.map(|args| super::limits_level(&args)),
            last.map(|l| &l.limits),
        ),
    }
}

/// A reading, or why there is none; a transient failure keeps `last`.
fn settle<T: Clone>(
    read: Result<Result<T, String>, Failure>,
    last: Option<&Result<T, String>>,
) -> Result<T, String> {
    match (read, last) {
        (Ok(value), _) => value,
        (Err(Failure::Transient(_)), Some(Ok(last))) => Ok(last.clone()),
        (Err(Failure::Transient(why) | Failure::Unreadable(why)), _) => Err(why),
    }
}

/// Why a Deployment's command line could not be read.
#[derive(Debug)]
enum Failure {
    /// Refused (403) or missing (404): the settings are unknown.
    Unreadable(String),
    /// Anything else: maybe it will answer next time.
    Transient(String),
}

/// Every word of `command` and `args` of every container of the
/// Deployment `namespace/name`.
async fn command_line(
    deployments: &Api<Deployment>,
    namespace: &str,
    name: &str,
) -> Result<Vec<String>, Failure> {
    match deployments.get(name).await {
        Ok(deployment) => Ok(deployment
            .spec
            .template
            .spec
            .map(|pod| {
                pod.containers
                    .into_iter()
                    .flat_map(|c| {
                        c.command
                            .unwrap_or_default()
                            .into_iter()
                            .chain(c.args.unwrap_or_default())
                    })
                    .collect()
            })
            .unwrap_or_default()),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(Failure::Unreadable(format!(
            "reading Deployment {namespace}/{name} is forbidden"
        ))),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(Failure::Unreadable(format!(
            "Deployment {namespace}/{name} not found"
        ))),
        Err(error) => {
            tracing::debug!(%error, deployment = %format!("{namespace}/{name}"), "cannot read Liqo's Deployment; keeping the last reading");
            Err(Failure::Transient(format!(
                "reading Deployment {namespace}/{name}: {error}"
            )))
        }
    }
}
