//! Every controller binary with its Kubernetes API server unreachable
//! (issue 29, findings 2 and 3) — and the binaries that talk to the
//! catalog with the catalog unreachable too (provider-agent, the class
//! controller's `contracts` policy), and the aggregator with its upstreams
//! unreachable — and every kubeconfig or policy file
//! flag given a device or a FIFO (finding 4).
//!
//! For 7 s each binary is pointed at a loopback port that refuses
//! connections (or one that accepts and closes them at once): its log must
//! stay short and its CPU time small — a Lease watch reopened with no
//! backoff once wrote 40,000 ERROR lines a second; the current binaries
//! write at most 26 lines and use at most 50 ms over those 7 s — and
//! SIGTERM must then end it within its shutdown timeout (resource-monitor
//! with `--leader-elect false` and purchase-controller used to stay up for
//! a minute and more). peering-user-controller and service-controller
//! (issue 41) run with their catalog unreachable as well; the market
//! autoscaler (issue 42) with its API server unreachable. All the binaries run side by side, so the cases
//! take 7 s and the slowest stop, not the sum.
//!
//! `metrics_promtool` starts the server binaries with these arguments too.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use e2e::Spawn;

/// How long each binary runs against the unreachable server.
const RUN_FOR: Duration = Duration::from_secs(7);
/// Most log lines allowed over [`RUN_FOR`]: a few per watch (first
/// failures, kube-client's line per attempt 1, 2, 4 s apart).
const MAX_LINES: usize = 50;
/// Most CPU time (user + system) allowed over [`RUN_FOR`].
const MAX_CPU: Duration = Duration::from_secs(1);

/// How the API server is unreachable.
#[derive(Debug, Clone, Copy)]
enum Server {
    /// Nothing listens: every connect is refused.
    Refused,
    /// Connections are accepted and closed at once.
    Closing,
}

/// One binary in one state, and the time SIGTERM has to end it.
struct Case {
    bin: &'static str,
    /// Arguments (see [`words`]).
    args: &'static str,
    extra: &'static str,
    server: Server,
    stop_within: Duration,
}

/// The shutdown budget the binaries give themselves, then edge's grace for
/// the runtime ([`edge::SHUTDOWN_GRACE`]): 5 s for the controller
/// (resource-monitor's and purchase-controller's `STOP_TIMEOUT`; the
/// orchestrator's controller-core `STOP_GRACE`, 3 s, and its Lease release,
/// `--lease-retry`, 2 s); resource-monitor gives its gRPC server's open
/// calls another `STOP_TIMEOUT`, and none are open here. The budget bounds
/// calls stuck on a server; these servers refuse or close at once, so
/// nothing is stuck and each case stops in tens of milliseconds: all of the
/// budget is slack for a loaded machine, and a binary that stays up past it
/// (as two once did, for a minute) breaks its own bound.
const STOP: Duration = Duration::from_secs(5).saturating_add(edge::SHUTDOWN_GRACE);

// Arguments, split on whitespace; `{kubeconfig}` and `{resources}` are
// filled in per word.
pub(crate) const RM_V1: &str = "--liqo-api v1 --class gold --source static:{resources} \
    --kubeconfig {kubeconfig} --http-listen 127.0.0.1:0";
const RM_CLASS_BESIDE_GRPC: &str = "--liqo-api v0.6 --class gold --source static:{resources} \
    --kubeconfig {kubeconfig} --listen 127.0.0.1:0 --http-listen 127.0.0.1:0";
const RM_KUBERNETES_SOURCE: &str =
    "--source kubernetes --kubeconfig {kubeconfig} --listen 127.0.0.1:0";
pub(crate) const ORCHESTRATOR: &str =
    "--kubeconfig {kubeconfig} --http-listen 127.0.0.1:0 --catalog http://127.0.0.1:9";
pub(crate) const PURCHASE_CONTROLLER: &str =
    "--liqo-api v1 --cluster-id c1 --kubeconfig {kubeconfig} --http-listen 127.0.0.1:0";
const NO_ELECTION: &str = "--leader-elect false";
/// The class controller selling by contracts, its catalog unreachable as
/// well (the same port). With no catalog there is no contract stream: the
/// fallback poll is all that runs, and it is what these cases are about
/// (each failed poll logged once, not once per try, at little CPU), so it
/// runs every 200 ms to fail some thirty times within [`RUN_FOR`]; the same
/// for the two controllers below (and their `--retry`, the pace of failed
/// steps).
const RM_V1_CONTRACTS: &str = "--liqo-api v1 --class gold --source static:{resources} \
    --kubeconfig {kubeconfig} --http-listen 127.0.0.1:0 --grant-policy contracts \
    --catalog-url http://127.0.0.1:{port} --catalog-credentials-file {credentials} \
    --contracts-poll-interval 200ms";
