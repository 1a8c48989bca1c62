//! The isolation level told to the catalog (`PUT /provider/isolation`),
//! which stamps it on this provider's offers for buyers to see:
//! `unverified` while isolation is on (the policies are rendered; this
//! controller does not prove that the cluster's CNI enforces them on
//! traffic arriving through Liqo's gateway, which Liqo does not document:
//! `docs/isolation.md`), `off` when it is turned off. Sent when a term
//! starts and again every `--isolation-resync` (the catalog keeps one
//! copy); a failed send is retried with backoff, a WARN once per outage.

use std::time::Duration;

use catalog_client::wire::IsolationLevel;
use catalog_client::{Backoff, Session};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::render::Settings;

/// First and largest delay between failed sends.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// What `settings` lets this provider claim.
pub fn level(settings: &Settings) -> IsolationLevel {
    if settings.enabled {
        IsolationLevel::Unverified
    } else {
        IsolationLevel::Off
    }
}

/// Report `level` until `stop`.
pub async fn run(
    session: &mut Session,
    level: IsolationLevel,
    every: Duration,
    stop: CancellationToken,
) {
    let span = tracing::info_span!("isolation_report", level = level.as_str());
    async move {
        let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
        let mut failing = false;
        loop {
            let wait = match session.report_isolation(level).await {
                Ok(()) => {
                    if failing {
                        tracing::info!("isolation level reported again");
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
            }
        }
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::render::default_internal;

    #[test]
    fn on_is_unverified_and_off_is_off() {
        let mut s = Settings {
            enabled: true,
            protected: Default::default(),
            internet_egress: true,
            internal: default_internal(),
            ingress_from: Vec::new(),
            dns_namespace: "kube-system".into(),
            dns_pod_labels: Default::default(),
        };
        assert_eq!(level(&s), IsolationLevel::Unverified);
        s.enabled = false;
        assert_eq!(level(&s), IsolationLevel::Off);
    }
}
