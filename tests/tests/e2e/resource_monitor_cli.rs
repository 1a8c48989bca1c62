//! The `resource-monitor` command line: bad configuration is refused before
//! the port is bound, `--help` documents the flags, a chain file wires the
//! quota and filter stages, and gRPC health and reflection are served.

use anyhow::Result;
use e2e::grpc::{resources, ReaderClient, Shape};
use e2e::process::run_tracing_binds;
use e2e::Spawn;

/// Run `resource-monitor` with `args` (and `--listen 127.0.0.1:0`) to
/// completion under strace; return (success, stderr, its `bind` calls).
fn run_traced(args: &[&std::ffi::OsStr]) -> Result<(bool, String, Vec<String>)> {
    let mut all = args.to_vec();
    all.extend(["--listen", "127.0.0.1:0"].map(std::ffi::OsStr::new));
    run_tracing_binds("resource-monitor", &all)
}

/// Run with a chain file; return (success, stderr) and check the port was
/// never bound.
fn run_with_config(text: &str) -> Result<(bool, String)> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("resources.yaml"), "cpu: 1\n")?;
    let chain = dir.path().join("chain.toml");
    std::fs::write(&chain, text)?;
    let (ok, stderr, binds) = run_traced(&["--config".as_ref(), chain.as_os_str()])?;
    assert!(
        binds.is_empty(),
        "the port was bound despite the bad configuration: {binds:?}"
    );
    Ok((ok, stderr))
}

#[test]
fn out_of_range_value_names_key_and_line() -> Result<()> {
    let (ok, stderr) =
        run_with_config("[source.static]\npath = \"resources.yaml\"\n\n[quota]\npercent = 150\n")?;
    assert!(!ok);
    assert!(stderr.contains("line 5"), "{stderr}");
    assert!(stderr.contains("percent = 150"), "{stderr}");
    assert!(stderr.contains("between 0 and 100"), "{stderr}");
    Ok(())
}

#[test]
fn unknown_key_names_key_and_line() -> Result<()> {
    let (ok, stderr) = run_with_config(
        "[source.static]\npath = \"resources.yaml\"\n\n[[filter.rules]]\nallow = [\"cpu\"]\nclsuters = [\"a\"]\n",
    )?;
    assert!(!ok);
    assert!(stderr.contains("line 6"), "{stderr}");
    assert!(stderr.contains("clsuters"), "{stderr}");
    Ok(())
}

#[test]
fn bad_quantity_in_config_names_key_and_line() -> Result<()> {
    let (ok, stderr) = run_with_config(
        "[source.static]\npath = \"resources.yaml\"\n[quota]\nmax = { memory = \"2 GB\" }\n",
    )?;
    assert!(!ok);
    assert!(
        stderr.contains("line 4") && stderr.contains("memory"),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn bad_resource_file_fails_before_binding() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("resources.yaml");
    std::fs::write(&file, "cpu: 2\nmemory: eight\n")?;
    let source = format!("static:{}", file.display());
    let (ok, stderr, binds) = run_traced(&["--source".as_ref(), source.as_ref()])?;
    assert!(!ok);
    assert!(
        stderr.contains("memory") && stderr.contains("line 2"),
        "{stderr}"
    );
    assert!(binds.is_empty(), "the port was bound: {binds:?}");
    Ok(())
}

#[test]
fn missing_source_and_bad_flags_are_refused() -> Result<()> {
    let out = Spawn::new("resource-monitor")
        .args(["--listen", "127.0.0.1:0"])
        .output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no source"));

    let out = Spawn::new("resource-monitor")
        .args(["--source", "magic"])
        .output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("static:FILE"));

    let out = Spawn::new("resource-monitor")
        .args(["--source", "host", "--quota-percent", "101"])
        .output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("between 0 and 100"));

    let out = Spawn::new("resource-monitor")
        .args(["--source", "host", "--liqo-api", "v2.0"])
        .output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("v0.5"));
    Ok(())
}

