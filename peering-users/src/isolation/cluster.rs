//! The reads a decision needs and the writes that carry it out: the
//! namespaces, Liqo's Configurations, ShadowEndpointSlices and
//! NamespaceOffloadings and the NetworkPolicies in, the policies this
//! controller owns (by [`render::OWNED_SELECTOR`]: the tenant, protection,
//! service and buyers' ones alike) created, replaced and deleted out.
//! Nothing else is ever written.

use std::collections::{BTreeMap, BTreeSet};

use controller_core::liqo::{
    CONFIGURATION, NAMESPACE_OFFLOADING, REMOTE_CLUSTER_ID_LABEL, SHADOW_ENDPOINT_SLICE,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::Value;

use super::render::{
    self, direct, service, Configuration, Observed, Plan, Settings, MANAGED_BY, MANAGED_BY_LABEL,
};

/// A read or a write that failed, naming the object.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct IsolationError {
    pub what: String,
    #[source]
    pub source: kube::Error,
}

fn failed(what: impl Into<String>) -> impl FnOnce(kube::Error) -> IsolationError {
    let what = what.into();
    move |source| IsolationError { what, source }
}

/// What one pass wrote.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Written {
    pub created: usize,
    pub replaced: usize,
    pub deleted: usize,
    /// Writes refused for a reason that a later pass will not change by
    /// itself (a namespace being deleted, a policy of the same name that
    /// is not ours): logged, not retried at once.
    pub refused: Vec<String>,
    /// The policies of those refused writes, `<namespace>/<name>` (a
    /// buyer's policy among them is reported as not applied).
    pub refused_policies: BTreeMap<String, String>,
}

/// Read what [`render::plan`] needs, and the policies this controller
/// owns now (by namespace and name).
pub async fn observe(
    client: &Client,
    settings: &Settings,
) -> Result<(Observed, BTreeMap<(String, String), NetworkPolicy>), IsolationError> {
    let namespaces: Vec<render::Namespace> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(failed("list namespaces"))?
        .items
        .into_iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .map(|n| render::Namespace {
            name: n.metadata.name.unwrap_or_default(),
            labels: n.metadata.labels.unwrap_or_default(),
            contract: n
                .metadata
                .annotations
                .and_then(|mut a| a.remove(service::CONTRACT_ANNOTATION)),
        })
        .collect();
    let configurations = list_or_none(client, &CONFIGURATION, Some(REMOTE_CLUSTER_ID_LABEL))
        .await
        .map_err(failed("list Configurations"))?
        .iter()
        .map(configuration)
        .collect();
    let shadow_endpoint_slices = if settings.direct_connections {
        list_or_none(client, &SHADOW_ENDPOINT_SLICE, None)
            .await
            .map_err(failed("list ShadowEndpointSlices"))?
            .into_iter()
            .filter_map(shadow_endpoint_slice)
            .collect()
    } else {
        Vec::new()
    };
    let offloadings = list_or_none(client, &NAMESPACE_OFFLOADING, None)
        .await
        .map_err(failed("list NamespaceOffloadings"))?
        .iter()
        .map(|o| service::Offloading {
            namespace: o.metadata.namespace.clone().unwrap_or_default(),
            name: o.metadata.name.clone().unwrap_or_default(),
            clusters: service::offloaded_to(&o.data["status"]),
        })
        .collect();
    // Where others' ingress policies decide: the protected namespaces and
    // the services' instance namespaces.
    let decided_by_theirs: BTreeSet<&str> = namespaces
        .iter()
        .filter(|n| settings.protected.contains(&n.name) || service::is_instance(n))
        .map(|n| n.name.as_str())
        .collect();
    let policies = Api::<NetworkPolicy>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(failed("list NetworkPolicies"))?
        .items;
    let mut foreign_ingress: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut owned = BTreeMap::new();
    for p in policies {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        if is_owned(&p) {
            owned.insert((ns, name), p);
        } else if decided_by_theirs.contains(ns.as_str()) && has_ingress(&p) {
            foreign_ingress.entry(ns).or_default().push(name);
        }
    }
    Ok((
        Observed {
            namespaces,
            configurations,
            foreign_ingress,
            buyer_policies: Default::default(),
            shadow_endpoint_slices,
            offloadings,
        },
        owned,
    ))
}

