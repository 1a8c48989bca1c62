//! The two Liqo v1 kinds the controller reads — `ResourceSlice` and
//! `Tenant` (`authentication.liqo.io/v1beta1`) — and the small typed views
//! the decision needs.
//!
//! Both are kept as the API server sent them: `spec` and `status` stay raw
//! JSON, so a status written back carries every field this crate does not
//! know (`authParams`, the classes, `nodeLabels`, fields of later Liqo
//! releases) exactly as read. Typed accessors read what the decision needs
//! and report a malformed value instead of guessing.

use std::borrow::Cow;
use std::collections::BTreeMap;

use controller_core::liqo::{
    ACCEPTED, AUTHENTICATION_CONDITION, DENIED, ORIGIN_ID_LABEL, REMOTE_CLUSTER_ID_LABEL,
    REPLICATED_LABEL, RESOURCE_SLICE, TENANT,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use quantity::{Quantity, ResourceList};
use serde_json::Value;

/// A `ResourceSlice`: what a consumer asks of this provider. Replicated into
/// the consumer's tenant namespace by Liqo. Serialises with its
/// `apiVersion` and `kind`, as a write needs.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct ResourceSlice {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

/// A `Tenant`: one consumer peered with this provider, in its tenant
/// namespace.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct Tenant {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

macro_rules! liqo_resource {
    ($ty:ty, $kind:expr) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;
            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind.kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind.group)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind.version)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind.plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

liqo_resource!(ResourceSlice, RESOURCE_SLICE);
liqo_resource!(Tenant, TENANT);

macro_rules! with_type_meta {
    ($ty:ty, $kind:expr) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let mut out = serializer.serialize_struct($kind.kind, 5)?;
                out.serialize_field("apiVersion", &$kind.api_version())?;
                out.serialize_field("kind", $kind.kind)?;
                out.serialize_field("metadata", &self.metadata)?;
                out.serialize_field("spec", &self.spec)?;
                if let Some(status) = &self.status {
                    out.serialize_field("status", status)?;
                }
                out.end()
            }
        }
    };
}

with_type_meta!(ResourceSlice, RESOURCE_SLICE);
with_type_meta!(Tenant, TENANT);

/// `Accepted` or `Denied`, the only statuses Liqo's CRD allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    Accepted,
    Denied,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::Accepted => ACCEPTED,
            ConditionStatus::Denied => DENIED,
        }
    }
}

/// One entry of `status.conditions`, as far as the decision cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `None` when the status is empty or not one Liqo defines.
    pub status: Option<ConditionStatus>,
    pub reason: String,
    pub message: String,
    pub last_transition_time: Option<String>,
}

/// A value of the slice that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("spec.resources.{name}: {value:?} is not a quantity: {reason}")]
    BadQuantity {
        name: String,
        value: String,
        reason: String,
    },
    #[error("{field} is not a map of resource name to quantity")]
    NotAMap { field: &'static str },
}

fn str_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// Read a Kubernetes ResourceList (name → string or integer quantity).
fn resource_list(value: &Value, field: &'static str) -> Result<ResourceList, ModelError> {
    let Some(map) = value.as_object() else {
        return Err(ModelError::NotAMap { field });
    };
    let mut list = ResourceList::new();
    for (name, raw) in map {
        let text = match raw {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => other.to_string(),
        };
        let quantity: Quantity =
            text.trim()
                .parse()
                .map_err(|e: quantity::ParseError| ModelError::BadQuantity {
                    name: name.clone(),
                    value: text.clone(),
                    reason: e.to_string(),
                })?;
        list.insert(name.clone(), quantity);
    }
    Ok(list)
}

impl ResourceSlice {
    /// `spec.class`; `""` when unset, as Liqo reads it.
    pub fn class(&self) -> &str {
        str_at(&self.spec, "class").unwrap_or("")
    }

    /// `spec.consumerClusterID`, if set and not empty.
    pub fn consumer(&self) -> Option<&str> {
        str_at(&self.spec, "consumerClusterID").filter(|id| !id.is_empty())
    }

    /// Whether Liqo's replicator put this slice here (the labels
    /// `liqo.io/replicated=true` and `liqo.io/originID`).
    pub fn is_replicated(&self) -> bool {
        let labels = self.metadata.labels.as_ref();
        labels.is_some_and(|l| {
            l.get(REPLICATED_LABEL).map(String::as_str) == Some("true")
                && l.contains_key(ORIGIN_ID_LABEL)
        })
    }

