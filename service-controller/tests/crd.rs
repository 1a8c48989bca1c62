//! The ServiceCatalog CRD in `deploy/` is the one generated from the Rust
//! type (`model::crd()`), compared by meaning as
//! `controller_core::crd::compare` does (its unit tests say what it sees
//! and what it leaves out). Print it with
//! `cargo test -p service-controller --test crd -- --ignored --nocapture`.

use serde_json::Value;
use service_controller::model;

const DEPLOYED: &str = include_str!("../../deploy/kubernetes/service-controller/crd.yaml");

#[test]
fn the_deployed_crd_is_the_generated_one() {
    let generated = model::crd();
    if let Err(differences) = controller_core::crd::compare(DEPLOYED, &generated) {
        panic!(
            "deploy/kubernetes/service-controller/crd.yaml (left) differs from model::crd() (right):\n{differences}"
        );
    }
}

/// The chart's keep annotation, which the comparison leaves out: `helm
/// uninstall` must not delete every ServiceCatalog with the CRD.
#[test]
fn the_deployed_crd_is_kept_by_helm_uninstall() {
    let deployed: Value = serde_yaml_ng::from_str(DEPLOYED).expect("crd.yaml is YAML");
    assert_eq!(
        deployed["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
}

#[test]
#[ignore = "prints the CRD to regenerate deploy/kubernetes/service-controller/crd.yaml"]
fn print_the_generated_crd() {
    print!("{}", serde_yaml_ng::to_string(&model::crd()).unwrap());
}
