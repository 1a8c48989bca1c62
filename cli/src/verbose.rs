//! `-v`: what goes to stderr, and one line per request to the catalog.
//!
//! catalog-client sends through a `reqwest::Client` it is given; the
//! client built here has a retry classifier that retries nothing and logs
//! each answer on its way (`GET http://catalog/offers?min.memory=8Gi 200
//! OK`): reqwest calls it once per request, after the answer's head or the
//! failure. Only the method, the URL and the status are logged, never a
//! header, so never the bearer token (tokens travel in `Authorization`,
//! never in a URL; user information in a URL is dropped too).

use std::time::Duration;

use crate::exit::{Code, Failure};

/// The tracing target of the request lines.
pub const HTTP_TARGET: &str = "brokerctl::http";

/// The log filter for `-v` counted `verbose` times: warnings; then
/// brokerctl's requests and choices; then debugging of brokerctl and its
/// client; then everything (kube, hyper, rustls), as `RUST_LOG=debug` and
/// `trace`.
pub fn log_level(verbose: u8) -> &'static str {
    match verbose {
        0 => "warn",
        1 => "warn,brokerctl=info",
        2 => "info,brokerctl=debug,catalog_client=debug",
        3 => "debug",
        _ => "trace",
    }
}

/// `uri` without user information: scheme, host, port, path and query.
pub fn shown_uri(uri: &reqwest::Url) -> String {
    let mut shown = uri.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

/// A request's URI (reqwest hands out `http::Uri`, a crate this one does
/// not name) as [`shown_uri`] shows it.
fn shown_http_uri(uri: &impl std::fmt::Display) -> String {
    let text = uri.to_string();
    match reqwest::Url::parse(&text) {
        Ok(url) => shown_uri(&url),
        // Not absolute: no user information to drop.
        Err(_) => text,
    }
}

/// The HTTP client of every catalog request: requests each bounded by
/// `timeout`, sending `user_agent`, each answer logged at info under
/// [`HTTP_TARGET`].
pub fn client(timeout: Duration, user_agent: &str) -> Result<reqwest::Client, Failure> {
    // reqwest's rustls backend needs a process-wide crypto provider; an
    // error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let log = reqwest::retry::never().classify_fn(|attempt| {
        let uri = shown_http_uri(attempt.uri());
        match (attempt.status(), attempt.error()) {
            (Some(status), _) => {
                tracing::info!(target: HTTP_TARGET, "{} {uri} {status}", attempt.method())
            }
            (None, Some(error)) => {
                tracing::info!(target: HTTP_TARGET, "{} {uri} failed: {error}", attempt.method())
            }
            (None, None) => tracing::info!(target: HTTP_TARGET, "{} {uri}", attempt.method()),
        }
        attempt.success()
    });
    reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .timeout(timeout)
        .user_agent(user_agent)
        .retry(log)
        .build()
        .map_err(|e| Failure::new(Code::Error, format!("cannot build an HTTP client: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_v_shows_more() {
        assert_eq!(log_level(0), "warn");
        assert!(log_level(1).contains("brokerctl=info"));
        assert!(log_level(2).contains("brokerctl=debug"));
        assert_eq!(log_level(3), "debug");
        assert_eq!(log_level(9), "trace");
        for v in 0..5 {
            assert!(log_level(v).parse::<edge::log::LogLevel>().is_ok(), "{v}");
        }
    }

    #[test]
    fn a_logged_url_carries_no_user_information() {
        let url = reqwest::Url::parse("https://me:s3cret@catalog.example:8443/offers?a=b").unwrap();
        assert_eq!(shown_uri(&url), "https://catalog.example:8443/offers?a=b");
    }
}
