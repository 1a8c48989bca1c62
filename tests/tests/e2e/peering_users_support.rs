//! What the end-to-end tests of the peering-user controller share: its
//! namespace and identity as deployed, and waiting on the catalog and the
//! API server from async tests.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use e2e::buying::get;
use e2e::catalog::Catalog;

/// Liqo's namespace, where the controller runs too (as deployed).
pub const LIQO: &str = "liqo";
/// The ServiceAccount of `deploy/kubernetes/peering-user-controller`.
pub const CONTROLLER_USER: &str = "system:serviceaccount:liqo:peering-user-controller";

/// Catalog calls are blocking: off the async workers.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Poll `probe` until it returns Some, within [`e2e::EVENTUALLY`].
pub async fn settle<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> Result<T> {
    let deadline = Instant::now() + e2e::EVENTUALLY;
    loop {
        if let Some(v) = probe() {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            bail!("{what}: not within {:?}", e2e::EVENTUALLY);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The kubeconfig released with contract `id` to its consumer, once there.
pub fn released(catalog: &Catalog, token: &str, id: &str) -> Option<String> {
    let r = blocking(|| get(catalog, &format!("/contracts/{id}"), Some(token)));
    (r.json["peeringState"]["state"] == "credentialsReady")
        .then(|| {
            r.json["credentials"]["v1"]["kubeconfig"]
                .as_str()
                .map(str::to_string)
        })
        .flatten()
}
