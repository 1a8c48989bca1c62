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
            Ok(HttpResponse::Ok()
                .insert_header((header::CONTENT_TYPE, mime))
                .insert_header((header::CACHE_CONTROL, cache))
                .insert_header(("X-Content-Type-Options", "nosniff"))
                .body(file.data.into_owned()))
        }
        None if path == "index.html" => Ok(HttpResponse::Ok()
            .content_type("text/html; charset=utf-8")
            .body(PLACEHOLDER)),
        None => Err(ApiError::NotFound(format!(
            "no such page or route: {}",
            req.path()
        ))),
    }
}
