//! The self-check's level, told to the catalog: with the catalog's
//! address and the provider's credentials (`--catalog-url`,
//! `--catalog-credentials-file`), the level of every reading of Liqo's
//! settings ([`crate::enforcement::reader`]) is sent with `PUT
//! /provider/enforcement`, which stamps it on the provider's offers for
//! buyers to see. Sent at the first reading, at once on every change, and
//! again every `--liqo-settings-interval` (the catalog keeps one copy; a
//! catalog that lost it, or a report lost to a racing peering
//! registration, has it back within one interval). A failed send is
//! retried with backoff (WARN once per outage, INFO at its end), a newer
//! reading replacing the one in flight. It runs on its own task: granting
//! never waits for it.

use std::time::Duration;

use catalog_client::wire::EnforcementLevel;
use catalog_client::Backoff;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::contracts::CatalogClient;
use crate::enforcement::reader::Enforcement;
use crate::enforcement::{Hold, Level, LimitsLevel, Observed};

/// First and largest delay between failed sends.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// The catalog's name for `level` (the same names as the
/// `slice_controller_liqo_enforcement` gauge's `level` label).
pub fn wire_level(level: Level) -> EnforcementLevel {
    match level {
        Level::Off => EnforcementLevel::Off,
        Level::On(LimitsLevel::None) => EnforcementLevel::None,
        Level::On(LimitsLevel::Soft) => EnforcementLevel::Soft,
        Level::On(LimitsLevel::Hard) => EnforcementLevel::Hard,
        Level::Unknown => EnforcementLevel::Unknown,
    }
}

/// Report `enforcement`'s readings through `client` until `shutdown`,
/// every `interval` at least.
pub fn spawn(
    client: CatalogClient,
    enforcement: &Enforcement,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let span = tracing::info_span!("enforcement_report", provider = %client.cluster_id());
    tokio::spawn(report(client, enforcement.readings(), interval, shutdown).instrument(span));
}

async fn report(
    mut client: CatalogClient,
    mut readings: watch::Receiver<(Observed, Option<Hold>)>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    let mut sent: Option<EnforcementLevel> = None;
    let mut failing = false;
    loop {
        let level = wire_level(readings.borrow_and_update().0.level());
        let sending = client.report_enforcement(level);
        let result = tokio::select! {
            () = shutdown.cancelled() => return,
            result = sending => result,
        };
        let wait = match result {
            Ok(()) => {
                if failing || sent != Some(level) {
                    tracing::info!(
                        level = level.as_str(),
                        "enforcement level reported to the catalog"
                    );
                }
                failing = false;
                sent = Some(level);
                backoff.reset();
                interval
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(level = level.as_str(), %error, "cannot report the enforcement level to the catalog; retrying");
                }
                failing = true;
                // A refusal is not fixed by asking again soon.
                if error.is_fatal() {
                    interval
                } else {
                    backoff.next_delay()
                }
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = readings.changed() => {
                // The reader stopped: so does reporting.
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_keep_the_gauge_names() {
        for level in [
            Level::Off,
            Level::On(LimitsLevel::None),
            Level::On(LimitsLevel::Soft),
            Level::On(LimitsLevel::Hard),
            Level::Unknown,
        ] {
            assert_eq!(wire_level(level).as_str(), level.label());
        }
    }
}
