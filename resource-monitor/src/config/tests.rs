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
