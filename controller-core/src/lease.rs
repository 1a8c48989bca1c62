//! Leader election on a `coordination.k8s.io/v1` Lease, so two or more
//! replicas can run and exactly one writes.
//!
//! kube-rs has no elector of its own. `kube-lease-manager` (the maintained
//! crate for kube 5) writes Leases with server-side apply, which needs an
//! API server that implements apply patches and field managers; this module
//! needs only get, create and replace with a `resourceVersion`
//! precondition — the algorithm of client-go's `leaderelection` package:
//!
//! - a candidate reads the Lease every `retry`, right when the Lease it
//!   saw expires, and whenever a watch on the Lease reports a change; it
//!   takes the Lease when it is free (no holder) or
//!   expired, by replacing it at the version it read (two candidates
//!   racing: one gets `409 Conflict` and stays candidate);
//! - "expired" is judged by this replica's own clock: the Lease's holder
//!   and `renewTime` must not have changed for `leaseDurationSeconds` since
//!   this replica first saw them. Clocks of different machines are never
//!   compared, so clock skew cannot make two leaders;
//! - the leader renews every `retry`; if it cannot renew for
//!   `renew_deadline` it stops leading (its controller is stopped) before
//!   anyone else may take the Lease (`renew_deadline < duration`);
//! - on shutdown the leader releases the Lease (clears the holder), so a
//!   standby takes over within one `retry` instead of a whole `duration`.
//!
//! A leader that dies without releasing is replaced `duration` after a
//! standby first saw its last renewal. The watch is why that is the
//! renewal itself and not up to one `retry` later: a standby that only
//! polled would start its clock late by as much as its polling interval,
//! and fail over up to `duration + retry` after the leader's last sign of
//! life. If the watch breaks, polling every `retry` still bounds it.

use std::future::Future;
use std::time::{Duration, Instant};

use std::sync::Arc;

use edge::backoff::Backoff;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::Client;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::retry::{self, Failures};

/// What the election reports as it goes, for whoever serves readiness and
/// leadership (a binary's metrics): each controller passes its own
/// (the metrics module's `ReconcileMetrics` implements it).
pub trait ElectionObserver: Send + Sync + 'static {
    /// The Kubernetes API answered: the Lease could be read (a standby is
    /// ready from then on).
    fn reached_api(&self);
    /// This replica started (`true`) or stopped (`false`) leading.
    fn leading(&self, leading: bool);
}

/// How the Lease is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    /// This replica's name in `holderIdentity`; unique per replica.
    pub identity: String,
    /// `leaseDurationSeconds`: how long a Lease not renewed stays held.
    pub duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often candidates try and the leader renews.
    pub retry: Duration,
}

/// The Lease's timings as a binary's flags give them (`--lease-duration`,
/// `--lease-renew-deadline`, `--lease-retry`; each binary keeps its own
/// environment variables for them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimes {
    pub duration: Duration,
    pub renew_deadline: Duration,
    pub retry: Duration,
}

/// Lease timings under which two replicas could lead at once, or the
/// leader could lose the Lease between two renewals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("--lease-renew-deadline ({:?}) must be shorter than --lease-duration ({:?}), and --lease-retry ({:?}) shorter than the deadline", .0.renew_deadline, .0.duration, .0.retry)]
pub struct LeaseTimesError(pub LeaseTimes);

impl LeaseTimes {
    /// Check that the leader stops leading before anyone else may take the
    /// Lease (`renew_deadline < duration`) and tries to renew at least once
    /// before it does (`retry < renew_deadline`).
    pub fn validate(self) -> Result<Self, LeaseTimesError> {
        if self.renew_deadline >= self.duration || self.retry >= self.renew_deadline {
            return Err(LeaseTimesError(self));
        }
        Ok(self)
    }
}

impl LeaseSettings {
    /// The Lease `name` held as `identity` with `times`, in `namespace` if
    /// given, else in `$POD_NAMESPACE` (the downward API: the replica's own
    /// namespace), else in the client's default namespace.
    pub fn from_parts(
        client: &Client,
        name: String,
        namespace: Option<String>,
        identity: String,
        times: LeaseTimes,
    ) -> Self {
        let namespace = namespace
            .or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|n| !n.is_empty())
            })
            .unwrap_or_else(|| client.default_namespace().to_string());
        Self {
            name,
            namespace,
            identity,
            duration: times.duration,
            renew_deadline: times.renew_deadline,
            retry: times.retry,
        }
    }
}

