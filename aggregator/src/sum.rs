//! The summing ResourceReader: a read for originator X asks every upstream
//! but X itself, concurrently and each within the timeout, and answers the
//! per-resource sum of their answers for X, folded in configured order from
//! zero with Kubernetes quantity arithmetic (so a total prints in the format
//! of the first upstream that offers that resource, as Kubernetes would).
//!
//! Each upstream is read *with* originator X, so its own quota and filter
//! stages decide what X may see; the aggregate only sums. Upstreams can be
//! swapped at run time ([`Aggregate::apply`]); a read in flight finishes
//! with the set it started with.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use quantity::ResourceList;
use resource_reader::client::ClientError;
use resource_reader::{NotificationStream, Notifier, ReadError, ResourceReader};
use tracing::Instrument;

use crate::config::{Dynamic, UpstreamSpec};
use crate::metrics::Metrics;
use crate::notify::{self, Changes};
use crate::policy::Policy;
use crate::upstream::{Answer, Upstream, UpstreamStatus};
use resource_reader::AbortOnDrop;

/// How often the upstreams' subscription state is checked, to notice an
/// upstream that went away between reads.
const LINK_CHECK: Duration = Duration::from_millis(200);

/// The per-read settings a reload may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReadSettings {
    policy: Policy,
    timeout: Duration,
}

/// N upstream readers pooled into one.
pub struct Aggregate {
    shared: Arc<Shared>,
    _tasks: Vec<AbortOnDrop>,
}

struct Shared {
    upstreams: RwLock<Arc<[Arc<Upstream>]>>,
    settings: RwLock<ReadSettings>,
    notifier: Notifier,
    changes: Changes,
    metrics: Metrics,
}

impl std::fmt::Debug for Aggregate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregate").finish_non_exhaustive()
    }
}

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub kept: usize,
    pub settings_changed: bool,
}

impl Applied {
    pub fn changed_anything(&self) -> bool {
        !self.added.is_empty() || !self.removed.is_empty() || self.settings_changed
    }
}

/// What `/status` shows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AggregateStatus {
    pub policy: String,
    pub upstream_timeout_ms: f64,
    pub up: usize,
    pub down: usize,
    pub upstreams: Vec<UpstreamStatus>,
}

fn read_lock<T: Clone>(lock: &RwLock<T>) -> T {
    lock.read().unwrap_or_else(|e| e.into_inner()).clone()
}

