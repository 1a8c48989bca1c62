//! A peering user's key and certificate request, made as Liqo makes them
//! (`pkg/liqoctl/rest/peering-user/userfactory/cert.go:69-88`: an Ed25519
//! key, or an RSA-2048 one in TLS compatibility mode ([`KeyKind`]), a
//! PKCS#10 request with CN [`ConsumerId::common_name`] and O `liqo.io`),
//! and the check a CSR must pass before this controller approves it.
//!
//! Approving a `kubernetes.io/kube-apiserver-client` CSR mints whatever
//! identity its request names, so the check reads the request as stored
//! in the API server — not what this controller meant to send — and
//! approves only a request signed by the key this controller keeps, naming
//! exactly the CN and O it chose, for exactly the usages and signer Liqo
//! asks for.

use controller_core::liqo;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PKCS_ED25519, PKCS_RSA_SHA256};
use x509_parser::prelude::FromDer;

use crate::names::ConsumerId;

/// `certv1.KubeAPIServerClientSignerName`.
pub const SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// `cert.go`: `UsageDigitalSignature`, `UsageKeyEncipherment`,
/// `UsageClientAuth`, in that order.
pub const USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];

/// What went wrong making or reading a key, request or certificate.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("cannot make the key or request: {0}")]
    Make(#[from] rcgen::Error),
    #[error("the stored key cannot be read: {0}")]
    Key(String),
    #[error("{0}")]
    Parse(String),
}

/// The algorithm of a peering user's key, as `liqoctl generate
/// peering-user` chooses it (v1.2.0 `pkg/liqoctl/rest/peering-user/generate.go:81-105`,
/// `userfactory/cert.go:69-85`): Ed25519 by default, RSA-2048 when the
/// provider's Liqo runs in TLS compatibility mode, for consumers whose TLS
/// stack cannot sign with Ed25519.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Ed25519,
    Rsa,
}

impl KeyKind {
    /// `generate.go:89-102`, from the `liqo-controller-manager`
    /// container's arguments: `--tls-compatibility-mode` alone or `=true`
    /// (any case) is RSA, any other value or no such argument Ed25519
    /// (`pkg/liqoctl/utils/utils.go:62-76` `ExtractValuesFromArgumentList`:
    /// the first argument that is the flag or starts with `flag=`).
    pub fn from_controller_manager_args<S: AsRef<str>>(args: &[S]) -> KeyKind {
        const FLAG: &str = "--tls-compatibility-mode";
        for arg in args {
            let arg = arg.as_ref();
            let value = if arg == FLAG {
                Some("")
            } else {
                arg.strip_prefix(FLAG).and_then(|v| v.strip_prefix('='))
            };
            if let Some(value) = value {
                return if value.is_empty() || value.eq_ignore_ascii_case("true") {
                    KeyKind::Rsa
                } else {
                    KeyKind::Ed25519
                };
            }
        }
        KeyKind::Ed25519
    }
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeyKind::Ed25519 => "Ed25519",
            KeyKind::Rsa => "RSA",
        })
    }
}

/// ring's system CSPRNG as the `rsa` crate takes one.
struct SystemRng(ring::rand::SystemRandom);

impl rsa::rand_core::RngCore for SystemRng {
    fn next_u32(&mut self) -> u32 {
        rsa::rand_core::impls::next_u32_via_fill(self)
    }

    fn next_u64(&mut self) -> u64 {
        rsa::rand_core::impls::next_u64_via_fill(self)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        // The system's randomness failing is not something to go on from.
        #[allow(clippy::expect_used)]
        self.try_fill_bytes(dest)
            .expect("the system's random number generator");
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rsa::rand_core::Error> {
        use ring::rand::SecureRandom;
        self.0
            .fill(dest)
            .map_err(|_| rsa::rand_core::Error::new("the system's random number generator failed"))
    }
}

impl rsa::rand_core::CryptoRng for SystemRng {}

/// `cert.go:71-77`: `rsa.GenerateKey(rand.Reader, 2048)`, as PKCS#8.
fn rsa_key() -> Result<KeyPair, IdentityError> {
    use rsa::pkcs8::EncodePrivateKey;
    let key = rsa::RsaPrivateKey::new(&mut SystemRng(ring::rand::SystemRandom::new()), 2048)
        .map_err(|e| IdentityError::Key(format!("cannot make an RSA key: {e}")))?;
    let pem = key
        .to_pkcs8_pem(rsa::pkcs8::LineEnding::LF)
        .map_err(|e| IdentityError::Key(format!("cannot encode the RSA key: {e}")))?;
    KeyPair::from_pem_and_sign_algo(&pem, &PKCS_RSA_SHA256).map_err(IdentityError::Make)
}

/// A peering user's private key (PKCS#8 PEM) and the CN it was made for.
/// Debug never shows the key.
pub struct UserKey {
    pub common_name: String,
    key: KeyPair,
}

impl std::fmt::Debug for UserKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserKey")
            .field("common_name", &self.common_name)
            .finish_non_exhaustive()
    }
}

