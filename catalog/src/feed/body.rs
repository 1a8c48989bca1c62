//! One subscriber's connection after the upgrade: the HTTP response body
//! actix writes to the socket, which also reads the client's frames.
//!
//! There is no task per subscriber: actix polls this body whenever the
//! socket can take more and whenever the client sent something, and the
//! publisher wakes it when a frame is waiting. Reading the client's frames
//! here (pongs, pings, close) keeps an idle subscriber down to actix's own
//! connection state plus a [`Subscriber`].
//!
//! Frames are handed over in pieces of at most [`PIECE`] bytes with a flush
//! in between, so actix's write buffer keeps its initial 8 KiB instead of
//! growing to (and keeping) the size of the largest list: that is most of
//! what an idle subscriber costs.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use actix_http::body::{BodySize, MessageBody};
use actix_web::web;
use bytes::{Bytes, BytesMut};
use futures::Stream;
use tracing::debug;

use super::frame::{Frame, FrameReader};
use super::hub::Hub;
use super::metrics::CloseReason;
use super::subscriber::{Next, Subscriber};

/// Largest piece handed to actix before it must flush (fits, with the
/// upgrade response head, in actix's initial 8 KiB write buffer).
const PIECE: usize = 7 * 1024;
/// Largest client message accepted; the feed expects only control frames.
const MAX_CLIENT_MESSAGE: usize = 4 * 1024;

/// The response body of an upgraded `/subscribe` connection.
pub(crate) struct FeedBody {
    sub: Arc<Subscriber>,
    hub: Arc<Hub>,
    payload: web::Payload,
    /// Client bytes not yet parsed into a whole frame: at most one frame
    /// header plus [`MAX_CLIENT_MESSAGE`] once parsed (see [`FrameReader`]).
    inbuf: BytesMut,
    reader: FrameReader,
    /// The client broke the protocol or closed: drop what it sends.
    refused: bool,
    /// The frame being handed over, and whether it is a data message.
    current: Option<(Bytes, bool)>,
    /// Bytes handed over since actix last flushed.
    unflushed: usize,
}

impl FeedBody {
    pub fn new(sub: Arc<Subscriber>, hub: Arc<Hub>, payload: web::Payload) -> Self {
        let reader = FrameReader::new(MAX_CLIENT_MESSAGE, sub.deflate);
        FeedBody {
            reader,
            refused: false,
            sub,
            hub,
            payload,
            inbuf: BytesMut::new(),
            current: None,
            unflushed: 0,
        }
    }

    /// Read what the client sent. Returns false when the client is gone.
    fn read_client(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            match Pin::new(&mut self.payload).poll_next(cx) {
                Poll::Ready(Some(Ok(bytes))) => {
                    if !self.refused {
                        self.inbuf.extend_from_slice(&bytes);
                        self.parse_frames();
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    debug!(subscriber = self.sub.id, error = %e, "feed client connection failed");
                    return false;
                }
                Poll::Ready(None) => return false,
                Poll::Pending => {
                    if self.inbuf.is_empty() {
                        // Give the buffer back: pongs come rarely.
                        self.inbuf = BytesMut::new();
                    }
                    return true;
                }
            }
        }
    }

    fn parse_frames(&mut self) {
        if self.refused {
            self.inbuf.clear();
            return;
        }
        loop {
            match self.reader.next(&mut self.inbuf) {
                Ok(None) => return,
                Ok(Some(frame)) => {
                    self.sub.heard(Instant::now());
                    match frame {
                        Frame::Ping(payload) => self.sub.push_pong(&payload),
                        Frame::Close(code) => {
                            // Echo the client's code (RFC 6455 §5.5.1).
                            self.close_for_client(code.unwrap_or(1000), "");
                            self.refused = true;
                            self.inbuf.clear();
                            return;
                        }
                        // Pongs only prove liveness; the feed takes no
                        // messages, so data frames are ignored.
                        Frame::Pong | Frame::Data => {}
                    }
                }
                Err(violation) => {
                    debug!(subscriber = self.sub.id, code = violation.code, reason = %violation.reason, "feed client broke the protocol");
                    // Whatever else the client sends is dropped unread.
                    self.refused = true;
                    self.inbuf.clear();
                    self.close_for_client(violation.code, &violation.reason);
                    return;
                }
            }
        }
    }

    fn close_for_client(&mut self, code: u16, reason: &str) {
        if self
            .sub
            .close(code, reason, self.hub.config().feed_send_timeout)
        {
            self.hub.metrics.closed(CloseReason::Client);
        }
    }
}

impl MessageBody for FeedBody {
    type Error = std::convert::Infallible;

    fn size(&self) -> BodySize {
        BodySize::Stream
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.get_mut();
        if !this.read_client(cx) {
            return Poll::Ready(None);
        }
        if this.current.is_none() {
            match this.sub.next(cx.waker()) {
                Next::Data(frame, published) => {
                    let m = &this.hub.metrics;
                    m.publish_to_send.observe(published.elapsed().as_secs_f64());
                    m.messages_sent.inc();
                    m.sent_bytes.inc_by(frame.len() as u64);
                    this.current = Some((frame, true));
                }
                Next::Control(frame) => this.current = Some((frame, false)),
                Next::End => return Poll::Ready(None),
                Next::Pending => {
                    this.unflushed = 0;
                    return Poll::Pending;
                }
            }
        }
        let room = PIECE.saturating_sub(this.unflushed);
        if room == 0 {
            // Let actix flush what it has before the next piece.
            this.unflushed = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let Some((mut frame, is_data)) = this.current.take() else {
            return Poll::Ready(None);
        };
        let piece = if frame.len() <= room {
            if is_data {
                this.sub.message_done();
            }
            frame
        } else {
            let piece = frame.split_to(room);
            this.current = Some((frame, is_data));
            piece
        };
        this.unflushed += piece.len();
        Poll::Ready(Some(Ok(piece)))
    }
}

impl Drop for FeedBody {
    fn drop(&mut self) {
        if !self.sub.is_closing() {
            self.hub.metrics.closed(CloseReason::Client);
        }
        // Before actix closes the socket (see `conn::ConnFd`).
        self.sub.detach();
        self.hub.unregister(&self.sub);
        debug!(subscriber = self.sub.id, "feed subscriber disconnected");
    }
}
