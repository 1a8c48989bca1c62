//! What the project's command-line programs share at their edge: the log
//! format flag, logging set-up, and turning the program's outcome into an
//! exit code with a one-line error. `resource-monitor` and `provider-agent`
//! both run through [`run_main`], so their logs and failures read the same.

use std::future::Future;
use std::process::ExitCode;

/// `--log-format`: human-readable lines or one JSON object per line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Log to stderr in `format`; levels come from `RUST_LOG` (default: info).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// An error and its causes on one line, without repeating a cause that the
/// message above it already quotes (most of ours embed their cause, so
/// `{:#}` would print it twice).
pub fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Set up logging, run `program` on a multi-threaded runtime, and map its
/// outcome to the exit code: a failure is printed as `error: …` (or logged,
/// in JSON mode, so log collectors see it) and exits 1.
pub fn run_main<F>(log_format: LogFormat, program: F) -> ExitCode
where
    F: Future<Output = anyhow::Result<()>>,
{
    init_logging(log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(program) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let message = describe(&error);
            match log_format {
                LogFormat::Json => tracing::error!("{message}"),
                LogFormat::Text => eprintln!("error: {message}"),
            }
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGTERM (how Kubernetes stops a pod) or Ctrl-C, logging
/// which; a signal that cannot be listened for is logged and never fires.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
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
        () = ctrl_c => tracing::info!("interrupted"),
        () = terminate => tracing::info!("terminated"),
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn describe_chains_causes_without_repeating_them() {
        let inner = anyhow::anyhow!("connection refused");
        let error = inner.context("cannot reach 127.0.0.1:1");
        assert_eq!(
            describe(&error),
            "cannot reach 127.0.0.1:1: connection refused"
        );

        let quoted = anyhow::anyhow!("refused").context("reading failed: refused");
        assert_eq!(describe(&quoted), "reading failed: refused");
    }
}
