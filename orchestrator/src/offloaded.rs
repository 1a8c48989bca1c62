//! The names of the offloaded namespaces the controller's cache holds, kept
//! from the namespace watch's events as the cache itself is (a relist
//! replaces the set whole once it is complete), so that the
//! `orchestrator_namespaces` gauge is a length, not a count of the whole
//! cache at every reconcile: that count made a round of N namespaces cost
//! O(N²) (docs/benchmarks.md, the orchestrator at scale).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::watcher::Event;

use crate::view::consumer_of;

/// The offloaded namespaces seen, by name.
#[derive(Debug, Default)]
pub struct Offloaded {
    names: HashSet<String>,
    /// While a relist is under way: the names it delivered so far (the
    /// cache keeps the old objects until the relist is done, and so does
    /// this).
    relisting: Option<HashSet<String>>,
}

impl Offloaded {
    /// Take one event of the namespace watch into account.
    pub fn apply(&mut self, event: &Event<Namespace>) {
        match event {
            Event::Apply(ns) => note(&mut self.names, ns),
            Event::Delete(ns) => {
                self.names.remove(&name_of(ns));
            }
            Event::Init => self.relisting = Some(HashSet::new()),
            Event::InitApply(ns) => note(self.relisting.get_or_insert_with(HashSet::new), ns),
            Event::InitDone => {
                if let Some(listed) = self.relisting.take() {
                    self.names = listed;
                }
            }
        }
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

fn name_of(ns: &Namespace) -> String {
    ns.metadata.name.clone().unwrap_or_default()
}

/// `ns` in `set` if it is an offloaded namespace, out of it otherwise (its
/// labels may have changed).
fn note(set: &mut HashSet<String>, ns: &Namespace) {
    if consumer_of(ns).is_some() {
        set.insert(name_of(ns));
    } else {
        set.remove(&name_of(ns));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn offloaded(name: &str) -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name,
            "labels": {"liqo.io/remote-cluster-id": "c1"},
            "annotations": {"liqo.io/managed-by-namespace-map": "liqo-tenant-c1/c1"}}}))
        .unwrap()
    }

    fn plain(name: &str) -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name,
            "labels": {"liqo.io/remote-cluster-id": "c1", "liqo.io/tenant-namespace": "true"}}}))
        .unwrap()
    }

    #[test]
    fn counts_what_the_cache_holds() {
        let mut seen = Offloaded::default();
        seen.apply(&Event::Init);
        seen.apply(&Event::InitApply(offloaded("a")));
        seen.apply(&Event::InitApply(plain("liqo-tenant-c1")));
        assert_eq!(seen.len(), 0, "nothing until the listing is complete");
        seen.apply(&Event::InitDone);
        assert_eq!(seen.len(), 1);
        seen.apply(&Event::Apply(offloaded("b")));
        seen.apply(&Event::Apply(offloaded("b")));
        assert_eq!(seen.len(), 2, "a change of one seen is not another");
        // Its labels changed: no longer offloaded.
        seen.apply(&Event::Apply(plain("b")));
        assert_eq!(seen.len(), 1);
        seen.apply(&Event::Delete(offloaded("a")));
        assert!(seen.is_empty());
        // A relist replaces the set whole, the deleted-while-away included.
        seen.apply(&Event::Apply(offloaded("c")));
        seen.apply(&Event::Init);
        seen.apply(&Event::InitApply(offloaded("d")));
        assert_eq!(seen.len(), 1, "the old set until the relist is done");
        seen.apply(&Event::InitDone);
        assert_eq!(seen.len(), 1);
        seen.apply(&Event::Delete(offloaded("c")));
        assert_eq!(seen.len(), 1, "c went with the relist; d stays");
    }
}
