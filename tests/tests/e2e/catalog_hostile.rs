//! Hostile and broken clients against the real catalog binary: what they
//! send, and that the catalog answers as the standards say while staying
//! within its limits (memory, connections, logs).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use e2e::buying;
use e2e::catalog::{provider, Backend, Catalog, Env};
use e2e::osb_client::{Auth, Platform};
use e2e::ws::{client_frame, RawFeed};
use e2e::EVENTUALLY;
use reqwest::Method;
use serde_json::json;

/// The catalog process's resident memory, in bytes (Linux /proc).
fn rss(c: &Catalog) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", c.child.pid()))
        .expect("reading the catalog's /proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc status");
    kb * 1024
}

/// A subscriber past its first snapshot, on a raw socket.
fn subscribed(c: &Catalog) -> RawFeed {
    let mut feed = RawFeed::connect(c.port, "?mode=snapshot").expect("subscribe");
    feed.next_message(EVENTUALLY).expect("the first snapshot");
    feed
}

// --- finding 1: a frame header announcing 2^40 bytes -----------------------

#[test]
fn a_huge_frame_header_is_refused_at_once_without_buffering() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let mut feed = subscribed(&c);
    let before = rss(&c);

    // Binary frame, masked, 8-byte length 2^40, then a mask and a stream
    // of payload the catalog must not keep.
    let mut header = vec![0x82, 0xFF];
    header.extend_from_slice(&(1u64 << 40).to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    let mut writer = feed.stream_clone().unwrap();
    writer
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let streamer = std::thread::spawn(move || {
        let chunk = vec![0x5a; 256 * 1024];
        let mut sent = 0usize;
        if writer.write_all(&header).is_err() {
            return sent;
        }
        // 96 MiB: the catalog must answer long before, and keep none of it.
        while sent < 96 * 1024 * 1024 {
            if writer.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len();
        }
        sent
    });
    // A catalog waiting for the announced 2^40 bytes would never close (the
    // client sends 96 MiB): closing at all proves it decided on the header.
    let code = feed.expect_close(EVENTUALLY).expect(
        "the catalog closes the feed as soon as the header announces a frame over the limit",
    );
    assert_eq!(code, 1009, "close code for an oversized frame");
    let sent = streamer.join().unwrap();
    let after = rss(&c);
    let grown = after.saturating_sub(before);
    assert!(
        grown < 24 * 1024 * 1024,
        "the catalog's memory grew by {} MiB while the client streamed {} MiB",
        grown >> 20,
        sent >> 20
    );
    // Still healthy.
    assert_eq!(c.get("/healthz").status, 200);
}

// --- finding 13: protocol errors -------------------------------------------

#[test]
fn websocket_protocol_errors_close_with_the_rfc_6455_codes() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("a fragmented ping", client_frame(0x09, b"ping"), 1002),
        (
            "a continuation with no message to continue",
            client_frame(0x80, b"more"),
            1002,
        ),
        (
            "invalid UTF-8 in a text frame",
            client_frame(0x81, &[b'o', b'k', 0xff, 0xfe]),
            1007,
        ),
        ("an unmasked client frame", vec![0x89, 0x00], 1002),
        (
            "reserved bits set without an extension",
            client_frame(0xC1, b"x"),
            1002,
        ),
        (
            "a control frame over 125 bytes",
            client_frame(0x89, &[0u8; 126]),
            1002,
        ),
        (
            "a new message inside a fragmented one",
            [client_frame(0x01, b"a"), client_frame(0x81, b"b")].concat(),
            1002,
        ),
        (
            "a close frame with a reserved code",
            client_frame(0x88, &1005u16.to_be_bytes()),
            1002,
        ),
    ];
    for (what, bytes, expected) in cases {
        let mut feed = subscribed(&c);
        feed.send_raw(&bytes).unwrap();
        let code = feed
            .expect_close(EVENTUALLY)
            .unwrap_or_else(|e| panic!("{what}: no close frame ({e:#})"));
        assert_eq!(code, expected, "close code for {what}");
    }
    // Well-formed frames keep the feed open: a ping split from its pong,
    // a fragmented text message with a character cut in two.
    let mut feed = subscribed(&c);
    let euro = "\u{20ac}".as_bytes();
    feed.send_raw(
        &[
            client_frame(0x01, &euro[..1]),
            client_frame(0x89, b"hi"),
            client_frame(0x80, &euro[1..]),
        ]
        .concat(),
    )
    .unwrap();
    let pong = feed.next_frame(EVENTUALLY).unwrap();
    assert_eq!((pong.opcode, pong.payload.as_slice()), (0xA, &b"hi"[..]));
    // The feed is still open and sent nothing else meanwhile (no close
    // frame): the next frame is the pong of a later ping.
    feed.send_raw(&client_frame(0x89, b"still there")).unwrap();
    let pong = feed
        .next_frame(EVENTUALLY)
        .expect("a valid fragmented message must not close the feed");
    assert_eq!(
        (pong.opcode, pong.payload.as_slice()),
        (0xA, &b"still there"[..]),
        "a valid fragmented message must not close the feed"
    );
}

