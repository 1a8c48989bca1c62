//! `purchaseController.secretNamespaces` (`--secret-namespaces`, issue 46):
//! the chart then grants the purchase-controller's Secret rules in a Role
//! per listed namespace and in no ClusterRole, and the controller, run
//! under exactly that rendered RBAC, keeps every Secret call and watch to
//! the listed namespaces and refuses — before any call — a Purchase
//! whose round needs Secrets elsewhere: its own namespace, or with
//! `--auto-peer` the provider's Liqo tenant namespace.

use anyhow::{ensure, Context, Result};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::chart_support::{id, template, text, EVERY_COMPONENT};
use crate::liqo_support;
use crate::purchase_controller_support::*;

/// The namespace whose Secrets the controller may not use.
const OTHER: &str = "other";

/// The chart's purchase-controller RBAC with `sets` on top of the
/// defaults that turn it on.
fn purchase_rbac(sets: &[&str]) -> Result<Vec<Value>> {
    let mut all = vec![
        "purchaseController.enabled=true",
        "purchaseController.clusterID=consumer-1",
    ];
    all.extend(sets);
    Ok(template("liqo", &all)?
        .into_iter()
        .filter(|o| {
            matches!(
                text(&o["kind"]),
                "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding"
            ) && o["metadata"]["labels"]["app.kubernetes.io/name"] == "purchase-controller"
        })
        .collect())
}

/// Does a rule of this (Cluster)Role grant anything on Secrets?
fn grants_secrets(role: &Value) -> bool {
    role["rules"].as_array().into_iter().flatten().any(|rule| {
        let has = |field: &str, want: &str| {
            rule[field]
                .as_array()
                .is_some_and(|l| l.iter().any(|v| v == want || v == "*"))
        };
        has("apiGroups", "") && has("resources", "secrets")
    })
}

#[test]
fn the_mode_renders_no_cluster_wide_secret_rule_and_a_role_per_listed_namespace() -> Result<()> {
    // Today's default: the ClusterRole holds the Secret rules.
    let default = purchase_rbac(&[])?;
    ensure!(
        default
            .iter()
            .any(|o| o["kind"] == "ClusterRole" && grants_secrets(o)),
        "the default lost its cluster-wide Secret rule"
    );
    ensure!(!default
        .iter()
        .any(|o| o["metadata"]["name"] == "purchase-controller-secrets"));

    for sets in [
        &["purchaseController.secretNamespaces={team,liqo-tenant-p1}"][..],
        &[
            "purchaseController.secretNamespaces={team,liqo-tenant-p1}",
            "purchaseController.liqoApi=v0",
        ],
        &[
            "purchaseController.secretNamespaces={team,liqo-tenant-p1}",
            "purchaseController.autoPeer=false",
        ],
    ] {
        let objects = purchase_rbac(sets)?;
        for o in objects.iter().filter(|o| o["kind"] == "ClusterRole") {
            ensure!(
                !grants_secrets(o),
                "{sets:?}: {} grants Secrets cluster-wide",
                id(o)
            );
        }
        // Every Role on Secrets is in a listed namespace, or in Liqo's
        // (its narrow Roles: authentication-keys by name, v0's tokens).
        for o in objects
            .iter()
            .filter(|o| o["kind"] == "Role" && grants_secrets(o))
        {
            let ns = text(&o["metadata"]["namespace"]);
            ensure!(
                ["team", "liqo-tenant-p1", "liqo"].contains(&ns),
                "{sets:?}: {}",
                id(o)
            );
        }
        for ns in ["team", "liqo-tenant-p1"] {
            for kind in ["Role", "RoleBinding"] {
                ensure!(
                    objects.iter().any(|o| o["kind"] == kind
                        && o["metadata"]["name"] == "purchase-controller-secrets"
                        && o["metadata"]["namespace"] == ns),
                    "{sets:?}: no {kind} purchase-controller-secrets in {ns}"
                );
            }
        }
    }

    // The Deployment passes the list on; the schema refuses a name that
    // is not a namespace's.
    let mut sets = EVERY_COMPONENT.to_vec();
    sets.push("purchaseController.secretNamespaces={team,liqo-tenant-p1}");
    let objects = template("liqo", &sets)?;
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "purchase-controller")
        .context("no purchase-controller Deployment")?;
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    ensure!(
        args.as_array().is_some_and(|a| a
            .iter()
            .any(|v| v == "--secret-namespaces=team,liqo-tenant-p1")),
        "{args}"
    );
    let said = crate::chart_support::template_refused(&[
        "purchaseController.enabled=true",
        "purchaseController.clusterID=c",
        "purchaseController.secretNamespaces={Team_1}",
    ])?;
    ensure!(said.contains("secretNamespaces"), "{said}");
    // And `helm lint --strict` passes with the mode.
    let (passed, said) = crate::chart_support::lint(&sets)?;
    ensure!(
        passed && !said.contains("[WARNING]"),
        "helm lint --strict:\n{said}"
    );
    Ok(())
}

