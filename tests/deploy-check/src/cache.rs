//! A rendering of `deploy/kubernetes` kept on disk, so the end-to-end
//! tests (one process each under nextest, dozens of them loading the
//! shipped RBAC) start kubectl seven times per run rather than per test.
//! The key is a hash of everything kubectl's output depends on: every
//! file under the deploy directory (kustomize's default load restrictor
//! keeps each kustomization inside its own directory, and nothing here is
//! remote) and the kubectl binary itself (its path, size and modification
//! time, which a reinstall changes). A missing or unreadable entry is
//! rendered again; nothing stale can be read, since any change is a new key.
//! (std's `DefaultHasher`: fixed keys, so every test process computes the
//! same key; a Rust release that changes its algorithm only misses once.)

use std::path::{Path, PathBuf};

use std::hash::{DefaultHasher, Hasher};

use crate::checks::{render_all, Rendered};
use crate::kubectl::{Kubectl, RenderError};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RenderError + '_ {
    move |error| RenderError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Every file under `dir`, sorted, with its path relative to `root`.
fn files(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, PathBuf)>) -> Result<(), RenderError> {
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        if path.is_dir() {
            files(root, &path, out)?;
        } else {
            let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            out.push((relative, path));
        }
    }
    Ok(())
}

/// The cache key of rendering `deploy` with `kubectl`, as hex.
pub fn key(kubectl: &Kubectl, deploy: &Path) -> Result<String, RenderError> {
    let mut hasher = DefaultHasher::new();
    let binary = std::fs::metadata(kubectl.path()).map_err(|error| RenderError::NoKubectl {
        path: kubectl.path().to_path_buf(),
        error,
    })?;
    let modified = binary
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    hasher.write(
        format!(
            "{}\0{}\0{modified}\0",
            kubectl.path().display(),
            binary.len()
        )
        .as_bytes(),
    );
    let mut all = Vec::new();
    files(deploy, deploy, &mut all)?;
    all.sort();
    for (relative, path) in all {
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        // Lengths first, so no two different trees hash the same bytes.
        let name = relative.to_string_lossy();
        hasher.write_u64(name.len() as u64);
        hasher.write(name.as_bytes());
        hasher.write_u64(bytes.len() as u64);
        hasher.write(&bytes);
    }
    Ok(format!("{:016x}", hasher.finish()))
}

/// [`render_all`], read from `cache_dir` when the same deploy files were
/// rendered by the same kubectl before; otherwise rendered and stored
/// there (replacing the entries of older keys).
pub fn render_all_cached(
    kubectl: &Kubectl,
    deploy: &Path,
    cache_dir: &Path,
) -> Result<Vec<Rendered>, RenderError> {
    let key = key(kubectl, deploy)?;
    let entry = cache_dir.join(format!("{key}.json"));
    if let Some(rendered) = std::fs::read(&entry)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
    {
        return Ok(rendered);
    }
    let rendered = render_all(kubectl, deploy)?;
    std::fs::create_dir_all(cache_dir).map_err(io(cache_dir))?;
    // Several test processes may render at once: each writes its own file
    // and renames it into place, which is atomic.
    let partial = cache_dir.join(format!("{key}.json.{}", std::process::id()));
    let bytes = serde_json::to_vec(&rendered).map_err(|e| RenderError::Io {
        path: partial.clone(),
        error: e.into(),
    })?;
    std::fs::write(&partial, bytes).map_err(io(&partial))?;
    std::fs::rename(&partial, &entry).map_err(io(&entry))?;
    for old in std::fs::read_dir(cache_dir)
        .map_err(io(cache_dir))?
        .flatten()
    {
        let path = old.path();
        if path != entry && path.extension().is_some_and(|e| e == "json") {
            // Another process may have removed it first.
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(rendered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn a_second_render_of_the_same_files_is_read_and_a_changed_file_renders_again() {
        let kubectl =
            Kubectl::installed_under(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."));
        let deploy = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let app = deploy.path().join("app");
        std::fs::create_dir(&app).unwrap();
        write(
            &app,
            "kustomization.yaml",
            "namespace: a\nresources: [cm.yaml]\n",
        );
        write(
            &app,
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        );
        let first = render_all_cached(&kubectl, deploy.path(), cache.path()).unwrap();
        assert_eq!(first[0].objects[0]["metadata"]["namespace"], "a");

        // Unchanged files: the stored entry (altered here) is what comes
        // back, not a new rendering...
        let entry = cache
            .path()
            .join(format!("{}.json", key(&kubectl, deploy.path()).unwrap()));
        let mut stored: Vec<Rendered> =
            serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
        stored[0].objects[0]["metadata"]["namespace"] = "from-cache".into();
        std::fs::write(&entry, serde_json::to_vec(&stored).unwrap()).unwrap();
        let second = render_all_cached(&kubectl, deploy.path(), cache.path()).unwrap();
        assert_eq!(second[0].objects[0]["metadata"]["namespace"], "from-cache");

        // ...while any change to a file is rendered by kubectl again, and
        // the older entry goes.
        write(
            &app,
            "kustomization.yaml",
            "namespace: b\nresources: [cm.yaml]\n",
        );
        let third = render_all_cached(&kubectl, deploy.path(), cache.path()).unwrap();
        assert_eq!(third[0].objects[0]["metadata"]["namespace"], "b");
        assert!(!entry.exists());
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 1);
    }
}
