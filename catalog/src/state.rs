//! The state every request handler shares. Modules added later (the
//! WebSocket feed, reservations) hang their shared pieces here and register
//! their routes in [`crate::api::configure`].

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::auth::TokenService;
use crate::metrics::Metrics;
use crate::ratelimit::RateLimiter;
use crate::store::Store;

/// Request limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
}

/// Shared, cheaply cloneable application state (`web::Data<AppState>`).
#[derive(Clone)]
pub struct AppState {
    /// Offers and providers; `store.changes()` follows every committed
    /// change (the seam for the `/subscribe` feed).
    pub store: Arc<dyn Store>,
    /// Issues and verifies the catalog's JWTs.
    pub tokens: Arc<TokenService>,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    /// Limits `POST /authenticate` per client address.
    pub auth_limiter: Arc<RateLimiter>,
    /// Cancelled when the server starts shutting down, so long-lived
    /// connections (WebSockets) can close and let shutdown finish.
    pub shutdown: CancellationToken,
    /// The `/subscribe` feed.
    pub feed: crate::feed::Feed,
    /// Reservations, purchases and the Open Service Broker API.
    pub buying: crate::reservation::Buying,
    /// Verifier of an external OpenID Connect issuer's tokens, if configured.
    pub oidc: Option<Arc<crate::auth::oidc::OidcVerifier>>,
}
