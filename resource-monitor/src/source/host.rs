//! The host source: this machine's CPUs, memory and disk, for a provider
//! that offers a plain host rather than a Kubernetes cluster.
//!
//! Offers `cpu` (logical CPUs this process may run on), `memory` (total
//! memory, or the cgroup limit when lower) and `ephemeral-storage` (free
//! space on the filesystem holding `disk_path`, in whole MiB). The host
//! gives no change events for these, so they are re-measured every
//! `refresh` and subscribers are notified only when a value changes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use quantity::ResourceList;
use tracing::Instrument;

use resource_reader::AbortOnDrop;
use resource_reader::{Notification, NotificationStream, Notifier, ReadError, ResourceReader};

/// Where and how often to measure.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// A path on the filesystem whose free space is offered.
    pub disk_path: PathBuf,
    /// How often to re-measure.
    pub refresh: Duration,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            disk_path: PathBuf::from("/"),
            refresh: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("no mounted filesystem holds {0}")]
    NoDisk(PathBuf),
    #[error("cannot resolve {path}: {source}")]
    Path {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("measuring the host failed: {0}")]
    Measure(String),
}

/// This machine's resources, re-measured periodically.
#[derive(Debug)]
pub struct HostSource {
    current: Arc<RwLock<ResourceList>>,
    notifier: Notifier,
    _refresher: AbortOnDrop,
}

impl HostSource {
    /// Measure once (failing if the disk path is not on a mounted
    /// filesystem), then keep measuring in the background.
    pub async fn start(options: HostOptions) -> Result<Self, HostError> {
        let disk_path =
            std::fs::canonicalize(&options.disk_path).map_err(|source| HostError::Path {
                path: options.disk_path.clone(),
                source,
            })?;
        let initial = measure_blocking(disk_path.clone()).await?;
        tracing::info!(resources = ?initial.to_strings(), "host measured");
        let current = Arc::new(RwLock::new(initial));
        let notifier = Notifier::new();
        let span = tracing::info_span!("host_source", disk = %disk_path.display());
        let task = tokio::spawn(
            refresh(
                current.clone(),
                notifier.clone(),
                disk_path,
                options.refresh,
            )
            .instrument(span),
        );
        Ok(Self {
            current,
            notifier,
            _refresher: AbortOnDrop(task),
        })
    }
}

#[async_trait::async_trait]
impl ResourceReader for HostSource {
    async fn read(&self, _originator: &str) -> Result<ResourceList, ReadError> {
        Ok(self
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone())
    }

    fn subscribe(&self) -> NotificationStream {
        self.notifier.subscribe()
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        tracing::debug!(cluster, "host source: nothing to forget");
        Ok(())
    }
}

async fn refresh(
    current: Arc<RwLock<ResourceList>>,
    notifier: Notifier,
    disk_path: PathBuf,
    every: Duration,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match measure_blocking(disk_path.clone()).await {
            Ok(list) => {
                let changed = {
                    let mut cur = current.write().unwrap_or_else(|e| e.into_inner());
                    let changed = *cur != list;
                    *cur = list;
                    changed
                };
                if changed {
                    tracing::info!("host resources changed");
                    notifier.notify(Notification::All);
                }
            }
            Err(error) => tracing::warn!(%error, "keeping the previous host resources"),
        }
    }
}

async fn measure_blocking(disk_path: PathBuf) -> Result<ResourceList, HostError> {
    tokio::task::spawn_blocking(move || measure(&disk_path))
        .await
        .map_err(|e| HostError::Measure(e.to_string()))?
}

fn measure(disk_path: &Path) -> Result<ResourceList, HostError> {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);

    let mut system = sysinfo::System::new();
    system.refresh_memory();
    let mut memory = system.total_memory();
    if let Some(limits) = system.cgroup_limits() {
        if limits.total_memory > 0 {
            memory = memory.min(limits.total_memory);
        }
    }

    let disks = sysinfo::Disks::new_with_refreshed_list();
    let disk = disks
        .list()
        .iter()
        .filter(|d| disk_path.starts_with(d.mount_point()))
        .max_by_key(|d| d.mount_point().as_os_str().len())
        .ok_or_else(|| HostError::NoDisk(disk_path.to_path_buf()))?;
    let free_mib = disk.available_space() / (1024 * 1024);

    let entries = [
        ("cpu".to_string(), cpus.to_string()),
        // Kubernetes reports node memory in Ki.
        ("memory".to_string(), format!("{}Ki", memory / 1024)),
        ("ephemeral-storage".to_string(), format!("{free_mib}Mi")),
    ];
    ResourceList::from_strings(entries.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|(name, e)| HostError::Measure(format!("{name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn measures_this_machine() {
        let source = HostSource::start(HostOptions::default()).await.unwrap();
        let list = source.read("anyone").await.unwrap();
        let cpus = std::thread::available_parallelism().unwrap().get() as i64;
        assert_eq!(list.0["cpu"].value(), cpus);
        assert!(list.0["memory"].value() > 0);
        assert!(list.0.contains_key("ephemeral-storage"));
    }

    #[tokio::test]
    async fn missing_disk_path_is_an_error() {
        let options = HostOptions {
            disk_path: "/no/such/path".into(),
            ..Default::default()
        };
        assert!(matches!(
            HostSource::start(options).await,
            Err(HostError::Path { .. })
        ));
    }
}
