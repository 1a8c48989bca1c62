//! A connection limit for the gRPC server: accepting waits while
//! `max_connections` connections are open, so a flood of clients cannot
//! exhaust file descriptors or memory.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// An accepted connection holding one of the limited slots until it closes.
/// Public so other servers of the project (the aggregator's HTTP port)
/// limit their connections the same way.
pub struct LimitedConn {
    io: TcpStream,
    _slot: OwnedSemaphorePermit,
}

impl LimitedConn {
    /// `io` holds `slot` until it is dropped.
    pub fn new(io: TcpStream, slot: OwnedSemaphorePermit) -> Self {
        LimitedConn { io, _slot: slot }
    }
}

/// Accept connections from `listener`, at most `max` open at once.
pub(crate) fn incoming(
    listener: TcpListener,
    max: usize,
) -> impl Stream<Item = io::Result<LimitedConn>> + Send + 'static {
    let slots = Arc::new(Semaphore::new(max.max(1)));
    futures::stream::unfold((listener, slots), |(listener, slots)| async move {
        let slot = slots.clone().acquire_owned().await.ok()?;
        let accepted = match listener.accept().await {
            Ok((io, _)) => {
                // Reads are small request/response pairs: do not let Nagle
                // hold them back.
                let _ = io.set_nodelay(true);
                Ok(LimitedConn::new(io, slot))
            }
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                // Out of file descriptors and similar: back off instead of
                // spinning on a listener that fails at once.
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(error)
            }
        };
        Some((accepted, (listener, slots)))
    })
}

impl Connected for LimitedConn {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

impl AsyncRead for LimitedConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for LimitedConn {
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
