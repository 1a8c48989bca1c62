//! Every controller runs under the RBAC `deploy/kubernetes` ships for it,
//! enforced by the test API server on each request: a permission taken
//! away is refused with the API server's 403 where the call is made, and
//! the controller says so in its log instead of writing anything.

use std::time::Instant;

use anyhow::{ensure, Result};
use serde_json::json;

use crate::purchase_controller_support as purchase;
use crate::slice_controller_support::*;

#[tokio::test]
async fn a_permission_taken_from_the_shipped_rbac_is_refused_where_the_call_is_made() -> Result<()>
{
    let p = Provider::start(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "220")]).await?;
    // The class controller decides a slice by replacing its status.
    e2e::rbac::load_shipped_without(
        &p.kube,
        "liqo-broker-slice-controller",
        "authentication.liqo.io",
        "resourceslices/status",
        "update",
    )?;
    p.tenant("c1", "Active");
    p.slice("c1", "gold-1", CLASS, &[("cpu", "1")], true);
    let log = p.dir.path().join("controller.log");
    let (_controller, _) = p
        .controller_spawn("250ms", &[])
        .stderr_to(std::fs::File::create(&log)?)
        .start_announced(1)?;

    // The write is refused, as the controller's user, with the real status.
    let deadline = Instant::now() + SETTLE;
    let refused = loop {
        let refused = p.kube.audit().into_iter().find(|r| {
            r.code == 403
                && r.resource.as_ref().is_some_and(|a| {
                    a.verb == "update" && a.rbac_resource() == "resourceslices/status"
                })
        });
        if let Some(r) = refused {
            break r;
        }
        ensure!(
            Instant::now() < deadline,
            "no refused status write within {SETTLE:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    ensure!(
        refused.user.as_deref() == Some(CONTROLLER_USER),
        "{refused:?}"
    );
    // The controller's log names what was refused, in the server's words.
    let log_path = log.clone();
    let text = tokio::task::spawn_blocking(move || {
        e2e::wait_for_log(&log_path, "cannot update resource", SETTLE)
    })
    .await?;
    ensure!(
        text.contains("forbidden") && text.contains("resourceslices/status"),
        "{text}"
    );
    // Nothing was decided.
    ensure!(p.resources_condition("c1", "gold-1").is_none());
    Ok(())
}

