//! Nothing acknowledged is ever lost, on both stores: across a clean
//! restart, across `kill -9` in the middle of a stream of writes, and across
//! a SIGTERM that arrives while a request is still being received. On the
//! embedded store, every acknowledgement leaves only after the store file
//! was synced to disk (`kill -9` keeps the page cache, so only a trace of
//! the system calls proves that).

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::catalog::{provider, simple_offer, thesis_offer, Backend, Env};
use e2e::catalog_tests;
use serde_json::json;

catalog_tests!(
    restart_loses_nothing,
    kill_9_keeps_every_acknowledged_write,
    sigterm_finishes_in_flight_requests
);

fn restart_loses_nothing(backend: Backend) {
    let env = Env::new(backend);
    let mut c = env.start();
    let token = c.login(&provider(1));
    c.put_offer("a", &thesis_offer(), &token);
    c.put_offer(
        "b",
        &simple_offer("B", "compute", "0.5", json!({"cpu": "2", "memory": "4Gi"})),
        &token,
    );
    c.put_offer(
        "b",
        &simple_offer(
            "B2",
            "compute",
            "0.25",
            json!({"cpu": "2", "memory": "4Gi"}),
        ),
        &token,
    );
    c.put_offer(
        "c",
        &simple_offer("C", "gpu", "3", json!({"nvidia.com/gpu": "1"})),
        &token,
    );
    assert_eq!(c.delete("/offer/c", Some(&token)).status, 204);
    let before = c.all_offers();

    let status = c
        .child
        .terminate(Duration::from_secs(15))
        .expect("clean stop");
    assert!(status.success(), "SIGTERM exit status {status}");

    let c = env.start();
    assert_eq!(c.all_offers(), before, "offers after restart");
    assert_eq!(
        c.list_ids("?type=compute&min.memory=4Gi&maxCost=0.25"),
        ["b"],
        "filters after restart"
    );
    // The signing key survived: the old token still works.
    let r = c.post(
        "/offer/b",
        &simple_offer("B3", "compute", "0.2", json!({"cpu": "2"})),
        Some(&token),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["version"], 3);
    // The provider account survived: same credentials in, others out.
    c.login(&provider(1));
    let mut wrong = provider(1);
    wrong["token"] = json!("another secret");
    c.post("/authenticate", &wrong, None).expect_error(401);
    // The deleted id continues its version count.
    let r = c.post("/offer/c", &thesis_offer(), Some(&token));
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["version"], 3);
}

/// One acknowledged write: id, the name it wrote, the version it got.
type Ack = (String, String, u64);

fn kill_9_keeps_every_acknowledged_write(backend: Backend) {
    let env = Env::new(backend);
    let mut c = env.start();
    let token = c.login(&provider(1));
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let port = c.port;

    // Two writers stream creates of fresh ids and replacements of a shared
    // "hot" offer, recording every 2xx.
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (acks, stop, token) = (acks.clone(), stop.clone(), token.clone());
            std::thread::spawn(move || {
                let http = e2e::http::blocking_client(Duration::from_secs(10));
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let id = if i % 3 == 2 {
                        "hot".to_string()
                    } else {
                        format!("w{w}-{i}")
                    };
                    let name = format!("writer {w} write {i}");
                    let body = simple_offer(&name, "compute", "1", json!({"cpu": "1"}));
                    let sent = http
                        .post(format!("http://127.0.0.1:{port}/offer/{id}"))
                        .bearer_auth(&token)
                        .json(&body)
                        .send();
                    match sent {
                        Ok(r) if r.status().is_success() => {
                            let v: serde_json::Value = r.json().unwrap();
                            acks.lock()
                                .unwrap()
                                .push((id, name, v["version"].as_u64().unwrap()));
                        }
                        Ok(r) => panic!("write refused before the kill: {}", r.status()),
                        Err(_) => break, // the catalog is gone
                    }
                }
            })
        })
        .collect();

    let deadline = Instant::now() + e2e::EVENTUALLY;
    while acks.lock().unwrap().len() < 150 {
        assert!(Instant::now() < deadline, "writers made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    c.child.kill(); // SIGKILL mid-stream
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer thread");
    }
    let acks = acks.lock().unwrap().clone();
    assert!(acks.len() >= 150);

    let c = env.start();
    let stored: std::collections::HashMap<String, serde_json::Value> = c
        .all_offers()
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["id"].as_str().unwrap().to_string(), o.clone()))
        .collect();
    for (id, name, version) in &acks {
        let offer = stored
            .get(id)
            .unwrap_or_else(|| panic!("acknowledged offer {id} lost"));
        let have = offer["version"].as_u64().unwrap();
        assert!(
            have >= *version,
            "{id}: acknowledged version {version}, stored {have}"
        );
        if have == *version {
            assert_eq!(offer["name"], name.as_str(), "{id} v{version}: content");
        }
    }
    // Versions of the hot offer were handed out once each.
    let mut hot: Vec<u64> = acks.iter().filter(|a| a.0 == "hot").map(|a| a.2).collect();
    let n = hot.len();
    hot.sort_unstable();
    hot.dedup();
    assert_eq!(hot.len(), n, "two acknowledged writes got the same version");
}

