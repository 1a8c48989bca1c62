//! The Liqo objects on this cluster a peering waits on, watched (issue
//! 44): a change Liqo makes to one wakes the Purchases it concerns at
//! once, where a round used to look again on a doubling timer.
//!
//! Watched (Liqo v1; their `list` and `watch` are in the shipped RBAC):
//! the ForeignClusters (Liqo's peering status, its network and
//! authentication modules' conditions), the ResourceSlices (the grant, as
//! the crdReplicator brings the provider's answer back), the
//! NamespaceOffloadings (Liqo's offloading status) and, with
//! `--auto-peer`, the networking objects here (Configurations,
//! GatewayClients, Connections) and the signed-nonce Secrets (by their
//! label, `liqo.io/signed-nonce`). What the provider's API server holds
//! (its GatewayServer, nonce and Tenant) cannot be watched: Liqo's
//! peering-user role grants `get` and `list` there, not `watch`
//! (`deployments/liqo/files/liqo-peering-user-tenant-ns-ClusterRole.yaml`),
//! so a round waiting on the provider still looks again on the timer.
//!
//! Only what Liqo writes wakes a Purchase: an object's `status` (a
//! Secret's `data`), compared with the last one seen, so the objects the
//! controller creates or replaces itself (their status still empty) do not
//! bring a round of their own. A deletion wakes too.
//!
//! The watches of Liqo's kinds also keep their objects (kube's reflector
//! stores), which the rounds read instead of listing them
//! ([`crate::caches`]); the signed-nonce Secrets are only followed.

use std::collections::HashMap;
use std::sync::Arc;

use controller_core::liqo::{CONFIGURATION, CONNECTION, GATEWAY_CLIENT, REMOTE_CLUSTER_ID_LABEL};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value;

use crate::caches::Stores;
use crate::decision::Phase;
use crate::liqo::Generation;
use crate::model::Purchase;

/// `pkg/consts/authentication.go:22-29`: the label of Liqo's signed-nonce
/// Secrets.
const SIGNED_NONCE_LABEL: &str = "liqo.io/signed-nonce";

/// Whom a change wakes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Wake {
    /// The Purchases of this provider (objects labelled
    /// `liqo.io/remote-cluster-id`, ForeignClusters by their cluster ID).
    Provider(String),
    /// The Purchases offloading this namespace (its
    /// NamespaceOffloading).
    Namespace(String),
}

/// What an object is watched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    /// Its provider, from its `liqo.io/remote-cluster-id` label or its
    /// `spec.clusterID` (a ForeignCluster).
    Provider,
    /// Its namespace (a NamespaceOffloading).
    Namespace,
}

/// One watched kind.
struct Watched {
    resource: ApiResource,
    by: By,
}

/// The kinds watched for `generation` and `--auto-peer`: none for Liqo
/// v0.x (its peering is waited for on the timer).
fn watched(generation: Generation, auto_peer: bool) -> Vec<Watched> {
    if generation == Generation::V0 {
        return Vec::new();
    }
    let mut kinds = vec![
        Watched {
            resource: generation.foreign_cluster(),
            by: By::Provider,
        },
        Watched {
            resource: crate::liqo::resource_slice(),
            by: By::Provider,
        },
        Watched {
            resource: generation.namespace_offloading(),
            by: By::Namespace,
        },
    ];
    if auto_peer {
        for kind in [CONFIGURATION, GATEWAY_CLIENT, CONNECTION] {
            kinds.push(Watched {
                resource: kind.api_resource(),
                by: By::Provider,
            });
        }
    }
    kinds
}

/// What of an object Liqo writes: its `status`, a Secret's `data`.
fn written_by_liqo(object: &Value) -> Value {
    match object.get("status") {
        Some(status) => status.clone(),
        None => object.get("data").cloned().unwrap_or(Value::Null),
    }
}

/// Whom a change of `object`, watched `by`, wakes.
fn wake_of(object: &Value, by: By) -> Option<Wake> {
    let metadata = &object["metadata"];
    match by {
        By::Provider => metadata["labels"][REMOTE_CLUSTER_ID_LABEL]
            .as_str()
            .or_else(|| object["spec"]["clusterID"].as_str())
            .map(|p| Wake::Provider(p.to_string())),
        By::Namespace => metadata["namespace"]
            .as_str()
            .map(|n| Wake::Namespace(n.to_string())),
    }
}

