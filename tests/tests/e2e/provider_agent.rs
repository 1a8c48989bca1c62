//! The provider agent between the real binaries: `resource-monitor` serving
//! a static resource file over gRPC, the `catalog` on the embedded store,
//! and `provider-agent` linking them. A WebSocket subscriber of the
//! catalog's feed watches the plan follow the file, across a catalog
//! restart and a resource-monitor restart; refused credentials, someone
//! else's offer and bad flags stop the agent with a clear message.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use e2e::ws::FeedClient;
use e2e::{bin_path, free_port, Child, Spawn, EVENTUALLY};
use serde_json::{json, Value};

// Every wait here is `e2e::EVENTUALLY`: for a change of the file to reach a
// subscriber too (the 2 s is a latency figure for a benchmark, not a
// deadline for a test sharing two cores with others), for start-up and for
// recovery after an outage.

const OFFER: &str = "live-offer";
const PLAN: &str = "standard";

fn credentials(cluster: &str, token: &str) -> Value {
    json!({
        "clusterID": cluster,
        "clusterName": format!("{cluster}-name"),
        "authURL": format!("https://{cluster}.example:6443"),
        "token": token,
    })
}

/// Write a credentials file as an operator would: readable by its owner only.
fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Replace the resource file the way an editor or a ConfigMap does: a new
/// file renamed over the old one.
fn set_resources(file: &Path, yaml: &str) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, yaml).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// The catalog on the port it announces; its port.
fn start_catalog(data_dir: &Path) -> (Child, u16) {
    let (child, bound) = catalog(data_dir, "127.0.0.1:0")
        .start_announced(1)
        .expect("start catalog");
    (child, bound.port(None))
}

/// The catalog again on `port`, deliberately: the agent knows the catalog
/// by its URL, and a restarted catalog must be found there.
fn restart_catalog(port: u16, data_dir: &Path) -> Child {
    catalog(data_dir, &format!("127.0.0.1:{port}"))
        .start_listening(port)
        .expect("restart catalog")
}

fn catalog(data_dir: &Path, listen: &str) -> Spawn {
    Spawn::new("catalog")
        .args(["--listen", listen, "--shutdown-timeout", "2s"])
        .arg("--data-dir")
        .arg(data_dir)
}

/// `resource-monitor` over `file` on the port it announces; its port.
fn start_resource_monitor(file: &Path) -> (Child, u16) {
    let (child, bound) = resource_monitor(file, "127.0.0.1:0")
        .start_announced(1)
        .expect("start resource-monitor");
    (child, bound.port(None))
}

/// `resource-monitor` on `port`, deliberately: the agent was told where
/// its chain is before the chain existed (or restarted).
fn resource_monitor_on(port: u16, file: &Path) -> Child {
    resource_monitor(file, &format!("127.0.0.1:{port}"))
        .start_listening(port)
        .expect("start resource-monitor")
}

fn resource_monitor(file: &Path, listen: &str) -> Spawn {
    Spawn::new("resource-monitor")
        .arg("--source")
        .arg(format!("static:{}", file.display()))
        .args(["--listen", listen])
}

fn http() -> reqwest::blocking::Client {
    e2e::http::blocking_client(Duration::from_secs(10))
}

/// Authenticate `creds` to the catalog on `port`; the bearer token.
fn login(port: u16, creds: &Value) -> String {
    let r = http()
        .post(format!("http://127.0.0.1:{port}/authenticate"))
        .json(creds)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "authenticate");
    r.json::<Value>().unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string()
}

fn put_offer(port: u16, id: &str, offer: &Value, token: &str) {
    let r = http()
        .post(format!("http://127.0.0.1:{port}/offer/{id}"))
        .bearer_auth(token)
        .json(offer)
        .send()
        .unwrap();
    assert!(r.status().is_success(), "POST /offer/{id}: {}", r.status());
}

