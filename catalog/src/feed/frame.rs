//! Reading a feed client's frames (RFC 6455 §5), without ever buffering
//! more than one frame header plus the message limit.
//!
//! actix's frame parser waits for a whole frame before it looks at the
//! size, so a client announcing a huge frame could make the catalog buffer
//! everything it sends. This reader decides from the header alone: a frame
//! that would take its message over the limit is refused (1009) before any
//! of its payload is kept, and every other rule a server must enforce is
//! checked as the frame arrives:
//!
//! - client frames must be masked; RSV bits only with an extension that
//!   defines them (RSV1 on the first frame of a data message, with
//!   permessage-deflate); known opcodes only: **1002**;
//! - control frames are never fragmented and carry at most 125 bytes;
//!   a continuation needs a message to continue and a new data message
//!   must wait for the previous one to end: **1002**;
//! - a close payload is empty or a valid code plus a UTF-8 reason: **1002**
//!   (**1007** for the reason);
//! - text messages must be UTF-8, checked fragment by fragment: **1007**
//!   (compressed messages are not inflated, so not checked: the feed
//!   ignores client data anyway).

use bytes::{Buf, Bytes, BytesMut};

use super::hub::close_code;

/// Most bytes a control frame may carry (RFC 6455 §5.5).
const MAX_CONTROL: usize = 125;
/// Invalid data in a message (RFC 6455 §7.4.1): not UTF-8.
pub(crate) const INVALID_DATA: u16 = 1007;

/// A whole frame from the client.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    Ping(Bytes),
    Pong,
    /// The client's close code, if it sent one.
    Close(Option<u16>),
    /// A data frame (ignored by the feed).
    Data,
}

/// Why the connection must be closed, and the code to close it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub code: u16,
    pub reason: String,
}

impl Violation {
    fn protocol(reason: impl Into<String>) -> Self {
        Violation {
            code: close_code::PROTOCOL,
            reason: reason.into(),
        }
    }

    fn invalid_data(reason: impl Into<String>) -> Self {
        Violation {
            code: INVALID_DATA,
            reason: reason.into(),
        }
    }
}

/// The data message a client is in the middle of sending.
#[derive(Debug)]
struct Message {
    /// Text, uncompressed: its bytes must be UTF-8.
    check_utf8: bool,
    /// Payload bytes received so far.
    len: usize,
}

/// Parses one client's frames; see the module docs.
#[derive(Debug)]
pub(crate) struct FrameReader {
    max_message: usize,
    deflate: bool,
    message: Option<Message>,
    /// The end of a text fragment that stops inside a UTF-8 sequence.
    utf8_tail: Vec<u8>,
}

impl FrameReader {
    /// A reader for messages of at most `max_message` bytes; `deflate` when
    /// permessage-deflate was negotiated (RSV1 marks compressed messages).
    pub fn new(max_message: usize, deflate: bool) -> Self {
        FrameReader {
            max_message,
            deflate,
            message: None,
            utf8_tail: Vec::new(),
        }
    }