/// The last state seen of each object of one watched kind, by
/// `namespace/name`.
#[derive(Debug, Default)]
pub struct Seen {
    last: HashMap<String, Value>,
}

impl Seen {
    /// Whom `event` wakes: a change of what Liqo writes, or a deletion;
    /// the objects listed when the watch (re)starts wake nobody (the
    /// controller's own start, or its periodic resync, looks at every
    /// Purchase), they are only remembered.
    fn event(&mut self, event: Event<Value>, by: By) -> Option<Wake> {
        match event {
            Event::Init | Event::InitDone => None,
            Event::InitApply(object) => {
                self.last.insert(key(&object), written_by_liqo(&object));
                None
            }
            Event::Apply(object) => {
                let now = written_by_liqo(&object);
                let before = self.last.insert(key(&object), now.clone());
                // An object first seen with nothing written by Liqo yet is
                // one just created (by this controller, mostly).
                let changed = before.unwrap_or(Value::Null) != now;
                changed.then(|| wake_of(&object, by)).flatten()
            }
            Event::Delete(object) => {
                self.last.remove(&key(&object));
                wake_of(&object, by)
            }
        }
    }
}

fn key(object: &Value) -> String {
    format!(
        "{}/{}",
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The Purchases among `all` that `wake` concerns and that wait on Liqo:
/// those of its provider (`status.providerClusterID`), or those listing its
/// namespace, unless settled (Ready, Ended, Failed: their periodic resync
/// looks at them, and another Purchase's peering steps are not theirs).
pub fn purchases_woken<'a>(
    wake: &'a Wake,
    all: &'a [Arc<Purchase>],
) -> impl Iterator<Item = &'a Arc<Purchase>> + 'a {
    let waiting = |p: &Purchase| {
        let phase = p
            .status
            .as_ref()
            .map(|s| s.phase.as_str())
            .unwrap_or_default();
        ![Phase::Ready, Phase::Ended, Phase::Failed]
            .iter()
            .any(|settled| settled.as_str() == phase)
    };
    all.iter()
        .filter(move |p| waiting(p))
        .filter(move |p| match wake {
            Wake::Provider(provider) => {
                p.status
                    .as_ref()
                    .and_then(|s| s.provider_cluster_id.as_deref())
                    == Some(provider.as_str())
            }
            Wake::Namespace(namespace) => p.spec.namespaces.iter().any(|n| n == namespace),
        })
}

/// Every change of the watched Liqo objects, as whom it wakes, and the
/// stores the watches keep for the rounds to read ([`crate::caches`]; an
/// event reaches its store before it wakes anyone, so a woken round reads
/// the change). A watch that fails (a kind not served, say) retries with
/// kube's default backoff, says so in the log, and its store stays not
/// ready (the rounds then ask the API server).
pub fn changes(
    client: &Client,
    generation: Generation,
    auto_peer: bool,
    secret_scope: &crate::secret_scope::SecretScope,
) -> (Stores, impl Stream<Item = Wake> + Send + 'static) {
    let mut stores = Stores::default();
    let mut streams: Vec<futures::stream::BoxStream<'static, Wake>> =
        watched(generation, auto_peer)
            .into_iter()
            .map(|w| {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &w.resource);
                let writer = reflector::store::Writer::new(w.resource.clone());
                stores.insert(&w.resource, writer.as_reader());
                let kind = w.resource.plural.clone();
                let events = watcher(api, watcher::Config::default())
                    .reflect(writer)
                    .map(|e| e.map(as_json));
                follow(events, kind, w.by).boxed()
            })
            .collect();
    if auto_peer && generation == Generation::V1 {
        let events = signed_nonce_secrets(client, secret_scope);
        streams.push(follow(events, "signed-nonce secrets".into(), By::Provider).boxed());
    }
    (stores, futures::stream::select_all(streams))
}

/// The signed-nonce Secrets' events (by their label; not cached: a round
/// reads the one it needs).
/// With `--secret-namespaces`, one watch per listed namespace (a watch
/// over all needs a ClusterRole on Secrets; a tenant namespace not listed
/// is refused before any peering, `crate::secret_scope`).
fn signed_nonce_secrets(
    client: &Client,
    scope: &crate::secret_scope::SecretScope,
) -> futures::stream::BoxStream<'static, Result<Event<Value>, watcher::Error>> {
    let watches = scope.apis::<Secret>(client).into_iter().map(|api| {
        let config = watcher::Config::default().labels(SIGNED_NONCE_LABEL);
        watcher(api, config).map(|e| e.map(as_json)).boxed()
    });
    futures::stream::select_all(watches).boxed()
}

