//! `--log-level` (issue 46): every binary that takes `--log-format` takes it
//! beside, with its `<BINARY>_LOG_LEVEL` variable, documented in `--help`;
//! `debug` shows debug lines the default leaves out; a level that is not
//! one is refused at start; and a JSON line has its message at the top
//! level.

use std::path::Path;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use e2e::Spawn;

/// Every binary with `--log-format`, and its variables' prefix.
const BINARIES: [(&str, &str); 9] = [
    ("catalog", "CATALOG"),
    ("resource-monitor", "RESOURCE_MONITOR"),
    ("aggregator", "AGGREGATOR"),
    ("provider-agent", "PROVIDER_AGENT"),
    ("peering-user-controller", "PEERING_USER_CONTROLLER"),
    ("purchase-controller", "PURCHASE_CONTROLLER"),
    ("service-controller", "SERVICE_CONTROLLER"),
    ("orchestrator", "ORCHESTRATOR"),
    ("market-autoscaler", "MARKET_AUTOSCALER"),
];

#[test]
fn log_level_is_documented_and_checked_by_every_binary() -> Result<()> {
    for (binary, prefix) in BINARIES {
        let out = Spawn::new(binary).arg("--help").output()?;
        ensure!(out.status.success(), "{binary} --help: {}", out.status);
        let help = String::from_utf8_lossy(&out.stdout);
        for needle in [
            "--log-level <LEVEL>".to_string(),
            format!("[env: {prefix}_LOG_LEVEL"),
            "RUST_LOG, when set, wins".to_string(),
        ] {
            ensure!(
                help.contains(&needle),
                "{binary} --help lacks {needle}:\n{help}"
            );
        }
        let out = Spawn::new(binary).args(["--log-level", "debgu"]).output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(
            !out.status.success() && stderr.contains("--log-level") && stderr.contains("debgu"),
            "{binary} --log-level debgu: {}\n{stderr}",
            out.status
        );
    }
    Ok(())
}

/// The aggregator with `--log-level debug` and with the default, `RUST_LOG`
/// unset, each for two seconds beside an upstream that refuses
/// connections: debug lines in the first log only, and every line one
/// JSON object with its `message` at the top level.
#[test]
fn log_level_debug_shows_debug_lines() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let run = |level: Option<&str>, log: &Path| -> Result<()> {
        let mut spawn = Spawn::new("aggregator")
            .args(["--upstream", &format!("a=127.0.0.1:{}", e2e::free_port())])
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .args(["--log-format", "json"])
            .env_remove("RUST_LOG")
            .env_remove("AGGREGATOR_LOG_LEVEL")
            .stderr_to(std::fs::File::create(log)?);
        if let Some(level) = level {
            spawn = spawn.args(["--log-level", level]);
        }
        let (mut child, _bound) = spawn.start_announced(2)?;
        std::thread::sleep(Duration::from_secs(2));
        child.terminate(Duration::from_secs(10))?;
        Ok(())
    };
    let (debug, default) = (dir.path().join("debug.log"), dir.path().join("info.log"));
    run(Some("debug"), &debug)?;
    run(None, &default)?;
    let levels = |path: &Path| -> Result<Vec<String>> {
        let text = std::fs::read_to_string(path)?;
        text.lines()
            .map(|l| {
                let line: serde_json::Value =
                    serde_json::from_str(l).with_context(|| format!("not JSON: {l}"))?;
                ensure!(
                    line["message"].is_string() && line.get("fields").is_none(),
                    "not a flat line: {l}"
                );
                Ok(line["level"].as_str().unwrap_or_default().to_string())
            })
            .collect()
    };
    let (debug, default) = (levels(&debug)?, levels(&default)?);
    ensure!(debug.iter().any(|l| l == "DEBUG"), "{debug:?}");
    ensure!(default.iter().any(|l| l == "INFO"), "{default:?}");
    ensure!(!default.iter().any(|l| l == "DEBUG"), "{default:?}");
    Ok(())
}
