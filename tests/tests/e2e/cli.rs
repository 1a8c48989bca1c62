//! `brokerctl`, the real binary, against the real catalog: a provider
//! publishes an offer from YAML (and a refused file names its field), a
//! consumer lists with filters, shows an offer, reserves, buys, lists and
//! reads its contracts, in tables and in `-o json|yaml`, and every outcome
//! exits with its documented code (docs/cli.md). Then `purchase follow`
//! against a Kubernetes API test server whose Purchase status the test
//! writes as the purchase-controller would: each change printed, Ready
//! exits 0, a failed Purchase 6, a timeout 7, a missing one 3. Last, the
//! real kubectl runs it as its plugin `kubectl broker` (docs/cli.md), with
//! brokerctl's output and exit codes.
//!
//! One catalog serves the whole first test and one API server the second,
//! so the CLI's many runs cost process starts, not servers.
//!
//! Contexts (issue 46): `config set-context` and `use-context` write the
//! config file, commands then reach the context's catalog with its token
//! file, flags and variables win over it, and a token others may read is
//! refused; `-o wide` adds columns, `--no-headers` drops the header, `-v`
//! shows each request and never the token.
//!
//! Then what a hostile server does to it (issue 41): a fake catalog whose
//! every string carries terminal escapes (the real catalog refuses them)
//! and every output path shows them escaped; a fake API server answering
//! `purchase follow` a 128 MiB Purchase, refused after a bounded read.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use e2e::buying;
use e2e::catalog::{provider, Backend, Catalog, Env};
use e2e::{bin_path, Spawn};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::liqo_support;
use crate::purchase_controller_support::{purchase_crd, runtime, PURCHASES, TEAM};

/// What one run of the CLI did.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    #[track_caller]
    fn ok(self) -> String {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self.stdout
    }

    #[track_caller]
    fn json(self) -> Value {
        let out = self.ok();
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("-o json is not JSON ({e}): {out}"))
    }

    #[track_caller]
    fn fails(self, code: i32) -> String {
        assert_eq!(
            self.code, code,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        assert!(
            self.stdout.is_empty(),
            "a failure prints nothing on stdout: {}",
            self.stdout
        );
        self.stderr
    }
}

/// `brokerctl args…` against catalog `c`, with `env` (e.g. the token).
fn brokerctl(c: &Catalog, env: &[(&str, &str)], args: &[&str]) -> Run {
    brokerctl_at(&c.url(""), env, args)
}