/// The consumer cluster of `purchase_controller_support`, but under the
/// chart's RBAC rendered with `purchaseController.secretNamespaces={team}`
/// (not `deploy/`'s, which is the chart's default rendering), with the
/// catalog token in [`TEAM`] and in [`OTHER`].
struct World {
    kube: KubeApiServer,
    _dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

impl World {
    fn start(rt: &tokio::runtime::Runtime, token: &str) -> Result<Self> {
        let kube = rt.block_on(KubeApiServer::start())?;
        kube.register_crd_file(&purchase_crd())?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        kube.write_kubeconfig_as(&kubeconfig, PURCHASE_USER)?;
        let rbac = purchase_rbac(&[&format!("purchaseController.secretNamespaces={{{TEAM}}}")])?;
        ensure!(kube.load_rbac(&rbac) > 4, "too little RBAC rendered");
        for ns in ["liqo", TEAM, OTHER] {
            liqo_support::namespace(&kube, ns, json!({}));
            use base64::Engine;
            kube.apply(
                SECRETS,
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "catalog-token", "namespace": ns},
                       "data": {"token": base64::engine::general_purpose::STANDARD.encode(token)}}),
            );
        }
        Ok(Self {
            kube,
            _dir: dir,
            kubeconfig,
        })
    }

    fn purchase(&self, namespace: &str, name: &str, market: &Market, contract: &Value) {
        self.kube
            .create(
                PURCHASES,
                json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
                       "metadata": {"name": name, "namespace": namespace},
                       "spec": {"catalogURL": market.url(), "contractID": contract["id"],
                                "credentialsSecretRef": {"name": "catalog-token", "key": "token"},
                                "namespaces": [namespace]}}),
            )
            .expect("Purchase created");
    }

    fn wait(&self, namespace: &str, name: &str, check: impl Fn(&Value) -> bool) -> Result<Value> {
        Ok(e2e::contracts::wait_for(
            &format!("Purchase {namespace}/{name}"),
            || {
                self.kube
                    .get(PURCHASES, Some(namespace), name)
                    .filter(|p| check(p))
            },
        ))
    }

    /// The controller's requests on Secrets, and any it was refused.
    fn secret_calls(&self) -> (Vec<kube_test_server::ResourceAttributes>, Vec<String>) {
        let mine: Vec<_> = self
            .kube
            .audit()
            .into_iter()
            .filter(|r| r.user.as_deref() == Some(PURCHASE_USER))
            .collect();
        let refused = mine
            .iter()
            .filter(|r| r.code == 403)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        let secrets = mine
            .into_iter()
            .filter_map(|r| r.resource)
            .filter(|a| a.resource == "secrets")
            .collect();
        (secrets, refused)
    }
}

/// The refusal's `Ready` condition, and the Warning Event with its words.
fn refused_for(world: &World, namespace: &str, name: &str, outside: &str) -> Result<()> {
    let failed = world.wait(namespace, name, |p| {
        condition(p, "Ready")["reason"] == "SecretNamespaceNotListed"
    })?;
    ensure!(failed["status"]["phase"] == "Failed", "{failed:#}");
    let message = text(&condition(&failed, "Ready")["message"]).to_string();
    ensure!(
        message.contains(&format!("namespace {outside}"))
            && message.contains("purchaseController.secretNamespaces")
            && message.contains("--secret-namespaces"),
        "{message}"
    );
    wait_until(&format!("a Warning Event on {namespace}/{name}"), || {
        world
            .kube
            .objects(("events.k8s.io", "events"))
            .iter()
            .any(|e| {
                e["regarding"]["name"] == name
                    && e["type"] == "Warning"
                    && e["reason"] == "SecretNamespaceNotListed"
                    && text(&e["note"]).contains(outside)
            })
    });
    Ok(())
}

