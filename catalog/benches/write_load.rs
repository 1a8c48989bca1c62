//! Offer write load over HTTP: `POST /offer/{id}` upserts per second with 1
//! and 16 concurrent writers, against one or several `catalog` binaries in
//! the same run (so a build of an older commit can be measured beside this
//! one by the same client).
//!
//! For each binary and writer count it starts the catalog on the embedded
//! store (a fresh temp data directory, loopback, `RUST_LOG=warn`),
//! authenticates one provider, then runs W writers for a warm-up second
//! and `WRITE_LOAD_SECS` measured seconds. Each writer is a thread with one
//! keep-alive connection and a minimal HTTP/1.1 client (it writes the
//! request, reads the head and `Content-Length` bytes), replacing its own
//! 20 offers in turn; every answer must be 2xx, and is only sent by the
//! catalog once the write is durable. Rounds alternate the binaries
//! (A, B, A, B, …) so drifting machine load hits both alike.
//!
//! A last phase per binary measures whether `/authenticate` blocks writes:
//! one writer beside `WRITE_LOAD_AUTHENTICATORS` threads that call
//! `POST /authenticate` (one argon2 verification each) in a loop
//! (`--auth-rate-limit 0`); compare its writes/s and p99 with the
//! one-writer phase.
//!
//! With `WRITE_LOAD_STORES` naming `mongodb`, the same phases run with each
//! catalog on MongoDB (a fresh SecantusDB server per phase, as the `store`
//! bench starts it; write concern majority, journaled), followed by the
//! database's floor: W writers using the driver directly (one client, as a
//! catalog has) replacing the very documents a catalog stored for those
//! offers, each conditioned on its version, with the catalog's write
//! concern — one round trip per write, no HTTP, no authentication. Then
//! lists: each catalog on MongoDB holding 200 offers answers `GET /offers`
//! (the whole list, uncompressed) to 1 and to 16 clients in a loop.
//!
//! Run: `cargo bench -p catalog --bench write_load`
//!
//! Settings (environment): `WRITE_LOAD_CATALOGS` (`name=path,…`; default
//! `after=` the `catalog` beside this bench), `WRITE_LOAD_WRITERS`
//! (`1,16`), `WRITE_LOAD_SECS` (5), `WRITE_LOAD_ROUNDS` (2),
//! `WRITE_LOAD_AUTHENTICATORS` (16; 0 skips that phase),
//! `WRITE_LOAD_STORES` (`embedded`; `embedded,mongodb` or `mongodb`).

#![allow(clippy::unwrap_used)] // bench code: a failed unwrap is a failed run

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use e2e::catalog::provider;
use e2e::process::{bin_path, free_port, wait_for_port};
use serde_json::{json, Value};

const OFFERS_PER_WRITER: usize = 20;

/// A realistic two-plan offer (~400 bytes of JSON).
fn offer(w: usize, i: usize) -> Value {
    json!({
        "name": format!("Writer {w} offer {i}"),
        "type": (["compute", "storage", "gpu"][i % 3]),
        "description": format!("Write-load offer {i} of writer {w}"),
        "plans": {
            "small": {"name": "small", "cost": format!("{}.25", i % 7),
                      "resources": {"cpu": "2", "memory": "4Gi", "storage": "100G"}},
            "large": {"name": "large", "cost": format!("{}.75", 3 + i % 7),
                      "resources": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "1"}}
        }
    })
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    out: TcpStream,
    input: BufReader<TcpStream>,
}

impl Conn {
    fn open(port: u16) -> Result<Self> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Conn {
            out: s.try_clone()?,
            input: BufReader::new(s),
        })
    }

    /// Send one request; the status and body of its answer.
    fn call(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>)> {
        let auth = token
            .map(|t| format!("authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n{auth}content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let mut req = head.into_bytes();
        req.extend_from_slice(body);
        self.out.write_all(&req)?;
        let mut line = String::new();
        self.input.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line {line:?}"))?;
        let mut len = 0usize;
        loop {
            line.clear();
            self.input.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse()?;
                }
            }
        }
        let mut body = vec![0; len];
        self.input.read_exact(&mut body)?;
        Ok((status, body))
    }
}

