//! Contracts — who bought what from whom, and the credentials released to
//! the buyer — with the requests that make and report them. The catalog
//! server uses these very types where its JSON is the same:
//! `catalog/src/buying/contracts/model.rs` (`Contract`, `Ended`,
//! `ContractCredentials`, `V1Credentials`), `catalog/src/buying/model.rs`
//! (`ContractState`), `catalog/src/buying/http.rs` (`ReserveRequest`,
//! `PurchaseRequest`) and `catalog/src/buying/contracts/http.rs`
//! (`RawReport`, checked against [`StateReport`]); the doc comments below
//! are also the descriptions in its `/openapi.json`. [`Reservation`] holds
//! the fields of `catalog/src/buying/model.rs` `Reservation` a client reads.
//! [`ContractPeering`] (where a Liqo v1 contract's credentials stand),
//! [`AttachCredentials`] and [`ExtendRequest`] are the bodies of the
//! provider's `PUT /provider/contracts/{id}/peering` and the consumer's
//! `POST /contracts/{id}/extend` (`catalog/src/buying/contracts/http.rs`).

use chrono::{DateTime, Utc};
use quantity::ResourceList;
use serde::{Deserialize, Serialize};

use super::cost::Cost;
use super::pricing::Pricing;
use super::provider::{LiqoGeneration, PeeringCredentials};

/// Where the consumer side says a contract is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ContractState {
    /// Bought; not peered yet (or the peering was lost).
    #[default]
    Pending,
    /// The consumer's cluster peered with the provider.
    Peered,
    /// The provider granted the contract's resources.
    Granted,
    /// Workloads can be offloaded.
    Ready,
    /// Something went wrong; `reason` says what.
    Failed,
}

impl ContractState {
    pub fn as_str(self) -> &'static str {
        match self {
            ContractState::Pending => "pending",
            ContractState::Peered => "peered",
            ContractState::Granted => "granted",
            ContractState::Ready => "ready",
            ContractState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => ContractState::Pending,
            "peered" => ContractState::Peered,
            "granted" => ContractState::Granted,
            "ready" => ContractState::Ready,
            "failed" => ContractState::Failed,
            _ => return None,
        })
    }
}

/// How a contract ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Ended {
    Cancelled,
    Expired,
}

impl Ended {
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Cancelled => "cancelled",
            Ended::Expired => "expired",
        }
    }
}

// `Debug` shows which generations are present, never their secrets.
/// The credentials a contract releases to its consumer.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContractCredentials {
    /// Liqo v0.x: what `liqoctl peer out-of-band` takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub v0: Option<PeeringCredentials>,
    /// Liqo v1: the provider's peering user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub v1: Option<V1Credentials>,
}

impl std::fmt::Debug for ContractCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContractCredentials")
            .field("v0", &self.v0.as_ref().map(|_| "<redacted>"))
            .field("v1", &self.v1.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

// The kubeconfig is a secret: `Debug` never shows it.
/// A Liqo v1 peering user's kubeconfig (YAML text).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct V1Credentials {
    pub kubeconfig: String,
}

impl std::fmt::Debug for V1Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("V1Credentials(..)")
    }
}

/// Where a Liqo v1 contract's peering credentials stand. A Liqo peering
/// user works for exactly one consumer cluster, so each contract gets its
/// own (attached by the provider), unless the provider registered one
/// kubeconfig and declared itself single-consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum PeeringState {
    /// The provider has not attached this contract's kubeconfig yet.
    AwaitingCredentials,
    /// A kubeconfig is released with the contract (`credentials.v1`).
    CredentialsReady,
}

impl PeeringState {
    pub fn as_str(self) -> &'static str {
        match self {
            PeeringState::AwaitingCredentials => "awaitingCredentials",
            PeeringState::CredentialsReady => "credentialsReady",
        }
    }
}

/// A Liqo v1 contract's peering: its state and why, for a person or a
/// controller following it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContractPeering {
    pub state: PeeringState,
    /// What the state means for this contract, in words.
    pub reason: String,
    /// When the provider attached this contract's own kubeconfig (absent
    /// for the provider's single-consumer kubeconfig).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, format = DateTime, nullable = false)
    )]
    pub attached_at: Option<DateTime<Utc>>,
}