#[test]
fn under_the_rendered_rbac_the_controller_uses_listed_namespaces_and_refuses_the_others(
) -> Result<()> {
    let rt = runtime();
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let body = json!({"consumerClusterID": CONSUMER_ID});
    let (mine, theirs) = (
        market.buy(&alice, "small", body.clone()),
        market.buy(&alice, "small", body),
    );
    let world = World::start(&rt, &alice)?;

    // A person peers (--auto-peer=false): the Purchase's own namespace
    // only.
    let log = world._dir.path().join("controller.log");
    let controller = controller_as(&world.kubeconfig, "v1", CONSUMER_ID)
        .args(["--secret-namespaces", TEAM])
        .stderr_to(std::fs::File::create(&log)?)
        .start_announced(1)?;
    world.purchase(TEAM, "mine", &market, &mine);
    world.purchase(OTHER, "theirs", &market, &theirs);

    // In the listed namespace it works: the catalog token is read, the
    // peering kubeconfig Secret written beside the Purchase.
    let peering = world.wait(TEAM, "mine", |p| {
        p["status"]["phase"] == "Peering" && !p["status"]["peeringCommand"].is_null()
    })?;
    let kept = text(&peering["status"]["kubeconfigSecret"]).to_string();
    ensure!(
        world.kube.get(SECRETS, Some(TEAM), &kept).is_some(),
        "no {kept}"
    );
    // Outside it, refused with the namespace and the value to set.
    refused_for(&world, OTHER, "theirs", OTHER)?;

    // Every Secret call named a listed namespace (binding copies'
    // watches included), none was refused, and none reached `other`.
    let (secrets, refused) = world.secret_calls();
    ensure!(refused.is_empty(), "refused: {refused:#?}");
    ensure!(
        secrets.iter().any(|a| a.verb == "watch"),
        "no Secret watch: {secrets:#?}"
    );
    ensure!(
        secrets.iter().all(|a| a.namespace.as_deref() == Some(TEAM)),
        "a Secret call outside {TEAM}: {secrets:#?}"
    );
    drop(controller);

    // With --auto-peer the peering needs Liqo's tenant namespace of the
    // provider, which is not listed: refused before any call there (and
    // before the provider is reached).
    let tenant = format!("liqo-tenant-{PROVIDER_ID}");
    let log = world._dir.path().join("controller-auto-peer.log");
    let _controller = controller_as(&world.kubeconfig, "v1", CONSUMER_ID)
        .env("PURCHASE_CONTROLLER_AUTO_PEER", "true")
        .env("PURCHASE_CONTROLLER_SECRET_NAMESPACES", TEAM)
        .stderr_to(std::fs::File::create(&log)?)
        .start_announced(1)?;
    refused_for(&world, TEAM, "mine", &tenant)?;
    let (secrets, refused) = world.secret_calls();
    ensure!(refused.is_empty(), "refused: {refused:#?}");
    ensure!(
        secrets.iter().all(|a| a.namespace.as_deref() == Some(TEAM)),
        "a Secret call outside {TEAM}: {secrets:#?}"
    );
    ensure!(
        world
            .kube
            .get(liqo_support::NAMESPACES, None, &tenant)
            .is_none(),
        "the tenant namespace was made: the peering went on"
    );
    let said = std::fs::read_to_string(&log)?;
    ensure!(
        said.contains("Secrets used in these namespaces") && said.contains(TEAM),
        "{said}"
    );
    Ok(())
}

