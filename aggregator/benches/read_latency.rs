//! Read latency of the aggregator over 10 and 100 upstreams on loopback
//! (not a test; bounded to well under a minute once built).
//!
//! N upstream ResourceReader servers (`resource-reader`'s server over a
//! memory source, shape A, each on its own loopback port) are pooled by an
//! [`Aggregate`] served over gRPC (shape A); a client reads it one call at a
//! time. Every read fans out to all N upstreams over gRPC and sums their
//! answers.
//!
//! Two placements of the upstreams are measured:
//! - `separate process`: the upstreams run in a second process (this
//!   benchmark re-executed), as in production, where they are other
//!   processes (on other machines);
//! - `same process`: the upstreams share the aggregator's runtime.
//!
//! Both share this machine's cores with everything else running on it.
//! Reported: wall-clock percentiles of a gRPC client's read of the served
//! aggregate (what Liqo sees), and the CPU time the benchmark process spent
//! per read.
//!
//! Run: `cargo bench -p aggregator --bench read_latency`

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aggregator::config::{Dynamic, UpstreamSpec};
use aggregator::metrics::Metrics;
use aggregator::{Aggregate, Policy};
use liqo_proto::shape_a;
use quantity::ResourceList;
use resource_reader::server::{serve_listener, ServerOptions};
use resource_reader::LiqoApi;
use resource_reader::MemorySource;
use tokio::net::TcpListener;
use tonic::transport::Endpoint;

/// (upstreams, warm-up reads, timed reads)
const CASES: [(usize, usize, usize); 2] = [(10, 500, 5_000), (100, 200, 2_000)];
/// No measurement runs longer than this, whatever its read count.
const CASE_LIMIT: Duration = Duration::from_secs(15);
/// Set in the re-executed benchmark: serve this many upstreams.
const HOST_ENV: &str = "AGGREGATOR_BENCH_UPSTREAMS";

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Ok(n) = std::env::var(HOST_ENV) {
        return runtime.block_on(host_upstreams(n.parse()?));
    }
    runtime.block_on(async {
        println!("Aggregated ReadResources over N loopback upstreams (gRPC fan-out + sum), sequential reads:");
        println!("| upstreams | upstreams run in | reads | p50 | p90 | p99 | max | mean | bench process CPU/read |");
        println!("|----------:|------------------|------:|----:|----:|----:|----:|-----:|-----:|");
        for (n, warmup, reads) in CASES {
            let (host, ports) = spawn_upstreams(n)?;
            run_case(n, "separate process", &ports, warmup, reads).await?;
            drop(host);
            let (_servers, ports) = serve_upstreams(n).await?;
            run_case(n, "same process", &ports, warmup, reads).await?;
        }
        Ok(())
    })
}

/// What upstream `i` offers: mixed units, so the sums exercise the
/// quantity arithmetic.
fn offer(i: usize) -> anyhow::Result<ResourceList> {
    ResourceList::from_strings([
        ("cpu", ["1500m", "2"][i % 2]),
        ("memory", ["1Gi", "512Mi", "512Mi"][i % 3]),
        ("ephemeral-storage", ["2G", "1Gi"][i % 2]),
        ("pods", "110"),
    ])
    .map_err(|(name, e)| anyhow::anyhow!("{name}: {e}"))
}

/// Stops the servers it was made for when dropped.
struct Servers {
    _stops: Vec<tokio::sync::oneshot::Sender<()>>,
}

/// Serve `n` upstreams in this process; returns their ports.
async fn serve_upstreams(n: usize) -> anyhow::Result<(Servers, Vec<u16>)> {
    let mut stops = Vec::with_capacity(n);
    let mut ports = Vec::with_capacity(n);
    for i in 0..n {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        ports.push(listener.local_addr()?.port());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve_listener(
            Arc::new(MemorySource::new(offer(i)?)),
            listener,
            ServerOptions::new(LiqoApi::V05),
            async {
                let _ = stopped.await;
            },
        ));
        stops.push(stop);
    }
    Ok((Servers { _stops: stops }, ports))
}