/// Longest contract `reason` the catalog accepts, in bytes.
pub const MAX_REASON_LEN: usize = 256;

/// A peering step as a contract's `reason` carries it: `Code: words` —
/// the step's name (the Purchase condition's reason, which a UI follows)
/// then what it means for a person — with control characters made spaces
/// and cut to [`MAX_REASON_LEN`] bytes, so the catalog accepts it.
pub fn step_reason(code: &str, words: &str) -> String {
    let text: String = format!("{code}: {words}")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.len() <= MAX_REASON_LEN {
        return text;
    }
    let mut end = MAX_REASON_LEN - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The step's name in a `reason` written by [`step_reason`]; None for
/// free text (a name is one word of ASCII letters, first upper-case).
pub fn reason_step(reason: &str) -> Option<&str> {
    let (code, _) = reason.split_once(": ")?;
    let named = code.starts_with(|c: char| c.is_ascii_uppercase())
        && code.chars().all(|c| c.is_ascii_alphanumeric());
    named.then_some(code)
}

/// A contract as `GET /contracts` and `GET /contracts/{id}` answer it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Contract {
    /// The purchase's (and reservation's) id.
    pub id: String,
    /// The buyer (the `sub` of its token).
    pub consumer: String,
    #[serde(
        rename = "consumerClusterID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub consumer_cluster_id: Option<String>,
    /// The provider's cluster ID.
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    pub cluster_name: String,
    #[serde(rename = "offerID")]
    pub offer_id: String,
    #[serde(rename = "planID")]
    pub plan_id: String,
    #[cfg_attr(
        feature = "openapi",
        schema(
            value_type = std::collections::BTreeMap<String, String>,
            example = json!({"cpu": "2", "memory": "4Gi"})
        )
    )]
    pub resources: ResourceList,
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "1.0"))]
    pub cost: Cost,
    /// What `cost` is counted in: the catalog's currency and the period
    /// one `cost` pays for, accrued by the second while the contract is
    /// active (server-set; absent from catalogs older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(read_only, nullable = false))]
    pub pricing: Option<Pricing>,
    /// Who bought it, as the buyer said when it reserved or purchased
    /// (`boughtBy`): free text such as `market-autoscaler/team-a/web`,
    /// at most 128 characters. Absent when not said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 128))]
    pub bought_by: Option<String>,
    pub resource_slice_class: String,
    pub liqo: Vec<LiqoGeneration>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub purchased_at: DateTime<Utc>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub expires_at: DateTime<Utc>,
    /// Not ended (and not past `expiresAt`).
    pub active: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub ended: Option<Ended>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, format = DateTime, nullable = false)
    )]
    pub ended_at: Option<DateTime<Utc>>,
    pub state: ContractState,
    /// What the consumer side last said with `state`. A controller that
    /// peers by itself writes the step it is at as `Code: words`
    /// (`step_reason`): `Code` a name a UI can follow (`WaitingForNonce`,
    /// `WaitingForSignature`, `WaitingForPeering`, `WaitingForProvider`,
    /// `WaitingForLiqo`, `Ready`, ...; docs/api.md lists them), `words`
    /// what it means for a person. Otherwise free text (always so for
    /// `failed`); absent when no consumer side has reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub reason: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub state_changed_at: DateTime<Utc>,
    /// Liqo v1 contracts: whether their peering credentials are there yet.
    /// (Named apart from the purchase answer's `peering`, the v0
    /// credentials.)
    #[serde(
        rename = "peeringState",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub peering_state: Option<ContractPeering>,
    /// Active and ending within the catalog's lead time
    /// (`--contract-ending-soon`): time to extend it
    /// (`POST /contracts/{id}/extend`) or to let it go.
    #[serde(default)]
    pub ending_soon: bool,
    /// When it was last extended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, format = DateTime, nullable = false)
    )]
    pub extended_at: Option<DateTime<Utc>>,
    /// When one of its service bindings was last requested or its removal
    /// asked, or its service instance's parameters updated (Open Service
    /// Broker): a service provider's controller follows it on the contract
    /// change stream (`GET /contract-changes`) to read the bindings, or the
    /// update, that wait for it. Absent on contracts without either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, format = DateTime, nullable = false)
    )]
    pub bindings_changed_at: Option<DateTime<Utc>>,
    /// The buyer's network policy for its pods on this contract's provider,
    /// with the provider's last report (`PUT /contracts/{id}/network-policy`,
    /// [`crate::wire::tenant_policy`]). For the contract's two parties only.
    ///
    /// Read leniently: a policy this client cannot read (a newer catalog's
    /// fields) reads as absent instead of failing the whole contract, whose
    /// peering must not go with it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_network_policy"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub network_policy: Option<super::tenant_policy::ContractNetworkPolicy>,
    /// Only for its consumer, in `GET /contracts/{id}` and the purchase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub credentials: Option<ContractCredentials>,
}