/// peering-user-controller (issue 41, U-06's spot check): its API server
/// and its catalog unreachable (the same port), fallback polls and passes
/// every 200 ms (see [`RM_V1_CONTRACTS`]).
pub(crate) const PEERING_USER_CONTROLLER: &str = "--catalog-url http://127.0.0.1:{port} \
    --catalog-credentials-file {credentials} --api-server-address https://p1.example:6443 \
    --kubeconfig {kubeconfig} --http-listen 127.0.0.1:0 --poll-interval 200ms --retry 200ms";
/// service-controller: the same (its fallback poll and `--retry` short on
/// purpose, see [`RM_V1_CONTRACTS`]).
pub(crate) const SERVICE_CONTROLLER: &str = "--catalog-url http://127.0.0.1:{port} \
    --catalog-credentials-file {credentials} --kubeconfig {kubeconfig} \
    --http-listen 127.0.0.1:0 --poll-interval 200ms --retry 200ms";
/// The market autoscaler, electing on a Lease in `liqo` as its Deployment
/// does (`POD_NAMESPACE`).
pub(crate) const MARKET_AUTOSCALER: &str =
    "--kubeconfig {kubeconfig} --http-listen 127.0.0.1:0 --lease-namespace liqo";
/// The aggregator: both its upstream resource readers unreachable.
pub(crate) const AGGREGATOR: &str = "--upstream a=127.0.0.1:{port} --upstream b=127.0.0.1:{port} \
    --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0";
/// The provider agent: its reader works, its catalog is unreachable.
const PROVIDER_AGENT: &str = "--catalog http://127.0.0.1:{port} --credentials {credentials} \
    --offer o1 --plan p1 --reader static:{resources} --max-backoff 1s";

/// `args` and then `extra` as words, each `{name}` replaced by its value.
pub(crate) fn words(args: &str, extra: &str, values: &[(&str, String)]) -> Vec<String> {
    args.split_whitespace()
        .chain(extra.split_whitespace())
        .map(|a| {
            values.iter().fold(a.to_string(), |a, (name, value)| {
                a.replace(&format!("{{{name}}}"), value)
            })
        })
        .collect()
}

