//! The request-body deadline (`--request-body-timeout`): a body that does
//! not arrive in time is answered 408 on a connection that is then closed,
//! so clients trickling bodies cannot hold every connection. (The head's
//! deadline is actix's `client_request_timeout`.)

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use actix_http::error::PayloadError;
use actix_http::BoxedPayloadStream;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::HttpMessage;
use actix_web::HttpResponse;
use bytes::Bytes;
use futures::Stream;

/// `--request-body-timeout` as app data: how long a request's body may
/// take to arrive once its head has (zero: no limit). Without it (the
/// in-process tests' apps), bodies have no deadline.
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub Duration);

/// Hold every request body to the [`BodyTimeout`] deadline: reading past it
/// fails, and the request is answered 408 on a connection that is then
/// closed, so a client trickling a body cannot hold a connection (nor, with
/// many, every connection) for longer. WebSocket upgrades are left alone:
/// their "body" is the feed.
pub async fn body_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let limit = req
        .app_data::<BodyTimeout>()
        .map(|t| t.0)
        .filter(|t| !t.is_zero());
    let Some(limit) = limit.filter(|_| !req.headers().contains_key(header::UPGRADE)) else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let payload = match req.take_payload() {
        Payload::None => return Ok(next.call(req).await?.map_into_boxed_body()),
        payload => payload,
    };
    let expired = Arc::new(AtomicBool::new(false));
    let deadline: BoxedPayloadStream = Box::pin(DeadlinePayload {
        inner: payload,
        timer: Box::pin(tokio::time::sleep(limit)),
        expired: expired.clone(),
        done: false,
    });
    req.set_payload(Payload::from(deadline));
    // (The request must not be cloned before routing: actix then panics.)
    let res = next.call(req).await?;
    if !expired.load(Ordering::Relaxed) {
        return Ok(res.map_into_boxed_body());
    }
    let (http_req, _) = res.into_parts();
    tracing::info!(
        timeout = ?limit,
        "request body too slow: answered 408 and closed the connection"
    );
    let message = format!(
        "the request body did not arrive within {} (--request-body-timeout); send it faster",
        humantime_secs(limit)
    );
    let response = HttpResponse::RequestTimeout()
        .force_close()
        .json(super::ErrorBody {
            error: "request_timeout".into(),
            message,
            field: None,
        });
    Ok(ServiceResponse::new(http_req, response))
}

/// `10s`, `1.5s`.
fn humantime_secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// A request body that fails with `TimedOut` once its deadline passes.
struct DeadlinePayload {
    inner: Payload,
    timer: Pin<Box<tokio::time::Sleep>>,
    expired: Arc<AtomicBool>,
    done: bool,
}

impl Stream for DeadlinePayload {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = Pin::new(&mut self.inner).poll_next(cx) {
            if item.is_none() {
                self.done = true;
            }
            return Poll::Ready(item);
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            self.done = true;
            self.expired.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request body did not arrive in time",
            )))));
        }
        Poll::Pending
    }
}
