//! Following the catalog's offers: the WebSocket feed `GET /subscribe` in
//! its default delta mode (a snapshot on connect, then one `upsert` or
//! `delete` per change), kept as the current set of offers in a
//! `tokio::sync::watch` channel.
//!
//! When the catalog is unreachable or the connection drops, the last set is
//! kept — decisions are never made on an empty catalog that is only down —
//! and the follower reconnects with backoff (0.5 s doubling to 30 s); the
//! snapshot it gets on reconnecting replaces the set whole. The socket is
//! read on a thread of its own (the client is tungstenite's blocking one)
//! with a short read timeout, so a stop request is seen within a second.

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::watch;
use tungstenite::{Message, WebSocket};

use crate::metrics::Metrics;
use crate::offers::{Offer, Offers};

const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
const READ_TICK: Duration = Duration::from_secs(1);
/// Largest feed message accepted (a snapshot of a large catalog).
const MAX_MESSAGE: usize = 256 << 20;

/// The catalog's offers as last seen.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub offers: Offers,
    /// A snapshot was received at least once.
    pub loaded: bool,
    /// Providers an administrator disabled in the catalog.
    pub disabled: std::collections::BTreeSet<String>,
}

/// A catalog address that cannot be used, or a feed that did not answer.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("--catalog {0:?}: give http://HOST:PORT (or ws://HOST:PORT) of the catalog")]
    Address(String),
    #[error("cannot reach the catalog at {url}: {message}")]
    Connect { url: String, message: String },
    #[error("the catalog's feed at {url} sent something unexpected: {message}")]
    Protocol { url: String, message: String },
}

/// Where the feed is: `host:port` and the WebSocket URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    host_port: String,
    url: String,
}

impl Catalog {
    /// Parse `http://HOST:PORT[/]` or `ws://HOST:PORT[/]`.
    pub fn parse(address: &str) -> Result<Catalog, FeedError> {
        let rest = address
            .strip_prefix("http://")
            .or_else(|| address.strip_prefix("ws://"))
            .ok_or_else(|| FeedError::Address(address.to_string()))?;
        let host_port = rest.trim_end_matches('/');
        if host_port.is_empty() || host_port.contains('/') || host_port.contains('@') {
            return Err(FeedError::Address(address.to_string()));
        }
        let host_port = if host_port
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            host_port.to_string()
        } else {
            format!("{host_port}:80")
        };
        Ok(Catalog {
            url: format!("ws://{host_port}/subscribe"),
            host_port,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// `http://HOST:PORT`, for the catalog's REST routes.
    pub fn base(&self) -> String {
        format!("http://{}", self.host_port)
    }

    fn connect(&self, timeout: Duration) -> Result<WebSocket<TcpStream>, FeedError> {
        let failed = |message: String| FeedError::Connect {
            url: self.url.clone(),
            message,
        };
        let addr = self
            .host_port
            .to_socket_addrs()
            .map_err(|e| failed(e.to_string()))?
            .next()
            .ok_or_else(|| failed("no address".into()))?;
        let stream =
            TcpStream::connect_timeout(&addr, timeout).map_err(|e| failed(e.to_string()))?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| failed(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let config = tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let (ws, _) =
            tungstenite::client::client_with_config(self.url.as_str(), stream, Some(config))
                .map_err(|e| failed(e.to_string()))?;
        Ok(ws)
    }
}

/// One feed message.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Event {
    Snapshot { offers: Vec<Offer> },
    Upsert { offer: Offer },
    Delete { id: String },
}

fn read_event(ws: &mut WebSocket<TcpStream>, url: &str) -> Result<Option<Event>, FeedError> {
    match ws.read() {
        Ok(Message::Text(text)) => {
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| FeedError::Protocol {
                    url: url.to_string(),
                    message: e.to_string(),
                })
        }
        Ok(Message::Close(frame)) => Err(FeedError::Connect {
            url: url.to_string(),
            message: format!("closed: {frame:?}"),
        }),
        Ok(_) => Ok(None),
        Err(tungstenite::Error::Io(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(FeedError::Connect {
            url: url.to_string(),
            message: e.to_string(),
        }),
    }
}

/// The offers now: connect, take the snapshot, close (for `explain`).
pub fn fetch(catalog: &Catalog, timeout: Duration) -> Result<Offers, FeedError> {
    let mut ws = catalog.connect(timeout)?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(Event::Snapshot { offers }) = read_event(&mut ws, catalog.url())? {
            let _ = ws.close(None);
            return Ok(offers.into_iter().map(|o| (o.id.clone(), o)).collect());
        }
        if Instant::now() > deadline {
            return Err(FeedError::Connect {
                url: catalog.url.clone(),
                message: format!("no snapshot within {timeout:?}"),
            });
        }
    }
}

/// Follow the feed until `stop` is set; the sender's receivers
/// (`subscribe()`) see every change.
pub fn follow(
    catalog: Catalog,
    metrics: Metrics,
    stop: Arc<AtomicBool>,
) -> (
    Arc<watch::Sender<Arc<Snapshot>>>,
    std::thread::JoinHandle<()>,
) {
    let tx = Arc::new(watch::Sender::new(Arc::new(Snapshot::default())));
    let sender = tx.clone();
    let span = tracing::info_span!("catalog_feed", url = %catalog.url);
    let handle = std::thread::spawn(move || {
        let _entered = span.enter();
        let mut backoff = BACKOFF_MIN;
        let mut offers = Offers::new();
        while !stop.load(Ordering::Relaxed) {
            match catalog.connect(READ_TICK * 5) {
                Ok(mut ws) => {
                    let _ = ws.get_mut().set_read_timeout(Some(READ_TICK));
                    tracing::info!("following the catalog's feed");
                    metrics.set_catalog_connected(true);
                    let error = loop {
                        if stop.load(Ordering::Relaxed) {
                            let _ = ws.close(None);
                            break None;
                        }
                        match read_event(&mut ws, catalog.url()) {
                            Ok(None) => continue,
                            Ok(Some(event)) => {
                                backoff = BACKOFF_MIN;
                                match event {
                                    Event::Snapshot { offers: all } => {
                                        offers =
                                            all.into_iter().map(|o| (o.id.clone(), o)).collect();
                                    }
                                    Event::Upsert { offer } => {
                                        offers.insert(offer.id.clone(), offer);
                                    }
                                    Event::Delete { id } => {
                                        offers.remove(&id);
                                    }
                                }
                                metrics.count_feed_event();
                                tx.send_modify(|s| {
                                    *s = Arc::new(Snapshot {
                                        offers: offers.clone(),
                                        loaded: true,
                                        disabled: s.disabled.clone(),
                                    })
                                });
                            }
                            Err(e) => break Some(e),
                        }
                    };
                    metrics.set_catalog_connected(false);
                    match error {
                        None => break,
                        Some(e) => {
                            tracing::warn!(error = %e, "lost the catalog's feed; keeping the last offers and reconnecting")
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "cannot reach the catalog; keeping the last offers")
                }
            }
            let until = Instant::now() + backoff;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    });
    (sender, handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_addresses() {
        let c = Catalog::parse("http://127.0.0.1:8080/").unwrap();
        assert_eq!(c.url(), "ws://127.0.0.1:8080/subscribe");
        assert_eq!(
            Catalog::parse("ws://catalog").unwrap().url(),
            "ws://catalog:80/subscribe"
        );
        for bad in ["https://x", "catalog:8080", "http://", "http://a/b"] {
            assert!(Catalog::parse(bad).is_err(), "{bad}");
        }
    }
}
