//! The life of a controller binary: its one long-lived task, started with
//! a cancellation token, run until it ends or SIGTERM/SIGINT cancels it —
//! and then given a bounded grace period ([`edge::signal::run_until_shutdown`]).

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Run `controller(stop)` until it ends (its result is the process's) or a
/// signal cancels `stop`; `what` names it in the log when it outlives
/// `grace`.
pub async fn run_until_signal<F, E>(
    what: &str,
    grace: Duration,
    controller: impl FnOnce(CancellationToken) -> F,
) -> anyhow::Result<()>
where
    F: Future<Output = Result<(), E>> + Send + 'static,
    anyhow::Error: From<E>,
{
    let stop = CancellationToken::new();
    let run = controller(stop.clone());
    let task = tokio::spawn(async move { Ok(run.await?) });
    edge::signal::run_until_shutdown(what, task, || stop.cancel(), grace).await
}
