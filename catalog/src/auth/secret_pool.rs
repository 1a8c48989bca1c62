//! Where argon2 runs: a small pool of dedicated, lower-priority threads with
//! a bounded queue, so that `/authenticate` (one argon2 verification per
//! call, by design) cannot take the cores from offer writes, lists and the
//! feed.
//!
//! - At most `--auth-verify-threads` hashes or verifications run at once
//!   (default: half the CPUs, at least one); each thread lowers its own
//!   scheduling priority by `--auth-verify-nice` on Linux.
//! - At most `--auth-verify-queue` callers wait for a thread; one more is
//!   refused at once, and a caller that waited `--auth-verify-wait` without
//!   getting a thread gives up: both are [`PoolError::Busy`], which the
//!   handlers answer with 503 and `Retry-After`.
//! - Once a thread has started a caller's job, the caller gets its result
//!   (a verification takes tens of milliseconds): no work is thrown away.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::duration::parse_duration;

/// Flags of the argon2 pool (flattened into the catalog's config).
#[derive(Debug, Clone, clap::Args)]
pub struct SecretPoolConfig {
    /// Threads that hash and verify provider secrets (argon2, tens of
    /// milliseconds of CPU each); at most this many run at once.
    /// 0: half the CPUs, at least one.
    #[arg(long, env = "CATALOG_AUTH_VERIFY_THREADS", default_value_t = 0)]
    pub auth_verify_threads: usize,

    /// Authentications that may wait for a verifying thread; one more is
    /// answered 503 with Retry-After at once. 0: none wait.
    #[arg(long, env = "CATALOG_AUTH_VERIFY_QUEUE", default_value_t = 64)]
    pub auth_verify_queue: usize,

    /// The longest an authentication waits for a verifying thread before it
    /// is answered 503 with Retry-After (e.g. 5s, 500ms).
    #[arg(long, env = "CATALOG_AUTH_VERIFY_WAIT", default_value = "5s", value_parser = parse_duration)]
    pub auth_verify_wait: Duration,

    /// How much the verifying threads lower their scheduling priority
    /// (Linux `nice` increment, 0-19), so that offer writes, lists and the
    /// feed run first when the CPUs are busy. 0: the same priority.
    #[arg(long, env = "CATALOG_AUTH_VERIFY_NICE", default_value_t = 10,
          value_parser = clap::value_parser!(u8).range(0..=19))]
    pub auth_verify_nice: u8,
}

impl Default for SecretPoolConfig {
    fn default() -> Self {
        SecretPoolConfig {
            auth_verify_threads: 0,
            auth_verify_queue: 64,
            auth_verify_wait: Duration::from_secs(5),
            auth_verify_nice: 10,
        }
    }
}

/// Why a job did not run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    /// Every thread is busy and the queue is full, or the wait ran out.
    #[error("too many authentications are waiting for a credential-verification thread; retry after Retry-After")]
    Busy,
    /// The pool's threads are gone (the catalog is shutting down).
    #[error("the secret-verification threads have stopped")]
    Stopped,
}

const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const ABANDONED: u8 = 2;

type Work = Box<dyn FnOnce() + Send>;

struct Job {
    /// `QUEUED` until a thread starts it or its caller gives up.
    state: Arc<AtomicU8>,
    work: Work,
}

/// The argon2 pool; cheap to share (`Arc`).
pub struct SecretPool {
    queue: Sender<Job>,
    /// Jobs queued or running whose callers still wait (at most `limit`).
    taken: Arc<AtomicUsize>,
    /// Threads plus queue slots.
    limit: usize,
    wait: Duration,
    threads: usize,
}

impl SecretPool {
    /// Start the pool's threads.
    pub fn start(config: &SecretPoolConfig) -> std::io::Result<Self> {
        let threads = match config.auth_verify_threads {
            0 => std::thread::available_parallelism()
                .map(|n| (n.get() / 2).max(1))
                .unwrap_or(1),
            n => n,
        };
        let (queue, jobs) = channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        for i in 0..threads {
            let (jobs, nice) = (jobs.clone(), config.auth_verify_nice);
            std::thread::Builder::new()
                .name(format!("argon2-{i}"))
                .spawn(move || run(&jobs, nice))?;
        }
        Ok(SecretPool {
            queue,
            taken: Arc::new(AtomicUsize::new(0)),
            limit: threads + config.auth_verify_queue,
            wait: config.auth_verify_wait,
            threads,
        })
    }

