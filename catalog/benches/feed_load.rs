//! Feed load benchmark: publish→receive latency of `/subscribe` with many
//! subscribers, and the catalog's memory per idle subscriber.
//!
//! For each subscriber count N it starts the real `catalog` binary (embedded
//! store, loopback), publishes a list of offers, opens N WebSocket
//! subscribers (minimal clients: they parse frame headers, read `seq` from
//! the start of each message, inflating it when compressed, answer pings;
//! like browsers they offer `permessage-deflate` unless told not to),
//! measures the catalog's RSS
//! growth per idle subscriber, then replaces one offer at a time and
//! measures, for every subscriber, the time from sending the `POST` to
//! having received the whole message for that change. Each update waits
//! for every subscriber (or a timeout) before the next. Finally it stops the
//! catalog with SIGTERM and times the shutdown (every socket gets a 1001
//! close frame).
//!
//! Mode `floor` (in `FEED_LOAD_MODES`) runs the same subscribers and
//! updates against the least a WebSocket server can do instead of the
//! catalog (see `feed_load/floor.rs`): the machine's own floor for the
//! delta rows.
//!
//! Run: `cargo bench -p catalog --bench feed_load`
//!
//! Settings (environment): `FEED_LOAD_SUBSCRIBERS` (default `1000,10000`),
//! `FEED_LOAD_MODES` (`snapshot,delta`; add `floor` for the floor row), `FEED_LOAD_DEFLATE` (`on,off`),
//! `FEED_LOAD_OFFERS` (50), `FEED_LOAD_UPDATES` (20). Bounded: at most 15,000 subscribers, every
//! phase has a timeout.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use e2e::catalog::{provider, Backend, Catalog, Env};
use e2e::measure::{cpu_of, raise_nofile, rss_kib};
use miniz_oxide::inflate::core::{self as inflate, inflate_flags};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

#[path = "feed_load/floor.rs"]
mod floor;

const MAX_SUBSCRIBERS: usize = 15_000;
const CONNECT_CONCURRENCY: usize = 200;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(120);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(15);

fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn env_usize(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .with_context(|| format!("{name}={v} is not a number")),
        Err(_) => Ok(default),
    }
}

/// 48 pseudo-random hex digits (deterministic per `seed`).
fn noise(seed: usize) -> String {
    let mut x = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..3)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("{x:016x}")
        })
        .collect()
}

/// A realistic offer: three plans, a few resources (~550 bytes as JSON).
fn offer(i: usize, round: usize) -> Value {
    json!({
        "name": format!("Offer {i}"),
        "type": (["compute", "storage", "gpu"][i % 3]),
        // Some entropy, as real descriptions have, so compression is not
        // flattered by fifty near-identical offers.
        "description": format!("Load-test offer {i}, revision {round}: {}", noise(i * 1000 + round)),
        "plans": {
            "small": {"name": "small", "cost": format!("{}.25", i % 7),
                      "resources": {"cpu": "2", "memory": "4Gi", "storage": "100G"}},
            "medium": {"name": "medium", "cost": format!("{}.5", 1 + i % 7),
                       "resources": {"cpu": "4", "memory": "16Gi", "storage": "300G"}},
            "large": {"name": "large", "cost": format!("{}.75", 3 + i % 7),
                      "resources": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "1"}}
        }
    })
}

/// What the subscribers share with the driver.
struct Shared {
    started: Instant,
    /// Send time (ns since `started`) of update k; 0 until sent.
    sent_at: Vec<AtomicU64>,
    /// Latencies (µs) of update k, one per subscriber that got it.
    latencies: Vec<Mutex<Vec<u32>>>,
    received: Vec<AtomicUsize>,
    /// Subscribers that got their first list.
    ready: AtomicUsize,
    /// Subscribers that ended (closed, failed).
    ended: AtomicUsize,
    closed_1001: AtomicUsize,
    failures: Mutex<Vec<String>>,
}

impl Shared {
    fn new(updates: usize) -> Self {
        Shared {
            started: Instant::now(),
            sent_at: (0..=updates).map(|_| AtomicU64::new(0)).collect(),
            latencies: (0..=updates).map(|_| Mutex::new(Vec::new())).collect(),
            received: (0..=updates).map(|_| AtomicUsize::new(0)).collect(),
            ready: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
            closed_1001: AtomicUsize::new(0),
            failures: Mutex::new(Vec::new()),
        }
    }

    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }
}

