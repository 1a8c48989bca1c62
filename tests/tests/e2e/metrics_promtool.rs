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
/// say, `<binary>_build_info` at 1, and OpenMetrics for Prometheus.
fn check(binary: &str, addr: SocketAddr) -> Result<()> {
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

    let (kind, text) = scrape(addr, Some(PROMETHEUS_ACCEPT))?;
    ensure!(
        kind.starts_with("application/openmetrics-text; version=1.0.0"),
        "{binary}: {kind} for Prometheus' Accept header"
    );
    ensure!(text.ends_with("# EOF\n"), "{binary}: OpenMetrics:\n{text}");
    Ok(())
}

/// Start `binary` with one of `controllers_unreachable_api`'s argument
/// lines (every server it talks to refusing connections) and check the
/// `/metrics` it announces for `role` once it has announced `ports` ports.
fn check_unreachable(binary: &str, args: &str, ports: usize, role: Option<&str>) -> Result<()> {
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

#[test]
fn promtool_accepts_the_catalog_metrics() -> Result<()> {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let token = c.login(&provider(1));
    c.put_offer("a", &thesis_offer(), &token);
    c.get("/offer/missing").expect_error(404);
    // A subscriber's first list: the feed's counters and histogram.
    let mut feed = e2e::ws::FeedClient::connect(c.port, "")?;
    feed.next_event(Instant::now() + e2e::EVENTUALLY)?;
    check("catalog", SocketAddr::from(([127, 0, 0, 1], c.port)))
}

#[test]
fn promtool_accepts_the_aggregator_metrics() -> Result<()> {
    check_unreachable("aggregator", unreachable::AGGREGATOR, 2, Some("metrics"))
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
}

#[test]
fn promtool_accepts_the_orchestrator_metrics() -> Result<()> {
    check_unreachable("orchestrator", unreachable::ORCHESTRATOR, 1, None)
}

#[test]
fn promtool_accepts_the_purchase_controller_metrics() -> Result<()> {
    check_unreachable(
        "purchase-controller",
        unreachable::PURCHASE_CONTROLLER,
        1,
        None,
    )
}

#[test]
fn promtool_accepts_the_peering_user_controller_metrics() -> Result<()> {
    check_unreachable(
        "peering-user-controller",
        unreachable::PEERING_USER_CONTROLLER,
        1,
        None,
    )
}

#[test]
fn promtool_accepts_the_service_controller_metrics() -> Result<()> {
    check_unreachable(
        "service-controller",
        unreachable::SERVICE_CONTROLLER,
        1,
        None,
    )
}

#[test]
fn promtool_accepts_the_market_autoscaler_metrics() -> Result<()> {
    check_unreachable("market-autoscaler", unreachable::MARKET_AUTOSCALER, 1, None)
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
