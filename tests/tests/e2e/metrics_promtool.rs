//! Every server binary's real `/metrics` through `promtool check metrics`,
//! Prometheus' own linter (names, help, types, units: counters end
//! `_total`, units are base units and come last), and `<binary>_build_info`
//! on each (issue 46).
//!
//! Each controller starts as `controllers_unreachable_api` starts it (its
//! arguments, reused): its Kubernetes API server and catalog, or the
//! aggregator's upstreams, on a port that refuses connections, so the
//! binary alone is needed and it serves `/metrics` at once. The catalog
//! starts on its embedded store and first answers a login, an offer and a
//! feed subscriber, so its request and feed series exist. A family with
//! labels prints nothing before its first series; the failure kinds, the
//! feed's modes and close reasons and the aggregator's results are created
//! at 0 for that reason (and so that a first failure counts in `rate()`).
//!
//! promtool reads the Prometheus text format, which every binary answers
//! when the scraper does not ask for OpenMetrics (curl, promtool); to
//! Prometheus' `Accept` header it answers OpenMetrics, checked here too.
//! promtool is Debian's (package `prometheus`), which
//! `scripts/install-test-deps.sh` unpacks into `build/bin/`; without it the
//! tests fail.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use e2e::catalog::{provider, thesis_offer, Backend, Env};
use e2e::Spawn;

use crate::controllers_unreachable_api as unreachable;

/// The `Accept` header Prometheus 2.x scrapes with.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

fn promtool() -> Result<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/bin/promtool");
    ensure!(
        path.exists(),
        "{} is missing: run scripts/install-test-deps.sh",
        path.display()
    );
    Ok(path)
}

/// `GET /metrics` on `addr` with `accept`: the content type and the body.
fn scrape(addr: SocketAddr, accept: Option<&str>) -> Result<(String, String)> {
    let client = e2e::http::blocking_client(Duration::from_secs(10));
    let mut request = client.get(format!("http://{addr}/metrics"));
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let response = request.send().context("GET /metrics")?;
    ensure!(
        response.status() == 200,
        "GET /metrics: {}",
        response.status()
    );
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    Ok((kind, response.text()?))
}

/// `binary`'s `/metrics` on `addr`: accepted by promtool with nothing to
/// say, `<binary>_build_info` at 1, and OpenMetrics for Prometheus. The
/// exposition (Prometheus' text format).
fn check(binary: &str, addr: SocketAddr) -> Result<String> {
    let (kind, text) = scrape(addr, None)?;
    ensure!(
        kind.starts_with("text/plain; version=0.0.4"),
        "{binary}: {kind} without an Accept header"
    );
    let build_info = format!(
        "{}_build_info{{version=\"{}\",revision=\"",
        binary.replace('-', "_"),
        env!("CARGO_PKG_VERSION")
    );
    ensure!(
        text.lines()
            .any(|l| l.starts_with(&build_info) && l.contains(",rustc=\"") && l.ends_with("\"} 1")),
        "{binary}: no {build_info}…,rustc=…}} 1 in\n{text}"
    );
    let mut lint = Command::new(promtool()?)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running promtool")?;
    lint.stdin
        .take()
        .context("promtool's stdin")?
        .write_all(text.as_bytes())?;
    let out = lint.wait_with_output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics on {binary}'s /metrics ({}):\n{said}\n--- the exposition:\n{text}",
        out.status
    );
    let exposition = text;

    let (kind, text) = scrape(addr, Some(PROMETHEUS_ACCEPT))?;
    ensure!(
        kind.starts_with("application/openmetrics-text; version=1.0.0"),
        "{binary}: {kind} for Prometheus' Accept header"
    );
    ensure!(text.ends_with("# EOF\n"), "{binary}: OpenMetrics:\n{text}");
    Ok(exposition)
}

