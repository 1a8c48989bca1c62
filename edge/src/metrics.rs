//! What every binary's `/metrics` shares (feature `metrics`): the
//! `<binary>_build_info` gauge, and the exposition format a scraper asked
//! for.
//!
//! Each binary's metrics live in a prometheus-client `Registry`, which
//! renders OpenMetrics text only. Prometheus asks for OpenMetrics and gets
//! it as rendered; a client that does not (`curl`, `promtool check metrics`,
//! agents speaking the older text format) gets the Prometheus text format
//! 0.0.4, as Go's client library answers it ([`negotiate`],
//! [`to_text_format`]). The two differ in little but one thing tools care
//! about: OpenMetrics names a counter's family without `_total` (`# TYPE
//! x_errors counter` above `x_errors_total 1`), which a text-format parser
//! reads as an untyped `x_errors_total` with no help.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `Content-Type` of an OpenMetrics answer.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The `Content-Type` of a Prometheus text format (0.0.4) answer.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The version the binaries were built as. Every crate of the workspace
/// takes the workspace's version, so `edge`'s is every binary's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The compiler that built the binaries (`build.rs`), or `unknown`.
pub const RUSTC: &str = env!("EDGE_RUSTC_VERSION");

/// The commit the binaries were built from: `LIQO_BROKER_REVISION` at
/// build time (`LIQO_BROKER_REVISION=$(git rev-parse HEAD) cargo build
/// --release`), else `unknown`. Set by whoever builds a release; an
/// ordinary `cargo build` reads no git state, so a commit rebuilds nothing.
pub fn revision() -> &'static str {
    match option_env!("LIQO_BROKER_REVISION") {
        Some(revision) if !revision.trim().is_empty() => revision.trim(),
        _ => "unknown",
    }
}

type BuildLabels = Vec<(&'static str, &'static str)>;

/// A registry holding `<binary>_build_info` (`-` in `binary` written `_`):
/// a gauge at 1 labelled with the [`VERSION`], the [`revision`] and the
/// [`RUSTC`] version, as Go binaries export `go_build_info`, so a dashboard
/// can tell which build each replica runs. The registry has no prefix; a
/// binary registers its own metrics in
/// `root.sub_registry_with_prefix(<its prefix>)`, which renders after the
/// build information.
pub fn root_registry(binary: &str) -> Registry {
    let mut root = Registry::default();
    let info = Family::<BuildLabels, Gauge>::default();
    info.get_or_create(&vec![
        ("version", VERSION),
        ("revision", revision()),
        ("rustc", RUSTC),
    ])
    .set(1);
    root.register(
        format!("{}_build_info", binary.replace('-', "_")),
        "1, labelled with the version, the source revision and the compiler this binary was built from",
        info,
    );
    root
}

/// The OpenMetrics text of every metric in `registry`.
pub fn openmetrics(registry: &Registry) -> String {
    let mut text = String::new();
    // Only the writer can fail, and a String never does; were that to
    // change, a scraper gets nothing rather than a truncated exposition.
    if let Err(error) = prometheus_client::encoding::text::encode(&mut text, registry) {
        tracing::warn!(%error, "cannot encode metrics");
        text.clear();
    }
    text
}

/// The two exposition formats a `/metrics` answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0 text, as prometheus-client renders it.
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Text,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::Text => TEXT_FORMAT,
        }
    }
}

/// The format for a request's `Accept` header: OpenMetrics when it asks
/// for `application/openmetrics-text` at least as much as for plain text
/// (Prometheus ranks it first), else the text format — also without an
/// `Accept` header, as Go's client library does.
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Text;
    };
    let (mut openmetrics, mut text) = (0.0_f32, 0.0_f32);
    for range in accept.split(',') {
        let mut params = range.split(';');
        let media = params.next().unwrap_or_default().trim();
        let q = params
            .filter_map(|p| p.split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, q)| q.trim().parse().unwrap_or(0.0));
        if media.eq_ignore_ascii_case("application/openmetrics-text") {
            openmetrics = openmetrics.max(q);
        } else if ["text/plain", "text/*", "*/*"]
            .iter()
            .any(|m| media.eq_ignore_ascii_case(m))
        {
            text = text.max(q);
        }
    }
    if openmetrics > 0.0 && openmetrics >= text {
        Format::OpenMetrics
    } else {
        Format::Text
    }
}

/// `openmetrics` (a registry's rendering) in the format `accept` asks for
/// ([`negotiate`]): its `Content-Type` and body.
pub fn exposition(openmetrics: String, accept: Option<&str>) -> (&'static str, String) {
    let format = negotiate(accept);
    let body = match format {
        Format::OpenMetrics => openmetrics,
        Format::Text => to_text_format(&openmetrics),
    };
    (format.content_type(), body)
}