impl Aggregate {
    /// Start the clients of `dynamic.upstreams` (they connect in the
    /// background) and the notification merger. Must be called inside a
    /// Tokio runtime.
    pub fn start(
        dynamic: &Dynamic,
        coalesce: Duration,
        metrics: Metrics,
    ) -> Result<Self, ClientError> {
        let notifier = Notifier::new();
        let (changes, coalescer) = notify::start(coalesce, notifier.clone(), metrics.clone());
        let upstreams = dynamic
            .upstreams
            .iter()
            .map(|spec| Upstream::start(spec.clone(), metrics.clone(), changes.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        metrics.set_upstreams(upstreams.len());
        let shared = Arc::new(Shared {
            upstreams: RwLock::new(upstreams.into()),
            settings: RwLock::new(ReadSettings {
                policy: dynamic.policy,
                timeout: dynamic.upstream_timeout,
            }),
            notifier,
            changes,
            metrics,
        });
        let monitor = AbortOnDrop(tokio::spawn(
            watch_links(Arc::downgrade(&shared)).instrument(tracing::info_span!("link_monitor")),
        ));
        Ok(Self {
            shared,
            _tasks: vec![coalescer, monitor],
        })
    }

    /// Wait until every upstream is subscribed, or `timeout` passes; returns
    /// the cluster IDs of those that are not.
    pub async fn wait_connected(&self, timeout: Duration) -> Vec<String> {
        let upstreams = read_lock(&self.shared.upstreams);
        let connected =
            futures::future::join_all(upstreams.iter().map(|u| u.wait_connected(timeout))).await;
        let policy = read_lock(&self.shared.settings).policy;
        for upstream in upstreams.iter() {
            upstream.observe_link(&policy);
        }
        upstreams
            .iter()
            .zip(connected)
            .filter(|(_, ok)| !ok)
            .map(|(u, _)| u.cluster_id().to_string())
            .collect()
    }

    /// Switch to a new set of upstreams and read settings. Upstreams whose
    /// cluster ID, address and shape are unchanged keep their connection
    /// and last-known answers; new ones start connecting; removed ones are
    /// dropped. Nothing changes if a new upstream cannot be started.
    pub fn apply(&self, dynamic: &Dynamic) -> Result<Applied, ClientError> {
        let shared = &self.shared;
        let old = read_lock(&shared.upstreams);
        let find = |spec: &UpstreamSpec| old.iter().find(|u| u.spec() == spec).cloned();
        let mut applied = Applied::default();
        let mut next = Vec::with_capacity(dynamic.upstreams.len());
        for spec in &dynamic.upstreams {
            match find(spec) {
                Some(kept) => {
                    applied.kept += 1;
                    next.push(kept);
                }
                None => {
                    next.push(Upstream::start(
                        spec.clone(),
                        shared.metrics.clone(),
                        shared.changes.clone(),
                    )?);
                    applied.added.push(spec.cluster_id.to_string());
                }
            }
        }
        let new_settings = ReadSettings {
            policy: dynamic.policy,
            timeout: dynamic.upstream_timeout,
        };
        applied.settings_changed = read_lock(&shared.settings) != new_settings;
        for gone in old
            .iter()
            .filter(|u| !next.iter().any(|n| Arc::ptr_eq(n, u)))
        {
            applied.removed.push(gone.cluster_id().to_string());
            let id_still_used = next.iter().any(|n| n.cluster_id() == gone.cluster_id());
            shared.metrics.forget_upstream(gone.labels(), id_still_used);
        }
        shared.metrics.set_upstreams(next.len());
        *shared.upstreams.write().unwrap_or_else(|e| e.into_inner()) = next.into();
        *shared.settings.write().unwrap_or_else(|e| e.into_inner()) = new_settings;
        if applied.changed_anything() {
            shared.changes.signal("configuration reloaded");
        }
        Ok(applied)
    }

    /// The state of every upstream, in configured order.
    pub fn status(&self) -> AggregateStatus {
        let settings = read_lock(&self.shared.settings);
        let upstreams: Vec<_> = read_lock(&self.shared.upstreams)
            .iter()
            .map(|u| u.status(&settings.policy))
            .collect();
        let up = upstreams.iter().filter(|u| u.up).count();
        AggregateStatus {
            policy: settings.policy.to_string(),
            upstream_timeout_ms: settings.timeout.as_secs_f64() * 1000.0,
            up,
            down: upstreams.len() - up,
            upstreams,
        }
    }

    /// Whether any upstream is up: cheaper than [`Aggregate::status`] for
    /// what gRPC health needs.
    pub fn any_up(&self) -> bool {
        read_lock(&self.shared.upstreams).iter().any(|u| u.is_up())
    }

    /// The cluster IDs of the upstreams, in configured order.
    pub fn upstream_ids(&self) -> Vec<String> {
        read_lock(&self.shared.upstreams)
            .iter()
            .map(|u| u.cluster_id().to_string())
            .collect()
    }
}

/// Check the upstreams' subscriptions until the aggregate is dropped.
async fn watch_links(shared: std::sync::Weak<Shared>) {
    let mut tick = tokio::time::interval(LINK_CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let policy = read_lock(&shared.settings).policy;
        for upstream in read_lock(&shared.upstreams).iter() {
            upstream.observe_link(&policy);
        }
    }
}

/// Fold the upstreams' answers, in configured order, from zero. Fails when
/// there were upstreams to ask and none contributed.
pub fn sum_answers<'a>(
    answers: impl IntoIterator<Item = (&'a str, Answer)>,
) -> Result<ResourceList, ReadError> {
    let mut sum = ResourceList::new();
    let mut asked = 0;
    let mut contributed = 0;
    let mut rejected = 0;
    let mut reasons = Vec::new();
    for (cluster_id, answer) in answers {
        asked += 1;
        match answer {
            Answer::Fresh(list) | Answer::LastKnown(list, _) => {
                sum = sum.add(&list);
                contributed += 1;
            }
            Answer::Omitted(reason) => reasons.push(format!("{cluster_id}: {reason}")),
            Answer::Rejected(reason) => {
                rejected += 1;
                reasons.push(format!("{cluster_id}: {reason}"));
            }
        }
    }
    if asked == 0 || contributed > 0 {
        return Ok(sum);
    }
    let message = format!("no upstream could answer ({})", reasons.join("; "));
    if rejected == asked {
        Err(ReadError::InvalidArgument(message))
    } else {
        Err(ReadError::Unavailable(message))
    }
}

#[async_trait::async_trait]
impl ResourceReader for Aggregate {
    async fn read(&self, originator: &str) -> Result<ResourceList, ReadError> {
        let started = Instant::now();
        let upstreams = read_lock(&self.shared.upstreams);
        let settings = read_lock(&self.shared.settings);
        // A cluster is never offered its own resources.
        let asked: Vec<&Arc<Upstream>> = upstreams
            .iter()
            .filter(|u| u.cluster_id() != originator)
            .collect();
        let answers = futures::future::join_all(
            asked
                .iter()
                .map(|u| u.read(originator, settings.timeout, &settings.policy)),
        )
        .await;
        let result = sum_answers(asked.iter().map(|u| u.cluster_id()).zip(answers));
        let took = started.elapsed();
        self.shared.metrics.observe_read(took, result.is_ok());
        match &result {
            Ok(sum) => {
                tracing::debug!(%originator, asked = asked.len(), ?took, resources = ?sum.to_strings(), "read")
            }
            Err(error) => tracing::warn!(%originator, asked = asked.len(), %error, "read failed"),
        }
        result
    }

    fn subscribe(&self) -> NotificationStream {
        self.shared.notifier.subscribe()
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        let upstreams = read_lock(&self.shared.upstreams);
        let timeout = read_lock(&self.shared.settings).timeout;
        let results =
            futures::future::join_all(upstreams.iter().map(|u| u.remove_cluster(cluster, timeout)))
                .await;
        let failures: Vec<String> = upstreams
            .iter()
            .zip(results)
            .filter_map(|(u, r)| r.err().map(|e| format!("{}: {e}", u.cluster_id())))
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ReadError::Unavailable(format!(
                "cluster {cluster} was not removed from every upstream: {}",
                failures.join("; ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&str, &str)]) -> ResourceList {
        ResourceList::from_strings(entries.iter().copied()).unwrap()
    }

    fn printed(sum: &ResourceList) -> Vec<(String, String)> {
        sum.to_strings().into_iter().collect()
    }

    #[test]
    fn sums_mixed_units_in_configured_order() {
        let sum = sum_answers([
            (
                "a",
                Answer::Fresh(list(&[
                    ("cpu", "1500m"),
                    ("memory", "1Gi"),
                    ("storage", "2G"),
                ])),
            ),
            (
                "b",
                Answer::Fresh(list(&[
                    ("cpu", "2"),
                    ("memory", "512Mi"),
                    ("storage", "1Gi"),
                ])),
            ),
        ])
        .unwrap();
        assert_eq!(
            printed(&sum),
            [
                ("cpu".to_string(), "3500m".to_string()),
                ("memory".into(), "1536Mi".into()),
                ("storage".into(), "3073741824".into()),
            ]
        );
        // The other order prints in the other upstream's format.
        let sum = sum_answers([
            ("b", Answer::Fresh(list(&[("storage", "1Gi")]))),
            ("a", Answer::Fresh(list(&[("storage", "2G")]))),
        ])
        .unwrap();
        assert_eq!(
            printed(&sum),
            [("storage".to_string(), "3001701Ki".to_string())]
        );
    }

    #[test]
    fn a_resource_offered_by_one_upstream_only_is_kept() {
        let sum = sum_answers([
            ("a", Answer::Fresh(list(&[("cpu", "1")]))),
            ("b", Answer::Fresh(list(&[("nvidia.com/gpu", "2")]))),
        ])
        .unwrap();
        assert_eq!(
            printed(&sum),
            [
                ("cpu".to_string(), "1".to_string()),
                ("nvidia.com/gpu".into(), "2".into())
            ]
        );
    }

    #[test]
    fn omitted_upstreams_do_not_count_but_last_known_ones_do() {
        let sum = sum_answers([
            ("a", Answer::Omitted("down".into())),
            ("b", Answer::LastKnown(list(&[("cpu", "2")]), "down".into())),
            ("c", Answer::Fresh(list(&[("cpu", "500m")]))),
        ])
        .unwrap();
        assert_eq!(printed(&sum), [("cpu".to_string(), "2500m".to_string())]);
    }

    #[test]
    fn nobody_answering_is_unavailable_not_empty() {
        let err = sum_answers([
            ("a", Answer::Omitted("timed out".into())),
            ("b", Answer::Rejected("bad".into())),
        ])
        .unwrap_err();
        assert!(
            matches!(&err, ReadError::Unavailable(m) if m.contains("a: timed out") && m.contains("b: bad")),
            "{err:?}"
        );
        let err = sum_answers([("a", Answer::Rejected("bad id".into()))]).unwrap_err();
        assert!(matches!(err, ReadError::InvalidArgument(_)));
    }

    #[test]
    fn no_upstream_to_ask_is_an_empty_offer() {
        assert_eq!(
            sum_answers(std::iter::empty()).unwrap(),
            ResourceList::new()
        );
    }
}
