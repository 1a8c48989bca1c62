//! One pass of the peering-user-controller and its memory, as the number of
//! consumer clusters served grows (default 100 and 300; 1,000 takes ten
//! minutes, most of it making the peering users: `SIZES=1000
//! SETUP_WAIT_SECS=1200`).
//!
//! The real catalog binary (`CATALOG_BIN`, default `target/release/catalog`,
//! else `target/debug/catalog`) runs on the embedded store. For each size
//! N a provider of its own sells Liqo v1 with a peering user per contract
//! (`PUT /provider/peering {"v1": {}}`), and N consumer clusters each buy
//! one contract, 20 clusters per buyer (under the controller's
//! `--max-consumers-per-buyer`, 50). A fresh test API server over TLS
//! (Liqo v1.2.0 CRDs, the CSR signer) runs in this process, and the real
//! `peering-user-controller` of this build runs as a child process at its
//! shipped defaults (contracts followed on the catalog's change stream,
//! isolation on), but for no leader election, a probe port of our choice
//! and `--max-new-per-pass N`, so that the N peering users are made in a
//! few passes rather than N/20 (the bench's set-up, not what is measured).
//!
//! Once every peering user is usable and every kubeconfig attached, each
//! round buys one more contract for an existing consumer cluster: the
//! change reaches the controller on its stream, and one pass over the N
//! peering users attaches the kubeconfig. Reported per size: the pass's
//! duration (the controller's own `pass_duration_seconds`, sum and count
//! over the rounds), purchase → kubeconfig released (polled on the
//! contract every 10 ms), the set-up, and the controller process's memory
//! from `/proc/<pid>/status` (VmRSS after the rounds, VmHWM its peak).
//!
//! `cargo bench -p peering-users --bench pass_at_scale`
//! (`SIZES=100,300` the numbers of consumer clusters, multiples of
//! 20; `ROUNDS=N` rounds per size, default 5; `SETUP_WAIT_SECS` how long
//! the set-up may take, default 180; `BENCH_CONTROLLER_LOG=FILE` keeps the
//! controller's log).

use std::process::Stdio;
use std::time::{Duration, Instant};

use bench_support::bins::workspace_bin;
use bench_support::requests::{self, summary};
use bench_support::units::{mib, ms};
use bench_support::{measure, percentile};
use futures::StreamExt;
use kube_test_server::{AuditRecord, KubeApiServer};
use reqwest::Method;
use serde_json::{json, Value};

/// Consumer clusters per buyer.
const PER_BUYER: usize = 20;
/// Who the controller is to the API server (RBAC off: the bench measures
/// the work, not the permissions), so that its requests can be counted.
const CONTROLLER_USER: &str = "bench:peering-user-controller";
const ADMIN_SECRET: &str = "admin-secret-of-the-peering-users-bench";
/// Set-up or a round that makes no progress for this long has stalled:
/// the bench stops rather than hang.
const STALL: Duration = Duration::from_secs(180);

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The `p` percentile (a fraction) of `sorted`, zero when empty.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    percentile(sorted, p).unwrap_or_default()
}

/// User + system CPU seconds of process `pid` so far.
fn cpu_seconds(pid: u32) -> Result<f64> {
    Ok(measure::cpu_of(pid)?.as_secs_f64())
}

/// Where the controller's output goes: `BENCH_CONTROLLER_LOG`, appended,
/// else nowhere.
fn log() -> std::io::Result<Stdio> {
    match std::env::var_os("BENCH_CONTROLLER_LOG") {
        Some(path) => Ok(std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?
            .into()),
        None => Ok(Stdio::null()),
    }
}

/// A child process killed when dropped.
struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The catalog over HTTP, as the bench's parties.
#[derive(Clone)]
struct Catalog {
    client: reqwest::Client,
    base: String,
}

