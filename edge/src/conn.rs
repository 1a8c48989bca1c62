//! A guarded TCP accept loop for servers facing clients that may not be
//! well-behaved: a connection that opens and sends nothing must not hold a
//! slot for long, and one peer must not take every slot.
//!
//! [`GuardedListener`] accepts connections and hands out [`GuardedConn`]s:
//!
//! - **total limit** (`max_connections`): while that many are open, new
//!   connections wait in the kernel's backlog (they are not refused);
//! - **per-peer limit** (`max_per_peer`, by remote IP address): a peer that
//!   already holds that many is refused at once — accepted and closed, so it
//!   takes no slot and the others are not kept waiting;
//! - **handshake deadline** (`handshake_timeout`): a connection must send its
//!   first `handshake_bytes` bytes (24 is the HTTP/2 client preface) within
//!   this time of being accepted, or it is closed;
//! - **idle deadline** (`idle_timeout`, optional): after the handshake, a
//!   connection that sends nothing for this long is closed (for HTTP/1
//!   ports, where a kept-alive connection would otherwise sit forever).
//!
//! The deadlines are enforced in the connection's reads: the server reading
//! the connection sees a `TimedOut` error and closes it.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Bytes of the HTTP/2 client connection preface (`PRI * HTTP/2.0…`), what
/// a gRPC client sends first.
pub const HTTP2_PREFACE_LEN: usize = 24;

/// Bytes of the shortest HTTP/1 request line (`GET / HTTP/1.1\r\n`).
pub const HTTP1_REQUEST_LINE_MIN: usize = 16;

/// The limits of a [`GuardedListener`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// Connections open at once from one IP address; more are closed at once.
    pub max_per_peer: usize,
    /// How long a new connection has to send its first `handshake_bytes`.
    pub handshake_timeout: Duration,
    /// How many bytes make the handshake (at least 1).
    pub handshake_bytes: usize,
    /// After the handshake: close a connection that sends nothing for this long.
    pub idle_timeout: Option<Duration>,
}

impl Limits {
    /// Defaults for an HTTP/2 (gRPC) port: 256 connections, 32 per peer,
    /// 5 s to send the client preface, no idle deadline.
    pub fn http2() -> Self {
        Self {
            max_connections: 256,
            max_per_peer: 32,
            handshake_timeout: Duration::from_secs(5),
            handshake_bytes: HTTP2_PREFACE_LEN,
            idle_timeout: None,
        }
    }

    /// Defaults for an HTTP/1 port: 64 connections, 8 per peer, 5 s to send
    /// a request line, closed after 30 s without a byte.
    pub fn http1() -> Self {
        Self {
            max_connections: 64,
            max_per_peer: 8,
            handshake_timeout: Duration::from_secs(5),
            handshake_bytes: HTTP1_REQUEST_LINE_MIN,
            idle_timeout: Some(Duration::from_secs(30)),
        }
    }
}

/// A TCP listener that hands out connections within [`Limits`].
pub struct GuardedListener {
    listener: TcpListener,
    limits: Limits,
    slots: Arc<Semaphore>,
    peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
    refused: AtomicU64,
}

