//! The Kubernetes source: Liqo's local resource monitor.
//!
//! Watches Nodes and Pods (list, then watch, through `kube`'s watcher: the
//! API server pushes every change, nothing is polled) and offers the
//! allocatable of Ready, non-virtual nodes minus the requests of Running,
//! non-shadow pods; a peer asking gets the requests of the pods it offloaded
//! here added back, so it is never offered less because of its own
//! workload. Never negative. Subscribers are notified whenever the answer
//! changes (pod status heartbeats that change nothing are not notified).
//!
//! As Liqo does, the API server filters: Nodes are watched with
//! `liqo.io/type!=virtual-node`, Pods with `liqo.io/shadowPod!=true` and
//! `status.phase=Running`. In a big cluster finished pods (Jobs, CronJobs)
//! can far outnumber running ones; they would otherwise be listed, streamed
//! and held in memory only to be ignored. Under a selector, an object that stops matching (a pod
//! finishing, a node labelled virtual) arrives as a DELETED event and one
//! that starts matching as ADDED, which the accounting already treats as
//! leaving and joining. Readiness cannot be selected server-side, so the
//! client-side checks of [`objects`] still apply to everything received.

mod accounting;
pub mod objects;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher;
use kube::Api;
use quantity::ResourceList;
use tracing::Instrument;

pub use accounting::{Accounting, Changed};

use resource_reader::AbortOnDrop;
use resource_reader::{Notification, NotificationStream, Notifier, ReadError, ResourceReader};

/// How to reach the API server, and Liqo's labels.
#[derive(Debug, Clone)]
pub struct KubernetesOptions {
    /// A kubeconfig file; `None` infers the configuration like `kubectl`
    /// (`$KUBECONFIG`, `~/.kube/config`, then the in-cluster service account).
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig other than its current one.
    pub context: Option<String>,
    /// Pod labels naming the peer that offloaded a pod here.
    pub origin_labels: Vec<String>,
}

impl Default for KubernetesOptions {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            context: None,
            origin_labels: controller_core::liqo::POD_ORIGIN_LABELS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

/// Why the source cannot reach the API server: the controllers' reasons,
/// in their words.
pub use controller_core::kubeconfig::ClientError as KubernetesError;

/// The local monitor of a Kubernetes cluster.
pub struct KubernetesSource {
    state: Arc<RwLock<Accounting>>,
    notifier: Notifier,
    _watchers: [AbortOnDrop; 2],
}

impl std::fmt::Debug for KubernetesSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesSource").finish_non_exhaustive()
    }
}

impl KubernetesSource {
    /// Build a client from `options` (failing on a bad kubeconfig) and start
    /// watching. Reads answer `UNAVAILABLE` until nodes and pods are listed;
    /// subscribers get a notification then.
    pub async fn connect(options: KubernetesOptions) -> Result<Self, KubernetesError> {
        let config = controller_core::kubeconfig::config(
            options.kubeconfig.as_deref(),
            options.context.as_deref(),
        )
        .await?;
        tracing::info!(cluster_url = %config.cluster_url, "watching Kubernetes");
        let client = kube::Client::try_from(config)?;
        Ok(Self::with_client(client, options.origin_labels))
    }

    /// Start watching with an existing client.
    pub fn with_client(client: kube::Client, origin_labels: Vec<String>) -> Self {
        let state = Arc::new(RwLock::new(Accounting::new(origin_labels)));
        let notifier = Notifier::new();
        let nodes = tokio::spawn(
            watch_kind::<Node>(
                Api::all(client.clone()),
                watcher::Config::default().labels(&objects::node_label_selector()),
                state.clone(),
                notifier.clone(),
                |a, e| a.on_node_event(e),
            )
            .instrument(tracing::info_span!("watch", kind = "Node")),
        );
        let pods = tokio::spawn(
            watch_kind::<Pod>(
                Api::all(client),
                watcher::Config::default()
                    .labels(&objects::pod_label_selector())
                    .fields(objects::POD_FIELD_SELECTOR),
                state.clone(),
                notifier.clone(),
                |a, e| a.on_pod_event(e),
            )
            .instrument(tracing::info_span!("watch", kind = "Pod")),
        );
        Self {
            state,
            notifier,
            _watchers: [AbortOnDrop(nodes), AbortOnDrop(pods)],
        }
    }
}

/// Feed one kind's watch events into the accounting; `watcher` follows
/// list pages, re-watches when a stream ends, and re-lists from scratch
/// when the API server answers 410 Gone (history compacted), with the
/// controllers' backoff after errors, a run of failures logged once
/// (`controller_core::retry::logged_watch`).
async fn watch_kind<K>(
    api: Api<K>,
    config: watcher::Config,
    state: Arc<RwLock<Accounting>>,
    notifier: Notifier,
    apply: fn(&mut Accounting, watcher::Event<K>) -> Changed,
) where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let what = format!("watch {}s", K::kind(&()));
    let mut events = controller_core::retry::logged_watch(watcher(api, config), what).boxed();
    while let Some(event) = events.next().await {
        // A failure is logged by `logged_watch`, once per run of failures.
        let Ok(event) = event else { continue };
        let done = matches!(event, watcher::Event::InitDone);
        let changed = {
            let mut state = state.write().unwrap_or_else(|e| e.into_inner());
            apply(&mut state, event)
        };
        if done {
            tracing::info!("listed");
        }
        if changed == Changed::Yes {
            tracing::debug!("available resources changed");
            notifier.notify(Notification::All);
        }
    }
}

// The controllers' words for a failure, which the tests check here too.
#[cfg(test)]
use controller_core::retry::causes;

#[async_trait::async_trait]
impl ResourceReader for KubernetesSource {
    async fn read(&self, originator: &str) -> Result<ResourceList, ReadError> {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .answer(originator)
            .ok_or_else(|| {
                ReadError::Unavailable(
                    "the kubernetes source has not listed nodes and pods yet".to_string(),
                )
            })
    }

    fn subscribe(&self) -> NotificationStream {
        self.notifier.subscribe()
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        // What a peer offloaded here is derived from the pods that are
        // running now, not remembered: pods still running are still its.
        tracing::debug!(cluster, "kubernetes source: nothing held for this cluster");
        Ok(())
    }
}

#[cfg(test)]
mod tests;