/// Incremental parser of unmasked server frames that keeps only what the
/// benchmark needs: the start of each text message (for `seq`) and control
/// payloads.
#[derive(Default)]
struct Frames {
    header: Vec<u8>,
    /// (opcode, compressed, bytes still to read) while in a payload.
    payload: Option<(u8, bool, usize)>,
    kept: Vec<u8>,
}

enum FrameEvent {
    Text(Vec<u8>),
    Ping(Vec<u8>),
    Close(u16),
}

/// Bytes of each payload kept: enough compressed input to inflate the
/// message's first bytes (where `seq` is).
const KEEP: usize = 2048;
const PREFIX: usize = 64;

impl Frames {
    fn feed(&mut self, mut data: &[u8], out: &mut Vec<FrameEvent>) -> Result<()> {
        while !data.is_empty() {
            match &mut self.payload {
                None => {
                    self.header.push(data[0]);
                    data = &data[1..];
                    if self.header.len() < 2 {
                        continue;
                    }
                    if self.header[1] & 0x80 != 0 {
                        bail!("masked server frame");
                    }
                    let need = match self.header[1] & 0x7f {
                        126 => 4,
                        127 => 10,
                        _ => 2,
                    };
                    if self.header.len() < need {
                        continue;
                    }
                    let len = match need {
                        4 => u16::from_be_bytes([self.header[2], self.header[3]]) as usize,
                        10 => u64::from_be_bytes(self.header[2..10].try_into()?) as usize,
                        _ => (self.header[1] & 0x7f) as usize,
                    };
                    let op = self.header[0] & 0x0f;
                    let compressed = self.header[0] & 0x40 != 0;
                    self.header.clear();
                    self.kept.clear();
                    self.payload = Some((op, compressed, len));
                    if len == 0 {
                        self.finish(out);
                    }
                }
                Some((_, _, remaining)) => {
                    let take = (*remaining).min(data.len());
                    let room = KEEP.saturating_sub(self.kept.len()).min(take);
                    self.kept.extend_from_slice(&data[..room]);
                    *remaining -= take;
                    data = &data[take..];
                    if *remaining == 0 {
                        self.finish(out);
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<FrameEvent>) {
        let Some((op, compressed, _)) = self.payload.take() else {
            return;
        };
        let kept = std::mem::take(&mut self.kept);
        match op {
            0x1 if compressed => {
                // Inflate just the first bytes, with one decompressor per
                // thread that is re-initialised, not re-zeroed: a fresh
                // inflater per message would cost the client more than the
                // server spends sending it.
                let mut prefix = [0u8; PREFIX];
                let n = INFLATER.with(|d| {
                    let mut d = d.borrow_mut();
                    d.init();
                    let (_, _, n) = inflate::decompress(
                        &mut d,
                        &kept,
                        &mut prefix,
                        0,
                        inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF
                            | inflate_flags::TINFL_FLAG_HAS_MORE_INPUT,
                    );
                    n
                });
                out.push(FrameEvent::Text(prefix[..n].to_vec()))
            }
            0x1 => out.push(FrameEvent::Text(kept)),
            0x9 => out.push(FrameEvent::Ping(kept)),
            0x8 => out.push(FrameEvent::Close(if kept.len() >= 2 {
                u16::from_be_bytes([kept[0], kept[1]])
            } else {
                1005
            })),
            _ => {}
        }
    }
}

thread_local! {
    static INFLATER: std::cell::RefCell<Box<inflate::DecompressorOxide>> =
        std::cell::RefCell::new(Box::default());
}

/// `seq` from the start of a message (`{"type":"...","seq":N,...`).
fn seq_of(prefix: &[u8]) -> Option<u64> {
    let i = prefix.windows(6).position(|w| w == b"\"seq\":")? + 6;
    let digits: Vec<u8> = prefix[i..]
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

fn pong(payload: &[u8]) -> Vec<u8> {
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let mut f = vec![0x8A, 0x80 | payload.len() as u8];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

async fn subscriber(
    port: u16,
    query: String,
    deflate: bool,
    shared: Arc<Shared>,
    gate: Arc<Semaphore>,
) -> Result<()> {
    let extension = if deflate {
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
    } else {
        ""
    };
    let permit = gate.acquire_owned().await?;
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    s.set_nodelay(true)?;
    s.write_all(
        format!(
            "GET /subscribe{query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\n{extension}\r\n"
        )
        .as_bytes(),
    )
    .await?;
    let mut buf = vec![0u8; 8192];
    let mut have = 0;
    let head_end = loop {
        let n = s.read(&mut buf[have..]).await?;
        if n == 0 {
            bail!("closed during the handshake");
        }
        have += n;
        if let Some(i) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if have == buf.len() {
            bail!("handshake answer too long");
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    if !head.starts_with("http/1.1 101") {
        bail!("{head}");
    }
    if deflate != head.contains("permessage-deflate") {
        bail!("compression not negotiated as asked ({deflate}): {head}");
    }
    let mut frames = Frames::default();
    let mut events = Vec::new();
    frames.feed(&buf[head_end..have], &mut events)?;
    let mut base: Option<u64> = None;
    let mut permit = Some(permit);
    loop {
        for e in events.drain(..) {
            match e {
                FrameEvent::Text(prefix) => {
                    let now = shared.now_ns();
                    let seq = seq_of(&prefix).context("message without seq")?;
                    match base {
                        None => {
                            base = Some(seq);
                            shared.ready.fetch_add(1, Ordering::SeqCst);
                            // Connected and listed: let the next one in.
                            permit.take();
                        }
                        Some(b) => {
                            let k = (seq - b) as usize;
                            if k >= shared.sent_at.len() {
                                continue;
                            }
                            let sent = shared.sent_at[k].load(Ordering::SeqCst);
                            let micros = (now.saturating_sub(sent) / 1000) as u32;
                            if let Ok(mut l) = shared.latencies[k].lock() {
                                l.push(micros);
                            }
                            shared.received[k].fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
                FrameEvent::Ping(payload) => s.write_all(&pong(&payload)).await?,
                FrameEvent::Close(code) => {
                    if code == 1001 {
                        shared.closed_1001.fetch_add(1, Ordering::SeqCst);
                    }
                    return Ok(());
                }
            }
        }
        let n = s.read(&mut buf).await?;
        if n == 0 {
            bail!("connection closed without a close frame");
        }
        frames.feed(&buf[..n], &mut events)?;
    }
}

/// The `p` percentile of microsecond samples, in milliseconds.
fn percentile(sorted: &[u32], p: f64) -> f64 {
    bench_support::percentile(sorted, p).map_or(f64::NAN, |us| f64::from(us) / 1000.0)
}

/// Cumulative (upper bound in seconds, count) of the server's
/// publish-to-send histogram.
fn buckets(metrics: &str) -> Vec<(f64, f64)> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("catalog_feed_publish_to_send_seconds_bucket{le=\""))
        .filter_map(|l| {
            let (le, rest) = l.split_once('"')?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, rest.rsplit(' ').next()?.parse().ok()?))
        })
        .collect()
}

/// The bucket bound (ms) under which a `q` share of the observations fall.
fn bucket_quantile(cumulative: &[(f64, f64)], q: f64) -> f64 {
    let total = cumulative.last().map(|b| b.1).unwrap_or(0.0);
    cumulative
        .iter()
        .find(|(_, n)| *n >= q * total && total > 0.0)
        .map(|(le, _)| le * 1000.0)
        .unwrap_or(f64::NAN)
}

fn wait_until(what: &str, timeout: Duration, done: impl Fn() -> bool) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

struct Outcome {
    subscribers: usize,
    mode: String,
    deflate: bool,
    list_bytes: usize,
    p50: f64,
    p99: f64,
    max: f64,
    post_p50: f64,
    delivered: usize,
    expected: usize,
    rss_per_sub_kib: f64,
    /// Average bytes on the wire per feed message (server metrics).
    message_bytes: f64,
    server_p50: f64,
    server_p99: f64,
    shutdown: Duration,
    closed_1001: usize,
    /// CPU time per update of the catalog and of this client process
    /// (every subscriber, the driver), over the update phase.
    catalog_cpu_per_update: Duration,
    client_cpu_per_update: Duration,
    /// Per update: from the first subscriber receiving it to the last one
    /// (how long the client takes to drain every socket once data flows).
    spread_p50: f64,
}

fn run(
    n: usize,
    mode: &str,
    deflate: bool,
    offers: usize,
    updates: usize,
    rt: &tokio::runtime::Runtime,
) -> Result<Outcome> {
    let env = Env::new(Backend::Embedded);
    let max = (n + 100).to_string();
    let c: Catalog = env.start_with(&["--feed-max-subscribers", &max, "--max-connections", &max]);
    let pid = c.child.pid();
    let token = c.login(&provider(1));
    for i in 0..offers {
        c.put_offer(&format!("offer-{i:03}"), &offer(i, 0), &token);
    }
    let list_bytes = c.get("/offers").text.len();
    std::thread::sleep(Duration::from_millis(500));
    let rss_before = rss_kib(pid)?;

    let shared = Arc::new(Shared::new(updates));
    let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
    let query = format!("?mode={mode}");
    let started = Instant::now();
    for _ in 0..n {
        let (shared, gate, query) = (shared.clone(), gate.clone(), query.clone());
        let port = c.port;
        rt.spawn(async move {
            if let Err(e) = subscriber(port, query, deflate, shared.clone(), gate).await {
                if let Ok(mut f) = shared.failures.lock() {
                    f.push(e.to_string());
                }
            }
            shared.ended.fetch_add(1, Ordering::SeqCst);
        });
    }
    wait_until("every subscriber's first list", CONNECT_TIMEOUT, || {
        shared.ready.load(Ordering::SeqCst) + shared.ended.load(Ordering::SeqCst) >= n
    })?;
    let ready = shared.ready.load(Ordering::SeqCst);
    eprintln!(
        "  {ready}/{n} subscribers connected in {:?}",
        started.elapsed()
    );
    if ready < n {
        let f = shared
            .failures
            .lock()
            .map(|f| f.iter().take(3).cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        bail!("only {ready} of {n} subscribers connected: {f:?}");
    }
    std::thread::sleep(Duration::from_secs(2));
    let rss_after = rss_kib(pid)?;
    let rss_per_sub_kib = (rss_after as f64 - rss_before as f64) / n as f64;

    let buckets_before = buckets(&c.get("/metrics").text);
    let me = std::process::id();
    let (catalog_cpu_before, client_cpu_before) = (cpu_of(pid)?, cpu_of(me)?);
    let mut post = Vec::new();
    for k in 1..=updates {
        let i = k % offers;
        let body = offer(i, k);
        shared.sent_at[k].store(shared.now_ns(), Ordering::SeqCst);
        let t = Instant::now();
        c.put_offer(&format!("offer-{i:03}"), &body, &token);
        post.push(t.elapsed().as_micros() as u32);
        let _ = wait_until(&format!("update {k}"), UPDATE_TIMEOUT, || {
            shared.received[k].load(Ordering::SeqCst) >= n
        });
        std::thread::sleep(Duration::from_millis(200));
    }

    // The 200 ms pauses cost next to nothing: idle subscribers wait.
    let catalog_cpu_per_update = (cpu_of(pid)? - catalog_cpu_before) / updates as u32;
    let client_cpu_per_update = (cpu_of(me)? - client_cpu_before) / updates as u32;
    let (all, spreads, delivered) = latencies(&shared, updates);
    post.sort_unstable();

    let metrics = c.get("/metrics").text;
    let sample = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let message_bytes =
        sample("catalog_feed_sent_bytes_total") / sample("catalog_feed_messages_sent_total");
    // The server's own view of the updates: publish → message handed to
    // the socket (bucket upper bounds).
    let during: Vec<(f64, f64)> = buckets(&metrics)
        .iter()
        .zip(&buckets_before)
        .map(|((le, after), (_, before))| (*le, after - before))
        .collect();
    let server_p50 = bucket_quantile(&during, 0.50);
    let server_p99 = bucket_quantile(&during, 0.99);
    let mut child = c.child;
    let stop = Instant::now();
    child.terminate(Duration::from_secs(60))?;
    let shutdown = stop.elapsed();
    let _ = wait_until(
        "subscribers to see the close",
        Duration::from_secs(10),
        || shared.ended.load(Ordering::SeqCst) >= n,
    );
    Ok(Outcome {
        subscribers: n,
        mode: mode.to_string(),
        deflate,
        list_bytes,
        p50: percentile(&all, 0.50),
        p99: percentile(&all, 0.99),
        max: percentile(&all, 1.0),
        post_p50: percentile(&post, 0.50),
        delivered,
        expected: n * updates,
        rss_per_sub_kib,
        message_bytes,
        server_p50,
        server_p99,
        shutdown,
        closed_1001: shared.closed_1001.load(Ordering::SeqCst),
        catalog_cpu_per_update,
        client_cpu_per_update,
        spread_p50: percentile(&spreads, 0.50),
    })
}

/// The floor row: the same subscribers and updates against [`floor`]'s
/// minimal server (a child process: this executable, re-run), messages the
/// size of one delta upsert, compression off.
fn run_floor(n: usize, updates: usize, rt: &tokio::runtime::Runtime) -> Result<Outcome> {
    use std::io::BufRead as _;
    // An upsert carries the offer and a short envelope (type, seq, id, provider).
    let size = serde_json::to_vec(&offer(1, 1))?.len() + 96;
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .env("FEED_LOAD_FLOOR_SERVE", size.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let mut control = child.stdin.take().context("floor stdin")?;
    let mut out = std::io::BufReader::new(child.stdout.take().context("floor stdout")?).lines();
    let port: u16 = out
        .next()
        .context("floor server printed nothing")??
        .strip_prefix("port ")
        .context("floor server's first line is not its port")?
        .parse()?;
    let shared = Arc::new(Shared::new(updates));
    let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
    for _ in 0..n {
        let (shared, gate) = (shared.clone(), gate.clone());
        rt.spawn(async move {
            if let Err(e) = subscriber(port, String::new(), false, shared.clone(), gate).await {
                if let Ok(mut f) = shared.failures.lock() {
                    f.push(e.to_string());
                }
            }
            shared.ended.fetch_add(1, Ordering::SeqCst);
        });
    }
    wait_until(
        "every floor subscriber's first message",
        CONNECT_TIMEOUT,
        || shared.ready.load(Ordering::SeqCst) + shared.ended.load(Ordering::SeqCst) >= n,
    )?;
    if shared.ready.load(Ordering::SeqCst) < n {
        bail!(
            "floor: only {} of {n} subscribers connected",
            shared.ready.load(Ordering::SeqCst)
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    let me = std::process::id();
    let (server_cpu_before, client_cpu_before) = (cpu_of(pid)?, cpu_of(me)?);
    for k in 1..=updates {
        shared.sent_at[k].store(shared.now_ns(), Ordering::SeqCst);
        writeln!(control, "{k}")?;
        control.flush()?;
        let _ = wait_until(&format!("floor update {k}"), UPDATE_TIMEOUT, || {
            shared.received[k].load(Ordering::SeqCst) >= n
        });
        std::thread::sleep(Duration::from_millis(200));
    }
    let server_cpu_per_update = (cpu_of(pid)? - server_cpu_before) / updates as u32;
    let client_cpu_per_update = (cpu_of(me)? - client_cpu_before) / updates as u32;
    drop(control);
    let written = out.next().context("floor server printed no latencies")??;
    let micros: Vec<f64> = written
        .strip_prefix("written ")
        .context("floor server's last line is not its latencies")?
        .split(' ')
        .map(|v| v.parse::<f64>().map(|us| us / 1000.0))
        .collect::<Result<_, _>>()?;
    child.wait()?;
    let (all, spreads, delivered) = latencies(&shared, updates);
    Ok(Outcome {
        subscribers: n,
        mode: "floor".into(),
        deflate: false,
        list_bytes: 0,
        p50: percentile(&all, 0.50),
        p99: percentile(&all, 0.99),
        max: percentile(&all, 1.0),
        post_p50: f64::NAN,
        delivered,
        expected: n * updates,
        rss_per_sub_kib: f64::NAN,
        message_bytes: size as f64,
        server_p50: micros[0],
        server_p99: micros[1],
        shutdown: Duration::ZERO,
        closed_1001: 0,
        catalog_cpu_per_update: server_cpu_per_update,
        client_cpu_per_update,
        spread_p50: percentile(&spreads, 0.50),
    })
}

/// Every subscriber's latency over the updates (sorted), each update's
/// first→last spread (sorted), and how many messages arrived.
fn latencies(shared: &Shared, updates: usize) -> (Vec<u32>, Vec<u32>, usize) {
    let mut all: Vec<u32> = Vec::new();
    let mut spreads: Vec<u32> = Vec::new();
    let mut delivered = 0;
    for k in 1..=updates {
        let l = shared.latencies[k]
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default();
        if let (Some(first), Some(last)) = (l.iter().min(), l.iter().max()) {
            spreads.push(last - first);
        }
        delivered += l.len();
        all.extend(l);
    }
    spreads.sort_unstable();
    all.sort_unstable();
    (all, spreads, delivered)
}

fn main() -> Result<()> {
    if let Ok(size) = std::env::var("FEED_LOAD_FLOOR_SERVE") {
        return floor::serve(
            size.parse()
                .context("FEED_LOAD_FLOOR_SERVE: a message size")?,
        );
    }
    // `cargo bench` passes `--bench`; this harness takes its settings from
    // the environment instead.
    let counts: Vec<usize> = env_list("FEED_LOAD_SUBSCRIBERS", "1000,10000")
        .iter()
        .map(|s| {
            s.parse()
                .with_context(|| format!("bad subscriber count {s}"))
        })
        .collect::<Result<_>>()?;
    let modes = env_list("FEED_LOAD_MODES", "snapshot,delta");
    let deflates: Vec<bool> = env_list("FEED_LOAD_DEFLATE", "on,off")
        .iter()
        .map(|s| match s.as_str() {
            "on" => Ok(true),
            "off" => Ok(false),
            _ => bail!("FEED_LOAD_DEFLATE: `{s}` is neither on nor off"),
        })
        .collect::<Result<_>>()?;
    let offers = env_usize("FEED_LOAD_OFFERS", 50)?.max(1);
    let updates = env_usize("FEED_LOAD_UPDATES", 20)?.max(1);
    // The catalog's dependencies build reqwest (used by the e2e HTTP client)
    // with rustls and no default crypto provider: pick one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let nofile = raise_nofile()?;
    if std::env::var_os("RUST_LOG").is_none() {
        // Per-connection logs would dominate the catalog's own cost.
        std::env::set_var("RUST_LOG", "warn");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!(
        "| subscribers | mode | deflate | list JSON / avg message on the wire (bytes) | publish→receive p50 | p99 | max | server publish→socket p50 / p99 (≤ bucket) | POST p50 | delivered | RSS per idle subscriber | SIGTERM→exit (1001 closes) | CPU per update, catalog / client | first→last subscriber, p50 |"
    );
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &counts {
        if n > MAX_SUBSCRIBERS || (n as u64) + 200 > nofile {
            bail!("{n} subscribers: over the bench's bound ({MAX_SUBSCRIBERS}) or the open-file limit ({nofile})");
        }
        for (mode, &deflate) in modes
            .iter()
            .flat_map(|m| deflates.iter().map(move |d| (m, d)))
        {
            let o = if mode == "floor" {
                // One floor row per count, uncompressed, whatever FEED_LOAD_DEFLATE says.
                if deflates.first() != Some(&deflate) {
                    continue;
                }
                eprintln!("{n} subscribers, the floor server, {updates} updates");
                run_floor(n, updates, &rt)?
            } else {
                eprintln!("{n} subscribers, {mode} mode, deflate {deflate}, {offers} offers, {updates} updates");
                run(n, mode, deflate, offers, updates, &rt)?
            };
            println!(
                "| {} | {} | {} | {} / {:.0} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} / {:.1} ms | {:.1} ms | {}/{} | {:.1} KiB | {:.2} s ({}) | {:.1} / {:.1} ms | {:.1} ms |",
                o.subscribers,
                o.mode,
                if o.deflate { "on" } else { "off" },
                o.list_bytes,
                o.message_bytes,
                o.p50,
                o.p99,
                o.max,
                o.server_p50,
                o.server_p99,
                o.post_p50,
                o.delivered,
                o.expected,
                o.rss_per_sub_kib,
                o.shutdown.as_secs_f64(),
                o.closed_1001,
                o.catalog_cpu_per_update.as_secs_f64() * 1000.0,
                o.client_cpu_per_update.as_secs_f64() * 1000.0,
                o.spread_p50,
            );
            std::io::stdout().flush()?;
        }
    }
    Ok(())
}