// --- raw HTTP ----------------------------------------------------------------

/// Send `request` as is on a fresh connection; whatever the catalog answers
/// before it closes (or `timeout` passes). Write errors are ignored: the
/// catalog may close while a hostile request is still being sent.
fn raw_http(c: &Catalog, request: &[u8], timeout: Duration) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", c.port)).expect("connect");
    s.set_read_timeout(Some(timeout)).unwrap();
    s.set_write_timeout(Some(timeout)).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

// --- finding 3: slow request bodies ------------------------------------------

#[test]
fn slow_bodies_get_408_and_cannot_starve_the_catalog() {
    let env = Env::new(Backend::Embedded);
    let c = env.start_with(&[
        "--max-connections",
        "20",
        "--workers",
        "1",
        "--request-body-timeout",
        "2s",
    ]);
    // Twenty clients announce 60000 bytes and send one byte at a time.
    let mut readers = Vec::new();
    let mut writers = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
        s.write_all(
            b"POST /authenticate HTTP/1.1\r\nHost: catalog\r\nContent-Type: application/json\r\n\
              Content-Length: 60000\r\n\r\n{",
        )
        .unwrap();
        writers.push(s.try_clone().unwrap());
        readers.push(s);
    }
    let trickle = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until && !writers.is_empty() {
            writers.retain_mut(|w| w.write_all(b" ").is_ok());
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let health = e2e::http::blocking_client(Duration::from_secs(12))
        .get(c.url("/healthz"))
        .send()
        .map(|r| r.status().as_u16());
    assert_eq!(
        health.ok(),
        Some(200),
        "GET /healthz while twenty clients trickle bodies (waited {:?})",
        started.elapsed()
    );
    // A slow client got 408 after the deadline, and its connection closed.
    let mut slow = readers.swap_remove(0);
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = slow.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(
        status_of(&answer),
        408,
        "the slow client's answer: {answer}"
    );
    assert!(
        answer.contains("--request-body-timeout"),
        "the answer names the limit: {answer}"
    );
    drop(readers);
    trickle.join().unwrap();
}

#[test]
fn a_slow_request_head_gets_408() {
    let env = Env::new(Backend::Embedded);
    let c = env.start_with(&["--request-head-timeout", "1s"]);
    let started = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: cata").unwrap();
    // The client's patience: above the bound checked below, so that only
    // the catalog's head timeout can end the read in time.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(status_of(&answer), 408, "{answer}");
    assert!(
        // The 1 s head timeout, not the client's 10 s patience, ended it.
        started.elapsed() < Duration::from_secs(8),
        "closed after {:?}",
        started.elapsed()
    );
}

