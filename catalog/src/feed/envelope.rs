//! The feed's messages, encoded once as complete WebSocket frames.
//!
//! Every message is a JSON text frame whose object starts with `type` and
//! `seq` (see the [module docs](super) for the protocol). A frame is built
//! once per change and its [`Bytes`] are shared by every subscriber that
//! gets it: fanning out never serialises or copies per subscriber.
//!
//! Offers are serialised once when they enter the feed ([`offer_json`]) and
//! spliced into lists and deltas as they are, so they are byte for byte the
//! JSON `GET /offers` returns. A [`Message`] also carries, built on first
//! need, its compressed frame for the subscribers that negotiated
//! `permessage-deflate` (see [`super::deflate`]).

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::deflate;
use crate::offers::Offer;

const OP_TEXT: u8 = 0x1;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;
const FIN: u8 = 0x80;
/// Marks a compressed message (RFC 7692 §6).
const RSV1: u8 = 0x40;
/// The longest server frame header: 2 bytes plus a 64-bit length.
const MAX_HEADER: usize = 10;
/// Longest close reason that fits a control frame (125 bytes minus the code).
const MAX_CLOSE_REASON: usize = 123;

/// One feed message (a text frame), plain and, on first need, compressed;
/// cheap to clone, its bytes shared.
#[derive(Debug, Clone)]
pub struct Message {
    plain: Bytes,
    /// Where the payload starts in `plain`.
    payload_at: usize,
    deflated: Arc<OnceLock<Bytes>>,
}

impl Message {
    fn new(opcode: u8, capacity: usize, write: impl FnOnce(&mut Vec<u8>)) -> Self {
        let (plain, payload_at) = frame_parts(FIN | opcode, capacity, write);
        Message {
            plain,
            payload_at,
            deflated: Arc::new(OnceLock::new()),
        }
    }

    /// The frame for a subscriber that did (`deflate`) or did not negotiate
    /// compression. The compressed frame is built once, by the first
    /// subscriber that needs it.
    pub fn frame(&self, deflate: bool) -> Bytes {
        if !deflate {
            return self.plain.clone();
        }
        self.deflated
            .get_or_init(|| {
                let packed = deflate::compress(&self.plain[self.payload_at..]);
                frame_parts(FIN | RSV1 | OP_TEXT, packed.len(), |buf| {
                    buf.extend_from_slice(&packed)
                })
                .0
            })
            .clone()
    }
}

/// Build one unmasked frame (the server never masks) whose payload `write`
/// appends; the header is written in front of it without copying the
/// payload again.
fn frame(opcode: u8, capacity: usize, write: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    frame_parts(FIN | opcode, capacity, write).0
}

/// The frame and where its payload starts.
fn frame_parts(first: u8, capacity: usize, write: impl FnOnce(&mut Vec<u8>)) -> (Bytes, usize) {
    let mut buf = Vec::with_capacity(MAX_HEADER + capacity);
    buf.resize(MAX_HEADER, 0);
    write(&mut buf);
    let len = buf.len() - MAX_HEADER;
    let mut header = [0u8; MAX_HEADER];
    header[0] = first;
    let header_len = if len < 126 {
        header[1] = len as u8;
        2
    } else if let Ok(len16) = u16::try_from(len) {
        header[1] = 126;
        header[2..4].copy_from_slice(&len16.to_be_bytes());
        4
    } else {
        header[1] = 127;
        header[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    let start = MAX_HEADER - header_len;
    buf[start..MAX_HEADER].copy_from_slice(&header[..header_len]);
    (Bytes::from(buf).slice(start..), header_len)
}

fn push_seq(buf: &mut Vec<u8>, kind: &str, seq: u64) {
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(kind.as_bytes());
    buf.extend_from_slice(b"\",\"seq\":");
    buf.extend_from_slice(seq.to_string().as_bytes());
}

/// An offer's public JSON, as `GET /offers` returns it.
pub fn offer_json(offer: &Offer) -> Bytes {
    // Serialising plain data into memory cannot fail; an empty object would
    // only ever show up if the model grew a non-serialisable field.
    Bytes::from(serde_json::to_vec(offer).unwrap_or_else(|_| b"{}".to_vec()))
}

/// The JSON array of `offers` (each already serialised).
pub fn offer_array<'a>(offers: impl IntoIterator<Item = &'a Bytes>) -> Bytes {
    let mut buf = Vec::new();
    buf.push(b'[');
    for (i, o) in offers.into_iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(o);
    }
    buf.push(b']');
    Bytes::from(buf)
}

