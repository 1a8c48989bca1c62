//! The Configuration controller, as Liqo v1.2.0 has it in
//! `pkg/liqo-controller-manager/networking/external-network/configuration/configuration_controller.go`
//! (CC below): a Configuration without `spec.local` gets this cluster's
//! CIDRs (CC:112-134); its `spec.remote` CIDRs are mapped through the IPAM
//! ([`super::remap`], CC:140-168) into `status.remote` — how this cluster
//! sees the peer's networks — with the `NetworkCIDRsConfigured` condition
//! (CC:178-195, `conditions.go`).

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use super::remap::{self, Cidr};
use super::{configurations, set_condition, Options};
use crate::runner::{self, Key};
use crate::Error;

/// CC:60-66 (`configurations`, their status; the IPAM's `networks` are
/// not modelled).
pub const RULES: &[crate::identity::Rule] = &[crate::identity::Rule::new(
    &["networking.liqo.io"],
    &["configurations", "configurations/status"],
    &["get", "list", "watch", "update", "patch"],
)];

/// Run the controller on `client` until the task is dropped.
pub async fn run(client: Client, options: Options) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &configurations());
    let keys = runner::keys(runner::touched(api, ""), |c| Some(Key::of(&c))).boxed();
    let (client, options) = (&client, &options);
    runner::run("configuration", vec![keys], |key| {
        reconcile(client, options, key)
    })
    .await;
}

/// The CIDRs of `spec.remote.cidr.<kind>` (or any path) as strings.
fn cidrs(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect()
}

/// CC:76-110.
async fn reconcile(client: &Client, options: &Options, key: Key) -> Result<(), Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &configurations());
    let Some(mut conf) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    // CC:87-91, 112-134: the local networks are this cluster's pod and
    // external CIDRs, written to the spec.
    if conf.data["spec"]["local"].is_null() {
        conf.data["spec"]["local"] = json!({"cidr": {
            "pod": [options.pod_cidr], "external": [options.external_cidr]}});
        conf = api
            .replace(&key.name, &PostParams::default(), &conf)
            .await?;
    }
    // What the IPAM holds already: this cluster's networks and the other
    // peers' remapped ones.
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &configurations());
    let others = all.list(&ListParams::default()).await?.items;
    let mut taken: Vec<Cidr> = [&options.pod_cidr, &options.external_cidr]
        .into_iter()
        .filter_map(|c| Cidr::parse(c))
        .collect();
    for other in others.iter().filter(|o| Key::of(o) != key) {
        for kind in ["pod", "external"] {
            let mapped = cidrs(&other.data["status"]["remote"]["cidr"][kind]);
            taken.extend(mapped.iter().filter_map(|c| Cidr::parse(c)));
        }
    }
    let mut remote = json!({"cidr": {}});
    let mut complete = true;
    for kind in ["pod", "external"] {
        let mut mapped = Vec::new();
        for cidr in cidrs(&conf.data["spec"]["remote"]["cidr"][kind]) {
            match remap::remap(&cidr, &taken) {
                Some(m) => {
                    taken.push(m);
                    mapped.push(json!(m.to_string()));
                }
                // A network the IPAM cannot give stays not ready
                // (CC:163-165: the Network's status has no CIDR yet).
                None => complete = false,
            }
        }
        remote["cidr"][kind] = Value::Array(mapped);
    }
    let old = conf.data["status"].clone();
    let mut status = if old.is_object() {
        old.clone()
    } else {
        json!({})
    };
    status["remote"] = remote;
    let (s, reason, message) = if complete {
        (
            "True",
            "NetworkCIDRsConfigured",
            "All network CIDRs are configured",
        )
    } else {
        (
            "False",
            "WaitingForNetworks",
            "Waiting for all networks to be ready",
        )
    };
    let generation = conf.metadata.generation.unwrap_or(0);
    set_condition(
        &mut status,
        "NetworkCIDRsConfigured",
        s,
        reason,
        message,
        generation,
    );
    // CC:98-106: written only when it changed.
    if status != old {
        conf.data["status"] = status;
        api.replace_status(&key.name, &PostParams::default(), &conf)
            .await?;
    }
    if complete {
        Ok(())
    } else {
        Err(Error::Waiting(format!("no free network for {}", key.name)))
    }
}