    /// `spec.resources`: what is asked. Absent means nothing.
    pub fn requested(&self) -> Result<ResourceList, ModelError> {
        match self.spec.get("resources") {
            None | Some(Value::Null) => Ok(ResourceList::new()),
            Some(value) => resource_list(value, "spec.resources"),
        }
    }

    /// `status.resources`: what is granted now (`None` when absent).
    /// A value that does not parse counts as absent.
    pub fn granted(&self) -> Option<ResourceList> {
        let value = self.status.as_ref()?.get("resources")?;
        if value.is_null() {
            return None;
        }
        resource_list(value, "status.resources").ok()
    }

    /// The condition of type `kind` in `status.conditions`.
    pub fn condition(&self, kind: &str) -> Option<Condition> {
        let conditions = self.status.as_ref()?.get("conditions")?.as_array()?;
        let entry = conditions
            .iter()
            .find(|c| str_at(c, "type") == Some(kind))?;
        Some(Condition {
            status: match str_at(entry, "status") {
                Some(ACCEPTED) => Some(ConditionStatus::Accepted),
                Some(DENIED) => Some(ConditionStatus::Denied),
                _ => None,
            },
            reason: str_at(entry, "reason").unwrap_or_default().to_string(),
            message: str_at(entry, "message").unwrap_or_default().to_string(),
            last_transition_time: str_at(entry, "lastTransitionTime").map(str::to_string),
        })
    }

    /// Whether Liqo accepted the slice's authentication: nothing is decided
    /// before.
    pub fn is_authenticated(&self) -> bool {
        self.condition(AUTHENTICATION_CONDITION)
            .is_some_and(|c| c.status == Some(ConditionStatus::Accepted))
    }

    /// The value of the annotation `key`, if set.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    /// `namespace/name`, for logs and messages.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }
}

/// `spec.tenantCondition` of a Tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TenantCondition {
    /// May consume resources and negotiate new ones (the default).
    Active,
    /// Existing resources are kept; no new ones are negotiated.
    Cordoned,
    /// Neither consumes nor negotiates resources.
    Drained,
}

impl Tenant {
    /// The consumer's cluster ID: `spec.clusterID`, else the
    /// `liqo.io/remote-cluster-id` label Liqo also sets.
    pub fn cluster_id(&self) -> Option<&str> {
        str_at(&self.spec, "clusterID")
            .filter(|id| !id.is_empty())
            .or_else(|| {
                self.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(REMOTE_CLUSTER_ID_LABEL))
                    .map(String::as_str)
                    .filter(|id| !id.is_empty())
            })
    }

    /// `spec.tenantCondition`; unset (or unknown) reads as `Active`, the
    /// CRD's default.
    pub fn condition(&self) -> TenantCondition {
        match str_at(&self.spec, "tenantCondition") {
            Some("Cordoned") => TenantCondition::Cordoned,
            Some("Drained") => TenantCondition::Drained,
            _ => TenantCondition::Active,
        }
    }
}

/// One storage, ingress or load-balancer class offered on the consumer's
/// virtual node: `NAME`, or `NAME:default` for Liqo's default one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassOffer {
    pub name: String,
    pub default: bool,
}

/// A class offer that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected NAME or NAME:default, NAME a Kubernetes object name")]
pub struct ClassOfferError(String);

impl std::str::FromStr for ClassOffer {
    type Err = ClassOfferError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (name, default) = match text.trim().split_once(':') {
            None => (text.trim(), false),
            Some((name, "default")) => (name, true),
            Some(_) => return Err(ClassOfferError(text.to_string())),
        };
        let valid = !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid {
            return Err(ClassOfferError(text.to_string()));
        }
        Ok(ClassOffer {
            name: name.to_string(),
            default,
        })
    }
}

/// What the class writes beside the resources of every accepted grant, for
/// Liqo's virtual node (`status.storageClasses`, `ingressClasses`,
/// `loadBalancerClasses`, `nodeLabels`, `nodeSelector` of
/// `apis/authentication/v1beta1/resourceslice_types.go` lines 106-115, items
/// as `apis/core/v1beta1/common_types.go` lines 18-39). Liqo fills them only
/// for its default class; an empty one is left as the slice has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeExtras {
    pub storage_classes: Vec<ClassOffer>,
    pub ingress_classes: Vec<ClassOffer>,
    pub load_balancer_classes: Vec<ClassOffer>,
    pub node_labels: BTreeMap<String, String>,
    pub node_selector: BTreeMap<String, String>,
}

