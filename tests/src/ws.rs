//! WebSocket clients for the catalog feed's end-to-end tests (`/subscribe`).
//!
//! - [`FeedClient`]: a real client (tungstenite) that answers pings by
//!   itself, reads JSON messages with deadlines, and reports close frames.
//! - [`RawFeed`]: a bare socket that does the handshake by hand (with any
//!   extra headers, e.g. to offer compression) and then reads frames without
//!   ever answering, to play a client that stopped responding.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};

/// What reading a feed produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A JSON text message.
    Json(Value),
    /// The server's close frame: code and reason.
    Closed(u16, String),
}

/// A subscribe request the server refused before the upgrade.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub body: String,
}

/// A feed subscriber.
pub struct FeedClient {
    ws: WebSocket<TcpStream>,
}

fn url(port: u16, query: &str) -> String {
    format!("ws://127.0.0.1:{port}/subscribe{query}")
}

impl FeedClient {
    /// Subscribe to the catalog on `port`; `query` is `""` or starts with `?`.
    pub fn connect(port: u16, query: &str) -> Result<Self> {
        match Self::try_connect(port, query)? {
            Ok(c) => Ok(c),
            Err(r) => bail!("subscribe{query} refused: {} {}", r.status, r.body),
        }
    }

    /// Subscribe, returning the HTTP refusal (status and body) if there is one.
    pub fn try_connect(port: u16, query: &str) -> Result<std::result::Result<Self, Refused>> {
        let stream =
            TcpStream::connect(("127.0.0.1", port)).context("connecting to the catalog")?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(crate::EVENTUALLY))?;
        match tungstenite::client(url(port, query), stream) {
            Ok((ws, _)) => Ok(Ok(FeedClient { ws })),
            Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(resp))) => {
                Ok(Err(Refused {
                    status: resp.status().as_u16(),
                    body: resp
                        .body()
                        .as_ref()
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                        .unwrap_or_default(),
                }))
            }
            Err(e) => bail!("WebSocket handshake failed: {e}"),
        }
    }

    /// The next message or close frame, waiting at most until `deadline`.
    /// Pings are answered and skipped.
    pub fn next_event(&mut self, deadline: Instant) -> Result<Event> {
        match self.poll_event(deadline)? {
            Some(e) => Ok(e),
            None => bail!("no feed message before the deadline"),
        }
    }

    /// The next message or close frame before `deadline`; `None` only when
    /// the deadline passed with nothing received. A reset connection, an
    /// unparseable or binary frame is an error, never "nothing".
    pub fn poll_event(&mut self, deadline: Instant) -> Result<Option<Event>> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.ws.get_mut().set_read_timeout(Some(left))?;
            match self.ws.read() {
                Ok(Message::Text(t)) => {
                    let v: Value = serde_json::from_str(t.as_str())
                        .with_context(|| format!("feed message is not JSON: {t}"))?;
                    return Ok(Some(Event::Json(v)));
                }
                Ok(Message::Close(frame)) => {
                    let (code, reason) = frame
                        .map(|f| (u16::from(f.code), f.reason.to_string()))
                        .unwrap_or((1005, String::new()));
                    return Ok(Some(Event::Closed(code, reason)));
                }
                Ok(Message::Binary(_)) => bail!("the feed sent a binary message"),
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) => bail!("reading the feed: {e}"),
            }
        }
    }

    /// The next JSON message within `timeout`; a close frame is an error.
    pub fn next(&mut self, timeout: Duration) -> Result<Value> {
        self.next_by(Instant::now() + timeout)
    }

    /// The next JSON message before `deadline`; a close frame is an error.
    pub fn next_by(&mut self, deadline: Instant) -> Result<Value> {
        match self.next_event(deadline)? {
            Event::Json(v) => Ok(v),
            Event::Closed(code, reason) => {
                bail!("the feed closed ({code} {reason}) instead of sending a message")
            }
        }
    }

    /// The next message, which must be of `kind` (`snapshot`, `upsert`, ...).
    pub fn expect(&mut self, kind: &str, timeout: Duration) -> Result<Value> {
        let m = self.next(timeout)?;
        if m["type"] != kind {
            bail!("expected a {kind} message, got {m}");
        }
        Ok(m)
    }

    /// Assert that nothing arrives for `wait` and the connection is still
    /// sound: a message, a close frame, a reset or a bad frame fails.
    ///
    /// Silence alone proves little (a stalled server is silent too): follow
    /// it with a later change whose message must be the next one received.
    pub fn expect_silence(&mut self, wait: Duration) -> Result<()> {
        match self
            .poll_event(Instant::now() + wait)
            .context("the feed broke while it was expected to stay silent")?
        {
            Some(e) => bail!("expected no feed message, got {e:?}"),
            None => Ok(()),
        }
    }

    /// Read (and drop) messages until the server's close frame; its code and
    /// reason.
    pub fn expect_close(&mut self, timeout: Duration) -> Result<(u16, String)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Event::Closed(code, reason) = self.next_event(deadline)? {
                return Ok((code, reason));
            }
        }
    }

    /// Close from the client side (code 1000).
    pub fn close(mut self) {
        let _ = self.ws.close(Some(tungstenite::protocol::CloseFrame {
            code: CloseCode::Normal,
            reason: "test done".into(),
        }));
        let _ = self.ws.flush();
    }

    /// Send a raw message (for protocol tests).
    pub fn send(&mut self, m: Message) -> Result<()> {
        self.ws.send(m).context("sending to the feed")
    }
}

