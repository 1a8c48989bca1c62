//! What the end-to-end tests of the peering-user controller share: its
//! namespace and identity as deployed, and waiting on the catalog and the
//! API server from async tests, and the catalog they buy in.

use std::time::{Duration, Instant};

use std::path::Path;

use anyhow::{bail, Result};
use e2e::buying::{self, admin, consumer, get, publish};
use e2e::catalog::{Backend, Catalog, Env};
use e2e::contracts::{buy, register_per_contract};
use serde_json::json;

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

/// The catalog of these tests (blocking: call it through [`blocking`]):
/// provider 1 sells Liqo v1 with a peering user per contract, alice buys
/// for cluster c1 and bob for c2. Its environment, the catalog, alice's
/// and bob's tokens, alice's and bob's contracts.
pub fn two_buyers() -> (Env, Catalog, String, String, String, String) {
    let env = Env::new(Backend::Embedded);
    let catalog = buying::start(&env, &[]);
    let seller = publish(&catalog, 1, "shop");
    let r = register_per_contract(&catalog, &seller);
    assert_eq!(r.status, 200, "{}", r.text);
    let admin = admin(&catalog);
    let alice = consumer(&catalog, &admin, "alice");
    let bob = consumer(&catalog, &admin, "bob");
    let bought = |token: &str, cluster: &str| {
        let r = buy(
            &catalog,
            token,
            "shop",
            "small",
            &json!({"consumerClusterID": cluster}),
        );
        assert_eq!(r.status, 201, "{}", r.text);
        r.json["id"].as_str().unwrap().to_string()
    };
    let alices = bought(&alice, "c1");
    let bobs = bought(&bob, "c2");
    (env, catalog, alice, bob, alices, bobs)
}

/// Write `text` to `path`, readable by its owner only (a credentials file).
pub fn write_private(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}