#[test]
fn request_deadlines_are_documented_flags() {
    let out = std::process::Command::new(e2e::process::bin_path("catalog"))
        .arg("--help")
        .output()
        .expect("catalog --help");
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--request-head-timeout",
        "CATALOG_REQUEST_HEAD_TIMEOUT",
        "--request-body-timeout",
        "CATALOG_REQUEST_BODY_TIMEOUT",
        "--keep-alive-timeout",
        "CATALOG_KEEP_ALIVE_TIMEOUT",
    ] {
        assert!(help.contains(flag), "--help documents {flag}");
    }
}

// --- finding 7: costs sent as JSON numbers -----------------------------------

#[test]
fn number_costs_are_stored_exactly() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let token = c.login(&provider(1));
    let body = br#"{"name":"Exact","type":"compute","plans":{"a":{"name":"a","cost":123456789.123456789,"resources":{"cpu":"1"}},"b":{"name":"b","cost":25e-1,"resources":{"cpu":"1"}}}}"#;
    let r = c.post_raw("/offer/exact", body.to_vec(), Some(&token));
    assert_eq!(r.status, 201, "{}", r.text);
    let stored = c.get("/offer/exact");
    assert_eq!(stored.json["plans"]["a"]["cost"], "123456789.123456789");
    assert_eq!(stored.json["plans"]["b"]["cost"], "2.5");
    // Too precise for a cost: refused, naming the field, nothing changed.
    let too_fine =
        br#"{"name":"Exact","type":"compute","plans":{"a":{"name":"a","cost":0.0000000001}}}"#;
    let r = c.post_raw("/offer/exact", too_fine.to_vec(), Some(&token));
    let message = r.expect_error(400);
    assert!(message.starts_with("plans.a.cost"), "{message}");
    assert_eq!(c.get("/offer/exact").json, stored.json);
}

// --- finding 8: offer ids a URL normalises away ------------------------------

#[test]
fn dot_segment_offer_ids_are_refused() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let token = c.login(&provider(1));
    let body = json!({ "name": "Dots", "type": "t", "plans": { "a": { "name": "a", "cost": "1", "resources": {} } } })
        .to_string();
    for path in ["/offer/.", "/offer/..", "/offer/%2E%2E", "/offer/%2e"] {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: catalog\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let answer = raw_http(&c, request.as_bytes(), EVENTUALLY);
        assert_eq!(status_of(&answer), 400, "POST {path}: {answer}");
        assert!(
            answer.contains("A-Z a-z 0-9 . _ ~ -"),
            "POST {path}: the message says which characters are allowed: {answer}"
        );
    }
    // A plan key `..` is refused the same way.
    let r = c.post(
        "/offer/dots",
        &json!({ "name": "Dots", "type": "t", "plans": { "..": { "name": "a", "cost": "1" } } }),
        Some(&token),
    );
    assert!(r.expect_error(400).starts_with("plans..."), "{}", r.text);
    assert_eq!(c.all_offers(), json!([]), "nothing was created");
}

// --- finding 9: consumer tokens for identities that are taken ----------------

#[test]
fn consumer_tokens_cannot_take_reserved_or_provider_identities() {
    let env = Env::new(Backend::Embedded);
    let c = buying::start(&env, &[]);
    let admin = buying::admin(&c);
    c.login(&provider(1));
    for subject in ["admin", "Admin", "cluster-1", "osb:platform"] {
        let r = buying::post(
            &c,
            "/consumer-tokens",
            &json!({ "subject": subject }),
            Some(&admin),
        );
        let message = r.expect_error(409);
        assert!(
            message.starts_with("subject:") && message.contains(subject),
            "{subject}: {message}"
        );
        assert!(r.json.get("token").is_none());
    }
    let alice = buying::consumer(&c, &admin, "alice");
    assert!(!alice.is_empty());
}

// --- finding 11: OSB basic auth is rate-limited -------------------------------

