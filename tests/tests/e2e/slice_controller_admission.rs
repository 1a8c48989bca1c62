//! The provider's side of issue 30's bypass, end to end: the
//! ValidatingAdmissionPolicy `deploy/kubernetes/slice-controller` ships,
//! loaded into the provider's test API server as rendered from `deploy/`
//! (`e2e::rbac::load_shipped_admission`, beside the shipped RBAC), holds a
//! consumer to the class controller:
//!
//! - as the consumer's control-plane identity (Liqo's: user `<consumerID>`,
//!   group `liqo.io` in its client certificate,
//!   `pkg/liqo-controller-manager/authentication/csr.go:96-103` of v1.2.0,
//!   with the ResourceSlice rules of Liqo's `liqo-remote-controlplane`
//!   ClusterRole bound in its tenant namespace, as the Liqo model's
//!   replicator has them), a slice of class `default` or of no class, a
//!   switch of its slice to `default` and a write of its slice's status are
//!   refused with the policy's 422; a slice of the provider's own class,
//!   and a change of its request, are accepted;
//! - the real class controller (`resource-monitor --liqo-api v1`, as its
//!   ServiceAccount) still writes the grant.
//!
//! - as the kubeconfig of a declarative peering (a Tenant with
//!   `authzPolicy: TolerateNoHandshake` gets no CSR of Liqo's, so the
//!   provider binds whatever user it chose:
//!   `authentication/tenant-controller/tenant_controller.go:161-170,
//!   199-230` of v1.2.0), a user outside group `liqo.io` with the same
//!   rules: the same refusals.
//!
//! Without the policy loaded the first refusal fails, without the policy's
//! status rule the status refusal fails, with its `matchCondition` made
//! `true` the class controller's own grant is refused, and with the
//! condition matching group `liqo.io` only (as before issue 40) the
//! declarative consumer's slice is accepted.

use std::path::Path;

use anyhow::{bail, Context, Result};
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use serde_json::json;

use crate::slice_controller_support::{auth_condition, tenant_namespace, Provider, CLASS, SETTLE};

const CONSUMER: &str = "c1";
/// The policy and its binding, as `deploy/` names them.
const POLICY: &str = "liqo-broker-tenant-resourceslices";
/// What the class controller can grant.
const INVENTORY: [(&str, &str); 3] = [("cpu", "8"), ("memory", "16Gi"), ("pods", "100")];

/// The consumer's control-plane identity on the provider: a client
/// certificate with CN `<consumerID>` and O `liqo.io` (what Liqo's CSR
/// carries), bound to the ResourceSlice rules of `liqo-remote-controlplane`
/// in its tenant namespace only.
async fn consumer_slices(p: &Provider) -> Result<Api<DynamicObject>> {
    slices_as(p, CONSUMER, &["liqo.io"]).await
}

/// The tenant namespace's slices as `user` in `groups`, bound to the
/// ResourceSlice rules of `liqo-remote-controlplane` there.
async fn slices_as(p: &Provider, user: &str, groups: &[&str]) -> Result<Api<DynamicObject>> {
    let namespace = tenant_namespace(CONSUMER);
    liqo_model::identity::grant_in(
        &p.kube,
        user,
        "liqo-remote-controlplane",
        &namespace,
        liqo_model::crd_replicator::REMOTE_RULES,
    );
    let cert = p.kube.client_cert(user, groups)?;
    let path = p.dir.path().join(format!("{user}-kubeconfig"));
    p.kube
        .write_kubeconfig_with_certificate(&path, "consumer", &cert)?;
    let client = client_from(&path).await?;
    Ok(Api::namespaced_with(
        client,
        &namespace,
        &liqo_model::consts::resource_slices(),
    ))
}