/// Start `binary` with one of `controllers_unreachable_api`'s argument
/// lines (every server it talks to refusing connections) and check the
/// `/metrics` it announces for `role` once it has announced `ports` ports;
/// the exposition.
fn check_unreachable(binary: &str, args: &str, ports: usize, role: Option<&str>) -> Result<String> {
    let dir = tempfile::tempdir()?;
    let port = e2e::free_port();
    let resources = dir.path().join("resources.yaml");
    std::fs::write(&resources, "cpu: 4\n")?;
    let values = [
        (
            "kubeconfig",
            unreachable::kubeconfig(dir.path(), port)
                .display()
                .to_string(),
        ),
        ("resources", resources.display().to_string()),
        (
            "credentials",
            unreachable::credentials(dir.path()).display().to_string(),
        ),
        ("port", port.to_string()),
    ];
    let (_child, bound) = Spawn::new(binary)
        .args(unreachable::words(args, "", &values))
        .start_announced(ports)?;
    check(binary, bound.addr(role))
}

/// The catalog (started with `extra` flags) after a login, an offer, a
/// 404 and a feed subscriber's first list, so its request and feed series
/// exist: its `/metrics` checked, on the API port or, with
/// `--metrics-listen`, on that port.
fn check_catalog(extra: &[&str], metrics_port: Option<u16>) -> Result<String> {
    let env = Env::new(Backend::Embedded);
    let c = env.start_with(extra);
    let token = c.login(&provider(1));
    c.put_offer("a", &thesis_offer(), &token);
    c.get("/offer/missing").expect_error(404);
    // A subscriber's first list: the feed's counters and histogram.
    let mut feed = e2e::ws::FeedClient::connect(c.port, "")?;
    feed.next_event(Instant::now() + e2e::EVENTUALLY)?;
    let port = metrics_port.unwrap_or(c.port);
    check("catalog", SocketAddr::from(([127, 0, 0, 1], port)))
}

/// Without --metrics-listen, /metrics is on the API port (as before the
/// flag existed).
#[test]
fn promtool_accepts_the_catalog_metrics() -> Result<()> {
    check_catalog(&[], None).map(drop)
}

/// With --metrics-listen, /metrics is served there, the same exposition
/// (its API requests counted), and the API port answers it 404; the
/// metrics port serves nothing of the API.
#[test]
fn the_catalog_serves_metrics_on_its_metrics_port_only() -> Result<()> {
    let port = e2e::free_port();
    let listen = format!("127.0.0.1:{port}");
    let env = Env::new(Backend::Embedded);
    let c = env.start_with(&["--metrics-listen", &listen]);
    let client = e2e::http::blocking_client(Duration::from_secs(10));
    let api = client
        .get(format!("http://127.0.0.1:{}/metrics", c.port))
        .send()?;
    ensure!(
        api.status() == 404,
        "the API port's /metrics: {}",
        api.status()
    );
    let said = api.text()?;
    ensure!(said.contains("--metrics-listen"), "{said}");
    let metrics = client.get(format!("http://{listen}/offers")).send()?;
    ensure!(
        metrics.status() == 404,
        "the metrics port's /offers: {}",
        metrics.status()
    );
    let text = check("catalog", SocketAddr::from(([127, 0, 0, 1], port)))?;
    ensure!(
        text.contains(
            "catalog_http_requests_total{route=\"/metrics\",method=\"GET\",status=\"404\"}"
        ),
        "the API port's /metrics not counted as a 404:\n{text}"
    );
    drop(c);
    // And the whole catalog check on that port.
    let port = e2e::free_port();
    check_catalog(
        &["--metrics-listen", &format!("127.0.0.1:{port}")],
        Some(port),
    )
    .map(drop)
}

#[test]
fn promtool_accepts_the_aggregator_metrics() -> Result<()> {
    check_unreachable("aggregator", unreachable::AGGREGATOR, 2, Some("metrics")).map(drop)
}

/// resource-monitor serves `/metrics` as the ResourceSlice class controller.
#[test]
fn promtool_accepts_the_resource_monitor_metrics() -> Result<()> {
    check_unreachable(
        "resource-monitor",
        unreachable::RM_V1,
        1,
        Some("controller"),
    )
    .map(drop)
}

#[test]
fn promtool_accepts_the_orchestrator_metrics() -> Result<()> {
    check_unreachable("orchestrator", unreachable::ORCHESTRATOR, 1, None).map(drop)
}

#[test]
fn promtool_accepts_the_purchase_controller_metrics() -> Result<()> {
    check_unreachable(
        "purchase-controller",
        unreachable::PURCHASE_CONTROLLER,
        1,
        None,
    )
    .map(drop)
}

