//! Who is calling: the catalog's own JWTs, provider secrets hashed with
//! argon2, and the signing key's source.
//!
//! - [`jwt`]: issue and verify tokens (HS256 pinned; issuer, audience and
//!   expiry checked).
//! - [`secret`]: argon2id hashing and verification of provider tokens.
//! - [`key`]: where the signing key comes from (file, environment, or
//!   generated once and persisted).
//! - [`caller`]: the actix extractor that turns `Authorization: Bearer` into
//!   a verified [`Caller`] with roles.
//!
//! Growth points: more [`Role`]s (consumer, admin) for reservations and the
//! Open Service Broker API, and further token verifiers (an external OIDC
//! issuer's JWKS) next to [`jwt::TokenService`] in [`caller`].

pub mod caller;
pub mod jwt;
pub mod key;
pub mod oidc;
pub mod secret;

pub use caller::Caller;
pub use jwt::{Claims, IssuedToken, Role, TokenError, TokenService, TokenSettings};
pub use key::{KeyError, SigningKey};
