//! The NamespaceOffloading the orchestrator writes (`offloading.liqo.io/v1beta1`,
//! named `offloading`, one per namespace), what it reads back from one, and
//! the annotations that explain the choice.
//!
//! The selection is `spec.clusterSelector` = one term,
//! `liqo.io/remote-cluster-id In [chosen…]`: Liqo evaluates it against the
//! labels of its virtual nodes, which carry the provider's cluster ID under
//! that key. A new object also gets `podOffloadingStrategy: Remote` (the
//! broker runs no workload itself); the mapping strategy is left to Liqo's
//! default. Other spec fields someone set are kept.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use controller_core::liqo::{
    LiqoKind, NAMESPACE_OFFLOADING, OFFLOADING_NAME, REMOTE_CLUSTER_ID_LABEL,
};

use crate::decision::{Decision, Pending, Rule};

/// The kind this controller writes: v1's, the orchestrator runs on Liqo v1.
const KIND: LiqoKind = NAMESPACE_OFFLOADING;
/// The last decision written: `{"chosen", "rule", "reason", "decidedAt"}`.
pub const DECISION_ANNOTATION: &str = "orchestrator.liqo-broker.io/decision";
/// A cheaper set waiting out the hold time: `{"providers", "since"}`.
pub const PENDING_ANNOTATION: &str = "orchestrator.liqo-broker.io/pending";
/// Marks the objects this controller manages.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "liqo-broker-orchestrator");

/// A `NamespaceOffloading`, spec and status kept as raw JSON so a write
/// carries every field this crate does not know.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct NamespaceOffloading {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Value,
    #[serde(default)]
    pub status: Option<Value>,
}

impl Resource for NamespaceOffloading {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND.kind)
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND.group)
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND.version)
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND.plural)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Serialize for NamespaceOffloading {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct(KIND.kind, 5)?;
        out.serialize_field("apiVersion", &KIND.api_version())?;
        out.serialize_field("kind", KIND.kind)?;
        out.serialize_field("metadata", &self.metadata)?;
        out.serialize_field("spec", &self.spec)?;
        if let Some(status) = &self.status {
            out.serialize_field("status", status)?;
        }
        out.end()
    }
}

/// The decision as recorded on the object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    pub chosen: Vec<String>,
    pub rule: Rule,
    pub reason: String,
    pub decided_at: jiff::Timestamp,
}

impl NamespaceOffloading {
    /// The providers its cluster selector names: the values of every
    /// `liqo.io/remote-cluster-id In` requirement, sorted.
    pub fn selected(&self) -> Vec<String> {
        let mut out: Vec<String> = self.spec["clusterSelector"]["nodeSelectorTerms"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| t["matchExpressions"].as_array().into_iter().flatten())
            .filter(|e| e["key"] == REMOTE_CLUSTER_ID_LABEL && e["operator"] == "In")
            .flat_map(|e| e["values"].as_array().into_iter().flatten())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn annotation<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.metadata
            .annotations
            .as_ref()?
            .get(key)
            .and_then(|v| serde_json::from_str(v).ok())
    }

    /// The cheaper set waiting out the hold time, if recorded.
    pub fn pending(&self) -> Option<Pending> {
        self.annotation(PENDING_ANNOTATION)
    }

    /// The last decision recorded.
    pub fn recorded(&self) -> Option<Recorded> {
        self.annotation(DECISION_ANNOTATION)
    }

    /// This object (or a new one in `namespace`) with `decision` applied.
    /// The explanation is replaced only when the selection changes, so it
    /// always tells why the current selection was made.
    pub fn apply(
        existing: Option<&NamespaceOffloading>,
        namespace: &str,
        decision: &Decision,
        now: jiff::Timestamp,
    ) -> NamespaceOffloading {
        let mut obj = existing.cloned().unwrap_or_else(|| NamespaceOffloading {
            metadata: ObjectMeta {
                name: Some(OFFLOADING_NAME.to_string()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            spec: json!({"podOffloadingStrategy": "Remote"}),
            status: None,
        });
        if !obj.spec.is_object() {
            obj.spec = json!({});
        }
        let moves = existing.is_none_or(|e| e.selected() != decision.chosen);
        obj.spec["clusterSelector"] = json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": REMOTE_CLUSTER_ID_LABEL, "operator": "In", "values": decision.chosen}]}]});
        obj.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string());
        let annotations = obj
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        if moves || !annotations.contains_key(DECISION_ANNOTATION) {
            let recorded = Recorded {
                chosen: decision.chosen.clone(),
                rule: decision.rule,
                reason: decision.explain(),
                decided_at: now,
            };
            annotations.insert(
                DECISION_ANNOTATION.to_string(),
                serde_json::to_string(&recorded).unwrap_or_default(),
            );
        }
        match &decision.pending {
            Some(p) => {
                annotations.insert(
                    PENDING_ANNOTATION.to_string(),
                    serde_json::to_string(p).unwrap_or_default(),
                );
            }
            None => {
                annotations.remove(PENDING_ANNOTATION);
            }
        }
        obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;

    fn decision(chosen: &[&str], rule: Rule) -> Decision {
        Decision {
            chosen: chosen.iter().map(|s| s.to_string()).collect(),
            rule,
            candidates: Vec::new().into(),
            excluded: Default::default(),
            pending: None,
            recheck: None,
        }
    }

    #[test]
    fn writes_and_reads_back_the_selector() {
        let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        let new =
            NamespaceOffloading::apply(None, "ns", &decision(&["p1", "p2"], Rule::Cheapest), now);
        assert_eq!(new.selected(), ["p1", "p2"]);
        assert_eq!(new.spec["podOffloadingStrategy"], "Remote");
        let rec = new.recorded().unwrap();
        assert_eq!(rec.rule, Rule::Cheapest);
        let body = serde_json::to_value(&new).unwrap();
        assert_eq!(body["apiVersion"], "offloading.liqo.io/v1beta1");
        assert_eq!(body["metadata"]["name"], "offloading");

        // Kept: the explanation of the move stays.
        let later = now.checked_add(jiff::SignedDuration::from_secs(5)).unwrap();
        let kept = NamespaceOffloading::apply(
            Some(&new),
            "ns",
            &decision(&["p1", "p2"], Rule::Kept),
            later,
        );
        assert_eq!(kept.recorded().unwrap(), rec);
        let moved = NamespaceOffloading::apply(
            Some(&kept),
            "ns",
            &decision(&["p3"], Rule::Replaced),
            later,
        );
        assert_eq!(moved.recorded().unwrap().rule, Rule::Replaced);
        assert_eq!(moved.selected(), ["p3"]);
    }
}
