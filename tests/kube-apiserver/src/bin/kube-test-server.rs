//! The test API server as a process, for trying a real client (kubectl,
//! helm) against it by hand: `kube-test-server KUBECONFIG` serves HTTPS on
//! a loopback port, writes a kubeconfig for it to `KUBECONFIG` (its CA,
//! and the token of the tests' own user, `kube-test-admin` in
//! `system:masters`) and serves until interrupted. HTTPS, because client-go
//! sends a kubeconfig's credentials only over TLS
//! (`staging/src/k8s.io/client-go/tools/clientcmd/client_config.go`): over
//! plain HTTP kubectl would be `system:anonymous`. The e2e tests start the
//! server in process instead.

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use kube_test_server::pod_security::Level;
use kube_test_server::KubeApiServer;

/// A Kubernetes API server for tests (built-in kinds and Liqo v1.2.0's
/// CRDs, RBAC enforced), over HTTPS on a loopback port until interrupted.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Where to write a kubeconfig for the server, authenticating as the
    /// tests' administrator (`kube-test-admin`, in `system:masters`).
    kubeconfig: PathBuf,
    /// The Pod Security Admission level (enforce, audit and warn) of
    /// namespaces without `pod-security.kubernetes.io/*` labels:
    /// privileged, baseline or restricted. A real cluster's is privileged
    /// unless its AdmissionConfiguration says otherwise.
    #[arg(long, default_value = "baseline")]
    pod_security_default: Level,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let kube = KubeApiServer::start_tls().await?;
    kube.set_pod_security_default(args.pod_security_default);
    kube.write_kubeconfig(&args.kubeconfig)?;
    println!(
        "serving {} (kubeconfig: {})",
        kube.url(),
        args.kubeconfig.display()
    );
    tokio::signal::ctrl_c().await?;
    Ok(())
}
