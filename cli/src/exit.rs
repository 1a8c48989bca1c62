//! The exit codes scripts may rely on (docs/cli.md lists them), and the
//! error every command returns: a message for stderr and the code to exit
//! with. Catalog errors are sorted by what a script would do next.

use catalog_client::Error as CatalogError;

/// The exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Code {
    /// Done.
    Ok = 0,
    /// Anything else: the catalog refused the request (its message says
    /// why: a bad filter, an offer it does not accept), could not be
    /// reached, or answered something unusable.
    Error = 1,
    /// The command line is wrong, or a file it names cannot be read.
    Usage = 2,
    /// No such offer, reservation, contract or Purchase (for this caller).
    NotFound = 3,
    /// A conflict: sold out, the plan changed since it was reserved, the
    /// reservation expired, the contract ended, a stale offer version.
    Conflict = 4,
    /// No credentials, or the catalog refused them (401/403).
    Unauthorized = 5,
    /// The Purchase followed failed (phase `Failed` or `Ended`).
    PurchaseFailed = 6,
    /// The Purchase was not Ready within `--timeout`.
    Timeout = 7,
}

impl Code {
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

/// A failed command: what to print and how to exit.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub code: Code,
    pub message: String,
}

impl Failure {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Code::Usage, message)
    }
}

impl From<CatalogError> for Failure {
    fn from(error: CatalogError) -> Self {
        Failure::new(code_of(&error), error.to_string())
    }
}

/// The exit code for a catalog error.
pub fn code_of(error: &CatalogError) -> Code {
    match error {
        CatalogError::NotFound(_) => Code::NotFound,
        CatalogError::Conflict(_) | CatalogError::Ended(_) => Code::Conflict,
        CatalogError::BadCredentials { .. }
        | CatalogError::InvalidCredentials(_)
        | CatalogError::Unauthorized { .. }
        | CatalogError::TokenRefused(_)
        | CatalogError::Forbidden(_) => Code::Unauthorized,
        CatalogError::Credentials(_) => Code::Usage,
        CatalogError::Rejected { status, .. } => match status {
            401 | 403 => Code::Unauthorized,
            404 => Code::NotFound,
            409 | 410 => Code::Conflict,
            _ => Code::Error,
        },
        CatalogError::Unavailable(_) => Code::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(status: u16) -> CatalogError {
        CatalogError::Rejected {
            what: "x".into(),
            status,
            message: "m".into(),
        }
    }

    #[test]
    fn catalog_errors_map_to_what_a_script_does_next() {
        assert_eq!(code_of(&rejected(409)), Code::Conflict);
        assert_eq!(code_of(&rejected(410)), Code::Conflict);
        assert_eq!(code_of(&rejected(404)), Code::NotFound);
        assert_eq!(code_of(&rejected(403)), Code::Unauthorized);
        assert_eq!(code_of(&rejected(400)), Code::Error);
        assert_eq!(
            code_of(&CatalogError::NotFound("contract c".into())),
            Code::NotFound
        );
        assert_eq!(
            code_of(&CatalogError::Unauthorized {
                status: 401,
                message: "m".into()
            }),
            Code::Unauthorized
        );
        assert_eq!(
            code_of(&CatalogError::Conflict("stale".into())),
            Code::Conflict
        );
        assert_eq!(
            code_of(&CatalogError::Unavailable("down".into())),
            Code::Error
        );
    }

    #[test]
    fn the_codes_are_the_documented_numbers() {
        let codes = [
            Code::Ok,
            Code::Error,
            Code::Usage,
            Code::NotFound,
            Code::Conflict,
            Code::Unauthorized,
            Code::PurchaseFailed,
            Code::Timeout,
        ];
        let numbers: Vec<u8> = codes.iter().map(|c| c.as_u8()).collect();
        assert_eq!(numbers, [0, 1, 2, 3, 4, 5, 6, 7]);
    }
}
