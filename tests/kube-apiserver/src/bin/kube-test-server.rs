//! The test API server as a process, for trying a real client (kubectl,
//! helm) against it by hand: `kube-test-server KUBECONFIG` serves plain
//! HTTP on a loopback port, writes a kubeconfig pointing at it to
//! `KUBECONFIG` and serves until interrupted. The e2e tests start the
//! server in process instead.

use std::path::PathBuf;

use anyhow::{Context, Result};
use kube_test_server::KubeApiServer;

#[tokio::main]
async fn main() -> Result<()> {
    let path: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .context("usage: kube-test-server KUBECONFIG")?;
    let kube = KubeApiServer::start().await?;
    kube.write_kubeconfig(&path)?;
    println!("serving {} (kubeconfig: {})", kube.url(), path.display());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