#[test]
fn osb_basic_auth_guessing_is_rate_limited() {
    let env = Env::new(Backend::Embedded);
    let password = "platform-password-0123";
    let c = buying::start(
        &env,
        &["--osb-username", "platform", "--osb-password", password],
    );
    let guesser = Platform::new(
        &c.url(""),
        Auth::Basic("platform".into(), "not-the-password-00".into()),
    );
    let statuses: Vec<u16> = (0..100)
        .map(|_| {
            guesser
                .send(Method::GET, "/v2/catalog", None, Some("2.17"))
                .status
        })
        .collect();
    assert_eq!(statuses[0], 401);
    let first_429 = statuses
        .iter()
        .position(|s| *s == 429)
        .unwrap_or_else(|| panic!("100 wrong passwords, never 429: {statuses:?}"));
    assert!(
        first_429 <= 60,
        "the default limit is 60 a minute: {statuses:?}"
    );
    assert!(statuses[first_429..].iter().all(|s| *s == 429));
    let r = guesser.send(Method::GET, "/v2/catalog", None, Some("2.17"));
    assert_eq!(r.status, 429);
    let retry: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After on 429");
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    // Only failures count: a platform's own requests are never limited.
    let env2 = Env::new(Backend::Embedded);
    let c2 = buying::start(
        &env2,
        &["--osb-username", "platform", "--osb-password", password],
    );
    let platform = Platform::new(&c2.url(""), Auth::Basic("platform".into(), password.into()));
    for _ in 0..80 {
        assert_eq!(
            platform
                .send(Method::GET, "/v2/catalog", None, Some("2.17"))
                .status,
            200
        );
    }
}

// --- finding 12: the web UI's security headers --------------------------------

#[test]
fn ui_responses_forbid_framing_and_foreign_content() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    for path in ["/", "/index.html", "/js/app.js", "/styles.css"] {
        let r = c.get(path);
        assert_eq!(r.status, 200, "{path}");
        let csp = r.header("content-security-policy").unwrap_or_default();
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(
                csp.contains(directive),
                "{path}: CSP {csp:?} lacks {directive}"
            );
        }
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{path}");
    }
}

// --- finding 14: malformed requests do not flood the log ----------------------

#[test]
fn malformed_requests_are_not_logged_as_errors() {
    let env = Env::new(Backend::Embedded);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("catalog.log");
    let c = env.start_with_logs(&[], &log);
    for _ in 0..30 {
        let answer = raw_http(
            &c,
            b"GET /\x01bad HTTP/1.1\r\nHost: catalog\r\n\r\n",
            EVENTUALLY,
        );
        assert_eq!(status_of(&answer), 400, "a bad URI: {answer}");
    }
    let many: String = (0..200).map(|i| format!("X-Header-{i}: v\r\n")).collect();
    let huge = format!(
        "GET / HTTP/1.1\r\nHost: catalog\r\nX-Padding: {}\r\n\r\n",
        "a".repeat(1024 * 1024)
    );
    for _ in 0..5 {
        let answer = raw_http(
            &c,
            format!("GET / HTTP/1.1\r\nHost: catalog\r\n{many}\r\n").as_bytes(),
            EVENTUALLY,
        );
        assert_eq!(status_of(&answer), 431, "too many headers: {answer}");
        // 431, unless the reset of the unread rest of the head overtook it.
        let answer = raw_http(&c, huge.as_bytes(), EVENTUALLY);
        assert!(
            matches!(status_of(&answer), 431 | 0),
            "an oversized head: {answer}"
        );
    }
    // The first summary comes within a second or two (a loaded machine may
    // take longer: wait for it); the next one not before 10 s later.
    let text = e2e::wait_for_log(&log, "refused malformed requests", EVENTUALLY);
    let errors: Vec<&str> = text.lines().filter(|l| l.contains("ERROR")).collect();
    assert!(
        errors.is_empty(),
        "ERROR lines for client mistakes: {errors:#?}"
    );
    let summaries = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("malformed"))
        .count();
    assert!(
        (1..=2).contains(&summaries),
        "one rate-limited WARN summary, not one line per request ({summaries}):\n{text}"
    );
    assert_eq!(c.get("/healthz").status, 200);
}

