//! What the HTTP handlers and the test handle share — the world behind its
//! lock, the watch signals, who is who — and the answer every handler gives
//! for an error. It sits below `server`, `list` and `watch`, which all
//! answer with it, so none of them has to import another.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::watch;

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
    pub addr: SocketAddr,
    /// Bearer token → user name, as a token authenticator maps them.
    pub tokens: Arc<Mutex<HashMap<String, String>>>,
}

/// The user of a request without credentials, as a real server with
/// anonymous requests enabled names it.
pub const ANONYMOUS: &str = "system:anonymous";

impl Shared {
    /// The world, even if a test panicked while holding it.
    pub fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Who sent a request with this `Authorization` header: anonymous
    /// without one, the token's user with a known bearer token, nobody
    /// (`None`, answered 401) with anything else — a real server never
    /// falls back to anonymous when credentials were presented and failed.
    pub fn authenticate(&self, authorization: Option<&str>) -> Option<String> {
        let Some(header) = authorization else {
            return Some(ANONYMOUS.to_string());
        };
        let token = header.strip_prefix("Bearer ")?.trim();
        self.tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
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
