//! `GET /subscribe`: check the query and the upgrade, register the
//! subscriber, answer 101 with its [`FeedBody`].

use actix_http::body::BoxBody;
use actix_web::{web, HttpRequest, HttpResponse};

use actix_web::http::header::SEC_WEBSOCKET_EXTENSIONS;

use super::body::FeedBody;
use super::conn::ConnFd;
use super::deflate;
use super::params::SubscribeParams;
use super::Feed;
use crate::http::ApiError;

/// Upgrade to the feed. 400 for a bad query or a request that is not a
/// WebSocket upgrade; 503 when the feed is full or shutting down.
///
/// OpenAPI cannot describe the messages that follow the upgrade; the
/// envelope (`snapshot`, `upsert`, `delete`, `seq`) is in `docs/feed.md`.
#[utoipa::path(
    get, path = "/subscribe", tag = "feed", operation_id = "subscribe",
    params(
        ("mode" = Option<crate::http::schemas::FeedMode>, Query,
            description = "`delta` (default: one snapshot on connect, then one upsert/delete event per change) or `snapshot` (after every change, the latest full list: a burst may bring fewer lists than changes, never an older one)"),
        crate::offers::handlers::FilterParams,
        ("Connection" = String, Header, pattern = "^[Uu]pgrade$", description = "`Upgrade` (a WebSocket handshake)"),
        ("Upgrade" = String, Header, pattern = "^websocket$", description = "`websocket`"),
        ("Sec-WebSocket-Version" = String, Header, pattern = "^13$", description = "`13`"),
        ("Sec-WebSocket-Key" = String, Header, pattern = "^[A-Za-z0-9+/]{21}[AQgw]==$", description = "16 random bytes in base64 (RFC 6455)"),
    ),
    extensions(("x-roles" = json!(["anyone"]))),
    responses(
        (status = 101, description = "Switching to the WebSocket feed; permessage-deflate is accepted when offered"),
        (status = 400, description = "A bad query parameter (named in `field`) or not a WebSocket upgrade", body = crate::http::ErrorBody),
        (status = 503, description = "Connection limit reached or shutting down", body = crate::http::ErrorBody),
    )
)]
pub async fn subscribe(
    feed: web::Data<Feed>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let mut params = SubscribeParams::parse(req.query_string())?;
    let mut handshake = actix_http::ws::handshake(req.head()).map_err(|e| {
        ApiError::bad_request(
            "upgrade",
            format!("/subscribe is a WebSocket endpoint: {e}"),
        )
    })?;
    params.deflate = deflate::offered(req.headers());
    if params.deflate {
        handshake.insert_header((SEC_WEBSOCKET_EXTENSIONS, deflate::ACCEPTED));
    }
    let (mode, filter) = (params.mode, params.filter_key.clone());
    let hub = feed.hub().clone();
    feed.catch_up();
    let fd = req.conn_data::<ConnFd>().copied();
    if let Some(fd) = fd {
        fd.set_nodelay();
    }
    let sub = hub
        .register(params, fd)
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    tracing::info!(subscriber = sub.id, mode = mode.as_str(), filter = %filter, deflate = sub.deflate, "feed subscriber connected");
    let body = BoxBody::new(FeedBody::new(sub, hub, payload));
    let response = handshake
        .message_body(body)
        .map_err(|e| ApiError::Internal(format!("building the upgrade response: {e}")))?;
    Ok(HttpResponse::from(response))
}
