//! A cluster's authentication keys, as Liqo v1.2.0 keeps and uses them in
//! `pkg/liqo-controller-manager/authentication/keys.go` (KEYS below): an
//! Ed25519 key pair in the Secret `authentication-keys` of Liqo's
//! namespace, made once when the controller manager starts (KEYS:135-180,
//! called from `cmd/liqo-controller-manager/modules/authentication.go:90,
//! 182-189`), the private key signing the nonces a provider hands out and
//! the public key, sent in the Tenant, verifying them. The crypto is real
//! (`ring`); the RSA and ECDSA keys of Liqo's TLS compatibility mode are
//! not modelled.

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::Client;
use ring::signature::{Ed25519KeyPair, UnparsedPublicKey, ED25519};
use x509_parser::prelude::FromDer;
use x509_parser::x509::SubjectPublicKeyInfo;

use crate::Error;

/// `pkg/consts/authentication.go:19`.
pub const SECRET: &str = "authentication-keys";
/// `pkg/consts/externalnetwork.go:36`.
pub const PRIVATE_KEY_FIELD: &str = "privateKey";
/// `pkg/consts/externalnetwork.go:38`.
pub const PUBLIC_KEY_FIELD: &str = "publicKey";

/// The namespace Liqo is installed in (the chart's release namespace,
/// where the controller manager's ServiceAccount lives).
pub const LIQO_NAMESPACE: &str = "liqo";

/// A cluster's key pair, PEM as stored: PKCS#8 `PRIVATE KEY` and PKIX
/// `PUBLIC KEY` (KEYS:39-60).
#[derive(Clone)]
pub struct Keys {
    pub private_pem: String,
    pub public_pem: String,
}

impl std::fmt::Debug for Keys {
    /// The private key is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("public_pem", &self.public_pem)
            .finish_non_exhaustive()
    }
}

fn auth(what: impl std::fmt::Display) -> Error {
    Error::Authentication(what.to_string())
}

/// KEYS:39-60 `GenerateEd25519Keys`: a new Ed25519 pair from the system's
/// CSPRNG.
pub fn generate() -> Result<Keys, Error> {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 =
        Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| auth("failed to generate private key"))?;
    let pair = rcgen::KeyPair::try_from(pkcs8.as_ref()).map_err(auth)?;
    Ok(Keys {
        private_pem: pair.serialize_pem(),
        public_pem: pair.public_key_pem(),
    })
}

/// KEYS:135-180 `InitClusterKeys`: the Secret `authentication-keys` in
/// `namespace` with a new pair, unless it is there already.
pub async fn init(client: Client, namespace: &str) -> Result<(), Error> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    if secrets.get_opt(SECRET).await?.is_some() {
        return Ok(());
    }
    let keys = generate()?;
    let mut secret = Secret::default();
    secret.metadata.name = Some(SECRET.to_string());
    secret.metadata.namespace = Some(namespace.to_string());
    secret.data = Some(
        [
            (
                PRIVATE_KEY_FIELD.to_string(),
                ByteString(keys.private_pem.into_bytes()),
            ),
            (
                PUBLIC_KEY_FIELD.to_string(),
                ByteString(keys.public_pem.into_bytes()),
            ),
        ]
        .into(),
    );
    secrets.create(&PostParams::default(), &secret).await?;
    Ok(())
}

/// KEYS:220-240 `GetClusterKeysPEM`: the pair as stored in `namespace`.
pub async fn get(client: Client, namespace: &str) -> Result<Keys, Error> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let secret = secrets.get(SECRET).await?;
    let field = |name: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(name))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .ok_or_else(|| auth(format!("{name} not found in secret {namespace}/{SECRET}")))
    };
    Ok(Keys {
        private_pem: field(PRIVATE_KEY_FIELD)?,
        public_pem: field(PUBLIC_KEY_FIELD)?,
    })
}

/// The PKCS#8 DER of a `PRIVATE KEY` PEM (KEYS:196-203).
fn private_der(private_pem: &str) -> Result<Vec<u8>, Error> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(private_pem.as_bytes())
        .map_err(|_| auth("failed to decode private key in PEM format"))?;
    Ok(pem.contents)
}

