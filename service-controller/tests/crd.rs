//! The ServiceCatalog CRD in `deploy/` is the one generated from the Rust
//! type (`model::crd()`), compared as parsed structures (so formatting and
//! key order do not matter, meaning does). Regenerate it with
//! `cargo test -p service-controller --test crd -- --ignored --nocapture`.

use serde_json::Value;
use service_controller::model;

const DEPLOYED: &str = include_str!("../../deploy/kubernetes/service-controller/crd.yaml");

#[test]
fn the_deployed_crd_is_the_generated_one() {
    let mut deployed: Value = serde_yaml::from_str(DEPLOYED).expect("crd.yaml is YAML");
    // The chart's installation metadata is not the kind's meaning; the
    // keep annotation is checked on its own: `helm uninstall` must not
    // delete every ServiceCatalog with the CRD.
    let metadata = deployed["metadata"]
        .as_object_mut()
        .expect("crd.yaml has metadata");
    let annotations = metadata.remove("annotations").unwrap_or_default();
    assert_eq!(annotations["helm.sh/resource-policy"], "keep");
    metadata.remove("labels");
    let generated = serde_json::to_value(model::crd()).expect("the CRD serialises");
    assert!(
        deployed == generated,
        "deploy/kubernetes/service-controller/crd.yaml differs from model::crd(); regenerate it"
    );
}

#[test]
#[ignore = "prints the CRD to regenerate deploy/kubernetes/service-controller/crd.yaml"]
fn print_the_generated_crd() {
    print!("{}", serde_yaml::to_string(&model::crd()).unwrap());
}