/// `--auto-peer` under the mode's RBAC, the tenant namespace listed (made
/// beforehand as `docs/deploying.md` says, so the chart's Role can be
/// installed in it): the handshake (signed nonce written and watched in
/// `liqo-tenant-<provider>`, Liqo's key read in `liqo`) reaches Ready as
/// `purchase_controller_auto_peer`'s first scenario does under the
/// cluster-wide rule, with no call refused. The world is that scenario's,
/// networking off.
#[test]
fn auto_peering_works_under_the_rendered_rbac_with_the_tenant_namespace_listed() -> Result<()> {
    let rt = runtime();
    let market = Market::open(&[]);
    let alice = market.consumer("alice");
    let tls = || rt.block_on(KubeApiServer::start_tls());
    let consumer = Consumer::start_on(tls()?, &alice)?;
    cluster_id_configmap(&consumer.kube, CONSUMER_ID);
    let provider = Provider::start_on(tls()?, &market.url())?;
    offloadable_namespace(&consumer.kube, "apps");
    consumer.kube.register_liqo_networking_crds()?;
    provider.kube.register_liqo_networking_crds()?;

    // The tenant namespace as Liqo makes it, then the chart's RBAC with
    // the mode in place of deploy/'s (same names: the ClusterRole loses
    // its Secret rule).
    let tenant = liqo_support::tenant_namespace(PROVIDER_ID);
    let mut labels = json!({"liqo.io/tenant-namespace": "true",
                            "liqo.io/remote-cluster-id": PROVIDER_ID});
    for mode in ["enforce", "audit", "warn"] {
        labels[format!("pod-security.kubernetes.io/{mode}")] = json!("privileged");
    }
    liqo_support::namespace(&consumer.kube, &tenant, labels);
    let rbac = purchase_rbac(&[&format!(
        "purchaseController.secretNamespaces={{{TEAM},{tenant}}}"
    )])?;
    consumer.kube.load_rbac(&rbac);
    let cluster_role = consumer
        .kube
        .get(
            ("rbac.authorization.k8s.io", "clusterroles"),
            None,
            "liqo-broker-purchase-controller",
        )
        .context("no ClusterRole")?;
    ensure!(!grants_secrets(&cluster_role), "{cluster_role:#}");

    // The provider sells with a peering user per contract, and runs Liqo.
    let r = e2e::contracts::register_v1(
        &market.catalog,
        &market.provider_token,
        Some(json!({})),
        Some(CLASS),
    );
    ensure!(r.status == 200, "{}", r.text);
    let _peering_users = liqo_support::start_peering_user_controller(
        &provider.kube,
        provider._dir.path(),
        &market.url(),
    )?;
    let (c, p) = (&consumer.kube, &provider.kube);
    let _liqo = rt.block_on(async {
        let provider_liqo = liqo_model::Provider::start(p, liqo_model::ProviderConfig::default())
            .await?
            .with_authentication(p)
            .await?;
        let consumer_liqo = liqo_model::Consumer::start_as(c, CONSUMER_ID)
            .await?
            .with_authentication(c)
            .await?
            .with_identity_creator_only(c)
            .await?;
        let replicator = liqo_model::Replicator::start(c, CONSUMER_ID, p, PROVIDER_ID).await?;
        let offloading = liqo_support::Offloading::start(c, CONSUMER_ID, p, PROVIDER_ID).await?;
        anyhow::Ok((provider_liqo, consumer_liqo, replicator, offloading))
    })?;

    let log = consumer._dir.path().join("controller.log");
    let _controller = controller_as(&consumer.kubeconfig, "v1", CONSUMER_ID)
        .env("PURCHASE_CONTROLLER_AUTO_PEER", "true")
        .args(["--secret-namespaces", &format!("{TEAM},{tenant}")])
        .stderr_to(std::fs::File::create(&log)?)
        .start_announced(1)?;
    consumer.purchase(
        "auto",
        &market.url(),
        json!({"offerID": OFFER, "planID": "small", "namespaces": ["apps"], "networking": false}),
    );
    let ready = consumer.wait_phase("auto", "Ready")?;
    ensure!(ready["status"]["peeringCommand"].is_null(), "{ready:#}");

    // The signed nonce was written in the tenant namespace, and every
    // Secret call named a listed namespace or Liqo's key by name.
    let mine: Vec<_> = consumer
        .kube
        .audit()
        .into_iter()
        .filter(|r| r.user.as_deref() == Some(PURCHASE_USER))
        .collect();
    let refused: Vec<_> = mine.iter().filter(|r| r.code == 403).collect();
    ensure!(refused.is_empty(), "refused: {refused:#?}");
    let secrets: Vec<_> = mine
        .into_iter()
        .filter_map(|r| r.resource)
        .filter(|a| a.resource == "secrets")
        .collect();
    ensure!(
        secrets
            .iter()
            .any(|a| a.verb == "create" && a.namespace.as_deref() == Some(tenant.as_str())),
        "no signed nonce written in {tenant}: {secrets:#?}"
    );
    ensure!(
        secrets
            .iter()
            .any(|a| a.verb == "watch" && a.namespace.as_deref() == Some(tenant.as_str())),
        "no Secret watch in {tenant}: {secrets:#?}"
    );
    for a in &secrets {
        let listed = [TEAM, tenant.as_str()].contains(&a.namespace.as_deref().unwrap_or(""));
        let key = a.namespace.as_deref() == Some("liqo")
            && a.name.as_deref() == Some("authentication-keys")
            && a.verb == "get";
        ensure!(listed || key, "a Secret call outside the list: {a:?}");
    }
    Ok(())
}
