//! What every `/v2` request must carry: platform credentials (HTTP basic
//! with the configured account, or a catalog/OIDC bearer token with the
//! consumer or admin role) and a supported `X-Broker-API-Version`.

use actix_web::http::{header, StatusCode};
use actix_web::{FromRequest, HttpRequest};
use base64::Engine;
use subtle::ConstantTimeEq;

use super::error::OsbError;
use super::Osb;
use crate::auth::{Caller, Role};
use crate::providers::admin::digest;

/// The OSB version this broker implements.
pub const API_VERSION: &str = "2.17";
/// The oldest platform version accepted: fetching instances and bindings and
/// binding `last_operation` arrived in 2.14.
pub const MIN_MINOR: u32 = 14;
pub const VERSION_HEADER: &str = "X-Broker-API-Version";
pub const IDENTITY_HEADER: &str = "X-Broker-API-Originating-Identity";
/// Longest originating identity accepted (it is logged).
const MAX_IDENTITY_LEN: usize = 4096;

/// The authenticated platform or user behind a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// Owner of the instances it provisions: `osb:<user>` for the basic-auth
    /// account, else the token's `sub`.
    pub owner: String,
    /// Admins may act on every instance.
    pub admin: bool,
}

impl Platform {
    pub fn may_act_on(&self, owner: &str) -> bool {
        self.admin || self.owner == owner
    }
}

fn unauthorized(description: &str) -> OsbError {
    OsbError::new(StatusCode::UNAUTHORIZED, None, description)
}

/// Authenticate, then check the version and originating-identity headers.
pub async fn guard(state: &Osb, req: &HttpRequest) -> Result<Platform, OsbError> {
    let platform = authenticate(state, req).await?;
    check_version(req)?;
    if let Some((on, user)) = originating_identity(req)? {
        tracing::info!(platform = %on, user = %user, owner = %platform.owner, method = %req.method(), path = %req.path(), "OSB request on behalf of a platform user");
    }
    Ok(platform)
}

/// The `X-Broker-API-Originating-Identity` header, `<platform> <base64
/// of a JSON object>`, decoded: the platform name and the user's JSON.
pub fn originating_identity(req: &HttpRequest) -> Result<Option<(String, String)>, OsbError> {
    let Some(value) = req.headers().get(IDENTITY_HEADER) else {
        return Ok(None);
    };
    let bad = |why: &str| OsbError::bad_request(format!("{IDENTITY_HEADER}: {why}"));
    if value.len() > MAX_IDENTITY_LEN {
        return Err(bad(&format!("longer than {MAX_IDENTITY_LEN} bytes")));
    }
    let text = value.to_str().map_err(|_| bad("must be ASCII"))?.trim();
    let (platform, encoded) = text
        .split_once(' ')
        .ok_or_else(|| bad("must be `<platform> <base64-encoded JSON object>`"))?;
    if platform.is_empty()
        || !platform
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(bad("the platform must be a word such as `kubernetes`"));
    }
    let json = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| bad("the value is not base64"))?;
    let user: serde_json::Value =
        serde_json::from_slice(&json).map_err(|_| bad("the value is not JSON"))?;
    if !user.is_object() {
        return Err(bad("the value must be a JSON object"));
    }
    Ok(Some((platform.to_string(), user.to_string())))
}

async fn authenticate(state: &Osb, req: &HttpRequest) -> Result<Platform, OsbError> {
    let value = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| unauthorized("missing Authorization (Basic or Bearer)"))?;
    if let Some(encoded) = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))
    {
        let settings = &state.settings;
        let Some((user, pass)) = &settings.basic else {
            return Err(unauthorized(
                "basic authentication is not configured on this broker",
            ));
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| unauthorized("malformed basic credentials"))?;
        let (u, p) = decoded
            .split_once(':')
            .ok_or_else(|| unauthorized("malformed basic credentials"))?;
        // Compare both halves, always, in constant time.
        let ok = digest(u.as_bytes()).ct_eq(&user.digest) & digest(p.as_bytes()).ct_eq(pass);
        if !bool::from(ok) {
            tracing::warn!("OSB basic authentication refused");
            return Err(unauthorized("wrong broker credentials"));
        }
        return Ok(Platform {
            owner: format!("osb:{}", user.name),
            admin: false,
        });
    }
    let caller = Caller::extract(req)
        .await
        .map_err(|e| unauthorized(&e.to_string()))?;
    let admin = caller.roles.contains(&Role::Admin);
    if !admin && !caller.roles.contains(&Role::Consumer) {
        return Err(OsbError::forbidden("this needs the consumer or admin role"));
    }
    Ok(Platform {
        owner: caller.cluster_id,
        admin,
    })
}

/// 412 without the header or for an unsupported version, 400 if malformed.
pub fn check_version(req: &HttpRequest) -> Result<(), OsbError> {
    let Some(value) = req.headers().get(VERSION_HEADER) else {
        return Err(OsbError::new(
            StatusCode::PRECONDITION_FAILED,
            None,
            format!(
                "the {VERSION_HEADER} header is required; this broker implements {API_VERSION}"
            ),
        ));
    };
    let text = value.to_str().unwrap_or_default().trim();
    let parsed = text
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    let Some((major, minor)) = parsed else {
        return Err(OsbError::bad_request(format!(
            "{VERSION_HEADER} must be MAJOR.MINOR such as {API_VERSION}, not `{text}`"
        )));
    };
    if major != 2 || minor < MIN_MINOR {
        return Err(OsbError::new(
            StatusCode::PRECONDITION_FAILED,
            None,
            format!(
                "{VERSION_HEADER} {major}.{minor} is not supported: this broker implements {API_VERSION} and needs 2.{MIN_MINOR} or later"
            ),
        ));
    }
    Ok(())
}
