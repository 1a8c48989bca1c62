//! The `kube-test-server` binary: it answers `--help` and `--version` as a
//! command-line program does (printed, exit 0, nothing served or written),
//! and otherwise serves until killed, with a kubeconfig that
//! authenticates as the tests' administrator.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_kube-test-server");

/// Run the binary with `args` in `dir`; its output once it exits, or a
/// failed test if it is still running after 20 s (serving, say).
fn run(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    let child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while server.0.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "kube-test-server {args:?} is still running after 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = std::process::Output {
        status: server.0.wait().unwrap(),
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    use std::io::Read;
    server
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut out.stdout)
        .unwrap();
    server
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut out.stderr)
        .unwrap();
    out
}

#[test]
fn help_and_version_are_printed_not_served() {
    for flag in ["--help", "-h", "--version"] {
        let dir = tempfile::tempdir().unwrap();
        let out = run(&[flag], dir.path());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{flag}: {out:?}");
        assert!(stdout.contains("kube-test-server"), "{flag}: {stdout}");
        // Before, `--help` was taken for the kubeconfig's path: a server
        // started and a file named `--help` was written.
        let written: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(written.is_empty(), "{flag} wrote {written:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let help = run(&["--help"], dir.path());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Usage: kube-test-server [OPTIONS] <KUBECONFIG>")
            && help.contains("--pod-security-default"),
        "{help}"
    );
    // No argument: a usage error, as clap reports one.
    let none = run(&[], dir.path());
    assert_eq!(none.status.code(), Some(2), "{none:?}");
}

/// The server process, killed when the test ends, passed or not.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Started with a path, it serves HTTPS and writes a kubeconfig there
/// (trusting its CA) whose credentials the server takes as
/// `kube-test-admin` (allowed everything).
#[tokio::test]
async fn it_serves_with_an_administrator_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    let mut server = Server(
        Command::new(BIN)
            .arg(&path)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // The first line says it serves, once the kubeconfig is written.
    let stdout = server.0.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    });
    let line = tokio::time::timeout(Duration::from_secs(30), line)
        .await
        .expect("the server never said it serves")
        .unwrap();
    assert!(line.starts_with("serving https://127.0.0.1:"), "{line}");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    let names: Vec<String> = namespaces
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()), "{names:?}");
}
