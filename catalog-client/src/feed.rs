//! Following the catalog's offers live: the WebSocket feed `GET /subscribe`
//! in its default delta mode — a snapshot on every connect, then one
//! `upsert` or `delete` per change (docs/feed.md).
//!
//! The catalog keeps no subscriber state, so resuming after a lost
//! connection is reconnecting: the snapshot that follows replaces the set
//! whole. Until then the last set is kept — a catalog that is only down
//! never looks empty. Reconnects wait with [`Backoff`], reset by every
//! message received. The catalog pings every 20 s by default; a connection
//! silent for [`FollowOptions::idle_timeout`] is taken for dead.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::routes;
use crate::wire::{FeedEvent, Offer};
use edge::backoff::Backoff;

/// Largest feed message accepted (a snapshot of a large catalog).
const MAX_MESSAGE: usize = 256 << 20;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

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

/// Where a catalog is: `host:port`, its base URL and its feed's URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogAddress {
    host_port: String,
    url: String,
}

impl CatalogAddress {
    /// Parse `http://HOST[:PORT][/]` or `ws://HOST[:PORT][/]` (port 80 by
    /// default).
    pub fn parse(address: &str) -> Result<Self, FeedError> {
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
        Ok(Self {
            url: format!("ws://{host_port}/{}", routes::SUBSCRIBE),
            host_port,
        })
    }

    /// The feed's WebSocket URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `http://HOST:PORT`, for the catalog's REST routes.
    pub fn base(&self) -> String {
        format!("http://{}", self.host_port)
    }

    async fn connect(&self, timeout: Duration) -> Result<Socket, FeedError> {
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let connecting =
            tokio_tungstenite::connect_async_with_config(self.url.as_str(), Some(config), true);
        match tokio::time::timeout(timeout, connecting).await {
            Ok(Ok((socket, _))) => Ok(socket),
            Ok(Err(e)) => Err(self.lost(e.to_string())),
            Err(_) => Err(self.lost(format!("no connection within {timeout:?}"))),
        }
    }

    fn lost(&self, message: String) -> FeedError {
        FeedError::Connect {
            url: self.url.clone(),
            message,
        }
    }
}

/// The next feed message, or why there is none. Control frames and binary
/// frames are skipped (tungstenite answers pings itself).
async fn next_event(socket: &mut Socket, address: &CatalogAddress) -> Result<FeedEvent, FeedError> {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(text.as_str()).map_err(|e| FeedError::Protocol {
                    url: address.url.clone(),
                    message: e.to_string(),
                })
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(address.lost(format!("closed: {frame:?}")))
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(address.lost(e.to_string())),
            None => return Err(address.lost("closed".into())),
        }
    }
}

/// The offers by id, as the feed's events leave them.
pub type OfferSet = BTreeMap<String, Offer>;

/// Apply one event to `offers`: a snapshot replaces them whole. Returns
/// whether the event was one the set follows (unknown types are ignored).
pub fn apply(offers: &mut OfferSet, event: FeedEvent) -> bool {
    match event {
        FeedEvent::Snapshot { offers: all, .. } => {
            *offers = all.into_iter().map(|o| (o.id.clone(), o)).collect();
        }
        FeedEvent::Upsert { offer, .. } => {
            offers.insert(offer.id.clone(), *offer);
        }
        FeedEvent::Delete { id, .. } => {
            offers.remove(&id);
        }
        FeedEvent::Unknown => return false,
    }
    true
}

/// The offers now: connect, take the snapshot, close (for one-off reads).
pub async fn snapshot(address: &CatalogAddress, timeout: Duration) -> Result<OfferSet, FeedError> {
    let read = async {
        let mut socket = address.connect(timeout).await?;
        loop {
            if let FeedEvent::Snapshot { offers, .. } = next_event(&mut socket, address).await? {
                let _ = socket.close(None).await;
                return Ok(offers.into_iter().map(|o| (o.id.clone(), o)).collect());
            }
        }
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or_else(|_| Err(address.lost(format!("no snapshot within {timeout:?}"))))
}

/// How the follower connects and waits.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    /// Limit for connecting (TCP and the WebSocket handshake).
    pub connect_timeout: Duration,
    /// A connection silent this long is dead (the catalog pings every 20 s
    /// by default).
    pub idle_timeout: Duration,
    /// Delays between reconnects.
    pub backoff: Backoff,
}