/// The offer a provider made by hand: the agent must change only the
/// resources of [`PLAN`] and keep the rest.
fn hand_made_offer() -> Value {
    json!({
        "name": "Hand-made live offer", "type": "compute", "description": "Kept as written.",
        "plans": {
            PLAN: { "name": "plan-standard", "cost": "1.0", "resources": { "cpu": "1" } },
            "premium": { "planName": "plan-premium", "planID": "premium", "cost": "9.5",
                         "resources": { "cpu": "64", "memory": "256Gi" } }
        }
    })
}

/// The parts of the offer the agent must never touch.
fn assert_rest_kept(offer: &Value) {
    assert_eq!(offer["name"], "Hand-made live offer", "{offer}");
    assert_eq!(offer["type"], "compute");
    assert_eq!(offer["description"], "Kept as written.");
    assert_eq!(offer["plans"][PLAN]["name"], "plan-standard");
    assert_eq!(offer["plans"][PLAN]["cost"], "1.0");
    // The catalog stamps who last changed each plan: the agent never
    // changes the premium plan, so it keeps the provider's stamp.
    let mut premium = offer["plans"]["premium"].clone();
    let stamps = premium
        .as_object_mut()
        .map(|p| (p.remove("updatedAt"), p.remove("updatedBy")));
    assert_eq!(
        premium,
        json!({ "name": "plan-premium", "planID": "premium", "cost": "9.5",
                "resources": { "cpu": "64", "memory": "256Gi" } })
    );
    assert_eq!(stamps.and_then(|s| s.1), Some(json!("provider")), "{offer}");
}

/// The plan the agent updated carries its stamp (its `User-Agent` names it).
fn assert_stamped_by_agent(offer: &Value) {
    let plan = &offer["plans"][PLAN];
    assert_eq!(plan["updatedBy"], "provider-agent", "{offer}");
    assert_eq!(plan["updatedAt"], offer["updatedAt"], "{offer}");
}

/// Read the feed until a snapshot holds [`OFFER`] with [`PLAN`]'s
/// resources equal to `want`; that offer. Fails at `deadline`, naming the
/// last value seen.
fn wait_for_plan(feed: &mut FeedClient, want: &Value, deadline: Instant) -> Value {
    let mut last = Value::Null;
    loop {
        let m = feed.next_by(deadline).unwrap_or_else(|e| {
            panic!("the feed never showed {PLAN} = {want} ({e}); last seen: {last}")
        });
        if m["type"] != "snapshot" {
            continue;
        }
        let offer = m["offers"]
            .as_array()
            .and_then(|offers| offers.iter().find(|o| o["id"] == OFFER))
            .cloned()
            .unwrap_or(Value::Null);
        last = offer["plans"][PLAN]["resources"].clone();
        if &last == want {
            return offer;
        }
    }
}

fn start_agent(catalog_port: u16, creds: &Path, reader: &str) -> Child {
    agent(catalog_port, creds, reader)
        .start()
        .expect("start provider-agent")
}

/// [`start_agent`], its log (stderr) into `log`.
fn start_agent_logged(catalog_port: u16, creds: &Path, reader: &str, log: &Path) -> Child {
    agent(catalog_port, creds, reader)
        .stderr_to(std::fs::File::create(log).expect("agent log"))
        .start()
        .expect("start provider-agent")
}

fn agent(catalog_port: u16, creds: &Path, reader: &str) -> Spawn {
    Spawn::new("provider-agent")
        .args(["--catalog", &format!("http://127.0.0.1:{catalog_port}")])
        .arg("--credentials")
        .arg(creds)
        .args(["--offer", OFFER, "--plan", PLAN, "--reader", reader])
        .args(["--debounce", "200ms", "--max-backoff", "1s"])
        .env("RUST_LOG", "info")
}

/// The agent's log so far, in bytes: where [`wait_for_retry`] starts.
fn log_len(log: &Path) -> usize {
    std::fs::metadata(log)
        .map(|m| m.len() as usize)
        .unwrap_or(0)
}