fn sigterm_finishes_in_flight_requests(backend: Backend) {
    let env = Env::new(backend);
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("catalog.log");
    let mut c = env.start_with_logs(&[], &log);
    let token = c.login(&provider(1));
    let body = serde_json::to_vec(&thesis_offer()).unwrap();
    let (first, rest) = body.split_at(body.len() / 2);

    // Start a request and send only half of its body. `Expect:
    // 100-continue`: the server's "100 Continue" says it has taken the
    // request and is reading its body, so it is surely in flight.
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        conn,
        "POST /offer/in-flight HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    conn.flush().unwrap();
    let mut interim = Vec::new();
    let mut byte = [0u8; 1];
    while !interim.ends_with(b"\r\n\r\n") {
        conn.read_exact(&mut byte).expect("an interim answer");
        interim.push(byte[0]);
    }
    let interim = String::from_utf8_lossy(&interim);
    assert!(interim.starts_with("HTTP/1.1 100"), "{interim}");
    conn.write_all(first).unwrap();
    conn.flush().unwrap();

    // SIGTERM, and the process says it is stopping: it must wait for the
    // request.
    c.child.signal_term();
    e2e::wait_for_log(&log, "shutting down", e2e::EVENTUALLY);
    assert!(
        c.child.try_wait().is_none(),
        "exited with a request in flight"
    );

    // Finish the request: it is answered, then the process exits cleanly.
    conn.write_all(rest).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let status = c
        .child
        .wait(Duration::from_secs(15))
        .expect("exit after the in-flight request");
    assert!(status.success(), "{status}");

    let c = env.start();
    assert_eq!(c.get("/offer/in-flight").status, 200);
}

/// The embedded store makes each acknowledged write durable before the
/// answer leaves: under `strace`, every 2xx answer is preceded by a
/// completed `fsync`/`fdatasync`/`sync_file_range` of `catalog.redb` since
/// the previous one. (Writes are sent one at a time, so that sync can only
/// be this write's.)
#[test]
fn embedded_syncs_the_store_before_every_acknowledgement() {
    let env = Env::new(Backend::Embedded);
    let trace_dir = tempfile::tempdir().unwrap();
    let trace = trace_dir.path().join("catalog.trace");
    let (c, catalog) = start_traced(
        &env,
        &trace,
        "openat,fsync,fdatasync,sync_file_range,write,writev,sendto,sendmsg",
    );

    // Every 2xx this client got: the login, then creates and replacements.
    let token = c.login(&provider(1));
    let mut acknowledged = 1;
    for i in 0..30 {
        let id = if i % 3 == 2 {
            "hot".to_string()
        } else {
            format!("o{i}")
        };
        let body = simple_offer(&format!("write {i}"), "compute", "1", json!({"cpu": "1"}));
        let r = c.post(&format!("/offer/{id}"), &body, Some(&token));
        assert!(
            r.status == 200 || r.status == 201,
            "{}: {}",
            r.status,
            r.text
        );
        acknowledged += 1;
    }
    assert_eq!(c.delete("/offer/o0", Some(&token)).status, 204);
    acknowledged += 1;

    let text = stop_traced(c, catalog, &trace);
    match synced_acknowledgements(&text) {
        Ok(n) => assert_eq!(
            n, acknowledged,
            "the trace shows {n} 2xx answers, the client got {acknowledged}:\n{text}"
        ),
        Err(e) => panic!("{e}\n--- trace ---\n{text}"),
    }
}

