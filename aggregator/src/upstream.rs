//! One upstream ResourceReader as the aggregator sees it: the reconnecting
//! gRPC client from `resource-reader`, the answers it last gave (per
//! originator, for the `last-known` policy), and whether it is up.
//!
//! An upstream is *up* when it answered its last read in time and its
//! subscription is established. It goes *down* when a read fails or times
//! out, or when the subscription is lost; it comes back up on the next
//! answered read or when the subscription is re-established.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use quantity::ResourceList;
use resource_reader::client::{ClientError, UpstreamClient, UpstreamOptions};
use resource_reader::{ReadError, ResourceReader};
use tracing::Instrument;

use crate::config::UpstreamSpec;
use crate::metrics::{Failure, Metrics, Outcome, UpstreamLabels, UpstreamMetrics};
use crate::notify::{self, Changes};
use crate::policy::Policy;
use resource_reader::AbortOnDrop;

/// Originators remembered per upstream for `last-known`. Anyone who can
/// reach the gRPC port chooses the originator string, so this is bounded.
const MAX_REMEMBERED: usize = 1024;

/// The client's own per-call limit. The aggregator enforces the configured
/// (reloadable) timeout itself; this only backs it up.
const CLIENT_REQUEST_LIMIT: Duration = Duration::from_secs(60);

/// How one upstream contributes to one read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// It answered in time.
    Fresh(ResourceList),
    /// It did not (the reason); the policy let its last answer stand in.
    LastKnown(ResourceList, String),
    /// It did not (the reason) and is left out.
    Omitted(String),
    /// It rejected the request as invalid; not a sign the upstream is down.
    Rejected(String),
}

#[derive(Debug)]
enum Health {
    Up,
    Down { since: Instant, reason: String },
}

#[derive(Debug)]
struct State {
    health: Health,
    /// The subscription state seen by the last [`Upstream::observe_link`].
    link: bool,
    last_read: Option<Duration>,
    /// Fires a downstream notification when last-known answers expire.
    expiry: Option<AbortOnDrop>,
}

/// One configured upstream.
pub struct Upstream {
    spec: UpstreamSpec,
    labels: UpstreamLabels,
    client: UpstreamClient,
    state: Mutex<State>,
    remembered: Mutex<HashMap<String, ResourceList>>,
    metrics: UpstreamMetrics,
    changes: Changes,
    _forwarder: AbortOnDrop,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// What `/status` shows about one upstream.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UpstreamStatus {
    pub cluster_id: String,
    pub address: String,
    pub liqo_api: String,
    pub up: bool,
    /// Whether the notification subscription is established.
    pub subscribed: bool,
    /// Why it is down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_for_seconds: Option<f64>,
    /// Whether the policy still lets its last-known answers stand in.
    pub last_known_in_use: bool,
    /// Originators it has answered (kept for `last-known`).
    pub remembered_originators: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_read_ms: Option<f64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves plain data behind.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Upstream {
    /// Start the client (it connects in the background) and forward its
    /// notifications into `changes`.
    pub fn start(
        spec: UpstreamSpec,
        metrics: Metrics,
        changes: Changes,
    ) -> Result<Arc<Self>, ClientError> {
        let options = UpstreamOptions {
            api: spec.api,
            request_timeout: CLIENT_REQUEST_LIMIT,
            ..UpstreamOptions::default()
        };
        let client = UpstreamClient::connect(spec.address.as_str(), options)?;
        let forwarder = notify::forward(
            spec.cluster_id.to_string(),
            client.subscribe(),
            changes.clone(),
        );
        let labels = UpstreamLabels {
            cluster_id: spec.cluster_id.to_string(),
            address: spec.address.to_string(),
        };
        let metrics = metrics.upstream(&labels);
        metrics.set_up(false);
        Ok(Arc::new(Self {
            labels,
            client,
            state: Mutex::new(State {
                health: Health::Down {
                    since: Instant::now(),
                    reason: "not connected yet".into(),
                },
                link: false,
                last_read: None,
                expiry: None,
            }),
            remembered: Mutex::new(HashMap::new()),
            metrics,
            changes,
            _forwarder: forwarder,
            spec,
        }))
    }

    pub fn spec(&self) -> &UpstreamSpec {
        &self.spec
    }

    pub fn cluster_id(&self) -> &str {
        self.spec.cluster_id.as_str()
    }

    pub(crate) fn labels(&self) -> &UpstreamLabels {
        &self.labels
    }

    /// Wait until the subscription is established or `timeout` passes.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        self.client.wait_connected(timeout).await
    }