/// Offer ids of a snapshot message, in order.
pub fn snapshot_ids(m: &Value) -> Vec<String> {
    m["offers"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|o| o["id"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A server frame as [`RawFeed`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    pub opcode: u8,
    /// RSV1: the payload is compressed (`permessage-deflate`).
    pub compressed: bool,
    pub payload: Vec<u8>,
}

impl RawFrame {
    pub const TEXT: u8 = 0x1;
    pub const CLOSE: u8 = 0x8;
    pub const PING: u8 = 0x9;

    /// The message payload, inflated if it is compressed.
    pub fn message(&self) -> Result<Vec<u8>> {
        if !self.compressed {
            return Ok(self.payload.clone());
        }
        let mut input = self.payload.clone();
        input.extend_from_slice(&[0, 0, 0xff, 0xff]);
        let mut out = Vec::with_capacity(input.len() * 8 + 64);
        let mut d = flate2::Decompress::new(false);
        loop {
            let (before_in, before_out) = (d.total_in(), d.total_out());
            d.decompress_vec(
                &input[d.total_in() as usize..],
                &mut out,
                flate2::FlushDecompress::Sync,
            )
            .context("inflating a compressed message")?;
            if d.total_in() as usize == input.len() && out.len() < out.capacity() {
                return Ok(out);
            }
            if d.total_in() == before_in
                && d.total_out() == before_out
                && out.len() < out.capacity()
            {
                bail!("the compressed message does not inflate");
            }
            out.reserve(out.capacity().max(4096));
        }
    }

    /// The message as JSON.
    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.message()?).context("feed message is not JSON")
    }

    /// The close code of a close frame.
    pub fn close_code(&self) -> Option<u16> {
        (self.opcode == Self::CLOSE && self.payload.len() >= 2)
            .then(|| u16::from_be_bytes([self.payload[0], self.payload[1]]))
    }
}

/// A subscriber that never answers: a bare socket after a hand-made
/// handshake.
pub struct RawFeed {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The server's handshake answer (status line and headers).
    pub head: String,
}

impl RawFeed {
    pub fn connect(port: u16, query: &str) -> Result<Self> {
        Self::connect_with(port, query, "")
    }

    /// Connect sending `extra_headers` too (each line ending in `\r\n`).
    pub fn connect_with(port: u16, query: &str, extra_headers: &str) -> Result<Self> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        write!(
            stream,
            "GET /subscribe{query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra_headers}\r\n"
        )?;
        let mut feed = RawFeed {
            stream,
            buf: Vec::new(),
            head: String::new(),
        };
        let deadline = Instant::now() + crate::EVENTUALLY;
        let head_end = loop {
            if let Some(i) = feed.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            feed.fill(deadline)?;
        };
        let head = String::from_utf8_lossy(&feed.buf[..head_end]).into_owned();
        if !head.starts_with("HTTP/1.1 101") {
            bail!("expected 101 Switching Protocols, got: {head}");
        }
        feed.buf.drain(..head_end);
        feed.head = head;
        Ok(feed)
    }

    fn fill(&mut self, deadline: Instant) -> Result<()> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("nothing from the catalog before the deadline");
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut chunk = [0u8; 16 * 1024];
        let n = self
            .stream
            .read(&mut chunk)
            .context("reading the raw feed")?;
        if n == 0 {
            bail!("the catalog closed the connection");
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// The next frame, waiting at most `timeout`.
    pub fn next_frame(&mut self, timeout: Duration) -> Result<RawFrame> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((frame, used)) = parse(&self.buf)? {
                self.buf.drain(..used);
                return Ok(frame);
            }
            self.fill(deadline)?;
        }
    }

    /// The next text message (skipping pings), waiting at most `timeout`.
    pub fn next_message(&mut self, timeout: Duration) -> Result<RawFrame> {
        let deadline = Instant::now() + timeout;
        loop {
            let f = self.next_frame(deadline.saturating_duration_since(Instant::now()))?;
            match f.opcode {
                RawFrame::PING => continue,
                RawFrame::TEXT => return Ok(f),
                other => bail!("expected a text message, got opcode {other}"),
            }
        }
    }
}

impl RawFeed {
    /// Send raw bytes: hand-made frames, for protocol tests.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream
            .write_all(bytes)
            .context("writing to the raw feed")
    }

    /// A second handle on the socket, e.g. to write from another thread.
    pub fn stream_clone(&self) -> Result<TcpStream> {
        self.stream.try_clone().context("cloning the feed socket")
    }

    /// Frames until the server's close frame (skipping data and pings);
    /// its code.
    pub fn expect_close(&mut self, timeout: Duration) -> Result<u16> {
        let deadline = Instant::now() + timeout;
        loop {
            let f = self.next_frame(deadline.saturating_duration_since(Instant::now()))?;
            if f.opcode == RawFrame::CLOSE {
                return f
                    .close_code()
                    .context("the server's close frame has no code");
            }
        }
    }
}

/// A masked client frame with first byte `b0` (FIN, RSV bits, opcode) and
/// `payload`, as a client must send it.
pub fn client_frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37u8, 0xfa, 0x21, 0x3d];
    let mut out = vec![b0];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xffff => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// One unmasked server frame from the front of `buf`, and its length.
fn parse(buf: &[u8]) -> Result<Option<(RawFrame, usize)>> {
    if buf.len() < 2 {
        return Ok(None);
    }
    if buf[1] & 0x80 != 0 {
        bail!("the server masked a frame");
    }
    let (len, header) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => (u64::from_be_bytes(buf[2..10].try_into()?) as usize, 10),
        126 | 127 => return Ok(None),
        n => (n as usize, 2),
    };
    if buf.len() < header + len {
        return Ok(None);
    }
    let frame = RawFrame {
        opcode: buf[0] & 0x0f,
        compressed: buf[0] & 0x40 != 0,
        payload: buf[header..header + len].to_vec(),
    };
    Ok(Some((frame, header + len)))
}