/// Start a catalog of `env` under `strace -f -tt`, tracing `calls` into
/// `trace`; the catalog process itself is the [`TracedChild`].
fn start_traced(
    env: &Env,
    trace: &std::path::Path,
    calls: &str,
) -> (e2e::catalog::Catalog, TracedChild) {
    let strace = ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect(
            "strace is not installed: this test proves every acknowledged write was \
             synced by tracing the catalog; run scripts/install-test-deps.sh",
        );
    let filter = format!("trace={calls}");
    let wrapper: Vec<&std::ffi::OsStr> = vec![
        strace.as_ref(),
        "-f".as_ref(),
        "-tt".as_ref(),
        "-s".as_ref(),
        "48".as_ref(),
        "-e".as_ref(),
        filter.as_ref(),
        "-o".as_ref(),
        trace.as_os_str(),
    ];
    let c = env.start_wrapped(&wrapper, &[]);
    let catalog = TracedChild::of(c.child.pid());
    (c, catalog)
}

/// Stop a catalog started by [`start_traced`] with SIGTERM; its trace.
fn stop_traced(
    mut c: e2e::catalog::Catalog,
    catalog: TracedChild,
    trace: &std::path::Path,
) -> String {
    catalog.terminate();
    let status = c.child.wait(Duration::from_secs(30)).expect("strace exits");
    assert!(status.success(), "catalog under strace: {status}");
    std::fs::read_to_string(trace).unwrap()
}

/// The catalog process under a tracer: found as the tracer's child, sent
/// SIGTERM at the end and SIGKILL if the test fails first (killing the
/// tracer would leave it running).
struct TracedChild(Option<u32>);

impl TracedChild {
    fn of(tracer: u32) -> Self {
        let deadline = Instant::now() + e2e::EVENTUALLY;
        loop {
            let children =
                std::fs::read_to_string(format!("/proc/{tracer}/task/{tracer}/children"))
                    .unwrap_or_default();
            if let Some(pid) = children.split_whitespace().next() {
                return TracedChild(Some(pid.parse().unwrap()));
            }
            assert!(Instant::now() < deadline, "the tracer started no catalog");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(pid: u32, sig: &str) {
        let _ = std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .status();
    }

    fn terminate(mut self) {
        if let Some(pid) = self.0.take() {
            Self::signal(pid, "-TERM");
        }
    }
}

impl Drop for TracedChild {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            Self::signal(pid, "-KILL");
        }
    }
}

/// Walk an `strace -f -tt` trace in order and check that each 2xx answer
/// written to a socket comes after a completed sync of the store file, with
/// no other 2xx answer in between; the number of 2xx answers.
///
/// strace prints a call whole when no other thread interrupts it, else as
/// `name(args <unfinished ...>` and later `<... name resumed>) = result`:
/// a sync counts where it returned, an answer where it started.
fn synced_acknowledgements(trace: &str) -> Result<usize, String> {
    const SYNCS: [&str; 3] = ["fsync", "fdatasync", "sync_file_range"];
    let mut store_fds = std::collections::HashSet::new();
    // pids with an open of catalog.redb not yet returned
    let mut opening = std::collections::HashSet::new();
    // pid -> fd of a sync call not yet returned
    let mut pending = std::collections::HashMap::new();
    let mut synced = false;
    let mut answers = 0;
    for line in trace.lines() {
        // `PID TIME CALL`, the PID padded to a fixed width.
        let Some((pid, rest)) = line.trim_start().split_once(' ') else {
            continue;
        };
        let Some((_time, call)) = rest.trim_start().split_once(' ') else {
            continue;
        };
        // strace pads short calls: `fdatasync(9)      = 0`.
        let result = |l: &str| {
            l.rsplit_once(" = ")
                .and_then(|(_, r)| r.split_whitespace().next())
                .and_then(|r| r.parse::<i64>().ok())
        };
        let result_ok = |l: &str| result(l) == Some(0);
        if call.starts_with("openat(") && call.contains("/catalog.redb\"") {
            if call.ends_with("<unfinished ...>") {
                opening.insert(pid.to_string());
            } else if let Some(fd) = result(call).filter(|fd| *fd >= 0) {
                store_fds.insert(fd);
            }
            continue;
        }
        if let Some(rest) = call.strip_prefix("<... ") {
            let name = rest.split(' ').next().unwrap_or("");
            if name == "openat" && opening.remove(pid) {
                if let Some(fd) = result(call).filter(|fd| *fd >= 0) {
                    store_fds.insert(fd);
                }
            }
            if SYNCS.contains(&name) {
                if let Some(fd) = pending.remove(pid) {
                    if store_fds.contains(&fd) && result_ok(call) {
                        synced = true;
                    }
                }
            }
            continue;
        }
        let name = call.split('(').next().unwrap_or("");
        if SYNCS.contains(&name) {
            let fd: i64 = call[name.len() + 1..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse().ok())
                .ok_or_else(|| format!("cannot read the fd of {line}"))?;
            if call.ends_with("<unfinished ...>") {
                pending.insert(pid.to_string(), fd);
            } else if store_fds.contains(&fd) && result_ok(call) {
                synced = true;
            }
            continue;
        }
        let answer = ["write(", "writev(", "sendto(", "sendmsg("]
            .iter()
            .any(|w| call.starts_with(w))
            && call.contains("\"HTTP/1.1 2");
        if answer {
            if store_fds.is_empty() {
                return Err(format!("an answer before catalog.redb was opened: {line}"));
            }
            if !synced {
                return Err(format!(
                    "2xx answer number {} left without a sync of catalog.redb since the \
                     previous one: {line}",
                    answers + 1
                ));
            }
            synced = false;
            answers += 1;
        }
    }
    Ok(answers)
}

