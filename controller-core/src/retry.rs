//! Retrying against the Kubernetes API: edge's capped exponential backoff
//! with jitter for every loop that reaches the API server (watches, the
//! Lease), a run of failures logged once and then at most once a minute
//! with a count (not once per attempt), and stopping a controller's work
//! within a bound.
//!
//! Why: a Lease watch reopened with no delay once wrote 40,000 ERROR lines
//! a second while the API server was down, and an applier whose cache never
//! filled kept a controller alive for a minute after SIGTERM.

use std::future::Future;
use std::time::{Duration, Instant};

use edge::backoff::Backoff;
use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

/// The first delay after a failed call to the API server.
pub const API_RETRY_INITIAL: Duration = Duration::from_secs(1);
/// The longest delay between two attempts to reach the API server.
pub const API_RETRY_MAX: Duration = Duration::from_secs(30);
/// A failure that goes on is logged again at most this often.
pub const LOG_EVERY: Duration = Duration::from_secs(60);
/// How long a stopping controller waits for the reconciles it started.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// The backoff of every loop that reaches the API server.
pub fn api_backoff() -> Backoff {
    Backoff::new(API_RETRY_INITIAL, API_RETRY_MAX)
}

/// Whether a failure is logged: the first of a run, one whose message
/// differs from the last one logged, or one [`LOG_EVERY`] after the last
/// one logged. Pure, for tests.
pub fn worth_logging(
    last: Option<(Instant, &str)>,
    message: &str,
    now: Instant,
    every: Duration,
) -> bool {
    match last {
        None => true,
        Some((at, logged)) => logged != message || now.duration_since(at) >= every,
    }
}

/// A run of failures of one operation (a watch, reading the Lease), logged
/// at WARN the first time, then when the error changes or a minute has
/// passed, with how many attempts failed; its end is logged at INFO.
#[derive(Debug)]
pub struct Failures {
    what: String,
    count: u64,
    logged: Option<(Instant, String)>,
}

impl Failures {
    /// `what` completes "cannot …": e.g. `watch ResourceSlices`.
    pub fn new(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            count: 0,
            logged: None,
        }
    }

    /// Attempts failed in a row so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// One more attempt failed with `error`.
    pub fn failed(&mut self, error: &dyn std::error::Error) {
        self.count += 1;
        let message = causes(error);
        let now = Instant::now();
        let last = self.logged.as_ref().map(|(at, m)| (*at, m.as_str()));
        if worth_logging(last, &message, now, LOG_EVERY) {
            tracing::warn!(
                failures = self.count,
                error = %message,
                "cannot {}; retrying with backoff",
                self.what
            );
            self.logged = Some((now, message));
        }
    }

    /// An attempt succeeded: the run of failures, if any, is over.
    pub fn succeeded(&mut self) {
        if self.count > 0 {
            tracing::info!(failures = self.count, "can {} again", self.what);
        }
        self.count = 0;
        self.logged = None;
    }
}

/// An error and every cause under it, joined by `: `. kube's own message
/// often stops at "client error (Connect)"; the reason an operator can act
/// on — "invalid peer certificate: UnknownIssuer", a refused connection —
/// is further down the chain.
pub fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let part = cause.to_string();
        // Some layers repeat their source's text in their own.
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = cause.source();
    }
    text
}

/// A watch stream (kube's `watcher`, or a reflector over one) that waits
/// [`api_backoff`]'s delay after each failure before it is polled again, so
/// a watch the API server refuses is reopened about 1, 2, 4 … 30 s apart,
/// never at once. An event with an object, or the end of a list, resets
/// the delay; `Init` does not, since the watcher sends it before each list
/// attempt, failing or not. With `what`, failures are logged as one run
/// ([`Failures`]) named "cannot {what}".
pub fn backed_off_watch<S, K>(
    stream: S,
    what: Option<String>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    struct State<S> {
        stream: std::pin::Pin<Box<S>>,
        pacing: WatchPacing,
        failures: Option<Failures>,
        delay: Option<Duration>,
    }
    let state = State {
        stream: Box::pin(stream),
        pacing: WatchPacing::new(api_backoff()),
        failures: what.map(Failures::new),
        delay: None,
    };
    futures::stream::unfold(state, |mut state| async move {
        if let Some(delay) = state.delay.take() {
            tokio::time::sleep(delay).await;
        }
        let item = state.stream.next().await?;
        if let Some(failures) = &mut state.failures {
            match &item {
                Ok(watcher::Event::Init) => {}
                Ok(_) => failures.succeeded(),
                Err(error) => failures.failed(error),
            }
        }
        state.delay = state.pacing.after(&item);
        Some((item, state))
    })
}

/// The pacing of a watch's events, apart from the waiting so it is tested
/// without a clock: the delay before the watch is polled again.
#[derive(Debug)]
pub struct WatchPacing {
    backoff: Backoff,
}

impl WatchPacing {
    pub fn new(backoff: Backoff) -> Self {
        Self { backoff }
    }

    /// `None` to go on at once; after an error, the backoff's next delay.
    /// An event with an object, or the end of a list, resets the delay;
    /// `Init` does not (the watcher sends it before every list attempt).
    pub fn after<K>(
        &mut self,
        item: &Result<watcher::Event<K>, watcher::Error>,
    ) -> Option<Duration> {
        match item {
            Ok(watcher::Event::Init) => None,
            Ok(_) => {
                self.backoff.reset();
                None
            }
            Err(_) => Some(self.backoff.next_delay()),
        }
    }
}