/// `{"type":"snapshot","seq":N,"offers":[...]}`
pub fn snapshot(seq: u64, offer_array: &[u8]) -> Message {
    Message::new(OP_TEXT, offer_array.len() + 48, |buf| {
        push_seq(buf, "snapshot", seq);
        buf.extend_from_slice(b",\"offers\":");
        buf.extend_from_slice(offer_array);
        buf.push(b'}');
    })
}

/// `{"type":"upsert","seq":N,"offer":{...}}`
pub fn upsert(seq: u64, offer_json: &[u8]) -> Message {
    Message::new(OP_TEXT, offer_json.len() + 48, |buf| {
        push_seq(buf, "upsert", seq);
        buf.extend_from_slice(b",\"offer\":");
        buf.extend_from_slice(offer_json);
        buf.push(b'}');
    })
}

/// `{"type":"delete","seq":N,"id":"..."}`
pub fn delete(seq: u64, id: &str) -> Message {
    Message::new(OP_TEXT, id.len() + 48, |buf| {
        push_seq(buf, "delete", seq);
        buf.extend_from_slice(b",\"id\":");
        // A string always serialises.
        let _ = serde_json::to_writer(&mut *buf, id);
        buf.push(b'}');
    })
}

/// An empty ping, the same bytes for everyone.
pub fn ping() -> Bytes {
    frame(OP_PING, 0, |_| {})
}

/// The answer to a client's ping, echoing its payload (at most 125 bytes,
/// which the parser has already enforced).
pub fn pong(payload: &[u8]) -> Bytes {
    frame(OP_PONG, payload.len(), |buf| buf.extend_from_slice(payload))
}