impl std::fmt::Debug for GuardedListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedListener")
            .field("local_addr", &self.listener.local_addr().ok())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl GuardedListener {
    pub fn new(listener: TcpListener, limits: Limits) -> Self {
        Self {
            listener,
            slots: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            limits,
            peers: Arc::default(),
            refused: AtomicU64::new(0),
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The next connection within the limits. Never fails: accept errors
    /// (out of file descriptors, …) are logged and retried after a pause.
    pub async fn accept(&self) -> (GuardedConn, SocketAddr) {
        loop {
            // The semaphore is never closed, so acquiring cannot fail.
            let Ok(slot) = self.slots.clone().acquire_owned().await else {
                return std::future::pending().await;
            };
            let (io, addr) = loop {
                match self.listener.accept().await {
                    Ok(accepted) => break accepted,
                    Err(error) => {
                        tracing::warn!(%error, "accept failed");
                        // Do not spin on a listener that fails at once.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            };
            let ip = addr.ip().to_canonical();
            let Some(peer) = PeerSlot::take(&self.peers, ip, self.limits.max_per_peer) else {
                let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
                // Warn on the 1st, 2nd, 4th, 8th … refusal: a flood is seen
                // without flooding the log.
                if refused.is_power_of_two() {
                    tracing::warn!(
                        peer = %ip,
                        max_per_peer = self.limits.max_per_peer,
                        refused_so_far = refused,
                        "too many connections from one peer: closing the new one"
                    );
                }
                drop(io);
                continue;
            };
            // Requests are small request/response pairs: no Nagle delay.
            let _ = io.set_nodelay(true);
            return (GuardedConn::new(io, slot, peer, self.limits), addr);
        }
    }

    /// The connections as a stream, for `tonic`'s `serve_with_incoming`.
    pub fn into_stream(self) -> impl Stream<Item = io::Result<GuardedConn>> + Send + 'static {
        futures::stream::unfold(self, |listener| async move {
            let (conn, _) = listener.accept().await;
            Some((Ok(conn), listener))
        })
    }
}

/// One of a peer's connections; gives the peer's count back when dropped.
struct PeerSlot {
    peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl PeerSlot {
    fn take(peers: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, max: usize) -> Option<Self> {
        let mut map = peers.lock().unwrap_or_else(|e| e.into_inner());
        let count = map.entry(ip).or_insert(0);
        if *count >= max.max(1) {
            return None;
        }
        *count += 1;
        Some(Self {
            peers: peers.clone(),
            ip,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut map = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = map.get_mut(&self.ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// An accepted connection: holds its slots until dropped, and fails its
/// reads with `TimedOut` once a deadline of its [`Limits`] has passed.
pub struct GuardedConn {
    io: TcpStream,
    _slot: OwnedSemaphorePermit,
    _peer: PeerSlot,
    /// Bytes still expected before the handshake deadline; 0 once done.
    handshake_left: usize,
    /// The handshake deadline, then the idle deadline (if any).
    deadline: Option<Pin<Box<Sleep>>>,
    idle_timeout: Option<Duration>,
}

impl GuardedConn {
    fn new(io: TcpStream, slot: OwnedSemaphorePermit, peer: PeerSlot, limits: Limits) -> Self {
        Self {
            io,
            _slot: slot,
            _peer: peer,
            handshake_left: limits.handshake_bytes.max(1),
            deadline: Some(Box::pin(tokio::time::sleep(limits.handshake_timeout))),
            idle_timeout: limits.idle_timeout,
        }
    }

    /// The underlying stream.
    pub fn tcp(&self) -> &TcpStream {
        &self.io
    }
}

impl AsyncRead for GuardedConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(deadline) = this.deadline.as_mut() {
            if deadline.as_mut().poll(cx).is_ready() {
                let what = if this.handshake_left > 0 {
                    "no handshake within the deadline"
                } else {
                    "idle for too long"
                };
                tracing::debug!(peer = ?this.io.peer_addr().ok(), "closing a connection: {what}");
                this.deadline = None;
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)));
            }
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
        let read = buf.filled().len() - before;
        if read > 0 {
            if this.handshake_left > 0 {
                this.handshake_left = this.handshake_left.saturating_sub(read);
                if this.handshake_left == 0 {
                    this.deadline = None;
                }
            }
            if this.handshake_left == 0 {
                if let Some(idle) = this.idle_timeout {
                    match this.deadline.as_mut() {
                        Some(deadline) => deadline.as_mut().reset(Instant::now() + idle),
                        None => this.deadline = Some(Box::pin(tokio::time::sleep(idle))),
                    }
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for GuardedConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(feature = "tonic")]
impl tonic::transport::server::Connected for GuardedConn {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        <TcpStream as tonic::transport::server::Connected>::connect_info(&self.io)
    }
}

#[cfg(feature = "axum")]
impl axum::serve::Listener for GuardedListener {
    type Io = GuardedConn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (GuardedConn, SocketAddr) {
        GuardedListener::accept(self).await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        GuardedListener::local_addr(self)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn listener(limits: Limits) -> (Arc<GuardedListener>, SocketAddr) {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        (Arc::new(GuardedListener::new(tcp, limits)), addr)
    }

    /// Echo server: each accepted connection echoes until it fails.
    fn serve(listener: Arc<GuardedListener>) {
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await;
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = conn.read(&mut buf).await {
                        if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
    }

    /// Whether the server closed `stream` within `within`.
    async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
        let mut buf = [0u8; 8];
        match tokio::time::timeout(within, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => true,
            Ok(Ok(_)) | Err(_) => false,
        }
    }

    #[tokio::test]
    async fn silent_connections_are_closed_at_the_handshake_deadline() {
        let limits = Limits {
            handshake_timeout: Duration::from_millis(200),
            handshake_bytes: 4,
            ..Limits::http2()
        };
        let (listener, addr) = listener(limits).await;
        serve(listener);
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let mut polite = TcpStream::connect(addr).await.unwrap();
        polite.write_all(b"helo").await.unwrap();
        assert!(closed_within(&mut silent, Duration::from_secs(3)).await);
        // The polite one is past its handshake and still served.
        tokio::time::sleep(Duration::from_millis(300)).await;
        polite.write_all(b"x").await.unwrap();
        let mut buf = [0u8; 5];
        polite.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"helox");
    }

    #[tokio::test]
    async fn a_peer_over_its_limit_is_closed_at_once() {
        let limits = Limits {
            max_per_peer: 2,
            handshake_timeout: Duration::from_secs(60),
            ..Limits::http2()
        };
        let (listener, addr) = listener(limits).await;
        serve(listener);
        let _a = TcpStream::connect(addr).await.unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        let mut c = TcpStream::connect(addr).await.unwrap();
        assert!(closed_within(&mut c, Duration::from_secs(3)).await);
        drop(_a);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut d = TcpStream::connect(addr).await.unwrap();
        assert!(!closed_within(&mut d, Duration::from_millis(300)).await);
    }

    #[tokio::test]
    async fn idle_connections_are_closed_after_the_handshake() {
        let limits = Limits {
            handshake_bytes: 1,
            idle_timeout: Some(Duration::from_millis(200)),
            ..Limits::http1()
        };
        let (listener, addr) = listener(limits).await;
        serve(listener);
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(b"a").await.unwrap();
        let mut buf = [0u8; 1];
        conn.read_exact(&mut buf).await.unwrap();
        assert!(closed_within(&mut conn, Duration::from_secs(3)).await);
    }
}
