//! kube-rs Event recorders, one per shard of the namespaces. A recorder
//! (kube-runtime 5.0, `events.rs`) remembers every Event it sent for six
//! minutes, to count repeats into a series, and walks that whole memory
//! each time it publishes: with one recorder a round that records an Event
//! for each of N namespaces cost O(N²) (docs/benchmarks.md, the
//! orchestrator at scale). An Event's series is keyed by the object it is
//! about, always in the same namespace, so each namespace always goes to
//! the same shard and Events are recorded exactly as with one recorder.

use std::hash::{DefaultHasher, Hash, Hasher};

use kube::runtime::events::{Recorder, Reporter};
use kube::Client;

/// Shards: each walks about 1/64 of what one recorder would.
pub const SHARDS: usize = 64;

/// The recorders, by namespace.
#[derive(Clone)]
pub struct Recorders {
    shards: Vec<Recorder>,
}

impl Recorders {
    pub fn new(client: Client, reporter: Reporter) -> Recorders {
        Recorders {
            shards: (0..SHARDS)
                .map(|_| Recorder::new(client.clone(), reporter.clone()))
                .collect(),
        }
    }

    /// The recorder of the Events about objects in `namespace`.
    pub fn for_namespace(&self, namespace: &str) -> &Recorder {
        &self.shards[shard(namespace)]
    }
}

/// `namespace`'s shard: the same for the life of the process.
fn shard(namespace: &str) -> usize {
    let mut h = DefaultHasher::new();
    namespace.hash(&mut h);
    (h.finish() % SHARDS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_keeps_its_shard_and_namespaces_spread() {
        assert_eq!(shard("app-1"), shard("app-1"));
        let used: std::collections::BTreeSet<usize> =
            (0..1000).map(|i| shard(&format!("app-{i}"))).collect();
        assert!(used.len() > SHARDS / 2, "{used:?}");
        assert!(used.iter().all(|s| *s < SHARDS));
    }
}
