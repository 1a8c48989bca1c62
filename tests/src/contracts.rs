//! Support for the contract tests: a Liqo v1 peering user's kubeconfig, a
//! provider registering it, a consumer buying a contract, and waiting for
//! a condition on the catalog's answers.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::buying::{post, put, reserve};
use crate::catalog::{Catalog, Resp};

/// A kubeconfig as `liqoctl generate peering-user` v1.2.0 writes it
/// (client certificate user; see catalog/tests/fixtures/kubeconfig), for a
/// provider API server at `server`. It is also the catalog's canonical
/// form, so a contract releases it unchanged.
pub fn kubeconfig(server: &str) -> String {
    LIQOCTL_KUBECONFIG.replace("https://203.0.113.7:6443", server)
}

/// The fixture [`kubeconfig`] starts from.
pub const LIQOCTL_KUBECONFIG: &str =
    include_str!("../../catalog/tests/fixtures/kubeconfig/liqoctl-v1.2.0.yaml");

/// Register `kubeconfig` (None: no v1) and `class` as the provider of
/// `token`, declared single-consumer (a Liqo peering user serves one
/// consumer cluster, so the catalog takes one kubeconfig for every
/// contract only so declared); the raw answer.
pub fn register_peering(
    c: &Catalog,
    token: &str,
    kubeconfig: Option<&str>,
    class: Option<&str>,
) -> Resp {
    let v1 = kubeconfig.map(|k| json!({ "kubeconfig": k, "singleConsumer": true }));
    register_v1(c, token, v1, class)
}

/// Register Liqo v1 with a peering user per contract (`{"v1": {}}`), as
/// the provider of `token`; the raw answer.
pub fn register_per_contract(c: &Catalog, token: &str) -> Resp {
    register_v1(c, token, Some(json!({})), None)
}

/// `PUT /provider/peering` with `v1` as given and `class`.
pub fn register_v1(c: &Catalog, token: &str, v1: Option<Value>, class: Option<&str>) -> Resp {
    let mut body = json!({ "v1": v1 });
    if let Some(class) = class {
        body["resourceSliceClass"] = json!(class);
    }
    put(c, "/provider/peering", &body, Some(token))
}

/// Reserve `plan` of `offer_id` and purchase it with `body`; the purchase's
/// raw answer.
#[track_caller]
pub fn buy(c: &Catalog, token: &str, offer_id: &str, plan: &str, body: &Value) -> Resp {
    let r = reserve(c, token, offer_id, plan, None);
    assert_eq!(r.status, 201, "reserve: {}", r.text);
    let id = r.json["id"].as_str().expect("id");
    post(
        c,
        &format!("/reservations/{id}/purchase"),
        body,
        Some(token),
    )
}

/// Ask `probe` every 100 ms until it returns Some, for at most
/// [`crate::EVENTUALLY`].
#[track_caller]
pub fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + crate::EVENTUALLY;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