    /// Take the next whole frame from the front of `buf`; `Ok(None)` while
    /// it is incomplete (only then is anything left in `buf`, and never
    /// more than one header plus the message limit).
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, Violation> {
        if buf.len() < 2 {
            return Ok(None);
        }
        let (b0, b1) = (buf[0], buf[1]);
        let fin = b0 & 0x80 != 0;
        let rsv = b0 & 0x70;
        let opcode = b0 & 0x0f;
        let control = opcode >= 0x8;
        if !matches!(opcode, 0x0 | 0x1 | 0x2 | 0x8 | 0x9 | 0xA) {
            return Err(Violation::protocol(format!("unknown opcode {opcode:#x}")));
        }
        let compressed = rsv == 0x40 && self.deflate && matches!(opcode, 0x1 | 0x2);
        if rsv != 0 && !compressed {
            return Err(Violation::protocol(
                "reserved bits set that no negotiated extension defines",
            ));
        }
        if b1 & 0x80 == 0 {
            return Err(Violation::protocol("client frames must be masked"));
        }
        if control && !fin {
            return Err(Violation::protocol("control frames must not be fragmented"));
        }
        let len7 = usize::from(b1 & 0x7f);
        if control && len7 > MAX_CONTROL {
            return Err(Violation::protocol(format!(
                "control frames carry at most {MAX_CONTROL} bytes"
            )));
        }
        match (opcode, &self.message) {
            (0x0, None) => {
                return Err(Violation::protocol(
                    "a continuation frame with no message to continue",
                ))
            }
            (0x1 | 0x2, Some(_)) => {
                return Err(Violation::protocol(
                    "a new data message before the previous one ended",
                ))
            }
            _ => {}
        }
        let (len, header) = match len7 {
            126 => {
                if buf.len() < 4 {
                    return Ok(None);
                }
                (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4)
            }
            127 => {
                if buf.len() < 10 {
                    return Ok(None);
                }
                let mut n = [0u8; 8];
                n.copy_from_slice(&buf[2..10]);
                let n = u64::from_be_bytes(n);
                if n >> 63 != 0 {
                    return Err(Violation::protocol(
                        "the most significant bit of a frame length must be 0",
                    ));
                }
                (n, 10)
            }
            n => (n as u64, 2),
        };
        let so_far = self.message.as_ref().map_or(0, |m| m.len);
        if !control && (so_far as u64).saturating_add(len) > self.max_message as u64 {
            return Err(Violation {
                code: close_code::TOO_BIG,
                reason: format!(
                    "the feed accepts client messages of at most {} bytes",
                    self.max_message
                ),
            });
        }
        // Bounded: a control frame's 125 bytes, or the message limit.
        let len = len as usize;
        if buf.len() < header + 4 + len {
            return Ok(None);
        }
        let mut mask = [0u8; 4];
        mask.copy_from_slice(&buf[header..header + 4]);
        buf.advance(header + 4);
        let mut payload = buf.split_to(len);
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= mask[i % 4];
        }
        if control {
            return match opcode {
                0x9 => Ok(Some(Frame::Ping(payload.freeze()))),
                0xA => Ok(Some(Frame::Pong)),
                _ => close_payload(&payload).map(|code| Some(Frame::Close(code))),
            };
        }
        let message = self.message.get_or_insert(Message {
            check_utf8: opcode == 0x1 && !compressed,
            len: 0,
        });
        message.len += len;
        if message.check_utf8 {
            self.utf8_tail.extend_from_slice(&payload);
            match std::str::from_utf8(&self.utf8_tail) {
                Ok(_) => self.utf8_tail.clear(),
                Err(e) if e.error_len().is_none() => {
                    // A sequence cut by the end of the fragment: keep it.
                    self.utf8_tail.drain(..e.valid_up_to());
                }
                Err(_) => return Err(Violation::invalid_data("text messages must be UTF-8")),
            }
        }
        if fin {
            self.message = None;
            if !std::mem::take(&mut self.utf8_tail).is_empty() {
                return Err(Violation::invalid_data("text messages must be UTF-8"));
            }
        }
        Ok(Some(Frame::Data))
    }
}

