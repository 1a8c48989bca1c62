//! `--log-format` and logging set-up: every binary logs to stderr, in text
//! (coloured only on a terminal) or as one JSON object per line, with levels
//! from `RUST_LOG`.

use std::fmt;
use std::io::IsTerminal;

/// `--log-format`: human-readable lines or one JSON object per line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// Log to stderr in `format`; levels come from `RUST_LOG`, else
/// `default_filter` (an `EnvFilter` directive such as `info`). Calling it
/// twice (tests) keeps the first set-up.
pub fn init(format: LogFormat, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