/// The upstream process: serve `n` upstreams, print their ports on one
/// line, and stop when stdin closes (the benchmark ended or died).
async fn host_upstreams(n: usize) -> anyhow::Result<()> {
    let (_servers, ports) = serve_upstreams(n).await?;
    let line: Vec<String> = ports.iter().map(u16::to_string).collect();
    let mut out = std::io::stdout();
    writeln!(out, "{}", line.join(" "))?;
    out.flush()?;
    tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    })
    .await?;
    Ok(())
}

/// The upstream process, ended when dropped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        if !matches!(self.0.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(100));
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Start the upstream process; returns it and the ports it serves.
fn spawn_upstreams(n: usize) -> anyhow::Result<(Host, Vec<u16>)> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(HOST_ENV, n.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let host = Host(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    let ports = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<Vec<u16>, _>>()?;
    anyhow::ensure!(
        ports.len() == n,
        "upstream process served {} of {n} upstreams",
        ports.len()
    );
    Ok((host, ports))
}

/// CPU time (user + system) this process has used so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // After the parenthesised command name, utime and stime are the 12th
    // and 13th fields, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

async fn run_case(
    n: usize,
    placement: &str,
    ports: &[u16],
    warmup: usize,
    reads: usize,
) -> anyhow::Result<()> {
    let specs = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            Ok(UpstreamSpec {
                cluster_id: format!("cluster-{i}").parse().map_err(anyhow::Error::msg)?,
                address: format!("127.0.0.1:{port}")
                    .parse()
                    .map_err(anyhow::Error::msg)?,
                api: LiqoApi::V05,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let dynamic = Dynamic {
        upstreams: specs,
        policy: Policy::Omit,
        upstream_timeout: Duration::from_secs(1),
    };
    let aggregate = Arc::new(Aggregate::start(
        &dynamic,
        Duration::from_millis(100),
        Metrics::new(),
    )?);
    let unreachable = aggregate.wait_connected(Duration::from_secs(10)).await;
    anyhow::ensure!(
        unreachable.is_empty(),
        "upstreams not connected: {unreachable:?}"
    );

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let _server = Servers { _stops: vec![stop] };
    tokio::spawn(serve_listener(
        aggregate.clone(),
        listener,
        ServerOptions::new(LiqoApi::V05),
        async {
            let _ = stopped.await;
        },
    ));
    let channel = Endpoint::from_shared(format!("http://127.0.0.1:{port}"))?
        .tcp_nodelay(true)
        .connect()
        .await?;
    let client = shape_a::resource_reader_client::ResourceReaderClient::new(channel);

    // Every answer is checked against the exact expected sum.
    let want = (0..n)
        .map(offer)
        .try_fold(ResourceList::new(), |sum, o| anyhow::Ok(sum.add(&o?)))?
        .to_strings();
    let read = || {
        let mut client = client.clone();
        let want = want.clone();
        async move {
            let answer = client
                .read_resources(shape_a::ReadRequest {
                    originator: "peer".into(),
                })
                .await?
                .into_inner();
            let got: BTreeMap<_, _> = answer.resources.into_iter().collect();
            anyhow::ensure!(got == want, "wrong sum: {got:?}");
            anyhow::Ok(())
        }
    };
    for _ in 0..warmup {
        read().await?;
    }
    let cpu_before = cpu_time();
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(reads);
    while latencies.len() < reads && started.elapsed() < CASE_LIMIT {
        let t = Instant::now();
        read().await?;
        latencies.push(t.elapsed());
    }
    let cpu = cpu_time().saturating_sub(cpu_before);
    report(n, placement, latencies, cpu);
    Ok(())
}

fn report(n: usize, placement: &str, mut latencies: Vec<Duration>, cpu: Duration) {
    latencies.sort();
    let count = latencies.len();
    if count == 0 {
        println!("| {n} | {placement} | 0 | – | – | – | – | – | – |");
        return;
    }
    let pct = |p: f64| latencies[((count as f64 * p).ceil() as usize).clamp(1, count) - 1];
    let mean = latencies.iter().sum::<Duration>() / count as u32;
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
    println!(
        "| {n} | {placement} | {count} | {} | {} | {} | {} | {} | {} |",
        ms(pct(0.50)),
        ms(pct(0.90)),
        ms(pct(0.99)),
        ms(latencies[count - 1]),
        ms(mean),
        ms(cpu / count as u32),
    );
}