/// The code of a close frame's payload (RFC 6455 §5.5.1, §7.4).
fn close_payload(payload: &[u8]) -> Result<Option<u16>, Violation> {
    match payload {
        [] => Ok(None),
        [_] => Err(Violation::protocol(
            "a close payload is empty or starts with a two-byte code",
        )),
        [a, b, reason @ ..] => {
            let code = u16::from_be_bytes([*a, *b]);
            if !matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999) {
                return Err(Violation::protocol(format!(
                    "close code {code} may not be sent"
                )));
            }
            if std::str::from_utf8(reason).is_err() {
                return Err(Violation::invalid_data("the close reason must be UTF-8"));
            }
            Ok(Some(code))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A masked client frame: first byte, payload.
    fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
        encode(b0, payload, [1, 2, 3, 4])
    }

    /// A client frame masked with `mask`: first byte, payload.
    pub(super) fn encode(b0: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
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

    fn read(reader: &mut FrameReader, bytes: &[u8]) -> Result<Vec<Frame>, Violation> {
        let mut buf = BytesMut::from(bytes);
        let mut out = Vec::new();
        while let Some(f) = reader.next(&mut buf)? {
            out.push(f);
        }
        Ok(out)
    }

    fn code(bytes: &[u8]) -> u16 {
        read(&mut FrameReader::new(4096, false), bytes)
            .unwrap_err()
            .code
    }

    #[test]
    fn reads_control_and_data_frames() {
        let mut r = FrameReader::new(4096, false);
        let mut bytes = frame(0x89, b"hi");
        bytes.extend(frame(0x8A, b""));
        bytes.extend(frame(0x01, "h\u{e9}".as_bytes()));
        bytes.extend(frame(0x80, "llo".as_bytes()));
        bytes.extend(frame(0x88, &[0x03, 0xe8]));
        assert_eq!(
            read(&mut r, &bytes).unwrap(),
            vec![
                Frame::Ping(Bytes::from_static(b"hi")),
                Frame::Pong,
                Frame::Data,
                Frame::Data,
                Frame::Close(Some(1000)),
            ]
        );
    }

    #[test]
    fn refuses_a_huge_frame_from_its_header_alone() {
        let mut r = FrameReader::new(4096, false);
        let mut buf = BytesMut::from(&[0x82, 0xFF, 0, 0, 0x01, 0, 0, 0, 0, 0][..]);
        assert_eq!(r.next(&mut buf).unwrap_err().code, close_code::TOO_BIG);
        // The whole message counts, not each fragment.
        let mut r = FrameReader::new(4096, false);
        let mut bytes = frame(0x02, &[0; 3000]);
        bytes.extend(frame(0x80, &[0; 3000]));
        assert_eq!(read(&mut r, &bytes).unwrap_err().code, close_code::TOO_BIG);
    }

    #[test]
    fn waits_for_incomplete_frames() {
        let mut r = FrameReader::new(4096, false);
        let bytes = frame(0x89, b"ping");
        let mut buf = BytesMut::from(&bytes[..bytes.len() - 1]);
        assert_eq!(r.next(&mut buf).unwrap(), None);
        buf.extend_from_slice(&bytes[bytes.len() - 1..]);
        assert!(matches!(r.next(&mut buf).unwrap(), Some(Frame::Ping(_))));
        assert!(buf.is_empty());
    }

    #[test]
    fn protocol_errors() {
        assert_eq!(code(&frame(0x09, b"")), 1002, "fragmented ping");
        assert_eq!(code(&frame(0x80, b"x")), 1002, "continuation with no start");
        let mut two = frame(0x01, b"a");
        two.extend(frame(0x81, b"b"));
        assert_eq!(code(&two), 1002, "new message inside another");
        assert_eq!(code(&[0x89, 0x00]), 1002, "unmasked");
        assert_eq!(code(&frame(0xC1, b"x")), 1002, "RSV1 without deflate");
        assert_eq!(code(&frame(0xA1, b"x")), 1002, "RSV2");
        assert_eq!(code(&frame(0x89, &[0; 126])), 1002, "control over 125");
        assert_eq!(code(&frame(0x83, b"")), 1002, "reserved opcode");
        assert_eq!(code(&frame(0x88, &[3])), 1002, "one-byte close");
        assert_eq!(code(&frame(0x88, &[0x03, 0xed])), 1002, "close code 1005");
        assert_eq!(code(&frame(0x81, &[0xff, 0xfe])), 1007, "invalid UTF-8");
        assert_eq!(code(&frame(0x81, &[0xe2, 0x82])), 1007, "truncated UTF-8");
        assert_eq!(
            code(&frame(0x88, &[0x03, 0xe8, 0xff])),
            1007,
            "close reason not UTF-8"
        );
    }

    #[test]
    fn utf8_may_be_split_across_fragments() {
        let mut r = FrameReader::new(4096, false);
        let euro = "\u{20ac}".as_bytes();
        let mut bytes = frame(0x01, &euro[..1]);
        bytes.extend(frame(0x80, &euro[1..]));
        assert_eq!(
            read(&mut r, &bytes).unwrap(),
            vec![Frame::Data, Frame::Data]
        );
    }

    #[test]
    fn compressed_messages_need_deflate() {
        let mut r = FrameReader::new(4096, true);
        let bytes = frame(0xC1, &[0xff, 0x00]);
        assert_eq!(read(&mut r, &bytes).unwrap(), vec![Frame::Data]);
        let mut r = FrameReader::new(4096, true);
        assert_eq!(read(&mut r, &frame(0xC9, b"")).unwrap_err().code, 1002);
    }
}

/// Property tests with hostile generators: any bytes in any chunking are
/// answered without a panic and without holding more than one header plus
/// the limit; well-formed traffic reads the same however it is split; each
/// kind of violation gets its RFC 6455 close code.
#[cfg(test)]
mod props {
    use super::tests::encode;
    use super::*;
    use proptest::prelude::*;

    const LIMIT: usize = 512;
    /// Longest header: 2 bytes, an 8-byte length, a 4-byte mask.
    const MAX_HEADER: usize = 14;

    /// Feed `bytes` in pieces of the given sizes, draining frames after
    /// each; checks the buffering bound whenever the reader waits.
    fn feed(
        reader: &mut FrameReader,
        bytes: &[u8],
        pieces: &[usize],
    ) -> Result<Vec<Frame>, Violation> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut rest = bytes;
        let mut sizes = pieces.iter().cycle();
        while !rest.is_empty() {
            let n = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
            buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            while let Some(f) = reader.next(&mut buf)? {
                out.push(f);
            }
            assert!(
                buf.len() < MAX_HEADER + LIMIT,
                "buffered {} bytes while waiting",
                buf.len()
            );
        }
        Ok(out)
    }

    /// A well-formed client message: its frames, and what reading yields.
    #[derive(Debug, Clone)]
    enum Piece {
        /// A text message of UTF-8 split into fragments at any byte.
        Text(String, Vec<usize>),
        Binary(Vec<u8>, Vec<usize>),
        Ping(Vec<u8>),
        Pong,
    }

    fn piece() -> impl Strategy<Value = Piece> {
        prop_oneof![
            (".{0,60}", prop::collection::vec(0usize..40, 0..4))
                .prop_map(|(s, cuts)| Piece::Text(s, cuts)),
            (
                prop::collection::vec(any::<u8>(), 0..200),
                prop::collection::vec(0usize..200, 0..4)
            )
                .prop_map(|(b, cuts)| Piece::Binary(b, cuts)),
            prop::collection::vec(any::<u8>(), 0..=125).prop_map(Piece::Ping),
            Just(Piece::Pong),
        ]
    }

    /// Split `payload` at `cuts` into data frames of `opcode`.
    fn fragments(opcode: u8, payload: &[u8], cuts: &[usize], mask: [u8; 4]) -> (Vec<u8>, usize) {
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (payload.len() + 1)).collect();
        at.sort_unstable();
        at.dedup();
        let mut bounds = vec![0];
        bounds.extend(at.into_iter().filter(|&c| c > 0 && c < payload.len()));
        bounds.push(payload.len());
        let mut out = Vec::new();
        let n = bounds.len() - 1;
        for i in 0..n {
            let op = if i == 0 { opcode } else { 0x0 };
            let fin = if i == n - 1 { 0x80 } else { 0 };
            out.extend(encode(fin | op, &payload[bounds[i]..bounds[i + 1]], mask));
        }
        (out, n)
    }

    fn traffic(pieces: &[Piece], mask: [u8; 4]) -> (Vec<u8>, Vec<Frame>) {
        let mut bytes = Vec::new();
        let mut frames = Vec::new();
        for p in pieces {
            match p {
                Piece::Text(s, cuts) => {
                    let (b, n) = fragments(0x1, s.as_bytes(), cuts, mask);
                    bytes.extend(b);
                    frames.extend((0..n).map(|_| Frame::Data));
                }
                Piece::Binary(d, cuts) => {
                    let (b, n) = fragments(0x2, d, cuts, mask);
                    bytes.extend(b);
                    frames.extend((0..n).map(|_| Frame::Data));
                }
                Piece::Ping(d) => {
                    bytes.extend(encode(0x89, d, mask));
                    frames.push(Frame::Ping(Bytes::copy_from_slice(d)));
                }
                Piece::Pong => {
                    bytes.extend(encode(0x8A, b"", mask));
                    frames.push(Frame::Pong);
                }
            }
        }
        (bytes, frames)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Any bytes, any chunking: a frame, a wait or a violation with a
        /// close code RFC 6455 defines — never a panic, never more
        /// buffered than one header plus the limit.
        #[test]
        fn any_bytes_any_chunking(
            bytes in prop::collection::vec(any::<u8>(), 0..2048),
            pieces in prop::collection::vec(1usize..300, 1..8),
            deflate in any::<bool>(),
        ) {
            let mut reader = FrameReader::new(LIMIT, deflate);
            if let Err(v) = feed(&mut reader, &bytes, &pieces) {
                prop_assert!(matches!(v.code, 1002 | 1007 | 1009), "{v:?}");
                prop_assert!(!v.reason.is_empty());
            }
        }

        /// Well-formed traffic (fragmented text and binary, pings and pongs
        /// between messages) reads to the same frames however it is split.
        #[test]
        fn well_formed_traffic_reads_the_same_in_any_chunking(
            pieces in prop::collection::vec(piece(), 0..12),
            chunks in prop::collection::vec(1usize..64, 1..8),
            mask in any::<[u8; 4]>(),
        ) {
            let (bytes, expected) = traffic(&pieces, mask);
            let mut reader = FrameReader::new(LIMIT, false);
            let got = feed(&mut reader, &bytes, &chunks)
                .map_err(|v| TestCaseError::fail(format!("{v:?}")))?;
            prop_assert_eq!(got, expected);
        }

        /// A header announcing more than the limit is refused (1009) from
        /// the header alone, before any payload arrives.
        #[test]
        fn oversized_frames_are_refused_from_the_header(
            len in (LIMIT as u64 + 1)..(1u64 << 62),
            opcode in prop_oneof![Just(0x1u8), Just(0x2u8)],
            fin in any::<bool>(),
        ) {
            let mut header = vec![if fin { 0x80 } else { 0 } | opcode];
            if len <= 0xffff {
                header.push(0x80 | 126);
                header.extend_from_slice(&(len as u16).to_be_bytes());
            } else {
                header.push(0x80 | 127);
                header.extend_from_slice(&len.to_be_bytes());
            }
            let mut reader = FrameReader::new(LIMIT, false);
            let mut buf = BytesMut::from(&header[..]);
            prop_assert_eq!(reader.next(&mut buf).map_err(|v| v.code), Err(close_code::TOO_BIG));
        }

        /// Frames a client must mask, sent unmasked: 1002.
        #[test]
        fn unmasked_frames_are_protocol_errors(
            payload in prop::collection::vec(any::<u8>(), 0..100),
            b0 in prop_oneof![Just(0x81u8), Just(0x82u8), Just(0x89u8), Just(0x8Au8)],
        ) {
            let mut bytes = encode(b0, &payload, [0; 4]);
            bytes[1] &= 0x7f;
            bytes.drain(bytes.len() - payload.len() - 4..bytes.len() - payload.len());
            let mut reader = FrameReader::new(LIMIT, false);
            prop_assert_eq!(feed(&mut reader, &bytes, &[bytes.len()]).map_err(|v| v.code), Err(1002));
        }

        /// A text message that is not UTF-8, however fragmented: 1007.
        #[test]
        fn invalid_utf8_text_is_1007(
            prefix in ".{0,20}",
            bad in prop_oneof![
                Just(vec![0xffu8]),
                Just(vec![0xc0, 0x80]),
                Just(vec![0xed, 0xa0, 0x80]),
                Just(vec![0xe2, 0x82]),
            ],
            cuts in prop::collection::vec(0usize..30, 0..4),
            mask in any::<[u8; 4]>(),
        ) {
            let mut payload = prefix.into_bytes();
            payload.extend(bad);
            let (bytes, _) = fragments(0x1, &payload, &cuts, mask);
            let mut reader = FrameReader::new(LIMIT, false);
            prop_assert_eq!(feed(&mut reader, &bytes, &[7]).map_err(|v| v.code), Err(1007));
        }
    }
}
