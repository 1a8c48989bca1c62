//! Nothing acknowledged is ever lost, on both stores: across a clean
//! restart, across `kill -9` in the middle of a stream of writes, and across
//! a SIGTERM that arrives while a request is still being received.

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

    let deadline = Instant::now() + Duration::from_secs(60);
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
    let mut c = env.start();
    let token = c.login(&provider(1));
    let body = serde_json::to_vec(&thesis_offer()).unwrap();
    let (first, rest) = body.split_at(body.len() / 2);

    // Start a request and send only half of its body.
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        conn,
        "POST /offer/in-flight HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    conn.write_all(first).unwrap();
    conn.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));

    c.child.signal_term();
    std::thread::sleep(Duration::from_millis(500));
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
