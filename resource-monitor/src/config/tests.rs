//! Chain-file parsing: good files, and bad ones rejected with the key and
//! line named.

use super::*;
use crate::stage::Percent;

const FULL: &str = r#"
[server]
listen = "127.0.0.1:7000"
liqo_api = "v0.9"
pool_name = "pool"
pool_prefix = "pfx"
max_connections = 10

[source.static]
path = "resources.yaml"

[clusters."gold-1".labels]
tier = "gold"

[quota]
percent = 50
max = { cpu = "8", memory = "32Gi" }

[[quota.originators]]
labels = { tier = "gold" }
percent = 80
max = { "nvidia.com/gpu" = "1" }

[[filter.rules]]
clusters = ["special"]
labels = { tier = "gold" }
allow = ["nvidia.com/*"]

[[filter.rules]]
deny = ["nvidia.com/*"]
"#;

#[test]
fn a_full_file_parses() {
    let c = ChainConfig::parse(FULL).unwrap();
    assert_eq!(c.server.listen, Some("127.0.0.1:7000".parse().unwrap()));
    assert_eq!(c.server.liqo_api, Some(LiqoApi::V09));
    assert_eq!(c.server.pool_name.as_deref(), Some("pool"));
    assert_eq!(
        c.source,
        Some(SourceConfig::Static {
            path: "resources.yaml".into()
        })
    );
    let quota = c.quota.unwrap();
    assert_eq!(quota.percent, Percent::new(50).unwrap());
    assert_eq!(quota.max.0.len(), 2);
    assert_eq!(quota.originators.len(), 1);
    assert_eq!(
        quota.originators[0].percent,
        Some(Percent::new(80).unwrap())
    );
    let filter = c.filter.unwrap();
    assert_eq!(filter.rules.len(), 2);
    assert_eq!(
        filter.rules[0].selector.clusters,
        vec!["special".to_string()]
    );
    assert!(filter.rules[1].selector.is_everyone());
    let directory = ChainConfig::parse(FULL).unwrap().directory();
    assert_eq!(directory.labels_of("gold-1").unwrap()["tier"], "gold");
}

#[test]
fn each_source_kind_parses() {
    let host = ChainConfig::parse("[source.host]\n").unwrap();
    assert!(
        matches!(host.source, Some(SourceConfig::Host { refresh_seconds, .. }) if refresh_seconds.get() == 30)
    );
    let kube = ChainConfig::parse("[source.kubernetes]\nkubeconfig = \"k.yaml\"\n").unwrap();
    assert!(matches!(
        kube.source,
        Some(SourceConfig::Kubernetes {
            kubeconfig: Some(_),
            ..
        })
    ));
    let grpc = ChainConfig::parse(
        "[source.grpc]\naddress = \"http://127.0.0.1:1\"\nliqo_api = \"v0.6\"\n",
    )
    .unwrap();
    assert_eq!(
        grpc.source,
        Some(SourceConfig::Grpc {
            address: "http://127.0.0.1:1".into(),
            liqo_api: LiqoApi::V06
        })
    );
}

/// The error text must name the line and the offending key or value.
fn error_of(text: &str) -> String {
    ChainConfig::parse(text).unwrap_err().to_string()
}

#[test]
fn unknown_keys_are_named_with_their_line() {
    let e = error_of("[quota]\npercent = 50\nprecent = 40\n");
    assert!(e.contains("line 3"), "{e}");
    assert!(e.contains("precent"), "{e}");
}

#[test]
fn out_of_range_percent_is_named_with_its_line() {
    let e = error_of("[source.host]\n\n[quota]\npercent = 150\n");
    assert!(e.contains("line 4"), "{e}");
    assert!(e.contains("percent"), "{e}");
    assert!(e.contains("150"), "{e}");
}

#[test]
fn bad_quantity_is_named_with_its_line() {
    let e = error_of("[quota]\nmax = { cpu = \"lots\" }\n");
    assert!(e.contains("line 2"), "{e}");
    assert!(e.contains("cpu"), "{e}");
}

#[test]
fn empty_filter_rule_is_rejected() {
    let e = error_of("[[filter.rules]]\nclusters = [\"a\"]\n");
    assert!(e.contains("allow"), "{e}");
    assert!(e.contains("line 1") || e.contains("line 2"), "{e}");
}

#[test]
fn bad_liqo_api_and_listen_are_rejected() {
    let e = error_of("[server]\nliqo_api = \"v2\"\n");
    assert!(e.contains("line 2") && e.contains("v2"), "{e}");
    let e = error_of("[server]\nlisten = \"nowhere\"\n");
    assert!(e.contains("line 2") && e.contains("listen"), "{e}");
}

#[test]
fn two_sources_are_rejected() {
    let e = error_of("[source.host]\n[source.kubernetes]\n");
    assert!(e.contains("source") || e.contains("line"), "{e}");
}

#[test]
fn unknown_source_kind_is_rejected() {
    let e = error_of("[source.magic]\n");
    assert!(e.contains("magic") && e.contains("line 1"), "{e}");
}