/// Wait until the agent logged, after byte `from` of `log`, that it
/// failed `what` ("cannot update the catalog", "cannot read the resource
/// chain"), backed off and failed again (`failures=2`): it tried, did not
/// give up, and is still running.
fn wait_for_retry(agent: &mut Child, log: &Path, from: usize, what: &str) {
    let needle = format!("{what}; retrying");
    wait_for_line(
        agent,
        log,
        from,
        &format!("a second {what:?} attempt"),
        |l| l.contains(&needle) && l.contains("failures=2"),
    );
}

/// Wait until the agent logged, after byte `from` of `log`, a line that
/// `matches` (`what` names it in the failure message), and is still
/// running.
fn wait_for_line(
    agent: &mut Child,
    log: &Path,
    from: usize,
    what: &str,
    matches: impl Fn(&str) -> bool,
) {
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        let text = std::fs::read(log).unwrap_or_default();
        let after = String::from_utf8_lossy(text.get(from..).unwrap_or_default()).into_owned();
        if after.lines().any(&matches) {
            break;
        }
        if let Some(status) = agent.try_wait().unwrap() {
            panic!("the agent exited ({status}) before logging {what}:\n{after}");
        }
        assert!(
            Instant::now() < deadline,
            "the agent did not log {what} within {EVENTUALLY:?}:\n{after}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        agent.try_wait().unwrap().is_none(),
        "the agent exited after logging {what}"
    );
}

#[test]
fn the_feed_follows_the_file_across_a_catalog_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("catalog-data");
    let resources = dir.path().join("resources.yaml");
    std::fs::write(&resources, "cpu: 4\nmemory: 8Gi\n").unwrap();
    let creds = credentials("provider-e2e", "peering-secret-1");
    let creds_file = write_json(dir.path(), "credentials.json", &creds);

    let (_monitor, monitor_port) = start_resource_monitor(&resources);
    let (mut catalog, catalog_port) = start_catalog(&data_dir);
    let token = login(catalog_port, &creds);
    put_offer(catalog_port, OFFER, &hand_made_offer(), &token);

    let mut feed = FeedClient::connect(catalog_port, "?mode=snapshot").unwrap();
    let agent_log = dir.path().join("agent.log");
    let mut agent = start_agent_logged(
        catalog_port,
        &creds_file,
        &format!("grpc:127.0.0.1:{monitor_port}"),
        &agent_log,
    );

    // On start, the agent publishes what the chain offers.
    let offer = wait_for_plan(
        &mut feed,
        &json!({"cpu": "4", "memory": "8Gi"}),
        Instant::now() + EVENTUALLY,
    );
    assert_rest_kept(&offer);

    // A change of the file reaches the subscriber.
    let changed = Instant::now();
    set_resources(&resources, "cpu: 6\nmemory: 8Gi\n");
    let offer = wait_for_plan(
        &mut feed,
        &json!({"cpu": "6", "memory": "8Gi"}),
        changed + EVENTUALLY,
    );
    assert_rest_kept(&offer);
    assert_stamped_by_agent(&offer);
    let version_before_restart = offer["version"].as_u64().unwrap();

    // The catalog crashes; the file changes while it is down.
    let from = log_len(&agent_log);
    catalog.kill();
    drop(feed);
    set_resources(&resources, "cpu: 5\nmemory: 8Gi\n");
    // The agent tries, fails, backs off and tries again (its log says so).
    wait_for_retry(&mut agent, &agent_log, from, "cannot update the catalog");

    let mut catalog = restart_catalog(catalog_port, &data_dir);
    let mut feed = FeedClient::connect(catalog_port, "?mode=snapshot").unwrap();
    let first = feed.expect("snapshot", EVENTUALLY).unwrap();
    let offer = first["offers"]
        .as_array()
        .and_then(|offers| offers.iter().find(|o| o["id"] == OFFER))
        .cloned()
        .unwrap_or_else(|| panic!("the offer is gone after the restart: {first}"));
    // Nothing was lost: the offer as it was (or already caught up).
    assert_rest_kept(&offer);
    assert!(
        offer["version"].as_u64().unwrap() >= version_before_restart,
        "{offer}"
    );
    let plan = &offer["plans"][PLAN]["resources"];
    assert!(
        *plan == json!({"cpu": "6", "memory": "8Gi"})
            || *plan == json!({"cpu": "5", "memory": "8Gi"}),
        "unexpected plan after the restart: {plan}"
    );

    // The agent catches up by itself with the change it could not write...
    let offer = wait_for_plan(
        &mut feed,
        &json!({"cpu": "5", "memory": "8Gi"}),
        Instant::now() + EVENTUALLY,
    );
    assert_rest_kept(&offer);

    // ...and follows the next change again.
    let changed = Instant::now();
    set_resources(&resources, "cpu: 3\nmemory: 16Gi\nnvidia.com/gpu: 1\n");
    let offer = wait_for_plan(
        &mut feed,
        &json!({"cpu": "3", "memory": "16Gi", "nvidia.com/gpu": "1"}),
        changed + EVENTUALLY,
    );
    assert_rest_kept(&offer);

    // A clean stop on SIGTERM.
    let status = agent.terminate(Duration::from_secs(10)).unwrap();
    assert!(
        status.success(),
        "the agent exited with {status} on SIGTERM"
    );
    catalog.kill();
}

