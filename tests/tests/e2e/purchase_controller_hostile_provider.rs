//! `purchase-controller` against a provider that attacks it (issue 41):
//! a peering kubeconfig that would run a command (H-07), and a provider
//! API server that answers without end (H-02) or one byte at a time
//! (H-03). The real controller runs as its ServiceAccount under the
//! shipped RBAC on the consumer's test API server; the provider is a
//! hostile HTTPS server written here, its certificate from the test CA the
//! kubeconfig trusts, so the allow-list accepts the kubeconfig and the
//! controller really reads what the server sends.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::purchase_controller_support::*;

/// The bounds the controller runs with here (small, so the test is fast).
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// What the huge server would send, were it read whole (H-02's size).
const HUGE_BYTES: usize = 256 * 1024 * 1024;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// How the hostile server answers every request.
#[derive(Clone, Copy)]
enum Hostile {
    /// 200, no length, then [`HUGE_BYTES`] of JSON-looking bytes as fast as
    /// the client takes them.
    Huge,
    /// 200, then one byte every 100 ms, for ever.
    Trickle,
}

/// Serve `mode` over HTTPS (the test CA's 127.0.0.1 certificate) on a free
/// loopback port of `rt`: the port, and how many answers have ended (sent
/// whole, or cut off by the client).
fn hostile_server(rt: &tokio::runtime::Runtime, mode: Hostile) -> (u16, Arc<AtomicUsize>) {
    let ended = Arc::new(AtomicUsize::new(0));
    let counter = ended.clone();
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/oidc");
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(dir.join("tls-server.pem"))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("tls-server-key.pem")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            let ended = counter.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                // The request's head, whatever it asks.
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match tls.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let start = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
                if tls.write_all(start).await.is_err() {
                    return;
                }
                match mode {
                    Hostile::Huge => {
                        let chunk = [b'x'; 64 * 1024];
                        let _ = tls.write_all(b"{\"kind\":\"ConfigMap\",\"x\":\"").await;
                        for _ in 0..HUGE_BYTES / chunk.len() {
                            if tls.write_all(&chunk).await.is_err() {
                                break;
                            }
                        }
                        let _ = tls.shutdown().await;
                        ended.fetch_add(1, Ordering::SeqCst);
                    }
                    Hostile::Trickle => loop {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        if tls.write_all(b" ").await.is_err() || tls.flush().await.is_err() {
                            return;
                        }
                    },
                }
            });
        }
    });
    (port, ended)
}

/// A peering kubeconfig the allow-list accepts, for `server`, trusting the
/// test CA, with `user` (a YAML flow mapping).
fn kubeconfig(server: &str, user: &str) -> String {
    let ca = std::fs::read(e2e::oidc_issuer::ca_file()).unwrap();
    format!(
        "apiVersion: v1\nkind: Config\n\
         clusters: [{{name: p, cluster: {{server: '{server}', certificate-authority-data: {}}}}}]\n\
         users: [{{name: u, user: {user}}}]\n\
         contexts: [{{name: x, context: {{cluster: p, user: u}}}}]\ncurrent-context: x\n",
        b64(&ca)
    )
}

/// The consumer cluster with Secret `team/peer` holding `kubeconfig`, the
/// controller with the bounds above, and a direct Purchase `p` of it.
struct World {
    consumer: Consumer,
    controller: e2e::Child,
    created: Instant,
}

fn world(rt: &tokio::runtime::Runtime, kubeconfig: &str) -> World {
    let consumer = Consumer::start(rt, "v1", "no-catalog").unwrap();
    consumer.kube.apply(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "peer", "namespace": TEAM},
               "data": {"kubeconfig": b64(kubeconfig.as_bytes())}}),
    );
    let max = MAX_RESPONSE_BYTES.to_string();
    let timeout = format!("{}s", REQUEST_TIMEOUT.as_secs());
    let (controller, _) = consumer
        .controller_spawn("v1")
        .args(["--provider-max-response-bytes", &max])
        .args(["--provider-request-timeout", &timeout])
        .start_announced(1)
        .unwrap();
    let created = Instant::now();
    consumer
        .create_purchase(
            "p",
            json!({"peeringCredentialsSecretRef": {"name": "peer", "key": "kubeconfig"},
                   "resources": {"cpu": "1"}}),
        )
        .unwrap();
    World {
        consumer,
        controller,
        created,
    }
}

