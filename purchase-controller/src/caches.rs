//! What a round reads without asking an API server (issue 44): the
//! caches of the watches that already wake the Purchases
//! (`liqo_watch`: ForeignClusters, ResourceSlices,
//! NamespaceOffloadings, Configurations, GatewayClients, Connections), and
//! what a round has already seen of a peering's steps ([`Caches::recall`]:
//! each cluster's ID and CIDRs, the tenant namespaces, the provider's
//! objects once they let a step pass, the credentials Secret).
//!
//! A round used to read both clusters afresh — some 20 calls a round, 15
//! rounds a first purchase. The rules that keep a stale cache from making a
//! wrong irreversible decision:
//!
//! - a cache is trusted for what **exists**; an **absence** that would
//!   lead to a create is asked of the API server first, and a create that
//!   meets `AlreadyExists` (409) reads the object instead, as before;
//! - what is remembered only lets a round skip a read whose answer let
//!   the step pass before (a cluster ID that matched, CIDRs that were
//!   known, an endpoint that was published): it never makes anything, and
//!   it is forgotten after `--liqo-resync` (the watches' safety resync),
//!   when the peering is taken down, or when the catalog refuses the
//!   credentials it came from;
//! - a watch not served (Liqo's networking module missing) or not listed
//!   yet leaves its cache not ready, and the round asks the API server as
//!   before.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use kube::api::DynamicObject;
use kube::core::{ApiResource, TypeMeta};
use kube::runtime::reflector::Store;
use serde_json::Value;

/// The stores of the watched kinds, by group and plural.
#[derive(Clone, Default)]
pub struct Stores {
    by_kind: HashMap<String, (ApiResource, Store<DynamicObject>)>,
}

fn kind_key(ar: &ApiResource) -> String {
    format!("{}/{}", ar.group, ar.plural)
}

impl Stores {
    /// Add the store of `ar`'s watch.
    pub fn insert(&mut self, ar: &ApiResource, store: Store<DynamicObject>) {
        self.by_kind.insert(kind_key(ar), (ar.clone(), store));
    }

    /// The store of `ar` if it is watched and its first listing is in.
    fn ready(&self, ar: &ApiResource) -> Option<&(ApiResource, Store<DynamicObject>)> {
        let entry = self.by_kind.get(&kind_key(ar))?;
        // Ready once the watch has listed: a sync look at kube's own
        // readiness (no wait).
        matches!(entry.1.wait_until_ready().now_or_never(), Some(Ok(()))).then_some(entry)
    }

    /// Whether `ar` is watched and listed (its absences then mean
    /// "not seen yet" at worst).
    pub fn is_ready(&self, ar: &ApiResource) -> bool {
        self.ready(ar).is_some()
    }

    /// The cached objects of `ar` (in `namespace`, or all) whose label
    /// `key` is `value`, as JSON with their kind filled in; `None` when the
    /// cache is not ready.
    pub fn labelled(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
        key: &str,
        value: &str,
    ) -> Option<Vec<Value>> {
        let (ar, store) = self.ready(ar)?;
        let mut found: Vec<Arc<DynamicObject>> = store.state_filter(|o| {
            namespace.is_none_or(|n| o.metadata.namespace.as_deref() == Some(n))
                && o.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(key))
                    .is_some_and(|v| v == value)
        });
        // The oldest first, as a list from the API server orders them
        // for those who take the first.
        found.sort_by(|a, b| {
            a.metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp)
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        Some(found.iter().map(|o| as_json(ar, o)).collect())
    }

    /// The cached object `namespace/name` of `ar`: `Some(None)` when the
    /// ready cache does not hold it, `None` when the cache is not ready.
    pub fn get(&self, ar: &ApiResource, namespace: &str, name: &str) -> Option<Option<Value>> {
        let (ar, store) = self.ready(ar)?;
        let found = store.find(|o| {
            o.metadata.namespace.as_deref() == Some(namespace)
                && o.metadata.name.as_deref() == Some(name)
        });
        Some(found.map(|o| as_json(ar, &o)))
    }
}

/// An object of the cache as JSON, with `apiVersion` and `kind` (a list's
/// items may come without them; an owner reference needs them).
fn as_json(ar: &ApiResource, object: &DynamicObject) -> Value {
    let mut object = object.clone();
    if object.types.is_none() {
        object.types = Some(TypeMeta {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
        });
    }
    serde_json::to_value(object).unwrap_or(Value::Null)
}

type Remembered = (Instant, Arc<dyn Any + Send + Sync>);

/// The watches' stores and what rounds remembered.
pub struct Caches {
    pub stores: Stores,
    /// How long a remembered answer is used (`--liqo-resync`).
    fresh_for: Duration,
    remembered: Mutex<HashMap<String, Remembered>>,
}

impl Caches {
    pub fn new(stores: Stores, fresh_for: Duration) -> Caches {
        Caches {
            stores,
            fresh_for,
            remembered: Mutex::new(HashMap::new()),
        }
    }

