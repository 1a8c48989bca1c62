//! The CRDs in `deploy/` are the ones generated from the Rust types
//! (`model::crd()`, kube's `Purchase::crd()`; `network_policy::model::crd()`
//! for MultiClusterNetworkPolicy), compared by meaning as
//! `controller_core::crd::compare` does (its unit tests say what it sees
//! and what it leaves out).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use purchase_controller::model;
use purchase_controller::network_policy;

const DEPLOYED: &str = include_str!("../../deploy/kubernetes/purchase-controller/crd.yaml");
const DEPLOYED_MCNP: &str =
    include_str!("../../deploy/kubernetes/purchase-controller/mcnp-crd.yaml");

fn same(file: &str, deployed: &str, generated: &CustomResourceDefinition) {
    if let Err(differences) = controller_core::crd::compare(deployed, generated) {
        panic!(
            "deploy/kubernetes/purchase-controller/{file} (left) differs from the generated CRD (right):\n{differences}\n\ngenerated:\n{}",
            serde_yaml_ng::to_string(generated).unwrap_or_default()
        );
    }
}

#[test]
fn the_deployed_crd_is_the_generated_one() {
    same("crd.yaml", DEPLOYED, &model::crd());
}

#[test]
fn the_deployed_network_policy_crd_is_the_generated_one() {
    same(
        "mcnp-crd.yaml",
        DEPLOYED_MCNP,
        &network_policy::model::crd(),
    );
}

#[test]
#[ignore = "prints the generated CRDs: cargo test -p purchase-controller --test crd -- --ignored --nocapture"]
fn print_the_generated_crd() {
    println!(
        "{}",
        serde_yaml_ng::to_string(&model::crd()).unwrap_or_default()
    );
    println!("---");
    println!(
        "{}",
        serde_yaml_ng::to_string(&network_policy::model::crd()).unwrap_or_default()
    );
}
