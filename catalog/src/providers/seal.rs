//! Providers' peering tokens, sealed at rest.
//!
//! `POST /authenticate` keeps only an argon2 hash of a provider's token for
//! checking it; but a purchase must hand the real token to the buyer, so the
//! catalog also keeps one recoverable copy, encrypted with
//! ChaCha20-Poly1305. The key comes from `--peering-key-file`, or is derived
//! (HKDF-SHA256) from the JWT signing key. The cluster ID is bound in as
//! associated data, so a sealed token cannot be replayed under another
//! provider's name. Sealed tokens are never logged and never in public
//! reads; they are opened only to build a contract or an OSB binding.

use std::path::Path;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use hkdf::Hkdf;
use sha2::Sha256;

/// Format tag of the sealed layout: `1 | nonce (12) | ciphertext+tag`.
const VERSION: u8 = 1;
const NONCE_LEN: usize = 12;
const MIN_KEY_MATERIAL: usize = 32;
/// Largest `--peering-key-file` read (key material is tens of bytes).
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("peering key material too short: {0} bytes, need at least {MIN_KEY_MATERIAL}")]
    ShortKey(usize),
    #[error("peering key: {0}")]
    Read(#[from] edge::config_file::ConfigFileError),
    #[error("random nonce: {0}")]
    Random(String),
    #[error("sealing failed")]
    Seal,
    /// Wrong key, another cluster ID, or a damaged record.
    #[error("the sealed peering token cannot be opened with this catalog's key")]
    Open,
}

/// Seals and opens peering tokens with one key. `Debug` shows no key.
pub struct Sealer {
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    /// A sealer whose key is derived from `material` (at least 32 bytes).
    pub fn derive(material: &[u8]) -> Result<Self, SealError> {
        if material.len() < MIN_KEY_MATERIAL {
            return Err(SealError::ShortKey(material.len()));
        }
        let hk = Hkdf::<Sha256>::new(Some(b"liqo-broker-catalog"), material);
        let mut key = [0u8; 32];
        hk.expand(b"peering-token-seal v1", &mut key)
            .map_err(|_| SealError::Seal)?;
        Ok(Sealer {
            cipher: ChaCha20Poly1305::new(&Key::from(key)),
        })
    }

    /// A sealer keyed from the bytes of `path` (trailing newlines ignored).
    pub fn from_file(path: &Path) -> Result<Self, SealError> {
        // Bounded like every file a flag names (F-11): `/dev/zero`, a FIFO
        // or a huge sparse file is refused at once, not read for ever.
        let mut bytes =
            edge::config_file::read_bytes("--peering-key-file", path, MAX_KEY_FILE_BYTES)?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        Self::derive(&bytes)
    }

    pub fn seal(&self, cluster_id: &str, token: &str) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| SealError::Random(e.to_string()))?;
        let ciphertext = self
            .cipher
            .encrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: token.as_bytes(),
                    aad: cluster_id.as_bytes(),
                },
            )
            .map_err(|_| SealError::Seal)?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ciphertext);
        Ok(out)
    }

    pub fn open(&self, cluster_id: &str, sealed: &[u8]) -> Result<String, SealError> {
        if sealed.len() < 1 + NONCE_LEN || sealed[0] != VERSION {
            return Err(SealError::Open);
        }
        let (nonce, ciphertext) = sealed[1..].split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| SealError::Open)?;
        let plain = self
            .cipher
            .decrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad: cluster_id.as_bytes(),
                },
            )
            .map_err(|_| SealError::Open)?;
        String::from_utf8(plain).map_err(|_| SealError::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_binds_key_and_cluster() {
        let s = Sealer::derive(&[3u8; 32]).unwrap();
        let sealed = s.seal("cluster-1", "the-token").unwrap();
        assert!(!sealed.windows(9).any(|w| w == b"the-token"));
        assert_eq!(s.open("cluster-1", &sealed).unwrap(), "the-token");
        assert!(s.open("cluster-2", &sealed).is_err(), "other cluster");
        let other = Sealer::derive(&[4u8; 32]).unwrap();
        assert!(other.open("cluster-1", &sealed).is_err(), "other key");
        let mut damaged = sealed.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        assert!(s.open("cluster-1", &damaged).is_err(), "damaged");
        assert_ne!(
            sealed,
            s.seal("cluster-1", "the-token").unwrap(),
            "fresh nonce"
        );
        assert!(matches!(
            Sealer::derive(&[1u8; 8]),
            Err(SealError::ShortKey(8))
        ));
    }
}
