//! The expiry sweeper: a background task that expires reservations and
//! contracts past their deadline, so their units free themselves even when
//! nobody reads them. (Reads and new reservations of the same plan also expire due
//! records on the spot, so correctness never waits for the sweeper.)

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::ReservationStore;

/// Run until `shutdown` is cancelled, sweeping every `interval`.
pub fn spawn(
    store: Arc<dyn ReservationStore>,
    interval: Duration,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let interval = interval.max(Duration::from_millis(50));
    tokio::spawn(
        async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tick.tick() => {}
                }
                match store.expire_due(crate::store::now()).await {
                    Ok(expired) => {
                        for r in &expired {
                            let what = if r.contract.is_some() { "contract expired" } else { "reservation expired" };
                            tracing::info!(reservation = %r.id, offer = %r.offer_id, plan = %r.plan_id, "{what}");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "expiry sweep failed; retrying next tick"),
                }
            }
        }
        .instrument(tracing::info_span!("reservation_sweeper")),
    )
}
