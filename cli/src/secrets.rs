//! Files that hold a secret (a `--token-file`, a config file with a stored
//! token): read only while no one else may read them, as ssh refuses a
//! private key its group or other users may read. A token that others can
//! read is already exposed; refusing it makes its owner notice and fix the
//! mode instead of going on leaking it (issue 41, B-14).

use std::path::Path;

use crate::exit::Failure;

/// Largest `--token-file` read: a catalog token is a few hundred bytes, an
/// OpenID Connect ID token a few KiB.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// Why the file at `path` must not hold a secret (its group or other users
/// may read it), as ssh words it, or `None` when it is private.
pub fn exposure(path: &Path) -> Result<Option<String>, Failure> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Ok(Some(format!(
                "permissions {:04o} for {} are too open: it holds a secret its group or other users can read; chmod 600 it",
                mode & 0o777,
                path.display()
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(None)
}

/// The token a token file (`what`: `--token-file`, or a context's
/// `token-file`) holds: a regular file of at most [`MAX_TOKEN_FILE_BYTES`]
/// (edge's `config_file`: `/dev/zero` or a FIFO is refused at once), that
/// neither its group nor other users may read, whitespace around it
/// ignored (an editor's final newline).
pub fn read_token_file_named(what: &str, path: &Path) -> Result<String, Failure> {
    let text = edge::config_file::read(what, path, MAX_TOKEN_FILE_BYTES)
        .map_err(|e| Failure::usage(e.to_string()))?;
    if let Some(why) = exposure(path)? {
        return Err(Failure::usage(format!("{what}: {why}")));
    }
    let token = text.trim();
    if token.is_empty() {
        return Err(Failure::usage(format!(
            "{what} {}: holds no token",
            path.display()
        )));
    }
    Ok(token.to_string())
}

/// [`read_token_file_named`] for `--token-file`.
pub fn read_token_file(path: &Path) -> Result<String, Failure> {
    read_token_file_named("--token-file", path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Code;

    fn token_file(dir: &Path, text: &str, mode: u32) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("token");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_token_file_keeps_the_token_off_the_command_line() {
        // B-14: the token read from a file, bounded and private.
        let dir = tempfile::tempdir().unwrap();
        let path = token_file(dir.path(), "  s3cret.jwt\n", 0o600);
        assert_eq!(read_token_file(&path).unwrap(), "s3cret.jwt");
        assert_eq!(
            read_token_file(&token_file(dir.path(), "t", 0o400)).unwrap(),
            "t"
        );

        // Readable by other users, or by its group, as ssh refuses a key.
        for mode in [0o604, 0o640, 0o644] {
            let exposed = read_token_file(&token_file(dir.path(), "s3cret", mode)).unwrap_err();
            assert_eq!(exposed.code, Code::Usage);
            assert!(exposed.message.contains("chmod 600"), "{}", exposed.message);
            assert!(
                exposed
                    .message
                    .contains(&format!("permissions {mode:04o} for ")),
                "{}",
                exposed.message
            );
            assert!(!exposed.message.contains("s3cret"), "{}", exposed.message);
        }

        let empty = read_token_file(&token_file(dir.path(), "\n", 0o600)).unwrap_err();
        assert_eq!(empty.code, Code::Usage);

        let zero = read_token_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(zero.code, Code::Usage);
        assert!(
            zero.message.contains("not a regular file"),
            "{}",
            zero.message
        );

        let big = "x".repeat(MAX_TOKEN_FILE_BYTES as usize + 1);
        let too_large = read_token_file(&token_file(dir.path(), &big, 0o600)).unwrap_err();
        assert!(
            too_large.message.contains("larger than"),
            "{}",
            too_large.message
        );
    }
}
