//! Quota and filter stages over an in-memory source.

use std::sync::Arc;

use futures::StreamExt;
use quantity::ResourceList;

use super::*;
use crate::directory::{ClusterDirectory, Selector};
use crate::pattern::Pattern;
use crate::source::MemorySource;
use crate::test_support::pairs;
use resource_reader::{Notification, ReaderExt, ResourceReader};

fn list(entries: &[(&str, &str)]) -> ResourceList {
    ResourceList::from_strings(entries.iter().copied()).unwrap()
}

fn strings(l: &ResourceList) -> Vec<(String, String)> {
    l.to_strings().into_iter().collect()
}

fn directory() -> Arc<ClusterDirectory> {
    let mut d = ClusterDirectory::new();
    d.insert("gold-1", [("tier".to_string(), "gold".to_string())].into());
    Arc::new(d)
}

fn upstream() -> MemorySource {
    MemorySource::new(list(&[
        ("cpu", "4"),
        ("memory", "16Gi"),
        ("nvidia.com/gpu", "2"),
    ]))
}

#[tokio::test]
async fn quota_keeps_a_percentage() {
    let r = upstream().layer(QuotaLayer::new(
        QuotaConfig::percent(50).unwrap(),
        directory(),
    ));
    let got = r.read("anyone").await.unwrap();
    assert_eq!(
        strings(&got),
        pairs(&[("cpu", "2"), ("memory", "8Gi"), ("nvidia.com/gpu", "1")])
    );
}

#[tokio::test]
async fn quota_rounds_like_kubernetes() {
    let source = MemorySource::new(list(&[("cpu", "3"), ("pods", "5")]));
    let r = source.layer(QuotaLayer::new(
        QuotaConfig::percent(33).unwrap(),
        directory(),
    ));
    let got = r.read("anyone").await.unwrap();
    assert_eq!(strings(&got), pairs(&[("cpu", "990m"), ("pods", "1650m")]));
}

#[tokio::test]
async fn quota_caps_absolute_amounts_and_never_adds_names() {
    let config = QuotaConfig {
        max: list(&[("cpu", "1500m"), ("ephemeral-storage", "1Gi")]),
        ..QuotaConfig::default()
    };
    let r = upstream().layer(QuotaLayer::new(config, directory()));
    let got = r.read("anyone").await.unwrap();
    assert_eq!(
        strings(&got),
        pairs(&[
            ("cpu", "1500m"),
            ("memory", "16Gi"),
            ("nvidia.com/gpu", "2")
        ])
    );
}

#[tokio::test]
async fn quota_per_originator_overrides_percent_and_adds_caps() {
    let config = QuotaConfig {
        percent: Percent::new(50).unwrap(),
        max: list(&[("memory", "6Gi")]),
        originators: vec![
            OriginatorQuota {
                selector: Selector::labels([("tier", "gold")]),
                percent: Some(Percent::new(100).unwrap()),
                max: list(&[("nvidia.com/gpu", "1")]),
            },
            OriginatorQuota {
                selector: Selector::clusters(["tiny"]),
                percent: None,
                max: list(&[("cpu", "100m")]),
            },
        ],
    };
    let r = upstream().layer(QuotaLayer::new(config, directory()));
    // gold: 100%, global memory cap still applies, its own gpu cap too.
    assert_eq!(
        strings(&r.read("gold-1").await.unwrap()),
        pairs(&[("cpu", "4"), ("memory", "6Gi"), ("nvidia.com/gpu", "1")])
    );
    // tiny: global 50%, then its own cpu cap.
    assert_eq!(
        strings(&r.read("tiny").await.unwrap()),
        pairs(&[("cpu", "100m"), ("memory", "6Gi"), ("nvidia.com/gpu", "1")])
    );
    // everyone else: 50%, memory capped.
    assert_eq!(
        strings(&r.read("other").await.unwrap()),
        pairs(&[("cpu", "2"), ("memory", "6Gi"), ("nvidia.com/gpu", "1")])
    );
}

fn only_gold_sees_gpus() -> FilterConfig {
    FilterConfig {
        rules: vec![
            FilterRule {
                selector: Selector::labels([("tier", "gold")]),
                allow: vec![Pattern::new("nvidia.com/*").unwrap()],
                deny: vec![],
            },
            FilterRule {
                selector: Selector::everyone(),
                allow: vec![],
                deny: vec![Pattern::new("nvidia.com/*").unwrap()],
            },
        ],
    }
}

#[tokio::test]
async fn filter_shows_gpus_only_to_allow_listed_clusters() {
    let r = upstream().layer(FilterLayer::new(only_gold_sees_gpus(), directory()));
    assert_eq!(
        strings(&r.read("gold-1").await.unwrap()),
        pairs(&[("cpu", "4"), ("memory", "16Gi"), ("nvidia.com/gpu", "2")])
    );
    assert_eq!(
        strings(&r.read("other").await.unwrap()),
        pairs(&[("cpu", "4"), ("memory", "16Gi")])
    );
}

#[tokio::test]
async fn filter_deny_wins_within_a_rule_and_unnamed_resources_pass() {
    let config = FilterConfig {
        rules: vec![FilterRule {
            selector: Selector::clusters(["c1"]),
            allow: vec![Pattern::new("*").unwrap()],
            deny: vec![Pattern::new("mem*").unwrap()],
        }],
    };
    let r = upstream().layer(FilterLayer::new(config, directory()));
    assert_eq!(
        strings(&r.read("c1").await.unwrap()),
        pairs(&[("cpu", "4"), ("nvidia.com/gpu", "2")])
    );
    assert_eq!(strings(&r.read("c2").await.unwrap()).len(), 3);
}

#[tokio::test]
async fn stages_forward_notifications_and_removals() {
    let source = upstream();
    let r = source
        .clone()
        .layer(QuotaLayer::new(
            QuotaConfig::percent(50).unwrap(),
            directory(),
        ))
        .layer(FilterLayer::new(only_gold_sees_gpus(), directory()))
        .boxed();
    let mut notifications = r.subscribe();
    source.set(list(&[("cpu", "8")]));
    assert_eq!(notifications.next().await, Some(Notification::All));
    assert_eq!(strings(&r.read("x").await.unwrap()), pairs(&[("cpu", "4")]));

    r.remove_cluster("gone").await.unwrap();
    assert_eq!(source.removed(), vec!["gone".to_string()]);
}
