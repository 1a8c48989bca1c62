//! Providers: the Liqo clusters that sell, and the administrator who can
//! disable them.
//!
//! - [`model`]: accounts (the secret kept only as an argon2 hash) and the
//!   peering credentials a buyer receives.
//! - [`authenticate`]: `POST /authenticate` (claim a cluster ID or prove
//!   it) and `POST /authenticate/rotate` (new credentials; earlier tokens
//!   retired).
//! - [`seal`]: each provider's peering token, encrypted at rest, so a
//!   purchase can hand it over.
//! - [`admin`]: the administrator's login, consumer tokens, and the
//!   provider list with its disabled flags.
//! - [`peering`]: `PUT/GET /provider/peering`, the Liqo a provider runs
//!   (v1 kubeconfig checked by [`kubeconfig`], sealed; its ResourceSlice
//!   class) and the generations it peers with.
//! - [`enforcement`]: `PUT /provider/enforcement`, the Liqo enforcement
//!   level the provider's class controller reads, stamped on its offers.
//! - [`isolation`]: `PUT /provider/isolation`, the tenant-isolation level
//!   the provider's isolation controller checks, stamped on its offers.
//! - [`self_check`]: what both reports share — the level kept with the
//!   provider's registration, its offers re-stamped when it changes.
//! - [`store`]: the [`ProviderStore`] trait the backends implement.
//!
//! Handlers get this feature's own state, [`Providers`], as
//! `web::Data<Providers>`; the buying feature asks it for peering
//! credentials and disabled flags through its methods.

pub mod admin;
pub mod authenticate;
pub mod enforcement;
pub mod isolation;
pub mod kubeconfig;
pub mod model;
pub mod peering;
pub mod seal;
pub mod self_check;
pub mod store;

use std::sync::Arc;

use async_trait::async_trait;

pub use model::{
    EnforcementLevel, IsolationLevel, LiqoGeneration, OwnerStamp, PeeringCredentials,
    ProviderAccount, ProviderInfo, ProviderPeering, ReportedLevel,
};
pub use store::ProviderStore;

use crate::auth::{Generations, SecretPool, TokenService};
use crate::http::{ApiError, RateLimiter};
use crate::store::StoreError;
use seal::Sealer;

/// Flags of the providers feature: the key that seals peering tokens and
/// the administrator's secret (flattened into the catalog's `Config`).
#[derive(Debug, Clone, clap::Args)]
pub struct ProvidersConfig {
    /// File whose bytes (at least 32) key the encryption of providers'
    /// peering tokens at rest. Default: a key derived from the JWT signing
    /// key. With MongoDB and no configured JWT key, the signing key lives in
    /// the database, so set this to keep the sealing key off it.
    #[arg(long, env = "CATALOG_PEERING_KEY_FILE")]
    pub peering_key_file: Option<std::path::PathBuf>,

    /// Administrator secret (at least 16 bytes), exchanged for an admin
    /// token at POST /authenticate/admin. Unset: no admin login (OIDC
    /// admins still work). Prefer the environment variable or the file.
    #[arg(long, env = "CATALOG_ADMIN_SECRET", hide_env_values = true)]
    pub admin_secret: Option<String>,

    /// File holding the administrator secret.
    #[arg(
        long,
        env = "CATALOG_ADMIN_SECRET_FILE",
        conflicts_with = "admin_secret"
    )]
    pub admin_secret_file: Option<std::path::PathBuf>,

    /// Where provider secrets are hashed and verified (argon2).
    #[command(flatten)]
    pub secret_pool: crate::auth::SecretPoolConfig,
}

/// Who holds a subject in the one namespace of identities: a token's `sub`
/// owns records, so a provider's cluster ID and a consumer's subject must
/// never be the same string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdentityKind {
    Provider,
    Consumer,
}

/// The one rule of the namespace of identities, for both directions: the
/// 409 message when `subject`, wanted as `wanted`, is held as `holder`.
pub fn identity_clash(subject: &str, wanted: IdentityKind, holder: IdentityKind) -> Option<String> {
    match (wanted, holder) {
        (IdentityKind::Provider, IdentityKind::Consumer) => Some(format!(
            "clusterID: `{subject}` is already the subject of a consumer; a provider cannot share a consumer's identity (choose another cluster ID)"
        )),
        (IdentityKind::Consumer, IdentityKind::Provider) => Some(format!(
            "subject: `{subject}` is the cluster ID of a registered provider; a consumer token cannot share a provider's identity"
        )),
        _ => None,
    }
}

/// What the provider handlers share (`web::Data<Providers>`).
#[derive(Clone)]
pub struct Providers {
    pub store: Arc<dyn ProviderStore>,
    /// Seals and opens peering tokens.
    pub sealer: Arc<Sealer>,
    /// Issues the catalog's tokens.
    pub tokens: Arc<TokenService>,
    /// Limits the endpoints that check a secret, per client address.
    pub limiter: Arc<RateLimiter>,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// SHA-256 of the administrator's secret, if one is configured.
    pub admin_secret_digest: Option<[u8; 32]>,
    /// Told when what a provider's offers carry of it changes.
    pub on_stamp: Option<Arc<dyn peering::StampChanged>>,
    /// Runs the argon2 hashes and verifications (bounded, low priority).
    pub secrets: Arc<SecretPool>,
}

/// Largest `--admin-secret-file` read: a secret is tens of bytes, and
/// `/dev/zero` or a huge sparse file in its place is refused, not read whole.
pub const MAX_ADMIN_SECRET_FILE_BYTES: u64 = 64 * 1024;

