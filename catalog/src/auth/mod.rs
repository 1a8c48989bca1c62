//! Who is calling: the catalog's own JWTs, provider secrets hashed with
//! argon2, the signing key's source, and identities from an external OpenID
//! Connect issuer.
//!
//! - [`jwt`]: issue and verify the catalog's tokens (HS256 pinned; issuer,
//!   audience and expiry checked; roles `provider`, `consumer`, `admin`; a
//!   provider token carries its credential generation).
//! - [`secret`]: argon2id hashing and verification of provider tokens.
//! - [`secret_pool`]: where that argon2 work runs: a few lower-priority
//!   threads behind a bounded queue (503 beyond it).
//! - [`key`]: where the signing key comes from (file, environment,
//!   generated once and persisted, or a store shared by every process).
//! - [`oidc`]: an external issuer's tokens, verified against its JWKS, with
//!   roles mapped from a claim.
//! - [`caller`]: the actix extractor that turns `Authorization: Bearer` into
//!   a verified [`Caller`] with roles, through the app's [`Verifier`].
//!
//! It depends on [`crate::http`] only: whether a provider token is still
//! current is asked through the [`Generations`] trait, which the providers
//! feature implements.

pub mod caller;
pub mod jwt;
pub mod key;
pub mod oidc;
pub mod secret;
pub mod secret_pool;

pub use caller::{Caller, Generations, Verifier};
pub use jwt::{Claims, IssuedToken, Role, TokenError, TokenService, TokenSettings};
pub use key::{KeyError, KeySource, SigningKey};
pub use secret_pool::{PoolError, SecretPool, SecretPoolConfig};
