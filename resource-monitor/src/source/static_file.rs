//! The static source: a YAML or JSON file mapping resource names to
//! quantities, offered to every originator and re-read when it changes.
//!
//! ```yaml
//! cpu: 4            # numbers are fine
//! memory: 16Gi
//! nvidia.com/gpu: "2"
//! ```
//!
//! The file's directory is watched (inotify, via `notify`), not the file:
//! editors and Kubernetes ConfigMap mounts replace a file by renaming a new
//! one over it, which a watch on the old inode would miss. A file that
//! becomes invalid is reported and the previous resources are kept.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use quantity::{Quantity, ResourceList};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::reader::{Notification, NotificationStream, Notifier, ReadError, ResourceReader};
use crate::task::AbortOnDrop;

/// After an in-place write that is not followed by a close, how long to
/// wait before reading, so a slow writer is read once, complete.
const SETTLE: Duration = Duration::from_millis(50);

/// Why a static resource file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StaticFileError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is empty (write `{{}}` to offer nothing)")]
    Empty { path: PathBuf },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("cannot watch {path} for changes: {source}")]
    Watch {
        path: PathBuf,
        source: notify::Error,
    },
}

/// A resource list read from a file and kept up to date.
pub struct StaticFile {
    inner: Arc<Inner>,
    // Dropping the watcher stops inotify; dropping the task stops reloads.
    _watcher: notify::RecommendedWatcher,
    _reloader: AbortOnDrop,
}

struct Inner {
    path: PathBuf,
    current: RwLock<ResourceList>,
    notifier: Notifier,
}