/// A catalog process on the embedded store; SIGKILLed when dropped.
struct Running {
    child: Child,
    port: u16,
    _data: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(bin: &PathBuf, extra: &[&str]) -> Result<Running> {
    let data = tempfile::tempdir()?;
    // A port known in advance, not port 0 and the announcement: the binary
    // measured may be a build older than `edge::announce`
    // (`WRITE_LOAD_CATALOGS`). `free_port` picks it outside the ephemeral
    // range, where no other socket is handed it meanwhile.
    let port = free_port();
    let child = Command::new(bin)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(data.path())
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let running = Running {
        child,
        port,
        _data: data,
    };
    wait_for_port(port, Duration::from_secs(30))?;
    Ok(running)
}

struct Phase {
    writes_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    auths_per_s: f64,
    /// Authentications answered 503 (the argon2 pool's queue limit).
    refused_per_s: f64,
}

/// The `p` percentile of microsecond samples, in milliseconds.
fn percentile(sorted: &[u32], p: f64) -> f64 {
    bench_support::percentile(sorted, p).map_or(0.0, |us| f64::from(us) / 1000.0)
}

impl Phase {
    /// From every measured latency (µs), the measured time, and the
    /// authentications counted in it.
    fn of(mut lat: Vec<u32>, elapsed: Duration, auths: usize) -> Phase {
        lat.sort_unstable();
        Phase {
            auths_per_s: auths as f64 / elapsed.as_secs_f64(),
            writes_per_s: lat.len() as f64 / elapsed.as_secs_f64(),
            p50_ms: percentile(&lat, 0.5),
            p99_ms: percentile(&lat, 0.99),
            refused_per_s: 0.0,
        }
    }
}

/// A warm-up second, then `secs` measured; then `stop`. The measured time.
fn measure(measuring: &AtomicBool, stop: &AtomicBool, secs: u64) -> Duration {
    std::thread::sleep(Duration::from_secs(1));
    measuring.store(true, Ordering::Relaxed);
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    measuring.store(false, Ordering::Relaxed);
    let elapsed = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    elapsed
}

/// Every latency the threads measured.
fn latencies(
    threads: Vec<std::thread::JoinHandle<Result<Vec<u32>>>>,
    who: &str,
) -> Result<Vec<u32>> {
    let mut all = Vec::new();
    for th in threads {
        all.extend(th.join().map_err(|_| anyhow::anyhow!("{who} panicked"))??);
    }
    Ok(all)
}

/// Provider 1's token.
fn login(conn: &mut Conn) -> Result<String> {
    let (status, body) = conn.call(
        "POST",
        "/authenticate",
        None,
        &serde_json::to_vec(&provider(1))?,
    )?;
    if status != 200 {
        bail!("authenticate: {status} {}", String::from_utf8_lossy(&body));
    }
    let token: Value = serde_json::from_slice(&body)?;
    Ok(token["token"].as_str().context("token")?.to_string())
}

/// Store each of `writers` writers' offers once.
fn store_offers(conn: &mut Conn, token: &str, writers: usize) -> Result<()> {
    for w in 0..writers {
        for i in 0..OFFERS_PER_WRITER {
            let body = serde_json::to_vec(&offer(w, i))?;
            let (status, answer) =
                conn.call("POST", &format!("/offer/w{w}-{i}"), Some(token), &body)?;
            if !(200..300).contains(&status) {
                bail!("write: {status} {}", String::from_utf8_lossy(&answer));
            }
        }
    }
    Ok(())
}

fn phase(
    bin: &PathBuf,
    writers: usize,
    authenticators: usize,
    secs: u64,
    extra: &[&str],
) -> Result<Phase> {
    let mut flags = vec!["--auth-rate-limit", "0"];
    flags.extend_from_slice(extra);
    let c = start(bin, &flags)?;
    let token = Arc::new(login(&mut Conn::open(c.port)?)?);
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let (token, measuring, stop, port) =
                (token.clone(), measuring.clone(), stop.clone(), c.port);
            std::thread::spawn(move || -> Result<Vec<u32>> {
                let bodies: Vec<Vec<u8>> = (0..OFFERS_PER_WRITER)
                    .map(|i| serde_json::to_vec(&offer(w, i)).unwrap())
                    .collect();
                let mut conn = Conn::open(port)?;
                let mut lat = Vec::new();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let k = i % OFFERS_PER_WRITER;
                    let t = Instant::now();
                    let (status, body) = conn.call(
                        "POST",
                        &format!("/offer/w{w}-{k}"),
                        Some(&token),
                        &bodies[k],
                    )?;
                    if !(200..300).contains(&status) {
                        bail!("write: {status} {}", String::from_utf8_lossy(&body));
                    }
                    if measuring.load(Ordering::Relaxed) {
                        lat.push(t.elapsed().as_micros() as u32);
                    }
                }
                Ok(lat)
            })
        })
        .collect();
    let auths = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let auth_threads: Vec<_> = (0..authenticators)
        .map(|_| {
            let (auths, refused, measuring, stop, port) = (
                auths.clone(),
                refused.clone(),
                measuring.clone(),
                stop.clone(),
                c.port,
            );
            std::thread::spawn(move || -> Result<()> {
                let body = serde_json::to_vec(&provider(1))?;
                let mut conn = Conn::open(port)?;
                while !stop.load(Ordering::Relaxed) {
                    let (status, answer) = conn.call("POST", "/authenticate", None, &body)?;
                    if status == 503 {
                        // The argon2 pool is full: back off as Retry-After
                        // (1 s) says, like a well-behaved client.
                        if measuring.load(Ordering::Relaxed) {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        std::thread::sleep(Duration::from_secs(1));
                        continue;
                    }
                    if status != 200 {
                        bail!(
                            "authenticate: {status} {}",
                            String::from_utf8_lossy(&answer)
                        );
                    }
                    if measuring.load(Ordering::Relaxed) {
                        auths.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(())
            })
        })
        .collect();
    let elapsed = measure(&measuring, &stop, secs);
    let all = latencies(threads, "writer")?;
    for th in auth_threads {
        th.join()
            .map_err(|_| anyhow::anyhow!("authenticator panicked"))??;
    }
    let mut p = Phase::of(all, elapsed, auths.load(Ordering::Relaxed));
    p.refused_per_s = refused.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64();
    Ok(p)
}

fn main() -> Result<()> {
    let catalogs: Vec<(String, PathBuf)> = match std::env::var("WRITE_LOAD_CATALOGS") {
        Ok(v) => v
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| match s.split_once('=') {
                Some((name, path)) => Ok((name.trim().to_string(), PathBuf::from(path.trim()))),
                None => bail!("WRITE_LOAD_CATALOGS: `{s}` is not name=path"),
            })
            .collect::<Result<_>>()?,
        Err(_) => vec![("after".into(), bin_path("catalog"))],
    };
    let writers: Vec<usize> = std::env::var("WRITE_LOAD_WRITERS")
        .unwrap_or_else(|_| "1,16".into())
        .split(',')
        .map(|s| s.trim().parse().context("WRITE_LOAD_WRITERS"))
        .collect::<Result<_>>()?;
    let secs: u64 = std::env::var("WRITE_LOAD_SECS")
        .map(|s| s.parse().context("WRITE_LOAD_SECS"))
        .unwrap_or(Ok(5))?;
    let rounds: usize = std::env::var("WRITE_LOAD_ROUNDS")
        .map(|s| s.parse().context("WRITE_LOAD_ROUNDS"))
        .unwrap_or(Ok(2))?;
    let authenticators: usize = std::env::var("WRITE_LOAD_AUTHENTICATORS")
        .map(|s| s.parse().context("WRITE_LOAD_AUTHENTICATORS"))
        .unwrap_or(Ok(16))?;
    let stores: Vec<String> = std::env::var("WRITE_LOAD_STORES")
        .unwrap_or_else(|_| "embedded".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    if let Some(bad) = stores
        .iter()
        .find(|s| !matches!(s.as_str(), "embedded" | "mongodb"))
    {
        bail!("WRITE_LOAD_STORES: unknown store `{bad}` (embedded, mongodb)");
    }
    println!("| catalog | writers | round | writes/s | p50 | p99 | /authenticate/s |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for round in 1..=rounds {
        for &w in &writers {
            for (name, bin) in &catalogs {
                if !stores.contains(&"embedded".to_string()) {
                    continue;
                }
                let p =
                    phase(bin, w, 0, secs, &[]).with_context(|| format!("{name}, {w} writers"))?;
                println!(
                    "| {name} | {w} | {round} | {:.0} | {:.2} ms | {:.2} ms | – |",
                    p.writes_per_s, p.p50_ms, p.p99_ms
                );
                std::io::stdout().flush()?;
            }
        }
        if authenticators > 0 && stores.contains(&"embedded".to_string()) {
            for (name, bin) in &catalogs {
                let p = phase(bin, 1, authenticators, secs, &[]).with_context(|| {
                    format!("{name}, 1 writer and {authenticators} authenticating")
                })?;
                println!(
                    "| {name} | 1 + {authenticators} authenticating | {round} | {:.0} | {:.2} ms | {:.2} ms | {:.0} ({:.1} refused 503/s) |",
                    p.writes_per_s, p.p50_ms, p.p99_ms, p.auths_per_s, p.refused_per_s
                );
                std::io::stdout().flush()?;
            }
        }
        if stores.contains(&"mongodb".to_string()) {
            for &w in &writers {
                for (name, bin) in &catalogs {
                    let db = e2e::mongo::MongoServer::start()?;
                    let uri = db.uri();
                    let p = phase(bin, w, 0, secs, &mongo_flags(&uri))
                        .with_context(|| format!("{name} on MongoDB, {w} writers"))?;
                    row(&format!("{name}, MongoDB"), w, round, &p, "")?;
                }
                for (name, bin) in &catalogs {
                    let p = mongo_lists(bin, w, secs)
                        .with_context(|| format!("{name} lists on MongoDB, {w} clients"))?;
                    let what = format!("{name}, MongoDB, `GET /offers` (200 offers)");
                    row(&what, w, round, &p, " lists/s")?;
                }
                let (_, bin) = catalogs.last().context("no catalog")?;
                let p = mongo_floor(bin, w, secs)
                    .with_context(|| format!("MongoDB floor, {w} writers"))?;
                row("floor: the driver, MongoDB", w, round, &p, "")?;
            }
        }
    }
    Ok(())
}

/// One table row of a phase without authenticators.
fn row(what: &str, w: usize, round: usize, p: &Phase, unit: &str) -> Result<()> {
    println!(
        "| {what} | {w} | {round} | {:.0}{unit} | {:.2} ms | {:.2} ms | – |",
        p.writes_per_s, p.p50_ms, p.p99_ms
    );
    std::io::stdout().flush()?;
    Ok(())
}

const MONGO_DATABASE: &str = "write_load";

/// `clients` threads calling `GET /offers` in a loop on a catalog (on a
/// fresh SecantusDB) holding 200 offers of 10 writers.
fn mongo_lists(bin: &PathBuf, clients: usize, secs: u64) -> Result<Phase> {
    let db = e2e::mongo::MongoServer::start()?;
    let c = start(bin, &mongo_flags(&db.uri()))?;
    let mut conn = Conn::open(c.port)?;
    let token = login(&mut conn)?;
    store_offers(&mut conn, &token, 10)?;
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (measuring, stop, port) = (measuring.clone(), stop.clone(), c.port);
            std::thread::spawn(move || -> Result<Vec<u32>> {
                let mut conn = Conn::open(port)?;
                let mut lat = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let (status, body) = conn.call("GET", "/offers", None, b"")?;
                    if status != 200 || body.len() < 1000 {
                        bail!("list: {status} {}", String::from_utf8_lossy(&body));
                    }
                    if measuring.load(Ordering::Relaxed) {
                        lat.push(t.elapsed().as_micros() as u32);
                    }
                }
                Ok(lat)
            })
        })
        .collect();
    let elapsed = measure(&measuring, &stop, secs);
    let all = latencies(threads, "lister")?;
    Ok(Phase::of(all, elapsed, 0))
}