/// An event with its object as JSON (what [`Seen`] reads).
fn as_json<K: serde::Serialize>(event: Event<K>) -> Event<Value> {
    let json = |o: K| serde_json::to_value(o).unwrap_or(Value::Null);
    match event {
        Event::Apply(o) => Event::Apply(json(o)),
        Event::Delete(o) => Event::Delete(json(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(json(o)),
        Event::InitDone => Event::InitDone,
    }
}

fn watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher::watcher(api, config).default_backoff()
}

/// The wakes of one kind's events.
fn follow(
    events: impl Stream<Item = Result<Event<Value>, watcher::Error>> + Send + 'static,
    kind: String,
    by: By,
) -> impl Stream<Item = Wake> + Send + 'static {
    let mut seen = Seen::default();
    events.filter_map(move |event| {
        let wake = match event {
            Ok(event) => seen.event(event, by),
            Err(error) => {
                tracing::debug!(%error, kind, "a watch of Liqo's objects failed; retrying");
                None
            }
        };
        std::future::ready(wake)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;
    use serde_json::json;

    fn object(name: &str, provider: &str, status: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "liqo-tenant-p",
                            "labels": {REMOTE_CLUSTER_ID_LABEL: provider}},
               "spec": {"x": 1}, "status": status})
    }

    #[test]
    fn only_what_liqo_writes_wakes_the_purchases_of_the_provider() {
        let mut seen = Seen::default();
        let by = By::Provider;
        // Listed at the start: remembered, nobody woken.
        assert_eq!(
            seen.event(Event::InitApply(object("a", "p", json!({"v": 1}))), by),
            None
        );
        // The same status again (a spec or metadata change): nobody.
        assert_eq!(
            seen.event(Event::Apply(object("a", "p", json!({"v": 1}))), by),
            None
        );
        // Liqo writes the status: the provider's Purchases.
        assert_eq!(
            seen.event(Event::Apply(object("a", "p", json!({"v": 2}))), by),
            Some(Wake::Provider("p".into()))
        );
        // Created with no status (by this controller): nobody.
        let created = json!({"metadata": {"name": "b", "namespace": "liqo-tenant-p",
                                          "labels": {REMOTE_CLUSTER_ID_LABEL: "p"}}});
        assert_eq!(seen.event(Event::Apply(created.clone()), by), None);
        // Deleted: woken.
        assert_eq!(
            seen.event(Event::Delete(created), by),
            Some(Wake::Provider("p".into()))
        );
    }

    #[test]
    fn a_foreign_cluster_without_the_label_is_known_by_its_cluster_id() {
        let fc = json!({"metadata": {"name": "milan"}, "spec": {"clusterID": "p-1"}});
        assert_eq!(
            wake_of(&fc, By::Provider),
            Some(Wake::Provider("p-1".into()))
        );
        let secret = json!({"metadata": {"name": "s", "namespace": "n"}, "data": {"k": "dg=="}});
        assert_eq!(written_by_liqo(&secret), json!({"k": "dg=="}));
    }

    #[test]
    fn a_change_wakes_the_purchases_of_its_provider_or_namespace() {
        use crate::model::{PurchaseSpec, PurchaseStatus};
        let mut of_p = Purchase::new("of-p", PurchaseSpec::default());
        of_p.status = Some(PurchaseStatus {
            provider_cluster_id: Some("p".into()),
            ..PurchaseStatus::default()
        });
        let apps = Purchase::new(
            "apps",
            PurchaseSpec {
                namespaces: vec!["apps".into()],
                ..PurchaseSpec::default()
            },
        );
        // Ready: its resync looks at it.
        let mut ready = of_p.clone();
        ready.metadata.name = Some("ready".into());
        if let Some(status) = ready.status.as_mut() {
            status.phase = "Ready".into();
        }
        let all = [of_p, apps, ready].map(Arc::new);
        let names = |wake: Wake| {
            purchases_woken(&wake, &all)
                .map(|p| p.name_any())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(Wake::Provider("p".into())), ["of-p"]);
        assert_eq!(names(Wake::Namespace("apps".into())), ["apps"]);
        assert!(names(Wake::Provider("q".into())).is_empty());
    }
}
