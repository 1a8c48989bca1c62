//! The class controller as a Pod runs it: no kubeconfig at all, only the
//! in-cluster configuration — `KUBERNETES_SERVICE_HOST`/`_PORT` and the
//! ServiceAccount's files under `/var/run/secrets/kubernetes.io/
//! serviceaccount/` (`token`, `ca.crt`, `namespace`), which kube-rs'
//! `Config::infer()` falls back to.
//!
//! The binary runs under `unshare --user --map-root-user --mount` (a user
//! and a mount namespace of its own: no privilege needed, nothing seen by
//! the host) with a tmpfs over `/run` (`/var/run` links to it) holding
//! those files: the test API server's CA, a token it maps to the
//! controller's ServiceAccount, and the namespace. Each file is proven
//! used: the API server (HTTPS only) is reached through that CA, every call
//! is recorded as the ServiceAccount's, and the Lease lands in the
//! namespace the file names (`POD_NAMESPACE` is unset).

use std::path::Path;

use anyhow::{ensure, Context, Result};
use e2e::Spawn;

use crate::slice_controller_support::*;

/// `unshare` from util-linux (scripts/install-test-deps.sh installs it).
fn unshare() -> Result<&'static str> {
    ["/usr/bin/unshare", "/bin/unshare"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .context(
            "unshare (util-linux) is not installed: this test runs the controller in a \
             mount namespace of its own; run scripts/install-test-deps.sh",
        )
}

/// Whether this machine lets an unprivileged process make a user and a
/// mount namespace; if not, an error that says so and what to change,
/// rather than the controller failing to start for a reason nobody sees.
fn user_namespaces_available(unshare: &str) -> Result<()> {
    let out = std::process::Command::new(unshare)
        .args(["--user", "--map-root-user", "--mount", "true"])
        .output()
        .with_context(|| format!("running {unshare}"))?;
    ensure!(
        out.status.success(),
        "this machine does not allow unprivileged user namespaces ({unshare} --user --map-root-user \
         --mount true: {}, {}). The test runs the controller in a namespace of its own to put the \
         ServiceAccount files where a Pod has them. Allow them (sysctl kernel.unprivileged_userns_clone=1, \
         or user.max_user_namespaces > 0, or a container seccomp/AppArmor profile that permits unshare) \
         and run it again.",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// Mount a tmpfs over /run, put the ServiceAccount's files where a Pod has
/// them, and run the binary (`"$@"`).
const SET_UP: &str = r#"set -e
mount -t tmpfs -o mode=0755 tmpfs /run
sa=/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$sa"
cp "$SA_FILES/token" "$SA_FILES/ca.crt" "$SA_FILES/namespace" "$sa/"
exec "$@""#;

#[tokio::test]
async fn the_controller_runs_on_the_in_cluster_configuration() -> Result<()> {
    let unshare = unshare()?;
    user_namespaces_available(unshare)?;
    let p = Provider::start(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "220")]).await?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-1", CLASS, &[("cpu", "1")], true);

    let files = tempfile::tempdir()?;
    std::fs::write(
        files.path().join("token"),
        p.kube.token_for(CONTROLLER_USER),
    )?;
    std::fs::write(
        files.path().join("ca.crt"),
        p.kube.ca_pem().context("the test API server runs HTTPS")?,
    )?;
    std::fs::write(files.path().join("namespace"), CONTROLLER_NAMESPACE)?;
    // No kubeconfig to find: an empty home, no KUBECONFIG.
    let home = tempfile::tempdir()?;
    let (host, port) = host_and_port(&p.kube.url())?;

    let (_controller, bound) = Spawn::wrapped(
        "resource-monitor",
        &[
            unshare,
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            SET_UP,
            "sh",
        ],
    )
    .args(["--liqo-api", "v1", "--class", CLASS, "--config"])
    .arg(&p.chain)
    .args(["--http-listen", "127.0.0.1:0"])
    .env("SA_FILES", files.path())
    .env("KUBERNETES_SERVICE_HOST", &host)
    .env("KUBERNETES_SERVICE_PORT", port.to_string())
    .env("HOME", home.path())
    .env_remove("KUBECONFIG")
    .env_remove("POD_NAMESPACE")
    .env("RUST_LOG", "info,slice_controller=debug")
    .start_announced(1)?;
    ensure!(bound.port(Some("controller")) > 0);

    // A reconcile happened: the slice is decided.
    p.wait_condition("c1", "gold-1", SETTLE, |c| c["status"] == "Accepted")
        .await?;
    // The namespace file: the Lease is in the namespace it names (the
    // in-cluster default namespace; without the file, "default").
    let holder = lease_holder(&p.kube);
    ensure!(
        holder.is_some(),
        "no Lease in {CONTROLLER_NAMESPACE}, the namespace file's"
    );
    // The token file: every call the controller made was authenticated as
    // the ServiceAccount (a missing token would be `system:anonymous`, a
    // wrong one refused with `None`).
    let audit = p.kube.audit();
    ensure!(!audit.is_empty(), "no call reached the API server");
    let others: Vec<_> = audit
        .iter()
        .filter(|r| r.user.as_deref() != Some(CONTROLLER_USER))
        .map(|r| format!("{} {} as {:?}", r.method, r.path, r.user))
        .collect();
    ensure!(
        others.is_empty(),
        "calls not made as {CONTROLLER_USER}: {others:?}"
    );
    Ok(())
}

/// The host and port of an `https://HOST:PORT` URL.
fn host_and_port(url: &str) -> Result<(String, u16)> {
    let (host, port) = url
        .strip_prefix("https://")
        .and_then(|rest| rest.trim_end_matches('/').rsplit_once(':'))
        .with_context(|| format!("not an https://HOST:PORT URL: {url}"))?;
    Ok((host.to_string(), port.parse()?))
}