/// The purchase-controller's clean-up as its shipped RBAC without `delete`
/// on Secrets: the Liqo v0.x token Secret it made cannot be deleted, and
/// rather than passing over the 403 it logs it and keeps the Purchase's
/// finalizer (retrying), so nothing is left behind unnoticed.
#[test]
fn a_clean_up_the_rbac_refuses_is_logged_and_keeps_the_finalizer() -> Result<()> {
    let rt = purchase::runtime();
    let market = purchase::Market::open(&[]);
    let alice = market.consumer("alice");
    let contract = market.buy(
        &alice,
        "small",
        json!({"consumerClusterID": purchase::CONSUMER_ID}),
    );
    let consumer = purchase::Consumer::start(&rt, "v0", &alice)?;
    e2e::rbac::load_shipped_without(
        &consumer.kube,
        "liqo-broker-purchase-controller",
        "",
        "secrets",
        "delete",
    )?;
    let log = consumer._dir.path().join("controller.log");
    let _controller = consumer
        .controller_spawn("v0")
        .stderr_to(std::fs::File::create(&log)?)
        .start_announced(1)?;
    consumer.purchase(
        "old",
        &market.url(),
        json!({"contractID": contract["id"], "namespaces": ["apps"]}),
    );
    consumer.wait_phase("old", "Peering")?;
    let token = format!("remote-token-{}", purchase::PROVIDER_ID);
    ensure!(consumer
        .kube
        .get(purchase::SECRETS, Some("liqo"), &token)
        .is_some());

    consumer
        .kube
        .delete_object(purchase::PURCHASES, Some(purchase::TEAM), "old")?;
    let text = e2e::wait_for_log(&log, "cannot delete resource", SETTLE);
    ensure!(
        text.contains("forbidden") && text.contains(&token),
        "the refused delete is not named:\n{text}"
    );
    // Refused, so not done: the Secret stays and so does the finalizer.
    let audit = consumer.kube.audit();
    ensure!(
        audit.iter().any(|r| r.code == 403
            && r.resource.as_ref().is_some_and(|a| a.verb == "delete"
                && a.resource == "secrets"
                && a.name.as_deref() == Some(token.as_str()))),
        "no refused delete of {token}"
    );
    ensure!(consumer
        .kube
        .get(purchase::SECRETS, Some("liqo"), &token)
        .is_some());
    let held = consumer.get_purchase("old");
    ensure!(
        held.as_ref().is_some_and(|p| p["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())),
        "the Purchase went without its clean-up: {held:?}"
    );
    Ok(())
}

/// The market-autoscaler's ServiceAccount, as `deploy/kubernetes/market-autoscaler`
/// deploys it.
const AUTOSCALER_USER: &str = "system:serviceaccount:liqo:market-autoscaler";

/// One call over HTTP, as `token`'s user: its status and body (a watch's
/// body is left unread: its headers answer).
async fn call(
    kube: &kube_test_server::KubeApiServer,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<(reqwest::StatusCode, String)> {
    let client = e2e::http::async_client(std::time::Duration::from_secs(10));
    let content_type = if method == reqwest::Method::PATCH {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let mut request = client
        .request(method, format!("{}{path}", kube.url()))
        .bearer_auth(token)
        .header("content-type", content_type);
    if let Some(body) = body {
        request = request.body(body.to_string());
    }
    let response = request.send().await?;
    let status = response.status();
    if path.contains("watch=true") {
        return Ok((status, String::new()));
    }
    Ok((status, response.text().await?))
}

/// The market-autoscaler's shipped RBAC, call by call, as its
/// ServiceAccount against the test API server (RBAC enforced as a real
/// one does): each verb of each shipped rule is allowed — and works (2xx)
/// — and the neighbouring calls it must not make are refused with 403:
/// the catalog token Secret is readable in `liqo` only (not in a served
/// namespace, never listed), pods are never created or changed (only
/// deleted and evicted), Purchases never changed (what a Purchase buys is
/// fixed when made), MarketAutoscalers' specs never written, nodes only
/// read and cordoned, namespaces and PodDisruptionBudgets only read, the Lease only in its
/// own namespace, nothing of Liqo's.
///
/// These calls are the test's, not the controller's: they are cleared
/// from the audit at the end, so `deploy-check`'s "every permission used"
/// still holds the end-to-end tests' runs of the controller itself.
#[tokio::test]
async fn the_market_autoscalers_account_may_make_its_calls_and_no_other() -> Result<()> {
    use reqwest::Method;
    let kube = kube_test_server::KubeApiServer::start().await?;
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    kube.register_crd_file(&deploy.join("purchase-controller/crd.yaml"))?;
    kube.register_crd_file(&deploy.join("market-autoscaler/crd.yaml"))?;
    e2e::rbac::load_shipped(&kube)?;
    let admin = kube.admin_token().to_string();
    let autoscaler = kube.token_for(AUTOSCALER_USER);

    // The world, made by the administrator.
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "team-a"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    };
    let made: Vec<(&str, serde_json::Value)> = vec![
        ("/api/v1/namespaces", json!({"metadata": {"name": "liqo"}})),
        (
            "/api/v1/namespaces",
            json!({"metadata": {"name": "team-a"}}),
        ),
        ("/api/v1/namespaces/team-a/pods", pod("waiting")),
        ("/api/v1/namespaces/team-a/pods", pod("on-bought-node")),
        ("/api/v1/namespaces/team-a/pods", pod("running")),
        (
            "/api/v1/nodes",
            json!({"metadata": {"name": "liqo-provider-a",
                                "labels": {"liqo.io/remote-cluster-id": "provider-a"}}}),
        ),
        (
            "/api/v1/namespaces/liqo/secrets",
            json!({"metadata": {"name": "catalog-token"}, "stringData": {"token": "t"}}),
        ),
        (
            "/api/v1/namespaces/team-a/secrets",
            json!({"metadata": {"name": "catalog-token"}, "stringData": {"token": "t"}}),
        ),
        (
            "/apis/broker.liqo-broker.io/v1alpha1/namespaces/liqo/marketautoscalers",
            json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "MarketAutoscaler",
                   "metadata": {"name": "team-a", "namespace": "liqo"},
                   "spec": {"catalogURL": "http://catalog.liqo-broker:8080",
                            "credentialsSecretRef": {"name": "catalog-token", "key": "token"},
                            "pods": {"namespaces": ["team-a"]},
                            "limits": {"currency": "EUR", "maxSpendPerHour": "2.50"}}}),
        ),
    ];
    for (path, object) in &made {
        let (status, body) = call(&kube, &admin, Method::POST, path, Some(object)).await?;
        ensure!(status.is_success(), "setting up {path}: {status} {body}");
    }
    let purchase = |name: &str| {
        json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
               "metadata": {"name": name, "namespace": "liqo",
                            "labels": {"broker.liqo-broker.io/market-autoscaler": "team-a"}},
               "spec": {"offerID": "offer-a", "planID": "small",
                        "catalogURL": "http://catalog.liqo-broker:8080",
                        "credentialsSecretRef": {"name": "catalog-token", "key": "token"},
                        "namespaces": ["team-a"]}})
    };
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "market-autoscaler", "namespace": "liqo"},
                       "spec": {"holderIdentity": "a"}});
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                       "metadata": {"name": "waiting.1", "namespace": "team-a"},
                       "eventTime": "2026-12-02T13:00:00.000000Z",
                       "reportingController": "market-autoscaler",
                       "reportingInstance": "market-autoscaler-0",
                       "action": "ScaleUp", "reason": "TriggeredScaleUp", "type": "Normal",
                       "note": "bought small of offer-a",
                       "regarding": {"apiVersion": "v1", "kind": "Pod",
                                     "namespace": "team-a", "name": "waiting"}});
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                          "metadata": {"name": "on-bought-node", "namespace": "team-a"}});
    let autoscalers = "/apis/broker.liqo-broker.io/v1alpha1/namespaces/liqo/marketautoscalers";
    let purchases = "/apis/broker.liqo-broker.io/v1alpha1/namespaces/liqo/purchases";
    let leases = "/apis/coordination.k8s.io/v1/namespaces/liqo/leases";

    // Allowed, each rule's every verb, in an order where each works.
    let (_, current) = call(
        &kube,
        &admin,
        Method::GET,
        &format!("{autoscalers}/team-a"),
        None,
    )
    .await?;
    let mut status_update: serde_json::Value = serde_json::from_str(&current)?;
    status_update["status"] = json!({"purchasesMade": 1});
    let mut lease_update = lease.clone();
    lease_update["spec"]["holderIdentity"] = json!("b");
    let allowed: Vec<(Method, String, Option<serde_json::Value>)> = vec![
        (Method::GET, "/api/v1/pods".into(), None),
        (Method::GET, "/api/v1/pods?watch=true&timeoutSeconds=1".into(), None),
        (Method::GET, "/api/v1/nodes".into(), None),
        (Method::GET, "/api/v1/nodes?watch=true&timeoutSeconds=1".into(), None),
        // A node it gives back is cordoned first (and uncordoned if the
        // drain is given up).
        (
            Method::PATCH,
            "/api/v1/nodes/liqo-provider-a".into(),
            Some(json!({"spec": {"unschedulable": true}})),
        ),
        (Method::GET, "/api/v1/namespaces".into(), None),
        (Method::GET, "/api/v1/namespaces?watch=true&timeoutSeconds=1".into(), None),
        (Method::GET, "/apis/policy/v1/poddisruptionbudgets".into(), None),
        (
            Method::GET,
            "/apis/policy/v1/poddisruptionbudgets?watch=true&timeoutSeconds=1".into(),
            None,
        ),
        (
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/team-a/events".into(),
            Some(event),
        ),
        (
            Method::GET,
            "/apis/broker.liqo-broker.io/v1alpha1/marketautoscalers".into(),
            None,
        ),
        (
            Method::GET,
            "/apis/broker.liqo-broker.io/v1alpha1/marketautoscalers?watch=true&timeoutSeconds=1"
                .into(),
            None,
        ),
        (
            Method::PUT,
            format!("{autoscalers}/team-a/status"),
            Some(status_update),
        ),
        (Method::POST, purchases.into(), Some(purchase("team-a-1"))),
        (
            Method::GET,
            "/apis/broker.liqo-broker.io/v1alpha1/purchases?labelSelector=broker.liqo-broker.io%2Fmarket-autoscaler%3Dteam-a".into(),
            None,
        ),
        (
            Method::GET,
            "/apis/broker.liqo-broker.io/v1alpha1/purchases?watch=true&timeoutSeconds=1".into(),
            None,
        ),
        (Method::DELETE, format!("{purchases}/team-a-1"), None),
        (
            Method::GET,
            "/api/v1/namespaces/liqo/secrets/catalog-token".into(),
            None,
        ),
        (Method::POST, leases.into(), Some(lease.clone())),
        (Method::GET, format!("{leases}/market-autoscaler"), None),
        (Method::GET, leases.into(), None),
        (
            Method::GET,
            format!("{leases}?watch=true&timeoutSeconds=1"),
            None,
        ),
        (
            Method::PUT,
            format!("{leases}/market-autoscaler"),
            Some(lease_update),
        ),
        (
            Method::POST,
            "/api/v1/namespaces/team-a/pods/on-bought-node/eviction".into(),
            Some(eviction),
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/team-a/pods/waiting".into(),
            None,
        ),
    ];
    for (method, path, body) in &allowed {
        let (status, text) = call(&kube, &autoscaler, method.clone(), path, body.as_ref()).await?;
        ensure!(
            status.is_success(),
            "{method} {path} as the market-autoscaler: {status} {text}"
        );
    }

    // Refused: what it must not do, next to what it may.
    let mut lease_elsewhere = lease.clone();
    lease_elsewhere["metadata"]["namespace"] = json!("team-a");
    let refused: Vec<(Method, String, Option<serde_json::Value>)> = vec![
        // A repeat is a new Event after the 5-minute dedup, never a patch.
        (
            Method::PATCH,
            "/apis/events.k8s.io/v1/namespaces/team-a/events/waiting.1".into(),
            Some(
                json!({"series": {"count": 2, "lastObservedTime": "2026-12-02T13:05:00.000000Z"}}),
            ),
        ),
        // Its token is read beside the MarketAutoscaler, in `liqo`, by name.
        (
            Method::GET,
            "/api/v1/namespaces/team-a/secrets/catalog-token".into(),
            None,
        ),
        (Method::GET, "/api/v1/namespaces/liqo/secrets".into(), None),
        (Method::GET, "/api/v1/secrets".into(), None),
        (
            Method::POST,
            "/api/v1/namespaces/liqo/secrets".into(),
            Some(json!({"metadata": {"name": "x"}})),
        ),
        // Pods: deleted and evicted, never made or changed.
        (
            Method::POST,
            "/api/v1/namespaces/team-a/pods".into(),
            Some(pod("mine")),
        ),
        (
            Method::PUT,
            "/api/v1/namespaces/team-a/pods/running".into(),
            Some(pod("running")),
        ),
        (
            Method::PATCH,
            "/api/v1/namespaces/team-a/pods/running".into(),
            Some(json!({"metadata": {"labels": {"x": "y"}}})),
        ),
        (
            Method::PATCH,
            "/api/v1/namespaces/team-a/pods/running/status".into(),
            Some(json!({"status": {"phase": "Failed"}})),
        ),
        // Purchases: made and deleted, never changed.
        (
            Method::PUT,
            format!("{purchases}/team-a-2"),
            Some(purchase("team-a-2")),
        ),
        (
            Method::PATCH,
            format!("{purchases}/team-a-2"),
            Some(json!({"spec": {"planID": "large"}})),
        ),
        (
            Method::PATCH,
            format!("{purchases}/team-a-2/status"),
            Some(json!({"status": {"phase": "Ready"}})),
        ),
        // MarketAutoscalers: the intent is the operator's.
        (
            Method::POST,
            autoscalers.into(),
            Some(json!({"metadata": {"name": "other"}})),
        ),
        (
            Method::PATCH,
            format!("{autoscalers}/team-a"),
            Some(json!({"spec": {"limits": {"maxSpendPerHour": "1000"}}})),
        ),
        (Method::DELETE, format!("{autoscalers}/team-a"), None),
        // Nodes: cordoned, never deleted; namespaces: read only.
        (Method::DELETE, "/api/v1/nodes/liqo-provider-a".into(), None),
        (
            Method::PATCH,
            "/api/v1/namespaces/team-a".into(),
            Some(json!({"metadata": {"labels": {"liqo.io/scheduling-enabled": "true"}}})),
        ),
        // PodDisruptionBudgets: read only.
        (
            Method::DELETE,
            "/apis/policy/v1/namespaces/team-a/poddisruptionbudgets/any".into(),
            None,
        ),
        // The Lease in its own namespace only.
        (
            Method::POST,
            "/apis/coordination.k8s.io/v1/namespaces/team-a/leases".into(),
            Some(lease_elsewhere),
        ),
        // Nothing of Liqo's, no ConfigMaps.
        (
            Method::POST,
            "/apis/offloading.liqo.io/v1beta1/namespaces/team-a/namespaceoffloadings".into(),
            Some(json!({"metadata": {"name": "offloading"}})),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/liqo/configmaps".into(),
            None,
        ),
    ];
    // The Purchase a refused update would change exists.
    let (status, text) = call(
        &kube,
        &admin,
        Method::POST,
        purchases,
        Some(&purchase("team-a-2")),
    )
    .await?;
    ensure!(status.is_success(), "{status} {text}");
    for (method, path, body) in &refused {
        let (status, text) = call(&kube, &autoscaler, method.clone(), path, body.as_ref()).await?;
        ensure!(
            status == reqwest::StatusCode::FORBIDDEN,
            "{method} {path} as the market-autoscaler: {status}, not 403: {text}"
        );
    }
    // Only the controller's own calls are held against the permissions.
    kube.clear_requests();
    Ok(())
}
