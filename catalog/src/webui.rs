//! The web UI: the files of `webui/`, embedded into the binary at compile
//! time and served for every `GET` no API route claimed (`/` is
//! `index.html`), plus `/ui-config.json`, what the UI needs to know about
//! this catalog: how costs are priced (the OSB currency and cost unit) and,
//! when `--oidc-client-id` is set, the OpenID Connect issuer and client the
//! UI signs consumers in with. A build without UI files serves a small
//! placeholder page.

use actix_web::http::{header, Method};
use actix_web::{web, HttpRequest, HttpResponse};
use rust_embed::RustEmbed;

use crate::auth::Verifier;
use crate::http::ApiError;
use crate::osb::Osb;

#[derive(RustEmbed)]
#[folder = "../webui/"]
#[allow_missing = true]
struct Assets;

const PLACEHOLDER: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Liqo broker catalog</title></head>
<body><h1>Liqo broker catalog</h1>
<p>This build has no web UI. The API is described at <a href="/openapi.json">/openapi.json</a>;
offers are at <a href="/offers">/offers</a>.</p></body></html>
"#;

/// The policy of every UI response: scripts, styles, images and
/// connections (the API, the feed's WebSocket) from the catalog itself,
/// nothing inline, and no framing by any page (clickjacking). The same as
/// `index.html`'s meta policy, plus what only a header can say
/// (`frame-ancestors`).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// The web UI's OpenID Connect client: (issuer, client ID), if configured.
fn browser_client(req: &HttpRequest) -> Option<(String, String)> {
    let verifier = req.app_data::<web::Data<Verifier>>()?;
    let (issuer, client) = verifier.oidc.as_ref()?.browser_client()?;
    Some((issuer.to_string(), client.to_string()))
}

/// The origin (`https://host:port`) of an issuer URL, which the UI's
/// connections may reach besides the catalog (discovery and token
/// requests of the sign-in).
fn issuer_origin(issuer: &str) -> Option<String> {
    let url = url::Url::parse(issuer).ok()?;
    let origin = url.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// The policy of a UI response: [`CONTENT_SECURITY_POLICY`], with the
/// OpenID Connect issuer's origin added to `connect-src` when the UI signs
/// users in there.
fn policy(req: &HttpRequest) -> String {
    match browser_client(req).and_then(|(issuer, _)| issuer_origin(&issuer)) {
        Some(origin) => CONTENT_SECURITY_POLICY.replace(
            "connect-src 'self'",
            &format!("connect-src 'self' {origin}"),
        ),
        None => CONTENT_SECURITY_POLICY.to_string(),
    }
}

/// `/ui-config.json`: pricing, the longest contract a purchase may ask for
/// (`contractDurationSeconds`, the `--contract-duration`) and the sign-in
/// client, for the UI.
fn ui_config(req: &HttpRequest) -> serde_json::Value {
    let (currency, cost_unit) = req
        .app_data::<web::Data<Osb>>()
        .map(|osb| {
            (
                osb.settings.currency.clone(),
                osb.settings.cost_unit.clone(),
            )
        })
        .unwrap_or_else(|| ("usd".to_string(), "HOURLY".to_string()));
    let oidc = browser_client(req)
        .map(|(issuer, client)| serde_json::json!({ "issuer": issuer, "clientID": client }));
    let contract_seconds = req
        .app_data::<web::Data<crate::buying::Buying>>()
        .map(|b| b.contract_duration.as_secs());
    serde_json::json!({
        "currency": currency,
        "costUnit": cost_unit,
        "contractDurationSeconds": contract_seconds,
        "oidc": oidc,
    })
}

/// The security headers of UI responses.
fn secure(
    req: &HttpRequest,
    mut resp: actix_web::HttpResponseBuilder,
) -> actix_web::HttpResponseBuilder {
    resp.insert_header((header::CONTENT_SECURITY_POLICY, policy(req)))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"));
    resp
}

/// Serve an embedded file, or a JSON 404/405.
pub async fn serve(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Err(ApiError::NotFound(format!(
            "no route for {} {}",
            req.method(),
            req.path()
        )));
    }
    let mut path = req.path().trim_start_matches('/').to_string();
    if path.is_empty() || path.ends_with('/') {
        path.push_str("index.html");
    }
    if path == "ui-config.json" {
        return Ok(secure(&req, HttpResponse::Ok())
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .json(ui_config(&req)));
    }
    match Assets::get(&path) {
        // The page's own meta policy names the issuer too (both policies apply).
        Some(file) if path == "index.html" => {
            let page = String::from_utf8_lossy(&file.data).replace(
                "connect-src 'self'",
                policy(&req)
                    .split("; ")
                    .find(|d| d.starts_with("connect-src"))
                    .unwrap_or("connect-src 'self'"),
            );
            Ok(secure(&req, HttpResponse::Ok())
                .content_type("text/html; charset=utf-8")
                .insert_header((header::CACHE_CONTROL, "no-cache"))
                .body(page))
        }
        Some(file) => {
            let mime = file.metadata.mimetype();
            let cache = if path.ends_with(".html") {
                "no-cache"
            } else {
                "public, max-age=300"
            };
            Ok(secure(&req, HttpResponse::Ok())
                .insert_header((header::CONTENT_TYPE, mime))
                .insert_header((header::CACHE_CONTROL, cache))
                .body(file.data.into_owned()))
        }
        None if path == "index.html" => Ok(secure(&req, HttpResponse::Ok())
            .content_type("text/html; charset=utf-8")
            .body(PLACEHOLDER)),
        None => Err(ApiError::NotFound(format!(
            "no such page or route: {}",
            req.path()
        ))),
    }
}
