//! Provider accounts: a Liqo cluster that claimed its cluster ID on its first
//! `POST /authenticate`. The secret is kept only as an argon2 hash; the
//! peering credentials a buyer gets are rebuilt from the account and the
//! sealed token ([`super::seal`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A provider account as stored. Holds the secret's hash: never serialise
/// this into a response; use [`ProviderAccount::info`].
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderAccount {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    pub cluster_name: String,
    #[serde(rename = "authURL")]
    pub auth_url: String,
    /// PHC string of the argon2id hash of the provider's token.
    pub secret_hash: String,
    pub created_at: DateTime<Utc>,
    /// Bumped by every credential rotation. The catalog's provider tokens
    /// carry it, so a rotation retires every token issued before it.
    /// Accounts stored before rotation existed read as 0.
    #[serde(default)]
    pub generation: u64,
}

impl std::fmt::Debug for ProviderAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderAccount")
            .field("cluster_id", &self.cluster_id)
            .field("cluster_name", &self.cluster_name)
            .field("auth_url", &self.auth_url)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl ProviderAccount {
    /// The public view of this account.
    pub fn info(&self) -> ProviderInfo {
        ProviderInfo {
            cluster_id: self.cluster_id.clone(),
            cluster_name: self.cluster_name.clone(),
            auth_url: self.auth_url.clone(),
            created_at: self.created_at,
        }
    }
}

// The public view, the peering credentials and the generations are wire
// types, declared once in `catalog-client` (with their schema), so a
// renamed field fails the server's build and the clients' alike.
pub use catalog_client::wire::provider::{
    EnforcementLevel, IsolationLevel, LiqoGeneration, PeeringCredentials, ProviderInfo,
    ReportedLevel,
};

/// The ResourceSlice class a provider enforces when it registers none.
pub const DEFAULT_SLICE_CLASS: &str = "liqo-broker";

/// What a provider registered with `PUT /provider/peering`, as stored: its
/// ResourceSlice class and how it peers with Liqo v1 — a peering user per
/// contract (`v1_per_contract`, attached to each contract by its
/// controller), or one kubeconfig, sealed (base64 of the [`super::seal`]
/// layout, bound to the cluster ID and [`KUBECONFIG_SEAL_LABEL`]) and
/// declared `single_consumer`. A kubeconfig stored before per-contract
/// credentials has neither flag: it is still released to the contracts
/// bought back then, while newer contracts await their own. Never
/// serialise this into a response.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderPeering {
    pub resource_slice_class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_kubeconfig: Option<String>,
    /// The provider serves Liqo v1 with a peering user per contract.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub v1_per_contract: bool,
    /// The provider declared that it sells to one consumer cluster only,
    /// so its one kubeconfig goes to every contract.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub single_consumer: bool,
    /// The Liqo enforcement level the provider's class controller last
    /// reported (`PUT /provider/enforcement`); kept by `PUT
    /// /provider/peering`, which does not carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<EnforcementLevel>,
    /// The tenant-isolation level the provider's isolation controller last
    /// reported (`PUT /provider/isolation`); kept by `PUT
    /// /provider/peering`, which does not carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<IsolationLevel>,
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for ProviderPeering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderPeering")
            .field("resource_slice_class", &self.resource_slice_class)
            .field("v1", &self.sealed_kubeconfig.is_some())
            .field("v1_per_contract", &self.v1_per_contract)
            .field("single_consumer", &self.single_consumer)
            .field("enforcement", &self.enforcement)
            .field("isolation", &self.isolation)
            .finish_non_exhaustive()
    }
}

impl ProviderPeering {
    /// Whether its registered kubeconfig goes to newly bought contracts
    /// (declared single-consumer).
    pub fn shares_kubeconfig(&self) -> bool {
        self.single_consumer && self.sealed_kubeconfig.is_some()
    }
}

/// What each of a provider's offers carries of it, stamped by the server
/// on every write and again on all of them when it changes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnerStamp {
    /// The generations it peers with ([`generations`]).
    pub liqo: Vec<LiqoGeneration>,
    /// Its reported enforcement level, if it ever reported one.
    pub enforcement: Option<EnforcementLevel>,
    /// Its reported tenant-isolation level, if it ever reported one.
    pub isolation: Option<IsolationLevel>,
}

impl OwnerStamp {
    /// The stamp of `account` with what it registered and reported.
    pub fn of(account: &ProviderAccount, peering: Option<&ProviderPeering>) -> Self {
        OwnerStamp {
            liqo: generations(account, peering),
            enforcement: peering.and_then(|p| p.enforcement),
            isolation: peering.and_then(|p| p.isolation),
        }
    }