    /// No stores, nothing remembered for long: every read goes to the API
    /// server (unit tests, a caller without watches).
    pub fn none() -> Caches {
        Caches::new(Stores::default(), Duration::ZERO)
    }

    /// What was remembered under `key`, if still fresh.
    pub fn recall<T: Clone + Send + Sync + 'static>(&self, key: &str) -> Option<T> {
        let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        let (at, value) = remembered.get(key)?;
        if at.elapsed() >= self.fresh_for {
            remembered.remove(key);
            return None;
        }
        value.downcast_ref::<T>().cloned()
    }

    /// Remember `value` under `key` for `--liqo-resync`.
    pub fn remember<T: Send + Sync + 'static>(&self, key: impl Into<String>, value: T) {
        if self.fresh_for.is_zero() {
            return;
        }
        self.remembered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.into(), (Instant::now(), Arc::new(value)));
    }

    /// Forget what is under `key`.
    pub fn forget(&self, key: &str) {
        self.remembered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Forget every key starting with `prefix` (a provider's peering
    /// taken down).
    pub fn forget_prefix(&self, prefix: &str) {
        self.remembered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| !k.starts_with(prefix));
    }
}

/// The key prefix of what is remembered about a peering with `provider`.
pub fn provider_key(provider: &str, what: &str) -> String {
    format!("provider/{provider}/{what}")
}

/// The prefix of every key [`provider_key`] makes for `provider`.
pub fn provider_prefix(provider: &str) -> String {
    format!("provider/{provider}/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    fn ar() -> ApiResource {
        controller_core::liqo::CONNECTION.api_resource()
    }

    fn connection(name: &str, provider: &str, at: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "liqo-tenant-p",
                         "creationTimestamp": at,
                         "labels": {"liqo.io/remote-cluster-id": provider}},
            "status": {"value": "Connected"}}))
        .unwrap()
    }

    #[test]
    fn a_cache_answers_once_listed_and_fills_in_the_kind() {
        let ar = ar();
        let mut writer = reflector::store::Writer::new(ar.clone());
        let mut stores = Stores::default();
        stores.insert(&ar, writer.as_reader());
        // Not listed yet: the API server is asked.
        assert!(!stores.is_ready(&ar));
        assert_eq!(
            stores.labelled(&ar, None, "liqo.io/remote-cluster-id", "p"),
            None
        );
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(connection(
            "b",
            "p",
            "2026-01-02T00:00:00Z",
        )));
        writer.apply_watcher_event(&Event::InitApply(connection(
            "a",
            "p",
            "2026-01-01T00:00:00Z",
        )));
        writer.apply_watcher_event(&Event::InitApply(connection(
            "q",
            "q",
            "2026-01-01T00:00:00Z",
        )));
        writer.apply_watcher_event(&Event::InitDone);
        assert!(stores.is_ready(&ar));
        let found = stores
            .labelled(&ar, Some("liqo-tenant-p"), "liqo.io/remote-cluster-id", "p")
            .unwrap();
        let names: Vec<_> = found
            .iter()
            .map(|o| o["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, [json!("a"), json!("b")], "oldest first, only p's");
        assert_eq!(found[0]["kind"], "Connection");
        assert!(stores
            .labelled(&ar, Some("elsewhere"), "liqo.io/remote-cluster-id", "p")
            .unwrap()
            .is_empty());
        assert_eq!(stores.get(&ar, "liqo-tenant-p", "zz"), Some(None));
        assert!(stores.get(&ar, "liqo-tenant-p", "a").unwrap().is_some());
        // Another kind: not watched.
        let other = controller_core::liqo::GATEWAY_SERVER.api_resource();
        assert_eq!(stores.get(&other, "liqo-tenant-p", "a"), None);
    }

    #[test]
    fn what_is_remembered_lasts_the_resync_and_can_be_forgotten() {
        let caches = Caches::new(Stores::default(), Duration::from_secs(60));
        caches.remember(provider_key("p", "cidrs"), "10.0.0.0/16".to_string());
        caches.remember(provider_key("q", "cidrs"), "10.1.0.0/16".to_string());
        assert_eq!(
            caches
                .recall::<String>(&provider_key("p", "cidrs"))
                .as_deref(),
            Some("10.0.0.0/16")
        );
        // Another type under the key: nothing.
        assert_eq!(caches.recall::<u32>(&provider_key("p", "cidrs")), None);
        caches.forget_prefix(&provider_prefix("p"));
        assert_eq!(caches.recall::<String>(&provider_key("p", "cidrs")), None);
        assert!(caches
            .recall::<String>(&provider_key("q", "cidrs"))
            .is_some());
        caches.forget(&provider_key("q", "cidrs"));
        assert!(caches
            .recall::<String>(&provider_key("q", "cidrs"))
            .is_none());
        // A resync of zero: nothing is kept.
        let none = Caches::none();
        none.remember("k", 1u32);
        assert_eq!(none.recall::<u32>("k"), None);
    }
}
