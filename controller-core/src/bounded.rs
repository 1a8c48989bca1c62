//! Bounded answers from an API server another party runs.
//!
//! kube's client reads a response body whole (`Client::request_text`
//! collects it) and its timeouts are per read (`hyper-timeout`: the read
//! timeout restarts with each byte), so a server that answers 256 MiB, or
//! one byte every few seconds, holds a controller's memory or a reconcile
//! for as long as it likes (issue 41, probes H-02 and H-03). A client built
//! with [`client`] is wrapped in [`BoundedLayer`], the outermost layer of
//! kube's own stack, which gives each request:
//!
//! - a size bound: a response whose `Content-Length` says more than
//!   [`Bounds::max_response_bytes`] fails before its body is read, and one
//!   whose body grows past it fails at that byte, so at most that much is
//!   ever held;
//! - a total time: the whole answer, head and body, arrives within
//!   [`Bounds::request_timeout`] of the request, however it trickles;
//! - for a watch (`?watch=true`), which may rightly stay open and quiet for
//!   minutes: each event (one JSON line, as the API server frames them)
//!   is bounded by the same size, and the next complete event is due
//!   within [`Bounds::watch_idle`] of the last; bytes that do not complete
//!   an event do not reset it.
//!
//! A bound that is hit fails the request with [`Exceeded`], which
//! [`Exceeded::find`] recovers from the `kube::Error` a caller sees, so a
//! controller can say which bound the other party hit.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};
use tower::{BoxError, Layer, Service};

/// The default of [`Bounds::max_response_bytes`]: 8 MiB. An object is at
/// most about 1.5 MiB (etcd's default request limit, which the API server
/// enforces per object), so any single object, and a list page of a few
/// large ones, fits.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// The default of [`Bounds::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The default of [`Bounds::watch_idle`]: beyond the 290 s `timeoutSeconds`
/// kube's watcher asks the server to end a quiet watch after
/// (`kube-runtime` `watcher::Config::default`), plus [`DEFAULT_REQUEST_TIMEOUT`],
/// so a well-behaved server's quiet watch ends on its own first.
pub const DEFAULT_WATCH_IDLE: Duration = Duration::from_secs(320);

/// What one request may take from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The largest response body (for a watch: the largest event).
    pub max_response_bytes: usize,
    /// The whole answer, head and body, arrives within this of the request
    /// (for a watch: its head).
    pub request_timeout: Duration,
    /// A watch's next complete event arrives within this of the last.
    pub watch_idle: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            watch_idle: DEFAULT_WATCH_IDLE,
        }
    }
}

/// Which bound a server's answer hit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    #[error("the answer is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the answer did not arrive whole within {0:?}")]
    TooSlow(Duration),
    #[error("a watch event is larger than {limit} bytes")]
    EventTooLarge { limit: usize },
    #[error("a watch sent no complete event for {0:?}")]
    Idle(Duration),
}

impl Exceeded {
    /// The bound `error` (or one of its causes) reports, if any. An
    /// `io::Error` (kube's watch stream wraps body errors in one) hides its
    /// inner error from `source()`, so it is opened with `get_ref()`.
    pub fn find<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a Exceeded> {
        let mut next = Some(error);
        while let Some(e) = next {
            if let Some(found) = e.downcast_ref::<Exceeded>() {
                return Some(found);
            }
            if let Some(inner) = e
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
            {
                if let Some(found) = Exceeded::find(inner) {
                    return Some(found);
                }
            }
            next = e.source();
        }
        None
    }
}

/// A kube client from `config` whose every answer is bounded by `bounds`.
pub fn client(config: kube::Config, bounds: Bounds) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&BoundedLayer(bounds))
        .build())
}

/// The tower layer behind [`client`].
#[derive(Debug, Clone, Copy)]
pub struct BoundedLayer(pub Bounds);

impl<S> Layer<S> for BoundedLayer {
    type Service = BoundedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BoundedService {
            inner,
            bounds: self.0,
        }
    }
}

/// See [`BoundedLayer`].
#[derive(Debug, Clone)]
pub struct BoundedService<S> {
    inner: S,
    bounds: Bounds,
}