impl Catalog {
    /// `method path` with an optional bearer token and JSON body: the
    /// status and the JSON answer (`null` when there is none).
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        if let Some(b) = body {
            request = request.json(b);
        }
        let answer = request.send().await?;
        let status = answer.status().as_u16();
        let text = answer.text().await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// `method path`, which must answer `want`.
    async fn expect(
        &self,
        want: u16,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Value> {
        let what = format!("{method} {path}");
        let (status, answer) = self.call(method, path, token, body).await?;
        if status != want {
            return Err(format!("{what}: {status} (wanted {want}): {answer}").into());
        }
        Ok(answer)
    }

    async fn token(&self, path: &str, body: &Value, bearer: Option<&str>) -> Result<String> {
        let answer = self
            .expect(200, Method::POST, path, bearer, Some(body))
            .await?;
        Ok(answer["token"].as_str().unwrap_or_default().to_string())
    }

    /// Reserve `plan` of `offer` and buy it for `cluster`: the contract's ID.
    async fn buy(&self, buyer: &str, offer: &str, cluster: &str) -> Result<String> {
        let reservation = self
            .expect(
                201,
                Method::POST,
                "/reservations",
                Some(buyer),
                Some(&json!({"offerID": offer, "planID": "small"})),
            )
            .await?;
        let id = reservation["id"].as_str().unwrap_or_default();
        let contract = self
            .expect(
                201,
                Method::POST,
                &format!("/reservations/{id}/purchase"),
                Some(buyer),
                Some(&json!({"consumerClusterID": cluster})),
            )
            .await?;
        Ok(contract["id"].as_str().unwrap_or_default().to_string())
    }

    /// Whether contract `id`'s kubeconfig is released to its buyer.
    async fn released(&self, buyer: &str, id: &str) -> Result<bool> {
        let (_, contract) = self
            .call(Method::GET, &format!("/contracts/{id}"), Some(buyer), None)
            .await?;
        Ok(contract["peeringState"]["state"] == "credentialsReady")
    }
}

/// The controller's `/metrics`, as name → value of its plain series.
async fn metrics(client: &reqwest::Client, port: u16) -> Result<Vec<(String, f64)>> {
    let text = client
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect())
}

fn series(all: &[(String, f64)], name: &str) -> f64 {
    all.iter().find(|(n, _)| n == name).map_or(0.0, |(_, v)| *v)
}

const USERS: &str = "peering_user_controller_users";
const ATTACHED: &str = "peering_user_controller_attached_total";
const PASS_SUM: &str = "peering_user_controller_pass_duration_seconds_sum";
const PASS_COUNT: &str = "peering_user_controller_pass_duration_seconds_count";

/// The controller's requests among `records`, as (`verb resource`,
/// count), most first.
fn requests_by_kind(records: &[AuditRecord]) -> Vec<(String, usize)> {
    requests::by_kind(AuditRecord::kinds_of(records, CONTROLLER_USER))
}

/// What one size measured.
struct Figures {
    consumers: usize,
    setup: Duration,
    /// Mean pass over the rounds, and the passes the rounds took.
    pass_mean: Duration,
    passes: f64,
    released: Vec<Duration>,
    /// CPU seconds of each round: the controller, this process (the API
    /// server, the bench's polls), the catalog.
    cpu_rounds: Vec<[f64; 3]>,
    /// The controller's CPU seconds and API requests per pass, over the
    /// rounds.
    pass_cpu: f64,
    pass_requests: Vec<(String, usize)>,
    rss_ready: u64,
    rss_after: u64,
    hwm: u64,
}

impl Figures {
    /// Mean CPU seconds of a round: controller, API server, catalog.
    fn cpu_per_round(&self) -> [f64; 3] {
        let n = self.cpu_rounds.len().max(1) as f64;
        let mut sum = [0.0; 3];
        for r in &self.cpu_rounds {
            for (s, x) in sum.iter_mut().zip(r) {
                *s += x;
            }
        }
        sum.map(|s| s / n)
    }
}

