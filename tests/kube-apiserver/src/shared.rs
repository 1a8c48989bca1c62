//! What the HTTP handlers and the test handle share — the world behind its
//! lock, the watch signals, who is who — and the answer every handler gives
//! for an error. It sits below `server`, `list` and `watch`, which all
//! answer with it, so none of them has to import another.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::watch;

use crate::rbac::{UserInfo, UNAUTHENTICATED};
use crate::status::ApiError;
use crate::store::World;

/// What the HTTP handlers and the test handle share.
#[derive(Clone)]
pub struct Shared {
    pub world: Arc<Mutex<World>>,
    /// `true` while new watch requests must wait.
    pub hold: watch::Sender<bool>,
    /// Bumped to end every open watch stream.
    pub epoch: watch::Sender<u64>,
    /// Bumped to cut every open watch stream (connection closed, no clean
    /// end of the chunked response).
    pub reset: watch::Sender<u64>,
    pub addr: SocketAddr,
    /// Bearer token → user, as a token authenticator maps them.
    pub tokens: Arc<Mutex<HashMap<String, UserInfo>>>,
    /// Whether requests are authorized by RBAC ([`crate::rbac`]); on
    /// unless a test turns it off.
    pub rbac_enforced: Arc<AtomicBool>,
}

/// The user (CN) and groups (O) of the client certificate of the
/// connection a request came on (a request extension the connection loop
/// sets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertUser(pub UserInfo);

/// The user of a request without credentials, in the one group
/// [`UNAUTHENTICATED`], as a real server with anonymous requests enabled
/// (the default) names it (`staging/src/k8s.io/apiserver/pkg/authentication/request/anonymous/anonymous.go`).
/// RBAC holds it like any user: it may read the public health and version
/// paths only.
pub const ANONYMOUS: &str = "system:anonymous";

impl Shared {
    /// The world, even if a test panicked while holding it.
    pub fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Who sent a request: the client certificate's user if the TLS
    /// handshake presented one this server issued (x509 comes first in a
    /// real server's authenticator chain), else by the `Authorization`
    /// header: anonymous without one, the token's user with a known bearer
    /// token, nobody (`None`, answered 401) with anything else — a real
    /// server never falls back to anonymous when credentials were presented
    /// and failed.
    pub fn authenticate(
        &self,
        certificate: Option<&ClientCertUser>,
        authorization: Option<&str>,
    ) -> Option<UserInfo> {
        if let Some(ClientCertUser(user)) = certificate {
            return Some(user.clone());
        }
        let Some(header) = authorization else {
            return Some(UserInfo {
                name: ANONYMOUS.to_string(),
                groups: vec![UNAUTHENTICATED.to_string()],
            });
        };
        let token = header.strip_prefix("Bearer ")?.trim();
        self.tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }
}

impl Shared {
    /// Wait, up to the world's `fresh_wait`, until the server has reached
    /// resourceVersion `rv`; the real watch cache's answer if it does not.
    pub async fn wait_fresh(&self, rv: u64) -> Result<(), ApiError> {
        let (mut changes, wait) = {
            let world = self.world();
            if world.rv >= rv {
                return Ok(());
            }
            (world.changes.subscribe(), world.fresh_wait)
        };
        let reached = async {
            loop {
                if self.world().rv >= rv {
                    return;
                }
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = changes.recv().await
                {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(wait, reached).await;
        let current = self.world().rv;
        if current >= rv {
            Ok(())
        } else {
            Err(ApiError::too_large_resource_version(rv, current))
        }
    }
}

pub fn error_response(error: &ApiError) -> Response {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, axum::Json(error.to_status())).into_response()
}

pub fn json_response(code: u16, body: Value) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    (code, axum::Json(body)).into_response()
}