#[test]
fn the_agent_waits_for_the_chain_and_catches_up_after_it_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let resources = dir.path().join("resources.yaml");
    std::fs::write(&resources, "cpu: 8\n").unwrap();
    let creds = credentials("provider-chain", "peering-secret-2");
    // TOML this time: the agent takes either.
    let creds_file = dir.path().join("credentials.toml");
    let toml: String = ["clusterID", "clusterName", "authURL", "token"]
        .iter()
        .map(|k| format!("{k} = {}\n", creds[k]))
        .collect();
    std::fs::write(&creds_file, toml).unwrap();
    let owner_only = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&creds_file, owner_only).unwrap();

    let (_catalog, catalog_port) = start_catalog(&dir.path().join("catalog-data"));
    let token = login(catalog_port, &creds);
    put_offer(catalog_port, OFFER, &hand_made_offer(), &token);
    let mut feed = FeedClient::connect(catalog_port, "?mode=snapshot").unwrap();

    // The agent starts before the chain it follows: a known port,
    // deliberately (nothing can announce it yet).
    let monitor_port = free_port();
    let agent_log = dir.path().join("agent.log");
    let mut agent = start_agent_logged(
        catalog_port,
        &creds_file,
        &format!("grpc:127.0.0.1:{monitor_port}"),
        &agent_log,
    );
    wait_for_retry(&mut agent, &agent_log, 0, "cannot read the resource chain");
    let mut monitor = resource_monitor_on(monitor_port, &resources);
    wait_for_plan(&mut feed, &json!({"cpu": "8"}), Instant::now() + EVENTUALLY);

    // The chain goes away; the file changes; the chain comes back with it.
    let from = log_len(&agent_log);
    monitor.kill();
    set_resources(&resources, "cpu: 2\n");
    // The agent sees the chain go and keeps reconnecting (its log says so).
    wait_for_line(&mut agent, &agent_log, from, "the chain lost", |l| {
        l.contains("lost the upstream; reconnecting")
    });
    let _monitor = resource_monitor_on(monitor_port, &resources);

    let offer = wait_for_plan(&mut feed, &json!({"cpu": "2"}), Instant::now() + EVENTUALLY);
    assert_rest_kept(&offer);
    agent.kill();
}