#[test]
fn promtool_accepts_the_peering_user_controller_metrics() -> Result<()> {
    check_unreachable(
        "peering-user-controller",
        unreachable::PEERING_USER_CONTROLLER,
        1,
        None,
    )
    .map(drop)
}

#[test]
fn promtool_accepts_the_service_controller_metrics() -> Result<()> {
    check_unreachable(
        "service-controller",
        unreachable::SERVICE_CONTROLLER,
        1,
        None,
    )
    .map(drop)
}

#[test]
fn promtool_accepts_the_market_autoscaler_metrics() -> Result<()> {
    check_unreachable("market-autoscaler", unreachable::MARKET_AUTOSCALER, 1, None).map(drop)
}

/// promtool itself, on an exposition it must refuse: a test that passes
/// because the linter says nothing about anything would prove nothing.
#[test]
fn promtool_refuses_what_breaks_the_metric_conventions() -> Result<()> {
    let bad = "# HELP x_sent_milliseconds Time.\n# TYPE x_sent_milliseconds gauge\nx_sent_milliseconds 1\n\
               # HELP x_errors Failed.\n# TYPE x_errors counter\nx_errors 1\n";
    let mut lint = Command::new(promtool()?)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    lint.stdin
        .take()
        .context("stdin")?
        .write_all(bad.as_bytes())?;
    let out = lint.wait_with_output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(!out.status.success(), "promtool accepted:\n{bad}");
    ensure!(
        said.contains("x_sent_milliseconds") && said.contains("x_errors"),
        "{said}"
    );
    Ok(())
}

/// The metric names of an exposition (Prometheus' text format): each
/// sample's, a histogram's `_bucket`, `_sum` and `_count` included.
fn exported_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// Every binary's real `/metrics` (as the promtool tests above start
/// them), then every panel of the chart's Grafana dashboards
/// (charts/liqo-broker/dashboards/*.json) and every templating query:
/// each metric they query is one some binary exports. A dashboard naming
/// a metric no binary serves shows an empty panel, which nobody notices
/// until the day it is needed.
#[test]
fn every_dashboard_panel_queries_exported_metrics() -> Result<()> {
    let mut exported = exported_names(&check_catalog(&[], None)?);
    for (binary, args, ports, role) in [
        ("aggregator", unreachable::AGGREGATOR, 2, Some("metrics")),
        (
            "resource-monitor",
            unreachable::RM_V1,
            1,
            Some("controller"),
        ),
        ("orchestrator", unreachable::ORCHESTRATOR, 1, None),
        (
            "purchase-controller",
            unreachable::PURCHASE_CONTROLLER,
            1,
            None,
        ),
        (
            "peering-user-controller",
            unreachable::PEERING_USER_CONTROLLER,
            1,
            None,
        ),
        (
            "service-controller",
            unreachable::SERVICE_CONTROLLER,
            1,
            None,
        ),
    ] {
        exported.extend(exported_names(&check_unreachable(
            binary, args, ports, role,
        )?));
    }
    exported.extend(exported_names(&autoscaler_world::exposition()?));

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/liqo-broker/dashboards");
    let mut missing = Vec::new();
    let mut dashboards = 0;
    let mut queries = 0;
    for entry in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        dashboards += 1;
        let file = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)
            .with_context(|| format!("{file}: not JSON"))?;
        for (what, expr) in dashboard::queries(&dashboard) {
            queries += 1;
            let names = promql::metric_names(&expr);
            ensure!(
                !names.is_empty() || expr.contains("__name__"),
                "{file}: {what}: no metric in {expr}"
            );
            for name in names {
                if !exported.contains(&name) {
                    missing.push(format!("{file}: {what}: {name} (in {expr})"));
                }
            }
        }
    }
    ensure!(
        dashboards >= 3 && queries > 0,
        "{dashboards} dashboards, {queries} queries in {}",
        dir.display()
    );
    ensure!(
        missing.is_empty(),
        "metrics no binary exports:\n{}\n--- exported:\n{}",
        missing.join("\n"),
        exported.into_iter().collect::<Vec<_>>().join(" ")
    );
    Ok(())
}