/// Finding 10: the data directory and every file in it that holds secrets
/// or their hashes are the catalog user's alone — also when an older
/// catalog (or an operator's umask) left them readable by others.
#[cfg(unix)]
#[test]
fn secrets_on_disk_are_private_even_when_left_open() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new(Backend::Embedded);
    let dir = env.data_dir.path().to_path_buf();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;

    // A first start creates the database and the signing key.
    let catalog = env.start();
    drop(catalog);
    let db = dir.join("catalog.redb");
    let key = dir.join("jwt-signing.key");
    assert_eq!(mode(&dir), 0o700, "data directory");
    assert_eq!(mode(&db), 0o600, "catalog.redb");
    assert_eq!(mode(&key), 0o600, "jwt-signing.key");

    // Opened up as an older catalog left them, they are restricted again
    // on the next start, before anything is served.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let catalog = env.start();
    assert_eq!(mode(&dir), 0o700, "data directory after restart");
    assert_eq!(mode(&db), 0o600, "catalog.redb after restart");
    assert_eq!(mode(&key), 0o600, "jwt-signing.key after restart");
    drop(catalog);
}

// --- F7: the catalog's own secret and key files ------------------------------

/// F-09..F-12 (issue 41, F7): each of the catalog's four file flags given
/// `/dev/zero`, a FIFO with no writer, or a 4 GiB sparse file makes the
/// catalog refuse to start at once, with an error naming the flag — the
/// rules every other binary's file flags follow (`edge::config_file`). The
/// old reads took 4 GiB of memory for `/dev/zero`, blocked for ever on the
/// FIFO, and started on the sparse file (4 GiB of zeros is a long key).
#[cfg(unix)]
#[test]
fn the_catalogs_file_flags_refuse_devices_fifos_and_huge_files_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo");
    let sparse = dir.path().join("sparse");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(4 << 30)
        .unwrap();
    let fifo = fifo.display().to_string();
    let sparse = sparse.display().to_string();
    let targets: [(&str, &str); 3] = [
        ("/dev/zero", "is a device"),
        (&fifo, "is a FIFO"),
        (&sparse, "is larger than"),
    ];
    let flags: [(&str, &[&str]); 4] = [
        ("--admin-secret-file", &[]),
        ("--jwt-key-file", &[]),
        ("--peering-key-file", &[]),
        (
            "--oidc-ca-file",
            &[
                "--oidc-issuer",
                "http://127.0.0.1:1/",
                "--oidc-audience",
                "catalog",
            ],
        ),
    ];
    // All twelve side by side: each is judged on its own exit and log.
    let mut running = Vec::new();
    for (flag, companions) in flags {
        for (target, problem) in targets {
            let data = tempfile::tempdir().unwrap();
            let log = data.path().join("stderr");
            let child = std::process::Command::new(e2e::bin_path("catalog"))
                .args(["--listen", "127.0.0.1:0", "--data-dir"])
                .arg(data.path().join("data"))
                .args([flag, target])
                .args(companions)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("start catalog");
            running.push((flag, target, problem, child, log, data));
        }
    }
    // The product's own bound on reading a configuration file: a refusal
    // "at once" is well inside it.
    let deadline = Instant::now() + edge::config_file::READ_DEADLINE;
    for (flag, target, problem, mut child, log, _data) in running {
        let exit = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let exit = exit.unwrap_or_else(|| {
            panic!(
                "{flag} {target}: the catalog still ran after {:?}:\n{text}",
                edge::config_file::READ_DEADLINE
            )
        });
        assert!(!exit.success(), "{flag} {target}: started:\n{text}");
        assert!(
            text.contains(&format!("{flag} {target}: {problem}")),
            "{flag} {target}: the error names the flag, the file and `{problem}`:\n{text}"
        );
    }
}