/// Every object of a Liqo kind (with `labels`, those that have them);
/// none when the kind is not served (that Liqo module is not installed:
/// nothing of it to read).
async fn list_or_none(
    client: &Client,
    kind: &controller_core::liqo::LiqoKind,
    labels: Option<&str>,
) -> Result<Vec<DynamicObject>, kube::Error> {
    let params = match labels {
        Some(l) => ListParams::default().labels(l),
        None => ListParams::default(),
    };
    match Api::<DynamicObject>::all_with(client.clone(), &kind.api_resource())
        .list(&params)
        .await
    {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// A ShadowEndpointSlice with Liqo's direct-connection annotation; those
/// without have nothing to say here.
fn shadow_endpoint_slice(object: DynamicObject) -> Option<direct::ShadowEndpointSlice> {
    let data = object.metadata.annotations?.remove(direct::ANNOTATION)?;
    Some(direct::ShadowEndpointSlice {
        namespace: object.metadata.namespace.unwrap_or_default(),
        name: object.metadata.name.unwrap_or_default(),
        data,
    })
}

fn configuration(object: &DynamicObject) -> Configuration {
    let texts = |part: &str, kind: &str| -> Vec<String> {
        object.data[part]["remote"]["cidr"][kind]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    Configuration {
        namespace: object.metadata.namespace.clone().unwrap_or_default(),
        name: object.metadata.name.clone().unwrap_or_default(),
        cluster_id: object
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REMOTE_CLUSTER_ID_LABEL))
            .cloned(),
        pod: texts("status", "pod"),
        external: texts("status", "external"),
        real_pod: texts("spec", "pod"),
        real_external: texts("spec", "external"),
    }
}

fn is_owned(p: &NetworkPolicy) -> bool {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY)
}

/// Whether the policy isolates pods for ingress (as the API server
/// defaulted `policyTypes`).
fn has_ingress(p: &NetworkPolicy) -> bool {
    p.spec.as_ref().is_some_and(|s| {
        s.policy_types
            .as_ref()
            .is_none_or(|t| t.iter().any(|t| t == "Ingress"))
    })
}

/// Whether `current` already says what `wanted` says (the spec and this
/// controller's labels; the server's own fields aside).
fn same(current: &NetworkPolicy, wanted: &NetworkPolicy) -> bool {
    let spec = |p: &NetworkPolicy| serde_json::to_value(&p.spec).unwrap_or(Value::Null);
    current.metadata.labels == wanted.metadata.labels && spec(current) == spec(wanted)
}

/// Make the owned policies what `plan` says: create the missing, replace
/// the changed, delete the ones no longer wanted.
pub async fn apply(
    client: &Client,
    plan: &Plan,
    mut owned: BTreeMap<(String, String), NetworkPolicy>,
) -> Result<Written, IsolationError> {
    let mut written = Written::default();
    for wanted in &plan.policies {
        let ns = wanted.metadata.namespace.clone().unwrap_or_default();
        let name = wanted.metadata.name.clone().unwrap_or_default();
        let api = Api::<NetworkPolicy>::namespaced(client.clone(), &ns);
        let what = format!("NetworkPolicy {ns}/{name}");
        match owned.remove(&(ns.clone(), name.clone())) {
            Some(current) if same(&current, wanted) => {}
            Some(current) => {
                let mut next = wanted.clone();
                next.metadata.resource_version = current.metadata.resource_version;
                match api.replace(&name, &PostParams::default(), &next).await {
                    Ok(_) => written.replaced += 1,
                    // Changed or gone since the read: the watch brings
                    // the next pass.
                    Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                    Err(e) => return Err(failed(format!("replace {what}"))(e)),
                }
            }
            None => match api.create(&PostParams::default(), wanted).await {
                Ok(_) => written.created += 1,
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    let why = "a policy of that name exists and is not this controller's";
                    written.refused.push(format!("{what}: {why}"));
                    written
                        .refused_policies
                        .insert(format!("{ns}/{name}"), why.to_string());
                }
                // A namespace being deleted takes no new objects.
                Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => {
                    written.refused.push(format!("{what}: {}", s.message));
                    written
                        .refused_policies
                        .insert(format!("{ns}/{name}"), s.message.clone());
                }
                Err(e) => return Err(failed(format!("create {what}"))(e)),
            },
        }
    }
    for ((ns, name), _) in owned {
        let api = Api::<NetworkPolicy>::namespaced(client.clone(), &ns);
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => written.deleted += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(failed(format!("delete NetworkPolicy {ns}/{name}"))(e)),
        }
    }
    Ok(written)
}
