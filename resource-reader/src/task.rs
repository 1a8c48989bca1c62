//! Background tasks owned by a value: they stop when their owner is dropped,
//! so a reader torn down (a chain in a test, an upstream removed from an
//! aggregator) leaves nothing running.

use tokio::task::JoinHandle;

/// Aborts the task when dropped.
#[derive(Debug)]
pub struct AbortOnDrop(pub JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
