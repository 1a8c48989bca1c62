//! The watch caches indexed by consumer, kept from the watch events: the
//! slices of each consumer in each namespace and the Tenants of each
//! consumer cluster ID. A slice event finds its Tenant, a Tenant's
//! reconcile its slices and a chain notification for one cluster its
//! Tenants without walking a whole cache, which made a round of N slices
//! cost O(N²) (docs/benchmarks.md, the class controller at scale).
//!
//! The index follows the watch events as the kube-rs cache does (a
//! re-list is collected apart and replaces the index when it completes,
//! as the cache's buffer replaces the cache) and holds keys only: the
//! objects are read back through the cache, and callers check what they
//! select on against the cached object, so an index a step ahead of or
//! behind its cache never answers a wrong object.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use kube::ResourceExt;

use crate::model::{ResourceSlice, Tenant};

/// `(namespace, name)` of a cached object.
type Key = (String, String);

/// The consumer indexes, shared by the watch streams that fill them and the
/// reconciles that read them.
#[derive(Clone, Default)]
pub struct ConsumerIndex {
    inner: Arc<Mutex<Indexes>>,
}

#[derive(Default)]
struct Indexes {
    /// Slices by `(namespace, consumer cluster ID)`.
    slices: Reflected<(String, String)>,
    /// Tenants by consumer cluster ID.
    tenants: Reflected<String>,
}

/// A grouping kept from watch events, with the re-list under way.
struct Reflected<G> {
    live: Grouping<G>,
    relisting: Option<Grouping<G>>,
}

impl<G> Default for Reflected<G> {
    fn default() -> Self {
        Self {
            live: Grouping::default(),
            relisting: None,
        }
    }
}

impl<G: Clone + Eq + Hash> Reflected<G> {
    fn observe<K: kube::Resource>(&mut self, event: &Event<K>, group: impl Fn(&K) -> Option<G>) {
        match event {
            Event::Apply(o) => self.live.set_object(o, group(o)),
            Event::Delete(o) => self.live.set_object(o, None),
            Event::Init => self.relisting = Some(Grouping::default()),
            Event::InitApply(o) => {
                if let Some(next) = &mut self.relisting {
                    next.set_object(o, group(o));
                }
            }
            Event::InitDone => {
                if let Some(next) = self.relisting.take() {
                    self.live = next;
                }
            }
        }
    }
}

/// Objects grouped by a value of theirs, and each object's group, so that
/// an object whose value changes moves.
struct Grouping<G> {
    members: HashMap<G, BTreeSet<Key>>,
    group_of: HashMap<Key, G>,
}

impl<G> Default for Grouping<G> {
    fn default() -> Self {
        Self {
            members: HashMap::new(),
            group_of: HashMap::new(),
        }
    }
}

impl<G: Clone + Eq + Hash> Grouping<G> {
    /// Put `key` in `group`, or in none.
    fn set(&mut self, key: Key, group: Option<G>) {
        if let Some(old) = self.group_of.remove(&key) {
            if let Some(members) = self.members.get_mut(&old) {
                members.remove(&key);
                if members.is_empty() {
                    self.members.remove(&old);
                }
            }
        }
        if let Some(group) = group {
            self.members
                .entry(group.clone())
                .or_default()
                .insert(key.clone());
            self.group_of.insert(key, group);
        }
    }

    fn set_object<K: kube::Resource>(&mut self, object: &K, group: Option<G>) {
        if let Some(key) = key_of(object) {
            self.set(key, group);
        }
    }

    fn members(&self, group: &G) -> Vec<Key> {
        self.members
            .get(group)
            .map(|m| m.iter().cloned().collect())
            .unwrap_or_default()
    }
}

fn key_of<K: kube::Resource>(object: &K) -> Option<Key> {
    Some((object.meta().namespace.clone()?, object.name_any()))
}

impl ConsumerIndex {
    fn lock(&self) -> std::sync::MutexGuard<'_, Indexes> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take in an event of the slice watch: a slice is filed under its
    /// namespace and consumer.
    pub fn observe_slice(&self, event: &Event<ResourceSlice>) {
        self.lock().slices.observe(event, |s| {
            let namespace = s.metadata.namespace.clone()?;
            Some((namespace, s.consumer()?.to_string()))
        });
    }