/// The parser the dashboard check relies on, on expressions whose metric
/// names are known: a parser finding none would pass every dashboard.
#[test]
fn promql_metric_names_leave_out_functions_labels_and_ranges() {
    let names = |e: &str| promql::metric_names(e);
    assert_eq!(
        names(
            r#"histogram_quantile(0.99, sum by (le, route) (rate(catalog_http_request_duration_seconds_bucket{namespace=~"$namespace", route!="x{y}"}[$__rate_interval])))"#
        ),
        ["catalog_http_request_duration_seconds_bucket"]
    );
    assert_eq!(
        names("sum(rate(a_total{status=~\"5..\"}[5m] offset 1h)) / on (pod) group_left(node) sum without (kind) (b:c) > bool 0"),
        ["a_total", "b:c"]
    );
    assert_eq!(
        names("max by (pod) (x_leader) and ignoring(instance) y"),
        ["x_leader", "y"]
    );
    assert!(names(r#"{__name__=~"x_.*"}"#).is_empty());
}

/// The queries of a Grafana dashboard, each with the panel (or templating
/// variable) it belongs to.
mod dashboard {
    use serde_json::Value;

    pub fn queries(dashboard: &Value) -> Vec<(String, String)> {
        let mut found = Vec::new();
        panels(&dashboard["panels"], &mut found);
        for variable in dashboard["templating"]["list"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let query = match &variable["query"] {
                Value::String(q) => q.as_str(),
                q => q["query"].as_str().unwrap_or_default(),
            };
            if variable["type"] != "query" || query.is_empty() {
                continue;
            }
            // label_values(<selector>, <label>): the selector's metric.
            let selector = query
                .strip_prefix("label_values(")
                .and_then(|q| q.rsplit_once(','))
                .map_or(query, |(selector, _)| selector);
            found.push((
                format!("variable {}", variable["name"]),
                selector.to_string(),
            ));
        }
        found
    }

    fn panels(list: &Value, found: &mut Vec<(String, String)>) {
        for panel in list.as_array().into_iter().flatten() {
            let title = format!("panel {:?}", panel["title"].as_str().unwrap_or_default());
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    found.push((title.clone(), expr.to_string()));
                }
            }
            // A collapsed row holds its panels.
            panels(&panel["panels"], found);
        }
    }
}

/// PromQL, as far as naming the metrics an expression selects.
mod promql {
    /// Aggregation modifiers and vector matching, each followed by a list
    /// of label names in parentheses.
    const LABEL_LISTS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    /// Words that are no metric.
    const KEYWORDS: &[&str] = &[
        "and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
    ];

