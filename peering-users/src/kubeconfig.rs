//! The kubeconfig a consumer peers with, in the shape `liqoctl generate
//! peering-user` prints (v1.2.0 `pkg/utils/kubeconfig/kubeconfig.go`,
//! `GenerateKubeconfig`): one cluster named after the consumer, one user
//! `<X>-user` with the client certificate and key, one context
//! `default-context` in the tenant namespace. It is the catalog's
//! accepted shape too (`catalog/src/providers/kubeconfig.rs`).

use base64::Engine;
use serde_json::json;

use crate::names::ConsumerId;

/// Where the consumer reaches this provider's API server, and what it
/// trusts there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiServer {
    /// `--api-server-address`: an `https://` URL.
    pub address: String,
    /// `--api-server-ca-file`: PEM; None when the server's certificate
    /// chains to public roots (liqoctl then leaves the field out).
    pub ca_pem: Option<String>,
}

/// The kubeconfig for `consumer`'s peering user presenting `cert_pem`
/// with `key_pem`. It holds the private key: never log it.
pub fn build(
    server: &ApiServer,
    consumer: &ConsumerId,
    cert_pem: &str,
    key_pem: &str,
) -> Result<String, serde_yaml_ng::Error> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let mut cluster = json!({ "server": server.address });
    if let Some(ca) = &server.ca_pem {
        cluster["certificate-authority-data"] = json!(b64(ca));
    }
    let name = consumer.as_str();
    let user = consumer.kubeconfig_user();
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": name, "cluster": cluster }],
        "users": [{ "name": user, "user": {
            "client-certificate-data": b64(cert_pem),
            "client-key-data": b64(key_pem),
        }}],
        "contexts": [{ "name": "default-context", "context": {
            "cluster": name,
            "user": user,
            "namespace": consumer.tenant_namespace(),
        }}],
        "current-context": "default-context",
        "preferences": {},
    });
    serde_yaml_ng::to_string(&config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liqoctls_shape() {
        let server = ApiServer {
            address: "https://203.0.113.7:6443".into(),
            ca_pem: Some("CA".into()),
        };
        let x = ConsumerId::parse("cool-consumer").unwrap();
        let text = build(&server, &x, "CERT", "KEY").unwrap();
        let v: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({
                "apiVersion": "v1", "kind": "Config", "preferences": {},
                "clusters": [{"name": "cool-consumer", "cluster": {
                    "server": "https://203.0.113.7:6443",
                    "certificate-authority-data": "Q0E="}}],
                "users": [{"name": "cool-consumer-user", "user": {
                    "client-certificate-data": "Q0VSVA==",
                    "client-key-data": "S0VZ"}}],
                "contexts": [{"name": "default-context", "context": {
                    "cluster": "cool-consumer", "user": "cool-consumer-user",
                    "namespace": "liqo-tenant-cool-consumer"}}],
                "current-context": "default-context",
            })
        );
        let public = ApiServer {
            ca_pem: None,
            ..server
        };
        let text = build(&public, &x, "CERT", "KEY").unwrap();
        assert!(!text.contains("certificate-authority-data"), "{text}");
    }
}
