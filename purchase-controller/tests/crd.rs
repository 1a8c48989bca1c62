//! The Purchase CRD in `deploy/` is the one generated from the Rust type
//! (`model::crd()`, kube's `Purchase::crd()`), compared by meaning as
//! `controller_core::crd::compare` does (its unit tests say what it sees
//! and what it leaves out).

use purchase_controller::model;

const DEPLOYED: &str = include_str!("../../deploy/kubernetes/purchase-controller/crd.yaml");

#[test]
fn the_deployed_crd_is_the_generated_one() {
    let generated = model::crd();
    if let Err(differences) = controller_core::crd::compare(DEPLOYED, &generated) {
        panic!(
            "deploy/kubernetes/purchase-controller/crd.yaml (left) differs from model::crd() (right):\n{differences}\n\ngenerated:\n{}",
            serde_yaml::to_string(&generated).unwrap_or_default()
        );
    }
}

#[test]
#[ignore = "prints the generated CRD: cargo test -p purchase-controller --test crd -- --ignored --nocapture"]
fn print_the_generated_crd() {
    println!(
        "{}",
        serde_yaml::to_string(&model::crd()).unwrap_or_default()
    );
}