impl UserKey {
    /// A fresh key of `kind` and CN for `consumer`.
    pub fn generate(consumer: &ConsumerId, kind: KeyKind) -> Result<Self, IdentityError> {
        let key = match kind {
            KeyKind::Ed25519 => KeyPair::generate_for(&PKCS_ED25519)?,
            KeyKind::Rsa => rsa_key()?,
        };
        // The CN's random suffix comes from the same CSPRNG as the key
        // (ring's, through rcgen): a throw-away Ed25519 public key is
        // SHA-512 of a fresh random seed.
        let mut suffix = [0u8; 16];
        let throwaway = KeyPair::generate_for(&PKCS_ED25519)?;
        suffix.copy_from_slice(&throwaway.public_key_raw()[..16]);
        Ok(Self {
            common_name: consumer.common_name(suffix),
            key,
        })
    }

    /// The key as stored (PKCS#8 PEM) with its CN: Ed25519 or RSA.
    pub fn from_pem(common_name: &str, pem: &str) -> Result<Self, IdentityError> {
        let key = match KeyPair::from_pem(pem) {
            Ok(key) if key.algorithm() == &PKCS_ED25519 => key,
            _ => KeyPair::from_pem_and_sign_algo(pem, &PKCS_RSA_SHA256)
                .map_err(|_| IdentityError::Key("neither an Ed25519 nor an RSA key".into()))?,
        };
        Ok(Self {
            common_name: common_name.to_string(),
            key,
        })
    }

    /// The key's algorithm.
    pub fn kind(&self) -> KeyKind {
        if self.key.algorithm() == &PKCS_ED25519 {
            KeyKind::Ed25519
        } else {
            KeyKind::Rsa
        }
    }

    /// PKCS#8 PEM (`PRIVATE KEY`), as liqoctl writes `client-key-data`.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// The public key as a request's subject public key holds it: the raw
    /// Ed25519 key, or RSA's PKCS#1 `RSAPublicKey`.
    pub fn public_key(&self) -> Vec<u8> {
        self.key.public_key_raw().to_vec()
    }

    /// The PKCS#10 request (PEM) for CN `common_name`, O `liqo.io`.
    pub fn request_pem(&self) -> Result<String, IdentityError> {
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, self.common_name.as_str());
        name.push(DnType::OrganizationName, liqo::CONTROL_PLANE_ORGANIZATION);
        params.distinguished_name = name;
        Ok(params.serialize_request(&self.key)?.pem()?)
    }
}

/// A CSR as stored, the parts the check reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCsr<'a> {
    /// `spec.request`, decoded from base64: PEM.
    pub request_pem: &'a [u8],
    pub signer: &'a str,
    pub usages: Vec<&'a str>,
    pub expiration_seconds: Option<i64>,
}

/// Why a stored CSR is not approved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsrRefused {
    #[error("its request cannot be read: {0}")]
    Unreadable(String),
    #[error("its request's signature does not verify")]
    Signature,
    #[error("its request is not for the key this controller keeps")]
    OtherKey,
    #[error("its request names CN {found:?}, not {expected:?}")]
    CommonName { expected: String, found: String },
    #[error("its request names O {found:?}, not exactly [\"liqo.io\"]")]
    Organization { found: Vec<String> },
    #[error("its request names more than a CN and an O")]
    ExtraSubject,
    #[error("its signer is {0:?}, not kubernetes.io/kube-apiserver-client")]
    Signer(String),
    #[error("its usages are {0:?}, not digital signature, key encipherment, client auth")]
    Usages(Vec<String>),
    #[error("its expirationSeconds is {found:?}, not {expected}")]
    Expiration { expected: i64, found: Option<i64> },
}

