//! Providers and tokens: the peering credentials a provider authenticates
//! with (and a contract hands its consumer), the token answer, and the
//! administrator's views. The catalog server uses these very types
//! (`catalog/src/providers/model.rs`: `PeeringCredentials`,
//! `LiqoGeneration`, `ProviderInfo`; `catalog/src/providers/admin.rs`:
//! `AdminLogin`, `AdminProvider`; `catalog/src/auth/jwt.rs`:
//! `IssuedToken`), so the doc comments below are also the descriptions in
//! its `/openapi.json`. Also the levels a provider's self-checks report
//! (`EnforcementLevel`, `IsolationLevel`) and their report bodies.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

// What `POST /authenticate` takes (the credentials file holds them) and
// what a contract releases to its consumer for Liqo v0.x. `Debug` never
// shows the token.
/// A provider's Liqo peering credentials, as handed to a buyer.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PeeringCredentials {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(rename = "clusterName")]
    pub cluster_name: String,
    // An `http://` or `https://` URL, or `""` for a provider that peers
    // only with Liqo v1.
    #[serde(rename = "authURL")]
    pub auth_url: String,
    /// The provider's peering token (secret).
    pub token: String,
}

impl PeeringCredentials {
    /// The field names, as the catalog spells them.
    pub const FIELDS: [&'static str; 4] = ["clusterID", "clusterName", "authURL", "token"];
}

// The token is a secret: it must not reach a log line through `{:?}`.
impl std::fmt::Debug for PeeringCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeeringCredentials")
            .field("cluster_id", &self.cluster_id)
            .field("cluster_name", &self.cluster_name)
            .field("auth_url", &self.auth_url)
            .finish_non_exhaustive()
    }
}

/// A Liqo generation a provider peers with: `v0` (Liqo v0.x: cluster ID,
/// auth URL and token) or `v1` (a peering user's kubeconfig).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum LiqoGeneration {
    V0,
    V1,
}

impl LiqoGeneration {
    pub fn as_str(self) -> &'static str {
        match self {
            LiqoGeneration::V0 => "v0",
            LiqoGeneration::V1 => "v1",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "v0" => Some(LiqoGeneration::V0),
            "v1" => Some(LiqoGeneration::V1),
            _ => None,
        }
    }
}

/// A level a provider's self-check reports to the catalog (its Liqo
/// enforcement, its tenant isolation): the names it goes by on the wire, in
/// the order they are documented. The catalog keeps, stamps and filters
/// every reported level with one piece of code written over this trait;
/// `reported_level!` (below) declares one.
pub trait ReportedLevel: Copy + Eq + std::fmt::Debug + Send + Sync + 'static {
    /// Every level, in the order the names are documented.
    const LEVELS: &'static [Self];

    /// The wire name.
    fn name(self) -> &'static str;

    /// The level named exactly `s` (names are lowercase).
    fn named(s: &str) -> Option<Self> {
        Self::LEVELS.iter().copied().find(|l| l.name() == s)
    }

    /// The names as a refusal lists them: `off, none, soft, hard or unknown`.
    fn choices() -> String {
        let names: Vec<&str> = Self::LEVELS.iter().map(|l| l.name()).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.concat(),
        }
    }
}

/// Declares a [`ReportedLevel`]: a unit-only enum whose variants go on the
/// wire as the names given, with `ALL` (in that order), `as_str` and
/// `parse`.
macro_rules! reported_level {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $($variant:ident = $wire:tt),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub enum $name {
            $(#[serde(rename = $wire)] $variant),+
        }

        impl $name {
            /// Every level, in the order the names are documented.
            pub const ALL: [$name; [$($wire),+].len()] = [$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),+
                }
            }

            pub fn parse(s: &str) -> Option<Self> {
                <Self as ReportedLevel>::named(s)
            }
        }

        impl ReportedLevel for $name {
            const LEVELS: &'static [Self] = &Self::ALL;

            fn name(self) -> &'static str {
                self.as_str()
            }
        }
    };
}

reported_level! {
    /// How strictly Liqo on the provider holds each consumer to what it
    /// bought, as the provider's ResourceSlice class controller reads it from
    /// Liqo's settings (the names of its `slice_controller_liqo_enforcement`
    /// gauge): `off` (Liqo's resource enforcement is off: nothing holds a
    /// consumer's pods to its grant), `none` (on, at `defaultLimitsEnforcement`
    /// None: pods without requests escape the count), `soft` (every pod
    /// declares requests, counted against the grant), `hard` (limits equal
    /// requests: no pod can use more than the grant at run time), `unknown`
    /// (the provider cannot read Liqo's settings).
    pub enum EnforcementLevel {
        Off = "off",
        None = "none",
        Soft = "soft",
        Hard = "hard",
        Unknown = "unknown",
    }
}

