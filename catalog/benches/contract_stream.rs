//! The contract change stream at scale (issue 44), against the real
//! `catalog` binary (release, embedded store, loopback):
//!
//! 1. For each stream count N (`CONTRACT_STREAM_COUNTS`, default
//!    `1000,10000`): open N idle streams, one identity each (consumer
//!    tokens signed with the catalog's `--jwt-key`), and measure the
//!    catalog's RSS growth per stream and its CPU over an idle minute
//!    (`CONTRACT_STREAM_IDLE_SECS`, default 60; heartbeats at the default
//!    15 s); then, with the N streams open, one consumer with a contract
//!    reports its state `CONTRACT_STREAM_CHANGES` times (default 200) and
//!    the time from sending the report to its line arriving on that
//!    consumer's stream is measured (p50/p99), with the fan-out's store
//!    reads per change (from `/metrics`).
//! 2. The cost of a resume as the store grows: a store pre-filled with
//!    200, 1,000 and 10,000 contracts of other parties, one consumer
//!    resuming (`?since=` its last sequence, one change missed): time to
//!    its `resumed` line and its change, median of 50.
//!
//! Run: `cargo bench -p catalog --bench contract_stream`

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use bench_support::percentile;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use catalog::auth::{Role, SigningKey, TokenService, TokenSettings};
use catalog::backends::EmbeddedStore;
use catalog::buying::model::{new_id, Channel, ContractTerms, Reservation, ReservationState};
use catalog::buying::ReservationStore;
use catalog::offers::Cost;
use clap::Parser;
use e2e::buying::{self, consumer, publish, put};
use e2e::catalog::{Backend, Catalog, Env};
use e2e::measure::{cpu_of, raise_nofile, rss_kib};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

const KEY: &str = "contract-stream-bench-signing-key-0123456789abcdef";
const CONNECT_CONCURRENCY: usize = 200;

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Tokens the catalog accepts: signed with its `--jwt-key`, its issuer and
/// audience.
fn tokens() -> Result<TokenService> {
    let defaults = catalog::Config::parse_from(["catalog"]);
    Ok(TokenService::new(
        &SigningKey::from_bytes(KEY.as_bytes().to_vec())?,
        TokenSettings {
            issuer: defaults.jwt_issuer,
            audience: defaults.jwt_audience,
            ttl: Duration::from_secs(6 * 3600),
        },
    ))
}

fn start(env: &Env) -> Catalog {
    buying::start(
        env,
        &[
            "--jwt-key",
            KEY,
            "--token-ttl",
            "6h",
            "--max-connections",
            "25000",
            "--contract-stream-max",
            "20000",
            // The resume rows open 50 streams in turn as one identity; a
            // stream its client dropped holds its slot until the catalog
            // next writes to it (a heartbeat), so the default 4 would refuse.
            "--contract-stream-per-identity",
            "64",
        ],
    )
}

/// A counter in the catalog's `/metrics`.
fn metric(c: &Catalog, name: &str) -> f64 {
    let text = c.get("/metrics").text;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Open an idle stream as `token` and read it forever (heartbeats); `ready`
/// counts it once its snapshot arrived.
async fn idle(
    port: u16,
    token: String,
    ready: Arc<AtomicUsize>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Result<()> {
    let mut permit = Some(permit);
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(
        format!("GET /contract-changes HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n\r\n")
            .as_bytes(),
    )
    .await?;
    let mut buf = [0u8; 1024];
    let mut seen = false;
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            bail!("stream closed");
        }
        if !seen && buf[..n].windows(8).any(|w| w == b"snapshot") {
            seen = true;
            ready.fetch_add(1, Ordering::SeqCst);
            // The next connection may start.
            permit.take();
        }
    }
}

/// A measured stream: lines as they arrive, with when.
struct Follower {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl Follower {
    async fn open(port: u16, token: &str, query: &str) -> Result<Self> {
        let client = e2e::http::async_client(Duration::from_secs(3600));
        let resp = client
            .get(format!("http://127.0.0.1:{port}/contract-changes?{query}"))
            .bearer_auth(token)
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("stream refused: {}", resp.status());
        }
        Ok(Follower {
            resp,
            buf: Vec::new(),
        })
    }