/// `brokerctl args…` against the catalog at `url`.
fn brokerctl_at(url: &str, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut spawn = Spawn::new("brokerctl")
        .env_remove("BROKERCTL_TOKEN")
        .env_remove("BROKERCTL_TOKEN_FILE")
        .env_remove("BROKERCTL_CREDENTIALS")
        .env_remove("BROKERCTL_OUTPUT")
        .env_remove("BROKERCTL_CONTEXT")
        .env_remove("BROKERCTL_NO_HEADERS")
        // brokerctl's own level (warnings; -v for more): its stderr is
        // compared below, and Spawn would set RUST_LOG=info.
        .env_remove("RUST_LOG")
        // No config file: a developer's own contexts stay out of it.
        .env("BROKERCTL_CONFIG", "/nonexistent/brokerctl/config.yaml")
        .env("BROKERCTL_CATALOG_URL", url)
        .args(args);
    for (k, v) in env {
        spawn = spawn.env(k, v);
    }
    let out = spawn.output().expect("run brokerctl");
    Run {
        code: out.status.code().expect("brokerctl exited, not killed"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A file only its owner may read (credentials files must be).
fn private_file(dir: &Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}

const GPU_OFFER: &str = "\
id: gpu-1
name: GPU nodes
type: gpu
description: Spare GPUs.
labels:
  region: eu-west-1
plans:
  small:
    name: small
    cost: \"1.10\"
    resources:
      cpu: \"4\"
      memory: 16Gi
      nvidia.com/gpu: \"1\"
";

#[test]
fn cli_publishes_lists_reserves_buys_and_reads_contracts() {
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &[]);
    // A second provider's offer `compute`: small {cpu 2, memory 4Gi}, large {…, 32Gi}.
    let compute_owner = buying::publish(&c, 2, "compute");
    let consumer = buying::consumer(&c, &buying::admin(&c), "alice");
    let as_consumer = [("BROKERCTL_TOKEN", consumer.as_str())];
    let dir = tempfile::tempdir().unwrap();

    // A provider publishes from YAML with its credentials file; the id is the file's.
    let creds = private_file(dir.path(), "creds.json", &provider(1).to_string());
    let offer = private_file(dir.path(), "gpu.yaml", GPU_OFFER);
    let out = brokerctl(
        &c,
        &[],
        &["--credentials", &creds, "offers", "publish", "-f", &offer],
    )
    .ok();
    assert_eq!(out, "offer gpu-1 created (version 1)\n");
    assert_eq!(
        c.get("/offer/gpu-1").json["plans"]["small"]["resources"]["memory"],
        "16Gi"
    );

    // A file the catalog refuses: its message, naming the field; nothing changed.
    let bad = private_file(dir.path(), "bad.yaml", &GPU_OFFER.replace("16Gi", "lots"));
    let err = brokerctl(
        &c,
        &[],
        &["--credentials", &creds, "offers", "publish", "-f", &bad],
    )
    .fails(1);
    assert!(err.contains("plans.small.resources.memory"), "{err}");
    assert_eq!(c.get("/offer/gpu-1").json["version"], 1);
    // Another provider's offer is not this provider's to replace.
    let theirs = private_file(
        dir.path(),
        "theirs.yaml",
        &GPU_OFFER.replace("gpu-1", "compute"),
    );
    brokerctl(
        &c,
        &[],
        &["--credentials", &creds, "offers", "publish", "-f", &theirs],
    )
    .fails(5);

    // A table, one row per plan; the filter is the catalog's (same plan: 8Gi and at most 2).
    let table = brokerctl(&c, &[], &["offers", "list"]).ok();
    assert_eq!(
        table.lines().count(),
        4,
        "a header and three plans: {table}"
    );
    assert!(table.starts_with("OFFER"), "{table}");
    let table = brokerctl(
        &c,
        &[],
        &["offers", "list", "--min", "memory=8Gi", "--max-cost", "2"],
    )
    .ok();
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{table}");
    assert!(
        rows[0].starts_with("gpu-1") && rows[0].contains("cpu=4,memory=16Gi,nvidia.com/gpu=1"),
        "{table}"
    );
    let listed = brokerctl(
        &c,
        &[],
        &[
            "offers",
            "list",
            "--label",
            "region=eu-west-1",
            "-o",
            "json",
        ],
    )
    .json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], "gpu-1");
    // The table prints the cost exactly as the catalog's JSON has it.
    let cost = listed[0]["plans"]["small"]["cost"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(cost.starts_with("1.1"), "{cost}");
    let shown = brokerctl(&c, &[], &["offers", "show", "gpu-1"]).ok();
    assert!(shown.contains("Labels:      region=eu-west-1"), "{shown}");
    // With its unit: the catalog's default pricing, euros per hour.
    assert_eq!(
        listed[0]["pricing"],
        json!({"currency": "EUR", "per": "hour"})
    );
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("small") && l.contains(&format!("{cost} EUR/hour"))),
        "{shown}"
    );
    let yaml = brokerctl(&c, &[], &["offer", "show", "compute", "-o", "yaml"]).ok();
    assert!(
        yaml.contains("id: compute") && yaml.contains("memory: 32Gi"),
        "{yaml}"
    );
    // A filter the catalog refuses is its message; an unknown offer is 3.
    let err = brokerctl(&c, &[], &["offers", "list", "--min", "memory=lots"]).fails(1);
    assert!(err.contains("min.memory"), "{err}");
    brokerctl(&c, &[], &["offers", "show", "nope"]).fails(3);
    // Bad usage is 2, before any request.
    brokerctl(&c, &[], &["offers", "list", "--min", "memory"]).fails(2);
    brokerctl(
        &c,
        &[],
        &[
            "offers",
            "publish",
            "-f",
            &dir.path().join("missing.yaml").display().to_string(),
        ],
    )
    .fails(2);

    // A consumer reserves and buys; without a token, 5.
    brokerctl(&c, &[], &["reserve", "compute", "small"]).fails(5);
    let reservation = brokerctl(
        &c,
        &as_consumer,
        &["reserve", "compute", "small", "-o", "json"],
    )
    .json();
    let id = reservation["id"].as_str().unwrap().to_string();
    assert_eq!(reservation["planID"], "small", "{reservation}");
    let bought = brokerctl(
        &c,
        &as_consumer,
        &["buy", &id, "--consumer-cluster-id", "consumer-1"],
    )
    .ok();
    assert!(
        bought.contains(&format!("Contract:         {id}")),
        "{bought}"
    );
    assert!(
        bought.contains("Credentials:      v0 (shown with -o json|yaml)"),
        "{bought}"
    );
    assert!(
        !bought.contains("secret-token-of-provider-2"),
        "a table shows no secret: {bought}"
    );
    // Bought already: the catalog's conflict is 4; an unknown reservation 3.
    brokerctl(&c, &as_consumer, &["buy", &id]).fails(4);
    brokerctl(&c, &as_consumer, &["buy", "no-such-reservation"]).fails(3);
    // Sold out is a conflict too.
    buying::cap(&c, &compute_owner, "compute", "large", Some(1));
    brokerctl(&c, &as_consumer, &["reserve", "compute", "large"]).ok();
    let err = brokerctl(&c, &as_consumer, &["reserve", "compute", "large"]).fails(4);
    assert!(err.contains("409"), "{err}");

    // Contracts: the table with the state, JSON for scripts, one with its credentials.
    let table = brokerctl(&c, &as_consumer, &["contracts", "list", "--active"]).ok();
    let row = table
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("pending") && row.contains("active"), "{table}");
    // The cost with its unit; bought by a person (no boughtBy): a dash.
    assert!(
        table.starts_with("CONTRACT") && table.contains("   BOUGHT BY   "),
        "{table}"
    );
    let cells: Vec<&str> = row
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert!(cells[4].ends_with(" EUR/hour"), "{table}");
    assert_eq!(cells[5..7], ["-", "pending"], "{table}");
    let listed = brokerctl(
        &c,
        &as_consumer,
        &["contracts", "list", "--state", "pending", "-o", "json"],
    )
    .json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], id.as_str());
    let contract = brokerctl(&c, &as_consumer, &["contract", "show", &id, "-o", "json"]).json();
    assert_eq!(
        contract["credentials"]["v0"]["token"],
        "secret-token-of-provider-2"
    );
    let shown = brokerctl(&c, &as_consumer, &["contracts", "show", &id]).ok();
    assert!(shown.contains("State:            pending"), "{shown}");
    assert!(shown.contains("Bought by:        -\n"), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("Cost:") && l.ends_with(" EUR/hour")),
        "{shown}"
    );
    brokerctl(&c, &as_consumer, &["contracts", "show", "nope"]).fails(3);
    // Someone else's token sees none of it.
    let bob = buying::consumer(&c, &buying::admin(&c), "bob");
    brokerctl(
        &c,
        &[("BROKERCTL_TOKEN", &bob)],
        &["contracts", "show", &id],
    )
    .fails(3);
    brokerctl(
        &c,
        &[("BROKERCTL_TOKEN", "not-a-token")],
        &["contracts", "list"],
    )
    .fails(5);

    // Shell completion.
    let script = brokerctl(&c, &[], &["completion", "bash"]).ok();
    assert!(
        script.contains("brokerctl") && script.contains("offers"),
        "{script}"
    );
}

