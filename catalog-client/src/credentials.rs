//! The provider's credentials file: its Liqo peering credentials
//! ([`PeeringCredentials`], what `POST /authenticate` takes), as JSON or
//! TOML. The file holds a secret, so it is read only when no other user may
//! read it (or, as a policy of the caller, with a warning), only up to
//! [`MAX_FILE_BYTES`], and no error message ever quotes the token.

use std::path::{Path, PathBuf};

use crate::wire::PeeringCredentials;

/// Largest credentials file read: four short fields.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// What to do with a file other users may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Refuse it: other users may read it, or its group may and that group
    /// is not one of this process's own (a Kubernetes Secret volume is
    /// group-readable by the Pod's `fsGroup`, which only the Pod holds).
    Refuse,
    /// Read it, with a warning to `chmod 600` it.
    Warn,
}

/// Why the credentials file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("cannot read the credentials file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not a regular file, too large, unreadable in time, or not text.
    #[error("{0}")]
    File(#[from] edge::config_file::ConfigFileError),
    #[error("credentials file {path}: is readable by other users (mode {mode:o}, group {group}); it holds a secret: chmod 600")]
    Exposed {
        path: PathBuf,
        mode: u32,
        group: u32,
    },
    #[error("invalid credentials file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid credentials file {path}: {field} {problem}")]
    Field {
        path: PathBuf,
        field: &'static str,
        problem: String,
    },
}

/// Read a credentials file: JSON when it ends in `.json`, TOML when it ends
/// in `.toml`, otherwise whichever of the two parses. Every field is
/// required and no other is allowed; `clusterID`, `clusterName` and `token`
/// must not be blank; `authURL` is an `http://` or `https://` URL, or empty
/// for a provider that peers only with Liqo v1.
pub fn load(path: &Path, exposure: Exposure) -> Result<PeeringCredentials, CredentialsError> {
    load_named("--credentials", path, exposure)
}

/// [`load`] for a program whose flag naming the file is `flag` (e.g.
/// `--catalog-credentials-file`): errors about the file name that flag.
pub fn load_named(
    flag: &str,
    path: &Path,
    exposure: Exposure,
) -> Result<PeeringCredentials, CredentialsError> {
    let read = |source| CredentialsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read)?;
    check_exposure(path, &meta, exposure)?;
    let text = edge::config_file::read(flag, path, MAX_FILE_BYTES)?;
    let creds = parse(&text, path)?;
    check(&creds, path)?;
    Ok(creds)
}

fn parse(text: &str, path: &Path) -> Result<PeeringCredentials, CredentialsError> {
    let bad = |message: String| CredentialsError::Parse {
        path: path.to_path_buf(),
        message,
    };
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    // The parsers' messages quote the offending line; for the token's line
    // that would print the secret, so only their position is kept.
    match extension.as_deref() {
        Some("json") => from_json(text).map_err(bad),
        Some("toml") => from_toml(text).map_err(bad),
        _ => from_json(text).or_else(|json| {
            from_toml(text).map_err(|toml| bad(format!("neither JSON ({json}) nor TOML ({toml})")))
        }),
    }
}

fn from_json(text: &str) -> Result<PeeringCredentials, String> {
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).map_err(|e| redact_values(&e.to_string()))?;
    known_fields(map.keys())?;
    serde_json::from_value(serde_json::Value::Object(map))
        .map_err(|e| redact_values(&e.to_string()))
}

fn from_toml(text: &str) -> Result<PeeringCredentials, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|span| {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            before.iter().filter(|b| **b == b'\n').count() + 1
        });
        let message = redact_values(e.message());
        match line {
            Some(line) => format!("{message} (line {line})"),
            None => message,
        }
    })?;
    known_fields(table.keys())?;
    table
        .try_into()
        .map_err(|e: toml::de::Error| redact_values(e.message()))
}

