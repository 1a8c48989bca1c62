//! `PUT /provider/peering` takes kubeconfigs as data, not code (issue 29,
//! finding 1), against the real catalog binary on both stores: each
//! hostile kubeconfig is answered 400 naming `v1.kubeconfig` with nothing
//! stored (neither the registration nor the kubeconfig a contract
//! releases changes), and a consumer receives the canonical
//! re-serialisation, never the bytes the provider sent.

use e2e::buying::{self, admin, consumer, get, publish, put};
use e2e::catalog::Env;
use e2e::catalog_tests;
use e2e::contracts::{buy, kubeconfig, register_peering, LIQOCTL_KUBECONFIG};
use serde_json::json;

catalog_tests!(
    peering_refuses_hostile_kubeconfigs,
    peering_releases_the_canonical_copy
);

const SERVER: &str = "https://203.0.113.7:6443";

/// The fixture with `from` replaced by `to` (once; `from` must be there).
fn with(from: &str, to: &str) -> String {
    assert!(LIQOCTL_KUBECONFIG.contains(from), "{from}");
    LIQOCTL_KUBECONFIG.replacen(from, to, 1)
}

/// Each hostile shape of finding 1, and what the 400 must say.
fn hostile() -> Vec<(String, &'static str)> {
    let user = "  user:\n";
    let cluster = "- cluster:\n";
    let key = "    client-key-data:";
    vec![
        (
            with(key, "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n    client-key-data:"),
            "users[0].user.tokenFile is not accepted",
        ),
        (
            with(user, "  user:\n    auth-provider: {name: gcp, config: {cmd-path: /bin/sh}}\n"),
            "auth-provider is not accepted",
        ),
        (with(user, "  user:\n    exec: {command: sh}\n"), "users[0].user.exec is not accepted"),
        (with(user, "  user:\n    Exec: {command: sh}\n"), "users[0].user.Exec is not accepted"),
        (
            with(cluster, "- cluster:\n    certificate-authority: /etc/shadow\n"),
            "certificate-authority is not accepted",
        ),
        (
            with(cluster, "- cluster:\n    insecure-skip-tls-verify: true\n"),
            "insecure-skip-tls-verify is not accepted",
        ),
        (with(cluster, "- cluster:\n    proxy-url: http://proxy.example:3128\n"), "proxy-url is not accepted"),
        (with(user, "  user:\n    <<: {exec: {command: sh}}\n"), "merge keys"),
        (
            with("users:\n", "users:\n- name: cool-consumer-user\n  user:\n    token: stolen\n"),
            "has 2 `users`",
        ),
        (
            with("clusters:\n", "clusters:\n- name: other\n  cluster:\n    server: http://plain.example\n"),
            "has 2 `clusters`",
        ),
        (with("server: https://", "server: https://admin:pw@"), "userinfo"),
        (with("server: https://", "server: http://"), "https://"),
        (
            with("    certificate-authority-data: LS0t", "    certificate-authority-data: Q0EtREFUQQ== #"),
            "certificate-authority-data",
        ),
    ]
}

fn peering_refuses_hostile_kubeconfigs(backend: e2e::catalog::Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");

    // Nothing registered yet: a hostile kubeconfig registers no v1.
    let before = get(&c, "/provider/peering", Some(&seller)).json;
    assert_eq!(before["liqo"], json!(["v0"]));
    for (yaml, want) in hostile() {
        let r = put(
            &c,
            "/provider/peering",
            &json!({"v1": {"kubeconfig": yaml}}),
            Some(&seller),
        );
        r.expect_error(400);
        assert_eq!(r.json["field"], "v1.kubeconfig", "{}", r.text);
        assert!(r.text.contains(want), "want {want:?}: {}", r.text);
        assert_eq!(get(&c, "/provider/peering", Some(&seller)).json, before);
    }

    // Registered: a hostile kubeconfig leaves what a contract releases as
    // it was.
    let good = kubeconfig(SERVER);
    let r = register_peering(&c, &seller, Some(&good), None);
    assert_eq!(r.status, 200, "{}", r.text);
    let registered = r.json;
    for (yaml, _) in hostile() {
        register_peering(&c, &seller, Some(&yaml), Some("other-class")).expect_error(400);
        assert_eq!(get(&c, "/provider/peering", Some(&seller)).json, registered);
    }
    let r = buy(
        &c,
        &alice,
        "shop",
        "small",
        &json!({"consumerClusterID": "alice-1"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["credentials"]["v1"]["kubeconfig"], good.as_str());
}

fn peering_releases_the_canonical_copy(backend: e2e::catalog::Backend) {
    let env = Env::new(backend);
    let c = buying::start(&env, &[]);
    let seller = publish(&c, 1, "shop");
    let admin = admin(&c);
    let alice = consumer(&c, &admin, "alice");

    // Comments, blank lines, odd spacing, another key order, no
    // `preferences`: the same kubeconfig as data.
    let users = LIQOCTL_KUBECONFIG
        .split_once("users:\n")
        .map(|(_, u)| u)
        .unwrap();
    let sent = format!(
        "# registered by hand\nkind:   Config   # a comment\nusers:\n{users}\n\n{}",
        LIQOCTL_KUBECONFIG
            .split_once("users:\n")
            .unwrap()
            .0
            .replace("kind: Config\n", "")
            .replace("preferences: {}\n", "")
            .replace("apiVersion: v1", "apiVersion: \"v1\"  # quoted")
    );
    assert_ne!(sent, LIQOCTL_KUBECONFIG);
    let r = register_peering(&c, &seller, Some(&sent), None);
    assert_eq!(r.status, 200, "{}", r.text);
    let r = buy(
        &c,
        &alice,
        "shop",
        "small",
        &json!({"consumerClusterID": "alice-1"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let received = r.json["credentials"]["v1"]["kubeconfig"].as_str().unwrap();
    assert_eq!(received, LIQOCTL_KUBECONFIG, "the canonical copy");
    assert!(!received.contains('#'), "no comment survives");
    let id = r.json["id"].as_str().unwrap();
    let again = get(&c, &format!("/contracts/{id}"), Some(&alice));
    assert_eq!(again.json["credentials"]["v1"]["kubeconfig"], received);
}