reported_level! {
    /// How the provider keeps its buyers' pods apart from each other, as its
    /// tenant-isolation controller last checked it: `enforced` (it renders a
    /// NetworkPolicy per tenant and its probe proved the cluster's CNI
    /// enforces them: other buyers on this provider cannot reach a buyer's
    /// pods), `unverified` (the policies are rendered, but the probe did not
    /// prove them enforced: it did not run or was inconclusive), `failed`
    /// (the probe saw traffic the policies deny get through), `off` (the
    /// controller runs with isolation turned off: no policies).
    pub enum IsolationLevel {
        Enforced = "enforced",
        Unverified = "unverified",
        Failed = "failed",
        Off = "off",
    }
}

// The body of `PUT /provider/enforcement`.
/// The provider's Liqo enforcement level, as its class controller last
/// read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EnforcementReport {
    pub level: EnforcementLevel,
}

// The body of `PUT /provider/isolation`.
/// The provider's tenant-isolation level, as its isolation controller last
/// checked it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IsolationReport {
    pub level: IsolationLevel,
}

// The answer of `POST /authenticate` and `POST /authenticate/admin`.
/// A freshly issued token.
#[derive(Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IssuedToken {
    // The bearer token (secret).
    pub token: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub expires_at: DateTime<Utc>,
}

impl std::fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

// The body of `POST /authenticate/admin`.
/// The administrator secret configured with `--admin-secret`.
#[derive(Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AdminLogin {
    pub secret: String,
}

impl std::fmt::Debug for AdminLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminLogin(..)")
    }
}

/// What anyone may see of a provider (no secret, no hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProviderInfo {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    pub cluster_name: String,
    #[serde(rename = "authURL")]
    pub auth_url: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: DateTime<Utc>,
}

// The items of `GET /admin/providers`.
/// A provider as administrators see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AdminProvider {
    #[serde(flatten)]
    pub info: ProviderInfo,
    pub disabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub disabled_since: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_out_of_debug() {
        let c = PeeringCredentials {
            cluster_id: "c1".into(),
            cluster_name: "one".into(),
            auth_url: String::new(),
            token: "s3cret".into(),
        };
        assert!(!format!("{c:?}").contains("s3cret"));
        let t: IssuedToken =
            serde_json::from_str(r#"{"token":"s3cret","expiresAt":"2026-01-01T00:00:00Z"}"#)
                .unwrap();
        assert!(!format!("{t:?}").contains("s3cret"));
        let a = AdminLogin {
            secret: "s3cret".into(),
        };
        assert!(!format!("{a:?}").contains("s3cret"));
    }

    #[test]
    fn enforcement_levels_round_trip_by_name() {
        for level in EnforcementLevel::ALL {
            let json = serde_json::to_string(&level).unwrap();
            assert_eq!(json, format!("\"{}\"", level.as_str()));
            assert_eq!(EnforcementLevel::parse(level.as_str()), Some(level));
        }
        assert_eq!(EnforcementLevel::parse("Hard"), None);
        assert_eq!(
            EnforcementLevel::choices(),
            "off, none, soft, hard or unknown"
        );
    }

    #[test]
    fn isolation_levels_round_trip_by_name() {
        for level in IsolationLevel::ALL {
            let json = serde_json::to_string(&level).unwrap();
            assert_eq!(json, format!("\"{}\"", level.as_str()));
            assert_eq!(IsolationLevel::parse(level.as_str()), Some(level));
            assert_eq!(
                serde_json::from_str::<IsolationLevel>(&json).unwrap(),
                level
            );
        }
        assert_eq!(IsolationLevel::parse("Enforced"), None);
        assert_eq!(
            IsolationLevel::choices(),
            "enforced, unverified, failed or off"
        );
        let report: IsolationReport = serde_json::from_str(r#"{"level":"failed"}"#).unwrap();
        assert_eq!(report.level, IsolationLevel::Failed);
        assert!(serde_json::from_str::<IsolationReport>(r#"{"level":"none"}"#).is_err());
        assert!(serde_json::from_str::<IsolationReport>(r#"{"level":"off","x":1}"#).is_err());
    }

    #[test]
    fn admin_providers_read_flat() {
        let p: AdminProvider = serde_json::from_str(
            r#"{"clusterID":"p1","clusterName":"P","authURL":"","createdAt":"2026-01-01T00:00:00Z","disabled":true}"#,
        )
        .unwrap();
        assert_eq!(p.info.cluster_id, "p1");
        assert!(p.disabled);
    }
}
