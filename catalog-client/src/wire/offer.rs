//! Offers and plans as every read returns them (`GET /offers`, `GET
//! /offer/{id}`, the feed). Mirrors `catalog/src/offers/offer.rs` (`Offer`,
//! `Plan`) and `catalog/src/offers/stamps.rs` (`Writer`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quantity::ResourceList;
use serde::{Deserialize, Serialize};

use super::cost::Cost;
use super::provider::LiqoGeneration;

/// An offer as stored and as every read returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offer {
    /// The offer id (the `{id}` of `/offer/{id}`).
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub offer_type: String,
    pub description: String,
    /// Plans keyed by plan id.
    pub plans: BTreeMap<String, Plan>,
    /// Provider labels (Kubernetes label keys and values), `{}` if none.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Owning provider's Liqo cluster ID.
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    /// Owning provider's cluster name.
    pub cluster_name: String,
    /// The Liqo generations the owner peers with (server-added).
    #[serde(default)]
    pub liqo: Vec<LiqoGeneration>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Increases by one with every write to this id (deletions included).
    pub version: u64,
}

/// One plan of an offer, in its canonical output form (`name`, never the
/// input spelling `planName`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub name: String,
    #[serde(rename = "planID", default, skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    pub cost: Cost,
    /// Resource name → Kubernetes quantity.
    pub resources: ResourceList,
    /// When a write last changed this plan; server-set.
    #[serde(rename = "updatedAt", default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
    /// Who made that change; server-set.
    #[serde(rename = "updatedBy", default, skip_serializing_if = "Option::is_none")]
    pub updated_by: Option<Writer>,
}

/// Who wrote a plan's current content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Writer {
    /// The provider agent, told apart by its `User-Agent`.
    ProviderAgent,
    /// Any other client of the provider's token: the web UI, scripts.
    Provider,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_catalog_writes() {
        let o: Offer = serde_json::from_str(
            r#"{"id":"o","name":"n","type":"t","description":"","clusterID":"p1","clusterName":"one",
                "liqo":["v0","v1"],"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z",
                "version":3,"labels":{"region":"eu"},
                "plans":{"a":{"name":"a","cost":"1.5","resources":{"cpu":"2","memory":"4Gi"},
                              "updatedBy":"provider-agent"}}}"#,
        )
        .unwrap();
        assert_eq!(o.cluster_id, "p1");
        assert_eq!(o.plans["a"].cost.to_string(), "1.5");
        assert_eq!(o.plans["a"].updated_by, Some(Writer::ProviderAgent));
        let back = serde_json::to_value(&o).unwrap();
        assert_eq!(back["type"], "t");
        assert_eq!(back["plans"]["a"]["cost"], "1.5");
        assert!(back["plans"]["a"].get("planID").is_none());
    }
}
