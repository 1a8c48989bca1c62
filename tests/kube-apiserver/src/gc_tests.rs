//! The collector against the store alone: owners and dependents written
//! before and after the graph was first read, so that a dependent the
//! graph missed would stay (background), let its owner go early
//! (foreground) or keep its reference (orphan).

use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::Collector;
use crate::builtin;
use crate::crd::{GroupResource, Registry, ResourceDef};
use crate::store::World;

fn world() -> World {
    let mut registry = Registry::default();
    for def in builtin::definitions() {
        registry.register(def);
    }
    let (tx, _) = broadcast::channel(16);
    let mut world = World::new(registry, tx);
    let ns = def(&world, "namespaces");
    world
        .create(&ns, None, json!({"metadata": {"name": "default"}}))
        .unwrap();
    world
}

fn def(world: &World, plural: &str) -> std::sync::Arc<ResourceDef> {
    world.registry.get(&GroupResource::new("", plural)).unwrap()
}

/// A ConfigMap in `default` owned by `owners` (blocking or not), with
/// `finalizers`.
fn config_map(
    world: &mut World,
    name: &str,
    owners: &[(&Value, bool)],
    finalizers: &[&str],
) -> Value {
    let refs: Vec<Value> = owners
        .iter()
        .map(|(o, block)| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"],
                   "uid": o["metadata"]["uid"], "blockOwnerDeletion": block})
        })
        .collect();
    let cms = def(world, "configmaps");
    let object =
        json!({"metadata": {"name": name, "ownerReferences": refs, "finalizers": finalizers}});
    world.create(&cms, Some("default"), object).unwrap()
}

fn stored(world: &World, name: &str) -> Option<Value> {
    world
        .stored(
            &GroupResource::new("", "configmaps"),
            &format!("default/{name}"),
        )
        .cloned()
}

fn delete(world: &mut World, name: &str, policy: &str) {
    let cms = def(world, "configmaps");
    world
        .delete(
            &cms,
            Some("default"),
            name,
            &json!({"propagationPolicy": policy}),
        )
        .unwrap();
}

/// Passes until one writes nothing, as the controller loop runs them
/// after each batch of changes.
fn settle(collector: &mut Collector, world: &mut World) {
    for _ in 0..20 {
        let rv = world.rv;
        collector.sync(world);
        if world.rv == rv {
            return;
        }
    }
    panic!("the collector kept writing");
}

fn owner_uids(object: &Value) -> Vec<Value> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["uid"].clone())
        .collect()
}

#[test]
fn background_collects_every_dependent_however_late_it_came() {
    let mut w = world();
    let mut gc = Collector::default();
    let owner = config_map(&mut w, "owner", &[], &[]);
    let other = config_map(&mut w, "other", &[], &[]);
    for i in 0..20 {
        config_map(&mut w, &format!("early-{i}"), &[(&owner, false)], &[]);
    }
    settle(&mut gc, &mut w);
    // Written after the graph was read: known only from the changes.
    for i in 0..20 {
        config_map(&mut w, &format!("late-{i}"), &[(&owner, false)], &[]);
    }
    let child = stored(&w, "late-3").unwrap();
    config_map(&mut w, "grandchild", &[(&child, false)], &[]);
    config_map(&mut w, "shared", &[(&owner, false), (&other, false)], &[]);
    config_map(&mut w, "unrelated", &[(&other, false)], &[]);
    settle(&mut gc, &mut w);
    assert!(stored(&w, "late-0").is_some(), "solid owners keep them");

    delete(&mut w, "owner", "Background");
    settle(&mut gc, &mut w);
    for i in 0..20 {
        assert!(
            stored(&w, &format!("early-{i}")).is_none(),
            "early-{i} stayed"
        );
        assert!(
            stored(&w, &format!("late-{i}")).is_none(),
            "late-{i} stayed"
        );
    }
    assert!(
        stored(&w, "grandchild").is_none(),
        "a dependent's dependent goes too"
    );
    let shared = stored(&w, "shared").expect("another owner keeps it");
    assert_eq!(owner_uids(&shared), vec![other["metadata"]["uid"].clone()]);
    assert!(stored(&w, "unrelated").is_some());
}

#[test]
fn foreground_waits_for_a_blocking_dependent_written_after_the_graph() {
    let mut w = world();
    let mut gc = Collector::default();
    let owner = config_map(&mut w, "owner", &[], &[]);
    settle(&mut gc, &mut w);
    config_map(&mut w, "held", &[(&owner, true)], &["test.io/hold"]);
    delete(&mut w, "owner", "Foreground");
    settle(&mut gc, &mut w);
    let held = stored(&w, "held").expect("kept by its finalizer");
    assert!(
        held["metadata"]["deletionTimestamp"].is_string(),
        "deleted first"
    );
    assert!(stored(&w, "owner").is_some(), "the owner waits for it");

    let mut released = held.clone();
    released["metadata"]["finalizers"] = json!([]);
    let cms = def(&w, "configmaps");
    w.update(
        &cms,
        Some("default"),
        "held",
        released,
        crate::store::Target::Main,
    )
    .unwrap();
    settle(&mut gc, &mut w);
    assert!(stored(&w, "held").is_none());
    assert!(stored(&w, "owner").is_none(), "the owner goes after it");
}

#[test]
fn orphan_takes_the_reference_out_of_a_dependent_written_after_the_graph() {
    let mut w = world();
    let mut gc = Collector::default();
    let owner = config_map(&mut w, "owner", &[], &[]);
    settle(&mut gc, &mut w);
    config_map(&mut w, "kept", &[(&owner, true)], &[]);
    delete(&mut w, "owner", "Orphan");
    settle(&mut gc, &mut w);
    assert!(stored(&w, "owner").is_none());
    let kept = stored(&w, "kept").expect("orphaned, not collected");
    assert!(owner_uids(&kept).is_empty());
}