    /// How many threads run jobs.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Run `f` on one of the pool's threads and return its result, or
    /// [`PoolError::Busy`] if no thread takes it within the configured wait
    /// (or the queue is full).
    pub async fn run<T, F>(&self, f: F) -> Result<T, PoolError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // Take a slot (a thread or a queue place), or refuse at once.
        if self
            .taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .is_err()
        {
            return Err(PoolError::Busy);
        }
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let state = Arc::new(AtomicU8::new(QUEUED));
        let taken = self.taken.clone();
        let job = Job {
            state: state.clone(),
            work: Box::new(move || {
                let slot = Slot(taken);
                let answer = f();
                // Free the slot before answering, so that the caller's next
                // call finds it free (on a panic, the drop frees it).
                drop(slot);
                let _ = tx.send(answer);
            }),
        };
        if self.queue.send(job).is_err() {
            self.taken.fetch_sub(1, Ordering::AcqRel);
            return Err(PoolError::Stopped);
        }
        match tokio::time::timeout(self.wait, &mut rx).await {
            Ok(answer) => answer.map_err(|_| PoolError::Stopped),
            Err(_) => {
                // Give up only if no thread has started the job yet; its
                // slot is free at once (a thread skips the job).
                if state
                    .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.taken.fetch_sub(1, Ordering::AcqRel);
                    Err(PoolError::Busy)
                } else {
                    rx.await.map_err(|_| PoolError::Stopped)
                }
            }
        }
    }
}

/// A taken slot of a started job, freed when dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A pool thread: lower its priority, then run jobs until the pool is
/// dropped, skipping those whose callers gave up.
fn run(jobs: &Mutex<Receiver<Job>>, nice: u8) {
    lower_priority(nice);
    loop {
        let job = {
            let Ok(jobs) = jobs.lock() else { return };
            match jobs.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        if job
            .state
            .compare_exchange(QUEUED, STARTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // A panicking job loses its answer (its caller gets
            // `Stopped`), not the thread.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.work)).is_err() {
                tracing::error!("an argon2 job panicked");
            }
        }
    }
}

/// Raise the calling thread's nice value by `by` (Linux: the nice value is
/// per thread). Elsewhere, or if refused, the thread keeps its priority.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // sound: plain syscalls on the calling thread, no pointers
fn lower_priority(by: u8) {
    if by == 0 {
        return;
    }
    // SAFETY: gettid and setpriority take integers only and affect only the
    // calling thread (Linux keeps the nice value per thread).
    let rc = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, i32::from(by))
    };
    if rc != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "could not lower the priority of an argon2 thread"
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority(_by: u8) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::mpsc::channel as std_channel;

    fn pool(threads: usize, queue: usize, wait: Duration) -> SecretPool {
        SecretPool::start(&SecretPoolConfig {
            auth_verify_threads: threads,
            auth_verify_queue: queue,
            auth_verify_wait: wait,
            auth_verify_nice: 5,
        })
        .unwrap()
    }

    /// Occupy the pool's (single) thread with a job that runs until the
    /// returned sender is used, then returns `value`; returns once the job
    /// has started.
    async fn hold_the_thread<T: Send + 'static>(
        p: &Arc<SecretPool>,
        value: T,
    ) -> (
        std::sync::mpsc::Sender<()>,
        tokio::task::JoinHandle<Result<T, PoolError>>,
    ) {
        let (release, held) = std_channel::<()>();
        let (started_tx, started) = std_channel::<()>();
        let first = tokio::spawn({
            let p = p.clone();
            async move {
                p.run(move || {
                    let _ = started_tx.send(());
                    let _ = held.recv();
                    value
                })
                .await
            }
        });
        tokio::task::spawn_blocking(move || started.recv())
            .await
            .unwrap()
            .unwrap();
        (release, first)
    }

    #[tokio::test]
    async fn runs_jobs_and_returns_their_results() {
        let p = pool(2, 4, Duration::from_secs(15));
        assert_eq!(p.run(|| 6 * 7).await, Ok(42));
        let h = crate::auth::secret::hash("s3cret").unwrap();
        assert_eq!(
            p.run(move || crate::auth::secret::verify("s3cret", &h))
                .await,
            Ok(true)
        );
    }

    #[tokio::test]
    async fn a_full_queue_is_refused_at_once() {
        // One thread, held by the first job; one queue slot, taken by the
        // second; the third is refused without waiting.
        let p = Arc::new(pool(1, 1, Duration::from_secs(15)));
        let (release, first) = hold_the_thread(&p, 1).await;
        // Poll the second call once: it is queued (the thread is held).
        let mut second = Box::pin(p.run(|| 2));
        std::future::poll_fn(|cx| {
            assert!(second.as_mut().poll(cx).is_pending());
            std::task::Poll::Ready(())
        })
        .await;
        let refused = p.run(|| 3).await.unwrap_err();
        assert_eq!(refused, PoolError::Busy);
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), Ok(1));
        assert_eq!(second.await, Ok(2));
    }

    #[tokio::test]
    async fn a_caller_that_waited_too_long_gives_up_and_its_job_never_runs() {
        let p = Arc::new(pool(1, 4, Duration::from_millis(50)));
        let (release, first) = hold_the_thread(&p, ()).await;
        let ran = Arc::new(AtomicU8::new(0));
        let r = ran.clone();
        // The thread is held until after this call returns, so it waits
        // out its 50 ms and gives up.
        assert_eq!(
            p.run(move || r.store(1, Ordering::SeqCst)).await,
            Err(PoolError::Busy)
        );
        release.send(()).unwrap();
        first.await.unwrap().unwrap();
        // A later job runs after the abandoned one would have: marker.
        assert_eq!(p.run(|| 9).await, Ok(9));
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    }
}
