//! Where a bench finds the workspace's binaries it starts as children.

use std::path::{Path, PathBuf};

/// The workspace binary `name`: `$<NAME>_BIN` when set (`CATALOG_BIN` for
/// `catalog`, dashes as underscores), else `target/release/<name>` when it
/// was built (scale figures are release figures), else `target/debug/<name>`.
pub fn workspace_bin(name: &str) -> PathBuf {
    let var = format!("{}_BIN", name.to_uppercase().replace('-', "_"));
    if let Some(bin) = std::env::var_os(var) {
        return bin.into();
    }
    in_target(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        name,
    )
}

fn in_target(target: &Path, name: &str) -> PathBuf {
    let release = target.join("release").join(name);
    if release.exists() {
        release
    } else {
        target.join("debug").join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::in_target;

    #[test]
    fn release_before_debug() {
        let dir = tempdir();
        std::fs::create_dir_all(dir.join("debug")).unwrap();
        std::fs::write(dir.join("debug/x"), b"").unwrap();
        assert_eq!(in_target(&dir, "x"), dir.join("debug/x"));
        std::fs::create_dir_all(dir.join("release")).unwrap();
        std::fs::write(dir.join("release/x"), b"").unwrap();
        assert_eq!(in_target(&dir, "x"), dir.join("release/x"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempdir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("bench-support-bins-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }
}
