//! The machine's floor for the feed: the least work any WebSocket server
//! can do to deliver one message to N loopback subscribers.
//!
//! The bench re-runs its own executable with `FEED_LOAD_FLOOR_SERVE` set to
//! get this server in a process of its own, as the catalog is. It answers
//! every upgrade at once (no routing, no extensions), sends each subscriber
//! a first message with `seq` 0, and for every line `k` on its standard
//! input encodes one text frame with `seq` k (the size of a delta-mode
//! upsert) and writes it to every socket: one blocking `write` per
//! subscriber, the subscribers split across two threads as the catalog's
//! two HTTP workers split them. No task, no poll, no buffer copy — what is
//! left is the kernel's loopback TCP path, which the catalog cannot avoid
//! either. On end of input it prints the publish→written latency of every
//! write (p50, p99, max in µs) and exits.
//!
//! The bench's subscribers read it exactly as they read the catalog, so the
//! row it prints is the floor the catalog's delta rows are measured against.

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Writer threads: the catalog runs two HTTP workers on this 2-core machine.
const THREADS: usize = 2;

/// The accept answer for the one key the bench's subscribers send
/// (`dGhlIHNhbXBsZSBub25jZQ==`, RFC 6455 section 1.3's example).
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// A text frame holding `{"type":"upsert","seq":k,...}` padded to `size`
/// bytes of payload (at least the JSON's own length).
pub fn frame(seq: u64, size: usize) -> Vec<u8> {
    let head = format!("{{\"type\":\"upsert\",\"seq\":{seq},\"pad\":\"");
    let pad = size.saturating_sub(head.len() + 2);
    let mut payload = head.into_bytes();
    payload.extend(std::iter::repeat_n(b'x', pad));
    payload.extend_from_slice(b"\"}");
    let mut f = vec![0x81];
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n <= u16::MAX as usize => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&payload);
    f
}

fn upgrade(mut s: TcpStream, size: usize) -> Result<TcpStream> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 || head.len() > 8192 {
            bail!("no complete upgrade request");
        }
        head.extend_from_slice(&buf[..n]);
    }
    let mut answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {ACCEPT}\r\n\r\n"
    )
    .into_bytes();
    answer.extend_from_slice(&frame(0, size));
    s.write_all(&answer)?;
    Ok(s)
}

/// Runs the floor server until its standard input ends.
pub fn serve(size: usize) -> Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    println!("port {}", listener.local_addr()?.port());
    std::io::stdout().flush()?;
    let groups: Arc<Vec<Mutex<Vec<TcpStream>>>> =
        Arc::new((0..THREADS).map(|_| Mutex::new(Vec::new())).collect());
    {
        let groups = groups.clone();
        std::thread::spawn(move || {
            for (i, s) in listener.incoming().enumerate() {
                let Ok(s) = s else { continue };
                match upgrade(s, size) {
                    Ok(s) => {
                        if let Ok(mut g) = groups[i % THREADS].lock() {
                            g.push(s);
                        }
                    }
                    Err(e) => eprintln!("floor: {e:#}"),
                }
            }
        });
    }
    let mut latencies: Vec<u32> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let seq: u64 = line?.trim().parse().context("a sequence number per line")?;
        let published = Instant::now();
        let bytes = frame(seq, size);
        let per_thread: Vec<Result<Vec<u32>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = groups
                .iter()
                .map(|group| {
                    let bytes = &bytes;
                    scope.spawn(move || -> Result<Vec<u32>> {
                        let mut group = group.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                        let mut took = Vec::with_capacity(group.len());
                        for s in group.iter_mut() {
                            s.write_all(bytes)?;
                            took.push(published.elapsed().as_micros() as u32);
                        }
                        Ok(took)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| bail!("writer panicked")))
                .collect()
        });
        for took in per_thread {
            latencies.extend(took?);
        }
    }
    latencies.sort_unstable();
    let at = |p: f64| {
        latencies
            .get(((latencies.len().saturating_sub(1)) as f64 * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    println!("written {} {} {}", at(0.5), at(0.99), at(1.0));
    Ok(())
}
