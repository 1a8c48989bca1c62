//! PEM, PKCS#10 certificate requests and certificates read as the API
//! server reads them with Go's `encoding/pem` and `crypto/x509`: what
//! CertificateSigningRequest validation and the signer (the `validation`
//! and `csr_signer` modules) need. Parsing and signature checks are
//! x509-parser's (with `ring`); the error texts of Go that a client might
//! match on are kept, the parser's own failures are worded by x509-parser.

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;
use x509_parser::x509::SubjectPublicKeyInfo;

/// The PEM block type of a CSR.
pub const REQUEST_BLOCK: &str = "CERTIFICATE REQUEST";
/// The PEM block type of a certificate (`utilcert.CertificateBlockType`).
pub const CERTIFICATE_BLOCK: &str = "CERTIFICATE";

/// The DER of the first PEM block of `pem`, which must be a CSR: `ParseCSR`
/// (pkg/apis/certificates/helpers.go) decodes one block and refuses any
/// other type with this message.
pub fn request_der(pem: &[u8]) -> Result<Vec<u8>, String> {
    match Pem::iter_from_buffer(pem).next() {
        Some(Ok(block)) if block.label == REQUEST_BLOCK => Ok(block.contents),
        _ => Err("PEM block type must be CERTIFICATE REQUEST".to_string()),
    }
}

/// `validateCSR` (pkg/apis/certificates/validation/validation.go): the
/// request parses as PKCS#10 and its signature verifies with its own
/// public key (`CheckSignature`).
pub fn check_request(pem: &[u8]) -> Result<(), String> {
    let der = request_der(pem)?;
    let (_, request) = X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("x509: cannot parse certificate request: {e}"))?;
    request
        .verify_signature()
        .map_err(|_| verification_failure(&request.certification_request_info.subject_pki))
}

/// The organizations (O) of the subject of a PEM certificate request, as
/// `ParseCSR` (pkg/apis/certificates/helpers.go: one `CERTIFICATE REQUEST`
/// block, `x509.ParseCertificateRequest`, no signature check) and Go's
/// `pkix.Name.Organization` read them: every O attribute, in order.
pub fn request_organizations(pem: &[u8]) -> Result<Vec<String>, String> {
    let der = request_der(pem)?;
    let (_, request) = X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("x509: cannot parse certificate request: {e}"))?;
    request
        .certification_request_info
        .subject
        .iter_organization()
        .map(|o| {
            o.as_str()
                .map(str::to_string)
                .map_err(|e| format!("x509: cannot parse certificate request: {e}"))
        })
        .collect()
}

/// The error Go's `checkSignature` (crypto/x509/x509.go) returns for a
/// signature that does not verify, by key algorithm.
fn verification_failure(key: &SubjectPublicKeyInfo) -> String {
    use x509_parser::oid_registry::{
        OID_KEY_TYPE_EC_PUBLIC_KEY, OID_PKCS1_RSAENCRYPTION, OID_SIG_ED25519,
    };
    let algorithm = &key.algorithm.algorithm;
    if *algorithm == OID_KEY_TYPE_EC_PUBLIC_KEY {
        "x509: ECDSA verification failure".to_string()
    } else if *algorithm == OID_SIG_ED25519 {
        "x509: Ed25519 verification failure".to_string()
    } else if *algorithm == OID_PKCS1_RSAENCRYPTION {
        "crypto/rsa: verification error".to_string()
    } else {
        "x509: cannot verify signature: algorithm unimplemented".to_string()
    }
}

/// `validateCertificate` (pkg/apis/certificates/validation/validation.go):
/// empty, or one or more PEM blocks, each a `CERTIFICATE` holding a
/// certificate that parses.
pub fn check_certificates(pem: &[u8]) -> Result<(), String> {
    if pem.is_empty() {
        return Ok(());
    }
    let mut blocks = 0;
    for block in Pem::iter_from_buffer(pem) {
        let block = match block {
            Ok(block) => block,
            // What Go's pem.Decode would not see as a block ends the
            // blocks (trailing text is ignored as there).
            Err(x509_parser::prelude::PEMError::MissingHeader) => break,
            Err(e) => return Err(format!("invalid PEM block: {e}")),
        };
        if block.label != CERTIFICATE_BLOCK {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found {:?}",
                block.label
            ));
        }
        x509_parser::parse_x509_certificate(&block.contents)
            .map_err(|e| format!("x509: malformed certificate: {e}"))?;
        blocks += 1;
    }
    if blocks == 0 {
        return Err("must contain at least one CERTIFICATE PEM block".to_string());
    }
    Ok(())
}

/// A PKCS#10 request (PEM) for CN `cn`, signed by a new P-256 key, for
/// the unit tests of the modules that read requests.
#[cfg(test)]
pub fn test_request(cn: &str) -> String {
    test_request_in(cn, &[])
}

/// As [`test_request`], the subject also in the organizations `groups`.
#[cfg(test)]
pub fn test_request_in(cn: &str, groups: &[&str]) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    for group in groups {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, *group);
    }
    params.serialize_request(&key).unwrap().pem().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_must_be_a_signed_pkcs10_block() {
        let pem = test_request("alice");
        assert_eq!(check_request(pem.as_bytes()), Ok(()));
        assert_eq!(
            check_request(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
            Err("PEM block type must be CERTIFICATE REQUEST".to_string())
        );
        let junk = "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n";
        assert!(check_request(junk.as_bytes())
            .unwrap_err()
            .starts_with("x509: cannot parse certificate request"));
        // The same request with one bit of its signature flipped.
        let mut der = request_der(pem.as_bytes()).unwrap();
        let last = der.len() - 1;
        der[last] ^= 1;
        let tampered = x509_parser::pem::Pem {
            label: REQUEST_BLOCK.to_string(),
            contents: der,
        };
        let text = format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
            base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                &tampered.contents
            )
        );
        assert_eq!(
            check_request(text.as_bytes()),
            Err("x509: ECDSA verification failure".to_string())
        );
    }

    #[test]
    fn a_certificate_field_holds_certificate_blocks_only() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem();
        assert_eq!(check_certificates(b""), Ok(()));
        assert_eq!(check_certificates(cert.as_bytes()), Ok(()));
        assert_eq!(
            check_certificates(b"no pem here"),
            Err("must contain at least one CERTIFICATE PEM block".to_string())
        );
        let csr = test_request("bob");
        assert_eq!(
            check_certificates(format!("{cert}{csr}").as_bytes()),
            Err(
                "only CERTIFICATE PEM blocks are allowed, found \"CERTIFICATE REQUEST\""
                    .to_string()
            )
        );
    }
}