/// Whether the request is a watch (`watch=true`, or `1`, as the API server
/// reads the parameter: `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/
/// conversion.go` `Convert_Pointer_bool_To_bool` via `strconv.ParseBool`).
fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&').any(|pair| {
            matches!(
                pair,
                "watch=true" | "watch=1" | "watch=True" | "watch=TRUE" | "watch=t" | "watch=T"
            )
        })
    })
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for BoundedService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    ResBody: Body<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<BoundedBody<ResBody>>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let bounds = self.bounds;
        let watch = is_watch(request.uri());
        let deadline = Instant::now() + bounds.request_timeout;
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = tokio::time::timeout_at(deadline, answer)
                .await
                .map_err(|_| Exceeded::TooSlow(bounds.request_timeout))?
                .map_err(Into::into)?;
            let limit = bounds.max_response_bytes;
            let declared = response
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if !watch && declared.is_some_and(|n| n > limit as u64) {
                return Err(Exceeded::TooLarge { limit }.into());
            }
            let (parts, body) = response.into_parts();
            let body = if watch {
                BoundedBody::watch(body, limit, bounds.watch_idle)
            } else {
                BoundedBody::whole(body, limit, deadline, bounds.request_timeout)
            };
            Ok(Response::from_parts(parts, body))
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body that fails once it passes its bounds.
    pub struct BoundedBody<B> {
        #[pin]
        inner: B,
        #[pin]
        deadline: Sleep,
        limit: usize,
        // Bytes so far: of the whole body, or of a watch's current event.
        seen: usize,
        watch: Option<Duration>,
        timeout: Duration,
        failed: bool,
    }
}

impl<B> BoundedBody<B> {
    fn whole(inner: B, limit: usize, deadline: Instant, timeout: Duration) -> Self {
        Self {
            inner,
            deadline: tokio::time::sleep_until(deadline),
            limit,
            seen: 0,
            watch: None,
            timeout,
            failed: false,
        }
    }

    fn watch(inner: B, limit: usize, idle: Duration) -> Self {
        Self {
            inner,
            deadline: tokio::time::sleep(idle),
            limit,
            seen: 0,
            watch: Some(idle),
            timeout: idle,
            failed: false,
        }
    }
}