impl Providers {
    /// Load the sealing key (`--peering-key-file`, or derived from
    /// `signing_key`) and the administrator's secret.
    pub fn new(
        config: &ProvidersConfig,
        signing_key: &[u8],
        store: Arc<dyn ProviderStore>,
        tokens: Arc<TokenService>,
        limiter: Arc<RateLimiter>,
        max_body_bytes: usize,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        let sealer = match &config.peering_key_file {
            Some(path) => Sealer::from_file(path)?,
            None => Sealer::derive(signing_key)?,
        };
        let admin_secret = match (&config.admin_secret, &config.admin_secret_file) {
            (Some(s), _) => Some(s.as_bytes().to_vec()),
            (None, Some(path)) => {
                // Bounded like every file a flag names (F-09).
                let mut bytes = edge::config_file::read_bytes(
                    "--admin-secret-file",
                    path,
                    MAX_ADMIN_SECRET_FILE_BYTES,
                )?;
                while bytes.last().is_some_and(|c| *c == b'\n' || *c == b'\r') {
                    bytes.pop();
                }
                Some(bytes)
            }
            (None, None) => None,
        };
        if let Some(s) = &admin_secret {
            if s.len() < admin::MIN_ADMIN_SECRET {
                anyhow::bail!(
                    "the administrator secret must be at least {} bytes",
                    admin::MIN_ADMIN_SECRET
                );
            }
        }
        Ok(Providers {
            store,
            sealer: Arc::new(sealer),
            tokens,
            limiter,
            max_body_bytes,
            admin_secret_digest: admin_secret.map(|s| admin::digest(&s)),
            on_stamp: None,
            secrets: Arc::new(
                SecretPool::start(&config.secret_pool).context("starting the argon2 threads")?,
            ),
        })
    }

    /// Claim `subject` for `kind` (see [`identity_clash`]): 409 naming the
    /// clash when the other kind holds it. The store's conditional insert
    /// decides races; a provider registered before identities were recorded
    /// is still found by its account.
    pub async fn claim_identity(&self, subject: &str, kind: IdentityKind) -> Result<(), ApiError> {
        if kind == IdentityKind::Consumer && self.store.get_provider(subject).await?.is_some() {
            return Err(ApiError::Conflict(
                identity_clash(subject, kind, IdentityKind::Provider).unwrap_or_default(),
            ));
        }
        let holder = self.store.claim_identity(subject, kind).await?;
        match identity_clash(subject, kind, holder) {
            Some(message) => Err(ApiError::Conflict(message)),
            None => Ok(()),
        }
    }

    /// Whether an administrator disabled `cluster_id`.
    pub async fn is_disabled(&self, cluster_id: &str) -> Result<bool, StoreError> {
        Ok(self
            .store
            .disabled_providers()
            .await?
            .contains_key(cluster_id))
    }

    /// Whether a sealed peering token of `cluster_id` is on file.
    pub async fn has_peering_token(&self, cluster_id: &str) -> Result<bool, StoreError> {
        Ok(self.store.get_peering_secret(cluster_id).await?.is_some())
    }

    /// The peering credentials of `cluster_id` to hand to a buyer.
    pub async fn credentials(&self, cluster_id: &str) -> Result<PeeringCredentials, ApiError> {
        let account = self.store.get_provider(cluster_id).await?.ok_or_else(|| {
            ApiError::Conflict(format!("provider {cluster_id} has no account any more"))
        })?;
        if account.auth_url.is_empty() {
            // Its token is only a catalog secret: it peers with Liqo v1 alone.
            return Err(ApiError::Conflict(format!(
                "provider {cluster_id} peers only with Liqo v1 (no auth URL): it has no v0 peering credentials"
            )));
        }
        let sealed = self
            .store
            .get_peering_secret(cluster_id)
            .await?
            .ok_or_else(|| {
                ApiError::Conflict(format!(
                    "provider {cluster_id} has no peering credentials on file yet: it must authenticate again"
                ))
            })?;
        let token = self
            .sealer
            .open(cluster_id, &sealed)
            .map_err(|e| ApiError::Internal(format!("peering token of {cluster_id}: {e}")))?;
        Ok(PeeringCredentials {
            cluster_id: account.cluster_id,
            cluster_name: account.cluster_name,
            auth_url: account.auth_url,
            token,
        })
    }

    /// Keep a sealed copy of `token` for purchases, unless the same token
    /// is already on file. Failures are logged, not answered: the
    /// authentication itself succeeded.
    pub async fn remember_peering_token(&self, cluster_id: &str, token: &str) {
        match self.store.get_peering_secret(cluster_id).await {
            Ok(Some(sealed))
                if self
                    .sealer
                    .open(cluster_id, &sealed)
                    .is_ok_and(|t| t == token) =>
            {
                return
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(cluster_id, error = %e, "cannot read the sealed peering token");
                return;
            }
        }
        let sealed = match self.sealer.seal(cluster_id, token) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(cluster_id, error = %e, "cannot seal the peering token");
                return;
            }
        };
        match self.store.put_peering_secret(cluster_id, sealed).await {
            Ok(()) => tracing::info!(
                cluster_id,
                "peering credentials sealed and kept for purchases"
            ),
            Err(e) => {
                tracing::warn!(cluster_id, error = %e, "cannot keep the sealed peering token")
            }
        }
    }
}

/// Provider tokens are checked against the account's current credential
/// generation (see [`crate::auth::Verifier`]).
pub struct AccountGenerations(pub Arc<dyn ProviderStore>);

#[async_trait]
impl Generations for AccountGenerations {
    async fn current_generation(&self, cluster_id: &str) -> Result<Option<u64>, ApiError> {
        Ok(self.0.get_provider(cluster_id).await?.map(|a| a.generation))
    }
}
