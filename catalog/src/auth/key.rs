//! The JWT signing key: from `--jwt-key-file`, from `CATALOG_JWT_KEY`, or
//! generated once and persisted (mode 0600) so tokens survive a restart;
//! or shared through a store ([`KeySource`]).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Shortest key accepted: HS256 wants at least 256 bits.
pub const MIN_KEY_BYTES: usize = 32;
/// Name of the generated key file inside the data directory.
pub const KEY_FILE: &str = "jwt-signing.key";
/// Largest key file read: a key is tens of bytes, and `/dev/zero` or a huge
/// sparse file in its place must be refused, not read whole (F-10).
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// Where every process on one database finds the signing key (the MongoDB
/// store's `settings`), for [`super::TokenService::with_source`].
#[async_trait::async_trait]
pub trait KeySource: Send + Sync + 'static {
    /// The key stored now; `ours` is stored first if none is (a database
    /// that was wiped gets the key this process signs with back). One
    /// attempt, bounded by the store's timeout.
    async fn shared_key(&self, ours: &[u8]) -> Result<Vec<u8>, String>;
}

/// Secret key bytes. `Debug` never prints them.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({} bytes)", self.0.len())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("signing key too short: {0} bytes, need at least {MIN_KEY_BYTES}")]
    TooShort(usize),
    #[error("signing key: {0}")]
    Read(#[from] edge::config_file::ConfigFileError),
    #[error("writing signing key {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("generating a random key: {0}")]
    Random(String),
}

impl SigningKey {
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, KeyError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyError::TooShort(bytes.len()));
        }
        Ok(SigningKey(bytes))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// A new random 256-bit key.
    pub fn generate() -> Result<Self, KeyError> {
        let mut bytes = vec![0u8; MIN_KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(SigningKey(bytes))
    }

    /// The key in a file (its bytes, trailing newline ignored).
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        Self::from_file_named("--jwt-key-file", path)
    }

    /// [`Self::from_file`], naming `flag` as what gave the file in errors.
    fn from_file_named(flag: &str, path: &Path) -> Result<Self, KeyError> {
        let mut bytes = edge::config_file::read_bytes(flag, path, MAX_KEY_FILE_BYTES)?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        Self::from_bytes(bytes)
    }

    /// The key persisted at `path`, creating it (mode 0600, exclusively, so
    /// two racing starts agree) if it does not exist yet.
    pub fn load_or_generate(path: &Path) -> Result<Self, KeyError> {
        if path.exists() {
            // A key file an older catalog (or an operator) left readable by
            // others is restricted before it is used.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(
                    |source| KeyError::Write {
                        path: path.into(),
                        source,
                    },
                )?;
            }
            return Self::from_file_named("--data-dir's signing key", path);
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| KeyError::Write {
                path: dir.into(),
                source,
            })?;
        }
        let key = Self::generate()?;
        // Hex text, so an operator can copy it into another process's key file.
        let text: String = key.0.iter().map(|b| format!("{b:02x}")).collect();
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(path) {
            Ok(mut f) => {
                let written = f.write_all(text.as_bytes()).and_then(|_| f.sync_all());
                written.map_err(|source| KeyError::Write {
                    path: path.into(),
                    source,
                })?;
                Self::from_bytes(text.into_bytes())
            }
            // Someone else created it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::from_file_named("--data-dir's signing key", path)
            }
            Err(source) => Err(KeyError::Write {
                path: path.into(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_key_is_persisted_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let a = SigningKey::load_or_generate(&path).unwrap();
        let b = SigningKey::load_or_generate(&path).unwrap();
        assert_eq!(a, b);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        assert!(matches!(
            SigningKey::from_bytes(vec![1; 8]),
            Err(KeyError::TooShort(8))
        ));
    }
}