#[test]
fn the_agent_follows_a_credential_rotation_through_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let resources = dir.path().join("resources.yaml");
    std::fs::write(&resources, "cpu: 4\n").unwrap();
    let creds = credentials("provider-rotating", "peering-secret-old");
    let creds_file = write_json(dir.path(), "credentials.json", &creds);

    let (_catalog, catalog_port) = start_catalog(&dir.path().join("catalog-data"));
    let token = login(catalog_port, &creds);
    put_offer(catalog_port, OFFER, &hand_made_offer(), &token);
    let mut feed = FeedClient::connect(catalog_port, "?mode=snapshot").unwrap();
    let (_monitor, monitor_port) = start_resource_monitor(&resources);
    let mut agent = start_agent(
        catalog_port,
        &creds_file,
        &format!("grpc:127.0.0.1:{monitor_port}"),
    );
    wait_for_plan(&mut feed, &json!({"cpu": "4"}), Instant::now() + EVENTUALLY);

    // The operator rotates the credentials and updates the file; the
    // agent's token is retired at once.
    let mut rotation = creds.clone();
    rotation["newToken"] = json!("peering-secret-new");
    let r = http()
        .post(format!(
            "http://127.0.0.1:{catalog_port}/authenticate/rotate"
        ))
        .json(&rotation)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "rotate");
    let mut rotated = creds.clone();
    rotated["token"] = json!("peering-secret-new");
    write_json(dir.path(), "credentials.json", &rotated);

    // The next change is written with the file's new credentials.
    set_resources(&resources, "cpu: 6\n");
    let offer = wait_for_plan(&mut feed, &json!({"cpu": "6"}), Instant::now() + EVENTUALLY);
    assert_rest_kept(&offer);
    assert!(
        agent.try_wait().unwrap().is_none(),
        "the agent stopped instead of taking the rotated credentials"
    );
    agent.kill();
}

/// Run `provider-agent` with `args` until it exits (killed after
/// [`EVENTUALLY`]):
/// its status and stderr.
fn run_agent(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(bin_path("provider-agent"))
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start provider-agent");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let deadline = Instant::now() + EVENTUALLY;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("provider-agent {args:?} did not exit within {EVENTUALLY:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, reader.join().unwrap())
}

#[test]
fn refused_credentials_and_someone_elses_offer_stop_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let resources = dir.path().join("resources.yaml");
    std::fs::write(&resources, "cpu: 4\n").unwrap();
    let reader = format!("static:{}", resources.display());
    let (_catalog, catalog_port) = start_catalog(&dir.path().join("catalog-data"));
    let catalog_url = format!("http://127.0.0.1:{catalog_port}");

    // The cluster ID is registered with one secret; the agent has another.
    let owner = credentials("provider-owner", "the-right-secret");
    let token = login(catalog_port, &owner);
    put_offer(catalog_port, OFFER, &hand_made_offer(), &token);
    let impostor = credentials("provider-owner", "a-wrong-secret-value");
    let impostor_file = write_json(dir.path(), "impostor.json", &impostor);
    let (status, stderr) = run_agent(&[
        "--catalog",
        &catalog_url,
        "--credentials",
        impostor_file.to_str().unwrap(),
        "--offer",
        OFFER,
        "--plan",
        PLAN,
        "--reader",
        &reader,
    ]);
    assert!(!status.success(), "refused credentials must fail the agent");
    assert!(
        stderr.contains("refused the credentials of cluster provider-owner"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("a-wrong-secret-value"),
        "the secret was printed: {stderr}"
    );

    // Valid credentials of another provider: the offer is not theirs.
    let other = credentials("provider-other", "other-secret");
    let other_file = write_json(dir.path(), "other.json", &other);
    let (status, stderr) = run_agent(&[
        "--catalog",
        &catalog_url,
        "--credentials",
        other_file.to_str().unwrap(),
        "--offer",
        OFFER,
        "--plan",
        PLAN,
        "--reader",
        &reader,
    ]);
    assert!(
        !status.success(),
        "someone else's offer must fail the agent"
    );
    assert!(stderr.contains("belongs to another provider"), "{stderr}");

    // Its own offer that does not exist, without leave to create it.
    let (status, stderr) = run_agent(&[
        "--catalog",
        &catalog_url,
        "--credentials",
        other_file.to_str().unwrap(),
        "--offer",
        "not-there",
        "--plan",
        PLAN,
        "--reader",
        &reader,
    ]);
    assert!(!status.success());
    assert!(
        stderr.contains("offer not-there does not exist") && stderr.contains("--plan-cost"),
        "{stderr}"
    );

    // Nothing changed in the owner's offer.
    let r = http()
        .get(format!("{catalog_url}/offer/{OFFER}"))
        .send()
        .unwrap();
    let offer: Value = r.json().unwrap();
    assert_rest_kept(&offer);
    assert_eq!(offer["plans"][PLAN]["resources"], json!({"cpu": "1"}));
    assert_eq!(offer["version"], 1);
}

