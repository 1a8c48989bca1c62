//! The messages of the contract change stream `GET /contract-changes`
//! (docs/api.md § "Contract changes"): newline-delimited JSON, one object
//! per line, tagged by `type`. Each carries `seq`, the catalog's store-wide
//! sequence of contract writes: it never goes backwards within a stream, and
//! it survives restarts of the catalog and of its database, so a follower
//! that reconnects with `?since=<the last seq it saw>` gets exactly the
//! changes it missed, without a snapshot.
//!
//! A stream is one party's: a consumer sees its own contracts, a provider
//! those sold by its cluster, an administrator all; a contract of anyone
//! else is never sent.

use serde::{Deserialize, Serialize};

use super::contract::Contract;

/// One line of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ContractEvent {
    /// The caller's contracts as a whole (`?active=true`: only the active
    /// ones), as of `seq`: the first message without `since`, and the
    /// first with a `since` that cannot be resumed (`reason` says why). It
    /// replaces whatever the follower held.
    Snapshot {
        seq: u64,
        contracts: Vec<Contract>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "openapi", schema(nullable = false))]
        reason: Option<String>,
    },
    /// `since` was resumed: the changes after it follow, nothing before.
    Resumed { seq: u64 },
    /// One contract as it now is (it may have ended: `active` false).
    Change {
        seq: u64,
        // Boxed: a contract is large beside the other variants.
        contract: Box<Contract>,
    },
    /// Nothing of the caller's changed up to `seq`: resuming from it is
    /// complete. Sent every `--contract-stream-heartbeat` (15 s).
    Heartbeat { seq: u64 },
}

impl ContractEvent {
    /// The sequence this message brings the follower to.
    pub fn seq(&self) -> u64 {
        match self {
            ContractEvent::Snapshot { seq, .. }
            | ContractEvent::Resumed { seq }
            | ContractEvent::Change { seq, .. }
            | ContractEvent::Heartbeat { seq } => *seq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire form is what docs/api.md shows: `type` in camelCase beside
    /// the fields.
    #[test]
    fn lines_are_tagged_by_type() {
        let line = serde_json::to_string(&ContractEvent::Heartbeat { seq: 7 }).unwrap();
        assert_eq!(line, r#"{"type":"heartbeat","seq":7}"#);
        let back: ContractEvent =
            serde_json::from_str(r#"{"type":"snapshot","seq":3,"contracts":[],"reason":"gone"}"#)
                .unwrap();
        assert_eq!(
            back,
            ContractEvent::Snapshot {
                seq: 3,
                contracts: vec![],
                reason: Some("gone".into())
            }
        );
        assert_eq!(back.seq(), 3);
    }
}