/// The Purchase once its credentials' condition says `says`.
fn credentials_condition(world: &World, says: &str) -> Value {
    let purchase = world
        .consumer
        .wait_purchase("p", |p| {
            condition(p, "PeeringCredentialsValid")["message"]
                .as_str()
                .is_some_and(|m| m.contains(says))
        })
        .unwrap();
    condition(&purchase, "PeeringCredentialsValid")
}

/// The controller's peak resident memory (`VmHWM`), in bytes.
fn peak_memory(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc status");
    kib * 1024
}

/// H-07: a Purchase's kubeconfig with `users[].exec` is refused before any
/// client exists: the command (which creates a file) never runs, and the
/// Purchase names the refused key.
#[test]
fn an_exec_kubeconfig_is_refused_on_the_purchase_and_never_run() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let credential = r#"{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}"#;
    let user = format!(
        "{{exec: {{apiVersion: client.authentication.k8s.io/v1beta1, interactiveMode: Never, \
         command: /bin/sh, args: ['-c', 'touch {}; echo \"{credential}\"']}}}}",
        ran.display()
    );
    let world = world(&rt, &kubeconfig("https://127.0.0.1:1", &user));
    let refused = credentials_condition(&world, "users[0].user.exec is not accepted");
    assert_eq!(refused["status"], "False", "{refused:#}");
    assert_eq!(refused["reason"], "CredentialsInvalid", "{refused:#}");
    assert!(!ran.exists(), "the kubeconfig's command ran");
}

/// H-02: a provider answering every GET with 256 MiB is cut off at
/// `--provider-max-response-bytes`: the Purchase says so, and the
/// controller's peak memory stays far below what the server sends.
#[test]
fn a_huge_answer_is_cut_off_at_the_bound() {
    let rt = runtime();
    let (port, answers) = hostile_server(&rt, Hostile::Huge);
    let world = world(
        &rt,
        &kubeconfig(&format!("https://127.0.0.1:{port}"), "{token: abc}"),
    );
    let says = format!("larger than {MAX_RESPONSE_BYTES} bytes");
    let cut = credentials_condition(&world, &says);
    assert_eq!(cut["reason"], "RemoteClusterUnreachable", "{cut:#}");
    assert!(
        cut["message"]
            .as_str()
            .unwrap()
            .contains("--provider-max-response-bytes"),
        "{cut:#}"
    );
    // The controller retries (each try cut off again): the peak after
    // three answers is still far below one whole answer.
    wait_until("three answers ended", || {
        answers.load(Ordering::SeqCst) >= 3
    });
    let peak = peak_memory(world.controller.pid());
    assert!(
        peak < HUGE_BYTES / 4,
        "purchase-controller's peak memory is {peak} bytes"
    );
}

/// H-03: a provider that trickles its answer a byte at a time (each byte
/// well within any per-read timeout) is cut off at
/// `--provider-request-timeout`, and the Purchase says so.
#[test]
fn a_trickled_answer_is_cut_off_at_the_total_time() {
    let rt = runtime();
    let (port, _) = hostile_server(&rt, Hostile::Trickle);
    let world = world(
        &rt,
        &kubeconfig(&format!("https://127.0.0.1:{port}"), "{token: abc}"),
    );
    let says = format!("did not arrive whole within {REQUEST_TIMEOUT:?}");
    let cut = credentials_condition(&world, &says);
    let took = world.created.elapsed();
    assert_eq!(cut["reason"], "RemoteClusterUnreachable", "{cut:#}");
    assert!(
        cut["message"]
            .as_str()
            .unwrap()
            .contains("--provider-request-timeout"),
        "{cut:#}"
    );
    // The bound, not something else, ended the read: it took the whole
    // timeout, and not much more (the old read timeout restarted with each
    // byte, so the read never ended; 3x leaves the controller time to see
    // the Purchase and write its status on a loaded machine).
    assert!(
        took >= REQUEST_TIMEOUT && took < 3 * REQUEST_TIMEOUT,
        "the condition came after {took:?}"
    );
}
