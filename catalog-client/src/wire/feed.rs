//! The messages of the WebSocket feed `GET /subscribe` (docs/feed.md): one
//! JSON text frame each, tagged by `type`, carrying `seq`. The server
//! writes them byte by byte in `catalog/src/feed/envelope.rs` (`snapshot`,
//! `upsert`, `delete`); this is their typed form.

use serde::{Deserialize, Serialize};

use super::offer::Offer;

/// One feed message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FeedEvent {
    /// The whole (filtered) list, ordered by id: on connect, and whenever
    /// the server reloads. It replaces whatever the subscriber held.
    Snapshot {
        #[serde(default)]
        seq: u64,
        offers: Vec<Offer>,
    },
    /// An offer was created or replaced, or entered the filtered view.
    Upsert {
        #[serde(default)]
        seq: u64,
        // Boxed: an offer is large beside the other variants.
        offer: Box<Offer>,
    },
    /// An offer was deleted, or left the filtered view.
    Delete {
        #[serde(default)]
        seq: u64,
        id: String,
    },
    /// A type this client does not know: clients must ignore those (the
    /// server may add some).
    #[serde(other)]
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_message_and_ignores_unknown_types() {
        let e: FeedEvent = serde_json::from_str(r#"{"type":"delete","seq":7,"id":"o1"}"#).unwrap();
        assert_eq!(
            e,
            FeedEvent::Delete {
                seq: 7,
                id: "o1".into()
            }
        );
        let e: FeedEvent =
            serde_json::from_str(r#"{"type":"snapshot","seq":0,"offers":[]}"#).unwrap();
        assert_eq!(
            e,
            FeedEvent::Snapshot {
                seq: 0,
                offers: vec![]
            }
        );
        let e: FeedEvent = serde_json::from_str(r#"{"type":"hello","seq":1}"#).unwrap();
        assert_eq!(e, FeedEvent::Unknown);
    }
}