fn lenient_network_policy<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<super::tenant_policy::ContractNetworkPolicy>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(deserializer)?;
    Ok(value.and_then(|v| serde_json::from_value(v).ok()))
}

/// Longest `boughtBy` the catalog accepts, in characters.
pub const MAX_BOUGHT_BY_CHARS: usize = 128;

/// `POST /reservations` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReserveRequest {
    #[serde(rename = "offerID")]
    pub offer_id: String,
    /// The plan's key in the offer's `plans`.
    #[serde(rename = "planID")]
    pub plan_id: String,
    /// Hold the unit this long, in seconds (default: the catalog's).
    #[serde(
        rename = "ttlSeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl_seconds: Option<u64>,
    /// Who is buying, kept with the contract (at most
    /// [`MAX_BOUGHT_BY_CHARS`] characters, no control characters).
    #[serde(rename = "boughtBy", default, skip_serializing_if = "Option::is_none")]
    pub bought_by: Option<String>,
}

/// `POST /reservations/{id}/purchase` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurchaseRequest {
    /// The consumer's Liqo cluster ID (never changed once set).
    #[serde(
        rename = "consumerClusterID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub consumer_cluster_id: Option<String>,
    /// How long the contract lasts, in seconds (default: the catalog's).
    #[serde(
        rename = "durationSeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_seconds: Option<u64>,
    /// Who is buying (replaces what the reservation said, if anything).
    #[serde(rename = "boughtBy", default, skip_serializing_if = "Option::is_none")]
    pub bought_by: Option<String>,
}

/// `PUT /provider/contracts/{id}/peering` body: the peering user's
/// kubeconfig the provider made for this contract's consumer cluster.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachCredentials {
    pub kubeconfig: String,
}

impl std::fmt::Debug for AttachCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AttachCredentials(..)")
    }
}

/// `POST /contracts/{id}/extend` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    /// Seconds added to the contract's end (default: to a whole
    /// `--contract-duration` from now).
    #[serde(
        rename = "durationSeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_seconds: Option<u64>,
}

/// `PUT /contracts/{id}/state` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateReport {
    pub state: ContractState,
    /// Why, for a person: 1 to 256 bytes without control characters;
    /// required for `failed`. A peering controller writes its step as
    /// `Code: words` (docs/buying.md lists the codes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(
        rename = "consumerClusterID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub consumer_cluster_id: Option<String>,
}

