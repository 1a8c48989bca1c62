//! Running a program's async `main` and turning its outcome into an exit
//! code, the same way in every binary.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use crate::log::{self, LogFormat, LogLevel};

/// How long the runtime waits, once the program has returned, for work it
/// cannot cancel (blocking file reads, for instance) before the process
/// exits anyway. A program that has returned must not hang.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Set up logging (`--log-format`; `--log-level`, which `RUST_LOG` overrides),
/// run `program` on a multi-threaded Tokio runtime, and map its outcome to
/// the exit code: a failure is printed as `error: …` on stderr (logged, in
/// JSON mode, so log collectors see it) and exits 1.
pub fn run<F>(log_format: LogFormat, log_level: LogLevel, program: F) -> ExitCode
where
    F: Future<Output = anyhow::Result<()>>,
{
    log::init(log_format, log_level.as_str());
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(program);
    // Dropping a runtime waits for every blocking task, however stuck.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    match outcome {
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
