//! `--log-format` and logging set-up: every binary logs to stderr, in text
//! (coloured only on a terminal) or as one JSON object per line, with levels
//! from `RUST_LOG`.

use std::fmt;
use std::io::{self, IsTerminal, Write};

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
        .with_writer(Stderr)
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Stderr as a log writer that never fails (U-09). When stderr's reader is
/// gone (`catalog 2>&1 | head -2`, a log collector restarted), a write
/// fails with EPIPE; `tracing-subscriber` then reports that with
/// `eprintln!`, which panics when stderr is unwritable, and the panic kills
/// whichever task logged — the signal task, in the catalog, so SIGTERM was
/// ignored. A line nobody can read is dropped instead; every binary's
/// logging writes through this (with `log_internal_errors(false)`, so no
/// layer falls back to `eprintln!` either).
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = StderrWriter;

    fn make_writer(&'a self) -> Self::Writer {
        StderrWriter(io::stderr())
    }
}

/// One event's write to stderr; see [`Stderr`].
#[derive(Debug)]
pub struct StderrWriter(io::Stderr);

impl Write for StderrWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Reported as written: a failed log line has nowhere to be reported.
        Ok(self.0.write(buf).unwrap_or(buf.len()))
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let _ = self.0.write_all(buf);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}
