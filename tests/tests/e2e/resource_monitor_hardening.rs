//! `resource-monitor` against clients and files that misbehave (issue 13):
//! idle connections that would lock every caller out, a FIFO put in the
//! static file's place, negative and duplicate entries, and Liqo v0.5's
//! habit of withdrawing the offer on any failed read.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use e2e::grpc::{resources, ReaderClient, Shape};
use e2e::process::{open_idle_connections, still_open_at};
use e2e::{free_port, Child, Spawn};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// Where the idle connections come from: another loopback address than the
/// well-behaved client's, as an attacker would be another host.
const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// `resource-monitor` over a static file, on the port it announces.
fn static_monitor(file: &Path, extra: &[&str]) -> Result<(Child, u16)> {
    static_monitor_logged(file, extra, None)
}

/// The same, its log (stderr) into `log` if given.
fn static_monitor_logged(
    file: &Path,
    extra: &[&str],
    log: Option<std::fs::File>,
) -> Result<(Child, u16)> {
    let mut spawn = Spawn::new("resource-monitor");
    if let Some(log) = log {
        spawn = spawn.stderr_to(log);
    }
    let (child, bound) = spawn
        .arg("--source")
        .arg(format!("static:{}", file.display()))
        .args(["--listen", "127.0.0.1:0"])
        .args(extra)
        .start_announced(1)?;
    Ok((child, bound.port(None)))
}

/// A loopback port nothing listens on: [`e2e::free_port`] hands each out
/// once, below the kernel's ephemeral range, so no other test binds it.
fn dead_port() -> Result<u16> {
    Ok(e2e::free_port())
}

/// A read and a health check answered within `within` on a fresh
/// connection.
async fn answers_within(port: u16, shape: Shape, within: Duration) -> Result<()> {
    tokio::time::timeout(within, async {
        let client = ReaderClient::connect(port, shape).await?;
        let answer = client.read("peer-1").await?;
        anyhow::ensure!(!answer.is_empty(), "empty answer");
        let status = HealthClient::new(client.channel())
            .check(HealthCheckRequest {
                service: "resource_reader".into(),
            })
            .await?
            .into_inner()
            .status;
        anyhow::ensure!(status == 1, "health {status} is not SERVING");
        Ok(())
    })
    .await
    .with_context(|| format!("no read and health answer within {within:?}"))?
}

/// Finding 1 (high): 300 connections that send nothing used to take every
/// connection slot (256), and every ReadResources then failed with
/// DEADLINE_EXCEEDED for as long as they stayed open. Now a peer holds at
/// most `--max-connections-per-peer`, and a connection that has not sent the
/// HTTP/2 preface within `--handshake-timeout` is closed.
#[tokio::test]
async fn idle_connections_cannot_lock_out_reads_or_health() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.yaml");
    std::fs::write(&file, "cpu: 4\nmemory: 8Gi\n")?;
    let (_monitor, port) = static_monitor(&file, &["--handshake-timeout", "2s"])?;
    answers_within(port, Shape::A, Duration::from_secs(5)).await?;

    let opened = Instant::now();
    let idle = open_idle_connections(port, 300, ATTACKER).await?;
    // Well-behaved callers are answered at once, while the idle ones are open.
    answers_within(port, Shape::A, Duration::from_secs(5)).await?;
    answers_within(port, Shape::A, Duration::from_secs(5)).await?;

    // Every idle connection is closed once the handshake deadline has passed.
    let left = still_open_at(idle, opened + Duration::from_secs(2 + 3)).await;
    assert_eq!(
        left, 0,
        "{left} idle connections still open after the deadline"
    );
    answers_within(port, Shape::A, Duration::from_secs(5)).await?;
    Ok(())
}

/// The same on the gRPC port for a peer that is within its limit: its
/// silent connections are closed at the deadline, not held forever.
#[tokio::test]
async fn silent_connections_within_the_peer_limit_are_closed_at_the_deadline() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.yaml");
    std::fs::write(&file, "cpu: 4\n")?;
    let (_monitor, port) = static_monitor(
        &file,
        &[
            "--handshake-timeout",
            "1s",
            "--max-connections-per-peer",
            "300",
        ],
    )?;
    let opened = Instant::now();
    let idle = open_idle_connections(port, 20, ATTACKER).await?;
    let left_early = still_open_at(
        open_idle_connections(port, 5, ATTACKER).await?,
        Instant::now() + Duration::from_millis(300),
    )
    .await;
    assert_eq!(left_early, 5, "closed before the deadline");
    // Closed as soon as they are (the wait ends then); the bound only ends a
    // real failure.
    let left = still_open_at(idle, opened + e2e::EVENTUALLY).await;
    assert_eq!(left, 0);
    Ok(())
}