/// Whether `csr` is exactly the request this controller made with `key`
/// for `expiration_seconds`: then, and only then, it may be approved.
pub fn check_csr(
    csr: &StoredCsr<'_>,
    key: &UserKey,
    expiration_seconds: i64,
) -> Result<(), CsrRefused> {
    if csr.signer != SIGNER {
        return Err(CsrRefused::Signer(csr.signer.to_string()));
    }
    let mut usages: Vec<&str> = csr.usages.clone();
    usages.sort_unstable();
    let mut wanted = USAGES.to_vec();
    wanted.sort_unstable();
    if usages != wanted {
        return Err(CsrRefused::Usages(
            csr.usages.iter().map(|u| u.to_string()).collect(),
        ));
    }
    if csr.expiration_seconds != Some(expiration_seconds) {
        return Err(CsrRefused::Expiration {
            expected: expiration_seconds,
            found: csr.expiration_seconds,
        });
    }
    let (_, pem) = x509_parser::pem::parse_x509_pem(csr.request_pem)
        .map_err(|e| CsrRefused::Unreadable(e.to_string()))?;
    if pem.label != "CERTIFICATE REQUEST" {
        return Err(CsrRefused::Unreadable(format!(
            "a PEM {:?}, not a CERTIFICATE REQUEST",
            pem.label
        )));
    }
    let (_, request) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .map_err(|e| CsrRefused::Unreadable(e.to_string()))?;
    request
        .verify_signature()
        .map_err(|_| CsrRefused::Signature)?;
    let info = &request.certification_request_info;
    if info.subject_pki.subject_public_key.data.as_ref() != key.public_key().as_slice() {
        return Err(CsrRefused::OtherKey);
    }
    let subject = &info.subject;
    let cns: Vec<String> = subject
        .iter_common_name()
        .map(|a| a.as_str().unwrap_or("?").to_string())
        .collect();
    if cns != [key.common_name.clone()] {
        return Err(CsrRefused::CommonName {
            expected: key.common_name.clone(),
            found: cns.join(","),
        });
    }
    let os: Vec<String> = subject
        .iter_organization()
        .map(|a| a.as_str().unwrap_or("?").to_string())
        .collect();
    if os != [liqo::CONTROL_PLANE_ORGANIZATION] {
        return Err(CsrRefused::Organization { found: os });
    }
    if subject.iter_attributes().count() != 2 {
        return Err(CsrRefused::ExtraSubject);
    }
    Ok(())
}

/// A certificate's validity, in seconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