#[test]
fn zero_refresh_is_rejected() {
    let e = error_of("[source.host]\nrefresh_seconds = 0\n");
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn source_flag_forms() {
    assert_eq!(
        "static:/tmp/r.yaml".parse::<SourceConfig>(),
        Ok(SourceConfig::Static {
            path: "/tmp/r.yaml".into()
        })
    );
    assert!(matches!(
        "host".parse::<SourceConfig>(),
        Ok(SourceConfig::Host { .. })
    ));
    assert!(matches!(
        "kubernetes".parse::<SourceConfig>(),
        Ok(SourceConfig::Kubernetes { .. })
    ));
    assert_eq!(
        "grpc:127.0.0.1:6001".parse::<SourceConfig>(),
        Ok(SourceConfig::Grpc {
            address: "127.0.0.1:6001".into(),
            liqo_api: LiqoApi::V05
        })
    );
    for bad in ["static", "static:", "grpc", "magic", "host:x"] {
        assert!(bad.parse::<SourceConfig>().is_err(), "{bad}");
    }
}

#[test]
fn relative_paths_resolve_against_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.toml");
    std::fs::write(&path, "[source.static]\npath = \"r.yaml\"\n").unwrap();
    let c = ChainConfig::load(&path).unwrap();
    assert_eq!(
        c.source,
        Some(SourceConfig::Static {
            path: dir.path().join("r.yaml")
        })
    );
}

#[test]
fn the_example_chain_file_is_valid() {
    let c = ChainConfig::parse(include_str!("../../examples/chain.toml")).unwrap();
    assert!(c.source.is_some() && c.quota.is_some() && c.filter.is_some());
    assert_eq!(c.clusters.len(), 2);
    let text = include_str!("../../examples/resources.yaml");
    let list =
        crate::source::static_file_parse(text, std::path::Path::new("resources.yaml")).unwrap();
    assert_eq!(list.0.len(), 5);
}

#[test]
fn negative_caps_and_duplicate_keys_are_refused() {
    let e = error_of("[quota]\nmax = { cpu = \"-1\" }\n");
    assert!(
        e.contains("line 2") && e.contains("cpu") && e.contains("negative"),
        "{e}"
    );
    let e = error_of("[[quota.originators]]\nclusters = [\"a\"]\nmax = { memory = \"-1Gi\" }\n");
    assert!(e.contains("memory") && e.contains("negative"), "{e}");
    let e = error_of("[quota]\npercent = 50\npercent = 60\n");
    assert!(e.contains("line 3") && e.contains("percent"), "{e}");
    let e = error_of("[quota]\nmax = { cpu = \"1\", cpu = \"2\" }\n");
    assert!(e.contains("cpu"), "{e}");
}

#[test]
fn durations_in_the_server_section() {
    let c = ChainConfig::parse(
        "[server]\nhandshake_timeout = \"1s 500ms\"\nfirst_sync_timeout = \"30\"\nmax_connections_per_peer = 4\n",
    )
    .unwrap();
    assert_eq!(
        c.server.handshake_timeout,
        Some(ConfigDuration(std::time::Duration::from_millis(1500)))
    );
    assert_eq!(
        c.server.first_sync_timeout,
        Some(ConfigDuration(std::time::Duration::from_secs(30)))
    );
    let e = error_of("[server]\nhandshake_timeout = \"soon\"\n");
    assert!(
        e.contains("line 2") && e.contains("invalid duration"),
        "{e}"
    );
}

/// Hostile chain files, assembled from pieces of real ones, broken values
/// and raw noise: parsing never panics, and what is accepted holds what
/// the contract requires (percentages within 0–100, no negative caps).
mod hostile {
    use proptest::prelude::*;

    use super::*;

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("50".to_string()),
            Just("150".to_string()),
            Just("-1".to_string()),
            Just("99999999999999999999".to_string()),
            Just("\"8\"".to_string()),
            Just("\"-8\"".to_string()),
            Just("\"1e400\"".to_string()),
            Just("\"32Gi\"".to_string()),
            Just("\"-0.5Mi\"".to_string()),
            Just("\"\"".to_string()),
            Just("true".to_string()),
            Just("[]".to_string()),
            Just("{}".to_string()),
            Just("{ cpu = \"-1\" }".to_string()),
            Just("{ cpu = \"1\", memory = \"-2Gi\" }".to_string()),
            Just("{ cpu = \"1\" }".to_string()),
            Just("\"v0.5\"".to_string()),
            Just("\"5s\"".to_string()),
            Just("\"-5s\"".to_string()),
            "\"[^\"\\\\]{0,12}\"",
        ]
    }

    fn line() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            Just("percent"),
            Just("max"),
            Just("clusters"),
            Just("labels"),
            Just("allow"),
            Just("deny"),
            Just("path"),
            Just("address"),
            Just("liqo_api"),
            Just("listen"),
            Just("max_connections"),
            Just("max_connections_per_peer"),
            Just("handshake_timeout"),
            Just("first_sync_timeout"),
            Just("refresh_seconds"),
        ];
        let header = prop_oneof![
            Just("[server]"),
            Just("[source.static]"),
            Just("[source.host]"),
            Just("[source.grpc]"),
            Just("[quota]"),
            Just("[[quota.originators]]"),
            Just("[[filter.rules]]"),
            Just("[clusters.\"c1\".labels]"),
        ];
        prop_oneof![
            (key, value()).prop_map(|(k, v)| format!("{k} = {v}")),
            header.prop_map(str::to_string),
            "\\PC{0,20}",
        ]
    }

    proptest! {
        #[test]
        fn never_panics_and_never_accepts_what_the_contract_refuses(
            lines in proptest::collection::vec(line(), 0..14)
        ) {
            let text = lines.join("\n");
            if let Ok(config) = ChainConfig::parse(&text) {
                if let Some(quota) = &config.quota {
                    prop_assert!(quota.percent.get() <= 100);
                    prop_assert!(quota.max.0.values().all(|q| !q.is_negative()), "{text}");
                    for entry in &quota.originators {
                        prop_assert!(entry.percent.is_none_or(|p| p.get() <= 100));
                        prop_assert!(entry.max.0.values().all(|q| !q.is_negative()), "{text}");
                    }
                }
            }
        }

        #[test]
        fn raw_noise_never_panics(text in "\\PC{0,200}") {
            let _ = ChainConfig::parse(&text);
        }
    }
}