/// Concurrent writers (whose writes the embedded store commits in groups,
/// one fsync for many) are each answered only after a sync of
/// `catalog.redb` that started after their request was read and completed
/// before their answer: under `strace`, for every `POST`/`DELETE
/// /offer/…` read from a connection, the 2xx written back on it is
/// preceded by such a sync.
#[test]
fn embedded_syncs_the_store_before_every_concurrent_acknowledgement() {
    let env = Env::new(Backend::Embedded);
    let trace_dir = tempfile::tempdir().unwrap();
    let trace = trace_dir.path().join("catalog.trace");
    let (c, catalog) = start_traced(
        &env,
        &trace,
        "openat,fsync,fdatasync,sync_file_range,read,readv,recvfrom,recvmsg,\
         write,writev,sendto,sendmsg",
    );
    let token = c.login(&provider(1));
    let port = c.port;

    // Eight writers at once, each on its own keep-alive connection: their
    // own ids and a shared "hot" one, then a delete of their first offer.
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let token = token.clone();
            std::thread::spawn(move || {
                let http = e2e::http::blocking_client(Duration::from_secs(30));
                let mut acknowledged = 0;
                for i in 0..12 {
                    let id = if i % 4 == 3 {
                        "hot".to_string()
                    } else {
                        format!("w{w}-{i}")
                    };
                    let body =
                        simple_offer(&format!("w{w} {i}"), "compute", "1", json!({"cpu": "1"}));
                    let r = http
                        .post(format!("http://127.0.0.1:{port}/offer/{id}"))
                        .bearer_auth(&token)
                        .json(&body)
                        .send()
                        .expect("write");
                    assert!(r.status().is_success(), "write {id}: {}", r.status());
                    acknowledged += 1;
                }
                let r = http
                    .delete(format!("http://127.0.0.1:{port}/offer/w{w}-0"))
                    .bearer_auth(&token)
                    .send()
                    .expect("delete");
                assert_eq!(r.status().as_u16(), 204);
                acknowledged + 1
            })
        })
        .collect();
    let acknowledged: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
    // Nothing was lost in the groups: every writer's offers are there.
    assert_eq!(c.list_ids("").len(), 8 * 8 + 1);

    let text = stop_traced(c, catalog, &trace);
    match synced_write_answers(&text) {
        Ok(n) => assert_eq!(
            n, acknowledged,
            "the trace matched {n} write answers to their requests, the clients got {acknowledged}"
        ),
        Err(e) => panic!("{e}\n--- trace ---\n{text}"),
    }
}

