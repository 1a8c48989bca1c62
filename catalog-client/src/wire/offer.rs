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
use super::pricing::Pricing;
use super::provider::{EnforcementLevel, IsolationLevel, LiqoGeneration};

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
    /// What the offer sells: `capacity` (resources to peer for; absent on
    /// the wire) or `service` (a running service, its plans carrying a
    /// hosting policy and parameter schemas).
    #[serde(default, skip_serializing_if = "OfferKind::is_capacity")]
    pub kind: OfferKind,
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
    /// How the owner keeps its buyers' pods apart from each other (its
    /// tenant NetworkPolicies and the probe that checks them), as the owner
    /// last reported it (server-added; re-stamped when it changes).
    /// Absent: the owner never reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub isolation: Option<IsolationLevel>,
    /// What the plans' costs are counted in: the catalog's currency and
    /// the period one `cost` pays for (server-set from `--currency` and
    /// `--cost-period`; a provider cannot set it). Absent from catalogs
    /// older than this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(read_only, nullable = false))]
    pub pricing: Option<Pricing>,
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
    /// Service plans only (and required there): where the service's pods run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub hosting: Option<HostingPolicy>,
    /// Service plans only: the JSON Schemas of the parameters the plan
    /// takes, as OSB v2.17 `schemas` spells them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub schemas: Option<PlanSchemas>,
}

/// What an offer sells.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum OfferKind {
    /// Resources a consumer peers for (every offer before service offers).
    #[default]
    Capacity,
    /// A running service the provider deploys for the consumer.
    Service,
}

impl OfferKind {
    pub fn is_capacity(&self) -> bool {
        *self == OfferKind::Capacity
    }

    /// The wire spelling (`capacity`, `service`).
    pub fn as_str(&self) -> &'static str {
        match self {
            OfferKind::Capacity => "capacity",
            OfferKind::Service => "service",
        }
    }

    /// Read the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "capacity" => Some(OfferKind::Capacity),
            "service" => Some(OfferKind::Service),
            _ => None,
        }
    }
}

/// Where a service plan's pods run: at the provider (`Local`), in the
/// consumer's cluster (`Remote`, the namespace offloaded there), or split
/// between the two (`LocalAndRemote`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HostingPolicy {
    Local,
    Remote,
    LocalAndRemote,
}

impl HostingPolicy {
    pub const ALL: [HostingPolicy; 3] = [
        HostingPolicy::Local,
        HostingPolicy::Remote,
        HostingPolicy::LocalAndRemote,
    ];

    /// The wire spelling (`Local`, `Remote`, `LocalAndRemote`).
    pub fn as_str(&self) -> &'static str {
        match self {
            HostingPolicy::Local => "Local",
            HostingPolicy::Remote => "Remote",
            HostingPolicy::LocalAndRemote => "LocalAndRemote",
        }
    }

    /// Read the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == s)
    }
}

/// The OSB v2.17 `Schemas` object of a plan: the JSON Schemas of the
/// parameters it takes when an instance is created or updated and when a
/// binding is created.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanSchemas {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub service_instance: Option<ServiceInstanceSchemas>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub service_binding: Option<ServiceBindingSchemas>,
}

/// OSB `ServiceInstanceSchema`: `create` and `update` parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ServiceInstanceSchemas {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub create: Option<InputParametersSchema>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub update: Option<InputParametersSchema>,
}

/// OSB `ServiceBindingSchema`: `create` parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ServiceBindingSchemas {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub create: Option<InputParametersSchema>,
}

/// OSB `InputParametersSchema`: the JSON Schema the `parameters` object
/// must satisfy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct InputParametersSchema {
    /// A JSON Schema (draft-04 or later, by its `$schema`) as an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>, nullable = false))]
    pub parameters: Option<serde_json::Value>,
}

impl PlanSchemas {
    /// Each schema given, with its path under `schemas` (`service_instance.create`, …).
    pub fn each(&self) -> Vec<(&'static str, &serde_json::Value)> {
        let si = self.service_instance.as_ref();
        [
            (
                "service_instance.create",
                si.and_then(|s| s.create.as_ref()),
            ),
            (
                "service_instance.update",
                si.and_then(|s| s.update.as_ref()),
            ),
            (
                "service_binding.create",
                self.service_binding
                    .as_ref()
                    .and_then(|s| s.create.as_ref()),
            ),
        ]
        .into_iter()
        .filter_map(|(name, s)| Some((name, s?.parameters.as_ref()?)))
        .collect()
    }
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