impl<B> Body for BoundedBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        if *this.failed {
            return Poll::Ready(None);
        }
        let late = |watch: &Option<Duration>, timeout: Duration| match watch {
            Some(idle) => Exceeded::Idle(*idle),
            None => Exceeded::TooSlow(timeout),
        };
        // Checked before reading too: a server that always has a byte
        // ready would otherwise never let the deadline be polled.
        if this.deadline.is_elapsed() {
            *this.failed = true;
            return Poll::Ready(Some(Err(late(this.watch, *this.timeout).into())));
        }
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let over = match this.watch {
                        None => {
                            *this.seen = this.seen.saturating_add(data.len());
                            (*this.seen > *this.limit)
                                .then_some(Exceeded::TooLarge { limit: *this.limit })
                        }
                        Some(idle) => {
                            // The API server ends each event with a newline
                            // (`staging/src/k8s.io/apiserver/pkg/endpoints/
                            // handlers/watch.go`, a JSON encoder per event):
                            // only bytes after the last one count, and a
                            // complete event restarts the idle deadline.
                            match data.iter().rposition(|b| *b == b'\n') {
                                Some(at) => {
                                    *this.seen = data.len() - at - 1;
                                    let next = Instant::now() + *idle;
                                    this.deadline.as_mut().reset(next);
                                }
                                None => *this.seen = this.seen.saturating_add(data.len()),
                            }
                            (*this.seen > *this.limit)
                                .then_some(Exceeded::EventTooLarge { limit: *this.limit })
                        }
                    };
                    if let Some(over) = over {
                        *this.failed = true;
                        return Poll::Ready(Some(Err(over.into())));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.deadline.poll(cx) {
                Poll::Ready(()) => {
                    *this.failed = true;
                    Poll::Ready(Some(Err(late(this.watch, *this.timeout).into())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        // At most the bound: a caller that preallocates from the hint
        // (`collect` does not; others may) never reserves past it.
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        let cap = self.limit as u64;
        hint.set_lower(inner.lower().min(cap));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.min(cap).max(hint.lower()));
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use std::convert::Infallible;

    type Stream = futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>;

    /// A service answering each request with the frames `make` gives.
    #[derive(Clone)]
    struct Answer(fn() -> (Option<u64>, Stream));

    impl Service<Request<()>> for Answer {
        type Response = Response<StreamBody<Stream>>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Self::Response, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            let (length, frames) = (self.0)();
            let mut response = Response::builder();
            if let Some(n) = length {
                response = response.header(http::header::CONTENT_LENGTH, n);
            }
            std::future::ready(Ok(response.body(StreamBody::new(frames)).unwrap()))
        }
    }

    fn bounds(max: usize, timeout_ms: u64) -> Bounds {
        Bounds {
            max_response_bytes: max,
            request_timeout: Duration::from_millis(timeout_ms),
            watch_idle: Duration::from_millis(timeout_ms),
        }
    }

    async fn read(answer: Answer, bounds: Bounds, uri: &str) -> Result<Bytes, Exceeded> {
        let mut service = BoundedLayer(bounds).layer(answer);
        let request = Request::get(uri).body(()).unwrap();
        let outcome = async {
            let response = service.call(request).await?;
            Ok::<_, BoxError>(response.into_body().collect().await?.to_bytes())
        }
        .await;
        outcome.map_err(|e| Exceeded::find(&*e).cloned().expect("a bound"))
    }

    /// One 64 KiB chunk after another, for ever (H-02's server, streamed).
    fn endless() -> (Option<u64>, Stream) {
        let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
        let frames = futures::stream::repeat_with(move || Ok(Frame::data(chunk.clone())));
        (None, Box::pin(frames))
    }

    /// One byte every 20 ms, for ever (H-03's server, faster).
    fn trickle() -> (Option<u64>, Stream) {
        let frames = futures::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Some((Ok(Frame::data(Bytes::from_static(b"{"))), ()))
        });
        (None, Box::pin(frames))
    }

    /// H-02: a body without end fails at the bound, not at the end.
    #[tokio::test]
    async fn a_body_past_the_bound_fails_there() {
        let got = read(Answer(endless), bounds(1024 * 1024, 60_000), "/api/v1/x").await;
        assert_eq!(got, Err(Exceeded::TooLarge { limit: 1024 * 1024 }));
    }

    /// H-02: a declared length past the bound fails before the body is read.
    #[tokio::test]
    async fn a_declared_length_past_the_bound_fails_at_once() {
        fn declared() -> (Option<u64>, Stream) {
            (Some(256 << 20), Box::pin(futures::stream::pending()))
        }
        let got = read(Answer(declared), bounds(1024, 60_000), "/api/v1/x").await;
        assert_eq!(got, Err(Exceeded::TooLarge { limit: 1024 }));
    }

    /// H-03: the total time holds however the bytes trickle (each byte
    /// arrives well within any per-read timeout).
    #[tokio::test]
    async fn a_trickled_answer_fails_at_the_total_time() {
        let timeout = Duration::from_millis(300);
        let start = Instant::now();
        let got = read(Answer(trickle), bounds(1 << 20, 300), "/api/v1/x").await;
        assert_eq!(got, Err(Exceeded::TooSlow(timeout)));
        assert!(start.elapsed() >= timeout);
    }

    /// An answer within both bounds comes through whole.
    #[tokio::test]
    async fn an_answer_within_the_bounds_is_read_whole() {
        fn small() -> (Option<u64>, Stream) {
            let frames = futures::stream::iter([
                Ok(Frame::data(Bytes::from_static(b"{\"kind\":"))),
                Ok(Frame::data(Bytes::from_static(b"\"Secret\"}"))),
            ]);
            (Some(17), Box::pin(frames))
        }
        let got = read(Answer(small), bounds(17, 60_000), "/api/v1/x").await;
        assert_eq!(got.as_deref(), Ok(&b"{\"kind\":\"Secret\"}"[..]));
    }

    /// A watch's events are bounded one by one (the stream as a whole may
    /// be longer than the bound), and an event that never ends is not.
    #[tokio::test]
    async fn a_watch_bounds_each_event() {
        fn events() -> (Option<u64>, Stream) {
            let event = Bytes::from(format!("{{\"x\":\"{}\"}}\n", "y".repeat(500)));
            let frames =
                futures::stream::iter(std::iter::repeat_n(event, 10).map(|e| Ok(Frame::data(e))));
            (None, Box::pin(frames))
        }
        let got = read(Answer(events), bounds(1024, 60_000), "/api/v1/x?watch=true").await;
        assert_eq!(got.map(|b| b.len()), Ok(10 * 509));
        let got = read(Answer(endless), bounds(1024, 60_000), "/api/v1/x?watch=1").await;
        assert_eq!(got, Err(Exceeded::EventTooLarge { limit: 1024 }));
    }

    /// A watch whose bytes trickle without completing an event fails at
    /// the idle deadline.
    #[tokio::test]
    async fn a_trickled_watch_fails_at_the_idle_deadline() {
        let got = read(
            Answer(trickle),
            bounds(1 << 20, 300),
            "/api/v1/x?watch=true",
        )
        .await;
        assert_eq!(got, Err(Exceeded::Idle(Duration::from_millis(300))));
    }

    #[test]
    fn watches_are_told_by_their_parameter() {
        for (uri, watch) in [
            ("/api/v1/secrets?watch=true&timeoutSeconds=290", true),
            ("/api/v1/secrets?labelSelector=a&watch=1", true),
            ("/api/v1/secrets?watch=false", false),
            ("/api/v1/secrets?labelSelector=watch%3Dtrue", false),
            ("/api/v1/secrets", false),
        ] {
            assert_eq!(is_watch(&uri.parse().unwrap()), watch, "{uri}");
        }
    }
}