async fn one_size(
    catalog: &Catalog,
    catalog_pid: u32,
    admin: &str,
    total: usize,
    rounds: usize,
) -> Result<Figures> {
    // The provider of this size, selling Liqo v1 with a user per contract.
    let credentials = json!({"clusterID": format!("bench-provider-{total}"),
        "clusterName": format!("bench provider {total}"),
        "authURL": format!("https://bench-provider-{total}.example:6443"),
        "token": format!("secret-of-bench-provider-{total}")});
    let provider = catalog.token("/authenticate", &credentials, None).await?;
    let offer = format!("shop-{total}");
    let plans = json!({"small": {"name": "small", "cost": "1.5",
                                 "resources": {"cpu": "2", "memory": "4Gi"}}});
    catalog
        .expect(
            201,
            Method::POST,
            &format!("/offer/{offer}"),
            Some(&provider),
            Some(&json!({"name": "Compute for rent", "type": "compute", "plans": plans})),
        )
        .await?;
    catalog
        .expect(
            200,
            Method::PUT,
            "/provider/peering",
            Some(&provider),
            Some(&json!({"v1": {}})),
        )
        .await?;
    // The buyers and their contracts, a cluster each.
    let cluster = |i: usize| format!("c{total}-{i:04}");
    let mut buyers = Vec::new();
    for b in 0..total / PER_BUYER {
        let subject = format!("buyer-{total}-{b:03}");
        buyers.push(
            catalog
                .token(
                    "/consumer-tokens",
                    &json!({"subject": subject}),
                    Some(admin),
                )
                .await?,
        );
    }
    let started = Instant::now();
    let bought: Vec<Result<String>> = futures::stream::iter(0..total)
        .map(|i| {
            let (buyer, offer, cluster) =
                (buyers[i / PER_BUYER].clone(), offer.clone(), cluster(i));
            async move { catalog.buy(&buyer, &offer, &cluster).await }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    bought.into_iter().collect::<Result<Vec<_>>>()?;
    eprintln!(
        "[{total}] {total} contracts bought in {:?}",
        started.elapsed()
    );

    // The provider's cluster.
    let kube = KubeApiServer::start_tls()
        .await
        .map_err(|e| e.to_string())?;
    kube.set_rbac(false);
    kube.register_liqo_networking_crds()
        .map_err(|e| e.to_string())?;
    kube.apply(
        ("", "namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "liqo"}}),
    );
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    kube.write_kubeconfig_as(&kubeconfig, CONTROLLER_USER)
        .map_err(|e| e.to_string())?;
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, kube.ca_pem().unwrap_or_default())?;
    let credentials_file = dir.path().join("catalog-credentials.json");
    std::fs::write(&credentials_file, credentials.to_string())?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&credentials_file, std::fs::Permissions::from_mode(0o600))?;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let started = Instant::now();
    let controller = Killed(
        std::process::Command::new(env!("CARGO_BIN_EXE_peering-user-controller"))
            .args(["--catalog-url", &catalog.base])
            .arg("--catalog-credentials-file")
            .arg(&credentials_file)
            .args(["--api-server-address", &kube.url()])
            .arg("--api-server-ca-file")
            .arg(&ca)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--leader-elect", "false"])
            .args(["--http-listen", &format!("127.0.0.1:{port}")])
            .args(["--max-new-per-pass", &total.to_string()])
            .env("POD_NAMESPACE", "liqo")
            .stdout(log()?)
            .stderr(log()?)
            .spawn()?,
    );
    let pid = controller.0.id();
    let probe = catalog_client::Http::client(Duration::from_secs(5), "peering-users-bench")?;
    // Every peering user usable and every kubeconfig attached.
    let mut seen = (0.0, 0.0);
    let setup_wait = std::env::var("SETUP_WAIT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(STALL, Duration::from_secs);
    loop {
        if started.elapsed() > setup_wait {
            return Err(format!(
                "[{total}] the peering users were not all ready within {setup_wait:?}: \
                 {} users, {} kubeconfigs attached (BENCH_CONTROLLER_LOG=FILE keeps its log)",
                seen.0, seen.1
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Ok(now) = metrics(&probe, port).await else {
            continue;
        };
        seen = (series(&now, USERS), series(&now, ATTACHED));
        if series(&now, USERS) as usize >= total && series(&now, ATTACHED) as usize >= total {
            break;
        }
    }
    let setup = started.elapsed();
    eprintln!("[{total}] {total} peering users ready and attached in {setup:?}");
    // Whatever the last attachment woke settles first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_ready = measure::rss_kib(pid)? * 1024;

    let before = metrics(&probe, port).await?;
    // Over all the rounds, to divide by the passes they took.
    let (all_mark, all_cpu) = (kube.audit().len(), cpu_seconds(pid)?);
    let mut released = Vec::new();
    let mut cpu_rounds = Vec::new();
    for r in 0..rounds {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let i = (r * PER_BUYER + r) % total;
        let buyer = &buyers[i / PER_BUYER];
        let mark = kube.audit().len();
        let me = std::process::id();
        let cpu_before = [
            cpu_seconds(pid)?,
            cpu_seconds(me)?,
            cpu_seconds(catalog_pid)?,
        ];
        let bought = Instant::now();
        let id = catalog.buy(buyer, &offer, &cluster(i)).await?;
        while !catalog.released(buyer, &id).await? {
            if bought.elapsed() > STALL {
                return Err(format!("[{total}] round {r}: no kubeconfig within {STALL:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let took = bought.elapsed();
        released.push(took);
        let spent = [
            cpu_seconds(pid)? - cpu_before[0],
            cpu_seconds(me)? - cpu_before[1],
            cpu_seconds(catalog_pid)? - cpu_before[2],
        ];
        cpu_rounds.push(spent);
        let made = requests_by_kind(&kube.audit()[mark..]);
        eprintln!(
            "[{total}] round {r}: contract for {} released in {took:?}; CPU: controller {:.2} s, API server and bench {:.2} s, catalog {:.2} s; the controller's API requests: {}",
            cluster(i),
            spent[0],
            spent[1],
            spent[2],
            summary(&made)
        );
    }
    // The last round's pass has ended once its kubeconfig is released.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = metrics(&probe, port).await?;
    let passes = series(&after, PASS_COUNT) - series(&before, PASS_COUNT);
    let pass_cpu = (cpu_seconds(pid)? - all_cpu) / passes.max(1.0);
    let pass_requests = requests_by_kind(&kube.audit()[all_mark..])
        .into_iter()
        .map(|(kind, n)| (kind, (n as f64 / passes.max(1.0)).round() as usize))
        .collect::<Vec<_>>();
    let spent = series(&after, PASS_SUM) - series(&before, PASS_SUM);
    let (hwm, rss_after) = (
        measure::peak_rss_kib(pid)? * 1024,
        measure::rss_kib(pid)? * 1024,
    );
    drop(controller);
    drop(kube);
    released.sort();
    Ok(Figures {
        consumers: total,
        setup,
        pass_mean: Duration::from_secs_f64(if passes > 0.0 { spent / passes } else { 0.0 }),
        passes,
        released,
        cpu_rounds,
        pass_cpu,
        pass_requests,
        rss_ready,
        rss_after,
        hwm,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let sizes: Vec<usize> = std::env::var("SIZES")
        .unwrap_or_else(|_| "100,300".to_string())
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("SIZES: a comma-separated list of consumer counts: {e}"))?;
    if let Some(bad) = sizes
        .iter()
        .find(|n| **n == 0 || !n.is_multiple_of(PER_BUYER))
    {
        return Err(format!("SIZES: {bad} is not a positive multiple of {PER_BUYER}").into());
    }

    // The catalog.
    let data = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let bin = workspace_bin("catalog");
    eprintln!("catalog: {}", bin.display());
    let catalog_process = Killed(
        std::process::Command::new(&bin)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data.path())
            .args([
                "--auth-rate-limit",
                "100000",
                "--admin-secret",
                ADMIN_SECRET,
            ])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()?,
    );
    let catalog_pid = catalog_process.0.id();
    let catalog = Catalog {
        // With the process's rustls provider installed (ring), as every
        // client of the catalog makes it.
        client: catalog_client::Http::client(Duration::from_secs(30), "peering-users-bench")?,
        base: format!("http://127.0.0.1:{port}"),
    };
    let up = Instant::now();
    let admin = loop {
        match catalog
            .token(
                "/authenticate/admin",
                &json!({"secret": ADMIN_SECRET}),
                None,
            )
            .await
        {
            Ok(token) => break token,
            Err(e) if up.elapsed() > Duration::from_secs(30) => {
                return Err(format!("the catalog did not start: {e}").into())
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };

    let mut all = Vec::new();
    for &total in &sizes {
        let f = one_size(&catalog, catalog_pid, &admin, total, rounds).await?;
        println!(
            "peering-user-controller, {} consumer clusters: one pass {:.1} ms (mean of {} passes over {} rounds); \
             purchase -> kubeconfig released p50 {:.0} ms, worst {:.0} ms; set-up {:.1} s; \
             CPU per round: controller {:.2} s, API server {:.2} s, catalog {:.2} s; \
             controller RSS {:.1} MiB ready, {:.1} MiB after the rounds, peak (VmHWM) {:.1} MiB; \
             per pass: controller CPU {:.3} s, API requests {}",
            f.consumers,
            ms(f.pass_mean),
            f.passes,
            f.released.len(),
            ms(pct(&f.released, 0.50)),
            ms(f.released.last().copied().unwrap_or_default()),
            f.setup.as_secs_f64(),
            f.cpu_per_round()[0],
            f.cpu_per_round()[1],
            f.cpu_per_round()[2],
            mib(f.rss_ready),
            mib(f.rss_after),
            mib(f.hwm),
            f.pass_cpu,
            summary(&f.pass_requests),
        );
        all.push(f);
    }
    println!();
    println!("| consumer clusters | one pass (mean) | passes | controller CPU per pass | API requests per pass | purchase → released p50 | worst | set-up | RSS ready | RSS after rounds | VmHWM |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in &all {
        println!(
            "| {} | {:.0} ms | {} | {:.3} s | {} | {:.0} ms | {:.0} ms | {:.1} s | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
            f.consumers,
            ms(f.pass_mean),
            f.passes,
            f.pass_cpu,
            f.pass_requests.iter().map(|(_, n)| n).sum::<usize>(),
            ms(pct(&f.released, 0.50)),
            ms(f.released.last().copied().unwrap_or_default()),
            f.setup.as_secs_f64(),
            mib(f.rss_ready),
            mib(f.rss_after),
            mib(f.hwm),
        );
    }
    Ok(())
}
