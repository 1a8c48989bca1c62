//! The shutdown signal every server waits for.

/// Resolves on SIGTERM (how Kubernetes stops a pod) or SIGINT (Ctrl-C),
/// logging which; a signal that cannot be listened for is logged and never
/// fires.
pub async fn shutdown() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("interrupted"),
        () = terminate => tracing::info!("terminated"),
    }
}

/// Wait for `task` (the program's one long-lived task, `what` in logs) to
/// end, or for SIGTERM/SIGINT; on a signal, call `stop` (the task's
/// cancellation) and wait at most `grace` for it. A controller stuck on a
/// call to an unreachable server (kube's Controller waits for ever for a
/// cache that never fills) must not keep the process past its grace period.
pub async fn run_until_shutdown(
    what: &str,
    mut task: tokio::task::JoinHandle<anyhow::Result<()>>,
    stop: impl FnOnce(),
    grace: std::time::Duration,
) -> anyhow::Result<()> {
    tokio::select! {
        result = &mut task => return result?,
        () = shutdown() => {}
    }
    stop();
    match tokio::time::timeout(grace, task).await {
        Ok(result) => result?,
        Err(_) => {
            tracing::warn!("{what} still running after {grace:?}; exiting anyway");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[tokio::test]
    async fn the_task_outcome_is_returned_when_it_ends_first() {
        let failed = tokio::spawn(async { Err(anyhow::anyhow!("boom")) });
        let error = super::run_until_shutdown("t", failed, || {}, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(error.to_string(), "boom");
        let ok = tokio::spawn(async { Ok(()) });
        super::run_until_shutdown("t", ok, || {}, Duration::from_secs(1))
            .await
            .unwrap();
    }
}