/// Unknown fields are refused: a typo must not pass for a missing field.
fn known_fields<'a>(keys: impl Iterator<Item = &'a String>) -> Result<(), String> {
    for key in keys {
        if !PeeringCredentials::FIELDS.contains(&key.as_str()) {
            return Err(format!(
                "unknown field `{key}`, expected one of {}",
                PeeringCredentials::FIELDS.join(", ")
            ));
        }
    }
    Ok(())
}

/// serde's "invalid type: integer `123`, expected a string" quotes the
/// value, which may be the secret: keep only its kind.
fn redact_values(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        let Some(start) = message.find(prefix) else {
            continue;
        };
        let rest = &message[start + prefix.len()..];
        let Some(end) = rest.find(", expected") else {
            continue;
        };
        let kind = rest[..end].split_whitespace().next().unwrap_or("value");
        return format!("{}{prefix}{kind}{}", &message[..start], &rest[end..]);
    }
    message.to_string()
}

fn check(creds: &PeeringCredentials, path: &Path) -> Result<(), CredentialsError> {
    let field = |field: &'static str, problem: &str| CredentialsError::Field {
        path: path.to_path_buf(),
        field,
        problem: problem.to_string(),
    };
    for (name, value) in [
        ("clusterID", &creds.cluster_id),
        ("clusterName", &creds.cluster_name),
        ("token", &creds.token),
    ] {
        if value.trim().is_empty() {
            return Err(field(name, "must not be empty"));
        }
    }
    let url = &creds.auth_url;
    if !(url.is_empty() || url.starts_with("https://") || url.starts_with("http://")) {
        return Err(field(
            "authURL",
            "must be an http:// or https:// URL (or empty for Liqo v1 only)",
        ));
    }
    Ok(())
}

#[cfg(unix)]
fn check_exposure(
    path: &Path,
    meta: &std::fs::Metadata,
    exposure: Exposure,
) -> Result<(), CredentialsError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mode = meta.permissions().mode() & 0o777;
    match exposure {
        Exposure::Warn if mode & 0o077 != 0 => {
            tracing::warn!(path = %path.display(), "the credentials file is readable by other users; chmod 600 it");
            Ok(())
        }
        Exposure::Warn => Ok(()),
        Exposure::Refuse => {
            let group_ok = mode & 0o070 == 0 || own_groups().contains(&meta.gid());
            if mode & 0o007 != 0 || !group_ok {
                return Err(CredentialsError::Exposed {
                    path: path.to_path_buf(),
                    mode,
                    group: meta.gid(),
                });
            }
            Ok(())
        }
    }
}

#[cfg(not(unix))]
fn check_exposure(
    _path: &Path,
    _meta: &std::fs::Metadata,
    _exposure: Exposure,
) -> Result<(), CredentialsError> {
    Ok(())
}

