//! The web UI: the files of `webui/`, embedded into the binary at compile
//! time and served for every `GET` no API route claimed (`/` is
//! `index.html`). A build without UI files serves a small placeholder page.

use actix_web::http::{header, Method};
use actix_web::{HttpRequest, HttpResponse};
use rust_embed::RustEmbed;

use crate::http::ApiError;

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

/// The security headers of UI responses.
fn secure(mut resp: actix_web::HttpResponseBuilder) -> actix_web::HttpResponseBuilder {
    resp.insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
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
    match Assets::get(&path) {
        Some(file) => {
            let mime = file.metadata.mimetype();
            let cache = if path.ends_with(".html") {
                "no-cache"
            } else {
                "public, max-age=300"
            };
            Ok(secure(HttpResponse::Ok())
                .insert_header((header::CONTENT_TYPE, mime))
                .insert_header((header::CACHE_CONTROL, cache))
                .body(file.data.into_owned()))
        }
        None if path == "index.html" => Ok(secure(HttpResponse::Ok())
            .content_type("text/html; charset=utf-8")
            .body(PLACEHOLDER)),
        None => Err(ApiError::NotFound(format!(
            "no such page or route: {}",
            req.path()
        ))),
    }
}
