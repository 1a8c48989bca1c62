//! Offers and plans as every read returns them (`GET /offers`, `GET
//! /offer/{id}`, the feed). The catalog server serialises these very types
//! (`catalog/src/offers/offer.rs` re-exports `Offer` and `Plan`,
//! `catalog/src/offers/stamps.rs` `Writer`), so the doc comments below are
//! also the descriptions in its `/openapi.json`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quantity::ResourceList;
use serde::{Deserialize, Serialize};

use super::cost::Cost;
use super::provider::{EnforcementLevel, LiqoGeneration};

/// An offer as stored and as every read returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, String>))]
    pub labels: BTreeMap<String, String>,
    /// Owning provider's Liqo cluster ID.
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    /// Owning provider's cluster name.
    pub cluster_name: String,
    /// The Liqo generations the owner peers with (server-added; re-stamped
    /// when they change).
    #[serde(default)]
    pub liqo: Vec<LiqoGeneration>,
    /// How strictly Liqo on the owner holds a buyer to what it bought, as
    /// the owner last reported it (server-added; re-stamped when it
    /// changes). Absent: the owner never reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub enforcement: Option<EnforcementLevel>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: DateTime<Utc>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub updated_at: DateTime<Utc>,
    /// Increases by one with every write to this id (deletions included), so
    /// the newest of two copies of an offer is the one with the larger version.
    pub version: u64,
}

/// One plan of an offer, in its canonical output form: the plan's display
/// name is always `name` (input may spell it `planName`), costs print as
/// decimal strings and quantities in Kubernetes' canonical form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Plan {
    pub name: String,
    #[serde(rename = "planID", default, skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "1.0"))]
    pub cost: Cost,
    /// Resource name → Kubernetes quantity.
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, String>))]
    pub resources: ResourceList,
    /// When a write last changed this plan (its name, planID, cost or
    /// resources); server-set. Absent on plans unchanged since before the
    /// catalog stamped plans.
    #[serde(rename = "updatedAt", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, format = DateTime, read_only, nullable = false)
    )]
    pub updated_at: Option<DateTime<Utc>>,
    /// Who made that change: `provider-agent` (the provider agent, told
    /// apart by its `User-Agent`) or `provider` (any other client of the
    /// provider's token); server-set.
    #[serde(rename = "updatedBy", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(read_only, nullable = false))]
    pub updated_by: Option<Writer>,
}

/// Who wrote a plan's current content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Writer {
    /// The provider agent (`provider-agent`), publishing what its cluster has.
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