/// This process's effective and supplementary group IDs (Linux: from
/// `/proc/self/status`; none elsewhere, so group-readable files are refused).
#[cfg(unix)]
fn own_groups() -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return Vec::new();
    };
    let mut groups = Vec::new();
    for line in status.lines() {
        if let Some(rest) = line.strip_prefix("Gid:") {
            // real, effective, saved, filesystem: the effective one counts.
            groups.extend(
                rest.split_whitespace()
                    .nth(1)
                    .and_then(|g| g.parse::<u32>().ok()),
            );
        } else if let Some(rest) = line.strip_prefix("Groups:") {
            groups.extend(
                rest.split_whitespace()
                    .filter_map(|g| g.parse::<u32>().ok()),
            );
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let _ = mode;
        path
    }

    const JSON: &str = r#"{"clusterID":"c1","clusterName":"one","authURL":"https://one:443","token":"s3cret-value"}"#;
    const TOML: &str = "clusterID = \"c1\"\nclusterName = \"one\"\nauthURL = \"https://one:443\"\ntoken = \"s3cret-value\"\n";

    fn load_private(
        dir: &tempfile::TempDir,
        name: &str,
        text: &str,
    ) -> Result<PeeringCredentials, CredentialsError> {
        load(&write(dir, name, text, 0o600), Exposure::Refuse)
    }

    #[test]
    fn credentials_load_from_json_and_toml_alike() {
        let dir = tempfile::tempdir().unwrap();
        let from_json = load_private(&dir, "c.json", JSON).unwrap();
        let from_toml = load_private(&dir, "c.toml", TOML).unwrap();
        let sniffed_json = load_private(&dir, "creds", JSON).unwrap();
        let sniffed_toml = load_private(&dir, "creds2", TOML).unwrap();
        assert_eq!(from_json.cluster_id, "c1");
        assert_eq!(from_json.token, "s3cret-value");
        assert_eq!(from_json, from_toml);
        assert_eq!(from_json, sniffed_json);
        assert_eq!(from_json, sniffed_toml);
        assert!(!format!("{from_json:?}").contains("s3cret"));
        // Liqo v1-only providers have no auth URL.
        let v1 = r#"{"clusterID":"p1","clusterName":"P","authURL":"","token":"s3cret"}"#;
        assert_eq!(load_private(&dir, "v1.json", v1).unwrap().auth_url, "");
    }

    #[cfg(unix)]
    #[test]
    fn files_others_may_read_are_refused_or_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(&write(&dir, "c.json", JSON, 0o604), Exposure::Refuse).unwrap_err();
        assert!(e.to_string().contains("chmod 600"), "{e}");
        assert!(load(&write(&dir, "c.json", JSON, 0o644), Exposure::Warn).is_ok());
        // Group-readable is fine only for a group of this process's own
        // (the file's group is ours here: we created it).
        load(&write(&dir, "c.json", JSON, 0o640), Exposure::Refuse).unwrap();
    }

    #[test]
    fn oversized_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = format!("{{\"token\":\"{}\"}}", "x".repeat(70 * 1024));
        let e = load_private(&dir, "big.json", &big).unwrap_err();
        assert!(
            matches!(&e, CredentialsError::File(f) if matches!(f.problem, edge::config_file::Problem::TooLarge(_))),
            "{e}"
        );
    }

    #[test]
    fn a_device_or_fifo_in_the_files_place_is_refused_without_reading() {
        let e = load(Path::new("/dev/zero"), Exposure::Warn).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn bad_credentials_files_name_the_problem_without_the_secret() {
        let dir = tempfile::tempdir().unwrap();
        let missing = load(&dir.path().join("nope.json"), Exposure::Refuse).unwrap_err();
        assert!(missing.to_string().contains("nope.json"), "{missing}");

        let e = load_private(
            &dir,
            "a.json",
            r#"{"clusterID":"c1","clusterName":"one","authURL":"https://x"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("token"), "{e}");

        let e = load_private(
            &dir,
            "b.toml",
            "clusterID = \"\"\nclusterName = \"one\"\nauthURL = \"https://x\"\ntoken = \"t\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("clusterID") && e.contains("empty"), "{e}");

        let e = load_private(
            &dir,
            "c.json",
            r#"{"clusterID":"c1","clusterName":"one","authURL":"ftp://x","token":"t"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("authURL"), "{e}");

        // A syntax error on the token's line must not echo the token.
        let e = load_private(
            &dir,
            "d.toml",
            "clusterID = \"c1\"\ntoken = \"s3cret-value\" oops\n",
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains("s3cret"), "{e}");
        assert!(e.contains("line 2"), "{e}");

        let e = load_private(
            &dir,
            "f.json",
            r#"{"clusterID":"c1","clusterName":"one","authURL":"https://x","token":987654321}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            !e.contains("987654321") && e.contains("expected a string"),
            "{e}"
        );

        let e = load_private(&dir, "e.json", r#"{"clusterID":"c1","clusterName":"one","authURL":"https://x","token":"s3cret","extra":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("extra") && !e.contains("s3cret"), "{e}");
    }
}
