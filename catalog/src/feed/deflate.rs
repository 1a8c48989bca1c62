//! Per-message compression (RFC 7692 `permessage-deflate`), negotiated per
//! subscriber and done once per message for all of them.
//!
//! The feed always answers with `server_no_context_takeover` (and asks the
//! client for `client_no_context_takeover`): each message is compressed on
//! its own, so one compressed copy serves every compressing subscriber,
//! exactly like the plain bytes serve the others. A list of similar offers
//! shrinks several times, which is most of the cost of fanning it out.

use actix_web::http::header::{HeaderMap, SEC_WEBSOCKET_EXTENSIONS};
use std::io::Write;

/// The extension answer the feed sends when it accepts an offer.
pub const ACCEPTED: &str =
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover";

/// Whether the client offers `permessage-deflate` with parameters the feed
/// can honour (it compresses with a 15-bit window, so a smaller
/// `server_max_window_bits` is declined; the client's own window does not
/// matter, the feed takes no data messages).
pub fn offered(headers: &HeaderMap) -> bool {
    headers
        .get_all(SEC_WEBSOCKET_EXTENSIONS)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(acceptable)
}

fn acceptable(offer: &str) -> bool {
    let mut parts = offer.split(';').map(str::trim);
    if parts.next() != Some("permessage-deflate") {
        return false;
    }
    let mut seen = Vec::new();
    for param in parts {
        let (name, value) = match param.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (param, None),
        };
        if seen.contains(&name) {
            return false;
        }
        seen.push(name);
        let ok = match name {
            "server_no_context_takeover" | "client_no_context_takeover" => value.is_none(),
            "client_max_window_bits" => value.is_none_or(window_bits),
            "server_max_window_bits" => value == Some("15"),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

fn window_bits(v: &str) -> bool {
    v.parse::<u8>().is_ok_and(|b| (8..=15).contains(&b))
}

/// Compress one message payload: DEFLATE with a sync flush, minus the
/// trailing `00 00 ff ff` the receiver adds back (RFC 7692 §7.2.1).
pub fn compress(payload: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::DeflateEncoder::new(
        Vec::with_capacity(payload.len() / 4 + 64),
        flate2::Compression::default(),
    );
    // Writing into memory cannot fail.
    let _ = enc.write_all(payload);
    let _ = enc.flush();
    let mut out = std::mem::take(enc.get_mut());
    if out.ends_with(&[0, 0, 0xff, 0xff]) {
        out.truncate(out.len() - 4);
    }
    out
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::HeaderValue;

    use super::*;

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(SEC_WEBSOCKET_EXTENSIONS, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn accepts_what_browsers_offer() {
        assert!(offered(&headers(&[
            "permessage-deflate; client_max_window_bits"
        ])));
        assert!(offered(&headers(&["permessage-deflate"])));
        assert!(offered(&headers(&[
            "x-webkit-deflate-frame, permessage-deflate; server_no_context_takeover; client_max_window_bits=10"
        ])));
        assert!(offered(&headers(&[
            "foo",
            "permessage-deflate; server_max_window_bits=15"
        ])));
    }

    #[test]
    fn declines_what_it_cannot_honour() {
        assert!(!offered(&headers(&[])));
        assert!(!offered(&headers(&[
            "permessage-deflate; server_max_window_bits=10"
        ])));
        assert!(!offered(&headers(&[
            "permessage-deflate; client_max_window_bits=99"
        ])));
        assert!(!offered(&headers(&["permessage-deflate; mystery"])));
        assert!(!offered(&headers(&[
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover"
        ])));
    }

    #[test]
    fn compressed_messages_inflate_back() {
        let payload = br#"{"type":"snapshot","seq":1,"offers":[]}"#.repeat(50);
        let c = compress(&payload);
        assert!(c.len() < payload.len() / 5, "{} bytes", c.len());
        let mut input = c.clone();
        input.extend_from_slice(&[0, 0, 0xff, 0xff]);
        let mut d = flate2::Decompress::new(false);
        let mut out = Vec::with_capacity(payload.len() + 16);
        d.decompress_vec(&input, &mut out, flate2::FlushDecompress::Sync)
            .unwrap();
        assert_eq!(out, payload);
    }
}
