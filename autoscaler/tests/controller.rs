//! The controller in process, under the shipped RBAC, against the
//! Kubernetes API test server and a stand-in catalog: a waiting pod gets a
//! Purchase named after the autoscaler, recorded in the status first; a
//! purchase recorded but never created (a leader that stopped between the
//! two writes) is created under the recorded name, never a second one; a
//! status written from a stale read is a conflict; a Purchase not Ready by
//! the deadline is deleted and its offer backed off; an unreachable
//! catalog buys nothing and says why; `explain` decides for a file of pods.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use std::time::Duration;

use edge::probe::Probes;
use kube::api::Api;
use kube_test_server::KubeApiServer;
use market_autoscaler::context::Settings;
use market_autoscaler::controller;
use market_autoscaler::metrics::Metrics;
use market_autoscaler::model::MarketAutoscaler;
use serde_json::{json, Value};
use support::*;
use tokio_util::sync::CancellationToken;

const MAS: (&str, &str) = ("broker.liqo-broker.io", "marketautoscalers");
const PURCHASES: (&str, &str) = ("broker.liqo-broker.io", "purchases");
/// Every wait below is a few rounds of the configured scan interval.
const WITHIN: Duration = Duration::from_secs(10);

fn settings(deadline: Duration) -> Settings {
    Settings {
        scan_interval: Duration::from_millis(200),
        batch_idle: Duration::from_millis(50),
        batch_max: Duration::from_secs(1),
        purchase_deadline: deadline,
        backoff_initial: Duration::from_secs(300),
        backoff_max: Duration::from_secs(1800),
        backoff_reset: Duration::from_secs(3 * 3600),
        retry: Duration::from_millis(200),
        catalog_timeout: Duration::from_secs(2),
        max_drain_time: Duration::from_secs(120),
        instance: "test".into(),
    }
}

/// Start the controller as the autoscaler's ServiceAccount.
fn start(kube: &KubeApiServer, settings: Settings) -> (Metrics, CancellationToken) {
    let metrics = Metrics::new();
    metrics.reconcile().set_leading(true);
    let stop = CancellationToken::new();
    tokio::spawn(controller::run(
        market_autoscaler::context::Clients::same(autoscaler_client(kube)),
        settings,
        metrics.clone(),
        stop.clone(),
    ));
    (metrics, stop)
}

fn purchases(kube: &KubeApiServer) -> Vec<Value> {
    kube.objects(PURCHASES)
}

fn status(kube: &KubeApiServer, name: &str) -> Value {
    kube.get(MAS, Some(NS), name).unwrap()["status"].clone()
}