async fn client_from(path: &Path) -> Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// A slice as Liqo's replicator creates it in the tenant namespace
/// (`internal/crdReplicator/reflection/handler.go:334-351`), of `class`
/// (`None`: the field left out).
fn replica(name: &str, class: Option<&str>, cpu: &str) -> Result<DynamicObject> {
    let mut spec = json!({"consumerClusterID": CONSUMER, "providerClusterID": "provider-1",
                          "resources": {"cpu": cpu}, "csr": "Y3NyLWJ5dGVz"});
    if let Some(class) = class {
        spec["class"] = json!(class);
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": name, "namespace": tenant_namespace(CONSUMER),
            "labels": {"liqo.io/replicated": "true", "liqo.io/originID": CONSUMER,
                       "liqo.io/remote-cluster-id": CONSUMER}},
        "spec": spec,
    }))?)
}

/// The policy's refusal: 422 `Invalid`, worded by the policy dispatcher
/// with the policy's message.
fn assert_refused<T: std::fmt::Debug>(
    result: Result<T, kube::Error>,
    name: &str,
    message: &str,
) -> Result<()> {
    let status = match result {
        Err(kube::Error::Api(status)) => status,
        other => bail!("{name}: expected the policy's refusal, got {other:?}"),
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{status:?}"
    );
    assert_eq!(
        status.message,
        format!(
            "resourceslices.authentication.liqo.io \"{name}\" is forbidden: ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: {message}"
        )
    );
    Ok(())
}

fn class_refusal(class: &str) -> String {
    let mut message = format!("class {class} is granted by Liqo itself, uncapped, and is not sold on this provider: this provider sells capacity through class {CLASS}; ask through a purchase");
    if class == "unset" {
        message.push_str(&format!(" (if {CONSUMER} is a service provider this cluster buys from, list it in sliceController.admissionPolicy.serviceProviders)"));
    }
    message
}

const STATUS_REFUSAL: &str = "a consumer may not write a ResourceSlice's status on this provider (its grant is decided by the provider's class controller): this provider sells capacity through class gold; ask through a purchase";

#[tokio::test(flavor = "multi_thread")]
async fn slice_controller_admission_refuses_the_consumers_bypass() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    e2e::rbac::load_shipped_admission(&p.kube)?;
    p.tenant(CONSUMER, "Active");
    let slices = consumer_slices(&p).await?;
    let post = PostParams::default();

    // Liqo's own class, by name or by leaving the class out: refused.
    for (name, class, shown) in [
        ("free", Some("default"), "default"),
        ("unset", None, "unset"),
        ("empty", Some(""), "unset"),
    ] {
        let created = slices.create(&post, &replica(name, class, "64")?).await;
        assert_refused(created, name, &class_refusal(shown))?;
    }
    // The provider's class: accepted, and so is a change of its request
    // (the replicator keeps the replica's spec equal to the consumer's).
    let created = slices
        .create(&post, &replica("gold-1", Some(CLASS), "2")?)
        .await
        .context("a slice of the provider's class")?;
    let mut changed = created.clone();
    changed.data["spec"]["resources"]["cpu"] = json!("3");
    let changed = slices
        .replace("gold-1", &post, &changed)
        .await
        .context("a changed request")?;
    // ... but not a switch to the default class.
    let mut switched = changed.clone();
    switched.data["spec"]["class"] = json!("default");
    assert_refused(
        slices.replace("gold-1", &post, &switched).await,
        "gold-1",
        &class_refusal("default"),
    )?;

    // Liqo authenticates the slice (its remote slice controller, as the
    // provider's controller-manager: not in group liqo.io).
    let mut slice = p.get_slice(CONSUMER, "gold-1")?;
    slice["status"] = json!({"conditions": [auth_condition()]});
    p.kube.apply(crate::slice_controller_support::SLICES, slice);

    // The consumer granting itself: refused.
    let mut forged = slices.get("gold-1").await?;
    forged.data["status"] = json!({
        "conditions": [auth_condition(),
            {"type": "Resources", "status": "Accepted", "reason": "ResourcesGranted",
             "message": "granted as requested: cpu 64", "lastTransitionTime": "2026-11-20T08:00:00Z"}],
        "resources": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
    });
    assert_refused(
        slices.replace_status("gold-1", &post, &forged).await,
        "gold-1",
        STATUS_REFUSAL,
    )?;
    assert!(
        p.resources_condition(CONSUMER, "gold-1").is_none(),
        "nothing was written"
    );

    // A declarative peering's consumer, outside group liqo.io: held the same.
    let declarative = slices_as(&p, "declarative-consumer", &[]).await?;
    assert_refused(
        declarative
            .create(&post, &replica("declared", Some("default"), "64")?)
            .await,
        "declared",
        &class_refusal("default"),
    )?;
    assert_refused(
        declarative.replace_status("gold-1", &post, &forged).await,
        "gold-1",
        STATUS_REFUSAL,
    )?;
    assert!(
        p.resources_condition(CONSUMER, "gold-1").is_none(),
        "nothing was written"
    );

    // The class controller, as its ServiceAccount, writes the grant.
    let (_controller, _port) = p.controller(&[])?;
    let granted = p
        .wait_condition(CONSUMER, "gold-1", SETTLE, |c| c["status"] == "Accepted")
        .await?;
    assert_eq!(granted["reason"], "ResourcesGranted", "{granted}");
    let slice = p.get_slice(CONSUMER, "gold-1")?;
    assert_eq!(slice["status"]["resources"]["cpu"], "3", "{slice}");
    Ok(())
}