/// This replica's name among its peers — in the Lease's `holderIdentity`
/// and Events' `reportingInstance` — when no flag gives one:
/// `$HOSTNAME-<pid>` (in a pod, the pod's name), `<program>-<pid>` without
/// a host name.
pub fn replica_identity(program: &str) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| program.to_string());
    format!("{host}-{}", std::process::id())
}

/// The last Lease record this replica saw, and when it first saw it.
#[derive(Debug)]
struct Observed {
    holder: Option<String>,
    renew: Option<MicroTime>,
    duration: Duration,
    since: Instant,
}

/// One replica's view of the Lease.
pub struct Elector {
    api: Api<Lease>,
    settings: LeaseSettings,
    observed: Option<Observed>,
}

impl Elector {
    pub fn new(client: Client, settings: LeaseSettings) -> Self {
        Self {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: None,
        }
    }

    pub fn settings(&self) -> &LeaseSettings {
        &self.settings
    }

    /// Watch this Lease and wake `changed` on every change, until
    /// `shutdown`. A failed watch is reopened after edge's backoff (never at
    /// once: that spun at 40,000 attempts a second with the API server
    /// down) and logged at debug only, since candidates poll meanwhile and
    /// log their own failures.
    fn watch_changes(&self, changed: Arc<Notify>, shutdown: CancellationToken) {
        let config =
            watcher::Config::default().fields(&format!("metadata.name={}", self.settings.name));
        let events = retry::backed_off_watch(watcher(self.api.clone(), config), None);
        let span = tracing::debug_span!("lease_watch");
        tokio::spawn(
            async move {
                let mut events = std::pin::pin!(events);
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        event = events.next() => match event {
                            Some(Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)
                                | watcher::Event::InitDone)) => changed.notify_one(),
                            Some(Ok(_)) => {}
                            Some(Err(error)) => {
                                tracing::debug!(%error, "Lease watch interrupted; polling meanwhile");
                            }
                            None => return,
                        },
                    }
                }
            }
            .instrument(span),
        );
    }

    /// How long a candidate waits before trying again: `retry`, or less
    /// when the Lease it saw expires sooner (so a dead leader is replaced
    /// right at expiry, not up to one `retry` later).
    pub fn next_try(&self) -> Duration {
        let retry = self.settings.retry;
        match &self.observed {
            Some(seen) if seen.holder.is_some() => {
                let left = seen.duration.saturating_sub(seen.since.elapsed());
                retry.min(left + Duration::from_millis(5))
            }
            _ => retry,
        }
    }

    fn spec_for_me(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(jiff::Timestamp::now());
        let mine = previous.and_then(|p| p.holder_identity.as_deref())
            == Some(self.settings.identity.as_str());
        let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.settings.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.settings.duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: if mine {
                previous.and_then(|p| p.acquire_time.clone())
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if mine || previous.is_none() {
                transitions
            } else {
                transitions + 1
            }),
            ..previous.cloned().unwrap_or_default()
        }
    }

    /// Take or renew the Lease. `Ok(true)`: this replica holds it now.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let current = match self.api.get_opt(&self.settings.name).await? {
            Some(lease) => lease,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.settings.name.clone()),
                        namespace: Some(self.settings.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.spec_for_me(None)),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                    Err(error) => Err(error),
                };
            }
        };
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.settings.duration, Duration::from_secs);
        let changed = match &self.observed {
            Some(seen) => seen.holder != holder || seen.renew != spec.renew_time,
            None => true,
        };
        if changed {
            self.observed = Some(Observed {
                holder: holder.clone(),
                renew: spec.renew_time.clone(),
                duration,
                since: Instant::now(),
            });
        }
        let mine = holder.as_deref() == Some(self.settings.identity.as_str());
        let expired = self
            .observed
            .as_ref()
            .is_some_and(|seen| seen.since.elapsed() >= seen.duration);
        if holder.is_some() && !mine && !expired {
            return Ok(false);
        }
        let updated = Lease {
            metadata: current.metadata.clone(),
            spec: Some(self.spec_for_me(Some(&spec))),
        };
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &updated)
            .await
        {
            Ok(lease) => {
                let spec = lease.spec.unwrap_or_default();
                self.observed = Some(Observed {
                    holder: spec.holder_identity,
                    renew: spec.renew_time,
                    duration: self.settings.duration,
                    since: Instant::now(),
                });
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Give the Lease up if this replica holds it (clear the holder).
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(current) = self.api.get_opt(&self.settings.name).await? else {
            return Ok(());
        };
        let mut spec = current.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        let released = Lease {
            metadata: current.metadata,
            spec: Some(spec),
        };
        self.api
            .replace(&self.settings.name, &PostParams::default(), &released)
            .await
            .map(|_| ())
    }
}