/// KEYS:85-92 `SignNonce` for an Ed25519 key: the signature of `nonce`.
pub fn sign_nonce(private_pem: &str, nonce: &[u8]) -> Result<Vec<u8>, Error> {
    let der = private_der(private_pem)?;
    let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
        .map_err(|e| auth(format!("failed to parse private key: {e}")))?;
    Ok(pair.sign(nonce).as_ref().to_vec())
}

/// The public key of a PKCS#8 `PRIVATE KEY` PEM, PKIX DER: what a CSR made
/// with that key carries.
pub fn public_der_of(private_pem: &str) -> Result<Vec<u8>, Error> {
    let pair = rcgen::KeyPair::from_pem(private_pem).map_err(auth)?;
    Ok(pair.public_key_der())
}

/// `csr.go:238-264` `ParseTenantPublicKey`: a Tenant's `spec.publicKey` is
/// a PKIX `PUBLIC KEY` PEM, or (before Liqo 1.0.2) the 32 raw bytes of an
/// Ed25519 key; its PKIX DER.
pub fn parse_tenant_public_key(public_key: &[u8]) -> Result<Vec<u8>, Error> {
    match x509_parser::pem::parse_x509_pem(public_key) {
        Ok((_, pem)) => {
            SubjectPublicKeyInfo::from_der(&pem.contents)
                .map_err(|e| auth(format!("unable to parse PEM public key: {e}")))?;
            Ok(pem.contents)
        }
        Err(_) if public_key.len() == 32 => {
            // The PKIX prefix of an Ed25519 key (RFC 8410): SEQUENCE {
            // SEQUENCE { OID 1.3.101.112 }, BIT STRING (33 bytes) }.
            let mut der = vec![
                0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
            ];
            der.extend_from_slice(public_key);
            Ok(der)
        }
        Err(_) => Err(auth("invalid public key format")),
    }
}

/// KEYS:112-133 `VerifyNonce` for an Ed25519 key given as PKIX DER:
/// whether `signature` is the key's signature of `nonce`. A key of
/// another algorithm is an error ("unsupported public key type").
pub fn verify_nonce(public_der: &[u8], nonce: &[u8], signature: &[u8]) -> Result<bool, Error> {
    let (_, spki) = SubjectPublicKeyInfo::from_der(public_der)
        .map_err(|e| auth(format!("unable to parse public key: {e}")))?;
    if spki.algorithm.algorithm != x509_parser::oid_registry::OID_SIG_ED25519 {
        return Err(auth("unsupported public key type"));
    }
    let key = UnparsedPublicKey::new(&ED25519, spki.subject_public_key.data.as_ref());
    Ok(key.verify(nonce, signature).is_ok())
}

/// `noncecreator_controller.go:130-137` `generateNonce`: 64 random bytes,
/// standard base64 — the text the nonce Secret holds and the consumer
/// signs.
pub fn random_nonce() -> Result<String, Error> {
    use ring::rand::SecureRandom;
    let mut nonce = [0u8; 64];
    ring::rand::SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| auth("unable to generate nonce"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(nonce))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_with_its_own_public_key_only() {
        let keys = generate().unwrap();
        let other = generate().unwrap();
        let public = parse_tenant_public_key(keys.public_pem.as_bytes()).unwrap();
        let signature = sign_nonce(&keys.private_pem, b"nonce").unwrap();
        assert!(verify_nonce(&public, b"nonce", &signature).unwrap());
        assert!(!verify_nonce(&public, b"other nonce", &signature).unwrap());
        let foreign = sign_nonce(&other.private_pem, b"nonce").unwrap();
        assert!(!verify_nonce(&public, b"nonce", &foreign).unwrap());
        assert_eq!(public_der_of(&keys.private_pem).unwrap(), public);
    }

    #[test]
    fn a_raw_ed25519_key_reads_as_its_pkix_form() {
        let keys = generate().unwrap();
        let public = parse_tenant_public_key(keys.public_pem.as_bytes()).unwrap();
        let raw = &public[12..];
        assert_eq!(parse_tenant_public_key(raw).unwrap(), public);
        assert!(parse_tenant_public_key(b"not a key").is_err());
    }

    #[test]
    fn nonces_are_64_random_bytes_in_base64() {
        let a = random_nonce().unwrap();
        let b = random_nonce().unwrap();
        assert_ne!(a, b);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&a)
            .unwrap();
        assert_eq!(bytes.len(), 64);
    }
}