    async fn line(&mut self) -> Result<serde_json::Value> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Ok(serde_json::from_slice(&line)?);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.resp.chunk())
                .await
                .context("no line within 60 s")??
                .context("stream ended")?;
            self.buf.extend_from_slice(&chunk);
        }
    }

    /// The next line of `kind`.
    async fn next_of(&mut self, kind: &str) -> Result<serde_json::Value> {
        loop {
            let l = self.line().await?;
            if l["type"] == kind {
                return Ok(l);
            }
        }
    }
}

fn streams_row(n: usize, rt: &tokio::runtime::Runtime, tokens: &TokenService) -> Result<()> {
    let env = Env::new(Backend::Embedded);
    let c = start(&env);
    let pid = c.child.pid();
    let port = c.port;
    // One consumer with a contract, whose stream is measured.
    publish(&c, 1, "shop");
    let admin = buying::admin(&c);
    let alice = consumer(&c, &admin, "alice");
    let r = e2e::contracts::buy(&c, &alice, "shop", "small", &json!({}));
    if r.status != 201 {
        bail!("purchase: {} {}", r.status, r.text);
    }
    let id = r.json["id"].as_str().context("id")?.to_string();
    std::thread::sleep(Duration::from_secs(2));
    let rss0 = rss_kib(pid)?;

    let ready = Arc::new(AtomicUsize::new(0));
    let opened = Instant::now();
    rt.block_on(async {
        let gate = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
        for i in 0..n {
            let token = tokens
                .issue(&format!("idle-{i}"), "idle", vec![Role::Consumer])?
                .token;
            let permit = gate.clone().acquire_owned().await?;
            let ready = ready.clone();
            tokio::spawn(idle(port, token, ready, permit));
        }
        Ok::<_, anyhow::Error>(())
    })?;
    // The spawned clients hold their stream open until the runtime stops.
    while ready.load(Ordering::SeqCst) < n {
        if opened.elapsed() > Duration::from_secs(300) {
            bail!(
                "only {} of {n} streams opened",
                ready.load(Ordering::SeqCst)
            );
        }
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
    }
    let open_secs = opened.elapsed().as_secs_f64();
    rt.block_on(async { tokio::time::sleep(Duration::from_secs(3)).await });
    let rss1 = rss_kib(pid)?;
    let per_stream = (rss1.saturating_sub(rss0)) as f64 * 1024.0 / n as f64;

    let idle_secs = env_num("CONTRACT_STREAM_IDLE_SECS", 60);
    let cpu0 = cpu_of(pid)?;
    rt.block_on(async { tokio::time::sleep(Duration::from_secs(idle_secs)).await });
    let cpu = cpu_of(pid)? - cpu0;
    let cpu_per_min = cpu.as_secs_f64() * 60.0 / idle_secs as f64;

    // Changes reaching alice's stream with the N others open.
    let changes = env_num("CONTRACT_STREAM_CHANGES", 200) as usize;
    let reads0 = metric(&c, "catalog_contract_stream_store_reads_total");
    let mut f = rt.block_on(Follower::open(port, &alice, ""))?;
    rt.block_on(f.next_of("snapshot"))?;
    let mut lat = Vec::with_capacity(changes);
    for i in 0..changes {
        let state = if i % 2 == 0 { "ready" } else { "peered" };
        let sent = Instant::now();
        let path = format!("/contracts/{id}/state");
        let r = put(&c, &path, &json!({ "state": state }), Some(&alice));
        if r.status != 200 {
            bail!("report: {} {}", r.status, r.text);
        }
        let line = rt.block_on(f.next_of("change"))?;
        lat.push(sent.elapsed());
        assert_eq!(line["contract"]["state"], state);
    }
    let reads = metric(&c, "catalog_contract_stream_store_reads_total") - reads0;
    lat.sort();
    println!(
        "| {n} | {open_secs:.1} s | {:.1} KiB | {:.2} s ({:.2} % of a core) | {:.1} ms | {:.1} ms | {:.2} |",
        per_stream / 1024.0,
        cpu_per_min,
        cpu_per_min / 60.0 * 100.0,
        percentile(&lat, 0.5).unwrap_or_default().as_secs_f64() * 1e3,
        percentile(&lat, 0.99).unwrap_or_default().as_secs_f64() * 1e3,
        reads / changes as f64,
    );
    drop(c);
    Ok(())
}