impl Default for FollowOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(120),
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(30)),
        }
    }
}

/// What the follower tells its owner.
#[derive(Debug)]
pub enum Update<'a> {
    /// Connected (`true`) or the connection is gone (`false`).
    Connected(bool),
    /// The offers after an event.
    Offers(&'a OfferSet),
}

/// Follow the feed at `address` until `shutdown` completes, telling
/// `on_update` about connections and every change. Run it in a task with
/// a span of its own; it logs outages there.
pub async fn follow(
    address: CatalogAddress,
    options: FollowOptions,
    mut on_update: impl FnMut(Update<'_>),
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut backoff = options.backoff.clone();
    let mut offers = OfferSet::new();
    loop {
        let connected = tokio::select! {
            () = &mut shutdown => return,
            connected = address.connect(options.connect_timeout) => connected,
        };
        let (error, what) = match connected {
            Ok(mut socket) => {
                tracing::info!("following the catalog's feed");
                on_update(Update::Connected(true));
                let error = loop {
                    let next = tokio::time::timeout(
                        options.idle_timeout,
                        next_event(&mut socket, &address),
                    );
                    let event = tokio::select! {
                        () = &mut shutdown => {
                            let _ = socket.close(None).await;
                            on_update(Update::Connected(false));
                            return;
                        }
                        event = next => event,
                    };
                    match event {
                        Ok(Ok(event)) => {
                            backoff.reset();
                            if apply(&mut offers, event) {
                                on_update(Update::Offers(&offers));
                            }
                        }
                        Ok(Err(e)) => break e,
                        Err(_) => {
                            break address
                                .lost(format!("nothing received for {:?}", options.idle_timeout))
                        }
                    }
                };
                on_update(Update::Connected(false));
                (
                    error,
                    "lost the catalog's feed; keeping the last offers and reconnecting",
                )
            }
            Err(error) => (error, "cannot reach the catalog; keeping the last offers"),
        };
        let delay = backoff.next_delay();
        tracing::warn!(%error, retry_in = ?delay, "{what}");
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_addresses() {
        let c = CatalogAddress::parse("http://127.0.0.1:8080/").unwrap();
        assert_eq!(c.url(), "ws://127.0.0.1:8080/subscribe");
        assert_eq!(c.base(), "http://127.0.0.1:8080");
        assert_eq!(
            CatalogAddress::parse("ws://catalog").unwrap().url(),
            "ws://catalog:80/subscribe"
        );
        for bad in ["https://x", "catalog:8080", "http://", "http://a/b"] {
            assert!(CatalogAddress::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn events_build_the_set_and_a_snapshot_replaces_it() {
        let offer = |id: &str| -> Offer {
            serde_json::from_value(serde_json::json!({
                "id": id, "name": "n", "type": "t", "description": "", "clusterID": "p",
                "clusterName": "P", "createdAt": "2026-01-01T00:00:00Z",
                "updatedAt": "2026-01-01T00:00:00Z", "version": 1, "plans": {}
            }))
            .unwrap()
        };
        let mut set = OfferSet::new();
        assert!(apply(
            &mut set,
            FeedEvent::Upsert {
                seq: 1,
                offer: Box::new(offer("a"))
            }
        ));
        assert!(apply(
            &mut set,
            FeedEvent::Upsert {
                seq: 2,
                offer: Box::new(offer("b"))
            }
        ));
        assert!(apply(
            &mut set,
            FeedEvent::Delete {
                seq: 3,
                id: "a".into()
            }
        ));
        assert_eq!(set.keys().collect::<Vec<_>>(), ["b"]);
        assert!(!apply(&mut set, FeedEvent::Unknown));
        assert!(apply(
            &mut set,
            FeedEvent::Snapshot {
                seq: 0,
                offers: vec![offer("c")]
            }
        ));
        assert_eq!(set.keys().collect::<Vec<_>>(), ["c"]);
    }
}
