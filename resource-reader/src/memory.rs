//! An in-memory source: a resource list set by code. For embedding a reader
//! in another program, for tests and for benchmarks.

use std::sync::{Arc, Mutex, RwLock};

use quantity::ResourceList;

use crate::reader::{Notification, NotificationStream, Notifier, ReadError, ResourceReader};

/// Offers the same list to every originator until [`set`](Self::set) is
/// called; records the clusters it was told to remove.
#[derive(Debug, Clone, Default)]
pub struct MemorySource {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    current: RwLock<ResourceList>,
    removed: Mutex<Vec<String>>,
    notifier: Notifier,
}

impl MemorySource {
    pub fn new(initial: ResourceList) -> Self {
        let source = Self::default();
        *source
            .inner
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner()) = initial;
        source
    }

    /// Replace the offer; notifies every subscriber if it changed.
    pub fn set(&self, list: ResourceList) {
        let changed = {
            let mut current = self
                .inner
                .current
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let changed = *current != list;
            *current = list;
            changed
        };
        if changed {
            self.inner.notifier.notify(Notification::All);
        }
    }

    /// The clusters passed to `remove_cluster` so far, oldest first.
    pub fn removed(&self) -> Vec<String> {
        self.inner
            .removed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[async_trait::async_trait]
impl ResourceReader for MemorySource {
    async fn read(&self, _originator: &str) -> Result<ResourceList, ReadError> {
        Ok(self
            .inner
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone())
    }

    fn subscribe(&self) -> NotificationStream {
        self.inner.notifier.subscribe()
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        self.inner
            .removed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cluster.to_string());
        Ok(())
    }
}