/// `kubectl broker …` as docs/cli.md installs it: the real kubectl (the
/// one `scripts/install-test-deps.sh` puts in `build/bin/`, or `$KUBECTL`)
/// finds a link named `kubectl-broker` to brokerctl on the `PATH` and runs
/// it; each command prints what `brokerctl` prints and exits with its code.
#[test]
fn cli_is_the_kubectl_broker_plugin() {
    let kubectl = deploy_check::kubectl::Kubectl::installed_under(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    );
    let kubectl = kubectl.path().to_path_buf();
    assert!(
        kubectl.exists(),
        "no kubectl at {}: install it with `bash scripts/install-test-deps.sh`",
        kubectl.display()
    );
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &[]);
    buying::publish(&c, 2, "compute");
    let consumer = buying::consumer(&c, &buying::admin(&c), "alice");
    // The link docs/cli.md makes (`ln -s "$(command -v brokerctl)" …`), in
    // a directory that is the whole PATH: kubectl finds the plugin there
    // or nowhere.
    let plugins = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(bin_path("brokerctl"), plugins.path().join("kubectl-broker"))
        .unwrap();
    let plugin = |args: &[&str]| {
        let out = Command::new(&kubectl)
            .arg("broker")
            .args(args)
            .env_clear()
            .env("PATH", plugins.path())
            .env("HOME", plugins.path())
            .env("BROKERCTL_CATALOG_URL", c.url(""))
            .env("BROKERCTL_TOKEN", &consumer)
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl");
        Run {
            code: out.status.code().expect("kubectl exited, not killed"),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    let direct = |args: &[&str]| brokerctl(&c, &[("BROKERCTL_TOKEN", &consumer)], args);
    for args in [
        &["offers", "list"][..],
        &["offers", "list", "--min", "memory=8Gi", "-o", "json"],
        &["offers", "show", "compute", "-o", "yaml"],
        &["offers", "show", "nope"],
        &["offers", "list", "--min", "memory"],
        &["contracts", "list"],
        &["get", "offers", "-o", "wide"],
        &["describe", "offer", "compute"],
    ] {
        let (through, alone) = (plugin(args), direct(args));
        assert_eq!(
            (through.code, &through.stdout, &through.stderr),
            (alone.code, &alone.stdout, &alone.stderr),
            "kubectl broker {args:?} (left) and brokerctl (right)"
        );
    }
    // The outcomes compared above are the documented ones, not one failure
    // twice: a table, JSON, YAML, 3 for an unknown offer, 2 for bad usage.
    let table = plugin(&["offers", "list"]).ok();
    assert!(
        table.starts_with("OFFER") && table.contains("compute"),
        "{table}"
    );
    plugin(&["offers", "show", "nope"]).fails(3);
    plugin(&["offers", "list", "--min", "memory"]).fails(2);
    // A write goes through too: a reservation the catalog then sells.
    let reservation = plugin(&["reserve", "compute", "small", "-o", "json"]).json();
    let id = reservation["id"].as_str().unwrap();
    let bought = direct(&[
        "buy",
        id,
        "--consumer-cluster-id",
        "consumer-1",
        "-o",
        "json",
    ])
    .json();
    assert_eq!(bought["id"], id, "{bought}");
}

/// The Purchase's status, as the purchase-controller writes it.
fn set_status(kube: &KubeApiServer, phase: &str, ready: (&str, &str, &str)) {
    let (status, reason, message) = ready;
    kube.merge_patch(
        PURCHASES,
        Some(TEAM),
        "p1",
        json!({"status": {"phase": phase, "conditions": [
            {"type": "Ready", "status": status, "reason": reason, "message": message,
             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        true,
    )
    .expect("status written");
}

/// `brokerctl purchase follow` started, its stdout lines on a channel.
fn follow(kubeconfig: &Path, extra: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = Command::new(bin_path("brokerctl"))
        .args(["purchase", "follow", "p1", "-n", TEAM, "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start brokerctl");
    let (send, lines) = mpsc::channel();
    let out = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    (child, lines)
}

/// The next line, within a bound (measures nothing).
fn next_line(lines: &mpsc::Receiver<String>) -> String {
    lines
        .recv_timeout(e2e::EVENTUALLY)
        .expect("a line from brokerctl")
}

fn exit_code(child: &mut std::process::Child) -> i32 {
    e2e::process::exit_within(child, e2e::EVENTUALLY)
        .expect("brokerctl exits")
        .code()
        .expect("an exit code")
}

#[test]
fn cli_follows_a_purchase_until_ready_or_failed() {
    let rt = runtime();
    let kube = rt.block_on(KubeApiServer::start_without_crds()).unwrap();
    kube.register_crd_file(&purchase_crd()).unwrap();
    liqo_support::namespace(&kube, TEAM, json!({}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    kube.write_kubeconfig(&kubeconfig).unwrap();

    // No such Purchase: 3.
    let (mut child, _) = follow(&kubeconfig, &[]);
    assert_eq!(exit_code(&mut child), 3);

    kube.create(
        PURCHASES,
        json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
               "metadata": {"name": "p1", "namespace": TEAM},
               "spec": {"catalogURL": "http://catalog.example", "offerID": "compute", "planID": "small",
                        "credentialsSecretRef": {"name": "catalog-token", "key": "token"}}}),
    )
    .expect("Purchase created");
    set_status(
        &kube,
        "Peering",
        ("False", "WaitingForPeering", "peer with the provider"),
    );

    // Each change is a line; Ready ends it with 0.
    let (mut child, lines) = follow(&kubeconfig, &[]);
    assert_eq!(next_line(&lines), "phase Peering");
    assert_eq!(
        next_line(&lines),
        "Ready=False WaitingForPeering: peer with the provider"
    );
    set_status(
        &kube,
        "Granting",
        ("False", "WaitingForProvider", "the slice is pending"),
    );
    assert_eq!(next_line(&lines), "phase Granting");
    assert_eq!(
        next_line(&lines),
        "Ready=False WaitingForProvider: the slice is pending"
    );
    set_status(&kube, "Ready", ("True", "Ready", "offloading"));
    assert_eq!(next_line(&lines), "phase Ready");
    assert_eq!(next_line(&lines), "Ready=True Ready: offloading");
    assert_eq!(exit_code(&mut child), 0);

    // Not Ready in time: 7. The message, as a controller quoting a
    // provider might write it, is shown escaped (B-17).
    set_status(
        &kube,
        "Granting",
        (
            "False",
            "WaitingForProvider",
            "provider said: \u{1b}[2J\u{1b}]52;c;ZXZpbA==\u{7}\rall good",
        ),
    );
    let (mut child, lines) = follow(&kubeconfig, &["--timeout", "1s"]);
    assert_eq!(next_line(&lines), "phase Granting");
    assert_eq!(
        next_line(&lines),
        "Ready=False WaitingForProvider: provider said: \\x1b[2J\\x1b]52;c;ZXZpbA==\\x07\\rall good"
    );
    assert_eq!(exit_code(&mut child), 7);

    // A failed Purchase: 6.
    set_status(
        &kube,
        "Failed",
        ("False", "ResourcesDenied", "the provider refused"),
    );
    let (mut child, lines) = follow(&kubeconfig, &[]);
    assert_eq!(next_line(&lines), "phase Failed");
    assert_eq!(exit_code(&mut child), 6);

    // An ended one (its contract expired or was cancelled): 6 too
    // (docs/cli.md), while being followed.
    set_status(
        &kube,
        "Granting",
        ("False", "WaitingForProvider", "the slice is pending"),
    );
    let (mut child, lines) = follow(&kubeconfig, &[]);
    assert_eq!(next_line(&lines), "phase Granting");
    assert_eq!(
        next_line(&lines),
        "Ready=False WaitingForProvider: the slice is pending"
    );
    set_status(
        &kube,
        "Ended",
        ("False", "ContractCancelled", "the contract was cancelled"),
    );
    assert_eq!(next_line(&lines), "phase Ended");
    assert_eq!(exit_code(&mut child), 6);
}

/// `brokerctl args…` with the config file `config` and no BROKERCTL_*
/// variable but `vars`: what the contexts give is all it has.
fn brokerctl_in(config: &Path, vars: &[(&str, &str)], args: &[&str]) -> Run {
    let mut spawn = Spawn::new("brokerctl");
    for var in [
        "BROKERCTL_CATALOG_URL",
        "BROKERCTL_TOKEN",
        "BROKERCTL_TOKEN_FILE",
        "BROKERCTL_CREDENTIALS",
        "BROKERCTL_OUTPUT",
        "BROKERCTL_CONTEXT",
        "BROKERCTL_NO_HEADERS",
        "XDG_CONFIG_HOME",
        "RUST_LOG",
    ] {
        spawn = spawn.env_remove(var);
    }
    spawn = spawn.env("BROKERCTL_CONFIG", config).args(args);
    for (k, v) in vars {
        spawn = spawn.env(k, v);
    }
    let out = spawn.output().expect("run brokerctl");
    Run {
        code: out.status.code().expect("brokerctl exited, not killed"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `brokerctl --config config args…` with `stdin` (for `--token-stdin`).
fn brokerctl_stdin(config: &Path, args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(bin_path("brokerctl"))
        .env_remove("BROKERCTL_TOKEN")
        .env_remove("BROKERCTL_CATALOG_URL")
        .env("BROKERCTL_CONFIG", config)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run brokerctl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("brokerctl ends");
    Run {
        code: out.status.code().expect("brokerctl exited, not killed"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The contexts of the config file, as docs/cli.md shows them: set with
/// `config set-context`, chosen with `use-context` or `--context`; a
/// command then reaches the context's catalog with its token file. Flags
/// win over BROKERCTL_* variables, which win over the context; a token
/// file or a config file holding a token that its group or other users can
/// read is refused; no listing shows a token.
#[test]
fn cli_contexts_choose_the_catalog_and_credentials() {
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &[]);
    buying::publish(&c, 2, "compute");
    let admin = buying::admin(&c);
    let alice = buying::consumer(&c, &admin, "alice");
    let bob = buying::consumer(&c, &admin, "bob");
    let url = c.url("");
    // A catalog that is not there: its context fails to connect (1).
    let down = format!("http://127.0.0.1:{}/", e2e::free_port());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("brokerctl").join("config.yaml");
    let alice_file = dir.path().join("alice.token");
    private_file(dir.path(), "alice.token", &format!("{alice}\n"));
    let bob_file = private_file(dir.path(), "bob.token", &bob);
    let run = |vars: &[(&str, &str)], args: &[&str]| brokerctl_in(&config, vars, args);

    // Contexts set and chosen; the file is private.
    let alice_path = alice_file.display().to_string();
    let set = [
        "config",
        "set-context",
        "alice",
        "--catalog",
        &url,
        "--token-file",
        &alice_path,
    ];
    assert_eq!(run(&[], &set).ok(), "Context \"alice\" created.\n");
    assert_eq!(mode_of(&config), 0o600);
    run(&[], &["config", "set-context", "down", "--catalog", &down]).ok();
    // No context chosen yet: the default catalog, no credentials.
    run(&[], &["config", "current-context"]).fails(3);
    assert_eq!(
        run(&[], &["config", "use-context", "alice"]).ok(),
        "Switched to context \"alice\".\n"
    );
    assert_eq!(run(&[], &["config", "current-context"]).ok(), "alice\n");
    run(&[], &["config", "use-context", "nope"]).fails(3);

    // A consumer's whole purchase with the context alone: its URL, its token file.
    let reservation = run(&[], &["reserve", "compute", "small", "-o", "json"]).json();
    let id = reservation["id"].as_str().unwrap().to_string();
    let bought = run(&[], &["buy", &id, "--consumer-cluster-id", "consumer-1"]).ok();
    assert!(
        bought.contains(&format!("Contract:         {id}")),
        "{bought}"
    );
    let mine = run(&[], &["get", "contracts", "-o", "json"]).json();
    assert_eq!(mine.as_array().unwrap().len(), 1, "{mine}");
    assert_eq!(mine[0]["consumer"], "alice", "{mine}");
    // The old spelling reads the same context.
    let old = run(&[], &["contracts", "list", "-o", "json"]).json();
    assert_eq!(old, mine);

    // The listing names the credentials, never a token.
    let contexts = run(&[], &["config", "get-contexts"]).ok();
    let lines: Vec<&str> = contexts.lines().collect();
    assert!(lines[0].starts_with("CURRENT   NAME"), "{contexts}");
    assert!(
        lines[1].starts_with("*") && lines[1].contains(&format!("token-file {alice_path}")),
        "{contexts}"
    );
    assert!(!contexts.contains(&alice), "{contexts}");

    // --context (and BROKERCTL_CONTEXT) choose another context.
    let err = run(&[], &["--context", "down", "get", "offers"]).fails(1);
    assert!(err.contains("cannot connect"), "{err}");
    run(&[("BROKERCTL_CONTEXT", "down")], &["get", "offers"]).fails(1);
    run(&[], &["--context", "missing", "get", "offers"]).fails(2);
    // A flag or a variable wins over the context's catalog…
    let offers = run(
        &[],
        &["--context", "down", "--catalog", &url, "get", "offers"],
    )
    .ok();
    assert!(offers.contains("compute"), "{offers}");
    run(
        &[("BROKERCTL_CATALOG_URL", &url)],
        &["--context", "down", "get", "offers"],
    )
    .ok();
    // …and a flag over a variable.
    run(
        &[("BROKERCTL_CATALOG_URL", &down)],
        &["--catalog", &url, "get", "offers"],
    )
    .ok();
    // A token variable wins over the context's token file (bob has no
    // contracts), with a warning; a flag wins over the variable.
    let as_bob = run(
        &[("BROKERCTL_TOKEN", &bob)],
        &["get", "contracts", "-o", "json"],
    );
    assert!(
        as_bob
            .stderr
            .contains("replaces the credentials of context \"alice\""),
        "{}",
        as_bob.stderr
    );
    assert_eq!(as_bob.json(), json!([]));
    let flagged = run(
        &[("BROKERCTL_TOKEN", &alice)],
        &["--token-file", &bob_file, "get", "contracts", "-o", "json"],
    )
    .json();
    assert_eq!(flagged, json!([]));

    // A token file its group or other users can read is refused, as ssh
    // refuses such a key: exit 2, the file named, the token not shown.
    for mode in [0o644, 0o640] {
        chmod(&alice_file, mode);
        let err = run(&[], &["get", "contracts"]).fails(2);
        assert!(
            err.contains("too open") && err.contains("chmod 600") && err.contains(&alice_path),
            "{err}"
        );
        assert!(!err.contains(&alice), "{err}");
    }
    chmod(&alice_file, 0o600);
    run(&[], &["get", "contracts"]).ok();

    // A token stored in the config file, read from stdin (never argv).
    let config_flag = ["--catalog", url.as_str()];
    let stored = brokerctl_stdin(
        &config,
        &[
            "config",
            "set-context",
            "bob",
            config_flag[0],
            config_flag[1],
            "--token-stdin",
        ],
        &format!("{bob}\n"),
    );
    assert_eq!(stored.ok(), "Context \"bob\" created.\n");
    assert_eq!(mode_of(&config), 0o600);
    let listed = run(&[], &["config", "get-contexts", "-o", "json"]).ok();
    assert!(
        !listed.contains(&bob) && listed.contains("token (stored)"),
        "{listed}"
    );
    assert_eq!(
        run(&[], &["--context", "bob", "get", "contracts", "-o", "json"]).json(),
        json!([])
    );
    // The same config file readable by others: its token is refused.
    chmod(&config, 0o644);
    let err = run(&[], &["--context", "bob", "get", "contracts"]).fails(2);
    assert!(err.contains("too open") && !err.contains(&bob), "{err}");
    // The token on the command line is not stored.
    run(&[], &["config", "set-context", "carol", "--token", "t"]).fails(2);
    // Nor are variables, which may be exported for another catalog: only
    // what is typed on set-context's command line.
    run(
        &[
            ("BROKERCTL_TOKEN_FILE", bob_file.as_str()),
            ("BROKERCTL_CATALOG_URL", down.as_str()),
        ],
        &["config", "set-context", "carol"],
    )
    .ok();
    let listed = run(&[], &["config", "get-contexts", "-o", "json"]).json();
    let carol = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "carol")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        (&carol["catalog"], &carol["credentials"]),
        (&Value::Null, &json!("-")),
        "{listed}"
    );
    chmod(&config, 0o600);

    // -v: each request with its status, never the token.
    let verbose = run(&[], &["-v", "get", "contracts"]);
    assert_eq!(verbose.code, 0, "{}", verbose.stderr);
    assert!(
        verbose.stderr.contains(&format!(
            "GET {}/contracts 200 OK",
            url.trim_end_matches('/')
        )),
        "{}",
        verbose.stderr
    );
    assert!(
        verbose.stderr.contains("context alice"),
        "{}",
        verbose.stderr
    );
    assert!(!verbose.stderr.contains(&alice), "{}", verbose.stderr);
    assert_eq!(verbose.stdout, run(&[], &["get", "contracts"]).ok());
    let quiet = run(&[], &["get", "contracts"]);
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr);

    // Deleting the current context leaves none current.
    run(&[], &["config", "delete-context", "alice"]).ok();
    run(&[], &["config", "current-context"]).fails(3);
    run(&[], &["reserve", "compute", "small"]).fails(5);
}

/// The cell of `column` in row `row` (1: the first data row) of a
/// rendered table, read at the column's offset in the header (`column`'s
/// first occurrence there).
fn cell<'t>(table: &'t str, column: &str, row: usize) -> &'t str {
    let lines: Vec<&str> = table.lines().collect();
    let at = lines[0]
        .find(&format!("{column}   "))
        .or_else(|| lines[0].find(column))
        .unwrap_or_else(|| panic!("no {column}: {table}"));
    let rest = lines[row].get(at..).unwrap_or_default();
    rest.split("   ").next().unwrap_or_default().trim()
}

/// `-o wide` adds columns to the right of the usual ones; `--no-headers`
/// (or BROKERCTL_NO_HEADERS) prints the rows alone, as kubectl's.
#[test]
fn cli_tables_go_wide_and_drop_their_headers() {
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &[]);
    buying::publish(&c, 2, "compute");
    let consumer = buying::consumer(&c, &buying::admin(&c), "alice");
    let as_consumer = [("BROKERCTL_TOKEN", consumer.as_str())];
    let offer = brokerctl(&c, &[], &["get", "offer", "compute", "-o", "json"]).json();

    let normal = brokerctl(&c, &[], &["get", "offers"]).ok();
    let wide = brokerctl(&c, &[], &["get", "offers", "-o", "wide"]).ok();
    let (head, wide_head) = (normal.lines().next().unwrap(), wide.lines().next().unwrap());
    let names = |h: &str| -> Vec<String> {
        h.split("   ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (columns, wide_columns) = (names(head), names(wide_head));
    assert_eq!(wide_columns[..columns.len()], columns[..], "{wide}");
    assert_eq!(
        wide_columns[columns.len()..],
        [
            "PROVIDER NAME",
            "LIQO",
            "ENFORCEMENT",
            "ISOLATION",
            "LABELS",
            "VERSION"
        ],
        "{wide}"
    );
    let row = wide.lines().nth(1).unwrap();
    assert!(
        row.contains(offer["clusterName"].as_str().unwrap()),
        "{wide}"
    );
    assert_eq!(normal.lines().count(), wide.lines().count());

    // One offer by id: its plans' rows; no filters with an id.
    let one = brokerctl(&c, &[], &["get", "offer", "compute"]).ok();
    assert_eq!(one.lines().count(), 3, "a header and two plans: {one}");
    brokerctl(&c, &[], &["get", "offer", "compute", "--min", "memory=1Gi"]).fails(2);

    // No headers: the plans' rows alone, with or without wide.
    let rows = brokerctl(&c, &[], &["get", "offers", "--no-headers"]).ok();
    assert_eq!(rows.lines().count(), 2, "{rows}");
    assert!(rows.lines().all(|l| l.starts_with("compute ")), "{rows}");
    let rows = brokerctl(&c, &[], &["get", "offers", "-o", "wide", "--no-headers"]).ok();
    assert_eq!(rows.lines().count(), 2, "{rows}");
    assert!(!rows.contains("PROVIDER NAME"), "{rows}");
    let rows = brokerctl(&c, &[("BROKERCTL_NO_HEADERS", "true")], &["get", "offers"]).ok();
    assert_eq!(rows.lines().count(), 2, "{rows}");
    // JSON is JSON whatever --no-headers says.
    let listed = brokerctl(&c, &[], &["get", "offers", "--no-headers", "-o", "json"]).json();
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // Contracts: wide shows the consumer and its cluster.
    let reservation = brokerctl(
        &c,
        &as_consumer,
        &["reserve", "compute", "small", "-o", "json"],
    )
    .json();
    let id = reservation["id"].as_str().unwrap().to_string();
    brokerctl(
        &c,
        &as_consumer,
        &["buy", &id, "--consumer-cluster-id", "consumer-1"],
    )
    .ok();
    let wide = brokerctl(&c, &as_consumer, &["get", "contracts", "-o", "wide"]).ok();
    assert!(
        wide.starts_with("CONTRACT") && wide.contains("   CONSUMER   CONSUMER CLUSTER   "),
        "{wide}"
    );
    assert_eq!(cell(&wide, "CONSUMER", 1), "alice", "{wide}");
    assert_eq!(cell(&wide, "CONSUMER CLUSTER", 1), "consumer-1", "{wide}");
    assert_eq!(cell(&wide, "STATE", 1), "pending", "{wide}");
    let rows = brokerctl(&c, &as_consumer, &["get", "contracts", "--no-headers"]).ok();
    assert_eq!(rows.lines().count(), 1, "{rows}");
    assert!(rows.starts_with(&id), "{rows}");
    let one = brokerctl(&c, &as_consumer, &["get", "contract", &id, "--no-headers"]).ok();
    assert_eq!(one, rows);
    let described = brokerctl(&c, &as_consumer, &["describe", "contract", &id]).ok();
    assert!(
        described.contains(&format!("Contract:         {id}")),
        "{described}"
    );
}

/// Terminal escapes a hostile server sends (the review's probes B-01..B-07,
/// B-17): ESC[2J clears the screen, OSC 0 sets the window title, OSC 52
/// writes the clipboard, CR rewrites the line, then BEL, the 8-bit CSI, a
/// bidi override, and a newline to fake a row.
const HOSTILE: &str =
    "a\u{1b}[2J\u{1b}]0;pwned\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\rEVIL\u{9b}31m\u{202e}txt\nfake";

/// `text` has nothing a terminal would act on (line ends aside).
#[track_caller]
fn assert_terminal_safe(text: &str) {
    let raw: Vec<char> = text
        .chars()
        .filter(|&c| {
            c != '\n'
                && matches!(c as u32, 0..=0x1f | 0x7f..=0x9f | 0x202a..=0x202e | 0x2066..=0x2069)
        })
        .collect();
    assert!(raw.is_empty(), "raw {raw:?} reached the terminal: {text:?}");
}

fn hostile_offer(enforcement: &str) -> Value {
    json!({
        "id": HOSTILE, "name": HOSTILE, "type": HOSTILE, "description": HOSTILE,
        "clusterID": HOSTILE, "clusterName": HOSTILE, "liqo": ["v1"], "enforcement": enforcement,
        "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
        "version": 1, "labels": {HOSTILE: HOSTILE},
        "plans": {HOSTILE: {"name": HOSTILE, "cost": "1", "resources": {"cpu": "1"}}}
    })
}

/// One HTTP/1.1 request read off `stream` (head and `Content-Length`
/// body, so closing after the answer sends no reset): its method and
/// path with query.
fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    let mut words = head.split_whitespace();
    Some((words.next()?.to_string(), words.next()?.to_string()))
}

/// Serve `answer(method, path)` — a status and a body, or `None` for a
/// handler that wrote its own answer — on a free loopback port, one thread
/// per connection, each answer closing its connection.
fn serve(
    answer: impl Fn(&str, &str, &mut TcpStream) -> Option<(u16, String)> + Send + Sync + 'static,
) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let Some((method, path)) = read_request(&mut stream) else {
                    return;
                };
                if let Some((status, body)) = answer(&method, &path, &mut stream) {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
            });
        }
    });
    port
}

/// B-01, B-02, B-03, B-05, B-06 (and B-07's output side): a catalog whose
/// every string carries terminal escapes. Whatever brokerctl prints, on
/// stdout or after `error:`, shows them (`\x1b[2J`) instead of obeying
/// them, one line per row; `-o json` stays the catalog's JSON.
#[test]
fn cli_escapes_what_a_hostile_catalog_says() {
    let port = serve(|method, path, _| {
        let path = path.split('?').next().unwrap_or_default();
        Some(match (method, path) {
            ("GET", "/offers") => (200, json!([hostile_offer("hard")]).to_string()),
            ("GET", "/offer/evil") => (200, hostile_offer("hard").to_string()),
            // A value this client cannot read: serde quotes it.
            ("GET", "/offer/unreadable") => (200, hostile_offer(HOSTILE).to_string()),
            ("GET", "/contracts") => (
                200,
                json!([{
                    "id": HOSTILE, "consumer": HOSTILE, "clusterID": HOSTILE,
                    "clusterName": HOSTILE, "offerID": "o\u{1b}[31mRED\r\u{1b}[Kfake",
                    "planID": HOSTILE, "resources": {"cpu": "2"}, "cost": "1.5",
                    "resourceSliceClass": "liqo-broker", "liqo": ["v1"],
                    "purchasedAt": "2026-01-01T00:00:00Z", "expiresAt": "2026-02-01T00:00:00Z",
                    "active": false, "state": "failed", "reason": HOSTILE,
                    "stateChangedAt": "2026-01-01T00:00:00Z", "boughtBy": HOSTILE,
                    "pricing": {"currency": HOSTILE, "per": "hour"}
                }])
                .to_string(),
            ),
            ("POST", "/reservations") => (
                409,
                json!({"error": "conflict", "message": HOSTILE}).to_string(),
            ),
            _ => (
                404,
                json!({"error": "not found", "message": "no"}).to_string(),
            ),
        })
    });
    let url = format!("http://127.0.0.1:{port}/");
    let token = [("BROKERCTL_TOKEN", "t")];

    // B-01: the offers table, one row per plan.
    let table = brokerctl_at(&url, &[], &["offers", "list"]).ok();
    assert_terminal_safe(&table);
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(table.contains("a\\x1b[2J\\x1b]0;pwned\\x07"), "{table}");

    // B-02, B-07: offers show (the description among its details).
    let shown = brokerctl_at(&url, &[], &["offers", "show", "evil"]).ok();
    assert_terminal_safe(&shown);
    assert!(
        shown.contains("Description: a\\x1b[2J\\x1b]0;pwned\\x07\\x1b]52;c;ZXZpbA==\\x07\\rEVIL\\u{9b}31m\\u{202e}txt\\nfake\n"),
        "{shown}"
    );

    // B-03: the contracts table; the CR cannot rewrite the row.
    let contracts = brokerctl_at(&url, &token, &["contracts", "list"]).ok();
    assert_terminal_safe(&contracts);
    assert_eq!(contracts.lines().count(), 2, "{contracts}");
    assert!(
        contracts.contains("o\\x1b[31mRED\\r\\x1b[Kfake"),
        "{contracts}"
    );

    // B-05: a decode error quoting the value.
    let unreadable = brokerctl_at(&url, &[], &["offers", "show", "unreadable"]).fails(1);
    assert_terminal_safe(&unreadable);
    assert!(unreadable.contains("\\x1b]52;c;"), "{unreadable}");

    // B-06: the catalog's error message after `error:`, exit code kept.
    let refused = brokerctl_at(&url, &token, &["reserve", "evil", "s"]).fails(4);
    assert_terminal_safe(&refused);
    assert!(refused.starts_with("error: "), "{refused}");
    assert!(refused.contains("\\x1b]0;pwned\\x07"), "{refused}");

    // B-04 stays as it was: scripts get the catalog's JSON, escaped by
    // JSON itself, and read back the very strings.
    let json = brokerctl_at(&url, &[], &["offers", "show", "evil", "-o", "json"]).json();
    assert_eq!(json["description"], HOSTILE);
}

/// How many bytes of a hostile answer the huge API server wrote before
/// brokerctl stopped reading: 128 MiB if read whole.
const HUGE_BYTES: usize = 128 * 1024 * 1024;

/// An API server answering `purchase follow` with a 128 MiB Purchase: the
/// list (`huge_list`) or, after a small list, its first watch event. The
/// number of bytes it managed to send is counted in `sent`.
fn huge_api_server(huge_list: bool, sent: Arc<AtomicUsize>) -> u16 {
    serve(move |_, path, stream| {
        let watch = path.contains("watch=true") || path.contains("watch=1");
        let purchase = |phase: &str| {
            json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
                   "metadata": {"name": "p1", "namespace": TEAM, "resourceVersion": "1"},
                   "status": {"phase": phase}})
        };
        if !huge_list && !watch {
            let list = json!({"apiVersion": "broker.liqo-broker.io/v1alpha1",
                              "kind": "PurchaseList", "metadata": {"resourceVersion": "1"},
                              "items": [purchase("Peering")]});
            return Some((200, list.to_string()));
        }
        // No length: the body ends when the connection does, as far as
        // the server likes.
        let (before, after) = if huge_list {
            (
                r#"{"apiVersion":"broker.liqo-broker.io/v1alpha1","kind":"PurchaseList","metadata":{"resourceVersion":"1"},"items":[{"apiVersion":"broker.liqo-broker.io/v1alpha1","kind":"Purchase","metadata":{"name":"p1","namespace":"team","resourceVersion":"1"},"status":{"phase":""#,
                r#""}}]}"#,
            )
        } else {
            (
                r#"{"type":"MODIFIED","object":{"apiVersion":"broker.liqo-broker.io/v1alpha1","kind":"Purchase","metadata":{"name":"p1","namespace":"team","resourceVersion":"2"},"status":{"phase":""#,
                "\"}}}\n",
            )
        };
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err()
            || stream.write_all(before.as_bytes()).is_err()
        {
            return None;
        }
        let chunk = vec![b'x'; 1024 * 1024];
        for _ in 0..HUGE_BYTES / chunk.len() {
            if stream.write_all(&chunk).is_err() {
                return None;
            }
            sent.fetch_add(chunk.len(), Ordering::SeqCst);
        }
        let _ = stream.write_all(after.as_bytes());
        None
    })
}

