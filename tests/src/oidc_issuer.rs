//! A test OpenID Connect issuer on loopback: serves a discovery document and
//! a JWKS whose keys the test can rotate, counts JWKS fetches, and signs
//! tokens (RS256 and ES256) with the test keys in `fixtures/oidc/`
//! (generated with openssl for these tests only).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

/// A signing key with its public JWK.
pub struct TestKey {
    pub kid: String,
    pub alg: Algorithm,
    encoding: EncodingKey,
    pub jwk: Value,
}

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/oidc")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl TestKey {
    /// An RS256 key from `fixtures/oidc/<file>`, published as `kid`.
    pub fn rsa(file: &str, kid: &str) -> Self {
        let encoding = EncodingKey::from_rsa_pem(&fixture(file)).expect("RSA test key");
        Self::new(encoding, Algorithm::RS256, kid)
    }

    /// An ES256 (P-256) key from `fixtures/oidc/<file>`, published as `kid`.
    pub fn ec(file: &str, kid: &str) -> Self {
        let encoding = EncodingKey::from_ec_pem(&fixture(file)).expect("EC test key");
        Self::new(encoding, Algorithm::ES256, kid)
    }

    fn new(encoding: EncodingKey, alg: Algorithm, kid: &str) -> Self {
        let mut jwk = Jwk::from_encoding_key(&encoding, alg).expect("JWK of the test key");
        jwk.common.key_id = Some(kid.to_string());
        let mut jwk = serde_json::to_value(&jwk).expect("JWK as JSON");
        jwk["use"] = json!("sig");
        TestKey {
            kid: kid.to_string(),
            alg,
            encoding,
            jwk,
        }
    }

    /// `claims` signed with this key (header `kid` set).
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }

    /// Signed with this key but naming another `kid`.
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(kid.to_string());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }
}

#[derive(Clone)]
struct Shared {
    issuer: String,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
}

/// A running issuer; stops when dropped.
pub struct Issuer {
    shared: Shared,
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Issuer {
    /// Serve on a free loopback port, publishing no keys yet.
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("issuer runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the issuer");
        let addr = listener.local_addr().expect("issuer address");
        let shared = Shared {
            issuer: format!("http://{addr}"),
            keys: Arc::default(),
            fetches: Arc::default(),
        };
        let app = Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(|State(s): State<Shared>| async move {
                    Json(json!({
                        "issuer": s.issuer,
                        "jwks_uri": format!("{}/keys", s.issuer),
                        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                        "response_types_supported": ["code"],
                        "subject_types_supported": ["public"],
                    }))
                }),
            )
            .route(
                "/keys",
                get(|State(s): State<Shared>| async move {
                    s.fetches.fetch_add(1, Ordering::SeqCst);
                    let keys = s.keys.lock().expect("keys").clone();
                    // An encryption key and an unsupported type, which a
                    // verifier must skip.
                    let mut all = keys;
                    all.push(json!({ "kty": "oct", "kid": "hmac", "k": "c2VjcmV0", "use": "sig" }));
                    all.push(json!({ "kty": "OKP", "crv": "X25519", "kid": "enc", "x": "AAAA", "use": "enc" }));
                    Json(json!({ "keys": all }))
                }),
            )
            .with_state(shared.clone());
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Issuer {
            shared,
            addr,
            runtime: Some(runtime),
        }
    }

    /// The issuer URL (also the `iss` of its tokens).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Publish exactly `keys` from now on (a rotation drops the others).
    pub fn publish(&self, keys: &[&TestKey]) {
        *self.shared.keys.lock().expect("keys") = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    /// How many times the JWKS was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.shared.fetches.load(Ordering::SeqCst)
    }

    /// Standard claims: this issuer, `audience`, `sub`, `roles`, expiring
    /// `exp_in` seconds from now (negative: already expired).
    pub fn claims(&self, audience: &str, sub: &str, roles: &[&str], exp_in: i64) -> Value {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        json!({
            "iss": self.url(), "aud": audience, "sub": sub,
            "name": format!("User {sub}"), "roles": roles,
            "iat": now, "exp": now + exp_in,
        })
    }
}
