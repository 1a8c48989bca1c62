//! HTTPS for the test server, as a real cluster serves its API: a CA made
//! for the server's lifetime (what `certificate-authority-data` in a
//! kubeconfig carries), a serving certificate for `127.0.0.1`/`localhost`
//! signed by it, and client certificates signed by it whose subject CN is
//! the user and O the groups — the x509 authenticator of a real server.
//! The handshake asks for a client certificate but does not require one,
//! so bearer tokens and anonymous requests work over the same port.
//!
//! The same CA signs what the `kubernetes.io/kube-apiserver-client` signer
//! issues for approved CertificateSigningRequests ([`Pki::sign_request`],
//! driven by the `csr_signer` module), as kube-controller-manager's
//! `--cluster-signing-cert-file` is the API server's `--client-ca-file` on
//! a kubeadm cluster: so an issued certificate authenticates here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, CertificateSigningRequestParams, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
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
}

/// Why a CSR could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// A usage the signing policy has no X.509 meaning for.
    #[error("unrecognized usage values: {0:?}")]
    Usage(Vec<String>),
    /// rcgen could not read or sign the request (it reads only the
    /// subject, SANs and key usage extensions of a CSR).
    #[error("signing: {0}")]
    Sign(#[from] rcgen::Error),
}

/// Tells apart the serial numbers of one process's certificates.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

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
        Ok(ClientCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The user of a client certificate the handshake verified: its
    /// subject's CN, in its O's as groups; `None` (not authenticated by
    /// certificate) when the CN is empty or the certificate unreadable, as
    /// `CommonNameUserConversion`
    /// (staging/src/k8s.io/apiserver/pkg/authentication/request/x509/x509.go).
    pub fn user_of(&self, der: &[u8]) -> Option<UserInfo> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        let name = subject.iter_common_name().next()?.as_str().ok()?;
        if name.is_empty() {
            return None;
        }
        let groups: Vec<String> = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok())
            .map(str::to_string)
            .collect();
        Some(UserInfo::authenticated(name, &groups))
    }

    /// Sign a PKCS#10 request (DER) as kube-controller-manager's local
    /// signer does (`CertificateAuthority.Sign`,
    /// pkg/controller/certificates/authority/authority.go, with
    /// `PermissiveSigningPolicy`, …/authority/policies.go): the request's
    /// subject, SANs and public key; the key usages and extended key usages
    /// of `usages` and no other extension; not a CA; valid from 5 minutes
    /// ago (the backdate, not applied to the end of a certificate shorter
    /// than 8 hours) for `ttl`. The certificate, PEM.
    pub fn sign_request(
        &self,
        request_der: &[u8],
        usages: &[String],
        ttl: Duration,
        now: SystemTime,
    ) -> Result<String, SignError> {
        const BACKDATE: Duration = Duration::from_secs(5 * 60);
        const SHORT: Duration = Duration::from_secs(8 * 3600);
        let (key_usages, extended) = key_usages(usages)?;
        let mut request = CertificateSigningRequestParams::from_der(&request_der.into())?;
        let params = &mut request.params;
        params.key_usages = key_usages;
        params.extended_key_usages = extended;
        params.is_ca = IsCa::ExplicitNoCa;
        params.custom_extensions.clear();
        let not_before = now - BACKDATE;
        let not_after = if ttl < SHORT {
            now + ttl
        } else {
            not_before + ttl
        };
        params.not_before = not_before.into();
        params.not_after = not_after.into();
        let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
        let nanos = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default();
        let mut bytes = nanos.to_be_bytes().to_vec();
        bytes.extend(serial.to_be_bytes());
        params.serial_number = Some(SerialNumber::from_slice(&bytes));
        Ok(request.signed_by(&self.ca, &self.ca_key)?.pem())
    }
}

/// `keyUsagesFromStrings` (pkg/controller/certificates/authority/policies.go):
/// each usage is a key usage or an extended key usage; one with no X.509
/// meaning here refuses the signing.
fn key_usages(
    usages: &[String],
) -> Result<(Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>), SignError> {
    let mut key = Vec::new();
    let mut extended = Vec::new();
    let mut unrecognized = Vec::new();
    for usage in usages {
        let (k, e) = match usage.as_str() {
            "signing" | "digital signature" => (Some(KeyUsagePurpose::DigitalSignature), None),
            "content commitment" => (Some(KeyUsagePurpose::ContentCommitment), None),
            "key encipherment" => (Some(KeyUsagePurpose::KeyEncipherment), None),
            "key agreement" => (Some(KeyUsagePurpose::KeyAgreement), None),
            "data encipherment" => (Some(KeyUsagePurpose::DataEncipherment), None),
            "cert sign" => (Some(KeyUsagePurpose::KeyCertSign), None),
            "crl sign" => (Some(KeyUsagePurpose::CrlSign), None),
            "encipher only" => (Some(KeyUsagePurpose::EncipherOnly), None),
            "decipher only" => (Some(KeyUsagePurpose::DecipherOnly), None),
            "any" => (None, Some(ExtendedKeyUsagePurpose::Any)),
            "server auth" => (None, Some(ExtendedKeyUsagePurpose::ServerAuth)),
            "client auth" => (None, Some(ExtendedKeyUsagePurpose::ClientAuth)),
            "code signing" => (None, Some(ExtendedKeyUsagePurpose::CodeSigning)),
            "email protection" | "s/mime" => (None, Some(ExtendedKeyUsagePurpose::EmailProtection)),
            "timestamping" => (None, Some(ExtendedKeyUsagePurpose::TimeStamping)),
            "ocsp signing" => (None, Some(ExtendedKeyUsagePurpose::OcspSigning)),
            // The IPsec and SGC purposes: no signer here allows them.
            _ => {
                unrecognized.push(usage.clone());
                continue;
            }
        };
        if let Some(k) = k.filter(|k| !key.contains(k)) {
            key.push(k);
        }
        if let Some(e) = e.filter(|e| !extended.contains(e)) {
            extended.push(e);
        }
    }
    if !unrecognized.is_empty() {
        return Err(SignError::Usage(unrecognized));
    }
    Ok((key, extended))
}
