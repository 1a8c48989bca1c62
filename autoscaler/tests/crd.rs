//! The MarketAutoscaler CRD in `deploy/` is the one generated from the Rust
//! type (`model::crd()`, kube's `MarketAutoscaler::crd()`), compared by
//! meaning as `controller_core::crd::compare` does (its unit tests say
//! what it sees and what it leaves out).

use market_autoscaler::model;

const DEPLOYED: &str = include_str!("../../deploy/kubernetes/market-autoscaler/crd.yaml");

#[test]
fn the_deployed_crd_is_the_generated_one() {
    let generated = model::crd();
    if let Err(differences) = controller_core::crd::compare(DEPLOYED, &generated) {
        panic!(
            "deploy/kubernetes/market-autoscaler/crd.yaml (left) differs from model::crd() (right):\n{differences}\n\ngenerated:\n{}",
            serde_yaml_ng::to_string(&generated).unwrap_or_default()
        );
    }
}
