//! Background tasks owned by a value: they stop when their owner is dropped,
//! so removing an upstream (or dropping the aggregate in a test or a
//! benchmark) leaves nothing running.

use tokio::task::JoinHandle;

/// Aborts the task when dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub(crate) JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