/// Finding 2 (medium): a FIFO put in the static file's place used to block
/// the reload thread in open(): later changes were never read, nothing was
/// logged, and SIGTERM never completed. Now it is refused with a log line,
/// reloading goes on, and the process stops on SIGTERM.
#[tokio::test]
async fn a_fifo_in_place_of_the_static_file_is_refused_and_reloading_goes_on() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.yaml");
    std::fs::write(&file, "cpu: 4\n")?;
    let log_path = dir.path().join("monitor.log");
    let (mut monitor, port) =
        static_monitor_logged(&file, &[], Some(std::fs::File::create(&log_path)?))?;
    let client = ReaderClient::connect(port, Shape::A).await?;
    assert_eq!(client.read("x").await?, resources(&[("cpu", "4")]));

    // A FIFO renamed over the file; nobody ever writes to it.
    let fifo = dir.path().join("fifo.tmp");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status()?;
    anyhow::ensure!(made.success(), "mkfifo failed");
    std::fs::rename(&fifo, &file)?;
    let logged = wait_for_log(&log_path, "FIFO", e2e::EVENTUALLY).await?;
    assert!(logged.contains("not a regular file"), "{logged}");
    // The last good resources are still served.
    assert_eq!(client.read("x").await?, resources(&[("cpu", "4")]));

    // A regular file again: read at once.
    let tmp = dir.path().join("resources.tmp");
    std::fs::write(&tmp, "cpu: 7\n")?;
    std::fs::rename(&tmp, &file)?;
    client
        .read_until("x", e2e::EVENTUALLY, |r| r == &resources(&[("cpu", "7")]))
        .await?;

    // A FIFO once more, then SIGTERM: the process exits promptly.
    let made = std::process::Command::new("mkfifo").arg(&fifo).status()?;
    anyhow::ensure!(made.success(), "mkfifo failed");
    std::fs::rename(&fifo, &file)?;
    // Terminated once it has met the FIFO (its second refusal logged), so
    // the stop is tested with the FIFO in place.
    let deadline = Instant::now() + e2e::EVENTUALLY;
    loop {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        if log.matches("not a regular file").count() >= 2 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the second FIFO was not refused within {:?}; log:\n{log}",
            e2e::EVENTUALLY
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = monitor.terminate(Duration::from_secs(10))?;
    assert!(status.success(), "{status}");
    Ok(())
}

/// [`e2e::wait_for_log`] off the test's runtime threads, which the
/// monitor's clients in the same test still need while it polls.
async fn wait_for_log(path: &Path, needle: &str, within: Duration) -> Result<String> {
    let (path, needle) = (path.to_path_buf(), needle.to_string());
    Ok(tokio::task::spawn_blocking(move || e2e::wait_for_log(&path, &needle, within)).await?)
}

/// Findings 3 and 4 (low): a negative quantity (`cpu: -100`) was served, and
/// a resource listed twice was accepted silently (the last one won). Both
/// are refused now, naming the resource (and the line), at start and on
/// reload (where the last good resources stay).
#[tokio::test]
async fn negative_and_duplicate_resources_are_refused() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.yaml");
    for (text, needles) in [
        (
            "cpu: -100\nmemory: 1Gi\n",
            &["cpu", "negative", "line 1"][..],
        ),
        (
            "memory: 1Gi\ncpu: 2\ncpu: 4\n",
            &["\"cpu\"", "twice", "line 3"][..],
        ),
    ] {
        std::fs::write(&file, text)?;
        let out = Spawn::new("resource-monitor")
            .arg("--source")
            .arg(format!("static:{}", file.display()))
            .args(["--listen", "127.0.0.1:0"])
            .output()?;
        assert!(!out.status.success(), "{text:?} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{text:?}: {needle:?} not in {stderr}"
            );
        }
    }
    let json = dir.path().join("resources.json");
    std::fs::write(&json, r#"{"cpu": "1", "cpu": "2"}"#)?;
    let out = Spawn::new("resource-monitor")
        .arg("--source")
        .arg(format!("static:{}", json.display()))
        .args(["--listen", "127.0.0.1:0"])
        .output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("twice"));

    // On reload: refused, the last good resources stay.
    std::fs::write(&file, "cpu: 2\n")?;
    let log_path = dir.path().join("monitor.log");
    let (_monitor, port) =
        static_monitor_logged(&file, &[], Some(std::fs::File::create(&log_path)?))?;
    let client = ReaderClient::connect(port, Shape::A).await?;
    assert_eq!(client.read("x").await?, resources(&[("cpu", "2")]));
    for (text, refusal) in [("cpu: -100\n", "negative"), ("cpu: 3\ncpu: 5\n", "twice")] {
        let tmp = dir.path().join("resources.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &file)?;
        // The refusal logged is the proof the file was read (no waiting).
        wait_for_log(&log_path, refusal, e2e::EVENTUALLY).await?;
        assert_eq!(
            client.read("x").await?,
            resources(&[("cpu", "2")]),
            "{text:?}"
        );
    }
    Ok(())
}