#[test]
fn configuration_errors_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let resources = dir.path().join("resources.yaml");
    std::fs::write(&resources, "cpu: 4\n").unwrap();
    let reader = format!("static:{}", resources.display());
    let creds_file = write_json(dir.path(), "creds.json", &credentials("c1", "s3cret"));
    let creds = creds_file.to_str().unwrap();
    // Nothing listens here (a port handed out to this test alone):
    // configuration errors come before any contact.
    let dead = free_port();
    let catalog = format!("http://127.0.0.1:{dead}");

    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--catalog",
                &catalog,
                "--credentials",
                "/nonexistent/creds.json",
                "--offer",
                OFFER,
                "--plan",
                PLAN,
                "--reader",
                &reader,
            ],
            "/nonexistent/creds.json",
        ),
        (
            &[
                "--catalog",
                &catalog,
                "--credentials",
                creds,
                "--offer",
                "bad id",
                "--plan",
                PLAN,
                "--reader",
                &reader,
            ],
            "--offer",
        ),
        (
            &[
                "--catalog",
                "ftp://x",
                "--credentials",
                creds,
                "--offer",
                OFFER,
                "--plan",
                PLAN,
                "--reader",
                &reader,
            ],
            "--catalog",
        ),
        (
            &[
                "--catalog",
                &catalog,
                "--credentials",
                creds,
                "--offer",
                OFFER,
                "--plan",
                PLAN,
                "--reader",
                "magic",
            ],
            "--reader",
        ),
        (
            &[
                "--catalog",
                &catalog,
                "--credentials",
                creds,
                "--offer",
                OFFER,
                "--plan",
                PLAN,
                "--reader",
                "static:/nonexistent/r.yaml",
            ],
            "/nonexistent/r.yaml",
        ),
        (
            &[
                "--catalog",
                &catalog,
                "--credentials",
                creds,
                "--offer",
                OFFER,
                "--plan",
                PLAN,
                "--reader",
                &reader,
                "--plan-cost=-3",
            ],
            "--plan-cost",
        ),
        (
            &[
                "--catalog",
                &catalog,
                "--credentials",
                creds,
                "--offer",
                OFFER,
                "--plan",
                PLAN,
            ],
            "--reader",
        ),
        (
            &[
                "--catalog",
                &catalog,
                "--credentials",
                creds,
                "--offer",
                OFFER,
                "--plan",
                PLAN,
                "--reader",
                &reader,
                "--debounce",
                "soon",
            ],
            "--debounce",
        ),
    ];
    for (args, named) in cases {
        let (status, stderr) = run_agent(args);
        assert!(!status.success(), "{args:?} should fail");
        assert!(
            stderr.contains(named),
            "{args:?}: the error does not name {named}: {stderr}"
        );
    }

    let (status, stderr) = run_agent(&[
        "--catalog",
        &catalog,
        "--credentials",
        creds,
        "--offer",
        OFFER,
        "--plan",
        PLAN,
        "--reader",
        &reader,
        "--check",
    ]);
    assert!(
        status.success(),
        "--check on a valid configuration: {stderr}"
    );

    let out = Spawn::new("provider-agent").arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--catalog",
        "--credentials",
        "--offer",
        "--plan",
        "--reader",
        "--config",
        "--originator",
        "--debounce",
        "PROVIDER_AGENT_CATALOG",
    ] {
        assert!(help.contains(flag), "--help does not mention {flag}");
    }
}