/// A provider's catalog credentials file, owner-only as the binaries demand.
pub(crate) fn credentials(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("credentials.json");
    let creds = r#"{"clusterID": "p1", "clusterName": "p1", "authURL": "https://p1.example:6443", "token": "secret-1"}"#;
    std::fs::write(&path, creds).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A kubeconfig whose server is `127.0.0.1:port`.
pub(crate) fn kubeconfig(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n\
         clusters:\n- name: dead\n  cluster:\n    server: http://127.0.0.1:{port}\n\
         contexts:\n- name: dead\n  context:\n    cluster: dead\n    user: u\n    namespace: default\n\
         users:\n- name: u\n  user:\n    token: t\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A port in the state `server` names; the listener (if any) lives as long
/// as the returned guard.
fn unreachable(server: Server) -> (u16, Option<std::thread::JoinHandle<()>>) {
    match server {
        // Nothing may listen there for the whole run: a port from the
        // ephemeral range, bound and released, could be handed to any
        // other test's server meanwhile, and the binary would talk to it.
        // `free_port` picks from outside that range and marks the port.
        Server::Refused => (e2e::free_port(), None),
        Server::Closing => {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let handle = std::thread::spawn(move || {
                for stream in listener.incoming() {
                    drop(stream);
                }
            });
            (port, Some(handle))
        }
    }
}

/// CPU time (user + system) the process `pid` has used.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name (field 2) may hold spaces: count from its `)`.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after field 3.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let per_second: u64 = String::from_utf8(
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .parse()
    .unwrap_or(100);
    Duration::from_millis(ticks * 1000 / per_second)
}

/// One case running: its process and log, and what keeps its port in the
/// case's state.
struct Running {
    case: &'static Case,
    child: e2e::Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
    _server: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(case: &'static Case) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (port, server) = unreachable(case.server);
        let kubeconfig = kubeconfig(dir.path(), port);
        let resources = dir.path().join("resources.yaml");
        std::fs::write(&resources, "cpu: 4\n").unwrap();
        let values = [
            ("kubeconfig", kubeconfig.display().to_string()),
            ("resources", resources.display().to_string()),
            ("credentials", credentials(dir.path()).display().to_string()),
            ("port", port.to_string()),
        ];
        let args = words(case.args, case.extra, &values);
        let log = dir.path().join("log");
        let child = Spawn::new(case.bin)
            .args(&args)
            .env("RUST_LOG", "info")
            .stderr_to(std::fs::File::create(&log).unwrap())
            .start()
            .unwrap();
        Running {
            case,
            child,
            log,
            _dir: dir,
            _server: server,
        }
    }

    /// The case's name in failures: binary, server state and arguments.
    fn name(&self) -> String {
        let c = self.case;
        format!("{} {:?} ({} {})", c.bin, c.server, c.args, c.extra)
    }

    /// After [`RUN_FOR`]: still running, few log lines, little CPU.
    fn check_quiet(&mut self) -> Result<(), String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        if self.child.try_wait().unwrap().is_some() {
            return Err(format!("{} exited early:\n{text}", self.name()));
        }
        let cpu = cpu_time(self.child.pid());
        let lines = text.lines().count();
        let head: String = text.lines().take(30).collect::<Vec<_>>().join("\n");
        if lines >= MAX_LINES {
            return Err(format!(
                "{} wrote {lines} log lines in {RUN_FOR:?}; first ones:\n{head}",
                self.name()
            ));
        }
        if cpu >= MAX_CPU {
            return Err(format!(
                "{} used {cpu:?} of CPU in {RUN_FOR:?}",
                self.name()
            ));
        }
        Ok(())
    }

    /// SIGTERM ends it, successfully, within its shutdown timeout.
    fn check_stops(mut self) -> Result<(), String> {
        let within = self.case.stop_within;
        let asked = Instant::now();
        let stopped = self.child.terminate(within);
        let took = asked.elapsed();
        // On record for a failure elsewhere: how much of the budget was used.
        eprintln!("{}: stopped {took:?} after SIGTERM", self.name());
        let tail: String = std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .join("\n");
        match stopped {
            Err(e) => Err(format!(
                "{}: {e}; last log lines (newest first):\n{tail}",
                self.name()
            )),
            Ok(status) if !status.success() => {
                Err(format!("{} exited with {status}:\n{tail}", self.name()))
            }
            Ok(_) if took > within => Err(format!(
                "{} took {took:?} to stop (allowed {within:?})",
                self.name()
            )),
            Ok(_) => Ok(()),
        }
    }
}

const fn case(bin: &'static str, args: &'static str, extra: &'static str, server: Server) -> Case {
    Case {
        bin,
        args,
        extra,
        server,
        stop_within: STOP,
    }
}

/// Every binary in every state. They run side by side: each is judged on
/// its own log and its own CPU time, which others beside it do not change.
static CASES: [Case; 24] = [
    case("resource-monitor", RM_V1, "", Server::Refused),
    case("resource-monitor", RM_V1, "", Server::Closing),
    case("resource-monitor", RM_V1, NO_ELECTION, Server::Refused),
    case(
        "resource-monitor",
        RM_CLASS_BESIDE_GRPC,
        NO_ELECTION,
        Server::Refused,
    ),
    case(
        "resource-monitor",
        RM_KUBERNETES_SOURCE,
        "",
        Server::Refused,
    ),
    case("orchestrator", ORCHESTRATOR, "", Server::Refused),
    case("orchestrator", ORCHESTRATOR, "", Server::Closing),
    case("orchestrator", ORCHESTRATOR, NO_ELECTION, Server::Refused),
    case(
        "purchase-controller",
        PURCHASE_CONTROLLER,
        "",
        Server::Refused,
    ),
    // The class controller selling by contracts: API and catalog unreachable.
    case("resource-monitor", RM_V1_CONTRACTS, "", Server::Refused),
    case("resource-monitor", RM_V1_CONTRACTS, "", Server::Closing),
    // Catalog unreachable.
    case("provider-agent", PROVIDER_AGENT, "", Server::Refused),
    case("provider-agent", PROVIDER_AGENT, "", Server::Closing),
    // Both upstreams unreachable.
    case("aggregator", AGGREGATOR, "", Server::Refused),
    case("aggregator", AGGREGATOR, "", Server::Closing),
    // The two controllers of issues 31 and 32: API and catalog unreachable.
    case(
        "peering-user-controller",
        PEERING_USER_CONTROLLER,
        "",
        Server::Refused,
    ),
    case(
        "peering-user-controller",
        PEERING_USER_CONTROLLER,
        "",
        Server::Closing,
    ),
    case(
        "peering-user-controller",
        PEERING_USER_CONTROLLER,
        NO_ELECTION,
        Server::Refused,
    ),
    case(
        "service-controller",
        SERVICE_CONTROLLER,
        "",
        Server::Refused,
    ),
    case(
        "service-controller",
        SERVICE_CONTROLLER,
        "",
        Server::Closing,
    ),
    case(
        "service-controller",
        SERVICE_CONTROLLER,
        NO_ELECTION,
        Server::Refused,
    ),
    // The market autoscaler (issue 42): its API server unreachable (its
    // catalogs come from MarketAutoscalers, which it cannot read).
    case("market-autoscaler", MARKET_AUTOSCALER, "", Server::Refused),
    case("market-autoscaler", MARKET_AUTOSCALER, "", Server::Closing),
    case(
        "market-autoscaler",
        MARKET_AUTOSCALER,
        NO_ELECTION,
        Server::Refused,
    ),
];

