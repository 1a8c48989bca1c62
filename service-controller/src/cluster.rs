//! The objects on the service provider's cluster: the instance namespace,
//! the customer's kubeconfig Secret and the Purchase (in the controller's
//! namespace), the generated secrets, the rendered objects and the binding
//! Secrets — applied with server-side apply under the field manager
//! `service-controller`, read, and removed (only what it made).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use kube::Client;
use serde_json::{json, Value};

use crate::instance::{self, Names};
use crate::template::{ObjectRef, MANAGED_BY, MANAGER};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "service-controller";

/// A failed step on the cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Refused(String),
}

/// Rendered objects checked to be namespaced ([`Cluster::resolve`]).
pub struct Resolved<'a>(Vec<(ApiResource, String, &'a Value)>);

/// One instance namespace as found.
#[derive(Debug, Clone)]
pub struct Found {
    pub namespace: String,
    pub contract_id: String,
    pub rendered: Vec<ObjectRef>,
    pub terminating: bool,
    /// The Liqo mapping strategy it is offloaded with
    /// ([`instance::MAPPING_ANNOTATION`]; `None`: made before it was
    /// recorded).
    pub mapping: Option<String>,
    /// The contract it is sold under now, when not `contract_id`'s
    /// ([`instance::CURRENT_CONTRACT_ANNOTATION`]).
    pub current: Option<String>,
    /// Each binding's objects, by the binding's [`instance::label_value`]
    /// ([`instance::BINDING_OBJECTS_PREFIX`]).
    pub bindings: BTreeMap<String, Vec<ObjectRef>>,
}

impl Found {
    /// The contract the instance is sold under now.
    pub fn current(&self) -> &str {
        self.current.as_deref().unwrap_or(&self.contract_id)
    }
}

/// The provider's cluster, as the controller uses it.
#[derive(Clone)]
pub struct Cluster {
    pub client: Client,
    /// Where Purchases and kubeconfig Secrets are kept.
    pub own_namespace: String,
}

fn apply() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// `object` as the body of a server-side apply. The API server reads that
/// body as YAML (`application/apply-patch+yaml`: `yaml.Unmarshal` in
/// k8s.io/apiserver `pkg/endpoints/handlers/patch.go`, applyPatcher), where
/// the characters JSON leaves raw are not read back as sent: NEL, LS and
/// PS are line breaks, folded with the blanks around them, and DEL, the
/// other C1 controls, U+FFFE and U+FFFF refuse the whole body (400). A
/// customer's value holding them is escaped (`\uXXXX`, the same
/// character in JSON and in YAML), so the object is stored as rendered.
fn apply_body(object: &Value) -> Result<Box<serde_json::value::RawValue>, ClusterError> {
    let text = serde_json::to_string(object)
        .map_err(|e| ClusterError::Refused(format!("cannot serialise an object: {e}")))?;
    let escaped = crate::template::escape_for_yaml(&text);
    serde_json::value::RawValue::from_string(escaped)
        .map_err(|e| ClusterError::Refused(format!("cannot serialise an object: {e}")))
}

/// `text` as one segment of a request's path: every byte but RFC 3986's
/// unreserved ones percent-encoded. kube builds paths by formatting names
/// in (kube-core `request.rs`, `format!("{}/{}?", url_path, name)`), so a
/// name holding `?`, `#` or `/` would change what is asked (C-12: a
/// rendered `x?dryRun=All&x=` reached the API server as `dryRun`). The
/// templates' names are checked first (`template::valid_name`); this is
/// for what gets past that check (a Role may be named `a:b`) and for
/// names read back from the rendered record. The API server decodes the
/// path before it reads the name (`net/url`'s `URL.Path`), so an encoded
/// name is the same name.
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn gone(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(e) if e.code == 404)
}