/// A close frame with `code` and a reason (cut to what a control frame holds).
pub fn close(code: u16, reason: &str) -> Bytes {
    let mut end = reason.len().min(MAX_CLOSE_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    frame(OP_CLOSE, 2 + end, |buf| {
        buf.extend_from_slice(&code.to_be_bytes());
        buf.extend_from_slice(&reason.as_bytes()[..end]);
    })
}

#[cfg(test)]
mod tests {
    use actix_http::ws::{OpCode, Parser};
    use bytes::BytesMut;
    use serde_json::{json, Value};

    use super::*;

    /// Decode one frame the way a client would; the whole input must be it.
    fn decode(frame: &Bytes) -> (OpCode, Vec<u8>) {
        let mut buf = BytesMut::from(&frame[..]);
        let (fin, op, payload) = Parser::parse(&mut buf, false, usize::MAX)
            .unwrap()
            .expect("a complete frame");
        assert!(fin);
        assert!(buf.is_empty(), "trailing bytes after the frame");
        (op, payload.map(|p| p.to_vec()).unwrap_or_default())
    }

    /// The JSON of a message, read from its plain frame; its compressed
    /// frame must inflate to the same payload.
    fn text(m: &Message) -> Value {
        let (op, payload) = decode(&m.frame(false));
        assert_eq!(op, OpCode::Text);
        let packed = m.frame(true);
        assert_eq!(packed[0], FIN | RSV1 | OP_TEXT);
        // The parser refuses RSV bits it was not told about: clear it.
        let mut bare = packed.to_vec();
        bare[0] &= !RSV1;
        let (_, mut deflated) = decode(&Bytes::from(bare));
        deflated.extend_from_slice(&[0, 0, 0xff, 0xff]);
        let mut inflated = Vec::with_capacity(payload.len() + 16);
        flate2::Decompress::new(false)
            .decompress_vec(&deflated, &mut inflated, flate2::FlushDecompress::Sync)
            .unwrap();
        assert_eq!(inflated, payload);
        serde_json::from_slice(&payload).unwrap()
    }

    #[test]
    fn messages_have_the_promised_shape() {
        let a = Bytes::from_static(br#"{"id":"a"}"#);
        let b = Bytes::from_static(br#"{"id":"b"}"#);
        let list = offer_array([&a, &b]);
        assert_eq!(
            text(&snapshot(7, &list)),
            json!({"type": "snapshot", "seq": 7, "offers": [{"id": "a"}, {"id": "b"}]})
        );
        assert_eq!(
            text(&snapshot(0, &offer_array([]))),
            json!({"type": "snapshot", "seq": 0, "offers": []})
        );
        assert_eq!(
            text(&upsert(8, &a)),
            json!({"type": "upsert", "seq": 8, "offer": {"id": "a"}})
        );
        assert_eq!(
            text(&delete(9, "we\"ird")),
            json!({"type": "delete", "seq": 9, "id": "we\"ird"})
        );
    }

    /// Offers as the store holds them: every optional field set, and none.
    fn offers() -> Vec<Offer> {
        let full = json!({
            "id": "o1", "name": "General", "type": "compute", "description": "d \"q\"",
            "plans": {
                "small": {"name": "plan-small", "planID": "s", "cost": "1.5",
                          "resources": {"cpu": "2", "memory": "4Gi"},
                          "updatedAt": "2026-01-01T00:00:00Z", "updatedBy": "provider-agent"},
                "big": {"name": "plan-big", "cost": "0.000000001", "resources": {"cpu": "500m"}}
            },
            "labels": {"topology.kubernetes.io/region": "eu-west"},
            "clusterID": "p1", "clusterName": "one", "liqo": ["v0", "v1"],
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-02T03:04:05.123456789Z",
            "version": 7
        });
        let bare = json!({
            "id": "o2", "name": "n", "type": "t", "description": "", "plans": {},
            "clusterID": "p2", "clusterName": "two",
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
            "version": 1
        });
        [full, bare]
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect()
    }

    /// Every frame the server writes is a `catalog_client::wire::FeedEvent`
    /// a client reads whole: it parses as a known variant and writes back
    /// the same JSON, so the clients' typed feed and these hand-written
    /// bytes cannot drift apart.
    #[test]
    fn every_message_is_the_clients_feed_event() {
        use catalog_client::wire::FeedEvent;

        let offers = offers();
        let jsons: Vec<Bytes> = offers.iter().map(offer_json).collect();
        let messages = [
            snapshot(0, &offer_array([])),
            snapshot(3, &offer_array(&jsons)),
            upsert(4, &jsons[0]),
            upsert(u64::MAX, &jsons[1]),
            delete(5, "o1"),
            delete(6, "we\"ird/ü"),
        ];
        for m in &messages {
            let sent = text(m);
            let event: FeedEvent = serde_json::from_value(sent.clone()).unwrap();
            assert_ne!(event, FeedEvent::Unknown, "{sent}");
            assert_eq!(serde_json::to_value(&event).unwrap(), sent);
        }
        let event: FeedEvent = serde_json::from_value(text(&messages[2])).unwrap();
        assert_eq!(
            event,
            FeedEvent::Upsert {
                seq: 4,
                offer: Box::new(offers[0].clone())
            }
        );
    }

    #[test]
    fn type_and_seq_come_first() {
        let f = upsert(42, b"{}");
        let (_, payload) = decode(&f.frame(false));
        assert!(payload.starts_with(br#"{"type":"upsert","seq":42,"#));
    }

    #[test]
    fn every_length_encoding_round_trips() {
        for len in [0usize, 1, 125, 126, 127, 65_535, 65_536, 300_000] {
            let body = Bytes::from(vec![b'x'; len]);
            let f = frame(OP_TEXT, len, |buf| buf.extend_from_slice(&body));
            let (op, payload) = decode(&f);
            assert_eq!(op, OpCode::Text);
            assert_eq!(payload.len(), len, "length {len}");
        }
    }

    #[test]
    fn control_frames() {
        assert_eq!(decode(&ping()), (OpCode::Ping, vec![]));
        assert_eq!(decode(&pong(b"abc")), (OpCode::Pong, b"abc".to_vec()));
        let (op, payload) = decode(&close(1008, "too slow"));
        assert_eq!(op, OpCode::Close);
        assert_eq!(&payload[..2], &1008u16.to_be_bytes());
        assert_eq!(&payload[2..], b"too slow");
        let long = "é".repeat(100);
        let (_, payload) = decode(&close(1001, &long));
        assert!(payload.len() <= 125);
        assert!(std::str::from_utf8(&payload[2..]).is_ok());
    }
}