impl fmt::Debug for StaticFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticFile")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl StaticFile {
    /// Read and validate `path`, then watch it. Fails if the file is missing
    /// or invalid, so a bad file stops the program before it serves.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StaticFileError> {
        let path = std::path::absolute(path.as_ref()).map_err(|source| StaticFileError::Io {
            path: path.as_ref().to_path_buf(),
            source,
        })?;
        let initial = load(&path).await?;
        let inner = Arc::new(Inner {
            path: path.clone(),
            current: RwLock::new(initial),
            notifier: Notifier::new(),
        });

        let (wake, woken) = mpsc::unbounded_channel();
        let watcher = watch_directory(&path, wake)?;
        let span = tracing::info_span!("static_source", path = %path.display());
        let reloader = tokio::spawn(reload_on_change(inner.clone(), woken).instrument(span));
        Ok(Self {
            inner,
            _watcher: watcher,
            _reloader: AbortOnDrop(reloader),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The resources as last read.
    pub fn current(&self) -> ResourceList {
        self.inner
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[async_trait::async_trait]
impl ResourceReader for StaticFile {
    async fn read(&self, _originator: &str) -> Result<ResourceList, ReadError> {
        Ok(self.current())
    }

    fn subscribe(&self) -> NotificationStream {
        self.inner.notifier.subscribe()
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        // The file offers the same to everyone: nothing is held per cluster.
        tracing::debug!(cluster, "static source: nothing to forget");
        Ok(())
    }
}

/// What a file-system event asks of the reloader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// The file is complete (closed after writing, renamed into place,
    /// created, removed): read it now.
    Now,
    /// The file is being written: read it once writing has settled (or as
    /// soon as a `Now` event says it is complete).
    Settle,
}

/// Watch the file's directory and wake the reloader on any change that may
/// concern the file.
fn watch_directory(
    path: &Path,
    wake: mpsc::UnboundedSender<Wake>,
) -> Result<notify::RecommendedWatcher, StaticFileError> {
    use notify::event::{AccessKind, AccessMode, ModifyKind};

    let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let name = path.file_name().map(|n| n.to_os_string());
    let handler = move |event: notify::Result<notify::Event>| match event {
        Ok(event) => {
            let what = match event.kind {
                EventKind::Access(AccessKind::Close(AccessMode::Write)) => Wake::Now,
                // Opening and reading (our own reads among them) change nothing.
                EventKind::Access(_) => return,
                EventKind::Modify(ModifyKind::Data(_))
                | EventKind::Modify(ModifyKind::Metadata(_)) => Wake::Settle,
                _ => Wake::Now,
            };
            let relevant = event.paths.is_empty()
                || event.paths.iter().any(|p| {
                    let file = p.file_name();
                    file == name.as_deref()
                        // Kubernetes' atomic writer swaps a `..data` symlink.
                        || file.is_some_and(|f| f.to_string_lossy().starts_with(".."))
                });
            if relevant {
                let _ = wake.send(what);
            }
        }
        Err(error) => tracing::warn!(%error, "file watch error"),
    };
    let watch_err = |source| StaticFileError::Watch {
        path: dir.clone(),
        source,
    };
    let mut watcher = notify::recommended_watcher(handler).map_err(watch_err)?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(watch_err)?;
    Ok(watcher)
}

async fn reload_on_change(inner: Arc<Inner>, mut wake: mpsc::UnboundedReceiver<Wake>) {
    while let Some(first) = wake.recv().await {
        if first == Wake::Settle {
            let settled = tokio::time::sleep(SETTLE);
            tokio::pin!(settled);
            loop {
                tokio::select! {
                    () = &mut settled => break,
                    next = wake.recv() => match next {
                        Some(Wake::Now) => break,
                        Some(Wake::Settle) => {}
                        None => return,
                    },
                }
            }
        }
        // One read covers every event so far.
        while wake.try_recv().is_ok() {}
        match load(&inner.path).await {
            Ok(list) => {
                let changed = {
                    let mut current = inner.current.write().unwrap_or_else(|e| e.into_inner());
                    let changed = *current != list;
                    *current = list;
                    changed
                };
                if changed {
                    tracing::info!("resources changed");
                    inner.notifier.notify(Notification::All);
                }
            }
            Err(error) => tracing::warn!(%error, "keeping the previous resources"),
        }
    }
}

async fn load(path: &Path) -> Result<ResourceList, StaticFileError> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|source| StaticFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    parse(&text, path)
}

/// Parse a resource file: JSON when the name ends in `.json`, YAML otherwise.
pub(crate) fn parse(text: &str, path: &Path) -> Result<ResourceList, StaticFileError> {
    if text.trim().is_empty() {
        return Err(StaticFileError::Empty {
            path: path.to_path_buf(),
        });
    }
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let parse_err = |message: String| StaticFileError::Parse {
        path: path.to_path_buf(),
        message,
    };
    let map: BTreeMap<String, FileQuantity> = if is_json {
        serde_json::from_str(text).map_err(|e| parse_err(e.to_string()))?
    } else {
        serde_yaml::from_str(text).map_err(|e| parse_err(e.to_string()))?
    };
    if let Some(name) = map.keys().find(|k| k.trim().is_empty()) {
        return Err(parse_err(format!("resource name {name:?} is empty")));
    }
    Ok(ResourceList(
        map.into_iter().map(|(k, v)| (k, v.0)).collect(),
    ))
}

/// A quantity written as a string (`"1500m"`, `16Gi`) or a bare number (`4`).
struct FileQuantity(Quantity);

impl<'de> serde::Deserialize<'de> for FileQuantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = FileQuantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes quantity such as 4, \"1500m\" or \"16Gi\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<FileQuantity, E> {
                s.parse()
                    .map(FileQuantity)
                    .map_err(|e| E::custom(format!("invalid quantity {s:?}: {e}")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FileQuantity, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FileQuantity, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<FileQuantity, E> {
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;

    #[test]
    fn yaml_and_json_files_parse() {
        let yaml = parse("cpu: 4\nmemory: 16Gi\nx: 0.5\n", Path::new("r.yaml")).unwrap();
        assert_eq!(yaml.to_strings().get("cpu").map(String::as_str), Some("4"));
        assert_eq!(yaml.to_strings().get("x").map(String::as_str), Some("500m"));
        let json = parse(r#"{"cpu": "1500m", "pods": 10}"#, Path::new("r.json")).unwrap();
        assert_eq!(
            json.to_strings().get("cpu").map(String::as_str),
            Some("1500m")
        );
        assert_eq!(
            json.to_strings().get("pods").map(String::as_str),
            Some("10")
        );
        assert_eq!(parse("{}", Path::new("r.yaml")).unwrap().0.len(), 0);
    }

    #[test]
    fn bad_files_name_the_entry_and_line() {
        let e = parse("cpu: 4\nmemory: lots\n", Path::new("r.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("memory") && e.contains("line 2") && e.contains("lots"),
            "{e}"
        );
        let e = parse("", Path::new("r.yaml")).unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = parse("- cpu\n", Path::new("r.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("r.yaml"), "{e}");
    }

    #[tokio::test]
    async fn changes_are_noticed_and_bad_edits_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.yaml");
        std::fs::write(&path, "cpu: 1\n").unwrap();
        let source = StaticFile::open(&path).await.unwrap();
        let mut notes = source.subscribe();

        std::fs::write(&path, "cpu: 2\n").unwrap();
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), notes.next())
                .await
                .unwrap(),
            Some(Notification::All)
        );
        assert_eq!(source.read("x").await.unwrap().to_strings()["cpu"], "2");

        // Replaced by rename, as editors do.
        let tmp = dir.path().join("r.yaml.new");
        std::fs::write(&tmp, "cpu: 3\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), notes.next())
                .await
                .unwrap(),
            Some(Notification::All)
        );
        assert_eq!(source.read("x").await.unwrap().to_strings()["cpu"], "3");

        // An invalid edit keeps the last good resources.
        std::fs::write(&path, "cpu: three\n").unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(source.read("x").await.unwrap().to_strings()["cpu"], "3");
    }

    #[tokio::test]
    async fn a_missing_file_is_an_error() {
        let err = StaticFile::open("/no/such/dir/r.yaml").await.unwrap_err();
        assert!(matches!(err, StaticFileError::Io { .. }), "{err}");
    }
}
