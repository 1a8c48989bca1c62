//! The PKCS#10 request of a consumer's control plane, as Liqo v1.2.0
//! makes and checks it in `pkg/liqo-controller-manager/authentication/csr.go`
//! (CSR below): made by `liqoctl` from the consumer's cluster key for CN
//! `<consumer cluster ID>`, O `liqo.io` (CSR:70-73, 95-103, 197-236), and
//! checked by the provider's Tenant controller before it has it signed
//! (`CheckCSRForControlPlane`, CSR:115-130, 158-195): one PEM block, a
//! parsable request, that CN, that first O, and the public key the Tenant
//! carries.

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::prelude::FromDer;

use crate::Error;

/// CSR:100-103 `OrganizationControlPlaneCSR`: the group of every
/// control-plane user.
pub const ORGANIZATION: &str = "liqo.io";

/// CSR:70-73 with CSR:197-236: a request signed with `private_pem` (an
/// Ed25519 PKCS#8 key, so `PureEd25519`) for CN `cluster_id`, O
/// [`ORGANIZATION`], PEM.
pub fn generate(private_pem: &str, cluster_id: &str) -> Result<String, Error> {
    generate_for(private_pem, cluster_id, ORGANIZATION)
}

/// A request like [`generate`]'s with any subject (what a CSR naming
/// someone else looks like).
pub fn generate_for(private_pem: &str, common_name: &str, org: &str) -> Result<String, Error> {
    let err = |e: rcgen::Error| {
        Error::Authentication(format!("failed to create certificate request: {e}"))
    };
    let key = rcgen::KeyPair::from_pem(private_pem).map_err(err)?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    // `pkix.Name.ToRDNSequence` puts the organization before the common
    // name.
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, org);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    let request = params.serialize_request(&key).map_err(err)?;
    request.pem().map_err(err)
}

/// Why a request is refused, in Liqo's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// CSR:159-162: not exactly one PEM block.
    #[error("invalid CSR")]
    Pem,
    /// CSR:164-167: `x509.ParseCertificateRequest` failed.
    #[error("x509: {0}")]
    Parse(String),
    /// CSR:118-121.
    #[error("invalid common name")]
    CommonName,
    /// CSR:124-127.
    #[error("invalid organization")]
    Organization,
    /// CSR:177-191.
    #[error("invalid public key")]
    PublicKey,
}

/// CSR:115-130 `CheckCSRForControlPlane`: `csr` (PEM) asks for the
/// control-plane identity of `cluster_id` with the key `public_der` (PKIX
/// DER).
pub fn check(csr: &[u8], public_der: &[u8], cluster_id: &str) -> Result<(), Invalid> {
    // CSR:159-162: Go's `pem.Decode` and nothing after the block.
    let (rest, pem) = x509_parser::pem::parse_x509_pem(csr).map_err(|_| Invalid::Pem)?;
    if !rest.is_empty() {
        return Err(Invalid::Pem);
    }
    let (_, request) = X509CertificationRequest::from_der(&pem.contents)
        .map_err(|e| Invalid::Parse(e.to_string()))?;
    let info = &request.certification_request_info;
    let common_name = info
        .subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or("");
    if common_name != cluster_id {
        return Err(Invalid::CommonName);
    }
    // CSR:125: the first organization only (Go would panic on none).
    let organization = info
        .subject
        .iter_organization()
        .next()
        .and_then(|o| o.as_str().ok());
    if organization != Some(ORGANIZATION) {
        return Err(Invalid::Organization);
    }
    // CSR:177-191: the request's key, re-marshalled as PKIX, equals the
    // Tenant's (an SPKI's DER is its marshalling).
    if public_der.is_empty() || info.subject_pki.raw != public_der {
        return Err(Invalid::PublicKey);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_keys;

    #[test]
    fn a_request_passes_only_for_its_cluster_group_and_key() {
        let keys = cluster_keys::generate().unwrap();
        let public = cluster_keys::public_der_of(&keys.private_pem).unwrap();
        let csr = generate(&keys.private_pem, "consumer").unwrap();
        assert_eq!(check(csr.as_bytes(), &public, "consumer"), Ok(()));
        assert_eq!(
            check(csr.as_bytes(), &public, "someone-else"),
            Err(Invalid::CommonName)
        );
        let other = cluster_keys::generate().unwrap();
        let other_public = cluster_keys::public_der_of(&other.private_pem).unwrap();
        assert_eq!(
            check(csr.as_bytes(), &other_public, "consumer"),
            Err(Invalid::PublicKey)
        );
        let admins = generate_for(&keys.private_pem, "consumer", "system:masters").unwrap();
        assert_eq!(
            check(admins.as_bytes(), &public, "consumer"),
            Err(Invalid::Organization)
        );
        let two = format!("{csr}{csr}");
        assert_eq!(
            check(two.as_bytes(), &public, "consumer"),
            Err(Invalid::Pem)
        );
        assert_eq!(check(b"garbage", &public, "consumer"), Err(Invalid::Pem));
    }
}
