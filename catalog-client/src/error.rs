//! Every failure of a catalog call, sorted by what the caller does about it:
//! stop ([`Error::is_fatal`]: the credentials are refused or the object is
//! someone else's), give up on this request (refused, not found, ended),
//! try again at once (a version conflict), or retry later with backoff (the
//! catalog is unreachable, busy or restarting).

use crate::credentials::CredentialsError;

/// What went wrong talking to the catalog.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The credentials file cannot be used.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// `POST /authenticate` answered 401: the cluster ID is registered with
    /// other credentials.
    #[error("the catalog refused the credentials of cluster {cluster_id}: {message}")]
    BadCredentials { cluster_id: String, message: String },
    /// `POST /authenticate` answered 400: a field of the credentials is not
    /// acceptable to the catalog.
    #[error("the catalog rejected the credentials file: {0}")]
    InvalidCredentials(String),
    /// 401/403 to a bearer token the session cannot renew (a consumer's).
    #[error("the catalog refused the credentials (HTTP {status}): {message}")]
    Unauthorized { status: u16, message: String },
    /// 401 even with a token issued a moment before (a catalog whose
    /// signing key changes under us); worth retrying later.
    #[error("the catalog refused a token it had just issued: {0}")]
    TokenRefused(String),
    /// 403: the object belongs to someone else.
    #[error("the catalog refused the write: {0}")]
    Forbidden(String),
    /// 404: no such object for this caller.
    #[error("the catalog has no {0} for this caller")]
    NotFound(String),
    /// 409 on a write: the object changed since it was read.
    #[error("the offer changed while it was being updated: {0}")]
    Conflict(String),
    /// 409 on a state report: the contract has ended.
    #[error("the contract has ended: {0}")]
    Ended(String),
    /// 400, 409, 410, 413, 415, 422 …: the request is refused; retrying
    /// the same request will not help.
    #[error("the catalog refused {what} (HTTP {status}): {message}")]
    Rejected {
        what: String,
        status: u16,
        message: String,
    },
    /// Unreachable, timed out, 5xx, 429, or an answer that cannot be used:
    /// worth retrying later.
    #[error("{0}")]
    Unavailable(String),
}

impl Error {
    /// Errors that retrying cannot fix: refused or unusable credentials,
    /// someone else's object.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::Credentials(_)
                | Error::BadCredentials { .. }
                | Error::InvalidCredentials(_)
                | Error::Forbidden(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_refusals_are_fatal() {
        let bad = Error::BadCredentials {
            cluster_id: "c".into(),
            message: "m".into(),
        };
        assert!(bad.is_fatal());
        assert!(Error::Forbidden("m".into()).is_fatal());
        assert!(Error::InvalidCredentials("m".into()).is_fatal());
        assert!(!Error::Unavailable("m".into()).is_fatal());
        assert!(!Error::Conflict("m".into()).is_fatal());
        assert!(!Error::TokenRefused("m".into()).is_fatal());
        assert!(!Error::Rejected {
            what: "the offer".into(),
            status: 400,
            message: "m".into()
        }
        .is_fatal());
    }
}
