//! The isolation level told to the catalog (`PUT /provider/isolation`),
//! which stamps it on this provider's offers for buyers to see: `off`
//! when isolation is turned off; else `enforced` or `failed` as the last
//! probe ([`super::probe`]) found, `unverified` before a probe or after an
//! inconclusive one (the policies are rendered, their enforcement not
//! shown). Sent when a term starts, at once when the level changes, and
//! again every `--isolation-resync` (the catalog keeps one copy); a failed
//! send is retried with backoff, a WARN once per outage.

use std::time::Duration;

use catalog_client::wire::IsolationLevel;
use catalog_client::{Backoff, Session};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use tokio::sync::watch;

use super::probe::Verdict;

/// First and largest delay between failed sends.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// What this provider may claim: isolation `enabled` or not, and the
/// last probe's verdict.
pub fn level(enabled: bool, verdict: Option<&Verdict>) -> IsolationLevel {
    match (enabled, verdict) {
        (false, _) => IsolationLevel::Off,
        (true, Some(Verdict::Enforced)) => IsolationLevel::Enforced,
        (true, Some(Verdict::Failed(_))) => IsolationLevel::Failed,
        (true, _) => IsolationLevel::Unverified,
    }
}

/// The catalog session the isolation's reports share (the level here,
/// the buyers' policies' reports in [`super::controller`]), held only for
/// one call at a time.
pub type SharedSession = std::sync::Arc<tokio::sync::Mutex<Session>>;

/// Report the level until `stop`.
pub async fn run(
    session: SharedSession,
    enabled: bool,
    mut verdicts: watch::Receiver<Option<Verdict>>,
    every: Duration,
    stop: CancellationToken,
) {
    let span = tracing::info_span!("isolation_report");
    async move {
        let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
        let mut failing = false;
        loop {
            let level = level(enabled, verdicts.borrow_and_update().as_ref());
            let sent = session.lock().await.report_isolation(level).await;
            let wait = match sent {
                Ok(()) => {
                    if failing {
                        tracing::info!(level = level.as_str(), "isolation level reported again");
                    }
                    failing = false;
                    backoff.reset();
                    every
                }
                Err(error) => {
                    if !failing {
                        tracing::warn!(%error, "cannot report the isolation level to the catalog");
                    }
                    failing = true;
                    backoff.next_delay()
                }
            };
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
                changed = verdicts.changed() => {
                    if changed.is_err() {
                        // The prober is gone (never run): report at the
                        // interval only.
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = tokio::time::sleep(wait) => {}
                        }
                    }
                }
            }
        }
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_probe_proves_or_disproves_and_off_is_off() {
        let inconclusive = Verdict::Inconclusive("no image".into());
        let failed = Verdict::Failed("connected".into());
        assert_eq!(level(true, None), IsolationLevel::Unverified);
        assert_eq!(level(true, Some(&inconclusive)), IsolationLevel::Unverified);
        assert_eq!(
            level(true, Some(&Verdict::Enforced)),
            IsolationLevel::Enforced
        );
        assert_eq!(level(true, Some(&failed)), IsolationLevel::Failed);
        assert_eq!(level(false, Some(&Verdict::Enforced)), IsolationLevel::Off);
    }
}
