//! What the integration tests share: reading an answer of the server.

use serde_json::Value;

/// Send `request`; the answer's status code and JSON body.
pub async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let code = response.status().as_u16();
    (code, response.json().await.unwrap())
}