    /// Read the upstream for `originator` within `timeout`; if it cannot
    /// answer, apply `policy`.
    pub async fn read(&self, originator: &str, timeout: Duration, policy: &Policy) -> Answer {
        let started = Instant::now();
        let result = tokio::time::timeout(timeout, self.client.read(originator)).await;
        let took = started.elapsed();
        self.metrics.observe_read(took);
        let (failure, reason) = match result {
            Ok(Ok(list)) => {
                self.remember(originator, &list);
                self.mark_up(Some(took), "answered a read");
                self.metrics.count_answer(Outcome::fresh);
                return Answer::Fresh(list);
            }
            Ok(Err(ReadError::InvalidArgument(m))) => {
                self.metrics.count_failure(Failure::rejected);
                return Answer::Rejected(m);
            }
            Ok(Err(ReadError::Unavailable(m))) => (Failure::unavailable, m),
            Ok(Err(ReadError::Internal(m))) => (Failure::error, m),
            Err(_) => (Failure::timeout, format!("no answer within {timeout:?}")),
        };
        self.metrics.count_failure(failure);
        // A failed read does not notify downstream: a flapping upstream
        // would otherwise make every read trigger another round of reads.
        self.mark_down(&reason, policy, false);
        self.fallback(originator, policy, reason)
    }

    fn fallback(&self, originator: &str, policy: &Policy, reason: String) -> Answer {
        let down_for = match &lock(&self.state).health {
            Health::Down { since, .. } => since.elapsed(),
            Health::Up => Duration::ZERO,
        };
        if policy.allows_last_known(down_for) {
            if let Some(list) = lock(&self.remembered).get(originator) {
                tracing::debug!(cluster_id = %self.cluster_id(), %reason, ?down_for, "using the last-known answer");
                self.metrics.count_answer(Outcome::last_known);
                return Answer::LastKnown(list.clone(), reason);
            }
        }
        tracing::debug!(cluster_id = %self.cluster_id(), %reason, "left out of the sum");
        self.metrics.count_answer(Outcome::omitted);
        Answer::Omitted(reason)
    }

    fn remember(&self, originator: &str, list: &ResourceList) {
        let mut remembered = lock(&self.remembered);
        if remembered.len() >= MAX_REMEMBERED && !remembered.contains_key(originator) {
            // Make room; which one goes matters little, the bound matters.
            if let Some(victim) = remembered.keys().next().cloned() {
                remembered.remove(&victim);
            }
        }
        match remembered.get_mut(originator) {
            Some(old) if old == list => {}
            Some(old) => *old = list.clone(),
            None => {
                remembered.insert(originator.to_string(), list.clone());
            }
        }
    }

    fn mark_up(&self, read: Option<Duration>, how: &str) {
        let mut state = lock(&self.state);
        if read.is_some() {
            state.last_read = read;
        }
        if let Health::Down { since, .. } = &state.health {
            tracing::info!(cluster_id = %self.cluster_id(), address = %self.spec.address, down_for = ?since.elapsed(), "upstream up: {how}");
            state.health = Health::Up;
            state.expiry = None;
            self.metrics.set_up(true);
        }
    }

