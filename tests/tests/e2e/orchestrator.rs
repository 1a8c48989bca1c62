//! The orchestrator against the Kubernetes API test server (Liqo v1.2.0's
//! CRDs) and the real catalog: namespaces offloaded to the broker are
//! placed by policy — an allow list, a label rule, the cheapest fitting
//! plan, never the consumer itself — move once (and only once) when their
//! provider withdraws, survive the catalog going away, and the dry run
//! answers what the controller decides. A bad policy file is refused with
//! its line.

use std::time::Duration;

use e2e::Spawn;
use serde_json::json;

use crate::orchestrator_support::{lease_holder, recorded, selected, Broker};
use crate::purchase_controller_support::wait_until;

// The offloading of pods created before the placement, on the model of
// Liqo's controllers (a submodule so the test binary's module list stays
// as it is).
#[path = "orchestrator_offloading.rs"]
mod offloading;

/// A namespace of consumer `consumer-9` asking 1 CPU and 1Gi (one pod).
fn app(broker: &Broker, name: &str) {
    broker.offloaded_namespace(name, "consumer-9");
    broker.pod(name, "web", "1", "1Gi");
}

/// Three providers: cluster-1 cheapest (1), cluster-2 (2, region eu),
/// cluster-3 (3, region eu, compliance gdpr).
fn market(broker: &Broker) {
    broker.offer(1, "o1", json!({"region": "us"}), &[("s", "1", "2", "4Gi")]);
    broker.offer(2, "o2", json!({"region": "eu"}), &[("s", "2", "2", "4Gi")]);
    broker.offer(
        3,
        "o3",
        json!({"region": "eu", "compliance": "gdpr"}),
        &[("s", "3", "2", "4Gi")],
    );
}

#[test]
fn an_allow_list_selects_among_the_allowed() {
    let broker = Broker::start().unwrap();
    market(&broker);
    app(&broker, "app-a");
    let policy = broker
        .policy("[[consumer]]\nid = \"consumer-9\"\nallow = [\"cluster-2\", \"cluster-3\"]\n");
    let (_orch, _port) = broker.orchestrator(&policy).unwrap();
    let o = broker.wait_selected("app-a", &["cluster-2"]).unwrap();
    let rec = recorded(&o);
    assert_eq!(rec["rule"], "cheapest");
    let reason = rec["reason"].as_str().unwrap();
    assert!(
        reason.contains("cluster-1: not on the allow list"),
        "{reason}"
    );
    assert_eq!(o["spec"]["podOffloadingStrategy"], "Remote");
    let event = broker.wait_event("app-a", "Placed").unwrap();
    assert!(
        event["note"].as_str().unwrap().contains("chosen cluster-2"),
        "{event}"
    );
}