/// Finding 5 (fidelity with Liqo v0.5, which takes a failed read as an empty
/// offer and withdraws the ResourceOffer): under shape A a source that has
/// not synced yet makes the read wait (`--first-sync-timeout`) instead of
/// failing, and once answered, a source that fails later is answered from
/// the last known answer. Shape B keeps answering UNAVAILABLE (Liqo v0.6+
/// keeps the offer and retries).
#[tokio::test]
async fn shape_a_waits_for_the_first_sync_then_serves_the_last_known_answer() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.yaml");
    std::fs::write(&file, "cpu: 3\n")?;
    // A known port, deliberately: the monitor must be told where its
    // upstream will be before the upstream exists.
    let upstream_port = free_port();
    let log_path = dir.path().join("monitor.log");
    let (_monitor, bound) = Spawn::new("resource-monitor")
        .stderr_to(std::fs::File::create(&log_path)?)
        .args(["--source", &format!("grpc:127.0.0.1:{upstream_port}")])
        .args(["--liqo-api", "v0.5", "--first-sync-timeout", "20s"])
        .args(["--listen", "127.0.0.1:0"])
        .start_announced(1)?;
    let port = bound.port(None);
    let client = ReaderClient::connect(port, Shape::A).await?;

    // The upstream comes up while the read waits.
    let started = Instant::now();
    let read = tokio::spawn({
        let client = client.clone();
        async move { client.read("peer-1").await }
    });
    // The monitor says when a read waits for the first answer: only then
    // does the upstream start, so the read is proven to have waited.
    wait_for_log(
        &log_path,
        "not ready yet: waiting for the first answer",
        Duration::from_secs(15),
    )
    .await?;
    let mut upstream = Spawn::new("resource-monitor")
        .arg("--source")
        .arg(format!("static:{}", file.display()))
        .args(["--listen", &format!("127.0.0.1:{upstream_port}")])
        .start_listening(upstream_port)?;
    let answer = read
        .await?
        .context("the first read failed instead of waiting")?;
    assert_eq!(answer, resources(&[("cpu", "3")]));
    assert!(started.elapsed() < Duration::from_secs(20));

    // The upstream goes away: the last known answer, not an error.
    // Read once the monitor has noticed (its log says so), so the answer
    // comes from the kept one and not from a connection still believed up.
    upstream.kill();
    wait_for_log(&log_path, "lost the upstream", e2e::EVENTUALLY).await?;
    for _ in 0..5 {
        assert_eq!(client.read("peer-1").await?, resources(&[("cpu", "3")]));
    }

    // Shape B in the same situation answers UNAVAILABLE at once.
    let (_monitor_b, bound_b) = Spawn::new("resource-monitor")
        .args(["--source", &format!("grpc:127.0.0.1:{}", dead_port()?)])
        .args(["--liqo-api", "v0.6"])
        .args(["--listen", "127.0.0.1:0"])
        .start_announced(1)?;
    let port_b = bound_b.port(None);
    let client_b = ReaderClient::connect(port_b, Shape::B).await?;
    let status = client_b
        .read("peer-1")
        .await
        .expect_err("nothing to answer");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    Ok(())
}

/// Liqo v0.5 never subscribes again after a clean end of its stream, but
/// retries after an error: shape A subscriptions end with an error status
/// when the server stops.
#[tokio::test]
async fn shape_a_subscriptions_end_with_an_error_on_shutdown() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.yaml");
    std::fs::write(&file, "cpu: 3\n")?;
    let (mut monitor, port) = static_monitor(&file, &["--liqo-api", "v0.5"])?;
    let client = ReaderClient::connect(port, Shape::A).await?;
    let mut subscription = client.subscribe().await?;
    assert_eq!(subscription.next_within(e2e::EVENTUALLY).await?, "");
    let stopping = tokio::task::spawn_blocking(move || monitor.terminate(Duration::from_secs(10)));
    let end = subscription
        .next_within(Duration::from_secs(10))
        .await
        .expect_err("no notification at shutdown");
    assert!(end.to_string().contains("subscription failed"), "{end}");
    assert!(stopping.await??.success());
    Ok(())
}
