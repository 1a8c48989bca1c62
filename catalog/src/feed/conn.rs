//! Cutting a subscriber's connection that makes no progress at all.
//!
//! A client that stops reading fills its socket buffers; actix then stops
//! polling the response body, so the feed cannot even hand over a close
//! frame, and actix has no timer for a write that never completes. The feed
//! therefore remembers each connection's socket (recorded by [`on_connect`],
//! registered with `HttpServer::on_connect`) and, past the deadline, shuts
//! it down: actix's pending write fails, the connection ends and its memory
//! is freed. With `SO_LINGER` 0 the kernel resets it instead of keeping the
//! unsent data queued.
//!
//! # Why raw `setsockopt`/`shutdown` and not `socket2`
//!
//! `socket2::SockRef` does these calls safely, but only on a borrowed
//! descriptor (`AsFd`), and the descriptor belongs to actix's `TcpStream`,
//! which the feed sees only inside `on_connect`. Later, from the stored
//! `RawFd`, a `SockRef` needs `BorrowedFd::borrow_raw` — `unsafe` with
//! exactly the invariant documented on [`ConnFd`], so nothing would be
//! gained. Owning a `dup` of the descriptor instead would make it safe but
//! keep every socket open (no FIN to the peer) until the feed dropped its
//! copy, and double the descriptors per connection. So the two calls stay
//! raw, in the two `#[allow(unsafe_code)]` functions below, which rely on
//! actix dropping a response body before it closes the socket.

use std::any::Any;

use actix_web::dev::Extensions;

/// The raw socket of one HTTP connection.
///
/// Only used while that connection's feed body is alive: actix drops the
/// response body before it closes the socket (the body lives in the
/// dispatcher's `state`, declared before its `io`), and the body's drop
/// waits on the subscriber's lock that [`ConnFd::cut`] is called under, so
/// the descriptor cannot have been closed and reused in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnFd(#[cfg(unix)] std::os::fd::RawFd);

impl ConnFd {
    /// Reset the connection: later writes fail and actix drops it.
    #[allow(unsafe_code)] // sound: see the SAFETY comment and the type's docs
    pub(crate) fn cut(self) {
        #[cfg(unix)]
        {
            let fd = self.0;
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: `fd` is an open socket owned by a live connection (see
            // the type's docs); both calls only change that socket's state.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&linger as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
                libc::shutdown(fd, libc::SHUT_RDWR);
            }
        }
    }
}

impl ConnFd {
    /// Send each write at once (no Nagle delay): feed messages are written
    /// in pieces, and waiting for the peer's ACK between them would add
    /// up to a delayed-ACK timeout (tens of ms) to every message.
    #[allow(unsafe_code)] // sound: see the SAFETY comment
    pub(crate) fn set_nodelay(self) {
        #[cfg(unix)]
        {
            let on: libc::c_int = 1;
            // SAFETY: called from the connection's own request handler, so
            // the socket is open; the call only sets one of its options.
            unsafe {
                libc::setsockopt(
                    self.0,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    (&on as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
    }
}

/// `HttpServer::on_connect` callback: remember each TCP connection's socket.
pub fn on_connect(conn: &dyn Any, ext: &mut Extensions) {
    #[cfg(unix)]
    if let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() {
        use std::os::fd::AsRawFd;
        ext.insert(ConnFd(tcp.as_raw_fd()));
    }
    #[cfg(not(unix))]
    let _ = (conn, ext);
}
