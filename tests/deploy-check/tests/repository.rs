//! The repository's own `deploy/`: every kustomization renders with the
//! real `kubectl kustomize` (the one `scripts/install-test-deps.sh`
//! installs, or `$KUBECTL`), every container runs one of our images, every
//! Dockerfile is a multi-stage non-root build of its binary, and the RBAC
//! names only ServiceAccounts and roles the manifests define. (The calls
//! and the flags need the tests' audit and the built binaries: the
//! `deploy-check` binary checks those.) The kustomize bases are exactly
//! the Helm chart's rendering, and `helm lint --strict` finds nothing.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;

use deploy_check::bases;
use deploy_check::checks::{self, Rendered, COMPONENTS};
use deploy_check::helm::Helm;
use deploy_check::kubectl::Kubectl;
use deploy_check::rbac::Policy;
use deploy_check::workloads;

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn render_all() -> Vec<Rendered> {
    let kubectl = Kubectl::installed_under(&deploy().join(".."));
    checks::render_all(&kubectl, &deploy().join("kubernetes")).unwrap()
}

#[test]
fn every_kustomization_renders_and_runs_our_images() {
    let rendered = render_all();
    let names: Vec<&str> = rendered.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "aggregator",
            "catalog",
            "market-autoscaler",
            "orchestrator",
            "peering-user-controller",
            "purchase-controller",
            "resource-monitor",
            "service-controller",
            "slice-controller"
        ]
    );
    assert_eq!(checks::check_images(&rendered), Vec::<String>::new());
    for r in &rendered {
        let containers = workloads::containers(&r.objects);
        assert!(!containers.is_empty(), "{}: no container", r.name);
        for c in containers {
            // Tagged by the kustomization's `images`.
            assert!(c.image.ends_with(":0.1.0"), "{}: {}", r.name, c.image);
        }
        Policy::from_objects(&r.objects).unwrap();
    }
}

#[test]
fn the_controllers_accounts_hold_rules_and_the_others_none() {
    let rendered = render_all();
    let mut policy = Policy::default();
    for r in &rendered {
        policy.extend(Policy::from_objects(&r.objects).unwrap());
    }
    let granted: Vec<(&str, usize)> = policy
        .users
        .iter()
        .map(|(u, g)| (u.as_str(), g.len()))
        .collect();
    assert!(granted.iter().all(|(u, n)| {
        let controller = u.ends_with(":resource-monitor")
            || u.ends_with(":slice-controller")
            || u.ends_with(":orchestrator")
            || u.ends_with(":purchase-controller")
            || u.ends_with(":peering-user-controller")
            || u.ends_with(":service-controller")
            || u.ends_with(":market-autoscaler");
        controller == (*n > 0)
    }));
    assert_eq!(granted.len(), 9, "{granted:?}");
}

#[test]
fn every_dockerfile_is_a_multi_stage_non_root_build_of_its_binary() {
    assert_eq!(
        checks::check_dockerfiles(&deploy().join("docker")),
        Vec::<String>::new()
    );
    assert_eq!(COMPONENTS.len(), 9);
}

#[test]
fn the_kustomize_bases_are_the_charts_rendering_and_it_lints_clean() {
    let root = deploy().join("..");
    let helm = Helm::installed_under(&root);
    let chart = root.join("charts/liqo-broker");
    let kubernetes = deploy().join("kubernetes");
    let rendered = bases::render(&helm, &chart, &kubernetes).unwrap();
    assert!(rendered.len() >= 6, "{} bases", rendered.len());
    assert_eq!(
        bases::differences(&kubernetes, &rendered).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        bases::lint(&helm, &chart, &kubernetes).unwrap(),
        Vec::<String>::new()
    );
}