    /// The stamp `offer` carries (what it was last stamped with).
    pub fn carried_by(offer: &catalog_client::wire::Offer) -> Self {
        OwnerStamp {
            liqo: offer.liqo.clone(),
            enforcement: offer.enforcement,
            isolation: offer.isolation,
        }
    }
}

/// Associated-data label of a sealed kubeconfig, so it never opens as a
/// peering token (nor a token as a kubeconfig).
pub const KUBECONFIG_SEAL_LABEL: &str = "v1-kubeconfig";

/// The generations a provider peers with: `v0` when its account has a
/// non-empty auth URL, `v1` when a kubeconfig is registered or it hands
/// out a peering user per contract. Ordered.
pub fn generations(
    account: &ProviderAccount,
    peering: Option<&ProviderPeering>,
) -> Vec<LiqoGeneration> {
    let mut out = Vec::with_capacity(2);
    if !account.auth_url.is_empty() {
        out.push(LiqoGeneration::V0);
    }
    if peering.is_some_and(|p| p.sealed_kubeconfig.is_some() || p.v1_per_contract) {
        out.push(LiqoGeneration::V1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_stored_before_the_flags_read_without_them() {
        let old: ProviderPeering = serde_json::from_value(serde_json::json!({
            "resourceSliceClass": "liqo-broker", "sealedKubeconfig": "s",
            "updatedAt": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        assert!(!old.single_consumer && !old.v1_per_contract && old.enforcement.is_none());
        assert!(old.isolation.is_none());
        // A legacy kubeconfig is not shared with newly bought contracts.
        assert!(!old.shares_kubeconfig());
        let back = serde_json::to_value(&old).unwrap();
        assert!(back.get("singleConsumer").is_none(), "{back}");
        assert!(back.get("enforcement").is_none(), "{back}");
        assert!(back.get("isolation").is_none(), "{back}");
    }

    #[test]
    fn reported_levels_are_kept_and_stamped() {
        let stored: ProviderPeering = serde_json::from_value(serde_json::json!({
            "resourceSliceClass": "liqo-broker", "enforcement": "hard", "isolation": "failed",
            "updatedAt": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        assert_eq!(stored.isolation, Some(IsolationLevel::Failed));
        let back = serde_json::to_value(&stored).unwrap();
        assert_eq!(back["isolation"], "failed", "{back}");
        assert!(format!("{stored:?}").contains("Failed"));
        let account = ProviderAccount {
            cluster_id: "c".into(),
            cluster_name: "n".into(),
            auth_url: "https://x".into(),
            secret_hash: String::new(),
            created_at: crate::store::now(),
            generation: 0,
        };
        let stamp = OwnerStamp::of(&account, Some(&stored));
        assert_eq!(stamp.enforcement, Some(EnforcementLevel::Hard));
        assert_eq!(stamp.isolation, Some(IsolationLevel::Failed));
        assert_eq!(
            OwnerStamp::of(&account, None),
            OwnerStamp {
                liqo: vec![LiqoGeneration::V0],
                ..OwnerStamp::default()
            }
        );
    }

    #[test]
    fn credentials_debug_hides_the_token() {
        let c = PeeringCredentials {
            cluster_id: "c".into(),
            cluster_name: "n".into(),
            auth_url: "https://x".into(),
            token: "very-secret".into(),
        };
        assert!(!format!("{c:?}").contains("very-secret"));
    }

    #[test]
    fn generations_follow_auth_url_and_kubeconfig() {
        let mut account = ProviderAccount {
            cluster_id: "c".into(),
            cluster_name: "n".into(),
            auth_url: "https://x".into(),
            secret_hash: String::new(),
            created_at: crate::store::now(),
            generation: 0,
        };
        let mut peering = ProviderPeering {
            resource_slice_class: DEFAULT_SLICE_CLASS.into(),
            sealed_kubeconfig: None,
            v1_per_contract: false,
            single_consumer: false,
            enforcement: None,
            isolation: None,
            updated_at: crate::store::now(),
        };
        assert_eq!(generations(&account, None), [LiqoGeneration::V0]);
        assert_eq!(generations(&account, Some(&peering)), [LiqoGeneration::V0]);
        peering.sealed_kubeconfig = Some("sealed".into());
        assert_eq!(
            generations(&account, Some(&peering)),
            [LiqoGeneration::V0, LiqoGeneration::V1]
        );
        account.auth_url.clear();
        assert_eq!(generations(&account, Some(&peering)), [LiqoGeneration::V1]);
        // A peering user per contract is v1 without a kubeconfig on file.
        peering.sealed_kubeconfig = None;
        assert!(generations(&account, Some(&peering)).is_empty());
        peering.v1_per_contract = true;
        assert_eq!(generations(&account, Some(&peering)), [LiqoGeneration::V1]);
        assert!(generations(&account, None).is_empty());
        assert!(!format!("{peering:?}").contains("sealed\""));
    }
}
