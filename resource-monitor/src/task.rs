//! Background tasks owned by a reader: they stop when the reader is dropped,
//! so a chain torn down in a test or a benchmark leaves nothing running.

use tokio::task::JoinHandle;

/// Aborts the task when dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub(crate) JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