    /// Record that the upstream stopped answering. `notify`: tell
    /// downstream now (its answers may change at once).
    fn mark_down(&self, reason: &str, policy: &Policy, notify: bool) {
        let mut state = lock(&self.state);
        if let Health::Down { .. } = state.health {
            return;
        }
        let remembered = lock(&self.remembered).len();
        match policy.max_age() {
            None => tracing::warn!(
                cluster_id = %self.cluster_id(), address = %self.spec.address, %reason,
                "upstream down; policy omit: left out of every sum until it answers again"
            ),
            Some(max_age) => {
                tracing::warn!(
                    cluster_id = %self.cluster_id(), address = %self.spec.address, %reason, remembered,
                    "upstream down; policy last-known: its last answers stand in for up to {max_age:?}"
                );
                state.expiry = Some(self.expire_after(max_age));
            }
        }
        state.health = Health::Down {
            since: Instant::now(),
            reason: reason.to_string(),
        };
        self.metrics.set_up(false);
        if notify {
            self.changes
                .signal(format!("upstream {} down", self.cluster_id()));
        }
    }

    fn expire_after(&self, max_age: Duration) -> AbortOnDrop {
        let changes = self.changes.clone();
        let cluster_id = self.cluster_id().to_string();
        let span = tracing::info_span!("last_known_expiry", cluster_id = %cluster_id);
        AbortOnDrop(tokio::spawn(
            async move {
                tokio::time::sleep(max_age).await;
                tracing::warn!("upstream still down after {max_age:?}: its last-known answers expire, it is left out");
                changes.signal(format!("last-known answers of {cluster_id} expired"));
            }
            .instrument(span),
        ))
    }

    /// Compare the subscription state with the last one seen; called
    /// periodically, since the client reports no transitions itself.
    ///
    /// Losing the subscription always means down (reads fail fast without
    /// it). Regaining it means up, once; after that only a read decides,
    /// so a connected upstream that is too slow stays down.
    pub fn observe_link(&self, policy: &Policy) {
        let connected = self.client.is_connected();
        let (was, up) = {
            let mut state = lock(&self.state);
            let was = std::mem::replace(&mut state.link, connected);
            (was, matches!(state.health, Health::Up))
        };
        if connected && !was {
            self.mark_up(None, "subscribed");
        } else if !connected && up {
            self.mark_down("lost the subscription", policy, true);
        }
    }

    /// Forget what was held for `cluster`, here and upstream.
    pub async fn remove_cluster(&self, cluster: &str, timeout: Duration) -> Result<(), ReadError> {
        lock(&self.remembered).remove(cluster);
        match tokio::time::timeout(timeout, self.client.remove_cluster(cluster)).await {
            Ok(result) => result,
            Err(_) => Err(ReadError::Unavailable(format!(
                "upstream {} did not answer RemoveCluster within {timeout:?}",
                self.cluster_id()
            ))),
        }
    }

    /// Whether the upstream counts as up now (what `status().up` says).
    pub fn is_up(&self) -> bool {
        matches!(lock(&self.state).health, Health::Up)
    }

    pub fn status(&self, policy: &Policy) -> UpstreamStatus {
        let state = lock(&self.state);
        let (up, reason, down_for) = match &state.health {
            Health::Up => (true, None, None),
            Health::Down { since, reason } => (false, Some(reason.clone()), Some(since.elapsed())),
        };
        let remembered = lock(&self.remembered).len();
        UpstreamStatus {
            cluster_id: self.cluster_id().to_string(),
            address: self.spec.address.to_string(),
            liqo_api: self.spec.api.to_string(),
            up,
            subscribed: self.client.is_connected(),
            reason,
            down_for_seconds: down_for.map(|d| d.as_secs_f64()),
            last_known_in_use: down_for.is_some_and(|d| policy.allows_last_known(d))
                && remembered > 0,
            remembered_originators: remembered,
            last_read_ms: state.last_read.map(|d| d.as_secs_f64() * 1000.0),
        }
    }
}