fn mongo_flags(uri: &str) -> [&str; 6] {
    [
        "--mongodb-uri",
        uri,
        "--mongodb-database",
        MONGO_DATABASE,
        "--mongodb-timeout",
        "10s",
    ]
}

/// The database's floor for this load: a catalog (`bin`) stores each
/// writer's offers once, then `writers` tasks on one driver client replace
/// those very documents with their version and `updatedAt` moved on, each
/// conditioned on its version (as the catalog's write is), with the
/// catalog's write concern (majority, journaled).
fn mongo_floor(bin: &PathBuf, writers: usize, secs: u64) -> Result<Phase> {
    use mongodb::bson::{doc, Document};
    use mongodb::options::{Acknowledgment, ClientOptions, WriteConcern};

    let db = e2e::mongo::MongoServer::start()?;
    let uri = db.uri();
    {
        let c = start(bin, &mongo_flags(&uri))?;
        let mut conn = Conn::open(c.port)?;
        let token = login(&mut conn)?;
        store_offers(&mut conn, &token, writers)?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut options = ClientOptions::parse(&uri).await?;
        options.write_concern = Some(
            WriteConcern::builder()
                .w(Acknowledgment::Majority)
                .journal(true)
                .build(),
        );
        let client = mongodb::Client::with_options(options)?;
        let offers = client
            .database(MONGO_DATABASE)
            .collection::<Document>("offers");
        let measuring = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let (offers, measuring, stop) = (offers.clone(), measuring.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut docs = Vec::new();
                    for i in 0..OFFERS_PER_WRITER {
                        let id = format!("w{w}-{i}");
                        docs.push(
                            offers
                                .find_one(doc! { "_id": &id })
                                .await?
                                .with_context(|| format!("{id} was not stored"))?,
                        );
                    }
                    let mut lat = Vec::new();
                    for i in 0.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let d = &mut docs[i % OFFERS_PER_WRITER];
                        let version = d.get_i64("version")?;
                        let mut next = d.clone();
                        next.insert("version", version + 1);
                        next.insert("updatedAt", mongodb::bson::DateTime::now());
                        let t = Instant::now();
                        let r = offers
                            .replace_one(
                                doc! { "_id": d.get_str("_id")?, "version": version },
                                &next,
                            )
                            .await?;
                        if r.matched_count != 1 {
                            bail!("the floor lost its own version race");
                        }
                        if measuring.load(Ordering::Relaxed) {
                            lat.push(t.elapsed().as_micros() as u32);
                        }
                        *d = next;
                    }
                    Ok::<_, anyhow::Error>(lat)
                })
            })
            .collect();
        // The tasks run on the runtime's workers; this thread only waits.
        let elapsed = measure(&measuring, &stop, secs);
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await??);
        }
        Ok(Phase::of(all, elapsed, 0))
    })
}