/// prometheus-client's OpenMetrics text in the Prometheus text format
/// 0.0.4: a counter family takes its samples' `_total` name (and an info
/// family its `_info` name, as a gauge); `unknown` is `untyped`; `# UNIT`,
/// `# EOF`, exemplars and counters' `_created` samples, which the older
/// format has no place for, are left out; a backslash in help text is
/// escaped, as that format requires.
pub fn to_text_format(openmetrics: &str) -> String {
    use std::collections::HashMap;
    // Family name -> (its name in the text format, its type there), from
    // the `# TYPE` lines, which follow the `# HELP` lines they rename.
    let mut families: HashMap<&str, (String, &str)> = HashMap::new();
    for line in openmetrics.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let Some((name, kind)) = rest.split_once(' ') else {
            continue;
        };
        let renamed = match kind {
            "counter" => (format!("{name}_total"), "counter"),
            "info" => (format!("{name}_info"), "gauge"),
            "unknown" => (name.to_string(), "untyped"),
            "stateset" => (name.to_string(), "gauge"),
            "gaugehistogram" => (name.to_string(), "histogram"),
            other => (name.to_string(), other),
        };
        families.insert(name, renamed);
    }
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = families.get(name).map_or(name, |(n, _)| n.as_str());
            out.push_str("# HELP ");
            out.push_str(name);
            out.push(' ');
            out.push_str(&help.replace('\\', "\\\\"));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split_once(' ').map_or(rest, |(name, _)| name);
            let Some((name, kind)) = families.get(name) else {
                continue;
            };
            out.push_str("# TYPE ");
            out.push_str(name);
            out.push(' ');
            out.push_str(kind);
        } else if line.starts_with('#') {
            // `# UNIT`, `# EOF`: nothing the text format has.
            continue;
        } else {
            // An exemplar follows ` # ` after the value.
            let sample = line.split_once(" # ").map_or(line, |(sample, _)| sample);
            let name = sample.split(['{', ' ']).next().unwrap_or_default();
            let created = name
                .strip_suffix("_created")
                .and_then(|family| families.get(family))
                .is_some_and(|(_, kind)| *kind == "counter");
            if sample.is_empty() || created {
                continue;
            }
            out.push_str(sample);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::histogram::Histogram;

    #[test]
    fn build_info_is_named_after_the_binary_and_is_1() {
        let mut root = root_registry("market-autoscaler");
        let up = Gauge::<i64>::default();
        root.sub_registry_with_prefix("market_autoscaler")
            .register("leader", "Leads", up);
        let text = openmetrics(&root);
        let expected = format!(
            "# HELP market_autoscaler_build_info 1, labelled with the version, the source revision and the compiler this binary was built from.\n\
             # TYPE market_autoscaler_build_info gauge\n\
             market_autoscaler_build_info{{version=\"{VERSION}\",revision=\"{}\",rustc=\"{RUSTC}\"}} 1\n\
             # HELP market_autoscaler_leader Leads.\n",
            revision()
        );
        assert!(text.starts_with(&expected), "{text}");
        assert!(!VERSION.is_empty() && !RUSTC.is_empty() && !revision().is_empty());
        assert!(RUSTC.starts_with(|c: char| c.is_ascii_digit()), "{RUSTC}");
    }

    #[test]
    fn prometheus_asks_for_openmetrics_everyone_else_gets_the_text_format() {
        // Prometheus 2.x and 3.x (its protobuf first, which no binary
        // serves).
        for accept in [
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
            "Application/OpenMetrics-Text; version=1.0.0",
        ] {
            assert_eq!(negotiate(Some(accept)), Format::OpenMetrics, "{accept}");
        }
        for accept in [
            None,
            Some("*/*"),
            Some("text/plain"),
            Some("text/plain;version=0.0.4,application/openmetrics-text;q=0.5"),
            Some("application/openmetrics-text;q=0"),
            Some("application/json"),
        ] {
            assert_eq!(negotiate(accept), Format::Text, "{accept:?}");
        }
        let (kind, _) = exposition(String::new(), None);
        assert_eq!(kind, TEXT_FORMAT);
    }

    #[test]
    fn the_text_format_names_counters_by_their_samples() {
        let mut registry = Registry::with_prefix("x");
        let errors = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
        registry.register("errors", r"Failed, by kind (a\b)", errors.clone());
        errors.get_or_create(&vec![("kind", "kubernetes")]).inc();
        let took = Histogram::new([0.5]);
        registry.register("duration_seconds", "Took", took.clone());
        took.observe(0.1);
        let sent = Counter::<u64>::default();
        registry.register_with_unit(
            "sent",
            "Sent",
            prometheus_client::registry::Unit::Bytes,
            sent.clone(),
        );
        registry.register("up", "Up", Gauge::<i64>::default());
        assert_eq!(
            to_text_format(&openmetrics(&registry)),
            "# HELP x_errors_total Failed, by kind (a\\\\b).\n\
             # TYPE x_errors_total counter\n\
             x_errors_total{kind=\"kubernetes\"} 1\n\
             # HELP x_duration_seconds Took.\n\
             # TYPE x_duration_seconds histogram\n\
             x_duration_seconds_sum 0.1\n\
             x_duration_seconds_count 1\n\
             x_duration_seconds_bucket{le=\"0.5\"} 1\n\
             x_duration_seconds_bucket{le=\"+Inf\"} 1\n\
             # HELP x_sent_bytes_total Sent.\n\
             # TYPE x_sent_bytes_total counter\n\
             x_sent_bytes_total 0\n\
             # HELP x_up Up.\n\
             # TYPE x_up gauge\n\
             x_up 0\n"
        );
    }

    #[test]
    fn exemplars_created_samples_and_other_types_fit_the_text_format() {
        let om = "# HELP a Info.\n# TYPE a info\na_info{k=\"v\"} 1\n\
                  # HELP c Count.\n# TYPE c counter\nc_total 3 # {trace=\"t\"} 1.0\nc_created 1.7e9\n\
                  # HELP u Whatever.\n# TYPE u unknown\nu 2\n# EOF\n";
        assert_eq!(
            to_text_format(om),
            "# HELP a_info Info.\n# TYPE a_info gauge\na_info{k=\"v\"} 1\n\
             # HELP c_total Count.\n# TYPE c_total counter\nc_total 3\n\
             # HELP u Whatever.\n# TYPE u untyped\nu 2\n"
        );
    }
}