    /// The metric names `expr` selects, in order: its identifiers, less
    /// function and aggregation names (an identifier before `(`),
    /// keywords, label matchers (`{…}`), ranges and subqueries (`[…]`),
    /// strings, numbers and durations, Grafana's variables (`$x`,
    /// `${x}`), and the label lists of by, without, on, ignoring,
    /// group_left and group_right.
    pub fn metric_names(expr: &str) -> Vec<String> {
        let chars: Vec<char> = expr.chars().collect();
        let mut names = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                '"' | '\'' | '`' => i = skip_string(&chars, i),
                '{' => i = skip_group(&chars, i, '{', '}'),
                '[' => i = skip_group(&chars, i, '[', ']'),
                '$' => {
                    i += 1;
                    if chars.get(i) == Some(&'{') {
                        i = skip_group(&chars, i, '{', '}');
                    } else {
                        while i < chars.len() && is_word(chars[i]) {
                            i += 1;
                        }
                    }
                }
                c if c.is_ascii_digit() || c == '.' => {
                    while i < chars.len() && (is_word(chars[i]) || chars[i] == '.') {
                        i += 1;
                    }
                }
                c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                    let start = i;
                    while i < chars.len() && is_word(chars[i]) {
                        i += 1;
                    }
                    let word: String = chars[start..i].iter().collect();
                    let mut next = i;
                    while next < chars.len() && chars[next].is_whitespace() {
                        next += 1;
                    }
                    // A call, or an aggregation whose modifier comes first
                    // (`sum by (le) (…)`).
                    let following: String =
                        chars[next..].iter().take_while(|c| is_word(**c)).collect();
                    let call = chars.get(next) == Some(&'(')
                        || (!LABEL_LISTS.contains(&word.as_str())
                            && ["by", "without"].contains(&following.as_str()));
                    if LABEL_LISTS.contains(&word.as_str()) {
                        if call {
                            i = skip_group(&chars, next, '(', ')');
                        }
                    } else if !call && !KEYWORDS.contains(&word.to_lowercase().as_str()) {
                        names.push(word);
                    }
                }
                _ => i += 1,
            }
        }
        names
    }

    fn is_word(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_' || c == ':'
    }

    /// The index after the string opening at `i`.
    fn skip_string(chars: &[char], i: usize) -> usize {
        let quote = chars[i];
        let mut j = i + 1;
        while j < chars.len() && chars[j] != quote {
            if chars[j] == '\\' && quote != '`' {
                j += 1;
            }
            j += 1;
        }
        j + 1
    }

    /// The index after the group opening at `i`, strings inside skipped
    /// (a label value may hold the closing character).
    fn skip_group(chars: &[char], i: usize, open: char, close: char) -> usize {
        let mut depth = 0;
        let mut j = i;
        while j < chars.len() {
            match chars[j] {
                '"' | '\'' | '`' => {
                    j = skip_string(chars, j);
                    continue;
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return j + 1;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        j
    }
}

/// market-autoscaler after one round of a MarketAutoscaler: its spend
/// gauges, labelled by currency, print nothing before an autoscaler has a
/// currency, so the idle binary of the promtool test above would not show
/// them. The round here: a catalog (no offers), a test API server with
/// the MarketAutoscaler and Purchase CRDs and the shipped RBAC, the
/// consumer's token Secret and one MarketAutoscaler in `liqo` (the
/// namespace the shipped Role reads tokens in), the autoscaler as its
/// ServiceAccount.
mod autoscaler_world {
    use anyhow::{Context, Result};
    use base64::Engine;
    use e2e::catalog::{Backend, Env};
    use e2e::Spawn;
    use kube_test_server::KubeApiServer;
    use serde_json::json;

    use crate::autoscaler_support::{autoscaler_crd, AUTOSCALERS, AUTOSCALER_USER};
    use crate::liqo_support::{NAMESPACES, SECRETS};
    use crate::purchase_controller_support::purchase_crd;

    pub fn exposition() -> Result<String> {
        let env = Env::new(Backend::Embedded);
        let catalog = e2e::buying::start(&env, &["--currency", "EUR", "--cost-period", "hour"]);
        let admin = e2e::buying::admin(&catalog);
        let token = e2e::buying::consumer(&catalog, &admin, "alice");

        let rt = tokio::runtime::Runtime::new()?;
        let kube = rt.block_on(KubeApiServer::start())?;
        kube.register_crd_file(&autoscaler_crd())?;
        kube.register_crd_file(&purchase_crd())?;
        e2e::rbac::load_shipped(&kube)?;
        kube.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "liqo"}}),
        );
        kube.apply(
            SECRETS,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "catalog-token", "namespace": "liqo"},
                   "data": {"token": base64::engine::general_purpose::STANDARD.encode(&token)}}),
        );
        kube.create(
            AUTOSCALERS,
            json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "MarketAutoscaler",
                   "metadata": {"name": "metrics", "namespace": "liqo"},
                   "spec": {"catalogURL": catalog.url(""),
                            "credentialsSecretRef": {"name": "catalog-token", "key": "token"},
                            "pods": {"namespaces": ["liqo"]},
                            "offers": {"selector": {"matchLabels": {"region": "eu"}}},
                            "limits": {"currency": "EUR", "maxSpendPerHour": "10"}}}),
        )
        .context("the MarketAutoscaler")?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        kube.write_kubeconfig_as(&kubeconfig, AUTOSCALER_USER)?;
        let (_autoscaler, bound) = Spawn::new("market-autoscaler")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--http-listen", "127.0.0.1:0"])
            .env("POD_NAMESPACE", "liqo")
            .start_announced(1)?;
        let addr = bound.addr(None);
        // The first round's end: the spend gauges appear.
        e2e::contracts::wait_for("market-autoscaler's spend gauges", || {
            let (_, text) = super::scrape(addr, None).ok()?;
            text.contains("market_autoscaler_spend_per_hour{")
                .then_some(())
        });
        super::check("market-autoscaler", addr)
    }
}