/// Every case at once for [`RUN_FOR`], then every one stopped at once;
/// every failure is reported.
#[test]
fn unreachable_servers_every_binary_backs_off_and_stops() {
    let mut running: Vec<Running> = CASES.iter().map(Running::start).collect();
    std::thread::sleep(RUN_FOR);
    let mut failures: Vec<String> = running
        .iter_mut()
        .filter_map(|r| r.check_quiet().err())
        .collect();
    let stops: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = running
            .into_iter()
            .map(|r| s.spawn(move || r.check_stops()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    failures.extend(stops.into_iter().filter_map(Result::err));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Run `bin` with `args` (`{kubeconfig}` replaced by `file`) and expect it to
/// refuse at once, naming `flag` and the file.
///
/// "At once": before [`edge::config_file::READ_DEADLINE`], the longest
/// start-up lets a read of a flag's file take before giving up on it. A
/// binary that waited on the file (a FIFO opened for a writer that never
/// comes) would be stopped by that deadline, not by the file's type; one
/// that refuses by the type takes milliseconds, so the deadline is all
/// slack.
fn refuses_file(bin: &str, args: &str, file: &Path, flag: &str) {
    let within = edge::config_file::READ_DEADLINE;
    let dir = tempfile::tempdir().unwrap();
    let resources = dir.path().join("resources.yaml");
    std::fs::write(&resources, "cpu: 4\n").unwrap();
    let values = [
        ("kubeconfig", file.display().to_string()),
        ("resources", resources.display().to_string()),
    ];
    let args = words(args, "", &values);
    let log = dir.path().join("log");
    let started = Instant::now();
    let mut child = Spawn::new(bin)
        .args(&args)
        .stderr_to(std::fs::File::create(&log).unwrap())
        .start()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < within,
            "{bin} {flag} {}: still running after {within:?} (edge's read deadline):\n{}",
            file.display(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !status.success(),
        "{bin} accepted {}:\n{text}",
        file.display()
    );
    let named = format!("{flag} {}", file.display());
    assert!(
        text.contains(&named) && text.contains("not a regular file"),
        "{bin}'s error does not name {named:?} as not a regular file:\n{text}"
    );
}

/// Every binary's `--kubeconfig`, and orchestrator's `--policy`, given
/// `/dev/zero` and then a FIFO.
#[test]
fn kubeconfig_and_policy_flags_refuse_devices_and_fifos() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let policy = "--policy {kubeconfig} --http-listen 127.0.0.1:0";
    let rows = [
        ("resource-monitor", RM_V1, "--kubeconfig"),
        ("resource-monitor", RM_KUBERNETES_SOURCE, "--kubeconfig"),
        ("orchestrator", ORCHESTRATOR, "--kubeconfig"),
        ("orchestrator", policy, "--policy"),
        ("purchase-controller", PURCHASE_CONTROLLER, "--kubeconfig"),
        ("market-autoscaler", MARKET_AUTOSCALER, "--kubeconfig"),
    ];
    for (bin, args, flag) in rows {
        for file in [Path::new("/dev/zero"), fifo.as_path()] {
            refuses_file(bin, args, file, flag);
        }
    }
}