/// Walk an `strace -f -tt` trace (as [`synced_acknowledgements`] does) and
/// check that every 2xx answer to a `POST`/`DELETE /offer/…` request comes
/// after a sync of the store file that started after the request's last
/// read on that connection and completed before the answer; the number of
/// such answers.
fn synced_write_answers(trace: &str) -> Result<usize, String> {
    use std::collections::{HashMap, HashSet};
    const SYNCS: [&str; 3] = ["fsync", "fdatasync", "sync_file_range"];
    const READS: [&str; 4] = ["read", "readv", "recvfrom", "recvmsg"];
    let result = |l: &str| {
        l.rsplit_once(" = ")
            .and_then(|(_, r)| r.split_whitespace().next())
            .and_then(|r| r.parse::<i64>().ok())
    };
    let first_fd = |args: &str| -> Option<i64> {
        args.split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|d| d.parse().ok())
    };
    let is_write_request = |l: &str| l.contains("\"POST /offer/") || l.contains("\"DELETE /offer/");
    let mut store_fds: HashSet<i64> = HashSet::new();
    let mut opening: HashSet<String> = HashSet::new();
    // pid -> the connections a sync in progress covers (fds waiting when it started)
    let mut syncing: HashMap<String, (i64, Vec<i64>)> = HashMap::new();
    // pid -> fd of a read in progress
    let mut reading: HashMap<String, i64> = HashMap::new();
    // connection fd with an unanswered write request -> covered by a completed sync
    let mut waiting: HashMap<i64, bool> = HashMap::new();
    let mut answers = 0;
    let read_done = |waiting: &mut HashMap<i64, bool>, fd: i64, line: &str| {
        if result(line).is_some_and(|n| n > 0)
            && (is_write_request(line) || waiting.contains_key(&fd))
        {
            waiting.insert(fd, false);
        }
    };
    for line in trace.lines() {
        let Some((pid, rest)) = line.trim_start().split_once(' ') else {
            continue;
        };
        let Some((_time, call)) = rest.trim_start().split_once(' ') else {
            continue;
        };
        let unfinished = call.ends_with("<unfinished ...>");
        if let Some(rest) = call.strip_prefix("<... ") {
            let name = rest.split(' ').next().unwrap_or("");
            if name == "openat" && opening.remove(pid) {
                if let Some(fd) = result(call).filter(|fd| *fd >= 0) {
                    store_fds.insert(fd);
                }
            } else if SYNCS.contains(&name) {
                if let Some((fd, covered)) = syncing.remove(pid) {
                    if store_fds.contains(&fd) && result(call) == Some(0) {
                        for c in covered {
                            if let Some(s) = waiting.get_mut(&c) {
                                *s = true;
                            }
                        }
                    }
                }
            } else if READS.contains(&name) {
                if let Some(fd) = reading.remove(pid) {
                    read_done(&mut waiting, fd, call);
                }
            }
            continue;
        }
        let Some((name, args)) = call.split_once('(') else {
            continue;
        };
        if name == "openat" {
            if call.contains("/catalog.redb\"") {
                if unfinished {
                    opening.insert(pid.to_string());
                } else if let Some(fd) = result(call).filter(|fd| *fd >= 0) {
                    store_fds.insert(fd);
                }
            }
            continue;
        }
        let Some(fd) = first_fd(args) else {
            continue;
        };
        if SYNCS.contains(&name) {
            if !store_fds.contains(&fd) {
                continue;
            }
            let covered: Vec<i64> = waiting.keys().copied().collect();
            if unfinished {
                syncing.insert(pid.to_string(), (fd, covered));
            } else if result(call) == Some(0) {
                for c in covered {
                    if let Some(s) = waiting.get_mut(&c) {
                        *s = true;
                    }
                }
            }
        } else if READS.contains(&name) {
            if unfinished {
                reading.insert(pid.to_string(), fd);
            } else {
                read_done(&mut waiting, fd, call);
            }
        } else if ["write", "writev", "sendto", "sendmsg"].contains(&name)
            && call.contains("\"HTTP/1.1 2")
        {
            if let Some(synced) = waiting.remove(&fd) {
                if !synced {
                    return Err(format!(
                        "write answer number {} left without a sync of catalog.redb \
                         started after its request: {line}",
                        answers + 1
                    ));
                }
                answers += 1;
            }
        }
    }
    Ok(answers)
}
