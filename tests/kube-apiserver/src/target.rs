//! Which part of an object a write is for: the object itself or one of
//! its subresources a write may go to (`status`; a namespace's
//! `finalize`; a CertificateSigningRequest's `approval`). The store,
//! validation and the CSR strategies each take it, so it sits below them.

/// Which part of an object a write is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Main,
    Status,
    /// A namespace's `/finalize` subresource: only `spec.finalizers`.
    Finalize,
    /// A CertificateSigningRequest's `/approval` subresource: only its
    /// conditions, Approved and Denied among them
    /// (`pkg/registry/certificates/certificates/strategy.go`,
    /// `csrApprovalStrategy`).
    Approval,
}

impl Target {
    /// The subresource's name, as admission sees it (`""` for the object).
    pub fn subresource(self) -> &'static str {
        match self {
            Self::Main => "",
            Self::Status => "status",
            Self::Finalize => "finalize",
            Self::Approval => "approval",
        }
    }
}
