//! Latency benchmark (not a test; bounded to well under a minute):
//!
//! 1. `ReadResources` through source → quota → filter, served over gRPC on
//!    loopback, one call at a time, in each wire shape: p50 / p99.
//! 2. Notification latency through two chained `resource-monitor`
//!    processes (static file → P1 → grpc source in P2 → subscriber): from
//!    the file being renamed into place to the subscriber's notification.
//!
//! Run: `cargo bench -p resource-monitor --bench read_latency`

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use liqo_proto::{shape_a, shape_b, shape_c};
use resource_monitor::directory::{ClusterDirectory, Selector};
use resource_monitor::pattern::Pattern;
use resource_monitor::server::{self, LiqoApi, ServerOptions};
use resource_monitor::source::StaticFile;
use resource_monitor::stage::{FilterConfig, FilterLayer, FilterRule, QuotaConfig, QuotaLayer};
use resource_monitor::ReaderExt;
use tonic::transport::{Channel, Endpoint};

const WARMUP: usize = 2_000;
const READS: usize = 20_000;
const CHANGES: usize = 40;

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("resources.yaml");
        std::fs::write(&file, "cpu: 16\nmemory: 64Gi\nephemeral-storage: 200Gi\nnvidia.com/gpu: 4\npods: 220\n")?;

        println!("ReadResources, source → quota → filter, gRPC over loopback, sequential, {READS} reads:");
        for api in [LiqoApi::V05, LiqoApi::V06, LiqoApi::V09] {
            let latencies = read_latency(&file, api).await?;
            report(&format!("  {api} ({})", shape_name(api)), latencies);
        }

        println!("Notification through two chained processes (file rename → P1 → P2 → subscriber), {CHANGES} changes:");
        let latencies = chained_notification_latency(dir.path(), &file).await?;
        report("  static → P1 (v0.5) → grpc → P2 (v0.5)", latencies);
        Ok(())
    })
}

fn shape_name(api: LiqoApi) -> &'static str {
    match api {
        LiqoApi::V05 => "shape A",
        LiqoApi::V06 => "shape B",
        LiqoApi::V09 => "shape C",
    }
}

async fn read_latency(file: &std::path::Path, api: LiqoApi) -> anyhow::Result<Vec<Duration>> {
    let mut directory = ClusterDirectory::new();
    directory.insert(
        "bench-peer",
        [("tier".to_string(), "gold".to_string())].into(),
    );
    let directory = Arc::new(directory);
    let filter = FilterConfig {
        rules: vec![
            FilterRule {
                selector: Selector::labels([("tier", "gold")]),
                allow: vec![Pattern::new("nvidia.com/*")?],
                deny: vec![],
            },
            FilterRule {
                selector: Selector::everyone(),
                allow: vec![],
                deny: vec![Pattern::new("nvidia.com/*")?],
            },
        ],
    };
    let reader = StaticFile::open(file)
        .await?
        .layer(QuotaLayer::new(
            QuotaConfig::percent(50)?,
            directory.clone(),
        ))
        .layer(FilterLayer::new(filter, directory))
        .boxed();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::serve_listener(
        reader,
        listener,
        ServerOptions::new(api),
        async {
            let _ = stopped.await;
        },
    ));
    let channel = Endpoint::from_shared(format!("http://127.0.0.1:{port}"))?
        .tcp_nodelay(true)
        .connect()
        .await?;

    for _ in 0..WARMUP {
        read_once(&channel, api).await?;
    }
    let mut latencies = Vec::with_capacity(READS);
    for _ in 0..READS {
        let start = Instant::now();
        read_once(&channel, api).await?;
        latencies.push(start.elapsed());
    }
    let _ = stop.send(());
    let _ = serving.await;
    Ok(latencies)
}