/// The policy as the chart renders it for a cluster that buys a service
/// from `CONSUMER` (`sliceController.admissionPolicy.serviceProviders`),
/// with the real Helm `scripts/install-test-deps.sh` installs.
fn policy_for_a_service_customer() -> Result<Vec<serde_json::Value>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let helm = root.join("build/bin/helm");
    let home = tempfile::tempdir()?;
    let out = std::process::Command::new(&helm)
        .args([
            "template",
            "liqo-broker",
            "charts/liqo-broker",
            "--namespace",
            "liqo",
            "--show-only",
            "templates/slice-controller/admission.yaml",
            // Required (no image is published), though no image is shown.
            "--set",
            "images.registry=registry.example.com",
            "--set",
            "sliceController.enabled=true",
            "--set",
            &format!("sliceController.class={CLASS}"),
            "--set",
            "sliceController.catalogURL=http://catalog.liqo-broker:8080",
            "--set",
            &format!("sliceController.admissionPolicy.serviceProviders={{{CONSUMER}}}"),
        ])
        .current_dir(&root)
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .with_context(|| format!("running {} (scripts/install-test-deps.sh)", helm.display()))?;
    if !out.status.success() {
        bail!("helm template: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(deploy_check::kubectl::parse(
        &root.join("charts/liqo-broker"),
        &String::from_utf8(out.stdout)?,
    )?)
}

/// A customer buying a service runs the service provider's pods through
/// that provider's Liqo peering, whose slice leaves the class unset
/// (service-controller's Purchase names none; Liqo grants it as the plan
/// asks). Listed in `serviceProviders`, that consumer may ask it; Liqo's
/// `default` class and status writes stay refused. Without the value (the
/// test above) the same slice is refused, naming the value.
#[tokio::test(flavor = "multi_thread")]
async fn a_listed_service_provider_may_ask_the_class_liqo_grants() -> Result<()> {
    let p = Provider::start(&INVENTORY).await?;
    e2e::rbac::load_admission(&p.kube, policy_for_a_service_customer()?)?;
    p.tenant(CONSUMER, "Active");
    let slices = consumer_slices(&p).await?;
    let post = PostParams::default();

    let created = slices
        .create(&post, &replica("service", None, "1")?)
        .await
        .context("the service provider's slice, class unset")?;
    assert_refused(
        slices
            .create(&post, &replica("free", Some("default"), "64")?)
            .await,
        "free",
        &class_refusal("default"),
    )?;
    let mut forged = created.clone();
    forged.data["status"] = json!({"resources": {"cpu": "64"}});
    assert_refused(
        slices.replace_status("service", &post, &forged).await,
        "service",
        STATUS_REFUSAL,
    )?;
    // Another consumer, not listed: refused.
    let other = slices_as(&p, "c2", &["liqo.io"]).await?;
    let refused = other.create(&post, &replica("other", None, "1")?).await;
    let Err(kube::Error::Api(status)) = refused else {
        bail!("an unlisted consumer's slice of class unset: {refused:?}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("(if c2 is a service provider"),
        "{status:?}"
    );
    Ok(())
}