/// A reservation as `POST /reservations` answers it (the fields a client
/// reads; the others are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub id: String,
    #[serde(rename = "offerID")]
    pub offer_id: String,
    #[serde(rename = "planID")]
    pub plan_id: String,
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    pub expires_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_step_reason_fits_what_the_catalog_accepts_and_names_its_step() {
        assert_eq!(step_reason("Ready", "all\nset"), "Ready: all set");
        let long = step_reason("WaitingForLiqo", &"é".repeat(400));
        assert!(long.len() <= MAX_REASON_LEN, "{}", long.len());
        assert!(long.starts_with("WaitingForLiqo: é") && long.ends_with('…'));
        assert_eq!(reason_step(&long), Some("WaitingForLiqo"));
        assert_eq!(
            reason_step("WaitingForNonce: the provider"),
            Some("WaitingForNonce")
        );
        for free in [
            "the peering broke",
            "no route: 10.0.0.1",
            "Two words: x",
            "",
        ] {
            assert_eq!(reason_step(free), None, "{free}");
        }
    }

    #[test]
    fn a_network_policy_this_client_cannot_read_leaves_the_contract_readable() {
        let contract = |policy: serde_json::Value| {
            json!({
                "id": "c1", "consumer": "alice", "clusterID": "p1", "clusterName": "prov",
                "offerID": "o", "planID": "small", "resources": {"cpu": "2"},
                "cost": "1.0", "resourceSliceClass": "liqo-broker", "liqo": ["v1"],
                "purchasedAt": "2026-01-01T00:00:00Z", "expiresAt": "2026-01-31T00:00:00Z",
                "active": true, "state": "ready", "stateChangedAt": "2026-01-01T00:00:00Z",
                "networkPolicy": {"revision": 3, "updatedAt": "2026-01-02T00:00:00Z",
                                  "policy": {"policies": [policy]}}
            })
        };
        let known = json!({"name": "app/web", "namespace": "app-c1",
                           "podSelector": {"matchLabels": {"app": "web"}}, "ingress": []});
        let c: Contract = serde_json::from_value(contract(known)).unwrap();
        assert_eq!(c.network_policy.map(|p| p.revision), Some(3));
        let newer = json!({"name": "app/web", "namespace": "app-c1", "podSelector": {},
                           "ingress": [], "priority": 7});
        let c: Contract = serde_json::from_value(contract(newer)).unwrap();
        assert_eq!(c.network_policy, None);
    }

    #[test]
    fn a_contract_reads_as_the_catalog_writes_it_and_hides_its_credentials() {
        let c: Contract = serde_json::from_value(json!({
            "id": "c1", "consumer": "alice", "clusterID": "p1", "clusterName": "prov",
            "offerID": "o", "planID": "small", "resources": {"cpu": "2", "memory": "4Gi"},
            "cost": "1.0", "resourceSliceClass": "liqo-broker", "liqo": ["v0", "v1"],
            "purchasedAt": "2026-01-01T00:00:00Z", "expiresAt": "2026-01-31T00:00:00Z",
            "active": true, "state": "pending", "stateChangedAt": "2026-01-01T00:00:00Z",
            "credentials": {"v1": {"kubeconfig": "secret-kubeconfig"}},
            "pricing": {"currency": "EUR", "per": "month"}, "boughtBy": "market-autoscaler/a/b"
        }))
        .unwrap();
        assert_eq!(
            c.pricing,
            Some(Pricing {
                currency: "EUR".into(),
                per: crate::wire::CostPeriod::Month
            })
        );
        assert_eq!(c.bought_by.as_deref(), Some("market-autoscaler/a/b"));
        assert_eq!(c.cluster_id, "p1");
        assert_eq!(c.resources.to_strings()["memory"], "4Gi");
        assert_eq!(c.consumer_cluster_id, None);
        assert_eq!(c.liqo, vec![LiqoGeneration::V0, LiqoGeneration::V1]);
        assert!(!format!("{c:?}").contains("secret-kubeconfig"));
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back["stateChangedAt"], "2026-01-01T00:00:00Z");
        assert!(back.get("consumerClusterID").is_none());
    }

    #[test]
    fn requests_are_written_as_the_catalog_reads_them() {
        let report = StateReport {
            state: ContractState::Peered,
            reason: None,
            consumer_cluster_id: Some("c".into()),
        };
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            json!({"state": "peered", "consumerClusterID": "c"})
        );
        let reserve = ReserveRequest {
            offer_id: "o".into(),
            plan_id: "p".into(),
            ttl_seconds: None,
            bought_by: Some("market-autoscaler/team-a/web".into()),
        };
        assert_eq!(
            serde_json::to_value(&reserve).unwrap(),
            json!({"offerID": "o", "planID": "p", "boughtBy": "market-autoscaler/team-a/web"})
        );
    }
}