    /// Take in an event of the Tenant watch: a Tenant is filed under its
    /// consumer cluster ID.
    pub fn observe_tenant(&self, event: &Event<Tenant>) {
        self.lock()
            .tenants
            .observe(event, |t| t.cluster_id().map(str::to_string));
    }

    /// The cached slices of `consumer` in `namespace` (of any class), in
    /// name order.
    pub fn slices_of(
        &self,
        cache: &Store<ResourceSlice>,
        namespace: &str,
        consumer: &str,
    ) -> Vec<Arc<ResourceSlice>> {
        let group = (namespace.to_string(), consumer.to_string());
        let keys = self.lock().slices.live.members(&group);
        read_back(cache, keys)
    }

    /// The cached Tenants of consumer cluster `consumer`, in
    /// `(namespace, name)` order.
    pub fn tenants_of(&self, cache: &Store<Tenant>, consumer: &str) -> Vec<Arc<Tenant>> {
        let keys = self.lock().tenants.live.members(&consumer.to_string());
        read_back(cache, keys)
    }
}

/// The objects of `keys` the cache holds.
fn read_back<K>(cache: &Store<K>, keys: Vec<Key>) -> Vec<Arc<K>>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    keys.iter()
        .filter_map(|(namespace, name)| cache.get(&ObjectRef::new(name).within(namespace)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;

    fn slice(name: &str, consumer: &str) -> ResourceSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"class": "gold", "consumerClusterID": consumer}
        }))
        .expect("slice")
    }

    fn names(slices: &[Arc<ResourceSlice>]) -> Vec<String> {
        slices.iter().map(|s| s.name_any()).collect()
    }

    /// The cache and the index, fed the same events as the watch feeds them.
    fn feed(
        writer: &mut reflector::store::Writer<ResourceSlice>,
        index: &ConsumerIndex,
        event: Event<ResourceSlice>,
    ) {
        writer.apply_watcher_event(&event);
        index.observe_slice(&event);
    }

    #[test]
    fn a_slice_is_found_under_its_consumer_as_the_cache_holds_it() {
        let (cache, mut writer) = reflector::store::<ResourceSlice>();
        let index = ConsumerIndex::default();
        for (name, consumer) in [("a", "c1"), ("b", "c1"), ("c", "c2")] {
            feed(&mut writer, &index, Event::Apply(slice(name, consumer)));
        }
        assert_eq!(names(&index.slices_of(&cache, "ns", "c1")), ["a", "b"]);
        assert_eq!(names(&index.slices_of(&cache, "ns", "c2")), ["c"]);
        assert!(index.slices_of(&cache, "other", "c1").is_empty());

        // Moved to another consumer: found under the new one only.
        feed(&mut writer, &index, Event::Apply(slice("b", "c2")));
        assert_eq!(names(&index.slices_of(&cache, "ns", "c1")), ["a"]);
        assert_eq!(names(&index.slices_of(&cache, "ns", "c2")), ["b", "c"]);

        // Deleted: gone from the index.
        feed(&mut writer, &index, Event::Delete(slice("a", "c1")));
        assert!(index.slices_of(&cache, "ns", "c1").is_empty());
        assert!(!index
            .lock()
            .slices
            .live
            .group_of
            .contains_key(&("ns".into(), "a".into())));
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_completes() {
        let (cache, mut writer) = reflector::store::<ResourceSlice>();
        let index = ConsumerIndex::default();
        feed(&mut writer, &index, Event::Apply(slice("a", "c1")));
        // A re-list without `a` and with `b`: until it completes, the
        // cache (and so the index) answers what it had.
        feed(&mut writer, &index, Event::Init);
        feed(&mut writer, &index, Event::InitApply(slice("b", "c1")));
        assert_eq!(names(&index.slices_of(&cache, "ns", "c1")), ["a"]);
        feed(&mut writer, &index, Event::InitDone);
        assert_eq!(names(&index.slices_of(&cache, "ns", "c1")), ["b"]);
        assert_eq!(index.lock().slices.live.group_of.len(), 1, "a forgotten");
    }
}