// --- U-09: stderr's reader gone ----------------------------------------------

/// Start `bin` with `args`, its stderr on a pipe whose reader reads two
/// lines and leaves (`bin 2>&1 | head -2`); returns once the reader has
/// gone and the process has announced its port.
fn start_with_stderr_reader_gone(bin: &str, args: &[&str]) -> (e2e::Child, u16) {
    use std::io::BufRead;
    let (reader, writer) = std::io::pipe().expect("a pipe");
    let head = std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(reader).lines();
        for _ in 0..2 {
            if lines.next().is_none() {
                break;
            }
        }
        // The reader (the pipe's only read end) is dropped here.
    });
    let stderr = std::fs::File::from(std::os::fd::OwnedFd::from(writer));
    let (child, bound) = e2e::Spawn::new(bin)
        .args(args)
        .env("RUST_LOG", "info")
        .stderr_to(stderr)
        .start_announced(1)
        .unwrap_or_else(|e| panic!("{bin} with its stderr reader gone: {e:#}"));
    head.join().unwrap();
    (child, bound.port(None))
}

/// U-09 (issue 41): with stderr's reader gone (`catalog 2>&1 | head -2`),
/// every log line fails with EPIPE; tracing-subscriber reported that with
/// `eprintln!`, which panicked the task that logged — the catalog's signal
/// task, so SIGTERM was ignored (40 s+), or its main task at start. Now
/// the catalog keeps serving (each request logs a line) and SIGTERM ends
/// it cleanly within its `--shutdown-timeout`; a controller (the
/// orchestrator, its API server unreachable, logging through `edge::log`)
/// likewise stops cleanly within its shutdown budget instead of dying of
/// the panic.
#[cfg(unix)]
#[test]
fn with_stderrs_reader_gone_sigterm_still_stops_the_catalog_and_a_controller() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().display().to_string();
    let shutdown = Duration::from_secs(3);
    let (mut catalog, port) = start_with_stderr_reader_gone(
        "catalog",
        &[
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            &data_dir,
            "--shutdown-timeout",
            "3s",
        ],
    );
    let kubeconfig = data.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: dead\n\
             clusters:\n- name: dead\n  cluster:\n    server: http://127.0.0.1:{}\n\
             contexts:\n- name: dead\n  context:\n    cluster: dead\n    user: u\n    namespace: default\n\
             users:\n- name: u\n  user:\n    token: t\n",
            e2e::free_port()
        ),
    )
    .unwrap();
    let (mut controller, _) = start_with_stderr_reader_gone(
        "orchestrator",
        &[
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--http-listen",
            "127.0.0.1:0",
            "--catalog",
            "http://127.0.0.1:9",
            "--leader-elect",
            "false",
        ],
    );

    // Each request logs a line nobody can read.
    let http = e2e::http::blocking_client(e2e::EVENTUALLY);
    for _ in 0..5 {
        let status = http
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .expect("the catalog answers with its stderr reader gone")
            .status();
        assert_eq!(status, 200);
    }
    drop(http);
    assert!(
        controller.try_wait().unwrap().is_none(),
        "the orchestrator died with its stderr reader gone"
    );

    let status = catalog
        .terminate(shutdown)
        .expect("the catalog stops on SIGTERM within its --shutdown-timeout");
    assert!(status.success(), "the catalog exited with {status}");
    // The orchestrator's shutdown budget: controller-core's stop grace and
    // edge's grace for the runtime (as `controllers_unreachable_api`).
    let status = controller
        .terminate(Duration::from_secs(5).saturating_add(edge::SHUTDOWN_GRACE))
        .expect("the orchestrator stops on SIGTERM within its shutdown budget");
    assert!(status.success(), "the orchestrator exited with {status}");
}
