//! HTTPS for the test server, as a real cluster serves its API: a CA made
//! for the server's lifetime (what `certificate-authority-data` in a
//! kubeconfig carries), a serving certificate for `127.0.0.1`/`localhost`
//! signed by it, and client certificates signed by it whose subject CN is
//! the user and O the groups — the x509 authenticator of a real server.
//! The handshake asks for a client certificate but does not require one,
//! so bearer tokens and anonymous requests work over the same port.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::rbac::UserInfo;

/// A client certificate and its key, PEM-encoded, as a kubeconfig's
/// `client-certificate-data` and `client-key-data` hold them (base64'd).
#[derive(Debug, Clone)]
pub struct ClientCert {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The server's CA, serving configuration and issued client certificates.
pub struct Pki {
    ca: Certificate,
    ca_key: KeyPair,
    pub server_config: Arc<ServerConfig>,
    /// Issued client certificate (DER) → user (its CN, and its O as
    /// groups). Only certificates this CA issued get through the
    /// handshake, and each is issued here, so looking the DER up is
    /// reading its subject.
    issued: Mutex<HashMap<Vec<u8>, UserInfo>>,
}

fn ca(common_name: &str) -> Result<(Certificate, KeyPair)> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert, key))
}

/// The PEM of a CA that signed nothing this server presents: a kubeconfig
/// trusting it must fail the handshake.
pub fn unrelated_ca_pem() -> Result<String> {
    Ok(ca("some other cluster's CA")?.0.pem())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Pki {
    pub fn new() -> Result<Self> {
        let (ca, ca_key) = ca("kube-test-server CA")?;
        let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let serving = params.signed_by(&key, &ca, &ca_key)?;

        let mut roots = RootCertStore::empty();
        roots.add(ca.der().clone()).context("trusting our CA")?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .allow_unauthenticated()
            .build()
            .context("client certificate verifier")?;
        let chain: Vec<CertificateDer<'static>> = vec![serving.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .context("serving certificate")?;
        // HTTP/1.1 only: what the connection loop speaks.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            ca,
            ca_key,
            server_config: Arc::new(config),
            issued: Mutex::new(HashMap::new()),
        })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A client certificate with CN `user` and O `groups`, signed by the CA.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<ClientCert> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, user);
        for group in groups {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.ca, &self.ca_key)?;
        self.issued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                cert.der().to_vec(),
                UserInfo::authenticated(
                    user,
                    &groups.iter().map(|g| g.to_string()).collect::<Vec<_>>(),
                ),
            );
        Ok(ClientCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The user of a verified client certificate (its CN and O).
    pub fn user_of(&self, der: &[u8]) -> Option<UserInfo> {
        self.issued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(der)
            .cloned()
    }
}
