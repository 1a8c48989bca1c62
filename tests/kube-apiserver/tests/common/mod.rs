//! What the integration tests share: the tests' own credentials, and
//! reading an answer of the server.

#![allow(dead_code)] // each test binary uses a part of it

use kube_test_server::KubeApiServer;
use serde_json::Value;

/// `builder` sending the tests' own credentials (the bearer token of
/// `kube_test_server::ADMIN`, in `system:masters`) on every request that
/// sets no `Authorization` of its own (`bearer_auth` on a request replaces
/// it): without them a request is `system:anonymous`'s, which the server
/// refuses all but the public health and version paths, as a real one does.
pub fn as_admin(builder: reqwest::ClientBuilder, kube: &KubeApiServer) -> reqwest::ClientBuilder {
    // reqwest is built without a crypto provider of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {}", kube.admin_token());
    headers.insert(reqwest::header::AUTHORIZATION, value.parse().unwrap());
    builder.default_headers(headers)
}

/// Send `request`; the answer's status code and JSON body.
pub async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let code = response.status().as_u16();
    (code, response.json().await.unwrap())
}
