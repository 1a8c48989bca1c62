//! `/authenticate` under concurrency: argon2 runs on a bounded pool of
//! low-priority threads (`--auth-verify-threads`, `--auth-verify-queue`,
//! `--auth-verify-wait`). Many concurrent authentications all succeed when
//! the queue holds them, wrong secrets are still refused, and a caller
//! beyond a full queue is answered 503 with `Retry-After` and a clear
//! message, after which authentication works again.

use std::time::Instant;

use e2e::catalog::{provider, simple_offer, Backend, Catalog, Env};
use serde_json::json;

/// The answers to one concurrent authentication per entry of `creds`.
fn concurrently(c: &Catalog, creds: &[serde_json::Value]) -> Vec<e2e::catalog::Resp> {
    std::thread::scope(|s| {
        let calls: Vec<_> = creds
            .iter()
            .map(|body| s.spawn(move || c.post("/authenticate", body, None)))
            .collect();
        calls.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The catalog's argon2 pool threads (named `argon2-<n>`) and the CPU
/// time each has used so far, in clock ticks, from `/proc`.
fn argon2_threads(pid: u32) -> Vec<(String, u64)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue; // a thread that ended meanwhile
        };
        let comm = comm.trim().to_string();
        if !comm.starts_with("argon2-") {
            continue;
        }
        // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
        let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks = rest[11].parse::<u64>().unwrap() + rest[12].parse::<u64>().unwrap();
        threads.push((comm, ticks));
    }
    threads.sort();
    threads
}

#[test]
fn concurrent_authentications_all_succeed() {
    let env = Env::new(Backend::Embedded);
    let c = env.start_with(&[
        "--auth-rate-limit",
        "0",
        "--auth-verify-threads",
        "2",
        // A loaded machine and a debug build: verifications may be slow;
        // the catalog gives up (503) before the client's own 30 s.
        "--auth-verify-wait",
        "25s",
    ]);
    // Four providers, each claimed then proved four times, all at once
    // (16 callers, two verifying threads, the default queue holds them),
    // plus a wrong secret for a claimed provider.
    for n in 1..=4 {
        c.login(&provider(n));
    }
    let before = argon2_threads(c.child.pid());
    let names: Vec<&str> = before.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["argon2-0", "argon2-1"], "--auth-verify-threads 2");
    let mut creds: Vec<_> = (0..16).map(|i| provider(1 + i % 4)).collect();
    let mut wrong = provider(2);
    wrong["token"] = json!("not-the-secret-of-provider-2");
    creds.push(wrong);
    let answers = concurrently(&c, &creds);
    for (i, r) in answers.iter().take(16).enumerate() {
        assert_eq!(r.status, 200, "authentication {i}: {}", r.text);
        // Each token is a working provider token.
        let token = r.json["token"].as_str().unwrap();
        let offer = simple_offer("Pool", "compute", "1.00", json!({"cpu": "1"}));
        c.put_offer(&format!("pool-{i}"), &offer, token);
    }
    answers[16].expect_error(401);
    // The 17 verifications ran on those two threads and no others: still
    // two, and they did the work (a pool that spawned a thread per caller,
    // or verified on the request threads, fails here).
    let after = argon2_threads(c.child.pid());
    assert_eq!(after.len(), 2, "{after:?}");
    let used: u64 =
        after.iter().map(|t| t.1).sum::<u64>() - before.iter().map(|t| t.1).sum::<u64>();
    assert!(
        used > 0,
        "the argon2 threads used no CPU for 17 verifications: {before:?} → {after:?}"
    );
}

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    let env = Env::new(Backend::Embedded);
    // One verifying thread and no queue: an authentication that arrives
    // while another is being verified is refused at once.
    let c = env.start_with(&[
        "--auth-rate-limit",
        "0",
        "--auth-verify-threads",
        "1",
        "--auth-verify-queue",
        "0",
    ]);
    c.login(&provider(1));
    let deadline = Instant::now() + e2e::EVENTUALLY;
    let refused = loop {
        let answers = concurrently(&c, &(0..8).map(|_| provider(1)).collect::<Vec<_>>());
        for r in &answers {
            assert!(
                r.status == 200 || r.status == 503,
                "only success or 503 expected: {} {}",
                r.status,
                r.text
            );
        }
        if let Some(r) = answers.into_iter().find(|r| r.status == 503) {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "8 concurrent authentications never found the only thread busy"
        );
    };
    let message = refused.expect_error(503);
    assert_eq!(refused.json["error"], "unavailable", "{}", refused.text);
    assert!(
        message.contains("credential-verification thread"),
        "the 503 says why: {message}"
    );
    let retry: u64 = refused
        .header("retry-after")
        .expect("Retry-After on the 503")
        .parse()
        .expect("Retry-After in seconds");
    assert!(retry >= 1, "Retry-After {retry}");
    // Once the burst is over, authentication works again.
    c.login(&provider(1));
}