async fn read_once(channel: &Channel, api: LiqoApi) -> anyhow::Result<usize> {
    let originator = "bench-peer".to_string();
    Ok(match api {
        LiqoApi::V05 => {
            let mut c = shape_a::resource_reader_client::ResourceReaderClient::new(channel.clone());
            let r = c
                .read_resources(shape_a::ReadRequest { originator })
                .await?
                .into_inner();
            r.resources.len()
        }
        LiqoApi::V06 => {
            let mut c = shape_b::resource_reader_client::ResourceReaderClient::new(channel.clone());
            let r = c
                .read_resources(shape_b::ClusterIdentity {
                    cluster_id: originator,
                })
                .await?
                .into_inner();
            r.resources.len()
        }
        LiqoApi::V09 => {
            let mut c = shape_c::resource_reader_client::ResourceReaderClient::new(channel.clone());
            let r = c
                .read_resources(shape_c::ClusterIdentity {
                    cluster_id: originator,
                })
                .await?
                .into_inner();
            r.resource_lists.len()
        }
    })
}

/// Kills the child process when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `resource-monitor` with `args` (serving on `--listen
/// 127.0.0.1:0`) and return it with the port it announced (edge's
/// `announce` line on stdout). Port 0 rather than a port picked before the
/// start: a picked port, free a moment ago, can be taken meanwhile by any
/// other socket on the machine.
fn spawn(args: &[String]) -> anyhow::Result<(Process, u16)> {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_resource-monitor"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take();
    let process = Process(child);
    let mut lines =
        std::io::BufReader::new(stdout.ok_or_else(|| anyhow::anyhow!("no stdout"))?).lines();
    let port = loop {
        let line = lines.next().ok_or_else(|| {
            anyhow::anyhow!("resource-monitor exited before announcing its port")
        })??;
        // The gRPC port: the one announced without a role.
        if let Some(announced) = edge::announce::parse(&line).filter(|a| !a.who.contains(' ')) {
            break announced.addr.port();
        }
    };
    // Keep reading, so the process never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Ok((process, port))
}

async fn connect(port: u16) -> anyhow::Result<Channel> {
    let endpoint = Endpoint::from_shared(format!("http://127.0.0.1:{port}"))?.tcp_nodelay(true);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match endpoint.connect().await {
            Ok(channel) => return Ok(channel),
            Err(e) if Instant::now() > deadline => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn chained_notification_latency(
    dir: &std::path::Path,
    file: &std::path::Path,
) -> anyhow::Result<Vec<Duration>> {
    let (_p1, p1_port) = spawn(&[
        "--source".into(),
        format!("static:{}", file.display()),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ])?;
    let (_p2, p2_port) = spawn(&[
        "--source".into(),
        format!("grpc:127.0.0.1:{p1_port}"),
        "--quota-percent".into(),
        "50".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ])?;
    let channel = connect(p2_port).await?;
    // P2 answers once it is subscribed to P1.
    let deadline = Instant::now() + Duration::from_secs(20);
    while read_once(&channel, LiqoApi::V05).await.is_err() {
        anyhow::ensure!(Instant::now() < deadline, "P2 never reached P1");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut client = shape_a::resource_reader_client::ResourceReaderClient::new(channel);
    let mut notifications = client
        .subscribe(shape_a::SubscribeRequest {})
        .await?
        .into_inner();
    swallow_queued(&mut notifications).await;

    let tmp = dir.join("next.yaml");
    let mut latencies = Vec::with_capacity(CHANGES);
    for i in 0..CHANGES {
        std::fs::write(&tmp, format!("cpu: {}\nmemory: 64Gi\n", 100 + i))?;
        let start = Instant::now();
        std::fs::rename(&tmp, file)?;
        tokio::time::timeout(Duration::from_secs(5), notifications.message())
            .await
            .map_err(|_| anyhow::anyhow!("no notification within 5 s"))??;
        latencies.push(start.elapsed());
        swallow_queued(&mut notifications).await;
    }
    Ok(latencies)
}

/// Swallow notifications already queued (the initial one, duplicates).
async fn swallow_queued(n: &mut tonic::Streaming<shape_a::UpdateNotification>) {
    while tokio::time::timeout(Duration::from_millis(200), n.message())
        .await
        .is_ok()
    {}
}

fn report(label: &str, mut latencies: Vec<Duration>) {
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    let mean = latencies.iter().sum::<Duration>() / latencies.len() as u32;
    println!(
        "{label}: p50 {:>9.1?}  p99 {:>9.1?}  mean {:>9.1?}  max {:>9.1?}",
        pct(0.50),
        pct(0.99),
        mean,
        latencies[latencies.len() - 1]
    );
}