/// Run `lead` whenever this replica holds the Lease, until `shutdown` is
/// cancelled, telling `observer` as it goes. `lead` gets a token that is
/// cancelled when leadership is lost (or on shutdown) and must return soon
/// after.
pub async fn run_elected<F, Fut>(
    mut elector: Elector,
    observer: impl ElectionObserver,
    shutdown: CancellationToken,
    mut lead: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let span = tracing::info_span!(
        "leader_election",
        lease = %format!("{}/{}", elector.settings.namespace, elector.settings.name),
        identity = %elector.settings.identity
    );
    async move {
        let retry = elector.settings.retry;
        let changed = Arc::new(Notify::new());
        elector.watch_changes(changed.clone(), shutdown.child_token());
        // A candidate that cannot read the Lease tries again after `retry`,
        // doubling up to the Lease's duration (it could not take a held
        // Lease sooner than that after an outage anyway).
        let mut unreachable = Backoff::new(retry, elector.settings.duration);
        let mut read_failures = Failures::new("read the Lease");
        loop {
            // Candidate.
            let acquired = tokio::select! {
                () = shutdown.cancelled() => return,
                result = elector.try_acquire_or_renew() => result,
            };
            if acquired.is_ok() {
                unreachable.reset();
                read_failures.succeeded();
            }
            match acquired {
                Ok(true) => {}
                Ok(false) => {
                    observer.reached_api();
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = changed.notified() => continue,
                        () = tokio::time::sleep(elector.next_try()) => continue,
                    }
                }
                Err(error) => {
                    read_failures.failed(&error);
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(unreachable.next_delay()) => continue,
                    }
                }
            }

            // Leader.
            observer.reached_api();
            observer.leading(true);
            tracing::info!("became the leader");
            let term = shutdown.child_token();
            let mut leading = tokio::spawn(lead(term.clone()));
            let mut renewed = Instant::now();
            let mut renew_failures = Failures::new("renew the Lease");
            let stopping = loop {
                tokio::select! {
                    () = shutdown.cancelled() => break true,
                    _ = &mut leading => {
                        tracing::warn!("the controller stopped while leading; giving the Lease up");
                        break false;
                    }
                    () = tokio::time::sleep(retry) => {}
                }
                let renewal = tokio::select! {
                    () = shutdown.cancelled() => break true,
                    renewal = elector.try_acquire_or_renew() => renewal,
                };
                match renewal {
                    Ok(true) => {
                        renewed = Instant::now();
                        renew_failures.succeeded();
                    }
                    Ok(false) => {
                        tracing::warn!("the Lease was taken by another replica");
                        break false;
                    }
                    Err(error) => {
                        renew_failures.failed(&error);
                        if renewed.elapsed() >= elector.settings.renew_deadline {
                            tracing::warn!("no renewal within the renew deadline");
                            break false;
                        }
                    }
                }
            };
            term.cancel();
            // The controller finishes what it started, within a bound: a
            // reconcile stuck on an unreachable API server must not keep
            // the process (or the Lease) past its shutdown timeout.
            if !leading.is_finished()
                && tokio::time::timeout(retry::STOP_GRACE, &mut leading)
                    .await
                    .is_err()
            {
                tracing::warn!("the controller did not stop in time; abandoning it");
                leading.abort();
            }
            observer.leading(false);
            match tokio::time::timeout(
                elector.settings.retry.max(Duration::from_secs(1)),
                elector.release(),
            )
            .await
            {
                Ok(Ok(())) => tracing::info!("released the Lease"),
                Ok(Err(error)) => tracing::warn!(%error, "cannot release the Lease"),
                Err(_) => tracing::warn!("releasing the Lease timed out; it expires by itself"),
            }
            if stopping {
                return;
            }
        }
    }
    .instrument(span)
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_times_must_nest() {
        let times = |duration, renew_deadline, retry| LeaseTimes {
            duration: Duration::from_secs(duration),
            renew_deadline: Duration::from_secs(renew_deadline),
            retry: Duration::from_secs(retry),
        };
        assert!(times(15, 10, 2).validate().is_ok());
        let late = times(5, 6, 2).validate().unwrap_err();
        assert_eq!(
            late.to_string(),
            "--lease-renew-deadline (6s) must be shorter than --lease-duration (5s), and --lease-retry (2s) shorter than the deadline"
        );
        assert!(times(15, 10, 10).validate().is_err());
    }
}