/// B-19: `purchase follow` against an API server answering a 128 MiB
/// Purchase, in the list and in a watch event: refused with exit 1 and a
/// message naming the bound, after reading at most the bound (8 MiB) plus
/// what the sockets buffer — not the 128 MiB the old client read whole
/// (541 MiB of memory), nor a wait until `--timeout` (exit 7).
#[test]
fn cli_follow_refuses_a_huge_answer() {
    let dir = tempfile::tempdir().unwrap();
    for huge_list in [true, false] {
        let sent = Arc::new(AtomicUsize::new(0));
        let port = huge_api_server(huge_list, sent.clone());
        let kubeconfig = dir.path().join(format!("kubeconfig-{huge_list}"));
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
                 clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n\
                 users: [{{name: u, user: {{}}}}]\n\
                 contexts: [{{name: c, context: {{cluster: k, user: u, namespace: {TEAM}}}}}]\n"
            ),
        )
        .unwrap();
        let out = Spawn::new("brokerctl")
            .env_remove("KUBECONFIG")
            .args([
                "purchase",
                "follow",
                "p1",
                "--timeout",
                "20s",
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .output()
            .expect("run brokerctl");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "stdout: {stdout}\nstderr: {stderr}"
        );
        assert!(
            stderr.contains("error: the API server's answer about Purchase p1 is refused")
                && stderr.contains("larger than 8388608 bytes"),
            "{stderr}"
        );
        if !huge_list {
            assert_eq!(stdout.lines().next(), Some("phase Peering"), "{stdout}");
        }
        let read = sent.load(Ordering::SeqCst);
        assert!(
            read < 40 * 1024 * 1024,
            "brokerctl took {read} bytes of a {HUGE_BYTES}-byte answer"
        );
    }
}