#[test]
fn help_documents_every_flag() -> Result<()> {
    let out = Spawn::new("resource-monitor").arg("--help").output()?;
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--config",
        "--source",
        "--kubeconfig",
        "--kube-context",
        "--upstream-api",
        "--quota-percent",
        "--listen",
        "--liqo-api",
        "--pool-name",
        "--pool-prefix",
        "--max-connections",
        "--max-connections-per-peer",
        "--handshake-timeout",
        "--first-sync-timeout",
        "RESOURCE_MONITOR_HANDSHAKE_TIMEOUT",
        "--check",
        "--log-format",
        "RESOURCE_MONITOR_LISTEN",
        "[source.kubernetes]",
        "[[filter.rules]]",
    ] {
        assert!(
            help.contains(flag),
            "--help does not mention {flag}:\n{help}"
        );
    }
    Ok(())
}

/// Labels attached to cluster IDs drive the quota and filter stages.
#[tokio::test]
async fn chain_file_quota_and_filter_per_originator() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(
        dir.path().join("resources.yaml"),
        "cpu: 8\nmemory: 32Gi\nnvidia.com/gpu: 4\namd.com/gpu: 2\n",
    )?;
    let chain = dir.path().join("chain.toml");
    std::fs::write(
        &chain,
        r#"
[server]
liqo_api = "v0.6"

[source.static]
path = "resources.yaml"

[clusters."gold-1".labels]
tier = "gold"

[quota]
percent = 50
max = { memory = "8Gi" }

[[quota.originators]]
labels = { tier = "gold" }
percent = 100

[[filter.rules]]
labels = { tier = "gold" }
allow = ["*/gpu"]

[[filter.rules]]
deny = ["*gpu*"]
"#,
    )?;
    let (_p, bound) = Spawn::new("resource-monitor")
        .arg("--config")
        .arg(&chain)
        .args(["--listen", "127.0.0.1:0"])
        .start_announced(1)?;
    let port = bound.port(None);
    let client = ReaderClient::connect(port, Shape::B).await?;
    assert_eq!(
        client.read("gold-1").await?,
        resources(&[
            ("amd.com/gpu", "2"),
            ("cpu", "8"),
            ("memory", "8Gi"),
            ("nvidia.com/gpu", "4")
        ])
    );
    assert_eq!(
        client.read("bronze-7").await?,
        resources(&[("cpu", "4"), ("memory", "8Gi")])
    );
    Ok(())
}

#[tokio::test]
async fn health_and_reflection_are_served() -> Result<()> {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;

    let (_p, bound) = Spawn::new("resource-monitor")
        .args(["--source", "host", "--liqo-api", "v0.9"])
        .args(["--listen", "127.0.0.1:0"])
        .start_announced(1)?;
    let port = bound.port(None);
    let client = ReaderClient::connect(port, Shape::C).await?;

    let mut health = HealthClient::new(client.channel());
    for service in ["", "resource_reader"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await?
            .into_inner()
            .status;
        assert_eq!(status, 1, "{service:?} is not SERVING"); // 1 = SERVING
    }

    let mut reflection = ServerReflectionClient::new(client.channel());
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(futures::stream::iter([request]))
        .await?
        .into_inner();
    let response = tokio::time::timeout(e2e::EVENTUALLY, responses.message())
        .await??
        .expect("a reflection answer");
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        anyhow::bail!("unexpected reflection answer: {response:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"resource_reader".to_string()), "{names:?}");
    assert!(
        names.contains(&"grpc.health.v1.Health".to_string()),
        "{names:?}"
    );

    // The host source offers this machine's CPUs.
    let answer = client.read("anyone").await?;
    let cpus = std::thread::available_parallelism()?.get().to_string();
    assert_eq!(answer.get("cpu"), Some(&cpus), "{answer:?}");
    assert!(answer.contains_key("memory") && answer.contains_key("ephemeral-storage"));
    Ok(())
}

#[test]
fn check_flag_validates_without_serving() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("resources.yaml"), "cpu: 1\n")?;
    let chain = dir.path().join("chain.toml");
    std::fs::write(&chain, "[source.static]\npath = \"resources.yaml\"\n")?;
    let out = Spawn::new("resource-monitor")
        .arg("--config")
        .arg(&chain)
        .arg("--check")
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