#[test]
fn a_label_rule_and_spread() {
    let broker = Broker::start().unwrap();
    market(&broker);
    app(&broker, "app-l");
    broker.offloaded_namespace("app-spread", "consumer-8");
    let policy = broker.policy(
        "required_labels = { region = \"eu\" }\n\n[[consumer]]\nid = \"consumer-9\"\nrequired_labels = { compliance = \"gdpr\" }\n\n[[consumer]]\nid = \"consumer-8\"\nspread = 2\n",
    );
    let (_orch, _port) = broker.orchestrator(&policy).unwrap();
    let o = broker.wait_selected("app-l", &["cluster-3"]).unwrap();
    let reason = recorded(&o)["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("cluster-2: no offer carries"), "{reason}");
    assert!(reason.contains("compliance=gdpr"), "{reason}");
    // consumer-8: only the global label, two providers.
    broker
        .wait_selected("app-spread", &["cluster-2", "cluster-3"])
        .unwrap();
}

#[test]
fn the_cheapest_plan_that_fits_the_quota() {
    let broker = Broker::start().unwrap();
    // cluster-1: cheap but small; cluster-2: a plan too small, one that fits
    // at 2.5; cluster-3: fits at 3.
    broker.offer(1, "o1", json!({}), &[("s", "0.5", "2", "4Gi")]);
    broker.offer(
        2,
        "o2",
        json!({}),
        &[("s", "1", "2", "4Gi"), ("l", "2.5", "4", "16Gi")],
    );
    broker.offer(3, "o3", json!({}), &[("m", "3", "8", "16Gi")]);
    broker.offloaded_namespace("app-q", "consumer-9");
    // The quota, not the small pod, is the demand.
    broker.quota(
        "app-q",
        json!({"requests.cpu": "4", "requests.memory": "8Gi", "limits.cpu": "64", "pods": "20"}),
    );
    broker.pod("app-q", "tiny", "100m", "64Mi");
    let policy = broker.policy("");
    let (_orch, _port) = broker.orchestrator(&policy).unwrap();
    let o = broker.wait_selected("app-q", &["cluster-2"]).unwrap();
    let reason = recorded(&o)["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("offer o2 plan l at 2.5"), "{reason}");
    assert!(reason.contains("cluster-1: no plan fits"), "{reason}");

    // Without a quota, the pods' requests add up: 2 + 1 CPU fits no 2-CPU plan.
    broker.offloaded_namespace("app-p", "consumer-9");
    broker.pod("app-p", "a", "2", "1Gi");
    broker.pod("app-p", "b", "1", "1Gi");
    let o = broker.wait_selected("app-p", &["cluster-2"]).unwrap();
    let reason = recorded(&o)["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("offer o2 plan l at 2.5"), "{reason}");
    // One pod alone: the cheap small plan.
    broker.offloaded_namespace("app-one", "consumer-9");
    broker.pod("app-one", "a", "2", "1Gi");
    broker.wait_selected("app-one", &["cluster-1"]).unwrap();
}

#[test]
fn the_consumer_is_never_selected() {
    let broker = Broker::start().unwrap();
    market(&broker);
    // cluster-1 is the cheapest provider, and this namespace's consumer.
    broker.offloaded_namespace("app-self", "cluster-1");
    let policy =
        broker.policy("[[consumer]]\nid = \"cluster-1\"\nallow = [\"cluster-1\", \"cluster-2\"]\n");
    let (_orch, _port) = broker.orchestrator(&policy).unwrap();
    let o = broker.wait_selected("app-self", &["cluster-2"]).unwrap();
    let reason = recorded(&o)["reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("cluster-1: the consumer's own cluster"),
        "{reason}"
    );
}

#[test]
fn a_withdrawn_provider_moves_the_namespace_once() {
    let broker = Broker::start().unwrap();
    market(&broker);
    app(&broker, "app-w");
    // A second namespace, of a consumer allowed only on cluster-4: the marker.
    broker.offloaded_namespace("app-marker", "consumer-7");
    let policy = broker.policy(
        "[hysteresis]\nmin_saving_percent = 10\nhold = \"1h\"\n\n[[consumer]]\nid = \"consumer-7\"\nallow = [\"cluster-4\"]\n",
    );
    let (_orch, _port) = broker.orchestrator(&policy).unwrap();
    broker.wait_selected("app-w", &["cluster-1"]).unwrap();
    assert_eq!(broker.offloading_writes("app-w"), 1);

    broker.withdraw(1, "o1");
    let o = broker.wait_selected("app-w", &["cluster-2"]).unwrap();
    let rec = recorded(&o);
    assert_eq!(rec["rule"], "replaced");
    let reason = rec["reason"].as_str().unwrap();
    assert!(
        reason.contains("cluster-1: no offer in the catalog"),
        "{reason}"
    );
    broker.wait_event("app-w", "Moved").unwrap();

    // cluster-1 comes back cheaper than cluster-2 by 50%: the hysteresis
    // holds (1h), so nothing moves. Then the marker: cluster-4 publishes,
    // which places app-marker — a decision made after cluster-1's return.
    broker.offer(1, "o1", json!({"region": "us"}), &[("s", "1", "2", "4Gi")]);
    broker.offer(4, "o4", json!({}), &[("s", "9", "2", "4Gi")]);
    broker.wait_selected("app-marker", &["cluster-4"]).unwrap();
    let o = broker.offloading("app-w").unwrap();
    assert_eq!(selected(&o), ["cluster-2"], "moved only once: {o}");
    assert_eq!(broker.events("app-w", "Moved").len(), 1);
    let pending = o["metadata"]["annotations"]["orchestrator.liqo-broker.io/pending"]
        .as_str()
        .unwrap_or_else(|| panic!("the cheaper cluster-1 is pending: {o}"));
    assert!(pending.contains("cluster-1"), "{pending}");
    // create, the move, the pending note: nothing else.
    assert_eq!(broker.offloading_writes("app-w"), 3);
}

#[test]
fn an_unreachable_catalog_keeps_the_decisions() {
    let mut broker = Broker::start().unwrap();
    market(&broker);
    app(&broker, "app-u");
    let policy = broker.policy("");
    let (_orch, port) = broker.orchestrator(&policy).unwrap();
    broker.wait_selected("app-u", &["cluster-1"]).unwrap();
    // The write that selected it is in the audit once its answer is
    // recorded, which may come just after the object is seen.
    wait_until("the selecting write audited", || {
        broker.offloading_writes("app-u") > 0
    });
    let writes = broker.offloading_writes("app-u");

    broker.catalog.child.kill();
    // While the catalog is down, something changes in the namespace, and a
    // new namespace arrives: it is placed from the offers last seen — the
    // marker that the orchestrator decided with the catalog gone.
    broker.pod("app-u", "worker", "1", "1Gi");
    broker.offloaded_namespace("app-u2", "consumer-9");
    broker.wait_selected("app-u2", &["cluster-1"]).unwrap();
    assert_eq!(
        selected(&broker.offloading("app-u").unwrap()),
        ["cluster-1"]
    );
    assert_eq!(broker.offloading_writes("app-u"), writes);
    let metrics = e2e::http::blocking_client(Duration::from_secs(5))
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        metrics.contains("orchestrator_writes_total{rule=\"cheapest\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("orchestrator_catalog_connected 0"),
        "{metrics}"
    );
    assert!(metrics.contains("orchestrator_namespaces 2"), "{metrics}");
}

#[test]
fn the_dry_run_answers_what_the_controller_decides() {
    let broker = Broker::start().unwrap();
    market(&broker);
    app(&broker, "app-d");
    let policy = broker.policy("deny = [\"cluster-1\"]\n");
    // Before the controller runs: where would it go?
    let before = broker.explain(&policy, "app-d").unwrap();
    assert_eq!(before["chosen"], json!(["cluster-2"]), "{before}");
    assert_eq!(before["rule"], "cheapest");
    assert_eq!(before["excluded"]["cluster-1"], "on a deny list");
    assert_eq!(before["current"], json!([]));
    assert!(
        broker.offloading("app-d").is_none(),
        "the dry run writes nothing"
    );

    let (_orch, _port) = broker.orchestrator(&policy).unwrap();
    let o = broker.wait_selected("app-d", &["cluster-2"]).unwrap();
    assert_eq!(recorded(&o)["rule"], before["rule"]);

    // After cluster-2 withdraws, both say cluster-3.
    broker.withdraw(2, "o2");
    broker.wait_selected("app-d", &["cluster-3"]).unwrap();
    let after = broker.explain(&policy, "app-d").unwrap();
    assert_eq!(after["chosen"], json!(["cluster-3"]), "{after}");
    assert_eq!(after["current"], json!(["cluster-3"]));

    // A namespace nobody offloaded is refused by name.
    let out = Spawn::new("orchestrator")
        .args(["--catalog", &broker.catalog.url("")])
        .arg("--kubeconfig")
        .arg(&broker.kubeconfig)
        .args(["explain", "--namespace", "liqo"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("namespace liqo is not a namespace a consumer offloaded"),
        "{stderr}"
    );
}

#[test]
fn a_provider_disabled_in_the_catalog_is_left() {
    let broker = Broker::start().unwrap();
    market(&broker);
    app(&broker, "app-x");
    let policy = broker.policy("");
    let secret = broker.admin_secret_file();
    let _orch = Spawn::new("orchestrator")
        .args(["--catalog", &broker.catalog.url("")])
        .arg("--kubeconfig")
        .arg(&broker.kubeconfig)
        .arg("--policy")
        .arg(&policy)
        .arg("--catalog-admin-secret-file")
        .arg(&secret)
        .args(["--disabled-poll", "200ms", "--leader-elect", "false"])
        .args(["--http-listen", "127.0.0.1:0"])
        .start_announced(1)
        .unwrap();
    broker.wait_selected("app-x", &["cluster-1"]).unwrap();
    // Its offers stay in the catalog, but it is disabled: the namespace moves.
    broker.disable(1, true);
    let o = broker.wait_selected("app-x", &["cluster-2"]).unwrap();
    let reason = recorded(&o)["reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("cluster-1: disabled in the catalog"),
        "{reason}"
    );
    assert_eq!(broker.catalog.list_ids("?provider=cluster-1"), ["o1"]);
    // The dry run sees it too, with the secret.
    let out = Spawn::new("orchestrator")
        .args(["--catalog", &broker.catalog.url("")])
        .arg("--kubeconfig")
        .arg(&broker.kubeconfig)
        .arg("--catalog-admin-secret-file")
        .arg(&secret)
        .args(["explain", "--namespace", "app-x", "--output", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["excluded"]["cluster-1"], "disabled in the catalog");
    assert_eq!(answer["chosen"], json!(["cluster-2"]));
}

#[test]
fn a_standby_takes_over_when_the_leader_dies() {
    let broker = Broker::start().unwrap();
    market(&broker);
    app(&broker, "app-h1");
    let policy = broker.policy("");
    let (mut first, _) = broker.orchestrator_as(&policy, "orchestrator-a").unwrap();
    broker.wait_selected("app-h1", &["cluster-1"]).unwrap();
    let (_second, port) = broker.orchestrator_as(&policy, "orchestrator-b").unwrap();
    assert_eq!(
        lease_holder(&broker.kube).as_deref(),
        Some("orchestrator-a")
    );
    let ready = || {
        e2e::http::blocking_client(Duration::from_secs(5))
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .and_then(|r| r.text())
            .unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + e2e::EVENTUALLY;
    while ready() != "ok: standby\n" {
        assert!(
            std::time::Instant::now() < deadline,
            "the standby is not ready: {}",
            ready()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The leader dies without releasing the Lease: the standby takes over
    // once it expires and places what arrives meanwhile.
    first.kill();
    app(&broker, "app-h2");
    broker.wait_selected("app-h2", &["cluster-1"]).unwrap();
    assert_eq!(
        lease_holder(&broker.kube).as_deref(),
        Some("orchestrator-b")
    );
    assert_eq!(ready(), "ok: leader\n");
}

/// The orchestrator started with `text` as its policy file (in `dir`):
/// its exit code, its stderr, and the file's path.
fn start_with_policy(
    dir: &std::path::Path,
    text: &str,
) -> (Option<i32>, String, std::path::PathBuf) {
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    let out = Spawn::new("orchestrator")
        .arg("--policy")
        .arg(&path)
        .args(["--catalog", "http://127.0.0.1:1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr, path)
}

/// Lists that say nothing a placement could use (issue 29, low): an empty
/// allow list (it would place nothing), a provider both allowed and
/// denied, a provider id the catalog would never hold as a cluster ID.
/// Each is refused at start, with the file, the field and the problem.
#[test]
fn a_policy_list_that_cannot_mean_anything_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (text, words) in [
        ("allow = []\n", "allow is empty"),
        (
            "allow = [\"p1\", \"p2\"]\ndeny = [\"p2\"]\n",
            "p2 is on both",
        ),
        (
            "[[consumer]]\nid = \"c\"\ndeny = [\"provider one\"]\n",
            "deny: \"provider one\" is not a cluster ID",
        ),
    ] {
        let (code, stderr, path) = start_with_policy(dir.path(), text);
        assert_eq!(code, Some(1), "{text:?}: {stderr}");
        assert!(
            stderr.contains(&format!("{}: line ", path.display())) && stderr.contains(words),
            "{text:?}: {stderr}"
        );
    }
}

#[test]
fn a_bad_policy_file_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    for (text, line) in [
        ("spread = 1\n\n[[consumer]]\nid = \"c\"\nspread = 0\n", 5),
        ("deny = [\"x\"]\ncolour = \"red\"\n", 2),
        ("[hysteresis]\nhold = \"soon\"\n", 2),
    ] {
        let (code, stderr, _) = start_with_policy(dir.path(), text);
        assert_eq!(code, Some(1), "{text:?}");
        assert!(
            stderr.contains(&format!("policy.toml: line {line}:")),
            "{text:?}: {stderr}"
        );
    }
}