impl Cluster {
    /// Make (or keep) the instance namespace, annotated with its contract.
    pub async fn namespace(
        &self,
        names: &Names,
        offer: &str,
        plan: &str,
    ) -> Result<(), ClusterError> {
        let body = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {
                "name": names.namespace,
                "labels": {MANAGED_BY: MANAGER},
                "annotations": {
                    instance::CONTRACT_ANNOTATION: names.contract_id,
                    instance::CURRENT_CONTRACT_ANNOTATION: names.current,
                    instance::OFFER_ANNOTATION: offer,
                    instance::PLAN_ANNOTATION: plan,
                    instance::MAPPING_ANNOTATION: names.mapping,
                    // Its Purchase lives in the controller's namespace:
                    // purchase-controller offloads another namespace only
                    // when it names the Purchase's (issue 41).
                    "broker.liqo-broker.io/offloadable-by": self.own_namespace,
                },
            },
        });
        Api::<Namespace>::all(self.client.clone())
            .patch(&names.namespace, &apply(), &Patch::Apply(body))
            .await?;
        Ok(())
    }

    /// Record the rendered objects on the namespace.
    pub async fn record_rendered(
        &self,
        names: &Names,
        rendered: &[ObjectRef],
    ) -> Result<(), ClusterError> {
        let list = serde_json::to_string(rendered).unwrap_or_default();
        let body = json!({"metadata": {"annotations": {instance::RENDERED_ANNOTATION: list}}});
        Api::<Namespace>::all(self.client.clone())
            .patch(
                &names.namespace,
                &PatchParams::default(),
                &Patch::Merge(body),
            )
            .await?;
        Ok(())
    }

    /// Record the objects of binding `label` (its
    /// [`instance::label_value`]) on `namespace`; `None`: forget them.
    pub async fn record_binding_objects(
        &self,
        namespace: &str,
        label: &str,
        objects: Option<&[ObjectRef]>,
    ) -> Result<(), ClusterError> {
        let key = format!("{}{label}", instance::BINDING_OBJECTS_PREFIX);
        let value = objects.map(|o| serde_json::to_string(o).unwrap_or_default());
        let body = json!({"metadata": {"annotations": {key: value}}});
        Api::<Namespace>::all(self.client.clone())
            .patch(namespace, &PatchParams::default(), &Patch::Merge(body))
            .await?;
        Ok(())
    }

    /// Every instance namespace this controller made.
    pub async fn instances(&self) -> Result<Vec<Found>, ClusterError> {
        let selector = format!("{MANAGED_BY}={MANAGER}");
        let list = Api::<Namespace>::all(self.client.clone())
            .list(&ListParams::default().labels(&selector))
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|ns| {
                let annotations = ns.metadata.annotations.unwrap_or_default();
                Some(Found {
                    namespace: ns.metadata.name?,
                    contract_id: annotations.get(instance::CONTRACT_ANNOTATION)?.clone(),
                    rendered: annotations
                        .get(instance::RENDERED_ANNOTATION)
                        .and_then(|r| serde_json::from_str(r).ok())
                        .unwrap_or_default(),
                    terminating: ns.metadata.deletion_timestamp.is_some(),
                    mapping: annotations.get(instance::MAPPING_ANNOTATION).cloned(),
                    current: annotations
                        .get(instance::CURRENT_CONTRACT_ANNOTATION)
                        .cloned(),
                    bindings: annotations
                        .iter()
                        .filter_map(|(key, value)| {
                            let id = key.strip_prefix(instance::BINDING_OBJECTS_PREFIX)?;
                            Some((id.to_string(), serde_json::from_str(value).ok()?))
                        })
                        .collect(),
                })
            })
            .collect())
    }

    /// Apply a Secret of `data` (string values) in `namespace`.
    pub async fn secret(
        &self,
        namespace: &str,
        name: &str,
        data: &BTreeMap<String, String>,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(), ClusterError> {
        let mut labels = labels.clone();
        labels.insert(MANAGED_BY.into(), MANAGER.into());
        let body = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
            "type": "Opaque",
            "stringData": data,
        });
        Api::<Secret>::namespaced(self.client.clone(), namespace)
            .patch(name, &apply(), &Patch::Apply(apply_body(&body)?))
            .await?;
        Ok(())
    }

    /// A Secret's data as text (None when absent).
    pub async fn read_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ClusterError> {
        let secret = Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await?;
        Ok(secret.map(|s| {
            s.data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, ByteString(v))| (k, String::from_utf8_lossy(&v).into_owned()))
                .collect()
        }))
    }

    /// Delete a Secret (absent is fine).
    pub async fn delete_secret(&self, namespace: &str, name: &str) -> Result<(), ClusterError> {
        match Api::<Secret>::namespaced(self.client.clone(), namespace)
            .delete(name, &DeleteParams::default())
            .await
        {
            Err(e) if !gone(&e) => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// The Purchases it makes, in its own namespace.
    pub fn purchases(&self) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("broker.liqo-broker.io", "v1alpha1", "Purchase");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "purchases");
        Api::namespaced_with(self.client.clone(), &self.own_namespace, &resource)
    }

    /// Apply the Purchase; its status (None while purchase-controller has
    /// written none).
    pub async fn purchase(&self, name: &str, body: Value) -> Result<Option<Value>, ClusterError> {
        let written = self
            .purchases()
            .patch(name, &apply(), &Patch::Apply(body))
            .await?;
        Ok(written.data.get("status").cloned())
    }

    /// Delete the Purchase; true once it is gone (purchase-controller's
    /// finalizer holds it while it unpeers).
    pub async fn delete_purchase(&self, name: &str) -> Result<bool, ClusterError> {
        let api = self.purchases();
        match api.delete(name, &DeleteParams::default()).await {
            Err(e) if gone(&e) => return Ok(true),
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        Ok(api.get_opt(name).await?.is_none())
    }

    /// The name Liqo gave `namespace` at the customer's cluster
    /// ([`instance::remote_namespace`] of the NamespaceOffloading
    /// purchase-controller made there, `offloading.liqo.io/v1beta1`);
    /// `None` while there is none or Liqo has not named it yet.
    pub async fn remote_namespace(&self, namespace: &str) -> Result<Option<String>, ClusterError> {
        let gvk = GroupVersionKind::gvk("offloading.liqo.io", "v1beta1", "NamespaceOffloading");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "namespaceoffloadings");
        let offloading =
            Api::<DynamicObject>::namespaced_with(self.client.clone(), namespace, &resource)
                .get_opt(instance::OFFLOADING)
                .await?;
        Ok(offloading.and_then(|o| instance::remote_namespace(&o.data)))
    }

    /// The API resource of `apiVersion`/`kind`, refused unless namespaced.
    async fn resource(&self, api_version: &str, kind: &str) -> Result<ApiResource, ClusterError> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.client, &gvk).await?;
        if capabilities.scope != Scope::Namespaced {
            return Err(ClusterError::Refused(format!(
                "{kind} ({api_version}) is cluster-scoped; only objects in the instance namespace may be made"
            )));
        }
        Ok(resource)
    }

    /// Each rendered object with its API resource, every one checked
    /// namespaced before any is written (a kind served cluster-scoped is
    /// [`ClusterError::Refused`]).
    pub async fn resolve<'a>(&self, objects: &'a [Value]) -> Result<Resolved<'a>, ClusterError> {
        let mut resolved = Vec::with_capacity(objects.len());
        for object in objects {
            let r = crate::template::reference(object);
            resolved.push((
                self.resource(&r.api_version, &r.kind).await?,
                r.name,
                object,
            ));
        }
        Ok(Resolved(resolved))
    }

    /// Server-side apply each resolved object into `namespace`.
    pub async fn apply_objects(
        &self,
        namespace: &str,
        objects: Resolved<'_>,
    ) -> Result<(), ClusterError> {
        for (resource, name, object) in objects.0 {
            Api::<DynamicObject>::namespaced_with(
                self.client.clone(),
                &segment(namespace),
                &resource,
            )
            .patch(
                &segment(&name),
                &apply(),
                &Patch::Apply(apply_body(object)?),
            )
            .await?;
        }
        Ok(())
    }

    /// Delete the rendered objects; true once all are gone.
    pub async fn delete_objects(
        &self,
        namespace: &str,
        objects: &[ObjectRef],
    ) -> Result<bool, ClusterError> {
        let mut all_gone = true;
        for r in objects {
            let resource = match self.resource(&r.api_version, &r.kind).await {
                Ok(resource) => resource,
                // A kind no longer served has no objects left to remove.
                Err(ClusterError::Kube(e)) if gone(&e) => continue,
                Err(e) => return Err(e),
            };
            let api = Api::<DynamicObject>::namespaced_with(
                self.client.clone(),
                &segment(namespace),
                &resource,
            );
            let name = segment(&r.name);
            match api.delete(&name, &DeleteParams::background()).await {
                Err(e) if gone(&e) => {}
                Err(e) => return Err(e.into()),
                Ok(_) => all_gone &= api.get_opt(&name).await?.is_none(),
            }
        }
        Ok(all_gone)
    }

    /// Delete the instance namespace (absent is fine).
    pub async fn delete_namespace(&self, namespace: &str) -> Result<(), ClusterError> {
        match Api::<Namespace>::all(self.client.clone())
            .delete(namespace, &DeleteParams::default())
            .await
        {
            Err(e) if !gone(&e) => Err(e.into()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// C-12: a name goes into a request path as one segment, whatever it
    /// holds; a Kubernetes name is unchanged.
    #[test]
    fn names_are_one_path_segment() {
        assert_eq!(segment("x?dryRun=All&x="), "x%3FdryRun%3DAll%26x%3D");
        assert_eq!(segment("/../"), "%2F..%2F");
        assert_eq!(segment("a:b#c d%"), "a%3Ab%23c%20d%25");
        assert_eq!(segment("svc-c-1.db"), "svc-c-1.db");
        assert_eq!(segment("é"), "%C3%A9");
    }
}
