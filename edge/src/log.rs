//! `--log-format`, `--log-level` and logging set-up: every binary logs to
//! stderr, in text (coloured only on a terminal) or as one flat JSON object
//! per line, at the level `--log-level` sets unless `RUST_LOG` says
//! otherwise.

use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::str::FromStr;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

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

/// The help of every binary's `--log-level` (clap's `help`), so they say
/// the same.
pub const LOG_LEVEL_HELP: &str = "Log level: error, warn, info, debug or trace, or tracing directives (`info,kube=warn`, `warn,catalog=debug`). RUST_LOG, when set, wins";

/// `--log-level`: a level (`error`, `warn`, `info`, `debug`, `trace`) or
/// tracing `EnvFilter` directives (`info,kube=warn`), checked when the flag
/// is parsed so a typo fails at start rather than logging nothing.
///
/// `RUST_LOG`, when set, wins over the flag: the flag (or its
/// `<BINARY>_LOG_LEVEL` variable) is the deployment's setting, `RUST_LOG`
/// the per-target override someone debugging adds on top without editing
/// the flags (as the catalog's `--log` always behaved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLevel(String);

impl LogLevel {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for LogLevel {
    fn default() -> Self {
        LogLevel("info".to_string())
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for LogLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty: give a level (error, warn, info, debug, trace)".to_string());
        }
        const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
        let hint =
            "give a level (error, warn, info, debug, trace) or tracing directives (info,kube=warn)";
        // A bare word is a target to `EnvFilter` (`debgu` would log that
        // target only, which is to say nothing): here it must be a level.
        for directive in s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let bare = !directive.contains(['=', '[']);
            if bare && !LEVELS.iter().any(|l| directive.eq_ignore_ascii_case(l)) {
                return Err(format!("`{directive}` is not a level: {hint}"));
            }
        }
        EnvFilter::try_new(s).map_err(|e| format!("{e}: {hint}"))?;
        Ok(LogLevel(s.to_string()))
    }
}

/// Log to stderr in `format`; levels come from `RUST_LOG`, else `level`
/// (an `EnvFilter` directive such as `info`: `--log-level`). Calling it
/// twice (tests) keeps the first set-up.
pub fn init(format: LogFormat, level: &str) {
    init_with(format, level, tracing_subscriber::layer::Identity::new());
}

/// [`init`], with `extra` beside the formatter: a layer of the binary's
/// own (the catalog's keeps per-connection client errors out of the log).
pub fn init_with<L>(format: LogFormat, level: &str, extra: L)
where
    L: Layer<Registry> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let logs = tracing_subscriber::registry().with(extra).with(filter);
    let _ = match format {
        LogFormat::Text => logs
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(Stderr)
                    .log_internal_errors(false)
                    // Colour codes are noise in a file or a pipe.
                    .with_ansi(std::io::stderr().is_terminal()),
            )
            .try_init(),
        LogFormat::Json => logs.with(json_formatter(Stderr)).try_init(),
    };
}

/// One JSON object per line, written to `writer`, with the event's message
/// and fields at the top level (`{"timestamp", "level", "message",
/// "target", <fields>, "span", "spans"}`), where log collectors index
/// them; tracing-subscriber's default nests them under `fields`. The
/// current span is kept as `span`, and the list of open spans as `spans`,
/// because an outer span carries what the inner one does not (the class of
/// a slice controller's `reconcile{consumer}`, the provider of a
/// peering-user `pass`).
fn json_formatter<S, W>(writer: W) -> impl Layer<S> + Send + Sync + 'static
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .with_writer(writer)
        // See [`Stderr`]: a failed write is never reported.
        .log_internal_errors(false)
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(true)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer into a shared buffer, for one test's subscriber.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[test]
    fn a_json_line_has_its_message_and_fields_at_the_top_level() {
        let out = Buffer::default();
        let subscriber = tracing_subscriber::registry()
            .with(json_formatter(out.clone()))
            .with(EnvFilter::new("info"));
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::info_span!("pass", provider = "p1");
            let _outer = outer.enter();
            let inner = tracing::info_span!("peering_user", consumer = "c1");
            let _inner = inner.enter();
            tracing::info!(attempt = 2, "attached the kubeconfig");
            tracing::debug!("not at info");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(line["message"], "attached the kubeconfig", "{line}");
        assert_eq!(line["attempt"], 2, "{line}");
        assert_eq!(line["level"], "INFO", "{line}");
        assert!(line.get("fields").is_none(), "{line}");
        assert_eq!(line["span"]["name"], "peering_user", "{line}");
        assert_eq!(line["span"]["consumer"], "c1", "{line}");
        assert_eq!(line["spans"][0]["provider"], "p1", "{line}");
    }

    #[test]
    fn a_log_level_is_a_level_or_directives_and_nothing_else() {
        for good in ["debug", "info", " warn ", "info,kube=warn", "catalog=trace"] {
            let level: LogLevel = good.parse().unwrap();
            assert_eq!(level.as_str(), good.trim());
        }
        for bad in ["", "  ", "loud", "debgu", "info,kube=loud", "info,catalog"] {
            assert!(bad.parse::<LogLevel>().is_err(), "{bad:?} was accepted");
        }
        assert_eq!(LogLevel::default().to_string(), "info");
    }
}