fn contract(consumer: &str, provider: &str) -> Reservation {
    let now = catalog::store::now();
    Reservation {
        id: new_id().expect("random id"),
        consumer: consumer.into(),
        offer_id: "bench".into(),
        plan_id: "plan".into(),
        cluster_id: provider.into(),
        cost: Cost::ZERO,
        state: ReservationState::Purchased,
        channel: Channel::Rest,
        created_at: now,
        expires_at: now + chrono::Duration::hours(6),
        purchased_at: Some(now),
        ended_at: None,
        contract: Some(ContractTerms::new(
            None,
            "bench".into(),
            quantity::ResourceList::from_strings([("cpu", "1")]).unwrap(),
            "liqo-broker".into(),
            vec![],
            now,
        )),
        reserved_plan: None,
        bought_by: None,
    }
}

fn resume_row(size: usize, rt: &tokio::runtime::Runtime, tokens: &TokenService) -> Result<()> {
    let env = Env::new(Backend::Embedded);
    // The store, filled before the catalog opens it: `size` contracts of
    // other parties, then one of the resuming consumer's.
    let since = rt.block_on(async {
        let store = EmbeddedStore::open(env.data_dir.path())?;
        let store: Arc<dyn ReservationStore> = Arc::new(store);
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut i = w;
                    while i < size {
                        let r = contract(&format!("c-{i}"), &format!("p-{}", i % 100));
                        store.reserve(r, catalog::store::now()).await.unwrap();
                        i += 8;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await?;
        }
        store
            .reserve(contract("alice", "p-0"), catalog::store::now())
            .await?;
        let since = store.contract_head().await?;
        // One more of alice's, the change the resume brings.
        store
            .reserve(contract("alice", "p-1"), catalog::store::now())
            .await?;
        Ok::<_, anyhow::Error>(since)
    })?;
    let c = start(&env);
    let alice = tokens.issue("alice", "alice", vec![Role::Consumer])?.token;
    let reads = 50;
    let mut lat = Vec::with_capacity(reads);
    for _ in 0..reads {
        let t = Instant::now();
        rt.block_on(async {
            let mut f = Follower::open(c.port, &alice, &format!("since={since}")).await?;
            f.next_of("resumed").await?;
            f.next_of("change").await?;
            Ok::<_, anyhow::Error>(())
        })?;
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "| {size} | {:.2} ms | {:.2} ms |",
        percentile(&lat, 0.5).unwrap_or_default().as_secs_f64() * 1e3,
        percentile(&lat, 0.99).unwrap_or_default().as_secs_f64() * 1e3,
    );
    Ok(())
}

fn main() -> Result<()> {
    let limit = raise_nofile()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let tokens = tokens()?;
    let counts = env_list("CONTRACT_STREAM_COUNTS", "1000,10000");
    println!("open files: {limit}");
    println!("| streams | opened in | catalog RSS per stream | catalog CPU per idle minute | change → stream p50 | p99 | store reads per change |");
    println!("|---|---|---|---|---|---|---|");
    for n in counts {
        streams_row(n, &rt, &tokens)?;
    }
    println!();
    println!("| contracts in the store | resume p50 | p99 |");
    println!("|---|---|---|");
    for size in env_list("CONTRACT_STREAM_RESUME_SIZES", "200,1000,10000") {
        resume_row(size, &rt, &tokens)?;
    }
    Ok(())
}
