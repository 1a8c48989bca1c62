//! Providers a catalog administrator disabled. A disabled provider's offers
//! stay in the catalog (it may withdraw them but not publish), so the feed
//! does not tell; with the administrator secret
//! (`--catalog-admin-secret-file`), the orchestrator reads
//! `GET /admin/providers` every `--disabled-poll` through `catalog-client`'s
//! administrator session and leaves the disabled ones out of every decision.
//! When the catalog cannot answer, the last set stays, as the offers do.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use catalog_client::{Http, Login, Session};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::feed::Snapshot;

/// Bound on each request to the catalog.
const TIMEOUT: Duration = Duration::from_secs(10);

/// An administrator session with the catalog at `base` (`http://HOST:PORT`);
/// nothing is contacted yet.
pub fn session(base: &str, secret: String) -> Result<Session, catalog_client::Error> {
    let url = base.parse().map_err(|e| {
        catalog_client::Error::Unavailable(format!("the catalog's URL {base}: {e}"))
    })?;
    let client = Http::client(TIMEOUT, concat!("orchestrator/", env!("CARGO_PKG_VERSION")))?;
    Ok(Session::new(
        Http::new(client, url),
        Login::Admin { secret },
    ))
}

/// The disabled providers now (for `explain`).
pub async fn fetch(base: &str, secret: String) -> Result<BTreeSet<String>, String> {
    let read = async { session(base, secret)?.disabled_providers().await };
    read.await
        .map_err(|e| format!("cannot read the disabled providers from {base}: {e}"))
}

/// Poll `session` every `every` in a task of its own until `shutdown` is
/// cancelled, publishing the disabled providers into `snapshot`.
pub fn follow(
    session: Session,
    every: Duration,
    snapshot: Arc<watch::Sender<Arc<Snapshot>>>,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    let base = session
        .http()
        .base()
        .as_str()
        .trim_end_matches('/')
        .to_string();
    let span = tracing::info_span!("catalog_admin", catalog = %base);
    tokio::spawn(poll(session, every, snapshot, shutdown).instrument(span))
}

async fn poll(
    mut session: Session,
    every: Duration,
    snapshot: Arc<watch::Sender<Arc<Snapshot>>>,
    shutdown: CancellationToken,
) {
    loop {
        let polled = tokio::select! {
            () = shutdown.cancelled() => return,
            polled = session.disabled_providers() => polled,
        };
        match polled {
            Ok(disabled) => {
                snapshot.send_if_modified(|s| {
                    if s.disabled == disabled {
                        return false;
                    }
                    tracing::info!(?disabled, "disabled providers changed");
                    *s = Arc::new(Snapshot {
                        disabled: disabled.clone(),
                        ..(**s).clone()
                    });
                    true
                });
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read the disabled providers; keeping the last set")
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}
