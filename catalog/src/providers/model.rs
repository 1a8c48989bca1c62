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

/// What anyone may see of a provider (no secret, no hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderInfo {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    pub cluster_name: String,
    #[serde(rename = "authURL")]
    pub auth_url: String,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

/// A provider's Liqo peering credentials, as handed to a buyer.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PeeringCredentials {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(rename = "clusterName")]
    pub cluster_name: String,
    #[serde(rename = "authURL")]
    pub auth_url: String,
    /// The provider's peering token (secret).
    pub token: String,
}

impl std::fmt::Debug for PeeringCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeeringCredentials")
            .field("cluster_id", &self.cluster_id)
            .field("auth_url", &self.auth_url)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
