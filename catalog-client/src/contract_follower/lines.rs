//! The stream's lines as the follower reads them: split at newlines with a
//! bound on their length, each read as a [`Line`] — the shape of
//! [`ContractEvent`](crate::wire::ContractEvent) with the contracts kept as
//! the JSON the catalog sent (a test holds the two shapes together).

use serde::Deserialize;
use serde_json::Value;

/// One line of `GET /contract-changes`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(super) enum Line {
    Snapshot {
        seq: u64,
        contracts: Vec<Value>,
        #[serde(default)]
        reason: Option<String>,
    },
    Resumed {
        seq: u64,
    },
    Change {
        seq: u64,
        contract: Value,
    },
    Heartbeat {
        seq: u64,
    },
    /// A line type this client does not know (a newer catalog's): skipped.
    #[serde(other)]
    Unknown,
}

/// A line longer than the bound: the stream cannot be read further.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a line of the contract stream is longer than {0} bytes")]
pub(super) struct LineTooLong(pub usize);

/// Bytes received, cut into lines of at most `limit` bytes (the newline
/// not counted).
#[derive(Debug)]
pub(super) struct LineBuffer {
    pending: Vec<u8>,
    limit: usize,
}

impl LineBuffer {
    pub fn new(limit: usize) -> Self {
        Self {
            pending: Vec::new(),
            limit,
        }
    }

    /// Add `chunk`; the lines it completes (blank ones skipped).
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, LineTooLong> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.take(&rest[..end])?;
            let line = std::mem::take(&mut self.pending);
            if !line.iter().all(u8::is_ascii_whitespace) {
                lines.push(line);
            }
            rest = &rest[end + 1..];
        }
        self.take(rest)?;
        Ok(lines)
    }

    fn take(&mut self, bytes: &[u8]) -> Result<(), LineTooLong> {
        if self.pending.len() + bytes.len() > self.limit {
            // Nothing of this line is kept: the connection is dropped.
            self.pending.clear();
            return Err(LineTooLong(self.limit));
        }
        self.pending.extend_from_slice(bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Contract, ContractEvent};

    #[test]
    fn lines_are_cut_at_newlines_across_chunks() {
        let mut buffer = LineBuffer::new(8);
        assert_eq!(buffer.push(b"ab").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(
            buffer.push(b"c\n\r\nde\nf").unwrap(),
            [b"abc".to_vec(), b"de".to_vec()]
        );
        assert_eq!(buffer.push(b"\n").unwrap(), [b"f".to_vec()]);
        // Exactly the limit is accepted, one byte more is not, even when it
        // arrives in pieces.
        assert_eq!(buffer.push(b"12345678\n").unwrap(), [b"12345678".to_vec()]);
        assert_eq!(buffer.push(b"12345"), Ok(vec![]));
        assert_eq!(buffer.push(b"6789"), Err(LineTooLong(8)));
    }

    /// Every line the catalog writes (the shared wire type) reads as a
    /// [`Line`] with the same fields: a renamed field fails here.
    #[test]
    fn the_catalogs_lines_read_as_lines() {
        let contract = Contract {
            id: "c1".into(),
            active: true,
            ..Contract::default()
        };
        let as_line = |event: &ContractEvent| -> Line {
            serde_json::from_str(&serde_json::to_string(event).unwrap()).unwrap()
        };
        match as_line(&ContractEvent::Snapshot {
            seq: 3,
            contracts: vec![contract.clone()],
            reason: Some("too old".into()),
        }) {
            Line::Snapshot {
                seq: 3,
                contracts,
                reason: Some(reason),
            } => {
                assert_eq!(reason, "too old");
                let back: Contract = serde_json::from_value(contracts[0].clone()).unwrap();
                assert_eq!(back, contract);
            }
            other => panic!("{other:?}"),
        }
        match as_line(&ContractEvent::Change {
            seq: 4,
            contract: Box::new(contract.clone()),
        }) {
            Line::Change {
                seq: 4,
                contract: c,
            } => assert_eq!(c["id"], "c1"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            as_line(&ContractEvent::Resumed { seq: 5 }),
            Line::Resumed { seq: 5 }
        ));
        assert!(matches!(
            as_line(&ContractEvent::Heartbeat { seq: 6 }),
            Line::Heartbeat { seq: 6 }
        ));
        let unknown: Line = serde_json::from_str(r#"{"type":"later","seq":1}"#).unwrap();
        assert!(matches!(unknown, Line::Unknown));
    }
}