impl NodeExtras {
    /// The status fields to set, each as Liqo's CRD spells it.
    pub fn fields(&self) -> Vec<(&'static str, Value)> {
        let classes = |list: &[ClassOffer], key: &str| {
            Value::Array(
                list.iter()
                    .map(|c| {
                        let mut entry = serde_json::Map::new();
                        entry.insert(key.to_string(), Value::from(c.name.as_str()));
                        // `default,omitempty` in Go: absent when false.
                        if c.default {
                            entry.insert("default".into(), Value::Bool(true));
                        }
                        Value::Object(entry)
                    })
                    .collect(),
            )
        };
        let mut out = Vec::new();
        if !self.storage_classes.is_empty() {
            out.push((
                "storageClasses",
                classes(&self.storage_classes, "storageClassName"),
            ));
        }
        if !self.ingress_classes.is_empty() {
            out.push((
                "ingressClasses",
                classes(&self.ingress_classes, "ingressClassName"),
            ));
        }
        if !self.load_balancer_classes.is_empty() {
            out.push((
                "loadBalancerClasses",
                classes(&self.load_balancer_classes, "loadBalancerClassName"),
            ));
        }
        let map = |m: &BTreeMap<String, String>| serde_json::to_value(m).unwrap_or(Value::Null);
        if !self.node_labels.is_empty() {
            out.push(("nodeLabels", map(&self.node_labels)));
        }
        if !self.node_selector.is_empty() {
            out.push(("nodeSelector", map(&self.node_selector)));
        }
        out
    }
}

/// A resource list as the JSON map Kubernetes stores (canonical strings).
pub fn resource_list_json(list: &ResourceList) -> Value {
    let map: BTreeMap<String, String> = list.to_strings();
    serde_json::to_value(map).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use controller_core::liqo::RESOURCES_CONDITION;
    use serde_json::json;

    fn slice(value: Value) -> ResourceSlice {
        serde_json::from_value(value).expect("slice")
    }

    #[test]
    fn reads_spec_and_status() {
        let s = slice(json!({
            "apiVersion": "authentication.liqo.io/v1beta1",
            "kind": "ResourceSlice",
            "metadata": {"name": "a", "namespace": "liqo-tenant-c1",
                "labels": {"liqo.io/replicated": "true", "liqo.io/originID": "c1"}},
            "spec": {"class": "gold", "consumerClusterID": "c1",
                "resources": {"cpu": "2", "memory": "4Gi", "pods": 110}},
            "status": {"conditions": [
                {"type": "Authentication", "status": "Accepted", "reason": "R", "message": "M",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "resources": {"cpu": "1000m"}}
        }));
        assert_eq!(s.class(), "gold");
        assert_eq!(s.consumer(), Some("c1"));
        assert!(s.is_replicated());
        assert!(s.is_authenticated());
        let asked = s.requested().expect("request");
        assert_eq!(asked.to_strings()["pods"], "110");
        assert_eq!(asked.to_strings()["memory"], "4Gi");
        assert_eq!(
            s.granted(),
            Some(ResourceList::from_strings([("cpu", "1")]).expect("list"))
        );
        assert_eq!(s.condition(RESOURCES_CONDITION), None);
        assert_eq!(s.key(), "liqo-tenant-c1/a");
    }

    #[test]
    fn defaults_and_errors() {
        let s = slice(json!({"metadata": {"name": "a"}, "spec": {}}));
        assert_eq!(s.class(), "");
        assert_eq!(s.consumer(), None);
        assert!(!s.is_replicated());
        assert!(!s.is_authenticated());
        assert_eq!(s.requested(), Ok(ResourceList::new()));
        let bad = slice(json!({"metadata": {}, "spec": {"resources": {"cpu": "lots"}}}));
        assert!(matches!(
            bad.requested(),
            Err(ModelError::BadQuantity { ref name, .. }) if name == "cpu"
        ));
    }

    #[test]
    fn tenant_condition_and_id() {
        let t: Tenant = serde_json::from_value(json!({
            "metadata": {"name": "c1", "labels": {"liqo.io/remote-cluster-id": "c1"}},
            "spec": {"tenantCondition": "Cordoned"}
        }))
        .expect("tenant");
        assert_eq!(t.cluster_id(), Some("c1"));
        assert_eq!(t.condition(), TenantCondition::Cordoned);
        let t: Tenant =
            serde_json::from_value(json!({"metadata": {}, "spec": {"clusterID": "c2"}}))
                .expect("tenant");
        assert_eq!(t.cluster_id(), Some("c2"));
        assert_eq!(t.condition(), TenantCondition::Active);
    }
}