/// [`backed_off_watch`] with its failures logged as "cannot {what}".
pub fn logged_watch<S, K>(
    stream: S,
    what: impl Into<String>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    backed_off_watch(stream, Some(what.into()))
}

/// [`logged_watch`] reduced to one `()` per object it saw change: what a
/// loop that re-reads everything on any change waits on.
pub fn touches<S, K>(stream: S, what: &'static str) -> impl Stream<Item = ()> + Send
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    K: Send,
{
    use kube::runtime::WatchStreamExt;
    logged_watch(stream, what)
        .touched_objects()
        .filter_map(|r| async move { r.ok().map(|_| ()) })
}

/// `stream` until `stop` is cancelled, then dropped at once. An applier's
/// queue must end this way rather than with `take_until`, which keeps the
/// stream: dropping it drops the reflectors' writers, so an applier still
/// waiting for a cache that never filled (the API server unreachable) gives
/// up instead of waiting for ever.
pub fn until_cancelled<S>(stream: S, stop: CancellationToken) -> impl Stream<Item = S::Item>
where
    S: Stream + Unpin,
{
    futures::stream::unfold(Some((stream, stop)), |state| async move {
        let (mut stream, stop) = state?;
        tokio::select! {
            biased;
            () = stop.cancelled() => None,
            item = stream.next() => item.map(|item| (item, Some((stream, stop)))),
        }
    })
}

/// Run `work` to its end; once `stop` is cancelled, give it at most
/// `grace` more (to finish the reconciles it started), then drop it.
/// `true` if it ended by itself.
pub async fn finish_within(
    work: impl Future<Output = ()>,
    stop: &CancellationToken,
    grace: Duration,
) -> bool {
    let mut work = std::pin::pin!(work);
    tokio::select! {
        () = &mut work => return true,
        () = stop.cancelled() => {}
    }
    match tokio::time::timeout(grace, work).await {
        Ok(()) => true,
        Err(_) => {
            tracing::warn!(
                ?grace,
                "work still running after the stop grace; dropping it"
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_failures_is_logged_once_then_by_the_minute_or_on_change() {
        let t0 = Instant::now();
        let every = Duration::from_secs(60);
        assert!(worth_logging(None, "refused", t0, every));
        let last = Some((t0, "refused"));
        assert!(!worth_logging(
            last,
            "refused",
            t0 + Duration::from_secs(59),
            every
        ));
        assert!(worth_logging(
            last,
            "refused",
            t0 + Duration::from_secs(60),
            every
        ));
        assert!(worth_logging(
            last,
            "forbidden",
            t0 + Duration::from_secs(1),
            every
        ));
    }

    #[test]
    fn failures_count_and_reset() {
        let mut failures = Failures::new("watch Pods");
        let error = std::io::Error::other("refused");
        for _ in 0..1000 {
            failures.failed(&error);
        }
        assert_eq!(failures.count(), 1000);
        failures.succeeded();
        assert_eq!(failures.count(), 0);
    }

    #[tokio::test]
    async fn until_cancelled_drops_the_stream_at_once() {
        let stop = CancellationToken::new();
        let (tx, rx) = futures::channel::mpsc::unbounded::<u32>();
        let mut stream = std::pin::pin!(until_cancelled(rx, stop.clone()));
        tx.unbounded_send(1).unwrap();
        assert_eq!(stream.next().await, Some(1));
        stop.cancel();
        assert_eq!(stream.next().await, None);
        // Dropped: the sender sees the receiver gone.
        assert!(tx.unbounded_send(2).is_err());
    }

    #[tokio::test]
    async fn finish_within_bounds_work_that_never_ends() {
        let stop = CancellationToken::new();
        stop.cancel();
        let started = Instant::now();
        let ended = finish_within(
            std::future::pending::<()>(),
            &stop,
            Duration::from_millis(50),
        )
        .await;
        assert!(!ended);
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(finish_within(async {}, &stop, Duration::from_millis(50)).await);
    }

    #[test]
    fn a_failing_watch_backs_off_up_to_the_cap_and_an_object_resets_it() {
        let mut pacing = WatchPacing::new(api_backoff());
        let init = Ok::<_, watcher::Error>(watcher::Event::<()>::Init);
        let failed = || Err::<watcher::Event<()>, _>(watcher::Error::NoResourceVersion);
        // As kube's watcher does: `Init` before every list attempt, then the failure.
        let mut delays = Vec::new();
        for _ in 0..8 {
            assert_eq!(pacing.after(&init), None, "Init neither waits nor resets");
            delays.push(pacing.after(&failed()).expect("a failure waits"));
        }
        // 1, 2, 4, 8, 16, then 30 s, never more (each ±20% jitter): a handful a minute, not thousands.
        for (delay, nominal) in delays
            .iter()
            .zip([1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0])
        {
            let s = delay.as_secs_f64();
            assert!(
                s >= nominal * 0.8 - 1e-9 && s <= nominal * 1.2 + 1e-9,
                "{delays:?}"
            );
        }
        assert_eq!(pacing.after(&Ok(watcher::Event::Apply(()))), None);
        let again = pacing.after(&failed()).expect("a failure waits");
        assert!(
            again <= Duration::from_millis(1200),
            "an object resets the delay: {again:?}"
        );
    }
}
