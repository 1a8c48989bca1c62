//! Provider secrets: stored only as argon2id PHC strings; verification
//! compares in constant time (inside `argon2`).

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::Argon2;

/// Hash `secret` with a fresh random salt. CPU- and memory-heavy by design:
/// call from a blocking thread.
pub fn hash(secret: &str) -> Result<String, String> {
    Argon2::default()
        .hash_password(secret.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `secret` matches the stored `phc` hash. A malformed hash never
/// matches.
pub fn verify(secret: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(parsed) => Argon2::default()
            .verify_password(secret.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hashes_verify_and_hide_the_secret() {
        let h = super::hash("s3cret-token").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(!h.contains("s3cret-token"));
        assert!(super::verify("s3cret-token", &h));
        assert!(!super::verify("s3cret-tokeN", &h));
        assert!(!super::verify("s3cret-token", "not a hash"));
    }
}