impl Validity {
    /// Of the first certificate of `pem` (`status.certificate`, decoded).
    pub fn of_pem(pem: &[u8]) -> Result<Self, IdentityError> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem)
            .map_err(|e| IdentityError::Parse(format!("the certificate: {e}")))?;
        let cert = pem
            .parse_x509()
            .map_err(|e| IdentityError::Parse(format!("the certificate: {e}")))?;
        let validity = cert.validity();
        Ok(Self {
            not_before: validity.not_before.timestamp(),
            not_after: validity.not_after.timestamp(),
        })
    }

    /// Whether a certificate should be replaced at `now`: once
    /// `renew_share` of its lifetime has passed (a new peering user is made
    /// and attached while the old one still works).
    pub fn due(&self, now: i64, renew_share: f64) -> bool {
        let life = (self.not_after - self.not_before).max(0) as f64;
        now >= self.not_before + (life * renew_share) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consumer() -> ConsumerId {
        ConsumerId::parse("c1").unwrap()
    }

    fn stored<'a>(pem: &'a [u8]) -> StoredCsr<'a> {
        StoredCsr {
            request_pem: pem,
            signer: SIGNER,
            usages: USAGES.to_vec(),
            expiration_seconds: Some(3600),
        }
    }

    #[test]
    fn our_own_request_passes_and_the_key_round_trips() {
        let key = UserKey::generate(&consumer(), KeyKind::Ed25519).unwrap();
        assert!(consumer().owns_common_name(&key.common_name));
        let pem = key.request_pem().unwrap();
        check_csr(&stored(pem.as_bytes()), &key, 3600).unwrap();
        let again = UserKey::from_pem(&key.common_name, &key.key_pem()).unwrap();
        assert_eq!(again.public_key(), key.public_key());
        check_csr(&stored(pem.as_bytes()), &again, 3600).unwrap();
        assert!(!format!("{key:?}").contains("PRIVATE"));
        let other = UserKey::generate(&consumer(), KeyKind::Ed25519).unwrap();
        assert_ne!(other.common_name, key.common_name, "a fresh CN each time");
    }

    #[test]
    fn an_rsa_key_in_tls_compatibility_mode_passes_and_round_trips() {
        let key = UserKey::generate(&consumer(), KeyKind::Rsa).unwrap();
        assert_eq!(key.kind(), KeyKind::Rsa);
        let pem = key.request_pem().unwrap();
        check_csr(&stored(pem.as_bytes()), &key, 3600).unwrap();
        let again = UserKey::from_pem(&key.common_name, &key.key_pem()).unwrap();
        assert_eq!(again.kind(), KeyKind::Rsa);
        check_csr(&stored(pem.as_bytes()), &again, 3600).unwrap();
        assert!(key.key_pem().starts_with("-----BEGIN PRIVATE KEY-----"));
        // Another RSA key's request is not this one's.
        let other = UserKey::generate(&consumer(), KeyKind::Rsa).unwrap();
        assert_eq!(
            check_csr(&stored(pem.as_bytes()), &other, 3600),
            Err(CsrRefused::OtherKey)
        );
    }

    #[test]
    fn the_mode_is_read_from_the_controller_manager_args_as_liqoctl_reads_it() {
        let kind = |args: &[&str]| KeyKind::from_controller_manager_args(args);
        assert_eq!(kind(&["--tls-compatibility-mode=true"]), KeyKind::Rsa);
        assert_eq!(kind(&["--tls-compatibility-mode=TRUE"]), KeyKind::Rsa);
        assert_eq!(kind(&["--tls-compatibility-mode"]), KeyKind::Rsa);
        assert_eq!(kind(&["--tls-compatibility-mode=false"]), KeyKind::Ed25519);
        assert_eq!(kind(&["--tls-compatibility-mode=yes"]), KeyKind::Ed25519);
        assert_eq!(kind(&["--cluster-id=x"]), KeyKind::Ed25519);
        assert_eq!(kind(&[] as &[&str]), KeyKind::Ed25519);
        // The first one counts, as in liqoctl.
        assert_eq!(
            kind(&[
                "--tls-compatibility-mode=false",
                "--tls-compatibility-mode=true"
            ]),
            KeyKind::Ed25519
        );
        // Another flag sharing the prefix is not it.
        assert_eq!(kind(&["--tls-compatibility-mode-x=true"]), KeyKind::Ed25519);
    }

    #[test]
    fn anything_else_is_refused() {
        let key = UserKey::generate(&consumer(), KeyKind::Ed25519).unwrap();
        let pem = key.request_pem().unwrap();
        let ok = stored(pem.as_bytes());

        let other_key = UserKey::generate(&consumer(), KeyKind::Ed25519).unwrap();
        assert_eq!(check_csr(&ok, &other_key, 3600), Err(CsrRefused::OtherKey));

        // Our key, another CN (say system:masters' admin).
        let mut impostor = UserKey::from_pem("admin", &key.key_pem()).unwrap();
        let forged = impostor.request_pem().unwrap();
        impostor.common_name = key.common_name.clone();
        assert!(matches!(
            check_csr(&stored(forged.as_bytes()), &impostor, 3600),
            Err(CsrRefused::CommonName { .. })
        ));

        // Our key and CN in system:masters.
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, key.common_name.as_str());
        name.push(DnType::OrganizationName, "system:masters");
        params.distinguished_name = name;
        let masters = params.serialize_request(&key.key).unwrap().pem().unwrap();
        assert_eq!(
            check_csr(&stored(masters.as_bytes()), &key, 3600),
            Err(CsrRefused::Organization {
                found: vec!["system:masters".into()]
            })
        );

        let mut csr = ok.clone();
        csr.signer = "kubernetes.io/kubelet-serving";
        assert!(matches!(
            check_csr(&csr, &key, 3600),
            Err(CsrRefused::Signer(_))
        ));
        let mut csr = ok.clone();
        csr.usages.push("server auth");
        assert!(matches!(
            check_csr(&csr, &key, 3600),
            Err(CsrRefused::Usages(_))
        ));
        let mut csr = ok.clone();
        csr.expiration_seconds = None;
        assert!(matches!(
            check_csr(&csr, &key, 3600),
            Err(CsrRefused::Expiration { .. })
        ));
        let garbage = stored(
            b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
        );
        assert!(matches!(
            check_csr(&garbage, &key, 3600),
            Err(CsrRefused::Unreadable(_))
        ));
    }

    #[test]
    fn renewal_is_due_after_the_share() {
        let v = Validity {
            not_before: 1000,
            not_after: 2000,
        };
        assert!(!v.due(1799, 0.8));
        assert!(v.due(1800, 0.8));
        assert!(v.due(5000, 0.8));
    }
}