fn ready_reason(kube: &KubeApiServer, name: &str) -> Option<String> {
    status(kube, name)["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| {
            format!(
                "{}/{}",
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap()
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_pod_gets_one_purchase_named_after_the_autoscaler_recorded_in_status_first() {
    let kube = cluster().await;
    let catalog = Catalog::start(vec![offer("o1", "provider-a", "small", "4", "0.5")]).await;
    token_secret(&kube);
    kube.apply(MAS, autoscaler("web", &catalog.url));
    kube.apply(("", "pods"), waiting_pod("web-abc", "1"));
    let (_metrics, stop) = start(&kube, settings(Duration::from_secs(600)));

    let p = eventually(WITHIN, "a Purchase", || purchases(&kube).into_iter().next()).await;
    assert_eq!(p["metadata"]["name"], "web-1");
    assert_eq!(
        p["metadata"]["labels"]["broker.liqo-broker.io/market-autoscaler"],
        "web"
    );
    assert!(
        p["metadata"]["ownerReferences"].is_null(),
        "no owner: deleting the autoscaler leaves it"
    );
    assert_eq!(p["spec"]["offerID"], "o1");
    assert_eq!(p["spec"]["planID"], "small");
    assert_eq!(p["spec"]["namespaces"], json!([SERVED]));
    assert_eq!(p["spec"]["boughtBy"], "market-autoscaler/liqo/web");
    assert_eq!(p["spec"]["catalogURL"], catalog.url.as_str());
    let st = eventually(WITHIN, "status with the purchase", || {
        let st = status(&kube, "web");
        (st["purchasesMade"] == 1 && st["lastDecision"].is_object()).then_some(st)
    })
    .await;
    assert_eq!(st["inFlight"][0]["purchase"], "web-1");
    assert_eq!(st["inFlight"][0]["offerID"], "o1");
    // The pod was told, with CA's reason, the offer and the price.
    let event = eventually(WITHIN, "TriggeredScaleUp on the pod", || {
        kube.objects(("events.k8s.io", "events"))
            .into_iter()
            .find(|e| e["reason"] == "TriggeredScaleUp" && e["regarding"]["name"] == "web-abc")
    })
    .await;
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("o1") && note.contains("0.5"), "{note}");
    assert_eq!(event["reportingController"], "market-autoscaler");
    // The next rounds find the pod fits the purchase in flight: nothing
    // more is bought.
    let st = eventually(WITHIN, "the pod placed on the purchase in flight", || {
        let st = status(&kube, "web");
        (st["lastDecision"]["boughtCount"] == 0).then_some(st)
    })
    .await;
    let summary = st["lastDecision"]["summary"].as_str().unwrap();
    assert!(summary.contains("in flight"), "{summary}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(purchases(&kube).len(), 1, "bought once");
    assert_eq!(status(&kube, "web")["purchasesMade"], 1);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_recorded_but_not_created_is_created_under_the_recorded_name() {
    let kube = cluster().await;
    let catalog = Catalog::start(vec![offer("o1", "provider-a", "small", "4", "0.5")]).await;
    token_secret(&kube);
    let mut ma = autoscaler("web", &catalog.url);
    kube.apply(MAS, ma.clone());
    // A leader wrote the name, then stopped before creating the Purchase.
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    ma["status"] = json!({"purchasesMade": 3, "inFlight": [
        {"purchase": "web-3", "offerID": "o1", "planID": "small", "since": now}]});
    let api: Api<MarketAutoscaler> = Api::namespaced(admin_client(&kube), NS);
    let current = api.get("web").await.unwrap();
    let mut with_status: MarketAutoscaler = serde_json::from_value(ma).unwrap();
    with_status.metadata = current.metadata;
    api.replace_status("web", &Default::default(), &with_status)
        .await
        .unwrap();
    let (_metrics, stop) = start(&kube, settings(Duration::from_secs(600)));

    let p = eventually(WITHIN, "the recorded Purchase", || {
        purchases(&kube).into_iter().next()
    })
    .await;
    assert_eq!(p["metadata"]["name"], "web-3");
    assert_eq!(p["spec"]["offerID"], "o1");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(purchases(&kube).len(), 1, "nothing else made");
    let st = status(&kube, "web");
    assert_eq!(st["purchasesMade"], 3, "the name is not taken twice");
    assert_eq!(st["inFlight"][0]["purchase"], "web-3");
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_written_over_a_stale_read_is_a_conflict() {
    let kube = cluster().await;
    kube.apply(MAS, autoscaler("web", "http://127.0.0.1:1"));
    // The autoscaler reads through its watch (it may not `get`); the same
    // object read once by the tests.
    let read = Api::<MarketAutoscaler>::namespaced(admin_client(&kube), NS)
        .get("web")
        .await
        .unwrap();
    let api: Api<MarketAutoscaler> = Api::namespaced(autoscaler_client(&kube), NS);
    let mut first = read.status.clone().unwrap_or_default();
    first.purchases_made = 1;
    let written = market_autoscaler::status::write(&api, &read, first)
        .await
        .unwrap();
    assert_eq!(written.status.unwrap().purchases_made, 1);
    // Another writer's view, read before that write.
    let mut second = read.status.clone().unwrap_or_default();
    second.purchases_made = 1;
    let e = market_autoscaler::status::write(&api, &read, second)
        .await
        .unwrap_err();
    assert!(
        matches!(e, market_autoscaler::status::WriteError::Conflict),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_not_ready_by_the_deadline_is_deleted_and_its_offer_backed_off() {
    let kube = cluster().await;
    let catalog = Catalog::start(vec![offer("o1", "provider-a", "small", "4", "0.5")]).await;
    token_secret(&kube);
    kube.apply(MAS, autoscaler("web", &catalog.url));
    kube.apply(
        PURCHASES,
        json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
               "metadata": {"name": "web-1", "namespace": NS,
                            "labels": {"broker.liqo-broker.io/market-autoscaler": "web"}},
               "spec": {"catalogURL": catalog.url, "credentialsSecretRef": {"name": "catalog-token", "key": "token"},
                        "offerID": "o1", "planID": "small", "namespaces": [SERVED]}}),
    );
    let deadline = Duration::from_secs(1);
    let (metrics, stop) = start(&kube, settings(deadline));
    eventually(deadline + WITHIN, "the late Purchase deleted", || {
        purchases(&kube).is_empty().then_some(())
    })
    .await;
    let st = eventually(WITHIN, "the backoff in status", || {
        let st = status(&kube, "web");
        st["backoff"].is_array().then_some(st)
    })
    .await;
    assert_eq!(st["backoff"][0]["offerID"], "o1");
    assert_eq!(st["backoff"][0]["planID"], "small");
    assert_eq!(st["backoff"][0]["failures"], 1);
    assert!(metrics
        .render()
        .contains(r#"market_autoscaler_purchases_total{result="deadline"} 1"#));
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_catalog_buys_nothing_and_says_why() {
    let kube = cluster().await;
    token_secret(&kube);
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    kube.apply(MAS, autoscaler("web", &format!("http://127.0.0.1:{port}")));
    kube.apply(("", "pods"), waiting_pod("web-abc", "1"));
    let (metrics, stop) = start(&kube, settings(Duration::from_secs(600)));
    let reason = eventually(WITHIN, "Ready=False", || ready_reason(&kube, "web")).await;
    assert_eq!(reason, "False/CatalogUnreachable");
    metrics.reconcile().set_reached_api();
    let (code, body) = metrics.readiness();
    assert_eq!(code.as_u16(), 503, "{body}");
    assert!(body.contains("liqo/web"), "{body}");
    assert!(purchases(&kube).is_empty());
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_token_secret_is_credentials_missing() {
    let kube = cluster().await;
    let catalog = Catalog::start(vec![offer("o1", "provider-a", "small", "4", "0.5")]).await;
    kube.apply(MAS, autoscaler("web", &catalog.url));
    let (_metrics, stop) = start(&kube, settings(Duration::from_secs(600)));
    let reason = eventually(WITHIN, "Ready=False", || ready_reason(&kube, "web")).await;
    assert_eq!(reason, "False/CredentialsMissing");
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_decides_for_a_file_of_pods_with_prices_per_hour_and_month() {
    let kube = cluster().await;
    let catalog = Catalog::start(vec![
        offer("o1", "provider-a", "small", "2", "0.5"),
        offer("o2", "provider-b", "big", "8", "3"),
    ])
    .await;
    token_secret(&kube);
    kube.apply(MAS, autoscaler("web", &catalog.url));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pods.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: List\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n- metadata: {name: huge}\n  spec: {containers: [{name: c, resources: {requests: {cpu: '64'}}}]}\n",
    )
    .unwrap();
    let cli = <market_autoscaler::config::Cli as clap::Parser>::try_parse_from([
        "market-autoscaler".as_ref(),
        "explain".as_ref(),
        "--autoscaler".as_ref(),
        "liqo/web".as_ref(),
        "--pods".as_ref(),
        file.as_os_str(),
    ])
    .unwrap();
    let Some(market_autoscaler::config::Command::Explain(args)) = cli.command else {
        panic!("explain");
    };
    // Read access is enough: a person's get and list.
    let explained = market_autoscaler::explain::decide(reader_client(&kube), &args.request)
        .await
        .unwrap();
    let text = explained.text();
    assert!(text.contains("team-a/a"), "{text}");
    assert!(
        text.contains("o1/small"),
        "the cheapest plan the pod fits: {text}"
    );
    assert!(
        text.contains("0.5 EUR/h") && text.contains("360.0 EUR/month"),
        "{text}"
    );
    assert!(
        text.contains("team-a/huge"),
        "the pod no plan fits is named: {text}"
    );
    assert_eq!(explained.decision.buy.len(), 1, "{text}");
    let json = explained.json();
    assert_eq!(json["decision"]["bought"][0]["offerID"], "o1");
    assert!(purchases(&kube).is_empty(), "explain writes nothing");
}
