//! A test OpenID Connect issuer on loopback: serves a discovery document and
//! a JWKS whose keys the test can rotate, counts discovery and JWKS fetches,
//! and signs tokens (RS256 and ES256) with the test keys in `fixtures/oidc/`
//! (generated with openssl for these tests only).
//!
//! Closer to real issuers on demand: https with a certificate from a test CA
//! ([`Issuer::start_https`], [`ca_file`]), keys published without `alg`
//! ([`TestKey::without_alg`]), a discovery document naming another issuer
//! ([`Issuer::set_discovery_issuer`]), an issuer URL with a trailing slash
//! ([`Issuer::start_with`]); claims are plain JSON, so tests set `aud`
//! arrays and `nbf` themselves ([`now`]).

use std::net::SocketAddr;
use std::path::PathBuf;
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

    /// The same key, published without `alg` (as many issuers do): the
    /// verifier must infer it from the key type.
    pub fn without_alg(mut self) -> Self {
        if let Some(o) = self.jwk.as_object_mut() {
            o.remove("alg");
        }
        self
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

/// The test CA that signed the https issuer's certificate (for
/// `--oidc-ca-file`).
pub fn ca_file() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/oidc/tls-ca.pem")
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[derive(Clone)]
struct Shared {
    issuer: Arc<Mutex<String>>,
    /// What the discovery document names as `issuer`, if not the issuer.
    discovery_issuer: Arc<Mutex<Option<String>>>,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
    discovery_fetches: Arc<AtomicUsize>,
}

/// How [`Issuer::start_with`] serves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// https with the `fixtures/oidc/tls-server.pem` certificate.
    pub https: bool,
    /// The issuer URL ends with `/` (discovery then at
    /// `<issuer without slash>/.well-known/openid-configuration`).
    pub trailing_slash: bool,
}

/// A TCP listener that completes a TLS handshake before handing a
/// connection to axum; failed handshakes are dropped.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> tokio::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

fn tls_acceptor() -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/oidc");
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(dir.join("tls-server.pem"))
            .expect("server certificate")
            .collect::<Result<_, _>>()
            .expect("server certificate");
    let key = PrivateKeyDer::from_pem_file(dir.join("tls-server-key.pem")).expect("server key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("TLS server config");
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
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
    /// Serve plain http on a free loopback port, publishing no keys yet.
    pub fn start() -> Self {
        Self::start_with(Options::default())
    }

    /// Serve https (certificate of the test CA, [`ca_file`]).
    pub fn start_https() -> Self {
        Self::start_with(Options {
            https: true,
            ..Options::default()
        })
    }

    /// Serve as `options` say, publishing no keys yet.
    pub fn start_with(options: Options) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("issuer runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the issuer");
        let addr = listener.local_addr().expect("issuer address");
        let scheme = if options.https { "https" } else { "http" };
        let slash = if options.trailing_slash { "/" } else { "" };
        let shared = Shared {
            issuer: Arc::new(Mutex::new(format!("{scheme}://{addr}{slash}"))),
            discovery_issuer: Arc::default(),
            keys: Arc::default(),
            fetches: Arc::default(),
            discovery_fetches: Arc::default(),
        };
        let app = Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(|State(s): State<Shared>| async move {
                    s.discovery_fetches.fetch_add(1, Ordering::SeqCst);
                    let issuer = s.issuer.lock().expect("issuer").clone();
                    let named = s
                        .discovery_issuer
                        .lock()
                        .expect("discovery issuer")
                        .clone()
                        .unwrap_or_else(|| issuer.clone());
                    Json(json!({
                        "issuer": named,
                        "jwks_uri": format!("{}/keys", issuer.trim_end_matches('/')),
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
        if options.https {
            let listener = TlsListener {
                tcp: listener,
                acceptor: tls_acceptor(),
            };
            runtime.spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
        } else {
            runtime.spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
        }
        Issuer {
            shared,
            addr,
            runtime: Some(runtime),
        }
    }

    /// The issuer URL (also the `iss` of its tokens).
    pub fn url(&self) -> String {
        self.shared.issuer.lock().expect("issuer").clone()
    }

    /// The loopback address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on the discovery document names `issuer` (None: the real
    /// one).
    pub fn set_discovery_issuer(&self, issuer: Option<&str>) {
        *self
            .shared
            .discovery_issuer
            .lock()
            .expect("discovery issuer") = issuer.map(str::to_string);
    }

    /// How many times the discovery document was fetched.
    pub fn discovery_fetches(&self) -> usize {
        self.shared.discovery_fetches.load(Ordering::SeqCst)
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
        let now = now();
        json!({
            "iss": self.url(), "aud": audience, "sub": sub,
            "name": format!("User {sub}"), "roles": roles,
            "iat": now, "exp": now + exp_in,
        })
    }
}
